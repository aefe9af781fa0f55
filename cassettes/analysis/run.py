"""The layer analysis of a whole run, in one pass over its round trips (recording order).

Memory stays bounded by what later turns can still use, not by the run's length: a turn's
context (its parsed round trip and history) is kept while it is the latest of its conversation
(and while the turn after it is analysed); the histories of conversations that went quiet are
released (a late continuation is threaded by the message hashes the threader keeps, and parsed in
full); a turn an out-of-order ``previous_response_id`` points back to is read again through the
``reload`` hook. What is kept per turn is the threader's hashes, the checks' memory (ids, hashes)
and — unless ``keep_turns`` is off — the :class:`Turn` itself.

With a ``reload`` hook a conversation that went quiet is *parked*: its latest turn's context (the
parsed round trip: a few KB of models) is dropped and read again if the conversation goes on;
the checks' memory of it is kept pickled (tens of bytes where it holds nothing), and the
end-of-run checks run on it as it stands, their findings applied at :meth:`RunAnalyser.finish`
unless a later turn continues it. So a run of a million one-turn conversations keeps a small
record per conversation, not a parsed round trip each. A failed latest turn is not parked (the
check of its retry reads the failed attempt's timing, which is not stored).
"""

from __future__ import annotations

import pickle
import re
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import cassettes.analysis.dispatch as dispatch
import cassettes.analysis.rules as rules
import cassettes.analysis.spill as spill_tables
from cassettes.analysis.context import ConversationState, TurnContext
from cassettes.analysis.conversations import Attempt, Link, Threader
from cassettes.analysis.dispatch.history import GROUP_CHAT
from cassettes.analysis.items import Deliveries, ItemReferences
from cassettes.analysis.judgement import (
    CHECKS,
    EMPTY_A,
    EMPTY_C,
    EMPTY_E,
    EMPTY_TOKENS,
    FINAL_CHECKS,
    NO_EXCHANGE,
    failed,
    judge,
    run_check,
    settle,
    slim,
)
from cassettes.analysis.mcp import McpLinker
from cassettes.analysis.model import (
    Finding,
    RunAnalysis,
    Turn,
)
from cassettes.analysis.records import ConversationRecord, Conversations
from cassettes.analysis.spill import Spill, SpillMap
from cassettes.models import Message, NormalisedRequest
from cassettes.parsing.roundtrip import RoundTrip, parse_exchange, side_call
from cassettes.wire.exchange import Exchange

__all__ = ["ACTIVE", "CHECKS", "FINAL_CHECKS", "Conversations", "Reload", "RunAnalyser", "analyse"]

#: Conversations whose latest request keeps its parsed history (the most recently active ones):
#: the next turn of one of them is parsed incrementally, against it. Older ones are released.
ACTIVE = 16

#: Given a seq analysed earlier: its exchange, its round trip and its turn, read again.
Reload = Callable[[int], tuple[Exchange, RoundTrip, Turn]]

_HEADER = "x-looptap-conversation"


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


@dataclass(slots=True)
class _Parked:
    """A quiet conversation whose latest turn's context was dropped (read again if it goes on)."""

    #: The threader turn id and seq of its latest turn.
    tid: int
    seq: int
    #: That turn's findings: the list the caller holds (end-of-run checks add to it).
    findings: list[Finding]
    #: The checks' memory of the conversation, pickled.
    state: bytes
    #: What the end-of-run checks found on it, and the errors they raised (``None``: nothing).
    final: list[Finding] | None
    errors: list[str] | None


def _unreferenced(_: str, conv: ConversationState) -> bool:
    """A conversation's state no context refers to (parked): it may be spilled."""
    return not conv.turns


def _unshared(_: str, parked: _Parked) -> bool:
    """A parked conversation with no list of findings shared with a caller: it may be spilled."""
    return not (parked.findings or parked.final or parked.errors)


def _inherit(poll: NormalisedRequest, polled: NormalisedRequest) -> None:
    """A poll read as a model call (``RoundTrip.polled``) sends nothing of its own: it stands for
    the call it polls, whose model, instructions, tools and settings it takes (so its calls are
    checked against the tools offered, and the next request's tools compare with the same)."""
    poll.model = poll.model or polled.model
    poll.system, poll.tools, poll.params = (
        list(polled.system),
        list(polled.tools),
        dict(polled.params),
    )
    poll.tool_choice, poll.tool_choice_mode = polled.tool_choice, polled.tool_choice_mode


class RunAnalyser:
    """Incremental analysis: feed round trips in recording order, read turns as they complete.

    The proxy can analyse a run while recording it; :func:`analyse` is the batch form.

    ``reload`` reads an earlier turn again; without it every turn's context stays in memory (a
    ``previous_response_id`` may point back at any of them). With ``keep_turns`` off the
    analyser does not hold the turns it returns (``result.turns`` stays empty; the caller keeps
    what it needs, and the end-of-run checks still add their findings to the turns they concern).
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
        self.result = RunAnalysis()
        #: The agent's own rules (docs/rules.md), read once: a bad file raises here, in one line.
        self._rules = rules.active()
        # The per-conversation tables below keep their recently used entries in memory and the
        # others on disk (:mod:`.spill`): a conversation that went quiet costs no memory.
        spill = self._spill = Spill()
        self._conversations = Conversations(spill=spill, keep=keep)
        self.result.conversations = self._conversations
        self._reload = reload
        self._keep_turns = keep_turns
        self._active = active
        self._keep = keep
        self._threader = Threader(keep=keep)
        self._mcp = McpLinker()
        #: seqs of turns whose transfer call handed the run to another agent (a ``handoff``
        #: conversation branched from them): their calls are not left pending.
        self._handed_off: set[int] = set()
        self._seq_of_tid = array("q")  # threader turn id → seq
        # Contexts a later turn may take as its previous one, by threader turn id: the latest
        # turn of each conversation (every turn when nothing can be reloaded).
        self._contexts: dict[int, TurnContext] = {}
        # conversation → threader turn id and recording position of its latest turn
        self._latest: SpillMap[str, tuple[int, int]] = SpillMap(spill, keep)
        # Conversations whose latest turn keeps its parsed history, least recently active first.
        self._histories: OrderedDict[str, TurnContext] = OrderedDict()
        # (a conversation's state is spilled only once no context refers to it: parked)
        self._convs: SpillMap[str, ConversationState] = SpillMap(spill, keep, _unreferenced)
        # conversation → its record's position
        self._records: SpillMap[str, int] = SpillMap(spill, keep)
        self._pos = 0
        # Recent round trips by seq (with their threader turn id), to parse a later request
        # against (a cassette's history delta names its base): a base that is gone is parsed in
        # full.
        self._rts: OrderedDict[int, tuple[RoundTrip, int | None]] = OrderedDict()
        self._owned: set[int] = set()  # seqs of live contexts whose round trip this analyser parsed
        # keep_turns off: the findings of turns that have some, in recording order.
        self._flagged: dict[int, tuple[int, list[Finding]]] = {}
        # Items of recent answers by id, for requests that refer to them instead of sending them.
        self._items = ItemReferences()
        # Recent answers' tool calls by response id, to tell a poll that delivers them again.
        self._delivered = Deliveries()
        # Quiet conversations whose latest context was dropped (see the module docstring).
        # (spilled when no list of findings is shared: see :meth:`finish`)
        self._parked: SpillMap[str, _Parked] = SpillMap(spill, keep, _unshared)
        #: The number of a conversation's first turn: 0, or for a fork's branch the origin's turn
        #: at the cursor (:func:`cassettes.reading.branch.first_turn`), so a branch keeps its
        #: origin's numbers; a conversation started within the run (its parent turn is here) starts
        #: at 0.
        self.first_index = 0
        #: The API family of the round trip :meth:`add` took last ("none" when not an LLM API's).
        self.last_family = "none"
        #: Called with each round trip :meth:`add` parses, before the analysis reads it (a reader
        #: keeps that parse for its printers and viewers: parsed once,
        #: cassettes.reading.incremental).
        self.on_parse: Callable[[RoundTrip], None] | None = None

    def _side_call(self, seq: int, ex: Exchange, rt: RoundTrip) -> None:
        """Take what an MCP tool server listed or answered, linked to the model's call it ran, for
        the checks of the turn that returns the result."""
        side = side_call(ex, rt)
        call = self._mcp.side_call(seq, side) if side else None
        if call is not None:
            self.result.mcp_calls[seq] = call

    def add(self, ex: Exchange, rt: RoundTrip | None = None) -> Turn | None:
        """Analyse one round trip; returns its turn (``None`` for a non-generation round trip)."""
        try:
            return self._add(ex, rt)
        finally:
            self._trim()

    def _trim(self) -> None:
        """Spill what does not fit (between round trips: no entry is held then)."""
        for table in (self._latest, self._convs, self._records, self._parked):
            table.trim()
        self._conversations.trim()

    def _add(self, ex: Exchange, rt: RoundTrip | None) -> Turn | None:
        pos = self._pos
        self._pos += 1
        owned = rt is None
        if rt is None:
            rt = self._parse(ex)
        seq = rt.seq if rt.seq is not None else (ex.seq if ex.seq is not None else pos)
        self.last_family = rt.family
        if rt.operation != "generate" or rt.request is None or self._delivered.delivered_before(rt):
            self._side_call(seq, ex, rt)
            self._remember(seq, rt, None)
            return None
        if owned:
            self._owned.add(seq)
        self._items.resolve(rt.request.messages)
        self._items.remember(rt.response)
        label = ex.request_header(_HEADER)
        link = self._thread(rt, label, _attempt(ex))
        tid = len(self._threader.turns) - 1
        self._seq_of_tid.append(seq)
        self._remember(seq, rt, tid)
        conv = self._conversation(link, rt, label)
        parked = self._parked.get(conv.id)
        if parked is not None:  # a quiet conversation goes on: its latest turn read again
            self._unpark(parked.tid)
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
            mcp=self._mcp,
            memo=self._threader.memo,
        )
        judge(ctx, link, self._rules, self._mcp, self.result.errors)
        conv.count += 1
        conv.turns[:] = [ctx]  # the end-of-run checks look at a conversation's last turn only
        if prev is not None:
            self._release_history(prev)
        self._make_latest(conv.id, tid, pos, ctx)
        settle(ctx, self._keep_turns)
        self._conversations.record(self._records[conv.id]).turns.append(seq)
        if self._keep_turns:
            self.result.turns[seq] = turn
        elif turn.findings:
            self._flagged[seq] = (pos, turn.findings)
        return turn

    def _parse(self, ex: Exchange) -> RoundTrip:
        """``ex`` parsed (on the round trip its history delta is based on, when there is one)."""
        base_seq = (ex.history_delta or {}).get("base")
        base = self._rts.get(base_seq) if isinstance(base_seq, int) else None
        rt = parse_exchange(ex, base[0] if base is not None else None)
        if self.on_parse is not None:
            self.on_parse(rt)
        return rt

    def _previous(self, link: Link, rt: RoundTrip) -> TurnContext | None:
        """The context of the turn ``rt`` continues, if any; a poll read as a model call takes
        that turn's request's model, instructions, tools and settings (:func:`_inherit`)."""
        prev = self._context(link.previous) if link.previous is not None else None
        if rt.polled and prev is not None and prev.rt.request is not None:
            assert rt.request is not None
            _inherit(rt.request, prev.rt.request)
        return prev

    def _thread(self, rt: RoundTrip, label: str | None, attempt: Attempt) -> Link:
        """The conversation and turn this request continues (the threader's link)."""
        assert rt.request is not None
        reused = rt.reused
        base_entry = self._rts.get(reused[0]) if reused is not None else None
        return self._threader.add(
            rt.family,
            rt.request.messages,
            rt.response,
            failed(rt),
            label=label,
            previous_response_id=rt.request.previous_response_id,
            reuse=(base_entry[1], reused[1])
            if reused is not None and base_entry is not None and base_entry[1] is not None
            else None,
            system=rt.request.system,
            tools=[t.name for t in rt.request.tools if t.name],
            attempt=attempt,
        )

    def _conversation(self, link: Link, rt: RoundTrip, label: str | None) -> ConversationState:
        """The state of the conversation ``link`` names, made (with its record) on its first
        turn."""
        conv = self._convs.get(link.conversation)
        if conv is not None:
            return conv
        assert rt.request is not None
        parent = (
            self._seq_of_tid[link.parent]
            if link.parent is not None and 0 <= link.parent < len(self._seq_of_tid) - 1
            else None
        )
        first = self.first_index if parent is None else 0
        conv = self._convs[link.conversation] = ConversationState(
            link.conversation, rt.family, count=first, first=first
        )
        record = ConversationRecord(
            link.conversation,
            rt.family,
            label,
            _title(rt.request.messages),
            parent,
            link.branch if parent is not None else None,
        )
        if parent is not None and link.branch == "handoff":
            self._handed_off.add(parent)
        if parent is not None and link.branch == "group_chat":
            self._group_chat(conv, link.parent)
        self._records[link.conversation] = self._conversations.append(record)
        return conv

    def _group_chat(self, conv: ConversationState, parent: int | None) -> None:
        """Mark ``conv`` and the conversation of its parent turn as agents of one group chat (a
        parked parent keeps its state as parked: it is not marked)."""
        conv.state[GROUP_CHAT] = True
        of_parent = self.turns_conversation(parent) if parent is not None else None
        if of_parent is not None and of_parent not in self._parked:
            other = self._convs.get(of_parent)
            if other is not None:
                other.state[GROUP_CHAT] = True

    def _remember(self, seq: int, rt: RoundTrip, tid: int | None) -> None:
        self._rts[seq] = (rt, tid)
        self._rts.move_to_end(seq)
        while len(self._rts) > 4 * self._active:
            self._rts.popitem(last=False)

    def _context(self, tid: int) -> TurnContext | None:
        """The context of an earlier turn, read again if it was released."""
        ctx = self._contexts.get(tid)
        if ctx is not None or self._reload is None or not 0 <= tid < len(self._seq_of_tid):
            return ctx
        parked = self._unpark(tid)
        if parked is not None:
            return parked
        ex, rt, turn = self._reloaded(self._seq_of_tid[tid])
        assert rt.request is not None
        conv = self._convs[turn.conversation]
        msgs = rt.request.messages
        return TurnContext(turn.seq, rt, ex, conv, turn.index, None, msgs, turn, len(msgs))

    def _make_latest(self, conv: str, tid: int, pos: int, ctx: TurnContext) -> None:
        before = self._latest.get(conv)
        self._latest[conv] = (tid, pos)
        if before is not None:
            # Superseded: a later turn reaches it again only through a previous_response_id
            # (read again when possible). A fork leaves it behind without taking it as prev.
            old = (
                self._contexts.pop(before[0], None)
                if self._reload is not None
                else self._contexts.get(before[0])
            )
            if old is not None and old is not ctx.prev:
                self._release_history(old)
        self._contexts[tid] = ctx
        self._histories.pop(conv, None)
        self._histories[conv] = ctx
        while len(self._histories) > self._active:
            _, quiet = self._histories.popitem(last=False)
            self._release_history(quiet)
            if quiet is not ctx:  # (the turn being added is parked once it is settled, if ever)
                self._park(quiet)

    def _park(self, ctx: TurnContext) -> None:
        """Drop the context of a conversation's latest turn that went quiet (see the module
        docstring); kept when it cannot be read again as it stands."""
        conv, rt = ctx.conv, ctx.rt
        if (
            self._reload is None
            or ctx.prev is not None
            or failed(rt)
            or conv.turns != [ctx]
            or conv.id in self._parked
        ):
            return
        latest = self._latest.get(conv.id)
        if latest is None or self._contexts.get(latest[0]) is not ctx:
            return
        try:
            state = pickle.dumps(conv.state, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a check keeps something that does not pickle: keep the context
            return
        errors: list[str] = []
        final = [f for check in FINAL_CHECKS for f in run_check(check, conv, errors)]
        self._parked[conv.id] = _Parked(
            latest[0], ctx.seq, ctx.turn.findings, state, final or None, errors or None
        )
        del self._contexts[latest[0]]
        conv.turns = []
        conv.state = {}

    def _reloaded(self, seq: int) -> tuple[Exchange, RoundTrip, Turn]:
        """A turn's round trip read again, as the analysis first read it: a poll read as a model
        call with what it took from the call it polls (:func:`_inherit`)."""
        assert self._reload is not None
        ex, rt, turn = self._reload(seq)
        if rt.polled and rt.request is not None and turn.previous_seq is not None:
            polled = self._reload(turn.previous_seq)[1].request
            if polled is not None:
                _inherit(rt.request, polled)
        return ex, rt, turn

    def _unpark(self, tid: int) -> TurnContext | None:
        """The context of a parked conversation's latest turn, read again, as it stood when it was
        parked (history released, exchange dropped), and the conversation live again."""
        assert self._reload is not None
        conv_id = self.turns_conversation(tid)
        parked = self._parked.get(conv_id or "")
        if conv_id is None or parked is None or parked.tid != tid:
            return None
        seq = self._seq_of_tid[tid]
        _, rt, turn = self._reloaded(seq)
        assert rt.request is not None
        del self._parked[conv_id]
        conv = self._convs[conv_id]
        conv.state = pickle.loads(parked.state)  # pickled by this analyser, from its own state
        if not self._keep_turns:
            turn = slim(turn)
            turn.findings = parked.findings
        n = len(rt.request.messages)
        rt.request.messages = []  # as _release_history leaves a quiet conversation's latest turn
        rt.forget_history_base()
        ctx = TurnContext(seq, rt, NO_EXCHANGE, conv, turn.index, None, [], turn, n, mcp=self._mcp)
        conv.turns[:] = [ctx]
        self._contexts[tid] = ctx
        return ctx

    def findings_of(self, seq: int) -> list[Finding] | None:
        """With ``keep_turns`` off: the findings of the turn ``seq`` when it has some (the list the
        end-of-run checks add to), else ``None``."""
        flagged = self._flagged.get(seq)
        return flagged[1] if flagged is not None else None

    def kept(self) -> tuple[RunAnalysis, dict[int, tuple[int, list[Finding]]]]:
        """What a reader reads of a finished analysis (its result, and with ``keep_turns`` off the
        findings by turn of :meth:`findings_of`): what a kept analysis keeps of it."""
        return self.result, self._flagged

    def take(self, result: RunAnalysis, flagged: dict[int, tuple[int, list[Finding]]]) -> None:
        """Stand for a finished analysis that was kept (:meth:`kept`): nothing is added after."""
        self.result, self._flagged = result, flagged

    def turns_conversation(self, tid: int) -> str | None:
        """The conversation the threader put turn ``tid`` in."""
        turns = self._threader.turns
        return turns[tid].conversation if 0 <= tid < len(turns) else None

    def _release_history(self, ctx: TurnContext) -> None:
        """Drop a turn's parsed history, keeping its length: once the turn after it was checked
        (no check looks two turns back), or when its conversation went quiet (a continuation is
        threaded by the hashes the threader keeps, and parsed in full). A long run would otherwise
        hold one full message list per turn, or per conversation."""
        ctx.messages = []
        if ctx.seq in self._owned:
            self._owned.discard(ctx.seq)
            if ctx.rt.request is not None:
                ctx.rt.request.messages = []
                ctx.rt.forget_history_base()
        self._rts.pop(ctx.seq, None)

    def release(self) -> None:
        """Drop what only a later round trip would need (contexts, parsed histories, the threader's
        tables), once :meth:`finish` has run and nothing more will be added: the result stays."""
        self._contexts.clear()
        self._histories.clear()
        self._convs.clear()
        self._rts.clear()
        self._owned.clear()
        self._latest.clear()
        self._parked.clear()
        self._records.clear()
        self._mcp.clear()
        self._threader.close()
        self._threader = Threader(keep=self._keep)

    def finish(self) -> RunAnalysis:
        """Run the end-of-run checks and return the analysis (call once, after the last round
        trip)."""
        result = self.result
        # The latest turn of each conversation: its findings (the list end-of-run checks add to)
        # and position. Live conversations first; a parked one's as its turn comes (in order).
        last: SpillMap[int, tuple[list[Finding], int]] = SpillMap(
            self._spill, self._keep, lambda _, v: not v[0]
        )
        for conv_id, conv in list(self._convs.hot_items()):
            for ctx in conv.turns:
                last[ctx.seq] = (ctx.turn.findings, self._latest[conv_id][1])
        for conv_id in self._conversations.ids():
            for f in self._final_findings(conv_id, last):
                self._apply_final(f, last)
            last.trim()
        if self._keep_turns:
            found = [f for t in result.turns.values() for f in t.findings]
        else:
            found = [f for _, fs in sorted(self._flagged.values(), key=lambda p: p[0]) for f in fs]
        result.findings = dispatch.ordered_findings(found)
        return result

    def _final_findings(
        self, conv_id: str, last: SpillMap[int, tuple[list[Finding], int]]
    ) -> Iterable[Finding]:
        """What the end-of-run checks found on one conversation (run when it was parked, if it
        was)."""
        if conv_id in self._parked:
            parked = self._parked.peek(conv_id)  # one with findings to add to is in memory
            last[parked.seq] = (parked.findings, self._latest.peek(conv_id)[1])
            self.result.errors.extend(parked.errors or ())
            return [f for f in parked.final or () if not self._handed_over(f)]
        conv = self._convs.peek(conv_id)
        return [
            f
            for final in FINAL_CHECKS
            for f in run_check(final, conv, self.result.errors)
            if not self._handed_over(f)
        ]

    def _handed_over(self, f: Finding) -> bool:
        """``f`` says a turn's calls were left pending, but the turn handed the run to another
        agent, which went on (a ``handoff`` conversation branched from it)."""
        return f.code == "C.stopped_with_pending_calls" and f.seq in self._handed_off

    def _apply_final(self, f: Finding, last: SpillMap[int, tuple[list[Finding], int]]) -> None:
        """Add an end-of-run finding to its turn's findings."""
        target = self.result.turns.get(f.seq) if f.seq is not None else None
        latest = last.get(f.seq) if target is None and f.seq is not None else None
        findings = (
            target.findings if target is not None else (latest[0] if latest is not None else None)
        )
        if findings is None:
            return
        findings.append(f)
        findings[:] = dispatch.ordered_findings(findings)  # in place: the list its readers hold
        if (
            not self._keep_turns
            and f.seq is not None
            and f.seq not in self._flagged
            and latest is not None
        ):
            self._flagged[f.seq] = (latest[1], findings)


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
