"""Storage failures are loud and never break the agent or damage what was written.

DESIGN.md: "A storage failure is loud (stderr, non-zero exit of ``looptap run``) and never damages
what was already written." A full disk is simulated with ``RLIMIT_FSIZE`` on the recorder (its
writer process inherits it; CPython ignores SIGXFSZ, so writes past the limit fail with EFBIG).
"""

from __future__ import annotations

import json
import resource
import sys
import textwrap
from pathlib import Path

from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, clean_env
from tests.support.reliability import needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = [needs_recorder]

CLIENT = r'''
import http.client, json, os
from urllib.parse import urlsplit
u = urlsplit(os.environ["OPENAI_BASE_URL"])
for i in range(12):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("POST", u.path + "/chat/completions", json.dumps({"model": "gpt-4o", "stream": True, "messages": [
        {"role": "user", "content": f"turn {i} " + "padding " * 5000}]}), {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    print(json.dumps({"turn": i, "status": r.status, "bytes": len(data), "done": b"[DONE]" in data}), flush=True)
'''  # noqa: E501


def test_disk_full_mid_run_is_loud_and_keeps_what_was_written(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    # per file: the CA bundle (~220 KB) fits, and a few round trips (~45 KB each), not twelve
    limit = 400_000
    (tmp_path / "client.py").write_text(textwrap.dedent(CLIENT))
    out = tmp_path / "run.jsonl"
    argv = [
        str(PROXY_PYTHON),
        "-m",
        "looptap.cassettes.cli",
        "run",
        "-o",
        str(out),
        "--confdir",
        str(tmp_path / "conf"),
        "--upstream",
        f"openai={upstream.url}",
        "--",
        sys.executable,
        str(tmp_path / "client.py"),
    ]

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = progress.run(
        argv, env=clean_env(), capture_output=True, text=True, preexec_fn=small_disk, cwd=tmp_path
    )
    printed = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    # The agent is not disturbed: every turn answered in full.
    assert [p["turn"] for p in printed] == list(range(12)), proc.stdout + proc.stderr
    assert all(p["status"] == 200 and p["done"] for p in printed)
    # Loud: a non-zero exit and the failure on stderr.
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert "STORAGE ERROR" in proc.stderr and "could NOT be stored" in proc.stderr, proc.stderr[
        -2000:
    ]
    # What was written before the disk filled up still loads, intact; at most the record that hit
    # the limit is torn.
    assert out.stat().st_size <= limit
    cas = read_records(out)
    assert 1 <= len(cas.exchanges) < 12
    assert all(p.kind == "torn" for p in cas.problems) and len(cas.problems) <= 1, [
        str(p) for p in cas.problems
    ]
    for ex in cas.exchanges:
        turn = int(ex.request_json()["messages"][0]["content"].split()[1])
        assert (
            ex.status == 200
            and b"[DONE]" in ex.response_body
            and printed[turn]["bytes"] == len(ex.response_body)
        )


def test_unwritable_output_is_one_clear_line(tmp_path: Path) -> None:
    command = "record"  # looptap run fails the same way (same Recorder.start)
    out = tmp_path / "no-such-dir" / "run.jsonl"
    argv = [
        str(PROXY_PYTHON),
        "-m",
        "looptap.cassettes.cli",
        command,
        "-o",
        str(out),
        "--confdir",
        str(tmp_path / "conf"),
    ]
    if command == "run":
        argv += ["--", sys.executable, "-c", "pass"]
    proc = progress.run(argv, env=clean_env(), capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-1500:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("looptap: error")]
    assert len(errors) == 1 and "no-such-dir" in errors[0], proc.stderr[-1500:]
