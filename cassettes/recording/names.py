"""Which names and values are a credential's: header, query, form and JSON field names
(:func:`secret_name`), credential-shaped values (:func:`looks_secret`), and where in a stream a
name that may be one occurs (:func:`named_spans`). No state: the :class:`~cassettes.recording.redact.Redactor`
decides with these what to learn and mask."""

from __future__ import annotations

import bisect
import functools
import itertools
import re

__all__ = ["REDACTED", "URL_TOKEN", "looks_secret", "name_words", "named_spans", "secret_name"]

REDACTED = "[REDACTED]"
#: The replacement inside URLs (brackets would turn a netloc into an IPv6 literal).
URL_TOKEN = "REDACTED"

_SECRET_HEADERS = {
    "mcp-session-id",  # a bearer of the MCP session: whoever holds it speaks in it
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


@functools.lru_cache(maxsize=4096)
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


def _random_letters(value: str) -> bool:
    """A token of letters only (and punctuation) in random case: a generated token (about one in a
    hundred has no digit), not a word or a camelCase / PascalCase name
    (``getWeatherForecastInParis``, ``TheQuickBrownFox…``: capitals one at a time)."""
    letters = [c for c in value if c.isalpha()]
    upper = sum(c.isupper() for c in letters)
    pairs = list(itertools.pairwise(letters))
    changes = sum(a.isupper() != b.isupper() for a, b in pairs)
    doubled = any(a.isupper() and b.isupper() for a, b in pairs)  # PascalCase words have none
    share = upper / len(letters)
    return len(value) >= 20 and 0.2 <= share <= 0.8 and (doubled or (share >= 0.3 and changes >= 10))


def looks_secret(value: str) -> bool:
    """A value shaped like a credential: one token (no spaces) of letters and digits, 20+ characters
    or 16+ in mixed case. ``"color"``, ``"The API key"``, ``"gpt-4o-2024-08-06"`` are not;
    ``"ltQ9f3…"``, hex tokens and keys are."""
    if not _SECRETISH.match(value) or not any(c.isalpha() for c in value):
        return False
    if not any(c.isdigit() for c in value):
        return _random_letters(value)
    if _UUID.match(value):
        return False  # an identifier (Codex's prompt_cache_key, session and turn ids), not a key
    return len(value) >= 20 or (any(c.isupper() for c in value) and any(c.islower() for c in value))


#: Some name that says credential occurs in an event's text (lower-cased) when any field of it
#: can be a credential's (:func:`secret_name`): the other events skip the walk by name.
_NAME_MARKERS = (b"key", b"token", b"secret", b"pass", b"pwd", b"auth", b"cred", b"bearer", b"cookie", b"jwt", b"otp", b"pin")


def named_spans(data: bytes, spans: list[tuple[int, int]]) -> list[bool]:
    """For each (start, end) of ``data`` (sorted, not overlapping), whether a name that may be a
    credential's occurs in it. One search of the whole stream per marker: per event, a
    case-insensitive regex took 80 µs and twelve ``in`` tests 30 µs."""
    low = data.lower()
    hits: list[int] = []
    for m in _NAME_MARKERS:
        i = low.find(m)
        while i >= 0:
            hits.append(i)
            i = low.find(m, i + 1)
    hits.sort()
    out = [False] * len(spans)
    k = 0
    for j, (a, b) in enumerate(spans):
        k = bisect.bisect_left(hits, a, k)
        out[j] = k < len(hits) and hits[k] < b
    return out
