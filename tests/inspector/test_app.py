"""Pilot tests: what a user does in the inspector, and what the screen then shows."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest
from fixture_run import ANSWER, PACE
from helpers import FakeClock, Recording, loaded, pane_text, plain, until
from textual.widgets import Input, OptionList, Static, TabbedContent

from looptap.inspector.app import InspectorApp, build_app
from looptap.inspector.screens import HelpScreen, SearchScreen
from looptap.inspector.turns import ALL
from looptap.inspector.widgets import (
    ConversationSwitcher,
    EmissionPane,
    FindingsTable,
    TurnList,
    turn_line,
)

pytestmark = pytest.mark.anyio

SIZE = (160, 45)


def _selected(app: InspectorApp) -> int | None:
    return app.query_one(TurnList).selected_seq


async def test_first_screen_shows_the_turns_and_the_first_turn(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        turns = app.query_one(TurnList).turns
        assert [t.seq for t in turns] == [0, 1, 2, 3, 4]
        rows = [turn_line(t, True).plain for t in turns]
        assert rows[0].startswith("#0    c1/0    E  A  C  ")
        # the dropped result (C, an error) and the truncation (A, a warning): each count by its
        # layer
        assert "E  A¹ C¹" in rows[3]
        assert rows[0].endswith("310→40")
        assert "→2 calls" in rows[2]
        status = plain(app.query_one("#run-status", Static))
        assert "2 conversations · 5 turns · 4 findings" in status
        assert _selected(app) == 0
        messages = pane_text(app, "#messages")
        assert "▌ NEW [0] user" in messages and "What is the weather in Paris?" in messages
        e = pane_text(app, "#pane-e")
        assert "Let me look that up." in e
        assert "get_weather" in e and "arguments fit the schema" in e
        assert "next turn's result" in e and '"temp_c": 21' in e  # the result the next turn sent
        a = pane_text(app, "#pane-a")
        assert "tool_use (tool_call)" in a and "streamed, complete" in a and "in 310" in a
        assert "first token 300 ms" in a
        c = pane_text(app, "#pane-c")
        assert "start" in c and "+ [0] user" in c


async def test_navigation_moves_through_turns_and_marks_what_each_added(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("down")
        await until(pilot, lambda: app.main.reading.request_of == 1)
        messages = pane_text(app, "#messages")
        assert "3 messages" in messages and "new this turn: [1]…[2]" in messages
        assert "  [0] user" in messages  # kept from the previous turn: not marked
        assert "▌ NEW [1] assistant" in messages and "▌ NEW [2] user" in messages
        assert "↩ result for" in messages and "toolu_paris" in messages
        assert ANSWER[:30] in pane_text(app, "#pane-e")
        assert "no next turn yet" not in pane_text(app, "#pane-e")  # no tool call, no result line
        await pilot.press("G")
        assert _selected(app) == 4
        await pilot.press("g")
        assert _selected(app) == 0
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert _selected(app) == 2
        await pilot.press("left_square_bracket")
        assert _selected(app) == 1
        await pilot.press("j", "j", "k")
        assert _selected(app) == 2
        await until(pilot, lambda: app.main.reading.request_of == 2)
        e = pane_text(app, "#pane-e")
        assert "E.arguments_schema" in e and "missing required property 'city'" in e
        assert "the next turn sent no result for this call" in e  # toolu_rome was dropped
        assert "✖ schema:" in e


async def test_conversation_switching(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        turn_list = app.query_one(TurnList)
        await pilot.press("c")
        assert app.main.sidebar.conversation == "c1" and [t.seq for t in turn_list.turns] == [0, 1]
        assert turn_line(turn_list.turns[1], turn_list.show_conversation).plain.startswith(
            "#1    turn 1 "
        )
        await pilot.press("c")
        assert app.main.sidebar.conversation == "c2" and [t.seq for t in turn_list.turns] == [
            2,
            3,
            4,
        ]
        assert _selected(app) == 2
        assert app.query_one(ConversationSwitcher).value == "c2"
        await pilot.press("c")
        assert app.main.sidebar.conversation == ALL and len(turn_list.turns) == 5
        # the switcher itself
        app.query_one(ConversationSwitcher).value = "c1"
        await pilot.pause()
        assert app.main.sidebar.conversation == "c1" and [t.seq for t in turn_list.turns] == [0, 1]
        # conversations are told apart by their first user words, not only c1/c2 and the family
        labels = [str(prompt) for prompt, _ in app.query_one(ConversationSwitcher)._options]
        assert all("“" in label for label in labels[1:]), labels


async def test_jump_to_findings_by_key_and_from_the_findings_table(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        # f walks down the list to the next turn with findings (#2, #3, #4), round to the top;
        # F up, round to the bottom (issue 71 item 6; tests/inspector/test_find_next.py)
        await pilot.press("f")
        assert _selected(app) == 2
        await pilot.press("f")
        assert _selected(app) == 3
        await pilot.press("F")
        assert _selected(app) == 2
        await pilot.press("G", "f")
        assert _selected(app) == 2  # from the last: round to the top
        await pilot.press("F")
        assert _selected(app) == 4  # from the first: round to the bottom
        await pilot.press("3")
        assert app.query_one(TabbedContent).active == "findings"
        table = app.query_one(FindingsTable)
        await until(pilot, lambda: len(table.findings) == 4)
        assert [f.code for f in table.findings] == [  # as show and the HTML page list them
            "C.dropped_tool_result",
            "E.arguments_schema",
            "A.truncated_length",
            "C.truncated_treated_as_complete",
        ]
        await pilot.press("c")  # viewing c1 only: the jump must switch conversation
        assert app.main.sidebar.conversation == "c1"
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        assert app.query_one(TabbedContent).active == "turn"
        assert _selected(app) == 3
        assert 3 in [t.seq for t in app.query_one(TurnList).turns]
        await until(pilot, lambda: app.main.reading.request_of == 3)
        assert "C.dropped_tool_result" in pane_text(app, "#pane-c")
        assert "A.truncated_length" in pane_text(app, "#pane-a")


async def test_search_jumps_to_the_hit_and_n_cycles(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("slash")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"snow", "enter")
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        await until(pilot, lambda: bool(screen._hits))
        assert [(h.seq, h.where) for h in screen._hits] == [
            (3, "E text"),
            (3, "C tool result"),
            (4, "E text"),
            (4, "C appended assistant"),
        ]
        assert "4 matches for 'snow'" in plain(screen.query_one("#search-summary", Static))
        await pilot.press("down", "enter")  # the second hit (enter moved focus to the matches)
        assert not isinstance(app.screen, SearchScreen)
        assert _selected(app) == 3
        await pilot.press("n")
        assert _selected(app) == 4
        await pilot.press("n", "n")  # past the last hit: wraps to the first
        assert _selected(app) == 3
        await pilot.press("N")
        assert _selected(app) == 4


async def test_restream_reveals_the_text_at_recorded_pace(run_file: Path, clock: FakeClock) -> None:
    app = build_app(run_file, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("down")
        await until(
            pilot,
            lambda: app.main.reading.request_of == 1 and bool(app.main.player.playback.timeline),
        )
        pane = app.query_one(EmissionPane)
        await pilot.press("r")
        assert pane.reveal == 0
        # The first words arrive 0.3 s after the request, then one every PACE seconds.
        clock.advance(0.3 + 2 * PACE + PACE / 2)
        await until(pilot, lambda: pane.reveal == len("It is sunny "))
        assert pane.shown_text == "It is sunny "
        assert "▶ streaming 12/" in pane_text(app, "#pane-e")
        assert "It is sunny" in pane_text(app, "#pane-e") and "Paris today" not in pane_text(
            app, "#pane-e"
        )
        await pilot.press("plus")  # 2×: the position is kept, the rest comes twice as fast
        assert app.main.player.speed == 2.0
        clock.advance(4 * PACE / 2)
        await until(pilot, lambda: pane.reveal == len("It is sunny and 21 degrees in "))
        clock.advance(5.0)
        await until(pilot, lambda: pane.reveal is None)
        assert pane.shown_text == ANSWER
        assert "streaming" not in pane_text(app, "#pane-e")


async def test_play_steps_through_turns_and_pauses(run_file: Path, clock: FakeClock) -> None:
    app = build_app(run_file, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        pane = app.query_one(EmissionPane)
        await pilot.press("space")
        assert app.main.player.playing
        await until(pilot, lambda: pane.reveal == 0)  # turn 0 was streamed: it re-streams first
        assert "▶ playing" in plain(app.query_one("#playback", Static))
        clock.advance(10.0)
        await until(
            pilot, lambda: pane.reveal is None and app.main.player.playback.advance_at is not None
        )
        assert _selected(app) == 0
        clock.advance(1.1)  # the dwell after the text
        await until(pilot, lambda: _selected(app) == 1)
        await pilot.press("space")
        assert not app.main.player.playing and pane.reveal is None
        clock.advance(100.0)
        await pilot.pause(0.1)
        assert _selected(app) == 1
        await pilot.press("minus", "minus")
        assert app.main.player.speed == 0.25


async def test_play_pauses_at_the_end_of_the_list(run_file: Path, clock: FakeClock) -> None:
    app = build_app(run_file, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("end")
        await until(pilot, lambda: app.main.reading.request_of == 4)
        await pilot.press("space")
        assert app.main.player.playing
        for _ in range(200):  # the last turn streams (or not), dwells, then finds no next turn
            if not app.main.player.playing:
                break
            clock.advance(1.0)
            await pilot.pause(0.05)
        assert not app.main.player.playing and _selected(app) == 4
        assert app.query_one(EmissionPane).reveal is None
        assert "⏸ paused" in plain(app.query_one("#playback", Static))
        assert "end of the turn list" in plain(app.query_one("#playback", Static))


async def test_live_follow_shows_new_turns_as_the_file_grows(
    run_file: Path, tmp_path: Path
) -> None:
    lines = run_file.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    recorder = Recording(live)
    recorder.write(b"".join(lines[:3]))
    app = build_app(live, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.main.reading.index.turns) == 2)
        assert "● live" in plain(app.query_one("#run-status", Static))
        await until(pilot, lambda: app.main.reading.request_of == 0)
        assert "no next turn yet" not in pane_text(app, "#pane-e")
        half = len(lines[3]) // 2
        recorder.write(lines[3][:half])  # the recorder is mid-write: nothing new, no problem
        await pilot.pause(0.6)
        assert len(app.main.reading.index.turns) == 2 and app.main.reading.source.problems == []
        recorder.write(lines[3][half:] + lines[4])
        await until(pilot, lambda: len(app.main.reading.index.turns) == 4)
        recorder.write(lines[5])
        await until(pilot, lambda: len(app.main.reading.index.turns) == 5)
        assert [t.seq for t in app.query_one(TurnList).turns] == [0, 1, 2, 3, 4]
        assert _selected(app) == 0  # the selection stayed
        assert not app.main.reading.complete
        recorder.close()


async def test_live_follow_waits_for_the_file_and_fills_in_results(
    run_file: Path, tmp_path: Path
) -> None:
    lines = run_file.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    app = build_app(live, live=True)  # `looptap run --inspect`: the recorder has not written yet
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        assert (
            app.main.reading.failed is None
            and "waiting for live.jsonl to be created" in pane_text(app, "#messages")
        )
        with Recording(live) as recorder:
            recorder.write(lines[0])  # the header alone
            await until(pilot, lambda: "waiting for the first turn" in pane_text(app, "#messages"))
            assert app.main.reading.failed is None and "no turns yet" in pane_text(app, "#messages")
            recorder.write(lines[1])  # turn 0: its tool call has no result yet
            await until(pilot, lambda: app.main.reading.request_of == 0)
            await until(pilot, lambda: "no next turn yet" in pane_text(app, "#pane-e"))
            recorder.write(lines[2])
            await until(pilot, lambda: len(app.main.reading.index.turns) == 2)
            await until(pilot, lambda: '"temp_c": 21' in pane_text(app, "#pane-e"))


async def test_bad_files_give_a_message_on_screen(tmp_path: Path) -> None:
    yaml = tmp_path / "cassette.yaml"
    yaml.write_text("interactions:\n- request: {}\n")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(
        '{"type":"header","format":"looptap-cassette","format_version":99,"writer":"looptap 9"}\n'
    )
    # (A directory and an empty file fail the same way in the core: tests/cassettes/test_index.py.)
    cases = [
        (yaml, "not a looptap cassette", "looptap import"),
        (newer, "newer looptap", "upgrade looptap"),
        (tmp_path / "missing.jsonl", "cannot open", "No such file"),
    ]
    for path, first, second in cases:
        app = build_app(path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda app=app: app.main.reading.failed is not None)  # type: ignore[misc]
            # (as one line: where the message wraps depends on the length of the temporary path)
            text = " ".join(plain(app.query_one("#error-view", Static)).split())
            assert first in text and second in text, text
            assert app.screen.has_class("-failed")
            assert app.query_one("#error-view").display and not app.query_one("#main").display
            await pilot.press("q")
        assert app.return_code in (0, None)


async def test_truncated_file_shows_what_it_has_with_a_notice(
    run_file: Path, tmp_path: Path
) -> None:
    data = run_file.read_bytes()
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[:-300])
    app = build_app(torn)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert len(app.main.reading.index.turns) == 4
        status = plain(app.query_one("#run-status", Static))
        assert "truncated: the last record was cut off" in status and "1 problem" in status
        assert any(
            "torn last record" in n.message and n.title == "truncated file"
            for n in app._notifications
        )


async def test_help_screen_and_command_palette(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(plain(s) for s in app.screen.query(Static))
        for words in (
            "Re-stream this turn's text",
            "Jump to the next turn below with a finding",
            "ctrl+p",
            "▌ NEW",
        ):
            assert words in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert type(app.screen).__name__ == "CommandPalette"
        await pilot.press(*"growth chart")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: app.query_one(TabbedContent).active == "growth")


async def test_every_binding_is_described() -> None:
    from looptap.inspector.screens import SearchScreen
    from looptap.inspector.widgets import LayerPane, MessagesView

    for owner in (InspectorApp, TurnList, MessagesView, LayerPane, HelpScreen, SearchScreen):
        for b in owner.BINDINGS:
            assert not isinstance(b, tuple)
            assert b.description and b.tooltip and b.id, (owner, b)


async def test_tiny_and_huge_terminals(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=(60, 16)) as pilot:
        await loaded(pilot)
        for size, tiny, compact, narrow in (
            ((60, 16), True, True, False),
            ((80, 24), False, True, False),
            ((100, 30), False, False, True),
            ((320, 90), False, False, False),
            ((30, 8), True, True, False),
        ):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert app.screen.has_class("-tiny") is tiny, size
            assert app.screen.has_class("-compact") is compact, size
            assert app.screen.has_class("-narrow") is narrow, size
            await pilot.press("2", "3", "1")
        await pilot.press("down")
        assert _selected(app) == 1
        await until(pilot, lambda: app.main.reading.request_of == 1)
        assert ANSWER[:20] in pane_text(app, "#pane-e")


async def test_down_from_the_search_input_then_enter_jumps_as_the_dialog_says(
    run_file: Path,
) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"sno")
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        assert "↓: matches" in str(screen.query_one("#search-box").border_subtitle)
        await pilot.press("w", "enter")
        await until(pilot, lambda: bool(screen._hits))
        await pilot.press("slash")  # from the matches back to the query
        assert isinstance(app.focused, Input)
        # ↓ from the query moves to the matches, as the border says
        await pilot.press("down", "enter")
        assert not isinstance(app.screen, SearchScreen)
        assert _selected(app) == 3


async def test_in_the_search_dialog_n_types_and_after_enter_moves_to_the_next_match(
    run_file: Path,
) -> None:
    """Issue 43: inside the `/` dialog `n` typed into the box while the key table read as if it
    moved to the next match. In the query every key types; enter searches and moves to the
    matches, where `n`/`N` move; the help screen, the border and the docs say so."""
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"sn")
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        query = screen.query_one("#search-input", Input)
        assert query.value == "sn"  # n typed into the query
        await pilot.press(*"ow", "enter")
        await until(pilot, lambda: bool(screen._hits))
        hits = screen.query_one("#search-hits", OptionList)
        await pilot.pause()
        assert app.focused is hits  # enter moved focus to the matches
        assert hits.highlighted == 0 and "n N ↓ ↑: next/prev match" in str(
            screen.query_one("#search-box").border_subtitle
        )
        await pilot.press("n")
        assert hits.highlighted == 1 and query.value == "snow"  # the next match; nothing typed
        await pilot.press("n", "n", "n")
        assert hits.highlighted == 0  # round the end
        await pilot.press("N")
        assert hits.highlighted == 3
        await pilot.press("N", "enter")  # the third match: turn 4
        assert not isinstance(app.screen, SearchScreen) and _selected(app) == 4
        await pilot.press("n")  # the dialog closed: n jumps to the next match's turn
        assert _selected(app) == 4 and "match 4/4" in app.main.player.notice
        await pilot.press("n")
        assert _selected(app) == 3 and "match 1/4" in app.main.player.notice
        # The key table says where each n acts.
        await pilot.press("question_mark")
        help_text = " ".join(plain(s) for s in app.screen.query(Static))
        assert "Search (/): the query takes every key typed, enter searches" in help_text
        assert "In the matches (after enter): the next match" in help_text
        assert (
            "After a search (/, a query, enter; the dialog closed): jump to the next" in help_text
        )
    docs = (Path(__file__).resolve().parents[2] / "docs" / "inspector.md").read_text()
    assert (
        "In the dialog the query takes every key typed (`n` too); `enter` searches and moves to "
        "the matches, where `n` `N`" in docs
    )


async def test_a_shows_all_messages_from_wherever_focus_is(run_file: Path) -> None:
    from looptap.inspector.widgets import MessagesView

    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        messages = app.query_one(MessagesView)
        assert not messages.has_focus and messages.show_all is False
        await pilot.press("a")
        assert messages.show_all is True
        await pilot.press("a")
        assert messages.show_all is False


OPENAI_STREAM = Path(
    "/work/shared/corpus/pydantic-ai/tests/models/cassettes/test_openai/"
    "test_run_stream_sync_streams_real_model.yaml"
)


async def test_an_openai_turn_names_its_results_and_shows_its_system_prompt_once(
    tmp_path: Path,
) -> None:
    """OpenAI's tool messages carry no tool name: the result is named after the call it answers;
    a system prompt that travels in the history is shown there, not pinned above it as well."""
    import orjson

    from looptap.cassettes.recording.pipeline import CassetteWriter
    from looptap.cassettes.storage import load_vcr

    corpus = Path(__file__).resolve().parents[2] / "tests" / "corpus"
    src = (
        OPENAI_STREAM
        if OPENAI_STREAM.exists()
        else next(corpus.rglob("test_run_stream_sync_streams_real_model.yaml"), None)
    )
    if src is None:
        pytest.skip("the OpenAI streaming recording is not available")
    exchanges = load_vcr(src)
    for ex in exchanges:  # a system prompt in the history, as OpenAI clients send it
        body = orjson.loads(ex.request_body)
        body["messages"].insert(0, {"role": "system", "content": "You answer geography questions."})
        ex.request_body = orjson.dumps(body)
        ex.forget_request_json()
    path = tmp_path / "openai.jsonl"
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    app = build_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("down")
        await until(pilot, lambda: "↩ result" in pane_text(app, "#messages"))
        text = pane_text(app, "#messages")
        assert "↩ result for get_capital id=call_" in text, text
        assert text.count("You answer geography questions.") == 1, text


#: Machado, Oliveira & Fernandes (2009), severity 1.0, on linear RGB.
CVD = {
    "normal": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}


def _simulate(c: Any, m: tuple[tuple[float, ...], ...]) -> tuple[float, float, float]:
    def lin(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4

    v = (lin(c.red), lin(c.green), lin(c.blue))
    r, g, b = (max(0.0, min(1.0, sum(m[i][j] * v[j] for j in range(3)))) for i in range(3))
    return r, g, b


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = rgb
    x, y, z = (
        0.4124 * r + 0.3576 * g + 0.1805 * b,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        0.0193 * r + 0.1192 * g + 0.9505 * b,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    fx, fy, fz = f(x / 0.9505), f(y), f(z / 1.089)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


async def test_growth_segments_are_drawn_in_their_legend_colours(run_file: Path) -> None:
    """Each stacked segment's colour is its legend swatch's, and no two segments share a colour in
    16-colour, 256-colour or truecolor terminals (the issue: system drawn in history's colour)."""
    import re
    from decimal import Decimal

    from rich.color import Color, ColorSystem

    from looptap.cassettes.views import GrowthBar
    from looptap.inspector.widgets import COST_COLOUR, SERIES, GrowthChart, legend_text

    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        chart = app.query_one(GrowthChart)
        bar = GrowthBar(
            seq=0,
            turn=0,
            system=10,
            tools=10,
            history=10,
            tool_results=10,
            new=10,
            output=10,
            cumulative_cost=Decimal("0.01"),
            source="reported",
        )
        chart.show_bars([bar], "test")
        chart.plt.plotsize(40, 30)
        drawn: list[int] = []
        for line in chart.plt.build().splitlines():
            m = re.search(r"\x1b\[38;5;(\d+)m█", line)
            if m and (not drawn or drawn[-1] != int(m.group(1))):
                drawn.append(int(m.group(1)))
        drawn.reverse()  # bottom (system) first
        assert drawn == [code for _, code in SERIES]
        legend = legend_text()
        swatches = [
            span.style for span in legend.spans if legend.plain[span.start : span.end] == "\u2588"
        ]
        assert [s.color.number for s in swatches] == drawn  # type: ignore[union-attr]
        for system in (ColorSystem.STANDARD, ColorSystem.EIGHT_BIT, ColorSystem.TRUECOLOR):
            shown = [s.color.downgrade(system) for s in swatches]  # type: ignore[union-attr]
            assert len(set(shown)) == len(SERIES), system
        # What the screen really shows: Textual paints the base 16 with its theme (where bright red
        # and bright magenta are one colour), the 256-colour cube as is.
        rgb = [s.color.get_truecolor(app.ansi_theme) for s in swatches]  # type: ignore[union-attr]
        cost = Color.from_ansi(COST_COLOUR).get_truecolor(app.ansi_theme)
        for kind, matrix in CVD.items():
            seen = [_lab(_simulate(c, matrix)) for c in [*rgb, cost]]
            closest = min(math.dist(a, b) for a, b in itertools.combinations(seen, 2))
            assert closest > 10, (kind, closest)  # CIE76 ΔE: >10 tells apart at a glance


async def test_narrow_terminal_shows_the_layers_as_tabs(run_file: Path) -> None:
    """Under 120 columns E, A and C are tabs with one pane at full width (issue 16: at 100×30 the
    three panes got 2–3 lines each). The tabs say each layer's findings; a turn with a warning or an
    error in another layer brings that layer up; ``l`` and a click switch."""
    app = build_app(run_file)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert app.main.turn_pane.narrow
        shown = [p.id for p in app.query("LayerPane") if p.display]
        assert shown == ["pane-e"]
        e = app.query_one("#pane-e")
        assert e.size.width >= 50 and e.size.height >= 4, e.size  # a real pane, not a sliver
        await pilot.press("f")  # #2, the first turn below with findings: the schema violation, E's
        await until(pilot, lambda: app.main.reading.request_of == 2)
        assert app.main.turn_pane.view == "E" and "E.arguments_schema" in pane_text(app, "#pane-e")
        await pilot.press("j")  # #3: an A warning and a C error: the error's layer comes up
        await until(pilot, lambda: app.main.reading.request_of == 3)
        assert app.main.turn_pane.view == "C" and [
            p.id for p in app.query("LayerPane") if p.display
        ] == ["pane-c"]
        labels = [str(t.label) for t in app.query("#layer-tabs Tab") if t.display]
        assert labels == ["E emission ok", "A API verdict ▲1", "C client ✖1"]
        await pilot.press("l")
        assert app.main.turn_pane.view == "E"
        await pilot.click("#layer-A")
        assert app.main.turn_pane.view == "A" and [
            p.id for p in app.query("LayerPane") if p.display
        ] == ["pane-a"]
        assert "A.truncated_length" in pane_text(app, "#pane-a")
        await pilot.press("j")  # #4: only a C warning; A, shown, has none: C comes up
        await until(pilot, lambda: app.main.reading.request_of == 4)
        assert app.main.turn_pane.view == "C"
        await pilot.press("g")  # #0: no findings: the layer stays
        await until(pilot, lambda: app.main.reading.request_of == 0)
        assert app.main.turn_pane.view == "C"


async def test_wide_terminal_shows_the_three_layers_side_by_side(run_file: Path) -> None:
    app = build_app(run_file)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert not app.main.turn_pane.narrow and not app.query_one("#layer-tabs").display
        assert [p.id for p in app.query("LayerPane") if p.display] == ["pane-e", "pane-a", "pane-c"]
        await pilot.press("l")  # focuses the next pane
        assert app.focused is not None and app.focused.id == "pane-a"


async def test_the_title_bar_keeps_the_counts_whole_with_a_long_file_name(
    run_file: Path, tmp_path: Path
) -> None:
    long = tmp_path / ("an-agent-run-recorded-overnight-with-a-very-long-name-" * 3 + "end.jsonl")
    long.write_bytes(run_file.read_bytes())
    app = build_app(long)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        status = plain(app.query_one("#run-status", Static)).strip()
        assert status.endswith("│ 2 conversations · 5 turns · 4 findings"), status
        assert "…" in status and "end.jsonl │" in status  # shortened in its middle, its end kept
        assert len(status) <= 100
