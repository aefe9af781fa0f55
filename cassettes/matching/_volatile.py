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

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

from ..jsonpath import PathItem
from ..places import this_process
from ._detectors import TMP, detectors

__all__ = [
    "NUMBERED",
    "Numbering",
    "Span",
    "Tolerated",
    "VolatileSpans",
    "tolerated",
]


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
        return detectors(tuple(self.cwds), tuple(self.homes))

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
    tmp = re.compile(TMP)
    for p in paths:
        if not p:
            continue
        p = p.rstrip("/")
        if not p.startswith("/") or p.count("/") < 2 or p in out or tmp.fullmatch(p):
            continue
        out.append(p)
    return out


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
