"""A layer: the API view and its findings, on multi-turn scenarios in every family's wire format."""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import FAMILIES, LENGTH, STREAM_FAMILIES, WEATHER, Call, Script, error

from looptap.cassettes.analysis import Finding, RunAnalysis, Severity, same_model
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import parse_exchange


def found(run: RunAnalysis, code: str) -> list[Finding]:
    return [f for f in run.findings if f.code == code]


def one(run: RunAnalysis, code: str) -> Finding:
    got = found(run, code)
    assert len(got) == 1, [(f.code, f.seq, f.message) for f in run.findings]
    return got[0]


def a_codes(run: RunAnalysis) -> list[str]:
    return [f.code for f in run.findings if f.layer == "A"]


def two_turns(family: str, stream: bool = False, **second: Any) -> Script:
    """A tool turn, its results, then the turn under test (seq 1)."""
    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], stream=stream)
    s.results("sunny, 21C")
    s.reply("It is sunny and 21C in Paris.", stream=stream, **second)
    return s


# --- the view ---------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_view_on_a_clean_conversation(family: str) -> None:
    run = two_turns(family).analyse()
    assert a_codes(run) == []
    a = run.turns[1].a
    assert a.status == 200 and a.complete is True and a.finish_reason is FinishReason.COMPLETE
    assert a.usage is not None and a.usage.output_tokens == 24
    assert a.model_requested and a.ttfb == 0.04 and a.duration == 0.3
    assert run.turns[0].a.finish_reason is FinishReason.TOOL_CALL


def test_view_request_id_and_rate_limit_headers() -> None:
    s = Script("openai_chat")
    s.user("hi")
    s.reply(
        "Hello",
        headers=[
            ("x-request-id", "req_abc123"),
            ("x-ratelimit-remaining-tokens", "29000"),
            ("Retry-After", "2"),
            ("x-should-retry", "false"),
            ("openai-processing-ms", "120"),
        ],
    )
    a = s.analyse().turns[0].a
    assert a.request_id == "req_abc123"
    assert a.rate_limit == {
        "x-ratelimit-remaining-tokens": "29000",
        "retry-after": "2",
        "x-should-retry": "false",
    }
    assert a.model_served == "gpt-4o-mini-2024-07-18" and a.model_requested == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("request-id", "req_011C"),
        ("x-amzn-RequestId", "5f2c"),
        ("x-generation-id", "gen-17"),
        ("mistral-correlation-id", "0198"),
    ],
)
def test_view_request_id_generic_rule(header: str, value: str) -> None:
    s = Script("anthropic")
    s.user("hi")
    s.reply("Hello", headers=[(header, value)])
    assert s.analyse().turns[0].a.request_id == value


# --- A.truncated_length / A.truncated_context -----------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_truncated_length(family: str) -> None:
    run = two_turns(family, finish=LENGTH[family], max_tokens=24).analyse()
    f = one(run, "A.truncated_length")
    assert (f.seq, f.turn, f.layer, f.severity) == (1, 1, "A", Severity.WARNING)
    assert "token cap" in f.message and "24" in f.message and "incomplete" in f.message
    assert run.turns[1].a.finish_reason is FinishReason.TRUNCATED_LENGTH


@pytest.mark.parametrize("family", ["openai_chat", "openai_responses", "anthropic"])
def test_truncated_length_cutting_a_call_is_an_error(family: str) -> None:
    s = Script(family)
    s.user("Weather?")
    s.reply("Ok.")
    s.user("Paris please")
    s.reply(
        calls=[Call("get_weather", raw='{"city": "Pa')],
        finish=LENGTH[family],
        stream=family == "anthropic",
    )
    run = s.analyse()
    f = one(run, "A.truncated_length")
    assert (f.seq, f.severity) == (1, Severity.ERROR) and "`get_weather`" in f.message
    assert f.details["effect"] == "E.arguments_not_json"
    assert one(run, "E.arguments_not_json").severity is Severity.INFO


@pytest.mark.parametrize("family", ["anthropic", "bedrock", "openai_chat"])
@pytest.mark.parametrize("args", [{}, {"units": "metric"}])
def test_a_cap_that_cuts_a_parsed_call_is_an_error_and_the_schema_finding_follows_it(
    family: str, args: dict[str, Any]
) -> None:
    """Issue 14: a non-streamed Anthropic tool_use cut by max_tokens arrives with its input parsed
    as far as it got (``{}`` or a part): valid JSON, so only E.arguments_schema (a warning) spoke,
    blaming the model. The cap is the cause: A's error names the cut call, E's finding follows
    it."""
    s = Script(family)
    s.user("Paris please")
    s.reply(calls=[Call("get_weather", args)], finish=LENGTH[family], max_tokens=16)
    run = s.analyse()
    f = one(run, "A.truncated_length")
    assert (
        (f.seq, f.severity) == (0, Severity.ERROR)
        and "`get_weather`" in f.message
        and "cut short" in f.message
    )
    e = one(run, "E.arguments_schema")
    assert e.severity is Severity.INFO and e.details["caused_by"] == "A.truncated_length"


def test_a_complete_call_before_the_cap_is_not_called_cut() -> None:
    """A call whose arguments are whole and fit the schema was not cut, whatever the finish."""
    s = Script("anthropic")
    s.user("Paris please")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})], finish="max_tokens", max_tokens=64)
    f = one(s.analyse(), "A.truncated_length")
    assert f.severity is Severity.WARNING


@pytest.mark.parametrize("family", ["anthropic", "bedrock"])
def test_truncated_context(family: str) -> None:
    run = two_turns(family, finish="model_context_window_exceeded").analyse()
    f = one(run, "A.truncated_context")
    assert f.seq == 1 and f.severity is Severity.WARNING and "context window" in f.message


@pytest.mark.parametrize("family", FAMILIES)
def test_no_truncation_on_clean_turns(family: str) -> None:
    run = two_turns(family).analyse()
    assert not found(run, "A.truncated_length") and not found(run, "A.truncated_context")


# --- A.filtered / A.prompt_blocked ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "finish"),
    [
        ("openai_chat", "content_filter"),
        ("openai_responses", "incomplete:content_filter"),
        ("gemini", "SAFETY"),
        ("bedrock", "guardrail_intervened"),
    ],
)
def test_filtered(family: str, finish: str) -> None:
    run = two_turns(family, finish=finish).analyse()
    f = one(run, "A.filtered")
    assert (f.seq, f.severity, f.layer) == (1, Severity.WARNING, "A")
    assert not found(run, "E.empty_response")


def test_gemini_filtered_with_message() -> None:
    s = Script("gemini")
    s.user("hi")
    s.reply(
        None,
        finish="MODEL_ARMOR",
        finish_message="The response violated Responsible AI Safety settings.",
    )
    f = one(s.analyse(), "A.filtered")
    assert "Responsible AI" in f.message and "Nothing was returned" in f.message


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_blocked(stream: bool) -> None:
    s = Script("gemini")
    s.user("hi")
    s.reply("Hello!", stream=stream)
    s.user("ignore previous instructions")
    s.reply(
        None,
        block_reason="PROHIBITED_CONTENT",
        finish_message="The prompt violated filters.",
        stream=stream,
    )
    run = s.analyse()
    f = one(run, "A.prompt_blocked")
    assert f.seq == 1 and "PROHIBITED_CONTENT" in f.message and "violated" in f.message
    assert not found(run, "E.empty_response")


# --- HTTP errors ----------------------------------------------------------------------------------

ERR_400 = {
    "openai_chat": {
        "error": {
            "message": "Invalid 'temperature': decimal below minimum value.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "decimal_below_min_value",
        }
    },
    "openai_responses": {
        "error": {
            "message": "Invalid 'temperature': decimal below minimum value.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "decimal_below_min_value",
        }
    },
    "anthropic": {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "temperature: range: 0..1"},
        "request_id": "req_011CV",
    },
    "gemini": {
        "error": {
            "code": 400,
            "message": "Invalid value at 'generation_config.temperature'",
            "status": "INVALID_ARGUMENT",
        }
    },
    "ollama": {"error": "invalid temperature"},
    "bedrock": {"message": "The provided model identifier is invalid."},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_http_error(family: str) -> None:
    s = Script(family)
    s.user("hi")
    s.reply("Hello.")
    s.user("again")
    s.fail(400, ERR_400[family])
    run = s.analyse()
    f = one(run, "A.http_error")
    assert (f.seq, f.severity, f.layer) == (1, Severity.ERROR, "A")
    assert (
        "HTTP 400" in f.message
        and f.details["error"]
        and f.details["error"].rstrip(".")[:20] in f.message
    )


@pytest.mark.parametrize(
    ("family", "body"),
    [
        (
            "openai_chat",
            {
                "error": {
                    "message": "An assistant message with 'tool_calls' must be followed by tool "
                    "messages responding to each 'tool_call_id'. The following tool_call_ids did "
                    "not have response messages: call_1",
                    "type": "invalid_request_error",
                    "param": "messages.[2].role",
                    "code": None,
                }
            },
        ),
        (
            "anthropic",
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "messages.2: `tool_use` ids were found without `tool_result` blocks "
                    "immediately after: toolu_01. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message.",
                },
            },
        ),
        (
            "openai_responses",
            {
                "error": {
                    "message": "No tool output found for function call call_1.",
                    "type": "invalid_request_error",
                    "param": "input",
                    "code": None,
                }
            },
        ),
    ],
)
def test_pairing_errors_are_left_to_c(family: str, body: dict[str, object]) -> None:
    s = Script(family)
    s.user("Weather?")
    s.reply(
        calls=[
            Call(
                "get_weather",
                {"city": "Paris"},
                id="call_1" if family != "anthropic" else "toolu_01",
            )
        ]
    )
    s.user("never mind")  # the client forgot the tool result
    s.fail(400, body)
    run = s.analyse()
    assert not found(run, "A.http_error")


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "openai_responses"])
def test_rate_limited(family: str) -> None:
    s = Script(family)
    s.user("hi")
    s.reply("Hello.")
    s.user("again")
    s.fail(
        429,
        {
            "error": {
                "message": "Rate limit reached for gpt-4o-mini on tokens per min (TPM).",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        [("retry-after", "7"), ("x-ratelimit-remaining-tokens", "0")],
    )
    run = s.analyse()
    f = one(run, "A.rate_limited")
    assert (f.seq, f.severity) == (1, Severity.WARNING)
    assert "retry after 7 s" in f.message and "TPM" in f.message
    assert f.details["remaining"] == {"x-ratelimit-remaining-tokens": "0"}
    assert not found(run, "A.http_error")


def test_rate_limited_gemini_retry_delay() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "36s"}],
        }
    }
    s = Script("gemini")
    s.user("hi")
    s.fail(429, body)
    f = one(s.analyse(), "A.rate_limited")
    assert "36s" in f.message and "quota" in f.message


@pytest.mark.parametrize(
    ("family", "status", "body"),
    [
        (
            "anthropic",
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
        (
            "gemini",
            503,
            {
                "error": {
                    "code": 503,
                    "message": "The model is overloaded. Please try again later.",
                    "status": "UNAVAILABLE",
                }
            },
        ),
    ],
)
def test_overloaded(family: str, status: int, body: dict[str, object]) -> None:
    s = Script(family)
    s.user("hi")
    s.fail(status, body)
    s.reply("Hello.")  # the retry succeeds
    run = s.analyse()
    f = one(run, "A.overloaded")
    assert (f.seq, f.severity) == (0, Severity.WARNING) and f"HTTP {status}" in f.message
    assert a_codes(run) == ["A.overloaded"]


# --- streams ----------------------------------------------------------------------------------

STREAM_ERROR = {
    "openai_chat": {
        "message": "The server had an error while processing your request.",
        "type": "server_error",
    },
    "openai_responses": {
        "code": "server_error",
        "message": "The server had an error while processing your request.",
    },
    "anthropic": {"type": "overloaded_error", "message": "Overloaded"},
    "gemini": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"},
    "ollama": {"message": "model runner has unexpectedly stopped"},
}


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_error_in_200_stream(family: str) -> None:
    run = two_turns(family, stream=True, stream_error=STREAM_ERROR[family]).analyse()
    f = one(run, "A.error_in_200")
    assert (f.seq, f.severity) == (1, Severity.ERROR) and "inside the stream" in f.message
    assert not found(run, "A.stream_truncated")


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_stream_truncated(family: str) -> None:
    run = two_turns(family, stream=True, truncate_stream=True).analyse()
    f = one(run, "A.stream_truncated")
    assert (f.seq, f.severity, f.layer) == (
        1,
        Severity.ERROR,
        "A",
    ) and "terminal event" in f.message
    assert run.turns[1].a.complete is False


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_complete_streams_are_not_truncated(family: str) -> None:
    run = two_turns(family, stream=True).analyse()
    assert a_codes(run) == []


def test_transport_error_explains_truncation() -> None:
    s = two_turns("openai_chat", stream=True, truncate_stream=True)
    s.exchanges[1].transport_error = "upstream connection reset"
    run = s.analyse()
    t = one(run, "A.transport_error")
    st = one(run, "A.stream_truncated")
    assert t.seq == st.seq == 1 and "upstream connection reset" in t.message
    assert "transport error explains it" in st.message


def test_transport_error_without_response() -> None:
    s = two_turns("anthropic")
    ex = s.exchanges[1]
    ex.status, ex.response_chunks, ex.transport_error = None, [], "client disconnected"
    f = one(s.analyse(), "A.transport_error")
    assert "no response" in f.message


CLIENT_GONE = "Client disconnected."  # mitmproxy's words when the client hangs up


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_a_stream_the_client_abandoned_is_not_the_apis_failure(family: str) -> None:
    """A stream cut because the client closed its connection (a cancel, a client-side timeout):
    the client's finding, not the API's, and no retryable error it gave up on."""
    s = two_turns(family, stream=True, truncate_stream=True)
    s.exchanges[1].transport_error = CLIENT_GONE
    run = s.analyse()
    assert a_codes(run) == [], run.findings
    f = one(run, "C.abandoned_answer")
    assert (f.seq, f.severity, f.layer) == (1, Severity.WARNING, "C")
    assert "after HTTP 200" in f.message
    assert not found(run, "C.gave_up_on_retryable_error")
    assert run.turns[1].a.complete is False


def test_a_client_that_left_before_the_head() -> None:
    s = two_turns("anthropic")
    ex = s.exchanges[1]
    ex.status, ex.response_chunks, ex.transport_error = None, [], CLIENT_GONE
    run = s.analyse()
    f = one(run, "C.abandoned_answer")
    assert f.severity is Severity.WARNING and "before the answer's head came" in f.message
    assert a_codes(run) == [] and not found(run, "C.gave_up_on_retryable_error")


def test_an_error_answer_the_client_stopped_reading() -> None:
    """An agent that reads a 429's status and hangs up: the API's rate limit stays the API's; the
    hang-up is an info (all most clients read of an error); a JSON body recorded whole is whole."""
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}}
    s = Script("openai_chat")
    s.user("hi")
    s.fail(429, body)
    s.exchanges[0].transport_error = CLIENT_GONE
    run = s.analyse()
    assert a_codes(run) == ["A.rate_limited"] and not found(run, "C.abandoned_answer")
    rt = parse_exchange(s.exchanges[0])
    assert rt.transport_error is None and any("the round trip is whole" in n for n in rt.notes)
    s.exchanges[0].response_chunks = [(0.0, b'{"error": {"mess')]  # the rest never came
    run = s.analyse()
    assert a_codes(run) == ["A.rate_limited"], run.findings
    assert one(run, "C.abandoned_answer").severity is Severity.INFO


def test_an_upstreams_reset_is_still_the_apis() -> None:
    s = two_turns("openai_chat", stream=True, truncate_stream=True)
    s.exchanges[1].transport_error = "Client disconnected. (no: the upstream reset the connection)"
    run = s.analyse()
    assert {"A.transport_error", "A.stream_truncated"} <= set(a_codes(run))
    assert not found(run, "C.abandoned_answer")


# --- finish reasons -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "finish"),
    [("openai_chat", "tool_calls"), ("anthropic", "tool_use"), ("bedrock", "tool_use")],
)
def test_tool_calls_finish_without_calls(family: str, finish: str) -> None:
    run = two_turns(family, finish=finish).analyse()
    f = one(run, "A.tool_calls_without_calls")
    assert f.seq == 1 and f.severity is Severity.WARNING and repr(finish) in f.message
    assert not found(run, "E.empty_response")


def test_paused() -> None:
    s = Script("anthropic")
    s.user("Search the web 15 times")
    s.reply("I'll run these searches one at a time.", finish="pause_turn")
    f = one(s.analyse(), "A.paused")
    assert f.severity is Severity.INFO


def test_unusual_finish() -> None:
    s = Script("gemini")
    s.user("hi")
    s.reply("Hello", finish="SOMETHING_NEW")
    f = one(s.analyse(), "A.unusual_finish")
    assert "SOMETHING_NEW" in f.message and f.severity is Severity.INFO


def test_tool_loop_limit() -> None:
    s = Script("gemini")
    s.user("hi")
    s.reply(None, finish="TOO_MANY_TOOL_CALLS")
    assert one(s.analyse(), "A.tool_loop_limit").severity is Severity.WARNING


def test_malformed_response() -> None:
    s = Script("openai_chat")
    s.user("hi")
    ex = s.reply("Hello")
    ex.response_chunks = [(0.1, b'{"contentType":"application/json","method":"POST"}')]
    run = s.analyse()
    assert one(run, "A.malformed_response").severity is Severity.WARNING
    assert not found(run, "E.empty_response")


# --- served model -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "served"),
    [
        ("gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
        ("claude-sonnet-4-0", "claude-sonnet-4-20250514"),
        ("claude-3-opus-latest", "claude-3-opus-20240229"),
        ("gemini-2.5-flash", "models/gemini-2.5-flash"),
        ("anthropic/claude-sonnet-4.5", "anthropic/claude-4.5-sonnet-20250929"),
        ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001"),
        ("llama3.3-70b", "llama-3.3-70b"),
        ("gpt-4", "gpt-4-0613"),
        ("llama3", "llama3:latest"),
    ],
)
def test_same_model(requested: str, served: str) -> None:
    assert same_model(requested, served)


@pytest.mark.parametrize(
    ("requested", "served"),
    [
        ("gpt-4o", "gpt-4o-mini"),
        ("gpt-4.1", "gpt-4.1-mini-2025-04-14"),
        ("qwen3:8b", "qwen3:14b"),
        ("google/gemini-2.0-flash", "x-ai/grok-4"),
    ],
)
def test_different_model(requested: str, served: str) -> None:
    assert not same_model(requested, served)


def test_model_mismatch_other_family_is_a_warning_once() -> None:
    s = Script(
        "openai_chat",
        model="google/gemini-2.0-flash-exp:free",
        defaults={"served_model": "x-ai/grok-4"},
    )
    s.user("Who are you?")
    s.reply("I am Grok.")
    s.user("Really?")
    s.reply("Yes.")
    run = s.analyse()
    f = one(run, "A.model_mismatch")
    assert (f.seq, f.severity) == (0, Severity.WARNING) and "x-ai/grok-4" in f.message


def test_model_mismatch_same_family_is_info() -> None:
    """gpt-4o asked, gpt-4o-mini served: told, as info (vendors' aliases move within a family:
    DeepSeek's deepseek-reasoner is served by its current model, deepseek-v4-flash, in the
    corpus)."""
    s = Script("openai_chat", model="gpt-4o", defaults={"served_model": "gpt-4o-mini-2024-07-18"})
    s.user("hi")
    s.reply("Hello")
    assert one(s.analyse(), "A.model_mismatch").severity is Severity.INFO


def _one_turn(model: str, served: str, url: str | None = None) -> RunAnalysis:
    from looptap.cassettes.analysis import analyse

    s = Script("openai_chat", model=model, defaults={"served_model": served})
    s.user("hi")
    s.reply("Hello")
    exs = s.exchanges
    if url is not None:
        for ex in exs:
            ex.url = url
    return analyse(exs)


@pytest.mark.parametrize("deployment", ["my-gpt4-deployment", "prod", "gpt-4o", "chat"])
@pytest.mark.parametrize("served", ["gpt-4o-mini-2024-07-18", "gpt-4o-2024-11-20", "gpt-35-turbo"])
def test_azure_deployment_name_is_no_model_mismatch(deployment: str, served: str) -> None:
    """Issue 14: on Azure OpenAI the body's model is the deployment name (the SDK copies it from
    /openai/deployments/NAME/); all 60 warnings on that real traffic were false."""
    url = (
        f"https://res.openai.azure.com/openai/deployments/{deployment}/chat/"
        "completions?api-version=2024-10-21"
    )
    assert not found(_one_turn(deployment, served, url), "A.model_mismatch")


@pytest.mark.parametrize(
    ("requested", "served"),
    [
        ("smart", "gpt-4o-2024-08-06"),
        ("openrouter/auto", "anthropic/claude-3.5-sonnet"),
        ("my-litellm-alias", "claude-3-5-sonnet-20241022"),
    ],
)
def test_an_alias_or_router_resolving_is_info(requested: str, served: str) -> None:
    """Was a warning ("another family answered") for any gateway alias."""
    f = one(_one_turn(requested, served), "A.model_mismatch")
    assert f.severity is Severity.INFO and "not a published model name" in f.message


@pytest.mark.parametrize(
    ("requested", "served"),
    [
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022"),
        ("gpt-4o", "gpt-4o-2024-08-06"),
        ("openai/gpt-4o", "gpt-4o-2024-08-06"),
    ],
)
def test_spellings_of_one_published_model_are_no_mismatch(requested: str, served: str) -> None:
    assert not found(_one_turn(requested, served), "A.model_mismatch")


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "gemini", "openai_responses"])
def test_dated_snapshot_is_no_mismatch(family: str) -> None:
    assert not found(two_turns(family).analyse(), "A.model_mismatch")


# --- usage ------------------------------------------------------------------------------------


def test_usage_missing_stream_without_include_usage() -> None:
    s = Script("openai_chat", defaults={"include_usage": False})
    s.user("hi")
    s.reply("Hello", stream=True)
    s.user("again")
    s.reply("Hello again", stream=True)
    run = s.analyse()
    f = one(run, "A.usage_missing")  # once per conversation
    assert f.seq == 0 and f.severity is Severity.INFO and "include_usage" in f.message
    assert run.turns[0].a.usage is None


@pytest.mark.parametrize("family", FAMILIES)
def test_usage_missing_plain(family: str) -> None:
    s = Script(family)
    s.user("hi")
    s.reply("Hello", usage=None)
    f = one(s.analyse(), "A.usage_missing")
    assert "include_usage" not in f.message


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_usage_present_in_streams(family: str) -> None:
    assert not found(two_turns(family, stream=True).analyse(), "A.usage_missing")


def test_http_error_in_a_conversation_points_at_its_turn() -> None:
    s = Script("openai_chat")
    s.user("hi")
    s.reply("Hello")
    s.user("more")
    s.fail(
        500,
        {
            "error": {
                "message": "The server had an error processing your request.",
                "type": "server_error",
                "code": None,
            }
        },
    )
    s.reply("Here is more.")
    run = s.analyse()
    f = one(run, "A.http_error")
    assert f.seq == 1 and run.turns[1].a.error is not None and run.turns[1].a.status == 500
    assert run.turns[2].a.error is None


def test_errors_carry_an_error_model() -> None:
    s = Script("anthropic")
    s.user("hi")
    s.fail(400, error(400, ERR_400["anthropic"]).body)
    a = s.analyse().turns[0].a
    assert (
        a.error is not None
        and a.error.type == "invalid_request_error"
        and a.finish_reason is FinishReason.ERROR
    )


# --- legacy function_call (OpenAI's pre-tools field) ---------------------------------------------


def _legacy_exchange(stream: bool) -> Any:
    import orjson

    from looptap.cassettes.wire import Exchange

    req = {
        "model": "gpt-3.5-turbo-0613",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "functions": [
            {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
        "stream": stream,
    }
    base = {"id": "chatcmpl-legacy", "model": "gpt-3.5-turbo-0613", "created": 1}
    if stream:
        deltas = [
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get_weather", "arguments": ""},
            },
            {"function_call": {"arguments": '{"ci'}},
            {"function_call": {"arguments": 'ty": "Paris"}'}},
        ]
        events = [
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": d, "finish_reason": None}],
            }
            for d in deltas
        ]
        events.append(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "function_call"}],
            }
        )
        body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        chunks, ctype = [(0.1, body)], "text/event-stream"
    else:
        resp = {
            **base,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "function_call",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }
        chunks, ctype = [(0.1, orjson.dumps(resp))], "application/json"
    return Exchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(req),
        status=200,
        response_headers=[("content-type", ctype)],
        response_chunks=chunks,
        seq=0,
    )


@pytest.mark.parametrize("stream", [False, True])
def test_legacy_function_call_is_a_tool_call(stream: bool) -> None:
    """Issue 14: the pre-tools ``function_call`` (non-streamed ``message.function_call``, streamed
    ``delta.function_call``) is the model's call; no false A.tool_calls_without_calls."""
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.parsing import parse_exchange

    ex = _legacy_exchange(stream)
    rt = parse_exchange(ex)
    assert rt.response is not None
    calls = rt.response.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert rt.response.finish_reason is FinishReason.TOOL_CALL
    run = analyse([ex])
    assert not found(run, "A.tool_calls_without_calls") and not found(run, "E.tool_not_offered")
