"""Content-Encoding removal, chunk by chunk, trusting the bytes over the header, within one budget.

Real traffic lies: recorders keep ``Content-Encoding: gzip`` on bodies they already decoded, and
some keep gzip bodies without the header. The magic bytes decide (gzip ``1f 8b``, zstd
``28 b5 2f fd``, zlib ``78 ..``); brotli has no magic, so it is trusted from the header and checked
by decoding. When decoding fails the original bytes are kept untouched and a note says why: no
data is ever lost to a decoder.

**The decompression budget.** A few kilobytes of gzip, brotli or zstd can stand for gigabytes
(a decompression bomb), so every decoder here is incremental and capped as it goes: no call
returns more than the room left under :data:`cassettes.bounds.MAX_DECODED_BYTES` (plus one
brotli buffer), for each encoding and for each layer of stacked encodings (``gzip, br``). A body
that decompresses past it is kept compressed, exactly as received, with a note saying so. gzip
and deflate use zlib's ``max_length``; brotli its ``output_buffer_limit`` (brotli ≥ 1.2), or, with
an older brotli, one input byte at a time (a byte ends at most one 16 MiB meta-block); zstd is fed
small slices (one block, at most 128 KiB of output, takes at least four input bytes) with the
window RFC 9659 allows for HTTP (8 MiB). The recorder, the importers (vcrpy, mitmproxy flows),
the replay server and ``verify``'s look inside broken bodies (:func:`salvage`) all decode here.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..bounds import MAX_DECODED_BYTES
from ._exchange import Exchange

__all__ = [
    "CUT_SHORT",
    "OverBudget",
    "body_cut",
    "decode_chunks",
    "salvage",
]

Chunk = tuple[float | None, bytes]

#: zstd input fed per call: a block of at most 128 KiB output costs at least 4 bytes (an RLE
#: block), so one call yields at most about 16 MiB.
_ZSTD_SLICE = 512
#: The largest zstd window accepted (RFC 9659: HTTP's zstd decoders need no more than 8 MiB).
_ZSTD_WINDOW = 8 << 20


#: What the note on a body whose compressed stream has no end says (the body decoded is a prefix).
CUT_SHORT = "body is cut short"


def body_cut(transport_error: str | None, notes: Sequence[str]) -> bool:
    """Whether a response's body ends before its end: cut in transit (``transport_error``) or a
    compressed stream without its end (a note says :data:`CUT_SHORT`)."""
    return transport_error is not None or any(CUT_SHORT in n for n in notes)


class OverBudget(ValueError):
    """The body decompresses past the budget; decoding stopped there."""


def over_budget_note(enc: str, limit: int = MAX_DECODED_BYTES) -> str:
    return (
        f"{enc} body decompresses past {limit / (1 << 20):g} MiB (looptap's decompression budget); "
        "kept compressed, as received"
    )


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


def brotli_limits() -> bool:
    """Whether the installed brotli caps one call's output (``output_buffer_limit``, brotli ≥
    1.2)."""
    import brotli

    return hasattr(brotli.Decompressor(), "can_accept_more_data")


class Decoder:
    """An incremental decoder: ``feed`` chunks, get decoded bytes (maybe empty); raises
    :class:`OverBudget` as soon as the output passes ``budget`` bytes in all.

    ``finished`` says whether the compressed stream reached its end: a body cut in transit decodes
    to a prefix, and that must be said, not passed off as the whole body. Concatenated gzip members
    and zstd frames (both legal) are all decoded; other bytes after the end are an error.
    """

    def __init__(self, encoding: str, budget: int = MAX_DECODED_BYTES) -> None:
        self.encoding = encoding
        self.budget = budget
        self.total = 0
        self.finished = False
        self._d: Any = None
        #: Deflate: bytes held until two have arrived (zlib-wrapped or raw is told by the first
        #: two).
        self._pending = b""
        self._br_limits = False
        self.partial: list[bytes] = []

    def _count(self, out: bytes, pieces: list[bytes]) -> None:
        self.total += len(out)
        if out:
            pieces.append(out)
        if self.total > self.budget:
            raise OverBudget(over_budget_note(self.encoding, self.budget))

    def _room(self) -> int:
        return self.budget - self.total + 1  # one byte over tells "past the budget" from "exactly"

    def _new(self, data: bytes) -> Any:
        if self.encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.encoding == "deflate":
            return zlib.decompressobj(
                zlib.MAX_WBITS if sniff_encoding(data[:2]) == "deflate" else -zlib.MAX_WBITS
            )
        import zstandard

        return zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW).decompressobj()

    def feed(self, data: bytes) -> bytes:
        pieces: list[bytes] = []
        self.partial = pieces  # what this call decoded before it raised, if it does
        if self.encoding == "br":
            self._feed_brotli(data, pieces)
            return b"".join(pieces)
        if (
            self.encoding == "deflate"
            and self._d is None
            and not self.finished
            and len(self._pending + data) < 2
        ):
            self._pending += data
            return b""
        data, self._pending = self._pending + data, b""
        zstd = self.encoding == "zstd"
        while data:
            if self._d is None:
                self._d = self._new(data)
                self.finished = False
            if zstd:
                piece, data = data[:_ZSTD_SLICE], data[_ZSTD_SLICE:]
                self._count(self._d.decompress(piece), pieces)
            else:
                self._count(self._d.decompress(data, self._room()), pieces)
                data = self._d.unconsumed_tail
            if self._d.eof:
                self.finished = True
                rest = self._d.unused_data
                if rest and self.encoding == "deflate":
                    raise ValueError(
                        f"{len(rest) + len(data)} bytes after the end of the deflate stream"
                    )
                data = rest + data if zstd else rest
                self._d = None  # the next gzip member / zstd frame, if any
        return b"".join(pieces)

    def _feed_brotli(self, data: bytes, pieces: list[bytes]) -> None:
        if self._d is None:
            import brotli

            self._d = brotli.Decompressor()
            self._br_limits = brotli_limits()
        d = self._d
        if self._br_limits:
            self._count(d.process(data, output_buffer_limit=self._room()), pieces)
            while not d.is_finished():  # output held back by the limit: drain it, within budget
                more = d.process(b"", output_buffer_limit=self._room())
                self._count(more, pieces)
                if not more and d.can_accept_more_data():
                    break
        else:
            for i in range(len(data)):
                self._count(d.process(data[i : i + 1]), pieces)
        self.finished = bool(d.is_finished())


def _head(chunks: Sequence[Chunk], n: int) -> bytes:
    """The first ``n`` bytes of the body, however it is chunked."""
    out = b""
    for _, c in chunks:
        out += c[: n - len(out)]
        if len(out) >= n:
            break
    return out


def _decoder(encoding: str, budget: int = MAX_DECODED_BYTES) -> Decoder | None:
    if encoding in ("gzip", "x-gzip", "deflate", "br", "zstd"):
        return Decoder(encoding, budget)
    return None


def decode_chunks(
    chunks: Sequence[Chunk], content_encoding: str | None, budget: int = MAX_DECODED_BYTES
) -> DecodeResult:
    """Remove the content encoding from ``chunks``, keeping chunk boundaries and offsets. Each
    layer decodes to at most ``budget`` bytes; past it the body is kept as received, with a note."""
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
        return _decode_stacked(chunks, declared, budget)
    return _decode_one(chunks, declared[0], head, sniffed, notes, budget)


def _decode_stacked(chunks: Sequence[Chunk], declared: list[str], budget: int) -> DecodeResult:
    """Stacked encodings are applied in order; decode the outermost first. A layer kept whole
    keeps the whole body as received (the header still says what it is)."""
    result = DecodeResult(list(chunks))
    for enc in reversed(declared):
        step = decode_chunks(result.chunks, enc, budget)
        result.notes.extend(step.notes)
        if step.decoded_from is None:
            return DecodeResult(list(chunks), None, result.notes)
        result.chunks = step.chunks
        result.decoded_from = ",".join(declared)
    return result


def _decode_one(
    chunks: Sequence[Chunk],
    enc: str,
    head: bytes,
    sniffed: str | None,
    notes: list[str],
    budget: int,
) -> DecodeResult:
    """One encoding removed; a body that is not what the header says, an unknown encoding, a
    decoder failure or a body over ``budget`` is kept as received, with a note."""
    if enc in ("gzip", "x-gzip", "zstd") and sniffed != ("gzip" if enc == "x-gzip" else enc):
        if head:
            notes.append(f"Content-Encoding says {enc} but the body is not {enc}; kept as received")
        return DecodeResult(list(chunks), None, notes)
    dec = _decoder(enc, budget)
    if dec is None:
        notes.append(f"unknown Content-Encoding {enc!r}; body kept as received")
        return DecodeResult(list(chunks), None, notes)
    out: list[Chunk] = []
    try:
        for t, data in chunks:
            out.append((t, dec.feed(data) if data else b""))
    except OverBudget as exc:
        notes.append(str(exc))
        return DecodeResult(list(chunks), None, notes)
    except Exception as exc:  # any decoder failure: keep the original bytes
        notes.append(
            f"Content-Encoding {enc} could not be decoded ({type(exc).__name__}: "
            f"{exc}); kept as received"
        )
        return DecodeResult(list(chunks), None, notes)
    total = dec.total
    if not dec.finished and head:
        if total == 0:
            notes.append(f"{enc} body is cut before any of it could be decoded; kept as received")
            return DecodeResult(list(chunks), None, notes)
        notes.append(
            f"{enc} {CUT_SHORT} (its compressed stream "
            f"has no end); the {total} bytes decoded are kept"
        )
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


def salvage(data: bytes, limit: int = MAX_DECODED_BYTES) -> bytes:
    """Whatever of a broken or unlabelled compressed body can be decoded (gzip with a bad CRC or
    followed by junk, raw or zlib deflate, then brotli, zstd): the longest prefix a decoder gives,
    at most ``limit`` bytes (a bomb yields its first ``limit`` bytes, never more); ``b""`` if
    nothing."""
    best = b""
    sniffed = sniff_encoding(data[:4])
    for enc in ("gzip", "deflate", "br", "zstd"):
        if best and enc == "br":
            break  # brotli and zstd only for what zlib could not read at all
        if (enc == "gzip") != (sniffed == "gzip") or (enc == "zstd" and sniffed != "zstd"):
            continue
        dec = Decoder(enc, limit)
        got: list[bytes] = []
        try:
            for i in range(0, len(data), 1 << 16):
                got.append(dec.feed(data[i : i + (1 << 16)]))
        except Exception:  # over the limit, or broken: what came out before that is kept
            got.extend(dec.partial)
        out = b"".join(got)[:limit]
        if len(out) > len(best):
            best = out
    return best
