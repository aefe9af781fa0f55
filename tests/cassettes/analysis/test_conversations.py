"""Threading round trips into conversations: concurrency, forks, side calls, explicit labels,
``previous_response_id``, and the re-serialisation differences that must not break a thread."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from scenarios import (
    FAMILIES,
    HISTORY_KEY,
    WEATHER,
    AgentScript,
    Call,
    Script,
    Tool,
    edit_request,
    openai_responses_results,
    openai_responses_turn,
    openai_responses_user,
    rewrite_call_ids,
    run_of,
    set_request_body,
    threads,
    user_of,
)

from looptap.cassettes.analysis import Finding, RunAnalysis
from looptap.cassettes.wire import Exchange

Json = dict[str, Any]

#: Families whose system prompt travels outside the message list (a separate body field).
SYSTEM_APART = ("openai_responses", "anthropic", "gemini", "bedrock")



def c_findings(run: RunAnalysis) -> list[Finding]:
    return [f for f in run.findings if f.layer == "C"]


def c_codes(run: RunAnalysis) -> list[tuple[str, int | None]]:
    return [(f.code, f.seq) for f in c_findings(run)]



def links(run: RunAnalysis) -> list[str]:
    return [run.turns[s].c.link for s in sorted(run.turns)]


def chat(
    family: str, question: str, answers: Sequence[str], follow_ups: Sequence[str], **kw: Any
) -> AgentScript:
    """A plain question/answer conversation: ``len(answers)`` turns."""
    s = AgentScript(family, **kw)
    s.user(question)
    for i, a in enumerate(answers):
        if i:
            s.user(follow_ups[i - 1])
        s.reply(a)
    return s


# --- concurrency ----------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_interleaved_conversations_are_separated(family: str) -> None:
    a = AgentScript(family)
    b = AgentScript(family)
    a.user("Weather in Paris?")
    b.user("Weather in Oslo?")
    a.reply(calls=[Call("get_weather", {"city": "Paris"})])
    b.reply(calls=[Call("get_weather", {"city": "Oslo"})])
    a.results("sunny")
    b.results("snow")
    a.reply("Sunny in Paris.")
    b.reply("Snowing in Oslo.")
    a.user("And tomorrow?")
    b.user("And tomorrow?")
    a.reply("Cloudy.")
    b.reply("Still snowing.")
    # A1 B1 A2 B2 A3 B3
    order = [x for pair in zip(a.exchanges, b.exchanges, strict=True) for x in pair]
    run = run_of(order)
    assert threads(run) == [[0, 2, 4], [1, 3, 5]]
    assert links(run) == ["start", "start", "extends", "extends", "extends", "extends"]
    assert c_codes(run) == []
    assert [p.call_turn for p in run.turns[3].c.pairings] == [0]  # B's result answers B's turn 0


@pytest.mark.parametrize("family", FAMILIES)
def test_identical_openings_separate_at_the_first_echoed_answer(family: str) -> None:
    """Two runs of the same agent on the same input (a benchmark, n=2): they diverge with the
    answers."""
    a = chat(
        family, "Suggest a name for a cat.", ["Mochi.", "Because it is sweet and round."], ["Why?"]
    )
    b = chat(
        family, "Suggest a name for a cat.", ["Luna.", "Because cats love the night."], ["Why?"]
    )
    run = run_of([a.exchanges[0], b.exchanges[0], b.exchanges[1], a.exchanges[1]])
    assert threads(run) == [[0, 3], [1, 2]]
    assert links(run) == ["start", "start", "extends", "extends"]
    assert c_codes(run) == []
    assert run.turns[3].c.echoed_assistant is True and run.turns[2].c.echoed_assistant is True


@pytest.mark.parametrize("family", FAMILIES)
def test_many_parallel_conversations(family: str) -> None:
    scripts = [
        chat(family, f"Task {i}: count to {i}.", [f"{i}.", "Done."], ["Again?"]) for i in range(5)
    ]
    order = [s.exchanges[0] for s in scripts] + [s.exchanges[1] for s in reversed(scripts)]
    run = run_of(order)
    assert sorted(threads(run)) == sorted([[i, 9 - i] for i in range(5)])
    assert c_codes(run) == []


#: Families whose wire carries tool-call ids (Gemini and Ollama send none).
WITH_IDS = ("openai_chat", "openai_responses", "anthropic", "bedrock")


def _weather_agent(
    family: str, turns: int = 4, *, same_ids: bool = False, bug: str | None = None
) -> tuple[AgentScript, int | None]:
    """One of many agents started with the same prompt: ``turns`` tool-using turns and a final
    answer, the same calls and results as every other agent. ``bug`` makes turn 2's request carry
    a client bug; returns the script and the index of the turn whose request has it."""
    s = AgentScript(family, system="You are a weather agent.")
    s.user("Weather in Paris and Rome for the next days?")
    bug_turn = None
    for t in range(turns):
        ids = (f"call_{2 * t}", f"call_{2 * t + 1}") if same_ids else (None, None)
        paris, rome = (
            Call("get_weather", {"city": "Paris", "day": t}, id=ids[0]),
            Call("get_weather", {"city": "Rome", "day": t}, id=ids[1]),
        )
        s.reply(calls=[paris, rome], echo=not (bug == "no_echo" and t == 1))
        if bug == "dropped" and t == 1:
            s.results_for((paris, "sunny"))
            bug_turn = t + 1
        elif bug == "wrong_id" and t == 1:
            s.results_for(
                (
                    Call("get_weather", paris.args, id=f"{paris.id}x" if paris.id else "wrong"),
                    "sunny",
                ),
                (rome, "rain"),
            )
            bug_turn = t + 1
        else:
            s.results("sunny", "rain")
            if bug == "no_echo" and t == 1:
                bug_turn = t + 1
    s.reply("Sunny in Paris, rain in Rome.")
    return s, bug_turn


def _interleave(
    scripts: Sequence[AgentScript], seed: int
) -> tuple[list[Exchange], list[tuple[int, int]]]:
    """Every script's round trips in its own order, the scripts interleaved at random; returns the
    order and, per position, (agent, turn)."""
    import random

    rng = random.Random(seed)
    left = [list(enumerate(s.exchanges)) for s in scripts]
    order: list[Exchange] = []
    who: list[tuple[int, int]] = []
    while any(left):
        a = rng.choice([i for i, rest in enumerate(left) if rest])
        turn, ex = left[a].pop(0)
        order.append(ex)
        who.append((a, turn))
    return order, who


def _grouping(run: RunAnalysis, who: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    return sorted([who[s] for s in c.turns] for c in run.conversations)


@pytest.mark.parametrize("n", [2, 4, 16])
@pytest.mark.parametrize("family", FAMILIES)
def test_agents_started_together_with_the_same_prompt(family: str, n: int) -> None:
    """An eval harness, pass@k: N agents, same prompt, same answers, interleaved at random. With
    ids on the wire every agent is exactly one conversation; without, the turns still form N
    conversations of the right length, and looptap says it could not tell them apart."""
    scripts = [_weather_agent(family)[0] for _ in range(n)]
    for seed in range(3):
        order, who = _interleave(scripts, seed)
        run = run_of(order)
        assert [f for f in run.findings if f.severity != "info"] == []
        assert len(run.conversations) == n
        if family in WITH_IDS:
            assert _grouping(run, who) == [[(a, t) for t in range(5)] for a in range(n)]
            assert [f for f in run.findings if f.code == "C.thread_ambiguous"] == []
        else:
            assert sorted(len(c.turns) for c in run.conversations) == [5] * n
            if _grouping(run, who) != [[(a, t) for t in range(5)] for a in range(n)]:
                # never a silent guess: a turn given to another agent's conversation is flagged
                assert any(f.code == "C.thread_ambiguous" for f in run.findings)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_same_ids_in_every_agent_is_said_to_be_ambiguous(family: str, n: int) -> None:
    """A fake upstream that counts ids from 0 in every agent: identical histories, ids included.
    looptap cannot know which agent continues which; it keeps N conversations and says so."""
    scripts = [_weather_agent(family, same_ids=True)[0] for _ in range(n)]
    order, _ = _interleave(scripts, 7)
    run = run_of(order)
    assert (
        len(run.conversations) == n and sorted(len(c.turns) for c in run.conversations) == [5] * n
    )
    assert [f for f in run.findings if f.severity != "info"] == []
    notes = [f for f in run.findings if f.code == "C.thread_ambiguous"]
    assert notes and all("X-Looptap-Conversation" in f.message for f in notes)


BUG_CODES = {
    "dropped": "C.dropped_tool_result",
    "wrong_id": "C.wrong_tool_call_id",
    "no_echo": "C.assistant_not_echoed",
}


@pytest.mark.parametrize("bug", sorted(BUG_CODES))
@pytest.mark.parametrize("family", WITH_IDS)
def test_a_client_bug_in_one_of_many_alike_agents_is_found_on_that_agent(
    family: str, bug: str
) -> None:
    n = 4
    scripts = [_weather_agent(family)[0] for _ in range(n - 1)]
    buggy, bug_turn = _weather_agent(family, bug=bug)
    scripts.insert(2, buggy)
    for seed in range(4):
        order, who = _interleave(scripts, seed)
        run = run_of(order)
        assert len(run.conversations) == n, (seed, _grouping(run, who))
        assert _grouping(run, who) == [[(a, t) for t in range(5)] for a in range(n)], seed
        bad = [
            (who[f.seq], f.code) for f in run.findings if f.severity != "info" and f.seq is not None
        ]
        assert bad, seed
        # on the buggy agent's turn, nowhere else
        assert {w for w, _ in bad} == {(2, bug_turn)}, (seed, bad)
        assert BUG_CODES[bug] in {code for _, code in bad}, (seed, bad)


REJECTED = {
    "openai_chat": "An assistant message with 'tool_calls' must be followed by tool messages "
    "responding to each 'tool_call_id'. The following tool_call_ids did not have response "
    "messages: {id}",
    "anthropic": "messages.2: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message.",
}


@pytest.mark.parametrize("family", sorted(REJECTED))
def test_a_rejected_request_of_one_of_many_alike_agents_is_blamed_on_its_own_turn(
    family: str,
) -> None:
    """One of four alike agents drops a result; the API rejects it with a pairing 400 and the agent
    gives up. The 400 is that agent's, and blames the turn whose call it left unanswered."""
    scripts = [_weather_agent(family)[0] for _ in range(3)]
    bad = AgentScript(family, system="You are a weather agent.")
    bad.user("Weather in Paris and Rome for the next days?")
    for t in range(2):
        paris, rome = (
            Call("get_weather", {"city": "Paris", "day": t}),
            Call("get_weather", {"city": "Rome", "day": t}),
        )
        bad.reply(calls=[paris, rome])
        if t == 0:
            bad.results("sunny", "rain")
    bad.results_for((paris, "sunny"))
    body = {
        "error": {
            "message": REJECTED[family].format(id=rome.id),
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    if family == "anthropic":
        body = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": REJECTED[family].format(id=rome.id),
            },
        }
    bad.fail(400, body)
    scripts.insert(1, bad)
    for seed in range(4):
        order, who = _interleave(scripts, seed)
        run = run_of(order)
        assert len(run.conversations) == 4, seed
        flagged = [
            (who[f.seq], f.code, f.related_turn)
            for f in run.findings
            if f.severity != "info" and f.seq is not None
        ]
        # the dropped result is the root cause; the API's pairing 400 is folded under it (info)
        assert ((1, 2), "C.dropped_tool_result", 1) in flagged, (seed, flagged)
        (pairing,) = [f for f in run.findings if f.code == "C.pairing_error"]
        assert (
            who[pairing.seq] == (1, 2)
            and pairing.related_turn == 1
            and pairing.details["caused_by"] == "C.dropped_tool_result"
        )
        assert {w for w, _, _ in flagged} == {(1, 2)}, (seed, flagged)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_repeated_run_continues_the_second_question(family: str) -> None:
    """A program that asks the same question twice and continues the second one."""
    first = chat(family, "Suggest a name for a cat.", ["Luna."], [])
    second = chat(family, "Suggest a name for a cat.", ["Mochi.", "Because it is sweet."], ["Why?"])
    run = run_of([first.exchanges[0], second.exchanges[0], second.exchanges[1]])
    assert threads(run) == [[0], [1, 2]]
    assert links(run) == ["start", "start", "extends"]
    assert run.turns[2].c.echoed_assistant is True
    assert c_codes(run) == []
    # The same answer both times: the content cannot tell which run continues; the latest is
    # taken (a program asks again, then goes on) and looptap says it could not be sure.
    first = chat(family, "Suggest a name for a cat.", ["Mochi."], [])
    run = run_of([first.exchanges[0], second.exchanges[0], second.exchanges[1]])
    assert threads(run) == [[0], [1, 2]]
    assert c_codes(run) == [("C.thread_ambiguous", 2)]


# --- sub-agents and side calls ----------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_sub_agent_is_its_own_conversation(family: str) -> None:
    main = AgentScript(family, system="You are a travel planner. Delegate research.")
    main.user("Plan a weekend in Paris.")
    research = Call("get_weather", {"city": "Paris"})
    main.reply(calls=[research])
    sub = AgentScript(
        family, system="You are a research sub-agent. Answer with facts only.", tools=()
    )
    sub.user("Find the weather in Paris this weekend.")
    sub.reply("Sunny, 21C on Saturday; showers on Sunday.")
    main.results("Sunny, 21C on Saturday; showers on Sunday.")
    main.reply("Saturday: Louvre gardens. Sunday: Orsay museum.")
    run = run_of([main.exchanges[0], sub.exchanges[0], main.exchanges[1]])
    assert threads(run) == [[0, 2], [1]]
    assert links(run) == ["start", "start", "extends"]
    assert c_codes(run) == []


TASK = Tool(
    "Task",
    {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "prompt": {"type": "string"},
            "subagent_type": {"type": "string"},
        },
        "required": ["description", "prompt"],
    },
    "Launch a sub-agent.",
)
TRANSFER = Tool(
    "transfer_to_booking_agent",
    {"type": "object", "properties": {}},
    "Hand off to the booking agent.",
)
BOOK = Tool(
    "book_table",
    {
        "type": "object",
        "properties": {"restaurant": {"type": "string"}},
        "required": ["restaurant"],
    },
    "Book a table.",
)


@pytest.mark.parametrize("family", FAMILIES)
def test_task_sub_agent_is_linked_to_the_call_that_started_it(family: str) -> None:
    """Claude Code's Task tool: the sub-agent's first words are the prompt the call asked for."""
    prompt = "Find the weather in Paris this weekend and report it in two lines."
    main = AgentScript(
        family, system="You are a travel planner. Delegate research.", tools=(WEATHER, TASK)
    )
    main.user("Plan a weekend in Paris.")
    main.reply(
        calls=[
            Call(
                "Task",
                {
                    "description": "Paris weather",
                    "prompt": prompt,
                    "subagent_type": "general-purpose",
                },
            )
        ]
    )
    sub = AgentScript(family, system="You are a research sub-agent.", tools=(WEATHER,))
    sub.user(prompt)
    sub.reply(calls=[Call("get_weather", {"city": "Paris"})])
    sub.results("sunny")
    sub.reply("Saturday sunny, Sunday showers.")
    main.results("Saturday sunny, Sunday showers.")
    main.reply("Saturday: Louvre gardens. Sunday: Orsay museum.")
    other = AgentScript(family, system="You are a research sub-agent.", tools=(WEATHER,))
    other.user("Find the weather in Rome this weekend and report it in two lines.")
    other.reply("Sunny.")
    run = run_of(
        [
            main.exchanges[0],
            sub.exchanges[0],
            other.exchanges[0],
            sub.exchanges[1],
            main.exchanges[1],
        ]
    )
    assert threads(run) == [[0, 4], [1, 3], [2]]
    by_id = {c.id: c for c in run.conversations}
    assert (
        by_id[run.turns[1].conversation].parent_seq,
        by_id[run.turns[1].conversation].branch,
    ) == (0, "sub_agent")
    # a prompt nobody asked for: no parent
    assert by_id[run.turns[2].conversation].parent_seq is None
    assert [f for f in run.findings if f.severity != "info"] == []
    from looptap.cassettes.views import analysis_lines

    shown = "\n".join(analysis_lines(run))
    sub_conv = by_id[run.turns[1].conversation]
    # cut at a word, ≤ 60
    assert sub_conv.title == "Find the weather in Paris this weekend and report it in…"
    assert (
        f"conversation {sub_conv.id} “{sub_conv.title}” ({family}, 2 turns, sub-agent of #0)"
        in shown
    )
    assert by_id[run.turns[0].conversation].title == "Plan a weekend in Paris."


@pytest.mark.parametrize("family", FAMILIES)
def test_handoff_continues_the_conversation_under_the_next_agent(family: str) -> None:
    """openai-agents: the next agent gets the whole history under its own instructions and tools,
    ending with the result of the transfer call: the loop goes on (one conversation, the transfer
    call answered), unlike a side call over the history, which asks something of its own."""
    triage = AgentScript(family, system="You are a triage agent.", tools=(WEATHER, TRANSFER))
    triage.user("Book me a table at Le Comptoir tonight.")
    handoff = Call("transfer_to_booking_agent", {})
    triage.reply(calls=[handoff])
    triage.results('{"assistant": "Booking agent"}')
    booking = AgentScript(family, system="You are a booking agent.", tools=(BOOK,))
    booking.history = list(triage.history)
    booking.reply(calls=[Call("book_table", {"restaurant": "Le Comptoir"})])
    booking.results("booked for 8pm")
    booking.reply("Your table at Le Comptoir is booked for 8pm.")
    run = run_of([triage.exchanges[0], *booking.exchanges])
    assert threads(run) == [[0, 1, 2]]
    assert links(run) == ["start", "extends", "extends"]
    assert [p.call_id for p in run.turns[1].c.pairings if p.in_history] == [
        run.turns[0].e.tool_calls[0].id
    ]
    # Only the true note that the new instructions and tools start the prompt cache afresh.
    assert {(f.code, f.severity, f.seq) for f in run.findings} <= {
        ("C.cache_prefix_broken", "info", 1)
    }
    # The same history under another agent that asks for something of its own (a summary) is a
    # side call, branched from the turn whose history it read.
    summary = AgentScript(family, system="Summarise the conversation.", tools=())
    summary.history = list(triage.history)
    summary.user("Summarise the conversation so far in one line.")
    summary.reply("The user wants a table; the triage agent handed over.")
    run = run_of([triage.exchanges[0], summary.exchanges[0], *booking.exchanges])
    assert threads(run) == [[0, 2, 3], [1]]
    conv = next(c for c in run.conversations if c.id == run.turns[1].conversation)
    assert (conv.parent_seq, conv.branch) == (0, "side_call")


@pytest.mark.parametrize("family", FAMILIES)
def test_sub_agent_given_the_users_words_is_its_own_conversation(family: str) -> None:
    """Same first user message, another system prompt: a planner sub-agent, not a retry."""
    main = AgentScript(family, system="You are a travel planner.")
    main.user("Plan a weekend in Paris.")
    main.reply(calls=[Call("get_weather", {"city": "Paris"})])
    main.results("sunny")
    main.reply("Here is your plan.")
    sub = AgentScript(
        family, system="You are a critic. List what is missing from the plan.", tools=()
    )
    sub.user("Plan a weekend in Paris.")
    sub.reply("Restaurants are missing.")
    run = run_of([main.exchanges[0], main.exchanges[1], sub.exchanges[0]])
    assert threads(run) == [[0, 1], [2]]
    assert c_codes(run) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_title_side_call_on_the_first_message(family: str) -> None:
    main = AgentScript(family, system="You are a travel planner.")
    main.user("Plan a weekend in Paris.")
    main.reply("Saturday: Louvre. Sunday: Orsay.")
    title = AgentScript(family, system="Write a 3-5 word title for the user's request.", tools=())
    title.user("Plan a weekend in Paris.")
    title.reply("Paris Weekend Plan")
    main.user("And a restaurant?")
    main.reply("Le Comptoir.")
    run = run_of([main.exchanges[0], title.exchanges[0], main.exchanges[1]])
    assert threads(run) == [[0, 2], [1]]
    assert links(run) == ["start", "start", "extends"]
    assert c_codes(run) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_summary_side_call_over_the_full_history(family: str) -> None:
    """A summariser sent the whole history plus an instruction: a side call, not the main thread."""
    main = AgentScript(family, system="You are a travel planner.")
    main.user("Plan a weekend in Paris.")
    main.reply("Saturday: Louvre. Sunday: Orsay.")
    side = AgentScript(family, system="You summarise conversations.", tools=())
    side.history = [*main.history, user_of(family, "Summarise the conversation above in one line.")]
    side.reply("The user plans a Paris weekend.")
    main.user("And a restaurant?")
    main.reply("Le Comptoir.")
    run = run_of([main.exchanges[0], side.exchanges[0], main.exchanges[1]])
    assert (
        run.turns[2].conversation == run.turns[0].conversation and run.turns[2].c.link == "extends"
    )
    assert run.turns[1].conversation != run.turns[0].conversation
    side_conv = next(c for c in run.conversations if c.id == run.turns[1].conversation)
    # branched from the turn it summarised
    assert (side_conv.parent_seq, side_conv.branch) == (0, "side_call")
    assert c_codes(run) == []


# --- X-Looptap-Conversation ---------------------------------------------------------------------

HEADER = "X-Looptap-Conversation"


@pytest.mark.parametrize("family", FAMILIES)
def test_header_joins_what_content_would_separate(family: str) -> None:
    """A client that starts each request afresh (no history) but labels its session."""
    a = AgentScript(family, request_headers=[(HEADER, "session-42")])
    a.user("Weather in Paris?")
    a.reply("Sunny.")
    b = AgentScript(family, request_headers=[(HEADER, "session-42")])
    b.user("And in Rome?")
    b.reply("Cloudy.")
    run = run_of([a.exchanges[0], b.exchanges[0]])
    assert threads(run) == [[0, 1]]
    assert run.conversations[0].label == "session-42"
    assert links(run) == ["header", "header"]
    assert run.turns[1].index == 1 and run.turns[1].previous_seq == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_header_separates_what_content_would_join(family: str) -> None:
    """Two sessions whose histories are identical so far stay apart when labelled apart."""
    a = chat(
        family, "Hi", ["Hello!", "Fine."], ["How are you?"], request_headers=[(HEADER, "alice")]
    )
    b = chat(family, "Hi", ["Hello!", "Fine."], ["How are you?"], request_headers=[(HEADER, "bob")])
    run = run_of([a.exchanges[0], b.exchanges[0], a.exchanges[1], b.exchanges[1]])
    assert threads(run) == [[0, 2], [1, 3]]
    assert [c.label for c in run.conversations] == ["alice", "bob"]
    assert c_codes(run) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_header_turn_still_gets_its_dispatch_view(family: str) -> None:
    s = AgentScript(family, request_headers=[(HEADER, "run-7")])
    s.user("Weather in Paris and Rome?")
    paris, rome = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})
    s.reply(calls=[paris, rome])
    s.results_for((paris, "sunny"))
    s.reply("Paris is sunny.")
    run = s.analyse()
    c1 = run.turns[1].c
    assert c1.link == "header" and c1.kept == 1 and c1.echoed_assistant is True
    assert [f.code for f in c_findings(run)] == ["C.dropped_tool_result"]


# --- Responses previous_response_id -----------------------------------------------------------


def _response_id(ex: Exchange) -> str:
    rid = orjson.loads(ex.response_body)["id"]
    assert isinstance(rid, str)
    return rid


def _chained(*, answer: bool) -> tuple[list[Exchange], Call]:
    """Stateful Responses: turn 1 sends only the new items and points at turn 0's response."""
    call = Call("get_weather", {"city": "Paris"})
    t0 = openai_responses_turn(
        [openai_responses_user("Weather in Paris?")], None, [call], tools=[WEATHER]
    )
    new = (
        openai_responses_results([(call, "sunny")])
        if answer
        else [openai_responses_user("Never mind.")]
    )
    t1 = openai_responses_turn(new, "It is sunny." if answer else "OK.", tools=[WEATHER])
    edit_request(t1, lambda b: b.update(previous_response_id=_response_id(t0)))
    t2 = openai_responses_turn(
        [openai_responses_user("Thanks!")], "You're welcome.", tools=[WEATHER]
    )
    edit_request(t2, lambda b: b.update(previous_response_id=_response_id(t1)))
    return [t0, t1, t2], call


def test_previous_response_id_chains_turns() -> None:
    exchanges, call = _chained(answer=True)
    other = openai_responses_turn([openai_responses_user("Weather in Paris?")], "Unrelated run.")
    run = run_of([exchanges[0], other, exchanges[1], exchanges[2]])
    assert threads(run) == [[0, 2, 3], [1]]
    assert links(run) == ["start", "start", "previous_response_id", "previous_response_id"]
    c1 = run.turns[2].c
    assert (c1.kept, c1.appended_from, len(c1.appended)) == (0, 0, 1)
    assert [(p.call_id, p.call_turn, p.in_history) for p in c1.pairings] == [(call.id, 0, True)]
    assert c_codes(run) == []


def test_previous_response_id_with_the_result_missing() -> None:
    exchanges, call = _chained(answer=False)
    run = run_of(exchanges)
    assert threads(run) == [[0, 1, 2]]
    got = [f for f in c_findings(run) if f.code == "C.dropped_tool_result"]
    assert [(f.seq, f.related_turn, f.tool_call_id) for f in got] == [(1, 0, call.id)]


def test_previous_response_id_unknown_starts_a_conversation() -> None:
    """The referenced response was made before the recording began: nothing to link to."""
    t = openai_responses_turn(
        [openai_responses_results([(Call("get_weather", {}, id="call_old"), "sunny")])[0]], "Sunny."
    )
    edit_request(t, lambda b: b.update(previous_response_id="resp_before_recording"))
    run = run_of([t])
    assert links(run) == ["start"] and c_codes(run) == []


# --- re-serialisation must not break a thread ---------------------------------------------------


def _loop(family: str) -> AgentScript:
    """user → call → result → answer → user → answer (3 turns)."""
    s = AgentScript(family, system="You are a weather assistant.")
    s.user("Weather in Paris?")
    s.reply("Checking.", calls=[Call("get_weather", {"city": "Paris", "unit": "c"})])
    s.results("sunny, 21C")
    s.reply("It is sunny in Paris.")
    s.user("And tomorrow?")
    s.reply("Cloudy tomorrow.")
    return s


def _assert_clean_thread(run: RunAnalysis, n: int = 3) -> None:
    assert threads(run) == [list(range(n))], [
        (t.seq, t.conversation, t.c.link) for t in run.turns.values()
    ]
    assert links(run) == ["start"] + ["extends"] * (n - 1)
    assert c_codes(run) == []
    for s in range(1, n):
        c, prev = run.turns[s].c, run.turns[s - 1].c
        assert c.rewritten == 0 and c.echoed_assistant is True
        # everything the previous request sent was kept; the echo follows it
        assert c.kept == c.appended_from == prev.kept + len(prev.appended)


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


@pytest.mark.parametrize("family", FAMILIES)
def test_key_order_changed(family: str) -> None:
    s = _loop(family)
    for ex in s.exchanges[1::2]:
        set_request_body(ex, orjson.dumps(_reversed_keys(orjson.loads(ex.request_body))))
    _assert_clean_thread(s.analyse())


@pytest.mark.parametrize("family", FAMILIES)
def test_json_whitespace(family: str) -> None:
    s = _loop(family)
    set_request_body(
        s.exchanges[1],
        json.dumps(
            orjson.loads(s.exchanges[1].request_body), indent=2, ensure_ascii=False
        ).encode(),
    )
    set_request_body(
        s.exchanges[2],
        json.dumps(orjson.loads(s.exchanges[2].request_body), separators=(" , ", " : ")).encode(),
    )
    _assert_clean_thread(s.analyse())


#: Payloads that belong to the tool or the model, not to the wire format: left as they are.
_PAYLOAD = ("args", "input", "arguments", "response", "json")


def _nulls(value: Any, add: bool) -> Any:
    """``add``: every history object gains null-valued optional fields; else null fields are
    dropped."""
    if isinstance(value, dict):
        out = {
            k: v if k in _PAYLOAD else _nulls(v, add)
            for k, v in value.items()
            if add or v is not None
        }
        if add:
            out.setdefault("name", None)
        return out
    if isinstance(value, list):
        return [_nulls(v, add) for v in value]
    return value


@pytest.mark.parametrize("family", FAMILIES)
def test_absent_versus_null(family: str) -> None:
    """One serialiser writes ``"name": null`` everywhere, the next omits every null."""
    s = _loop(family)
    key = HISTORY_KEY[family]
    edit_request(s.exchanges[1], lambda b: b.update({key: _nulls(b[key], add=True)}))
    edit_request(s.exchanges[2], lambda b: b.update({key: _nulls(b[key], add=False)}))
    _assert_clean_thread(s.analyse())


def test_absent_versus_null_in_call_arguments() -> None:
    """Arguments compare as JSON values: a null argument and an absent one are the same call."""
    s = AgentScript("anthropic")
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris", "unit": None})])  # the model wrote a null
    s.results("sunny")
    s.reply("It is sunny.")
    s.user("Thanks")
    edit_request(
        s.reply("You're welcome."), lambda b: b["messages"][1]["content"][0]["input"].pop("unit")
    )
    _assert_clean_thread(s.analyse())


@pytest.mark.xfail(
    strict=True,
    reason="a Gemini functionResponse.response with a null field is flattened to JSON text, so "
    "dropping the null on re-serialisation changes the "
    "result's key and the thread reads as rewritten",
)
def test_absent_versus_null_in_a_gemini_function_response() -> None:
    s = AgentScript("gemini")
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.history.append(
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"result": "sunny", "error": None},
                    }
                }
            ],
        }
    )
    s.reply("It is sunny.")
    s.user("Thanks")
    edit_request(
        s.reply("You're welcome."),
        lambda b: b["contents"][2]["parts"][0]["functionResponse"]["response"].pop("error"),
    )
    _assert_clean_thread(s.analyse())


def _as_parts(family: str, body: Json) -> None:
    """Text content as a list of text parts instead of a string (or the reverse for Anthropic)."""
    for m in body[HISTORY_KEY[family]]:
        c = m.get("content")
        if family == "openai_chat" and isinstance(c, str):
            m["content"] = [{"type": "text", "text": c}]
        elif family == "openai_responses":
            if isinstance(c, str):
                m["content"] = [
                    {
                        "type": "output_text" if m.get("role") == "assistant" else "input_text",
                        "text": c,
                    }
                ]
            if isinstance(m.get("output"), str):
                m["output"] = [{"type": "input_text", "text": m["output"]}]
        elif family == "anthropic" and isinstance(c, list):
            m["content"] = c[0]["text"] if len(c) == 1 and c[0]["type"] == "text" else c
            for b in c:
                if b["type"] == "tool_result" and isinstance(b["content"], str):
                    b["content"] = [{"type": "text", "text": b["content"]}]


@pytest.mark.parametrize("family", ["openai_chat", "openai_responses", "anthropic"])
def test_content_string_versus_text_parts(family: str) -> None:
    """Gemini, Bedrock (always parts) and Ollama (always a string) have one spelling only."""
    s = _loop(family)
    edit_request(s.exchanges[2], lambda b: _as_parts(family, b))
    run = s.analyse()
    _assert_clean_thread(run)
    assert run.turns[2].c.kept == run.turns[1].c.kept + len(run.turns[1].c.appended)


@pytest.mark.parametrize(
    "family", ["openai_chat", "openai_responses", "anthropic", "bedrock", "gemini"]
)
def test_call_ids_rewritten_between_turns(family: str) -> None:
    """A framework rebuilds the history from its own store, with ids of its own, on the last
    turn."""
    s = _loop(family)
    edit_request(
        s.exchanges[2],
        lambda b: rewrite_call_ids(family, b, lambda old: f"tc_{abs(hash(old)) % 10**8}"),
    )
    _assert_clean_thread(s.analyse())


def _echo_with_reasoning(family: str, text: str, reasoning: str) -> list[Json]:
    if family == "anthropic":
        return [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": reasoning, "signature": "EqQBCkgIBhABGAIiQL"},
                    {"type": "text", "text": text},
                ],
            }
        ]
    if family == "openai_responses":
        return [
            {
                "type": "reasoning",
                "id": "rs_68d5e1",
                "summary": [{"type": "summary_text", "text": reasoning}],
                "encrypted_content": "gAAAAB",
            },
            {"role": "assistant", "content": text},
        ]
    if family == "gemini":
        return [
            {
                "role": "model",
                "parts": [
                    {"text": reasoning, "thought": True},
                    {"text": text, "thoughtSignature": "CiQB0e2Kb"},
                ],
            }
        ]
    if family == "ollama":
        return [{"role": "assistant", "content": text, "thinking": reasoning}]
    return [{"role": "assistant", "content": text, "reasoning_content": reasoning}]


def _drop_reasoning(family: str, body: Json) -> None:
    h = body[HISTORY_KEY[family]]
    if family == "openai_responses":
        h[:] = [m for m in h if m.get("type") != "reasoning"]
    for m in h:
        m.pop("thinking", None)
        m.pop("reasoning_content", None)
        if isinstance(m.get("content"), list):
            m["content"] = [
                b for b in m["content"] if not (isinstance(b, dict) and b.get("type") == "thinking")
            ]
        if "parts" in m:
            m["parts"] = [
                {k: v for k, v in p.items() if k != "thoughtSignature"}
                for p in m["parts"]
                if not p.get("thought")
            ]


REASONING = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama"]


@pytest.mark.parametrize("family", REASONING)
def test_reasoning_echoed_then_dropped(family: str) -> None:
    """Turn 1 echoes the reasoning with the answer; turn 2 re-sends the history without it."""
    s = AgentScript(family)
    s.user("Capital of France?")
    s.reply("Paris.", reasoning="The user asks for a capital.", echo=False)
    s.history.extend(_echo_with_reasoning(family, "Paris.", "The user asks for a capital."))
    s.user("Of Italy?")
    s.reply("Rome.", reasoning="Same kind of question.")
    s.user("Of Spain?")
    edit_request(s.reply("Madrid."), lambda b: _drop_reasoning(family, b))
    _assert_clean_thread(s.analyse())


@pytest.mark.parametrize("family", REASONING)
def test_reasoning_never_echoed(family: str) -> None:
    s = AgentScript(family)
    s.user("Capital of France?")
    s.reply("Paris.", reasoning="The user asks for a capital.")  # the echo carries the text only
    s.user("Of Italy?")
    s.reply("Rome.")
    s.user("Of Spain?")
    s.reply("Madrid.")
    _assert_clean_thread(s.analyse())


# --- the C view per family ----------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_dispatch_view_over_a_tool_loop(family: str) -> None:
    s = AgentScript(family)
    s.user("Weather in Paris and Rome?")
    paris, rome = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})
    s.reply(calls=[paris, rome])
    s.results("sunny", "cloudy")
    oslo = Call("get_weather", {"city": "Oslo"})
    s.reply("Also checking Oslo.", calls=[oslo])
    s.results("snow")
    s.reply("Paris sunny, Rome cloudy, Oslo snowing.")
    run = s.analyse()
    assert c_codes(run) == [] and threads(run) == [[0, 1, 2]]
    t0, t1, t2 = (run.turns[i].c for i in range(3))
    per_result = family in ("openai_chat", "ollama", "openai_responses")  # one message per result
    # turn 0: only the user message
    assert (t0.kept, t0.appended_from, t0.echoed_assistant, t0.link) == (0, 0, None, "start")
    assert [m.role for m in t0.appended] == ["user"] and t0.tools_offered == ["get_weather"]
    # turn 1: kept the user message; appended the echoed calls and the results
    assert (t1.kept, t1.appended_from, t1.echoed_assistant, t1.link) == (1, 1, True, "extends")
    assert len(t1.appended) == (3 if per_result else 2)
    assert [p.call_turn for p in t1.pairings] == [0, 0]
    assert [p.message_index for p in t1.pairings] == ([2, 3] if per_result else [2, 2])
    ids = [p.call_id for p in t1.pairings]
    assert ids == ([paris.id, rome.id] if family not in ("gemini", "ollama") else [None, None])
    # turn 2: kept everything before, appended the second echo and its result, paired with turn 1
    assert (t2.kept, t2.appended_from, t2.echoed_assistant) == (
        1 + len(t1.appended),
        1 + len(t1.appended),
        True,
    )
    assert [
        (p.call_turn, p.name if family in ("gemini", "ollama") else p.call_id) for p in t2.pairings
    ] == [(1, "get_weather" if family in ("gemini", "ollama") else oslo.id)]
    assert len(t2.appended) == 2


def _keep_only(exchanges: list[Exchange], pick: Callable[[int], bool]) -> list[Exchange]:
    return [ex for i, ex in enumerate(exchanges) if pick(i)]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_turn_missing_from_the_recording(family: str) -> None:
    """Recording started late / a turn was not captured: the thread resumes from an earlier
    prefix."""
    s = Script(family)
    for q, a in (
        ("Capital of France?", "Paris."),
        ("Of Italy?", "Rome."),
        ("Of Spain?", "Madrid."),
    ):
        s.user(q)
        s.reply(a)
    run = run_of(_keep_only(s.exchanges, lambda i: i != 1))
    assert threads(run) == [[0, 1]]
    c = run.turns[1].c
    # kept counts the previous request's messages; its answer was echoed after them
    assert (c.link, c.kept, c.echoed_assistant, c.rewritten, len(c.appended)) == (
        "extends",
        1,
        True,
        0,
        4,
    )
    assert not [f for f in c_findings(run) if f.severity != "info"]


def test_a_threader_keeps_its_released_turns_to_itself() -> None:
    """No hidden shared state (issue 30 item 5): threading changes no module-level container
    (shared by every analysis in the process), and a superseded turn's released keys are
    ``None``, not a shared empty list that reads like "no parts"."""
    from looptap.cassettes.analysis.threading import Threader
    from looptap.cassettes.models import Message, NormalisedResponse, Part

    def containers() -> dict[str, int]:  # of every module of the analysis (threading's included)
        return {
            f"{m.__name__}.{k}": len(v)
            for m in [
                m
                for name, m in sys.modules.items()
                if name.startswith("looptap.cassettes.analysis")
            ]
            for k, v in vars(m).items()
            if isinstance(v, dict | list | set) and not k.startswith("__")
        }

    before = containers()
    a, b = Threader(), Threader()
    history: list[Message] = [
        Message(role="user", parts=[Part(kind="text", text="  What is   the weather in Paris?  ")])
    ]
    for i in range(3):
        answer = NormalisedResponse(parts=[Part(kind="text", text=f"It is sunny, {i}.")])
        for t in (a, b):
            t.add("openai_chat", list(history), answer, failed=False)
        history += [
            Message(role="assistant", parts=answer.parts),
            Message(role="user", parts=[Part(kind="text", text=f"And day {i}?")]),
        ]
    assert containers() == before, "threading changed module-level state"
    assert [t.conversation for t in a.turns] == [t.conversation for t in b.turns] == ["c1"] * 3
    released, latest = a.turns[0], a.turns[-1]
    assert released.last_parts is None and released.echo_parts is None and released.keys is None
    assert latest.last_parts and latest.echo_parts
