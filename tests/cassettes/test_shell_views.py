"""Every view shows a traced shell command under the model's call that ran it (issue 93, item 2):
``show --json`` (``tool_calls[].shell``), the HTML export, ``looptap mcp``'s turn and the fleet's
``tool_calls`` rows, all from the one view the core computes (cassettes/views/_shell.py): the
command, its exit or signal, its output's start and the files it touched, recorded text made safe
(no escape or bidi character reaches a terminal raw; markup stays text). The inspector's panes:
tests/inspector/test_shell_pane.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.fleet._rows import run_rows
from looptap.cassettes.mcp.query import Runs, turn
from looptap.cassettes.reading import open_run, show_objects
from looptap.cassettes.views.report import report_data
from tests.cassettes.shell_fixture import Cmd, shell_run

#: What a hostile command prints: an OSC 52 clipboard write, a screen clear, a bidi override,
#: Rich markup and HTML.
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J[bold red]boom[/] <b>x</b> \u202eevil"
RAW = ("\x1b", "\x07", "\u202e")


def _steps() -> list[Any]:
    return [
        Cmd("pytest -q", exit=1, stdout="1 failed: test_add\n", files=[("write", "/w/.cache/x")]),
        ("write", {"path": "/w/calc.py", "content": "fixed"}, "written"),
        Cmd(
            "pytest -q && rm old.txt", exit=0, stdout="1 passed\n", files=[("remove", "/w/old.txt")]
        ),
        Cmd("cat banner.txt", exit=0, stdout=HOSTILE),
        Cmd("sleep 100", exit=None, signal="SIGKILL", stdout="", result="killed"),
    ]


@pytest.fixture
def run_path(tmp_path: Path) -> Path:
    return shell_run(tmp_path / "run.jsonl", _steps(), "Fixed; the test passes.")


def _no_raw(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for ch in RAW:
        assert ch not in text, (repr(ch), text[:400])


def _shells(path: Path) -> list[dict[str, Any]]:
    run = open_run(path, whole=True)
    return [tc["shell"] for v in show_objects(run, path) for tc in v["tool_calls"] if "shell" in tc]


def test_output_not_traced_is_said_never_shown_as_nothing(tmp_path: Path) -> None:
    """At the default level (processes only) a command's output was not seen: its line says so,
    never "printed nothing"."""
    path = shell_run(tmp_path / "run.jsonl", [Cmd("pytest -q", exit=1, output=False)], "Done.")
    (view,) = _shells(path)
    assert view["output_traced"] is False
    assert view["line"] == (
        "$ pytest -q → exit 1 · output not traced (the default; --shell-trace records it)"
    )


def test_show_json_puts_each_command_under_its_call(run_path: Path) -> None:
    shells = _shells(run_path)
    assert [s["command"] for s in shells] == [
        "pytest -q", "pytest -q && rm old.txt", "cat banner.txt", "sleep 100",
    ]  # fmt: skip
    fail, ok, hostile, killed = shells
    assert (fail["linked"], fail["exit"], fail["status"], fail["stdout"]) == (
        True, 1, "exit 1", "1 failed: test_add",
    )  # fmt: skip
    assert fail["files"] == [{"op": "write", "path": "/w/.cache/x"}]
    assert fail["line"] == "$ pytest -q → exit 1 · stdout: “1 failed: test_add”"
    assert fail["files_line"] == "files: +/w/.cache/x"
    assert ok["files"] == [{"op": "remove", "path": "/w/old.txt"}]
    assert ok["files_line"] == "files: −/w/old.txt"
    assert (killed["exit"], killed["signal"], killed["status"]) == (
        None,
        "SIGKILL",
        "killed by SIGKILL",
    )
    assert killed["line"].endswith("printed nothing")
    # the hostile output: made safe, its markup and HTML kept as text
    _no_raw(hostile)
    assert "␛]52;c;ZXZpbA==␇␛[2J[bold red]boom[/] <b>x</b> \\u202eevil" == hostile["stdout"]


def test_the_html_page_shows_them_under_their_calls(run_path: Path) -> None:
    data = report_data(open_run(run_path, whole=True))
    calls = [c for d in data["detail"].values() for c in d["layers"]["E"]["calls"]]
    shells = [c["shell"] for c in calls if "shell" in c]
    assert [s["status"] for s in shells] == ["exit 1", "exit 0", "exit 0", "killed by SIGKILL"]
    assert not any("shell" in c for c in calls if c["name"] == "write")
    _no_raw(data)
    page_js = (Path(__file__).parents[2] / "cassettes/views/report_assets/page.js").read_text()
    assert "c.shell.line" in page_js and "c.shell.files_line" in page_js  # drawn as textContent


def test_mcp_turn_gives_each_call_its_command(run_path: Path) -> None:
    got = turn(Runs([run_path.parent]), run_path.name, 0, None, None, None, 400, 20000)
    (call,) = got["recorded"]["E_emitted"]["tool_calls"]
    sh = call["shell"]
    assert (sh["command"], sh["exit"], sh["stdout"], sh["files"]) == (
        "pytest -q", 1, "1 failed: test_add", [{"op": "write", "path": "/w/.cache/x"}],
    )  # fmt: skip
    hostile = turn(Runs([run_path.parent]), run_path.name, 3, None, None, None, 400, 20000)
    _no_raw(hostile)
    written = turn(Runs([run_path.parent]), run_path.name, 1, None, None, None, 400, 20000)
    assert written["recorded"]["E_emitted"]["tool_calls"][0]["shell"] is None


def test_the_fleets_tool_call_rows_carry_them(run_path: Path) -> None:
    rows = run_rows(str(run_path)).tables["tool_calls"]
    by = {r["seq"]: r for r in rows}
    assert (by[0]["shell_command"], by[0]["shell_exit"], by[0]["shell_stdout"]) == (
        "pytest -q", 1, "1 failed: test_add",
    )  # fmt: skip
    assert by[0]["shell_written"] == ["/w/.cache/x"] and by[0]["shell_removed"] == []
    assert by[2]["shell_removed"] == ["/w/old.txt"]
    assert (by[4]["shell_exit"], by[4]["shell_signal"]) == (None, "SIGKILL")
    assert "shell_command" not in by[1]  # the write tool: no command
    _no_raw(rows)


def test_the_fleet_index_holds_them(run_path: Path, tmp_path: Path) -> None:
    from looptap.cassettes.fleet._index import connect, update

    con = connect(tmp_path / "fleet.duckdb")
    try:
        update(con, [run_path.parent])
        got = con.execute(
            "SELECT seq, shell_command, shell_exit, shell_signal, shell_written, shell_removed "
            "FROM tool_calls ORDER BY seq"
        ).fetchall()
    finally:
        con.close()
    assert got == [
        (0, "pytest -q", 1, None, ["/w/.cache/x"], []),
        (1, None, None, None, None, None),
        (2, "pytest -q && rm old.txt", 0, None, [], ["/w/old.txt"]),
        (3, "cat banner.txt", 0, None, [], []),
        (4, "sleep 100", None, "SIGKILL", [], []),
    ]
