"""mitmproxy flow files (``mitmdump -w flows.mitm``, mitmweb's "Save") → exchanges, without
mitmproxy.

**The container** is a sequence of *tnetstrings*, one per flow. A tnetstring is
``<length>:<payload><tag>``, the length in ASCII decimal and the tag one byte naming the type:
``,`` bytes, ``;`` UTF-8 text, ``#`` integer, ``^`` float, ``!`` boolean (``true``/``false``),
``~`` null (empty payload), ``]`` list (the payload is the items, back to back) and ``}`` dict
(keys and values alternating).

**A flow** is the state dict mitmproxy's ``Flow.get_state()`` writes: ``version`` (the flow format
version: 20 for mitmproxy 10, 21 for 11 and 12; older files carry smaller numbers or a tuple),
``type`` (``http``, ``tcp``, ``udp``, ``dns``), ``error`` (``{"msg", "timestamp"}`` or null),
``timestamp_created``, the two connections, and for HTTP ``request`` and ``response``: each a dict
with ``http_version``, ``headers`` (a list of ``[name, value]`` byte pairs), ``content`` (the body
as it crossed the wire, still Content-Encoded; null when the body was streamed and not kept),
``trailers``, ``timestamp_start`` / ``timestamp_end``; the request also ``method``, ``scheme``,
``host``, ``port``, ``authority``, ``path``; the response ``status_code`` and ``reason``. Dict keys
are text in current files and bytes in very old ones; both are read.

**Conversion.** Each HTTP flow becomes one :class:`~cassettes.wire.Exchange`: the URL as
mitmproxy shows it (scheme, host, port unless the default, path), bodies decoded from their
Content-Encoding, ``started`` / ``ttfb`` / ``duration`` from the message timestamps. A flow file
keeps a streamed body whole, without chunk times, so an SSE body is split back into its events
(NDJSON into its lines) with unknown offsets: the stream reassembles as it did on the wire, it
cannot be replayed at recorded pace. Other flow types (TCP, UDP, DNS) are skipped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..lazy import pattern
from ..wire import Exchange, Headers, decode_exchange, header

# FlowFile, load_flows and read_flows are the storage layer's reading of a flow file: a run is read
# with cassettes.open_run, which takes a flow file too.
__all__ = ["is_flow_file", "tnetstring_pop"]

#: The newest flow format version whose layout this reader was written against (mitmproxy 11/12).
KNOWN_VERSION = 21
#: The oldest one with the layout read here (text keys, ``http_version``/``authority`` fields).
OLDEST_VERSION = 7

_MAX_LEN_DIGITS = 12
#: A flow dump opens with a dict's length and its first key's length: ``2959:4:type;…``.
_LEADING = re.compile(rb"\d{1,12}:\d{1,12}:")


class TNetStringError(ImportFormatError):
    """The bytes are not a well-formed tnetstring."""


def _length(data: memoryview, pos: int) -> tuple[int, int]:
    """``(length, position after the colon)`` of the tnetstring starting at ``pos``."""
    end = pos
    limit = min(len(data), pos + _MAX_LEN_DIGITS + 1)
    while end < limit and 0x30 <= data[end] <= 0x39:
        end += 1
    if end == pos or end >= len(data) or data[end] != 0x3A:
        raise TNetStringError(f"not a tnetstring: no length prefix at byte {pos}")
    return int(bytes(data[pos:end])), end + 1


def tnetstring_pop(data: memoryview, pos: int = 0) -> tuple[Any, int]:
    """Parse one tnetstring at ``pos``; ``(value, position after it)``. Text (``;``) comes back as
    ``str``, bytes (``,``) as ``bytes``."""
    n, start = _length(data, pos)
    end = start + n
    if end >= len(data):
        raise TNetStringError(f"tnetstring at byte {pos} claims {n} bytes but the data ends first")
    tag = data[end]
    payload = data[start:end]
    if tag == 0x2C:  # ,
        return bytes(payload), end + 1
    if tag == 0x3B:  # ;
        try:
            return str(payload, "utf-8"), end + 1
        except UnicodeDecodeError:
            raise TNetStringError(f"text at byte {pos} is not UTF-8") from None
    if tag == 0x23:  # #
        try:
            return int(bytes(payload)), end + 1
        except ValueError:
            raise TNetStringError(f"bad integer at byte {pos}: {bytes(payload)[:20]!r}") from None
    if tag == 0x5E:  # ^
        try:
            return float(bytes(payload)), end + 1
        except ValueError:
            raise TNetStringError(f"bad float at byte {pos}: {bytes(payload)[:20]!r}") from None
    if tag == 0x21:  # !
        if bytes(payload) in (b"true", b"false"):
            return bytes(payload) == b"true", end + 1
        raise TNetStringError(f"bad boolean at byte {pos}: {bytes(payload)[:20]!r}")
    if tag == 0x7E:  # ~
        if n:
            raise TNetStringError(f"null with a payload at byte {pos}")
        return None, end + 1
    if tag == 0x5D:  # ]
        items: list[Any] = []
        p = start
        while p < end:
            item, p = tnetstring_pop(data[:end], p)
            items.append(item)
        return items, end + 1
    if tag == 0x7D:  # }
        d: dict[Any, Any] = {}
        p = start
        while p < end:
            key, p = tnetstring_pop(data[:end], p)
            if p >= end:
                raise TNetStringError(f"dict at byte {pos} has a key without a value")
            value, p = tnetstring_pop(data[:end], p)
            if isinstance(key, bytes):
                key = key.decode("utf-8", "surrogateescape")
            if not isinstance(key, str):
                raise TNetStringError(f"dict at byte {pos} has a {type(key).__name__} key")
            d[key] = value
        return d, end + 1
    raise TNetStringError(f"unknown tnetstring type tag {chr(tag)!r} at byte {end}")


def is_flow_file(head: bytes) -> bool:
    """The bytes start like a tnetstring dict (a flow dump), not like YAML or JSON."""
    return _LEADING.match(head) is not None


@dataclass
class FlowFile:
    exchanges: list[Exchange] = field(default_factory=list)
    #: Flows that are not HTTP (by type) and were skipped.
    skipped: dict[str, int] = field(default_factory=dict)
    versions: set[int] = field(default_factory=set)


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return "" if v is None else str(v)


def _headers(raw: Any) -> Headers:
    out: Headers = []
    for item in raw or []:
        if isinstance(item, (list, tuple)) and len(item) == 2:
            out.append((_text(item[0]), _text(item[1])))
    return out


def _url(req: dict[str, Any]) -> str:
    scheme = _text(req.get("scheme")) or "http"
    host = _text(req.get("host")) or _text(req.get("authority"))
    port = req.get("port")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if not isinstance(port, int) or port == default else f"{host}:{port}"
    path = _text(req.get("path")) or "/"
    if not path.startswith("/") and path != "*":  # "*" is OPTIONS' asterisk form
        path = "/" + path
    return f"{scheme}://{netloc}{path}"


_SSE_SPLIT = pattern(rb"(?<=\r\n\r\n)|(?<=\n\n)|(?<=\r\r)")


def _split_stream(body: bytes, content_type: str | None) -> list[bytes]:
    """A whole streamed body back into pieces: SSE into events, NDJSON into lines."""
    ctype = (content_type or "").lower()
    if "text/event-stream" in ctype:
        return [p for p in _SSE_SPLIT.split(body) if p]
    if "ndjson" in ctype or "jsonl" in ctype or "x-json-stream" in ctype:
        return [p for p in body.splitlines(keepends=True) if p]
    return [body] if body else []


def _version(flow: dict[str, Any]) -> int:
    v = flow.get("version")
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        raise ImportFormatError(
            f"flow format version {'.'.join(map(str, v))} (mitmproxy "
            f"{v[0]}.{v[1] if len(v) > 1 else 0}) is too old to import; open the file in a current "
            "mitmproxy and save it again"
        )
    raise ImportFormatError("not a mitmproxy flow: it has no flow format version")


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _exchange(flow: dict[str, Any], index: int, version: int) -> Exchange:
    req = flow.get("request")
    if not isinstance(req, dict):
        raise ImportFormatError(f"flow {index} is an HTTP flow without a request")
    ex = Exchange(
        method=_text(req.get("method")).upper() or "GET",
        url=_url(req),
        request_headers=_headers(req.get("headers")),
    )
    ex.started = _number(req.get("timestamp_start"))
    _request_body(ex, req)
    if version > KNOWN_VERSION:
        ex.notes.append(
            f"flow format version {version} is newer than the {KNOWN_VERSION} "
            "this importer knows; read leniently"
        )
    resp = flow.get("response")
    err = flow.get("error")
    if isinstance(err, dict) and err.get("msg"):
        ex.transport_error = _text(err.get("msg"))
    if not isinstance(resp, dict):
        if not ex.transport_error:
            ex.notes.append("mitmproxy flow has no response")
        return ex
    _response(ex, resp)
    return ex


def _request_body(ex: Exchange, req: dict[str, Any]) -> None:
    """The request body, its Content-Encoding removed (or a note that mitmproxy did not keep it)."""
    content = req.get("content")
    if (
        content is None
        and req.get("timestamp_end") is not None
        and header(ex.request_headers, "content-length") not in (None, "0")
    ):
        ex.notes.append("request body was streamed by mitmproxy and not kept in the flow file")
    ex.request_body = (
        content if isinstance(content, bytes) else _text(content).encode() if content else b""
    )
    ex.request_encoded = True
    decode_exchange(ex)


def _response(ex: Exchange, resp: dict[str, Any]) -> None:
    """Status, headers, timings and the body (decoded, a stream split into its events)."""
    code = resp.get("status_code")
    ex.status = code if isinstance(code, int) and not isinstance(code, bool) else None
    ex.reason = _text(resp.get("reason")) or None
    ex.response_headers = _headers(resp.get("headers"))
    r0, r1 = _number(resp.get("timestamp_start")), _number(resp.get("timestamp_end"))
    if ex.started is not None:
        if r0 is not None:
            ex.ttfb = max(r0 - ex.started, 0.0)
        if r1 is not None:
            ex.duration = max(r1 - ex.started, 0.0)
    raw = resp.get("content")
    if raw is None:
        ex.notes.append("response body was streamed by mitmproxy and not kept in the flow file")
        return
    ex.response_chunks = [(None, raw if isinstance(raw, bytes) else _text(raw).encode())]
    ex.response_encoded = True
    decode_exchange(ex)
    whole = b"".join(c for _, c in ex.response_chunks)
    ex.response_chunks = [
        (None, piece) for piece in _split_stream(whole, header(ex.response_headers, "content-type"))
    ]


def read_flows(data: bytes, name: str = "<flows>") -> FlowFile:
    """Every HTTP flow of a flow dump, as exchanges. Raises :class:`ImportFormatError` when the
    bytes are not a flow dump; a dump cut short keeps the flows before the cut and says so."""
    out = FlowFile()
    view = memoryview(data)
    pos = 0
    index = 0
    while pos < len(data):
        if data[pos : pos + 1] in (b"\n", b"\r", b" "):
            pos += 1
            continue
        try:
            flow, pos = tnetstring_pop(view, pos)
        except TNetStringError as exc:
            if index == 0:
                raise ImportFormatError(f"{name}: not a mitmproxy flow file ({exc})") from None
            if out.exchanges:
                out.exchanges[-1].notes.append(
                    "the flow file is cut or damaged after this "
                    f"flow ({exc}); the rest was not read"
                )
            else:
                raise ImportFormatError(f"{name}: damaged after flow {index - 1}: {exc}") from None
            break
        except RecursionError:
            raise ImportFormatError(
                f"{name}: flow {index} is nested too deeply to be a mitmproxy flow"
            ) from None
        if not isinstance(flow, dict):
            raise ImportFormatError(f"{name}: item {index} is a {type(flow).__name__}, not a flow")
        version = _version(flow)
        if version < OLDEST_VERSION:
            raise ImportFormatError(
                f"{name}: flow format version {version} is too old to import; open the file in a "
                "current mitmproxy and save it again"
            )
        out.versions.add(version)
        kind = _text(flow.get("type")) or "http"
        if kind != "http":
            out.skipped[kind] = out.skipped.get(kind, 0) + 1
        else:
            ex = _exchange(flow, index, version)
            if flow.get("websocket"):
                ex.notes.append(
                    "the connection was upgraded to a WebSocket; its messages are not imported"
                )
            out.exchanges.append(ex)
        index += 1
    return out


def load_flows(path: str | Path) -> FlowFile:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise ImportFormatError(f"{p}: empty file, no flows")
    return read_flows(data, str(p))
