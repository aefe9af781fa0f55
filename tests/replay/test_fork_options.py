"""A fork's options, checked as ``looptap run --from`` and the pytest marker take them (issue 42,
heading 3): ``--model`` on an Azure deployment (the deployment in the URL is the model), a
``--model`` of another API family, ``--model``/``--edit`` without ``--from``, edit targets the
recording does not have (refused before any live request), an edit meeting an item the client
rewrote (said), and the marker's ``edit=``, bad ``fork=`` and failure text.

Requests are counted at scripted fakes on loopback; the CLI runs as real subprocesses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.placement import CursorError, parse_cursor
from looptap.cassettes.replay.live.edits import parse_edit
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import CALL, RESULT, SYSTEM, TOOLS, USER, fork_agent, tool_loop, write
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytest_plugins = ["pytester"]
AZURE = (
    "https://res.openai.azure.com/openai/deployments/my-4o/chat/completions?api-version=2024-10-21"
)


def new_model(req: ScriptedRequest) -> Reply:
    if len(req.tool_results()) == 1:
        return Reply.tool("get_weather", {"city": "Nice"})
    return Reply.say(f"NEW MODEL ({req.model})")


def _looptap(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``looptap replay`` refused from its options and the run: what it says, in this process
    (its wiring as a process: test_faults.py's and test_server.py's replay command tests)."""
    return cli_run(*argv, cwd=cwd, OPENAI_API_KEY="sk-x")


# -- --model ---------------------------------------------------------------------------------------


def test_model_on_an_azure_deployment_rewrites_the_deployment_in_the_url() -> None:
    from openai import AzureOpenAI

    loop = [
        Exchange(
            ex.method,
            AZURE,
            ex.request_headers,
            ex.request_body,
            status=ex.status,
            response_headers=ex.response_headers,
            response_chunks=ex.response_chunks,
            ttfb=ex.ttfb,
        )
        for ex in tool_loop()
    ]
    with ScriptedUpstream(new_model) as live:
        cursor = Cursor(parse_cursor("turn=1"), live_router({"openai": live.url}), model="gpt-5")
        with ReplayServer(loop, cursor=cursor) as srv:
            client = AzureOpenAI(
                azure_endpoint=srv.url,
                azure_deployment="my-4o",
                api_version="2024-10-21",
                api_key="x",
                max_retries=0,
            )
            client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=TOOLS)  # type: ignore[list-item,arg-type]
            r = client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER, CALL, RESULT], tools=TOOLS
            )  # type: ignore[list-item,arg-type]
        assert r.choices[0].message.tool_calls
        [sent] = live.log
        # on Azure the deployment chooses the model: the URL names the model asked for, as the body
        # does
        assert sent.request.path.startswith(
            "/openai/deployments/gpt-5/chat/completions?api-version=2024-10-21"
        ), sent.request.path
        assert sent.request.model == "gpt-5"
        assert any(
            "model gpt-4o → gpt-5 (and in the path: /openai/deployments/gpt-5/chat/completions)"
            in n
            for n in srv.served[-1].notes
        )
        served = list(srv.served)
    # the branch is read, and priced, as the model the deployment now names: gpt-5, as the URL says
    import genai_prices as gp

    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.parsing import parse_all

    run = analyse(served, parse_all(served))
    live_turn = run.turns[max(run.turns)]
    assert live_turn.a.model_served == "gpt-5", live_turn.a
    usage = parse_all(served)[-1].response.usage  # type: ignore[union-attr]
    assert usage is not None and live_turn.tokens.cost is not None
    price = gp.calc_price(
        gp.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
        model_ref="gpt-5",
        provider_id="azure",
    ).total_price
    assert live_turn.tokens.cost == price, (live_turn.tokens.cost, price)


def test_a_model_of_another_api_family_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    for model in ("claude-sonnet-4-5", "gemini-2.5-pro"):
        with pytest.raises(
            CursorError,
            match=rf"--model {model}: (anthropic|google)'s model, and the run's requests at the "
            r"cursor are openai_chat \(openai's API, another API family\)",
        ):
            ReplayServer(
                tool_loop(), cursor=Cursor(parse_cursor("turn=1"), live_router({}), model=model)
            )
    # the same family, or a model the price library does not know: passes
    for model in ("gpt-5-mini", "my-local-model"):
        ReplayServer(
            tool_loop(), cursor=Cursor(parse_cursor("turn=1"), live_router({}), model=model)
        )
    run = write(tmp_path / "run.jsonl", tool_loop())
    proc = _looptap(
        "replay",
        str(run),
        "--cursor",
        "turn=1",
        "--live",
        "openai=http://127.0.0.1:9",
        "--model",
        "claude-haiku-4-5",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert (
        proc.stderr.count("\n") == 1
        and "--model claude-haiku-4-5: anthropic's model" in proc.stderr
    ), proc.stderr


def refused_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``looptap ARGS`` (a ``run`` to be refused): with ``--from``, read with the run, in the
    recorder's process; without, refused from the options alone, before any process, in this
    one."""
    if "--from" in args:
        env = clean_env(OPENAI_API_KEY="sk-x")
        return progress.run([*RECORDER, *args], capture_output=True, text=True, cwd=cwd, env=env)
    return cli_run(*args, cwd=cwd, OPENAI_API_KEY="sk-x")


@needs_recorder
@pytest.mark.parametrize(
    "extra",
    [
        ["--from", "RUN@turn=1", "--model", "claude-sonnet-4-5"],  # another API family
        # targets the recording does not have
        ["--from", "RUN@turn=1", "--edit", "tool_result[call_nope]=x"],
        ["--from", "RUN@turn=0", "--edit", "user[5]=x"],
        ["--model", "gpt-5"],  # without --from
        ["--edit", "system=x"],
        ["--no-volatile"],
    ],
    ids=[
        "model-family",
        "edit-call-nope",
        "edit-user-5",
        "model-without-from",
        "edit-without-from",
        "no-volatile-without-from",
    ],
)
def test_run_refuses_in_one_line_before_anything_is_sent(tmp_path: Path, extra: list[str]) -> None:
    run = write(tmp_path / "run.jsonl", tool_loop())
    out = tmp_path / "branch.jsonl"
    agent = [sys.executable, "-c", "open('agent-ran', 'w')"]
    with ScriptedUpstream(new_model) as fake:
        argv = [
            *RECORDER,
            "run",
            *(a.replace("RUN@", f"{run}@") for a in extra),
            "-o",
            str(out),
            "--confdir",
            str(tmp_path / "conf"),
            "--upstream",
            f"openai={fake.url}",
            "--",
            *agent,
        ]
        proc = refused_run(argv[len(RECORDER) :], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("looptap: error: "), proc.stderr
    assert not (tmp_path / "agent-ran").exists() and not out.exists()
    assert fake.log == []  # nothing was sent


def test_a_cursor_past_the_runs_turns_says_how_many_turns_the_run_has(tmp_path: Path) -> None:
    """Issue 43: a refused ``@turn=2`` did not say how many turns the run has."""
    write(tmp_path / "run.jsonl", tool_loop())  # one conversation, turns 0 and 1
    for cursor, said in (
        (
            "turn=2",
            "cursor 'turn=2' selects no recorded turn: run.jsonl "
            "has 2 turns (0–1) in conversation c1",
        ),
        (
            "conversation=c1:turn=7",
            "cursor 'conversation=c1:turn=7' selects no recorded "
            "turn: run.jsonl has 2 turns (0–1) in conversation c1",
        ),
        (
            "conversation=c9",
            "cursor 'conversation=c9' selects no recorded turn: run.jsonl has no conversation c9 "
            "(its conversations: c1)",
        ),
        ("seq=9", "cursor 'seq=9': run.jsonl has no round trip seq 9 (seqs 0–1)"),
    ):
        proc = _looptap(
            "replay",
            "run.jsonl",
            "--cursor",
            cursor,
            "--live",
            "openai=http://127.0.0.1:9",
            cwd=tmp_path,
        )
        assert proc.returncode == 2 and proc.stderr.splitlines() == [f"looptap: error: {said}"], (
            proc.stderr
        )


@needs_recorder
def test_run_from_a_turn_past_the_end_says_how_many_turns_the_run_has(tmp_path: Path) -> None:
    write(tmp_path / "run.jsonl", tool_loop())
    argv = [
        *RECORDER,
        "run",
        "--from",
        "run.jsonl@turn=2",
        "-o",
        "branch.jsonl",
        "--confdir",
        str(tmp_path / "conf"),
        "--",
        sys.executable,
        "-c",
        "pass",
    ]
    proc = progress.run(
        argv, capture_output=True, text=True, cwd=tmp_path, env=clean_env(OPENAI_API_KEY="sk-x")
    )
    assert proc.returncode == 2 and not (tmp_path / "branch.jsonl").exists(), proc.stderr
    assert proc.stderr.splitlines() == [
        "looptap: error: cursor 'turn=2' selects no recorded "
        "turn: run.jsonl has 2 turns (0–1) in conversation c1"
    ], proc.stderr


# -- edits -----------------------------------------------------------------------------------------


def test_edit_targets_the_recording_does_not_have_are_refused_before_any_live_request() -> None:
    import re

    with ScriptedUpstream(new_model) as live:
        cases = [
            ("tool_result[call_nope]", "turn=1", tool_loop()),
            ("user[5]", "turn=0", tool_loop()),
            # a call whose result the recording never sends
            ("tool_result[call_A1]", "turn=0", tool_loop()[:1]),
        ]
        for bad, at, rec in cases:
            c = Cursor(
                parse_cursor(at), live_router({"openai": live.url}), edits=[parse_edit(f"{bad}=x")]
            )
            with pytest.raises(
                CursorError,
                match=re.escape(
                    f"--edit {bad}: no recorded request at or past the cursor {at} carries it"
                ),
            ):
                ReplayServer(rec, cursor=c)
        # targets the recording has, at or past the cursor, pass
        ReplayServer(
            tool_loop(),
            cursor=Cursor(
                parse_cursor("turn=1"),
                live_router({}),
                edits=[parse_edit("tool_result[call_A1]=x"), parse_edit("user[0]=x")],
            ),
        )
        assert live.log == []


def test_an_edit_that_meets_an_item_the_client_rewrote_says_so() -> None:
    from openai import OpenAI

    with ScriptedUpstream(new_model) as live:
        cursor = Cursor(
            parse_cursor("turn=1"),
            live_router({"openai": live.url}),
            edits=[parse_edit("tool_result[call_A1]=STORM WARNING in Paris")],
        )
        with ReplayServer(tool_loop(), cursor=cursor) as srv:
            client = OpenAI(base_url=srv.url + "/v1", api_key="sk-x", max_retries=0)
            client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=TOOLS)  # type: ignore[list-item,arg-type]
            r = client.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, USER, CALL, RESULT], tools=TOOLS
            )  # type: ignore[list-item,arg-type]
            call2 = r.choices[0].message.tool_calls[0]  # type: ignore[index]
            # the client compacted the old result
            summary = {**RESULT, "content": "(summary: sunny)"}
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
                model="gpt-4o", messages=[SYSTEM, USER, CALL, summary, *follow], tools=TOOLS
            )  # type: ignore[list-item,arg-type]
        # the model got the edit both times
        assert [x.request.tool_results()[0] for x in live.log] == ["STORM WARNING in Paris"] * 2
    said = (
        "edit tool_result[call_A1]: the client sent a different value at turn 2 than it recorded "
        "(it rewrote the item); the edit replaced it"
    )
    # turn 1: the client sent what it recorded
    assert not any("rewrote" in n for n in srv.served[1].notes)
    assert said in srv.served[2].notes, srv.served[2].notes  # on the round trip
    assert f"  {said}" in cursor.report_lines()  # and in the fork's report


# -- the pytest marker -----------------------------------------------------------------------------

MARKED = fork_agent() + '''
LIVE = {"openai": os.environ["FAKE_NEW_MODEL"]}

@pytest.mark.looptap("cassettes/loop.jsonl", fork="turn=1", live=LIVE, model="new-model-3", edit="tool_result[call_A1]=@storm.txt")
def test_edited(looptap):
    assert agent().startswith("NEW MODEL (new-model-3)")

@pytest.mark.looptap("cassettes/loop.jsonl", fork="turn=1", live=LIVE, model="new-model-3")
def test_fails_after_the_cursor(looptap):
    agent()
    assert False, "the new model's answer was not good enough"

@pytest.mark.looptap("cassettes/loop.jsonl", fork="turn=x", live=LIVE)
def test_bad_selector(looptap):
    agent()

@pytest.mark.looptap("cassettes/loop.jsonl", fork="turn=1", live=LIVE, edit="tool_result[call_nope]=x")
def test_missing_target(looptap):
    agent()
'''  # noqa: E501


def test_the_marker_takes_the_forks_options_and_says_what_went_live(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "CI"):
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(test_inner=MARKED)
    (pytester.path / "cassettes").mkdir()
    (pytester.path / "storm.txt").write_text("STORM WARNING in Paris")
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    with ScriptedUpstream(new_model) as fake:
        monkeypatch.setenv("FAKE_NEW_MODEL", fake.url)
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "--looptap-record-mode=none"
        )
    result.assert_outcomes(passed=1, failed=1, errors=2)
    out = result.stdout.str()
    # edit= reached the live model (test_edited's two live requests), model= too
    edited = [x for x in fake.log if x.request.tool_results()[:1] == ["STORM WARNING in Paris"]]
    assert len(edited) == 2 and all(x.request.model == "new-model-3" for x in edited), [
        x.line() for x in fake.log
    ]
    assert len(fake.log) == 4  # test_fails_after_the_cursor's two; nothing from the refused ones
    # a bad selector and a missing target: one line each, no plugin traceback
    assert "looptap: cursor 'turn=x': turn= wants a number in digits" in out
    assert (
        "looptap: --edit tool_result[call_nope]: no recorded "
        "request at or past the cursor turn=1 carries it" in out
    )
    assert "pytest_plugin.py" not in out and "Traceback" not in out, out
    # the failure says which turns went live, on which model
    assert (
        "looptap fork" in out and "live in " in out and "turns 1, 2 on new-model-3 (--model)" in out
    ), out


def test_the_marker_refuses_model_and_edit_without_fork(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner='''
import pytest

@pytest.mark.looptap("cassettes/loop.jsonl", model="gpt-5")
def test_model_alone(looptap):
    pass

@pytest.mark.looptap("cassettes/loop.jsonl", edit="tool_result[call_A1]=x")
def test_edit_alone(looptap):
    pass
''')
    (pytester.path / "cassettes").mkdir()
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "--looptap-record-mode=none"
    )
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    # One line each, as the error itself (a short test summary, when pytest prints one, repeats it
    # behind "ERROR …"); no traceback, no line of the plugin.
    said = "looptap: model=, edit=, live= and prefix= go with fork='turn=N'"
    assert [line for line in out.splitlines() if line.startswith(said)] == [
        f"{said} (where the cassette goes live)"
    ] * 2, out
    assert "plugin.py" not in out and "Traceback" not in out, out
    assert orjson  # (imported for the fixtures' JSON)
