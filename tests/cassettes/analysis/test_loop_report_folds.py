"""A report of a loop folds under the loop it reports (issue 83, item 6):
``C.loop_reported_not_stopped`` was the first warning of 44 labelled multi-agent runs, a round
trip or more after the step people labelled, ahead of earlier warnings. The agent saying it loops
is a consequence of the loop: the report is folded (info, ``details.caused_by``) under the first
repeated call of its task (``E.repeated_call``), in its own conversation or, for an orchestrator
that reports the loop of the agent it directs, in that agent's; ordered right after it, the cause
carrying its warning."""

from __future__ import annotations

import pytest
from scenarios import FAMILIES, WEATHER, AgentScript, Call, Script, run_of

from looptap.cassettes.analysis import Finding, RunAnalysis

LOOP, REPEAT = "C.loop_reported_not_stopped", "E.repeated_call"
STUCK = "I am stuck in a loop: the forecast never loads."
PARIS = Call("get_weather", {"city": "Paris"})


def _ledger(loop: bool) -> str:
    """Magentic-One's progress ledger, as its orchestrator answers it."""
    return (
        '{"is_request_satisfied": {"reason": "No forecast yet.", "answer": false}, '
        f'"is_in_loop": {{"reason": "The surfer repeats itself.", "answer": {str(loop).lower()}}}, '
        '"next_speaker": {"reason": "Ask again.", "answer": "WebSurfer"}}'
    )


def _code(run: RunAnalysis, code: str) -> list[Finding]:
    return [f for f in run.findings if f.code == code]


@pytest.mark.parametrize("family", FAMILIES)
def test_an_agent_saying_it_loops_while_it_repeats_a_call_folds_under_the_first_repeat(
    family: str,
) -> None:
    """The same call on turns 0-3; the agent says it is stuck on turns 2 and 3 and is called
    again on turn 4: the report folds under the first repeat (turn 1), after it in the order."""
    s = Script(family, tools=[WEATHER])
    s.user("Forecast for Paris?")
    for text in (None, None, STUCK, STUCK):
        s.reply(text, calls=[PARIS])
        s.results("timeout")
    s.reply("Paris: no forecast.")
    run = s.analyse()
    (report,) = _code(run, LOOP)
    first = min(_code(run, REPEAT), key=lambda f: f.seq or 0)
    assert (report.seq, first.seq) == (4, 1), run.findings
    assert report.severity == "info" and report.details["caused_by"] == REPEAT, report
    assert report.details["caused_by_seq"] == first.seq, report.details
    assert first.severity == "warning", first  # the cause carries the report's warning
    order = run.findings
    assert order.index(report) > order.index(first), order
    assert next(f.code for f in order if f.severity != "info") == REPEAT, order


def test_an_orchestrator_reporting_the_loop_of_its_agent_folds_under_that_agents_repeat() -> None:
    """Two conversations, as Magentic-One runs them: the surfer repeats its call (its turns 1 and
    2 are repeats), the orchestrator's ledger says ``is_in_loop`` on two answers in a row and it
    is called again: its report folds under the surfer's first repeat, in the surfer's
    conversation, and comes right after it; nothing of the report is left a warning."""
    surfer = AgentScript("openai_chat", tools=[WEATHER])
    surfer.system = "You are WebSurfer. Use the browser."
    surfer.user("Find the forecast for Paris.")
    orch = AgentScript("openai_chat", tools=())
    orch.system = "You are Orchestrator. Answer with a progress ledger as JSON."
    orch.user("Forecast for Paris?")
    order = []
    for k, loop in enumerate((False, True, True, False)):
        order.append(orch.reply(_ledger(loop)))
        orch.user(f"WebSurfer: attempt {k} got a timeout.")
        if k < 3:
            order.append(surfer.reply(calls=[PARIS]))
            surfer.results("timeout")
    run = run_of(order)
    (report,) = _code(run, LOOP)
    first = min(_code(run, REPEAT), key=lambda f: f.seq or 0)
    assert first.conversation != report.conversation, run.findings
    assert report.severity == "info" and report.details["caused_by"] == REPEAT, report
    assert report.details["caused_by_seq"] == first.seq, report.details
    assert report.details["caused_by_conversation"] == first.conversation, report.details
    assert first.severity == "warning", first  # the cause carries the report's warning
    findings = run.findings
    assert findings[findings.index(first) + 1] is report, findings
    assert all(f.severity == "info" for f in findings if f.code == LOOP), findings


def test_clean_twin_a_report_with_no_repeated_call_before_it_stays_the_clients_warning() -> None:
    """Nothing repeated (each call asks for another city): the report is the only sign of the
    loop and stays a warning of its own, after an earlier warning in the order."""
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Forecast for Paris?")
    for k, text in enumerate((None, STUCK, STUCK)):
        s.reply(text, calls=[Call("get_weather", {"city": f"Paris {k}"})])
        s.results("timeout")
    s.reply("Paris: no forecast.")
    run = s.analyse()
    (report,) = _code(run, LOOP)
    assert report.severity == "warning" and "caused_by" not in report.details, report
    assert not _code(run, REPEAT)
