"""Summarising memory managers whose summary lands somewhere other than in place of the history
(issue 103, item 2), each recorded through the real ``looptap run`` against a scripted upstream that
answers as the API does: one conversation, the summary call a side call of the turn whose history
it was given, the trim said once per run with the side call that replaced it, no false finding.

* **Agno** session summaries (agno 3.1.10, ``.venv-agents``): ``enable_session_summaries=True``;
  after every run the ``SessionSummaryManager`` sends the session as a transcript inside its
  *system prompt* (``<conversation>User: …Assistant: …</conversation>``) and asks for a JSON object
  (``response_format`` json_schema ``SessionSummaryResponse``); the next run's system prompt carries
  the answer's ``summary`` field (``<summary_of_previous_interactions>``), the history one run long
  (``num_history_runs=1``);
* **Haystack** ``SummarizationCompactor`` under a ``CompactionHook`` (haystack-ai 3.4.1,
  ``.venv-agents``): before an LLM call past the hook's budget, the oldest turns go to a summariser
  (its instruction as system prompt, the turns rendered inside ``<conversation_to_summarize>``), and
  the summary comes back as a user message ``<conversation_summary>…</conversation_summary>`` where
  they stood;
* **LlamaIndex** ``ChatSummaryMemoryBuffer`` (llama-index-core 0.14.25, ``.venv-clients``): a chat
  engine whose memory, past its token limit, asks the LLM for a summary of the oldest messages
  (rendered as text in a user message) and puts the answer back as a *system* message.

docs/threading.md ("Context management in the wild") says what each sends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clients.clients import Client
from tests.clients.outcome import findings_said, keep, side_calls, threads
from tests.clients.test_matrix import _explain, _final, _findings, _interpreter, _run
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

# Each run takes about 30 s; test_context_recorded.py reads the recordings kept from them
# (data/ctx/) on every run of the suite: record once, read many.
pytestmark = [
    needs_recorder,
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("LOOPTAP_SLOW"), reason="LOOPTAP_SLOW=1 (about 2 min)"),
]

CITIES = ("Paris", "Tokyo", "Berlin")
QUESTIONS = ("What is the weather in Paris?", "And in Tokyo?", "And in Berlin?")
#: The summarisers' own prompts (their sources): what the scripted model takes for a summary call.
SUMMARISERS = (
    # agno session/summary.py SessionSummaryManager.get_system_message
    "Analyze the following conversation between a user and an assistant",
    # haystack hooks/compaction/summarization.py _DEFAULT_SUMMARY_INSTRUCTION
    "You are compacting one portion of a conversation",
    # llama_index core/memory/chat_summary_memory_buffer.py SUMMARIZE_PROMPT
    "The following is a conversation between the user and assistant.",
)
#: What says a client managed its context, and what a management causes and may fold.
MANAGED = ("C.history_trimmed",)
FOLDED = ("C.cache_prefix_broken",)

Route = Callable[[ScriptedRequest], Reply]


def _route(structured: bool) -> Route:
    """One get_weather call for the city the latest question names (the first question's city when
    it names none), then the forecast; a summariser's request is answered with what it was given
    (as the JSON object Agno asks for when ``structured``)."""

    def route(req: ScriptedRequest) -> Reply:
        everything = json.dumps(req.messages) + req.system
        if any(s in req.system or s in json.dumps(req.messages[:2]) for s in SUMMARISERS):
            known = sorted(set(re.findall(r"WEATHER: \w+ is \w+", everything)))
            asked = [c for c in CITIES if c in everything]
            text = (
                f"The user asked for the weather in {', '.join(asked)}; the assistant looked it "
                f"up with get_weather. Known so far: {'; '.join(known) or 'nothing yet'}."
            )
            if structured:
                text = json.dumps({"summary": text, "topics": ["weather", *asked]})
            return Reply.say(text, what="side:summary")
        users = req.user_texts()
        last = next((u for u in reversed(users) if "?" in u and "<" not in u), "")
        city = next((c for c in CITIES if c in last), None)
        after = everything.rsplit(last, 1)[-1] if last else everything
        if city and f"WEATHER: {city}" not in after and "get_weather" in req.tools:
            return Reply.tool("get_weather", {"city": city}, what=f"call:{city}")
        return Reply.say(
            f"FORECAST: it is {city or 'as reported above'}. The forecast comes from the weather "
            "service and holds for the rest of the day.",
            what="answer",
        )

    return route


AGNO_SUMMARIES = """
from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.openai import OpenAIChat
# Agno's session summaries: after every run the session is summarised (a JSON object), and the
# next run's system prompt carries the summary; the history one run long
agent = Agent(model=OpenAIChat(id="gpt-4o"), tools=[get_weather], instructions=SYSTEM, telemetry=False,
              db=InMemoryDb(), session_id="weather-session", enable_session_summaries=True,
              add_history_to_context=True, num_history_runs=1)
final = None
for question in QUESTIONS:
    final = agent.run(question).content
out(final=final)
"""  # noqa: E501

HAYSTACK_COMPACTION = """
from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import CompactionHook, SummarizationCompactor
from haystack.tools import create_tool_from_function
generator = OpenAIChatGenerator(model="gpt-4o")
# the documented idiom, with a window small enough that the third question's call compacts
hook = CompactionHook(compactor=SummarizationCompactor(chat_generator=OpenAIChatGenerator(model="gpt-4o"),
                                                       approximate_summary_tokens=40),
                      context_window=COMPACT_WINDOW, compact_at=0.7, compact_to=0.4)
agent = Agent(chat_generator=generator, tools=[create_tool_from_function(get_weather)], system_prompt=SYSTEM,
              hooks={"before_llm": [hook]})
agent.warm_up()
messages = []
for question in QUESTIONS:
    messages = agent.run(messages=[*messages, ChatMessage.from_user(question)])["messages"]
    messages = [m for m in messages if not m.is_from("system")]
out(final=messages[-1].text)
"""  # noqa: E501

LLAMA_SUMMARY_BUFFER = """
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.memory import ChatSummaryMemoryBuffer
from llama_index.llms.openai import OpenAI
llm = OpenAI(model="gpt-4o")
# the summary buffer: past its token limit the oldest messages are summarised by the LLM
memory = ChatSummaryMemoryBuffer.from_defaults(llm=llm, token_limit=20, tokenizer_fn=lambda s: s.split())
engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM)
final = None
for question in QUESTIONS:
    final = str(engine.chat(question))
out(final=final)
"""  # noqa: E501

PRELUDE = f"QUESTIONS = {QUESTIONS!r}\nCOMPACT_WINDOW = 300\n"


#: id → (package, its environment, the script, whether the summary is asked as JSON)
CASES = {
    "agno session summaries": ("agno", "agents_py", AGNO_SUMMARIES, True),
    "haystack summarization compactor": ("haystack-ai", "agents_py", HAYSTACK_COMPACTION, False),
    "llama-index chat summary buffer": (
        "llama-index-core",
        "frameworks",
        LLAMA_SUMMARY_BUFFER,
        False,
    ),
}

_MODULE = {"haystack-ai": "haystack", "llama-index-core": "llama_index.core"}


def _record(name: str, tmp_path: Path, up: ScriptedUpstream) -> tuple[Any, Path]:
    package, runtime, script, _ = CASES[name]
    c = Client(name, package, "", runtime, PRELUDE + script, (), "")
    interp = _interpreter(c)
    module = _MODULE.get(package, package)
    if subprocess.run([*interp, "-c", f"import {module}"], capture_output=True).returncode:
        pytest.skip(f"{package} is not in {interp[0]}")
    return _run(c, None, tmp_path, tmp_path / "mitmproxy-conf", up)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_summary_is_a_side_call_of_one_conversation(name: str, tmp_path: Path) -> None:
    with ScriptedUpstream(_route(CASES[name][3]), validate=True) as up:
        proc, out = _record(name, tmp_path, up)
    keep(out, name)
    why = _explain(proc, up)
    final = _final(proc)
    assert final and "FORECAST" in final, why
    _, an = _findings(out)
    said, convs = findings_said(an), threads(an)
    side = side_calls(up)
    assert side, why
    mains = [c for c in convs if c[0] == "main"]
    assert len(mains) == 1, (convs, said)
    assert sorted(s for k, _, turns in convs if k == "side_call" for s in turns) == side, convs
    assert len(convs) == 1 + len(side), convs
    managed = [f for f in an.findings if f.code in MANAGED]
    assert managed, said
    for f in managed:
        by = f.details.get("summary_by_seq")
        assert by in side, (f.message, f.details)
        assert f"replaced by the summary of side call #{by}" in f.message, f.message
    # folded under the management, or the system prompt changed to carry a summary while the
    # history went on whole (Agno's second run): a true info
    folded = [
        f
        for f in an.findings
        if f.code in FOLDED and (f.details.get("caused_by") in MANAGED or f.severity == "info")
    ]
    others = [
        s for f, s in zip(an.findings, said, strict=True) if f not in managed and f not in folded
    ]
    assert not others, others
