"""Issue 44 item 4, ``diff``: ``looptap diff A B`` compares the requests as a replay matches them.
Two runs of one agent on two days in two checkouts differ in their requests only in the date, a
uuid and the working directory (each from its header's ``meta.cwd``/``meta.home``, both known on
both sides): no C divergence, each difference listed as tolerated (turn, path, both values, the
detector), in text and ``--json``, by MCP's ``diff`` and, past a fork's cursor, by ``fork_diff`` and
the inspector's Fork view alike. A real change beside them is still a C divergence with its turn,
path and layer (the values as each run sent them); the project's rules and the rule flags are
read as ``looptap replay`` reads them; ``--no-volatile`` (or ``volatile = false``) compares as
sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.replay.forking.fork import ForkSource, origin_meta
from looptap.cassettes.replay.forking.placement import parse_cursor
from tests.inspector.fork_fixture import answer_body, chat_exchange, tool_call, tool_result

MONDAY = {
    "day": "2026-11-24",
    "cwd": "/home/alice/proj",
    "home": "/home/alice",
    "uuid": "3f2a9c1e-7b4d-4e8a-9c2b-1d5e6f7a8b9c",
}
TUESDAY = {
    "day": "2026-11-25",
    "cwd": "/srv/ci/checkout",
    "home": "/home/ci",
    "uuid": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
}


def _run(
    path: Path,
    when: dict[str, str],
    city: str = "Paris",
    rule: str = "Be terse.",
    build: str = "7",
    meta: dict[str, Any] | None = None,
    read: str | None = None,
) -> Path:
    """An agent's two turns: its system prompt holds the date, its working directory, a session
    uuid and a build number; its tool reads a file under the working directory (or ``read``)."""
    system = {
        "role": "system",
        "content": f"Today's date is {when['day']}. Working directory: {when['cwd']}. Session "
        f"{when['uuid']}. Build {build}. {rule}",
    }
    user = {"role": "user", "content": f"Weather in {city}?"}
    h1 = [
        system,
        user,
        tool_call("call_A1", city),
        tool_result("call_A1", f"sunny, 21 C (read {read or when['cwd']}/notes.txt)"),
    ]
    with CassetteWriter(path, meta={"cwd": when["cwd"], "home": when["home"], **(meta or {})}) as w:
        w.append(chat_exchange([system, user], answer_body(None, ("call_A1", city))))
        w.append(chat_exchange(h1, answer_body("Sunny.")))
    return path


def _diff(
    capsys: pytest.CaptureFixture[str], a: Path, b: Path, *flags: str
) -> tuple[int, str, dict[str, Any]]:
    rc = main(["diff", str(a), str(b), *flags])
    out = capsys.readouterr().out
    assert main(["diff", str(a), str(b), "--json", *flags]) == rc
    return rc, out, orjson.loads(capsys.readouterr().out)


def _by(doc: dict[str, Any]) -> list[tuple[int, str, str, str, str]]:
    return [
        (t["turn"], e["path"], e["by"], e["recorded"], e["live"])
        for t in doc.get("tolerated", [])
        for e in t["tolerated"]
    ]


@pytest.fixture
def days(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return _run(tmp_path / "a" / "monday.jsonl", MONDAY), _run(
        tmp_path / "b" / "tuesday.jsonl", TUESDAY
    )


def test_two_days_in_two_checkouts_differ_only_in_what_is_tolerated(
    days: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, doc = _diff(capsys, *days)
    assert (
        rc == 0
        and doc["divergences"] == []
        and out.splitlines()[-1].endswith(": the runs do not diverge")
    ), out
    assert " C: " not in out
    found = _by(doc)
    for turn in (0, 1):
        assert (turn, "messages[0].content", "date", MONDAY["day"], TUESDAY["day"]) in found, found
        assert (turn, "messages[0].content", "cwd", MONDAY["cwd"], TUESDAY["cwd"]) in found, found
        assert (turn, "messages[0].content", "uuid", MONDAY["uuid"], TUESDAY["uuid"]) in found, (
            found
        )
    # the tool's output: each run's own cwd
    assert (1, "messages[3].content", "cwd", MONDAY["cwd"], TUESDAY["cwd"]) in found
    assert {t["seq"] for t in doc["tolerated"]} == {0, 1} and all(
        t["seq_b"] == t["seq"] and t["conversation"] == "c1" for t in doc["tolerated"]
    )
    assert out.startswith("tolerated (not divergences: ")
    assert (
        f'  tolerated at c1/turn 0 (seq 0): messages[0].content: recorded "{MONDAY["day"]}", live '
        f'"{TUESDAY["day"]}" (by date)' in out.splitlines()
    )


def test_a_real_change_beside_them_is_still_a_c_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "monday.jsonl", MONDAY)
    b = _run(tmp_path / "tuesday.jsonl", TUESDAY, city="Rome")
    rc, out, doc = _diff(capsys, a, b)
    assert rc == 1
    assert (
        "  turn 0 (seq 0 ↔ 0): C: the user input at messages[1] changed (messages[1].content)"
        in out
    ), out
    assert '      messages[1].content: A "Weather in Paris?", B "Weather in Rome?"' in out, out
    c = [d for d in doc["divergences"] if d["layer"] == "C"]
    assert [(d["turn"], d["path"]) for d in c][:1] == [(0, "messages[1].content")], c
    # the unchanged system prompt: tolerated still
    assert (0, "messages[0].content", "date", MONDAY["day"], TUESDAY["day"]) in _by(doc)
    # a change in the same text as a date: a divergence, its values as each run sent them (not
    # "<date>")
    b2 = _run(tmp_path / "verbose.jsonl", TUESDAY, rule="Be verbose.")
    rc, out, doc = _diff(capsys, a, b2)
    assert (
        rc == 1 and "turn 0 (seq 0 ↔ 0): C: the system prompt changed (messages[0].content)" in out
    ), out
    (change,) = next(d for d in doc["divergences"] if d["turn"] == 0 and d["layer"] == "C")[
        "changes"
    ]
    assert change["a"].startswith(
        f"Today's date is {MONDAY['day']}. Working directory: {MONDAY['cwd']}."
    ) and change["a"].endswith("Be terse."), change
    assert change["b"].startswith(f"Today's date is {TUESDAY['day']}.") and change["b"].endswith(
        "Be verbose."
    ), change
    assert "<date>" not in out and "<cwd>" not in out
    # nothing claimed tolerated in a value that differs anyway
    assert not [t for t in _by(doc) if t[1] == "messages[0].content"]


def test_a_request_that_says_the_placeholder_literally_is_not_tolerated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "monday.jsonl", MONDAY)
    b = _run(tmp_path / "tuesday.jsonl", {**MONDAY, "day": "<date>"})
    rc, out, doc = _diff(capsys, a, b)
    assert rc == 1 and "C: the system prompt changed (messages[0].content)" in out, out
    assert not _by(doc)


@pytest.mark.parametrize("where", ["looptap.toml", "pyproject.toml", "flag"])
def test_the_projects_rules_and_the_rule_flags_tolerate_what_they_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    a = _run(tmp_path / "monday.jsonl", MONDAY, build="7")
    b = _run(tmp_path / "tuesday.jsonl", TUESDAY, build="812")
    rc, out, doc = _diff(capsys, a, b)
    # no rule: a divergence
    assert rc == 1 and "C: the system prompt changed (messages[0].content)" in out
    assert (
        "Build 7." in doc["divergences"][0]["changes"][0]["a"]
        and "Build 812." in doc["divergences"][0]["changes"][0]["b"]
    )
    flags: list[str] = []
    rule = "Build [0-9]+=Build N"
    if where == "flag":
        flags = ["--substitute", rule]
    elif where == "looptap.toml":
        (tmp_path / "looptap.toml").write_text(f'substitute = ["{rule}"]\n')
    else:
        (tmp_path / "pyproject.toml").write_text(
            f'[project]\nname = "x"\n\n[tool.looptap]\nsubstitute = ["{rule}"]\n'
        )
    rc, out, doc = _diff(capsys, a, b, *flags)
    assert rc == 0 and not doc["divergences"], out
    assert (0, "messages[0].content", f"substitute {rule}", "Build 7", "Build 812") in _by(doc), (
        _by(doc)
    )
    assert f"(by substitute {rule})" in out


def test_a_rule_that_cannot_be_used_is_one_line_and_exit_2(
    days: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", str(days[0]), str(days[1]), "--substitute", "(?!a)b=x"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'(?!' at position 0" in err, err


def test_no_volatile_compares_the_text_as_sent(
    days: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc, out, doc = _diff(capsys, *days, "--no-volatile")
    assert rc == 1 and "tolerated" not in out and "tolerated" not in doc, out
    assert "  turn 0 (seq 0 ↔ 0): C: the system prompt changed (messages[0].content)" in out
    assert (
        "  turn 1 (seq 1 ↔ 1): C: the tool result for call_A1 changed (messages[3].content)" in out
    )
    # the project's own switch, as the replay reads it (looptap.toml beside A)
    (days[0].parent / "looptap.toml").write_text("volatile = false\n")
    rc, out, _ = _diff(capsys, *days)
    assert rc == 1 and "C: the system prompt changed" in out and "tolerated" not in out


def test_a_working_directory_no_header_names_is_compared_as_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B's header says nothing of its cwd: B's path is not one the diff knows (nor is it this
    process's), so it is compared as sent."""
    a = _run(tmp_path / "monday.jsonl", MONDAY)
    b = tmp_path / "tuesday.jsonl"
    _run(b, TUESDAY)
    raw = b.read_bytes().split(b"\n", 1)
    header = orjson.loads(raw[0])
    del header["meta"]["cwd"], header["meta"]["home"]
    b.write_bytes(orjson.dumps(header) + b"\n" + raw[1])
    rc, out, doc = _diff(capsys, a, b)
    assert rc == 1 and "C: the tool result for call_A1 changed (messages[3].content)" in out, out
    assert not [t for t in _by(doc) if t[2] == "cwd"], _by(doc)


def test_mcp_diff_reads_it_as_the_cli_does(days: tuple[Path, Path]) -> None:
    from looptap.cassettes.mcp.query import Runs, diff

    runs = Runs([str(days[0].parent.parent)])
    answer = diff(runs, "a/monday.jsonl", "b/tuesday.jsonl", None, 20, 6000)
    assert answer["same"] is True and answer["divergences"] == 0, answer
    assert answer["tolerated"] == 7
    assert any(
        line.endswith("(by cwd)") and "messages[3].content" in line
        for line in answer["recorded"]["tolerated"]
    ), answer


def _branch(folder: Path, day: dict[str, str], read: str | None = None) -> tuple[Path, Path]:
    """Monday's run, and a branch forked from it at turn 1 on Tuesday in another checkout: its
    turn 1 live (the same answer), its request with Tuesday's date, uuid and working directory."""
    run = _run(folder / "run.jsonl", MONDAY)
    tue = _run(folder / "tue.jsonl", day, read=read)
    branch = folder / "branch.jsonl"
    meta = origin_meta(
        ForkSource(run, parse_cursor("turn=1")), None, {"c1": 1}, [], {"c1": 1}, branch
    )
    from looptap.cassettes.reading import open_run

    with CassetteWriter(
        branch,
        meta={
            "source": "looptap run --from",
            "cwd": day["cwd"],
            "home": day["home"],
            "origin": meta,
        },
    ) as w:
        w.append(open_run(tue).exchanges[1])
    return run, branch


def test_past_a_forks_cursor_diff_mcp_and_the_fork_view_read_it_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, branch = _branch(tmp_path, TUESDAY)
    rc, out, doc = _diff(capsys, run, branch)
    assert rc == 0 and not doc["divergences"], out
    found = _by(doc)
    assert (1, "messages[0].content", "date", MONDAY["day"], TUESDAY["day"]) in found and (
        1,
        "messages[3].content",
        "cwd",
        MONDAY["cwd"],
        TUESDAY["cwd"],
    ) in found
    from looptap.cassettes.mcp.query import Runs, fork_diff
    from looptap.cassettes.replay.forking.forkview import fork_view

    answer = fork_diff(Runs([str(tmp_path)]), str(branch), None, None, 20, 6000)
    assert answer["divergences"] == 0 and answer["tolerated"] == len(found), answer
    view = fork_view(branch)
    assert view is not None
    (row,) = [r for r in view.rows if r.part == "past"]
    assert not row.divergences and len(row.tolerated) == len(found), row
    assert any(line.endswith("(by date)") for line in row.tolerated)


def test_a_branch_request_that_holds_the_origins_path_is_no_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the prefix served from the origin comes back in the branch's requests with the origin's
    paths (Claude Code's Read of ``/home/alice/proj/notes.txt``, answered in checkout B): both
    runs' places are known on both sides, as the fork's prefix knows the recording's and its own."""
    run, branch = _branch(tmp_path, TUESDAY, read=MONDAY["cwd"])
    rc, out, doc = _diff(capsys, run, branch)
    assert rc == 0 and not doc["divergences"], out
    # the same text on both sides: nothing to list
    assert not [t for t in _by(doc) if t[1] == "messages[3].content"]
