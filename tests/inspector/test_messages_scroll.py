"""The messages view opens on what the selected turn appended, once the layout is final.

The request (one worker) and the E, A and C panes (another) arrive in either order; the panes
take the height they need, and the messages view gets the rest, so its height, its scrollbar and
with it the body's width (and so the wrapping above the first new message) settle only when both
are on screen. The view must end on the first new message whatever the order and however slow
the machine; each order is forced here with a gate on the other worker (no sleeps)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import loaded, settled, shown, until
from textual.geometry import Region
from textual.widgets import Static

import looptap.inspector.selected as selected_module
from looptap.inspector.app import InspectorApp, build_app
from looptap.inspector.widgets import MessagesView

pytestmark = pytest.mark.anyio

NARROW = (100, 30)
SEQ = 3  # c2 turn 1: two messages before the new ones, C error (the C pane comes up, tall)


def _first_new_line(view: MessagesView) -> int:
    """The line of the body, as Textual draws it now, where the separator above the first
    ``▌ NEW`` message is: read from the drawn lines, not from the view's own bookkeeping."""
    body = view.query_one("#messages-body", Static)
    strips = body.render_lines(Region(0, 0, body.size.width, body.size.height))
    return next(i for i, s in enumerate(strips) if s.text.lstrip().startswith("▌ NEW")) - 1


def _gate(monkeypatch: pytest.MonkeyPatch, name: str) -> threading.Event:
    """Hold the worker that reads ``name`` (``read_panes`` / ``read_turn``) for turn SEQ until
    set."""
    gate = threading.Event()
    real = getattr(selected_module, name)

    def held(*args: Any) -> Any:
        if args[-1] == SEQ:
            gate.wait()
        return real(*args)

    monkeypatch.setattr(selected_module, name, held)
    return gate


async def _open(app: InspectorApp, pilot: Any, first: str, gate: threading.Event) -> MessagesView:
    await loaded(pilot)
    app.query_one("#turn-list").select_seq(SEQ)  # type: ignore[attr-defined]
    if first == "request":
        await until(pilot, lambda: app.main.reading.request_of == SEQ)
    else:
        await until(pilot, lambda: app.main.reading.panes_of == SEQ)
    for _ in range(3):  # the first of the two is laid out (and was measured) on its own
        await pilot.wait_for_scheduled_animations()
    gate.set()
    await until(pilot, lambda: shown(app, SEQ))
    await until(pilot, lambda: settled(app))
    await pilot.pause()
    return app.query_one(MessagesView)


@pytest.mark.parametrize("first", ["request", "panes"])
async def test_opens_on_the_new_messages_whichever_worker_answers_first(
    run_file: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    gate = _gate(monkeypatch, "read_panes" if first == "request" else "read_turn")
    app = build_app(run_file)
    async with app.run_test(size=NARROW) as pilot:
        view = await _open(app, pilot, first, gate)
        want = _first_new_line(view)
        assert want > 0 and view.max_scroll_y >= want, (want, view.max_scroll_y)
        assert view.scroll_y == want, (
            f"the view shows line {view.scroll_y}, the first new message is at {want}"
        )


async def test_a_user_scroll_is_kept_through_a_change_of_layout(
    run_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gate(monkeypatch, "read_panes")
    app = build_app(run_file)
    async with app.run_test(size=NARROW) as pilot:
        view = await _open(app, pilot, "request", gate)
        assert view.holding_new and view.scroll_y > 0
        view.focus()
        await pilot.press("home")  # (animated: wait for it to arrive)
        assert not view.holding_new
        await until(pilot, lambda: view.scroll_y == 0)
        await pilot.resize_terminal(104, 32)  # a new layout: the user's place is kept
        await until(pilot, lambda: app.size == (104, 32))
        await pilot.pause()
        assert view.scroll_y == 0
        await pilot.press("a")  # every message, from the first; again: back on the new ones
        assert view.show_all and view.scroll_y == 0
        await pilot.press("a")
        await until(pilot, lambda: settled(app))
        assert not view.show_all and view.holding_new and view.scroll_y == _first_new_line(view)
