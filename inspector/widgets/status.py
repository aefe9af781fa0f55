"""One-line bars: the run's status at the top, playback state at the bottom."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cassettes.untrusted import clean_line
from cassettes.views.view import count

__all__ = ["PlaybackBar", "RunStatus", "fit_name"]


def fit_name(name: str, room: int) -> str:
    """A file name shortened in its middle to ``room`` cells (its end, the extension, stays)."""
    if len(name) <= room:
        return name
    if room <= 1:
        return "…"[:room]
    tail = max(1, (room - 1) // 2)
    return name[: room - 1 - tail] + "…" + name[-tail:]


class RunStatus(Static):
    """File, conversations, turns, findings, reading progress and problems. The counts always show
    whole: a long file name is shortened in its middle, and a bar separates it from the counts."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._file = ""
        self._rest = Text()

    def show(
        self,
        name: str,
        conversations: int,
        turns: int,
        findings: int,
        progress: float | None,
        problems: int,
        live: bool,
        note: str = "",
    ) -> None:
        self._file = clean_line(name)
        rest = Text(" │ ", style="dim")
        rest.append(f"{count(conversations, 'conversation')} · {count(turns, 'turn')} · {count(findings, 'finding')}")
        if progress is not None:
            rest.append(f"  reading {progress:.0%}", style="bold yellow")
        if live:
            rest.append("  ● live", style="bold red")
        if problems:
            rest.append(f"  ⚠ {count(problems, 'problem')}", style="bold yellow")
        if note:
            rest.append(f"  {clean_line(note)}", style="yellow")
        self._rest = rest
        self._draw()

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
    (``#seq``, its conversation and turn), with its place in the list."""

    def show(
        self,
        playing: bool,
        speed: float,
        position: int,
        total: int,
        streaming: bool,
        label: str = "",
    ) -> None:
        t = Text()
        t.append("▶ playing" if playing else "⏸ paused", style="bold green" if playing else "bold")
        t.append(f"  speed {speed:g}×")
        if total:
            t.append(f"  {clean_line(label)}" if label else "", style="bold")
            t.append(f"  ({position + 1} of {total} listed)", style="dim")
        else:
            t.append("  no turns yet", style="dim")
        if streaming:
            t.append("  re-streaming text at recorded pace", style="yellow")
        self.update(t)
