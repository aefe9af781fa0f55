"""The one place an outgoing HTTP/1.1 message is built: the replay server's answers (recorded
response headers), the requests the fork and ``compare`` send upstream (recorded or live request
headers), and WebSocket handshakes. Recorded data never becomes protocol.

The bytes are h11's (:class:`Answer` for a server's response; a WebSocket client's handshake is
wsproto's, over h11): h11 frames the body (``Content-Length`` or chunked, one HTTP chunk per
piece) and refuses by construction a header name that is not a token and a value holding CR,
LF, NUL or another control character. Before h11 sees them, :func:`sendable` checks each header
on its own with h11's own validation, so one bad header is *dropped and said* (its name, escaped
and cut; never its value, which may be a credential) instead of failing the whole message.

Which recorded headers may go upstream at all is decided here too: :func:`recorded_request_headers`
keeps only a small allow-list (``content-type``, ``accept``, the API's version and beta headers),
so a recorded credential, cookie, connection header or client telemetry never reaches a candidate;
the user's own ``--header`` values are added by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from http import HTTPStatus

import h11

from ..recording import SECRET_HEADERS
from ..untrusted import clean_line
from ..wire import Headers

__all__ = [
    "Answer",
    "header_problem",
    "recorded_request_headers",
    "said_name",
    "sendable",
]

#: Request headers that carry a credential or a cookie: never taken from a recording.
CREDENTIAL_HEADERS = frozenset(SECRET_HEADERS)
#: The recorded request headers ``compare`` sends (besides the API's own version headers, which
#: its adapter names: ``Provider.profile.replay_headers``): what the body is, what answer is
#: accepted.
SENT_FROM_RECORDING = frozenset({"content-type", "accept"})

#: A header naming an API version or a beta flag (``…-version``, ``…-beta``).
_VERSIONED = re.compile(r"(?i)^[a-z0-9-]*-(version|beta)$")
#: The longest part of a header name said when it is dropped.
_SAID = 60


class Unsendable(ValueError):
    """A message h11 refused as a whole (its target, its status); the text names no header value."""


def _raw(text: str) -> bytes | None:
    """A header name or value as bytes on the wire: latin-1 (as the readers decode), else UTF-8
    (mitmproxy's surrogate escapes undone); ``None`` when it cannot be encoded at all."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return None


def header_problem(name: str, value: str) -> str | None:
    """Why ``name: value`` cannot be sent (``None``: it can), as h11 decides it."""
    k, v = _raw(name), _raw(value.strip(" \t"))
    if k is None or v is None:
        return "it cannot be encoded"
    try:
        h11.Response(status_code=200, headers=[(k, v)])
    except h11.LocalProtocolError:
        try:
            h11.Response(status_code=200, headers=[(k, b"")])
        except h11.LocalProtocolError:
            return (
                "its name is not a token (it would split the message)"
                if b"\r" in k or b"\n" in k
                else "its name is not a token"
            )
        return (
            "its value holds CR, LF or NUL (it would split the message)"
            if set(v) & {10, 13, 0}
            else "its value holds a control character"
        )
    return None


def said_name(name: str) -> str:
    """A header's name as a line may show it: escaped (CR, LF shown), cut."""
    shown = clean_line(name)
    return repr(shown[:_SAID] + ("…" if len(shown) > _SAID else ""))


def sendable(
    headers: Iterable[tuple[str, str]], said: list[str] | None, what: str = "header"
) -> list[tuple[bytes, bytes]]:
    """``headers`` as h11 takes them; a header that cannot be sent is dropped, and a line naming it
    (never its value) is appended to ``said``."""
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        why = header_problem(name, value)
        if why is not None:
            if said is not None:
                said.append(f"{what} {said_name(name)} not sent: {why}")
            continue
        k, v = _raw(name), _raw(value.strip(" \t"))
        assert k is not None and v is not None
        out.append((k, v))
    return out


def recorded_request_headers(headers: Headers, version_headers: Iterable[str] = ()) -> Headers:
    """The recorded request headers that may be sent again: :data:`SENT_FROM_RECORDING`, the
    API's ``version_headers`` and any ``…-version`` / ``…-beta`` header (an API version or beta
    flag: what the request means); never a credential, a cookie or a connection's header."""
    allowed = SENT_FROM_RECORDING | {h.lower() for h in version_headers}
    return [
        (k, v)
        for k, v in headers
        if (k.lower() in allowed or _VERSIONED.search(k)) and k.lower() not in CREDENTIAL_HEADERS
    ]


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b"Unknown"


class Answer:
    """One response of a server, built by h11: :meth:`head`, then :meth:`data` per piece (one
    HTTP chunk each when chunked), then :meth:`end`. ``method``, ``close`` and ``upgrade`` are
    the request's (they decide the framing h11 chooses: a ``HEAD`` has no body, a ``close`` is
    answered with ``Connection: close``, a WebSocket upgrade may be answered 101)."""

    def __init__(self, method: str = "GET", *, close: bool = False, upgrade: bool = False) -> None:
        self._conn = h11.Connection(h11.SERVER)
        head = b"%s / HTTP/1.1\r\nhost: looptap\r\n" % (
            method.encode("ascii", "replace") if method.isascii() and method.isalpha() else b"GET"
        )
        if upgrade:
            head += b"connection: upgrade\r\nupgrade: websocket\r\n"
        elif close:
            head += b"connection: close\r\n"
        self._conn.receive_data(head + b"\r\n")
        while not isinstance(self._conn.next_event(), h11.EndOfMessage):
            pass
        #: The answer carries no body (a HEAD request, a 1xx, 204 or 304 status): pieces are not
        #: sent.
        self.bodyless = method.upper() == "HEAD"

    def head(self, status: int, headers: Headers, said: list[str] | None = None) -> bytes:
        """The status line and headers (a header that cannot be sent is dropped, and said)."""
        items = sendable(headers, said, "response header")
        # RFC 9110 6.4.1: no content, whatever was recorded
        self.bodyless = self.bodyless or status < 200 or status in (204, 304)
        cls = h11.InformationalResponse if status < 200 else h11.Response
        try:
            return self._conn.send(cls(status_code=status, headers=items, reason=_reason(status)))  # type: ignore[return-value]
        except h11.LocalProtocolError as exc:
            raise Unsendable(f"the response {status} cannot be sent: {exc}") from None

    def data(self, piece: bytes) -> bytes:
        if not piece or self.bodyless:
            return b""
        out = self._conn.send(h11.Data(data=piece))
        assert out is not None
        return out

    def end(self) -> bytes:
        if self.bodyless and self._conn.our_state is not h11.SEND_BODY:
            return b""
        out = self._conn.send(h11.EndOfMessage())
        assert out is not None
        return out
