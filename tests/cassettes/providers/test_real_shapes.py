"""Issue 27 item 9: APIs seen in real recordings that were read wrongly or not at all.

Every fixture here is a real shape, with its source beside it: a recording from an official SDK's
own test suite (``recorded/``, trimmed, with the project's licence), an official SDK's response
types (validated against the installed SDK where it is a dependency: ``openai``), or the API
reference the SDK is generated from. Each test failed before the fix it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from test_more_families import BEDROCK, _chunk, rt, sse

from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.storage import load_vcr

STREAM = BEDROCK.replace("/invoke", "/invoke-with-response-stream")

# -- Bedrock InvokeModel ---------------------------------------------------------------------------
#
# InvokeModel API reference (Response Syntax, "using a guardrail"): with a guardrail applied the
# body — and each stream chunk — carries ``amazon-bedrock-guardrailAction`` ("INTERVENED" | "NONE")
# and, with tracing on, ``amazon-bedrock-trace: {"guardrail": {"input": {...}, "outputs": [...]}}``
# beside the model's own keys.


def test_nova_stream_whose_chunks_carry_the_guardrail_key_keeps_its_text() -> None:
    """Was: every chunk with the extra key dropped, the answer empty (a false E.empty_response)."""
    g = {"amazon-bedrock-guardrailAction": "NONE"}
    frames = [
        _chunk({"messageStart": {"role": "assistant"}, **g}),
        _chunk({"contentBlockDelta": {"delta": {"text": "Hel"}, "contentBlockIndex": 0}, **g}),
        _chunk({"contentBlockDelta": {"delta": {"text": "lo"}, "contentBlockIndex": 0}, **g}),
        _chunk({"contentBlockStop": {"contentBlockIndex": 0}, **g}),
        _chunk({"messageStop": {"stopReason": "end_turn"}, **g}),
        _chunk(
            {
                "metadata": {"usage": {"inputTokens": 3, "outputTokens": 2}},
                "amazon-bedrock-invocationMetrics": {"inputTokenCount": 3, "outputTokenCount": 2},
            }
        ),
    ]
    r = rt(
        STREAM.format("us.amazon.nova-lite-v1:0"),
        {
            "schemaVersion": "messages-v1",
            "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        },
        b"".join(frames),
    )
    assert r.response is not None and r.response.text == "Hello" and r.response.complete
    assert r.response.finish_reason is FinishReason.COMPLETE
    # Any key beside a known event (here one no API sends yet) never hides the event either.
    frames = [
        _chunk(
            {
                "contentBlockDelta": {"delta": {"text": "Hi"}, "contentBlockIndex": 0},
                "someFutureKey": 1,
            }
        ),
        _chunk({"messageStop": {"stopReason": "end_turn"}, "someFutureKey": 2}),
    ]
    r = rt(
        STREAM.format("amazon.nova-micro-v1:0"),
        {"schemaVersion": "messages-v1", "messages": []},
        b"".join(frames),
    )
    assert (
        r.response is not None
        and r.response.text == "Hi"
        and r.response.finish_reason is FinishReason.COMPLETE
    )


TITAN_TRACE = {
    "guardrail": {
        "input": {
            "gr1": {
                "topicPolicy": {
                    "topics": [{"name": "Finance", "type": "DENY", "action": "BLOCKED"}]
                }
            }
        }
    }
}


def test_titan_stream_blocked_by_a_guardrail_is_blocked_not_truncated() -> None:
    """Titan's stream chunk (``outputText``, ``index``, ``totalOutputTextTokenCount``,
    ``completionReason``, ``inputTextTokenCount``) when a guardrail blocked the input: the
    guardrail's message, no completion reason. Was: ``complete=False`` (a false
    A.stream_truncated)."""
    chunk = {
        "outputText": "Sorry, the model cannot answer this question.",
        "index": 0,
        "totalOutputTextTokenCount": None,
        "completionReason": None,
        "inputTextTokenCount": None,
        "amazon-bedrock-guardrailAction": "INTERVENED",
        "amazon-bedrock-trace": TITAN_TRACE,
        "amazon-bedrock-invocationMetrics": {"inputTokenCount": 12, "outputTokenCount": 0},
    }
    r = rt(
        STREAM.format("amazon.titan-text-express-v1"),
        {"inputText": "Which stock should I buy?"},
        _chunk(chunk),
    )
    assert r.response is not None and r.response.complete is True
    assert r.response.finish_reason is FinishReason.PROMPT_BLOCKED
    assert (
        r.response.provider_details is not None
        and r.response.provider_details["guardrailAction"] == "INTERVENED"
    )
    # Output blocked (no input in the trace): filtered. A non-streamed body the same.
    body = {
        "inputTextTokenCount": 5,
        "results": [{"tokenCount": 9, "outputText": "Sorry.", "completionReason": "FINISH"}],
        "amazon-bedrock-guardrailAction": "INTERVENED",
    }
    r = rt(BEDROCK.format("amazon.titan-text-express-v1"), {"inputText": "x"}, body)
    assert (
        r.response is not None
        and r.response.finish_reason is FinishReason.FILTERED
        and r.response.text == "Sorry."
    )


def test_titan_stream_with_guardrail_none_is_unchanged() -> None:
    """Clean twin: the action ``NONE`` changes nothing."""
    frames = [
        _chunk(
            {
                "outputText": "Par",
                "index": 0,
                "totalOutputTextTokenCount": 1,
                "completionReason": None,
                "inputTextTokenCount": 4,
                "amazon-bedrock-guardrailAction": "NONE",
            }
        ),
        _chunk(
            {
                "outputText": "is",
                "index": 0,
                "totalOutputTextTokenCount": 2,
                "completionReason": "FINISH",
                "inputTextTokenCount": None,
                "amazon-bedrock-guardrailAction": "NONE",
            }
        ),
    ]
    r = rt(STREAM.format("amazon.titan-text-express-v1"), {"inputText": "x"}, b"".join(frames))
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.COMPLETE
        and r.response.complete
    )


# A custom-imported model (Bedrock Custom Model Import) answers InvokeModel with the OpenAI
# Completions body its serving container makes: ``choices[i].text``, ``finish_reason`` (vLLM adds
# ``stop_reason``), ``usage``. Validated against the openai SDK's ``Completion`` below.
IMPORTED = {
    "id": "cmpl-5f2b",
    "object": "text_completion",
    "created": 1736935200,
    "model": "imported-model",
    "choices": [
        {
            "index": 0,
            "text": " Paris is the capital.",
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
        }
    ],
    "usage": {"prompt_tokens": 7, "total_tokens": 12, "completion_tokens": 5},
}


def test_custom_imported_model_completion_body_keeps_its_text() -> None:
    from openai.types import Completion

    Completion.model_validate(IMPORTED)
    url = BEDROCK.format("arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aimported-model%2Fabc123")
    r = rt(url, {"prompt": "Capital of France?", "max_tokens": 5}, IMPORTED)
    assert r.response is not None and r.response.text == " Paris is the capital."
    assert r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (7, 5)
    first = {
        **IMPORTED,
        "choices": [
            {
                "index": 0,
                "text": " Par",
                "logprobs": None,
                "finish_reason": None,
                "stop_reason": None,
            }
        ],
        "usage": None,
    }
    last = {
        **IMPORTED,
        "choices": [
            {
                "index": 0,
                "text": "is.",
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
    }
    r = rt(
        url.replace("/invoke", "/invoke-with-response-stream"),
        {"prompt": "x"},
        _chunk(first) + _chunk(last),
    )
    assert (
        r.response is not None
        and r.response.text == " Paris."
        and r.response.finish_reason is FinishReason.COMPLETE
        and r.response.complete
    )


# -- Writer ----------------------------------------------------------------------------------------
#
# writer-sdk-python 3.0.0 (``src/writerai/types``; resources/chat.py posts /v1/chat,
# resources/completions.py /v1/completions with ``stream_cls=Stream[CompletionChunk]``):
# ``Completion {choices: [{text, log_probs}], model}``, ``CompletionChunk {value: str}``,
# ``ChatCompletion`` / ``ChatCompletionChunk`` as OpenAI's, finish in
# stop/length/content_filter/tool_calls.

WRITER = "https://api.writer.com/v1/{}"


def test_writer_completions_stream_has_no_done_and_is_not_truncated() -> None:
    """Was: read as OpenAI Completions, the missing ``[DONE]`` a false A.stream_truncated."""
    events = sse({"value": "Paris"}, {"value": " is the"}, {"value": " capital."})
    r = rt(
        WRITER.format("completions"),
        {"model": "palmyra-x-003-instruct", "prompt": "Capital of France?", "stream": True},
        b"",
        chunks=events,
    )
    assert (
        r.family == "writer"
        and r.request is not None
        and r.request.model == "palmyra-x-003-instruct"
    )
    assert r.response is not None and r.response.text == "Paris is the capital."
    # the API has no end event: not truncated
    assert r.response.complete is None and r.response.error is None
    # Off Writer's host (a gateway): the {"value"} stream still is not a truncated OpenAI one.
    r = rt(
        "https://gateway.example.com/writer/v1/completions",
        {"model": "palmyra-x-003-instruct", "prompt": "x", "stream": True},
        b"",
        chunks=events,
    )
    assert (
        r.response is not None
        and r.response.text == "Paris is the capital."
        and r.response.complete is not False
    )


def test_writer_completions_and_chat_bodies() -> None:
    body = {"choices": [{"text": "Paris.", "log_probs": None}], "model": "palmyra-x-003-instruct"}
    r = rt(
        WRITER.format("completions"),
        {"model": "palmyra-x-003-instruct", "prompt": "Capital of France?"},
        body,
    )
    assert (
        r.family == "writer"
        and r.response is not None
        and r.response.text == "Paris."
        and r.response.complete
    )
    assert r.response.finish_reason is None  # Writer reports none: unknown, not "other"
    chat = {
        "id": "c0b8a5f1",
        "object": "chat.completion",
        "created": 1736935200,
        "model": "palmyra-x-004",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "index": 0,
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }
    req = {
        "model": "palmyra-x-004",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
    }
    r = rt(WRITER.format("chat"), req, chat)
    assert (
        r.family == "writer"
        and r.request is not None
        and [m.role for m in r.request.messages] == ["user"]
    )
    assert (
        r.response is not None
        and r.response.tool_calls[0].name == "get_weather"
        and r.response.finish_reason is FinishReason.TOOL_CALL
    )
    assert r.response.usage is not None and r.response.usage.input_tokens == 40
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1736935200,
        "model": "palmyra-x-004",
        "choices": [
            {"index": 0, "delta": {"content": "Hi", "role": "assistant"}, "finish_reason": None}
        ],
    }
    last = {
        **chunk,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
    r = rt(WRITER.format("chat"), {**req, "stream": True}, b"", chunks=sse(chunk, last, done=True))
    assert (
        r.response is not None
        and r.response.text == "Hi"
        and r.response.complete
        and r.response.finish_reason is FinishReason.COMPLETE
    )


def test_openai_completions_stream_without_done_is_still_truncated() -> None:
    """Clean twin: a real OpenAI Completions stream that lost its ``[DONE]`` stays truncated."""
    chunk = {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "gpt-3.5-turbo-instruct",
        "choices": [{"text": "Par", "index": 0, "logprobs": None, "finish_reason": None}],
    }
    r = rt(
        "https://api.openai.com/v1/completions",
        {"model": "gpt-3.5-turbo-instruct", "prompt": "x", "stream": True},
        b"",
        chunks=sse(chunk),
    )
    assert (
        r.family == "openai_completions" and r.response is not None and r.response.complete is False
    )


# -- Cohere /v1/generate ---------------------------------------------------------------------------
#
# cohere-python (Fern-generated from Cohere's API definition): ``Generation {id, prompt,
# generations: [SingleGeneration {id, text, index, likelihood}], meta: ApiMeta}``; the stream's
# ``GenerateStreamText {text, index, is_finished: false, event_type: "text-generation"}`` and
# ``GenerateStreamEnd {is_finished: true, event_type: "stream-end", finish_reason, response:
# {id, prompt, generations: [SingleGenerationInStream {id, text, index, finish_reason}]}}``.

COHERE_META = {
    "api_version": {"version": "1"},
    "billed_units": {"input_tokens": 5, "output_tokens": 7},
}


def test_cohere_generate_body_and_stream() -> None:
    body = {
        "id": "8f2c",
        "generations": [
            {"id": "g1", "text": " Paris is the capital of France.", "finish_reason": "COMPLETE"}
        ],
        "prompt": "Capital of France?",
        "meta": COHERE_META,
    }
    r = rt(
        "https://api.cohere.com/v1/generate",
        {"model": "command", "prompt": "Capital of France?", "max_tokens": 20},
        body,
    )
    assert (
        (r.family, r.operation) == ("cohere", "generate")
        and r.request is not None
        and r.request.model == "command"
    )
    assert (
        r.response is not None
        and r.response.text == " Paris is the capital of France."
        and r.response.finish_reason is FinishReason.COMPLETE
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (5, 7)
    lines = [
        {"text": " Par", "is_finished": False, "event_type": "text-generation"},
        {"text": "is.", "is_finished": False, "event_type": "text-generation"},
        {
            "is_finished": True,
            "event_type": "stream-end",
            "finish_reason": "MAX_TOKENS",
            "response": {
                "id": "8f2c",
                "prompt": "x",
                "generations": [
                    {"id": "g1", "text": " Paris.", "index": 0, "finish_reason": "MAX_TOKENS"}
                ],
            },
        },
    ]

    ndjson = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    r = rt(
        "https://api.cohere.com/v1/generate",
        {"model": "command", "prompt": "x", "stream": True},
        ndjson,
        headers=[("content-type", "application/stream+json")],
    )
    assert (
        r.response is not None
        and r.response.text == " Paris."
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
        and r.response.complete
    )


# -- recordings from official SDKs' test suites (recorded/README.md) ------------------------------

RECORDED = Path(__file__).parent / "recorded"


def _recorded(name: str) -> list[RoundTrip]:
    out = [parse_exchange(ex) for ex in load_vcr(RECORDED / name)]
    assert all(r.analysis_errors == [] for r in out), [r.analysis_errors for r in out]
    return out


def test_aleph_alpha_complete_recorded() -> None:
    """Was: ``/v1/complete`` read as Anthropic's legacy Text Completions (no text, no usage)."""
    (r,) = _recorded("aleph-alpha-client/test_complete.yaml")
    assert (
        (r.family, r.operation) == ("aleph_alpha", "generate")
        and r.request is not None
        and r.request.model == "luminous-base"
    )
    assert r.request.messages[0].parts[0].text == "Hello, World!"
    assert (
        r.response is not None
        and r.response.text == "\n\nI’m a writer"
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (4, 7)
    (r,) = _recorded("aleph-alpha-client/test_can_use_streaming_support_with_async_client.yaml")
    assert (
        r.family == "aleph_alpha"
        and r.stream
        and r.response is not None
        and r.response.complete is True
    )
    assert (
        r.response.text == " The New York Times, May 15"
        and r.response.finish_reason_raw == "maximum_tokens"
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (1, 7)


def test_aleph_alpha_stream_cut_before_its_summary_is_truncated() -> None:
    events = sse({"type": "stream_chunk", "index": 0, "completion": " The"})
    r = rt(
        "https://api.aleph-alpha.com/complete",
        {"model": "luminous-base", "prompt": "x", "maximum_tokens": 7, "stream": True},
        b"",
        chunks=events,
    )
    assert r.family == "aleph_alpha" and r.response is not None and r.response.complete is False


def test_anthropic_legacy_complete_stays_anthropic() -> None:
    """Clean twin: the same path with Anthropic's body is still Anthropic's."""
    r = rt(
        "https://api.anthropic.com/v1/complete",
        {"model": "claude-2.1", "prompt": "\n\nHuman: hi\n\nAssistant:", "max_tokens_to_sample": 5},
        {
            "type": "completion",
            "completion": " Hi",
            "stop_reason": "stop_sequence",
            "model": "claude-2.1",
        },
    )
    assert r.family == "anthropic_complete"


def test_replicate_predictions_recorded() -> None:
    """Was: unread (``unknown``). A language model's output pieces are its text; an unfinished
    prediction is not finished (no finish, not truncated); a poll is a retrieve; an image model's
    output is media, no text."""
    (r,) = _recorded("replicate-python/models_predictions_create_blocking.yaml")
    assert (r.family, r.operation) == ("replicate", "generate") and r.request is not None
    assert (
        r.request.model == "meta/meta-llama-3-8b-instruct"
        and r.request.messages[0].parts[0].text == "Please write a haiku about llamas"
    )
    assert (
        r.response is not None
        and r.response.text
        == "\n\nFuzzy, gentle beasts\nSoftly grazing, quiet eyes\nLlama's gentle charm"
    )
    # "processing": the output so far
    assert r.response.finish_reason is None and r.response.complete is None
    (r,) = _recorded("replicate-python/models_predictions_create.yaml")
    assert (
        r.response is not None
        and r.response.text == ""
        and r.response.complete is None
        and r.response.finish_reason_raw == "starting"
    )
    create, poll = _recorded("replicate-python/run_poll_image.yaml")
    assert (create.operation, poll.operation) == ("generate", "retrieve")
    assert (
        poll.response is not None
        and poll.response.finish_reason is FinishReason.COMPLETE
        and poll.response.text == ""
    )
    assert [p.kind for p in poll.response.parts] == ["media"]
    (r,) = _recorded("replicate-python/run_invalid_token.yaml")
    assert (
        r.family == "replicate"
        and r.response is not None
        and r.response.error is not None
        and r.response.error.message == "You did not pass a valid authentication token"
    )


def test_replicate_succeeded_language_model_has_text_and_usage() -> None:
    # The recorded blocking create above, as its later poll reports it (Prediction: status
    # succeeded, metrics with the language model's token counts).
    out = ["\n\n", "Fuzzy", ", gentle", " beasts"]
    body = {
        "id": "jp9n",
        "model": "meta/meta-llama-3-8b-instruct",
        "version": "dp-a557",
        "input": {"prompt": "x"},
        "logs": "",
        "output": out,
        "error": None,
        "status": "succeeded",
        "metrics": {"predict_time": 0.5, "input_token_count": 12, "output_token_count": 4},
        "urls": {},
    }
    r = rt("https://api.replicate.com/v1/predictions/jp9n", {}, body)
    assert (
        r.response is not None
        and r.response.text == "\n\nFuzzy, gentle beasts"
        and r.response.finish_reason is FinishReason.COMPLETE
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (12, 4)


def _background_response(
    status: str, output: list[dict[str, Any]], rid: str = "resp_bg1"
) -> dict[str, Any]:
    from openai.types.responses import Response

    body = {
        "id": rid,
        "object": "response",
        "created_at": 1736935200,
        "status": status,
        "background": True,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "minimal", "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": None,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            }
        ],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "metadata": {},
    }
    Response.model_validate(body)
    return body


def test_responses_background_retrieve_that_returns_calls_is_read() -> None:
    """Issue 45: a background response is fetched by
    ``GET /responses/{id}``; the retrieve that returns its function call is where the client got
    it. Was: the output answered no call (C.orphan_tool_result)."""
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.wire import Exchange

    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    call = {
        "id": "fc_bg1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_bg1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    answer = {
        "id": "msg_bg2",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "18 °C and clear.", "annotations": []}],
    }

    def ex(method: str, url: str, req: Any, resp: Any) -> Exchange:
        return Exchange(
            method,
            url,
            request_body=orjson.dumps(req) if req is not None else b"",
            status=200,
            response_headers=[("content-type", "application/json")],
            response_chunks=[(0.2, orjson.dumps(resp))],
        )

    def run(output_for: str, polls: int = 1) -> Any:
        exs = [
            ex(
                "POST",
                "https://api.openai.com/v1/responses",
                {
                    "model": "gpt-5-mini",
                    "input": "Weather in Paris?",
                    "tools": tools,
                    "background": True,
                },
                _background_response("queued", []),
            ),
            ex(
                "GET",
                "https://api.openai.com/v1/responses/resp_bg1",
                None,
                _background_response("in_progress", []),
            ),
            *[
                ex(
                    "GET",
                    "https://api.openai.com/v1/responses/resp_bg1",
                    None,
                    _background_response("completed", [call]),
                )
                for _ in range(polls)
            ],
            ex(
                "POST",
                "https://api.openai.com/v1/responses",
                {
                    "model": "gpt-5-mini",
                    "previous_response_id": "resp_bg1",
                    "tools": tools,
                    "input": [
                        {
                            "type": "function_call_output",
                            "call_id": output_for,
                            "output": "18 °C, clear",
                        }
                    ],
                },
                _background_response("completed", [answer], "resp_bg2"),
            ),
        ]
        for i, e in enumerate(exs):
            e.seq = i
        return analyse(exs)

    good = run("call_bg1")
    assert [(f.code, f.seq) for f in good.findings if f.severity in ("warning", "error")] == []
    assert sorted(good.turns) == [0, 2, 3] and [p.call_turn for p in good.turns[3].c.pairings] == [
        1
    ]
    # A client that retrieves the finished response again gets the same calls: one delivery, not
    # a second turn whose calls would look dropped.
    again = run("call_bg1", polls=2)
    assert [(f.code, f.seq) for f in again.findings if f.severity in ("warning", "error")] == []
    assert sorted(again.turns) == [0, 2, 4]
    # Twin: an output for a call never made is still an error (named for what it is: a wrong id).
    bad = run("call_zz")
    assert {f.code for f in bad.findings if f.severity == "error"} == {"C.wrong_tool_call_id"}


# -- A2A -------------------------------------------------------------------------------------------
#
# a2a-python (compat/v0_3/types.py: SendStreamingMessageRequest ``method: "message/stream"``,
# Message ``kind: "message"`` with TextPart ``kind: "text"``, Task ``kind: "task"``,
# TaskStatusUpdateEvent ``kind: "status-update"`` with ``final``, TaskArtifactUpdateEvent
# ``kind: "artifact-update"``).


def test_a2a_is_its_own_protocol_not_mcp() -> None:
    """Was: labelled ``mcp`` (and its calls offered to the MCP checks)."""
    from looptap.cassettes.parsing import side_call
    from looptap.cassettes.wire import Exchange

    req = {
        "jsonrpc": "2.0",
        "id": "1",
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "m1",
                "parts": [{"kind": "text", "text": "Plan a trip to Lisbon"}],
            }
        },
    }
    task = {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "submitted"},
        "history": [],
    }
    art = {
        "kind": "artifact-update",
        "taskId": "t1",
        "contextId": "c1",
        "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": "Day 1: Alfama."}]},
        "append": False,
        "lastChunk": True,
    }
    done = {
        "kind": "status-update",
        "taskId": "t1",
        "contextId": "c1",
        "status": {"state": "completed"},
        "final": True,
    }
    chunks = sse(*({"jsonrpc": "2.0", "id": "1", "result": x} for x in (task, art, done)))
    r = rt("http://localhost:9999/", req, b"", chunks=chunks)
    assert (r.family, r.operation) == ("a2a", "a2a message/stream") and r.response is None
    ex = Exchange(
        "POST",
        "http://localhost:9999/",
        request_body=orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(0.1, b"".join(chunks))],
    )
    side = side_call(ex, r)
    assert (
        side is not None and side["protocol"] == "a2a" and side["sent"] == "Plan a trip to Lisbon"
    )
    assert (side["state"], side["task_id"], side["reply"]) == ("completed", "t1", "Day 1: Alfama.")
    r = rt(
        "http://localhost:9999/",
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "t1"}},
        {"jsonrpc": "2.0", "id": 2, "result": {**task, "status": {"state": "completed"}}},
    )
    assert (r.family, r.operation) == ("a2a", "a2a tasks/get")
    r = rt(
        "http://localhost:9999/a2a",
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendMessage",
            "params": {
                "message": {"role": "ROLE_USER", "messageId": "m2", "parts": [{"text": "hi"}]}
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"message": {"role": "ROLE_AGENT", "parts": [{"text": "hello"}]}},
        },
    )
    assert r.family == "a2a"


def test_mcp_stays_mcp() -> None:
    """Clean twin: MCP's own methods are MCP's."""
    r = rt(
        "http://localhost:8000/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "f", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 1, "result": {"content": []}},
    )
    assert (r.family, r.operation) == ("mcp", "mcp tools/call")


# -- Vertex AI :predict embeddings -----------------------------------------------------------------
#
# google-cloud-aiplatform ``TextEmbeddingModel.get_embeddings``: POST
# ``…/publishers/google/models/{model}:predict`` with ``{"instances": [{"content", "task_type"}]}``;
# ``predictions[].embeddings.{values, statistics: {token_count, truncated}}``,
# ``metadata.billableCharacterCount``.


def test_vertex_predict_embeddings_are_labelled_embeddings() -> None:
    """Was: ``unknown``. An embedding carries no model text: operation ``embed``, usage only."""
    url = (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
        "publishers/google/models/text-embedding-005:predict"
    )
    body = {
        "predictions": [
            {
                "embeddings": {
                    "values": [0.1, -0.2, 0.3],
                    "statistics": {"token_count": 4, "truncated": False},
                }
            },
            {
                "embeddings": {
                    "values": [0.0, 0.1, 0.2],
                    "statistics": {"token_count": 3, "truncated": False},
                }
            },
        ],
        "metadata": {"billableCharacterCount": 30},
    }
    r = rt(
        url,
        {
            "instances": [
                {"content": "What is life?", "task_type": "RETRIEVAL_QUERY"},
                {"content": "A question."},
            ]
        },
        body,
    )
    assert (
        (r.family, r.operation) == ("embeddings", "embed")
        and r.request is not None
        and r.request.model == "text-embedding-005"
    )
    assert (
        r.response is not None
        and r.response.usage is not None
        and r.response.usage.input_tokens == 7
        and r.response.text == ""
    )
    assert r.response.provider_details is not None and r.response.provider_details["vectors"] == 2


def test_vertex_predict_of_other_models_is_not_claimed() -> None:
    """Clean twin: an image model's ``:predict`` (``instances: [{"prompt"}]``) is not an
    embedding."""
    url = (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
        "publishers/google/models/imagen-3.0-generate-002:predict"
    )
    r = rt(
        url,
        {"instances": [{"prompt": "a cat"}], "parameters": {"sampleCount": 1}},
        {"predictions": [{"bytesBase64Encoded": "AAAA", "mimeType": "image/png"}]},
    )
    assert r.family != "embeddings"


# -- watsonx text generation -----------------------------------------------------------------------
#
# ibm-watsonx-ai ``ModelInference.generate_text_stream``: POST ``/ml/v1/text/generation_stream``,
# SSE ``id: n`` / ``event: message`` / ``data: {"model_id", "model_version", "created_at",
# "results": [{"generated_text", "generated_token_count", "input_token_count", "stop_reason"}]}``
# (``not_finished`` until the last); IBM Generative AI serves the same bodies at
# ``/v2/text/generation_stream`` on its own host.


def _watsonx_events(*results: dict[str, Any]) -> list[bytes]:
    out = []
    for i, res in enumerate(results, 1):
        body = {
            "model_id": "ibm/granite-3-8b-instruct",
            "model_version": "1.1.0",
            "created_at": "2025-01-15T10:00:00.000Z",
            "results": [res],
        }
        out.append(b"id: %d\nevent: message\ndata: " % i + orjson.dumps(body) + b"\n\n")
    return out


def test_watsonx_generation_stream_and_its_other_routes() -> None:
    events = _watsonx_events(
        {
            "generated_text": "Par",
            "generated_token_count": 1,
            "input_token_count": 6,
            "stop_reason": "not_finished",
        },
        {
            "generated_text": "is.",
            "generated_token_count": 2,
            "input_token_count": 6,
            "stop_reason": "eos_token",
        },
    )
    req = {
        "input": "Capital of France?",
        "model_id": "ibm/granite-3-8b-instruct",
        "project_id": "p",
        "parameters": {"max_new_tokens": 20},
    }
    for url in (
        "https://us-south.ml.cloud.ibm.com/ml/v1/text/generation_stream?version=2023-05-29",
        "https://us-south.ml.cloud.ibm.com/ml/v1/deployments/dep1/text/"
        "generation_stream?version=2023-05-29",
        "https://bam-api.res.ibm.com/v2/text/generation_stream?version=2023-11-22",
    ):
        r = rt(url, req, b"", chunks=events)
        assert (r.family, r.operation) == ("watsonx", "generate"), url
        assert (
            r.response is not None
            and r.response.text == "Paris."
            and r.response.complete
            and r.response.finish_reason is FinishReason.COMPLETE
        )
        assert r.response.usage is not None and (
            r.response.usage.input_tokens,
            r.response.usage.output_tokens,
        ) == (6, 2)
    # Another service's /v2/text/... is not watsonx's.
    r = rt("https://example.com/v2/text/generation", {"input": "x"}, {"ok": True})
    assert r.family != "watsonx"


def _stream_read(
    events: bytes,
    url: str = "https://streaming-api.svc.rno2.c.replicate.net/v1/streams/"
    "b4yonjrmynb65tnkucuqc4duawdekslfzexk5itczufef2u36b7a",
) -> RoundTrip:
    """A prediction's ``urls.stream`` read as replicate-python's ``stream()`` reads it (GET,
    ``Accept: text/event-stream``), answered as Replicate's streaming API does."""
    from looptap.cassettes.wire import Exchange

    ex = Exchange(
        "GET",
        url,
        [("accept", "text/event-stream"), ("cache-control", "no-store")],
        b"",
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(0.05 * i, line + b"\n") for i, line in enumerate(events.split(b"\n"))],
    )
    return parse_exchange(ex)


def test_replicate_prediction_stream_is_read() -> None:
    """Was: the prediction was read, its stream URL's text was not (issue 45). ``output`` events
    joined (a multi-line piece as several ``data:`` lines), ``logs`` left out, ``done`` ends it."""
    body = (
        b"event: output\nid: 1728065253:0\ndata: \ndata: \n\n"
        b"event: output\nid: 1728065253:1\ndata: Fuzzy\n\n"
        b"event: logs\nid: 1728065253:2\ndata: generation took 0.4s\n\n"
        b"event: output\nid: 1728065253:3\ndata: , gentle beasts\n\n"
        b"event: done\nid: 1728065253:4\ndata: {}\n\n"
    )
    r = _stream_read(body)
    assert (r.family, r.operation) == ("replicate", "retrieve")
    assert (
        r.response is not None
        and r.response.text == "\nFuzzy, gentle beasts"
        and r.response.complete is True
    )
    assert r.response.finish_reason is FinishReason.COMPLETE
    r = _stream_read(
        body,
        "https://stream.replicate.com/v1/files/"
        "bcwr-3okdfv3o2wehstv5f2okyftwxy57hhypqsi6osiim5iigrzm4fpe",
    )
    assert (
        r.family == "replicate"
        and r.response is not None
        and r.response.text == "\nFuzzy, gentle beasts"
    )
    cut = _stream_read(body.split(b"event: done")[0])
    assert (
        cut.response is not None
        and cut.response.complete is False
        and cut.response.finish_reason is None
    )
    canceled = _stream_read(body.replace(b"data: {}", b'data: {"reason": "canceled"}'))
    assert (
        canceled.response is not None and canceled.response.finish_reason is FinishReason.CANCELLED
    )
    failed = _stream_read(
        b"event: output\nid: 1:0\ndata: Fu\n\nevent: error\nid: 1:1\ndata: CUDA out of "
        b'memory\n\nevent: done\nid: 1:2\ndata: {"reason": "error"}\n\n'
    )
    assert (
        failed.response is not None
        and failed.response.error is not None
        and failed.response.error.message == "CUDA out of memory"
    )
    assert failed.response.finish_reason is FinishReason.ERROR
    # a stream path off Replicate's hosts is no one's
    assert _stream_read(body, "https://example.com/v1/streams/abc").family != "replicate"
