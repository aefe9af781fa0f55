"""The run's status line, at the top (the playback line at the bottom is the player's), and why
the run cannot be shown, instead of the panes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ...cassettes.hints import count
from ...cassettes.untrusted import clean, clean_line

__all__ = ["ErrorView", "RunState", "RunStatus"]


def fit_name(name: str, room: int) -> str:
    """A file name shortened in its middle to ``room`` cells (its end, the extension, stays)."""
    if len(name) <= room:
        return name
    if room <= 1:
        return "…"[:room]
    tail = max(1, (room - 1) // 2)
    return name[: room - 1 - tail] + "…" + name[-tail:]


@dataclass(frozen=True)
class RunState:
    """What the status line says about the run."""

    name: str = ""
    conversations: int = 0
    turns: int = 0
    findings: int = 0
    #: Share of the file read (``None``: done, or following a recording).
    progress: float | None = None
    problems: int = 0
    live: bool = False
    note: str = ""


class RunStatus(Static):
    """File, conversations, turns, findings, reading progress and problems. The counts always show
    whole: a long file name is shortened in its middle, and a bar separates it from the counts."""

    state: reactive[RunState] = reactive(RunState, layout=False)

    def watch_state(self) -> None:
        st = self.state
        rest = Text(" │ ", style="dim")
        rest.append(
            f"{count(st.conversations, 'conversation')} · {count(st.turns, 'turn')} · "
            f"{count(st.findings, 'finding')}"
        )
        if st.progress is not None:
            rest.append(f"  reading {st.progress:.0%}", style="bold yellow")
        if st.live:
            rest.append("  ● live", style="bold red")
        if st.problems:
            rest.append(f"  ⚠ {count(st.problems, 'problem')}", style="bold yellow")
        if st.note:
            rest.append(f"  {clean_line(st.note)}", style="yellow")
        self._file = clean_line(st.name)
        self._rest = rest
        self._draw()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._file = ""
        self._rest = Text()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        width = self.content_region.width or 80
        head = Text("looptap ", style="bold")
        room = max(8, width - len(head) - len(self._rest.plain))
        head.append(fit_name(self._file, room), style="bold cyan")
        head.append_text(self._rest)
        head.truncate(width, overflow="ellipsis")
        self.update(head)


class ErrorView(Static):
    """Why the run cannot be shown (the screen shows it instead of the panes)."""

    def show(self, path: Path, text: str) -> None:
        hint = ""
        if "not a looptap cassette" in text:
            hint = (
                "\n\nA vcrpy / pytest-recording YAML file can "
                "be converted with `looptap import FILE`."
            )
        self.update(
            Text.assemble(
                (clean(f"Cannot inspect {path}\n\n"), "bold"),
                clean(text),
                hint,
                ("\n\nPress q to quit.", "dim"),
            )
        )
