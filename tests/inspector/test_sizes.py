"""Issue 32, item 2: the inspector at 80×24 (a layout of its own), 100×30 and 200×60, one test per
point seen by a new user."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import loaded, pane_text, plain, until
from rich.text import Text
from textual.widgets import Static, Tab

from looptap.inspector.app import InspectorApp, build_app
from looptap.inspector.widgets import KEYS, TurnList, key_line, short_finish, turn_line

pytestmark = pytest.mark.anyio


def _tab_labels(app: InspectorApp) -> list[str]:
    return [str(t.label) for t in app.query("#layer-tabs Tab") if t.display]


def _on_screen(app: InspectorApp, widget: Tab) -> bool:
    """The widget lies wholly inside the terminal."""
    r = widget.region
    return r.width > 0 and r.x >= 0 and r.right <= app.size.width


async def test_80x24_is_a_layout_of_its_own(run_file: Path) -> None:
    """The turn list above one pane at full width; the messages are a tab beside E, A and C; every
    layer's finding count is on screen; rows keep their finish whole."""
    app = build_app(run_file)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert app.main.turn_pane.compact
        turn_list = app.query_one(TurnList)
        pane = app.query_one("#pane-e")
        assert turn_list.region.width == 80 and pane.region.width == 80  # stacked, full width
        assert turn_list.region.bottom <= pane.region.y
        assert pane.region.height >= 10  # a real pane, not a sliver
        assert not app.query_one("#conversations").display  # `c` cycles; the status counts them
        app.query_one(TurnList).select_seq(3)
        await until(pilot, lambda: app.main.reading.request_of == 3)
        labels = _tab_labels(app)
        assert [lab.split()[-1] for lab in labels] == ["Messages", "ok", "▲1", "✖1"] or labels[
            0
        ] == "Msgs", labels
        assert all(_on_screen(app, t) for t in app.query("#layer-tabs Tab") if t.display)
        rows = [turn_line(t, True, turn_list.size.width).plain for t in turn_list.turns]
        assert "max_tokens" in rows[3] and "→2 calls" in rows[2], rows


async def test_at_80x24_the_turn_list_takes_only_the_rows_it_needs_and_the_a_pane_fits(
    run_file: Path, demo_file: Path
) -> None:
    """Issue 43: at 80×24 the turn list kept a blank row (5 turns in 6 rows) and, in the demo, a
    sideways scrollbar's row, while the A pane of the turn with an A finding was cut (12 lines in
    10 rows, its latency and price out of sight)."""
    app = build_app(run_file)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        turn_list = app.query_one(TurnList)
        assert len(turn_list.seqs) == 5
        # every turn shown, no blank row
        assert turn_list.scrollable_content_region.height == len(turn_list.seqs)
        turn_list.select_seq(3)
        await until(
            pilot, lambda: app.main.reading.request_of == 3 and app.main.reading.panes_of == 3
        )
        for _ in range(4):  # l: M, E, A, C in turn (the turn's C error brought C up)
            if app.main.turn_pane.view == "A":
                break
            await pilot.press("l")
        assert app.main.turn_pane.view == "A"
        await pilot.pause()
        pane = app.query_one("#pane-a")
        body = app.query_one("#pane-a Static", Static)
        assert "A.truncated_length" in plain(body) and "price:" in plain(body)
        assert (
            pane.max_scroll_y == 0 and body.region.height <= pane.scrollable_content_region.height
        ), (body.region, pane.region)
        assert body.region.bottom <= pane.region.bottom - 1  # whole, above the pane's bottom border
        await pilot.press("c")  # one conversation (c1: two turns): the list shrinks to them
        await until(pilot, lambda: len(turn_list.seqs) == 2)
        await pilot.pause()
        assert turn_list.scrollable_content_region.height == 2
    # 11 turns: the list scrolls within its share, with no sideways scrollbar
    app = build_app(demo_file)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        turn_list = app.query_one(TurnList)
        assert not turn_list.show_horizontal_scrollbar
        assert turn_list.region.height <= 24 // 4 and turn_list.max_scroll_y > 0
        turn_list.select_seq(10)
        await pilot.pause()
        # the cursor in view
        assert (
            turn_list.scroll_offset.y
            <= 10
            < turn_list.scroll_offset.y + turn_list.scrollable_content_region.height
        )


async def test_at_100x30_a_short_layer_pane_leaves_its_rows_to_the_messages(run_file: Path) -> None:
    """The E pane takes the height of its content (no blank rows under it) and the messages the
    rest (issue 32: messages 4 lines while the E pane below had 6 blank)."""
    app = build_app(run_file)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        pane = app.query_one("#pane-e")
        body = app.query_one("#pane-e Static")
        # the content and the borders, no blank rows
        assert pane.region.height <= body.region.height + 2
        assert app.query_one("#messages").region.height > pane.region.height


async def test_a_visibly_changes_the_messages_at_every_size(run_file: Path) -> None:
    """``a`` shows every message with long parts whole; the messages header says which mode is on,
    and at 80×24 the messages tab comes up (issue 32: `a` changed nothing visible)."""
    for size in ((80, 24), (100, 30)):
        app = build_app(run_file)
        async with app.run_test(size=size) as pilot:
            await loaded(pilot)
            before = pane_text(app, "#messages")
            await pilot.press("a")
            await pilot.pause()
            assert (
                app.query_one("#messages").display and app.query_one("#messages").region.height > 3
            ), size
            after = pane_text(app, "#messages")
            assert after != before and "all, parts whole (a: fold)" in after, (size, after)


async def test_f_to_a_turn_whose_only_finding_is_in_c_shows_c(demo_file: Path) -> None:
    """Demo turn #5's only finding is a C info (the tool error #4's bad arguments caused); with E
    shown (#4's E warning, where ``f`` goes from #1), the next ``f`` lands there and must show C."""
    for size in ((80, 24), (100, 30)):
        app = build_app(demo_file)
        async with app.run_test(size=size) as pilot:
            await loaded(pilot)
            assert app.main.turn_pane.view == "E"
            app.query_one(TurnList).select_seq(1)
            await pilot.press("f")
            assert app.query_one(TurnList).selected_seq == 4
            assert app.main.turn_pane.view == "E", size
            await pilot.press("f")
            assert app.query_one(TurnList).selected_seq == 5
            assert app.main.turn_pane.view == "C", size
            assert [p.id for p in app.query("LayerPane") if p.display] == ["pane-c"]


def test_the_key_line_fits_whole_at_every_width() -> None:
    """No key and no word cut: long labels when they all fit, short ones, then fewer keys."""
    for width in (40, 60, 80, 100, 120, 160, 200):
        line = key_line(width).plain
        assert len(line) <= width, (width, line)
        entries = line.split("  ")
        known = {f"{k} {long}" for k, long, _ in KEYS} | {f"{k} {short}" for k, _, short in KEYS}
        assert all(e in known for e in entries), (width, entries)
        assert line.startswith("q quit  ? help")
    assert "^p commands" in key_line(200).plain and "space play/pause" in key_line(200).plain


async def test_the_key_line_on_screen_at_80_and_100(run_file: Path) -> None:
    for size in ((80, 24), (100, 30)):
        app = build_app(run_file)
        async with app.run_test(size=size) as pilot:
            await loaded(pilot)
            shown = plain(app.query_one("#keys", Static)).strip()
            assert shown == key_line(size[0] - 2).plain.strip()
            assert "l layer" in shown and "c conv" in shown and "f " in shown, shown


def test_a_finish_is_shortened_by_whole_words_never_mid_word() -> None:
    assert short_finish("end_turn", 20) == "end_turn"
    assert short_finish("end_turn", 5) == "end"
    assert short_finish("max_tokens", 6) == "max"
    assert short_finish("→2 calls", 4) == "→2"
    assert short_finish("HTTP 500", 4) == "500"
    assert short_finish("content_filter", 3) == ""
    for room in range(0, 16):
        for finish in ("end_turn", "max_tokens", "→12 calls", "stop_sequence", "HTTP 429"):
            out = short_finish(finish, room)
            assert len(out) <= room and (out == "" or out == finish or "…" not in out)
            words = set(finish.replace("_", " ").split(" ")) | {
                finish,
                finish.removeprefix("HTTP "),
            }
            assert out == "" or out in words, (finish, room, out)


async def test_the_turn_list_is_as_wide_as_its_rows_need(run_file: Path) -> None:
    """At 100×30 the list is wide enough for every finish whole (issue 32: fixed at 37 columns,
    `→1 ca…`, `end_t…`)."""
    app = build_app(run_file)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        turn_list = app.query_one(TurnList)
        width = turn_list.scrollable_content_region.width
        rows = [turn_line(t, True, width).plain for t in turn_list.turns]
        for row, finish in zip(
            rows, ("→1 call", "end_turn", "→2 calls", "max_tokens", "end_turn"), strict=True
        ):
            assert finish in row and "…" not in row, rows


async def test_n_and_n_show_one_short_notice_not_a_stack_of_toasts(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"weather", "enter")
        await until(pilot, lambda: bool(getattr(app.screen, "_hits", None)))
        await pilot.press("escape")
        await until(
            pilot,
            lambda: app.screen is app.screen_stack[0] and bool(app.main.matches.hits),
        )
        for key in ("n", "n", "N", "n"):
            await pilot.press(key)
        await pilot.pause()
        assert len(app._notifications) == 0  # nothing over the right column
        bar = plain(app.query_one("#playback", Static))
        assert bar.count("match ") == 1 and f"/{len(app.main.matches.hits)} for 'weather'" in bar, (
            bar
        )


async def test_at_200x60_focus_in_a_layer_pane_keeps_the_keys_working_and_says_so(
    run_file: Path,
) -> None:
    app = build_app(run_file)
    async with app.run_test(size=(200, 60)) as pilot:
        await loaded(pilot)
        await pilot.press("l")
        assert app.focused is not None and app.focused.id == "pane-a"
        assert "focus: A pane" in plain(app.query_one("#playback", Static))
        await pilot.press("j", "j")
        assert app.query_one(TurnList).selected_seq == 2
        await pilot.press("2")
        assert app.main.tabs.active == "growth"
        await pilot.press("j")
        assert app.query_one(TurnList).selected_seq == 3
        await pilot.press("1", "l", "escape")
        assert app.focused is app.query_one(TurnList)
        assert "focus:" not in plain(app.query_one("#playback", Static))


def test_new_this_turn_names_one_message_once() -> None:
    from looptap.cassettes.models import Message, NormalisedRequest, Part
    from looptap.inspector.widgets import MessagesView

    view = MessagesView()
    req = NormalisedRequest(
        family="openai", messages=[Message(role="user", parts=[Part(kind="text", text="hi")])]
    )
    view._request, view._appended_from = req, 0
    rendered: list[Text] = []

    class Body:
        def update(self, r: object) -> None:
            rendered.append(r)  # type: ignore[arg-type]

    view.query_one = lambda *a, **k: Body()  # type: ignore[method-assign,assignment]
    view._draw()
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(rendered[0])
    text = console.export_text()
    assert "new this turn: [0] " in text and "[0]…[0]" not in text
