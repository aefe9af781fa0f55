"""The built-in detectors of volatile spans (:mod:`cassettes.matching._volatile`), as data: each
detector's pattern, and the one pattern they are searched with, built for a run's places."""

from __future__ import annotations

import functools
import re

__all__ = ["TMP", "detectors", "slug"]


# ---------------------------------------------------------------------------------------------
# The detectors, as one alternation: at each position the first alternative that matches wins,
# so the longer shapes come first (a datetime before its date, a cwd before the tmp it is in).
# A named group ``name__k`` is detector ``name``; a group ``name__k_v`` inside it, when present,
# is the part replaced (the rest, a neighbour word such as ``ts=`` or a host, is kept).

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WDAY = (
    r"(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:r(?:s(?:day)?)?)?|Fri(?:day)?|"
    r"Sat(?:urday)?|Sun(?:day)?)"
)
_YEAR = r"(?:19[7-9]\d|20\d\d)"
_MM = r"(?:0[1-9]|1[0-2])"
_DD = r"(?:0[1-9]|[12]\d|3[01])"
_D = r"(?:0?[1-9]|[12]\d|3[01])"
_HMS = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:[.,]\d{1,9})?"
_TZ = r"(?:Z|UTC|GMT|[ECMP][SD]T|CES?T|BST|JST|[+-](?:[01]\d):?[0-5]\d)"
_ISO_TIME = r"(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:[.,]\d{1,9})?)?(?:Z|[+-](?:[01]\d):?[0-5]\d)?"
_HUMAN_DATE = (
    rf"(?:{_WDAY},?\s{{1,8}})?(?:{_MONTH}\.?\s{{1,8}}{_D}(?:st|nd|rd|th)?,?\s{{1,8}}{_YEAR}|{_D}"
    rf"(?:st|nd|rd|th)?\s{{1,8}}{_MONTH}\.?,?\s{{1,8}}{_YEAR})"
)
#: Not glued to a word, a number, a path or an id on the left (``v1.2``, ``gpt-4o-``, ``/``).
_L = r"(?<![\w.:/+=-])"
#: Nor on the right (``2026-11-25.log``, ``2026-11-25T``); a full stop that ends a sentence is fine.
_R = r"(?![\w:/+=-]|\.\w)"
#: A word that says a number is a time (``took 1.2s``, ``"ts": 1732…``), kept.
_TIMING = r"\b(?i:took|elapsed|duration|latency|runtime|in|after|real|user|sys|time)[:=]?\s{1,8}"
_TIMING_LONG = (
    r"\b(?i:took|elapsed|duration|latency|runtime|ran\s{1,8}for|finished\s{1,8}in|completed\s{1,"
    r"8}in|done\s{1,8}in)[:=]?\s{1,8}"
)
_EPOCH_WORD = (
    r"\b(?i:(?:[a-z]{1,16}+_)?(?:timestamp|time|ts|epoch|date|created|updated|modified|expires?|"
    r"started|ended|since|until)(?:_at|_ms|_s)?)[\"']?\s{0,8}[:=]\s{0,8}[\"']?"
)
_TOKEN = r"[A-Za-z0-9]"
#: The kind words of credentials' formats (OpenAI/Anthropic/Stripe-style ``sk-``, GitHub, GitLab,
#: Slack, Hugging Face tokens): such a token is a key, not an id that changes between runs.
_SECRET_KINDS = r"(?!(?:sk|pk|rk|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abpr]|hf|AKIA|ASIA)[_-])"

#: The groups of a first character (below), each with the look-ahead that admits it.
_FIRST = {"d": r"\d", "u": "[A-Z]", "l": "[a-z]", "s": "/", "b": r"\[", "m": "-"}

_TOKEN_GATE = r"(?=[A-Za-z]{0,64}+[\d_-])"
#: Cheap look-aheads that every epoch and duration match passes (a key then ``:`` or ``=``; a
#: timing word or two then a digit), so that an ordinary word fails them at once.
_EPOCH_GATE = r"(?=[A-Za-z_]{1,40}+[\"']?\s{0,8}[:=])"
_DURATION_GATE = r"(?=[A-Za-z]{2,9}+(?:\s{1,8}(?i:for|in))?[:=]?\s{1,8}\d)"
_DURATION_KEY_GATE = r"(?=[A-Za-z_]{5,20}+[\"']?\s{0,8}[:=>]\s{0,8}[\"']?\d)"

#: (name, the groups of the characters its span can start with, pattern).
_PATTERNS: tuple[tuple[str, str, str], ...] = (
    ("datetime__iso", "d", rf"{_L}{_YEAR}-{_MM}-{_DD}[T ]{_ISO_TIME}{_R}"),
    (
        "datetime__ctime",
        "u",
        rf"{_L}{_WDAY}\s{{1,8}}{_MONTH}\s{{1,8}}{_D}\s{{1,8}}"
        rf"{_HMS}(?:\s{{1,8}}{_TZ})?\s{{1,8}}{_YEAR}{_R}",
    ),
    (
        "datetime__human",
        "ud",
        rf"{_L}{_HUMAN_DATE},?\s{{1,8}}(?:at\s{{1,8}})?{_HMS}(?:\s?{_TZ})?{_R}",
    ),
    # ``ls -l`` and syslog: a month, a day and a clock, no year.
    (
        "datetime__month",
        "u",
        rf"{_L}{_MONTH}\s{{1,8}}{_D}\s{{1,8}}(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?{_R}",
    ),
    ("date__iso", "d", rf"{_L}{_YEAR}-{_MM}-{_DD}{_R}"),
    ("date__human", "ud", rf"{_L}{_HUMAN_DATE}{_R}"),
    ("date__slash", "d", rf"{_L}(?:{_D}/{_D}/{_YEAR}|{_D}\.{_D}\.{_YEAR}|{_YEAR}/{_MM}/{_DD}){_R}"),
    ("time__hms", "d", rf"{_L}{_HMS}(?:\s?(?i:am|pm))?(?:\s?{_TZ})?{_R}"),
    ("time__ampm", "d", rf"{_L}(?:1[0-2]|0?[1-9]):[0-5]\d\s?(?i:am|pm)\b"),
    (
        "epoch__word",
        "ul",
        rf"{_EPOCH_GATE}{_EPOCH_WORD}(?P<epoch__word_v>1\d{{9}}(?:\d{{3}})?(?:\.\d{{1,"
        r"9})?)(?!\w|\.\d)",
    ),
    # A bare epoch (seconds or milliseconds, a fraction or not): an epoch only when it is within
    # a year of the recording's own time (VolatileSpans.recorded_time; checked in _scan).
    ("epoch__bare", "d", r"(?<![\w.:/+=-])1\d{9}(?:\d{3})?(?:\.\d{1,9})?(?![\w:/+=-]|\.\d)"),
    (
        "duration__short",
        "ul",
        rf"{_DURATION_GATE}{_TIMING}(?P<duration__short_v>\d{{1,12}}(?:\.\d{{1,9}})?\s?(?:ns|µs|us|"
        r"ms|s)|\d{1,6}m\d{1,2}(?:\.\d{1,9})?s)(?!\w)",
    ),
    (
        "duration__long",
        "ul",
        rf"{_DURATION_GATE}{_TIMING_LONG}(?P<duration__long_v>\d{{1,12}}(?:\.\d{{1,"
        r"9})?\s?(?:milliseconds?|seconds?|secs?|minutes?|mins?))\b",
    ),
    ("duration__paren", "d", r"(?<=\()(?P<duration__paren_v>\d{1,12}\.\d{1,9}\s?(?:ms|s))\)"),
    # A duration named by its key with its unit, in JSON text, a setting or a tag
    # (``"duration_ms": 280``, ``<duration_ms>280</duration_ms>``: Claude Code's task notification).
    (
        "duration__key",
        "ul",
        rf"{_DURATION_KEY_GATE}\b(?i:duration|elapsed|latency|runtime)(?:_(?i:ms|s|secs?|seconds|"
        r"millis)|Ms|Secs?|Seconds|Millis)[\"']?\s{0,8}[:=>]\s{0,8}[\"']?(?P<duration__key_v>\d{1,12}(?:\.\d{1,9})?)(?![\w.])",
    ),
    (
        "uuid__std",
        "dul",
        r"(?<![0-9A-Za-z-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z-])",
    ),
    # A prefixed random id (a kind word, then _ or -, then 16-64 letters and digits with at
    # least two of each: _random): the kind kept, the token replaced. Never a credential's
    # format (an API key in a body is not a volatile id: left whole, so every printer redacts it).
    (
        "id__prefixed",
        "ul",
        rf"(?<![0-9A-Za-z_-]){_SECRET_KINDS}[A-Za-z]{{2,12}}+(?:[_-][A-Za-z]{{2,"
        rf"12}}+)?[_-](?P<id__prefixed_v>{_TOKEN}{{16,64}})(?![0-9A-Za-z_+/=-])",
    ),
    # A bare hex token (a trace id, a digest) of 32-64 digits, with digits and letters in it
    # (_random).
    (
        "id__hex",
        "dul",
        r"(?<![0-9A-Za-z_+/=.-])(?:[0-9a-f]{32,64}|[0-9A-F]{32,64})(?![0-9A-Za-z_+/=-])",
    ),
    # A shorter lowercase hex token (16-31: an agent's id, Claude Code's ``agentId: a4a0f46b…``,
    # ``<task-id>…``, ``tasks/….output``), also as a path's part, with two digits and two letters
    # at least (_random).
    (
        "id__hexshort",
        "dl",
        r"(?<![0-9A-Za-z_+=.-])[0-9a-f]{16,31}(?![0-9A-Za-z_+/=-])",
    ),
    # A bare base62 token (an API's random id) of 24-64 with upper, lower and digits in it
    # (_random).
    ("id__base62", "dul", rf"(?<![0-9A-Za-z_+/=.-]){_TOKEN}{{24,64}}(?![0-9A-Za-z_+/=-])"),
    (
        "port__loopback",
        "dlb",
        r"(?<![\w.-])(?:127\.0\.0\.1|localhost|0\.0\.0\.0|"
        r"\[::1\]):(?P<port__loopback_v>\d{2,5})(?!\d)",
    ),
)

#: A temp directory: the system's temp roots, then a pytest base temp (to the test's own
#: directory) or one random-looking name (with a digit, or ``tmp`` + 8 as mkdtemp names it).
_TMP_ROOT = r"(?:/private)?(?:/var/folders/[\w-]{1,8}/[\w-]{8,64}/[TC]|/tmp|/var/tmp|/dev/shm)"
TMP = (
    rf"(?<![\w.~-]){_TMP_ROOT}"
    r"(?:/pytest-of-[\w.-]{1,64}/pytest-(?:\d{1,9}|current)(?:/[\w.\[\]-]{1,128}?\d{1,"
    r"9}(?![\w.\[\]-]))?|/tmp[a-z0-9_]{8}(?![\w.-])|/(?=[\w.-]{0,127}\d)[\w.-]{1,128})?(?![\w.-])"
)


@functools.lru_cache(maxsize=32)
def detectors(cwds: tuple[str, ...], homes: tuple[str, ...]) -> re.Pattern[str]:
    """The detectors as one pattern, for these working directories and homes: built once per
    process for each (every replayed test of a pytest session has its own matcher, and the same
    places); a few are kept, for a process that replays runs recorded in many places."""
    places = [(f"cwd__{i}", p) for i, p in enumerate(cwds)] + [
        (f"home__{i}", p) for i, p in enumerate(homes)
    ]
    # The cwd as a folder name too, every character but letters and digits a ``-`` (Claude
    # Code keeps a project's memory in ``~/.claude/projects/-home-me-proj/``).
    places += [(f"cwd__slug{i}", slug(p)) for i, p in enumerate(cwds)]
    places.sort(key=lambda np: -len(np[1]))  # the longest first: a cwd inside the home wins
    # (a full stop after it ends a sentence: ``Working directory: /home/me/proj.``)
    alts = [
        (
            name,
            "m" if p.startswith("-") else "s",
            rf"(?<![\w.~-]){re.escape(p)}(?![\w-]|\.[\w.-])",
        )
        for name, p in places
    ]
    alts += [("tmp__path", "s", TMP), *_PATTERNS]
    # Every detector wants something other than a letter or digit before its span (its own
    # look-behind says what): that character is matched first, outside the alternatives, so
    # the engine skips runs of letters and digits in C; the text is scanned with a space in
    # front. Then the alternatives are tried only in the group of the span's first character
    # (a digit, a capital, a small letter, a slash, a bracket: one look-ahead each, where
    # each alternative costs a look-behind and more), in their order within it: at one place
    # only one group can match, so the first alternative that matches wins as in one list.
    # Among letters, the ids and uuids (one run in each group) are tried only where the word
    # reaches a digit, a _ or a - within 64 letters, as every one of them does.
    groups = []
    for tag, ahead in _FIRST.items():
        members = [
            (name + tag, rx.replace(f"(?P<{name}_v>", f"(?P<{name}{tag}_v>"))
            for name, tags, rx in alts
            if tag in tags
        ]
        parts: list[str] = []
        tokens: list[str] = []
        for n, rx in members:
            if tag in "ul" and n.startswith(("id__", "uuid__")):
                tokens.append(f"(?P<{n}>{rx})")
                continue
            if tokens:
                parts.append(_TOKEN_GATE + "(?:" + "|".join(tokens) + ")")
                tokens = []
            parts.append(f"(?P<{n}>{rx})")
        if tokens:
            parts.append(_TOKEN_GATE + "(?:" + "|".join(tokens) + ")")
        # (no cwd known: nothing starts with a ``-``, and an empty group would match anywhere)
        if parts:
            groups.append(f"(?={ahead})(?:" + "|".join(parts) + ")")
    return re.compile("[^A-Za-z0-9](?:" + "|".join(groups) + ")")


def slug(path: str) -> str:
    """``path`` as a folder name: every character but an ASCII letter or digit a ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)
