"""Credentials a body carries where no JSON walk of the redaction meets them by name: a form's
fields, and a credential an endpoint mints (:class:`BodyLearner`, a part of the
:class:`~cassettes.recording._redactor.Redactor`'s pipeline beside
:mod:`cassettes.recording._bodies`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from .. import bounds
from ._bodies import JsonRedactor
from ._credentials import looks_secret, secret_name
from ._scrubber import Secrets

__all__ = ["BodyLearner"]

#: A multipart form's field: its name and (the first 4 KiB of) its value.
_MULTIPART_FIELD = re.compile(
    rb'name="([^"\r\n]{1,200})"[^\n]*\n(?:[^\r\n]+\r?\n){0,8}\r?\n(.{0,4096}?)\r?\n--', re.S
)


class BodyLearner:
    """Learns the credentials a body carries where no JSON walk of the redaction meets them by
    name: a form's fields, a response's (a token it returns), a credential an endpoint mints. The
    scrub of the bytes then masks them, here and wherever they come back."""

    def __init__(self, secrets: Secrets, json: JsonRedactor) -> None:
        self._secrets = secrets
        self._json = json

    def form(self, body: bytes, ctype: str) -> None:
        """Learn the credential fields of a form-urlencoded or multipart body (``client_secret``,
        ``refresh_token``, ``api_key``), so that scrubbing the bytes masks them."""
        fields: list[tuple[str, str]] = []
        if "x-www-form-urlencoded" in ctype:
            fields = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        elif "multipart/" in ctype:
            fields = [
                (name.decode("utf-8", "replace"), value.decode("utf-8", "replace").strip())
                for name, value in _MULTIPART_FIELD.findall(body)
            ]
        for name, value in fields:
            kind = secret_name(name, "form")
            if value and (kind == "always" or (kind and looks_secret(value))):
                self._secrets.learn(value)

    def minted(self, url: str, chunks: list[tuple[float | None, bytes]]) -> None:
        """A credential minted by an endpoint named for one (``POST /v1/realtime/client_secrets``
        → ``{"value": "ek_…"}``, Gemini's ``auth_tokens`` → ``{"name": "auth_tokens/…"}``,
        ``…/api_keys``, ``…/tokens``): its top-level ``value`` / ``token`` / ``key`` / ``secret`` /
        ``name`` is learned when it looks like one, so the scrub masks it here and everywhere
        after (the client then sends it back)."""
        try:
            segments = [seg for seg in urlsplit(url).path.split("/") if seg]
        except ValueError:
            return
        if not any(
            secret_name(seg) is not None or seg.lower() in ("tokens", "ephemeral_tokens")
            for seg in segments[-3:]
        ):
            return
        doc = _json_object(b"".join(c for _, c in chunks))
        for k in ("value", "token", "key", "secret", "name", "client_secret"):
            v = doc.get(k)
            if isinstance(v, dict):
                v = v.get("value")
            if isinstance(v, str):
                for piece in {v, v.rsplit("/", 1)[-1]}:
                    if looks_secret(piece):
                        self._secrets.learn(piece)


def _json_object(data: bytes) -> dict[str, Any]:
    """A body of at most 1 MiB that is one JSON object, parsed; else ``{}``."""
    if not data.lstrip().startswith(b"{") or len(data) > (1 << 20):
        return {}
    try:
        doc = bounds.loads(data)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}
