"""Secret redaction, applied to every exchange before anything touches the disk.

Three nets, widest last:

1. **By name** — credential headers (``Authorization``, ``x-api-key``, ``api-key``,
   ``x-goog-api-key``, cookies, AWS tokens, any header whose name says key/token/secret/auth …
   except rate-limit counters), credential query parameters (``key``, ``api_key``, ``token``,
   signatures …) and JSON body keys (``api_key``, ``access_token``, ``password`` …).
2. **By value learned** — every value removed by name is remembered (for the life of the
   redactor) and scrubbed wherever else it appears: bodies, URLs, other headers, stream chunks.
3. **By pattern** — known key formats (OpenAI/Anthropic ``sk-…``, Google ``AIza…``/``ya29.…``,
   AWS ``AKIA…``, GitHub, Groq, Hugging Face, xAI, JWTs, ``Bearer …``) and any configured
   pattern, in headers, URLs and bodies, streamed or not.

The replacement keeps the shape readable (``Bearer [REDACTED]``) and never contains characters
that would break the JSON or SSE it sits in.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import orjson

from cassettes import bounds
from cassettes.wire.exchange import Exchange, Headers
from cassettes.wire.framing import is_aws_eventstream, reseal_aws_eventstream

__all__ = ["REDACTED", "SECRET_PATTERNS", "URL_TOKEN", "Redactor", "find_secrets"]

REDACTED = "[REDACTED]"
#: The replacement inside URLs (brackets would turn a netloc into an IPv6 literal).
URL_TOKEN = "REDACTED"

_SECRET_HEADERS = {
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "set-cookie",
    "x-amz-security-token",
    "x-amz-credential",
    "x-auth-token",
    "x-access-token",
    "ocp-apim-subscription-key",
}
# Not "session": session and thread ids (X-Claude-Code-Session-Id, Codex's session-id) identify a
# conversation; they are not credentials, and scrubbing them would erase what links its turns.
_SECRET_HEADER_NAME = re.compile(r"(?i)(api[-_]?key|token|secret|passw|auth|cookie|credential|signature)")
_SAFE_HEADER_NAME = re.compile(r"(?i)(ratelimit|rate-limit|tokens?-(limit|remaining|reset)|x-stainless|anthropic-beta|www-authenticate)")
_SECRET_QUERY = re.compile(
    r"(?i)^(key|api[-_]?key|apikey|token|access[-_]?token|auth|sig|signature|secret|password|"
    r"x-amz-signature|x-amz-credential|x-amz-security-token|code)$"
)
_SECRET_BODY_KEY = re.compile(
    r"(?i)^(api[-_]?key|apikey|access[-_]?token|refresh[-_]?token|id[-_]?token|client[-_]?secret|"
    r"password|secret|authorization|x-api-key|private[-_]?key)$"
)
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
#: Words that make a name a credential's wherever they stand (``openai_api_key``, ``secretKey``,
#: ``aws_secret_access_key``, ``mcp_servers[].authorization_token``, ``bearer``, ``passwd``).
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "pwd", "secret", "secrets", "apikey", "credential", "credentials",
    "authorization", "bearer", "cookie", "privatekey", "auth", "jwt", "otp", "pin",
})
# Not "signature": Anthropic thinking blocks and Gemini parts carry a ``signature`` /
# ``thoughtSignature`` the client must send back verbatim (query-string and header signatures are
# caught by their own rules above).
#: A name whose last word is one of these names a credential when its value looks like one
#: (``token``, ``key``, ``auth_token``, ``x_llm_key``): ``{"key": "color"}`` in tool arguments and
#: ``prompt_cache_key`` stay, ``{"key": "ltQ9f…"}`` goes. Plurals and counts (``max_tokens``,
#: ``token_count``, ``keywords``, ``input_tokens``) end in another word and never match.
_SECRET_LAST = frozenset({"token", "key", "keys"})
#: Names ending in "key" that are identifiers, never credentials (caching, idempotency, storage).
_NOT_SECRET_NAMES = frozenset({
    "promptcachekey", "cachekey", "idempotencykey", "partitionkey", "sortkey", "primarykey", "foreignkey",
    "dedupkey", "deduplicationkey", "routingkey", "objectkey", "keyid", "publickey",
})
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(:\d+)?$")


def name_words(name: str) -> list[str]:
    """The words of a field or header name, lower case: ``openAIApiKey`` → open, ai, api, key."""
    return [w.lower() for w in _NAME_WORDS.findall(name.replace("-", "_"))]


def secret_name(name: str) -> str | None:
    """``"always"`` when ``name`` (a JSON key, form field, header) names a credential,
    ``"if-secret"`` when it may (its value decides: :func:`looks_secret`), else ``None``."""
    if _SECRET_BODY_KEY.match(name):
        return "always"
    words = name_words(name)
    if not words:
        return None
    joined = "".join(words)
    if joined in _NOT_SECRET_NAMES:
        return None
    if _SECRET_WORDS.intersection(words) or any(w in joined for w in ("apikey", "privatekey", "secretkey", "accesskey", "clientsecret")):
        return "always"
    if words[-1] in _SECRET_LAST or joined.endswith(("authtoken", "accesstoken", "refreshtoken", "idtoken", "sessiontoken")):
        return "if-secret"
    return None


_SECRETISH = re.compile(r"^[A-Za-z0-9_\-+/=.:~]{16,}$")


def looks_secret(value: str) -> bool:
    """A value shaped like a credential: one token (no spaces) of letters and digits, 20+ characters
    or 16+ in mixed case. ``"color"``, ``"The API key"``, ``"gpt-4o-2024-08-06"`` are not;
    ``"ltQ9f3…"``, hex tokens and keys are."""
    if not _SECRETISH.match(value) or not any(c.isalpha() for c in value):
        return False
    if not any(c.isdigit() for c in value):
        # Letters only: random case (a generated token; about one in a hundred has no digit), not
        # a word or a camelCase / PascalCase name (``getWeatherForecastInParis``,
        # ``TheQuickBrownFox…``: capitals one at a time).
        letters = [c for c in value if c.isalpha()]
        upper = sum(c.isupper() for c in letters)
        pairs = list(itertools.pairwise(letters))
        changes = sum(a.isupper() != b.isupper() for a, b in pairs)
        doubled = any(a.isupper() and b.isupper() for a, b in pairs)  # PascalCase words have none
        share = upper / len(letters)
        return len(value) >= 20 and 0.2 <= share <= 0.8 and (doubled or (share >= 0.3 and changes >= 10))
    if _UUID.match(value):
        return False  # an identifier (Codex's prompt_cache_key, session and turn ids), not a key
    return len(value) >= 20 or (any(c.isupper() for c in value) and any(c.islower() for c in value))

#: Known credential formats (name, regex). Each pattern starts with its literal prefix so the regex
#: engine can scan for it quickly; the boundary guard is a look-behind placed *after* the prefix
#: (so ``task-…`` does not match ``sk-``).
SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    ("openai/anthropic key", r"sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{16,}"),
    ("google api key", r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{30,}"),
    ("google oauth token", r"ya29\.(?<![A-Za-z0-9_-]ya29\.)[0-9A-Za-z_.-]{16,}"),
    ("aws access key", r"AKIA(?<![A-Z0-9]AKIA)[0-9A-Z]{16}(?![A-Z0-9])"),
    ("aws temporary key", r"ASIA(?<![A-Z0-9]ASIA)[0-9A-Z]{16}(?![A-Z0-9])"),
    ("github token", r"gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{30,}"),
    ("github token", r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}"),
    ("groq key", r"gsk_(?<![A-Za-z0-9_]gsk_)[A-Za-z0-9]{20,}"),
    ("hugging face token", r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}"),
    ("xai key", r"xai-(?<![A-Za-z0-9_-]xai-)[A-Za-z0-9]{20,}"),
    ("slack token", r"xox[abposr]-(?<![A-Za-z0-9_-]xox[abposr]-)[A-Za-z0-9-]{10,}"),
    ("jwt", r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("bearer token", r"Bearer (?!\[REDACTED\])[A-Za-z0-9._~+/-]{12,}=*"),
)
_COMPILED = tuple(re.compile(p) for _, p in SECRET_PATTERNS)
#: For each known format, literals one of which any match contains (its prefix). ``str.find`` scans
#: for them far faster than the regex engine tries a pattern at every position: a 200 KB body with
#: no secret took 2.8 ms of 13 regex passes, and takes 0.2 ms of prefix checks.
_PREFIXES: tuple[tuple[str, ...], ...] = (
    ("sk-",),
    ("AIza",),
    ("ya29.",),
    ("AKIA",),
    ("ASIA",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("gsk_",),
    ("hf_",),
    ("xai-",),
    ("xox",),
    ("eyJ",),
    ("Bearer ",),
)
assert len(_PREFIXES) == len(_COMPILED)


def _present(text: str, prefixes: tuple[str, ...]) -> bool:
    return not prefixes or any(p in text for p in prefixes)


def find_secrets(text: str, extra_patterns: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(kind, match) for every known-format secret in ``text`` (used by ``looptap verify``)."""
    out: list[tuple[str, str]] = []
    for (name, _), pat, prefixes in zip(SECRET_PATTERNS, _COMPILED, _PREFIXES, strict=True):
        if _present(text, prefixes):
            out.extend((name, m.group(0)) for m in pat.finditer(text))
    for extra in extra_patterns:
        out.extend(("configured pattern", m.group(0)) for m in re.finditer(extra, text))
    return out


#: Joins the strings of a JSON body for one scrub: no known pattern matches a NUL or a newline.
_SEP = "\n\x00\n"
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
        extra = tuple(re.compile(p) for p in extra_patterns if p)
        #: (pattern, prefixes that must occur for it to match; empty: always run it).
        self._patterns: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
            *zip(_COMPILED, _PREFIXES, strict=True),
            *((p, ()) for p in extra),
        )
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
        for pat, prefixes in self._patterns:
            if _present(text, prefixes):
                text = pat.sub(self._bearer(token) if pat.pattern.startswith("Bearer") else token, text)
        return text

    @staticmethod
    def _bearer(token: str) -> str:
        return "Bearer " + token

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
                if isinstance(k, str):
                    acc.append(k)
                    kind = ("always" if k.lower() in self._body_keys else secret_name(k)) if v and not isinstance(v, bool) else None
                    if kind is not None and isinstance(v, str) and (kind == "always" or looks_secret(v)):
                        self._learn(v)
                        acc.append(REDACTED)
                        found = True
                        continue
                    if kind == "always" and isinstance(v, int | float):
                        self._learn(str(v))
                        found = True  # (a number under a credential's name: rebuilt as text)
                    elif kind == "always" and isinstance(v, dict | list):
                        self._learn_leaves(v)  # {"secret": {"value": "…"}}: what looks like one
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
        for pat, prefixes in self._patterns:
            if _present(text, prefixes):
                found.extend(m.span() for m in pat.finditer(text) if m.end() > m.start())
        merged: list[tuple[int, int]] = []
        for s, e in sorted(found):
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
            else:
                merged.append((s, e))
        return merged

    def chunks(self, chunks: list[tuple[float | None, bytes]]) -> list[tuple[float | None, bytes]]:
        """Scrub stream chunks, including a secret split across a chunk boundary.

        Chunks follow socket reads, not events, so a secret can arrive in two pieces that neither
        chunk shows whole (or that only a pattern sees, half of it). The joined stream is searched;
        each secret is replaced in the chunk where it starts and removed from the chunks it
        continues into. Offsets and the number of chunks are kept.
        """
        if is_aws_eventstream(b"".join(c for _, c in chunks[:2])[:12]):
            return self._binary_frames(chunks)
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
    def _header_value(self, name: str, value: str) -> str:
        lname = name.lower()
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
            pairs = parse_qsl(parts.query, keep_blank_values=True)
            changed = False
            for k, v in pairs:
                if _SECRET_QUERY.match(k) and v:
                    self._learn(v)
                    changed = True
            if changed:
                query = "&".join(
                    f"{quote(k, safe='')}={URL_TOKEN if _SECRET_QUERY.match(k) and v else quote(v, safe='')}"
                    for k, v in pairs
                )
                parts = parts._replace(query=query)
        segments = parts.path.split("/")
        for i in range(1, len(segments)):
            seg = segments[i]
            if looks_secret(seg) and (secret_name(segments[i - 1]) is not None or segments[i - 1].lower() in ("bot", "keys")):
                self._learn(seg)  # /key/<key>/, /token/<token>, /bot<id>:<token> forms (scrubbed below)
            elif seg.lower().startswith("bot") and ":" in seg and looks_secret(seg[3:].split(":", 1)[1] + "0a"):
                self._learn(seg[3:])
        if parts.username or parts.password:
            host = parts.hostname or ""
            if parts.port:
                host = f"{host}:{parts.port}"
            if parts.password:
                self._learn(parts.password)
            parts = parts._replace(netloc=f"{URL_TOKEN}@{host}")
        return self.scrub(urlunsplit(parts), URL_TOKEN)

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
        body = ex.request_body
        notes = list(ex.notes)
        req_encoding = ex.request_header("content-encoding")
        salvaged = self._undecoded(body, req_encoding) if req_encoding and any(
            n.startswith("request:") for n in ex.notes) else None
        if salvaged is not None:
            body = salvaged[0]
            notes.append("request: " + salvaged[1])
        ctype = (ex.request_header("content-type") or "").lower()
        if "form" in ctype:
            self._learn_form(body, ctype)
        parsed = ex.request_json() if salvaged is None else None
        new_parsed: Any = None
        if parsed is not None and not ex.request_json_cut:
            new_parsed, changed = self._scrub_json(parsed)
            scrubbed = orjson.dumps(new_parsed) if changed else body
        else:
            scrubbed = self.scrub_bytes(body)
        resp_headers = self.headers(ex.response_headers)
        resp_chunks = ex.response_chunks
        resp_encoding = ex.response_header("content-encoding")
        if resp_encoding and ex.decoded_from is None and resp_chunks:
            salvaged_resp = self._undecoded(b"".join(c for _, c in resp_chunks), resp_encoding)
            if salvaged_resp is not None:
                resp_chunks = [(resp_chunks[0][0], salvaged_resp[0])]
                notes.append(salvaged_resp[1])
        self._learn_response(resp_chunks)
        chunks = self.chunks(resp_chunks)
        out = replace(
            ex,
            url=url,
            request_headers=req_headers,
            request_body=scrubbed,
            response_headers=resp_headers,
            response_chunks=chunks,
            transport_error=self.scrub(ex.transport_error) if ex.transport_error else None,
            notes=[self.scrub(n) for n in notes],
        )
        out.forget_request_json()
        if scrubbed is ex.request_body and parsed is not None and not ex.request_json_cut and salvaged is None:
            out.set_request_json(parsed)
        return out


def salvage_decode(data: bytes, limit: int = 64 << 20) -> bytes:
    """Whatever of a broken compressed body can be decoded (gzip with a bad CRC or followed by
    junk, raw or zlib deflate, brotli, zstd), up to ``limit`` bytes; ``b""`` if nothing
    (:func:`cassettes.wire.decoding.salvage`: within the decompression budget)."""
    from cassettes.wire.decoding import salvage

    return salvage(data, limit)
