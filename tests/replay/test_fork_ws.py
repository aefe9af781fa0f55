"""The cursor over a WebSocket (issue 31): Codex 0.169 on its default settings (the built-in
``openai`` provider, Responses over a WebSocket; only ``openai_base_url`` set, as a fork needs)
recorded against a scripted Responses-over-WebSocket model (spawn_agent, wait_agent, then its
answer: two conversations), then forked at turn 1 onto a second scripted model that answers
differently. The prefix is served from the recording (0 messages reach either fake), the root
conversation's continuation goes live over a WebSocket through the recorder into the branch, sent
self-contained (its ``previous_response_id`` named an answer the live model never gave), and
``looptap diff`` names the first differing turn and layer.

One recording and one fork per module (both ``looptap run``); waits are by progress, never timed.
The in-process test at the end forks the openai SDK's WebSocket session the same way without the
recorder (the replay server's live upstream a fake), with ``--model`` and an ``--edit``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.models import FinishReason, NormalisedResponse, Part, ToolCall, Usage
from looptap.cassettes.reading import open_run, origin_of
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
TASK = "What is the weather in Paris?"
NEW_ANSWER = "NEW MODEL: it is raining in Paris."


def _agent(req: dict[str, Any]) -> str | None:
    meta = (req.get("client_metadata") or {}).get("x-codex-turn-metadata") or "{}"
    return json.loads(meta).get("agent_name") if isinstance(meta, str) else None


def new_model() -> Any:
    """The model forked onto: the root agent waits for its sub-agent with another timeout (the
    recording: 10000), then answers something else; its answers' ids are its own (``new_…``)."""
    turns = iter(range(1 << 20))

    def answer(req: dict[str, Any], rid: str) -> NormalisedResponse:
        model, rid = str(req.get("model") or "gpt-5"), f"new_{rid}"
        usage = Usage(input_tokens=40, output_tokens=12)
        if req.get("generate") is False:
            return NormalisedResponse(
                id=rid,
                model=model,
                parts=[],
                finish_reason=FinishReason.COMPLETE,
                usage=Usage(input_tokens=0, output_tokens=0),
            )
        if _agent(req) in (None, "/root") and next(turns) == 0:
            call = ToolCall(id=f"call_{rid}", name="wait_agent", arguments={"timeout_ms": 5000})
            return NormalisedResponse(
                id=rid,
                model=model,
                parts=[
                    Part(
                        kind="tool_call",
                        tool_call=call,
                        provider_details={"namespace": "collaboration"},
                    )
                ],
                finish_reason=FinishReason.TOOL_CALL,
                usage=usage,
            )
        return NormalisedResponse(
            id=rid,
            model=model,
            parts=[Part(kind="text", text=NEW_ANSWER)],
            finish_reason=FinishReason.COMPLETE,
            usage=usage,
        )

    return answer


def _codex(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A wrapper running Codex with its default configuration but ``openai_base_url``, set from
    ``OPENAI_BASE_URL`` (Codex reads the base URL from its config only)."""
    from tests.proxy.test_e2e_node_agents import need

    codex = need("@openai/codex", bin_name="codex")
    home = tmp / "codex-home"
    home.mkdir()
    wrapper = tmp / "codex.sh"
    wrapper.write_text(
        "#!/bin/sh\nset -e\n"
        'printf \'openai_base_url = "%s"\\n\\n[analytics]\\nenabled = '
        'false\\n\\n[features]\\nplugins = false\\n\' "$OPENAI_BASE_URL" > '
        f'"$CODEX_HOME/config.toml"\nexec "{codex}" "$@"\n'
    )
    wrapper.chmod(0o755)
    (tmp / "home").mkdir()
    env = clean_env(CODEX_HOME=str(home), HOME=str(tmp / "home"), OPENAI_API_KEY="sk-test-fork-ws")
    return wrapper, env


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Codex recorded against the origin fake, then forked at turn 1 onto the new one, both fakes
    up throughout (so a message of the fork reaching the first would be counted)."""
    pytest.importorskip("websockets")
    from tests.support.ws_upstream import WsResponsesUpstream, spawn_script

    tmp = tmp_path_factory.mktemp("fork-ws")
    wrapper, env = _codex(tmp)
    run, branch, conf = tmp / "run.jsonl", tmp / "branch.jsonl", tmp / "conf"
    codex = [str(wrapper), "exec", "--skip-git-repo-check", TASK]
    with (
        WsResponsesUpstream(answer=spawn_script()) as fake1,
        WsResponsesUpstream(answer=new_model()) as fake2,
    ):
        rec = progress.run(
            [
                *RECORDER,
                "run",
                "-o",
                str(run),
                "--confdir",
                str(conf),
                "--upstream",
                f"openai={fake1.url}",
                "--",
                *codex,
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        assert rec.returncode == 0 and "It is sunny in Paris." in rec.stdout, rec.stderr[-4000:]
        recorded = (len(fake1.received), fake1.connections)
        fork = progress.run(
            [
                *RECORDER,
                "run",
                "--from",
                f"{run}@turn=1",
                "-o",
                str(branch),
                "--confdir",
                str(conf),
                "--upstream",
                f"openai={fake2.url}",
                "--",
                *codex,
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        yield {
            "run": run,
            "branch": branch,
            "rec": rec,
            "fork": fork,
            "recorded": recorded,
            "fake1": fake1,
            "fake2": fake2,
            "received1": list(fake1.received),
            "received2": list(fake2.received),
            "env": env,
        }


def _why(f: dict[str, Any]) -> str:
    p = f["fork"]
    return f"exit {p.returncode}\n--- stdout\n{p.stdout[-2000:]}\n--- stderr\n{p.stderr[-5000:]}"


@needs_recorder
def test_codex_forked_over_its_websocket_goes_live_past_the_cursor_only(
    forked: dict[str, Any],
) -> None:
    run = open_run(forked["run"], whole=True)
    rts = {rt.seq: rt for rt in run.roundtrips}
    main = next(c for c in run.analysis.conversations if c.turns and c.parent_seq is None)
    calls = [
        [c.name for c in rts[s].response.tool_calls]
        for s in main.turns
        if rts[s].response is not None
    ]  # type: ignore[union-attr]
    # the recording: two tool calls, then the answer
    assert calls == [["spawn_agent"], ["wait_agent"], []], calls

    fork = forked["fork"]
    assert fork.returncode == 0 and NEW_ANSWER in fork.stdout, _why(forked)
    # the prefix (prewarms, root turn 0, the sub-agent's whole conversation) reached no upstream
    assert (len(forked["received1"]), forked["fake1"].connections) == forked["recorded"], _why(
        forked
    )
    sent = forked["received2"]
    assert [m.get("type") for m in sent] == ["response.create"] * 2 and forked[
        "fake2"
    ].connections == 1, (sent, _why(forked))
    first, second = sent
    # the first live turn continued root turn 0's answer, replayed from the recording: sent
    # self-contained
    assert "previous_response_id" not in first, first.get("previous_response_id")
    kinds = [(i.get("type"), i.get("name")) for i in first["input"]]
    assert ("function_call", "spawn_agent") in kinds and kinds[-1] == (
        "function_call_output",
        None,
    ), kinds
    assert any(
        i.get("type") == "message" and i.get("role") == "user" and TASK in json.dumps(i)
        for i in first["input"]
    )
    # the second continued the live model's own answer, on the same connection: as the client sent
    # it
    assert second.get("previous_response_id") == "new_resp_0", second.get("previous_response_id")
    # the wait's result, the sub-agent's
    assert [i.get("type") for i in second["input"]] == ["function_call_output", "agent_message"], (
        second["input"]
    )
    assert "fork at turn=1: 2 requests sent live; went live: c1" in fork.stderr, _why(forked)


@needs_recorder
def test_the_branch_names_its_origin_and_diff_names_the_first_differing_turn(
    forked: dict[str, Any],
) -> None:
    assert forked["fork"].returncode == 0, _why(forked)
    o = origin_of(forked["branch"])
    assert o is not None and o["run"] == str(forked["run"]) and o["cursor"]["turn"] == 1
    branch = open_run(forked["branch"], whole=True)
    exs = list(branch.exchanges)
    assert len(exs) == 2 and all(any(n.startswith("websocket ") for n in ex.notes) for ex in exs), [
        ex.notes for ex in exs
    ]
    rts = list(branch.roundtrips)
    assert [[c.name for c in rt.response.tool_calls] for rt in rts if rt.response is not None] == [
        ["wait_agent"],
        [],
    ]
    assert rts[-1].response is not None and rts[-1].response.text == NEW_ANSWER
    diff = progress.run(
        [*RECORDER, "diff", str(forked["run"]), str(forked["branch"])],
        capture_output=True,
        text=True,
        env=forked["env"],
    )
    assert diff.returncode == 1 and "lined up from the cursor" in diff.stdout, (
        diff.stdout + diff.stderr
    )
    first = next(ln for ln in diff.stdout.splitlines() if ln.strip().startswith("turn "))
    assert first.strip().startswith("turn 1") and "E: the model emitted something else" in first, (
        diff.stdout
    )


def agent(base_url: str, ask: str = "Weather in Paris?") -> list[Any]:
    """The openai SDK's tool loop over one WebSocket (tests/replay/test_websocket_replay.py's),
    every turn ending at its terminal event or an error message; ``ask``: the user's turn."""
    import openai

    from tests.replay.test_websocket_replay import TOOLS

    out: list[Any] = []
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)
    with client.beta.responses.connect() as conn:
        conn.response.create(
            model="gpt-5",
            generate=False,
            tools=TOOLS,
            instructions="Answer with the weather tool.",
            input=[],
        )
        prev = next(ev.response.id for ev in conn if ev.type == "response.completed")
        turn: list[Any] = [{"role": "user", "content": ask}]
        for _ in range(2):
            conn.response.create(model="gpt-5", previous_response_id=prev, tools=TOOLS, input=turn)
            text = ""
            for ev in conn:
                if ev.type == "error":
                    return [*out, ("error", ev.error.code)]
                if ev.type == "response.output_text.delta":
                    text += ev.delta
                if ev.type == "response.completed":
                    break
            prev = ev.response.id
            calls = [i for i in ev.response.output if i.type == "function_call"]
            if not calls:
                return [*out, text]
            out.append((calls[0].name, calls[0].arguments))
            turn = [
                {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}
            ]
    return out


@pytest.fixture(scope="module")
def sdk_cassette(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any], int]:
    """The SDK's session recorded once: the cassette, what the agent got, the messages the fake
    received."""
    pytest.importorskip("websockets")
    from tests.replay.conftest import write
    from tests.support.ws_upstream import WsResponsesUpstream

    with WsResponsesUpstream() as fake1:
        recorded = agent(fake1.url)
    return (
        write(tmp_path_factory.mktemp("fork-ws-sdk") / "ws.jsonl", fake1.exchanges),
        recorded,
        len(fake1.received),
    )


def test_a_session_past_the_cursor_is_relayed_self_contained_with_the_model_and_edits(
    sdk_cassette: tuple[Path, list[Any], int],
) -> None:
    """The openai SDK's WebSocket tool loop (prewarm, a call, its result, the answer) recorded,
    then replayed with the cursor at turn 1 (the result): turn 0 from the recording, turn 1 sent
    live over a WebSocket, self-contained, with the model asked for and the tool result edited."""
    pytest.importorskip("websockets")
    from looptap.cassettes.replay.forking.cursor import Cursor, live_router
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.replay.live.edits import parse_edit
    from looptap.cassettes.replay.serving.server import ReplayServer
    from tests.replay.test_websocket_replay import TOOLS
    from tests.support.ws_upstream import WsResponsesUpstream

    def stormy(req: dict[str, Any], rid: str) -> NormalisedResponse:
        return NormalisedResponse(
            id=f"new_{rid}",
            model=str(req.get("model")),
            parts=[Part(kind="text", text="Stormy in Paris.")],
            finish_reason=FinishReason.COMPLETE,
            usage=Usage(input_tokens=9, output_tokens=3),
        )

    path, recorded, received = sdk_cassette
    assert (
        recorded == [("get_weather", '{"city":"Paris"}'), "It is sunny in Paris."] and received == 3
    )
    edit = parse_edit("tool_result[call_resp_1]=storm warning")
    with WsResponsesUpstream(answer=stormy) as fake2:
        cursor = Cursor(
            parse_cursor("turn=1"),
            live_router({"openai": fake2.url}),
            model="new-model",
            edits=[edit],
        )
        with ReplayServer(path, cursor=cursor) as srv:
            assert agent(srv.url) == [("get_weather", '{"city":"Paris"}'), "Stormy in Paris."]
            served = list(srv.served)
    (sent,) = fake2.received  # the prewarm and turn 0 were served from the recording
    assert sent["model"] == "new-model" and "previous_response_id" not in sent, sent
    assert [(i.get("type"), i.get("role") or i.get("name")) for i in sent["input"]] == [
        (None, "user"),
        ("function_call", "get_weather"),
        ("function_call_output", None),
    ], sent["input"]
    # the edit made; the turn's own fields kept
    assert sent["input"][-1]["output"] == "storm warning" and sent["tools"] == TOOLS
    assert (
        cursor.sent == 1
        and edit.applied == 1
        and cursor.forked == {srv.matcher.recorded[1].conversation}
    )
    live = served[-1]
    assert "websocket live" in live.notes and any("self-contained" in n for n in live.notes), (
        live.notes
    )
    assert any("model gpt-5 → new-model" in n for n in live.notes) and any(
        "edited tool_result[call_resp_1]" in n for n in live.notes
    )
    assert b'"previous_response_id"' in live.request_body  # the log keeps what the client sent
    assert b"Stormy in Paris." in b"".join(c for _, c in live.response_chunks)


def test_a_live_upstream_that_cannot_be_reached_is_the_apis_error_message(
    sdk_cassette: tuple[Path, list[Any], int],
) -> None:
    """Past the cursor with the live upstream down: the turn gets the API's error message (502,
    saying where the session could not be opened); nothing before the cursor is affected."""
    pytest.importorskip("websockets")
    import socket

    from looptap.cassettes.replay.forking.cursor import Cursor, live_router
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.replay.serving.server import ReplayServer

    path = sdk_cassette[0]
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    cursor = Cursor(parse_cursor("turn=1"), live_router({"openai": down}))
    with ReplayServer(path, cursor=cursor) as srv:
        assert agent(srv.url) == [
            ("get_weather", '{"city":"Paris"}'),
            ("error", "looptap_upstream_error"),
        ]
        last = srv.served[-1]
    assert last.status == 502 and b"opening the live session" in b"".join(
        c for _, c in last.response_chunks
    )


def test_threads_walk_the_chain_of_answers_and_say_when_they_cannot() -> None:
    from looptap.cassettes.replay.live.chains import Threads

    t = Threads(limit=3)
    t.add("r0", None, [])
    t.add("r1", "r0", ["u1", "a1"])
    t.add("r2", "r1", ["u2", "a2"])
    assert t.history("r2") == ["u1", "a1", "u2", "a2"] and t.history("r1") == ["u1", "a1"]
    assert t.history("nope") is None
    # over the limit: r0, the oldest, is forgotten, so the chain is broken
    t.add("r3", "r2", ["u3"])
    assert t.history("r3") is None
    loop = Threads(limit=4)
    loop.add("a", "b", [1])
    loop.add("b", "a", [2])
    assert loop.history("a") is None  # a chain that loops is no history


def test_client_side_frames_are_masked_and_a_servers_are_read_unmasked() -> None:
    import asyncio

    from looptap.cassettes import net as ws

    async def read(data: bytes, from_server: bool) -> tuple[int, bytes]:
        r = asyncio.StreamReader()
        r.feed_data(data)
        r.feed_eof()
        return await ws.MessageReader(r, from_server=from_server).next()

    payload = b'{"type":"response.create"}' * 10
    masked = ws.frame(ws.TEXT, payload, masked=True)
    assert payload not in masked and asyncio.run(read(masked, False)) == (ws.TEXT, payload)
    assert asyncio.run(read(ws.frame(ws.TEXT, payload), True)) == (ws.TEXT, payload)
    for data, from_server in ((masked, True), (ws.frame(ws.TEXT, payload), False)):
        with pytest.raises(ws.WsProtocolError):
            asyncio.run(read(data, from_server))


def test_each_turn_a_live_session_relays_is_noted_in_the_order_the_agent_lived_it(
    sdk_cassette: tuple[Path, list[Any], int],
) -> None:
    """The cursor at turn 0: the prewarm is served, then the session goes live and both of its
    turns (the call, the answer after its result) are relayed. The fork notes each in order (the
    prewarm's seq, then a live turn each), as it notes HTTP round trips, so ``looptap why``
    rebuilds the run the agent lived. Before, only the turn that opened the live session was
    noted: [0, None], the answer's turn missing (issue 68)."""
    pytest.importorskip("websockets")
    from looptap.cassettes.replay.forking.cursor import Cursor, live_router
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.replay.serving.server import ReplayServer
    from tests.support.ws_upstream import WsResponsesUpstream

    path = sdk_cassette[0]
    with WsResponsesUpstream() as fake2:
        cursor = Cursor(parse_cursor("turn=0"), live_router({"openai": fake2.url}))
        with ReplayServer(path, cursor=cursor) as srv:
            assert agent(srv.url) == [("get_weather", '{"city":"Paris"}'), "It is sunny in Paris."]
            prewarm = srv.matcher.recorded[0].seq
    assert len(fake2.received) == 2 and cursor.sent == 2
    assert cursor.lived_order() == [prewarm, None, None], cursor.lived


def test_a_turn_at_the_cursor_that_differs_from_the_recording_goes_live_and_is_no_miss(
    sdk_cassette: tuple[Path, list[Any], int],
) -> None:
    """A fixed agent (``why --confirm``) asks otherwise at the cursor's turn: the prewarm before
    it is served, the turn goes live, and the replay counts no miss, as for an HTTP request past
    the cursor. Before, the turn stayed a miss after it was answered live, so the fork said the
    client diverged before the cursor and every confirm run of Codex was no sample (issue 68)."""
    pytest.importorskip("websockets")
    from looptap.cassettes.replay.forking.cursor import Cursor, live_router
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.replay.serving.server import ReplayServer
    from tests.support.ws_upstream import WsResponsesUpstream

    path = sdk_cassette[0]
    with WsResponsesUpstream() as fake2:
        cursor = Cursor(parse_cursor("turn=0"), live_router({"openai": fake2.url}))
        with ReplayServer(path, cursor=cursor) as srv:
            got = agent(srv.url, ask="Weather in Paris? Never guess.")
            misses = srv.misses
    assert got == [("get_weather", '{"city":"Paris"}'), "It is sunny in Paris."]
    assert fake2.received[0]["input"][-1]["content"] == "Weather in Paris? Never guess."
    assert misses == [] and cursor.sent == 2, [m.headline for m in misses]


@pytest.mark.parametrize("most", [0, 1])
def test_a_turn_past_the_forks_limit_is_not_sent_and_gets_the_apis_error_message(
    sdk_cassette: tuple[Path, list[Any], int], most: int
) -> None:
    """``--max-requests`` over a WebSocket (cassettes/replay/forking/limit.py): the cursor at
    turn 0 with a limit of 1, the session goes live with its first turn and the next turn is not
    sent; with 0, not even the first. The turn refused gets the API's error message (400,
    ``looptap_fork_limit``), the session goes on; the live upstream heard only what the limit
    allows."""
    pytest.importorskip("websockets")
    from looptap.cassettes.replay.forking.cursor import Cursor, live_router
    from looptap.cassettes.replay.forking.limit import Limit
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.replay.serving.server import ReplayServer
    from tests.support.ws_upstream import WsResponsesUpstream

    path = sdk_cassette[0]
    with WsResponsesUpstream() as fake2:
        cursor = Cursor(
            parse_cursor("turn=0"), live_router({"openai": fake2.url}), limit=Limit(most)
        )
        with ReplayServer(path, cursor=cursor) as srv:
            got = agent(srv.url)
            refused = srv.served[-1]
    assert got[-1] == ("error", "looptap_fork_limit"), got
    assert len(fake2.received) == most and cursor.limit.refused == 1
    assert refused.status == 400 and b"stopped at its limit" in b"".join(
        c for _, c in refused.response_chunks
    )
