"""Issue 93, must show: the secrets benchmark over a coding agent's shell commands and files
(bench/shell_secrets.py). Credentials in the formats their issuers use (OpenAI, GitHub, AWS, Stripe,
Slack, a database URL's password, an unknown ``…_SECRET``), planted in command lines, in ``env``
and ``printenv`` output, in a ``.env`` written and printed, in a file's contents and in a file's
path, recorded by the real ``looptap run --shell-trace``; then every file looptap writes of that
run (cassette, kept contents, HAR, OTel, HTML, ``show``, ``show --json``, ``textconv``, the fleet
index and page): not one 8-character piece of any sentinel. ``verify`` calls the run clean and
flags a cassette with a sentinel put back in a process record's argv, stdout, stderr or files.

Run with ``-s`` to see the table (``.venv/bin/python bench/shell_secrets.py`` prints it too)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.proxy.shell_trace import probe
from tests.support.recorder import needs_recorder

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # last: bench/mcp.py must never shadow the mcp package

import shell_secrets  # noqa: E402

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}"),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return shell_secrets.run_bench(tmp_path_factory.mktemp("shell-secrets"))


def test_the_sentinels_reached_the_tracer(report: dict[str, Any]) -> None:
    """Each command ran and was traced (else 0 on disk would prove nothing): the masks are the
    redactor's work on what the tracer read."""
    assert report["processes"] >= report["commands"]
    assert report["redacted"] >= len(report["sentinels"])


def test_no_sentinel_reaches_a_file_looptap_writes(report: dict[str, Any]) -> None:
    where = [w for w in report["leaks"] if w.startswith(("file ", "kept contents", "cassette"))]
    assert {"cassette", "file otel.json", "file run.html", "file fleet.duckdb"} <= set(where)
    assert any(w.startswith("kept contents") for w in where)
    assert report["on_disk"] == [], {w: found for w, found in report["leaks"].items() if found}


def test_verify_calls_the_run_clean_and_flags_a_planted_cassette(report: dict[str, Any]) -> None:
    assert report["verify_clean"]
    assert report["verify_planted"] == {
        "argv": True, "argv words": True, "stdout": True, "stderr": True, "files": True
    }  # fmt: skip
