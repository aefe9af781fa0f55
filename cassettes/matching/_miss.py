"""A replay miss: why a request got no recorded answer — the closest recorded turn, a JSON-path
diff and the layer it implicates — and the function that finds it (:func:`miss_of`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..recording import Redactor
from ..untrusted import clean_line
from ..wire import Exchange, Headers, MissNote, MissVerdict
from ._jsondiff import ECHO, Change, Shown, clip, json_diff, window
from ._requestkey import RequestKey
from ._verdicts import Verdict, attribute

if TYPE_CHECKING:
    from ._recording import Recorded

__all__ = ["Miss", "body_changes", "learned", "miss_of"]


@dataclass
class Miss:
    """Why a request got no recorded answer."""

    method: str
    target: str
    reason: str
    closest: Recorded | None = None
    changes: list[Change] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    #: Knows the credentials of the request that missed (its headers, URL and body), so that
    #: nothing printed about the miss carries them; ``None``: patterns only.
    redactor: Redactor | None = None

    @property
    def headline(self) -> str:
        """One line: where (the closest recorded turn) and what (the first layer verdict)."""
        where = (
            self.closest.label if self.closest is not None else f"{self.method} {clip(self.target)}"
        )
        return self._shown(
            clip(f"{where}: {self.verdicts[0]}" if self.verdicts else f"{where}: {self.reason}")
        )

    def lines(self, max_changes: int = 8) -> list[str]:
        out = [
            "looptap replay: no recorded round trip matches "
            f"{self.method} {self.target}: {self.reason}"
        ]
        if self.closest is not None:
            state = "already played" if self.closest.plays else "not yet played"
            out.append(f"closest recorded turn: {self.closest.label}, {state}")
        out.extend(f"  {v}" for v in self.verdicts)
        if self.changes:
            out.append("  differences (recording → this request):")
            out.extend(f"    {c.describe()}" for c in self.changes[:max_changes])
            if len(self.changes) > max_changes:
                out.append(f"    … and {len(self.changes) - max_changes} more")
        return [self._shown(line) for line in out]

    def _shown(self, line: str) -> str:
        """What the agent sent is printed to a terminal and into test reports: redacted, one line
        each, and bounded (a 9 MB URL is not sent back): scrubbed with a margin, then cut."""
        r = self.redactor or Redactor()
        return clean_line(
            r.scrub(line)
            if len(line) <= ECHO
            else f"{r.scrub(line[: ECHO + 4096])[:ECHO]}… [cut: {len(line):,} characters]"
        )

    def note(self) -> MissNote:
        """The miss as the analysis reads it off the answer (:mod:`cassettes.wire._own_headers`):
        the closest turn, the verdicts and the differences, shown as :meth:`lines` shows them."""
        return MissNote(
            closest=self.closest.label if self.closest is not None else None,
            reason=self._shown(self.reason),
            verdicts=[
                MissVerdict(v.layer, self._shown(v.message), self._shown(v.path))
                for v in self.verdicts
            ],
            changes=[self._shown(c.describe()) for c in self.changes],
        )

    def __str__(self) -> str:
        return "\n".join(self.lines())


def miss_of(
    key: RequestKey,
    recorded: Sequence[Recorded],
    frontier: set[int],
    strict_next: Recorded | None = None,
) -> Miss:
    """Why no recorded round trip answers the request ``key``: the closest of ``recorded``
    (``strict_next`` alone in strict mode), with the differences and the layer verdicts, and how
    many were unplayed. ``frontier``: the next unplayed turn of every conversation (preferred on
    equal distance)."""
    unplayed = [r for r in recorded if not r.plays]
    if not recorded:
        return Miss(key.method, key.target, "the cassette holds no round trips")
    # Every recorded turn is a candidate (an exact repeat of a played one is a repeat, said
    # so); on equal distance an unplayed turn wins, then the next turn of a conversation.
    pool = [strict_next] if strict_next is not None else recorded
    best: tuple[tuple[int, int, int, int, int], Recorded, list[Change]] | None = None
    for r in pool:
        changes = body_changes(r.key, key)
        score = (
            int((r.key.method, r.key.path) != (key.method, key.path)),
            len(changes),
            int(r.plays > 0),
            int(r.index not in frontier),
            r.index,
        )
        if best is None or score < best[0]:
            best = (score, r, changes)
    assert best is not None
    _, closest, changes = best
    if not unplayed:
        reason = f"the cassette is exhausted (all {len(recorded)} recorded round trips were played)"
    elif strict_next is not None:
        reason = "strict: it is not the next recorded round trip"
    else:
        reason = (
            f"{len(unplayed)} of {len(recorded)} recorded "
            "round trips are unplayed, none is this request"
        )
    verdicts = attribute(closest.key, key, changes)
    if not verdicts and closest.plays:
        verdicts = [
            Verdict(
                "C",
                f"the request repeats {closest.label}, which was already played (a retry or a "
                "repeated call the recording does not have)",
                "(body)",
            )
        ]
    elif not verdicts:
        verdicts = [Verdict("C", "the request differs from the recording", "(body)")]
    return Miss(key.method, key.target, reason, closest, changes, verdicts)


def body_changes(recorded: RequestKey, live: RequestKey) -> list[Change]:
    """The differences between a recorded request's body and a live one's: a JSON-path diff, or
    one change around where two bodies that are not JSON differ."""
    if recorded.is_json and live.is_json:
        return json_diff(recorded.body, live.body)
    if recorded.body == live.body:
        return []
    a, b = window(recorded.body, live.body)  # around where the bodies differ
    return [Change((), "changed", Shown(a), Shown(b))]


def learned(method: str, target: str, headers: Headers, body: bytes) -> Redactor:
    """A redactor that has seen the request (its credential headers, query and body keys)."""
    r = Redactor()
    try:
        r.exchange(
            Exchange(
                method, target if "://" in target else "http://replay" + target, list(headers), body
            )
        )
    except Exception:  # learning is best effort; the patterns still apply
        pass
    r.forget_seen()  # kept with the miss: what it learned, not the request's text
    return r
