"""E layer: the emission view and its findings, on multi-turn scenarios in every family's wire
format."""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import FAMILIES, REQUIRED, STREAM_FAMILIES, UNIT, WEATHER, Call, Script, Tool

from looptap.cassettes.analysis import Finding, RunAnalysis, Severity, canonical_call, schema_errors

# Families whose wire carries arguments as a JSON *string* in a non-streamed body.
STRING_ARGS = ("openai_chat", "openai_responses")


def found(run: RunAnalysis, code: str) -> list[Finding]:
    """The findings of ``code`` in recording order (the run lists them root causes first)."""
    return sorted((f for f in run.findings if f.code == code), key=lambda f: f.seq or 0)


def one(run: RunAnalysis, code: str) -> Finding:
    got = found(run, code)
    assert len(got) == 1, [(f.code, f.seq, f.message) for f in run.findings]
    return got[0]


def weather_then_answer(family: str, call: Call, *, stream: bool = False, **kw: Any) -> Script:
    """user → model calls a tool → results → model answers (the call under test is on seq 0)."""
    s = Script(family, tools=[WEATHER, UNIT])
    s.user("What's the weather in Paris?")
    s.reply("Checking.", calls=[call], stream=stream, **kw)
    s.results("sunny, 21C")
    s.reply("It is sunny in Paris.", stream=stream)
    return s


# --- the view ---------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_view_lists_text_calls_and_offered(family: str) -> None:
    s = weather_then_answer(family, Call("get_weather", {"city": "Paris", "unit": "c"}))
    run = s.analyse()
    e0, e1 = run.turns[0].e, run.turns[1].e
    assert e0.text == "Checking."
    assert [
        (c.name, c.arguments, c.offered, c.schema_errors, c.parse_error) for c in e0.tool_calls
    ] == [("get_weather", {"city": "Paris", "unit": "c"}, True, [], None)]
    assert e1.text == "It is sunny in Paris." and e1.tool_calls == [] and not e1.empty
    assert not [f for f in run.findings if f.layer == "E"]


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "gemini", "ollama"])
def test_view_reasoning(family: str) -> None:
    s = Script(family)
    s.user("hi")
    s.reply("Hello!", reasoning="The user greets me.")
    assert s.analyse().turns[0].e.reasoning == "The user greets me."


def test_offered_is_none_without_tools() -> None:
    s = Script("openai_chat", tools=())
    s.user("hi")
    s.reply("Hello")
    assert s.analyse().turns[0].e.tool_calls == []


# --- E.arguments_not_json -------------------------------------------------------------------------


@pytest.mark.parametrize("family", STRING_ARGS)
@pytest.mark.parametrize("stream", [False, True])
def test_arguments_not_json(family: str, stream: bool) -> None:
    bad = Call("get_weather", raw='{"city": "Paris", "unit": c}')
    run = weather_then_answer(family, bad, stream=stream).analyse()
    f = one(run, "E.arguments_not_json")
    assert (f.seq, f.turn, f.layer, f.severity) == (0, 0, "E", Severity.ERROR)
    assert (
        bad.id is not None
        and f.tool_call_id == bad.id
        and "`get_weather`" in f.message
        and bad.id in f.message
    )
    assert run.turns[0].e.tool_calls[0].parse_error


def test_arguments_not_json_anthropic_stream() -> None:
    # Anthropic carries an object; invalid JSON can only arrive through streamed partial_json.
    bad = Call("get_weather", raw='{"city": "Par')
    run = weather_then_answer("anthropic", bad, stream=True).analyse()
    f = one(run, "E.arguments_not_json")
    assert f.seq == 0 and f.severity is Severity.ERROR


@pytest.mark.parametrize("family", [*STRING_ARGS, "anthropic"])
def test_arguments_not_json_clean(family: str) -> None:
    run = weather_then_answer(
        family, Call("get_weather", {"city": "Paris"}), stream=family == "anthropic"
    ).analyse()
    assert not found(run, "E.arguments_not_json")


@pytest.mark.parametrize("family", STRING_ARGS)
def test_cut_arguments_are_attributed_to_truncation(family: str) -> None:
    finish = "length" if family == "openai_chat" else "incomplete:max_output_tokens"
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", raw='{"city": "Pa')], finish=finish, max_tokens=12)
    run = s.analyse()
    e = one(run, "E.arguments_not_json")
    a = one(run, "A.truncated_length")
    assert e.severity is Severity.INFO and e.details["caused_by"] == "A.truncated_length"
    assert a.severity is Severity.ERROR and a.seq == e.seq == 0
    assert "12" in a.message and "`get_weather`" in a.message


# --- E.arguments_schema ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ({"unit": "c"}, "missing required property 'city'"),
        ({"city": 42}, "$.city: 42 is not of type \"string\""),
        ({"city": "Paris", "unit": "kelvin"}, "$.unit: \"kelvin\" is not one of"),
    ],
)
def test_arguments_schema(family: str, args: dict[str, object], expect: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather?")
    s.reply(calls=[Call("get_weather", {"city": "Rome"})])
    s.results("rainy")
    s.reply(calls=[Call("get_weather", args)])  # the bad call is on turn 1
    s.results("error: invalid arguments")
    s.reply("Sorry, I could not get the weather.")
    run = s.analyse()
    f = one(run, "E.arguments_schema")
    assert (f.seq, f.layer, f.severity) == (1, "E", Severity.WARNING)
    assert expect in f.message, f.message
    assert f.path is not None and f.path.startswith("tool_calls[0].arguments")
    assert run.turns[1].e.tool_calls[0].schema_errors


def test_schema_path_points_into_nested_arguments() -> None:
    tool = Tool(
        "book",
        {
            "type": "object",
            "properties": {"trip": {"type": "object", "properties": {"days": {"type": "integer"}}}},
        },
    )
    s = Script("openai_chat", tools=[tool])
    s.user("book")
    s.reply(calls=[Call("book", {"trip": {"days": "three"}})])
    f = one(s.analyse(), "E.arguments_schema")
    assert f.path == "tool_calls[0].arguments.trip.days"
    assert "$.trip.days" in f.message


def test_gemini_upper_case_schema_is_normalised() -> None:
    # The scenario sends Gemini's OpenAPI subset: "type": "OBJECT" / "STRING".
    s = Script("gemini", tools=[WEATHER])
    s.user("Weather?")
    s.reply(calls=[Call("get_weather", {"city": 7})])
    f = one(s.analyse(), "E.arguments_schema")
    assert "is not of type \"string\"" in f.message


def test_extra_properties_only_is_info() -> None:
    s = Script("anthropic", tools=[WEATHER])
    s.user("Weather?")
    s.reply(calls=[Call("get_weather", {"city": "Paris", "country": "FR"})])
    f = one(s.analyse(), "E.arguments_schema")
    assert f.severity is Severity.INFO and "'country' was unexpected" in f.message


def test_broken_schema_is_not_checked() -> None:
    broken = Tool(
        "get_weather",
        {"type": "object", "properties": {"city": {"type": "strung"}}, "required": "city"},
    )
    s = Script("openai_chat", tools=[broken])
    s.user("Weather?")
    s.reply(calls=[Call("get_weather", {"city": 1})])
    run = s.analyse()
    assert not found(run, "E.arguments_schema") and not run.errors
    assert run.turns[0].e.tool_calls[0].schema_errors == []


def test_schema_errors_helper() -> None:
    assert schema_errors({"city": "x"}, WEATHER.parameters) == []
    assert schema_errors(
        {},
        {
            "type": "OBJECT",
            "properties": {"a": {"type": "STRING", "nullable": True}},
            "required": ["a"],
        },
    ) == ["$: missing required property 'a'"]
    assert (
        schema_errors(
            {"a": None},
            {"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": True}}},
        )
        == []
    )
    assert schema_errors({"a": 1}, {"$ref": "https://example.invalid/schema.json"}) == []
    assert schema_errors({"a": 1}, None) == []


# --- E.tool_not_offered ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_tool_not_offered(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris, in Fahrenheit?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("21C")
    s.reply(calls=[Call("convert", {"value": 21})])  # convert was not offered
    s.results("error: unknown tool convert")
    s.reply("It is 70F.")
    run = s.analyse()
    f = one(run, "E.tool_not_offered")
    assert (f.seq, f.turn, f.severity) == (1, 1, Severity.ERROR)
    assert "`convert`" in f.message and "`get_weather`" in f.message
    assert run.turns[1].e.tool_calls[0].offered is False
    assert run.turns[0].e.tool_calls[0].offered is True


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "gemini"])
def test_call_without_any_tools_offered(family: str) -> None:
    s = Script(family, tools=())
    s.user("Weather?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    f = one(s.analyse(), "E.tool_not_offered")
    assert "offered no tools" in f.message and f.seq == 0


def test_tool_loaded_in_history_counts_as_offered() -> None:
    # Responses tool search: a tool delivered by an `additional_tools` item in the input.
    s = Script("openai_responses", tools=[UNIT])
    s.user("Weather?")
    s.history.append(
        {
            "type": "additional_tools",
            "role": "developer",
            "tools": [
                {"type": "function", "name": "get_weather", "parameters": WEATHER.parameters}
            ],
        }
    )
    s.reply(calls=[Call("get_weather", {"city": 3})])
    run = s.analyse()
    assert not found(run, "E.tool_not_offered")
    assert run.turns[0].e.tool_calls[0].offered is True
    assert found(run, "E.arguments_schema")  # validated against the loaded schema


# --- E.repeated_call ------------------------------------------------------------------------------


def _loop(family: str, times: int, results: list[str] | None = None) -> RunAnalysis:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    outs = results or ["error: upstream timeout"] * times
    for i in range(times):
        s.reply(
            calls=[
                Call(
                    "get_weather",
                    {"unit": "c", "city": "Paris"} if i % 2 else {"city": "Paris", "unit": "c"},
                )
            ]
        )
        s.results(outs[i])
    s.reply("I could not get the weather.")
    return s.analyse()


@pytest.mark.parametrize("family", FAMILIES)
def test_repeated_call_loop(family: str) -> None:
    run = _loop(family, 4)
    got = found(run, "E.repeated_call")
    assert [(f.seq, f.severity, f.details["times"]) for f in got] == [
        (1, Severity.INFO, 2),
        (2, Severity.WARNING, 3),
        (3, Severity.WARNING, 4),
    ]
    assert got[1].details["turns"] == [0, 1, 2] and got[1].related_turn == 1
    assert "3rd time" in got[1].message and "turns 0, 1" in got[1].message


@pytest.mark.parametrize("family", ["openai_chat", "gemini"])
def test_repeated_call_with_varying_results_is_not_a_loop(family: str) -> None:
    run = _loop(family, 3, ["12:00", "12:01", "12:02"])
    got = found(run, "E.repeated_call")
    assert [f.severity for f in got] == [Severity.INFO, Severity.INFO]
    assert got[-1].details["results_differ"] is True


@pytest.mark.parametrize("family", FAMILIES)
def test_different_arguments_are_no_repeat(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris, Rome, Oslo?")
    for city in ("Paris", "Rome", "Oslo"):
        s.reply(calls=[Call("get_weather", {"city": city})])
        s.results("sunny")
    s.reply("Sunny everywhere.")
    assert not found(s.analyse(), "E.repeated_call")


def _never_run(family: str, times: int) -> RunAnalysis:
    """The client echoes each call and sends no result (it never ran it); the model calls again.
    Wires that do not pair by id (Gemini, Ollama) take such a request; the model retries."""
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    for _ in range(times):
        s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.reply("I could not get the weather.")
    return s.analyse()


@pytest.mark.parametrize("family", ["gemini", "ollama"])
def test_repeating_calls_the_client_never_ran_folds_under_the_dropped_result(family: str) -> None:
    """Issue 45. Was: E.repeated_call a warning of its own from the 3rd time, beside the client's
    C.dropped_tool_result errors that explain it."""
    run = _never_run(family, 3)
    got = found(run, "E.repeated_call")
    assert [(f.seq, f.severity, f.details.get("caused_by")) for f in got] == [
        (1, Severity.INFO, "C.dropped_tool_result"),
        (2, Severity.INFO, "C.dropped_tool_result"),
    ]
    serious = [(f.code, f.seq) for f in run.findings if f.severity is not Severity.INFO]
    assert serious == [
        ("C.dropped_tool_result", 1),
        ("C.dropped_tool_result", 2),
        ("C.dropped_tool_result", 3),
    ], serious


@pytest.mark.parametrize("family", ["gemini", "ollama"])
def test_repeating_calls_the_client_ran_is_still_a_loop(family: str) -> None:
    """Twin: the client ran each call and got the same result: the model is looping."""
    got = found(_loop(family, 3), "E.repeated_call")
    assert [(f.severity, f.details.get("caused_by")) for f in got] == [
        (Severity.INFO, None),
        (Severity.WARNING, None),
    ]


def _tasks(family: str, asks: int, loop_in_last: bool = False) -> RunAnalysis:
    """One chat, ``asks`` separate user tasks that each ask the weather in Paris: each a call,
    its result, a final answer. ``loop_in_last``: the last task calls it three times."""
    s = Script(family, tools=[WEATHER])
    for n in range(asks):
        s.user(
            "What's the weather in Paris right now?"
            if n == 0
            else "And now? Check the weather in Paris again."
        )
        for _ in range(3 if loop_in_last and n == asks - 1 else 1):
            s.reply(calls=[Call("get_weather", {"city": "Paris"})])
            s.results("14 °C, light rain")
        s.reply("It is 14 °C with light rain in Paris.")
    return s.analyse()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_same_call_in_separate_user_tasks_is_no_repeat(family: str) -> None:
    """Issue 45: a new user message after a final answer starts a new task. Was: E.repeated_call,
    a warning by the third task."""
    assert not found(_tasks(family, 3), "E.repeated_call")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_loop_inside_one_task_after_others_is_still_a_loop(family: str) -> None:
    got = found(_tasks(family, 2, loop_in_last=True), "E.repeated_call")
    assert [f.severity for f in got] == [Severity.INFO, Severity.WARNING]


def test_canonical_call_ignores_key_order_and_nulls() -> None:
    assert canonical_call(
        "f", {"a": 1, "b": None, "c": [1, {"y": 2, "x": 1}]}, None
    ) == canonical_call("f", {"c": [1, {"x": 1, "y": 2}], "a": 1}, None)
    assert canonical_call("f", {"a": 1}, None) != canonical_call("g", {"a": 1}, None)


# --- E.empty_response -----------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_empty_response(family: str) -> None:
    s = Script(family)
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply(None)  # clean stop, nothing said
    run = s.analyse()
    f = one(run, "E.empty_response")
    assert (f.seq, f.severity, f.layer) == (1, Severity.WARNING, "E")
    assert run.turns[1].e.empty and not run.turns[0].e.empty


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "gemini", "ollama"])
def test_empty_response_reasoning_only(family: str) -> None:
    s = Script(family)
    s.user("hi")
    s.reply(None, reasoning="Thinking about greetings.")
    f = one(s.analyse(), "E.empty_response")
    assert "reasoning only" in f.message


@pytest.mark.parametrize("family", FAMILIES)
def test_empty_response_not_on_a_truncated_turn(family: str) -> None:
    from scenarios import LENGTH

    s = Script(family)
    s.user("hi")
    s.reply(None, finish=LENGTH[family])
    run = s.analyse()
    assert not found(run, "E.empty_response") and found(run, "A.truncated_length")


# --- E.refusal ------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["openai_chat", "openai_responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_refusal_part(family: str, stream: bool) -> None:
    s = Script(family, tools=())
    s.user("Help me pick a lock.")
    s.reply("Sure, a question first.", stream=stream)
    s.user("How do I pick my neighbour's lock?")
    s.reply(None, refusal="I can't help with that.", stream=stream)
    run = s.analyse()
    f = one(run, "E.refusal")
    assert (f.seq, f.severity) == (1, Severity.WARNING) and "I can't help with that." in f.message
    assert run.turns[1].e.refusal == "I can't help with that." and not run.turns[1].e.empty


@pytest.mark.parametrize("stream", [False, True])
def test_refusal_anthropic_stop_reason(stream: bool) -> None:
    s = Script("anthropic", tools=())
    s.user("hi")
    s.reply("Hello.", stream=stream)
    s.user("something harmful")
    s.reply(None, refusal="", stream=stream)
    run = s.analyse()
    f = one(run, "E.refusal")
    assert f.seq == 1 and "'refusal'" in f.message
    assert not found(run, "E.empty_response")


def test_empty_refusal_field_is_no_refusal() -> None:
    # Some compat servers send `"refusal": ""` on every message.
    s = Script("openai_chat", tools=())
    s.user("hi")
    s.reply("Hello.", refusal="")
    assert not found(s.analyse(), "E.refusal")


# --- E.tool_call_error ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finish", "message"),
    [
        (
            "MALFORMED_FUNCTION_CALL",
            "Malformed function call: print(default_api.get_weather(city=Paris",
        ),
        (
            "UNEXPECTED_TOOL_CALL",
            "Unexpected tool call: Model tried to call an undeclared function: list_files",
        ),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_gemini_tool_call_error(finish: str, message: str, stream: bool) -> None:
    s = Script("gemini", tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], stream=stream)
    s.results("sunny")
    calls = [Call("list_files", {})] if finish == "UNEXPECTED_TOOL_CALL" else []
    s.reply(None, calls=calls, finish=finish, finish_message=message, stream=stream)
    run = s.analyse()
    f = one(run, "E.tool_call_error")
    assert (f.seq, f.severity, f.layer) == (1, Severity.ERROR, "E")
    assert finish in f.message and message.split(":")[0] in f.message
    assert not found(run, "E.tool_not_offered")  # one finding, not two
    assert not found(run, "E.empty_response")


def test_bedrock_malformed_tool_use() -> None:
    s = Script("bedrock")
    s.user("Weather?")
    s.reply(None, finish="malformed_tool_use")
    f = one(s.analyse(), "E.tool_call_error")
    assert "malformed_tool_use" in f.message


# --- E.tool_choice_violated -----------------------------------------------------------------------


@pytest.mark.parametrize("family", sorted(REQUIRED))
def test_tool_choice_required_ignored(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply("It is probably sunny.", tool_choice=REQUIRED[family])
    run = s.analyse()
    f = one(run, "E.tool_choice_violated")
    assert f.seq == 0 and f.severity is Severity.WARNING and "required" in f.message


@pytest.mark.parametrize("family", sorted(REQUIRED))
def test_tool_choice_required_honoured(family: str) -> None:
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], tool_choice=REQUIRED[family])
    assert not found(s.analyse(), "E.tool_choice_violated")


def test_tool_choice_forced_other_tool() -> None:
    s = Script("anthropic", tools=[WEATHER, UNIT])
    s.user("Convert 21C")
    s.reply(
        calls=[Call("get_weather", {"city": "Paris"})],
        tool_choice={"type": "tool", "name": "convert"},
    )
    f = one(s.analyse(), "E.tool_choice_violated")
    assert "`convert`" in f.message and "`get_weather`" in f.message


def test_tool_choice_none_but_called() -> None:
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Weather?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], tool_choice="none")
    assert "forbade" in one(s.analyse(), "E.tool_choice_violated").message


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_streamed_and_plain_agree(family: str) -> None:
    runs = [
        weather_then_answer(family, Call("get_weather", {"city": 5}), stream=st).analyse()
        for st in (False, True)
    ]
    assert (
        [f.code for f in runs[0].findings if f.layer == "E"]
        == [f.code for f in runs[1].findings if f.layer == "E"]
        == ["E.arguments_schema"]
    )
