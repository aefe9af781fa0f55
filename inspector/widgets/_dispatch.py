"""C, the selected turn's client dispatch: what the client sent relative to the previous turn (kept,
rewritten, appended), how the tool results pair with the calls, tools offered and parameters."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from ...cassettes.analysis import Dispatch, Layer, McpCall, Turn
from ...cassettes.analysis.dispatch import replay_miss
from ...cassettes.hints import count
from ...cassettes.untrusted import clean_line
from ...cassettes.views import counts_said, link_text
from ..safe import wire_line
from ._emission import shell_text, tool_run_line
from ._layers import PANE_ITEMS, LayerPane
from ._messages import call_names, part_text

__all__ = ["PARAMS_LIMIT", "DispatchPane", "params_text"]

#: Longest parameters line, and longest value in it.
PARAMS_LIMIT = 300
PARAM_VALUE_LIMIT = 60


def params_text(params: dict[str, Any]) -> str:
    """Request parameters as ``name=value`` pairs, each value as compact JSON (not a Python repr),
    a long value shortened whole (``…`` inside it, never a cut mid-pair), the line bounded."""
    import orjson

    out: list[str] = []
    size = 0
    items = sorted(params.items())
    for i, (k, v) in enumerate(items):
        try:
            text = orjson.dumps(v, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            text = str(v)
        if len(text) > PARAM_VALUE_LIMIT:
            text = text[: PARAM_VALUE_LIMIT - 1] + "…"
        pair = f"{k}={text}"
        if size + len(pair) > PARAMS_LIMIT:
            out.append(f"(+{len(items) - i} more)")
            break
        out.append(pair)
        size += len(pair) + 2
    return ", ".join(out)


class DispatchPane(LayerPane):
    """C — what the client sent this turn relative to the previous one: kept, rewritten, appended,
    how the tool results pair with the calls, tools offered and parameters."""

    LAYER: Layer = "C"
    TITLE = "C · client dispatch"

    def show_turn(
        self,
        turn: Turn,
        answered: dict[str, list[McpCall]] | None = None,
        shell: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """``answered``: the tool's side of each call whose result this turn sent, by call id (the
        MCP tools/call that ran it, the tool's HTTP calls that served it); ``shell``: the traced
        shell command of each, by the call id its pairing names."""
        c = turn.c
        out: list[RenderableType] = self._findings(turn.findings, "C")
        out.extend(_miss_lines(turn))
        out.append(self._kv(_dispatch_rows(turn)))
        out.extend(_context_lines(turn))
        out.extend(_appended_lines(c))
        out.extend(_pairing_lines(c, answered or {}, shell or {}))
        self._set(out, turn)


def _dispatch_rows(turn: Turn) -> list[tuple[str, str | Text]]:
    """The C pane's table: how the turn was linked, the messages it sent (as before, changed,
    new; the previous request's dropped), where its own start, echoed, tools, params."""
    c = turn.c
    echoed = {None: "-", True: "yes", False: "NO"}[c.echoed_assistant]
    n = c.counts
    # the same words as ``show`` (the core's counts): as before + changed + new = sent
    said = counts_said(n.model_dump(), turn.previous_seq) if n is not None and turn.index else ""
    sent = n.sent if n is not None else c.appended_from + len(c.appended)
    managed = n is not None and bool(n.changed or n.dropped)
    rows: list[tuple[str, str | Text]] = [
        ("linked by", link_text(c.link, turn.previous_seq)),
        ("sent", Text(f"{count(sent, 'message')}{said}", style="bold yellow" if managed else "")),
        ("new from", f"history item [{c.appended_from}]"),
        ("echoed reply", echoed),
        ("tool choice", c.tool_choice or "-"),
        ("tools", ", ".join(c.tools_offered) or "-"),
    ]
    if c.params:
        rows.append(("params", params_text(c.params)))
    return rows


#: The words for what the client's context management did (``ContextChange.kind``).
_MANAGED = {
    "trimmed": "trimmed the history",
    "summarised": "summarised the history",
    "cleared": "cleared earlier messages in place",
}


def _context_lines(turn: Turn) -> list[RenderableType]:
    """What the client's context management did this turn (``Dispatch.context``, computed by the
    core): what it dropped, by role, the user's messages it dropped, and what replaced them."""
    cc = turn.c.context
    if cc is None:
        return []
    out: list[RenderableType] = [
        Text.assemble(
            ("✂ context managed: ", "bold magenta"),
            (f"the client {_MANAGED.get(cc.kind, cc.kind)} of #{cc.from_seq}'s request", ""),
        )
    ]
    if cc.dropped:
        roles = ", ".join(f"{n} {r}" for r, n in sorted(cc.dropped_roles.items()))
        out.append(Text(f"  dropped {count(len(cc.dropped), 'message')} ({roles})"))
    if cc.cleared:
        out.append(Text(f"  cleared {count(len(cc.cleared), 'message')} in place"))
    for said in cc.dropped_user[:PANE_ITEMS]:
        lost = said in cc.lost
        out.append(
            wire_line(
                f"  - dropped user message{' (nothing kept carries it)' if lost else ''}: {said}",
                style="bold yellow" if lost else "",
            )
        )
    if cc.summary:
        by = f", the answer of #{cc.summary_by_seq}" if cc.summary_by_seq is not None else ""
        out.append(Text(f"  replaced by a summary: history item [{cc.summary[0]}]{by}"))
    elif cc.dropped:
        out.append(Text("  replaced by nothing", style="dim"))
    return out


def _appended_lines(c: Dispatch) -> list[RenderableType]:
    """The messages this turn appended (the last :data:`PANE_ITEMS`), each part on a line."""
    names = call_names(c.appended)
    names |= {pr.call_id: pr.name for pr in c.pairings if pr.call_id and pr.name}
    out: list[RenderableType] = []
    skipped = max(0, len(c.appended) - PANE_ITEMS)
    if skipped:
        out.append(
            Text(
                f"… the first {count(skipped, 'appended message')} not drawn (the last "
                f"{PANE_ITEMS} are)",
                style="dim italic",
            )
        )
    for i, m in enumerate(c.appended[skipped:], start=skipped):
        t = Text.assemble(
            ("+ ", "bold green"), (clean_line(f"[{c.appended_from + i}] {m.role}"), "bold")
        )
        for p in m.parts:
            piece = part_text(p, names)
            piece.truncate(200, overflow="ellipsis")
            t.append("\n  ")
            t.append_text(piece)
        out.append(t)
    return out


def _pairing_lines(
    c: Dispatch, answered: dict[str, list[McpCall]], shell: dict[str, dict[str, Any]]
) -> list[RenderableType]:
    """How each tool result pairs with a call (the last :data:`PANE_ITEMS`), and under it what the
    tool did for that call (``answered``: what it got; ``shell``: the command the tracer saw, its
    exit and output), beside the result the client sent."""
    out: list[RenderableType] = []
    if len(c.pairings) > PANE_ITEMS:
        out.append(
            Text(f"… {len(c.pairings) - PANE_ITEMS:,} more pairings not drawn", style="dim italic")
        )
    for pr in c.pairings[-PANE_ITEMS:]:
        where = (
            f"turn {pr.call_turn}"
            if pr.call_turn is not None
            else ("history" if pr.in_history else "no call")
        )
        style = "red" if not pr.in_history else ("yellow" if pr.is_error else "green")
        line = wire_line(
            f"↔ result {pr.call_id} ({pr.name or '?'}) answers a call from "
            f"{where}{' · error' if pr.is_error else ''}",
            style=style,
        )
        runs = answered.get(pr.call_id or "") or []
        for run in runs[:PANE_ITEMS]:
            line.append("\n")
            line.append_text(tool_run_line(run))
        if len(runs) > PANE_ITEMS:
            line.append(f"\n  … {len(runs) - PANE_ITEMS:,} more tool calls", style="dim")
        if pr.call_id in shell:
            line.append("\n")
            line.append_text(shell_text(shell[pr.call_id]))
        out.append(line)
    return out


def _miss_lines(turn: Turn) -> list[RenderableType]:
    """A replay miss's differences (recording → this request), as the pytest failure prints them."""
    f = replay_miss(turn.findings)
    changes = (
        [x for x in (f.details.get("changes") or []) if isinstance(x, str)] if f is not None else []
    )
    if not changes:
        return []
    return [
        Text("differences (recording → this request):", style="dim"),
        *(wire_line(f"  {x}") for x in changes),
    ]
