"""looptap's one network layer; it knows no cassette.

- serving: an asyncio TCP server on a thread of its own or in a loop (:class:`BackgroundServer`),
  each request read by an h11 server connection with looptap's bounds (body size, target, header
  and trailer count) and deadlines (idle, slow head, stalled body): :func:`read_request`,
  :func:`refuse`. The replay server and the test suite's upstreams serve with it.
- outgoing: every HTTP/1.1 message built by h11 (:class:`Answer`, a header that cannot be sent
  dropped and said), and every request looptap sends upstream
  (:class:`Upstream`: the fork's live relay, ``compare``, ``why``).
- WebSocket framing by wsproto (:func:`frame`, :class:`MessageReader`), and a live session's
  client side (:class:`LiveSocket`).

Names load on first use (PEP 562): ``free_port`` costs the recorder's launcher no HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: The private modules, in the order a name is looked for in them (the lightest first).
_MODULES = ("_serve", "_requests", "_ws", "_messages", "_client", "_wsclient")

if TYPE_CHECKING:
    from cassettes.net._client import (
        READ_TIMEOUT,
        Trust,
        Upstream,
        UpstreamError,
        UpstreamResponse,
    )
    from cassettes.net._messages import (
        Answer,
        header_problem,
        recorded_request_headers,
        said_name,
    )
    from cassettes.net._requests import (
        HOP_BY_HOP,
        MAX_BODY,
        BadRequest,
        Request,
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
    if name not in __all__:
        raise AttributeError(f"module 'cassettes.net' has no attribute {name!r}")
    for private in _MODULES:
        module = importlib.import_module(f"cassettes.net.{private}")
        if name in module.__all__:
            globals()[name] = value = getattr(module, name)
            return value
    raise AssertionError(f"cassettes.net.{name} is exported but defined nowhere")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CLOSE",
    "FRAME_COST",
    "HOP_BY_HOP",
    "MAX_BODY",
    "MAX_MESSAGE",
    "PING",
    "PONG",
    "READ_TIMEOUT",
    "TEXT",
    "Answer",
    "BackgroundServer",
    "BadRequest",
    "Handler",
    "LiveSocket",
    "MessageReader",
    "Request",
    "Trust",
    "Upstream",
    "UpstreamError",
    "UpstreamResponse",
    "WsProtocolError",
    "accept_key",
    "frame",
    "free_port",
    "header_problem",
    "read_request",
    "recorded_request_headers",
    "refuse",
    "said_name",
]
