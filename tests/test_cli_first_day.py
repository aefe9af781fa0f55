"""The small first-day items of issue 32 (item 6): ``import`` without ``-o`` writes into the current
directory and agrees its nouns with its numbers; a concatenation of cassettes is refused by every
reader; ``diff`` of unrelated runs says so in one line; ``verify DIR``; ``show`` filters; the hints
say how this user runs looptap; ``looptap mcp`` that cannot start still answers a client."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.resources import as_file, files
from pathlib import Path

import orjson
import pytest
from real_corpus import CORPUS

from looptap.cassettes.cli import main
from tests.support import progress

SETTINGS = CORPUS / "pydantic-ai/tests/cassettes/test_settings"
OPENAI_ONE = SETTINGS / "test_stop_settings[openai].yaml"
ANTHROPIC_ONE = SETTINGS / "test_stop_settings[anthropic].yaml"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's recording (4 conversations, an E finding and its C consequence) as a cassette."""
    out = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    with as_file(files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as src:
        assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    return out


def test_import_without_o_writes_into_the_current_directory_and_says_1_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    src = inputs / "one.yaml"
    shutil.copy(OPENAI_ONE, src)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["import", str(src)]) == 0
    out = capsys.readouterr().out
    # never beside the input
    assert (work / "one.jsonl").is_file() and not (inputs / "one.jsonl").exists()
    assert "→ one.jsonl: 1 round trip, 1 LLM" in out, out


def test_a_concatenation_of_cassettes_is_refused_by_every_reader(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(demo.read_bytes() * 2)
    said = "is a second cassette header: this file is several cassettes joined one after another"
    for argv in (
        ["show", str(joined)],
        ["show", "--json", str(joined)],
        ["export", str(joined), "--har", str(tmp_path / "x.har")],
        ["diff", str(joined), str(demo)],
        ["replay", str(joined), "--port", "0"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert said in err and str(joined) in err, (argv, err)
    from looptap.cassettes.mcp import QueryError
    from looptap.cassettes.mcp.query import Runs, run_summary

    with pytest.raises(QueryError) as exc:
        run_summary(Runs([str(tmp_path)]), "joined.jsonl", 6000)
    assert said in orjson.dumps(exc.value.answer()).decode()
    from looptap.cassettes.storage import read_records

    with pytest.raises(Exception, match="second cassette header"):
        read_records(joined)


def test_a_cassette_appended_to_is_not_a_concatenation(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The clean twin: ``-o +FILE`` appends records without a second header, and reads whole."""
    lines = demo.read_bytes().splitlines(keepends=True)
    appended = tmp_path / "appended.jsonl"
    appended.write_bytes(b"".join(lines) + b"".join(lines[1:]))
    assert main(["show", str(appended)]) == 0
    assert "22 round trips" in capsys.readouterr().out


def test_diff_of_runs_on_different_apis_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    for src, dest in ((OPENAI_ONE, a), (ANTHROPIC_ONE, b), (OPENAI_ONE, c)):
        assert main(["import", "-q", str(src), "-o", str(dest)]) == 0
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        len(out) == 1
        and "the runs use different APIs (openai_chat POST /v1/chat/completions "
        "against anthropic POST /v1/messages)"
        in out[0]
    ), out
    assert main(["diff", "--json", str(a), str(b)]) == 1
    doc = orjson.loads(capsys.readouterr().out)
    assert [d["message"][:29] for d in doc["divergences"]] == ["the runs use different APIs ("]
    assert main(["diff", str(a), str(c)]) == 0  # the same API: compared turn by turn
    assert "do not diverge" in capsys.readouterr().out


def test_verify_a_directory_scans_its_recordings(
    tmp_path: Path, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "runs"
    (root / "sub").mkdir(parents=True)
    (root / ".venv").mkdir()
    shutil.copy(demo, root / "demo.jsonl")
    key = "sk-ant-api03-" + "A" * 93 + "AA"
    (root / "sub" / "leak.json").write_text(orjson.dumps({"k": key}).decode())
    (root / ".venv" / "skipped.json").write_text(orjson.dumps({"k": key}).decode())
    assert main(["verify", str(root)]) == 1
    cap = capsys.readouterr()
    assert "sub/leak.json:1" in cap.out and ".venv" not in cap.out + cap.err, cap
    assert f"{root / 'demo.jsonl'}: clean" in cap.err
    (root / "sub" / "leak.json").unlink()
    assert main(["verify", str(root)]) == 0  # the clean twin


def test_show_filters_what_it_prints(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(demo)]) == 0
    whole = capsys.readouterr().out
    assert whole.count("\n#") == 11
    assert main(["show", str(demo), "--layer", "E"]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[0] for ln in out.splitlines() if ln.startswith("#")] == ["#4"], out
    assert (
        "E.arguments_schema" in out
        and "C.tool_result_error" not in out.split("E — model emission")[1]
    )
    assert "token growth, conversation c2" in out and "token growth, conversation c1" not in out
    assert out.rstrip().endswith("filtered (layer E): 1 round trip of 11 shown")
    assert main(["show", str(demo), "--conversation", "c2", "--turn", "1"]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("#")] == [
        "c2/turn"
    ] and "#4  c2/turn 1" in out
    assert main(["show", "--json", str(demo), "--severity", "warning"]) == 0
    rows = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["seq"] for r in rows] == [4]
    assert main(["show", str(demo), "--conversation", "c9"]) == 2
    assert "no such conversation in this run (it has c1, c2, c3, c4)" in capsys.readouterr().err


def test_hints_name_how_this_user_runs_looptap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looptap.cassettes import hints

    script = tmp_path / "bin" / "looptap"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert hints.looptap_command() == str(script)  # not on PATH: the path as typed
    monkeypatch.setenv("PATH", str(script.parent))
    assert hints.looptap_command() == "looptap"  # on PATH: the name
    monkeypatch.setattr(sys, "argv", ["-m"])
    assert hints.looptap_command().endswith(" -m looptap.cassettes.cli")
    assert ".[" not in hints.install_command("mcp")
    # the recorder's environment is made in the checkout, entered first (never the user's project)
    made = hints.recorder_install_command()[0]
    assert "'.[" not in made or made.startswith(f"(cd {hints.looptap_checkout()} && "), made
    checkout = hints.looptap_checkout()
    if checkout is not None:  # an editable install: by the checkout's absolute path
        assert f"{checkout}[mcp]" in hints.install_command("mcp")


def test_the_demo_next_line_runs_as_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    from looptap.cassettes.cli import demo as demo_mod

    said: list[str] = []
    monkeypatch.setattr(demo_mod, "looptap_argv", lambda: [".venv-proxy/bin/looptap"])
    demo_mod.next_steps(0, Path("looptap-demo.jsonl"), said.append)
    assert said[0].strip().startswith("next: .venv-proxy/bin/looptap show looptap-demo.jsonl")
    assert said[1].strip().startswith(".venv-proxy/bin/looptap inspect looptap-demo.jsonl")


def test_mcp_that_cannot_start_answers_the_client_with_the_reason(tmp_path: Path) -> None:
    """What Claude Code shows is the initialize answer (never stderr): without the mcp package, and
    with a root that does not exist, each request gets a JSON-RPC error carrying the line."""
    block = tmp_path / "block" / "mcp"
    block.mkdir(parents=True)
    (block / "__init__.py").write_text("raise ImportError('no mcp here')\n")
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
    )
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    for env_extra, root, said in (
        (
            {"PYTHONPATH": str(tmp_path / "block")},
            str(tmp_path),
            "the MCP server needs the mcp package",
        ),
        ({}, str(tmp_path / "nowhere"), "the root directory does not exist"),
    ):
        import os

        env = {**os.environ, **env_extra}
        proc = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "mcp", "--root", root],
            input=init + note + init.replace(b'"id":1', b'"id":"x"'),
            capture_output=True,
            env=env,
        )
        assert proc.returncode == 2
        answers = [orjson.loads(x) for x in proc.stdout.splitlines()]
        assert [a["id"] for a in answers] == [1, "x"], answers  # the notification gets none
        assert all(
            a["error"]["code"] == -32603 and said in a["error"]["message"] for a in answers
        ), answers
        assert said in proc.stderr.decode()


def test_mcp_that_cannot_start_in_a_terminal_just_says_so(tmp_path: Path) -> None:
    """With stdin a terminal there is no client: one line on stderr and exit 2, no waiting."""
    proc = progress.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "mcp",
            "--http",
            "127.0.0.1:1",
            "--root",
            str(tmp_path / "nowhere"),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert (
        proc.returncode == 2
        and "the root directory does not exist" in proc.stderr
        and proc.stdout == ""
    )
