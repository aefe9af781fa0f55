"""Kept messages equal to an earlier request's (issue 90): an agent repeats a lookup and gets the
same result, then its client trims the history to the task and the latest call and result. On a
wire without call ids (Gemini, Ollama), or under a client that rewrites them, that request is
exactly an earlier request of the conversation again; it is still this conversation's history
managed (the latest answer and its result kept), not a take-back to the earlier request nor a new
conversation, and the turn before it does not stop with its calls pending.

On c86d115d: a new conversation at the trimmed request, with a false
``C.stopped_with_pending_calls`` on the turn before."""

from __future__ import annotations

import pytest
from scenarios import WEATHER, AgentScript, Call, edit_request, rewrite_call_ids, serious, threads

SYSTEM = "You are a weather assistant. Use the tools to answer."
LOOKUP = Call("get_weather", {"city": "Oslo"})


def _repeats(family: str) -> AgentScript:
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    s.user("What is the weather in Oslo right now?")
    for n in range(3):  # the same lookup three times, the same result each time
        s.reply(calls=[Call(LOOKUP.name, LOOKUP.args, id=f"call_q{n}")])
        s.results("snow, -3 C")
    return s


@pytest.mark.parametrize("family", ["gemini", "ollama"])
def test_a_trim_equal_to_an_earlier_request_stays_in_its_conversation(family: str) -> None:
    s = _repeats(family)
    task = s.history[:1]
    s.history[:] = [*task, *s.history[-2:]]  # the task, the latest call and its result
    s.reply("It is snowing in Oslo, -3 C.")
    run = s.analyse()
    assert threads(run) == [[0, 1, 2, 3]]
    assert [(f.code, f.seq) for f in run.findings if f.code == "C.history_trimmed"] == [
        ("C.history_trimmed", 3)
    ]
    assert not [f for f in run.findings if f.code == "C.stopped_with_pending_calls"]
    assert [x for x in serious(run) if x[0] != "E.repeated_call"] == []


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_a_trim_equal_to_an_earlier_request_under_rewritten_ids(family: str) -> None:
    """A client that numbers the ids it sends from 0 in every request (ids the model never gave):
    the trimmed request equals an earlier one, ids included."""
    s = _repeats(family)
    task = s.history[:1]
    s.history[:] = [*task, *s.history[-2:]]
    ex = s.reply("It is snowing in Oslo, -3 C.")
    edit_request(ex, lambda body: rewrite_call_ids(family, body, lambda old: "call_q0"))
    run = s.analyse()
    assert threads(run) == [[0, 1, 2, 3]]
    assert not [f for f in run.findings if f.code == "C.stopped_with_pending_calls"]


def test_clean_twin_a_first_request_again_is_a_new_agent() -> None:
    """The conversation's first request again (no call in it) is another agent starting alike,
    as before."""
    s = _repeats("gemini")
    s.history[:] = s.history[:1]
    s.reply("It is snowing in Oslo, -3 C.")
    run = s.analyse()
    assert len(threads(run)) == 2
