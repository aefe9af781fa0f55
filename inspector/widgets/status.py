"""One-line bars: the run's status at the top, playback state at the bottom."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from cassettes.untrusted import clean_line
from cassettes.views.view import count

__all__ = ["PlayState", "PlaybackBar", "RunState", "RunStatus", "fit_name"]


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


@dataclass(frozen=True)
class PlayState:
    """What the playback line says: playing or not, the speed, the selected turn, and a notice
    (a search match, where focus is) that replaces the previous one."""

    playing: bool = False
    speed: float = 1.0
    position: int = 0
    total: int = 0
    streaming: bool = False
    label: str = ""
    #: Waiting at the end of a live recording for its next turn.
    waiting: bool = False
    #: ``G``: the cursor stays on the newest turn.
    following: bool = False
    notice: str = ""


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


class PlaybackBar(Static):
    """Playing or paused, the speed, and which turn is selected, named as everywhere else
    (``#seq``, its conversation and turn), with its place in the list; then the latest notice."""

    state: reactive[PlayState] = reactive(PlayState, layout=False)

    def watch_state(self) -> None:
        st = self.state
        t = Text(no_wrap=True, overflow="ellipsis", end="")
        if st.waiting:
            t.append("▶ waiting for the next turn", style="bold yellow")
        else:
            t.append(
                "▶ playing" if st.playing else "⏸ paused",
                style="bold green" if st.playing else "bold",
            )
        t.append(f"  {st.speed:g}×")
        if st.total:
            t.append(f"  {clean_line(st.label)}" if st.label else "", style="bold")
            t.append(f" ({st.position + 1}/{st.total})", style="dim")
        else:
            t.append("  no turns yet", style="dim")
        if st.following:
            t.append("  following new turns (G)", style="cyan")
        if st.streaming:
            t.append("  re-streaming at recorded pace", style="yellow")
        if st.notice:
            t.append(f"  │ {clean_line(st.notice)}", style="bold")
        self.update(t)
