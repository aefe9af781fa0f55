"""The user's own proxy (docs/recorder.md, "Behind a proxy"): where the agent's environment names
a forward proxy (``https_proxy``/``HTTPS_PROXY`` for ``https``, ``http_proxy``/``HTTP_PROXY`` for
``http``, ``all_proxy``/``ALL_PROXY`` for both; the lower-case name first, as curl and Python's
``urllib`` read them), the recorder forwards through it, as the agent would have without looptap:
``looptap run`` replaces those variables with its own forward proxy, so without this a host only
that proxy reaches would be unreachable.

mitmproxy does the chaining (its upstream-proxy layer: ``CONNECT`` through the proxy, then the
recorder's TLS with the server), chosen per request by setting ``flow.server_conn.via``
(:class:`UserProxy`), on every listener (the tools' forward proxy and each API's reverse
listener). A host ``no_proxy``/``NO_PROXY`` names goes direct (:func:`cassettes.net.bypassed`,
as curl and requests read it), and so does a client that reaches one of the recorder's own
listeners through it. Credentials in the proxy's URL become its ``Proxy-Authorization``
(mitmproxy's own encoding) on each ``CONNECT`` and are never written or said: the line the start
says names the proxy by scheme, host and port.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import h11
from mitmproxy import http
from mitmproxy.addons.upstream_auth import parse_upstream_auth
from mitmproxy.net.server_spec import ServerSpec
from mitmproxy.proxy import mode_specs

from ..cassettes.net import NO_PROXY_VARS, PROXY_VARS, bypassed, first_set
from .config import RECORDER_VAR, listening

__all__ = ["Proxy", "UserProxy", "from_environ"]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class Proxy:
    """One proxy the environment names: how mitmproxy reaches it, and how it is said."""

    scheme: str
    host: str
    port: int
    #: The variable it was read from.
    var: str
    #: ``Proxy-Authorization``'s value, from the URL's user and password (never said).
    auth: bytes | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def spec(self) -> ServerSpec:
        """mitmproxy's server spec for ``via``."""
        return ("https" if self.scheme == "https" else "http", (self.host, self.port))


def _parse(value: str, var: str) -> Proxy | str:
    """The proxy ``value`` names, or why it cannot be chained (no value of it said: it may hold
    a password)."""
    try:
        u = urlsplit(value if "://" in value else "http://" + value)
        port = u.port
    except ValueError:
        return f"{var} is not a proxy URL; the recorder connects directly"
    scheme = u.scheme.lower()
    if scheme not in ("http", "https") or not u.hostname:
        what = f"a {scheme} proxy" if u.hostname else "not a proxy URL"
        return (
            f"{var} is {what}, which mitmproxy cannot forward through (http and https proxies "
            "only); the recorder connects directly"
        )
    auth = None
    if u.username:  # (mitmproxy's encoding wants a user; a password alone is not sent)
        auth = parse_upstream_auth(f"{unquote(u.username)}:{unquote(u.password or '')}")
    default = 443 if scheme == "https" else 80
    return Proxy(scheme, u.hostname, port or default, var, auth)


def _stale(proxy: Proxy, environ: Mapping[str, str]) -> bool:
    """A proxy on this machine, set where looptap exported its variables (``eval "$(looptap
    record)"``), that no longer listens: that recorder's, since stopped."""
    return (
        bool(environ.get(RECORDER_VAR))
        and proxy.host.lower() in _LOOPBACK
        and not listening(proxy.host, proxy.port)
    )


def from_environ(environ: Mapping[str, str]) -> UserProxy:
    """The proxies and ``NO_PROXY`` the agent's environment names (none: everything direct)."""
    proxies: dict[str, Proxy] = {}
    notes: list[str] = []
    for scheme, names in PROXY_VARS.items():
        found = first_set(environ, names)
        if found is None:
            continue
        got = _parse(found[1], found[0])
        if isinstance(got, Proxy) and _stale(got, environ):
            got = (
                f"{got.var} {got.shown} is a looptap recorder that is gone (a stale export): "
                "not followed; the recorder connects directly"
            )
        if isinstance(got, Proxy):
            proxies[scheme] = got
        elif got not in notes:
            notes.append(got)
    no_proxy = first_set(environ, NO_PROXY_VARS)
    return UserProxy(proxies, no_proxy[1] if no_proxy else "", notes)


class UserProxy:
    """mitmproxy addon: each request to a server goes through the proxy the agent's environment
    names for its scheme, unless ``NO_PROXY`` names its host (:mod:`proxy.user_proxy`)."""

    def __init__(self, proxies: dict[str, Proxy], no_proxy: str, notes: list[str]) -> None:
        self.proxies = proxies
        self.no_proxy = no_proxy
        self.notes = notes
        #: The recorder's own listeners' ports (set once they listen): always reached directly.
        self.own_ports: frozenset[int] = frozenset()
        self._auth = {(p.host, p.port): p.auth for p in proxies.values() if p.auth}

    def said(self) -> list[str]:
        """What the start says: the proxies chained (one line), and what was not chained."""
        if not self.proxies:
            return list(self.notes)
        by: dict[str, list[tuple[str, str]]] = {}
        for scheme, proxy in self.proxies.items():
            by.setdefault(proxy.shown, []).append((scheme, proxy.var))
        whole = len(by) == 1 and len(self.proxies) == len(PROXY_VARS)
        parts = [
            shown
            + ("" if whole else " for " + " and ".join(s for s, _ in uses))
            + f" (from {' and '.join(dict.fromkeys(v for _, v in uses))})"
            for shown, uses in by.items()
        ]
        tail = ", NO_PROXY honoured" if self.no_proxy else ""
        return [f"upstream proxy: {'; '.join(parts)}{tail}", *self.notes]

    def route(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy a connection to ``host:port`` for ``scheme`` goes through; ``None``: direct."""
        proxy = self.proxies.get(scheme)
        if proxy is None:
            return None
        name = host.lower().rstrip(".").strip("[]")
        if port in self.own_ports and name in _LOOPBACK:
            return None
        if self.no_proxy and bypassed(name, port, self.no_proxy):
            return None
        return proxy

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.server_conn.via is not None or isinstance(
            flow.client_conn.proxy_mode, mode_specs.UpstreamMode
        ):
            return  # mitmproxy's own upstream mode, or a proxy another addon chose
        req = flow.request
        proxy = self.route(req.scheme, req.host, req.port)
        if proxy is not None:
            flow.server_conn.via = proxy.spec

    def http_connect_upstream(self, flow: http.HTTPFlow) -> None:
        """The ``CONNECT`` mitmproxy sends the proxy carries the proxy's credentials."""
        address = flow.server_conn.address
        auth = self._auth.get((str(address[0]), int(address[1]))) if address else None
        if auth is not None:
            flow.request.headers["Proxy-Authorization"] = auth.decode()


def tunnel(sock: socket.socket, proxy: Proxy, address: tuple[str, int]) -> bytes:
    """Ask ``proxy`` (connected on ``sock``) for a tunnel to ``address`` (``CONNECT``, spoken by
    h11: a name or credential that is no valid header is refused, never sent); the bytes read
    past its answer's head. Raises :class:`OSError` when it refuses or does not answer (the
    recorder's TLS check then decides nothing)."""
    host, port = address
    name = (f"[{host}]" if ":" in host else host).encode("idna")  # (as mitmproxy writes it)
    authority = name + f":{port}".encode()
    headers = [(b"Host", authority)]
    if proxy.auth:
        headers.append((b"Proxy-Authorization", proxy.auth))
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=65536)
    try:
        sock.sendall(conn.send(h11.Request(method=b"CONNECT", target=authority, headers=headers)))
        while (event := conn.next_event()) is h11.NEED_DATA:
            data = sock.recv(4096)
            if not data:
                raise ConnectionResetError(f"the proxy {proxy.shown} did not answer CONNECT")
            conn.receive_data(data)
    except h11.ProtocolError as exc:
        raise ConnectionResetError(f"the proxy {proxy.shown} did not answer CONNECT") from exc
    if not isinstance(event, h11.Response) or not 200 <= event.status_code < 300:
        raise ConnectionRefusedError(f"the proxy {proxy.shown} refused CONNECT")
    return conn.trailing_data[0]  # (past a 2xx answer to CONNECT: the tunnel's first bytes)
