"""Issue 91, item 1, must show: the secrets benchmark over tool traffic (bench/tool_secrets.py).
At least 150 sentinels of every class docs/redaction.md lists (and the formats real APIs document:
Stripe, GitHub, Slack, AWS STS XML and JSON, Azure SAS, GCP signed URLs, Twilio, OAuth token
endpoints, database URLs …), planted in an openai SDK agent's tools' HTTP calls (``requests``
against a loopback tool server) recorded by the real ``looptap run``; then every file looptap
writes of that run (cassette, HAR, OTel, HTML, ``show``, ``textconv``, kept analysis, fleet index
and page, a fork's branch, ``why``'s folder, ``looptap replay``'s stderr with a miss): not one
8-character piece of any sentinel. ``verify`` calls the run clean and flags a cassette with each
class's sentinels put back; replayed, every tool call is served.

Run with ``-s`` to see the table (``.venv/bin/python bench/tool_secrets.py`` prints it too)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.recorder import needs_recorder

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # last: bench/mcp.py must never shadow the mcp package

import tool_secrets  # noqa: E402

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(
        not tool_secrets.CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"
    ),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return tool_secrets.run_bench(tmp_path_factory.mktemp("tool-secrets"))


def test_at_least_150_sentinels_in_every_class(report: dict[str, Any]) -> None:
    assert report["sentinels"] >= 150, report["sentinels"]
    assert report["tool_calls_seen"] == report["cases"]
    assert len(report["classes"]) >= 14, report["classes"]


def test_no_sentinel_reaches_any_file_or_stream(report: dict[str, Any]) -> None:
    for where, found in report["leaks"].items():
        print(f"  {where:<48} {len(found)}  {', '.join(found)}")
    wrote = " ".join(report["leaks"])
    for kind in ("cassette", "run.har", "otel.json", "run.html", "kept analysis", "fleet.duckdb",
                 "fleet.html", "fork folder", "why folder", "replay miss"):  # fmt: skip
        assert kind in wrote, kind
    assert report["on_disk"] == [], report["on_disk"]
    # the agent printed every tool answer, and why kept its stdout in the branches' logs (issue
    # 101, session 50, item 2: those logs were searched above)
    assert report["agent_said"] == report["cases"] and report["why_log_lines"] > 0, report


def test_verify_calls_the_run_clean_and_flags_each_class_put_back(report: dict[str, Any]) -> None:
    assert report["verify_clean"] and report["verify_every_file_clean"], report["verify_files"]
    assert report["verify_planted"] and all(report["verify_planted"].values()), report[
        "verify_planted"
    ]


def test_every_redacted_tool_call_replays(report: dict[str, Any]) -> None:
    served, total = report["served"]
    print(f"\nserved {served} of {total} tool HTTP calls")
    assert served == total == report["cases"]
    assert report["replayed_agent_ok"] and report["fork_ok"]
    assert report["miss_said"]
