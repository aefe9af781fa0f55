"""``looptap textconv``: a stable line-per-item rendering, and ``git diff`` through it as a real git
diff driver in a temporary repository."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.interop import render
from looptap.cassettes.reading import Run, open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.support import progress
from tests.support.analysed import cli_run


def test_rendering_is_line_per_item_and_free_of_churn(
    demo_run: Run, demo_cassette: Path, tmp_path: Path
) -> None:
    lines = list(render(demo_run))
    assert lines == list(render(open_run(demo_cassette)))
    text = "\n".join(lines)
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text)  # no timestamps
    # no costs (prices change), no writer version
    assert "cost" not in text and "looptap 0." not in text
    assert all("\n" not in line for line in lines)
    assert (
        "#4 c2 turn 1 anthropic claude-sonnet-4-5 → claude-sonnet-4-5-20250929 json POST "
        "api.anthropic.com/v1/messages 200" in lines
    )
    assert "  history: 1 kept, 2 appended (extends)" in lines
    # ids as looptap diff compares them
    assert '  < assistant tool_call stock_lookup id=<id:4>: {"ticker":"AAPL"}' in lines
    assert (
        '  < assistant tool_call stock_lookup id=toolu_014b9i18P8JdeixyRCGWwgBa: {"ticker":"AAPL"}'
        in list(render(demo_run, raw_ids=True))
    )
    assert any(
        line.startswith("  ▲ E E.arguments_schema: The arguments of `stock_lookup` (call <id:4>)")
        for line in lines
    )
    assert any(
        line.startswith("  ▲ E E.arguments_schema: The arguments of `stock_lookup`")
        for line in lines
    )
    # a cassette re-written at another time (new header, same run) renders the same
    again = tmp_path / "again.jsonl"
    with CassetteWriter(again, meta={"source": "copy"}) as w:
        for ex in open_run(demo_cassette).exchanges:
            w.append(ex)
    assert list(render(open_run(again))) == lines


def test_each_message_appears_once(demo_run: Run) -> None:
    lines = list(render(demo_run))
    first_user = [
        line
        for line in lines
        if "user text: What is the current exchange rate from USD to EUR?" in line
    ]
    assert len(first_user) == 1  # sent in three requests, listed where it was appended


def test_a_file_that_is_not_a_cassette_passes_through(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    other = tmp_path / "events.jsonl"
    other.write_bytes(b'{"event": 1}\n{"event": 2}\n')
    assert main(["textconv", str(other)]) == 0
    assert capsysbinary.readouterr().out == other.read_bytes()


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    return progress.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout


def _rewrite_tool_result(src: Path, dest: Path, old: str, new: str) -> None:
    """The same run, except one tool result the client sent (from that turn on)."""
    with CassetteWriter(dest, meta={"source": "edited"}) as w:
        for ex in open_run(src).exchanges:
            body = ex.request_json()
            text = orjson.dumps(body).decode().replace(old, new)
            ex.request_body = text.encode()
            ex.forget_request_json()
            w.append(ex)


def _git_diff(repo: Path, *extra: str) -> str:
    """``git diff`` with a PATH on which no ``looptap`` exists: the driver must not need it."""
    return progress.run(
        ["git", "-c", "core.pager=cat", "diff", "--no-color", "-U0", *extra],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(repo), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"},
    ).stdout


def _installed_repo(tmp_path: Path, cassette: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    # the documented registration, run as written (from this environment, wherever it lives)
    out = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "textconv", "--install"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "git diff now shows cassettes through" in out.stdout
    assert (repo / ".gitattributes").read_text() == "*.jsonl diff=looptap\n"
    assert _git(repo, "config", "diff.looptap.textconv").strip().startswith(sys.executable)
    run_file = repo / "run.jsonl"
    shutil.copy(cassette, run_file)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "recorded run")
    return repo, run_file


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_diff_through_the_driver_shows_the_changed_message(
    demo_cassette: Path, tmp_path: Path
) -> None:
    repo, run_file = _installed_repo(tmp_path, demo_cassette)
    edited = tmp_path / "edited.jsonl"
    _rewrite_tool_result(demo_cassette, edited, "1 USD = 0.92 EUR", "1 USD = 0.95 EUR")
    shutil.copy(edited, run_file)
    diff = _git_diff(repo)
    changed = [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    # the changed result, and what it changes in the analysis: the model's answer still says 0.92,
    # now found in no result (E.ungrounded_claim, info), so the header counts one finding more
    assert changed == [
        "-looptap cassette, format 1: 11 round trips, 4 conversations, 4 findings",
        "+looptap cassette, format 1: 11 round trips, 4 conversations, 5 findings",
        "-  > [4] user tool_result get_exchange_rate id=<id:2>: 1 USD = 0.92 EUR",
        "+  > [4] user tool_result get_exchange_rate id=<id:2>: 1 USD = 0.95 EUR",
        "+  · E E.ungrounded_claim: The model's answer brings 2 claims found in no message, tool "
        "result or prompt it was given: '0.92 EUR', '0.92 Euros'.",
    ], diff
    # without the driver the same change is one long JSON line per touched record
    raw = _git_diff(repo, "--no-textconv")
    assert any(len(line) > 500 for line in raw.splitlines() if line.startswith("+"))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_rerecording_with_new_ids_shows_no_diff(demo_cassette: Path, tmp_path: Path) -> None:
    """Issue 16: against a real API every re-recording gets new tool-call ids; `looptap diff`
    says such runs do not diverge, and now the git diff agrees. A changed pairing still shows."""
    repo, run_file = _installed_repo(tmp_path, demo_cassette)
    ids = sorted(
        {
            m
            for ex in open_run(demo_cassette).exchanges
            for m in re.findall(rb"toolu_[A-Za-z0-9]+", ex.request_body + ex.response_body)
        }
    )
    assert len(ids) >= 4
    renamed = tmp_path / "renamed.jsonl"
    with CassetteWriter(renamed, meta={"source": "re-recorded"}) as w:
        for ex in open_run(demo_cassette).exchanges:
            for i, old in enumerate(ids):
                new = f"toolu_RERECORDED{i:04d}xyz".encode()
                ex.request_body = ex.request_body.replace(old, new)
                ex.response_chunks = [(t, c.replace(old, new)) for t, c in ex.response_chunks]
            ex.forget_request_json()
            w.append(ex)
    shutil.copy(renamed, run_file)
    assert _git_diff(repo) == "", "the same run with other ids must not diff"
    assert "toolu_RERECORDED" in _git_diff(repo, "--no-textconv")  # the bytes did change
    raw = cli_run("textconv", "--raw-ids", str(run_file))  # (the driver's processes: above)
    assert raw.returncode == 0, raw.stderr
    assert "id=toolu_RERECORDED0000xyz" in raw.stdout
