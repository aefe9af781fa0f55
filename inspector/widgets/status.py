"""One-line bars: the run's status at the top, playback state at the bottom."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cassettes.untrusted import clean_line

__all__ = ["PlaybackBar", "RunStatus"]


class RunStatus(Static):
    """File, conversations, turns, findings, reading progress and problems."""

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
        t = Text.assemble(("looptap ", "bold"), (clean_line(name), "bold cyan"))
        t.append(
            f"  {conversations} conversation{'s' if conversations != 1 else ''} · {turns} turns · {findings} findings"
        )
        if progress is not None:
            t.append(f"  reading {progress:.0%}", style="bold yellow")
        if live:
            t.append("  ● live", style="bold red")
        if problems:
            t.append(f"  ⚠ {problems} problem{'s' if problems != 1 else ''}", style="bold yellow")
        if note:
            t.append(f"  {clean_line(note)}", style="yellow")
        self.update(t)


class PlaybackBar(Static):
    """Playing or paused, the speed, and where in the list the selection is."""

    def show(self, playing: bool, speed: float, position: int, total: int, streaming: bool) -> None:
        t = Text()
        t.append("▶ playing" if playing else "⏸ paused", style="bold green" if playing else "bold")
        t.append(f"  speed {speed:g}×")
        t.append(f"  turn {position + 1 if total else 0} of {total}")
        if streaming:
            t.append("  re-streaming text at recorded pace", style="yellow")
        self.update(t)
