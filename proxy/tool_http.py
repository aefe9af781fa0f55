"""The tools' HTTP in forward-proxy mode (docs/recorder.md, "The tools' HTTP"): which requests
the recorder keeps as a tool's call (marked ``tool`` in the cassette: never a turn), and how much
of their bodies.

A forward-proxy request is a tool's when the tools' HTTP is on (``looptap_tool_http``, ``looptap
run`` / ``record``'s default) and it goes to a host that is neither an LLM API's nor an MCP
server's (the addon asks those first), nor an agent vendor's own (sign-in, telemetry, model lists:
:data:`cassettes.providers.AGENT_OWN_HOSTS`), nor one of ``looptap_tool_http_exclude``, nor one of
the recorder's own listeners. Its bodies are kept up to :data:`~proxy.capture.TOOL_BODY`; the rest
passes on, counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch
from typing import Any

from mitmproxy import http
from mitmproxy.proxy import mode_specs

from ..cassettes.providers import is_agent_own
from .capture import TOOL_BODY, Tee

__all__ = ["ToolHttp"]

#: The names of this machine a client reaches the recorder's listeners by.
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
#: Request headers only an MCP client sends (its bodies are small: never a tool's bound).
_MCP_HEADERS = ("mcp-protocol-version", "mcp-session-id")


class ToolHttp:
    """What the addon's options say about the tools' HTTP, and the decisions made from them."""

    __slots__ = ("exclude", "on", "own_ports")

    def __init__(self) -> None:
        self.on = False
        self.exclude: tuple[str, ...] = ()
        #: The ports of the recorder's reverse listeners: a client that reaches one through the
        #: forward proxy (one that cannot leave a port out of its proxy) is passed on unrecorded;
        #: the listener records it.
        self.own_ports: frozenset[int] = frozenset()

    def listeners(self, modes: Sequence[str]) -> None:
        """The reverse listeners among mitmproxy's ``mode`` specs."""
        ports: set[int] = set()
        for spec in modes:
            try:
                mode = mode_specs.ProxyMode.parse(spec)
            except ValueError:
                continue
            if isinstance(mode, mode_specs.ReverseMode) and mode.custom_listen_port is not None:
                ports.add(mode.custom_listen_port)
        self.own_ports = frozenset(ports)

    def let_through(self, server: Any) -> None:
        """mitmproxy refuses a connection to any of its own listeners ("Request destination
        unknown"), lest it loop. With the loopback recorded (``NO_PROXY`` naming the listeners by
        port), a client that cannot leave a port out of its proxy (aiohttp, curl, requests to an
        address) reaches a reverse listener through the forward proxy: that connection is let
        through (a reverse listener forwards to its upstream, never to the forward proxy, so
        nothing loops), and the listener records the round trip, the forward proxy does not
        (:meth:`records`). A connection to the forward proxy itself stays refused."""
        address = server.address
        if (
            server.error
            and str(server.error).startswith("Request destination unknown")
            and address is not None
            and address[1] in self.own_ports
            and str(address[0]).lower() in _LOOPBACK
        ):
            server.error = None

    def records(self, flow: http.HTTPFlow) -> bool:
        """A forward-proxy request that is not an LLM API's nor an MCP server's: a tool's call
        the recorder keeps."""
        if not self.on:
            return False
        req = flow.request
        host = req.pretty_host.lower().rstrip(".")
        if req.port in self.own_ports and host in _LOOPBACK:
            return False
        if is_agent_own(host, req.path):
            return False
        if self.exclude:
            where = f"{host}:{req.port}"
            return not any(fnmatch(host, p) or fnmatch(where, p) for p in self.exclude)
        return True

    def request_limit(self, flow: http.HTTPFlow, llm_host: bool, limit: int) -> int:
        """Bytes of a request body kept: a request that may be a tool's (told once its head is
        in: forward proxy, not an LLM API's nor an MCP client's) is kept up to its bound."""
        if (
            self.on
            and not llm_host
            and not isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)
            and not any(h in flow.request.headers for h in _MCP_HEADERS)
        ):
            return TOOL_BODY
        return limit

    @staticmethod
    def tee() -> Tee:
        """A tool's answer: kept up to its bound, never held."""
        return Tee(TOOL_BODY)
