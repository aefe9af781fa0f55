"""Secret redaction, applied to every exchange before anything touches the disk.

Three nets, widest last:

1. **By name** — credential headers (``Authorization``, ``x-api-key``, ``api-key``,
   ``x-goog-api-key``, cookies, AWS tokens, any header whose name says key/token/secret/auth …
   except rate-limit counters), credential query parameters (``key``, ``api_key``, ``token``,
   signatures …) and JSON body keys (``api_key``, ``access_token``, ``password`` …).
2. **By value learned** — every value removed by name is remembered (for the life of the
   redactor) and scrubbed wherever else it appears after: bodies, URLs, other headers, streams.
3. **By pattern** — known key formats, by the detector ``looptap verify`` uses too
   (:mod:`cassettes.recording._detector`: gitleaks' ruleset and looptap's rules for LLM vendors'
   keys), and any configured pattern, in headers, URLs and bodies.

Streams are read as their reader reassembles them (:meth:`Redactor.chunks`): each JSON event of
an SSE, NDJSON, WebSocket or AWS event stream is redacted by field name, and the strings a field
carries across events are joined and searched, so a key streamed a few characters per event is
masked in every event it spans. A text is masked as the run first decided for it, so an echo or
a history sent again reads as it did (docs/redaction.md: what looptap reads is what was sent).

The nets are parts of one pipeline, each with one job, composed by :class:`Redactor` and sharing
the secrets learned (:class:`~cassettes.recording._scrubber.Secrets`): the
:class:`~cassettes.recording._scrubber.Scrubber` (by value learned and by pattern), the
:class:`HeaderRedactor` and :class:`UrlRedactor` here, and the bodies' parts
(:mod:`cassettes.recording._bodies`: JSON by field name, streams, the credentials bodies teach).

The replacement keeps the shape readable (``Bearer [REDACTED]``) and never contains characters
that would break the JSON or SSE it sits in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Set
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import orjson

from ..bounds import parse_toml
from ..errors import CassetteIOError
from ..patterns import PatternError, UserPattern
from ..storage import Redacted, read_config
from ..wire import Exchange, Headers, body_cut, salvage
from ._bodies import Chunks, JsonRedactor, StreamRedactor
from ._credentials import (
    CUT_TAIL,
    REDACTED,
    URL_TOKEN,
    header_secret,
    looks_secret,
    path_secrets,
    query_secret,
    secret_name,
)
from ._detector import Detector
from ._learner import BodyLearner
from ._scrubber import Scrubber, Secrets, detector
from ._streams import stream_texts

__all__ = [
    "REDACTED",
    "Redactor",
    "detector",
    "looks_secret",
    "secret_name",
    "stream_texts",
]


class HeaderRedactor:
    """Redacts headers: a credential header's value (by its name: the built-in names, any name
    that says key/token/secret/auth, the configured ones) masked and its secret parts learned; the
    credentials a WebSocket's subprotocol list carries; then every value scrubbed."""

    def __init__(
        self, secrets: Secrets, scrubber: Scrubber, extra_headers: Iterable[str] = ()
    ) -> None:
        self._secrets = secrets
        self._scrubber = scrubber
        self._names = frozenset(h.lower() for h in extra_headers)

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
                self._secrets.learn(v if eq else pair)
        elif value[:17].lower() == "aws4-hmac-sha256 ":
            for m in re.finditer(r"(?i)\b(Credential|Signature)=([^,\s]+)", value):
                self._secrets.learn(m.group(2).split("/")[0])
        else:
            self._secrets.learn(value)

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
            cut = next(
                (
                    i
                    for i, p in enumerate(parts[:-1])
                    if secret_name(p) is not None or p.lower() in ("bearer", "token")
                ),
                None,
            )
            if after_name and token:
                self._secrets.learn(token)
                token = REDACTED
            elif cut is not None:
                secret = ".".join(parts[cut + 1 :])
                self._secrets.learn(secret)
                token = ".".join(parts[: cut + 1]) + "." + REDACTED
            after_name = token.lower() in ("token", "bearer", "authorization", "api-key", "apikey")
            out.append(token)
        return ", ".join(out)

    def _header_value(self, name: str, value: str) -> str:
        lname = name.lower()
        if lname == "sec-websocket-protocol":
            return self._subprotocols(value)
        if lname in self._names or header_secret(lname, value):
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
        return [(k, self._scrubber.scrub(v)) for k, v in first]


class UrlRedactor:
    """Redacts URLs: credential query parameters and userinfo masked and learned, a credential in
    the path learned, then the whole URL scrubbed (``REDACTED`` without brackets)."""

    def __init__(self, secrets: Secrets, scrubber: Scrubber) -> None:
        self._secrets = secrets
        self._scrubber = scrubber

    def url(self, url: str) -> str:
        """Redacted URL. Uses ``REDACTED`` without brackets, which would read as an IPv6 host."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return self._scrubber.scrub(url, URL_TOKEN)
        if parts.query:
            parts = parts._replace(query=self._query(parts.query))
        if "=" in parts.fragment:  # an implicit grant's answer: #access_token=…&id_token=…
            parts = parts._replace(fragment=self._query(parts.fragment))
        self._learn_path(parts.path)
        if parts.username or parts.password:
            host = parts.hostname or ""
            if parts.port:
                host = f"{host}:{parts.port}"
            if parts.password:
                self._secrets.learn(parts.password)
            parts = parts._replace(netloc=f"{URL_TOKEN}@{host}")
        return self._scrubber.scrub(urlunsplit(parts), URL_TOKEN)

    def _query(self, query: str) -> str:
        """A query string with its credential parameters' values learned and masked."""
        pairs = parse_qsl(query, keep_blank_values=True)
        secret = [query_secret(k, v) and v not in (URL_TOKEN, REDACTED) for k, v in pairs]
        if not any(secret):
            return query
        for (_, v), s in zip(pairs, secret, strict=True):
            if s:
                self._secrets.learn(v)
        return "&".join(
            f"{quote(k, safe='')}={URL_TOKEN if s else quote(v, safe='')}"
            for (k, v), s in zip(pairs, secret, strict=True)
        )

    def _learn_path(self, path: str) -> None:
        """Learn a credential in a URL's path (:func:`path_secrets`; the scrub of the whole URL
        then masks it)."""
        for secret in path_secrets(path):
            self._secrets.learn(secret)


class Redactor:
    """Redacts exchanges. Remembers the literal secrets it removed, to scrub them everywhere.

    A pipeline of parts sharing what was learned (:class:`~cassettes.recording._scrubber.Secrets`):
    the :class:`~cassettes.recording._scrubber.Scrubber` (by value learned and by pattern), the
    :class:`HeaderRedactor`, the :class:`UrlRedactor`, and for bodies the
    :class:`~cassettes.recording._bodies.JsonRedactor`,
    :class:`~cassettes.recording._learner.BodyLearner` and
    :class:`~cassettes.recording._bodies.StreamRedactor`. This class only composes them, in the
    order an exchange needs (a request's headers learned before its body is scrubbed …).
    """

    def __init__(
        self,
        extra_patterns: Iterable[str] = (),
        extra_headers: Iterable[str] = (),
        body_keys: Iterable[str] = (),
    ) -> None:
        self._secrets = Secrets()
        self._scrubber = Scrubber(self._secrets, detector(extra_patterns))
        self._json = JsonRedactor(
            self._secrets, self._scrubber, frozenset(k.lower() for k in body_keys)
        )
        self._learner = BodyLearner(self._secrets, self._json)
        self._streams = StreamRedactor(self._scrubber, self._json)
        self._headers = HeaderRedactor(self._secrets, self._scrubber, extra_headers)
        self._url = UrlRedactor(self._secrets, self._scrubber)

    @classmethod
    def configured(
        cls,
        headers: Iterable[str] = (),
        patterns: Iterable[str] = (),
        config: str | Path | None = None,
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
            try:  # bounded in size and depth, one line naming the file (storage, bounds)
                table = (
                    parse_toml(read_config(path, "the redaction table's file"))
                    .get("tool", {})
                    .get("looptap", {})
                    .get("redact", {})
                )
            except (CassetteIOError, tomllib.TOMLDecodeError) as exc:
                raise ValueError(f"cannot read [tool.looptap.redact] from {path}: {exc}") from None
            if not isinstance(table, dict):
                raise ValueError(f"{path}: [tool.looptap.redact] is not a table")
            for name, into in (
                ("headers", extra_headers),
                ("patterns", extra_patterns),
                ("body_keys", keys),
            ):
                value = table.get(name, [])
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(
                        f"{path}: [tool.looptap.redact] {name} must be a list of strings"
                    )
                into.extend(value)
        for pat in extra_patterns:
            try:
                UserPattern(pat)
            except PatternError as exc:
                raise ValueError(f"invalid redaction pattern {pat!r}: {exc}") from None
        return cls(extra_patterns, extra_headers, keys)

    def headers(self, headers: Headers) -> Headers:
        return self._headers.headers(headers)

    def url(self, url: str) -> str:
        """Redacted URL. Uses ``REDACTED`` without brackets, which would read as an IPv6 host."""
        return self._url.url(url)

    def scrub(self, text: str, token: str = REDACTED) -> str:
        """``text`` with every learned secret and every known-format one masked."""
        return self._scrubber.scrub(text, token)

    def scrub_bytes(self, data: bytes) -> bytes:
        return self._scrubber.scrub_bytes(data)

    def spans(self, text: str, present: Set[str] | None = None) -> list[tuple[int, int]]:
        """Where :meth:`scrub` masks ``text`` (merged, in order; ``present``: the detector's
        keywords of ``text``, when known: :meth:`~._detector.Detector.keywords`)."""
        return self._scrubber.spans(text, present=present)

    @property
    def detector(self) -> Detector:
        return self._scrubber.detector

    def seal(self, data: bytes) -> Redacted:
        """``data`` with every secret masked (:meth:`scrub_bytes`), as the one type looptap's
        writers take (:class:`~cassettes.storage.Redacted`: docs/redaction.md, "One gate")."""
        return Redacted(self.scrub_bytes(data))

    def scrub_words(self, words: list[str], token: str = REDACTED) -> list[str]:
        """``words`` (a process's argv) read as the one command line they make, each word masked
        where a secret of that line falls in it (``curl -u bob:<password>``: the password is
        another word than the option naming it), then alone."""
        line = " ".join(words)
        spans = self._scrubber.spans(line)
        out: list[str] = []
        at = 0
        for word in words:
            pieces: list[str] = []
            pos = 0
            for s, e in spans:
                s, e = max(s - at, pos), min(e - at, len(word))
                if s < e:
                    pieces += [word[pos:s], token]
                    pos = e
            out.append(self.scrub("".join(pieces) + word[pos:] if pieces else word, token))
            at += len(word) + 1
        return out

    def chunks(self, chunks: Chunks) -> Chunks:
        """Response chunks redacted (:meth:`StreamRedactor.learn`, then masked)."""
        return self._streams.learn(chunks)()

    def forget_seen(self) -> None:
        """Drop the masks remembered and the texts they are of (what was learned stays): for a
        redactor kept only to scrub a few lines later, such as a replay miss's."""
        self._json.forget()

    def _undecoded(self, data: bytes, encoding: str | None) -> tuple[bytes, str] | None:
        """A body kept as received because its Content-Encoding failed to decode hides whatever
        is inside from every scrub. Decode what can be decoded; if that holds a secret, return the
        decoded part with the secrets masked (and a note) to store instead of the raw bytes."""
        if not data or not encoding:
            return None
        out = salvage(data)
        if not out:
            return None
        text = out.decode("utf-8", "surrogateescape")
        try:
            parsed, changed = self._json.scrub_json(orjson.loads(out))
            scrubbed = orjson.dumps(parsed) if changed else out
        except orjson.JSONDecodeError:  # (a prefix: what decoded before the stream broke)
            scrubbed = self._scrubber.scrub(text).encode("utf-8", "surrogateescape")
            scrubbed = self._cut_end([(None, scrubbed)])[0][1]
            changed = scrubbed != out
        if not changed:
            return None
        return scrubbed, (
            f"Content-Encoding {encoding} did not decode; what did decode held a secret, so it is "
            "stored decoded with the secret masked instead of the raw bytes"
        )

    def document(self, value: Any) -> Any:
        """A parsed JSON document redacted the way a cassette's JSON bodies are (a copy when
        anything changed; ``value`` itself otherwise): credential names' values (in JSON held in
        strings too, whatever their length), every value this redactor learned (from
        :meth:`headers`, :meth:`exchange` …: a key the run sent, echoed back) and the known
        formats, keys included. For what is written from recorded or live data besides a
        cassette (a ``compare`` report): ``Redactor.configured()``, the exchanges or headers it
        should learn from, then this."""
        return self._json.scrub_json(value)[0]

    @staticmethod
    def query_names(url: str) -> frozenset[str]:
        """The names of ``url``'s query parameters the recorder redacts *by their name*
        (:func:`~cassettes.recording._credentials.query_secret`'s rule): what the replay's matcher
        leaves out of a comparison, present or not, whatever the value (a parameter redacted by
        its value's format only is compared, redacted alike on both sides)."""
        try:
            query = urlsplit(url).query
        except ValueError:
            return frozenset()
        return frozenset(
            k for k, _ in parse_qsl(query, keep_blank_values=True) if secret_name(k, "query")
        )

    def request(
        self, url: str, headers: Headers, body: bytes, parsed: Any = None
    ) -> tuple[str, bytes, Any]:
        """A request's URL and body as a recording of it holds them (what :meth:`exchange` makes
        of them: its headers' credentials learned first), and the body's parse when it is at hand
        (``None`` else). The replay's matcher compares a live request so: it ignores exactly what
        the recorder redacted (one rule set: docs/redaction.md)."""
        self._headers.headers(headers)
        url = self._url.url(url)
        ex = Exchange("POST", url, list(headers), body)
        if parsed is not None:
            ex.set_request_json(parsed)
        out, masked = self._request_body(ex, [])()
        return url, out, masked if masked is not None else (parsed if out is body else None)

    def exchange(self, ex: Exchange) -> Exchange:
        """A redacted copy of ``ex`` (the original is not modified). All the round trip teaches
        (its headers, URL, request body, response) is learned before its bodies are masked."""
        req_headers = self.headers(ex.request_headers)  # learn header secrets first
        url = self.url(ex.url)
        notes = list(ex.notes)
        request = self._request_body(ex, notes)
        resp_headers = self.headers(ex.response_headers)
        response = self._response_chunks(ex, notes)
        body, parsed = request()
        chunks = response()
        out = replace(
            ex,
            url=url,
            request_headers=req_headers,
            request_body=body,
            response_headers=resp_headers,
            response_chunks=self._cut_end(chunks)
            if body_cut(ex.transport_error, ex.notes)
            else chunks,
            transport_error=self._scrubber.scrub(ex.transport_error)
            if ex.transport_error
            else None,
            notes=[self._scrubber.scrub(n) for n in notes],
            edits=self._json.scrub_json(ex.edits)[0] if ex.edits else ex.edits,
        )
        out.forget_request_json()
        if body is ex.request_body and parsed is not None:
            out.set_request_json(parsed)  # unchanged: its parse is kept
        return out

    def cut_at(self, text: str) -> int | None:
        """Where a secret cut short by the end of ``text`` begins (``text`` was cut by a bound:
        docs/redaction.md, "Cut by a bound"): after ``Bearer`` or a credential's name, at a known
        format's literal (:meth:`Detector.cut_at <cassettes.recording._detector.Detector.cut_at>`),
        or the first characters of a value learned; ``None`` when nothing proves one there."""
        found = [self._scrubber.detector.cut_at(text), self._secrets.cut_at_end(text)]
        return min((i for i in found if i is not None), default=None)

    def cut_end(self, text: str, token: str = REDACTED) -> str:
        """``text``, whose end a bound cut, with that end masked from where :meth:`cut_at` says
        a secret the cut fell in begins (``text`` itself when nothing proves one there)."""
        at = self.cut_at(text)
        return text if at is None else text[:at] + token

    def _cut_end(self, chunks: Chunks) -> Chunks:
        """A body cut mid-way (a reset, a compressed stream without its end) may end in the first
        characters of a key: no format finds so few, and they are not the value learned. Its end
        is masked from where :meth:`cut_at` says one begins (``[REDACTED]`` in the chunk it
        begins in; the chunks after it, holding only the rest of it, dropped)."""
        body = b"".join(c for _, c in chunks)
        tail = body[-4 * CUT_TAIL :]
        text = tail.decode("utf-8", "surrogateescape")
        start = self.cut_at(text)
        if start is None:
            return chunks
        at = len(body) - len(tail) + len(text[:start].encode("utf-8", "surrogateescape"))
        out: Chunks = []
        pos = 0
        for t, data in chunks:
            if pos + len(data) <= at:
                out.append((t, data))
            elif pos <= at:
                out.append((t, data[: at - pos] + REDACTED.encode()))
            pos += len(data)
        return out

    def _request_body(self, ex: Exchange, notes: list[str]) -> Callable[[], tuple[bytes, Any]]:
        """Learn what the request body teaches; the function returned masks it: the body, and
        its parsed JSON when that may be kept (``None`` else). A body kept encoded because it did
        not decode is stored decoded and masked when what did decode holds a secret (noted in
        ``notes``)."""
        body = ex.request_body
        req_encoding = ex.request_header("content-encoding")
        salvaged = (
            self._undecoded(body, req_encoding)
            if req_encoding and any(n.startswith("request:") for n in ex.notes)
            else None
        )
        if salvaged is not None:
            notes.append("request: " + salvaged[1])
            body = salvaged[0]
        ctype = (ex.request_header("content-type") or "").lower()
        if "form" in ctype:
            self._learner.form(body, ctype)
        parsed = ex.request_json() if salvaged is None else None
        if parsed is None or ex.request_json_cut:
            return lambda: (self._scrubber.scrub_bytes(body), None)
        mask = self._json.learn(parsed)

        def masked() -> tuple[bytes, Any]:
            new_parsed, changed = mask()
            return (orjson.dumps(new_parsed), None) if changed else (body, parsed)

        return masked

    def _response_chunks(self, ex: Exchange, notes: list[str]) -> Callable[[], Chunks]:
        """Learn what the response teaches (the credentials it mints or returns, by name); the
        function returned masks its chunks."""
        resp_chunks = ex.response_chunks
        resp_encoding = ex.response_header("content-encoding")
        if resp_encoding and ex.decoded_from is None and resp_chunks:
            salvaged = self._undecoded(b"".join(c for _, c in resp_chunks), resp_encoding)
            if salvaged is not None:
                resp_chunks = [(resp_chunks[0][0], salvaged[0])]
                notes.append(salvaged[1])
        self._learner.minted(ex.url, resp_chunks)
        return self._streams.learn(resp_chunks)
