"""Content-Encoding removal, chunk by chunk, trusting the bytes over the header.

Real traffic lies: recorders keep ``Content-Encoding: gzip`` on bodies they already decoded, and
some keep gzip bodies without the header. The magic bytes decide (gzip ``1f 8b``, zstd
``28 b5 2f fd``, zlib ``78 ..``); brotli has no magic, so it is trusted from the header and checked
by decoding. When decoding fails the original bytes are kept untouched and a note says why: no
data is ever lost to a decoder.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cassettes.wire.exchange import Exchange

__all__ = ["MAX_DECODED_BYTES", "DecodeResult", "decode_chunks", "sniff_encoding"]

#: Decompression stops here (a compression bomb guard); the raw bytes are kept instead.
MAX_DECODED_BYTES = 1 << 30

Chunk = tuple[float | None, bytes]


@dataclass
class DecodeResult:
    chunks: list[Chunk]
    decoded_from: str | None = None
    notes: list[str] = field(default_factory=list)


def sniff_encoding(head: bytes) -> str | None:
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    if len(head) >= 2 and head[0] == 0x78 and (head[0] * 256 + head[1]) % 31 == 0:
        return "deflate"
    return None


class _Decoder:
    """An incremental decoder: ``feed`` chunks, get decoded bytes (maybe empty).

    ``finished`` says whether the compressed stream reached its end: a body cut in transit decodes
    to a prefix, and that must be said, not passed off as the whole body. Concatenated gzip members
    and zstd frames (both legal) are all decoded; other bytes after the end are an error.
    """

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.finished = False
        self._d: Any = None
        #: Deflate: bytes held until two have arrived (zlib-wrapped or raw is told by the first two).
        self._pending = b""

    def _new(self, data: bytes) -> Any:
        if self.encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.encoding == "deflate":
            return zlib.decompressobj(zlib.MAX_WBITS if sniff_encoding(data[:2]) == "deflate" else -zlib.MAX_WBITS)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def feed(self, data: bytes) -> bytes:
        if self.encoding == "br":
            if self._d is None:
                import brotli

                self._d = brotli.Decompressor()
            out = self._d.process(data)
            self.finished = bool(self._d.is_finished())
            return out  # type: ignore[no-any-return]
        pieces: list[bytes] = []
        if self.encoding == "deflate" and self._d is None and not self.finished and len(self._pending + data) < 2:
            self._pending += data
            return b""
        data, self._pending = self._pending + data, b""
        while data:
            if self._d is None:
                self._d = self._new(data)
                self.finished = False
            pieces.append(self._d.decompress(data))
            data = b""
            if self._d.eof:
                self.finished = True
                data = self._d.unused_data
                if data and self.encoding == "deflate":
                    raise ValueError(f"{len(data)} bytes after the end of the deflate stream")
                self._d = None  # the next gzip member / zstd frame, if any
        return b"".join(pieces)


def _head(chunks: Sequence[Chunk], n: int) -> bytes:
    """The first ``n`` bytes of the body, however it is chunked."""
    out = b""
    for _, c in chunks:
        out += c[: n - len(out)]
        if len(out) >= n:
            break
    return out


def _decoder(encoding: str) -> _Decoder | None:
    if encoding in ("gzip", "x-gzip", "deflate", "br", "zstd"):
        return _Decoder(encoding)
    return None


def decode_chunks(chunks: Sequence[Chunk], content_encoding: str | None) -> DecodeResult:
    """Remove the content encoding from ``chunks``, keeping chunk boundaries and offsets."""
    declared = [e.strip().lower() for e in (content_encoding or "").split(",") if e.strip()]
    declared = [e for e in declared if e != "identity"]
    head = _head(chunks, 4)  # across chunks: a stream's first read can be a single byte
    sniffed = sniff_encoding(head)
    notes: list[str] = []
    if not declared:
        if sniffed in ("gzip", "zstd"):
            notes.append(f"body is {sniffed}-compressed without a Content-Encoding header; decoded")
            declared = [sniffed]
        else:
            return DecodeResult(list(chunks))
    if len(declared) > 1:
        # Stacked encodings are applied in order; decode the outermost first.
        result = DecodeResult(list(chunks))
        for enc in reversed(declared):
            step = decode_chunks(result.chunks, enc)
            result.notes.extend(step.notes)
            if step.decoded_from is None:
                return result
            result.chunks = step.chunks
            result.decoded_from = ",".join(declared)
        return result
    enc = declared[0]
    if enc in ("gzip", "x-gzip", "zstd") and sniffed != ("gzip" if enc == "x-gzip" else enc):
        if head:
            notes.append(f"Content-Encoding says {enc} but the body is not {enc}; kept as received")
        return DecodeResult(list(chunks), None, notes)
    dec = _decoder(enc)
    if dec is None:
        notes.append(f"unknown Content-Encoding {enc!r}; body kept as received")
        return DecodeResult(list(chunks), None, notes)
    out: list[Chunk] = []
    total = 0
    try:
        for t, data in chunks:
            piece = dec.feed(data) if data else b""
            total += len(piece)
            if total > MAX_DECODED_BYTES:
                notes.append(f"{enc} body decodes to over {MAX_DECODED_BYTES} bytes; kept compressed")
                return DecodeResult(list(chunks), None, notes)
            out.append((t, piece))
    except Exception as exc:  # any decoder failure: keep the original bytes
        notes.append(f"Content-Encoding {enc} could not be decoded ({type(exc).__name__}: {exc}); kept as received")
        return DecodeResult(list(chunks), None, notes)
    if not dec.finished and head:
        if total == 0:
            notes.append(f"{enc} body is cut before any of it could be decoded; kept as received")
            return DecodeResult(list(chunks), None, notes)
        notes.append(f"{enc} body is cut short (its compressed stream has no end); the {total} bytes decoded are kept")
    return DecodeResult(out, enc, notes)


def decode_exchange(ex: Exchange) -> None:
    """Remove the Content-Encoding from the sides of an exchange that still carry it
    (``request_encoded`` / ``response_encoded``), in place, keeping chunk boundaries and offsets;
    a body that cannot be decoded is kept as received, with a note. Idempotent: a decoded side is
    marked so, and left alone the next time."""
    if ex.request_encoded:
        ex.request_encoded = False
        if ex.request_body:
            dec = decode_chunks([(0.0, ex.request_body)], ex.request_header("content-encoding"))
            ex.request_body = b"".join(c for _, c in dec.chunks)
            ex.forget_request_json()
            ex.notes.extend(f"request: {n}" for n in dec.notes)
    if ex.response_encoded:
        ex.response_encoded = False
        if ex.response_chunks:
            dec = decode_chunks(ex.response_chunks, ex.response_header("content-encoding"))
            ex.response_chunks = [c for c in dec.chunks if c[1]]
            ex.decoded_from = dec.decoded_from
            ex.notes.extend(dec.notes)
