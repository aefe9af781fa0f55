"""C — a replayed agent that diverged from its recording (``C.diverged_from_recording``).

A request the replay server could not answer from the cassette gets an error in the API's shape
from looptap itself (:mod:`cassettes.wire._own_headers`): the API was never asked, so the error is
no API finding. What it says is the client's divergence — the request differs from the recorded
one, as the matcher attributes it (every request difference is the client's dispatch) — on the
turn it happened, with the JSON path and the differences the pytest failure prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .. import codes as codes
from .._context import TurnContext
from .._model import Finding

__all__ = ["check_diverged_from_recording", "replay_miss"]


def check_diverged_from_recording(ctx: TurnContext) -> Iterator[Finding]:
    """C.diverged_from_recording — the replay had no recorded answer for this request."""
    if (ctx.rt.status or 0) < 400:
        return  # (a miss is an error answer: most turns are done here, no header read)
    note = ctx.replay_miss
    if note is None:
        return
    first = note.verdicts[0] if note.verdicts else None
    what = (
        f"{first.layer}: {first.message}"
        if first is not None
        else f"no recorded round trip matches ({note.reason or 'reason not given'})"
    )
    where = f" The closest recorded turn is {note.closest}." if note.closest else ""
    yield ctx.finding(
        codes.DIVERGED_FROM_RECORDING,
        f"The request diverged from the recording: {what}.{where} looptap's replay answered it "
        f"with an error of its own (HTTP {ctx.rt.status}): the API was not asked.",
        path=first.path if first is not None else None,
        closest=note.closest,
        reason=note.reason,
        verdicts=[f"{v.layer}: {v.message}" for v in note.verdicts],
        changes=list(note.changes),
    )


def replay_miss(findings: Iterable[Finding]) -> Finding | None:
    """The turn's ``C.diverged_from_recording`` finding, if any: every view asks this one question
    to say "replay miss" where it would say the API's error (the page's row and panes, ``show``,
    the inspector's turn list and A pane)."""
    return next((f for f in findings if f.code == codes.DIVERGED_FROM_RECORDING), None)
