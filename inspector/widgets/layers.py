"""The three layer panes of the selected turn: E (emission), A (API verdict), C (client dispatch)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.highlighter import ReprHighlighter
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from cassettes.analysis.dispatch.replayed import replay_miss
from cassettes.analysis.model import ApiReport, CallCheck, Dispatch, Finding, Layer, McpCall, TokenCount, Turn
from cassettes.models import ToolResult
from cassettes.untrusted import clean, clean_line
from cassettes.views.money import money
from cassettes.views.view import count, link_text
from inspector.safe import wire, wire_line
from inspector.widgets.badges import SEVERITY_MARK, severity_style, worst
from inspector.widgets.messages import part_text

__all__ = ["PANE_BINDINGS", "ApiPane", "DispatchPane", "EmissionPane", "LayerPane"]

_TEXT_LIMIT = 4000
#: Most appended messages, pairings or tool calls a pane draws for one turn (a hostile request can
#: append 100,000; the panes stayed responsive only with a bound).
PANE_ITEMS = 200


def _findings(findings: list[Finding], layer: Layer) -> list[RenderableType]:
    out: list[RenderableType] = []
    for f in findings:
        if f.layer != layer:
            continue
        t = Text()
        t.append(f"{SEVERITY_MARK[f.severity]} {clean_line(f.code)}", style=severity_style(f.severity))
        t.append(f"  {clean(f.message)}")
        if f.path:
            t.append(f"  at {clean_line(f.path)}", style="dim")
        out.append(t)
    return out


def _miss_lines(turn: Turn) -> list[RenderableType]:
    """A replay miss's differences (recording → this request), as the pytest failure prints them."""
    f = replay_miss(turn.findings)
    changes = [x for x in (f.details.get("changes") or []) if isinstance(x, str)] if f is not None else []
    if not changes:
        return []
    return [Text("differences (recording → this request):", style="dim"), *(wire_line(f"  {x}") for x in changes)]


_HIGHLIGHT = ReprHighlighter()


def _kv(rows: list[tuple[str, str | Text]]) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column()
    for k, v in rows:
        # A str cell would be read as markup: wire text goes in as Text, highlighted as Rich
        # highlights plain strings (numbers, brackets).
        table.add_row(k, v if isinstance(v, Text) else _HIGHLIGHT(wire_line(v)))
    return table


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"



def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


#: Keys of a focused pane (the layer panes and the messages): ``j``/``k`` still move the turns,
#: ``esc`` gives focus back to the turn list; the arrows scroll the pane.
PANE_BINDINGS: list[BindingType] = [
    Binding("j", "app.turn(1)", "Next turn", show=False, tooltip="Select the next turn (focus stays here)", id="pane.next_turn"),
    Binding("k", "app.turn(-1)", "Previous turn", show=False, tooltip="Select the previous turn (focus stays here)", id="pane.previous_turn"),
    Binding("escape", "app.focus_turns", "Turn list", show=False, tooltip="Focus the turn list again", id="pane.to_list"),
]


class LayerPane(VerticalScroll, can_focus=True):
    """A scrolling pane with one body; its border shows the layer and its worst finding."""

    BINDINGS: ClassVar[list[BindingType]] = PANE_BINDINGS

    LAYER: Layer = "E"
    TITLE = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = self.TITLE

    def compose(self) -> ComposeResult:
        yield Static(Text("select a turn", style="dim italic"), classes="pane-body")

    def _set(self, parts: list[RenderableType], turn: Turn | None) -> None:
        bodies = self.query(".pane-body")
        if not bodies:  # the pane is being torn down (a worker's message as the app closes)
            return
        bodies.first(Static).update(Group(*parts))
        sev = worst(turn.findings, self.LAYER) if turn is not None else None
        self.set_class(sev is not None, "-has-findings")
        n = sum(1 for f in turn.findings if f.layer == self.LAYER) if turn is not None else 0
        self.border_subtitle = (
            f"{SEVERITY_MARK[sev]} {n} finding{'s' if n != 1 else ''}" if sev is not None else "ok"
        )

    def clear(self, note: str) -> None:
        self._set([Text(note, style="dim italic")], None)


class EmissionPane(LayerPane):
    """E — what the model emitted: text (re-streamed during playback), reasoning, tool calls with
    their argument checks, and next to each call the result the following turn brought back."""

    LAYER: Layer = "E"
    TITLE = "E · model emission"

    #: Characters of the text shown while re-streaming (``None``: all of it).
    reveal: reactive[int | None] = reactive(None)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._turn: Turn | None = None
        self._results: dict[str, ToolResult] | None = None
        self._runs: dict[str, McpCall] = {}

    def show_turn(self, turn: Turn, results: dict[str, ToolResult] | None, runs: dict[str, McpCall] | None = None) -> None:
        """``results``: the tool results the next turn sent, by call id (``None``: no next turn yet);
        ``runs``: the MCP tools/call that ran each call, by call id."""
        self._turn = turn
        self._results = results
        self._runs = runs or {}
        self._draw()

    def watch_reveal(self) -> None:
        self._draw()

    @property
    def shown_text(self) -> str:
        """The emitted text as currently shown (a prefix of it while re-streaming)."""
        text = self._turn.e.text if self._turn is not None else None
        if not text:
            return ""
        return text if self.reveal is None else text[: self.reveal]

    def _draw(self) -> None:
        turn = self._turn
        if turn is None:
            return
        e = turn.e
        out: list[RenderableType] = _findings(turn.findings, "E")
        if e.reasoning:
            out.append(Text.assemble(("reasoning\n", "bold"), (clean(e.reasoning[:_TEXT_LIMIT]), "italic dim")))
        if e.text:
            out.append(self._text(e.text))
        if e.refusal:
            out.append(Text.assemble(("refusal  ", "bold red"), clean(e.refusal)))
        if len(e.tool_calls) > PANE_ITEMS:
            out.append(Text(f"… {len(e.tool_calls) - PANE_ITEMS:,} more tool calls not drawn (the first {PANE_ITEMS} are)", style="dim italic"))
        out.extend(self._call(call) for call in e.tool_calls[:PANE_ITEMS])
        if e.empty:
            out.append(Text("(empty response: no text, no tool call)", style="yellow"))
        if not out:
            out.append(Text("nothing emitted (the call failed)", style="dim italic"))
        self._set(out, turn)

    def _text(self, text: str) -> Text:
        """The emitted text as shown (while re-streaming: how far it is)."""
        shown = self.shown_text
        body = Text.assemble(("text", "bold"))
        if self.reveal is not None and self.reveal < len(text):
            body.append(f"  ▶ streaming {self.reveal:,}/{len(text):,}", style="bold yellow")
        body.append("\n")
        body.append(clean(shown[:_TEXT_LIMIT]))
        if len(shown) > _TEXT_LIMIT:
            body.append(f" … ({len(shown) - _TEXT_LIMIT:,} more characters)", style="dim")
        return body

    def _call(self, call: CallCheck) -> Text:
        """A tool call, its argument checks, the MCP server that ran it, and its result."""
        t = Text.assemble(
            ("⚙ ", "magenta"),
            (clean_line(call.name or "?"), "bold"),
            f"({clean((call.arguments_raw or '')[:_TEXT_LIMIT])})",
            (f"  id={clean_line(call.id or '')}", "dim"),
        )
        t.append_text(_checks(call))
        run = self._runs.get(call.id or "")
        if run is not None:
            t.append("\n")
            t.append_text(_mcp_line(run))
        t.append("\n")
        t.append_text(self._result_line(call.id))
        return t

    def _result_line(self, call_id: str | None) -> Text:
        if self._results is None:
            return Text("  ↩ no next turn yet: the result has not been sent", style="dim")
        res = self._results.get(call_id or "")
        if res is None:
            return Text("  ↩ the next turn sent no result for this call", style="bold red")
        head = Text("  ↩ next turn's result", style="bold cyan")
        if res.is_error:
            head.append(" (error)", style="bold red")
        head.append(": ")
        head.append_text(part_text_result(res))
        return head


def _checks(call: CallCheck) -> Text:
    """What was checked of a call's arguments: JSON, the schema, whether the tool was offered."""
    t = Text()
    if call.parse_error:
        t.append(f"\n  ✖ arguments are not JSON: {clean(call.parse_error)}", style="red")
    for err in call.schema_errors:
        t.append(f"\n  ✖ schema: {clean(err)}", style="red")
    if call.offered is False:
        t.append("\n  ✖ this tool was not offered", style="red")
    elif not call.parse_error and not call.schema_errors:
        t.append(
            "\n  ✔ arguments fit the schema" if call.offered else "\n  ✔ arguments parse",
            style="green",
        )
    return t


def _mcp_line(run: McpCall) -> Text:
    """What the MCP tool server did with a call: its round trip, and its result or error."""
    how = "" if run.linked_by == "id" else ", linked by tool and arguments"
    t = Text(f"  ⇄ MCP server #{run.seq} ran {clean_line(run.tool or '?')}{how}", style="bold blue")
    if run.error is not None:
        t.append(" → JSON-RPC error: ", style="bold red")
        t.append_text(wire(" ".join(run.error.split())[:300]))
    elif run.result is not None:
        t.append(" → error result: " if run.is_error else " → ", style="bold red" if run.is_error else "")
        t.append_text(wire(" ".join(run.result.split())))
    else:
        t.append(" → no reply recorded", style="dim")
    return t


def part_text_result(res: ToolResult) -> Text:
    content = " ".join(res.content.split())
    return wire(content[:300] + ("…" if len(content) > 300 else ""))


class ApiPane(LayerPane):
    """A — what the API reported: status, finish reason, usage and cost, timing, model, errors."""

    LAYER: Layer = "A"
    TITLE = "A · API verdict"

    def show_turn(self, turn: Turn) -> None:
        k = turn.tokens
        out: list[RenderableType] = _findings(turn.findings, "A")
        out.append(_kv(_api_rows(turn)))
        verdict = _api_verdict(turn)
        if verdict is not None:
            out.append(verdict)
        if k.price_source:
            out.append(wire_line(f"price: {k.price_source}", style="dim"))
        self._set(out, turn)


def _model_text(a: ApiReport) -> str:
    """The model that answered, and the one asked for when it differs (or only that one)."""
    model = a.model_served or "-"
    if a.model_requested and a.model_served and not a.model_served.startswith(a.model_requested):
        model = f"{a.model_served} (asked {a.model_requested})"
    elif a.model_requested and not a.model_served:
        model = f"{a.model_requested} (requested)"
    return model


def _cost_text(k: TokenCount) -> str:
    """This turn's cost and the conversation's so far (``~``: estimated; a lower bound when not
    every turn had a price)."""
    return (
        f"{money(k.cost, k.price_estimated)} · so far {money(k.cumulative_cost, k.cumulative_estimated)}"
        f"{'' if k.cost_complete in (None, True) else ' (lower bound)'}"
        f"{' (~: estimated, list price by model name)' if k.price_estimated or k.cumulative_estimated else ''}"
    )


def _api_rows(turn: Turn) -> list[tuple[str, str | Text]]:
    """The A pane's table: status, finish, stream, model, usage, cost, latency, ids, rate limits."""
    a, k = turn.a, turn.tokens
    finish = f"{a.finish_reason_raw or '-'} ({a.finish_reason.value if a.finish_reason else '-'})"
    complete = "complete" if a.complete else ("TRUNCATED" if a.complete is False else "?")
    usage = f"in {_n(k.input)} (uncached {_n(k.input_uncached)}, cache read {_n(k.cache_read)}, written {_n(k.cache_write)})"
    rows: list[tuple[str, str | Text]] = [
        (
            "status",
            Text(str(a.status or "-"), style="bold red" if (a.status or 0) >= 400 else "bold green"),
        ),
        ("finish", finish),
        ("stream", f"{'streamed' if a.stream else 'json'}, {complete}"),
        ("model", _model_text(a)),
        ("input", usage),
        ("output", f"{_n(k.output)} (reasoning {_n(k.reasoning)})  [{k.source}]"),
        ("cost", _cost_text(k)),
        ("latency", f"total {_secs(a.duration)} · headers {_secs(a.ttfb)} · first token {_secs(a.ttft)}"),
    ]
    if a.request_id:
        rows.append(("request id", a.request_id))
    for key, v in sorted(a.rate_limit.items()):
        rows.append((key, v))
    return rows


def _api_verdict(turn: Turn) -> Text | None:
    """Who answered when the API did not (looptap's replay), or the API's error."""
    if replay_miss(turn.findings) is not None:
        return Text("answered by looptap's replay, not the API: no recorded round trip matches this request "
                    "(the client's divergence: see C)", style="bold")
    err = turn.a.error
    if err is None:
        return None
    where = "error event in the stream" if err.in_stream else f"HTTP {err.status}"
    return Text.assemble(
        (f"{where}: ", "bold red"),
        clean(f"{err.type or ''} {err.code or ''} {err.message or ''}".strip()),
    )


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

    def show_turn(self, turn: Turn) -> None:
        c = turn.c
        out: list[RenderableType] = _findings(turn.findings, "C")
        out.extend(_miss_lines(turn))
        out.append(_kv(_dispatch_rows(turn)))
        out.extend(_appended_lines(c))
        out.extend(_pairing_lines(c))
        self._set(out, turn)


def _dispatch_rows(turn: Turn) -> list[tuple[str, str | Text]]:
    """The C pane's table: how the turn was linked, kept, rewritten, appended, echoed, tools, params."""
    c = turn.c
    echoed = {None: "-", True: "yes", False: "NO"}[c.echoed_assistant]
    rows: list[tuple[str, str | Text]] = [
        ("linked by", link_text(c.link, turn.previous_seq)),
        ("kept", count(c.kept, "message")),
        ("rewritten", Text(count(c.rewritten, "message"), style="bold yellow" if c.rewritten else "")),
        ("appended", f"{count(len(c.appended), 'message')} from [{c.appended_from}]"),
        ("echoed reply", echoed),
        ("tool choice", c.tool_choice or "-"),
        ("tools", ", ".join(c.tools_offered) or "-"),
    ]
    if c.params:
        rows.append(("params", params_text(c.params)))
    return rows


def _appended_lines(c: Dispatch) -> list[RenderableType]:
    """The messages this turn appended (the last :data:`PANE_ITEMS`), each part on a line."""
    names = {q.tool_call.id: q.tool_call.name for x in c.appended for q in x.parts if q.tool_call is not None and q.tool_call.id and q.tool_call.name}
    names |= {pr.call_id: pr.name for pr in c.pairings if pr.call_id and pr.name}
    out: list[RenderableType] = []
    skipped = max(0, len(c.appended) - PANE_ITEMS)
    if skipped:
        out.append(Text(f"… the first {skipped:,} appended messages not drawn (the last {PANE_ITEMS} are)", style="dim italic"))
    for i, m in enumerate(c.appended[skipped:], start=skipped):
        t = Text.assemble(("+ ", "bold green"), (clean_line(f"[{c.appended_from + i}] {m.role}"), "bold"))
        for p in m.parts:
            piece = part_text(p, names)
            piece.truncate(200, overflow="ellipsis")
            t.append("\n  ")
            t.append_text(piece)
        out.append(t)
    return out


def _pairing_lines(c: Dispatch) -> list[RenderableType]:
    """How each tool result pairs with a call (the last :data:`PANE_ITEMS`)."""
    out: list[RenderableType] = []
    if len(c.pairings) > PANE_ITEMS:
        out.append(Text(f"… {len(c.pairings) - PANE_ITEMS:,} more pairings not drawn", style="dim italic"))
    for pr in c.pairings[-PANE_ITEMS:]:
        where = (
            f"turn {pr.call_turn}"
            if pr.call_turn is not None
            else ("history" if pr.in_history else "no call")
        )
        style = "red" if not pr.in_history else ("yellow" if pr.is_error else "green")
        out.append(
            wire_line(
                f"↔ result {pr.call_id} ({pr.name or '?'}) answers a call from {where}{' · error' if pr.is_error else ''}",
                style=style,
            )
        )
    return out
