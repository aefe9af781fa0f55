"""Every HTTP request looptap sends to a live upstream, by httpx (``httpx2``, the library the
SDKs use): a fork's requests past its cursor and the replay server's new episodes (the relay),
``compare``'s, and so ``why``'s branches, which run a fork.

One request per connection (``Connection: close``), framed by its own ``Content-Length``, and one
answer read from it, through a transport of its own that is closed with the answer: no connection
is kept or reused, so what an upstream sends after the answer (an answer nobody asked for, a
``408`` when idle) is never read as another request's, and no request is sent on a connection the
upstream may have closed. The request goes as it is given: its headers in their order and case
(:func:`~._messages.sendable` drops, and says, a header that cannot be sent), its target as
given (httpcore's ``target`` extension: no URL normalised). ``http`` or ``https`` (the system's
CA store, or the one a :class:`Trust` kept). An ``https`` request is tunnelled by ``CONNECT``
through the proxy named (``proxy``: as a fork sends an HTTPS tool's live call through its
recorder, which records it), else through the one the environment names for its host
(:func:`~._env_proxy.env_proxy`: ``HTTPS_PROXY``, ``NO_PROXY``…, as the user's own clients go);
an ``http`` one goes direct (its target is sent as given, never in a proxy's absolute form), and
nothing else of the environment is consulted. Every wait
is bounded and progress based (httpx's timeouts): connecting within ``connect_timeout``, each
read and write within ``read_timeout``; an upstream that breaks off or answers what is not
HTTP/1.1 raises :class:`UpstreamError`, which says in which part (httpcore's ``trace``
extension names the phase that failed).
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from ..errors import CassetteError
from ..untrusted import clean_line
from ..wire import Headers, without_own
from ._env_proxy import env_proxy
from ._messages import sendable
from ._requests import HOP_BY_HOP

__all__ = [
    "CONNECT_TIMEOUT",
    "READ_TIMEOUT",
    "Trust",
    "Upstream",
    "UpstreamError",
    "UpstreamResponse",
    "tls_context",
]

#: Seconds to connect to the upstream (and finish TLS).
CONNECT_TIMEOUT = 30.0
#: Seconds the upstream may take to start its answer, or pause inside it (a model thinking
#: before its first token can take minutes: generous).
READ_TIMEOUT = 600.0


class UpstreamError(CassetteError):
    """The upstream could not be reached, or answered something that is not HTTP/1.1."""


@dataclass(frozen=True)
class Trust:
    """The CA store TLS to a live upstream verifies against, as it was when :meth:`now` took it.
    The pytest plugin takes it before it points ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` at a store
    that trusts no host for a replayed test (docs/testing.md): a fork's live requests, made in
    the test's process while those are set, keep the store the test started with."""

    cafile: str | None
    capath: str | None

    @classmethod
    def now(cls) -> Trust:
        """The store ``ssl.create_default_context()`` would load now (the environment's, else
        OpenSSL's own)."""
        paths = ssl.get_default_verify_paths()
        return cls(paths.cafile, paths.capath)

    def context(self) -> ssl.SSLContext:
        # no store found: the platform's default, as before
        if self.cafile is None and self.capath is None:
            return ssl.create_default_context()
        return ssl.create_default_context(cafile=self.cafile, capath=self.capath)


def tls_context(trust: Trust | None) -> ssl.SSLContext:
    """A client context verifying against ``trust``, or (``None``) the store the environment names
    now."""
    return trust.context() if trust is not None else ssl.create_default_context()


class _Phases:
    """httpcore's ``trace`` extension: which part of the exchange failed first (``None``: none)."""

    def __init__(self) -> None:
        self.failed: str | None = None

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith(".failed") and self.failed is None:
            self.failed = event


#: httpcore's phases, as a message names them.
_PARTS = (
    ("send_request", "while taking the request"),
    ("receive_response_headers", "its head"),
    ("receive_response_body", "its body"),
)


def _error(exc: httpx2.HTTPError, phases: _Phases, upstream: Upstream) -> UpstreamError:
    """What went wrong, in looptap's words: the part that failed and httpx's reason (escaped,
    cut)."""
    said = clean_line(str(exc))[:120]
    part = next((p for k, p in _PARTS if phases.failed and k in phases.failed), "its head")
    if isinstance(exc, httpx2.ConnectTimeout):
        text = f"connecting to {upstream.base} took longer than {upstream.connect_timeout:g} s"
    elif isinstance(exc, httpx2.ConnectError):
        text = f"cannot connect to {upstream.base}: {said}"
    elif isinstance(exc, httpx2.LocalProtocolError):
        text = f"the request cannot be sent: {said}"
    elif part.startswith("while") or isinstance(exc, httpx2.WriteError | httpx2.WriteTimeout):
        text = f"the upstream broke the connection off while taking the request: {said}"
        if isinstance(exc, httpx2.TimeoutException):
            text = f"the upstream did not take the request within {upstream.read_timeout:g} s"
    elif isinstance(exc, httpx2.ReadTimeout):
        text = f"the upstream sent nothing for {upstream.read_timeout:g} s ({part})"
    elif isinstance(exc, httpx2.RemoteProtocolError) and said.startswith("Server disconnected"):
        text = "the upstream closed the connection before answering"
    elif isinstance(exc, httpx2.RemoteProtocolError) and said.startswith("peer closed"):
        text = f"the upstream closed the connection in the middle of {part}"
    elif isinstance(exc, httpx2.RemoteProtocolError):
        text = f"the upstream's answer is not HTTP/1.1 ({part}): {said}"
    else:  # a reset, a TLS failure
        text = f"the upstream broke the connection off in the middle of {part}: {said}"
    return UpstreamError(text)


@dataclass
class UpstreamResponse:
    status: int
    headers: Headers
    _response: httpx2.Response = field(repr=False)
    _transport: httpx2.AsyncHTTPTransport = field(repr=False)
    _phases: _Phases = field(repr=False)
    _upstream: Upstream = field(repr=False)

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives (framing removed, no ``Content-Encoding`` undone)."""
        try:
            async for piece in self._response.aiter_raw():
                yield piece
        except httpx2.HTTPError as exc:
            raise _error(exc, self._phases, self._upstream) from None
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        await self._response.aclose()
        await self._transport.aclose()


class Upstream:
    """Where requests go live: ``base`` (``http(s)://host[:port]``, a path prefix kept), verified
    against ``trust`` (``None``: the store the environment names when connecting); an ``https``
    base through ``proxy`` when one is named (a ``CONNECT`` tunnel)."""

    def __init__(
        self,
        base: str,
        connect_timeout: float | None = CONNECT_TIMEOUT,
        read_timeout: float | None = READ_TIMEOUT,
        trust: Trust | None = None,
        host: str | None = None,
        proxy: str | None = None,
    ) -> None:
        u = urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"an upstream is http(s)://host[:port], not {base[:80]!r}")
        self.base = base.rstrip("/")
        self.tls = u.scheme == "https"
        self.netloc = u.netloc
        #: The ``Host`` header sent: the base's, or the named one (a request in absolute form sent
        #: to a forward proxy names the host it is for).
        self.host = host or u.netloc
        self.prefix = u.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.trust = trust
        #: An HTTP proxy (``http://host:port``) an ``https`` base is reached through (``CONNECT``),
        #: TLS verified against ``trust`` inside the tunnel: the one named, else the one the
        #: environment names for the base's host; ``None``: straight to the base.
        if self.tls and proxy is None:
            proxy = env_proxy("https", u.hostname, u.port or 443, os.environ)
        self.proxy = proxy if self.tls else None

    async def send(
        self, method: str, target: str, headers: Headers, body: bytes, said: list[str] | None = None
    ) -> UpstreamResponse:
        """Send one request; the response once its head has arrived (read its body with
        :meth:`UpstreamResponse.pieces`). The request's hop-by-hop headers are not passed on; a
        header that cannot be sent (CR, LF, NUL, a name that is not a token) is dropped, and a
        line naming it is appended to ``said``."""
        # RFC 9110 7.6.1
        listed = {
            t.strip().lower() for k, v in headers if k.lower() == "connection" for t in v.split(",")
        }
        keep = [
            (k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() not in listed
        ]
        items = sendable(
            [
                ("Host", self.host),
                *keep,
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ],
            said,
            "request header",
        )
        phases = _Phases()
        timeout = httpx2.Timeout(self.read_timeout, connect=self.connect_timeout, pool=None)
        request = httpx2.Request(
            method,
            self.base,
            headers=items,
            content=body,
            extensions={
                "target": f"{self.prefix}{target}".encode("latin-1", "replace"),
                "timeout": timeout.as_dict(),
                "trace": phases,
            },
        )
        transport = httpx2.AsyncHTTPTransport(
            verify=tls_context(self.trust) if self.tls else _plain(),
            trust_env=False,
            proxy=httpx2.Proxy(self.proxy) if self.proxy else None,
        )
        try:
            response = await transport.handle_async_request(request)
        except httpx2.HTTPError as exc:
            await transport.aclose()
            raise _error(exc, phases, self) from None
        except BaseException:
            await transport.aclose()
            raise
        return UpstreamResponse(
            response.status_code,
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw],
            response,
            transport,
            phases,
            self,
        )

    def relayed_headers(
        self, response: UpstreamResponse, dropped: list[str] | None = None
    ) -> Headers:
        """The response headers a relay passes on: hop-by-hop ones dropped (it frames the body
        itself), and looptap's own marks (:mod:`cassettes.wire._own_headers`: an upstream's answer
        never speaks for looptap), whose names go to ``dropped``."""
        kept, own = without_own(
            [(k, v) for k, v in response.headers if k.lower() not in HOP_BY_HOP]
        )
        if dropped is not None:
            dropped.extend(own)
        return kept


@functools.cache
def _plain() -> ssl.SSLContext:
    """The context of a plain-HTTP upstream's transport, which never does TLS: one for all, made
    once (loading a CA store per request would cost milliseconds for nothing); it trusts no CA."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
