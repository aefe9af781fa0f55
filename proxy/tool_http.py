"""The tools' HTTP in forward-proxy mode (docs/recorder.md, "The tools' HTTP"): which requests
the recorder keeps as a tool's call (marked ``tool`` in the cassette: never a turn), and how much
of their bodies.

A forward-proxy request is a tool's when the tools' HTTP is on (``looptap_tool_http``, ``looptap
run`` / ``record``'s default) and it goes to a host that is neither an LLM API's nor an MCP
server's (the addon asks those first), nor an agent vendor's own (sign-in, telemetry, model lists:
:data:`cassettes.providers.AGENT_OWN_HOSTS`), nor one of ``looptap_tool_http_exclude``, nor one of
the recorder's own listeners. Its bodies are kept up to :data:`~proxy.capture.TOOL_BODY`; the rest
passes on, counted.

A model request is a model call whatever form it arrives in (issue 91): a request sent through the
forward proxy to a host no list names (an OpenAI-compatible server on 127.0.0.1 a client reaches
by a hard-coded base URL, in absolute form through ``HTTP_PROXY``) is a model call when the
providers' own detection says what it is (:func:`model_call`: an API family's path, confirmed by
its JSON body), never by its host; it is recorded as a model call, not a tool's.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch
from typing import Any
from urllib.parse import SplitResult, urlsplit

from mitmproxy import http
from mitmproxy.proxy import mode_specs

from ..cassettes import bounds
from ..cassettes.providers import is_agent_own
from .capture import TOOL_BODY, Tee, request_body

__all__ = ["ToolHttp", "model_call", "model_path"]

#: Families a request body may be read as that are not a model's call (recorded as such anyway).
_NOT_MODEL = frozenset({"mcp", "a2a"})


def _score(method: str, url: SplitResult, body: Any) -> tuple[str, int, int]:
    """The family the providers detect for the request, its score with ``body``, and without."""
    from ..cassettes.providers import detect  # (the adapters: loaded on the first POST asked)

    p = detect(method, url, body)
    if p is None or p.family in _NOT_MODEL:
        return "", 0, 0
    return p.family, p.recognise(method, url, body), p.recognise(method, url, None)


def model_path(method: str, url: str) -> bool:
    """Whether a request's method and path alone are a model API's (an API family's path, its
    body not yet read): its body is kept as a model call's until :func:`model_call` decides."""
    if method.upper() != "POST":
        return False
    try:
        u = urlsplit(url)
    except ValueError:
        return False
    return _score(method, u, None)[1] >= 2


def model_call(method: str, url: str, body: bytes) -> str | None:
    """The API family a request is a model call of, by what it is: the providers' detection of a
    family by its path, *confirmed by its JSON body* (the body raises the family's score: Chat
    Completions' ``messages``, Responses' ``input``, Gemini's ``contents``…); ``None`` otherwise
    (a path alone, a body the family does not recognise, MCP and A2A, not a POST)."""
    if method.upper() != "POST" or not body.lstrip()[:1] == b"{":
        return None
    try:
        u = urlsplit(url)
        doc = bounds.loads(body)
    except ValueError:  # (orjson.JSONDecodeError is one)
        return None
    if not isinstance(doc, dict):
        return None
    family, with_body, without = _score(method, u, doc)
    return family if with_body >= 3 and with_body > without else None


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
        in: forward proxy, not an LLM API's nor an MCP client's, nor on a model API's path) is
        kept up to its bound."""
        req = flow.request
        if (
            self.on
            and not llm_host
            and not isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)
            and not any(h in req.headers for h in _MCP_HEADERS)
            and not model_path(req.method, req.pretty_url)
        ):
            return TOOL_BODY
        return limit

    def model_call(self, flow: http.HTTPFlow) -> bool:
        """A forward-proxy request the tools' HTTP would take for a tool's that is a model call by
        what it is (:func:`model_call`): recorded as a model call."""
        req = flow.request
        if not self.on or req.method.upper() != "POST":
            return False
        body = request_body(flow)
        if req.headers.get("content-encoding") and req.raw_content is not None:
            body = req.get_content(strict=False) or b""
        return model_call(req.method, req.pretty_url, body) is not None

    @staticmethod
    def tee() -> Tee:
        """A tool's answer: kept up to its bound, never held."""
        return Tee(TOOL_BODY)
