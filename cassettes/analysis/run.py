"""The layer analysis of a whole run, in one pass over its round trips (recording order)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cassettes.analysis import api, dispatch, emission, tokens
from cassettes.analysis.context import Check, ConversationState, FinalCheck, TurnContext
from cassettes.analysis.conversations import Threader
from cassettes.analysis.model import (
    ApiView,
    Conversation,
    DispatchView,
    EmissionView,
    Finding,
    RunAnalysis,
    TokenView,
    Turn,
)
from cassettes.exchange import Exchange
from cassettes.roundtrip import RoundTrip, parse_exchange

__all__ = ["CHECKS", "FINAL_CHECKS", "RunAnalyser", "analyse"]

#: Every per-turn check, by layer. Order matters only for the order findings are listed in.
CHECKS: tuple[Check, ...] = (*emission.CHECKS, *api.CHECKS, *dispatch.CHECKS)
FINAL_CHECKS: tuple[FinalCheck, ...] = (*emission.FINAL_CHECKS, *api.FINAL_CHECKS, *dispatch.FINAL_CHECKS)

_HEADER = "x-looptap-conversation"


def _failed(rt: RoundTrip) -> bool:
    r = rt.response
    return bool(rt.transport_error) or (rt.status or 0) >= 400 or r is None or r.error is not None or r.complete is False


def _run(check: Check | FinalCheck, arg: TurnContext | ConversationState, errors: list[str]) -> Iterable[Finding]:
    try:
        return list(check(arg))  # type: ignore[arg-type]
    except Exception as exc:  # one broken check must not hide the others
        where = f"turn {arg.seq}" if isinstance(arg, TurnContext) else f"conversation {arg.id}"
        errors.append(f"check {getattr(check, '__name__', check)} failed on {where}: {type(exc).__name__}: {exc}")
        return []


class RunAnalyser:
    """Incremental analysis: feed round trips in recording order, read turns as they complete.

    The proxy can analyse a run while recording it; :func:`analyse` is the batch form.
    """

    def __init__(self) -> None:
        self.result = RunAnalysis()
        self._threader = Threader()
        self._contexts: list[TurnContext] = []  # parallel to the threader's turns
        self._convs: dict[str, ConversationState] = {}
        self._records: dict[str, Conversation] = {}
        self._pos = 0
        self._rts: dict[int, RoundTrip] = {}  # seq → round trip, to parse later requests incrementally
        self._tid: dict[int, int] = {}  # seq → threader turn id
        self._owned: set[int] = set()  # seqs whose round trip this analyser parsed (and may trim)

    def add(self, ex: Exchange, rt: RoundTrip | None = None) -> Turn | None:
        """Analyse one round trip; returns its turn (``None`` for a non-generation round trip)."""
        pos = self._pos
        self._pos += 1
        if rt is None:
            base_seq = (ex.history_delta or {}).get("base")
            rt = parse_exchange(ex, self._rts.get(base_seq) if isinstance(base_seq, int) else None)
            if ex.seq is not None:
                self._owned.add(ex.seq)
        seq = rt.seq if rt.seq is not None else (ex.seq if ex.seq is not None else pos)
        self._rts[seq] = rt
        if rt.operation != "generate" or rt.request is None:
            return None
        result = self.result
        label = ex.request_header(_HEADER)
        reused = rt._reused
        link = self._threader.add(
            rt.family,
            rt.request.messages,
            rt.response,
            _failed(rt),
            label=label,
            previous_response_id=rt.request.previous_response_id,
            reuse=(self._tid[reused[0]], reused[1]) if reused is not None and reused[0] in self._tid else None,
            system=rt.request.system,
        )
        self._tid[seq] = len(self._threader.turns) - 1
        conv = self._convs.get(link.conversation)
        if conv is None:
            conv = self._convs[link.conversation] = ConversationState(link.conversation, rt.family)
            self._records[link.conversation] = Conversation(id=link.conversation, family=rt.family, label=label)
            result.conversations.append(self._records[link.conversation])
        prev = self._contexts[link.previous] if link.previous is not None else None
        turn = Turn(
            seq=seq,
            conversation=conv.id,
            index=len(conv.turns),
            previous_seq=prev.seq if prev is not None else None,
            family=rt.family,
            e=EmissionView(),
            a=ApiView(),
            c=DispatchView(),
            tokens=TokenView(),
        )
        ctx = TurnContext(seq=seq, rt=rt, ex=ex, conv=conv, index=turn.index, prev=prev, messages=rt.request.messages, turn=turn)
        turn.c = dispatch.build(ctx, link)
        turn.e = emission.build(ctx)
        turn.a = api.build(ctx)
        turn.tokens = tokens.build(ctx)
        for check in CHECKS:
            turn.findings.extend(_run(check, ctx, result.errors))
        conv.turns.append(ctx)
        self._contexts.append(ctx)
        self._trim(prev)
        self._records[conv.id].turns.append(seq)
        result.turns[seq] = turn
        return turn

    def _trim(self, prev: TurnContext | None) -> None:
        """Drop the full history of the turn before ``prev``: no check looks two turns back, and a
        long run would otherwise hold one full message list per turn (quadratic memory)."""
        old = prev.prev if prev is not None else None
        if old is None or old.seq not in self._owned or old.rt.request is None:
            return
        old.messages = []
        old.rt.request.messages = []
        old.rt._raw_history_len = None  # no longer a base for incremental parsing

    def finish(self) -> RunAnalysis:
        """Run the end-of-run checks and return the analysis (call once, after the last round trip)."""
        result = self.result
        for conv in self._convs.values():
            for final in FINAL_CHECKS:
                for f in _run(final, conv, result.errors):
                    target = result.turns.get(f.seq) if f.seq is not None else None
                    if target is not None:
                        target.findings.append(f)
        result.findings = [f for t in result.turns.values() for f in t.findings]
        return result


def analyse(exchanges: Sequence[Exchange], roundtrips: Sequence[RoundTrip] | None = None) -> RunAnalysis:
    """Thread, view and check every generation round trip of a run.

    Without ``roundtrips`` the analyser parses the exchanges itself, incrementally where the
    cassette recorded history deltas, and keeps memory bounded; with them it uses them as given.
    """
    a = RunAnalyser()
    for i, ex in enumerate(exchanges):
        a.add(ex, roundtrips[i] if roundtrips is not None else None)
    return a.finish()
