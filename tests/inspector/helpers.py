"""Shared Pilot helpers."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from looptap.inspector.app import InspectorApp


class FakeClock:
    """A clock the test moves by hand, for playback at recorded pace."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def until(pilot: Pilot[None], condition: object) -> None:
    """Let the app run until ``condition()`` holds (worker threads post their results). No
    wall-clock limit: hung only when the app's worker threads (and anything this test started)
    make no progress for ``progress.STALL`` seconds."""
    import os

    from tests.support.progress import Hung, Watch

    assert callable(condition)
    watch = Watch(os.getpid(), what=f"waiting for {getattr(condition, '__name__', condition)}")
    while not condition():
        try:
            watch.check()
        except Hung as exc:
            raise AssertionError(str(exc)) from None
        await pilot.pause(0.02)


async def loaded(pilot: Pilot[None]) -> InspectorApp:
    """Wait until the run is read, analysed and the first turn's details are on screen."""
    app = pilot.app
    assert isinstance(app, InspectorApp)
    await until(pilot, lambda: app.main.reading.complete or app.main.reading.failed)
    await until(
        pilot,
        lambda: (
            app.main.reading.failed
            or not app.main.reading.index.turns
            or app.main.reading.request_of is not None
        ),
    )
    await pilot.pause()
    return app


def shown(app: InspectorApp, seq: int) -> bool:
    """Turn ``seq`` is on screen: its request in the messages view and its E, A and C panes (two
    workers read them, in either order)."""
    return app.main.reading.request_of == seq and app.main.reading.panes_of == seq


def settled(app: InspectorApp) -> bool:
    """The messages view is where it stays until the user scrolls: on the selected turn's first
    new message (as far as the view scrolls), measured at the layout now on screen."""
    from looptap.inspector.widgets import MessagesView

    view = app.query_one(MessagesView)
    if not view.holding_new or not view.region:  # (not on screen: another tab is up)
        return True
    return view.scroll_y == min(view.new_offset, view.max_scroll_y)


def plain(widget: Static) -> str:
    """The text a Static shows, without styles."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def pane_text(app: InspectorApp, selector: str) -> str:
    return plain(app.query_one(f"{selector} Static", Static))


class Recording:
    """A recorder writing ``path`` as looptap's writer does (``CassetteFile``): the file is held
    open with a shared ``flock`` while recording, which is how the inspector tells a recording in
    progress from a finished file. ``close()`` is the recorder exiting."""

    def __init__(self, path: Path) -> None:
        import fcntl
        import os

        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def write(self, data: bytes) -> None:
        import os

        os.write(self._fd, data)

    def close(self) -> None:
        import os

        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
