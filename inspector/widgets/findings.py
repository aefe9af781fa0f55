"""The findings of the run, one row each; choosing one jumps to its turn."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from cassettes.analysis.model import Finding
from inspector.widgets.badges import SEVERITY_MARK, severity_style

__all__ = ["FindingsTable"]


class FindingsTable(DataTable[str | Text]):
    """Every finding of the run (or of the conversation being viewed), in recording order."""

    class FindingChosen(Message):
        """The user chose a finding: show its turn."""

        def __init__(self, table: FindingsTable, finding: Finding) -> None:
            super().__init__()
            self.table = table
            self.finding = finding

        @property
        def control(self) -> FindingsTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._findings: list[Finding] = []

    def on_mount(self) -> None:
        self.add_columns("", "layer", "code", "turn", "message")

    @property
    def findings(self) -> list[Finding]:
        return self._findings

    def show_findings(self, findings: list[Finding]) -> None:
        """Replace the rows (attributes down); the cursor stays on the same row number."""
        if [id(f) for f in findings] == [id(f) for f in self._findings]:
            return
        row = self.cursor_row
        self._findings = list(findings)
        self.clear()
        for i, f in enumerate(self._findings):
            where = f"#{f.seq} {f.conversation}/{f.turn}"
            self.add_row(
                Text(SEVERITY_MARK[f.severity], style=severity_style(f.severity)),
                Text(f.layer, style="bold"),
                f.code,
                where,
                " ".join(f.message.split()),
                key=str(i),
            )
        if self._findings:
            self.move_cursor(row=min(row, len(self._findings) - 1))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.FindingChosen(self, self._findings[int(event.row_key.value)]))
