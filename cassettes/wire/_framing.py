"""Stream framing: decoded body chunks → events, whatever the Content-Type claims.

Four framings occur in LLM traffic (WIRE.md §0): SSE (``data:`` lines, optionally with ``event:``),
NDJSON (Ollama), one incrementally written JSON array (Gemini without ``alt=sse``) and AWS
event-stream binary frames (Bedrock). The framing is sniffed from the bytes, because recorders
and servers mislabel content types. SSE accepts ``\\n``, ``\\r\\n`` and ``\\r`` line endings and
skips comment lines. Each event carries the time offset of the chunk that completed it, so TTFT
and replay pacing can be computed. Nothing here raises on bad input: problems become ``notes``
and an incomplete trailing piece is kept in ``tail``.
"""

from __future__ import annotations

import codecs
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from encodings import utf_8
from typing import Any, Literal

import orjson

from .. import bounds
from ..lazy import pattern

__all__ = [
    "Event",
    "Framed",
    "frame",
    "is_aws_eventstream",
    "parse_aws_eventstream",
    "parse_sse",
    "reseal_aws_eventstream",
]

FramingKind = Literal[
    "empty", "json", "sse", "ndjson", "json_array", "aws_eventstream", "text", "binary"
]
Chunk = tuple[float | None, bytes]


@dataclass
class Event:
    #: The payload: joined ``data:`` lines for SSE, one line for NDJSON, one item for arrays,
    #: the frame payload (decoded as UTF-8) for AWS event-stream.
    data: str
    #: SSE ``event:`` name, or AWS ``:event-type`` header.
    event: str | None = None
    offset: float | None = None
    #: AWS event-stream headers (``:message-type``, ``:event-type``, …).
    headers: dict[str, Any] | None = None

    def json(self) -> Any:
        """The payload parsed as JSON (raises ``orjson.JSONDecodeError``)."""
        return bounds.loads(self.data)


@dataclass
class Framed:
    kind: FramingKind
    events: list[Event] = field(default_factory=list)
    #: The parsed body for ``json``.
    value: Any = None
    #: Data after the last complete event (a cut stream), kept verbatim.
    tail: str = ""
    notes: list[str] = field(default_factory=list)


_EOL = pattern(r"\r\n?|\n")
#: One whole event of the usual shape, read at a line start with no event begun: an optional
#: ``event:`` line, one ``data:`` line, the blank line that dispatches them (LF endings). Its two
#: groups are what :meth:`_SSEParser._line` makes of those lines (one space after the colon
#: dropped), so an event it matches is the one the lines would dispatch.
_WHOLE_EVENT = pattern(r"(?:event: ?([^\n]*)\n)?data: ?([^\n]*)\n\n")


class _SSEParser:
    """Incremental SSE parser (WHATWG event-stream rules, lenient)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._decoder = utf_8.IncrementalDecoder("replace")
        self._buf = ""
        #: Text read after ``_buf`` that holds no line end yet.
        self._pending: list[str] = []
        self._data: list[str] = []
        self._event: str | None = None
        self._has_field = False
        self.replaced = False

    def feed(self, data: bytes, offset: float | None) -> None:
        if data.isascii() and not self._decoder.buffer:
            # (nearly every chunk) what the decoder would return, with nothing to replace
            text = data.decode("ascii")
        else:
            text = self._decoder.decode(data)
            if "\ufffd" in text:
                self.replaced = True
        if not self._has_field and not self._buf and not self._pending and "\r" not in text:
            # A chunk read at a line start, no event begun, no CR: the whole events of the usual
            # shape at its start are read by one match each (the lines, the fields, the dispatch
            # in C), the rest line by line as always. Most chunks are one such event.
            text = self._whole_events(text, offset)
            if not text:
                return
        if "\n" not in text and "\r" not in text and not self._buf.endswith("\r"):
            # No line ends here: keep the piece aside instead of re-copying a growing buffer on
            # every read (a long line in many reads would otherwise cost its length squared).
            self._pending.append(text)
            return
        self._consume(text, offset, final=False)

    def _whole_events(self, text: str, offset: float | None) -> str:
        """Dispatch the events :data:`_WHOLE_EVENT` matches at the start of ``text`` one after
        the other; what follows them."""
        match = _WHOLE_EVENT.match
        m = match(text)
        if m is None:
            return text
        events = self.events
        while m is not None:
            end = m.end()
            name, data = m.groups()
            events.append(Event(data, name, offset))  # (positional: a third of the cost)
            m = match(text, end)
        return text[end:]

    def close(self, offset: float | None) -> str:
        text = self._decoder.decode(b"", final=True)
        self._consume(text, offset, final=True)
        tail = self._buf
        if self._has_field:
            # The stream ended without the blank line that dispatches the last event. Its data
            # lines are complete, so it is dispatched; ``tail`` is only a partial *line*.
            self._dispatch(offset)
        self._buf = ""
        return tail

    def _consume(self, text: str, offset: float | None, final: bool) -> None:
        # Line ends are found by the regex engine, not a Python loop over every character: a
        # 20 MB stream took 15 s that way.
        buf = self._buf + "".join(self._pending) + text if self._pending else self._buf + text
        self._pending = []
        line = self._line
        if "\r" not in buf:  # LF only (nearly every stream): its lines are split at C speed
            *lines, self._buf = buf.split("\n")
            for one in lines:
                line(one, offset)
            return
        start = 0
        n = len(buf)
        for m in _EOL.finditer(buf):
            i = m.start()
            if m.end() - i == 1 and buf[i] == "\r" and i + 1 >= n and not final:
                break  # a CR at the end of the buffer may be the first half of CRLF
            line(buf[start:i], offset)
            start = m.end()
        self._buf = buf[start:]

    def _line(self, line: str, offset: float | None) -> None:
        if not line:
            if self._has_field:
                self._dispatch(offset)
            return
        if line[0] == ":":
            return  # comment / keep-alive (": OPENROUTER PROCESSING")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_field = True
        elif name == "event":
            self._event = value
            self._has_field = True
        elif name in ("id", "retry"):
            self._has_field = True
        elif name == "error" and value.startswith("{"):
            # llama.cpp's server sends a mid-stream error as an ``error: {…}`` line (its
            # server_sent_event(sink, "error", …)): an event named error, its object the data.
            self._event = name
            self._data.append(value)
            self._has_field = True
        else:
            # Not SSE at all (e.g. a raw JSON error line inside the stream): keep it as data.
            self._data.append(line)
            self._has_field = True

    def _dispatch(self, offset: float | None) -> None:
        if self._data or self._event is not None:
            self.events.append(Event(data="\n".join(self._data), event=self._event, offset=offset))
        self._data = []
        self._event = None
        self._has_field = False


def parse_sse(chunks: Sequence[Chunk]) -> Framed:
    p = _SSEParser()
    last: float | None = None
    for t, data in chunks:
        last = t if t is not None else last
        p.feed(data, t)
    tail = p.close(last)
    framed = Framed("sse", p.events, tail=tail)
    if p.replaced:
        framed.notes.append("stream is not valid UTF-8; invalid bytes replaced with U+FFFD")
    return framed


def _lines_with_offsets(
    chunks: Sequence[Chunk],
) -> tuple[list[tuple[str, float | None]], str, bool]:
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    buf = ""
    out: list[tuple[str, float | None]] = []
    replaced = False
    for t, data in chunks:
        text = dec.decode(data)
        replaced = replaced or "\ufffd" in text
        buf += text
        *lines, buf = buf.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        out.extend((ln, t) for ln in lines if ln.strip())
    buf += dec.decode(b"", final=True)
    return out, buf, replaced


def _parse_ndjson(chunks: Sequence[Chunk]) -> Framed:
    lines, tail, replaced = _lines_with_offsets(chunks)
    framed = Framed("ndjson", [Event(data=ln, offset=t) for ln, t in lines])
    if tail.strip():
        # A last line without its newline: complete if it parses, else a cut line.
        try:
            bounds.loads(tail)
            framed.events.append(Event(data=tail, offset=chunks[-1][0] if chunks else None))
        except orjson.JSONDecodeError:
            framed.tail = tail
    if replaced:
        framed.notes.append("stream is not valid UTF-8; invalid bytes replaced with U+FFFD")
    return framed


def _parse_json_array(chunks: Sequence[Chunk], body: bytes) -> Framed:
    """Items of a (possibly cut) JSON array, each with the offset of the chunk that completed it."""
    text = body.decode("utf-8", "replace")
    framed = Framed("json_array")
    # Map character positions back to chunk offsets.
    bounds: list[tuple[int, float | None]] = []
    pos = 0
    for t, data in chunks:
        pos += len(data.decode("utf-8", "replace"))
        bounds.append((pos, t))
    import json

    dec = json.JSONDecoder()
    i = text.index("[") + 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            framed.notes.append("JSON array stream has no closing ']'")
            break
        if text[i] == "]":
            break
        try:
            _, end = dec.raw_decode(text, i)
        except ValueError:
            framed.tail = text[i:]
            break
        off = next((t for p, t in bounds if p >= end), bounds[-1][1] if bounds else None)
        framed.events.append(Event(data=text[i:end], offset=off))
        i = end
    return framed


_PRELUDE = struct.Struct(">III")


def parse_aws_eventstream(chunks: Sequence[Chunk]) -> Framed:
    """AWS event-stream binary frames (Bedrock). CRCs are checked; a bad or cut frame ends
    parsing."""
    framed = Framed("aws_eventstream")
    buf = b""
    for n, (t, data) in enumerate(chunks):
        buf += data
        while len(buf) >= 12:
            total, hlen, pcrc = _PRELUDE.unpack_from(buf)
            if zlib.crc32(buf[:8]) != pcrc or total < 16 or hlen > total - 16:
                framed.notes.append(
                    "AWS event-stream prelude CRC mismatch; rest of the stream kept raw"
                )
                # The rest of the stream: what is buffered *and* the chunks not read yet.
                framed.tail = (buf + b"".join(c for _, c in chunks[n + 1 :])).hex()
                return framed
            if len(buf) < total:
                break
            frame, buf = buf[:total], buf[total:]
            if zlib.crc32(frame[:-4]) != struct.unpack(">I", frame[-4:])[0]:
                framed.notes.append("AWS event-stream message CRC mismatch")
            headers = _aws_headers(frame[12 : 12 + hlen])
            payload = frame[12 + hlen : -4]
            framed.events.append(
                Event(
                    data=payload.decode("utf-8", "replace"),
                    event=str(headers.get(":event-type") or headers.get(":exception-type") or "")
                    or None,
                    offset=t,
                    headers=headers,
                )
            )
    if buf:
        framed.tail = buf.hex()
        framed.notes.append(f"AWS event-stream ends inside a frame ({len(buf)} bytes)")
    return framed


def is_aws_eventstream(head: bytes) -> bool:
    """The bytes start with a valid AWS event-stream prelude (its CRC checks out)."""
    if len(head) < 12:
        return False
    total, hlen, pcrc = _PRELUDE.unpack_from(head)
    return bool(zlib.crc32(head[:8]) == pcrc and total >= 16 and hlen <= total - 16)


def reseal_aws_eventstream(data: bytes) -> bytes:
    """Recompute every frame's message CRC (after a same-length edit of the payload)."""
    out = bytearray(data)
    pos = 0
    while pos + 12 <= len(out):
        total, _hlen, pcrc = _PRELUDE.unpack_from(out, pos)
        if zlib.crc32(bytes(out[pos : pos + 8])) != pcrc or total < 16 or pos + total > len(out):
            break
        struct.pack_into(">I", out, pos + total - 4, zlib.crc32(bytes(out[pos : pos + total - 4])))
        pos += total
    return bytes(out)


def _aws_headers(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    try:
        while i < len(raw):
            nlen = raw[i]
            name = raw[i + 1 : i + 1 + nlen].decode("utf-8", "replace")
            i += 1 + nlen
            typ = raw[i]
            i += 1
            value: Any
            if typ in (0, 1):
                value = typ == 0
            elif typ == 2:
                value = raw[i]
                i += 1
            elif typ == 3:
                value = struct.unpack_from(">h", raw, i)[0]
                i += 2
            elif typ == 4:
                value = struct.unpack_from(">i", raw, i)[0]
                i += 4
            elif typ in (5, 8):
                value = struct.unpack_from(">q", raw, i)[0]
                i += 8
            elif typ in (6, 7):
                ln = struct.unpack_from(">H", raw, i)[0]
                i += 2
                b = raw[i : i + ln]
                value = b.decode("utf-8", "replace") if typ == 7 else b.hex()
                i += ln
            elif typ == 9:
                value = raw[i : i + 16].hex()
                i += 16
            else:
                break
            out[name] = value
    except (IndexError, struct.error):
        pass
    return out


_SSE_STARTS = (b"data:", b"event:", b":", b"id:", b"retry:")


def frame(chunks: Sequence[Chunk], content_type: str | None = None) -> Framed:
    """Sniff the framing of a decoded body and split it into events (never raises)."""
    body = b"".join(c for _, c in chunks)
    stripped = body.lstrip()
    ctype = (content_type or "").lower()
    if not stripped:
        return Framed("empty")
    if "amazon.eventstream" in ctype or (
        len(body) >= 12 and zlib.crc32(body[:8]) == _PRELUDE.unpack_from(body)[2]
    ):
        return parse_aws_eventstream(chunks)
    if stripped.startswith(_SSE_STARTS):
        return parse_sse(chunks)
    if stripped[:1] in (b"{", b"["):
        try:
            value = bounds.loads(body)
        except orjson.JSONDecodeError:
            value = _NOT_JSON
        if value is not _NOT_JSON:
            if isinstance(value, list):
                if len(chunks) > 1:
                    return _parse_json_array(chunks, body)
                off = chunks[-1][0]
                items = [Event(data=orjson.dumps(v).decode(), offset=off) for v in value]
                return Framed("json_array", items, value=value)
            return Framed("json", value=value)
        if stripped[:1] == b"[":
            return _parse_json_array(chunks, body)
        nd = _parse_ndjson(chunks)
        if nd.events and _is_object(nd.events[0].data):
            # NDJSON lines are objects; a JSON body cut after a newline (pretty-printed, or one
            # that ended in "\n") is not NDJSON just because it has lines.
            return nd
        return Framed(
            "text",
            tail=body.decode("utf-8", "replace"),
            notes=["body looks like JSON but does not parse"],
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Framed("binary", notes=[f"binary body ({len(body)} bytes)"])
    return Framed("text", tail=text)


_NOT_JSON: Any = object()


def _is_object(data: str) -> bool:
    try:
        return isinstance(bounds.loads(data), dict)
    except orjson.JSONDecodeError:
        return False
