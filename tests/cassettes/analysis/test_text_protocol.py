"""Clients that keep their tool loop in text: ReAct agents (llama-index's ReActAgent, LangChain's
text agents) and transcript agents (smolagents) are judged on what the API sees, not on whether
they use the API's tool calls (issue 27 item 7; the client matrix's llama-index and smolagents
rows).

* a ReAct answer (Thought / Action / Action Input) is echoed re-rendered: the Action Input as a
  Python repr instead of JSON, or with the observation written into the echo in place of one the
  model made up. Same words: echoed. Other words: not echoed;
* an ``Action:`` answer is a step of the client's loop, not a final answer;
* smolagents echoes the model's tool calls as text ("Calling tools: [...]") and sends results as
  "Observation:" user text: no call is pending for the API, so no dropped result and no
  result-as-text error, one info saying what the client does.
"""

from __future__ import annotations

import pytest
from scenarios import WEATHER, Call, Script, Tool, assistant_of, user_of

from looptap.cassettes.analysis import RunAnalysis, Severity

REACT_FAMILIES = ("openai_chat", "anthropic", "gemini", "openai_responses")


def codes(run: RunAnalysis, at_least: Severity = Severity.INFO) -> list[str]:
    order = [Severity.INFO, Severity.WARNING, Severity.ERROR]
    return [f.code for f in run.findings if order.index(f.severity) >= order.index(at_least)]


def _react(
    family: str,
    echo: str,
    answer: str = "Thought: I need the weather.\nAction: get_weather\nAction "
    'Input: {"city": "Paris"}',
    then_user: str | None = "Observation: WEATHER: Paris is sunny",
) -> RunAnalysis:
    s = Script(family)
    s.user("What is the weather in Paris?")
    s.reply(answer, echo=False)
    s.history.extend(assistant_of(family, echo))
    if then_user is not None:
        s.history.append(user_of(family, then_user))
    s.reply("Thought: I can answer.\nAnswer: sunny.")
    return s.analyse()


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_react_action_input_rerendered_is_echoed(family: str) -> None:
    run = _react(
        family, "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Paris'}"
    )
    assert "C.assistant_not_echoed" not in codes(run), run.findings
    assert run.turns[1].c.echoed_assistant is True


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_react_echo_with_other_words_is_not_echoed(family: str) -> None:
    run = _react(
        family, "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Lyon'}"
    )
    assert codes(run, Severity.WARNING) == ["C.assistant_not_echoed"], run.findings


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_react_observation_written_into_the_echo(family: str) -> None:
    """The client cut the observation the model made up and wrote the real one into the echo,
    adding no message of its own: neither a changed echo nor a loop going on after a final
    answer."""
    answer = (
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": '
        '"Paris"}\nObservation: it is snowing'
    )
    echo = (
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": '
        '"Paris"}\nObservation: WEATHER: Paris is sunny'
    )
    run = _react(family, echo, answer=answer, then_user=None)
    assert codes(run, Severity.WARNING) == [], run.findings


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_final_answer_then_a_call_without_new_input_still_warns(family: str) -> None:
    """The clean twin's counterpart: a real final answer, echoed, and the model called again with
    nothing new is still C.continued_after_final_answer."""
    s = Script(family)
    s.user("What is the weather in Paris?")
    s.reply("Thought: I can answer.\nAnswer: sunny.")
    s.reply("Sunny, as I said.")
    assert "C.continued_after_final_answer" in codes(s.analyse(), Severity.WARNING)


def _smolagents(echo_city: str) -> RunAnalysis:
    final = Tool(
        "final_answer",
        {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    )
    s = Script("openai_chat", tools=[WEATHER, final])
    s.user("New task:\nWhat is the weather in Paris and Tokyo?")
    paris, tokyo = (
        Call("get_weather", {"city": "Paris"}),
        Call("get_weather", {"city": echo_city if echo_city == "Tokyo" else "Tokyo"}),
    )
    s.reply(calls=[paris, tokyo], echo=False)
    rendered = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": {"city": city}}}
        for c, city in ((paris, "Paris"), (tokyo, echo_city))
    ]
    s.history.append(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Calling tools:\n{rendered!r}"}],
        }
    )
    s.history.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Observation:\nWEATHER: Paris is sunny\nWEATHER: Tokyo is rainy",
                }
            ],
        }
    )
    s.reply(calls=[Call("final_answer", {"answer": "sunny and rainy"})])
    return s.analyse()


def test_smolagents_calls_as_text_leave_nothing_pending() -> None:
    run = _smolagents("Tokyo")
    assert codes(run, Severity.WARNING) == [], run.findings
    assert "C.tool_calls_as_text" in codes(run)


def test_calls_echoed_as_text_with_other_arguments_are_not_echoed() -> None:
    """The twin: the text names a call the model never made (Osaka for Tokyo): the answer was not
    echoed, and its calls are unanswered."""
    run = _smolagents("Osaka")
    assert "C.assistant_not_echoed" in codes(run, Severity.WARNING), run.findings
    assert "C.tool_calls_as_text" not in codes(run)


# --- issue 45: echoes that differ only by a fence's language word, or sit after an inserted user
# message


_FENCED = (
    "Thought: I need the weather.\nAction: get_weather\nAction "
    'Input:\n```json\n{"city": "Paris"}\n```'
)


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_react_echo_without_the_fences_language_word_is_echoed(family: str) -> None:
    """The ReAct parser pulled the JSON out of the fence and wrote it back under a bare fence.
    Was: C.assistant_not_echoed."""
    run = _react(family, _FENCED.replace("```json", "```"), answer=_FENCED)
    assert codes(run, Severity.WARNING) == [], run.findings
    assert run.turns[1].c.echoed_assistant is True


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_react_fenced_echo_twins(family: str) -> None:
    """The clean twin (echoed as it came) stays clean; a real change inside the fence is still
    not an echo."""
    assert codes(_react(family, _FENCED, answer=_FENCED), Severity.WARNING) == []
    changed = _FENCED.replace("```json", "```").replace("Paris", "Lyon")
    assert codes(_react(family, changed, answer=_FENCED), Severity.WARNING) == [
        "C.assistant_not_echoed"
    ]


_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="  # noqa: E501
_IMAGE_USER = {
    "openai_chat": {
        "role": "user",
        "content": [
            {"type": "text", "text": "Image returned by get_weather:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_PNG}"}},
        ],
    },
    "anthropic": {
        "role": "user",
        "content": [
            {"type": "text", "text": "Image returned by get_weather:"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": _PNG},
            },
        ],
    },
    "gemini": {
        "role": "user",
        "parts": [
            {"text": "Image returned by get_weather:"},
            {"inlineData": {"mimeType": "image/png", "data": _PNG}},
        ],
    },
    "openai_responses": {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Image returned by get_weather:"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{_PNG}"},
        ],
    },
}
_ANSWER = "Here is the radar picture for Paris: light rain moving east."


def _inserted_image(family: str, echo: str | None) -> RunAnalysis:
    """A tool answered with an image; the framework sends it as a user message it puts before the
    model's answer, then the answer (``echo``; ``None``: dropped), then the next question."""
    s = Script(family)
    s.user("Show me the weather radar for Paris.")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("radar.png attached")
    s.reply(_ANSWER, echo=False)
    s.history.append(_IMAGE_USER[family])
    if echo is not None:
        s.history.extend(assistant_of(family, echo))
    s.history.append(user_of(family, "Will it reach Lyon?"))
    s.reply("Probably by the evening.")
    return s.analyse()


@pytest.mark.parametrize("family", list(_IMAGE_USER))
def test_answer_echoed_after_an_inserted_image_message_is_echoed(family: str) -> None:
    """Was: C.assistant_not_echoed (the echo was looked for at the image message)."""
    run = _inserted_image(family, _ANSWER)
    assert codes(run, Severity.WARNING) == [], run.findings
    assert run.turns[2].c.echoed_assistant is True


@pytest.mark.parametrize("family", list(_IMAGE_USER))
def test_inserted_image_message_does_not_hide_a_changed_or_dropped_answer(family: str) -> None:
    assert codes(
        _inserted_image(family, "Here is the radar picture for Lyon: sunny."), Severity.WARNING
    ) == ["C.assistant_not_echoed"]
    assert codes(_inserted_image(family, None), Severity.WARNING) == ["C.assistant_not_echoed"]


# --- issue 83 item 5c: a ReAct step re-rendered with the same words, whatever the format -------

#: (what the model wrote, what the client sent back): each client's parser read the step and
#: rendered it again, the same words in another form.
RE_RENDERED = {
    # LlamaIndex (0.14.25) ActionReasoningStep.get_content: JSON's escapes as the characters
    "escapes": (
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Z\\u00fcrich",'
        ' "note": "line\\none"}',
        "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Zürich', "
        "'note': 'line\\none'}",
    ),
    # the Action Input in a fenced block, re-rendered bare
    "fence": (
        'Thought: I need the weather.\nAction: get_weather\nAction Input: ```json\n{"city": '
        '"Paris"}\n```',
        "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Paris'}",
    ),
    # a sentence after the Action Input, which the parser does not read
    "trailing": (
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}\n\n'
        "I will wait for the observation before answering.",
        "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Paris'}",
    ),
    # a step without its "Thought:" label, the label added back
    "label": (
        'I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}',
        "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Paris'}",
    ),
    # LangChain (langchain-classic 1.0.8) format_log_to_str: a plain-text Action Input, the
    # observation and the next "Thought: " after it
    "scratchpad": (
        "I need the weather.\nAction: get_weather\nAction Input: Paris",
        "I need the weather.\nAction: get_weather\nAction Input: Paris\nObservation: WEATHER: "
        "Paris is sunny\nThought: ",
    ),
}


@pytest.mark.parametrize("family", REACT_FAMILIES)
@pytest.mark.parametrize("variant", sorted(RE_RENDERED))
def test_a_react_step_re_rendered_in_any_format_is_echoed(family: str, variant: str) -> None:
    """Was: C.assistant_not_echoed for escapes, fence, trailing (the label and scratchpad forms
    were read already: kept as they are)."""
    answer, echo = RE_RENDERED[variant]
    run = _react(family, echo, answer=answer)
    assert "C.assistant_not_echoed" not in codes(run), run.findings
    assert run.turns[1].c.echoed_assistant is True


@pytest.mark.parametrize("family", REACT_FAMILIES)
@pytest.mark.parametrize("variant", sorted(RE_RENDERED))
def test_twin_a_re_rendered_step_with_another_word_is_not_echoed(family: str, variant: str) -> None:
    answer, echo = RE_RENDERED[variant]
    changed = echo.replace("Paris", "Lyon").replace("Zürich", "Zurich")
    run = _react(family, changed, answer=answer)
    assert "C.assistant_not_echoed" in codes(run, Severity.WARNING), run.findings


@pytest.mark.parametrize("family", REACT_FAMILIES)
def test_a_step_re_rendered_into_the_next_user_message_is_echoed(family: str) -> None:
    """A client that sends the step back inside the next user message, the observation after it
    (a scratchpad kept in the prompt), instead of as the assistant's message. Was:
    C.assistant_not_echoed (only an assistant message could echo)."""
    answer = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Zürich"}'
    scratchpad = (
        "Thought: I need the weather.\nAction: get_weather\nAction Input: {'city': 'Zürich'}\n"
        "Observation: WEATHER: Zürich is sunny\nThought: "
    )
    s = Script(family)
    s.user("What is the weather in Zürich?")
    s.reply(answer, echo=False)
    s.history.append(user_of(family, scratchpad))
    s.reply("Thought: I can answer.\nAnswer: sunny.")
    run = s.analyse()
    assert "C.assistant_not_echoed" not in codes(run), run.findings
    # twins: a user message holding only part of the step, or another city, is no echo
    for other in ("Observation: WEATHER: Zürich is sunny", scratchpad.replace("Zürich", "Basel")):
        s = Script(family)
        s.user("What is the weather in Zürich?")
        s.reply(answer, echo=False)
        s.history.append(user_of(family, other))
        s.reply("Thought: I can answer.\nAnswer: sunny.")
        assert "C.assistant_not_echoed" in codes(s.analyse(), Severity.WARNING), other
