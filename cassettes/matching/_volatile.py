"""Volatile spans: the parts of a request's text that legitimately change between two runs of one
agent (today's date, a clock, a duration, a random id, a temp path, the working directory, a
loopback port), found by shape and written as a typed placeholder (``<date>``, ``<uuid>``,
``<cwd>`` …) for comparison only.

Both sides of a comparison go through the same :class:`VolatileSpans`; what each detector
replaced is kept (:class:`Span`), so that two requests equal only after the replacement yield the
list of what was tolerated (:func:`tolerated`), never a silent match. Nothing here rewrites what
is recorded or served: the caller compares the normalised text and keeps the original.

The detectors are deliberately narrow. A number, a name or a word the model would read
differently must never be tolerated (tests/matching/test_volatile_properties.py says so for
generated text): a date needs a real date's shape, an epoch a timestamp's neighbour word (``ts=``,
``"created":``) or, when the recording's own time is known (a replay or a fork of it), a value
within a year of it (``Current time: 1795643906.95``, in seconds or milliseconds; a number far
from it stays what it is), a duration a unit and a timing word (``took``, ``in``), an id a
random-looking token (letters and digits, 16 or more), a span glued to a word or a path
(``gpt-4o-2024-08-06``, ``run-2026-11-25.log``) stays what it is. No provider is named: ids are
recognised by shape.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

__all__ = [
    "NUMBERED",
    "Numbering",
    "Span",
    "Tolerated",
    "VolatileSpans",
    "this_process",
    "tolerated",
]

PathItem = str | int


@dataclass(frozen=True, slots=True)
class Span:
    """One replacement: at JSON ``path`` (the string's place in the body), the ``detector`` that
    fired and the ``text`` it replaced (in order of appearance within that string)."""

    path: tuple[PathItem, ...]
    detector: str
    text: str
    #: The user rule that made the span (:mod:`cassettes.matching`); ``""``: a built-in
    #: detector.
    rule: str = ""


@dataclass(frozen=True, slots=True)
class Tolerated:
    """A difference two requests have only in a volatile span: where, which detector, the two
    values, and the user rule that tolerated it (``""``: a built-in detector)."""

    path: tuple[PathItem, ...]
    detector: str
    recorded: str
    live: str
    rule: str = ""


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
_TMP = (
    rf"(?<![\w.~-]){_TMP_ROOT}"
    r"(?:/pytest-of-[\w.-]{1,64}/pytest-(?:\d{1,9}|current)(?:/[\w.\[\]-]{1,128}?\d{1,"
    r"9}(?![\w.\[\]-]))?|/tmp[a-z0-9_]{8}(?![\w.-])|/(?=[\w.-]{0,127}\d)[\w.-]{1,128})?(?![\w.-])"
)

#: How near the recording's own time a bare number must be to be taken for an epoch (seconds).
EPOCH_WINDOW = 366 * 86400

#: Runs of digits and slashes no more than REACH apart: where the detectors are run.
REACH = 128
_CLUSTER = re.compile(r"[\d/](?:[^\d/]{0,128}[\d/])*")
#: The longest a match of a built-in detector can be (its patterns' bounds added up, with room).
SPAN = 400

#: Detectors whose spans are numbered by first appearance in a request (``<id:1>``): what
#: they replace names something, and the same name must stay the same thing.
NUMBERED = frozenset({"id", "uuid", "tmp", "port"})

#: Strings longer than this with no whitespace in them are encoded data (an image's base64, a
#: data URL), not text a person or a model reads as words: left alone (a different image is a
#: different request, and scanning megabytes of base64 for dates is time spent on nothing).
BLOB = 4096
#: Texts this long or longer are remembered once scanned, up to MEMO characters in all (a
#: matcher's lifetime: its recording's messages and the live requests repeating them); about
#: 20 MB at most, whatever the run's size (a replay server over a huge run stays flat).
MEMO_FROM = 256
MEMO = 8 << 20
#: Nor a text longer than this (one 50 MB message would hold 50 MB after its request is answered).
MEMO_UPTO = 1 << 20


def this_process(cwd: str | None = None, home: str | None = None) -> tuple[str | None, str]:
    """``cwd`` and ``home``, each this process's where not given (``None`` for a working
    directory removed under us)."""
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:  # the directory was removed under us
            cwd = None
    return cwd, home if home is not None else os.path.expanduser("~")


class VolatileSpans:
    """The built-in detectors, for one context: the working directory and home of this process
    (``<cwd>``, ``<home>``), and those of the recording when known (a run recorded in another
    checkout or on another machine: its ``/home/alice/proj`` is ``<cwd>`` as this one's is).

    A cwd or home that is a temp directory itself is left to the tmp detector (both runs of a
    test in pytest's ``tmp_path``: ``<tmp>`` on both sides); ``/`` and one-level paths are never
    taken as a cwd or home (every absolute path would start with them).
    """

    def __init__(
        self,
        cwd: str | None = None,
        home: str | None = None,
        recorded_cwd: Iterable[str] = (),
        recorded_home: Iterable[str] = (),
        recorded_time: float | None = None,
    ) -> None:
        cwd, home = this_process(cwd, home)
        #: When the run compared against was recorded (epoch seconds): a bare number within
        #: :data:`EPOCH_WINDOW` of it, in seconds or milliseconds, is a timestamp. ``None``: none
        #: is (a bare number stays significant).
        self.recorded_time = recorded_time
        self.cwds = _places([cwd, *recorded_cwd])
        self.homes = [h for h in _places([home, *recorded_home]) if h not in self.cwds]
        # Texts already scanned (an agent sends its whole history again every turn: each message
        # is scanned once, not once per later turn), up to MEMO characters, then started afresh.
        self._memo: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {}
        self._memo_chars = 0

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        return _detectors(tuple(self.cwds), tuple(self.homes))

    def normalise(
        self, text: str, numbers: Numbering | None = None
    ) -> tuple[str, tuple[tuple[str, str], ...]]:
        """``text`` with every volatile span written ``<detector>``, and what was replaced
        (detector, original) in order; ``text`` itself and ``()`` when nothing was.

        With ``numbers`` (one :class:`Numbering` per request body), the spans whose identity matters
        — ids, uuids, temp directories, ports (:data:`NUMBERED`) — are written ``<uuid:1>``,
        ``<uuid:2>`` … by first appearance, so that a renaming is tolerated only where it is
        consistent: the result for ``call_A`` must still go with ``call_A``, a file written to one
        temp directory must still be read from that one."""
        segments, found = self._segments(text)
        if not found:
            return text, ()
        out = [segments[0]]
        for (detector, original), seg in zip(found, segments[1:], strict=True):
            if numbers is not None and detector in NUMBERED:
                out.append(f"<{detector}:{numbers.number(detector, original)}>")
            else:
                out.append(f"<{detector}>")
            out.append(seg)
        return "".join(out), found

    def _segments(self, text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """The text between the spans, and the spans; remembered for long texts."""
        if not MEMO_FROM <= len(text) <= MEMO_UPTO:
            return self._scan(text)
        hit = self._memo.get(text)
        if hit is None:
            hit = self._scan(text)
            if self._memo_chars + len(text) > MEMO:
                self._memo.clear()
                self._memo_chars = 0
            self._memo[text] = hit
            self._memo_chars += len(text)
        return hit

    @cached_property
    def _tail(self) -> int:
        """How far past its start a match may reach (plus what a look-ahead reads after it)."""
        return SPAN + max((len(p) for p in (*self.cwds, *self.homes)), default=0) + 8

    def _matches(self, spaced: str) -> Iterator[re.Match[str]]:
        """The detectors' matches in ``spaced``, as ``finditer`` would give them, searched only
        near a digit or a slash: every span holds one (a date, a clock, an epoch, a duration, a
        port; a uuid's version digit, a random id's digits) or starts with one (a temp path, the
        cwd, the home) at most :data:`REACH` characters after its start, so text without them —
        most prose — is skipped in C. Every quantifier in the patterns is bounded (:data:`SPAN`),
        so a search that ends a little past the window never cuts a match short."""
        rx, tail, n = self._regex, self._tail, len(spaced)
        pos = 0
        while pos < n:
            cluster = _CLUSTER.search(spaced, pos)
            if cluster is None:
                return
            start, hi = max(pos, cluster.start() - REACH), cluster.end()
            while start <= hi:
                m = rx.search(spaced, start, min(n, hi + tail))
                if m is None or m.start() > hi:
                    break
                yield m
                start = m.end()
            pos = max(start, hi)

    def _scan(self, text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        if (len(text) > BLOB and not _has_space(text)) or text.startswith("data:"):
            return (text,), ()
        found: list[tuple[str, str]] = []
        segments: list[str] = []
        spaced = " " + text
        at = 1
        for m in self._matches(spaced):
            name = m.lastgroup
            assert name is not None
            inner = name + "_v"
            start, end = (
                m.span(inner) if inner in m.re.groupindex and m.start(inner) >= 0 else m.span(name)
            )
            detector = name.partition("__")[0]
            if detector == "id" and not _random(name, spaced[start:end]):
                continue
            if name.startswith("epoch__bare") and not self._near(spaced[start:end]):
                continue
            segments.append(spaced[at:start])
            found.append((detector, spaced[start:end]))
            at = end
        segments.append(spaced[at:])
        return tuple(segments), tuple(found)

    def _near(self, number: str) -> bool:
        """Whether ``number`` (10 or 13 digits, a fraction or not) is a time within
        :data:`EPOCH_WINDOW` of the recording's."""
        if self.recorded_time is None:
            return False
        whole = number.partition(".")[0]
        seconds = float(number) / (1000 if len(whole) == 13 else 1)
        return abs(seconds - self.recorded_time) <= EPOCH_WINDOW


@functools.lru_cache(maxsize=32)
def _detectors(cwds: tuple[str, ...], homes: tuple[str, ...]) -> re.Pattern[str]:
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
    alts += [("tmp__path", "s", _TMP), *_PATTERNS]
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


class Numbering:
    """The numbers of one request body's ids, uuids, temp directories and ports, by first
    appearance."""

    __slots__ = ("_counts", "_seen")

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], int] = {}
        self._counts: dict[str, int] = {}

    def number(self, detector: str, original: str) -> int:
        n = self._seen.get((detector, original))
        if n is None:
            n = self._seen[(detector, original)] = self._counts[detector] = (
                self._counts.get(detector, 0) + 1
            )
        return n


def _places(paths: Sequence[str | None]) -> list[str]:
    """Absolute directories (no trailing slash) of two levels or more, not temp ones, each once."""
    out: list[str] = []
    tmp = re.compile(_TMP)
    for p in paths:
        if not p:
            continue
        p = p.rstrip("/")
        if not p.startswith("/") or p.count("/") < 2 or p in out or tmp.fullmatch(p):
            continue
        out.append(p)
    return out


def slug(path: str) -> str:
    """``path`` as a folder name: every character but an ASCII letter or digit a ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _random(name: str, token: str) -> bool:
    """Whether an id-shaped token looks made up by a machine (checked here, not in the pattern:
    look-aheads over every word of a text cost more than the rest of the scan)."""
    digits = sum(c.isdigit() for c in token)
    letters = len(token) - digits
    if name.startswith(("id__prefixed", "id__hexshort")):
        return digits >= 2 and letters >= 2
    if name.startswith("id__hex"):
        return digits > 0 and letters > 0
    return digits > 0 and any(c.isupper() for c in token) and any(c.islower() for c in token)


def _has_space(text: str) -> bool:
    head = text[:BLOB]
    return " " in head or "\n" in head


#: The detector of a span an ignore rule made: the key it names is left out of the compared body
#: (its presence ignored too), so such a span may have no counterpart on the other side.
IGNORED = "ignored"
#: How an ignored key that one request lacks reads in a :class:`Tolerated`.
ABSENT = "(absent)"
#: The detector of a volatile tool's result (a user rule) and of a changed tool result in a
#: fork's tolerant prefix.
TOOL_RESULT = "tool_result"


def tolerated(recorded: Sequence[Span], live: Sequence[Span]) -> list[Tolerated]:
    """The spans where two requests with equal normalised bodies differ: the same paths hold the
    same placeholders in the same order on both sides (that is what equal means), so the spans
    pair up path by path, and every pair whose texts differ was tolerated. An ignored value
    (:data:`IGNORED`) pairs with the other side's at its path, or with its absence."""
    out = _ignored(recorded, live)
    by_path: dict[tuple[PathItem, ...], list[Span]] = {}
    for s in live:
        if s.detector == IGNORED:
            continue
        by_path.setdefault(s.path, []).append(s)
    seen: dict[tuple[PathItem, ...], int] = {}
    for s in recorded:
        if s.detector == IGNORED:
            continue
        i = seen.get(s.path, 0)
        seen[s.path] = i + 1
        pair = by_path.get(s.path)
        other = pair[i] if pair is not None and i < len(pair) else None
        if other is not None and other.detector == s.detector and other.text != s.text:
            out.append(Tolerated(s.path, s.detector, s.text, other.text, s.rule))
    return out


def _ignored(recorded: Sequence[Span], live: Sequence[Span]) -> list[Tolerated]:
    """The ignored values that differ (or are there on one side only), in the recording's order."""
    mine = {s.path: s for s in recorded if s.detector == IGNORED}
    theirs = {s.path: s for s in live if s.detector == IGNORED}
    out: list[Tolerated] = []
    for path in dict.fromkeys([*mine, *theirs]):
        a, b = mine.get(path), theirs.get(path)
        rec, got = (a.text if a else ABSENT), (b.text if b else ABSENT)
        first = a or b
        if rec != got and first is not None:
            out.append(Tolerated(path, IGNORED, rec, got, first.rule))
    return out
