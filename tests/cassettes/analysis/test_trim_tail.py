"""A window that keeps the head and the latest round (issue 103; bench/why_cases.py's
``trim-tail``): the request keeps the opening (the user's task) word for word, drops every message
the previous request sent after it, and goes on from the previous answer's echo and its results.
That is a trim (``C.history_trimmed``, the dropped messages by their index in the previous request),
not a rewrite: what stays is the previous request's messages and answer, verbatim and in order, and
nothing stands where the dropped ones were. A request that puts the dropped messages back right
after is the warning (``C.history_mutated``, ``undoes_trim_seq``): that drop was no management.
Dropping less than that (one result, or the first round with later ones kept) stays a mutation.

On f29135f5 (and since becef044): the window read as ``C.history_mutated`` at ``messages[2]``, so
``why`` put nothing back; c86d115d read it as a trim."""

from __future__ import annotations

import pytest
from scenarios import WEATHER, AgentScript, Call

from looptap.cassettes.analysis import Finding, RunAnalysis

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
TASK = "Weather in Paris and Lyon, and the time in Lyon?"


def _three_rounds(family: str, parallel: bool) -> tuple[AgentScript, list[Call]]:
    """The task, then three rounds of calls and results (the last with two calls when
    ``parallel``); the history is the opening, then the rounds, two items each before the last."""
    a = AgentScript(family, tools=[WEATHER], system="You are the weather agent.")
    a.user(TASK)
    a.reply(calls=[Call("get_weather", {"city": "Paris"}, id="call_t0")])
    a.results("Paris: sunny")
    a.reply(calls=[Call("get_weather", {"city": "Lyon"}, id="call_t1")])
    a.results("Lyon: rain")
    last = [Call("get_weather", {"city": "Nice"}, id="call_t2")]
    if parallel:
        last.append(Call("get_weather", {"city": "Nantes"}, id="call_t3"))
    a.reply(calls=last)
    a.results(*("Nice: cloudy", "Nantes: fog")[: len(last)])
    return a, last


def _of(run: RunAnalysis, code: str) -> list[Finding]:
    return [f for f in run.findings if f.code == code]


@pytest.mark.parametrize("parallel", [False, True], ids=["one-call", "two-calls"])
@pytest.mark.parametrize("family", FAMILIES4)
def test_the_head_and_the_latest_round_kept_is_a_trim(family: str, parallel: bool) -> None:
    a, _ = _three_rounds(family, parallel)
    del a.history[1:5]  # the first two rounds: the opening, then the latest answer and results
    a.reply("Paris: sunny; Lyon: unknown.")
    run = a.analyse()
    last = len(a.exchanges) - 1
    assert _of(run, "C.history_mutated") == []
    (trim,) = _of(run, "C.history_trimmed")
    assert trim.seq == last
    # the 4 messages of the previous request after its opening (its system message first on Chat)
    first = 2 if family == "openai_chat" else 1
    assert trim.details["dropped"] == list(range(first, first + 4))
    assert "dropped 4 messages" in trim.message and "put nothing in their place" in trim.message
    assert len(run.conversations) == 1


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_trim_the_next_request_puts_back_was_none(family: str) -> None:
    a, _ = _three_rounds(family, parallel=False)
    whole = list(a.history)
    del a.history[1:5]
    a.reply(calls=[Call("get_weather", {"city": "Lyon"}, id="call_t4")])  # answered on the window
    put_back = whole + a.history[3:]  # what was dropped back, then the window's answer onwards
    a.results("Lyon: 12:00")
    a.history[:] = put_back + a.history[len(a.history) - 1 :]
    a.reply("Paris: sunny; Lyon: rain.")
    run = a.analyse()
    trimmed, undone = len(a.exchanges) - 2, len(a.exchanges) - 1
    assert [f.seq for f in _of(run, "C.history_trimmed")] == [trimmed]
    (mutated,) = _of(run, "C.history_mutated")
    assert (mutated.seq, mutated.severity.value) == (undone, "warning")
    assert mutated.details["undoes_trim_seq"] == trimmed
    assert "puts back what turn" in mutated.message


@pytest.mark.parametrize("family", FAMILIES4)
@pytest.mark.parametrize("cut", ["first-round", "last-result"])
def test_less_than_the_whole_middle_dropped_stays_a_mutation(family: str, cut: str) -> None:
    a, _ = _three_rounds(family, parallel=False)
    if cut == "first-round":
        del a.history[1:3]  # the first round, the second kept: a dropped middle
    else:
        del a.history[4]  # the second round's result, its call kept
    a.reply("Paris: sunny; Lyon: unknown.")
    run = a.analyse()
    assert [f.seq for f in _of(run, "C.history_mutated")] == [len(a.exchanges) - 1]
    assert _of(run, "C.history_trimmed") == []
