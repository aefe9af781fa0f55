"""The Fork tab of a branch (a run forked with ``looptap run --from``): the origin's turns before
the cursor, the fork point, and each turn past it as the branch has it or, with ``o``, as the
origin had it; what a what-if edit rewrote and what differs, marked. Draws a
:class:`cassettes.replay.forking.forkview.ForkComparison` (the core computes it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from ...cassettes.errors import CassetteError
from ...cassettes.replay.forking.forkview import ForkComparison, ForkRow, fork_view
from ...cassettes.untrusted import clean_line
from ..safe import wire, wire_line

__all__ = ["ForkPane", "ForkRead", "read_fork"]


class ForkPane(VerticalScroll, can_focus=True):
    """A branch beside its origin."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "o",
            "toggle_side",
            "Origin/branch",
            tooltip="Past the cursor: show the origin's turns "
            "instead of the branch's (again: back)",
            id="fork.side",
        ),
    ]

    #: Which side the turns past the cursor show: ``branch`` or ``origin``.
    side: reactive[str] = reactive("branch")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: ForkComparison | None = None
        self._note = "reading the branch and its origin…"

    def compose(self) -> ComposeResult:
        yield Static(id="fork-body")

    def show_view(self, view: ForkComparison | None, note: str = "") -> None:
        self._view = view
        self._note = note
        self._draw()

    def watch_side(self) -> None:
        self._draw()

    def action_toggle_side(self) -> None:
        self.side = "origin" if self.side == "branch" else "branch"

    def _draw(self) -> None:
        body = self.query_one("#fork-body", Static)
        v = self._view
        if v is None:
            body.update(wire(self._note, style="dim italic"))
            return
        out: list[RenderableType] = [self._head(v)]
        out += [wire_line(n, style="dim") for n in v.notes]
        last = None
        for row in v.rows:
            if row.conversation != last:
                last = row.conversation
                out.append(Text(""))
                out.append(
                    Text.assemble(("conversation ", "bold"), (clean_line(row.conversation), "bold"))
                )
            out.append(self._row(row))
        body.update(Group(*out))

    def _head(self, v: ForkComparison) -> Text:
        t = Text.assemble(
            ("branch", "bold magenta"),
            " of ",
            (clean_line(v.origin_name), "bold"),
            " forked at ",
            (clean_line(v.cursor), "bold yellow"),
        )
        if v.model:
            t.append(f" · model {clean_line(v.model)}")
        if v.edits:
            t.append(f" · edited: {clean_line(', '.join(v.edits))}", style="bold yellow")
        if v.origin_path is None:
            t.append(" · origin not found", style="bold red")
        t.append(
            f" · past the cursor: {self.side} (o: {'branch' if self.side == 'origin' else 'origin'}"
            ")",
            style="cyan",
        )
        return t

    def _row(self, row: ForkRow) -> Text:
        if row.part == "fork":
            where = f"turn {row.turn}" if row.turn is not None else "its first turn"
            return Text(f"── ⑂ fork point: live from {where} ──", style="bold yellow")
        if row.part == "prefix":
            return self._prefix_row(row)
        mine = row.branch if self.side == "branch" else row.origin
        other = row.origin if self.side == "branch" else row.branch
        seq = row.branch_seq if self.side == "branch" else row.origin_seq
        t = Text("▌ ", style="bold magenta" if self.side == "branch" else "bold blue")
        t.append(f"turn {row.turn} ", style="bold")
        t.append(f"{self.side} ", style="magenta" if self.side == "branch" else "blue")
        t.append(f"#{seq}: " if seq is not None else "#-: ", style="dim")
        t.append_text(wire_line(mine or "-"))
        if mine != other:
            t.append("  ≠", style="bold red")
        self._differences(t, row)
        self._tolerated(t, row)
        return t

    def _prefix_row(self, row: ForkRow) -> Text:
        """A turn before the cursor, served from the origin."""
        t = Text("  ", style="dim")
        t.append(f"turn {row.turn if row.turn is not None else '…'} ", style="dim")
        t.append(f"origin #{row.origin_seq} " if row.origin_seq is not None else "", style="dim")
        t.append("served from the origin  ", style="dim italic")
        t.append_text(wire_line(row.origin or "", style="dim"))
        self._tolerated(t, row)
        return t

    @staticmethod
    def _differences(t: Text, row: ForkRow) -> None:
        """What a what-if edit rewrote at this turn, and what differs there (the core's lines)."""
        for e in row.edited:
            t.append("\n    ✎ EDITED ", style="bold yellow")
            t.append_text(wire_line(e))
        for d in row.divergences[:6]:
            t.append("\n    ")
            t.append_text(wire_line(d, style="red" if d.startswith("E") else "yellow"))
        if len(row.divergences) > 6:
            t.append(
                f"\n    … {len(row.divergences) - 6} more differences (looptap diff)", style="dim"
            )

    @staticmethod
    def _tolerated(t: Text, row: ForkRow) -> None:
        """What the fork's prefix mode tolerated at this turn (the core's lines, as wire text)."""
        for line in row.tolerated[:6]:
            t.append("\n    ≈ tolerated ", style="cyan")
            t.append_text(wire_line(line, style="cyan"))
        if len(row.tolerated) > 6:
            t.append(f"\n    … {len(row.tolerated) - 6} more tolerated (looptap diff)", style="dim")


@dataclass
class ForkRead(Message):
    """The run is a branch: its view beside its origin (``view`` ``None``: it could not be read,
    ``note`` says why)."""

    view: ForkComparison | None
    note: str = ""


def read_fork(path: Path) -> ForkRead | None:
    """In a thread worker: the branch beside its origin, or ``None`` when the run is no branch."""

    try:
        view = fork_view(path)
    except (CassetteError, OSError, ValueError) as exc:
        return ForkRead(None, f"the branch could not be lined up with its origin: {exc}")
    return ForkRead(view) if view is not None else None
