"""Real clients that manage their context on the paths issue 90 item 4 names, each recorded
through the real ``looptap run`` against a scripted upstream that answers as the API does: one
conversation however the client got there, the management said once, its side call under the turn
it was asked over, and no false finding.

* **Strands** ``SummarizingConversationManager`` (strands-agents 1.62.0, ``.venv-agents``): the API
  answers a long history with OpenAI's 400 ``context_length_exceeded``; the manager asks the model
  for a summary of the oldest messages (its own system prompt, the messages, then ``Please
  summarize this conversation.``) and retries with the summary, as a user message, in their place;
* **CrewAI** ``respect_context_window=True`` (crewai 1.15.30, ``.venv-crewai``): after the same 400,
  the agent's whole history is rendered as text into one summariser request (``<conversation>…``),
  and the summary (``<summary>…</summary>``) replaces every message but the system prompt;
* **Google ADK** events compaction (google-adk 2.13.0, ``.venv-agents``): ``EventsCompactionConfig``
  on an ``App`` compacts the session's events after every few invocations; its summariser gets the
  events rendered as text, and the next invocation's request carries the summary in place of the
  compacted events.

The 400 itself is the API's refusal (``A.http_error`` at that round trip): a true finding, and the
only one expected beside the management. docs/threading.md says what each sends.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import findings_said, keep, side_calls, threads
from tests.clients.test_matrix import PYTHONS, _explain, _final, _findings, _interpreter, _run
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

CITIES = ("Paris", "Tokyo", "Berlin", "Madrid")
#: What says a client managed its context: one of them, once, is expected.
MANAGED = ("C.history_trimmed", "A.context_edited")
#: What a management causes and may say folded under it.
FOLDED = ("C.cache_prefix_broken",)
#: OpenAI's answer to a request past the model's window (the code Strands' and CrewAI's
#: classifiers read: strands/models/_openai_errors.py, crewai's CONTEXT_LIMIT_ERRORS).
OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "131072 tokens. Please reduce the length of the messages."
)
#: Gemini's answer to the same (its ``INVALID_ARGUMENT``; what strands/models/gemini.py reads).
OVERFLOW_GEMINI = (
    "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
)
#: The summarisers' own prompts (their sources): what the scripted model takes for a summary call.
SUMMARISERS = (
    "You are a conversation summarizer.",  # strands DEFAULT_SUMMARIZATION_PROMPT
    "You are a precise assistant that creates structured summaries",  # crewai translations
    "The following is a conversation history between a user and an AI agent.",  # google-adk
)
Route = Callable[[ScriptedRequest], Reply]


def _overflow_after(results: int) -> Route:
    """One get_weather call per request for each city the user's texts name and no text of the
    request answers yet, then the forecast; the first request that carries ``results`` tool
    results or more is refused as past the window (once); a summariser's request is answered with
    the task and what is known."""
    refused = [False]

    def route(req: ScriptedRequest) -> Reply:
        everything = json.dumps(req.messages) + req.system
        if any(s in req.system or s in everything for s in SUMMARISERS):
            known = sorted(set(re.findall(r"WEATHER: \w+ is \w+", everything)))
            asked = [c for c in CITIES if c in everything]
            return Reply.say(
                f"<summary>The user asked for the weather in {', '.join(asked)}. Known so far: "
                + "; ".join(known)
                + "</summary>",
                what="side:summary",
            )
        if not refused[0] and len(req.tool_results()) >= results:
            refused[0] = True
            if req.family == "gemini":
                return Reply.refuse(OVERFLOW_GEMINI)
            return Reply.refuse(OVERFLOW, param="messages", code="context_length_exceeded")
        done = set(re.findall(r"WEATHER: (\w+)", everything))
        asked = [c for c in CITIES if c in " ".join(req.user_texts())]
        todo = [c for c in asked if c not in done]
        if todo:
            return Reply.tool("get_weather", {"city": todo[0]}, what=f"call:{todo[0]}")
        return Reply.say("FORECAST: " + ", ".join(asked), what="answer")

    return route


STRANDS_SUMMARISING = """
from strands import Agent, tool
from strands.agent.conversation_manager import SummarizingConversationManager
if globals().get("STRANDS_MODEL") == "gemini":
    from strands.models.gemini import GeminiModel
    model = GeminiModel(client_args={"api_key": os.environ["GEMINI_API_KEY"]}, model_id="gemini-2.5-flash")
elif globals().get("STRANDS_MODEL") == "responses":
    from strands.models.openai_responses import OpenAIResponsesModel
    model = OpenAIResponsesModel(client_args={"api_key": os.environ["OPENAI_API_KEY"]}, model_id="gpt-4o")
else:
    from strands.models.openai import OpenAIModel
    model = OpenAIModel(client_args={"api_key": os.environ["OPENAI_API_KEY"]}, model_id="gpt-4o")
# the documented idiom: summarise the oldest half when the context overflows, keep the latest two
manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
agent = Agent(model=model, tools=[tool(get_weather)], system_prompt=SYSTEM, callback_handler=None,
              conversation_manager=manager)
out(final=str(agent(TASK)))
"""  # noqa: E501

#: The same on Gemini's API, where no call id links the retry to the turns before it.
STRANDS_SUMMARISING_GEMINI = '\nSTRANDS_MODEL = "gemini"' + STRANDS_SUMMARISING
#: And on the Responses API (the history re-sent as input items).
STRANDS_SUMMARISING_RESPONSES = '\nSTRANDS_MODEL = "responses"' + STRANDS_SUMMARISING

CREWAI_CONTEXT_WINDOW = """
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool
weather_tool = tool("get_weather")(get_weather)
agent = Agent(role="Weather assistant", goal="Report the weather in every city asked about", backstory=SYSTEM,
              tools=[weather_tool], llm=LLM(model="gpt-4o"), respect_context_window=True, verbose=False)
task = Task(description=TASK, expected_output="The weather in each city", agent=agent)
out(final=str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff()))
"""  # noqa: E501

ADK_COMPACTION = """
import asyncio
from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.runners import InMemoryRunner
from google.genai import types
agent = LlmAgent(name="weather_agent", model="gemini-2.5-flash", instruction=SYSTEM, tools=[get_weather])
# ADK's sliding-window compaction: after every 2 invocations, their events are summarised
app = App(name="weather", root_agent=agent,
          events_compaction_config=EventsCompactionConfig(compaction_interval=2, overlap_size=0))
async def main():
    runner = InMemoryRunner(app=app)
    session = await runner.session_service.create_session(app_name="weather", user_id="user")
    final = None
    for question in ("What is the weather in Paris?", "And in Tokyo?", "And in Berlin?"):
        async for event in runner.run_async(user_id="user", session_id=session.id,
                                            new_message=types.Content(role="user", parts=[types.Part(text=question)])):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
    out(final=final)
asyncio.run(main())
"""  # noqa: E501


@dataclass(frozen=True)
class Case:
    id: str
    package: str
    runtime: str
    script: str
    route: Callable[[], Route]
    #: seqs of the one conversation the client kept, in order (the refused request one of them)
    main: tuple[int, ...]
    #: the side calls the management made: (seq, the seq of the turn it was asked over)
    side: tuple[tuple[int, int], ...]
    #: the request the API refused as past its window
    refused: int | None
    #: where the management is said, with which code and kind
    at: int
    code: str
    kind: str
    final: str
    #: what c86d115d said of the run (the misreading this test catches)
    before: str


CASES = (
    Case(
        "strands summarizing after overflow", "strands-agents", "agents_py", STRANDS_SUMMARISING,
        lambda: _overflow_after(3), main=(0, 1, 2, 3, 5), side=((4, 1),), refused=3, at=5,
        code="C.history_trimmed", kind="summarised", final="FORECAST",
        before="(see the test's report)",
    ),
    Case(
        "strands summarizing after overflow gemini", "strands-agents", "agents_py",
        STRANDS_SUMMARISING_GEMINI, lambda: _overflow_after(3), main=(0, 1, 2, 3, 5),
        side=((4, 1),), refused=3, at=5, code="C.history_trimmed", kind="summarised",
        final="FORECAST", before="(see the test's report)",
    ),
    Case(
        "strands summarizing after overflow responses", "strands-agents", "agents_py",
        STRANDS_SUMMARISING_RESPONSES, lambda: _overflow_after(3), main=(0, 1, 2, 3, 5),
        side=((4, 1),), refused=3, at=5, code="C.history_trimmed", kind="summarised",
        final="FORECAST", before="(see the test's report)",
    ),
    Case(
        "crewai respect_context_window", "crewai", "crewai", CREWAI_CONTEXT_WINDOW,
        lambda: _overflow_after(3), main=(0, 1, 2, 3, 5), side=((4, 3),), refused=3, at=5,
        code="C.history_trimmed", kind="summarised", final="FORECAST",
        before="(see the test's report)",
    ),
    Case(
        "google-adk events compaction", "google-adk", "agents_py", ADK_COMPACTION,
        lambda: _overflow_after(99), main=(0, 1, 2, 3, 5, 6), side=((4, 3),), refused=None,
        at=5, code="C.history_trimmed", kind="summarised", final="FORECAST",
        before="(see the test's report)",
    ),
)  # fmt: skip


def _record(case: Case, tmp_path: Path, up: ScriptedUpstream) -> tuple[Any, Path]:
    c = Client(case.id, case.package, "", case.runtime, case.script, (), "")
    interp = _interpreter(c)
    if case.runtime in PYTHONS:
        module = {"strands-agents": "strands", "google-adk": "google.adk"}.get(
            case.package, case.package.replace("-", "_")
        )
        if subprocess.run([*interp, "-c", f"import {module}"], capture_output=True).returncode:
            pytest.skip(f"{case.package} is not in {interp[0]}")
    return _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_managed_on_its_path_is_one_conversation_said_once(case: Case, tmp_path: Path) -> None:
    with ScriptedUpstream(case.route(), validate=True) as up:
        proc, out = _record(case, tmp_path, up)
    keep(out, case.id)
    why = _explain(proc, up)
    final = _final(proc)
    assert final and case.final in final, why
    cas, an = _findings(out)
    statuses = [(e.seq, e.status) for e in cas.exchanges if e.status != 200]
    assert statuses == ([] if case.refused is None else [(case.refused, 400)]), why
    assert side_calls(up) == [s for s, _ in case.side], why
    said, convs = findings_said(an), threads(an)
    assert sorted(convs) == sorted(
        [("main", None, case.main), *(("side_call", parent, (seq,)) for seq, parent in case.side)]
    ), (convs, said, case.before)
    managed = [f for f in an.findings if f.code in MANAGED]
    assert [(f.code, f.seq) for f in managed] == [(case.code, case.at)], said
    details = managed[0].details
    assert details.get("kind") == case.kind, details
    assert details.get("summary_by_seq") == (case.side[0][0] if case.side else None), details
    folded = [
        f
        for f in an.findings
        if f.code in FOLDED and f.seq == case.at and f.details.get("caused_by") == case.code
    ]
    refusal = [f for f in an.findings if f.code == "A.http_error" and f.seq == case.refused]
    others = [
        s
        for f, s in zip(an.findings, said, strict=True)
        if f.code not in MANAGED and f not in folded and f not in refusal
    ]
    assert not others, (others, case.before)
