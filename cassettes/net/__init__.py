"""looptap's one network layer; it knows no cassette.

- serving: an asyncio TCP server on a thread of its own or in a loop (:class:`BackgroundServer`),
  each request read by an h11 server connection with looptap's bounds (body size, target, header
  and trailer count) and its :class:`Watchdog` (idle, slow head, stalled body):
  :func:`read_request`, :func:`refuse`. The replay server and the test suite's upstreams serve
  with it.
- outgoing: every HTTP/1.1 message built by h11 (:class:`Answer`, :class:`Ask`, a header that
  cannot be sent dropped and said), and every request looptap sends upstream
  (:class:`Upstream`: the fork's live relay, ``compare``, ``why``).
- WebSocket framing by wsproto (:func:`frame`, :class:`MessageReader`), and a live session's
  client side (:class:`LiveSocket`).

Names load on first use (PEP 562): ``free_port`` costs the recorder's launcher no HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BackgroundServer": "_serve",
    "Handler": "_serve",
    "free_port": "_serve",
    "HOP_BY_HOP": "_requests",
    "MAX_BODY": "_requests",
    "MAX_HEADERS": "_requests",
    "MAX_TARGET": "_requests",
    "MAX_TRAILERS": "_requests",
    "BadRequest": "_requests",
    "Request": "_requests",
    "Watchdog": "_requests",
    "read_request": "_requests",
    "refuse": "_requests",
    "CREDENTIAL_HEADERS": "_messages",
    "SENT_FROM_RECORDING": "_messages",
    "Answer": "_messages",
    "Ask": "_messages",
    "Unsendable": "_messages",
    "header_problem": "_messages",
    "recorded_request_headers": "_messages",
    "said_name": "_messages",
    "sendable": "_messages",
    "CLOSE": "_ws",
    "FRAME_COST": "_ws",
    "MAX_MESSAGE": "_ws",
    "PING": "_ws",
    "PONG": "_ws",
    "TEXT": "_ws",
    "MessageReader": "_ws",
    "WsProtocolError": "_ws",
    "accept_key": "_ws",
    "frame": "_ws",
    "CONNECT_TIMEOUT": "_client",
    "READ_TIMEOUT": "_client",
    "Trust": "_client",
    "Upstream": "_client",
    "UpstreamError": "_client",
    "UpstreamResponse": "_client",
    "tls_context": "_client",
    "LiveSocket": "_wsclient",
}

if TYPE_CHECKING:
    from cassettes.net._client import (
        CONNECT_TIMEOUT,
        READ_TIMEOUT,
        Trust,
        Upstream,
        UpstreamError,
        UpstreamResponse,
        tls_context,
    )
    from cassettes.net._messages import (
        CREDENTIAL_HEADERS,
        SENT_FROM_RECORDING,
        Answer,
        Ask,
        Unsendable,
        header_problem,
        recorded_request_headers,
        said_name,
        sendable,
    )
    from cassettes.net._requests import (
        HOP_BY_HOP,
        MAX_BODY,
        MAX_HEADERS,
        MAX_TARGET,
        MAX_TRAILERS,
        BadRequest,
        Request,
        Watchdog,
        read_request,
        refuse,
    )
    from cassettes.net._serve import BackgroundServer, Handler, free_port
    from cassettes.net._ws import (
        CLOSE,
        FRAME_COST,
        MAX_MESSAGE,
        PING,
        PONG,
        TEXT,
        MessageReader,
        WsProtocolError,
        accept_key,
        frame,
    )
    from cassettes.net._wsclient import LiveSocket


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cassettes.net' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"cassettes.net.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CLOSE",
    "CONNECT_TIMEOUT",
    "CREDENTIAL_HEADERS",
    "FRAME_COST",
    "HOP_BY_HOP",
    "MAX_BODY",
    "MAX_HEADERS",
    "MAX_MESSAGE",
    "MAX_TARGET",
    "MAX_TRAILERS",
    "PING",
    "PONG",
    "READ_TIMEOUT",
    "SENT_FROM_RECORDING",
    "TEXT",
    "Answer",
    "Ask",
    "BackgroundServer",
    "BadRequest",
    "Handler",
    "LiveSocket",
    "MessageReader",
    "Request",
    "Trust",
    "Unsendable",
    "Upstream",
    "UpstreamError",
    "UpstreamResponse",
    "Watchdog",
    "WsProtocolError",
    "accept_key",
    "frame",
    "free_port",
    "header_problem",
    "read_request",
    "recorded_request_headers",
    "refuse",
    "said_name",
    "sendable",
    "tls_context",
]
