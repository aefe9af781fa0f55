"""Claude Code and Codex (the versions .npm-agents pins) recorded doing a two-tool task in one
checkout, then forked at turn 1 the next day from a copy of the checkout at another path (issue 44,
must-show 1):

    checkout A (…/a/repo), HOME …/a/home   looptap run -o run.jsonl -- AGENT      → fake #1 (scripted)
    checkout B (…/b/repo), HOME …/b/home   looptap run --from run.jsonl@turn=1 -o branch.jsonl
                                             -- env LD_PRELOAD=libfaketime FAKETIME=+1d AGENT               → fake #2 (scripted)

Turn 0 (the first request: today's date, the working directory, ids in it) is served from the
recording, counted at the fakes: fake #1 gets nothing more and fake #2 never sees a request without
a tool result; the continuation (turns 1 and 2) is live at fake #2, which answers differently, and
the agent finishes. The branch header carries B's cwd and home, the recording's A's
(cassettes.matching).

The date. libfaketime (preloaded: tests.support.clock) moves Claude Code's clock: its ``claude.exe``
(Bun) is linked dynamically, so ``Today's date is …`` says tomorrow. Codex ships a static musl
binary (``x86_64-unknown-linux-musl``, static-pie): no preload reaches it, and its
``<current_date>`` stays today under faketime. So Codex's recording is moved back instead: the date
in its recorded requests is written one day earlier before the fork (same length, bytes replaced in
the file), which is what a recording made yesterday holds.

One recording and one fork per agent (module fixtures) serve every assertion.
"""  # noqa: E501

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from tests.clients.outcome import codex_wrapper
from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, CODEX_CONFIG, explain, need, run_env
from tests.support import progress
from tests.support.clock import LIBFAKETIME, moved, needs_faketime
from tests.support.harness import outputs
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

REPO = Path(__file__).resolve().parents[2]
pytestmark = [needs_recorder]

FILES = {"notes.txt": "alpha: the notes of checkout", "todo.txt": "beta: the todo list"}
SECRET = "sk-fork-elsewhere-0123456789"


def _cwd_of(req: ScriptedRequest) -> str:
    """The working directory the agent says it runs in (Claude Code's environment block)."""
    text = json.dumps(req.body)
    m = re.search(r"Primary working directory: ([^\s\\]+)", text)
    assert m, "no working directory in Claude Code's request"
    return m.group(1)


def claude_route(answer: str) -> Any:
    def route(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done < 2:
            return Reply.tool(
                "Read", {"file_path": f"{_cwd_of(req)}/{list(FILES)[done]}"}, what=f"read:{done}"
            )
        return Reply.say(f"{answer}: read {done} files", what="answer")

    return route


def codex_route(answer: str) -> Any:
    def route(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done < 2:
            return Reply.tool(
                "exec_command", {"cmd": f"cat {list(FILES)[done]}"}, what=f"cat:{done}"
            )
        return Reply.say(f"{answer}: read {done} files", what="answer")

    return route


def checkout(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir(parents=True)
    for name, text in FILES.items():
        (repo / name).write_text(f"{text} {root.name}\n")
    return repo


@dataclass
class Fork:
    """One agent recorded in checkout A and forked in checkout B."""

    agent: str
    run: Path
    branch: Path
    a: Path
    b: Path
    rec: subprocess.CompletedProcess[str]
    proc: subprocess.CompletedProcess[str]
    #: Requests at the origin's fake: while recording, and after the fork.
    origin_log: list[Any]
    origin_after_fork: int
    live_log: list[Any]
    recorded_date: str


def _looptap(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # the recorder imports cassettes/ and proxy/ from this worktree
    env = {**env, "PYTHONPATH": str(REPO)}
    return progress.run(
        [*RECORDER, *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def _upstreams(url: str) -> list[str]:
    return ["--upstream", f"openai={url}", "--upstream", f"anthropic={url}"]


def _fork_agent(agent: str, tmp: Path, command: Any, env_of: Any, route: Any) -> Fork:
    """Record ``command(root)`` in checkout A, fork it at turn 1 in checkout B (a copy at another
    path, another HOME) under ``faketime`` for Claude Code."""
    a, b = tmp / "a", tmp / "b"
    repo_a = checkout(a)
    confdir = tmp / "conf"
    run, branch = tmp / "run.jsonl", tmp / "branch.jsonl"
    with ScriptedUpstream(route("RECORDED"), validate=True) as fake1:
        rec = _looptap(
            [
                "run",
                "-o",
                str(run),
                "--confdir",
                str(confdir),
                *_upstreams(fake1.url),
                "--",
                *command(a),
            ],
            repo_a,
            env_of(a),
        )
        assert rec.returncode == 0, (
            explain(rec) + "\n--- scripted\n" + "\n".join(x.line() for x in fake1.log)
        )
        recorded = len(fake1.log)
        # the date the agent sent (read from its request, not the clock: a run across midnight stays
        # right)
        m = re.search(
            r"(?:Today's date is |<current_date>)(\d{4}-\d{2}-\d{2})",
            json.dumps(fake1.log[0].request.body),
        )
        assert m, f"{agent}'s first request carries no date"
        today = m.group(1)
        # its static binary ignores libfaketime: the recording is made yesterday's (module
        # docstring)
        if agent == "codex":
            yesterday = (dt.date.fromisoformat(today) - dt.timedelta(days=1)).isoformat()
            raw = run.read_bytes()
            tag = f"<current_date>{today}</current_date>".encode()
            assert tag in raw, "the cassette does not hold Codex's <current_date> as sent"
            run.write_bytes(raw.replace(tag, f"<current_date>{yesterday}</current_date>".encode()))
            today = yesterday
        shutil.copytree(repo_a, b / "repo")  # checkout B: the same files, another path
        for name in FILES:
            (b / "repo" / name).write_text((b / "repo" / name).read_text().replace(" a\n", " b\n"))
        with ScriptedUpstream(route("FORKED"), validate=True, ids="b") as fake2:
            cmd = command(b)
            if agent == "claude":  # only the agent's clock moves (tests.support.clock)
                cmd = ["env", *(f"{k}={v}" for k, v in moved("+1d").items()), *cmd]
            proc = _looptap(
                [
                    "run",
                    "--from",
                    f"{run}@turn=1",
                    "-o",
                    str(branch),
                    "--confdir",
                    str(confdir),
                    *_upstreams(fake2.url),
                    "--",
                    *cmd,
                ],
                b / "repo",
                env_of(b),
            )
            live = list(fake2.log)
        return Fork(
            agent,
            run,
            branch,
            repo_a,
            b / "repo",
            rec,
            proc,
            list(fake1.log[:recorded]),
            len(fake1.log),
            live,
            today,
        )


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fork]:
    exe = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    if LIBFAKETIME is None:
        pytest.skip(
            "libfaketime is not installed (apt-get install faketime; "
            ".ci/run installs it when run as root with apt)"
        )

    def command(root: Path) -> list[str]:
        return [
            str(exe),
            "-p",
            "Read notes.txt and todo.txt, then say what they hold.",
            "--model",
            "claude-sonnet-4-5",
            "--output-format",
            "json",
            "--no-session-persistence",
            "--tools",
            "Read",
        ]

    def env_of(root: Path) -> dict[str, str]:
        return run_env(root, ANTHROPIC_API_KEY=SECRET, **CLAUDE_OFFLINE)

    yield _fork_agent(
        "claude", tmp_path_factory.mktemp("fork-claude"), command, env_of, claude_route
    )


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fork]:
    exe = need("@openai/codex", bin_name="codex")
    tmp = tmp_path_factory.mktemp("fork-codex")
    # Codex reads its base URL from config.toml only: a wrapper writes it from OPENAI_BASE_URL (the
    # recorder's listener when recording, the fork's replay server when forking).
    wrapper = codex_wrapper(tmp, exe, CODEX_CONFIG.format(base_url="@OPENAI_BASE_URL@", headers=""))

    def command(root: Path) -> list[str]:
        return [
            str(wrapper),
            "exec",
            "--skip-git-repo-check",
            "Read notes.txt and todo.txt, then say what they hold.",
        ]

    def env_of(root: Path) -> dict[str, str]:
        # CODEX_HOME where Codex puts it by default (~/.codex): its skills listing names it, under
        # <home>
        return run_env(root, CODEX_HOME=str(root / "home" / ".codex"), LOOPTAP_CODEX_KEY=SECRET)

    yield _fork_agent("codex", tmp, command, env_of, codex_route)


def _check_fork(f: Fork) -> None:
    why = (
        f"{f.agent}: "
        + explain(f.proc)
        + "\n--- live fake\n"
        + "\n".join(x.line() for x in f.live_log)
    )
    # recorded: three requests (two tool calls, then the answer), in checkout A
    assert [len(x.request.tool_results()) for x in f.origin_log] == [0, 1, 2], explain(f.rec)
    header = open_run(f.run).header
    assert (
        header is not None
        and header["meta"]["cwd"] == str(f.a)
        and header["meta"]["home"] == str(f.a.parent / "home")
    )
    # the fork: the prefix (turn 0) served, nothing more at the origin's fake, no turn 0 at the live
    # one
    assert f.proc.returncode == 0, why
    assert f.origin_after_fork == len(f.origin_log), why
    assert f.live_log and all(len(x.request.tool_results()) >= 1 for x in f.live_log), why
    # the continuation live: turn 1 (its tool run in checkout B) and the answer, from the new model
    assert [x.reply.what for x in f.live_log if x.reply is not None] == [
        f"{'read' if f.agent == 'claude' else 'cat'}:1",
        "answer",
    ], why
    assert "FORKED: read 2 files" in f.proc.stdout, why
    assert "RECORDED" not in f.proc.stdout
    last = f.live_log[-1].request
    # read in checkout B
    assert any(f"{FILES['todo.txt']} b" in r for r in last.tool_results()), (
        why,
        last.tool_results(),
    )
    # what the prefix tolerated: the date and the working directory (the replay server's report)
    assert (
        "1 recorded round trip answered a request that differed only in what was tolerated"
        in f.proc.stderr
    ), why
    branch = open_run(f.branch)
    assert (
        branch.header is not None
        and branch.header["meta"]["cwd"] == str(f.b)
        and branch.header["meta"]["home"] == str(f.b.parent / "home")
    )
    assert len(branch.exchanges) == len(f.live_log)  # the branch records what went live
    # ... and the branch and `show` list them, each by the detector that tolerated it
    show = progress.run(
        [*RECORDER, "show", str(f.branch)], env=clean_env(), capture_output=True, text=True
    )
    assert show.returncode == 0, show.stderr[-2000:]
    assert "tolerated in the prefix (--prefix strict)" in show.stdout, show.stdout[-4000:]
    tolerated = [ln for ln in show.stdout.splitlines() if ln.strip().startswith("tolerated at ")]
    assert any("(by cwd)" in ln or "(by cwd, " in ln for ln in tolerated), tolerated
    assert any(re.search(r"\(by date(time)?[,)]", ln) for ln in tolerated), tolerated
    assert SECRET.encode() not in f.run.read_bytes() + f.branch.read_bytes()
    _check_diff(f)


def _check_diff(f: Fork) -> None:
    """``looptap diff run branch`` compares the live turns with the recording's as the prefix was
    matched (each run's own cwd and home, the detectors): no C divergence (folded ones included)
    differs only in the checkout, the home or the date; those are listed as tolerated."""
    from looptap.cassettes.matching._detectors import slug

    diff = progress.run(
        [*RECORDER, "diff", "--json", str(f.run), str(f.branch)],
        env={**clean_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert diff.returncode in (0, 1), diff.stderr[-2000:]
    doc = json.loads(diff.stdout)
    places = [
        (str(f.b), str(f.a)),
        (str(f.b.parent / "home"), str(f.a.parent / "home")),
        (slug(str(f.b)), slug(str(f.a))),
    ]

    def here(value: Any) -> str:  # B's value as it reads in checkout A on the recording's day
        text = json.dumps(value)
        for b, a in places:
            text = text.replace(b, a)
        return re.sub(r"\d{4}-\d{2}-\d{2}", "<date>", text)

    divs = [d for top in doc["divergences"] for d in (top, *top.get("folded", []))]
    only_places = [
        d
        for d in divs
        if d["layer"] == "C"
        and d["changes"]
        and all(here(c["a"]) == here(c["b"]) for c in d["changes"])
    ]
    assert not only_places, json.dumps(only_places, indent=1)[-4000:]
    past = [e for t in doc.get("tolerated", []) if "seq_b" in t for e in t["tolerated"]]
    assert any(e["by"] == "cwd" for e in past), (doc.get("tolerated"), divs)


@needs_faketime
def test_claude_code_forked_next_day_in_another_checkout(claude: Fork) -> None:
    _check_fork(claude)
    result = outputs(claude.proc)[-1]  # the agent finished, on the live model's answer
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "FORKED: read 2 files",
    ), result
    assert f"Today's date is {claude.recorded_date}." in json.dumps(
        claude.origin_log[0].request.body
    )
    sent = re.search(
        r"Today's date is (\d{4}-\d{2}-\d{2})", json.dumps(claude.live_log[0].request.body)
    )
    assert sent and dt.date.fromisoformat(sent.group(1)) > dt.date.fromisoformat(
        claude.recorded_date
    ), "libfaketime did not move Claude Code's clock"
    assert f"Primary working directory: {claude.b}" in json.dumps(claude.live_log[0].request.body)


def test_codex_forked_next_day_in_another_checkout(codex: Fork) -> None:
    _check_fork(codex)
    live = json.dumps(codex.live_log[0].request.body)
    sent = re.search(r"<current_date>(\S+)</current_date>", live)
    assert (
        f"<cwd>{codex.b}</cwd>" in live
        and sent
        and dt.date.fromisoformat(sent.group(1)) > dt.date.fromisoformat(codex.recorded_date)
    )
    assert f"<current_date>{codex.recorded_date}</current_date>" in codex.run.read_text()
