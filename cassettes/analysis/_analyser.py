"""The layer analysis of a whole run, in one pass over its round trips (recording order).

Memory stays bounded by what later turns can still use, not by the run's length: a turn's
context (its parsed round trip and history) is kept while it is the latest of its conversation
(and while the turn after it is analysed); the histories of conversations that went quiet are
released (a late continuation is threaded by the message hashes the threader keeps, and parsed in
full); a turn an out-of-order ``previous_response_id`` points back to is read again through the
``reload`` hook. What is kept per turn is the threader's hashes, the checks' memory (ids, hashes)
and — unless ``keep_turns`` is off — the :class:`Turn` itself.

With a ``reload`` hook a conversation that went quiet is *parked* (:mod:`._parking`): its latest
turn's context is dropped and read again if the conversation goes on. :class:`RunAnalyser` drives
one :class:`~._state.AnalyserState` (its tables, plain data) round trip by round trip;
:func:`._final_pass.finish` is the end-of-run pass.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from .. import providers
from ..models import Message
from ..parsing import RoundTrip, parse_exchange, side_call
from ..wire import Exchange
from . import _final_pass as final_pass
from . import _parking as parking
from . import _retention as retention
from . import _rules as rules
from . import spill as spill_tables
from ._api_errors import side_http_error
from ._context import ConversationState, TurnContext, cut_call, overflowed
from ._judgement import (
    CHECKS,
    EMPTY_A,
    EMPTY_C,
    EMPTY_E,
    EMPTY_TOKENS,
    contained,
    failed,
    judge,
    settle,
)
from ._model import (
    Conversation,
    Finding,
    RunAnalysis,
    Turn,
)
from ._provenance import weigh_tool_answers
from ._rehome import rehome, rejoin
from ._state import (
    AnalyserState,
    Reload,
    conversation_of,
    rendered_side_call,
    summary_carried,
    turn_findings,
)
from .dispatch import GROUP_CHAT
from .threading import Attempt, Link, Threader

__all__ = ["ACTIVE", "RunAnalyser", "analyse"]

#: Conversations whose latest request keeps its parsed history (the most recently active ones):
#: the next turn of one of them is parsed incrementally, against it. Older ones are released.
ACTIVE = 16

_HEADER = "x-looptap-conversation"
#: The operations that run the model over a request: its turns. ``compact`` (the Responses API's
#: ``POST /responses/compact``) writes a compaction of its input, a side call the conversation
#: then uses (docs/threading.md, "Context management").
MODEL_CALLS = frozenset({"generate", "compact"})


#: Longest conversation title, in characters.
TITLE = 60


def _title(messages: Sequence[Message]) -> str | None:
    """The first words of the first user message that has text (a tool result is not a title)."""
    for m in messages[:64]:
        if m.role != "user":
            continue
        text = " ".join(
            " ".join(p.text for p in m.parts if p.kind == "text" and p.text)[: TITLE * 8].split()
        )
        if text:
            return (
                text
                if len(text) <= TITLE
                else text[: TITLE - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
            )
    return None


@functools.cache
def _continuity(family: str) -> frozenset[str]:
    """The family's continuity-token keys, from its profile (threading's provider evidence)."""
    p = providers.by_family(family)
    return p.profile.continuity if p is not None else frozenset()


def _attempt(ex: Exchange) -> Attempt:
    """The request as an attempt (:class:`~.conversations.Attempt`): its clock (the recording's,
    else the response's ``Date`` header, to the second) and the client's retry counter
    (``x-stainless-retry-count``; botocore's ``amz-sdk-request: attempt=N`` counts from 1)."""
    sent = ended = None
    if ex.started is not None:
        sent, ended = ex.started, ex.started + max(ex.duration or 0.0, 0.0)
    elif date := ex.response_header("date"):
        from email.utils import parsedate_to_datetime  # a recording without its clock only

        try:
            sent = ended = parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
    retries = None
    count = ex.request_header("x-stainless-retry-count")
    if count is not None and count.strip().isdigit():
        retries = int(count)
    else:
        aws = re.search(r"\battempt=(\d+)", ex.request_header("amz-sdk-request") or "")
        retries = int(aws.group(1)) - 1 if aws and int(aws.group(1)) > 0 else None
    return Attempt(sent, ended, retries)


class RunAnalyser:
    """Incremental analysis: feed round trips in recording order, read turns as they complete.

    The proxy can analyse a run while recording it; :func:`analyse` is the batch form.

    ``reload`` reads an earlier turn again; without it every turn's context stays in memory (a
    ``previous_response_id`` may point back at any of them). With ``keep_turns`` off the
    analyser does not hold the turns it returns (``result.turns`` stays empty; the caller keeps
    what it needs, and the end-of-run checks still add their findings to the turns they concern).
    What it holds between round trips is one :class:`~._state.AnalyserState`.
    """

    def __init__(
        self,
        reload: Reload | None = None,
        *,
        keep_turns: bool = True,
        active: int = ACTIVE,
        keep: int | None = None,
    ) -> None:
        keep = spill_tables.KEEP if keep is None else keep  # (read now: a test may set a small one)
        #: Every check, the agent's own rules in force (docs/rules.md) too: read once, a bad file
        #: raises here, in one line.
        self._checks = CHECKS
        in_force = rules.active()
        if in_force is not None:
            # the rules' checker: loaded when a file puts rules in force (most runs' show has none)
            from ._rule_check import checks_of

            self._checks = (*CHECKS, *checks_of(in_force))
        self.state = AnalyserState.start(reload, keep_turns, active, keep)
        #: The number of a conversation's first turn: 0, or for a fork's branch the origin's turn
        #: at the cursor (:func:`cassettes.reading.first_turn`), so a branch keeps its
        #: origin's numbers; a conversation started within the run (its parent turn is here) starts
        #: at 0.
        self.first_index = 0
        #: The API family of the round trip :meth:`add` took last ("none" when not an LLM API's).
        self.last_family = "none"
        #: Called with each round trip :meth:`add` parses, before the analysis reads it (a reader
        #: keeps that parse for its printers and viewers: parsed once,
        #: cassettes.reading._incremental).
        self.on_parse: Callable[[RoundTrip], None] | None = None

    @property
    def result(self) -> RunAnalysis:
        """The analysis so far (its findings ordered by :meth:`finish`)."""
        return self.state.result

    def add(self, ex: Exchange, rt: RoundTrip | None = None) -> Turn | None:
        """Analyse one round trip; returns its turn (``None`` for a non-generation round trip).

        A step outside a turn's judgement (the parse, the threading) that raises is contained
        (:func:`~._judgement.contained`): the round trip is left out of the analysis, said in its
        errors, and the run goes on (``None``)."""
        st = self.state
        where = f"round trip #{ex.seq if ex.seq is not None else st.pos}"
        try:
            turn, said = contained(
                "the analysis", where, lambda: self._add(ex, rt), None, st.result.errors
            )
            if said is not None:  # each turn the threader made keeps a round trip's number
                st.seq_of_tid.extend([-1] * (len(st.threader.turns) - len(st.seq_of_tid)))
            return turn
        finally:  # spill what does not fit (between round trips: no entry is held then)
            for table in (st.latest, st.convs, st.records, st.parked):
                table.trim()
            st.conversations.trim()

    def _add(self, ex: Exchange, rt: RoundTrip | None) -> Turn | None:
        st = self.state
        pos = st.pos
        st.pos += 1
        owned = rt is None
        if rt is None:
            rt = self._parse(ex)
        seq = rt.seq if rt.seq is not None else (ex.seq if ex.seq is not None else pos)
        self.last_family = rt.family
        if ex.tool:  # a tool's HTTP call: linked to the model's call it served, never a turn
            st.result.mcp_calls[seq] = st.tools.exchange(seq, ex)
            retention.remember(st, seq, rt, None)
            return None
        if (
            rt.operation not in MODEL_CALLS
            or rt.request is None
            or st.delivered.delivered_before(rt)
        ):
            side = side_call(ex, rt)  # what an MCP tool server listed or answered, linked to
            call = st.mcp.side_call(seq, side) if side else None  # the model's call it ran
            if call is not None:
                st.result.mcp_calls[seq] = call
            failed_call = side_http_error(ex, rt, seq)  # an embedding's 404, as a model call's
            if failed_call is not None:
                st.flagged[seq] = (pos, [failed_call])
            retention.remember(st, seq, rt, None)
            return None
        if owned:
            st.owned.add(seq)
        st.threader.keys.forget(st.items.resolve(rt.request.messages))
        st.items.remember(rt.response)
        label = ex.request_header(_HEADER)
        link = self._thread(rt, label, _attempt(ex))
        tid = len(st.threader.turns) - 1
        st.seq_of_tid.append(seq)
        if link.summary_of is not None and 0 <= link.summary_of < tid:
            summary_carried(st, link.summary_of)
            link.summary_of = st.seq_of_tid[link.summary_of]  # the C layer names round trips
        else:
            link.summary_of = None
        retention.remember(st, seq, rt, tid)
        if link.rehome is not None:  # a handed loop this request proves was another agent's
            rehome(st, link)
        if link.rejoined is not None:  # a side call asked in place this request proves was a turn
            rejoin(st, link)
        conv = self._conversation(link, rt, label)
        if link.rendered and conv.count == 0:
            rendered_side_call(st, tid, conv.id)
        parked = st.parked.get(conv.id)
        if parked is not None:  # a quiet conversation goes on: its latest turn read again
            parking.unpark(st, parked.tid)
        prev = self._previous(link, rt)
        turn = Turn(
            seq=seq,
            conversation=conv.id,
            index=conv.count,
            previous_seq=prev.seq if prev is not None else None,
            family=rt.family,
            # (placeholders, shared: judge replaces each, layer by layer, before anything reads it)
            e=EMPTY_E,
            a=EMPTY_A,
            c=EMPTY_C,
            tokens=EMPTY_TOKENS,
        )
        msgs = rt.request.messages
        ctx = TurnContext(
            seq=seq,
            rt=rt,
            ex=ex,
            conv=conv,
            index=turn.index,
            prev=prev,
            messages=msgs,
            turn=turn,
            n_messages=len(msgs),
            mcp=st.mcp,
            tool_http=st.tools,
            repeats=st.repeats,
            keys=st.threader.keys,
        )
        judge(ctx, link, st.mcp, st.result.errors, self._checks)
        ended = st.tools.model_turn(turn, rt.response, ex.started)  # (their tools' HTTP read)
        weigh_tool_answers(ended, st.tools, lambda s: turn_findings(st, s))
        conv.count += 1
        conv.turns[:] = [ctx]  # the end-of-run checks look at a conversation's last turn only
        if prev is not None:
            retention.release_history(st, prev)
        retention.make_latest(st, conv.id, tid, pos, ctx)
        settle(ctx, st.keep_turns)
        st.conversations.record(st.records[conv.id]).turns.append(seq)
        if st.keep_turns:
            st.result.turns[seq] = turn
        elif turn.findings:
            st.flagged[seq] = (pos, turn.findings)
        return turn

    def _parse(self, ex: Exchange) -> RoundTrip:
        """``ex`` parsed (on the round trip its history delta is based on, when there is one)."""
        base_seq = (ex.history_delta or {}).get("base")
        base = self.state.rts.get(base_seq) if isinstance(base_seq, int) else None
        rt = parse_exchange(ex, base[0] if base is not None else None)
        if self.on_parse is not None:
            self.on_parse(rt)
        return rt

    def _previous(self, link: Link, rt: RoundTrip) -> TurnContext | None:
        """The context of the turn ``rt`` continues, if any; a poll read as a model call takes
        that turn's request's model, instructions, tools and settings
        (:func:`._parking.inherit`)."""
        prev = retention.context(self.state, link.previous) if link.previous is not None else None
        if rt.polled and prev is not None and prev.rt.request is not None:
            assert rt.request is not None
            parking.inherit(rt.request, prev.rt.request)
        return prev

    def _thread(self, rt: RoundTrip, label: str | None, attempt: Attempt) -> Link:
        """The conversation and turn this request continues (the threader's link)."""
        assert rt.request is not None
        reused = rt.reused
        base_entry = self.state.rts.get(reused[0]) if reused is not None else None
        return self.state.threader.add(
            rt.family,
            rt.request.messages,
            rt.response,
            failed(rt),
            label=label,
            overflow=overflowed(rt),
            cut=cut_call(rt),
            previous_response_id=rt.request.previous_response_id,
            reuse=(base_entry[1], reused[1])
            if reused is not None and base_entry is not None and base_entry[1] is not None
            else None,
            system=rt.request.system,
            tools=[t.name for t in rt.request.tools if t.name],
            attempt=attempt,
            compacts=rt.operation == "compact",
            continuity=_continuity(rt.family),
        )

    def _conversation(self, link: Link, rt: RoundTrip, label: str | None) -> ConversationState:
        """The state of the conversation ``link`` names, made (with its record) on its first
        turn."""
        st = self.state
        conv = st.convs.get(link.conversation)
        if conv is not None:
            return conv
        assert rt.request is not None
        parent = (
            st.seq_of_tid[link.parent]
            if link.parent is not None and 0 <= link.parent < len(st.seq_of_tid) - 1
            else None
        )
        first = self.first_index if parent is None else 0
        conv = st.convs[link.conversation] = ConversationState(
            link.conversation, rt.family, count=first, first=first
        )
        record = Conversation.model_construct(
            id=link.conversation,
            family=rt.family,
            turns=[],
            label=label,
            title=_title(rt.request.messages),
            parent_seq=parent,
            branch=link.branch if parent is not None else None,
        )
        if parent is not None and link.branch == "handoff":
            st.handed_off.add(parent)
        if parent is not None and link.branch == "group_chat":
            self._group_chat(conv, link.parent)
        st.records[link.conversation] = st.conversations.append(record)
        return conv

    def _group_chat(self, conv: ConversationState, parent: int | None) -> None:
        """Mark ``conv`` and the conversation of its parent turn as agents of one group chat (a
        parked parent keeps its state as parked: it is not marked)."""
        conv.state[GROUP_CHAT] = True
        of_parent = conversation_of(self.state, parent) if parent is not None else None
        if of_parent is not None and of_parent not in self.state.parked:
            other = self.state.convs.get(of_parent)
            if other is not None:
                other.state[GROUP_CHAT] = True

    def placed(self, turn: Turn) -> Turn:
        """``turn`` (restored from a store) put where a later request re-read it, when one did
        (:func:`._parking.placed`)."""
        return parking.placed(self.state, turn)

    def findings_of(self, seq: int) -> list[Finding] | None:
        """With ``keep_turns`` off: the findings of the turn ``seq`` when it has some (the list the
        end-of-run checks add to), else ``None``."""
        flagged = self.state.flagged.get(seq)
        return flagged[1] if flagged is not None else None

    def kept(self) -> tuple[RunAnalysis, dict[int, tuple[int, list[Finding]]]]:
        """What a reader reads of a finished analysis (its result, and with ``keep_turns`` off the
        findings by turn of :meth:`findings_of`): what a kept analysis keeps of it."""
        return self.state.result, self.state.flagged

    def take(self, result: RunAnalysis, flagged: dict[int, tuple[int, list[Finding]]]) -> None:
        """Stand for a finished analysis that was kept (:meth:`kept`): nothing is added after."""
        self.state.result, self.state.flagged = result, flagged

    def release(self) -> None:
        """Drop what only a later round trip would need (contexts, parsed histories, the threader's
        tables), once :meth:`finish` has run and nothing more will be added: the result stays."""
        st = self.state
        st.contexts.clear()
        st.histories.clear()
        st.convs.clear()
        st.rts.clear()
        st.owned.clear()
        st.latest.clear()
        st.parked.clear()
        st.records.clear()
        st.mcp.clear()
        st.tools.clear()
        st.threader.close()
        st.threader = Threader(keep=st.keep)

    def finish(self) -> RunAnalysis:
        """Run the end-of-run checks and return the analysis (call once, after the last round
        trip): :func:`._final_pass.finish`."""
        st = self.state
        fin = lambda: final_pass.finish(st)  # noqa: E731
        return contained("the end-of-run pass", "the run", fin, st.result, st.result.errors)[0]


def analyse(
    exchanges: Sequence[Exchange],
    roundtrips: Sequence[RoundTrip] | None = None,
    first_index: int = 0,
) -> RunAnalysis:
    """Thread, build the layers of and check every generation round trip of a run (``first_index``:
    the number of a conversation's first turn, :attr:`RunAnalyser.first_index`).

    Without ``roundtrips`` the analyser parses the exchanges itself, incrementally where the
    cassette recorded history deltas, and keeps memory bounded; with them it uses them as given.
    """
    where: dict[int, int] = {}

    def reload(seq: int) -> tuple[Exchange, RoundTrip, Turn]:
        if not where:
            for i, ex in enumerate(exchanges):
                s = roundtrips[i].seq if roundtrips is not None else None
                s = s if s is not None else (ex.seq if ex.seq is not None else i)
                where.setdefault(s, i)
        i = where[seq]
        ex = exchanges[i]
        return (
            ex,
            roundtrips[i] if roundtrips is not None else parse_exchange(ex),
            a.result.turns[seq],
        )

    a = RunAnalyser(reload)
    a.first_index = first_index
    for i, ex in enumerate(exchanges):
        a.add(ex, roundtrips[i] if roundtrips is not None else None)
    return a.finish()
