"""A fork's plan (cassettes.replay.forking.plan.read_plan): the cursor placed once in
``looptap run --from``'s process and handed to its replay server as one file, which the replay
server takes as it is (no second placement) and refuses in one line when it is not a plan."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.fork import ForkReplay, ForkSource, locate
from looptap.cassettes.replay.forking.placement import CursorError, parse_cursor
from looptap.cassettes.replay.forking.plan import MAX_BYTES, VERSION, PlanError, read_plan
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import tool_loop, write
from tests.support import progress
from tests.support.recorder import clean_env


def _plan(tmp_path: Path, selector: str = "turn=1", **kw: object) -> Path:
    run = write(tmp_path / "run.jsonl", tool_loop())
    fork = ForkReplay(ForkSource(run, parse_cursor(selector)), **kw)  # type: ignore[arg-type]
    path = tmp_path / "plan.json"
    fork.plan({"openai": "http://127.0.0.1:9"}).write(path)
    return path


def test_the_plan_round_trips_and_carries_the_placed_cursor(tmp_path: Path) -> None:
    path = _plan(tmp_path, model="gpt-5-mini", edits=["tool_result[call_A1]=STORM"])
    assert path.stat().st_mode & 0o077 == 0  # private
    plan = read_plan(path)
    assert plan.starts == [("c1", 1)] and plan.live == {"openai": "http://127.0.0.1:9"}
    assert plan.model == "gpt-5-mini" and [e.value for e in plan.edits] == ["STORM"]
    assert plan.recorded_values  # the edited item's recorded value, read in the parent
    assert orjson.loads(path.read_bytes())["version"] == VERSION


def test_the_replay_server_takes_the_placement_as_given(tmp_path: Path) -> None:
    """The child never places the cursor again: what the plan says is taken as it is (here a model
    of another API family, which placing refuses, and starts and recorded values of the plan's
    own), the checks made once, in the parent."""
    path = _plan(tmp_path)
    doc = orjson.loads(path.read_bytes())
    doc.update(model="claude-sonnet-4-5", starts=[["c1", 0]], recorded_values={"system": "x"})
    path.write_bytes(orjson.dumps(doc))
    cursor = read_plan(path).router(None)
    with ReplayServer(tool_loop(), cursor=cursor) as srv:
        assert srv.router is cursor and cursor.starts == {"c1": 0}
        assert cursor.recorded_values == {"system": "x"}
    with pytest.raises(CursorError, match="claude"):  # placed again, it would be refused
        ReplayServer(tool_loop(), cursor=replace(cursor, placed=False, starts={}))


@pytest.mark.parametrize("selector", ["turn=0", "turn=1", "conversation=c1:turn=1", "seq=1"])
def test_the_parent_places_the_cursor_where_the_replay_server_would(
    tmp_path: Path, selector: str
) -> None:
    """``looptap run --from`` places the cursor with plain functions over its run (no router built,
    nothing bound); ``looptap replay --cursor`` places it in its server: the same first round trip
    per conversation, and the origin's turn there."""
    run = write(tmp_path / "run.jsonl", tool_loop())
    placed = locate(ForkSource(run, parse_cursor(selector)), None, [])
    cursor = Cursor(parse_cursor(selector), live_router({}))
    with ReplayServer(str(run), cursor=cursor) as srv:
        assert placed.starts == cursor.starts and placed.starts
        turns = {
            r.conversation: r.turn for r in srv.matcher.recorded if r.seq in placed.starts.values()
        }
    assert placed.turns == turns


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"not json", "not readable as JSON"),
        (b'{"version": 99}', "not a plan of version 1"),
        (b"[1, 2]", "not a plan of version 1"),
        (None, "not a plan of version 1"),  # a field of the wrong type
        (b" " * (MAX_BYTES + 1), "larger than"),
    ],
)
def test_a_bad_plan_is_one_line(tmp_path: Path, content: bytes | None, said: str) -> None:
    path = _plan(tmp_path)
    if content is None:
        doc = orjson.loads(path.read_bytes())
        doc["starts"] = [["c1", "one"]]
        content = orjson.dumps(doc)
    path.write_bytes(content)
    with pytest.raises(PlanError, match=said):
        read_plan(path)
    proc = progress.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "replay",
            str(tmp_path / "run.jsonl"),
            "--fork-plan",
            str(path),
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and said in lines[0], proc.stderr
