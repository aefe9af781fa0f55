"""The redactor's net by name in bodies: JSON bodies, forms, and streams as their reader
reassembles them; three parts of the :class:`~cassettes.recording.redact.Redactor`'s pipeline.

:class:`JsonRedactor`: a JSON body's credential fields (``api_key``, ``access_token``, ``password``
…, and the configured ``body_keys``) are masked and learned, and every string is scrubbed decoded
(a secret behind a JSON escape is found too). :class:`StreamRedactor`: each JSON event of an SSE,
NDJSON, WebSocket or AWS event stream is redacted the same way, and the strings a field carries
across events are joined and searched, so a key streamed a few characters per event is masked in
every event it spans. :class:`BodyLearner`: forms, and responses that mint or return credentials,
teach them to the redactor first. All three share the redactor's
:class:`~cassettes.recording.scrub.Secrets` and :class:`~cassettes.recording.scrub.Scrubber`; the
headers and URLs are :mod:`cassettes.recording.redact`'s.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from cassettes import bounds
from cassettes.recording.names import (
    _NAME_MARKERS,
    EMBEDDED_MAX,
    REDACTED,
    credential_values,
    looks_secret,
    named_spans,
    secret_name,
)
from cassettes.recording.scrub import Scrubber, Secrets
from cassettes.recording.streams import (
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
from cassettes.wire.framing import is_aws_eventstream, reseal_aws_eventstream

__all__ = ["BodyLearner", "JsonRedactor", "StreamRedactor"]

#: JSON bodies larger than this are scrubbed as bytes only, not string by string.
_WHOLE_BYTES = 8 << 20
_REDACTED_BYTES = REDACTED.encode()
#: How much JSON-in-string text :meth:`JsonRedactor._embedded` remembers the answer for (chars).
_EMBEDDED_SEEN = 16 << 20


def _json_rebuild(value: Any, it: Iterator[str]) -> Any:
    """``value`` with its strings (keys included) replaced, in :meth:`JsonRedactor.collect`
    order, from ``it``."""
    if isinstance(value, str):
        return next(it)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = next(it) if isinstance(k, str) else k
            if (
                isinstance(v, int | float)
                and not isinstance(v, bool)
                and v
                and isinstance(k, str)
                and secret_name(k) == "always"
            ):
                out[key] = REDACTED  # a number under a credential's name (a PIN, a numeric key)
                continue
            out[key] = (
                next(it)
                if isinstance(v, str)
                else _json_rebuild(v, it)
                if isinstance(v, (dict, list))
                else v
            )
        return out
    if isinstance(value, list):
        return [
            next(it)
            if isinstance(v, str)
            else _json_rebuild(v, it)
            if isinstance(v, (dict, list))
            else v
            for v in value
        ]
    return value


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
    """Redacts parsed JSON by field name: a credential name's value is masked and learned, JSON
    held in a string is read for the same, and every string, keys included, is scrubbed decoded
    (a secret behind a JSON escape is found too)."""

    def __init__(
        self, secrets: Secrets, scrubber: Scrubber, body_keys: frozenset[str] = frozenset()
    ) -> None:
        self._secrets = secrets
        self._scrubber = scrubber
        #: Extra JSON / form field names to redact always (``body_keys`` of the configuration).
        self._body_keys = body_keys
        #: :meth:`_embedded`'s answers for the JSON strings already seen (an agent re-sends its
        #: tool calls' arguments and results on every turn), up to :data:`_EMBEDDED_SEEN` chars.
        self._embedded_seen: dict[str, str] = {}
        self._embedded_chars = 0

    def scrub_json(self, value: Any) -> tuple[Any, bool]:
        """``value`` (parsed JSON) with credential keys' values redacted and every string, keys
        included, scrubbed; and whether anything changed. Scans the decoded strings, so a secret
        behind a JSON escape is found too."""
        texts: list[str] = []
        found = value if isinstance(value, str) else None
        if found is not None:
            texts.append(found)
        keys = self.collect(value, texts) if found is None else False
        # after the walk: it learned the credential values
        done = self._scrubber.scrub_strings(texts)
        if not keys and done == texts:
            return value, False
        return _json_rebuild(value, iter(done)), True

    def collect(self, value: Any, acc: list[str]) -> bool:
        """Appends the strings inside ``value`` (a dict or list) to ``acc`` in
        :func:`_json_rebuild` order; a credential key's string value is learned and appended as
        ``REDACTED``. Returns whether there was one. (One walk: this is the writer's hot path.)"""
        found = False
        if isinstance(value, dict):
            for k, v in value.items():
                named = self._collect_named(k, v, acc) if isinstance(k, str) else None
                if named is not None:
                    found = True
                    if named:  # its value is appended (as REDACTED) already
                        continue
                found = self._collect_value(v, acc) or found
        elif isinstance(value, list):
            for v in value:
                found = self._collect_value(v, acc) or found
        return found

    def _collect_value(self, v: Any, acc: list[str]) -> bool:
        """:meth:`collect` of one value of an object or list: a string appended (JSON held in it
        with its credential names' values masked, :meth:`_embedded`), an object or list walked;
        whether a credential was found."""
        if isinstance(v, str):
            if v[:1] in ("{", "[") and len(v) < EMBEDDED_MAX:
                masked = self._embedded(v)
                acc.append(masked)
                return masked is not v
            acc.append(v)
            return False
        return isinstance(v, (dict, list)) and self.collect(v, acc)

    def name_kind(self, name: str) -> str | None:
        """What a field's name says of its value (:func:`secret_name`), the configured
        ``body_keys`` always a credential's."""
        return "always" if name.lower() in self._body_keys else secret_name(name)

    def _embedded(self, text: str) -> str:
        """JSON inside a JSON string (tool-call arguments, a tool result, a serialised config):
        ``text`` with the values of its credential names masked whatever their length
        (:func:`credential_values`: ``{"password": "[REDACTED]"}``, a number as the string
        ``"[REDACTED]"``), its formatting otherwise kept; ``text`` itself (the same object) when
        it holds none. The values it masks, and the credential-shaped strings of its objects under
        such names, are learned (those of 8 characters or more: a shorter one is masked only where
        a name says it is one, never everywhere it occurs)."""
        done = self._embedded_seen.get(text)
        if done is not None:
            return text if done == text else done
        self._learn_embedded(text)
        spans = credential_values(text, self.name_kind)
        out = text
        if spans:
            pieces: list[str] = []
            pos = 0
            for _name, start, end, quoted in spans:
                self._secrets.learn(text[start:end])
                pieces += [text[pos:start], REDACTED if quoted else f'"{REDACTED}"']
                pos = end
            pieces.append(text[pos:])
            out = "".join(pieces)
        if self._embedded_chars + len(text) > _EMBEDDED_SEEN:
            self._embedded_seen.clear()
            self._embedded_chars = 0
        self._embedded_seen[text] = out
        self._embedded_chars += len(text)
        return out

    def _collect_named(self, k: str, v: Any, acc: list[str]) -> bool | None:
        """A JSON key and what its name says of its value: the key is appended to ``acc``; a
        credential's string value is learned and appended as ``REDACTED`` (True: the value is
        done); a number under a credential's name is learned (False: it is rebuilt as text);
        ``None`` when nothing was found here."""
        acc.append(k)
        kind = (
            ("always" if k.lower() in self._body_keys else secret_name(k))
            if v and not isinstance(v, bool)
            else None
        )
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

    def _learn_embedded(self, text: str) -> None:
        """JSON inside a JSON string (tool-call arguments, a serialised config): learn the values
        of its credential keys, which the scrub of the string then masks too where they are
        echoed elsewhere. (Only when it holds some credential word: most strings that start with
        ``{`` are code or prose, and their parse is what this would cost.)"""
        low = text.lower()
        if not any(m.decode() in low for m in _NAME_MARKERS):
            return
        try:
            inner = bounds.loads(text)
        except orjson.JSONDecodeError:
            return
        if isinstance(inner, dict | list):
            self.collect(inner, [])


class BodyLearner:
    """Learns the credentials a body carries where no JSON walk of the redaction meets them by
    name: a form's fields, a response's (a token it returns), a credential an endpoint mints. The
    scrub of the bytes then masks them, here and wherever they come back."""

    def __init__(self, secrets: Secrets, json: JsonRedactor) -> None:
        self._secrets = secrets
        self._json = json

    def form(self, body: bytes, ctype: str) -> None:
        """Learn the credential fields of a form-urlencoded or multipart body (``client_secret``,
        ``refresh_token``, ``api_key``), so that scrubbing the bytes masks them."""
        if "x-www-form-urlencoded" in ctype:
            for k, v in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
                kind = secret_name(k)
                if v and (kind == "always" or (kind and looks_secret(v))):
                    self._secrets.learn(v)
        elif "multipart/" in ctype:
            for m in re.finditer(
                rb'name="([^"\r\n]{1,200})"[^\n]*\n(?:[^\r\n]+\r?\n){0,8}\r?\n(.{0,4096}?)\r?\n--',
                body,
                re.S,
            ):
                name = m.group(1).decode("utf-8", "replace")
                value = m.group(2).decode("utf-8", "replace").strip()
                kind = secret_name(name)
                if value and (kind == "always" or (kind and looks_secret(value))):
                    self._secrets.learn(value)

    def response(self, chunks: list[tuple[float | None, bytes]]) -> None:
        """Learn the credential fields of a JSON response (an OAuth ``access_token``, a created
        key) or of the JSON events of a stream, so that scrubbing the chunks masks them."""
        data = b"".join(c for _, c in chunks)
        if (
            not data
            or len(data) > (64 << 20)
            or not any(m in data for m in (b"token", b"key", b"secret", b"pass", b"auth", b"cred"))
        ):
            return
        try:
            docs = [bounds.loads(data)]
        except orjson.JSONDecodeError:
            docs = []
            for line in data.splitlines():
                if line.startswith(b"data:"):
                    try:
                        docs.append(bounds.loads(line[5:]))
                    except orjson.JSONDecodeError:
                        continue
        for doc in docs:
            if isinstance(doc, dict | list):
                self._json.collect(doc, [])

    def minted(self, url: str, chunks: list[tuple[float | None, bytes]]) -> None:
        """A credential minted by an endpoint named for one (``POST /v1/realtime/client_secrets``
        → ``{"value": "ek_…"}``, Gemini's ``auth_tokens`` → ``{"name": "auth_tokens/…"}``,
        ``…/api_keys``, ``…/tokens``): its top-level ``value`` / ``token`` / ``key`` / ``secret`` /
        ``name`` is learned when it looks like one, so the scrub masks it here and everywhere
        after (the client then sends it back)."""
        try:
            segments = [seg for seg in urlsplit(url).path.split("/") if seg]
        except ValueError:
            return
        if not any(
            secret_name(seg) is not None or seg.lower() in ("tokens", "ephemeral_tokens")
            for seg in segments[-3:]
        ):
            return
        data = b"".join(c for _, c in chunks)
        if not data.lstrip().startswith(b"{") or len(data) > (1 << 20):
            return
        try:
            doc = bounds.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(doc, dict):
            return
        for k in ("value", "token", "key", "secret", "name", "client_secret"):
            v = doc.get(k)
            if isinstance(v, dict):
                v = v.get("value")
            if isinstance(v, str):
                for piece in {v, v.rsplit("/", 1)[-1]}:
                    if looks_secret(piece):
                        self._secrets.learn(piece)


class StreamRedactor:
    """Redacts response chunks as their reader reassembles them: the JSON events of an SSE, NDJSON,
    WebSocket or AWS event stream by field name and across events, and a secret split across
    chunks, keeping the chunks' number, times and framing."""

    def __init__(self, secrets: Secrets, scrubber: Scrubber, json: JsonRedactor) -> None:
        self._secrets = secrets
        self._scrubber = scrubber
        self._json = json

    def chunks(self, chunks: list[tuple[float | None, bytes]]) -> list[tuple[float | None, bytes]]:
        """Scrub stream chunks, including a secret split across a chunk boundary.

        Chunks follow socket reads, not events, so a secret can arrive in two pieces that neither
        chunk shows whole (or that only a pattern sees, half of it). The joined stream is searched;
        each secret is replaced in the chunk where it starts and removed from the chunks it
        continues into. Offsets and the number of chunks are kept.
        """
        if is_aws_eventstream(b"".join(c for _, c in chunks[:2])[:12]):
            return self._binary_frames(self._stream_frames(chunks))
        chunks = self._stream_lines(chunks)
        if len(chunks) < 2:
            return [(t, self._scrubber.scrub_bytes(c)) for t, c in chunks]
        texts = [c.decode("utf-8", "surrogateescape") for _, c in chunks]
        joined = "".join(texts)
        spans = self._scrubber.spans(joined)
        if not spans:
            return list(chunks)
        return apply_edits(chunks, b"".join(c for _, c in chunks), _redactions(joined, spans))

    # -- streams as their reader sees them -------------------------------------------------------
    def _stream_lines(
        self, chunks: list[tuple[float | None, bytes]]
    ) -> list[tuple[float | None, bytes]]:
        """A stream of JSON events, one per line (SSE ``data:`` lines, NDJSON, a WebSocket
        session's ``> `` / ``< `` messages), redacted as its reader reassembles it: each event's
        fields by name (:meth:`JsonRedactor.scrub_json`), and the strings a field carries across
        events (the text deltas) joined, so a secret streamed a few characters per event is found
        and masked in every event it spans. Events that change are written back in place; the chunks
        keep their number and times."""
        data = b"".join(c for _, c in chunks)
        if not data or len(data) > STREAM_BYTES:
            return chunks
        session = data.startswith((b"> ", b"< "))  # a WebSocket session's messages (wire.websocket)
        docs = json_lines(data) if session or data.count(b"\n") >= 2 else []
        if len(docs) < 2 and not session:
            # One JSON body: its strings are searched decoded too (a key behind "\u0073k-…").
            head = len(data) - len(data.lstrip())
            if data[head : head + 1] not in (b"{", b"[") or len(data) > _WHOLE_BYTES:
                return chunks
            try:
                docs = [(head, len(data.rstrip()), bounds.loads(data))]
            except orjson.JSONDecodeError:
                return chunks
        changed = self._mask_docs(
            [d for _, _, d in docs], named_spans(data, [(a, b) for a, b, _ in docs])
        )
        if not changed:
            return chunks
        # (the masking edited the parsed events in place: the originals are parsed again)
        edits = [
            (
                docs[i][0],
                docs[i][1],
                rewrite(
                    data[docs[i][0] : docs[i][1]], bounds.loads(data[docs[i][0] : docs[i][1]]), doc
                ),
            )
            for i, doc in sorted(changed.items())
        ]
        return apply_edits(chunks, data, edits)

    def _stream_frames(
        self, chunks: list[tuple[float | None, bytes]]
    ) -> list[tuple[float | None, bytes]]:
        """AWS event-stream frames (Bedrock) redacted like :meth:`_stream_lines`: each frame's JSON
        payload, or the JSON event base64-encoded in its ``bytes`` field (InvokeModel streams);
        changed frames are rebuilt with their lengths and checksums."""
        data = b"".join(c for _, c in chunks)
        if len(data) > STREAM_BYTES:
            return chunks
        frames, docs, originals = json_frames(data)
        named = named_spans(data, [(a, b) for a, b, _, _ in frames])
        # (base64 hides the names)
        named = [n or f[3] is not None for n, f in zip(named, frames, strict=True)]
        changed = self._mask_docs(docs, named) if len(docs) >= 2 else {}
        if not changed:
            return chunks
        edits = []
        for i, doc in sorted(changed.items()):
            start, end, hlen, wrapper = frames[i]
            payload = (
                orjson.dumps(doc)
                if wrapper is not None
                else rewrite(originals[i], bounds.loads(originals[i]), doc)
            )
            if wrapper is not None:
                payload = orjson.dumps({**wrapper, "bytes": base64.b64encode(payload).decode()})
            edits.append((start, end, aws_frame(data[start + 12 : start + 12 + hlen], payload)))
        return apply_edits(chunks, data, edits)

    def _mask_docs(self, docs: list[Any], named: list[bool]) -> dict[int, Any]:
        """Redact a stream's JSON events: by field name in the events whose text names a credential
        anywhere (``named``: :func:`named_spans`), then the strings each field carries across
        events, joined (a text delta's whole text; a field seen once is its own), scanned for
        learned values and known formats. Returns the events that changed, by index."""
        new_docs, out = self._mask_by_name(docs, named)
        # The strings each field carries across events, in order: a text delta's channel.
        channels: dict[str, list[tuple[int, Any, Any, str]]] = {}
        for i, doc in enumerate(new_docs):
            if isinstance(doc, dict | list):
                string_leaves(doc, "", i, channels)
        for pieces in channels.values():
            for i in self._mask_channel(pieces):
                out[i] = new_docs[i]
        return out

    def _mask_by_name(self, docs: list[Any], named: list[bool]) -> tuple[list[Any], dict[int, Any]]:
        """The events with the ones ``named`` redacted by field name and their strings scrubbed (in
        one pass over the strings of them all); and the events that changed, by index."""
        texts: list[str] = []
        slices: list[tuple[int, int, int, bool]] = []
        for i, (doc, walk) in enumerate(zip(docs, named, strict=True)):
            if walk and isinstance(doc, dict | list):
                start = len(texts)
                keys = self._json.collect(doc, texts)
                slices.append((i, start, len(texts), keys))
        out: dict[int, Any] = {}
        new_docs = list(docs)
        if slices:
            done = self._scrubber.scrub_strings(texts)
            for i, a, b, keys in slices:
                if keys or done[a:b] != texts[a:b]:
                    new_docs[i] = out[i] = _json_rebuild(docs[i], iter(done[a:b]))
        return new_docs, out

    def _mask_channel(self, pieces: list[tuple[int, Any, Any, str]]) -> list[int]:
        """One field's strings across events, joined and scanned for learned values and known
        formats (what is found learned), and read as JSON for its credential names' values: masked
        in the events in place; the indexes of the events it changed."""
        joined = "".join(p[3] for p in pieces)
        spans = self._scrubber.spans(joined)
        # JSON the field carries across events (a tool call's arguments streamed): the values
        # of its credential names, whatever their length (a number becomes the string).
        creds = credential_values(joined, self._json.name_kind)
        if not spans and not creds:
            return []
        for s, e in spans:
            # learned: masked wherever else it appears (request history, raw bytes)
            found = joined[s:e]
            if len(found) >= 8 and found != REDACTED and not any(c.isspace() for c in found):
                # (not a key block's lines: "-----BEGIN" would mask every PEM)
                self._secrets.add(found)
        instead = {s: f'"{REDACTED}"' for _n, s, _e, quoted in creds if not quoted}
        for _n, s, e, _q in creds:
            self._secrets.learn(joined[s:e])
        return mask_channel(
            pieces, joined, merge(spans + [(s, e) for _n, s, e, _q in creds]), instead
        )

    def _binary_frames(
        self, chunks: list[tuple[float | None, bytes]]
    ) -> list[tuple[float | None, bytes]]:
        """Length-prefixed, CRC-checked frames (AWS event-stream): mask secrets with ``*`` of the
        same length, recompute the frame checksums, and cut the stream at the original chunk
        boundaries, so the stream still parses and replays frame for frame."""
        data = b"".join(c for _, c in chunks)
        text = data.decode("utf-8", "surrogateescape")
        spans = self._scrubber.spans(text)
        if not spans:
            return list(chunks)
        masked = list(text)
        for s, e in spans:
            for i in range(s, e):
                if masked[i].isascii():
                    masked[i] = "*"
        out = reseal_aws_eventstream("".join(masked).encode("utf-8", "surrogateescape"))
        result: list[tuple[float | None, bytes]] = []
        pos = 0
        for t, c in chunks:
            result.append((t, out[pos : pos + len(c)]))
            pos += len(c)
        return result
