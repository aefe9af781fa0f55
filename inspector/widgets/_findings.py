"""The findings of the run, one row each; choosing one jumps to its turn."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from ...cassettes.analysis import Finding
from ...cassettes.untrusted import clean_line
from ..badges import SEVERITY_MARK, severity_style
from ..safe import wire, wire_line

__all__ = ["FindingsTable", "FindingsView"]


class FindingsTable(DataTable[Text]):
    """Every finding of the run, root causes first (each followed by what it caused), as given."""

    @dataclass
    class FindingChosen(Message):
        """The user chose a finding: show its turn."""

        table: FindingsTable
        finding: Finding

        @property
        def control(self) -> FindingsTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        #: The rows' findings, in order.
        self.findings: list[Finding] = []

    def on_mount(self) -> None:
        self.add_columns("", "layer", "code", "turn", "message")

    def show_findings(self, findings: list[Finding]) -> None:
        """Replace the rows (attributes down); the cursor stays on the same row number."""
        if [id(f) for f in findings] == [id(f) for f in self.findings]:
            return
        row = self.cursor_row
        self.findings = list(findings)
        self.clear()
        for i, f in enumerate(self.findings):
            where = f"#{f.seq} {f.conversation}/{f.turn}"
            self.add_row(
                Text(SEVERITY_MARK[f.severity], style=severity_style(f.severity)),
                Text(f.layer, style="bold"),
                wire_line(("↳ " + f.code) if f.details.get("caused_by") else f.code),
                wire_line(where),
                wire_line(" ".join(f.message.split())),
                key=str(i),
            )
        if self.findings:
            self.move_cursor(row=min(row, len(self.findings) - 1))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.FindingChosen(self, self.findings[int(event.row_key.value)]))


class FindingsView(Vertical):
    """The findings table and, under it, the highlighted finding in full."""

    def compose(self) -> ComposeResult:
        yield FindingsTable(id="findings-table")
        yield Static(Text("no findings", style="dim italic"), id="finding-detail")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one(FindingsTable)
        key = event.row_key.value
        if key is None or not 0 <= int(key) < len(table.findings):
            return
        f = table.findings[int(key)]
        t = Text()
        t.append(
            f"{SEVERITY_MARK[f.severity]} {clean_line(f.code)}", style=severity_style(f.severity)
        )
        t.append(
            clean_line(
                f"  {f.severity.value}, layer {f.layer}, #{f.seq} {f.conversation}/turn {f.turn}"
            )
            + "\n",
            style="dim",
        )
        t.append_text(wire(f.message))
        refs = [
            f"path {f.path}" if f.path else "",
            f"tool call {f.tool_call_id}" if f.tool_call_id else "",
            f"related turn {f.related_turn}" if f.related_turn is not None else "",
        ]
        if any(refs):
            t.append("\n" + clean_line(" · ".join(r for r in refs if r)), style="dim")
        t.append("\nenter: show this turn", style="dim italic")
        self.query_one("#finding-detail", Static).update(t)
