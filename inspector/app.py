"""The inspector app: a thin :class:`textual.app.App` over one :class:`inspector.screens.main.MainScreen`.

The app holds what is the terminal's and the program's, not the run's: the stylesheet and the
keys (:mod:`inspector.bindings`; they act on every screen, a modal one included, so they stay the
app's and each calls the main screen's action), the terminal's size passed to the main screen as
it changes, the command palette's commands, and the output boundary (every line drawn and every
toast goes through :mod:`inspector.safe` / :func:`cassettes.untrusted.clean`).

The run, its reading workers, the selected turn and playback are the main screen's
(:mod:`inspector.screens.main`); what each part of the screen shows is its widget's
(:mod:`inspector.widgets`). The properties at the end read the main screen's state, for tests and
for embedding.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import TabbedContent

from cassettes.untrusted import clean, clean_line
from cassettes.views.search import SearchHit
from cassettes.views.summary import TurnSummary
from inspector.bindings import APP_BINDINGS
from inspector.layout import View
from inspector.playback import Clock, Playback
from inspector.safe import UntrustedFilter
from inspector.screens.main import MainScreen
from inspector.selected import read_panes, read_turn
from inspector.source import TurnSource

__all__ = ["InspectorApp", "build_app"]


class InspectorApp(App[None]):
    """``looptap inspect``: a recorded run, turn by turn."""

    CSS_PATH = "inspector.tcss"
    TITLE = "looptap inspect"

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    def __init__(
        self, path: str | Path, *, live: bool = False, clock: Clock = time.monotonic, child_status: str | Path | None = None
    ) -> None:
        super().__init__()
        # The selected turn's reads are handed to the screen from here, where a test can hold one
        # (tests/inspector/test_messages_scroll.py: either of the two workers answers first).
        self.main = MainScreen(
            Path(path),
            live=live,
            clock=clock,
            child_status=Path(child_status) if child_status is not None else None,
            read_panes=read_panes,
            read_turn=read_turn,
        )
        self._untrusted_filter = UntrustedFilter()

    def get_default_screen(self) -> Screen[None]:
        return self.main

    def on_resize(self, event: events.Resize) -> None:
        """The layout follows the terminal's size at once (the screen gets its own resize later)."""
        if self.main.is_mounted:
            self.main.fit(event.size)

    # -- the keys: each the main screen's action ----------------------------------------------------

    def action_help(self) -> None:
        self.main.action_help()

    def action_search(self) -> None:
        self.main.action_search()

    def action_finding(self, direction: int) -> None:
        self.main.action_finding(direction)

    def action_next_conversation(self) -> None:
        self.main.action_next_conversation()

    def action_next_layer(self) -> None:
        self.main.action_next_layer()

    def action_play_pause(self) -> None:
        self.main.action_play_pause()

    def action_step(self, delta: int) -> None:
        self.main.action_step(delta)

    def action_speed(self, direction: int) -> None:
        self.main.action_speed(direction)

    def action_restream(self) -> None:
        self.main.action_restream()

    def action_next_hit(self, direction: int) -> None:
        self.main.action_next_hit(direction)

    def action_all_messages(self) -> None:
        self.main.action_all_messages()

    def action_tab(self, tab: str) -> None:
        self.main.action_tab(tab)

    def action_turn(self, delta: int) -> None:
        """``j``/``k`` from a pane (``app.turn``): the turn list moves, focus stays."""
        self.main.action_turn(delta)

    def action_focus_turns(self) -> None:
        """``esc`` from a pane (``app.focus_turns``): focus back on the turn list."""
        self.main.action_focus_turns()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.main
        yield SystemCommand("Play / pause", "Play the turns at recorded pace", main.action_play_pause)
        yield SystemCommand(
            "Next finding", "Jump to the next turn with a finding", lambda: main.action_finding(1)
        )
        yield SystemCommand(
            "Search the run", "Search text, tool calls, results, findings", main.action_search
        )
        yield SystemCommand(
            "Show the growth chart",
            "Token-cost growth of the conversation",
            lambda: main.action_tab("growth"),
        )
        yield SystemCommand(
            "Show the findings", "Every finding of the run", lambda: main.action_tab("findings")
        )
        yield SystemCommand(
            "Next conversation", "Cycle through the run's conversations", main.action_next_conversation
        )

    # -- the output boundary (inspector/safe.py) -----------------------------------------------

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the one that strips any control a widget let through."""
        return [*super().get_line_filters(), self._untrusted_filter]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Toasts carry file and wire text (problems, error messages, search queries): cleaned,
        and never read as markup, whatever the caller asks."""
        super().notify(clean(message), title=clean_line(title), severity=severity, timeout=timeout, markup=False)

    # -- the main screen's state, read (tests, embedding) ------------------------------------------

    @property
    def path(self) -> Path:
        return self.main.path

    @path.setter
    def path(self, path: Path) -> None:
        self.main.path = path

    @property
    def source(self) -> TurnSource:
        return self.main.source

    @property
    def turns(self) -> list[TurnSummary]:
        """Every turn read so far, in recording order (from the source's summaries)."""
        return self.main.index.turns

    @property
    def conv_turns(self) -> dict[str, list[int]]:
        """Each conversation's turns (seqs), in order."""
        return self.main.index.conv

    @property
    def conversation(self) -> str:
        return self.main.conversation

    @property
    def live(self) -> bool:
        return self.main.live

    @property
    def complete(self) -> bool:
        return self.main.complete

    @property
    def failed(self) -> str | None:
        return self.main.failed

    @property
    def notice(self) -> str:
        return self.main.notice

    @property
    def playback(self) -> Playback:
        return self.main.playback

    @property
    def playing(self) -> bool:
        return self.main.playing

    @property
    def speed(self) -> float:
        return self.main.speed

    @property
    def streaming(self) -> bool:
        return self.main.streaming

    @property
    def waiting(self) -> bool:
        return self.main.waiting

    @property
    def tabs(self) -> TabbedContent:
        return self.main.tabs

    @property
    def view(self) -> View:
        return self.main.turn_pane.view

    @property
    def narrow(self) -> bool:
        return self.main.narrow

    @property
    def compact(self) -> bool:
        return self.main.compact

    @property
    def _loaded(self) -> int | None:
        """The turn whose request and timeline were read (``None``: the selected one is loading)."""
        return self.main.request_of

    @property
    def _panes_of(self) -> int | None:
        """The turn whose E, A and C panes are drawn."""
        return self.main.panes_of

    @property
    def _hits(self) -> list[SearchHit]:
        return self.main.matches.hits

    def show_view(self, view: View) -> None:
        self.main.show_view(view)

    def _show_failure(self, text: str) -> None:
        self.main.show_failure(text)


def build_app(
    path: str | Path, *, live: bool = False, clock: Clock | None = None, child_status: str | Path | None = None
) -> InspectorApp:
    """The inspector for one cassette (``live``: follow a recording still being written, until the
    recorder closes the file or the file ``child_status`` holds the recorded command's exit status)."""
    return InspectorApp(path, live=live, clock=clock or time.monotonic, child_status=child_status)
