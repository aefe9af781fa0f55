"""E, the selected turn's model emission: text (re-streamed during playback), reasoning, tool calls
with their argument checks, and next to each call the result the following turn brought back."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive

from ...cassettes.analysis import CallCheck, Layer, McpCall, Turn
from ...cassettes.hints import count
from ...cassettes.models import ToolResult
from ...cassettes.untrusted import clean, clean_line
from ...cassettes.views import http_body_lines, http_call_text, shell_call_lines
from ..safe import wire
from ._layers import PANE_ITEMS, LayerPane

__all__ = ["EmissionPane", "shell_text", "tool_run_line"]

_TEXT_LIMIT = 4000


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
        self._runs: dict[str, list[McpCall]] = {}
        self._shell: dict[str, dict[str, Any]] = {}

    def show_turn(
        self,
        turn: Turn,
        results: dict[str, ToolResult] | None,
        runs: dict[str, list[McpCall]] | None = None,
        shell: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """``results``: the tool results the next turn sent, by call id (``None``: no next turn
        yet); ``runs``: the tool's side of each call, by call id (the MCP tools/call that ran it,
        the tool's HTTP calls that served it); ``shell``: the traced shell command of each call,
        by call id (``#SEQ.K`` for a call without one)."""
        self._turn = turn
        self._results = results
        self._runs = runs or {}
        self._shell = shell or {}
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
        out: list[RenderableType] = self._findings(turn.findings, "E")
        if e.reasoning:
            out.append(
                Text.assemble(
                    ("reasoning\n", "bold"), (clean(e.reasoning[:_TEXT_LIMIT]), "italic dim")
                )
            )
        if e.text:
            out.append(self._text(e.text))
        if e.refusal:
            out.append(Text.assemble(("refusal  ", "bold red"), clean(e.refusal)))
        if len(e.tool_calls) > PANE_ITEMS:
            out.append(
                Text(
                    f"… {len(e.tool_calls) - PANE_ITEMS:,} more tool "
                    f"calls not drawn (the first {PANE_ITEMS} are)",
                    style="dim italic",
                )
            )
        out.extend(self._call(call, k) for k, call in enumerate(e.tool_calls[:PANE_ITEMS]))
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
            body.append(f" … ({count(len(shown) - _TEXT_LIMIT, 'more character')})", style="dim")
        return body

    def _call(self, call: CallCheck, k: int = 0) -> Text:
        """A tool call, its argument checks, the MCP server that ran it or the tool's HTTP calls
        that served it, and its result."""
        t = Text.assemble(
            ("⚙ ", "magenta"),
            (clean_line(call.name or "?"), "bold"),
            f"({clean((call.arguments_raw or '')[:_TEXT_LIMIT])})",
            (f"  id={clean_line(call.id or '')}", "dim"),
        )
        t.append_text(_checks(call))
        runs = self._runs.get(call.id or "") or []
        for run in runs[:PANE_ITEMS]:
            t.append("\n")
            t.append_text(tool_run_line(run))
        if len(runs) > PANE_ITEMS:
            t.append(f"\n  … {len(runs) - PANE_ITEMS:,} more tool HTTP calls", style="dim")
        key = call.id or f"#{self._turn.seq if self._turn is not None else ''}.{k}"
        if key in self._shell:
            t.append("\n")
            t.append_text(shell_text(self._shell[key]))
        t.append("\n")
        t.append_text(self._result_line(call.id, call.by_server))
        return t

    def _result_line(self, call_id: str | None, by_server: bool = False) -> Text:
        if by_server:
            return Text(
                "  ↩ run by the API, which put its result in this answer: none due from the client",
                style="cyan",
            )
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
        t.append(
            " → error result: " if run.is_error else " → ", style="bold red" if run.is_error else ""
        )
        t.append_text(wire(" ".join(run.result.split())))
    else:
        t.append(" → no reply recorded", style="dim")
    return t


def shell_text(view: dict[str, Any]) -> Text:
    """A traced shell command under its call (the core's view, cassettes.views
    ``shell_call_json``, whose strings are made safe there): command, exit, output, files."""
    failed = bool(view.get("exit") or view.get("signal"))
    lines = shell_call_lines(view)
    t = Text("  ⌁ traced ", style="bold blue")
    t.append(lines[0], style="bold red" if failed else "")
    for line in lines[1:]:
        t.append("\n    ")
        t.append(line, style="dim")
    return t


def tool_run_line(run: McpCall) -> Text:
    """The tool's side of a call: the MCP server's tools/call that ran it, or a tool's HTTP call
    that served it."""
    return _mcp_line(run) if run.via == "mcp" else _http_line(run)


def _http_line(run: McpCall) -> Text:
    """A tool's HTTP call that served the call: what it sent and got (clipped, made safe)."""
    assert run.http is not None
    how = "by its arguments" if run.linked_by == "arguments" else "the only call awaiting"
    t = Text(f"  ⇄ tool http #{run.seq} ({how}) ", style="bold blue")
    t.append_text(wire(http_call_text(run.http.model_dump())))
    for line in http_body_lines(run.http.model_dump(), 160):
        t.append("\n    ")
        t.append_text(wire(" ".join(line.split())))
    return t


def part_text_result(res: ToolResult) -> Text:
    content = " ".join(res.content.split())
    return wire(content[:300] + ("…" if len(content) > 300 else ""))
