"""Forks of Responses-API agents that chain their turns with ``previous_response_id``, over HTTP
(issue 42): the openai SDK's loop (streamed and not) and openai-agents' ``Runner`` with
``auto_previous_response_id``, recorded through ``looptap run`` against one scripted model and
forked at turn 1 and at turn 2 onto another. Both fakes answer as the API does: a
``previous_response_id`` naming an answer the fake never gave is a 400
``previous_response_not_found``, so a replayed (recorded) id sent live fails there.

The fork sends the turn at the cursor self-contained (the recorded chain's items as its input, no
id); after it the agent chains to the live model's own ids, which go as they are. Requests are
counted at both fakes; waits are by progress, never timed.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.replay.test_fork import origin_route  # the recorded model, as test_fork_edits takes it
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

AGENT = Path(__file__).with_name("responses_agent.py")
LABELS = ("sdk", "sdk-stream", "agents")


def new_model_route(req: ScriptedRequest) -> Reply:
    """The model forked onto: another city at turn 1, another answer after."""
    if len(req.tool_results()) == 1:
        return Reply.tool("get_weather", {"city": "Nice"})
    return Reply.say("NEW MODEL: warm everywhere.")


def _env() -> dict[str, str]:
    return clean_env(OPENAI_API_KEY="sk-test-fork-responses")


def _label(req: ScriptedRequest) -> str:
    text = orjson.dumps(req.messages).decode()
    return next(label for label in sorted(LABELS, key=len, reverse=True) if f"[{label}]" in text)


@pytest.fixture(scope="module")
def origin(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, ScriptedUpstream, Path]]:
    """RUN.jsonl: the three agents recorded through ``looptap run`` against the origin fake."""
    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    pytest.importorskip("agents")
    tmp = tmp_path_factory.mktemp("fork-responses")
    confdir = tmp / "conf"
    run = tmp / "run.jsonl"
    with ScriptedUpstream(origin_route, validate=True) as fake:
        proc = progress.run(
            [
                *RECORDER,
                "run",
                "-o",
                str(run),
                "--confdir",
                str(confdir),
                "--upstream",
                f"openai={fake.url}",
                "--",
                sys.executable,
                str(AGENT),
            ],
            env=_env(),
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        # 3 agents x 3 turns, chained
        assert [x.status for x in fake.log] == [200] * 9, [x.line() for x in fake.log]
        assert sum(1 for x in fake.log if x.request.body.get("previous_response_id")) == 6
        yield run, fake, confdir


def _fork(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path: Path, cursor: str
) -> tuple[object, Path, ScriptedUpstream]:
    run, _, confdir = origin
    branch = tmp_path / "branch.jsonl"
    with ScriptedUpstream(new_model_route, validate=True, ids="live") as fake2:
        argv = [
            *RECORDER,
            "run",
            "--from",
            f"{run}@{cursor}",
            "-o",
            str(branch),
            "--confdir",
            str(confdir),
            "--upstream",
            f"openai={fake2.url}",
            "--",
            sys.executable,
            str(AGENT),
        ]
        proc = progress.run(argv, env=_env(), capture_output=True, text=True, cwd=tmp_path)
    return proc, branch, fake2


@pytest.fixture(scope="module")
def forks(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Any]:
    """``forks(cursor)``: :func:`_fork` run once a module however many tests read it (a recorder
    and the agent each)."""
    return functools.cache(lambda at: _fork(origin, tmp_path_factory.mktemp("fork"), at))


@needs_recorder
@pytest.mark.parametrize(
    "turn",
    [
        1,
        pytest.param(
            2,
            marks=pytest.mark.slow(
                reason="a second cursor over the same self-contained rewrite: turn 1's fork also "
                "shows the chaining to the live model's ids after the cursor, which turn 2's has "
                "none of"
            ),
        ),
    ],
)
def test_a_chained_responses_agent_forks_over_http(
    origin: tuple[Path, ScriptedUpstream, Path], forks: Callable[[str], Any], turn: int
) -> None:
    run, fake1, _ = origin
    before = len(fake1.log)
    proc, branch, fake2 = forks(f"turn={turn}")
    out, err = proc.stdout, proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 0, err[-4000:]  # type: ignore[attr-defined]
    assert len(fake1.log) == before  # the prefix reached no upstream
    # every live turn answered 200: none carried an id the live model never gave
    assert [x.status for x in fake2.log] == [200] * len(fake2.log), [x.line() for x in fake2.log]
    # turn 1: Nice, then the answer; turn 2: the answer
    assert len(fake2.log) == 3 * (3 - turn), [x.line() for x in fake2.log]
    for label in LABELS:
        assert f"{label}: NEW MODEL: warm everywhere." in out, out
        mine = [x.request for x in fake2.log if _label(x.request) == label]
        first, later = mine[0], mine[1:]
        # at the cursor: self-contained, the recorded chain's items its input
        assert "previous_response_id" not in first.body and len(first.tool_results()) == turn, (
            first.body
        )
        assert first.user_texts() == [f"[{label}] Weather in three cities?"]
        # after it: chained to the live model's own answers, sent as the agent sent them
        for x in later:
            assert str(x.body.get("previous_response_id", "")).startswith("resp_slive"), x.body
    # one per agent: its turn at the cursor
    assert "3 requests sent self-contained" in err, err[-3000:]
    diff = cli_run("diff", str(run), str(branch))
    assert diff.returncode == 1, diff.stdout + diff.stderr
    first_line = next(ln for ln in diff.stdout.splitlines() if ln.strip().startswith("turn "))
    assert (
        first_line.strip().startswith(f"turn {turn}")
        and "E: the model emitted something else" in first_line
    ), diff.stdout
    # the rewrite is not a difference of the client
    assert "C: " not in diff.stdout.split(f"turn {turn}")[1].splitlines()[0], diff.stdout


def three_views(run: Path, branch: Path, roots: list[Path]) -> list[tuple[object, ...]]:
    """The divergences of ``branch`` from ``run`` as ``looptap diff --json`` lists them, checked to
    be those MCP's ``fork_diff`` and the inspector's Fork tab list, turn for turn; and the
    tolerated turns of the three alike."""
    from looptap.cassettes.mcp.query import Runs, fork_diff
    from looptap.cassettes.replay.forking.forkview import fork_view

    diff = cli_run("diff", "--json", str(run), str(branch))  # (in this process: what it says)
    assert diff.returncode in (0, 1), diff.stdout + diff.stderr
    doc = orjson.loads(diff.stdout)
    cli = sorted(
        (d["seq_a"], d["seq_b"], f"{d['layer']}: {d['message']}") for d in doc["divergences"]
    )
    answer = fork_diff(Runs([str(r) for r in roots]), str(branch), None, None, 200, 10**6)
    mcp = sorted(
        (d["seq_origin"], d["seq_branch"], f"{d['layer']}: {d['recorded_message']}")
        for d in answer["recorded"]["divergences"]
    )
    view = fork_view(branch)
    assert view is not None
    tab = sorted(
        (r.origin_seq, r.branch_seq, line)
        for r in view.rows
        for line in r.divergences
        if not line.startswith("↳")
    )
    assert (mcp == cli, tab == cli) == (True, True), (mcp, tab, cli)
    tolerated = sum(len(t["tolerated"]) for t in doc.get("tolerated", []))
    assert answer["tolerated"] == tolerated, (answer["tolerated"], doc.get("tolerated"))
    assert sum(len(r.tolerated) for r in view.rows) == tolerated, view.rows
    return cli


@needs_recorder
def test_the_fork_tab_and_mcp_fork_diff_see_the_chained_turn_as_looptap_diff_does(
    origin: tuple[Path, ScriptedUpstream, Path], forks: Callable[[str], Any]
) -> None:
    """The turn at the cursor continued a replayed answer, so the fork sent it self-contained:
    ``looptap diff`` compares the origin's turn in that form (no C there), and the inspector's
    Fork tab and MCP's ``fork_diff`` find the same divergences, turn for turn."""
    run, _, _ = origin
    proc, branch, _ = forks("turn=1")  # (the fork of the test above)
    assert proc.returncode == 0, proc.stderr[-4000:]  # type: ignore[attr-defined]
    cli = three_views(run, branch, [run.parent, branch.parent])
    assert cli and not [d for d in cli if str(d[2]).startswith("C: ")], cli
