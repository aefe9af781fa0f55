"""The redactor's net by name in bodies: JSON bodies and streams as their reader reassembles
them; two parts of the :class:`~cassettes.recording._redactor.Redactor`'s pipeline.

:class:`JsonRedactor`: a JSON body's credential fields (``api_key``, ``access_token``, ``password``
…, and the configured ``body_keys``) are masked and learned, and every string is masked as the run
first decided for that text (:meth:`JsonRedactor.masks`: one mask per text, so what the analysis
compares reads as it was sent). :class:`StreamRedactor`: each JSON event of an SSE, NDJSON,
WebSocket or AWS event stream is redacted the same way, and the strings a field carries across
events are joined and masked as that text is anywhere else, in every event it spans.
:class:`~cassettes.recording._learner.BodyLearner` (forms, and credentials an endpoint mints) is
the third part. All three share the redactor's :class:`~cassettes.recording._scrubber.Secrets` and
:class:`~cassettes.recording._scrubber.Scrubber`; the headers and URLs are
:mod:`cassettes.recording._redactor`'s.
"""

from __future__ import annotations

import base64
import bisect
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from .. import bounds
from ..wire import is_aws_eventstream, reseal_aws_eventstream
from ._credentials import (
    _NAME_MARKERS,
    EMBEDDED_MAX,
    REDACTED,
    credential_values,
    inside_strings,
    looks_secret,
    named_spans,
    secret_name,
)
from ._scrubber import Scrubber, Secrets
from ._streams import (
    STREAM_BYTES,
    apply_edits,
    aws_frame,
    json_frames,
    json_lines,
    mask_channel,
    merge,
    rewrite,
    string_leaves,
)

__all__ = ["JsonRedactor", "StreamRedactor"]

#: How much text a redactor remembers its masks for (characters; a few agents' histories).
SEEN_CHARS = 64 << 20
#: JSON bodies larger than this are scrubbed as bytes only, not string by string.
_WHOLE_BYTES = 8 << 20
_REDACTED_BYTES = REDACTED.encode()


def _json_rebuild(value: Any, it: Iterator[str], key: Callable[[str], str]) -> Any:
    """``value`` with its strings replaced, in :meth:`JsonRedactor.collect` order, from ``it``,
    its keys by ``key``, and a number under a credential's name by ``[REDACTED]``."""
    if isinstance(value, str):
        return next(it)
    if isinstance(value, list):
        return [_json_rebuild(v, it, key) if isinstance(v, str | dict | list) else v for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[Any, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            out[k] = _json_rebuild(v, it, key)
        elif (
            isinstance(v, int | float)
            and not isinstance(v, bool)
            and v
            and secret_name(k) == "always"
        ):
            out[key(k)] = REDACTED  # a number under a credential's name (a PIN, a numeric key)
        else:
            out[key(k)] = _json_rebuild(v, it, key) if isinstance(v, str | dict | list) else v
    return out


def _redactions(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int, bytes]]:
    """``spans`` of ``text`` (decoded with ``surrogateescape``) as edits of its bytes, each to
    ``REDACTED``, for :func:`apply_edits`."""
    edits: list[tuple[int, int, bytes]] = []
    at = at_bytes = 0
    for s, e in spans:
        at_bytes += len(text[at:s].encode("utf-8", "surrogateescape"))
        start = at_bytes
        at_bytes += len(text[s:e].encode("utf-8", "surrogateescape"))
        at = e
        edits.append((start, at_bytes, _REDACTED_BYTES))
    return edits


class JsonRedactor:
    """Redacts parsed JSON: a credential name's value is masked and learned (in JSON held in a
    string too), every other string is masked where :meth:`masks` says, every key where
    :meth:`name` says."""

    def __init__(
        self, secrets: Secrets, scrubber: Scrubber, body_keys: frozenset[str] = frozenset()
    ) -> None:
        self._secrets = secrets
        self._scrubber = scrubber
        #: Extra JSON / form field names to redact always (``body_keys`` of the configuration).
        self._body_keys = body_keys
        #: :meth:`masks` of each text met, in the order met, up to :data:`SEEN_CHARS` characters.
        self._memo: dict[str, tuple[tuple[int, int, str], ...]] = {}
        self._memo_chars = 0
        self._names: dict[str, str] = {}

    def scrub_json(self, value: Any) -> tuple[Any, bool]:
        """``value`` (parsed JSON) redacted, and whether anything changed: :meth:`learn`, then
        its masking."""
        return self.learn(value)()

    def learn(self, value: Any) -> Callable[[], tuple[Any, bool]]:
        """Learn the credentials ``value`` (parsed JSON) carries by name; the function returned
        masks it (a copy when anything changed, ``value`` itself otherwise; and whether anything
        did). Learn all a round trip teaches before masking any of it."""
        if isinstance(value, str):
            return lambda: (out := self.text(value), out is not value)
        texts: list[str] = []
        keys: list[str] = []
        named = self.collect(value, texts, keys)

        def mask() -> tuple[Any, bool]:
            done = [self.text(t) for t in texts]
            if (
                named
                or any(d is not t for d, t in zip(done, texts, strict=True))
                or any(self.name(k) is not k for k in keys)
            ):
                return _json_rebuild(value, iter(done), self.name), True
            return value, False

        return mask

    def masks(self, text: str) -> tuple[tuple[int, int, str], ...]:
        """Where a string is masked, and with what: (start, end, replacement), sorted. Decided
        the first time the run meets the text and kept (for :data:`SEEN_CHARS` characters of
        text), so a text sent again, an echo, a history, reads the same whatever the run learned
        since. Its credential names' values if it holds JSON (:func:`credential_values`: a number
        becomes the string ``"[REDACTED]"``), the values learned and the known formats (inside
        its strings if it is JSON: :func:`inside_strings`); what the formats find is learned."""
        done = self._memo.get(text)
        if done is not None:
            return done
        found = self._found(text)
        known = len(self._secrets)
        for s, e in found:
            value = text[s:e].strip('"')  # (a format's match may take the quotes, in prose)
            if len(value) >= 8 and not any(c.isspace() for c in value):
                self._secrets.add(value)  # (not a key block's lines: "-----BEGIN" in every PEM)
        if len(self._secrets) > known:  # what a format found only here is masked all through it
            found = self._found(text)
        creds = credential_values(text, self.name_kind)
        numbers = {s for _n, s, _e, quoted in creds if not quoted}
        spans = merge(found + [(s, e) for _n, s, e, _q in creds])
        done = tuple((s, e, f'"{REDACTED}"' if s in numbers else REDACTED) for s, e in spans)
        self._memo[text] = done
        self._memo_chars += len(text)
        while self._memo_chars > SEEN_CHARS and len(self._memo) > 1:  # the oldest first
            old = next(iter(self._memo))
            self._memo_chars -= len(old)
            del self._memo[old]
        return done

    def _found(self, text: str) -> list[tuple[int, int]]:
        """The values learned and the known formats in ``text``; inside its strings (keys by the
        formats only) if it is JSON."""
        found = self._scrubber.spans(text)
        if found and text.lstrip()[:1] in ("{", "["):
            try:
                orjson.loads(text)
            except orjson.JSONDecodeError:
                return found  # prose that starts with a bracket: masked as text
            formats = self._scrubber.spans(text, learned=False)  # (none: none in any key either)
            return inside_strings(
                text, found, lambda k: self._scrubber.spans(k, False) if formats else []
            )
        return found

    def text(self, text: str) -> str:
        """``text`` with its :meth:`masks` applied (``text`` itself when it has none)."""
        pieces: list[str] = []
        pos = 0
        for s, e, rep in self.masks(text):
            pieces += [text[pos:s], rep]
            pos = e
        return "".join(pieces) + text[pos:] if pieces else text

    def name(self, key: str) -> str:
        """A JSON key masked by the known formats only: a value learned is masked in values, not
        in names (a password that is a word leaves the keys that are that word)."""
        done = self._names.get(key)
        if done is None:
            if len(self._names) >= 1 << 16:
                self._names.clear()
            done = self._names[key] = self._scrubber.scrub(key, learned=False)
        return done

    def forget(self) -> None:
        """Drop the masks remembered (and the texts they are of); what was learned stays."""
        self._memo.clear()
        self._names.clear()
        self._memo_chars = 0

    def collect(self, value: Any, acc: list[str], keys: list[str] | None = None) -> bool:
        """Appends the string values inside ``value`` (a dict or list) to ``acc``, and its keys to
        ``keys``, in :func:`_json_rebuild` order; a credential key's string value is learned and
        appended as ``REDACTED``, JSON held in a string is read for the same (:meth:`learn_text`).
        Returns whether there was one. (One walk: this is the writer's hot path.)"""
        found = False
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    if keys is not None:
                        keys.append(k)
                    named = self._collect_named(k, v, acc)
                    if named is not None:
                        found = True
                        if named:  # its value is appended (as REDACTED) already
                            continue
                found = self._collect_value(v, acc, keys) or found
        elif isinstance(value, list):
            for v in value:
                found = self._collect_value(v, acc, keys) or found
        return found

    def _collect_value(self, v: Any, acc: list[str], keys: list[str] | None) -> bool:
        """:meth:`collect` of one value of an object or list: a string appended (JSON held in it
        read for credentials the first time it is met), an object or list walked; whether a
        credential was found by name."""
        if isinstance(v, str):
            if v[:1] in ("{", "[") and v not in self._memo:
                self.learn_text(v)
            acc.append(v)
            return False
        return isinstance(v, (dict, list)) and self.collect(v, acc, keys)

    def name_kind(self, name: str) -> str | None:
        """What a field's name says of its value (:func:`secret_name`), the configured
        ``body_keys`` always a credential's."""
        return "always" if name.lower() in self._body_keys else secret_name(name)

    def learn_text(self, text: str) -> None:
        """JSON inside a JSON string (tool-call arguments, a tool result, a serialised config; a
        stream's arguments joined, cut short or not): learn the values of its credential names
        (:func:`credential_values`), and the credential-shaped strings of objects under such names
        (those of 8 characters or more: a shorter one is masked only where a name says it is
        one, never everywhere it occurs). Only when it holds some credential word: most strings
        that start with ``{`` are code or prose, and their parse is what this would cost."""
        if len(text) > EMBEDDED_MAX or text.lstrip()[:1] not in ("{", "["):
            return
        low = text.lower()
        if not any(m.decode() in low for m in _NAME_MARKERS):
            return
        for _n, s, e, _q in credential_values(text, self.name_kind):
            self._secrets.learn(text[s:e])
        try:
            inner = bounds.loads(text)
        except orjson.JSONDecodeError:
            return
        if isinstance(inner, dict | list):
            self.collect(inner, [])

    def _collect_named(self, k: str, v: Any, acc: list[str]) -> bool | None:
        """A JSON key and what its name says of its value: a credential's string value is learned
        and appended to ``acc`` as ``REDACTED`` (True: the value is done); a number under a
        credential's name is learned (False: it is rebuilt as text); ``None`` when nothing was
        found here."""
        kind = self.name_kind(k) if v and not isinstance(v, bool) else None
        if kind is None:
            return None
        if isinstance(v, str) and (kind == "always" or looks_secret(v)):
            self._secrets.learn(v)
            acc.append(REDACTED)
            return True
        if kind == "always" and isinstance(v, int | float):
            self._secrets.learn(str(v))
            return False
        if kind == "always" and isinstance(v, dict | list):
            self._learn_leaves(v)  # {"secret": {"value": "…"}}: what looks like one
        return None

    def _learn_leaves(self, value: Any, depth: int = 0) -> None:
        """Learn the credential-shaped strings and the long numbers inside an object or list that
        stands under a credential's name (its other keys may be plain words: ``value``, ``data``).
        Bounded: 32 levels."""
        if depth > 32:
            return
        for v in value.values() if isinstance(value, dict) else value:
            if isinstance(v, str) and looks_secret(v):
                self._secrets.learn(v)
            elif isinstance(v, int | float) and not isinstance(v, bool) and len(str(v)) >= 8:
                self._secrets.learn(str(v))
            elif isinstance(v, dict | list):
                self._learn_leaves(v, depth + 1)


class StreamRedactor:
    """Redacts a response's chunks as their reader reassembles them: the JSON events of an SSE,
    NDJSON, WebSocket or AWS event stream (or one JSON body) by field name and across events,
    the rest across chunk boundaries, keeping the chunks' number, times and framing."""

    def __init__(self, scrubber: Scrubber, json: JsonRedactor) -> None:
        self._scrubber = scrubber
        self._json = json

    def learn(self, chunks: Chunks) -> Callable[[], Chunks]:
        """Learn what the chunks teach: each JSON event's credential fields by name, and the
        values under credential names in the JSON a field carries across events (a tool call's
        arguments, streamed). The function returned masks the chunks: each field's text across
        events joined (a text delta's whole text) and masked as :meth:`JsonRedactor.masks` masks
        that text anywhere else, in the piece where a secret starts and removed from the pieces
        it continues into; changed events rewritten in place (a Bedrock frame rebuilt with its
        lengths and checksums); what lies outside the events (other SSE lines, a body that is not
        JSON) scrubbed across chunk boundaries."""
        data = b"".join(c for _, c in chunks)
        aws = is_aws_eventstream(data[:12])
        events = _events(data, aws)
        docs = [e[2] for e in events]
        named = named_spans(data, [(a, b) for a, b, *_ in events])
        changed: dict[int, Any] = {}
        for i, doc in enumerate(docs):
            # (base64 hides the names)
            if (named[i] or events[i][4] is not None) and isinstance(doc, dict | list):
                texts: list[str] = []
                keys: list[str] = []
                if self._json.collect(doc, texts, keys) or any(
                    self._json.name(k) is not k for k in keys
                ):
                    docs[i] = changed[i] = _json_rebuild(doc, iter(texts), self._json.name)
        channels: dict[str, list[tuple[int, Any, Any, str]]] = {}
        for i, doc in enumerate(docs):
            if isinstance(doc, dict | list):
                string_leaves(doc, "", i, channels)
        joined = ["".join(p[3] for p in pieces) for pieces in channels.values()]
        for text in joined:
            self._json.learn_text(text)

        def mask() -> Chunks:
            for pieces, text in zip(channels.values(), joined, strict=True):
                for i in mask_channel(pieces, text, self._json.masks(text)):
                    changed[i] = docs[i]
            return self._write(chunks, data, events, changed, aws)

        return mask

    def _write(
        self, chunks: Chunks, data: bytes, events: list[_Event], changed: dict[int, Any], aws: bool
    ) -> Chunks:
        """The chunks with the ``changed`` events rewritten, and the scrub's finds outside the
        events masked (in an AWS event stream with ``*``, its lengths kept, its checksums
        recomputed)."""
        edits = []
        for i, doc in sorted(changed.items()):
            start, end, _, hlen, wrapper = events[i]
            raw = data[start + 12 + hlen : end - 4] if aws else data[start:end]
            out = rewrite(raw, bounds.loads(raw), doc) if wrapper is None else orjson.dumps(doc)
            if wrapper is not None:
                out = orjson.dumps({**wrapper, "bytes": base64.b64encode(out).decode()})
            if aws:
                out, raw = aws_frame(data[start + 12 : start + 12 + hlen], out), data[start:end]
            # only what changed: the rest stays in the chunks it came in
            a = _shared(raw, out)
            b = _shared(raw[a:][::-1], out[a:][::-1])
            edits.append((start + a, end - b, out[a : len(out) - b]))
        text = data.decode("utf-8", "surrogateescape")
        starts = [e[0] for e in events]
        outside = [
            (s, e, rep)
            for s, e, rep in _redactions(text, self._scrubber.spans(text))
            if not _overlaps(starts, events, s, e)
        ]
        if aws and outside:
            buf = bytearray(data)
            for s, e, _ in outside:
                buf[s:e] = bytes(b if b >= 0x80 else 42 for b in buf[s:e])  # 42: "*"
            data = reseal_aws_eventstream(bytes(buf))
            cuts = list(itertools.accumulate(len(c) for _, c in chunks))
            chunks = [(t, data[a:b]) for (t, _), a, b in zip(chunks, [0, *cuts], cuts, strict=True)]
            outside = []
        if not edits and not outside:
            return list(chunks)
        return apply_edits(chunks, data, sorted(edits + outside))


#: A JSON event of a response body: (start, end, parsed, an AWS frame's headers' length, the
#: object an AWS event was base64 inside, in its ``bytes``); start and end are its frame's in an
#: AWS event stream, its JSON text's otherwise.
_Event = tuple[int, int, Any, int, dict[str, Any] | None]
Chunks = list[tuple[float | None, bytes]]


def _events(data: bytes, aws: bool) -> list[_Event]:
    """The JSON events of a response body: one JSON body whole, else each SSE ``data:`` line,
    NDJSON line or WebSocket message, or each AWS event-stream frame's JSON. None past the
    bounds (a stream over :data:`STREAM_BYTES`, one JSON body over :data:`_WHOLE_BYTES`)."""
    if len(data) > STREAM_BYTES or (len(data) > _WHOLE_BYTES and data.count(b"\n") < 2):
        return []
    if aws:
        frames, docs, _ = json_frames(data)
        return [(a, b, doc, h, w) for (a, b, h, w), doc in zip(frames, docs, strict=True)]
    head = len(data) - len(data.lstrip())
    if data[head : head + 1] in (b"{", b"["):
        try:
            return [(head, len(data.rstrip()), bounds.loads(data), 0, None)]
        except orjson.JSONDecodeError:
            pass
    return [(a, b, doc, 0, None) for a, b, doc in json_lines(data)]


def _shared(a: bytes, b: bytes) -> int:
    """How many bytes ``a`` and ``b`` share at their start."""
    n, i = min(len(a), len(b)), 0
    while i < n and a[i : i + 4096] == b[i : i + 4096]:
        i += 4096
    while i < n and a[i] == b[i]:
        i += 1
    return min(i, n)


def _overlaps(starts: list[int], events: list[_Event], s: int, e: int) -> bool:
    """Whether bytes ``s``–``e`` overlap one of ``events`` (sorted; ``starts``: their starts)."""
    j = bisect.bisect_right(starts, s) - 1
    return (j >= 0 and events[j][1] > s) or (j + 1 < len(events) and starts[j + 1] < e)
