"""looptap's one network layer; it knows no cassette.

- serving: an asyncio TCP server on a thread of its own or in a loop (:class:`BackgroundServer`),
  each request read by an h11 server connection with looptap's bounds (body size, target, header
  and trailer count) and deadlines (idle, slow head, stalled body): :func:`read_request`,
  :func:`refuse`. The replay server and the test suite's upstreams serve with it.
- outgoing: every HTTP/1.1 message built by h11 (:class:`Answer`, a header that cannot be sent
  dropped and said), and every request looptap sends upstream
  (:class:`Upstream`: the fork's live relay, ``compare``, ``why``).
- the proxy an environment names for a connection (:func:`env_proxy`, ``NO_PROXY`` read by
  :func:`bypassed`): an ``https`` :class:`Upstream` goes through it, and the recorder too.
- Node's built-in ``fetch`` through the proxy variables: the ``--require`` shim put into
  ``NODE_OPTIONS`` (:data:`NODE_SHIM`, :func:`node_options`).
- WebSocket framing by wsproto (:func:`frame`, :class:`MessageReader`), and a live session's
  client side (:class:`LiveSocket`).

Names load on first use (PEP 562): ``looptap replay`` serves with ``_serve`` and ``_requests``
alone, and ``free_port`` costs the recorder's launcher no HTTP client. With the names imported
plainly, replay's start (the command's module imported, the server built on a 2-round-trip
cassette) took 1.18x the CPU time (0.34 s against 0.29 s: h11 and the WebSocket client;
whole-process medians of 6 interleaved pairs, 2026-11-27).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import on_first_use

_MODULES = {
    "_serve": "BackgroundServer Handler free_port",
    "_requests": "HOP_BY_HOP MAX_BODY BadRequest Request read_request refuse",
    "_ws": (
        "CLOSE FRAME_COST MAX_MESSAGE PING PONG TEXT MessageReader WsProtocolError accept_key frame"
    ),
    "_messages": "Answer header_problem recorded_request_headers said_name",
    "_client": "READ_TIMEOUT Trust Upstream UpstreamError UpstreamResponse",
    "_wsclient": "LiveSocket",
    "_node_proxy": "NODE_SHIM node_options shim_left_out",
    "_env_proxy": "NO_PROXY_VARS PROXY_VARS bypassed env_proxy first_set",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from ._client import (
        READ_TIMEOUT,
        Trust,
        Upstream,
        UpstreamError,
        UpstreamResponse,
    )
    from ._env_proxy import NO_PROXY_VARS, PROXY_VARS, bypassed, env_proxy, first_set
    from ._messages import (
        Answer,
        header_problem,
        recorded_request_headers,
        said_name,
    )
    from ._node_proxy import NODE_SHIM, node_options, shim_left_out
    from ._requests import (
        HOP_BY_HOP,
        MAX_BODY,
        BadRequest,
        Request,
        read_request,
        refuse,
    )
    from ._serve import BackgroundServer, Handler, free_port
    from ._ws import (
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
    from ._wsclient import LiveSocket


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "CLOSE",
    "FRAME_COST",
    "HOP_BY_HOP",
    "MAX_BODY",
    "MAX_MESSAGE",
    "NODE_SHIM",
    "NO_PROXY_VARS",
    "PING",
    "PONG",
    "PROXY_VARS",
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
    "bypassed",
    "env_proxy",
    "first_set",
    "frame",
    "free_port",
    "header_problem",
    "node_options",
    "read_request",
    "recorded_request_headers",
    "refuse",
    "said_name",
    "shim_left_out",
]
