"""The looptap command: import, show, show --json, demo, and clean errors on bad input."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from real_corpus import CORPUS

from tests.support import progress
from tests.support.analysed import cli_run

REPO = Path(__file__).resolve().parents[1]
STREAM = (
    CORPUS
    / "pydantic-ai/tests/models/cassettes/test_openai/test_run_stream_sync_streams_real_model.yaml"
)


def looptap(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )


def test_import_then_show(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    r = looptap("import", str(STREAM), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "2 round trips, 2 LLM (openai_chat 2)" in r.stdout
    r = looptap("show", str(out))
    assert r.returncode == 0, r.stderr
    assert "tool call: get_capital" in r.stdout and "The capital of the UK is London." in r.stdout
    assert "request: 3 messages (1 as before, 2 new), 1 tool offered" in r.stdout
    assert "tool result: get_capital id=call_ZR5UUuTt3pf61kjwAJIYdVMj → London" in r.stdout
    assert "(complete)  complete" not in r.stdout and "1 tools" not in r.stdout


def test_show_json_schema(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    assert cli_run("import", str(STREAM), "-o", str(out)).returncode == 0
    r = cli_run("show", "--json", str(out))
    rows = [orjson.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 2
    first, second = rows
    assert first["schema"] == "looptap.roundtrip/1"
    assert first["family"] == "openai_chat" and first["stream"] is True and first["status"] == 200
    assert (
        first["model_requested"] == "gpt-4o-mini"
        and first["model_served"] == "gpt-4o-mini-2024-07-18"
    )
    assert first["finish_reason"] == {"raw": "tool_calls", "normalised": "tool_call"}
    assert first["usage"] == {
        "input": 53,
        "output": 15,
        "cache_read": 0,
        "cache_write": None,
        "reasoning": 0,
        "total": 68,
    }
    assert first["tool_calls"] == [
        {
            "id": "call_ZR5UUuTt3pf61kjwAJIYdVMj",
            "name": "get_capital",
            "arguments": {"country": "UK"},
            "arguments_raw": '{"country":"UK"}',
            "arguments_error": None,
            "ran_by": "client",
        }
    ]
    assert (
        first["complete"] is True and first["truncated"] is False and first["analysis_errors"] == []
    )
    assert second["text"] == "The capital of the UK is London."
    assert second["request"]["history"] == {"base": 0, "keep": 1, "appended": 2}


def test_show_reads_vcr_yaml_directly() -> None:
    r = looptap("show", "--json", str(STREAM))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2


def test_import_directory(tmp_path: Path) -> None:
    """In this process (a directory imported by a process:
    test_import_directory_mirrors_the_tree)."""
    src = CORPUS / "llm-anthropic/tests/cassettes/test_anthropic"
    r = cli_run("import", str(src), "-o", str(tmp_path / "out"), "-q")
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "out").glob("*.jsonl"))) == len(list(src.glob("*.yaml")))


def test_demo_without_the_recorder_shows_the_bundled_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looptap.cassettes import hints
    from looptap.cassettes.cli.demo import cmd_demo

    # no recorder where set-up makes it either (the checkout's .venv-proxy): run in-process
    monkeypatch.setattr("looptap.cassettes.cli.demo.found_recorder", lambda: None)
    monkeypatch.delenv("LOOPTAP_PROXY_PYTHON", raising=False)
    said: list[str] = []
    rc = cmd_demo(argparse.Namespace(output=str(tmp_path / "demo.jsonl")), said.append)
    out = "\n".join(said)
    assert rc == 0, out
    assert "the recorder (mitmproxy) is not installed in this environment" in out
    assert "recorded 11 round trips: 4 conversations, 11 turns" in out
    assert "root cause: ▲ E E.arguments_schema (#4 c2/turn 1)" in out
    # as this user runs looptap, so the line runs as printed
    me = hints.looptap_command()
    assert f"next: {me} show {tmp_path / 'demo.jsonl'}" in out, out


def test_demo_records_the_example_agent_through_the_proxy(tmp_path: Path) -> None:
    """The README's first command: the example agent runs its tool loop through the real recorder
    against the loopback replay of the recorded model answers; the cassette is the live run. Its
    first screen (issue 71 item 10: it was 155 lines, 53 wider than 100 columns, the summary and
    the next step last, after the whole ``show``): a short summary, the root cause, the next
    commands with ``show`` first; no line over 100 columns."""
    proxy_python = os.environ.get("LOOPTAP_PROXY_PYTHON")
    if not proxy_python or not Path(proxy_python).exists():
        pytest.skip("LOOPTAP_PROXY_PYTHON (the recorder's environment) is not set")
    out = tmp_path / "demo.jsonl"
    # as the README's set-up leaves it: the recorder's looptap alone, linked into a directory on
    # PATH
    linked = tmp_path / "path"
    linked.mkdir()
    (linked / "looptap").symlink_to(Path(proxy_python).parent / "looptap")
    on_path = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}{os.pathsep}{linked}"}
    r = progress.run(
        ["looptap", "demo", "-o", "demo.jsonl"], capture_output=True, text=True, cwd=tmp_path,
        env=on_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 20 and max(map(len, lines)) <= 100, r.stdout
    assert r.stderr == "", r.stderr  # the recorder's lines are the run's: show has them
    assert "recorded 11 round trips: 4 conversations, 11 turns; tokens in " in r.stdout
    assert "findings: E 1 warning · A none · C 3 info" in r.stdout
    assert "root cause: ▲ E E.arguments_schema (#4 c2/turn 1): " in r.stdout
    assert "  ↳ · C C.tool_result_error (#5 c2/turn 2): " in r.stdout
    # the whole run one command away, as the user runs looptap (never ".../python -m cassettes.cli")
    assert (
        "next: looptap show demo.jsonl   (" in r.stdout
        and "-m looptap.cassettes.cli" not in r.stdout
    )
    assert "      looptap run -o run.jsonl -- python your_agent.py" in r.stdout
    data = out.read_bytes()
    assert b"looptap-demo-key-never-written-to-disk" not in data
    assert b"x-looptap-conversation" in data.lower()
    shown = cli_run("show", str(out))  # (show's process path: test_import_then_show)
    assert "POST 127.0.0.1:" in shown.stdout  # recorded live, not imported
    assert "E.arguments_schema" in shown.stdout and "C.tool_result_error" in shown.stdout
    # Its recording line runs as printed (fails on main: "python tool_search_agent.py", a file the
    # user does not have): here against the user's own gateway (ANTHROPIC_BASE_URL), the same
    # recorded answers served by a loopback replay.
    from looptap.cassettes.replay.serving.server import ReplayServer
    from looptap.cassettes.storage import load_vcr, read_records

    said = r.stdout.splitlines()
    at = said.index(next(ln for ln in said if ln.startswith("with your ANTHROPIC_API_KEY"))) + 1
    line = said[at].strip()
    if line.endswith("\\"):  # a long path goes on a line of its own
        line = f"{line}\n{said[at + 1]}"
    assert line.endswith("cassettes/examples/tool_search_agent.py"), line
    # the real file, not the editable install's link to it (fails on 59f08458)
    shown_agent = Path(shlex.split(line.replace("\\\n", " "))[-1])
    assert ".looptap-editable" not in line, line
    assert shown_agent == shown_agent.resolve(), line
    assert line.startswith("looptap run -o run.jsonl -- python3 "), line
    again = tmp_path / "again"
    again.mkdir()
    with ReplayServer(load_vcr(REPO / "cassettes/examples/tool_loop_anthropic.yaml")) as up:
        env = {
            **on_path,
            "ANTHROPIC_BASE_URL": up.url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "PYTHONPATH": str(REPO),
        }
        rerun = progress.run(
            ["bash", "-c", line], capture_output=True, text=True, cwd=again, env=env
        )
    assert rerun.returncode == 0, line + "\n" + rerun.stdout[-2000:] + rerun.stderr[-2000:]
    assert len(read_records(again / "run.jsonl").exchanges) == 11


def test_the_demos_cassette_is_ignored_by_git() -> None:
    """``looptap demo`` from the checkout (the README's first command) writes looptap-demo.jsonl
    there: git ignores it (fails on main: it showed as untracked)."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    r = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "-q", "looptap-demo.jsonl"], check=False
    )
    assert r.returncode == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"not json at all\n", "not a looptap cassette"),
        (
            b'{"type":"header","format":"looptap-cassette","format_version":7}\n',
            "written by a newer looptap",
        ),
        (bytes(range(256)) * 10, "not a looptap cassette"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path: Path, content: bytes, message: str) -> None:
    """The empty file through a process (the error line's path to stderr), the others through
    ``main`` in this process (the same status and stderr)."""
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    r = looptap("show", str(p)) if not content else cli_run("show", str(p))
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    """In this process (an error line through a process: test_bad_files_give_one_line_errors)."""
    r = cli_run("show", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 2 and "cannot open" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("interactions: [unclosed")
    r = cli_run("import", str(bad), "-o", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and "not valid YAML" in r.stderr and "Traceback" not in r.stderr


def test_torn_cassette_shows_what_it_has(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    assert cli_run("import", str(STREAM), "-o", str(out)).returncode == 0
    data = out.read_bytes()
    out.write_bytes(data[: len(data) - 200])
    r = cli_run("show", str(out))
    assert r.returncode == 0
    assert "torn last record" in r.stderr
    assert "1 round trip, 1 to LLM APIs" in r.stdout


def test_import_directory_mirrors_the_tree(tmp_path: Path) -> None:
    """A nested tree whose base names collide (the same test name in two folders, ``a.yaml`` next
    to ``a.yml``): every file is imported, the tree is mirrored, nothing is overwritten."""
    stream = STREAM.read_bytes()
    src = tmp_path / "tests"
    layout = [
        "test_x.yaml",
        "models/test_x.yaml",
        "models/openai/test_x.yaml",
        "models/openai/test_x.yml",
        "models/anthropic/test_y.yaml",
    ]
    for rel in layout:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(stream)
    out = tmp_path / "out"
    r = looptap("import", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    got = sorted(str(p.relative_to(out)) for p in out.rglob("*.jsonl"))
    assert got == sorted(
        [
            "test_x.jsonl",
            "models/test_x.jsonl",
            "models/openai/test_x.jsonl",
            "models/openai/test_x.yml.jsonl",
            "models/anthropic/test_y.jsonl",
        ]
    )
    assert r.stdout.count("2 round trips, 2 LLM (openai_chat 2)") == len(layout)
    assert "another input already maps to models/openai/test_x.jsonl" in r.stdout
    for p in out.rglob("*.jsonl"):  # (in this process: the process path is the import above)
        assert cli_run("show", "--json", str(p)).stdout.count("looptap.roundtrip/1") == 2

    # Again without -f: every existing file is refused (exit 2), none is replaced.
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.jsonl")}
    r = cli_run("import", str(src), "-o", str(out), "-q")
    assert r.returncode == 2 and r.stderr.count("exists (use --force to replace it)") == len(layout)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.jsonl")} == before
    # With -f: the files of the earlier run are replaced, each by its own source, still one per
    # input.
    r = cli_run("import", str(src), "-o", str(out), "-f", "-q")
    assert r.returncode == 0, r.stderr
    assert len(list(out.rglob("*.jsonl"))) == len(layout)

    # Two directory inputs: each mirrored under its own name.
    other = tmp_path / "more"
    (other / "models").mkdir(parents=True)
    (other / "models" / "test_x.yaml").write_bytes(stream)
    out2 = tmp_path / "out2"
    r = looptap("import", str(src), str(other), "-o", str(out2), "-q")
    assert r.returncode == 0, r.stderr
    assert (out2 / "tests/models/openai/test_x.jsonl").exists() and (
        out2 / "more/models/test_x.jsonl"
    ).exists()
    assert len(list(out2.rglob("*.jsonl"))) == len(layout) + 1
