"""Content-Encoding removal, chunk by chunk, trusting the bytes over the header.

Real traffic lies: recorders keep ``Content-Encoding: gzip`` on bodies they already decoded, and
some keep gzip bodies without the header. The magic bytes decide (gzip ``1f 8b``, zstd
``28 b5 2f fd``, zlib ``78 ..``); brotli has no magic, so it is trusted from the header and checked
by decoding. When decoding fails the original bytes are kept untouched and a note says why: no
data is ever lost to a decoder.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

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


def _decoder(encoding: str) -> Callable[[bytes], bytes] | None:
    """An incremental decoder for ``encoding``: feed chunks, get decoded bytes (maybe empty)."""
    if encoding in ("gzip", "x-gzip"):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return d.decompress
    if encoding == "deflate":
        return _deflate()
    if encoding == "br":
        import brotli

        b = brotli.Decompressor()
        return b.process  # type: ignore[no-any-return]
    if encoding == "zstd":
        import zstandard

        z = zstandard.ZstdDecompressor().decompressobj()
        return z.decompress  # type: ignore[no-any-return]
    return None


def _deflate() -> Callable[[bytes], bytes]:
    state: dict[str, zlib._Decompress] = {}

    def feed(data: bytes) -> bytes:
        if "d" not in state:
            wbits = zlib.MAX_WBITS if sniff_encoding(data[:2]) == "deflate" else -zlib.MAX_WBITS
            state["d"] = zlib.decompressobj(wbits)
        return state["d"].decompress(data)

    return feed


def decode_chunks(chunks: Sequence[Chunk], content_encoding: str | None) -> DecodeResult:
    """Remove the content encoding from ``chunks``, keeping chunk boundaries and offsets."""
    declared = [e.strip().lower() for e in (content_encoding or "").split(",") if e.strip()]
    declared = [e for e in declared if e != "identity"]
    head = next((c for _, c in chunks if c), b"")
    sniffed = sniff_encoding(head[:4])
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
    feed = _decoder(enc)
    if feed is None:
        notes.append(f"unknown Content-Encoding {enc!r}; body kept as received")
        return DecodeResult(list(chunks), None, notes)
    out: list[Chunk] = []
    total = 0
    try:
        for t, data in chunks:
            piece = feed(data) if data else b""
            total += len(piece)
            if total > MAX_DECODED_BYTES:
                notes.append(f"{enc} body decodes to over {MAX_DECODED_BYTES} bytes; kept compressed")
                return DecodeResult(list(chunks), None, notes)
            out.append((t, piece))
    except Exception as exc:  # any decoder failure: keep the original bytes
        notes.append(f"Content-Encoding {enc} could not be decoded ({type(exc).__name__}: {exc}); kept as received")
        return DecodeResult(list(chunks), None, notes)
    return DecodeResult(out, enc, notes)
