"""A framework's retry of a tool call cut by the token cap, recorded with the real framework
through the real ``looptap run`` against a scripted upstream (issue 90: "a framework's forced-tool
retry is threaded as side calls, so a truncated tool call run again later is flagged once, and its
repeats are not").

pydantic-ai-slim 2.68.0 (``.venv-clients``, tests/clients/requirements.txt), Anthropic's Messages
API, an agent whose output is a tool (``output_type``: the ``final_result`` tool, sent with
``tool_choice: any``). The upstream cuts the first answer inside ``get_weather``'s arguments
(``stop_reason: max_tokens``, ``{"city": "Pa``), then the model looks Paris up again and again:

* ``FallbackModel(..., fallback_on=OutputTokenLimitExceeded)``: the cut answer is rejected and the
  **same request** goes to the next model (``_fallback.py``: ``output_token_limit`` rejects any
  response with ``finish_reason='length'``). That request is the conversation's retry of the cut
  answer, not another agent starting alike;
* ``FallbackModel(..., fallback_on=IncompleteToolCall)`` (the exception issue 90's reading named):
  read from pydantic-ai's source, it is **not** a request-level fallback (``_fallback.py`` leaves
  ``IncompleteToolCall`` out of ``output_token_limit``, and the agent raises it only after its
  output retries are spent). The cut call is answered in place by an error tool result (its
  ``json_invalid`` validation) and the model asked again: the loop goes on in one request chain.

Both: one conversation, each repeat of the lookup said in it (``E.repeated_call`` at every
repeat), nothing hidden as a side call. The recordings are core fixtures
(tests/cassettes/analysis/data/ctx/, tests/cassettes/analysis/test_clients_recorded.py).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import keep
from tests.clients.test_matrix import _explain, _final, _findings, _interpreter, _run
from tests.support.recorder import needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

#: How many times the model looks Paris up once the cut call is behind it (the first is no repeat).
LOOKUPS = 7

PYDANTIC_AI = """
from pydantic import BaseModel
from pydantic_ai import Agent, IncompleteToolCall
from pydantic_ai.exceptions import OutputTokenLimitExceeded
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.fallback import FallbackModel
class Forecast(BaseModel):
    forecast: str
ON = {"limit": OutputTokenLimitExceeded, "incomplete": IncompleteToolCall}[FALLBACK_ON]
model = FallbackModel(AnthropicModel("claude-sonnet-4-5"), AnthropicModel("claude-opus-4-1"), fallback_on=ON)
agent = Agent(model, system_prompt=SYSTEM, tools=[get_weather], output_type=Forecast)
out(final=agent.run_sync("What is the weather in Paris right now?").output.forecast)
"""  # noqa: E501


def _route(req: ScriptedRequest) -> Reply:
    """The first request's answer cut inside the call's arguments; then Paris looked up
    :data:`LOOKUPS` times (the same result each time); then the forecast, by the output tool."""
    results = req.tool_results()
    if not results and req.model == "claude-sonnet-4-5":
        return Reply(calls=(Call("get_weather", '{"city": "Pa'),), cut=True, what="cut")
    looked_up = sum("WEATHER: Paris" in r for r in results)
    if looked_up < LOOKUPS:
        return Reply.tool("get_weather", {"city": "Paris"}, what=f"lookup:{looked_up + 1}")
    return Reply.tool("final_result", {"forecast": "FORECAST: Paris sunny"}, what="answer")


@dataclass(frozen=True)
class Case:
    id: str
    fallback_on: str
    #: the round trips, all one conversation
    seqs: tuple[int, ...]
    #: the seq of the request sent again (the retry), or None when the loop goes on in place
    retry: int | None
    #: the seqs whose lookup repeats an earlier one (each must be said)
    repeats: tuple[int, ...]


CASES = (
    Case("pydantic-ai fallback on output limit", "limit", tuple(range(LOOKUPS + 2)), 1,
         tuple(range(2, LOOKUPS + 1))),
    Case("pydantic-ai fallback on incomplete tool call", "incomplete", tuple(range(LOOKUPS + 2)),
         None, tuple(range(2, LOOKUPS + 1))),
)  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_cut_tool_call_retried_by_the_framework_stays_one_conversation(
    case: Case, tmp_path: Path
) -> None:
    script = f"\nFALLBACK_ON = {case.fallback_on!r}" + PYDANTIC_AI
    c = Client(case.id, "pydantic-ai-slim", "", "frameworks", script, (), "")
    interp = _interpreter(c)
    if subprocess.run([*interp, "-c", "import pydantic_ai"], capture_output=True).returncode:
        pytest.skip(f"pydantic-ai is not in {interp[0]} (tests/clients/requirements.txt)")
    with ScriptedUpstream(_route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)
    keep(out, case.id)
    why = _explain(proc, up)
    assert (_final(proc) or "").startswith("FORECAST"), why
    asked = [(e.seq, e.reply.what if e.reply else "") for e in up.log]
    assert [w for _, w in asked][:1] == ["cut"], why
    cas, an = _findings(out)
    bodies = [json.loads(e.request_body) for e in cas.exchanges]
    # the output tool is forced on every request (Anthropic's tool_choice "any")
    assert all((b.get("tool_choice") or {}).get("type") == "any" for b in bodies), why
    if case.retry is not None:  # the same request again, to the fallback model
        first, again = bodies[0], bodies[case.retry]
        assert again["messages"] == first["messages"] and again["model"] != first["model"], why
    said = [
        f"{f.code} {f.severity} seq={f.seq} conv={f.conversation}: {f.message}" for f in an.findings
    ]
    convs = [(conv.kind, conv.parent_seq, tuple(conv.turns)) for conv in an.conversations]
    assert [cv for cv in convs if cv[2]] == [("main", None, case.seqs)], (convs, said)
    (main,) = [conv.id for conv in an.conversations if conv.turns]
    repeats = [f for f in an.findings if f.code == "E.repeated_call"]
    assert sorted(f.seq or 0 for f in repeats) == list(case.repeats), said
    assert {f.conversation for f in repeats} == {main}, said
    # the cut itself is said where it happened, once
    assert [f.seq for f in an.findings if f.code == "A.truncated_length"] == [0], said


# -- other frameworks' forced-tool retries (read from their sources; each recorded) -------------
#
# * instructor 1.15.4 (.venv-crewai, beside CrewAI which depends on it): its forced call
#   (``tool_choice`` names the response model's function) that fails validation is asked again
#   in the conversation (the call echoed, its error as the tool's answer, v2/core/retry.py
#   ``reask_handler``); a call cut by the token cap raises ``IncompleteOutputException`` and is
#   never retried;
# * Strands 1.62.0 ``structured_output_model``: an answer in text is followed by the same
#   conversation with the structured-output tool alone, forced (``tool_choice`` names it), and
#   a forced call that fails validation is forced again after its error result;
#   a ``max_tokens`` stop raises ``MaxTokensReachedException`` and is never retried.
# LangChain's ``with_structured_output`` and openai-agents' ``tool_use_behavior`` retry nothing.
# Both are one conversation on c86d115d too: guards.

INSTRUCTOR = """
import instructor
from openai import OpenAI
from pydantic import BaseModel
class Forecast(BaseModel):
    forecast: str
client = instructor.from_openai(OpenAI())
f = client.chat.completions.create(model="gpt-4o", response_model=Forecast, max_retries=2, messages=[
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What is the weather in Paris? WEATHER: Paris is sunny"}])
out(final=f.forecast)
"""  # noqa: E501

STRANDS_STRUCTURED = """
from pydantic import BaseModel
from strands import Agent, tool
from strands.models.openai import OpenAIModel
class Forecast(BaseModel):
    forecast: str
model = OpenAIModel(client_args={"api_key": os.environ["OPENAI_API_KEY"]}, model_id="gpt-4o")
agent = Agent(model=model, tools=[tool(get_weather)], system_prompt=SYSTEM, callback_handler=None)
out(final=agent("What is the weather in Paris?", structured_output_model=Forecast).structured_output.forecast)
"""  # noqa: E501


def _forced_route(req: ScriptedRequest) -> Reply:
    """Forced (``tool_choice`` names a function): first a call missing its field, then a whole
    one; else Paris looked up, then an answer in text."""
    body = req.body if isinstance(req.body, dict) else {}
    seen = json.dumps(req.messages)
    if body.get("tool_choice") not in (None, "auto"):
        if "Forecast" not in seen:
            return Reply.tool("Forecast", {"city": "Paris"}, what="forced:invalid")
        return Reply.tool("Forecast", {"forecast": "FORECAST: Paris sunny"}, what="forced")
    if "WEATHER: Paris" not in seen:
        return Reply.tool("get_weather", {"city": "Paris"}, what="call")
    return Reply.say("It is sunny in Paris.", what="text")


@pytest.mark.parametrize(
    ("name", "package", "runtime", "script", "seqs", "serious"),
    [
        ("instructor reask", "instructor", "crewai", INSTRUCTOR, [0, 1],
         [("E.arguments_schema", 0)]),
        ("strands structured output", "strands", "agents_py", STRANDS_STRUCTURED, [0, 1, 2, 3],
         [("E.arguments_schema", 2)]),
    ],
    ids=["instructor reask", "strands structured output"],
)  # fmt: skip
def test_another_frameworks_forced_tool_retry_stays_one_conversation(
    name: str,
    package: str,
    runtime: str,
    script: str,
    seqs: list[int],
    serious: list[tuple[str, int]],
    tmp_path: Path,
) -> None:
    c = Client(name, package, "", runtime, script, (), "")
    interp = _interpreter(c)
    if subprocess.run([*interp, "-c", f"import {package}"], capture_output=True).returncode:
        pytest.skip(f"{package} is not in {interp[0]}")
    with ScriptedUpstream(_forced_route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)
    keep(out, name)
    why = _explain(proc, up)
    assert (_final(proc) or "").startswith("FORECAST"), why
    cas, an = _findings(out)
    forced = [json.loads(e.request_body).get("tool_choice") for e in cas.exchanges]
    assert forced[-1] == {"type": "function", "function": {"name": "Forecast"}}, why
    said = [f"{f.code} {f.severity} seq={f.seq}: {f.message}" for f in an.findings]
    convs = [(cv.kind, cv.turns) for cv in an.conversations if cv.turns]
    assert convs == [("main", seqs)], (convs, said)
    found = [(f.code, f.seq) for f in an.findings if f.severity in ("warning", "error")]
    # the model's invalid forced call is true (instructor's case); nothing else serious
    assert found == serious, said
