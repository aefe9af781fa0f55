"""C layer: what the client dispatched, on multi-turn scenarios in every family's wire format.

Each code has a realistic scenario per family that can exhibit it (asserting the turn, layer,
severity and references of the finding) and a clean variant where it must stay silent.
"""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import (
    FAMILIES,
    HISTORY_KEY,
    LENGTH,
    STREAM_FAMILIES,
    UNIT,
    WEATHER,
    AgentScript,
    Call,
    Script,
    assistant_of,
    edit_request,
    error,
    error_results,
    results_of,
    rewrite_call_ids,
    set_cache_read,
)

from looptap.cassettes.analysis import Finding, RunAnalysis, Severity, analyse
from looptap.cassettes.analysis.codes import ROWS

#: Wires whose tool calls and results carry ids (Gemini may; Ollama never does).
ID_FAMILIES = ("openai_chat", "openai_responses", "anthropic", "bedrock")
#: Wires without ids: calls and results pair by tool name.
NAME_FAMILIES = ("gemini", "ollama")


def _fams(*xfail: tuple[str, pytest.MarkDecorator], among: tuple[str, ...] = FAMILIES) -> list[Any]:
    marks = dict(xfail)
    return [pytest.param(f, marks=marks[f]) if f in marks else f for f in among]


#: Families that report cache reads.
CACHE_FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini", "bedrock")


def found(run: RunAnalysis, code: str) -> list[Finding]:
    return [f for f in run.findings if f.code == code]


def one(run: RunAnalysis, code: str) -> Finding:
    got = found(run, code)
    assert len(got) == 1, [(f.code, f.seq, f.message) for f in run.findings]
    return got[0]


def c_codes(run: RunAnalysis) -> list[tuple[str, int | None]]:
    return [(f.code, f.seq) for f in run.findings if f.layer == "C"]


def at(run: RunAnalysis, f: Finding, seq: int, turn: int, severity: Severity) -> None:
    """``f`` sits on round trip ``seq``, which is turn ``turn`` of its conversation."""
    t = run.turns[seq]
    assert (f.seq, f.turn, f.conversation, f.layer, f.severity) == (
        seq,
        turn,
        t.conversation,
        "C",
        severity,
    ), f
    assert (t.index, t.conversation) == (turn, f.conversation)
    assert f.message.strip() and f.message[0].isupper(), f.message


def paris_rome(family: str) -> tuple[AgentScript, Call, Call]:
    """user → the model calls get_weather twice in parallel (seq 0)."""
    s = AgentScript(family, tools=[WEATHER, UNIT])
    s.user("What's the weather in Paris and in Rome?")
    paris, rome = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})
    s.reply("Let me check both.", calls=[paris, rome])
    return s, paris, rome


# --- the view ---------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_view_of_a_tool_loop(family: str) -> None:
    s, paris, rome = paris_rome(family)
    s.results("sunny, 21C", "cloudy, 17C")
    s.reply("Paris is sunny, Rome is cloudy.")
    s.user("Thanks!")
    s.reply("You're welcome.")
    run = s.analyse()
    assert c_codes(run) == []
    assert len(run.conversations) == 1 and run.conversations[0].turns == [0, 1, 2]
    c0, c1, c2 = (run.turns[i].c for i in range(3))
    assert (c0.link, c0.kept, c0.echoed_assistant, c0.pairings) == ("start", 0, None, [])
    assert c0.tools_offered == ["get_weather", "convert"]
    assert (c1.link, c1.kept, c1.appended_from, c1.echoed_assistant, c1.rewritten) == (
        "extends",
        1,
        1,
        True,
        0,
    )
    assert [(p.call_turn, p.in_history) for p in c1.pairings] == [(0, True), (0, True)]
    if family in ID_FAMILIES:
        assert [p.call_id for p in c1.pairings] == [paris.id, rome.id]
    # Named in every family: from the result (Gemini, Anthropic-less wires) or from its call
    # (OpenAI's results carry only the id; show --json had name null, issue 14).
    assert [p.name for p in c1.pairings] == ["get_weather", "get_weather"]
    # The echoed answer, then the results: one message per result (Chat, Ollama, Responses) or one
    # for all.
    one_each = family in ("openai_chat", "ollama", "openai_responses")
    assert c1.appended[0].role == "assistant"
    assert len(c1.appended) == (3 if one_each else 2)
    assert [p.message_index for p in c1.pairings] == ([2, 3] if one_each else [2, 2])
    assert (c2.link, c2.echoed_assistant, c2.pairings, c2.kept, c2.appended_from) == (
        "extends",
        True,
        [],
        1 + len(c1.appended),
        1 + len(c1.appended),
    )
    assert [m.role for m in c2.appended] == ["assistant", "user"]


# --- C.dropped_tool_result ----------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_dropped_one_of_parallel_calls(family: str) -> None:
    s, paris, rome = paris_rome(family)
    s.results_for((paris, "sunny, 21C"))  # the dispatcher lost Rome's result
    s.reply("Paris is sunny.")
    run = s.analyse()
    f = one(run, "C.dropped_tool_result")
    at(run, f, 1, 1, Severity.ERROR)
    assert f.related_turn == 0 and f.tool_call_id == rome.id
    assert f.path == f"{HISTORY_KEY[family]}[1:]"
    assert "get_weather" in f.message and "Rome" in f.message and "turn 0" in f.message
    assert c_codes(run) == [("C.dropped_tool_result", 1)]


@pytest.mark.parametrize("family", FAMILIES)
def test_dropped_all_results_for_new_user_input(family: str) -> None:
    s, _, _ = paris_rome(family)
    s.user("Never mind, what about London?")  # the calls were never answered
    s.reply("London is rainy.")
    run = s.analyse()
    got = found(run, "C.dropped_tool_result")
    assert len(got) == 2 and {f.seq for f in got} == {1} and {f.related_turn for f in got} == {0}


@pytest.mark.parametrize("family", FAMILIES)
def test_all_results_sent_is_clean(family: str) -> None:
    s, _, _ = paris_rome(family)
    s.results("sunny", "cloudy")
    s.reply("Paris is sunny, Rome cloudy.")
    assert c_codes(s.analyse()) == []


def test_ollama_pairs_by_tool_name() -> None:
    """Ollama reports no pairing error and has no call ids: pairing is checked by tool name."""
    s = AgentScript("ollama", tools=[WEATHER, UNIT])
    s.user("Weather in Paris, in Fahrenheit?")
    w, u = Call("get_weather", {"city": "Paris"}), Call("convert", {"value": 21})
    s.reply(calls=[w, u])
    s.results_for((w, "21C"))  # the convert result is missing
    s.reply("It is 21C in Paris.")
    run = s.analyse()
    f = one(run, "C.dropped_tool_result")
    at(run, f, 1, 1, Severity.ERROR)
    assert f.tool_call_id is None and f.details["tool"] == "convert" and f.related_turn == 0
    assert [(p.name, p.call_turn) for p in run.turns[1].c.pairings] == [("get_weather", 0)]


def test_ollama_result_for_a_tool_never_called_is_an_orphan() -> None:
    s = AgentScript("ollama", tools=[WEATHER, UNIT])
    s.user("Weather in Paris?")
    w = Call("get_weather", {"city": "Paris"})
    s.reply(calls=[w])
    s.results_for((w, "21C"), (Call("convert", {"value": 21}), "69.8F"))
    s.reply("It is 21C (69.8F) in Paris.")
    run = s.analyse()
    f = one(run, "C.orphan_tool_result")
    at(run, f, 1, 1, Severity.ERROR)
    assert f.details["tool"] == "convert" and f.path == "messages[3]"
    assert not found(run, "C.dropped_tool_result")


def _inserted_call(family: str, with_result: bool) -> tuple[Script, Call]:
    """A framework puts a call of its own (with an id) into the history, maybe without a result."""
    s = Script(family)
    s.user("Hi, what can you do?")
    s.reply("I can look up the weather.")
    injected = Call(
        "get_weather",
        {"city": "Paris"},
        id="call_injected_1" if family != "anthropic" else "toolu_01injected",
    )
    s.history.extend(assistant_of(family, None, [injected]))
    if with_result:
        s.history.extend(results_of(family, [(injected, "sunny")]))
    s.user("So, is it sunny?")
    s.reply("Yes, it is sunny in Paris.")
    return s, injected


@pytest.mark.parametrize("family", ID_FAMILIES)
def test_history_call_without_result(family: str) -> None:
    s, injected = _inserted_call(family, with_result=False)
    run = s.analyse()
    f = one(run, "C.dropped_tool_result")
    at(run, f, 1, 1, Severity.ERROR)
    assert (
        f.tool_call_id == injected.id
        and f.related_turn is None
        and "call to get_weather" in f.message
    )


@pytest.mark.parametrize("family", ID_FAMILIES)
def test_history_call_without_result_path(family: str) -> None:
    s, _ = _inserted_call(family, with_result=False)
    # history items: user, answer, the injected call, user — the call is item 2
    assert one(s.analyse(), "C.dropped_tool_result").path == f"{HISTORY_KEY[family]}[2]"


@pytest.mark.parametrize("family", ID_FAMILIES)
def test_history_call_with_result_is_clean(family: str) -> None:
    s, _ = _inserted_call(family, with_result=True)
    assert c_codes(s.analyse()) == []


def test_paused_turn_needs_no_results() -> None:
    """Anthropic ``pause_turn``: the client re-sends to let a server tool continue; nothing to
    answer."""
    s = Script("anthropic")
    s.user("Search the web for the Paris forecast.")
    s.reply("Searching…", calls=[Call("get_weather", {"city": "Paris"})], finish="pause_turn")
    s.reply("Paris will be sunny.")
    assert not found(s.analyse(), "C.dropped_tool_result")


# --- C.orphan_tool_result -----------------------------------------------------------------------


def _wrong_id(family: str, call: Call) -> Call:
    return (
        Call(call.name, call.args, id=f"{call.id}_x")
        if family in ID_FAMILIES
        else Call("convert", {"value": 1})
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_orphan_result_with_a_wrong_id(family: str) -> None:
    """The client answers with an id (or, without ids, a tool name) that no call had."""
    s = AgentScript(family, tools=[WEATHER, UNIT])
    s.user("Weather in Paris?")
    call = Call("get_weather", {"city": "Paris"})
    s.reply(calls=[call])
    wrong = _wrong_id(family, call)
    s.results_for((wrong, "sunny"))
    s.reply("It is sunny.")
    run = s.analyse()
    f = one(run, "C.orphan_tool_result")
    assert f.tool_call_id == (wrong.id if family in ID_FAMILIES else None)
    assert f.path == f"{HISTORY_KEY[family]}[2]"
    assert (wrong.id or wrong.name) in f.message
    d = one(run, "C.dropped_tool_result")  # and the real call went unanswered
    assert d.seq == 1 and d.related_turn == 0 and d.tool_call_id == call.id
    if family in ID_FAMILIES:
        # Issue 14: the root cause leads, one error pairing the wrong id with the model's; the
        # orphan and the dropped call it explains follow it as info (caused_by).
        root = one(run, "C.wrong_tool_call_id")
        at(run, root, 1, 1, Severity.ERROR)
        assert root.details["pairs"] == [
            {"sent": wrong.id, "model": call.id, "tool": "get_weather"}
        ]
        assert f"`{wrong.id}`" in root.message and call.id in root.message
        turn = run.turns[1].findings
        assert turn.index(root) < turn.index(f) and turn.index(root) < turn.index(d)
        for consequence in (f, d):
            assert (
                consequence.severity is Severity.INFO
                and consequence.details["caused_by"] == "C.wrong_tool_call_id"
            )
    else:
        at(run, f, 1, 1, Severity.ERROR)


@pytest.mark.parametrize("family", ID_FAMILIES)
def test_orphan_result_after_a_plain_answer(family: str) -> None:
    s = Script(family)
    s.user("Hi")
    s.reply("Hello! How can I help?")
    s.history.extend(
        results_of(family, [(Call("get_weather", {"city": "Paris"}, id="call_stale_9"), "sunny")])
    )
    s.user("Weather?")
    s.reply("Which city?")
    run = s.analyse()
    f = one(run, "C.orphan_tool_result")
    at(run, f, 1, 1, Severity.ERROR)
    assert f.tool_call_id == "call_stale_9" and f.path == f"{HISTORY_KEY[family]}[2]"
    assert c_codes(run) == [("C.orphan_tool_result", 1)]


# Ids rewritten by a framework (echo and results consistently) must not look like orphans.


@pytest.mark.parametrize("family", [*ID_FAMILIES, "gemini"])
def test_ids_rewritten_by_a_framework_are_not_orphans(family: str) -> None:
    s, _, _ = paris_rome(family)
    s.results("sunny", "cloudy")
    ex = s.reply("Paris is sunny, Rome cloudy.")
    seen: dict[str, int] = {}

    def new(old: str) -> str:
        if family == "gemini":  # the n-th call and the n-th result get the same invented id
            seen[old] = seen.get(old, -1) + 1
            return f"pyd_ai_{seen[old]}"
        return f"pyd_ai_{old[-6:]}"

    edit_request(ex, lambda b: rewrite_call_ids(family, b, new))
    run = s.analyse()
    assert c_codes(run) == []
    c1 = run.turns[1].c
    assert c1.link == "extends" and c1.echoed_assistant is True
    assert [p.call_turn for p in c1.pairings] == [0, 0] and all(p.in_history for p in c1.pairings)
    assert all((p.call_id or "").startswith("pyd_ai_") for p in c1.pairings)


def test_a_result_answering_an_echoed_id_does_not_also_answer_another_call_by_name() -> None:
    """Gemini CLI invents ids for the model's calls (the wire's calls have none) and sends its
    results under them: a client that then loses the second result has dropped it, although the
    first result's tool name is the second call's too (the one result answers one call, not two)."""
    s, _, _ = paris_rome("gemini")
    s.results("sunny", "cloudy")
    ex = s.reply("Paris is sunny.")
    seen: dict[str, int] = {}

    def new(old: str) -> str:
        seen[old] = seen.get(old, -1) + 1
        return f"get_weather_{seen[old]}"

    def drop_last(body: Any) -> None:
        rewrite_call_ids("gemini", body, new)
        body["contents"][-1]["parts"].pop()

    edit_request(ex, drop_last)
    f = one(s.analyse(), "C.dropped_tool_result")
    assert (
        (f.turn, f.related_turn) == (1, 0) and "get_weather" in f.message and "Rome" in f.message
    ), f.message


# --- C.duplicate_tool_result --------------------------------------------------------------------


@pytest.mark.parametrize("family", [*ID_FAMILIES, "gemini"])
def test_duplicate_tool_result(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    call = Call("get_weather", {"city": "Paris"}, id="fc-7d1" if family == "gemini" else None)
    s.reply(calls=[call])
    s.results("sunny")
    s.results("sunny")  # a retry loop appended the result a second time
    ex = s.reply("It is sunny.")
    if family == "gemini":  # Gemini carries the call id when the API sent one

        def add_ids(body: dict[str, Any]) -> None:
            for item in body["contents"]:
                for p in item["parts"]:
                    fn = p.get("functionCall") or p.get("functionResponse")
                    if fn is not None:
                        fn["id"] = "fc-7d1"

        edit_request(ex, add_ids)
        first = s.exchanges[0]
        first.response_chunks = [
            (
                0.05,
                first.response_body.replace(b'"functionCall":{', b'"functionCall":{"id":"fc-7d1",'),
            )
        ]
    run = s.analyse()
    f = one(run, "C.duplicate_tool_result")
    at(run, f, 1, 1, Severity.WARNING)
    assert call.id is not None and f.tool_call_id == call.id and call.id in f.message
    assert not found(run, "C.orphan_tool_result") and not found(run, "C.dropped_tool_result")
    # history: user, call, result, result again (item 3)
    assert f.path == f"{HISTORY_KEY[family]}[3]"


def test_duplicate_tool_result_path_responses() -> None:
    """Responses merges consecutive results into one normalised message; the path names the wire
    item (input[3], the second output), not the merged message's first item."""
    s = Script("openai_responses")
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.results("sunny")
    s.reply("It is sunny.")
    assert one(s.analyse(), "C.duplicate_tool_result").path == "input[3]"


# --- C.assistant_not_echoed ---------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_answer_not_echoed(family: str) -> None:
    s = Script(family)
    s.user("What is the capital of France?")
    s.reply("Paris.", echo=False)  # the client forgot to append the answer
    s.user("And of Italy?")
    s.reply("Rome.")
    run = s.analyse()
    f = one(run, "C.assistant_not_echoed")
    at(run, f, 1, 1, Severity.WARNING)
    assert f.related_turn == 0 and f.path == f"{HISTORY_KEY[family]}[1]"
    assert run.turns[1].c.echoed_assistant is False and run.turns[1].c.link == "extends"


@pytest.mark.parametrize("family", FAMILIES)
def test_answer_edited_before_echo(family: str) -> None:
    s = Script(family)
    s.user("What is the capital of France?")
    s.reply("Paris.", echo=False)
    s.history.extend(assistant_of(family, "Lyon."))  # the client echoed something else
    s.user("And of Italy?")
    s.reply("Rome.")
    run = s.analyse()
    f = one(run, "C.assistant_not_echoed")
    at(run, f, 1, 1, Severity.WARNING)


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_calls_not_echoed_but_results_sent(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], echo=False)
    s.results("sunny")
    s.reply("It is sunny.")
    run = s.analyse()
    f = one(run, "C.assistant_not_echoed")
    at(run, f, 1, 1, Severity.WARNING)
    assert f.related_turn == 0


@pytest.mark.parametrize("family", ["openai_chat", "ollama"])
def test_reasoning_inlined_as_think_text_counts_as_echoed(family: str) -> None:
    s = Script(family)
    s.user("What is the capital of France?")
    s.reply("Paris.", reasoning="The user wants the capital.", echo=False)
    s.history.extend(assistant_of(family, "<think>The user wants the capital.</think>\n\nParis."))
    s.user("And of Italy?")
    s.reply("Rome.")
    run = s.analyse()
    assert not found(run, "C.assistant_not_echoed") and run.turns[1].c.echoed_assistant is True


# --- C.history_trimmed / C.history_mutated -------------------------------------------------------


def _three_rounds(family: str) -> Script:
    s = Script(family)
    for q, a in (
        ("Capital of France?", "Paris."),
        ("Of Italy?", "Rome."),
        ("Of Spain?", "Madrid."),
    ):
        s.user(q)
        s.reply(a)
    return s


@pytest.mark.parametrize("family", FAMILIES)
def test_history_trimmed(family: str) -> None:
    s = _three_rounds(family)
    # A sliding window: keep the first question, drop the middle rounds.
    s.history = [s.history[0], *s.history[-2:]]
    s.user("Of Portugal?")
    s.reply("Lisbon.")
    run = s.analyse()
    f = one(run, "C.history_trimmed")
    at(run, f, 3, 3, Severity.INFO)
    assert f.related_turn == 2 and f.details["kept"] == 1 and f.path == f"{HISTORY_KEY[family]}[1]"
    assert "5 messages" in f.message and "4 now" in f.message
    assert run.turns[3].c.link == "rewritten"
    assert not found(run, "C.history_mutated")


@pytest.mark.parametrize("family", FAMILIES)
def test_history_mutated(family: str) -> None:
    s = _three_rounds(family)
    # The client edits an earlier answer in place (history as long as before).
    s.history[3] = assistant_of(family, "Rome, the Eternal City.")[0]
    s.user("Of Portugal?")
    s.reply("Lisbon.")
    run = s.analyse()
    f = one(run, "C.history_mutated")
    at(run, f, 3, 3, Severity.WARNING)
    assert (
        f.related_turn == 2 and f.path == f"{HISTORY_KEY[family]}[3]" and f.details["changed"] == 2
    )
    assert not found(run, "C.history_trimmed") and not found(run, "C.assistant_not_echoed")


@pytest.mark.parametrize("family", FAMILIES)
def test_history_extended_only_is_clean(family: str) -> None:
    s = _three_rounds(family)
    s.user("Of Portugal?")
    s.reply("Lisbon.")
    run = s.analyse()
    assert c_codes(run) == [] and [t.c.link for t in run.turns.values()] == [
        "start",
        "extends",
        "extends",
        "extends",
    ]


# --- C.pairing_error ----------------------------------------------------------------------------

_OPENAI = {"type": "invalid_request_error", "param": "messages", "code": None}
_ANTHROPIC = "invalid_request_error"

#: WIRE.md §G.2, per provider: (family, exact text, what the client did wrong).
PAIRING_400: list[Any] = [
    (
        "openai_chat",
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: {id}",
        "dropped",
    ),
    (
        "openai_chat",
        "Invalid parameter: messages with role 'tool' must be "
        "a response to a preceeding message with 'tool_calls'.",
        "not_echoed",
    ),
    (
        "openai_chat",
        "Invalid parameter: 'tool_call_id' of '{id}_x' "
        "not found in 'tool_calls' of previous message.",
        "wrong_id",
    ),
    ("openai_responses", "No tool output found for function call {id}.", "dropped"),
    (
        "openai_responses",
        "No tool call found for function call output with call_id {id}_x.",
        "wrong_id",
    ),
    (
        "openai_responses",
        "Duplicate item found with id fc_68d5e1a2b3c4. Remove "
        "duplicate items from your input and try again.",
        "duplicate",
    ),
    (
        "openai_responses",
        "Item 'rs_68d5e1a2b3c4' of type 'reasoning' was "
        "provided without its required following item.",
        "not_echoed",
    ),
    (
        "anthropic",
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "{id}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
        "message.",
        "dropped",
    ),
    (
        "anthropic",
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {id}_x. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message.",
        "wrong_id",
    ),
    (
        "anthropic",
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. "
        "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
        "blocks.",
        "dropped",
    ),
    (
        "gemini",
        "Please ensure that the number of function response parts is equal to the number of "
        "function call parts of the function call turn.",
        "dropped",
    ),
    (
        "gemini",
        "Please ensure that function call turn comes immediately after a user turn or after a "
        "function response turn.",
        "dropped",
    ),
    (
        "gemini",
        "Please ensure that function response turn comes immediately after a function call turn.",
        "not_echoed",
    ),
    (
        "gemini",
        "Function call is missing a thought_signature in functionCall parts. This is required for "
        "tools to work correctly, and missing thought_signature may lead to degraded model "
        "performance. Additional data, function call `default_api:get_weather` , position 2. "
        "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more "
        "details.",
        "clean",
    ),
    (
        "gemini",
        "Unable to submit request because function call `get_weather` in the 2. content block is "
        "missing a `thought_signature`. Learn more: https://cloud.google.com/vertex-ai/"
        "generative-ai/docs/thought-signatures",
        "clean",
    ),
    (
        "bedrock",
        "The number of toolResult blocks at messages.2.content exceeds the number of toolUse "
        "blocks of previous turn.",
        "wrong_id",
    ),
    (
        "bedrock",
        "The model returned the following errors: messages.2: `tool_use` ids were found without "
        "`tool_result` blocks immediately after: {id}. Each `tool_use` block must have a "
        "corresponding `tool_result` block in the next message.",
        "dropped",
    ),
    # agno-agi/agno#6698, zeroclaw-labs/zeroclaw#1476 (not in WIRE.md §G.2)
    pytest.param(
        "bedrock",
        "Expected toolResult blocks at messages.2.content for the following Ids: {id}",
        "dropped",
    ),
]


def _error_body(family: str, status: int, text: str) -> Any:
    if family in ("openai_chat", "openai_responses"):
        return {"error": {"message": text, **_OPENAI}}
    if family == "anthropic":
        return {
            "type": "error",
            "error": {"type": _ANTHROPIC, "message": text},
            "request_id": "req_011CVx",
        }
    if family == "gemini":
        return {
            "error": {
                "code": status,
                "message": text,
                "status": "INVALID_ARGUMENT" if status == 400 else "INTERNAL",
            }
        }
    if family == "ollama":
        return {"error": text}
    return {"message": text}


def _mishandle(s: Script, call: Call, how: str) -> None:
    """Grow the history the way the client got it wrong (the turn that asked for ``call`` was
    echoed)."""
    f = s.family
    if how == "dropped":
        s.user("Any news?")
    elif how == "wrong_id":
        s.history.extend(results_of(f, [(Call(call.name, call.args, id=f"{call.id}_x"), "sunny")]))
    elif how == "duplicate":
        s.results("sunny")
        s.results("sunny")
    elif how == "not_echoed":
        del s.history[-len(assistant_of(f, None, [call])) :]
        s.results("sunny")
    else:
        s.results("sunny")


@pytest.mark.parametrize(("family", "text", "how"), PAIRING_400)
def test_pairing_400_is_blamed_on_c(family: str, text: str, how: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    call = Call("get_weather", {"city": "Paris"})
    s.reply("Checking.", calls=[call])
    _mishandle(s, call, how)
    message = text.format(id=call.id)
    s.fail(
        400,
        _error_body(family, 400, message),
        [
            (
                "x-amzn-errortype",
                "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            )
        ]
        if family == "bedrock"
        else [],
    )
    run = s.analyse()
    f = one(run, "C.pairing_error")
    # the client's own pairing bug on that turn, where looptap sees one, is the root cause: the
    # API's 400 is folded under it as info (issue 27 item 4), else the 400 is the error
    causes = {code for code, _ in ROWS["C.pairing_error"].under}
    roots = [
        g
        for g in run.findings
        if g.seq == 1 and g.code in causes and not g.details.get("caused_by")
    ]
    at(run, f, 1, 1, Severity.INFO if roots else Severity.ERROR)
    if roots:
        assert roots[0].severity is Severity.ERROR or roots[0].code == "C.duplicate_tool_result"
        assert f.details["caused_by"] in causes and f.details["caused_by_seq"] == 1
    assert f.related_turn == 0 and f.details["api_message"] == message
    assert "turn 0" in f.message and "HTTP 400" in f.message
    assert run.turns[1].a.error is not None and run.turns[1].a.status == 400  # A reports it …
    assert not found(run, "A.http_error")  # … but does not also claim it


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "ollama"])
def test_other_400_is_not_a_pairing_error(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.fail(
        400, _error_body(family, 400, "Invalid value for 'temperature': must be between 0 and 2.")
    )
    run = s.analyse()
    assert not found(run, "C.pairing_error")
    assert one(run, "A.http_error").seq == 1


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_pairing_400_retried_unchanged(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    call = Call("get_weather", {"city": "Paris"})
    s.reply(calls=[call])
    s.user("Any news?")  # the result was never sent
    text = PAIRING_400[0][1] if family == "openai_chat" else PAIRING_400[7][1]
    body = _error_body(family, 400, text.format(id=call.id))
    s.fail(400, body)
    s.fail(400, body)  # sent again as is
    run = s.analyse()
    first = found(run, "C.pairing_error")[0]
    assert (first.seq, first.related_turn) == (1, 0)
    r = one(run, "C.retry_of_rejected_request")
    at(run, r, 2, 2, Severity.WARNING)
    assert r.related_turn == 1 and not found(run, "A.http_error")


def test_pairing_400_retried_links_to_the_calls() -> None:
    s = Script("openai_chat")
    s.user("Weather in Paris?")
    call = Call("get_weather", {"city": "Paris"})
    s.reply(calls=[call])
    s.user("Any news?")
    body = _error_body("openai_chat", 400, PAIRING_400[0][1].format(id=call.id))
    s.fail(400, body)
    s.fail(400, body)
    assert [f.related_turn for f in found(s.analyse(), "C.pairing_error")] == [0, 0]


def test_pairing_400_on_the_first_turn_seen() -> None:
    """The run starts with an already broken history: C is blamed, with no turn to link to."""
    s = Script("openai_chat")
    s.history = [
        {"role": "user", "content": "Weather?"},
        {"role": "tool", "tool_call_id": "call_zz", "content": "sunny"},
    ]
    s.fail(
        400,
        _error_body(
            "openai_chat",
            400,
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
        ),
    )
    run = s.analyse()
    f = one(run, "C.pairing_error")
    assert f.seq == 0 and f.turn == 0 and f.related_turn is None
    assert not found(run, "A.http_error")


# --- C.continued_after_final_answer -------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_continued_after_final_answer(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply("It is sunny in Paris.")
    s.reply("It is sunny in Paris today.")  # the loop went round again with nothing new
    run = s.analyse()
    f = one(run, "C.continued_after_final_answer")
    at(run, f, 2, 2, Severity.WARNING)
    assert f.related_turn == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_new_input_after_final_answer_is_clean(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply("It is sunny in Paris.")
    s.user("And tomorrow?")
    s.reply("Tomorrow will be cloudy.")
    assert c_codes(s.analyse()) == []


# --- C.truncated_treated_as_complete ------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_cut_tool_call_executed_anyway(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    cut = Call(
        "get_weather",
        {"city": "Par"},
        raw='{"city": "Par' if family in ("openai_chat", "openai_responses") else None,
    )
    s.reply("Let me", calls=[cut], finish=LENGTH[family], max_tokens=16)
    s.results("Error: unknown city 'Par'")
    s.reply("Sorry, I could not find that city.")
    run = s.analyse()
    f = one(run, "C.truncated_treated_as_complete")
    at(run, f, 1, 1, Severity.WARNING)
    assert f.related_turn == 0 and "ran its truncated tool calls" in f.message


@pytest.mark.parametrize("family", FAMILIES)
def test_cut_answer_dropped_and_asked_again_is_clean(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(
        "Let me",
        calls=[Call("get_weather", {"city": "Par"})],
        finish=LENGTH[family],
        max_tokens=16,
        echo=False,
    )
    # same history, bigger budget
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], max_tokens=1024)
    s.results("sunny")
    s.reply("It is sunny.")
    run = s.analyse()
    assert not found(run, "C.truncated_treated_as_complete")
    assert not found(run, "C.dropped_tool_result")


@pytest.mark.parametrize("family", FAMILIES)
def test_complete_tool_call_is_not_truncated(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply("It is sunny.")
    assert not found(s.analyse(), "C.truncated_treated_as_complete")


# --- C.retry / C.retry_of_rejected_request -----------------------------------------------------

_TRANSIENT = {
    "openai_chat": (500, "The server had an error processing your request."),
    "openai_responses": (500, "An error occurred while processing your request."),
    "anthropic": (429, "Number of request tokens has exceeded your per-minute rate limit."),
    "gemini": (503, "The model is overloaded. Please try again later."),
    "ollama": (500, "llama runner process has terminated: signal: killed"),
    "bedrock": (429, "Too many requests, please wait before trying again."),
}


@pytest.mark.parametrize(
    ("family", "status"),
    [(f, st) for f in FAMILIES for st in ((500, 503) if f == "ollama" else (429, 500))],
)
def test_retry_after_a_transient_error(family: str, status: int) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.fail(status, _error_body(family, status, _TRANSIENT[family][1]))
    s.reply("It is sunny.")  # the identical request again
    run = s.analyse()
    f = one(run, "C.retry")
    at(run, f, 2, 2, Severity.INFO)
    assert f.related_turn == 1 and f"HTTP {status}" in f.message
    assert run.turns[2].c.link == "retry" and run.turns[2].conversation == run.turns[0].conversation
    assert not found(run, "C.retry_of_rejected_request")


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_retry_after_a_cut_stream(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply("It is", stream=True, truncate_stream=True, echo=False)  # the stream broke off
    s.reply("It is sunny.", stream=True)
    run = s.analyse()
    f = one(run, "C.retry")
    at(run, f, 1, 1, Severity.INFO)
    assert f.related_turn == 0 and run.turns[1].c.link == "retry"


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_retry_after_a_cut_stream_says_why(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply("It is", stream=True, truncate_stream=True, echo=False)
    s.reply("It is sunny.", stream=True)
    f = one(s.analyse(), "C.retry")
    assert "HTTP 200" not in f.message and "incomplete" in f.message


@pytest.mark.parametrize("family", FAMILIES)
def test_retry_of_a_rejected_request(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.fail(
        400,
        _error_body(
            family,
            400,
            "Invalid schema for function 'get_weather': 'object' "
            "is not valid under any of the given schemas.",
        ),
    )
    s.fail(
        400,
        _error_body(
            family,
            400,
            "Invalid schema for function 'get_weather': 'object' "
            "is not valid under any of the given schemas.",
        ),
    )
    run = s.analyse()
    f = one(run, "C.retry_of_rejected_request")
    at(run, f, 1, 1, Severity.WARNING)
    assert f.related_turn == 0 and "HTTP 400" in f.message
    assert not found(run, "C.retry")


def _twice(status: int, first: dict[str, Any], second: dict[str, Any]) -> RunAnalysis:
    """The same request failing twice (``status``), each attempt as the wire told it: ``started``
    (the recording's clock), ``date`` (the response's Date header, an import's only clock) and
    ``headers`` (the client's retry counter)."""
    s = Script("openai_chat")
    s.user("Weather in Paris?")
    for attempt in (first, second):
        ex = s.fail(status, _error_body("openai_chat", status, "Invalid value for 'temperature'."))
        ex.started = attempt.get("started")
        ex.request_headers += list(attempt.get("headers", ()))
        if "date" in attempt:
            ex.response_headers.append(("date", attempt["date"]))
    return s.analyse()


_SDK = (("x-stainless-retry-count", "0"),)
_SDK_RETRY = (("x-stainless-retry-count", "1"),)
_DATE = "Tue, 16 Sep 2025 10:00:00 GMT"


@pytest.mark.parametrize(
    ("first", "second", "retry"),
    [
        # Issue 54: a separate run appended to the cassette minutes later, the SDK's counter 0.
        ({"started": 1e9, "headers": _SDK}, {"started": 1e9 + 300, "headers": _SDK}, False),
        ({"date": _DATE, "headers": _SDK}, {"date": _DATE.replace("10:00", "10:07")}, False),
        ({"started": 1e9}, {"started": 1e9 + 480}, False),
        ({"headers": _SDK}, {"headers": _SDK}, False),  # no clock, and the SDK says: a 1st attempt
        ({"headers": (("amz-sdk-request", "attempt=1; max=3"),)},) * 2 + (False,),
        # Twins: what says it is a retry.
        ({"started": 1e9, "headers": _SDK}, {"started": 1e9 + 2, "headers": _SDK}, True),
        ({"date": _DATE}, {"date": _DATE.replace("10:00:00", "10:00:01")}, True),
        ({"started": 1e9}, {"started": 1e9 + 300, "headers": _SDK_RETRY}, True),
        ({}, {}, True),  # nothing either way (pydantic-ai's recorder keeps neither): as before
        ({"started": 1e9}, {"started": 1e9 + 300, "headers": (("amz-sdk-request", "attempt=2"),)})
        + (True,),
    ],
)
def test_a_retry_needs_evidence(first: dict[str, Any], second: dict[str, Any], retry: bool) -> None:
    """Issue 54: an identical request after a 400 is a retry when the client's retry counter says
    so or it came soon after; one the SDK sent as a first attempt with nothing else to go on, or
    minutes later, is another run sending it: its own conversation, no retry finding."""
    run = _twice(400, first, second)
    codes = [f.code for f in run.findings]
    assert codes.count("A.http_error") == 2
    assert ("C.retry_of_rejected_request" in codes) is retry, codes
    assert len(run.conversations) == (1 if retry else 2)
    assert (run.turns[1].c.link == "retry") is retry


def test_an_sdk_retry_minutes_later_is_still_a_retry() -> None:
    """The SDK's own retry after a 500 (counter 1) is a retry however long it waited."""
    run = _twice(
        500, {"started": 1e9, "headers": _SDK}, {"started": 1e9 + 600, "headers": _SDK_RETRY}
    )
    assert [f.code for f in run.findings if f.code.startswith("C.")] == [
        "C.retry",
        "C.gave_up_on_retryable_error",
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_changed_model_after_a_rejection_is_no_identical_retry(family: str) -> None:
    """Issue 14: after a 404 model_not_found the client switched the model and was told it
    "re-sent the identical request". It fixed the request: say so, as info."""
    s = Script(family, model="gpt-imaginary-9")
    s.user("Weather in Paris?")
    s.fail(
        404,
        _error_body(
            family,
            404,
            "The model `gpt-imaginary-9` does not exist or you do not have access to it.",
        ),
    )
    s.model = "gpt-4.1"
    s.reply("It is sunny.")
    run = s.analyse()
    assert not found(run, "C.retry_of_rejected_request")
    f = one(run, "C.retry")
    at(run, f, 1, 1, Severity.INFO)
    assert "the model (gpt-imaginary-9 → gpt-4.1)" in f.message and "not a blind retry" in f.message


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_changed_parameters_after_a_rejection_are_named(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(
        error=error(400, _error_body(family, 400, "max_tokens is too large: 999999."), ()),
        echo=False,
        max_tokens=999999,
    )
    s.reply("It is sunny.", max_tokens=1024)
    run = s.analyse()
    assert not found(run, "C.retry_of_rejected_request")
    # max_tokens, or max_completion_tokens as the chat script sends it
    assert "parameters max_" in one(run, "C.retry").message


@pytest.mark.parametrize("family", FAMILIES)
def test_same_request_after_success_is_not_a_retry(family: str) -> None:
    s = Script(family)
    s.user("Tell me a joke.")
    s.reply("Why did the chicken cross the road?", echo=False)
    s.reply("I told my computer a joke; it did not get it.")  # sampling again on purpose
    run = s.analyse()
    assert not found(run, "C.retry") and not found(run, "C.retry_of_rejected_request")


# --- C.tool_result_error ------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_result_error_flagged(family: str) -> None:
    """Anthropic ``is_error``, Bedrock ``status: error``, Gemini ``{"error": …}``; text
    elsewhere."""
    s = Script(family)
    s.user("Weather in Atlantis?")
    call = Call("get_weather", {"city": "Atlantis"})
    s.reply(calls=[call])
    s.history.extend(error_results(family, [(call, "Error: city 'Atlantis' not found")]))
    s.reply("I could not find Atlantis.")
    run = s.analyse()
    f = one(run, "C.tool_result_error")
    at(run, f, 1, 1, Severity.INFO)
    assert (
        f.tool_call_id == call.id
        and f.path == f"{HISTORY_KEY[family]}[2]"
        and "Atlantis" in f.message
    )
    if family in ("anthropic", "bedrock"):
        assert run.turns[1].c.pairings[0].is_error is True


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "text",
    [
        "Error: connection refused",
        'Traceback (most recent call last):\n  File "tool.py"',
        "Exception: timeout after 30s",
    ],
)
def test_tool_result_error_text(family: str, text: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results(text)
    s.reply("The weather service is down.")
    run = s.analyse()
    assert one(run, "C.tool_result_error").seq == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_result_ok_is_clean(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny, no errors reported by the station")
    s.reply("It is sunny.")
    assert not found(s.analyse(), "C.tool_result_error")


# --- C.cache_prefix_broken ----------------------------------------------------------------------


def _agent(family: str, **kw: Any) -> AgentScript:
    s = AgentScript(family, system="You are a weather assistant. Answer briefly.", **kw)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    return s


@pytest.mark.parametrize("family", FAMILIES)
def test_system_prompt_changed_mid_conversation(family: str) -> None:
    s = _agent(family)
    # a timestamp in the prompt
    s.system = "You are a weather assistant. Today is 2025-05-02 10:31:07."
    s.reply("It is sunny.")
    run = s.analyse()
    f = one(run, "C.cache_prefix_broken")
    at(run, f, 1, 1, Severity.INFO)
    assert (
        f.related_turn == 0
        and f.details["changed"] == ["system prompt"]
        and "system prompt" in f.message
    )
    assert run.turns[1].conversation == run.turns[0].conversation


@pytest.mark.parametrize("family", FAMILIES)
def test_tools_changed_mid_conversation(family: str) -> None:
    s = _agent(family)
    s.tools = [WEATHER, UNIT]  # a tool added between turns
    s.reply("It is sunny.")
    run = s.analyse()
    f = one(run, "C.cache_prefix_broken")
    at(run, f, 1, 1, Severity.INFO)
    assert f.details["changed"] == ["tool definitions"]


@pytest.mark.parametrize("family", CACHE_FAMILIES)
def test_system_change_that_loses_cache_reads_is_a_warning(family: str) -> None:
    s = _agent(family)
    set_cache_read(s.reply("It is sunny."), family, 1024)
    s.user("And tomorrow?")
    s.system = "You are a weather assistant. Answer in detail."
    set_cache_read(s.reply("Tomorrow will be cloudy."), family, 0)
    run = s.analyse()
    f = one(run, "C.cache_prefix_broken")
    at(run, f, 2, 2, Severity.WARNING)
    assert f.related_turn == 1 and "cache reads dropped" in f.message


@pytest.mark.parametrize("family", CACHE_FAMILIES)
def test_tools_change_that_loses_cache_reads_is_a_warning(family: str) -> None:
    s = _agent(family)
    set_cache_read(s.reply("It is sunny."), family, 1024)
    s.user("Convert 21C to F.")
    s.tools = [UNIT, WEATHER]  # tools re-ordered: the cached prefix ends before them
    set_cache_read(s.reply(calls=[Call("convert", {"value": 21})]), family, 0)
    s.results("69.8")
    s.reply("69.8F.")
    run = s.analyse()
    f = one(run, "C.cache_prefix_broken")
    at(run, f, 2, 2, Severity.WARNING)
    assert f.details["changed"] == ["tool definitions"] and "cache reads dropped" in f.message


@pytest.mark.parametrize("family", CACHE_FAMILIES)
def test_stable_prefix_is_clean(family: str) -> None:
    s = _agent(family)
    set_cache_read(s.reply("It is sunny."), family, 1024)
    s.user("And tomorrow?")
    set_cache_read(s.reply("Tomorrow will be cloudy."), family, 1024)
    run = s.analyse()
    assert c_codes(run) == []


# --- C.stopped_with_pending_calls ---------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_run_ends_with_calls_pending(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.user("And in Rome and Oslo?")
    rome, oslo = Call("get_weather", {"city": "Rome"}), Call("get_weather", {"city": "Oslo"})
    s.reply(calls=[rome, oslo])  # nothing follows
    run = s.analyse()
    f = one(run, "C.stopped_with_pending_calls")
    at(run, f, 1, 1, Severity.INFO)
    assert f.tool_call_id == rome.id and "get_weather" in f.message


@pytest.mark.parametrize("family", FAMILIES)
def test_run_ending_on_an_answer_is_clean(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply("It is sunny.")
    assert not found(s.analyse(), "C.stopped_with_pending_calls")


def test_pending_calls_checked_per_conversation() -> None:
    """Two conversations interleaved: only the one left waiting is reported, on its own last
    turn."""
    a, b = Script("anthropic"), Script("anthropic")
    a.user("Weather in Paris?")
    b.user("Tell me a joke.")
    a.reply(calls=[Call("get_weather", {"city": "Paris"})])
    b.reply("Why did the chicken cross the road?")
    exchanges = [a.exchanges[0], b.exchanges[0]]
    for i, ex in enumerate(exchanges):
        ex.seq = i
    run = analyse(exchanges)
    f = one(run, "C.stopped_with_pending_calls")
    assert f.seq == 0 and f.conversation == run.turns[0].conversation != run.turns[1].conversation


@pytest.mark.parametrize("family", FAMILIES)
def test_findings_point_at_the_conversation_turn_not_the_recording_position(family: str) -> None:
    """A and B run concurrently (A0 B0 A1 B1); B loses a result on its turn 1, recorded at seq 3."""
    a, b = Script(family), Script(family)
    a.user("Weather in Paris?")
    b.user("Weather in Oslo and Bergen?")
    a.reply(calls=[Call("get_weather", {"city": "Paris"})])
    oslo, bergen = Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Bergen"})
    b.reply(calls=[oslo, bergen])
    a.results("sunny")
    b.last_calls = [oslo]
    b.results("snow")  # Bergen's result is lost
    a.reply("Sunny in Paris.")
    b.reply("Snow in Oslo.")
    exchanges = [a.exchanges[0], b.exchanges[0], a.exchanges[1], b.exchanges[1]]
    for i, ex in enumerate(exchanges):
        ex.seq = i
    run = analyse(exchanges)
    f = one(run, "C.dropped_tool_result")
    at(run, f, 3, 1, Severity.ERROR)
    assert f.conversation == run.turns[1].conversation != run.turns[0].conversation
    assert f.related_turn == 0 and f.tool_call_id == bergen.id and "Bergen" in f.message
    assert c_codes(run) == [("C.dropped_tool_result", 3)]


@pytest.mark.parametrize("completed", ['{"city": "Pa"}', "{}"])
def test_an_echo_that_completed_a_cut_call_is_no_missing_echo(completed: str) -> None:
    """Issue 14: the stream was cut inside a call's JSON (``{"city": "Pa``) and the client's SDK
    sent the call back completed (or emptied). That is the echo, not a changed answer: no
    C.assistant_not_echoed; the truncation leads and carrying on is
    C.truncated_treated_as_complete."""
    s = Script("openai_chat")
    s.user("Paris please")
    call = Call("get_weather", raw='{"city": "Pa', id="call_cut1")
    s.reply(calls=[call], finish="length", stream=True, echo=False)
    s.history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_cut1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": completed},
                }
            ],
        }
    )
    s.history.append(
        {"role": "tool", "tool_call_id": "call_cut1", "content": "error: bad arguments"}
    )
    s.reply("Sorry, which city?")
    run = s.analyse()
    assert not found(run, "C.assistant_not_echoed")
    assert one(run, "A.truncated_length").severity is Severity.ERROR
    assert found(run, "C.truncated_treated_as_complete")


def test_an_echo_that_changed_a_cut_call_is_still_told() -> None:
    s = Script("openai_chat")
    s.user("Paris please")
    s.reply(
        calls=[Call("get_weather", raw='{"city": "Pa', id="call_cut2")],
        finish="length",
        stream=True,
        echo=False,
    )
    s.history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_cut2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                }
            ],
        }
    )
    s.history.append({"role": "tool", "tool_call_id": "call_cut2", "content": "sunny"})
    s.reply("It is sunny in Rome.")
    assert found(s.analyse(), "C.assistant_not_echoed")


# --- root causes: results as text, results split -------------------------------------------------


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "openai_responses", "gemini"])
def test_a_result_sent_as_user_text_is_named_as_the_cause(family: str) -> None:
    """Issue 14: the client put the tool's output in a plain user message. Was: "carries no result"
    only; now the root (C.tool_result_as_text) leads and the dropped call follows it as info."""
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.user("get_weather returned: sunny, 21C")  # instead of a tool result
    s.reply("It is sunny.")
    run = s.analyse()
    root = one(run, "C.tool_result_as_text")
    at(run, root, 1, 1, Severity.ERROR)
    assert "get_weather" in root.message and "[2]" in root.message
    d = one(run, "C.dropped_tool_result")
    assert d.severity is Severity.INFO and d.details["caused_by"] == "C.tool_result_as_text"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_user_turn_that_merely_mentions_nothing_is_no_result_as_text(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.user("Never mind, what about tomorrow?")  # the result really is missing
    s.reply("Tomorrow it rains.")
    run = s.analyse()
    assert not found(run, "C.tool_result_as_text")
    assert one(run, "C.dropped_tool_result").severity is Severity.ERROR


def test_anthropic_results_split_over_two_user_messages() -> None:
    """Issue 14: Anthropic wants every tool_result of a turn in the one user message after it; a
    client that sends one message per result got only the API's 400 text. looptap's own check."""
    s, paris, rome = paris_rome("anthropic")
    s.history.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": paris.id, "content": "sunny"}],
        }
    )
    s.history.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": rome.id, "content": "cloudy"}],
        }
    )
    s.reply("Paris is sunny, Rome is cloudy.")
    run = s.analyse()
    f = one(run, "C.tool_results_split")
    at(run, f, 1, 1, Severity.ERROR)
    assert f.details["messages"] == [2, 3] and f.path == "messages[3]"


@pytest.mark.parametrize("family", ["openai_chat", "openai_responses", "bedrock"])
def test_results_in_several_messages_are_fine_where_the_api_allows_it(family: str) -> None:
    s, _, _ = paris_rome(family)
    s.results("sunny", "cloudy")
    s.reply("Paris is sunny, Rome is cloudy.")
    assert not found(s.analyse(), "C.tool_results_split")


@pytest.mark.parametrize(
    ("family", "status"),
    [(f, st) for f in FAMILIES for st in ((500, 503) if f == "ollama" else (429, 500))],
)
@pytest.mark.parametrize(
    ("asked", "waited", "code"),
    [
        ("20", 0.2, "C.retry_before_retry_after"),  # asked 20 s, came back in 0.2 s
        ("2", 2.5, "C.retry"),  # waited as asked
        ("120", 0.5, "C.retry"),  # above 60 s the SDKs use their own backoff: not a bug
        (None, 0.0, "C.retry"),  # nothing asked
    ],
)
def test_retry_sooner_than_the_api_asked(
    family: str, status: int, asked: str | None, waited: float, code: str
) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    failed = s.fail(
        status,
        _error_body(family, status, _TRANSIENT[family][1]),
        headers=[("retry-after", asked)] if asked else (),
    )
    retry = s.reply("It is sunny.")
    failed.started, failed.duration = 1000.0, 0.1
    retry.started = 1000.1 + waited
    run = s.analyse()
    f = one(run, code)
    at(run, f, 2, 2, Severity.WARNING if code == "C.retry_before_retry_after" else Severity.INFO)
    if code == "C.retry_before_retry_after":
        assert f.details["retry_after"] == float(asked or 0) and f.details[
            "waited"
        ] == pytest.approx(waited, abs=0.01)
        assert not found(run, "C.retry")


def test_an_injected_fault_is_labelled_as_injected() -> None:
    s = Script("openai_chat")
    s.user("Weather in Paris?")
    s.fail(
        503,
        _error_body(
            "openai_chat", 503, "The engine is currently overloaded, please try again later"
        ),
        headers=[("x-looptap-fault", "overloaded")],
    )
    s.reply("It is sunny.")
    run = s.analyse()
    f = one(run, "A.overloaded")
    assert (
        f.message.startswith("[injected by looptap: overloaded] ")
        and f.details["injected"] == "overloaded"
    )
    assert not [g for g in run.findings if g.layer != "A" and "injected" in g.details]


def _timed_fails(
    family: str, status: int, gaps: list[float], then_answer: bool = True
) -> RunAnalysis:
    """A user turn, then len(gaps)+1 attempts failing with ``status`` (each 0.05 s long, the next
    starting ``gap`` after the last ended), then (optionally) the answer 0.05 s after the last."""
    s = Script(family)
    s.user("Weather in Paris?")
    t = 1000.0
    fails = []
    for gap in [0.0, *gaps]:
        t += gap
        ex = s.fail(status, _error_body(family, status, _TRANSIENT[family][1]))
        ex.started, ex.duration = t, 0.05
        t += 0.05
        fails.append(ex)
    if then_answer:
        ok = s.reply("It is sunny.")
        ok.started, ok.duration = t + 0.05, 0.05
    return s.analyse()


@pytest.mark.parametrize("family", FAMILIES)
def test_retry_storm(family: str) -> None:
    status = 500 if family == "ollama" else 429
    run = _timed_fails(family, status, [0.01, 0.02, 0.01, 0.03])  # five attempts in 0.27 s
    f = one(run, "C.retry_storm")
    at(run, f, 4, 4, Severity.WARNING)
    assert f.details["attempts"] == 5 and f.details["seconds"] < 0.5
    backed_off = _timed_fails(family, status, [0.5, 1.0, 2.0, 4.0])  # an SDK's exponential backoff
    assert not found(backed_off, "C.retry_storm")
    few = _timed_fails(family, status, [0.01, 0.01])
    assert not found(few, "C.retry_storm")


@pytest.mark.parametrize("family", FAMILIES)
def test_gave_up_on_a_retryable_error(family: str) -> None:
    status = 500 if family == "ollama" else 429
    run = _timed_fails(family, status, [1.0, 2.0], then_answer=False)
    f = one(run, "C.gave_up_on_retryable_error")
    at(run, f, 2, 2, Severity.INFO)
    assert f.details["attempts"] == 3 and f"HTTP {status}" in f.message
    # it recovered
    assert not found(_timed_fails(family, status, [1.0, 2.0]), "C.gave_up_on_retryable_error")
    s = Script(family)
    s.user("Weather in Paris?")
    s.fail(400, _error_body(family, 400, "Invalid schema for function 'get_weather'."))
    # not retryable: nothing to give up on
    assert not found(s.analyse(), "C.gave_up_on_retryable_error")


# --- C.refusal_treated_as_answer ----------------------------------------------------------------

_REFUSED = {
    "openai_chat": {"refusal": "I can't help with that."},
    "openai_responses": {"refusal": "I can't help with that."},
    "anthropic": {"finish": "refusal"},
}
_FILTERED = {
    "openai_chat": "content_filter",
    "openai_responses": "incomplete:content_filter",
    "gemini": "SAFETY",
}


# (the script echoes no Responses refusal item)
@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_refusal_echoed_and_the_loop_went_on(family: str) -> None:
    s = Script(family)
    s.user("Delete every file on the server.")
    s.reply("Sorry" if family == "anthropic" else None, **_REFUSED[family])
    s.reply("Done.")  # called again with the refusal in the history and nothing new
    run = s.analyse()
    f = one(run, "C.refusal_treated_as_answer")
    at(run, f, 1, 1, Severity.WARNING)
    assert f.related_turn == 0 and "the model refused" in f.message


@pytest.mark.parametrize("family", list(_FILTERED))
def test_filtered_answer_echoed_and_the_loop_went_on(family: str) -> None:
    s = Script(family)
    s.user("Write the story.")
    s.reply("Once upon a", finish=_FILTERED[family])
    s.reply("The end.")
    f = one(s.analyse(), "C.refusal_treated_as_answer")
    assert f.related_turn == 0 and "content filter" in f.message


@pytest.mark.parametrize("family", list(_REFUSED))
def test_refusal_then_a_person_rephrases_is_clean(family: str) -> None:
    s = Script(family)
    s.user("Delete every file on the server.")
    s.reply("Sorry" if family == "anthropic" else None, **_REFUSED[family])
    s.user("Then list the files instead.")
    s.reply("Here they are.")
    assert not found(s.analyse(), "C.refusal_treated_as_answer")


@pytest.mark.parametrize("family", list(_FILTERED))
def test_filtered_answer_dropped_and_asked_again_is_clean(family: str) -> None:
    s = Script(family)
    s.user("Write the story.")
    s.reply("Once upon a", finish=_FILTERED[family], echo=False)
    s.user("Write a gentler story.")
    s.reply("The end.")
    assert not found(s.analyse(), "C.refusal_treated_as_answer")


def test_the_tool_fingerprint_covers_every_field_of_a_tool() -> None:
    """C.cache_prefix_broken fingerprints each ToolSpec field by field: a new field must join it."""
    from looptap.cassettes.models import ToolSpec

    assert set(ToolSpec.model_fields) == {"name", "description", "parameters", "kind"}


def test_history_mutated_names_the_responses_input_item_that_changed() -> None:
    """Issue 45: on Responses one normalised message spans several ``input`` items (the calls of
    one answer, each result), so message 2 is not ``input[2]``. The client edits the second
    call's result two turns later; the finding names that item, ``input[4]``. Was: ``input[2]``,
    an unchanged function_call."""
    s = Script("openai_responses")
    s.user("Weather in Paris and in Rome?")
    paris, rome = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})
    s.reply(calls=[paris, rome])
    s.results("18 °C, sunny", "24 °C, clear")
    s.reply("Paris is 18 °C and sunny; Rome 24 °C and clear.")
    assert [i.get("type", "message") for i in s.history] == [
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    s.user("And which is warmer?")
    s.reply("Rome.")
    s.history[4] = {**s.history[4], "output": "31 °C, heatwave"}
    s.user("Thanks.")
    s.reply("You're welcome.")
    run = s.analyse()
    f = one(run, "C.history_mutated")
    assert (f.seq, f.path) == (3, "input[4]") and "input[4]" in f.message, f.message
    # The clean twin: the same run without the edit.
    s.exchanges[3] = edit_request(
        s.exchanges[3],
        lambda b: b["input"].__setitem__(4, {**b["input"][4], "output": "24 °C, clear"}),
    )
    assert not found(s.analyse(), "C.history_mutated")
