"""Prefix modes of a fork (issue 44, items 3 and 4): a tool-using agent on the real openai SDK whose
tool lists a directory is recorded through ``looptap run``; then the directory changes and the run
is forked at a later turn. In the tolerant mode the prefix is served in position (0 requests at the
origin's upstream, counted at the fake), the changed tool results are listed (the replay log, the
branch, ``show``, ``show --json``, ``diff``) and the continuation is live. Strict fails closed
naming the tool result; ``@divergence`` goes live at the first changed turn; a changed user
instruction fails closed in the tolerant mode too.

One recording per module; each fork is one ``looptap run --from``, run once however many tests
read it. Waits are by progress.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.replay.conftest import fork_agent
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

AGENT = Path(__file__).with_name("listing_agent.py")
pytest_plugins = ["pytester"]
FOLDERS = ("docs", "src", "docs")


def route(req: ScriptedRequest) -> Reply:
    """The recorded model: list docs, src, docs again, then answer with what it read."""
    n = len(req.tool_results())
    if n < len(FOLDERS):
        return Reply.tool("list_files", {"folder": FOLDERS[n]})
    return Reply.say(f"{len(req.tool_results()[-1].split())} files in docs")


def live_route(req: ScriptedRequest) -> Reply:
    return Reply.say(f"LIVE: {req.tool_results()[-1].split()[-1]} is the last file in docs")


def _env(root: Path, **extra: str) -> dict[str, str]:
    return clean_env(OPENAI_API_KEY="sk-test-tolerant", LISTING_ROOT=str(root), **extra)


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, ScriptedUpstream, Path, Path]]:
    """RUN.jsonl (4 turns: three listings, then the answer) recorded against the first fake; then
    the directory changes (a file added to docs): what the agent's tool now returns differs."""
    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    tmp = tmp_path_factory.mktemp("tolerant")
    root = tmp / "project"
    for name in ("docs/a.md", "docs/b.md", "src/main.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    run, confdir = tmp / "run.jsonl", tmp / "conf"
    with ScriptedUpstream(route, validate=True) as fake:
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
            env=_env(root),
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert len(fake.log) == 4 and "answer: 2 files in docs" in proc.stdout
        (root / "docs" / "c.md").write_text("new")  # the world changed after the recording
        yield run, fake, confdir, root


def _fork(
    recorded: tuple[Path, ScriptedUpstream, Path, Path],
    tmp_path: Path,
    at: str,
    *extra: str,
    model: object = live_route,
    **env: str,
) -> tuple[object, Path, ScriptedUpstream]:
    run, _, confdir, root = recorded
    branch = tmp_path / "branch.jsonl"
    with ScriptedUpstream(model, validate=True) as live:  # type: ignore[arg-type]
        proc = progress.run(
            [
                *RECORDER,
                "run",
                "--from",
                f"{run}@{at}",
                *extra,
                "-o",
                str(branch),
                "--confdir",
                str(confdir),
                "--upstream",
                f"openai={live.url}",
                "--",
                sys.executable,
                str(AGENT),
            ],
            env=_env(root, **env),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
    return proc, branch, live


Fork = Callable[..., tuple[object, Path, ScriptedUpstream]]


@pytest.fixture(scope="module")
def forks(
    recorded: tuple[Path, ScriptedUpstream, Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Fork:
    """``forks(at, *options, model=..., **env)``: :func:`_fork` run once a module however many
    tests read it (a recorder and the agent each); the recording's fake must stay at its 4."""

    @functools.cache  # (on a key of its own: the cache tells model=live_route from no model)
    def made(at: str, extra: tuple[str, ...], model: object, env: tuple[tuple[str, str], ...]) -> Any:  # noqa: E501
        where = tmp_path_factory.mktemp("fork")
        return _fork(recorded, where, at, *extra, model=model, **dict(env))

    def fork(at: str, *extra: str, model: object = live_route, **env: str) -> Any:
        return made(at, extra, model, tuple(sorted(env.items())))

    return fork


def _looptap(*args: str) -> object:
    """A command about the fork's outcome, in this process (its wiring is tested elsewhere)."""
    return cli_run(*args)


@needs_recorder
@pytest.mark.slow(
    reason=(
        "two forks through the recorder (about 5 s of CPU): the tolerant prefix's logic runs "
        "in the process in test_tolerance.py, and through the pytest plugin's fork in "
        "test_a_pytest_fork_takes_prefix_and_divergence"
    )
)
def test_the_tolerant_prefix_serves_changed_tool_results_in_position_and_lists_them(
    recorded: tuple[Path, ScriptedUpstream, Path, Path], forks: Fork
) -> None:
    run, fake, _, _ = recorded
    proc, branch, live = forks("turn=3", "--prefix", "tolerant")
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 0, err[-4000:]  # type: ignore[attr-defined]
    assert len(fake.log) == 4  # the prefix (turns 0-2) reached no upstream (the recording's 4)
    # the continuation, live
    assert len(live.log) == 1 and len(live.log[0].request.tool_results()) == 3
    assert "LIVE: c.md is the last file in docs" in proc.stdout  # type: ignore[attr-defined]
    # the replay log: two round trips served in position, each changed listing said with its rule
    assert "2 recorded round trips served in position in the tolerant prefix" in err, err
    assert (
        'tolerated at c1/turn 1 (seq 1): messages[3].content: recorded "a.md\\nb.md", live '
        '"a.md\\nb.md\\nc.md" (by tool_result)' in err
    ), err
    assert "tolerated at c1/turn 2 (seq 2): messages[3].content" in err, err
    # the branch keeps them (its note record), with the prefix mode in its header
    from looptap.cassettes.reading import fork_notes, origin_of

    o = origin_of(branch)
    assert o is not None and o["prefix"] == "tolerant"
    notes = fork_notes(branch)["tolerated"]
    assert [(t["conversation"], t["turn"]) for t in notes] == [("c1", 1), ("c1", 2)]
    assert notes[0]["tolerated"] == [
        {
            "path": "messages[3].content",
            "by": "tool_result",
            "recorded": "a.md\nb.md",
            "live": "a.md\nb.md\nc.md",
        }
    ]
    # show: the tolerated section, text and JSON
    show = _looptap("show", str(branch))
    assert show.returncode == 0, show.stderr  # type: ignore[attr-defined]
    assert (
        "tolerated in the prefix (--prefix tolerant)" in show.stdout
        and "c1/turn 1 (seq 1): messages[3].content" in show.stdout
    ), show.stdout  # type: ignore[attr-defined]
    js = [orjson.loads(ln) for ln in _looptap("show", str(branch), "--json").stdout.splitlines()]  # type: ignore[attr-defined]
    assert len(js) == 1 and js[0]["turn"] == 3
    assert [
        (t["turn"], t["tolerated"][0]["path"], t["tolerated"][0]["by"]) for t in js[0]["tolerated"]
    ] == [(1, "messages[3].content", "tool_result"), (2, "messages[3].content", "tool_result")]
    # diff: the changed results listed as tolerated, not as divergences of the client
    diff = _looptap("diff", str(run), str(branch))
    out = diff.stdout  # type: ignore[attr-defined]
    assert "tolerated at c1/turn 1 (seq 1): messages[3].content" in out, out
    assert "C: the tool result" not in out, out
    dj = orjson.loads(_looptap("diff", str(run), str(branch), "--json").stdout)  # type: ignore[attr-defined]
    assert [t["turn"] for t in dj["tolerated"]] >= [1, 2], dj
    assert not [d for d in dj["divergences"] if d["layer"] == "C"], dj


@needs_recorder
@pytest.mark.slow(
    reason=(
        "two forks through the recorder (about 5 s of CPU): strict and @divergence run in the "
        "process in test_tolerance.py, and through the pytest plugin's fork in "
        "test_a_pytest_fork_takes_prefix_and_divergence"
    )
)
def test_strict_fails_closed_on_the_changed_tool_result_and_divergence_goes_live_there(
    recorded: tuple[Path, ScriptedUpstream, Path, Path], forks: Fork
) -> None:
    _, fake, _, _ = recorded
    proc, _, live = forks("turn=3")
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 1 and not live.log and len(fake.log) == 4, err[-3000:]
    assert (
        "closest recorded turn: conversation c1, turn 1 (seq 1)" in err
        and "C: the tool result for call_s0001 changed (messages[3].content)" in err
    ), err
    # @divergence: the prefix served up to the first changed turn, live from it on
    # the live model goes on listing
    proc, branch, live = forks("divergence", model=route)
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 0, err[-3000:]
    assert len(fake.log) == 4
    assert [len(x.request.tool_results()) for x in live.log] == [1, 2, 3]
    assert "live in c1: turns 1, 2, 3" in err, err
    from looptap.cassettes.reading import fork_notes

    assert fork_notes(branch)["starts"] == {"c1": [1, 1]}
    show = _looptap("show", str(branch), "--json")
    assert [orjson.loads(ln)["turn"] for ln in show.stdout.splitlines()] == [1, 2, 3], show.stdout  # type: ignore[attr-defined]


@needs_recorder
@pytest.mark.slow(
    reason=(
        "reads the strict fork through the recorder: what a missed prefix keeps for rules "
        "propose is shown in the process by test_rules_propose.py"
    )
)
def test_a_prefix_that_missed_keeps_what_the_agent_sent_for_the_rule_proposal(
    recorded: tuple[Path, ScriptedUpstream, Path, Path], forks: Fork
) -> None:
    """Issue 44 item 5 ("or a failed replay") for a fork: the strict prefix misses on the changed
    listing; what the agent sent is kept, and the fork says the next steps: the proposal from the
    recording and it (the listing is a tool's result: listed, never proposed), the prefix modes."""
    run, fake, _, _ = recorded
    proc, _, live = forks("turn=3")  # (the strict fork of the test above)
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 1 and not live.log and len(fake.log) == 4, err[-3000:]  # type: ignore[attr-defined]
    said = re.search(
        r"what the agent sent: (\S+); rules that would make it match, if what differs is volatile: "
        r"looptap rules propose (\S+) (\S+)\n",
        err,
    )
    assert said is not None, err
    kept = Path(said.group(1))
    assert Path(said.group(2)).resolve() == run.resolve() and said.group(3) == str(kept)
    assert (
        "--prefix tolerant answers a request that differs only in tool results with its recorded "
        f"turn; --from {said.group(2)}@divergence goes live" in err
    ), err
    from looptap.cassettes.reading import open_run

    sent = open_run(kept, whole=True).exchanges
    # the miss, as the agent sent it
    assert [ex.request_json()["messages"][3]["content"] for ex in sent[1:]] == ["a.md\nb.md\nc.md"]
    assert "sk-test-tolerant" not in kept.read_text()  # redacted as every cassette is
    proposed = _looptap("rules", "propose", said.group(2), said.group(3))
    out = proposed.stdout  # type: ignore[attr-defined]
    assert proposed.returncode == 1, out + proposed.stderr  # type: ignore[attr-defined]
    assert (
        "c1 turn 1 messages[3].content" in out
        and "in the result of tool list_files" in out
        and "a real divergence: not proposed" in out
    ), out
    assert "still diverging:\n  c1 turn 1 at messages[3].content" in out, out


@needs_recorder
@pytest.mark.slow(
    reason=(
        "a fork of its own (about 3 s of CPU): anything but a tool result fails closed in the "
        "process in test_tolerance.py's test_anything_else_the_model_reads_is_not_tolerated"
    )
)
def test_a_changed_user_instruction_fails_closed_in_the_tolerant_prefix(
    recorded: tuple[Path, ScriptedUpstream, Path, Path], forks: Fork
) -> None:
    _, fake, _, _ = recorded
    ask = "Which files does the project have? Delete them."
    proc, _, live = forks("turn=3", "--prefix", "tolerant", LISTING_ASK=ask)
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 1 and not live.log and len(fake.log) == 4, err[-3000:]
    assert "C: the user input at messages[1] changed" in err, err
    assert "served in position" not in err


# -- from a pytest test: the marker's prefix= and fork="divergence" --------------------------------

#: The world changed: the recording's tool answered "sunny, 21 C".
PYTEST_FORK = fork_agent("rainy, 9 C") + '''
@pytest.mark.looptap("cassettes/loop.jsonl", fork=os.environ["FORK_AT"], prefix=os.environ["FORK_PREFIX"], live={"openai": os.environ["FAKE_LIVE"]})
def test_forked(looptap):
    assert agent() == "LIVE"
'''  # noqa: E501


def _three_turns() -> list[object]:
    """A weather loop of three turns: two calls (each result "sunny, 21 C"), then the answer."""
    from tests.replay.conftest import CALL, RESULT, SYSTEM, USER, chat_exchange, chat_response

    call2 = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_B2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Lyon"}'},
            }
        ],
    }
    result2 = {"role": "tool", "tool_call_id": "call_B2", "content": "sunny, 21 C"}
    return [
        chat_exchange(
            [SYSTEM, USER], chat_response(call=("call_A1", "get_weather", '{"city":"Paris"}'))
        ),
        chat_exchange(
            [SYSTEM, USER, CALL, RESULT],
            chat_response(call=("call_B2", "get_weather", '{"city":"Lyon"}')),
        ),
        chat_exchange([SYSTEM, USER, CALL, RESULT, call2, result2], chat_response("It is sunny.")),
    ]


@pytest.mark.parametrize(("at", "prefix", "outcome", "live_turns"), [
    # turn 1 served in position, its changed result listed
    ("turn=2", "tolerant", "passed", [2]),
    ("divergence", "strict", "passed", [1, 2]),  # live from turn 1, where the result first changed
])
def test_a_pytest_fork_takes_prefix_and_divergence(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    at: str,
    prefix: str,
    outcome: str,
    live_turns: list[int],
) -> None:
    pytest.importorskip("openai")
    from tests.replay.conftest import write

    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "CI"):
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(test_inner=PYTEST_FORK)
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", _three_turns())  # type: ignore[arg-type]

    def live(req: ScriptedRequest) -> Reply:
        return (
            Reply.tool("get_weather", {"city": "Lyon"})
            if len(req.tool_results()) < 2
            else Reply.say("LIVE")
        )

    monkeypatch.setenv("FORK_AT", at)
    monkeypatch.setenv("FORK_PREFIX", prefix)
    with ScriptedUpstream(live) as fake:
        monkeypatch.setenv("FAKE_LIVE", fake.url)
        result = pytester.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            "-p",
            "no:textual-snapshot",
            "--looptap-record-mode=none",
            "-rP",
        )
    result.assert_outcomes(**{outcome: 1})
    assert [len(x.request.tool_results()) for x in fake.log] == live_turns
    out = result.stdout.str()
    if prefix == "tolerant":  # the test's report lists what was tolerated, with what tolerated it
        assert (
            "looptap tolerated" in out
            and 'tolerated at c1/turn 1 (seq 1): messages[3].content: recorded "sunny, 21 C", live '
            '"rainy, 9 C" (by tool_result)'
            in out
        ), out


@needs_recorder
@pytest.mark.parametrize(
    "at, extra",
    [("turn=3", ("--prefix", "tolerant")), ("divergence", ())],
    ids=["tolerant", "@div"],
)
@pytest.mark.slow(
    reason=(
        "reads the tolerant and @divergence forks through the recorder; fork_diff reads a "
        "fork's notes by default in test_fork.py's turn-2 test"
    )
)
def test_the_fork_tab_and_mcp_fork_diff_read_the_forks_notes_as_looptap_diff_does(
    recorded: tuple[Path, ScriptedUpstream, Path, Path],
    forks: Fork,
    at: str,
    extra: tuple[str, ...],
) -> None:
    """What the fork noted after the run (the tolerant prefix's tolerated results, where
    ``@divergence`` went live) is read by MCP's ``fork_diff`` and the Fork tab as by ``looptap
    diff``: the same divergences and tolerated turns."""
    from tests.replay.test_fork_responses import three_views

    # (the forks of the tests above: the tolerant prefix, @divergence)
    proc, branch, _ = forks(at, *extra, model=route if not extra else live_route)
    assert proc.returncode == 0, proc.stderr[-3000:]  # type: ignore[attr-defined]
    three_views(recorded[0], branch, [recorded[0].parent, branch.parent])
