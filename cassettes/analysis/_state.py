"""What a run's analysis holds between round trips (:class:`AnalyserState`), as plain data.

:class:`~cassettes.analysis._analyser.RunAnalyser` drives it one round trip at a time; parking a
quiet conversation (:mod:`._parking`) and the end-of-run pass (:mod:`._final_pass`) are functions
over it.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..models import Part, ToolSpec
from ..parsing import RoundTrip
from ..wire import Exchange
from ._context import ConversationState, RunRepeats, TurnContext
from ._items import Deliveries, ItemReferences
from ._mcp import McpLinker, ModelCall
from ._model import (
    Conversation,
    Dispatch,
    Finding,
    McpCall,
    RunAnalysis,
    TokenCount,
    Turn,
)
from ._records import Conversations
from ._tokens import _ConvTokens
from ._tool_http import Awaiting, Served, ToolHttpLinker
from .spill import Spill, SpillMap
from .threading import Threader

__all__ = ["AnalyserState", "Parked", "Reload", "conversation_of", "turn_findings"]

#: Given a seq analysed earlier: its exchange, its round trip and its turn, read again.
Reload = Callable[[int], tuple[Exchange, RoundTrip, Turn]]


@dataclass(slots=True)
class Parked:
    """A quiet conversation whose latest turn's context was dropped (read again if it goes on)."""

    #: The threader turn id and seq of its latest turn.
    tid: int
    seq: int
    #: That turn's findings: the list the caller holds (end-of-run checks add to it).
    findings: list[Finding]
    #: What the end-of-run checks found on it, and the errors they raised (``None``: nothing).
    final: list[Finding] | None
    errors: list[str] | None


#: Conversations' states held in memory (the live ones, referred to by their latest turn's
#: context, are held whatever their number): a quiet one's checks' memory and token sums grow
#: with its length (about 60 KB for 100 turns of a coding agent), so thousands of quiet ones
#: were most of a long run's memory (4,096 held: 80 MB at 1 GB; 256 still most of what a 1 GB
#: run's first read grew by past a 500 MB one's); past this many, the least recently used go
#: to the spill file (written once, ~1 ms each), read back if the conversation goes on.
QUIET_KEEP = 64

#: The classes the analysis' state holds in its tables and its checks' memory, by name: what its
#: spilled rows and its continued state (:mod:`._continuation`) are read back into.
CLASSES: dict[str, type] = {
    c.__qualname__: c
    for c in (
        Finding,
        McpCall,
        ModelCall,
        Awaiting,
        Served,
        Part,
        ToolSpec,
        _ConvTokens,
        Conversation,
        Parked,
    )
}
CLASSES["ConversationState"] = ConversationState


def _unreferenced(_: str, conv: ConversationState) -> bool:
    """A conversation's state no context refers to (parked): it may be spilled."""
    return not conv.turns


def _unshared(_: str, parked: Parked) -> bool:
    """A parked conversation with no list of findings shared with a caller: it may be spilled."""
    return not (parked.findings or parked.final or parked.errors)


@dataclass(slots=True, eq=False)
class AnalyserState:
    """The analyser's tables. The per-conversation ones keep their recently used entries in memory
    and the others on disk (:mod:`.spill`, in ``spill``): a conversation that went quiet costs no
    memory."""

    #: Reads an earlier turn again (``None``: every turn's context stays in memory).
    reload: Reload | None
    #: The analyser holds the turns it returns (``result.turns``); else only ``flagged``.
    keep_turns: bool
    #: How many conversations keep their latest request's parsed history (the most recent).
    active: int
    #: How many entries of each spilled table stay in memory.
    keep: int
    spill: Spill
    result: RunAnalysis
    conversations: Conversations
    threader: Threader
    mcp: McpLinker = field(default_factory=McpLinker)
    #: The model calls a tool's HTTP call may serve (cassettes.analysis._tool_http).
    tools: ToolHttpLinker = field(default_factory=ToolHttpLinker)
    repeats: RunRepeats = field(default_factory=RunRepeats)
    #: seqs of turns whose transfer call handed the run to another agent (a ``handoff``
    #: conversation branched from them): their calls are not left pending.
    handed_off: set[int] = field(default_factory=set)
    #: Side calls fed a conversation's history as rendered text whose answer no later request
    #: carried as its summary yet (their threader turn id → their conversation), the
    #: :data:`RENDERED_PENDING` most recent: when the run ends (or one leaves this table) they
    #: are another agent quoting the conversation, a ``handoff`` (:func:`settle_rendered`).
    rendered: dict[int, str] = field(default_factory=dict)
    #: How each of those asked (:func:`asks`), and how the rendered side calls a carried answer
    #: proved summarisers asked (the :data:`RENDERED_PENDING` most recent): one that asks as a
    #: proved summariser did is that summariser again, its answer carried or not (the run ended
    #: after Agno's last session summary).
    asking: dict[int, tuple[int, int]] = field(default_factory=dict)
    summarisers: OrderedDict[tuple[int, int], None] = field(default_factory=OrderedDict)
    #: A continued analysis: the seqs of turns whose conversation's kind it read again (the
    #: rendered side calls a kept analysis had settled as hand-offs): their kept views are
    #: printed anew.
    relabelled: set[int] = field(default_factory=set)
    seq_of_tid: array[int] = field(default_factory=lambda: array("q"))  # threader turn id → seq
    #: Turns a later request re-read into a conversation of their own (:mod:`._rehome`), by
    #: seq: that conversation, their index in it, whether it is its first turn (no previous).
    moved: dict[int, tuple[str, int, bool]] = field(default_factory=dict)
    #: Of those, the turns whose C layer was read again against another previous turn (a side
    #: call asked in place that joined its parent conversation, :func:`._rehome.rejoin`), with
    #: keep_turns off: its previous turn's seq, the layer and its tokens (a reader's restored
    #: turn takes them).
    reread: dict[int, tuple[int | None, Dispatch, TokenCount]] = field(default_factory=dict)
    #: Contexts a later turn may take as its previous one, by threader turn id: the latest turn
    #: of each conversation (every turn when nothing can be reloaded).
    contexts: dict[int, TurnContext] = field(default_factory=dict)
    #: Conversations whose latest turn keeps its parsed history, least recently active first.
    histories: OrderedDict[str, TurnContext] = field(default_factory=OrderedDict)
    #: Recent round trips by seq (with their threader turn id), to parse a later request against
    #: (a cassette's history delta names its base): a base that is gone is parsed in full.
    rts: OrderedDict[int, tuple[RoundTrip, int | None]] = field(default_factory=OrderedDict)
    owned: set[int] = field(default_factory=set)  # seqs of live contexts this analyser parsed
    #: keep_turns off: the findings of turns that have some (position, findings), by seq.
    flagged: dict[int, tuple[int, list[Finding]]] = field(default_factory=dict)
    #: Items of recent answers by id, for requests that refer to them instead of sending them.
    items: ItemReferences = field(default_factory=ItemReferences)
    #: Recent answers' tool calls by response id, to tell a poll that delivers them again.
    delivered: Deliveries = field(default_factory=Deliveries)
    #: The position of the next round trip added.
    pos: int = 0
    #: conversation → threader turn id and recording position of its latest turn
    latest: SpillMap[str, tuple[int, int]] = field(init=False)
    #: (a conversation's state is spilled only once no context refers to it: parked)
    convs: SpillMap[str, ConversationState] = field(init=False)
    records: SpillMap[str, int] = field(init=False)  # conversation → its record's position
    #: Quiet conversations whose latest context was dropped (:mod:`._parking`); spilled when no
    #: list of findings is shared (see :func:`._final_pass.finish`).
    parked: SpillMap[str, Parked] = field(init=False)

    def __post_init__(self) -> None:
        spill, keep = self.spill, self.keep
        self.latest = SpillMap(spill, keep)
        self.convs = SpillMap(spill, min(keep, QUIET_KEEP), _unreferenced)
        self.records = SpillMap(spill, keep)
        self.parked = SpillMap(spill, keep, _unshared)

    @classmethod
    def start(
        cls, reload: Reload | None, keep_turns: bool, active: int, keep: int
    ) -> AnalyserState:
        """The state before the first round trip."""
        spill, result = Spill(CLASSES), RunAnalysis()
        result.conversations = conversations = Conversations(spill=spill, keep=keep)
        return cls(
            reload, keep_turns, active, keep, spill, result, conversations, Threader(keep=keep)
        )


#: The rendered side calls waiting for a request to carry their answer (a summary is looked for
#: among the 64 most recent answers: docs/threading.md "Bounds").
RENDERED_PENDING = 64


def asks(state: AnalyserState, tid: int) -> tuple[int, int]:
    """How turn ``tid`` asked: the tools it offered and its last message (keys), word for word
    (Agno's ``Provide the summary of the conversation.`` after the transcript)."""
    t = state.threader.turns[tid]
    return t.tools, t.keys.key[t.length - 1] if t.keys is not None and t.length else 0


def rendered_side_call(state: AnalyserState, tid: int, conv_id: str) -> None:
    """Turn ``tid`` started ``conv_id``, a side call fed a conversation's history as rendered
    text: a summariser until a later request carries its answer (:func:`summary_carried`), else
    a hand-off; the oldest past :data:`RENDERED_PENDING` is settled as one now."""
    state.rendered[tid] = conv_id
    state.asking[tid] = asks(state, tid)
    while len(state.rendered) > RENDERED_PENDING:
        _settle(state, next(iter(state.rendered)))


def summary_carried(state: AnalyserState, tid: int) -> None:
    """A request carries turn ``tid``'s answer as its summary: a rendered side call that asked
    for it was the summariser (it stays a side call), and so is one that asks as it did."""
    if state.rendered.pop(tid, None) is None:
        return
    ask = state.asking.pop(tid, None) or asks(state, tid)
    state.summarisers[ask] = None
    state.summarisers.move_to_end(ask)
    while len(state.summarisers) > RENDERED_PENDING:
        state.summarisers.popitem(last=False)


def settle_rendered(state: AnalyserState) -> None:
    """When the run ends: every rendered side call whose answer no request carried as a summary
    was another agent quoting the conversation (a guardrail, an evaluator): a ``handoff`` under
    the same turn (issue 90: "quoting an answer in a user message is a hand-off, said as one")
    — unless it asked as a proved summariser did (:attr:`AnalyserState.summarisers`)."""
    for tid, conv_id in state.rendered.items():
        if state.asking.get(tid) not in state.summarisers:
            handed_over(state, conv_id)


def _settle(state: AnalyserState, tid: int) -> None:
    conv_id = state.rendered.pop(tid)
    if state.asking.pop(tid, None) not in state.summarisers:
        handed_over(state, conv_id)


def handed_over(state: AnalyserState, conv_id: str) -> None:
    """The conversation ``conv_id`` (a rendered side call) is a hand-off."""
    at = state.records.get(conv_id)
    if at is not None:
        state.conversations.record(at).branch = "handoff"


def conversation_of(state: AnalyserState, tid: int) -> str | None:
    """The conversation the threader put turn ``tid`` in."""
    turns = state.threader.turns
    return turns[tid].conversation if 0 <= tid < len(turns) else None


def turn_findings(state: AnalyserState, seq: int) -> list[Finding] | None:
    """The findings of the turn ``seq`` analysed earlier, the list its readers hold (``None``:
    it has none, or it is not held)."""
    if state.keep_turns:
        turn = state.result.turns.get(seq)
        return turn.findings if turn is not None else None
    held = state.flagged.get(seq)
    return held[1] if held is not None else None
