"""``looptap mcp`` answers ``initialize`` (and ``tools/list``) without loading looptap's analysis,
readers, providers or redaction rules (issue 43, item 5: a coding agent waits for that answer at its
own start; on a busy machine it took 19 s). They are loaded by the first tool call. Checked by the
modules the server process imported (``python -X importtime``), never by a clock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = (
    "looptap.cassettes.analysis",
    "looptap.cassettes.reading",
    "looptap.cassettes.providers",
    "looptap.cassettes.recording",
    "looptap.cassettes.parsing",
    "looptap.cassettes.mcp.query",
)


def _session(root: Path, *requests: dict) -> tuple[list[dict], set[str]]:
    """Run ``looptap mcp`` on stdio, send ``requests`` one at a time (each answered before the
    next), close stdin; the answers and the modules the server process imported."""
    # stderr (importtime writes a line per module) goes to a file: a pipe nobody reads while the
    # answers are read fills up and the server blocks on it (a hang, not a failure)
    log = root / f"importtime.{len(list(root.glob('importtime.*')))}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "looptap.cassettes.cli", "mcp", "--root", str(root)],  # noqa: E501
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, cwd=REPO,
        )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    answers = []
    for req in requests:
        proc.stdin.write((json.dumps(req) + "\n").encode())
        proc.stdin.flush()
        if "id" in req:
            answers.append(json.loads(proc.stdout.readline()))
    proc.stdin.close()
    proc.wait()
    err = log.read_text("utf-8", "replace")
    modules = {
        line.split("|")[-1].strip()
        for line in err.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return answers, modules


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
READY = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_initialize_and_tools_list_load_nothing_heavy_the_first_call_does(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    answers, modules = _session(tmp_path, INIT, READY, listed)
    assert answers[0]["result"]["serverInfo"]["name"] == "looptap"
    assert "list_runs" in {t["name"] for t in answers[1]["result"]["tools"]}
    loaded = sorted(m for m in modules if m.startswith(HEAVY))
    assert loaded == [], loaded
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "list_runs", "arguments": {}},
    }
    answers, modules = _session(tmp_path, INIT, READY, call)
    assert "error" not in answers[1] and answers[1]["result"].get("isError") is not True, answers[1]
    assert "looptap.cassettes.mcp.query" in modules  # loaded where it is needed


def test_a_root_that_is_not_a_directory_is_still_refused_at_start(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    done = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "mcp", "--root", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode != 0 and "does not exist" in done.stderr, done.stderr
