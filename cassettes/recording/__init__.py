"""The one recording pipeline (redact, delta-encode, parse, seal, append) and the redactor.

- ``pipeline``: the :class:`~cassettes.recording.pipeline.CassetteWriter` every recorded round
  trip goes through (it brings pydantic, the providers and the store: imported by name, never by
  this package);
- ``websocket``: :class:`~cassettes.recording.websocket.WsSession`, a WebSocket session read as
  turns (the recorder's addon imports it at a session's first upgrade);
- here, imported plainly and pinned by tests/cassettes/test_recording_surface.py: the
  :class:`Redactor` (``_redactor``: headers, URLs, whole exchanges), over the bodies' parts
  (``_bodies``, the credentials bodies teach: ``_learner``), the scrubber by value learned and by
  pattern (``_scrubber``) and the stream texts joined (``_streams``); what is made from a
  cassette sealed again as it is written (``_sealing``); which names and values are a
  credential's (``_credentials``); the secret detector ``looptap verify`` uses too, over
  gitleaks' rules (``_detector``; the rules themselves, ``_gitleaks_rules``, load at the first
  scan); what a recording's header says of its agent (``_about``).

No lazy table: what this package imports is what the recorder's proxy process needs (the
redactor); ``show`` does not load it (the placeholder the analysis knows, ``REDACTED``, is
:mod:`cassettes.wire`'s, handed on here).
"""

from __future__ import annotations

from ._about import AGENT_ENV, agent_name, program_at, run_about, valid_agent
from ._credentials import (
    EMBEDDED_MAX,
    REDACTED,
    SECRET_HEADERS,
    URL_TOKEN,
    credential_values,
    cut_credential,
    header_secret,
    looks_secret,
    path_secrets,
    secret_name,
)
from ._cuts import cut_texts
from ._detector import B64_TOKEN, WINDOW, b64_text, default_detector
from ._redactor import Redactor
from ._scrubber import detector
from ._sealing import Sealing, scrubbed, seal, sealed_json
from ._streams import stream_texts

__all__ = [
    "AGENT_ENV",
    "B64_TOKEN",
    "EMBEDDED_MAX",
    "REDACTED",
    "SECRET_HEADERS",
    "URL_TOKEN",
    "WINDOW",
    "Redactor",
    "Sealing",
    "agent_name",
    "b64_text",
    "credential_values",
    "cut_credential",
    "cut_texts",
    "default_detector",
    "detector",
    "header_secret",
    "looks_secret",
    "path_secrets",
    "program_at",
    "run_about",
    "scrubbed",
    "seal",
    "sealed_json",
    "secret_name",
    "stream_texts",
    "valid_agent",
]
