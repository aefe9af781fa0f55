"""``looptap textconv``: a stable line-per-item rendering, and ``git diff`` through it as a real git
diff driver in a temporary repository."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cassettes.cli import main
from cassettes.interop.run import Run, load_run
from cassettes.interop.textconv import render
from cassettes.store import CassetteWriter
from tests.interop.helpers import REPO


def test_rendering_is_line_per_item_and_free_of_churn(demo_run: Run, demo_cassette: Path, tmp_path: Path) -> None:
    lines = list(render(demo_run))
    assert lines == list(render(load_run(demo_cassette)))
    text = "\n".join(lines)
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text)  # no timestamps
    assert "cost" not in text and "looptap 0." not in text  # no costs (prices change), no writer version
    assert all("\n" not in line for line in lines)
    assert "#4 c2 turn 1 anthropic claude-sonnet-4-5 → claude-sonnet-4-5-20250929 json POST api.anthropic.com/v1/messages 200" in lines
    assert "  history: 1 kept, 2 appended (extends)" in lines
    assert '  < assistant tool_call stock_lookup id=toolu_014b9i18P8JdeixyRCGWwgBa: {"ticker":"AAPL"}' in lines
    assert any(line.startswith("  ▲ E E.arguments_schema: The arguments of `stock_lookup`") for line in lines)
    # a cassette re-written at another time (new header, same run) renders the same
    again = tmp_path / "again.jsonl"
    with CassetteWriter(again, meta={"source": "copy"}) as w:
        for ex in load_run(demo_cassette).exchanges:
            w.append(ex)
    assert list(render(load_run(again))) == lines


def test_each_message_appears_once(demo_run: Run) -> None:
    lines = list(render(demo_run))
    first_user = [line for line in lines if "user text: What is the current exchange rate from USD to EUR?" in line]
    assert len(first_user) == 1  # sent in three requests, listed where it was appended


def test_a_file_that_is_not_a_cassette_passes_through(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    other = tmp_path / "events.jsonl"
    other.write_bytes(b'{"event": 1}\n{"event": 2}\n')
    assert main(["textconv", str(other)]) == 0
    assert capsysbinary.readouterr().out == other.read_bytes()


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True, timeout=120).stdout


def _rewrite_tool_result(src: Path, dest: Path, old: str, new: str) -> None:
    """The same run, except one tool result the client sent (from that turn on)."""
    with CassetteWriter(dest, meta={"source": "edited"}) as w:
        for ex in load_run(src).exchanges:
            body = ex.request_json()
            text = orjson.dumps(body).decode().replace(old, new)
            ex.request_body = text.encode()
            ex.forget_request_json()
            w.append(ex)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_diff_through_the_driver_shows_the_changed_message(demo_cassette: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitattributes").write_text("*.jsonl diff=looptap\n")
    # the README's registration, with this interpreter standing in for the `looptap` script
    _git(repo, "config", "diff.looptap.textconv", f"{sys.executable} -m cassettes.cli textconv")
    run_file = repo / "run.jsonl"
    shutil.copy(demo_cassette, run_file)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "recorded run")
    edited = tmp_path / "edited.jsonl"
    _rewrite_tool_result(demo_cassette, edited, "1 USD = 0.92 EUR", "1 USD = 0.95 EUR")
    shutil.copy(edited, run_file)
    env_pp = {"PYTHONPATH": str(REPO)}
    diff = subprocess.run(
        ["git", "-c", "core.pager=cat", "diff", "--no-color", "-U0"], cwd=repo, capture_output=True, text=True, check=True, timeout=120,
        env={**env_pp, "HOME": str(repo), "PATH": "/usr/bin:/bin:/usr/local/bin", "GIT_CONFIG_NOSYSTEM": "1"},
    ).stdout
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == [
        "-  > [4] user tool_result get_exchange_rate id=toolu_01AkhyaNEd3ZiaheHj6DiYEv: 1 USD = 0.92 EUR",
        "+  > [4] user tool_result get_exchange_rate id=toolu_01AkhyaNEd3ZiaheHj6DiYEv: 1 USD = 0.95 EUR",
    ], diff
    # without the driver the same change is one long JSON line per touched record
    raw = subprocess.run(["git", "-c", "core.pager=cat", "diff", "--no-color", "--no-textconv", "-U0"], cwd=repo,
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert any(len(line) > 500 for line in raw.splitlines() if line.startswith("+"))
