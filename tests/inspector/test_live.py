"""Issue 32, item 3: the live view — `G` follows, `space` waits at the end, `● live` goes when
the recorder closes the file, plain `inspect` follows a recording in progress, `r` streams where it
can be seen. And the smaller items of item 6 that concern the inspector."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import FakeClock, Recording, loaded, plain, until
from textual.widgets import Static

from looptap.cassettes.storage import CassetteFile, being_written
from looptap.inspector.app import build_app
from looptap.inspector.widgets import TurnList

pytestmark = pytest.mark.anyio

SIZE = (160, 45)


def _lines(run_file: Path) -> list[bytes]:
    return run_file.read_bytes().splitlines(keepends=True)


async def test_g_follows_new_turns(run_file: Path, tmp_path: Path) -> None:
    lines = _lines(run_file)
    live = tmp_path / "live.jsonl"
    with Recording(live) as rec:
        rec.write(b"".join(lines[:3]))
        app = build_app(live, live=True)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.main.reading.index.turns) == 2)
            turns = app.query_one(TurnList)
            await pilot.press("G")
            assert turns.selected_seq == 1 and turns.following
            rec.write(lines[3])
            await until(pilot, lambda: turns.selected_seq == 2)
            bar = plain(app.query_one("#playback", Static))
            assert "following new turns" in bar and "(3/3)" in bar, bar
            await pilot.press("k")  # moving away stops following
            rec.write(lines[4])
            await until(pilot, lambda: len(app.main.reading.index.turns) == 4)
            assert turns.selected_seq == 1 and not turns.following


async def test_space_at_the_end_of_a_live_run_waits_for_the_next_turn(
    run_file: Path, tmp_path: Path, clock: FakeClock
) -> None:
    lines = _lines(run_file)
    live = tmp_path / "live.jsonl"
    with Recording(live) as rec:
        rec.write(b"".join(lines[:3]))
        app = build_app(live, live=True, clock=clock)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.main.reading.index.turns) == 2)
            await pilot.press("G")
            await until(pilot, lambda: app.main.reading.request_of == 1)
            await pilot.press("space")

            # time passes: the stream, then the dwell, then the end of the list
            def at_the_end() -> bool:
                clock.advance(5)
                return app.main.player.waiting

            await until(pilot, at_the_end)
            assert app.main.player.playing and "waiting for the next turn" in plain(
                app.query_one("#playback", Static)
            )
            rec.write(lines[3])
            await until(pilot, lambda: app.query_one(TurnList).selected_seq == 2)
            assert app.main.player.playing and not app.main.player.waiting


async def test_live_goes_when_the_recorder_closes_the_file(run_file: Path, tmp_path: Path) -> None:
    lines = _lines(run_file)
    live = tmp_path / "live.jsonl"
    rec = Recording(live)
    rec.write(b"".join(lines[:3]))
    app = build_app(live, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.main.reading.index.turns) == 2)
        assert "● live" in plain(app.query_one("#run-status", Static))
        rec.write(b"".join(lines[3:]))
        rec.close()  # the recorder exits
        await until(pilot, lambda: app.main.reading.complete)
        status = plain(app.query_one("#run-status", Static))
        assert "● live" not in status and "recording ended" in status, status
        assert len(app.main.reading.index.turns) == 5 and not app.main.reading.live


def test_a_cassette_writer_marks_its_file_as_being_written(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    assert not being_written(path)
    f = CassetteFile(path)
    assert being_written(path)
    f.close()
    assert not being_written(path)
    # a writer in another thread (the recorder's own process in real use) counts the same
    started, stop = threading.Event(), threading.Event()

    def writer() -> None:
        with CassetteFile(path):
            started.set()
            stop.wait()

    t = threading.Thread(target=writer)
    t.start()
    started.wait()
    assert being_written(path)
    stop.set()
    t.join()
    assert not being_written(path)


def test_plain_inspect_follows_a_recording_in_progress(
    run_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`looptap inspect FILE` on a file a recorder has open follows it (as `--live` does) instead of
    reading what is there and saying "no turns yet"."""
    import looptap.inspector.app
    from looptap.cassettes.cli import main

    seen: list[bool] = []

    def fake_build(path: Path, *, live: bool = False, child_status: object = None) -> object:
        seen.append(live)

        class App:
            def run(self) -> None:
                pass

        return App()

    monkeypatch.setattr(looptap.inspector.app, "build_app", fake_build)
    path = tmp_path / "rec.jsonl"
    with CassetteFile(path):
        assert main(["inspect", str(path)]) == 0
    assert main(["inspect", str(path)]) == 0
    assert main(["inspect", str(run_file)]) == 0
    assert seen == [True, False, False]


async def test_a_live_run_without_turns_says_so_and_that_it_waits(
    run_file: Path, tmp_path: Path
) -> None:
    live = tmp_path / "live.jsonl"
    with Recording(live) as rec:
        rec.write(_lines(run_file)[0])
        app = build_app(live, live=True)
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot, lambda: "no turns yet" in plain(app.query_one("#messages Static", Static))
            )
            assert "waiting for the first turn" in plain(app.query_one("#messages Static", Static))


async def test_r_in_the_narrow_layout_streams_where_it_can_be_seen(
    run_file: Path, clock: FakeClock
) -> None:
    for size in ((100, 30), (80, 24)):
        app = build_app(run_file, clock=clock)
        async with app.run_test(size=size) as pilot:
            await loaded(pilot)
            await pilot.press("down")
            await until(pilot, lambda app=app: app.main.reading.request_of == 1)  # type: ignore[misc]
            app.main.turn_pane.show_view("C")
            await pilot.press("r")
            assert app.main.player.streaming and app.main.turn_pane.view == "E", size
            assert app.query_one("#pane-e").display


def test_inspect_of_a_missing_file_fails_before_the_ui_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import looptap.inspector.app
    from looptap.cassettes.cli import main

    def no_ui(*a: object, **k: object) -> object:
        raise AssertionError("the terminal UI was started")

    monkeypatch.setattr(looptap.inspector.app, "build_app", no_ui)
    for target, why in ((tmp_path / "missing.jsonl", "No such file"), (tmp_path, "Is a directory")):
        assert main(["inspect", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot open" in err and why in err, err


async def test_a_concatenated_file_is_refused_on_screen_as_the_run_refuses_it(
    run_file: Path, tmp_path: Path
) -> None:
    """`cat a.jsonl b.jsonl`: the core refuses a second header; the inspector says what it says."""
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(run_file.read_bytes() * 2)
    app = build_app(joined)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.reading.failed is not None or app.main.reading.complete)
        assert (
            app.main.reading.failed is not None and "cassettes joined" in app.main.reading.failed
        ), app.main.reading.failed
        assert "several cassettes joined" in plain(app.query_one("#error-view", Static))


async def test_a_run_reporting_seqs_twice_shows_one_row_per_seq_and_agrees_everywhere(
    run_file: Path, tmp_path: Path
) -> None:
    """Records of one run appended again (no second header): the run reports each seq twice; the
    list, the status line and the detail pane show the same turns (issue 32: duplicate `#0`, a
    status bar disagreeing with the list, a detail pane not following `G`)."""
    lines = _lines(run_file)
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(b"".join(lines) + b"".join(lines[1:]))
    app = build_app(joined)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        turns = app.query_one(TurnList)
        seqs = [t.seq for t in turns.turns]
        assert seqs == sorted(set(seqs)) == [0, 1, 2, 3, 4]
        assert "5 turns" in plain(app.query_one("#run-status", Static))
        await pilot.press("G")
        await until(pilot, lambda: app.main.reading.request_of == 4)
        summary = app.main.reading.source.summaries[4]
        assert f"#4 {summary.conversation}/turn {summary.index}" in plain(
            app.query_one("#playback", Static)
        )
        assert any(n.title == "repeated turns" for n in app._notifications)
        convs = {app.main.reading.source.summaries[s].conversation for s in seqs}
        assert set(app.main.reading.index.conv) == convs


async def test_disk_reads_for_the_selected_turn_run_in_workers(run_file: Path) -> None:
    """Restoring a turn from the store (a temp-file read, zlib, validation) and re-reading its
    history happen off the UI thread (issue 30 item 6)."""
    app = build_app(run_file)
    threads: list[str] = []
    full_turn, roundtrip = app.main.reading.source.full_turn, app.main.reading.source.by_seq

    def spy_full(seq: int, *, remember: bool = True) -> object:
        threads.append(threading.current_thread().name)
        return full_turn(seq, remember=remember)

    def spy_rt(seq: int) -> object:
        threads.append(threading.current_thread().name)
        return roundtrip(seq)

    app.main.reading.source.full_turn = spy_full  # type: ignore[method-assign,assignment]
    app.main.reading.source.by_seq = spy_rt  # type: ignore[method-assign,assignment]
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        for key in ("j", "j", "G", "g"):
            await pilot.press(key)
        await until(pilot, lambda: app.main.reading.request_of == 0)
        app.query_one(TurnList).select_seq(3)
        await until(pilot, lambda: app.main.reading.request_of == 3)
    assert threads and threading.main_thread().name not in threads, threads


def test_the_app_holds_no_copy_of_the_turns(run_file: Path) -> None:
    """The summaries live in the reader; the app keeps seq indexes (issue 30 item 6)."""
    import ast

    source = (Path(__file__).resolve().parents[2] / "inspector" / "app.py").read_text()
    tree = ast.parse(source)
    stored = {
        t.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign | ast.Assign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    assert not stored & {"turns", "by_seq"}, stored
    assert source.count("query_one(") <= 15  # accessor properties, not a query per use


def test_growth_axis_ticks_are_whole_tokens_and_dollars() -> None:
    from looptap.inspector.widgets import dollars, nice_ticks, token_label

    assert nice_ticks(1034.2) == [0, 500, 1000, 1500]
    assert [token_label(t) for t in nice_ticks(1034.2)] == ["0", "500", "1,000", "1,500"]
    assert [token_label(t) for t in nice_ticks(48_000)] == ["0", "10k", "20k", "30k", "40k", "50k"]
    assert [dollars(t) for t in nice_ticks(0.0173)] == ["$0", "$0.005", "$0.01", "$0.015", "$0.02"]
    assert dollars(12.5) == "$12.5"


async def test_the_growth_chart_shows_whole_token_ticks_and_a_dollar_axis(demo_file: Path) -> None:
    import re

    from looptap.inspector.widgets import GrowthChart

    app = build_app(demo_file)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        app.query_one(TurnList).select_seq(6)
        await pilot.press("2")
        await pilot.pause()
        text = re.sub(r"\x1b\[[0-9;]*m", "", app.query_one(GrowthChart).plt.build())
        left = [line.split("┤")[0].strip() for line in text.splitlines() if "┤" in line]
        assert left and all(re.fullmatch(r"[\d,]+k?", t) for t in left), left
        right = [line.rsplit("├", 1)[1].strip() for line in text.splitlines() if "├" in line]
        assert right and all(t.startswith("$") for t in right), right
