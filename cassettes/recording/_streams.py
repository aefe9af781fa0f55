"""A stream's JSON events, found and rewritten in place: the lines of SSE, NDJSON and WebSocket
session records (:func:`json_lines`), AWS event-stream frames (:func:`json_frames`), the text each
field carries across events (:func:`string_leaves`, :func:`stream_texts`), and the edits that put
changed events back into the chunks they came in (:func:`rewrite`, :func:`apply_edits`,
:func:`aws_frame`). No secrets are decided here: the redactor decides, this module rewrites."""

from __future__ import annotations

import base64
import binascii
import re
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import orjson

from .. import bounds
from ..wire import is_aws_eventstream

__all__ = [
    "STREAM_BYTES",
    "apply_edits",
    "aws_frame",
    "json_frames",
    "json_lines",
    "mask_channel",
    "merge",
    "rewrite",
    "stream_texts",
    "string_leaves",
]

#: Streams larger than this are scrubbed as bytes only, not event by event.
STREAM_BYTES = 64 << 20


def json_lines(data: bytes) -> list[tuple[int, int, Any]]:
    """(start, end, parsed) of each line of ``data`` that holds a JSON object or array: an SSE
    ``data:`` line, an NDJSON line, a WebSocket session's ``> `` / ``< `` message."""
    docs: list[tuple[int, int, Any]] = []
    pos = 0
    for line in data.split(b"\n"):
        start, end = pos, pos + len(line)
        pos = end + 1
        if line.endswith(b"\r"):
            end -= 1
        head = line[:6]
        if head.startswith(b"data:"):
            start += 6 if head.startswith(b"data: ") else 5
        elif head.startswith((b"> ", b"< ")):
            start += 2
        if end - start < 2 or data[start : start + 1] not in (b"{", b"["):
            continue
        try:
            docs.append((start, end, bounds.loads(data[start:end])))
        except orjson.JSONDecodeError:
            continue
    return docs


def json_frames(
    data: bytes,
) -> tuple[list[tuple[int, int, int, dict[str, Any] | None]], list[Any], list[bytes]]:
    """The AWS event-stream frames of ``data`` that carry JSON: (start, end, headers' length, the
    wrapper when the event is base64 in its ``bytes`` field), the JSON events, the payloads."""
    # start, end, headers' length, wrapper
    frames: list[tuple[int, int, int, dict[str, Any] | None]] = []
    docs: list[Any] = []
    originals: list[bytes] = []
    pos = 0
    while pos + 16 <= len(data):
        total, hlen, pcrc = struct.unpack_from(">III", data, pos)
        if (
            zlib.crc32(data[pos : pos + 8]) != pcrc
            or total < 16
            or pos + total > len(data)
            or hlen > total - 16
        ):
            break
        payload = data[pos + 12 + hlen : pos + total - 4]
        try:
            doc = bounds.loads(payload) if payload[:1] in (b"{", b"[") else None
        except orjson.JSONDecodeError:
            doc = None
        wrapper = None
        if isinstance(doc, dict) and isinstance(doc.get("bytes"), str):
            try:
                wrapper, doc = doc, bounds.loads(base64.b64decode(doc["bytes"], validate=True))
            except (binascii.Error, ValueError, orjson.JSONDecodeError):
                wrapper = None
        if doc is not None:
            frames.append((pos, pos + total, hlen, wrapper))
            docs.append(doc)
            originals.append(payload)
        pos += total
    return frames, docs, originals


def stream_texts(data: bytes) -> list[str]:
    """The text each field of a stream's JSON events carries across events, joined (a text
    delta's whole text), for SSE, NDJSON, WebSocket session lines and AWS event-stream frames:
    what ``looptap verify`` scans besides each event."""
    if len(data) > STREAM_BYTES:
        return []
    docs = (
        json_frames(data)[1]
        if is_aws_eventstream(data[:12])
        else [d for _, _, d in json_lines(data)]
    )
    channels: dict[str, list[tuple[int, Any, Any, str]]] = {}
    for i, doc in enumerate(docs):
        if isinstance(doc, dict | list):
            string_leaves(doc, "", i, channels)
    return ["".join(p[3] for p in pieces) for pieces in channels.values() if len(pieces) > 1]


#: What tells one part of an answer from another in a stream's events (Anthropic's and Bedrock's
#: content blocks, Responses' output items and parts, parallel tool calls): a field's text is
#: joined per part.
_PARTS = ("index", "output_index", "content_index", "contentBlockIndex")
_PART_KEYS = frozenset(_PARTS)


def string_leaves(
    value: Any, path: str, i: int, out: dict[str, list[tuple[int, Any, Any, str]]], depth: int = 0
) -> None:
    """Appends (event, container, key, string) to ``out[path]`` for each string value in
    ``value`` (bounded: 32 levels); an object's ``index`` (``output_index``, ``content_index``) is
    part of the path, so each block, item or call of an answer is its own text."""
    if depth > 32:
        return
    if isinstance(value, dict):
        if not _PART_KEYS.isdisjoint(value):
            for k in _PARTS:
                n = value.get(k)
                if type(n) is int:
                    path = f"{path}#{n}"
        items: Any = value.items()
    else:
        items = enumerate(value)
    for k, v in items:
        if type(v) is str:
            if v:
                p = f"{path}/{k}"
                found = out.get(p)
                if found is None:
                    out[p] = [(i, value, k, v)]
                else:
                    found.append((i, value, k, v))
        elif isinstance(v, dict | list):
            string_leaves(v, f"{path}/{k}", i, out, depth + 1)


def _leaf_changes(old: Any, new: Any, out: list[tuple[Any, Any]], depth: int = 0) -> bool:
    """The (old, new) leaves that differ between two JSON values of one shape; False when the
    shapes (or the keys) differ."""
    if depth > 32:
        return False
    if isinstance(old, dict) and isinstance(new, dict):
        if list(old) != list(new):
            return False
        return all(_leaf_changes(old[k], new[k], out, depth + 1) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(
            _leaf_changes(a, b, out, depth + 1) for a, b in zip(old, new, strict=True)
        )
    if isinstance(old, dict | list) or isinstance(new, dict | list):
        return False
    if old != new or type(old) is not type(new):
        out.append((old, new))
    return True


def rewrite(raw: bytes, old: Any, new: Any) -> bytes:
    """The JSON text ``raw`` (which parses to ``old``) changed to say ``new``, keeping its
    formatting: each changed value is replaced where it is written. Falls back to writing
    ``new`` afresh when a value cannot be found as written (an unusual escape)."""
    import json

    pairs: list[tuple[Any, Any]] = []
    if _leaf_changes(old, new, pairs):
        text = raw.decode("utf-8", "surrogateescape")
        for a, b in pairs:
            forms = (
                {orjson.dumps(a).decode(), json.dumps(a)} if isinstance(a, str) else {json.dumps(a)}
            )
            # (a replacement template: backslashes doubled)
            rep = orjson.dumps(b).decode().replace("\\", "\\\\")
            for form in forms:
                text = re.sub(
                    r"([:\[,]\s*)" + re.escape(form) + r"(?=\s*[,}\]])", r"\g<1>" + rep, text
                )
        out = text.encode("utf-8", "surrogateescape")
        try:
            if orjson.loads(out) == new:
                return out
        except orjson.JSONDecodeError:
            pass
    return orjson.dumps(new)


def aws_frame(headers: bytes, payload: bytes) -> bytes:
    """One AWS event-stream frame: prelude, its CRC, headers, payload, message CRC."""
    total = 16 + len(headers) + len(payload)
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return head + struct.pack(">I", zlib.crc32(head))


def apply_edits(
    chunks: list[tuple[float | None, bytes]], data: bytes, edits: list[tuple[int, int, bytes]]
) -> list[tuple[float | None, bytes]]:
    """``chunks`` (whose bytes joined are ``data``) with each (start, end, replacement) of
    ``edits`` applied: the replacement goes into the chunk where the edited range starts, and the
    rest of the range is removed from the chunks it continues into."""
    out: list[tuple[float | None, bytes]] = []
    pos = 0
    k = 0
    for t, c in chunks:
        lo, hi = pos, pos + len(c)
        pos = hi
        parts: list[bytes] = []
        i = lo
        while i < hi:
            while k < len(edits) and edits[k][1] <= i:
                k += 1
            if k < len(edits) and edits[k][0] < hi:
                s, e, rep = edits[k]
                if s > i:
                    parts.append(data[i:s])
                    i = s
                if s >= lo:
                    parts.append(rep)
                i = max(i, min(e, hi))
                if e <= hi:
                    k += 1
            else:
                parts.append(data[i:hi])
                i = hi
        out.append((t, b"".join(parts)))
    return out


def merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans, the overlapping and touching ones merged."""
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def mask_channel(
    pieces: list[tuple[int, Any, Any, str]], joined: str, masks: Sequence[tuple[int, int, str]]
) -> list[int]:
    """Apply ``masks`` (start, end, replacement; sorted, apart) to a field's text across events
    (``joined``: its ``pieces`` joined, as :func:`string_leaves` gathered them): the replacement
    in the piece where a mask starts, the masked text removed from the pieces it continues into.
    Edits the events in place; returns the indexes of the events changed."""
    changed: list[int] = []
    pos = 0
    k = 0
    for i, container, key, value in pieces:
        lo, hi = pos, pos + len(value)
        pos = hi
        while k < len(masks) and masks[k][1] <= lo:
            k += 1
        if k >= len(masks) or masks[k][0] >= hi:
            continue
        parts: list[str] = []
        j = lo
        for ss, se, rep in masks[k:]:
            if ss >= hi:
                break
            if ss > j:
                parts.append(joined[j:ss])
            if ss >= lo:  # where the secret starts; removed from the pieces it continues into
                parts.append(rep)
            j = max(j, min(se, hi))
        parts.append(joined[j:hi])
        container[key] = "".join(parts)
        changed.append(i)
    return changed
