"""Which names and values are a credential's: header, query, form and JSON field names
(:func:`secret_name`), credential-shaped values (:func:`looks_secret`), and where in a stream a
name that may be one occurs (:func:`named_spans`). No state: the
:class:`~cassettes.recording._redactor.Redactor` decides with these what to learn and mask."""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Iterator

import orjson

from ..wire import REDACTED

__all__ = [
    "ALWAYS_JOINED",
    "ALWAYS_LAST",
    "ALWAYS_WORDS",
    "EMBEDDED_MAX",
    "MAYBE_LAST",
    "NOT_SECRET_NAMES",
    "PLACES",
    "PLACE_WORDS",
    "REDACTED",
    "SECRET_HEADERS",
    "URL_TOKEN",
    "credential_values",
    "cut_credential",
    "header_secret",
    "inside_strings",
    "looks_secret",
    "named_spans",
    "path_secrets",
    "query_secret",
    "secret_name",
]

#: The replacement inside URLs (brackets would turn a netloc into an IPv6 literal).
URL_TOKEN = "REDACTED"

#: Headers whose values are credentials or bearers whatever :func:`secret_name` says of their
#: names: redacted in a recording, never sent from one.
SECRET_HEADERS = frozenset(
    {
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
)
#: Headers that name a credential word but carry none (SDK telemetry, beta flags, a challenge).
_SAFE_HEADER_NAME = re.compile(r"(?i)(x-stainless|anthropic-beta|www-authenticate)")
#: Counters of tokens, not tokens: rate limits (``x-ratelimit-remaining-tokens``,
#: ``anthropic-ratelimit-input-tokens-limit``) and usage (Bedrock InvokeModel's
#: ``x-amzn-bedrock-input-token-count``); as in field names (``token_count``, ``max_tokens``), the
#: word ``token`` is followed or preceded by a word that counts it.
_COUNTER_HEADER_NAME = re.compile(
    r"(?i)(ratelimit|rate-limit|tokens?-(limit|remaining|reset|count)(?![a-z]))"
)
#: Words that make a header a credential's even beside a counter's words.
_STRONG_HEADER_NAME = re.compile(r"(?i)(api[-_]?key|secret|passw|auth|cookie|credential|signature)")


def counter_header(name: str, value: str) -> bool:
    """Whether a header whose name says "token" is a counter of tokens (its value kept): a rate
    limit or a usage count, no credential word beside it, and for a count a number."""
    m = _COUNTER_HEADER_NAME.search(name)
    if m is None or _STRONG_HEADER_NAME.search(name):
        return False
    return m.group(2) != "count" or value.strip().isdigit()


# ---------------------------------------------------------------------------------------------
# The name classes: one rule set for every place a name stands in (a URL's query or fragment, a
# header, a form's or multipart's field, a JSON key, an XML element or attribute, a ``NAME=value``
# line of text), for the model's exchanges, MCP's and the tools' alike. docs/redaction.md is
# generated from these tables (bench/redaction_doc.py).

#: The places a name is read in. ``json`` is a JSON key (a body, JSON held in a string, JSON
#: written in text: ``"password": "…"``); ``text`` a ``NAME = value`` / ``NAME: value`` line of
#: prose, a config or an env file; the others are structured fields whose every value is data.
PLACES = ("query", "header", "form", "xml", "json", "text")
#: The structured places: where a name that *may* be a credential's (:data:`MAYBE_LAST`) is one
#: whatever its value (``?token=abc``, ``<SessionToken>…</SessionToken>``); in JSON and text its
#: value decides (``{"key": "color"}`` in a tool's arguments stays).
STRUCTURED = frozenset({"query", "header", "form", "xml"})

#: A name holding one of these words is a credential's wherever it stands (``openai_api_key``,
#: ``aws_secret_access_key``, ``mcp_servers[].authorization_token``, ``bearer``, ``passwd``).
ALWAYS_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "secrets",
        "apikey",
        "credential",
        "credentials",
        "authorization",
        "bearer",
        "cookie",
        "privatekey",
        "auth",
        "jwt",
        "otp",
        "pin",
    }
)
#: A name whose words, joined, hold one of these is a credential's (``accessKey``,
#: ``X-Amz-Security-Token``, ``auth_token``, ``sessionToken``, ``client_secret``).
ALWAYS_JOINED = (
    "apikey",
    "privatekey",
    "secretkey",
    "accesskey",
    "clientsecret",
    "securitytoken",
    "sessiontoken",
    "sessionkey",
    "authtoken",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "bearertoken",
    "apitoken",
    "privatetoken",
    "oauthtoken",
    "csrftoken",
    "xsrftoken",
    "clientassertion",
    "samlresponse",
)
#: A name whose last word is one of these is a credential's (``pass``, ``db_pass``).
ALWAYS_LAST = frozenset({"pass"})
#: A name whose last word is one of these *may* be a credential's (``token``, ``key``,
#: ``x_llm_key``): in a structured place it is; in JSON or text when its value looks like one
#: (:func:`looks_secret`). Plurals and counts (``max_tokens``, ``token_count``, ``keywords``,
#: ``input_tokens``) end in another word and never match.
MAYBE_LAST = frozenset({"token", "key", "keys", "sessid", "sessionid"})
#: Words that are a credential's in some places only: a ``signature`` is one in a query, a header,
#: a form or XML (``X-Amz-Signature``, ``oauth_signature``, ``X-Goog-Signature``) but not a JSON
#: key (Anthropic's thinking blocks and Gemini's parts carry a ``signature`` /
#: ``thoughtSignature`` the client must send back verbatim); ``code`` is OAuth's authorization
#: code in a query or form, a program anywhere else; ``session`` a bearer in a query or form
#: (``?session=…``), a conversation's id in JSON and headers (``X-Claude-Code-Session-Id``: what
#: links a run's turns).
PLACE_WORDS: dict[str, frozenset[str]] = {
    "signature": frozenset({"query", "header", "form", "xml", "text"}),
    "sig": frozenset({"query", "header", "form", "xml"}),
    "code": frozenset({"query", "form"}),
    "session": frozenset({"query", "form"}),
}
#: Names that hold a credential's word but never a credential (joined lower-case words): caching,
#: idempotency and storage keys, key ids, public keys, pagination cursors, and the word counts of
#: LLM APIs.
NOT_SECRET_NAMES = frozenset(
    {
        "promptcachekey",
        "cachekey",
        "idempotencykey",
        "partitionkey",
        "sortkey",
        "primarykey",
        "foreignkey",
        "dedupkey",
        "deduplicationkey",
        "routingkey",
        "objectkey",
        "keyid",
        "accesskeyid",
        "publickey",
        "pagetoken",
        "nextpagetoken",
        "nexttoken",
        "continuationtoken",
        "synctoken",
        "cursortoken",
        "paginationtoken",
        "resumetoken",
        "maxtokens",
        "tokentype",
        "responsetype",
        "granttype",
        "codechallenge",
        "codechallengemethod",
        "codeverifiermethod",
        "secwebsocketkey",
    }
)
#: Names that say credential in the body rules by exact name, whatever their place.
_SECRET_BODY_KEY = re.compile(
    r"(?i)^(api[-_]?key|apikey|access[-_]?token|refresh[-_]?token|id[-_]?token|client[-_]?secret|"
    r"password|secret|authorization|x-api-key|private[-_]?key)$"
)
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(:\d+)?$"
)


def name_words(name: str) -> list[str]:
    """The words of a field or header name, lower case: ``openAIApiKey`` → open, ai, api, key."""
    return [w.lower() for w in _NAME_WORDS.findall(name.replace("-", "_"))]


@functools.lru_cache(maxsize=8192)
def secret_name(name: str, place: str = "json") -> str | None:
    """``"always"`` when ``name`` standing in ``place`` (one of :data:`PLACES`) names a
    credential, ``"if-secret"`` when it may (its value decides: :func:`looks_secret`), else
    ``None``. The one rule for every place and every exchange (docs/redaction.md lists it)."""
    if _SECRET_BODY_KEY.match(name):
        return "always"
    words = name_words(name)
    if not words:
        return None
    joined = "".join(words)
    if joined in NOT_SECRET_NAMES or (words[-1] == "id" and "session" in words):
        return None
    if (
        ALWAYS_WORDS.intersection(words)
        or words[-1] in ALWAYS_LAST
        or words[-1].endswith(("password", "passwd"))  # PGPASSWORD, MYSQLPASSWORD
        or any(w in joined for w in ALWAYS_JOINED)
        or any(place in PLACE_WORDS.get(w, ()) for w in words)
    ):
        return "always"
    if (
        words[-1] in MAYBE_LAST
        or (len(words) == 1 and joined.endswith(("sessid", "sessionid")))
        or (place == "header" and MAYBE_LAST.intersection(words))  # (counters: counter_header)
    ):
        return "always" if place in STRUCTURED else "if-secret"
    return None


def header_secret(name: str, value: str) -> bool:
    """Whether a header's value is a credential by its name (the built-in headers, the name
    classes, never a rate-limit or usage counter nor the few that name a credential word and
    carry none)."""
    lname = name.lower()
    if lname in SECRET_HEADERS:
        return True
    if _SAFE_HEADER_NAME.search(lname) or counter_header(lname, value):
        return False
    return secret_name(lname, "header") is not None


def path_secrets(path: str) -> list[str]:
    """The credentials in a URL's path: after a credential's name (``/key/<key>/``,
    ``/token/<token>``), ``/keys/<key>``, a bot's token (``/bot<id>:<token>/``: Telegram)."""
    out: list[str] = []
    segments = path.split("/")
    for i in range(1, len(segments)):
        seg = segments[i]
        if looks_secret(seg) and (
            secret_name(segments[i - 1]) is not None or segments[i - 1].lower() in ("bot", "keys")
        ):
            out.append(seg)
        elif (
            seg.lower().startswith("bot")
            and ":" in seg
            and looks_secret(seg[3:].split(":", 1)[1] + "0a")
        ):
            out.append(seg[3:])
    return out


def query_secret(name: str, value: str) -> bool:
    """Whether a query, fragment or form parameter's value is a credential by its name."""
    return bool(value) and secret_name(name, "query") is not None


_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$"
)
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
    return (
        len(value) >= 20 and 0.2 <= share <= 0.8 and (doubled or (share >= 0.3 and changes >= 10))
    )


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
    if _DATE.match(value):
        return False  # a time (a credential's Expiration: 2026-12-01T00:00:00Z), not a key
    parts = value.split("-")
    if len(parts) >= 4 and all(len(p) <= 8 for p in parts):
        return False  # a slug of short words (a why branch's key: E-c1-t1-e-resample), not a key
    return len(value) >= 20 or (any(c.isupper() for c in value) and any(c.islower() for c in value))


#: Some name that says credential occurs in an event's text (lower-cased) when any field of it
#: can be a credential's (:func:`secret_name`): the other events skip the walk by name.
_NAME_MARKERS = (
    b"key",
    b"token",
    b"secret",
    b"pass",
    b"pwd",
    b"auth",
    b"cred",
    b"bearer",
    b"cookie",
    b"jwt",
    b"otp",
    b"pin",
)


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


#: The longest JSON text held in a string that :func:`credential_values` reads (characters).
EMBEDDED_MAX = 1 << 20
#: One JSON token: a string (group 1; or one cut short at the end of the text, group 2), a
#: structural character (3), or a literal or number (4). Whitespace before it is skipped.
_TOKEN = re.compile(
    r'\s*(?:("(?:[^"\\]|\\.)*")|("(?:[^"\\]|\\.)*\\?\Z)|([{}\[\],:])|([^\s{}\[\],:"]+))', re.S
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)", re.S)
_COLON = re.compile(r"\s*:")


def _tokens(text: str) -> Iterator[re.Match[str]]:
    """The :data:`_TOKEN` matches of ``text`` one after another, as far as they read."""
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return
        pos = m.end()
        yield m


def inside_strings(
    text: str, spans: list[tuple[int, int]], names: Callable[[str], list[tuple[int, int]]]
) -> list[tuple[int, int]]:
    """``spans`` of ``text``, a JSON document, cut to the insides of its string values and widened
    to whole escapes, so that masking them leaves it JSON of the same shape: a format's match that
    took a value's quotes (``"password": "radiance"``) masks the value only, a learned value
    written as a number is left to the names (:func:`credential_values`). A key is masked where
    ``names`` finds something in it alone (a match across the text may end on a key). ``spans``
    sorted and apart."""
    out: list[tuple[int, int]] = []
    k = 0
    for m in _tokens(text):
        if m.group(1) is None:
            continue
        a, b = m.start(1) + 1, m.end(1) - 1
        while k < len(spans) and spans[k][1] <= a:
            k += 1
        j = k
        while j < len(spans) and spans[j][0] < b:
            j += 1
        key = _COLON.match(text, m.end()) is not None
        for s, e in [(a + s, a + e) for s, e in names(text[a:b])] if key else spans[k:j]:
            s, e = max(s, a), min(e, b)
            if s < e and text.find("\\", a, b) >= 0:
                for esc in _ESCAPE.finditer(text, a, b):
                    s = esc.start() if esc.start() < s < esc.end() else s
                    e = esc.end() if esc.start() < e < esc.end() else e
            if s < e:
                out.append((s, e))
    return out


def credential_values(
    text: str, kind: Callable[[str], str | None] = secret_name
) -> list[tuple[str, int, int, bool]]:
    """(name, start, end, quoted) of each value under a credential's name in ``text``, a JSON
    document held in a string (a tool call's ``arguments``, a tool result, a serialised config).
    For a string value the span is its content between the quotes (``quoted``), for a number the
    number. A name ``kind`` calls ``"always"`` a credential's counts whatever the value's length
    (``{"pin": "4711"}``); one it calls ``"if-secret"`` counts when the value looks like a
    credential (:func:`looks_secret`). Values already ``[REDACTED]``, empty strings, zero and
    objects or lists are not given (an object under such a name is the learned leaves' business).

    Read token by token, never parsed whole: a document cut short (a stream's arguments so far,
    its last string unterminated) is read as far as it goes, and several documents one after
    another (tool calls' arguments joined) each in turn. Bounded: text over :data:`EMBEDDED_MAX`,
    not starting with ``{`` or ``[``, or holding no credential word is not read."""
    if not _worth_reading(text, kind):
        return []
    walk = _NamedValues(kind)
    for m in _tokens(text):
        walk.token(m)
    return walk.found


def _worth_reading(text: str, kind: Callable[[str], str | None]) -> bool:
    """Whether :func:`credential_values` reads ``text`` token by token: a JSON object or list
    within the bound, holding a credential word, and (when it parses whole) some value under a
    name ``kind`` calls a credential's."""
    if len(text) > EMBEDDED_MAX or text.lstrip()[:1] not in ("{", "["):
        return False
    low = text.lower()
    if not any(m.decode() in low for m in _NAME_MARKERS):
        return False
    try:  # a whole document: parsed first (30× faster than the token walk) to see if it is needed
        return _names_a_credential(orjson.loads(text), kind)
    except orjson.JSONDecodeError:
        return True  # cut short, or several documents: read token by token


class _NamedValues:
    """:func:`credential_values`' walk over :data:`_TOKEN` matches: which name the next value
    stands under (a key follows ``{`` or ``,`` inside an object, its value its ``:``), and the
    values under a credential's name found so far (:attr:`found`)."""

    def __init__(self, kind: Callable[[str], str | None]) -> None:
        self._kind = kind
        self.found: list[tuple[str, int, int, bool]] = []
        self._stack: list[str] = []
        self._prev = ""  # the last structural character
        self._key: str | None = None  # a key read, awaiting its ":"
        self._under: str | None = None  # the name whose value comes next

    def token(self, m: re.Match[str]) -> None:
        punct = m.group(3)
        if punct is not None:
            self._punct(punct)
            return
        name, self._under, was_key = self._under, None, self._key
        self._key = None
        if m.group(1) is not None or m.group(2) is not None:
            self._string(m, name, was_key)
        else:
            literal = m.group(4)
            if (
                name is not None
                and _NUMBER.fullmatch(literal)
                and literal.strip("-0.")
                and self._kind(name) == "always"
            ):
                self.found.append((name, m.start(4), m.end(4), False))
        self._prev = ""

    def _punct(self, punct: str) -> None:
        if punct in "{[":
            self._stack.append(punct)
        elif punct in "}]" and self._stack:
            self._stack.pop()
        if punct == ":" and self._key is not None:
            self._under = self._key
        else:
            self._under = None
        self._key = None
        self._prev = punct

    def _string(self, m: re.Match[str], name: str | None, was_key: str | None) -> None:
        """A string token (or one cut short at the end): a credential's value under ``name``, or
        a key when it stands where one does."""
        string, cut = m.group(1), m.group(2)
        raw = string if string is not None else cut
        start = m.start(1) if string is not None else m.start(2)
        value = _json_string(raw if string is not None else raw.rstrip("\\") + '"')
        if name is not None:
            if value and value != REDACTED and _credential(name, value, self._kind):
                self.found.append(
                    (name, start + 1, start + len(raw) - (1 if string is not None else 0), True)
                )
        elif was_key is None and self._stack[-1:] == ["{"] and self._prev in ("{", ","):
            self._key = value


def _names_a_credential(doc: object, kind: Callable[[str], str | None]) -> bool:
    """Whether some string or number in ``doc`` stands under a name ``kind`` calls a
    credential's (a walk with its own stack: orjson parses deeper than Python recurses)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, dict | list):
                    stack.append(v)
                elif (
                    isinstance(v, str | int | float)
                    and not isinstance(v, bool)
                    and kind(k) is not None
                ):
                    return True
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return False


def _json_string(token: str) -> str:
    """A JSON string token's text (its raw inside when an escape in it does not decode)."""
    if "\\" not in token:
        return token[1:-1]
    try:
        value = orjson.loads(token)
    except orjson.JSONDecodeError:
        return token[1:-1]
    return value if isinstance(value, str) else token[1:-1]


def _credential(name: str, value: str, kind: Callable[[str], str | None]) -> bool:
    k = kind(name)
    return k == "always" or (k == "if-secret" and looks_secret(value))


#: How much of a cut body's end :func:`cut_credential` reads.
CUT_TAIL = 512
#: The end of a body cut in a credential: a value running to the cut after ``Bearer`` or after a
#: name and ``=`` / ``:`` (``authorization=Bearer sk-pro``, ``"api_key": "sk-pro``, ``token=ab``).
_CUT_CREDENTIAL = re.compile(
    r"(?i)(?:\bbearer\s+|\b([a-z][\w.-]{0,60})[\"']?\s*[=:]\s*[\"']?(?:bearer\s+)?)"
    r"([^\s\"',;&<>(){}\[\]\\]+)\Z"
)


def cut_credential(text: str) -> int | None:
    """Where a credential cut short by the end of ``text`` begins (``text`` is a body cut mid-way:
    a reset, a gzip stream without its end), or ``None``. A key cut after its first characters
    has no format left to find it by and is not the value a run learned: its name or ``Bearer``
    before it says what it is, whatever its length (a name that may be a credential's, ``key``,
    ``token``, when the piece could begin one: a digit, ``-`` or ``_`` in it, or 16 characters)."""
    tail = text[-CUT_TAIL:]
    m = _CUT_CREDENTIAL.search(tail)
    if m is None:
        return None
    name, value = m.group(1), m.group(2)
    if name is not None and "bearer" not in m.group(0).lower():
        kind = "always" if name.lower() in SECRET_HEADERS else secret_name(name)
        if kind is None:
            return None
        if kind == "if-secret" and not (
            len(value) >= 16 or any(c.isdigit() or c in "-_" for c in value)
        ):
            return None
    return len(text) - len(tail) + m.start(2)
