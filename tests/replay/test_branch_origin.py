"""Issue 42, "one origin": a branch keeps its origin's digest (sha256 of the origin's bytes at the
fork) beside the name typed, its absolute path and its path relative to the branch; every reader
checks it. A changed origin is one line, not a false divergence; ``diff`` works with the two in
either order and finds a renamed origin by its digest; MCP's ``fork_diff`` looks beside the branch
as the inspector does.

The files are written here with the header a fork writes (``fork.origin_meta``);
tests/replay/test_fork.py checks the header of a real fork."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.reading import origin_of
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.replay.forking.fork import ForkSource, branch_meta, origin_meta
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.storage import CassetteFile
from tests.inspector.fork_fixture import answer_body, chat_exchange, origin, tool_call, tool_result

SYSTEM = {"role": "system", "content": "Use the weather tool."}
USER = {"role": "user", "content": "Weather in Paris, then somewhere warm?"}


def write_branch_header(path: Path, source: ForkSource) -> None:
    """Start a branch cassette with the header ``looptap run --from`` writes (ForkReplay.begin)."""
    CassetteFile(path, meta=branch_meta(source, None, [], branch=path)).close()


def _branch_exchanges() -> list:
    h1 = [
        SYSTEM,
        USER,
        tool_call("call_A1", "Paris"),
        tool_result("call_A1", "sunny, 21 C in Paris"),
    ]
    h2 = [*h1, tool_call("call_B1", "Nice"), tool_result("call_B1", "sunny, 24 C in Nice")]
    return [
        chat_exchange(h1, answer_body(None, ("call_B1", "Nice"))),
        chat_exchange(h2, answer_body("Go to Nice.")),
    ]


def write_pair(folder: Path, typed: str | None = None) -> tuple[Path, Path]:
    """``run.jsonl`` and ``branch.jsonl`` forked from it at turn=1 (``typed``: the origin's name
    as the user typed it at the fork, relative to where they were)."""
    folder.mkdir(parents=True, exist_ok=True)
    run, branch = folder / "run.jsonl", folder / "branch.jsonl"
    with CassetteWriter(run) as w:
        for ex in origin():
            w.append(ex)
    meta = origin_meta(
        ForkSource(run, parse_cursor("turn=1")), None, {"c1": 1}, [], {"c1": 1}, branch
    )
    if typed is not None:
        meta["run"] = typed
    with CassetteWriter(branch, meta={"source": "looptap run --from", "origin": meta}) as w:
        for ex in _branch_exchanges():
            w.append(ex)
    return run, branch


def _replace_origin(run: Path) -> None:
    """Another run written over the origin: at turn 0 the model asked about Lyon."""
    exs = origin()
    exs[0] = chat_exchange([SYSTEM, USER], answer_body(None, ("call_A1", "Lyon")))
    run.unlink()
    with CassetteWriter(run) as w:
        for ex in exs:
            w.append(ex)


def test_the_branch_header_keeps_the_origins_digest_and_paths(tmp_path: Path) -> None:
    import hashlib

    run, _ = write_pair(tmp_path)
    branch = tmp_path / "new-branch.jsonl"
    # as looptap run --from begins it
    write_branch_header(branch, ForkSource(run, parse_cursor("turn=1")))
    o = origin_of(branch)
    assert o is not None
    assert o["sha256"] == hashlib.sha256(run.read_bytes()).hexdigest()
    assert (
        o["path"] == str(run.resolve())
        and o["relative"] == "run.jsonl"
        and o["turn"] == 1
        and o["run"] == str(run)
        and o["turns"] == {"c1": 1}
    )


def test_a_changed_origin_is_one_line_in_diff_the_fork_tab_and_mcp(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, branch = write_pair(tmp_path)
    # the real origin: lined up, divergences past the cursor
    assert main(["diff", str(run), str(branch)]) == 1
    assert "lined up from the cursor" in capsys.readouterr().out
    _replace_origin(run)
    for argv in (["diff", str(run), str(branch)], ["diff", str(branch), str(run)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "", out
        lines = err.strip().splitlines()
        assert (
            len(lines) == 1
            and "the origin " in lines[0]
            and "changed since the fork (digest " in lines[0]
        ), err
        assert lines[0].endswith("the prefix cannot be compared"), err
    from looptap.cassettes.replay.forking.forkview import fork_view

    view = fork_view(branch)
    assert view is not None and view.origin_path is None
    assert any("changed since the fork" in n for n in view.notes) and not any(
        r.part == "prefix" for r in view.rows
    )
    assert all(not r.divergences for r in view.rows)  # no false divergence beside the rows
    from looptap.cassettes.mcp import QueryError
    from looptap.cassettes.mcp.query import Runs, fork_diff

    with pytest.raises(QueryError) as exc:
        fork_diff(Runs([str(tmp_path)]), str(branch), None, None, 20, 6000)
    assert "changed since the fork" in str(exc.value) and "digest" in exc.value.recorded["reason"]


def test_diff_reads_a_branch_and_its_origin_in_either_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, branch = write_pair(tmp_path)
    assert main(["diff", str(run), str(branch), "--json"]) == 1
    forward = orjson.loads(capsys.readouterr().out)
    assert main(["diff", str(branch), str(run), "--json"]) == 1
    backward = orjson.loads(capsys.readouterr().out)
    assert backward["divergences"] == forward["divergences"]
    assert any("is a branch of" in n for n in backward["notes"]) and backward["a"] == str(run)
    assert main(["diff", str(branch), str(run)]) == 1
    out = capsys.readouterr().out
    assert "is a branch of" in out and "lined up from the cursor" in out and "shorter" not in out, (
        out
    )
    assert "turn 1 (seq 1 ↔ 0)" in out


def test_diff_finds_a_renamed_origin_by_its_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, branch = write_pair(tmp_path)
    renamed = tmp_path / "prod-failure.jsonl"
    run.rename(renamed)
    assert main(["diff", str(renamed), str(branch)]) == 1
    out = capsys.readouterr().out
    assert (
        "B is a branch of A forked at turn=1: lined up from the cursor" in out
        and "turn 1 (seq 1 ↔ 0)" in out
    ), out


def test_mcp_fork_diff_finds_the_origin_beside_the_branch(tmp_path: Path) -> None:
    """The fork was made from elsewhere (``--from work/run.jsonl``); both files were then sent on
    and sit side by side: MCP finds the origin beside the branch, as the inspector does."""
    made, _ = write_pair(tmp_path / "made", typed="work/run.jsonl")
    sent = tmp_path / "sent"
    sent.mkdir()
    for name in ("run.jsonl", "branch.jsonl"):
        shutil.copy(made.parent / name, sent / name)
    shutil.rmtree(made.parent)
    from looptap.cassettes.mcp.query import Runs, fork_diff
    from looptap.cassettes.replay.forking.forkview import fork_view

    answer = fork_diff(Runs([str(sent)]), str(sent / "branch.jsonl"), None, None, 20, 6000)
    assert answer["origin"] == "run.jsonl" and answer["divergences"] > 0
    assert {d["turn"] for d in answer["recorded"]["divergences"]} == {1, 2}
    view = fork_view(sent / "branch.jsonl")
    assert view is not None and view.origin_path == str(sent / "run.jsonl")


def test_a_branch_forked_or_replayed_again_is_numbered_as_show_numbers_it(tmp_path: Path) -> None:
    """``looptap run --from branch.jsonl@turn=2``: the cursor's turn 2 is the turn show calls 2
    (the branch's #1), in the fork's header and in the replay server that serves the branch."""
    from looptap.cassettes.replay.serving.server import ReplayServer

    _, branch = write_pair(tmp_path)
    again = tmp_path / "again.jsonl"
    write_branch_header(again, ForkSource(branch, parse_cursor("turn=2")))
    o = origin_of(again)
    assert o is not None and o["starts"] == {"c1": 1} and o["turn"] == 2
    server = ReplayServer(branch)
    server.matcher.label()
    assert [(r.seq, r.turn) for r in server.matcher.recorded] == [(0, 1), (1, 2)]


def test_diff_of_a_branch_and_a_run_that_is_not_its_origin_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, branch = write_pair(tmp_path / "one")
    other, _ = write_pair(tmp_path / "two")
    # another run, under the origin's name elsewhere: not the run forked, not named by the branch's
    # paths
    _replace_origin(other)
    assert main(["diff", str(other), str(branch)]) in (0, 1)
    out = capsys.readouterr().out
    assert (
        f"{branch} is a branch of " in out
        and f"not of {other}" in out
        and "compared as two runs" in out
    ), out
