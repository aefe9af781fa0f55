"""The cursor (issue 31): a recorded run forked at a turn, its prefix served from the recording and
its continuation live, with the real openai and anthropic SDKs (streamed and not, four agents at
once) recorded against one scripted upstream and forked onto a second that answers differently.

Requests are counted at the fakes: the prefix reaches no upstream. One recording per module; each
fork is one ``looptap run --from``. Waits are by progress (tests.support.progress), never timed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.reading import origin_of
from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.placement import CursorError, parse_cursor
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import fork_agent
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

AGENT = Path(__file__).with_name("fork_agent.py")
pytest_plugins = ["pytester"]
LABELS = ("openai", "openai-stream", "anthropic", "anthropic-stream")


def origin_route(req: ScriptedRequest) -> Reply:
    """The recorded model: Paris, then Lyon, then the answer."""
    n = len(req.tool_results())
    if n == 0:
        return Reply.tool("get_weather", {"city": "Paris"})
    if n == 1:
        return Reply.tool("get_weather", {"city": "Lyon"})
    return Reply.say("Sunny in Paris and Lyon.")


def new_model_route(req: ScriptedRequest) -> Reply:
    """The model forked onto: another city at turn 1, another answer after."""
    if len(req.tool_results()) == 1:
        return Reply.tool("get_weather", {"city": "Nice"})
    return Reply.say(f"NEW MODEL ({req.model}): warm everywhere.")


def _env() -> dict[str, str]:
    return clean_env(OPENAI_API_KEY="sk-test-fork", ANTHROPIC_API_KEY="sk-ant-test-fork")


def _upstreams(url: str) -> list[str]:
    return ["--upstream", f"openai={url}", "--upstream", f"anthropic={url}"]


def _label_of(req_body: object) -> str:
    text = orjson.dumps(req_body).decode()
    return next(label for label in sorted(LABELS, key=len, reverse=True) if f"[{label}]" in text)


@pytest.fixture(scope="module")
def origin(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, ScriptedUpstream, Path]]:
    """RUN.jsonl: the four agents recorded through ``looptap run`` against the origin fake."""
    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    tmp = tmp_path_factory.mktemp("fork")
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
                *_upstreams(fake.url),
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
        assert len(fake.log) == 12, [x.line() for x in fake.log]  # 4 agents x 3 turns
        yield run, fake, confdir


def _fork(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path: Path, cursor: str, *extra: str
) -> tuple[object, Path, ScriptedUpstream]:
    run, _, confdir = origin
    branch = tmp_path / "branch.jsonl"
    with ScriptedUpstream(new_model_route, validate=True) as fake2:
        argv = [
            *RECORDER,
            "run",
            "--from",
            f"{run}@{cursor}",
            *extra,
            "-o",
            str(branch),
            "--confdir",
            str(confdir),
            *_upstreams(fake2.url),
            "--",
            sys.executable,
            str(AGENT),
        ]
        proc = progress.run(argv, env=_env(), capture_output=True, text=True, cwd=tmp_path)
    return proc, branch, fake2


@pytest.fixture(scope="module")
def at_turn_2(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[object, Path, ScriptedUpstream, int]:
    """The fork at turn 2 onto ``new-model-1``, run once for the tests that read it; and how many
    requests the origin's fake had heard before it."""
    before = len(origin[1].log)
    return (
        *_fork(origin, tmp_path_factory.mktemp("at-turn-2"), "turn=2", "--model", "new-model-1"),
        before,
    )


@needs_recorder
def test_fork_at_turn_2_serves_the_prefix_offline_and_records_the_continuation(
    origin: tuple[Path, ScriptedUpstream, Path],
    at_turn_2: tuple[object, Path, ScriptedUpstream, int],
) -> None:
    run, fake1, _ = origin
    proc, branch, fake2, before = at_turn_2
    assert proc.returncode == 0, proc.stderr[-4000:]  # type: ignore[attr-defined]
    assert len(fake1.log) == before  # the prefix (8 round trips) reached no upstream
    assert len(fake2.log) == 4 and {_label_of(x.request.body) for x in fake2.log} == set(LABELS)
    assert all(
        len(x.request.tool_results()) == 2 and x.request.model == "new-model-1" for x in fake2.log
    )
    for label in LABELS:
        assert f"{label}: NEW MODEL (new-model-1)" in proc.stdout  # type: ignore[attr-defined]
    o = origin_of(branch)
    assert (
        o is not None
        and o["run"] == str(run)
        and o["cursor"]["turn"] == 2
        and o["model"] == "new-model-1"
    )
    assert len(o["starts"]) == 4 and o["seq"] == min(o["starts"].values())
    import hashlib

    # the origin's digest at the fork, and the origin's turn at the cursor: the branch's first turn
    # is turn 2 (issue 42)
    assert o["sha256"] == hashlib.sha256(run.read_bytes()).hexdigest() and o["path"] == str(
        run.resolve()
    )
    assert o["turn"] == 2 and set(o["turns"].values()) == {2}
    show = cli_run("show", str(branch), "--json")  # (in this process: what it says)
    assert show.returncode == 0, show.stderr
    assert [orjson.loads(ln)["turn"] for ln in show.stdout.splitlines()] == [2, 2, 2, 2]
    show = cli_run("show", str(branch), "--turn", "2")
    assert (
        len(re.findall(r"^#\d+  c\d+/turn 2 ", show.stdout, re.M)) == 4
        and f"branch of {run} at turn=2 (model new-model-1)" in show.stdout
    ), show.stdout
    assert origin_of(run) is None  # a plain recording names no origin
    # The branch records what went live: the continuation only, with the model asked for.
    from looptap.cassettes.reading import open_run

    recorded = list(open_run(branch, whole=True).exchanges)
    assert len(recorded) == 4 and all(
        orjson.loads(ex.request_body)["model"] == "new-model-1" for ex in recorded
    )
    diff = cli_run("diff", str(run), str(branch))
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert "lined up from the cursor" in diff.stdout
    assert (
        diff.stdout.count("turn 2 (seq") >= 4
        and "E: the model emitted something else" in diff.stdout
    ), diff.stdout
    first = next(ln for ln in diff.stdout.splitlines() if ln.strip().startswith("turn "))
    # the fork's own change
    assert first.strip().startswith("turn 2") and re.search(
        r"fork: model gpt-4o(-mini)? → new-model-1 \(asked with --model\)", first
    ), diff.stdout
    # not blamed on the client (issue 42)
    assert "C: the model requested changed" not in diff.stdout
    # looptap mcp's read-only fork_diff says the same (the origin found from the branch's header)
    from looptap.cassettes.mcp.query import Runs, fork_diff

    answer = fork_diff(
        Runs([str(run.parent), str(branch.parent)]), str(branch), None, None, 20, 6000
    )
    assert (
        answer["cursor"] == "turn=2"
        and answer["model"] == "new-model-1"
        and answer["divergences"] == 8
    )
    assert {(d["turn"], d["layer"]) for d in answer["recorded"]["divergences"]} == {
        (2, "fork"),
        (2, "E"),
    }


@needs_recorder
@pytest.mark.slow(
    reason=(
        "a fork of its own (the recorder and the four agents, about 9 s of CPU): a "
        "conversation's cursor is routed in the process by "
        "test_the_cursor_routes_past_it_live_and_fails_closed_before_it, and --repeat's "
        "agreement by test_repeat_agreement_lines_up_branches_and_says_systematic_or_variance "
        "on the shared turn-2 fork"
    )
)
def test_a_cursor_in_one_conversation_leaves_the_others_replayed_and_repeat_says_how_branches_agree(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path: Path
) -> None:
    run, fake1, _ = origin
    from looptap.cassettes.reading import open_run

    r = open_run(run, whole=True)
    by_seq = {ex.seq: ex for ex in r.exchanges}
    conv = next(
        c.id
        for c in r.analysis.conversations
        if _label_of(orjson.loads(by_seq[c.turns[0]].request_body)) == "anthropic-stream"
    )
    before = len(fake1.log)
    proc, branch, fake2 = _fork(origin, tmp_path, f"conversation={conv}:turn=1", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr[-4000:]  # type: ignore[attr-defined]
    assert len(fake1.log) == before
    # per run: turn 1 (Nice), then the answer, from the one conversation past the cursor only
    assert [_label_of(x.request.body) for x in fake2.log] == ["anthropic-stream"] * 4
    assert (
        proc.stdout.count("openai: Sunny in Paris and Lyon.") == 2
        and proc.stdout.count("anthropic-stream: NEW MODEL") == 2
    )  # type: ignore[attr-defined]
    err = proc.stderr  # type: ignore[attr-defined]
    assert (
        err.count(f"went live: {conv}") == 2
        and branch.with_name("branch.1.jsonl").exists()
        and branch.with_name("branch.2.jsonl").exists()
    )
    # the scripted new model answers alike every time: systematic, not variance
    assert (
        f"conversation {conv}, turn 1: 2 branches, with each other 100% (1 distinct answer), with "
        "the recording 0%: systematic" in err
    ), err[-3000:]
    # turn 2 is a text answer in the recording and in both branches (answers compare as compare's
    # do: calls, or "text")
    assert (
        f"conversation {conv}, turn 2: 2 branches, with each other 100% (1 distinct answer), with "
        "the recording 100%: as recorded in every branch" in err
    )


DIVERGING_AGENT = """
from openai import OpenAI
OpenAI(max_retries=0).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather in Rome?"}])
"""  # noqa: E501


@needs_recorder
def test_the_forks_lines_say_looptap_once_and_what_was_played_and_what_went_live(
    origin: tuple[Path, ScriptedUpstream, Path],
    at_turn_2: tuple[object, Path, ScriptedUpstream, int],
) -> None:
    """Issue 43: the fork's replay lines read "looptap: looptap: …" and "played 8 of 12 recorded
    round trips" when 4 of those 8 went live. (The fork at turn 2 of the test above: what it played
    and what went live are counted apart as at any cursor.)"""
    run = origin[0]
    proc, _, fake2, _ = at_turn_2
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 0 and len(fake2.log) == 4, err[-4000:]  # type: ignore[attr-defined]
    assert not [ln for ln in err.splitlines() if ln.startswith("looptap: looptap")], err
    # turns 0 and 1 of each conversation from the recording; turn 2 live
    assert (
        f"looptap: replay {run}: played 8 of 12 recorded round trips, 4 requests went live past "
        "the cursor, 0 unmatched requests" in err.splitlines()
    ), err
    assert "looptap: fork at turn=2: 4 requests sent live; went live: c1, c2, c3, c4" in err, err


@needs_recorder
@pytest.mark.slow(
    reason=(
        "a fork of its own (the recorder and an openai agent, about 2 s of CPU): a request before "
        "the cursor that matches no recorded one fails closed in the process in "
        "test_the_cursor_routes_past_it_live_and_fails_closed_before_it, and the fork's lines "
        "are said once in test_the_forks_lines_say_looptap_once_and_what_was_played_and_what_"
        "went_live"
    )
)
def test_a_client_diverging_before_the_cursor_is_refused_and_its_lines_said_once(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path: Path
) -> None:
    """Issue 43: a client diverging before the cursor got the miss lines doubled ("looptap:
    looptap: …"). Its first request is not the recording's: refused, nothing sent live."""
    run, _, confdir = origin
    with ScriptedUpstream(new_model_route) as fake3:
        argv = [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=1",
            "-o",
            str(tmp_path / "diverged.jsonl"),
            "--confdir",
            str(confdir),
            *_upstreams(fake3.url),
            "--",
            sys.executable,
            "-c",
            DIVERGING_AGENT,
        ]
        refused = progress.run(argv, env=_env(), capture_output=True, text=True, cwd=tmp_path)
    assert refused.returncode == 1 and fake3.log == [], refused.stderr[-4000:]
    lines = refused.stderr.splitlines()
    assert not [ln for ln in lines if ln.startswith("looptap: looptap")], refused.stderr
    assert "looptap: replay: no recorded round trip matches POST /v1/chat/completions" in "\n".join(
        lines
    ), refused.stderr
    assert (
        f"looptap: replay {run}: played 0 of 12 recorded round trips, 0 requests went live past "
        "the cursor, 1 unmatched request" in lines
    ), refused.stderr


# -- in-process: the cursor's routing, without the recorder --------------------------------------


def _chat(messages: list[dict[str, object]], model: str = "gpt-4o") -> bytes:
    from tests.replay.conftest import TOOLS

    return orjson.dumps({"model": model, "messages": messages, "tools": TOOLS})


@needs_recorder
def test_repeat_agreement_lines_up_branches_and_says_systematic_or_variance(
    origin: tuple[Path, ScriptedUpstream, Path],
    at_turn_2: tuple[object, Path, ScriptedUpstream, int],
) -> None:
    """``--repeat``'s agreement (cassettes/replay/forking/repeat.py) in the process, on the shared
    turn-2 fork read as two branches: each of the four conversations' turn 2, lined up from the
    cursor as ``looptap diff`` lines it up, is a text answer in the recording and in both branches
    (as recorded); and the words for an answer every branch shares unlike the recording
    (systematic) and for branches that differ (the model's variance). The fork with ``--repeat 2``
    through the recorder runs at night
    (``test_a_cursor_in_one_conversation_leaves_the_others_replayed_and_repeat_says_how_branches_agree``).
    """
    from looptap.cassettes.replay.forking.repeat import TurnAgreement, agreement, agreement_lines

    run = origin[0]
    branch = at_turn_2[1]
    rows = agreement(run, [branch, branch])
    assert [(r.turn, r.recorded, r.answers) for r in rows] == [(2, "text", ["text", "text"])] * 4
    assert len({r.conversation for r in rows}) == 4
    lines = agreement_lines(rows, 2)
    assert lines[0].startswith("looptap run --repeat: per turn past the cursor, how the 2 branches")
    for r in rows:
        assert (
            f"  conversation {r.conversation}, turn 2: 2 branches, with each other 100% (1 "
            "distinct answer), with the recording 100%: as recorded in every branch"
        ) in lines, lines
    call = '[["get_weather",{"city":"Paris"}]]'
    made = agreement_lines(
        [
            TurnAgreement("c1", 1, call, ["text", "text"]),
            TurnAgreement("c1", 2, "text", ["text", call, "text"]),
        ],
        3,
    )
    assert made[1:] == [
        "  conversation c1, turn 1: 2 branches, with each other 100% (1 distinct answer), with the "
        "recording 0%: systematic: every branch answers alike, unlike the recording",
        "  conversation c1, turn 2: 3 branches, with each other 67% (2 distinct answers), with the "
        "recording 67%: the model's variance: the branches differ",
    ]


def test_the_cursor_routes_past_it_live_and_fails_closed_before_it() -> None:
    from openai import BadRequestError, OpenAI

    from tests.replay.conftest import CALL, RESULT, SYSTEM, USER, tool_loop

    with ScriptedUpstream(new_model_route) as live:
        cursor = Cursor(
            parse_cursor("turn=1"), live_router({"openai": live.url}), model="other-model"
        )
        with ReplayServer(tool_loop(), cursor=cursor) as srv:
            client = OpenAI(base_url=srv.url + "/v1", api_key="sk-x", max_retries=0)
            tools = orjson.loads(_chat([]))["tools"]
            # before the cursor, a changed request is the client's divergence: failed closed,
            # nothing sent live
            with pytest.raises(BadRequestError, match=r"no recorded round trip"):
                client.chat.completions.create(
                    model="gpt-4o",
                    messages=[SYSTEM, {"role": "user", "content": "Weather in Rome?"}],
                    tools=tools,
                )  # type: ignore[list-item]
            assert live.log == []
            first = client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER], tools=tools
            )  # type: ignore[list-item]
            # turn 0: from the recording
            assert first.choices[0].message.tool_calls and live.log == []
            second = client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER, CALL, RESULT], tools=tools
            )  # type: ignore[list-item]
            assert (
                second.choices[0].message.tool_calls
                and second.choices[0].message.tool_calls[0].function.arguments == '{"city": "Nice"}'
            )
            assert len(live.log) == 1 and live.log[0].request.model == "other-model"
            served = srv.served[-1]
            # the client's own request, as it sent it
            assert orjson.loads(served.request_body)["model"] == "gpt-4o"
            assert any("model gpt-4o → other-model" in n for n in served.notes)
        assert len(srv.misses) == 1 and "Weather in Rome" in str(srv.misses[0])
        assert cursor.forked == {srv.matcher.recorded[1].conversation} and cursor.sent == 1


def test_the_summary_counts_the_round_trips_played_apart_from_those_that_went_live() -> None:
    """Issue 43: a fork whose prefix was replayed and whose continuation went live said "played 2
    of 2 recorded round trips" and "1 requests sent live"."""
    from openai import BadRequestError, OpenAI

    from tests.replay.conftest import CALL, RESULT, SYSTEM, USER, tool_loop

    with ScriptedUpstream(new_model_route) as live:
        cursor = Cursor(parse_cursor("turn=1"), live_router({"openai": live.url}))
        with ReplayServer(tool_loop(), cursor=cursor) as srv:
            client = OpenAI(base_url=srv.url + "/v1", api_key="sk-x", max_retries=0)
            tools = orjson.loads(_chat([]))["tools"]
            # before the cursor, a request the recording does not have
            with pytest.raises(BadRequestError):
                client.chat.completions.create(
                    model="gpt-4o",
                    messages=[SYSTEM, {"role": "user", "content": "Weather in Rome?"}],
                    tools=tools,
                )  # type: ignore[list-item]
            client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=tools)  # type: ignore[list-item]
            client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER, CALL, RESULT], tools=tools
            )  # type: ignore[list-item]
        assert len(live.log) == 1
        assert (
            srv.report_lines()[0]
            == "looptap replay <exchanges>: played 1 of 2 recorded round trips, 1 request went "
            "live past the cursor, 1 unmatched request"
        )
        # turn 1 went live: neither played nor unplayed
        assert [r.turn for r in srv.matcher.played()] == [0] and srv.unplayed() == []
        assert cursor.report_lines()[0].startswith(
            "fork at turn=1: 1 request sent live; went live: "
        )


def test_a_cursor_that_selects_nothing_is_refused() -> None:
    from tests.replay.conftest import tool_loop

    with pytest.raises(CursorError, match="selects no recorded turn"):
        ReplayServer(tool_loop(), cursor=Cursor(parse_cursor("turn=7"), live_router({})))
    with pytest.raises(CursorError, match="no round trip seq 9"):
        ReplayServer(tool_loop(), cursor=Cursor(parse_cursor("seq=9"), live_router({})))
    for bad in ("turn=x", "seq=1:turn=2", "tool=x", "turn"):
        with pytest.raises(CursorError):
            parse_cursor(bad)


# -- from a pytest test: the marker's fork= --------------------------------------------------------

FORK_TEST = fork_agent() + '''
@pytest.mark.looptap("cassettes/loop.jsonl", fork="turn=1", live={"openai": os.environ["FAKE_NEW_MODEL"]}, model="new-model-2")
def test_forked(looptap):
    answer = agent()
    assert answer.startswith("NEW MODEL (new-model-2)")
    run = looptap.run                      # the run as served: turn 0 replayed, turn 1 from the new model
    run.assert_no_findings(layer="C")
    assert len(run.turns) <= 3
'''  # noqa: E501


def test_a_pytest_test_forks_a_cassette_at_turn_1_onto_a_new_model(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    from tests.replay.conftest import tool_loop, write

    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "CI"):
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(test_inner=FORK_TEST)
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    with ScriptedUpstream(new_model_route) as fake:
        monkeypatch.setenv("FAKE_NEW_MODEL", fake.url)
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "--looptap-record-mode=none"
        )
    result.assert_outcomes(passed=1)
    # turn 0 replayed; turn 1 live (the new model calls the tool again), then its answer
    assert [x.request.model for x in fake.log] == ["new-model-2", "new-model-2"] and len(
        fake.log[0].request.tool_results()
    ) == 1


# -- what-if edits ---------------------------------------------------------------------------------


def test_an_edit_reaches_every_request_sent_live_and_not_the_clients_log(tmp_path: Path) -> None:
    from openai import OpenAI

    from looptap.cassettes.replay.live.edits import parse_edit
    from tests.replay.conftest import CALL, RESULT, SYSTEM, USER, tool_loop

    (tmp_path / "result.txt").write_text("STORM WARNING in Paris")
    with ScriptedUpstream(new_model_route) as live:
        edits = [
            parse_edit("turn=1:tool_result[call_A1]=@result.txt", base=tmp_path),
            parse_edit("system=Answer briefly."),
        ]
        cursor = Cursor(parse_cursor("turn=1"), live_router({"openai": live.url}), edits=edits)
        with ReplayServer(tool_loop(), cursor=cursor) as srv:
            client = OpenAI(base_url=srv.url + "/v1", api_key="sk-x", max_retries=0)
            tools = orjson.loads(_chat([]))["tools"]
            client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=tools)  # type: ignore[list-item]
            r = client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER, CALL, RESULT], tools=tools
            )  # type: ignore[list-item]
            call2 = r.choices[0].message.tool_calls[0]  # type: ignore[index]
            follow = [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call2.id,
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": call2.function.arguments,
                            },
                        }
                    ],
                },  # type: ignore[union-attr]
                {"role": "tool", "tool_call_id": call2.id, "content": "sunny in Nice"},
            ]
            client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER, CALL, RESULT, *follow], tools=tools
            )  # type: ignore[list-item]
        assert len(live.log) == 2
        for x in live.log:  # the upstream saw the edit in every request past the cursor
            assert (
                x.request.tool_results()[0] == "STORM WARNING in Paris"
                and x.request.system == "Answer briefly."
            )
            # no marker reaches an upstream
            assert not any(k.lower().startswith("x-looptap-edit") for k in x.request.headers)
        assert live.log[1].request.tool_results()[1] == "sunny in Nice"  # the rest untouched
        for ex in srv.served[1:]:  # the client's own requests, as it sent them
            assert b"STORM" not in ex.request_body and any(
                "edited tool_result[call_A1]" in n for n in ex.notes
            )
    assert cursor.unapplied() == [] and [e.applied for e in edits] == [2, 2]


def test_an_edit_that_never_applies_is_an_error(tmp_path: Path) -> None:
    import signal
    import subprocess

    from looptap.cassettes.replay.live.edits import EditError, parse_edit
    from tests.replay.conftest import tool_loop, write

    run = write(tmp_path / "run.jsonl", tool_loop())
    # the recording sends call_A1's result at turn 1, but no request reaches the cursor
    argv = [
        sys.executable,
        "-m",
        "looptap.cassettes.cli",
        "replay",
        str(run),
        "--cursor",
        "turn=1",
        "--live",
        "openai=http://127.0.0.1:9",
        "--edit",
        "tool_result[call_A1]=x",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    assert proc.stdout is not None
    next(iter(progress.lines(proc, proc.stdout, what="the export lines")))
    proc.send_signal(signal.SIGINT)
    _, err = progress.communicate(proc)
    assert proc.returncode == 1 and "edit tool_result[call_A1] never applied" in err, err
    for bad in ("tool_result=x", "nothing[1]=x", "user[a]=x", "system"):
        with pytest.raises(EditError):
            parse_edit(bad)


@needs_recorder
@pytest.mark.slow(
    reason=(
        "a fork of its own (about 5 s of CPU): the limit's logic runs in the process with "
        "real SDK clients in test_fork_limit.py"
    )
)
def test_a_fork_stops_at_its_limit_sends_nothing_past_it_and_its_branch_says_so(
    origin: tuple[Path, ScriptedUpstream, Path], tmp_path: Path
) -> None:
    """``--max-requests 2`` on a fork at turn 1 of the four agents (8 requests would go live): the
    upstream hears exactly 2, the branch records 2 (what ``looptap why`` counts as its ``sent``),
    its fork note says the fork stopped at the limit and how many it did not send, and the report
    says so; the agents refused get their API's 400 (looptap's message on their stderr)."""
    from looptap.cassettes.reading import fork_notes
    from looptap.cassettes.why._branches import _sent

    proc, branch, fake2 = _fork(origin, tmp_path, "turn=1", "--max-requests", "2")
    err = proc.stderr  # type: ignore[attr-defined]
    assert len(fake2.log) == 2, [x.line() for x in fake2.log]
    assert _sent(branch) == {"sent": 2}
    stopped = fork_notes(branch)["stopped"]
    assert stopped is not None and stopped["limit"] == 2 and stopped["sent"] == 2, stopped
    assert stopped["refused"] >= 4  # the other agents' turn 1 at least
    assert "stopped at the limit" in err and "not sent past --max-requests 2" in err, err[-3000:]
    assert "this fork stopped at its limit of 2 live requests" in err + proc.stdout  # type: ignore[attr-defined]
    # a plain run takes no limit (refused from the options alone: in this process)
    plain = cli_run("run", "--max-requests", "1", "-o", str(tmp_path / "p.jsonl"), "--", "true")
    assert plain.returncode == 2 and "--max-requests goes with --from" in plain.stderr
