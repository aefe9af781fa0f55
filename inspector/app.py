"""The inspector app: a thin :class:`textual.app.App` over one
:class:`inspector.screens.MainScreen`.

The app holds what is the terminal's and the program's, not the run's: the stylesheet and the
keys (:mod:`inspector.bindings`; they act on every screen, a modal one included, so they stay the
app's and each calls the main screen's action), the terminal's size passed to the main screen as
it changes, the command palette's commands, and the output boundary (every line drawn and every
toast goes through :mod:`inspector.safe` / :func:`cassettes.untrusted.clean`).

The run, its reading workers, the selected turn and playback are the main screen's
(:mod:`inspector.screens._main`); what each part of the screen shows is its widget's
(:mod:`inspector.widgets`): tests and embedders read it there (``app.main.player`` …).
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

from ..cassettes.untrusted import clean, clean_line
from .bindings import APP_BINDINGS
from .playback import Clock
from .safe import UntrustedFilter
from .screens import HelpScreen, MainScreen, key_groups

__all__ = ["InspectorApp", "build_app"]


class InspectorApp(App[None]):
    """``looptap inspect``: a recorded run, turn by turn."""

    CSS_PATH = "inspector.tcss"
    TITLE = "looptap inspect"

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    def __init__(
        self,
        path: str | Path,
        *,
        live: bool = False,
        clock: Clock = time.monotonic,
        child_status: str | Path | None = None,
    ) -> None:
        super().__init__()
        self.main = MainScreen(
            Path(path),
            live=live,
            clock=clock,
            child_status=Path(child_status) if child_status is not None else None,
        )
        self._untrusted_filter = UntrustedFilter()

    def get_default_screen(self) -> Screen[None]:
        return self.main

    def on_resize(self, event: events.Resize) -> None:
        """The layout follows the terminal's size at once (the screen gets its own resize later)."""
        if self.main.is_mounted:
            self.main.fit(event.size)

    # -- the keys: each the main screen's, or its player's or turn list's -----------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen(key_groups()))

    def action_search(self) -> None:
        self.main.search()

    def action_finding(self, direction: int) -> None:
        self.main.finding(direction)

    def action_next_conversation(self) -> None:
        self.main.sidebar.next_conversation()

    def action_next_layer(self) -> None:
        self.main.next_layer()

    def action_next_hit(self, direction: int) -> None:
        self.main.next_hit(direction)

    def action_all_messages(self) -> None:
        self.main.all_messages()

    def action_play_pause(self) -> None:
        self.main.player.play_pause()

    def action_step(self, delta: int) -> None:
        """``[``/``]``, and ``j``/``k`` from a pane (``app.step``): the turn list moves, focus
        stays."""
        self.main.turn_list.step(delta)

    def action_speed(self, direction: int) -> None:
        self.main.player.change_speed(direction)

    def action_restream(self) -> None:
        self.main.player.restream()

    def action_tab(self, tab: str) -> None:
        self.main.action_tab(tab)

    def action_focus_turns(self) -> None:
        """``esc`` from a pane (``app.focus_turns``): focus back on the turn list."""
        self.main.action_focus_turns()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main, tab = self.main, self.main.action_tab
        for title, help_text, run in (
            ("Play / pause", "Play the turns at recorded pace", main.player.play_pause),
            ("Next finding", "Jump to the next turn with a finding", lambda: main.finding(1)),
            ("Search the run", "Search text, tool calls, results, findings", main.search),
            (
                "Show the growth chart",
                "Token-cost growth of the conversation",
                lambda: tab("growth"),
            ),
            ("Show the findings", "Every finding of the run", lambda: tab("findings")),
            (
                "Next conversation",
                "Cycle through the run's conversations",
                main.sidebar.next_conversation,
            ),
        ):
            yield SystemCommand(title, help_text, run)

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
        super().notify(
            clean(message),
            title=clean_line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )


def build_app(
    path: str | Path,
    *,
    live: bool = False,
    clock: Clock | None = None,
    child_status: str | Path | None = None,
) -> InspectorApp:
    """The inspector for one cassette (``live``: follow a recording still being written, until the
    recorder closes the file or the file ``child_status`` holds the recorded command's exit
    status)."""
    return InspectorApp(path, live=live, clock=clock or time.monotonic, child_status=child_status)
