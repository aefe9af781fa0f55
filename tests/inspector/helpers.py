"""Shared Pilot helpers."""

from __future__ import annotations

import io

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from inspector.app import InspectorApp


async def until(pilot: Pilot[None], condition: object, timeout: float = 30.0) -> None:
    """Let the app run until ``condition()`` holds (worker threads post their results)."""
    assert callable(condition)
    waited = 0.0
    while not condition():
        if waited > timeout:
            raise AssertionError(f"timed out waiting for {getattr(condition, '__name__', condition)}")
        await pilot.pause(0.02)
        waited += 0.02


async def loaded(pilot: Pilot[None]) -> InspectorApp:
    """Wait until the run is read, analysed and the first turn's details are on screen."""
    app = pilot.app
    assert isinstance(app, InspectorApp)
    await until(pilot, lambda: app.complete or app.failed)
    await until(pilot, lambda: app.failed or not app.turns or app._loaded is not None)
    await pilot.pause()
    return app


def plain(widget: Static) -> str:
    """The text a Static shows, without styles."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def pane_text(app: InspectorApp, selector: str) -> str:
    return plain(app.query_one(f"{selector} Static", Static))
