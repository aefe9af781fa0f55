"""The cursor over a WebSocket (issue 31): Codex 0.169 on its default settings (the built-in
``openai`` provider, Responses over a WebSocket; only ``openai_base_url`` set, as a fork needs)
recorded against a scripted Responses-over-WebSocket model (spawn_agent, wait_agent, then its
answer: two conversations), then forked at turn 1 onto a second scripted model that answers
differently. The prefix is served from the recording (0 messages reach either fake), the root
conversation's continuation goes live over a WebSocket through the recorder into the branch, sent
self-contained (its ``previous_response_id`` named an answer the live model never gave), and
``looptap diff`` names the first differing turn and layer.

One recording and one fork per module (both ``looptap run``); waits are by progress, never timed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cassettes.models import FinishReason, NormalisedResponse, Part, ToolCall, Usage
from cassettes.reading.run import open_run
from cassettes.replay.fork import origin_of
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder

pytestmark = [needs_recorder]

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
            return NormalisedResponse(id=rid, model=model, parts=[], finish_reason=FinishReason.COMPLETE, usage=Usage(input_tokens=0, output_tokens=0))
        if _agent(req) in (None, "/root") and next(turns) == 0:
            call = ToolCall(id=f"call_{rid}", name="wait_agent", arguments={"timeout_ms": 5000})
            return NormalisedResponse(id=rid, model=model, parts=[Part(kind="tool_call", tool_call=call, provider_details={"namespace": "collaboration"})],
                                      finish_reason=FinishReason.TOOL_CALL, usage=usage)
        return NormalisedResponse(id=rid, model=model, parts=[Part(kind="text", text=NEW_ANSWER)], finish_reason=FinishReason.COMPLETE, usage=usage)

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
        'printf \'openai_base_url = "%s"\\n\\n[analytics]\\nenabled = false\\n\\n[features]\\nplugins = false\\n\' "$OPENAI_BASE_URL" > "$CODEX_HOME/config.toml"\n'
        f'exec "{codex}" "$@"\n'
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
    with WsResponsesUpstream(answer=spawn_script()) as fake1, WsResponsesUpstream(answer=new_model()) as fake2:
        rec = progress.run([*RECORDER, "run", "-o", str(run), "--confdir", str(conf), "--upstream", f"openai={fake1.url}", "--", *codex],
                           env=env, capture_output=True, text=True, cwd=tmp)
        assert rec.returncode == 0 and "It is sunny in Paris." in rec.stdout, rec.stderr[-4000:]
        recorded = (len(fake1.received), fake1.connections)
        fork = progress.run([*RECORDER, "run", "--from", f"{run}@turn=1", "-o", str(branch), "--confdir", str(conf),
                             "--upstream", f"openai={fake2.url}", "--", *codex], env=env, capture_output=True, text=True, cwd=tmp)
        yield {"run": run, "branch": branch, "rec": rec, "fork": fork, "recorded": recorded, "fake1": fake1, "fake2": fake2,
               "received1": list(fake1.received), "received2": list(fake2.received), "env": env}


def _why(f: dict[str, Any]) -> str:
    p = f["fork"]
    return f"exit {p.returncode}\n--- stdout\n{p.stdout[-2000:]}\n--- stderr\n{p.stderr[-5000:]}"


def test_codex_forked_over_its_websocket_goes_live_past_the_cursor_only(forked: dict[str, Any]) -> None:
    run = open_run(forked["run"], whole=True)
    rts = {rt.seq: rt for rt in run.roundtrips}
    main = next(c for c in run.analysis.conversations if c.turns and c.parent_seq is None)
    calls = [[c.name for c in rts[s].response.tool_calls] for s in main.turns if rts[s].response is not None]  # type: ignore[union-attr]
    assert calls == [["spawn_agent"], ["wait_agent"], []], calls  # the recording: two tool calls, then the answer

    fork = forked["fork"]
    assert fork.returncode == 0 and NEW_ANSWER in fork.stdout, _why(forked)
    # the prefix (prewarms, root turn 0, the sub-agent's whole conversation) reached no upstream
    assert (len(forked["received1"]), forked["fake1"].connections) == forked["recorded"], _why(forked)
    sent = forked["received2"]
    assert [m.get("type") for m in sent] == ["response.create"] * 2 and forked["fake2"].connections == 1, (sent, _why(forked))
    first, second = sent
    # the first live turn continued root turn 0's answer, replayed from the recording: sent self-contained
    assert "previous_response_id" not in first, first.get("previous_response_id")
    kinds = [(i.get("type"), i.get("name")) for i in first["input"]]
    assert ("function_call", "spawn_agent") in kinds and kinds[-1] == ("function_call_output", None), kinds
    assert any(i.get("type") == "message" and i.get("role") == "user" and TASK in json.dumps(i) for i in first["input"])
    # the second continued the live model's own answer, on the same connection: as the client sent it
    assert second.get("previous_response_id") == "new_resp_0", second.get("previous_response_id")
    assert [i.get("type") for i in second["input"]] == ["function_call_output", "agent_message"], second["input"]  # the wait's result, the sub-agent's
    assert "fork at turn=1: 2 requests sent live; went live: c1" in fork.stderr, _why(forked)


def test_the_branch_names_its_origin_and_diff_names_the_first_differing_turn(forked: dict[str, Any]) -> None:
    assert forked["fork"].returncode == 0, _why(forked)
    o = origin_of(forked["branch"])
    assert o is not None and o["run"] == str(forked["run"]) and o["cursor"]["turn"] == 1
    branch = open_run(forked["branch"], whole=True)
    exs = list(branch.exchanges)
    assert len(exs) == 2 and all(any(n.startswith("websocket ") for n in ex.notes) for ex in exs), [ex.notes for ex in exs]
    rts = list(branch.roundtrips)
    assert [[c.name for c in rt.response.tool_calls] for rt in rts if rt.response is not None] == [["wait_agent"], []]
    assert rts[-1].response is not None and rts[-1].response.text == NEW_ANSWER
    diff = progress.run([*RECORDER, "diff", str(forked["run"]), str(forked["branch"])], capture_output=True, text=True, env=forked["env"])
    assert diff.returncode == 1 and "lined up from the cursor" in diff.stdout, diff.stdout + diff.stderr
    first = next(ln for ln in diff.stdout.splitlines() if ln.strip().startswith("turn "))
    assert first.strip().startswith("turn 1") and "E: the model emitted something else" in first, diff.stdout
