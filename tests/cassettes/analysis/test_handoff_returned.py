"""A handed loop read again when the agent that handed the run over goes on (issue 90,
docs/threading.md "Handoffs read again"). An agent's transfer call answered, then another agent
(another system prompt and tool set) whose request carries that whole history and answer, is the
run handed over: at that request nothing tells an openai-agents handoff (the new agent goes on
with the conversation: one conversation) from a LangGraph supervisor's worker (a loop of its
own). The supervisor's later request proves it: it goes on from its transfer call and its result
with the worker's last answer alone, word for word, and not the worker's calls
(langgraph-supervisor 0.0.31, ``output_mode="last_message"``). The worker's turns are then re-read
as a conversation of their own, ``handoff`` under the transfer, and the supervisor's conversation
goes on from the transfer, with nothing said. With ``output_mode="full_history"`` the
supervisor's request carries the worker's whole loop: the openai-agents shape, one conversation
handed back.

On c86d115d the worker's loop stayed in the supervisor's conversation and the supervisor's
request was a side call of the worker's first turn (test_handoff_quoted.py's "langgraph
supervisor", recorded); the full history carried back, and an openai-agents run going on with
the first agent, were side calls too."""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import WEATHER, AgentScript, Call, Tool, assistant_of, results_of, user_of

from looptap.cassettes.analysis import RunAnalysis
from looptap.cassettes.analysis.codes import Severity

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
SUPERVISOR = "You manage a weather expert. Assign weather questions to it, then answer."
WORKER = "You are a weather assistant. Use the get_weather tool for every city."
ASK = "What is the weather in Paris and Tokyo?"
REPORT = (
    "REPORT: Paris is sunny and Tokyo is rainy today; pack sunglasses for Paris and an umbrella "
    "for Tokyo."
)
TRANSFER = Tool("transfer_to_weather_expert", {"type": "object", "properties": {}})
BACK = "Transferring back to supervisor"


class Run:
    """A supervisor and its worker on one wire, the histories written as the framework does."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.s = AgentScript(family, tools=[TRANSFER], system=SUPERVISOR)
        self.n = 0

    def call(self, name: str, **args: Any) -> Call:
        self.n += 1
        return Call(name, args, id=f"call_{self.family[:2]}{self.n}")

    def ask(self, agent: str, history: list[Any], text: str | None = None, calls: Any = ()) -> None:
        self.s.system = SUPERVISOR if agent == "supervisor" else WORKER
        self.s.tools = [TRANSFER] if agent == "supervisor" else [WEATHER]
        self.s.history = list(history)
        self.s.reply(text, calls=list(calls), echo=False)

    def analyse(self) -> RunAnalysis:
        return self.s.analyse()


def _convs(run: RunAnalysis) -> list[tuple[str, int | None, tuple[int, ...]]]:
    return sorted((c.kind, c.parent_seq, tuple(c.turns)) for c in run.conversations if c.turns)


def _said(run: RunAnalysis) -> list[str]:
    return [f"{f.code} {f.severity} #{f.seq}" for f in run.findings]


def _supervised(
    family: str,
    mode: str = "last_message",
    rounds: int = 1,
    back: bool = True,
    answer: str = REPORT,
) -> RunAnalysis:
    """langgraph-supervisor's run: the supervisor transfers (a call, then the tool's result
    in the worker's history), the worker calls get_weather for two cities and answers; the
    supervisor's next request carries the worker's last answer (``last_message``) or its whole
    loop (``full_history``), then the handoff-back pair (``back``)."""
    run = Run(family)
    _supervised_into(run, mode, rounds, back, answer)
    return run.analyse()


def _supervised_into(
    run: Run,
    mode: str = "last_message",
    rounds: int = 1,
    back: bool = True,
    answer: str = REPORT,
) -> None:
    family = run.family
    f = family
    history = [user_of(f, ASK)]
    for _ in range(rounds):
        transfer = run.call("transfer_to_weather_expert")
        run.ask("supervisor", history, calls=[transfer])
        history += [
            *assistant_of(f, None, [transfer]),
            *results_of(f, [(transfer, "Successfully transferred to weather_expert")]),
        ]
        loop: list[Any] = []
        for city in ("Paris", "Tokyo"):
            call = run.call("get_weather", city=city)
            run.ask("worker", history + loop, calls=[call])
            loop += [*assistant_of(f, None, [call]), *results_of(f, [(call, f"WEATHER: {city}")])]
        run.ask("worker", history + loop, REPORT)
        history += (loop if mode == "full_history" else []) + assistant_of(f, answer)
        if back:
            back_call = run.call("transfer_back_to_supervisor")
            history += [
                *assistant_of(f, BACK, [back_call]),
                *results_of(f, [(back_call, "Successfully transferred back to supervisor")]),
            ]
    run.ask("supervisor", history, "PASS. Final Answer: sunglasses and an umbrella.")


@pytest.mark.parametrize("back", [True, False], ids=["handoff-back", "no-handoff-back"])
@pytest.mark.parametrize("family", FAMILIES4)
def test_the_supervisor_back_with_the_last_answer_makes_the_loop_a_handoff(
    family: str, back: bool
) -> None:
    run = _supervised(family, back=back)
    assert _convs(run) == [("handoff", 0, (1, 2, 3)), ("main", None, (0, 4))], _said(run)
    assert run.findings == [], _said(run)
    # the moved turns are numbered in their conversation, the first with nothing before it
    worker = [run.turns[s] for s in (1, 2, 3)]
    assert [(t.index, t.previous_seq) for t in worker] == [(0, None), (1, 1), (2, 2)]
    assert (run.turns[4].index, run.turns[4].previous_seq) == (1, 0)
    assert len({t.conversation for t in worker}) == 1
    assert worker[0].conversation != run.turns[4].conversation == run.turns[0].conversation


@pytest.mark.parametrize("family", FAMILIES4)
def test_each_round_of_a_supervisor_is_its_own_handoff(family: str) -> None:
    run = _supervised(family, rounds=2)
    assert _convs(run) == [
        ("handoff", 0, (1, 2, 3)),
        ("handoff", 4, (5, 6, 7)),
        ("main", None, (0, 4, 8)),
    ], _said(run)
    assert not [f for f in run.findings if f.severity is not Severity.INFO], _said(run)


@pytest.mark.parametrize("family", FAMILIES4)
def test_the_whole_loop_carried_back_is_one_conversation(family: str) -> None:
    # full_history: the supervisor's request carries the worker's loop, calls and results: the
    # run handed back, as an openai-agents handoff goes on (not a side call of the worker's)
    run = _supervised(family, mode="full_history")
    assert _convs(run) == [("main", None, (0, 1, 2, 3, 4))], _said(run)
    assert not [f for f in run.findings if f.severity is not Severity.INFO], _said(run)


@pytest.mark.parametrize("family", FAMILIES4)
def test_an_openai_agents_handoff_stays_one_conversation(family: str) -> None:
    # the new agent goes on with the whole conversation and nobody comes back to the transfer
    run = Run(family)
    f = family
    history = [user_of(f, ASK)]
    transfer = run.call("transfer_to_weather_expert")
    run.ask("supervisor", history, calls=[transfer])
    history += [*assistant_of(f, None, [transfer]), *results_of(f, [(transfer, "{}")])]
    for city in ("Paris", "Tokyo"):
        call = run.call("get_weather", city=city)
        run.ask("worker", history, calls=[call])
        history += [*assistant_of(f, None, [call]), *results_of(f, [(call, f"WEATHER: {city}")])]
    run.ask("worker", history, REPORT)
    # the user's next question, to the first agent, with the whole history (to_input_list())
    history += [*assistant_of(f, REPORT), user_of(f, "And in Berlin?")]
    run.ask("supervisor", history, "Let me ask the expert.")
    an = run.analyse()
    assert _convs(an) == [("main", None, (0, 1, 2, 3, 4))], _said(an)
    assert not [x for x in an.findings if x.severity is not Severity.INFO], _said(an)


@pytest.mark.parametrize("family", FAMILIES4)
def test_another_answer_than_the_loops_is_no_return(family: str) -> None:
    # the supervisor's request carries a text the worker never answered: nothing proves the loop
    # was another agent's; it stays where it was read
    run = _supervised(
        family, answer="REPORT: the client wrote this summary of its own, not the model."
    )
    convs = _convs(run)
    assert any(k == "main" and t[:4] == (0, 1, 2, 3) for k, _, t in convs), convs


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_third_agent_with_the_answer_is_no_return(family: str) -> None:
    # an agent that did not hand the run over (another system prompt) carries the answer
    run = Run(family)
    f = family
    history = [user_of(f, ASK)]
    transfer = run.call("transfer_to_weather_expert")
    run.ask("supervisor", history, calls=[transfer])
    history += [*assistant_of(f, None, [transfer]), *results_of(f, [(transfer, "ok")])]
    call = run.call("get_weather", city="Paris")
    run.ask("worker", history, calls=[call])
    run.ask(
        "worker",
        history + [*assistant_of(f, None, [call]), *results_of(f, [(call, "WEATHER: Paris")])],
        REPORT,
    )
    run.s.system, run.s.tools = "You review reports.", []
    run.s.history = history + assistant_of(f, REPORT)
    run.s.reply("PASS", echo=False)
    an = run.analyse()
    convs = _convs(an)
    assert any(k == "main" and t[:3] == (0, 1, 2) for k, _, t in convs), convs


@pytest.mark.parametrize("kept", [False, True], ids=["read", "kept-then-read-again"])
def test_a_reader_shows_the_moved_turns_where_they_are_now(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, kept: bool
) -> None:
    # the reader keeps each turn as it was first analysed (its store): the re-read places it,
    # and a kept analysis read again places it alike
    from looptap.cassettes.reading import open_run
    from looptap.cassettes.recording.pipeline import CassetteWriter
    from tests.support.analysed import keep_every_run

    if kept:
        keep_every_run(tmp_path, monkeypatch)
    else:
        monkeypatch.setenv("LOOPTAP_NO_CACHE", "1")

    run = Run("openai_chat")
    _supervised_into(run)
    path = tmp_path / "supervisor.jsonl"
    with CassetteWriter(path) as w:
        for i, ex in enumerate(run.s.exchanges):
            ex.seq = i
            w.append(ex)
    if kept:
        open_run(path).close()  # analysed and kept; read from the kept analysis below
    opened = open_run(path)
    try:
        turns = opened.analysis.turns
        places = [(turns[s].conversation, turns[s].index, turns[s].previous_seq) for s in range(5)]
        convs = sorted(
            (c.kind, c.parent_seq, tuple(c.turns)) for c in opened.analysis.conversations
        )
    finally:
        opened.close()
    assert convs == [("handoff", 0, (1, 2, 3)), ("main", None, (0, 4))]
    main, loop = places[0][0], places[1][0]
    assert places == [(main, 0, None), (loop, 0, None), (loop, 1, 1), (loop, 2, 2), (main, 1, 0)]
