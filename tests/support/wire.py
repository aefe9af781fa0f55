"""A raw-socket HTTP/1.1 client that reports exactly what crossed the wire, and when.

No httpx, no SDK: the reliability tests compare what an agent receives through the recorder with
what it receives from the same upstream directly, byte for byte, so the client must not retry,
decode, buffer or forgive anything. It records every body piece with its arrival time (after
removing the chunked framing, which is hop-by-hop), whether the body ended properly (the chunked
terminator, or ``Content-Length`` bytes), and the error that ended it otherwise.

Proxy mode (``proxy=True``) sends the absolute-form request target a forward proxy expects.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HOP_BY_HOP", "Response", "http_request"]

#: Headers a proxy may legitimately change (RFC 9110 §7.6.1), left out of comparisons.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)


@dataclass
class Response:
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    #: Body pieces as they arrived: (time.time(), bytes), chunked framing removed.
    pieces: list[tuple[float, bytes]] = field(default_factory=list)
    #: The body ended as announced (chunked terminator / Content-Length reached / clean close).
    complete: bool = False
    #: What ended the response otherwise (reset, early close, timeout), ``None`` if nothing did.
    error: str | None = None
    sent_at: float = 0.0
    hasher: Any = field(default_factory=hashlib.sha256)
    size: int = 0
    keep_body: bool = True

    @property
    def body(self) -> bytes:
        return b"".join(p for _, p in self.pieces)

    @property
    def sha256(self) -> str:
        return self.hasher.hexdigest()

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def end_to_end_headers(self) -> list[tuple[str, str]]:
        """The headers a proxy must pass on unchanged (hop-by-hop and framing left out)."""
        framing = {"content-length"} if self.header("transfer-encoding") else set()
        return [(k.lower(), v) for k, v in self.headers if k.lower() not in HOP_BY_HOP | framing]

    def _add(self, data: bytes) -> None:
        if data:
            self.hasher.update(data)
            self.size += len(data)
            self.pieces.append((time.time(), data if self.keep_body else b""))


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def fill(self) -> bool:
        data = self.sock.recv(1 << 20)
        if not data:
            return False
        self.buf += data
        return True

    def until(self, sep: bytes) -> bytes:
        while sep not in self.buf:
            if not self.fill():
                raise EOFError(f"connection closed before {sep!r}")
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def take(self, n: int) -> bytes:
        """Up to ``n`` bytes, at least one (what one recv brought)."""
        if not self.buf and not self.fill():
            raise EOFError("connection closed mid-body")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def http_request(
    host: str,
    port: int,
    method: str,
    target: str,
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
    *,
    proxy: bool = False,
    upstream: str | None = None,
    timeout: float = 30.0,
    stop: Callable[[Response], bool] | None = None,
    keep_body: bool = True,
    send_piece: int = 1 << 20,
) -> Response:
    """Send one request on a fresh connection and read the whole response.

    ``proxy``: ``host:port`` is a forward proxy and ``upstream`` (``http://h:p``) the origin.
    ``stop``: called after every body piece; returning ``True`` hangs up at once (an agent that
    disconnects early). ``keep_body=False`` keeps only the hash and size (100 MB bodies).
    """
    resp = Response(keep_body=keep_body)
    hdrs = list(headers or [])
    names = {k.lower() for k, _ in hdrs}
    if "host" not in names:
        hostport = upstream.split("://", 1)[1] if proxy and upstream else f"{host}:{port}"
        hdrs.insert(0, ("Host", hostport))
    if body and "content-length" not in names and "transfer-encoding" not in names:
        hdrs.append(("Content-Length", str(len(body))))
    if "connection" not in names:
        hdrs.append(("Connection", "close"))
    line_target = (upstream.rstrip("/") + target) if proxy and upstream else target
    head = (
        f"{method} {line_target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
    )
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.sendall(head.encode("latin-1"))
        view = memoryview(body)
        for i in range(0, len(body), send_piece):
            sock.sendall(view[i : i + send_piece])
        resp.sent_at = time.time()
        _read_response(_Reader(sock), resp, method, stop)
    except (OSError, EOFError, ValueError) as exc:
        resp.error = f"{type(exc).__name__}: {exc}"
    finally:
        sock.close()
    return resp


def _read_response(
    r: _Reader, resp: Response, method: str, stop: Callable[[Response], bool] | None
) -> None:
    while True:
        head = r.until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        _version, status, *reason = lines[0].split(" ", 2)
        resp.status = int(status)
        resp.reason = reason[0] if reason else ""
        resp.headers = [
            (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
        ]
        if resp.status != 100:
            break
    if method == "HEAD" or resp.status in (204, 304):
        resp.complete = True
        return
    te = (resp.header("transfer-encoding") or "").lower()
    if "chunked" in te:
        while True:
            size_line = r.until(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                r.until(b"\r\n")  # no trailers expected
                resp.complete = True
                return
            left = size
            while left:
                piece = r.take(left)
                left -= len(piece)
                resp._add(piece)
                if stop is not None and stop(resp):
                    resp.error = "client hung up"
                    return
            r.until(b"\r\n")
    clen = resp.header("content-length")
    if clen is not None:
        left = int(clen)
        while left:
            piece = r.take(left)
            left -= len(piece)
            resp._add(piece)
            if stop is not None and stop(resp):
                resp.error = "client hung up"
                return
        resp.complete = True
        return
    while True:  # delimited by close
        if r.buf:
            piece, r.buf = r.buf, b""
            resp._add(piece)
        if not r.fill():
            resp.complete = True
            return
