"""Context management read as what it is (issue 82, docs/threading.md "Context management"): every
shape of context_cases.py × Chat Completions, Responses, Anthropic Messages and Gemini is one
conversation (the compaction's side call its own, under it), the management is said once at the
turn it happened (``C.history_trimmed``; ``A.context_edited`` for an edit the API made on the
client's request), the user's task or instruction that nothing kept carries is a warning
(``C.user_instruction_dropped``), and nothing else is a warning or an error.

On fec4f2c2: head_cut, summary_head, side_call_summary and instruction_dropped started a new
conversation at the managed request (a false ``C.stopped_with_pending_calls`` on the turn before
for the last three), cleared_results was a ``C.history_mutated`` warning, tail_kept said no
instruction dropped and api_edits said nothing."""

from __future__ import annotations

import pytest
from context_cases import (
    FAMILIES4,
    SUMMARY,
    SYSTEM,
    TASK,
    Case,
    all_cases,
    head_cut,
    side_call_summary,
    summary_head,
    tail_kept,
)
from scenarios import WEATHER, AgentScript, Call, Tool, edit_request, run_of, threads

from looptap.cassettes.analysis import RunAnalysis
from looptap.cassettes.views import turn_json

CASES = all_cases()
#: What each case says, by code (the management codes and every warning or error).
SAID = ("C.history_trimmed", "C.user_instruction_dropped", "A.context_edited")
#: What a later turn may say that the management's drop explains (folded under it).
FOLDED_LATER = ("E.repeated_call",)


def _said(run: RunAnalysis) -> list[tuple[str, int]]:
    return sorted(
        (f.code, f.seq or 0)
        for f in run.findings
        if f.code in SAID or (f.severity in ("warning", "error") and not f.details.get("caused_by"))
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_context_management_is_one_conversation_said_once(case: Case) -> None:
    run = case.script.analyse()
    assert sorted(threads(run)) == sorted(case.conversations)
    assert _said(run) == sorted(case.expected)  # each said once, nothing false
    assert not [f for f in run.findings if f.code == "C.stopped_with_pending_calls"]
    assert not [f for f in run.findings if f.code == "C.history_mutated"]
    # what the management dropped explains a later turn's finding: folded under it
    assert sorted(
        (f.code, f.seq or 0, f.details["caused_by_seq"])
        for f in run.findings
        if f.details.get("caused_by") == "C.history_trimmed" and f.code in FOLDED_LATER
    ) == sorted(case.folded)


def test_the_table_covers_twelve_cases_or_more() -> None:
    assert len(CASES) >= 12
    assert {c.family for c in CASES} == {"openai_chat", "openai_responses", "anthropic", "gemini"}


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_what_was_dropped_and_what_replaced_it(family: str) -> None:
    case = summary_head(family)
    run = case.script.analyse()
    cc = run.turns[2].c.context
    assert cc is not None and cc.kind == "summarised" and cc.from_seq == 1
    assert cc.dropped_roles == {"user": 1, "assistant": 1, "tool": 1}
    assert cc.dropped_user == [TASK] and cc.lost == []  # the summary carries the task
    opening = 1 if family == "openai_chat" else 0  # (Chat's system prompt is a message)
    assert cc.summary == [opening] and cc.restore_at == opening
    (f,) = [f for f in run.findings if f.code == "C.history_trimmed"]
    assert f.details["dropped"] == cc.dropped and f.details["summary"] == cc.summary
    assert "put 1 message in their place" in f.message and repr(TASK) in f.message
    # show --json carries it where the history was managed, and only there
    assert turn_json(run.turns[2])["layers"]["C"]["context"]["dropped_user"] == [TASK]
    assert "context" not in turn_json(run.turns[1])["layers"]["C"]
    # the cache prefix the summary broke follows from it
    (cache,) = [f for f in run.findings if f.code == "C.cache_prefix_broken"]
    assert cache.details["caused_by"] == "C.history_trimmed" and cache.details["caused_by_seq"] == 2


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_a_compaction_names_the_side_call_that_wrote_it(family: str) -> None:
    """The side call's request carried the latest call's result (Codex's compaction does): the
    call was run and summarised, not dropped — no ``C.dropped_tool_result`` at all (on 4cb260e5
    one, folded under the trim, for a result the client did send)."""
    run = side_call_summary(family).script.analyse()
    cc = run.turns[3].c.context
    assert cc is not None and cc.kind == "summarised" and cc.summary_by_seq == 2
    assert cc.summarised_calls == [f"call_{dict(openai_chat='c', anthropic='a')[family]}k_2"]
    assert next(c for c in run.conversations if 2 in c.turns).branch == "side_call"
    assert not [f for f in run.findings if f.code == "C.dropped_tool_result"]


def test_a_compaction_asked_before_the_result_folds_the_dropped_call_under_it() -> None:
    """The twin: the side call summarised the history before the latest call (its answer and
    result left out); the compacted request then carries neither the call nor its result.
    Nothing says the call ran: its dropped result follows from the management, folded under
    ``C.history_trimmed``."""
    s = side_call_summary("anthropic").script
    edit_request(s.exchanges[2], lambda body: body["messages"].__delitem__(slice(-3, -1)))
    run = s.analyse()
    cc = run.turns[3].c.context
    assert cc is not None and cc.summary_by_seq == 2 and not cc.summarised_calls
    (dropped,) = [f for f in run.findings if f.code == "C.dropped_tool_result"]
    assert dropped.severity == "info" and dropped.details["caused_by"] == "C.history_trimmed"


def test_the_task_dropped_is_quoted() -> None:
    run = tail_kept("openai_chat").script.analyse()
    (f,) = [f for f in run.findings if f.code == "C.user_instruction_dropped"]
    assert f.severity == "warning" and f.details["task"] is True and f.details["lost"] == [TASK]
    assert repr(TASK) in f.message


def test_a_head_cut_past_answered_questions_warns_of_nothing() -> None:
    """The dropped task was answered and the user asked more since: no instruction lost."""
    run = head_cut("gemini").script.analyse()
    cc = run.turns[3].c.context
    assert cc is not None and cc.kind == "trimmed" and cc.lost == [] and cc.dropped_user == [TASK]


def test_clean_twin_a_chain_of_calls_stays_two_conversations() -> None:
    """One call's answer fed to the next call under the same system prompt (a chain) is no
    compaction: a conversation's first answer is not registered as a summary."""
    first = AgentScript("openai_chat", tools=[WEATHER], system="You write.")
    first.user("Write two paragraphs about Lisbon's museums for a travel guide, please.")
    first.reply(SUMMARY)
    second = AgentScript("openai_chat", tools=[WEATHER], system="You write.")
    second.user(f"Shorten this text: {SUMMARY}")
    second.reply("Lisbon: sunny, two museums.")
    run = run_of([*first.exchanges, *second.exchanges])
    assert threads(run) == [[0], [1]]


def test_clean_twin_a_new_agent_answering_other_ids_is_its_own() -> None:
    """Results of calls no waiting turn made link nothing (another agent's own loop)."""
    a = AgentScript("anthropic", tools=[WEATHER], system="Agent A.")
    a.user(TASK)
    a.reply(calls=[Call("get_weather", {"city": "Lisbon"}, id="toolu_a1")])
    b = AgentScript("anthropic", tools=[WEATHER], system="Agent B.")
    b.user("Weather in Porto?")
    b.reply(calls=[Call("get_weather", {"city": "Porto"}, id="toolu_b1")])
    b.results("rain")
    b.history = b.history[-2:]
    b.reply("Rain in Porto.")
    run = run_of([a.exchanges[0], b.exchanges[0], b.exchanges[1]])
    assert threads(run) == [[0], [1, 2]]


def test_clean_twin_a_conversation_the_api_holds_sends_its_results_only() -> None:
    """OpenAI's Conversations API (``conversation``: the API holds the history): the next request
    is the results alone. The same conversation, nothing dropped (corpus: pydantic-ai's
    test_openai_conversation_id_tool_call_continuation was a false C.history_mutated)."""
    s = AgentScript("openai_responses", tools=[WEATHER], system=None)
    s.user(TASK)
    s.reply(calls=[Call("get_weather", {"city": "Lisbon"}, id="call_conv_1")])
    s.history = []
    s.results("sunny")
    s.reply("Sunny in Lisbon.")
    run = s.analyse()
    assert threads(run) == [[0, 1]] and run.turns[1].c.context is None
    assert [f.code for f in run.findings if f.code.startswith("C.")] == []


BOOKING = Tool(
    "get_booking",
    {
        "type": "object",
        "properties": {"booking_id": {"type": "string"}},
        "required": ["booking_id"],
    },
    "Look a booking up.",
)


def _booking_after_a_trim(family: str, ref: str, answer: str) -> RunAnalysis:
    """The user gives a booking and a date; the client keeps only the latest call and its result
    (a tail kept: the user's message dropped), then the model looks the booking ``ref`` up and
    answers ``answer``."""
    s = AgentScript(family, tools=[WEATHER, BOOKING], system=SYSTEM)
    s.user(
        "My booking is BK-20931, arriving 2026-12-04. Plan a weekend in Lisbon with the weather."
    )
    s.reply(calls=[Call("get_weather", {"city": "Lisbon"}, id="call_q_1")])
    s.results("sunny, 24 C")
    s.reply(
        "Sunny. In Fahrenheit too:", calls=[Call("get_weather", {"city": "Lisbon"}, id="call_q_2")]
    )
    s.results("sunny, 75 F")
    s.history = s.history[-{"openai_responses": 3}.get(family, 2) :]
    s.reply(calls=[Call("get_booking", {"booking_id": ref}, id="call_q_3")])
    s.results("confirmed")
    s.reply(answer)
    return s.analyse()


def _folded(run: RunAnalysis, code: str) -> tuple[str | None, int | None]:
    (f,) = [f for f in run.findings if f.code == code]
    return f.details.get("caused_by"), f.details.get("caused_by_seq")


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_later_finding_quoting_the_dropped_text_folds_under_the_trim(family: str) -> None:
    """Issue 82 item 2: a finding whose evidence is what the trim dropped follows from it, folded
    under ``C.history_trimmed`` (the management's round trip), on the trimmed turn (the booking
    id the dropped user message gave) and on a later one (the date it gave). On d22946dd both
    stood as findings of their own (``E.invented_argument`` a warning)."""
    run = _booking_after_a_trim(family, "BK-20931", "Booked from 2026-12-04: sunny, 75 F.")
    assert _folded(run, "E.invented_argument") == ("C.history_trimmed", 2)
    assert _folded(run, "E.ungrounded_claim") == ("C.history_trimmed", 2)
    (inv,) = [f for f in run.findings if f.code == "E.invented_argument"]
    assert inv.severity == "info" and inv.seq == 2
    (claim,) = [f for f in run.findings if f.code == "E.ungrounded_claim"]
    assert claim.seq == 3  # a later turn than the management's


@pytest.mark.parametrize("family", FAMILIES4)
def test_clean_twin_a_later_finding_not_quoting_the_dropped_text_stands(family: str) -> None:
    """Coming after a trim folds nothing: a value the dropped text does not hold, or a claim
    beside one it does, stands as its own finding."""
    run = _booking_after_a_trim(family, "BK-55555", "Booked from 2026-12-11: sunny, 75 F.")
    assert _folded(run, "E.invented_argument") == (None, None)
    (inv,) = [f for f in run.findings if f.code == "E.invented_argument"]
    assert inv.severity == "warning"
    assert _folded(run, "E.ungrounded_claim") == (None, None)
    mixed = _booking_after_a_trim(family, "BK-20931", "From 2026-12-04 to 2026-12-11: sunny.")
    assert _folded(mixed, "E.ungrounded_claim") == (None, None)
    # the same answer with no trim before it: nothing to fold under
    (s := AgentScript(family, tools=[WEATHER, BOOKING], system=SYSTEM)).user("Plan a weekend.")
    s.reply(calls=[Call("get_booking", {"booking_id": "BK-20931"}, id="call_q_9")])
    run = s.analyse()
    assert _folded(run, "E.invented_argument") == (None, None)
