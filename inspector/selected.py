"""Reading the selected turn, in thread workers: what the panes and the messages view show.

Two reads, each a message to the app: the turn restored from the store (a temp-file read, zstd,
validation) with the tool results its next turn sent back and its MCP calls (:class:`TurnShown`,
for the layer panes), and the round trip re-read in full (:class:`TurnLoaded`: its request and its
text timeline, for the messages view and playback). The main screen's workers
(:meth:`inspector.screens._reading.RunReading.load_panes`, ``load_selected``) run these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from ..cassettes.analysis import McpCall, Turn
from ..cassettes.models import NormalisedRequest, ToolResult
from ..cassettes.reading import Run
from ..cassettes.views import shell_answered, shell_by_call, shell_call_json
from ..cassettes.views.timeline import TimelinePoint, text_timeline
from .turns import TurnIndex

__all__ = ["TurnLoaded", "TurnShown", "read_panes", "read_turn"]


@dataclass
class TurnShown(Message):
    """The selected turn restored from the store, with what its next turn sent back."""

    seq: int
    turn: Turn
    results: dict[str, ToolResult] | None
    #: The tool's side of each of its calls, by call id: the MCP tools/call that ran it, the
    #: tool's HTTP calls that served it (cassettes.analysis._tool_http), in recording order.
    runs: dict[str, list[McpCall]]
    #: The same for the calls whose results this turn sent (the C pane: what the tool got beside
    #: what the client told the model), by call id.
    answered: dict[str, list[McpCall]] | None = None
    #: The shell calls ``looptap run``'s tracer linked to a process (cassettes.views
    #: ``shell_call_json``): of this turn's calls by call id (``#SEQ.K`` without one), and of the
    #: calls whose results this turn sent by the call id its pairing names.
    shell: dict[str, dict[str, Any]] | None = None
    shell_answered: dict[str, dict[str, Any]] | None = None


@dataclass
class TurnLoaded(Message):
    """The selected turn was re-read in full: its request and its text timeline."""

    seq: int
    request: NormalisedRequest | None
    timeline: list[TimelinePoint]
    #: A fork's what-if edits made in this request (cassettes.wire._edit_marks), if any.
    edits: list[dict[str, Any]] | None = None
    #: An imported round trip's provenance mark (what the trace gave, what looptap inferred).
    reconstructed: dict[str, Any] | None = None


def results_sent_back(source: Run, seq: int) -> dict[str, ToolResult]:
    """The tool results turn ``seq`` sent (those its previous turn asked for), by call id."""
    return {
        p.tool_result.call_id or "": p.tool_result
        for m in source.full_turn(seq).c.appended
        for p in m.parts
        if p.tool_result is not None
    }


def read_panes(source: Run, index: TurnIndex, seq: int) -> TurnShown | None:
    """What the layer panes show of turn ``seq`` (``None``: no such turn)."""
    turn = source.summaries.get(seq)
    if turn is None:
        return None
    nxt = index.next_seq(turn)
    full = source.full_turn(seq)
    results = results_sent_back(source, nxt) if nxt is not None else None
    answering = {pr.call_id for pr in full.c.pairings if pr.call_id}
    runs: dict[str, list[McpCall]] = {}
    answered: dict[str, list[McpCall]] = {}
    for c in source.analysis.mcp_calls.values():
        if c.call_id and c.model_seq == seq:
            runs.setdefault(c.call_id, []).append(c)
        elif c.call_id in answering and c.model_seq == full.previous_seq:
            answered.setdefault(c.call_id, []).append(c)
    shell: dict[str, dict[str, Any]] = {}
    sh = source.shell
    if sh.calls:
        shell = {key: shell_call_json(sc) for (s, key), sc in shell_by_call(sh).items() if s == seq}
    said = shell_answered(sh, seq, full.c.pairings) if sh.calls else {}
    # the shell findings rooted at this turn (C, E), which the restored turn does not hold
    mine = [f for f in sh.findings if f.seq == seq and f not in full.findings]
    if mine:
        full = full.model_copy(update={"findings": [*full.findings, *mine]})
    return TurnShown(seq, full, results, runs, answered, shell, said)


def read_turn(source: Run, seq: int) -> TurnLoaded:
    """Turn ``seq``'s request and text timeline, from its round trip read in full."""
    found = source.by_seq(seq)
    if found is None:
        raise KeyError(seq)
    ex, rt = found
    return TurnLoaded(seq, rt.request, text_timeline(ex, rt), ex.edits, ex.reconstructed)
