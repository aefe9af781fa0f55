"""The one recording pipeline (redact, delta-encode, parse, seal, append) and the redactor. One
façade, its names pinned by tests/cassettes/test_recording_surface.py, over:

- ``_pipeline``: the :class:`CassetteWriter` every recorded round trip goes through;
- ``_redactor``: the :class:`Redactor` (headers, URLs, whole exchanges), over the bodies'
  parts (``_bodies``, the credentials bodies teach: ``_learner``), the scrubber by value learned
  and by pattern (``_scrubber``) and the stream texts joined (``_streams``);
- ``_credentials``: which names and values are a credential's; ``_detector``: the secret
  detector ``looptap verify`` uses too, over gitleaks' rules (``_gitleaks_rules``, generated);
- ``_websocket``: a WebSocket session read as turns;
- ``_about``: what a recording's header says of its agent (its name, the command run).

Names are loaded on first use (PEP 562): ``show`` needs only ``REDACTED``, the recorder's proxy
process only the redactor. With the names imported plainly, importing the recorder's addon in the
proxy process took 1.45x the CPU time (0.49 s against 0.34 s: the pipeline brings pydantic and the
store; whole-process medians of 6 interleaved pairs, 2026-11-27).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cassettes.lazy import on_first_use

_MODULES = {
    "_about": "AGENT_ENV agent_name program_at run_about valid_agent",
    "_pipeline": "CassetteWriter",
    "_redactor": "Redactor",
    "_credentials": (
        "EMBEDDED_MAX REDACTED SECRET_HEADERS credential_values cut_credential looks_secret "
        "secret_name"
    ),
    "_detector": "WINDOW default_detector",
    "_scrubber": "detector",
    "_streams": "stream_texts",
    "_websocket": "WsSession",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from cassettes.recording._about import AGENT_ENV, agent_name, program_at, run_about, valid_agent
    from cassettes.recording._credentials import (
        EMBEDDED_MAX,
        REDACTED,
        SECRET_HEADERS,
        credential_values,
        cut_credential,
        looks_secret,
        secret_name,
    )
    from cassettes.recording._detector import WINDOW, default_detector
    from cassettes.recording._pipeline import CassetteWriter
    from cassettes.recording._redactor import Redactor
    from cassettes.recording._scrubber import detector
    from cassettes.recording._streams import stream_texts
    from cassettes.recording._websocket import WsSession


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "AGENT_ENV",
    "EMBEDDED_MAX",
    "REDACTED",
    "SECRET_HEADERS",
    "WINDOW",
    "CassetteWriter",
    "Redactor",
    "WsSession",
    "agent_name",
    "credential_values",
    "cut_credential",
    "default_detector",
    "detector",
    "looks_secret",
    "program_at",
    "run_about",
    "secret_name",
    "stream_texts",
    "valid_agent",
]
