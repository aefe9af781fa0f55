"""Secret redaction, applied to every exchange before anything touches the disk.

Three nets, widest last:

1. **By name** — credential headers (``Authorization``, ``x-api-key``, ``api-key``,
   ``x-goog-api-key``, cookies, AWS tokens, any header whose name says key/token/secret/auth …
   except rate-limit counters), credential query parameters (``key``, ``api_key``, ``token``,
   signatures …) and JSON body keys (``api_key``, ``access_token``, ``password`` …).
2. **By value learned** — every value removed by name is remembered (for the life of the
   redactor) and scrubbed wherever else it appears: bodies, URLs, other headers, stream chunks.
3. **By pattern** — known key formats, by the detector ``looptap verify`` uses too
   (:mod:`cassettes.recording.detector`: gitleaks' ruleset and looptap's rules for LLM vendors'
   keys), and any configured pattern, in headers, URLs and bodies.

Streams are read as their reader reassembles them (:meth:`Redactor.chunks`): each JSON event of
an SSE, NDJSON, WebSocket or AWS event stream is redacted by field name, and the strings a field
carries across events are joined and searched, so a key streamed a few characters per event is
masked in every event it spans (and learned, for the next request that sends it back).

The replacement keeps the shape readable (``Bearer [REDACTED]``) and never contains characters
that would break the JSON or SSE it sits in.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import orjson

from cassettes import bounds
from cassettes.recording.detector import Detector, default_detector
from cassettes.recording.names import (
    _SAFE_HEADER_NAME,
    _SECRET_HEADER_NAME,
    _SECRET_HEADERS,
    _SECRET_QUERY,
    REDACTED,
    URL_TOKEN,
    looks_secret,
    named_spans,
    secret_name,
)
from cassettes.recording.streams import (
    STREAM_BYTES,
    apply_edits,
    aws_frame,
    json_frames,
    json_lines,
    mask_channel,
    merge,
    rewrite,
    stream_texts,
    string_leaves,
)
from cassettes.wire.exchange import Exchange, Headers
from cassettes.wire.framing import is_aws_eventstream, reseal_aws_eventstream

__all__ = ["REDACTED", "URL_TOKEN", "Redactor", "detector", "find_secrets", "looks_secret", "secret_name", "stream_texts"]


def detector(extra_patterns: Iterable[str] = ()) -> Detector:
    """The shared secret detector (:mod:`cassettes.recording.detector`: gitleaks' ruleset and
    looptap's), plus ``extra_patterns``: what ``looptap verify`` reports is what the redactor masks."""
    return default_detector().with_patterns(extra_patterns)


def find_secrets(text: str, extra_patterns: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(kind, match) for every known-format secret in ``text`` (used by ``looptap verify``)."""
    return [(kind, text[s:e]) for kind, s, e in detector(extra_patterns).find(text)]


#: Joins the strings of a JSON body for one scrub: no known pattern matches a NUL or a newline.
_SEP = "\n\x00\n"
#: JSON bodies larger than this are scrubbed as bytes only, not string by string.
_WHOLE_BYTES = 8 << 20
#: How much already-scrubbed text a redactor remembers (characters; a few agents' histories).
_SEEN_CHARS = 64 << 20


def _json_rebuild(value: Any, it: Iterator[str]) -> Any:
    """``value`` with its strings (keys included) replaced, in :meth:`Redactor._json_collect`
    order, from ``it``."""
    if isinstance(value, str):
        return next(it)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = next(it) if isinstance(k, str) else k
            if isinstance(v, int | float) and not isinstance(v, bool) and v and isinstance(k, str) and secret_name(k) == "always":
                out[key] = REDACTED  # a number under a credential's name (a PIN, a numeric key)
                continue
            out[key] = next(it) if isinstance(v, str) else _json_rebuild(v, it) if isinstance(v, (dict, list)) else v
        return out
    if isinstance(value, list):
        return [next(it) if isinstance(v, str) else _json_rebuild(v, it) if isinstance(v, (dict, list)) else v for v in value]
    return value


class Redactor:
    """Redacts exchanges. Remembers the literal secrets it removed, to scrub them everywhere."""

    def __init__(self, extra_patterns: Iterable[str] = (), extra_headers: Iterable[str] = ()) -> None:
        self._headers = _SECRET_HEADERS | {h.lower() for h in extra_headers}
        #: Known formats (gitleaks' rules and looptap's) and the configured patterns: the detector
        #: ``looptap verify`` scans with.
        self._detector = detector(extra_patterns)
        self._literals: set[str] = set()
        self._escaped_cache: dict[str, re.Pattern[str]] = {}
        #: Extra JSON / form field names to redact always (``body_keys`` of the configuration).
        self._body_keys: frozenset[str] = frozenset()
        #: Scrubbed forms of JSON strings already seen, for the history an agent re-sends on every
        #: turn (valid while no new literal is learned; :meth:`_scrub_strings`).
        self._seen: dict[str, str] = {}
        self._seen_chars = 0
        self._seen_literals = 0

    @classmethod
    def configured(
        cls, headers: Iterable[str] = (), patterns: Iterable[str] = (), config: str | Path | None = None
    ) -> Redactor:
        """A redactor with the project's extra names and patterns: ``headers`` and ``patterns``
        given here (``--redact-header``, ``--redact-pattern``) plus ``headers``, ``patterns`` and
        ``body_keys`` of the ``[tool.looptap.redact]`` table in ``config`` (default: the
        ``pyproject.toml`` of the current directory, if any). Raises ``ValueError`` for a bad
        pattern or table."""
        import tomllib

        extra_headers, extra_patterns = list(headers), list(patterns)
        keys: list[str] = []
        path = Path(config) if config is not None else Path("pyproject.toml")
        if path.is_file():
            try:
                table = tomllib.loads(path.read_text("utf-8")).get("tool", {}).get("looptap", {}).get("redact", {})
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ValueError(f"cannot read [tool.looptap.redact] from {path}: {exc}") from None
            if not isinstance(table, dict):
                raise ValueError(f"{path}: [tool.looptap.redact] is not a table")
            for name, into in (("headers", extra_headers), ("patterns", extra_patterns), ("body_keys", keys)):
                value = table.get(name, [])
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{path}: [tool.looptap.redact] {name} must be a list of strings")
                into.extend(value)
        for pat in extra_patterns:
            try:
                re.compile(pat)
            except re.error as exc:
                raise ValueError(f"invalid redaction pattern {pat!r}: {exc}") from None
        r = cls(extra_patterns, extra_headers)
        r._body_keys = frozenset(k.lower() for k in keys)
        return r

    # -- learning -----------------------------------------------------------------------
    def _learn(self, value: str) -> None:
        for piece in re.split(r"[\s,;=]+", value):
            piece = piece.strip().strip('"')
            if len(piece) >= 8 and piece.lower() not in ("bearer", "basic") and piece != REDACTED:
                self._literals.add(piece)

    def _learn_header(self, lname: str, value: str) -> None:
        """Learn only the secret parts of a credential header, not its syntax.

        Cookie attributes (``Domain=api.anthropic.com; HttpOnly``) and SigV4 field names
        (``SignedHeaders=content-type;host``) are not secrets: learning them would scrub the host
        from every later URL and ordinary words from every later body.
        """
        if lname in ("cookie", "set-cookie"):
            pairs = value.split(";")
            for pair in pairs[:1] if lname == "set-cookie" else pairs:
                _, eq, v = pair.partition("=")
                self._learn(v if eq else pair)
        elif value[:17].lower() == "aws4-hmac-sha256 ":
            for m in re.finditer(r"(?i)\b(Credential|Signature)=([^,\s]+)", value):
                self._learn(m.group(2).split("/")[0])
        else:
            self._learn(value)

    # -- text -----------------------------------------------------------------------------
    def _escaped(self, secret: str) -> re.Pattern[str]:
        """A learned secret as it may be written inside a JSON string: any character as ``\\uXXXX``,
        ``/`` as ``\\/`` (an upstream echoing the key in an error, a stream's escaped text)."""
        pat = self._escaped_cache.get(secret)
        if pat is None:
            parts = []
            for c in secret:
                alts = [re.escape(c), f"\\\\u{ord(c):04x}", f"\\\\u{ord(c):04X}"]
                if c == "/":
                    alts.append(r"\\/")
                parts.append("(?:" + "|".join(alts) + ")")
            pat = self._escaped_cache[secret] = re.compile("".join(parts))
        return pat

    def scrub(self, text: str, token: str = REDACTED) -> str:
        escaped = "\\" in text
        for secret in sorted(self._literals, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, token)
            q = quote(secret, safe="")
            if q != secret and q in text:
                text = text.replace(q, token)
            if escaped:
                text = self._escaped(secret).sub(token, text)
        spans = merge(self._detector.spans(text))
        if spans:
            pieces: list[str] = []
            pos = 0
            for s, e in spans:
                pieces += [text[pos:s], token]
                pos = e
            pieces.append(text[pos:])
            text = "".join(pieces)
        return text

    def _scrub_strings(self, texts: list[str]) -> list[str]:
        """:meth:`scrub` of each text, in one pass over the ones not seen before.

        An agent re-sends its whole history on every turn: scrubbing the raw body again each time
        cost milliseconds per round trip on a 200 KB history (13 patterns over every byte), now
        only the new messages are scanned. The new ones are joined with a separator no pattern
        crosses (checked: a different number of pieces falls back to one scrub per text).
        """
        if len(self._literals) != self._seen_literals:
            self._seen.clear()
            self._seen_chars = 0
            self._seen_literals = len(self._literals)
        seen = self._seen
        new = list(dict.fromkeys(t for t in texts if t and t not in seen))
        if new:
            if any(_SEP in t for t in new):
                done = [self.scrub(t) for t in new]
            else:
                done = self.scrub(_SEP.join(new)).split(_SEP)
                if len(done) != len(new):
                    done = [self.scrub(t) for t in new]
            for t, r in zip(new, done, strict=True):
                seen[t] = r
                self._seen_chars += len(t)
        out = [seen.get(t, t) for t in texts]
        while self._seen_chars > _SEEN_CHARS and seen:  # forget the oldest first
            old = next(iter(seen))
            self._seen_chars -= len(old)
            del seen[old]
        return out

    def _scrub_json(self, value: Any) -> tuple[Any, bool]:
        """``value`` (parsed JSON) with credential keys' values redacted and every string, keys
        included, scrubbed; and whether anything changed. Scans the decoded strings, so a secret
        behind a JSON escape is found too."""
        texts: list[str] = []
        found = value if isinstance(value, str) else None
        if found is not None:
            texts.append(found)
        keys = self._json_collect(value, texts) if found is None else False
        done = self._scrub_strings(texts)  # after the walk: it learned the credential values
        if not keys and done == texts:
            return value, False
        return _json_rebuild(value, iter(done)), True

    def _json_collect(self, value: Any, acc: list[str]) -> bool:
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
                if isinstance(v, str):
                    acc.append(v)
                    if v[:1] == "{" and len(v) < (1 << 20):
                        self._learn_embedded(v)
                elif isinstance(v, (dict, list)) and self._json_collect(v, acc):
                    found = True
        elif isinstance(value, list):
            for v in value:
                if isinstance(v, str):
                    acc.append(v)
                elif isinstance(v, (dict, list)) and self._json_collect(v, acc):
                    found = True
        return found

    def _collect_named(self, k: str, v: Any, acc: list[str]) -> bool | None:
        """A JSON key and what its name says of its value: the key is appended to ``acc``; a
        credential's string value is learned and appended as ``REDACTED`` (True: the value is
        done); a number under a credential's name is learned (False: it is rebuilt as text);
        ``None`` when nothing was found here."""
        acc.append(k)
        kind = ("always" if k.lower() in self._body_keys else secret_name(k)) if v and not isinstance(v, bool) else None
        if kind is None:
            return None
        if isinstance(v, str) and (kind == "always" or looks_secret(v)):
            self._learn(v)
            acc.append(REDACTED)
            return True
        if kind == "always" and isinstance(v, int | float):
            self._learn(str(v))
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
                self._learn(v)
            elif isinstance(v, int | float) and not isinstance(v, bool) and len(str(v)) >= 8:
                self._learn(str(v))
            elif isinstance(v, dict | list):
                self._learn_leaves(v, depth + 1)

    def _learn_response(self, chunks: list[tuple[float | None, bytes]]) -> None:
        """Learn the credential fields of a JSON response (an OAuth ``access_token``, a created
        key) or of the JSON events of a stream, so that scrubbing the chunks masks them."""
        data = b"".join(c for _, c in chunks)
        if not data or len(data) > (64 << 20) or not any(m in data for m in (b"token", b"key", b"secret", b"pass", b"auth", b"cred")):
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
                self._json_collect(doc, [])

    def _learn_minted(self, url: str, chunks: list[tuple[float | None, bytes]]) -> None:
        """A credential minted by an endpoint named for one (``POST /v1/realtime/client_secrets``
        → ``{"value": "ek_…"}``, Gemini's ``auth_tokens`` → ``{"name": "auth_tokens/…"}``,
        ``…/api_keys``, ``…/tokens``): its top-level ``value`` / ``token`` / ``key`` / ``secret`` /
        ``name`` is learned when it looks like one, so the scrub masks it here and everywhere
        after (the client then sends it back)."""
        try:
            segments = [seg for seg in urlsplit(url).path.split("/") if seg]
        except ValueError:
            return
        if not any(secret_name(seg) is not None or seg.lower() in ("tokens", "ephemeral_tokens") for seg in segments[-3:]):
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
                        self._learn(piece)

    def _learn_embedded(self, text: str) -> None:
        """JSON inside a JSON string (tool-call arguments, a serialised config): learn the values
        of its credential keys, which the scrub of the string then masks."""
        try:
            inner = bounds.loads(text)
        except orjson.JSONDecodeError:
            return
        if isinstance(inner, dict):
            self._json_collect(inner, [])

    def scrub_bytes(self, data: bytes) -> bytes:
        if not data:
            return data
        text = data.decode("utf-8", "surrogateescape")
        out = self.scrub(text)
        return data if out == text else out.encode("utf-8", "surrogateescape")

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Merged (start, end) spans of every secret in ``text``."""
        found: list[tuple[int, int]] = []
        escaped = "\\" in text
        for secret in self._literals:
            for form in {secret, quote(secret, safe="")}:
                i = text.find(form)
                while i >= 0:
                    found.append((i, i + len(form)))
                    i = text.find(form, i + 1)
            if escaped:
                found.extend(m.span() for m in self._escaped(secret).finditer(text))
        found.extend(self._detector.spans(text))
        return merge(found)

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
            return [(t, self.scrub_bytes(c)) for t, c in chunks]
        texts = [c.decode("utf-8", "surrogateescape") for _, c in chunks]
        joined = "".join(texts)
        spans = self._spans(joined)
        if not spans:
            return list(chunks)
        result: list[tuple[float | None, bytes]] = []
        pos = 0
        k = 0
        for (t, data), text in zip(chunks, texts, strict=True):
            lo, hi = pos, pos + len(text)
            pos = hi
            pieces: list[str] = []
            i = lo
            while i < hi:
                while k < len(spans) and spans[k][1] <= i:
                    k += 1
                if k < len(spans) and spans[k][0] < hi:
                    s, e = spans[k]
                    if s > i:
                        pieces.append(joined[i:s])
                        i = s
                    if s >= lo:
                        pieces.append(REDACTED)
                    i = min(e, hi)
                else:
                    pieces.append(joined[i:hi])
                    i = hi
            new = "".join(pieces)
            result.append((t, data if new == text else new.encode("utf-8", "surrogateescape")))
        return result

    # -- streams as their reader sees them -------------------------------------------------------
    def _stream_lines(self, chunks: list[tuple[float | None, bytes]]) -> list[tuple[float | None, bytes]]:
        """A stream of JSON events, one per line (SSE ``data:`` lines, NDJSON, a WebSocket
        session's ``> `` / ``< `` messages), redacted as its reader reassembles it: each event's
        fields by name (:meth:`_scrub_json`), and the strings a field carries across events (the
        text deltas) joined, so a secret streamed a few characters per event is found and masked
        in every event it spans. Events that change are written back in place; the chunks keep
        their number and times."""
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
        changed = self._mask_docs([d for _, _, d in docs], named_spans(data, [(a, b) for a, b, _ in docs]))
        if not changed:
            return chunks
        # (the masking edited the parsed events in place: the originals are parsed again)
        edits = [(docs[i][0], docs[i][1], rewrite(data[docs[i][0] : docs[i][1]], bounds.loads(data[docs[i][0] : docs[i][1]]), doc))
                 for i, doc in sorted(changed.items())]
        return apply_edits(chunks, data, edits)

    def _stream_frames(self, chunks: list[tuple[float | None, bytes]]) -> list[tuple[float | None, bytes]]:
        """AWS event-stream frames (Bedrock) redacted like :meth:`_stream_lines`: each frame's JSON
        payload, or the JSON event base64-encoded in its ``bytes`` field (InvokeModel streams);
        changed frames are rebuilt with their lengths and checksums."""
        data = b"".join(c for _, c in chunks)
        if len(data) > STREAM_BYTES:
            return chunks
        frames, docs, originals = json_frames(data)
        named = named_spans(data, [(a, b) for a, b, _, _ in frames])
        named = [n or f[3] is not None for n, f in zip(named, frames, strict=True)]  # (base64 hides the names)
        changed = self._mask_docs(docs, named) if len(docs) >= 2 else {}
        if not changed:
            return chunks
        edits = []
        for i, doc in sorted(changed.items()):
            start, end, hlen, wrapper = frames[i]
            payload = orjson.dumps(doc) if wrapper is not None else rewrite(originals[i], bounds.loads(originals[i]), doc)
            if wrapper is not None:
                payload = orjson.dumps({**wrapper, "bytes": base64.b64encode(payload).decode()})
            edits.append((start, end, aws_frame(data[start + 12 : start + 12 + hlen], payload)))
        return apply_edits(chunks, data, edits)

    def _mask_docs(self, docs: list[Any], named: list[bool]) -> dict[int, Any]:
        """Redact a stream's JSON events: by field name in the events whose text names a credential
        anywhere (``named``: :func:`named_spans`), then the strings each field carries across events,
        joined (a text delta's whole text; a field seen once is its own), scanned for learned
        values and known formats. Returns the events that changed, by index."""
        texts: list[str] = []
        slices: list[tuple[int, int, int, bool]] = []
        for i, (doc, walk) in enumerate(zip(docs, named, strict=True)):
            if walk and isinstance(doc, dict | list):
                start = len(texts)
                keys = self._json_collect(doc, texts)
                slices.append((i, start, len(texts), keys))
        out: dict[int, Any] = {}
        new_docs = list(docs)
        if slices:
            done = self._scrub_strings(texts)
            for i, a, b, keys in slices:
                if keys or done[a:b] != texts[a:b]:
                    new_docs[i] = out[i] = _json_rebuild(docs[i], iter(done[a:b]))
        # The strings each field carries across events, in order: a text delta's channel.
        channels: dict[str, list[tuple[int, Any, Any, str]]] = {}
        for i, doc in enumerate(new_docs):
            if isinstance(doc, dict | list):
                string_leaves(doc, "", i, channels)
        for pieces in channels.values():
            joined = "".join(p[3] for p in pieces)
            spans = self._spans(joined)
            if not spans:
                continue
            for s, e in spans:
                found = joined[s:e]  # learned: masked wherever else it appears (request history, raw bytes)
                if len(found) >= 8 and found != REDACTED and not any(c.isspace() for c in found):
                    self._literals.add(found)  # (not a key block's lines: "-----BEGIN" would mask every PEM)
            for i in mask_channel(pieces, joined, spans):
                out[i] = new_docs[i]
        return out

    def _binary_frames(self, chunks: list[tuple[float | None, bytes]]) -> list[tuple[float | None, bytes]]:
        """Length-prefixed, CRC-checked frames (AWS event-stream): mask secrets with ``*`` of the
        same length, recompute the frame checksums, and cut the stream at the original chunk
        boundaries, so the stream still parses and replays frame for frame."""
        data = b"".join(c for _, c in chunks)
        text = data.decode("utf-8", "surrogateescape")
        spans = self._spans(text)
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

    # -- parts of an exchange ---------------------------------------------------------------
    def _subprotocols(self, value: str) -> str:
        """``Sec-WebSocket-Protocol``: browsers cannot set headers on a WebSocket, so credentials
        ride in the subprotocol list (``openai-insecure-api-key.<key>``, ``token, <key>``,
        ``base64url.bearer.authorization.k8s.io.<token>``). A part after a credential's name is
        masked and learned; the protocol names stay."""
        out: list[str] = []
        after_name = False
        for raw in value.split(","):
            token = raw.strip()
            parts = token.split(".")
            cut = next((i for i, p in enumerate(parts[:-1]) if secret_name(p) is not None or p.lower() in ("bearer", "token")), None)
            if after_name and token:
                self._learn(token)
                token = REDACTED
            elif cut is not None:
                secret = ".".join(parts[cut + 1 :])
                self._learn(secret)
                token = ".".join(parts[: cut + 1]) + "." + REDACTED
            after_name = token.lower() in ("token", "bearer", "authorization", "api-key", "apikey")
            out.append(token)
        return ", ".join(out)

    def _header_value(self, name: str, value: str) -> str:
        lname = name.lower()
        if lname == "sec-websocket-protocol":
            return self._subprotocols(value)
        named = _SECRET_HEADER_NAME.search(lname) or secret_name(lname) is not None
        if lname in self._headers or (named and not _SAFE_HEADER_NAME.search(lname)):
            if not value:
                return value
            self._learn_header(lname, value)
            scheme, sep, _ = value.partition(" ")
            if sep and scheme.lower() in ("bearer", "basic", "token", "aws4-hmac-sha256", "digest"):
                return f"{scheme} {REDACTED}"
            return REDACTED
        return value

    def headers(self, headers: Headers) -> Headers:
        first = [(k, self._header_value(k, v)) for k, v in headers]
        return [(k, self.scrub(v)) for k, v in first]

    def url(self, url: str) -> str:
        """Redacted URL. Uses ``REDACTED`` without brackets, which would read as an IPv6 host."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return self.scrub(url, URL_TOKEN)
        if parts.query:
            parts = parts._replace(query=self._query(parts.query))
        self._learn_path(parts.path)
        if parts.username or parts.password:
            host = parts.hostname or ""
            if parts.port:
                host = f"{host}:{parts.port}"
            if parts.password:
                self._learn(parts.password)
            parts = parts._replace(netloc=f"{URL_TOKEN}@{host}")
        return self.scrub(urlunsplit(parts), URL_TOKEN)

    def _query(self, query: str) -> str:
        """A query string with its credential parameters' values learned and masked."""
        pairs = parse_qsl(query, keep_blank_values=True)
        secret = [bool(_SECRET_QUERY.match(k) and v) for k, v in pairs]
        if not any(secret):
            return query
        for (_, v), s in zip(pairs, secret, strict=True):
            if s:
                self._learn(v)
        return "&".join(f"{quote(k, safe='')}={URL_TOKEN if s else quote(v, safe='')}" for (k, v), s in zip(pairs, secret, strict=True))

    def _learn_path(self, path: str) -> None:
        """Learn a credential in a URL's path: /key/<key>/, /token/<token>, /bot<id>:<token>
        (the scrub of the whole URL then masks it)."""
        segments = path.split("/")
        for i in range(1, len(segments)):
            seg = segments[i]
            if looks_secret(seg) and (secret_name(segments[i - 1]) is not None or segments[i - 1].lower() in ("bot", "keys")):
                self._learn(seg)
            elif seg.lower().startswith("bot") and ":" in seg and looks_secret(seg[3:].split(":", 1)[1] + "0a"):
                self._learn(seg[3:])

    def _learn_form(self, body: bytes, ctype: str) -> None:
        """Learn the credential fields of a form-urlencoded or multipart body (``client_secret``,
        ``refresh_token``, ``api_key``), so that scrubbing the bytes masks them."""
        if "x-www-form-urlencoded" in ctype:
            for k, v in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
                kind = secret_name(k)
                if v and (kind == "always" or (kind and looks_secret(v))):
                    self._learn(v)
        elif "multipart/" in ctype:
            for m in re.finditer(rb'name="([^"\r\n]{1,200})"[^\n]*\n(?:[^\r\n]+\r?\n){0,8}\r?\n(.{0,4096}?)\r?\n--', body, re.S):
                name = m.group(1).decode("utf-8", "replace")
                value = m.group(2).decode("utf-8", "replace").strip()
                kind = secret_name(name)
                if value and (kind == "always" or (kind and looks_secret(value))):
                    self._learn(value)

    def _undecoded(self, data: bytes, encoding: str | None) -> tuple[bytes, str] | None:
        """A body kept as received because its Content-Encoding failed to decode hides whatever
        is inside from every scrub. Decode what can be decoded; if that holds a secret, return the
        decoded part with the secrets masked (and a note) to store instead of the raw bytes."""
        if not data or not encoding:
            return None
        out = salvage_decode(data)
        if not out:
            return None
        text = out.decode("utf-8", "surrogateescape")
        try:
            parsed, changed = self._scrub_json(orjson.loads(out))
            scrubbed = orjson.dumps(parsed) if changed else out
        except orjson.JSONDecodeError:
            scrubbed = self.scrub(text).encode("utf-8", "surrogateescape")
            changed = scrubbed != out
        if not changed:
            return None
        return scrubbed, (
            f"Content-Encoding {encoding} did not decode; what did decode held a secret, so it is stored "
            "decoded with the secret masked instead of the raw bytes"
        )

    def forget_seen(self) -> None:
        """Drop the cache of strings already scrubbed (what was learned stays): for a redactor
        kept only to scrub a few lines later, such as a replay miss's."""
        self._seen.clear()
        self._seen_chars = 0

    def exchange(self, ex: Exchange) -> Exchange:
        """A redacted copy of ``ex`` (the original is not modified)."""
        req_headers = self.headers(ex.request_headers)  # learn header secrets first
        url = self.url(ex.url)
        notes = list(ex.notes)
        body, parsed = self._request_body(ex, notes)
        resp_headers = self.headers(ex.response_headers)
        chunks = self._response_chunks(ex, notes)
        out = replace(
            ex,
            url=url,
            request_headers=req_headers,
            request_body=body,
            response_headers=resp_headers,
            response_chunks=chunks,
            transport_error=self.scrub(ex.transport_error) if ex.transport_error else None,
            notes=[self.scrub(n) for n in notes],
            edits=self._scrub_json(ex.edits)[0] if ex.edits else ex.edits,
        )
        out.forget_request_json()
        if body is ex.request_body and parsed is not None:
            out.set_request_json(parsed)  # unchanged: its parse is kept
        return out

    def _request_body(self, ex: Exchange, notes: list[str]) -> tuple[bytes, Any]:
        """The request body redacted, and its parsed JSON when that may be kept (``None`` else).
        A body kept encoded because it did not decode is stored decoded and masked when what did
        decode holds a secret (noted in ``notes``)."""
        body = ex.request_body
        req_encoding = ex.request_header("content-encoding")
        salvaged = self._undecoded(body, req_encoding) if req_encoding and any(n.startswith("request:") for n in ex.notes) else None
        if salvaged is not None:
            notes.append("request: " + salvaged[1])
            body = salvaged[0]
        ctype = (ex.request_header("content-type") or "").lower()
        if "form" in ctype:
            self._learn_form(body, ctype)
        parsed = ex.request_json() if salvaged is None else None
        if parsed is None or ex.request_json_cut:
            return self.scrub_bytes(body), None
        new_parsed, changed = self._scrub_json(parsed)
        return (orjson.dumps(new_parsed), None) if changed else (body, parsed)

    def _response_chunks(self, ex: Exchange, notes: list[str]) -> list[tuple[float | None, bytes]]:
        """The response chunks redacted (credentials it mints or returns learned first)."""
        resp_chunks = ex.response_chunks
        resp_encoding = ex.response_header("content-encoding")
        if resp_encoding and ex.decoded_from is None and resp_chunks:
            salvaged = self._undecoded(b"".join(c for _, c in resp_chunks), resp_encoding)
            if salvaged is not None:
                resp_chunks = [(resp_chunks[0][0], salvaged[0])]
                notes.append(salvaged[1])
        self._learn_response(resp_chunks)
        self._learn_minted(ex.url, resp_chunks)
        return self.chunks(resp_chunks)


def salvage_decode(data: bytes, limit: int = 64 << 20) -> bytes:
    """Whatever of a broken compressed body can be decoded (gzip with a bad CRC or followed by
    junk, raw or zlib deflate, brotli, zstd), up to ``limit`` bytes; ``b""`` if nothing
    (:func:`cassettes.wire.decoding.salvage`: within the decompression budget)."""
    from cassettes.wire.decoding import salvage

    return salvage(data, limit)
