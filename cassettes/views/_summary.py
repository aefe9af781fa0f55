"""A turn in a few hundred bytes: what a turn list, the findings, the growth chart and navigation
read, for runs too long to hold every analysed :class:`~cassettes.analysis._model.Turn`.

A full ``Turn`` (its views, texts and appended messages as pydantic models) takes 10–25 KB in
memory; a :class:`TurnSummary` a few hundred bytes. :class:`cassettes.reading.RunReader`
keeps summaries and stores the full turns out of memory, restoring one when a viewer shows it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ..analysis import Finding, Turn, codes
from ..analysis.dispatch import replay_miss
from ._growth import GrowthBar, growth_bars

__all__ = ["TurnSummary", "summarise"]


@dataclass(frozen=True, slots=True)
class TurnSummary:
    seq: int
    conversation: str
    #: Position in the conversation, from 0.
    index: int
    previous_seq: int | None
    family: str
    #: The turn's findings: the analysis' own list, so findings the end-of-run checks add show here.
    findings: list[Finding]
    #: HTTP status of the response.
    status: int | None
    #: The API reported an error (a replay miss is not the API's: :attr:`replay_miss`).
    error: bool
    #: Tool calls the model emitted.
    tool_calls: int
    #: Finish reason as the provider sent it (else normalised), if any.
    finish: str | None
    input: int | None
    output: int | None
    #: Index in the request's history of the first message this turn appended.
    appended_from: int
    #: The turn's bar in the token-cost growth chart.
    bar: GrowthBar
    #: looptap's replay answered: the request is not in the recording
    #: (``C.diverged_from_recording``).
    replay_miss: bool = False
    #: Where the context was managed: ``trimmed``, ``summarised``, ``cleared`` (the client,
    #: ``Dispatch.context``) or ``edited by the API`` (``A.context_edited``); ``None``: nowhere.
    managed: str | None = None


def _intern(s: str | None) -> str | None:
    return sys.intern(s) if s is not None else None


def summarise(turn: Turn) -> TurnSummary:
    a = turn.a
    miss = replay_miss(turn.findings) is not None
    cc = turn.c.context
    managed = (
        cc.kind
        if cc is not None
        else "edited by the API"
        if any(f.code == codes.CONTEXT_EDITED for f in turn.findings)
        else None
    )
    return TurnSummary(
        managed=managed,
        seq=turn.seq,
        conversation=sys.intern(turn.conversation),  # (a restored turn's own copy, else)
        index=turn.index,
        previous_seq=turn.previous_seq,
        family=sys.intern(turn.family),
        findings=turn.findings,
        status=a.status,
        error=a.error is not None and not miss,
        tool_calls=len(turn.e.tool_calls),
        finish=_intern(a.finish_reason_raw or (a.finish_reason.value if a.finish_reason else None)),
        input=turn.tokens.input,
        output=turn.tokens.output,
        appended_from=turn.c.appended_from,
        bar=growth_bars([turn])[0],
        replay_miss=miss,
    )
