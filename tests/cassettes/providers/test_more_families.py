"""The families issue 14 found unread: legacy completions, embeddings, Cohere chat, Bedrock
InvokeModel with non-Anthropic bodies, Anthropic's /v1/complete, watsonx, TGI and SageMaker.

Fixtures follow each API's documented schema; where the official SDK is installed and has the type
(openai: ``Completion``, ``CreateEmbeddingResponse``) the fixture is validated against the SDK's own
response type first, so it cannot drift from the real shape.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from test_bedrock import _frame  # the AWS event-stream frame builder

from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange


def rt(
    url: str,
    req: Any,
    resp: Any,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    chunks: list[bytes] | None = None,
) -> RoundTrip:
    body = resp if isinstance(resp, bytes) else orjson.dumps(resp)
    ctype = (
        "text/event-stream"
        if chunks and chunks[0].startswith((b"data:", b"event:", b"id:"))
        else "application/json"
    )
    ex = Exchange(
        "POST",
        url,
        request_body=orjson.dumps(req),
        status=status,
        response_headers=[("content-type", ctype), *(headers or [])],
        response_chunks=[(0.1 * i, c) for i, c in enumerate(chunks)] if chunks else [(0.1, body)],
    )
    out = parse_exchange(ex)
    assert out.analysis_errors == [], out.analysis_errors
    return out


def sse(*events: Any, done: bool = False, event: str | None = None) -> list[bytes]:
    head = f"event: {event}\n".encode() if event else b""
    out = [head + b"data: " + orjson.dumps(e) + b"\n\n" for e in events]
    return out + ([b"data: [DONE]\n\n"] if done else [])


# -- legacy completions --------------------------------------------------------------------------

COMPLETION = {
    "id": "cmpl-1",
    "object": "text_completion",
    "created": 1700000000,
    "model": "gpt-3.5-turbo-instruct",
    "choices": [{"text": "\n\nParis.", "index": 0, "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
}


def test_legacy_completion_matches_the_sdk_type() -> None:
    from openai.types import Completion

    Completion.model_validate(COMPLETION)
    r = rt(
        "https://api.openai.com/v1/completions",
        {"model": "gpt-3.5-turbo-instruct", "prompt": "Capital of France?"},
        COMPLETION,
    )
    assert (r.family, r.operation, r.stream) == ("openai_completions", "generate", False)
    assert r.request is not None and r.request.messages[0].text == "Capital of France?"
    assert (
        r.response is not None
        and r.response.text == "\n\nParis."
        and r.response.finish_reason is FinishReason.COMPLETE
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (7, 3)


def test_legacy_completion_streams_vllm_and_together() -> None:
    chunk = {
        "id": "cmpl-2",
        "object": "text_completion",
        "model": "meta-llama/Llama-3-8b",
        "choices": [{"index": 0, "text": "Par", "finish_reason": None}],
    }
    last = {
        **chunk,
        "choices": [{"index": 0, "text": "is", "finish_reason": "length", "stop_reason": None}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    r = rt(
        "http://localhost:8000/v1/completions",
        {"model": "m", "prompt": ["a", "b"], "stream": True},
        b"",
        chunks=sse(chunk, last, done=True),
    )
    assert r.family == "openai_completions" and r.stream and r.response is not None
    assert (
        r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
        and r.response.complete
    )
    assert r.request is not None and len(r.request.messages) == 2
    # Together: "eos" is a stop; a stream cut before [DONE] is incomplete.
    eos = {**chunk, "choices": [{"index": 0, "text": "!", "finish_reason": "eos"}]}
    r = rt(
        "https://api.together.xyz/v1/completions",
        {"model": "m", "prompt": "x", "stream": True},
        b"",
        chunks=sse(eos),
    )
    assert (
        r.response is not None
        and r.response.finish_reason is FinishReason.COMPLETE
        and r.response.complete is False
    )


def test_chat_completions_is_still_chat() -> None:
    r = rt(
        "https://api.openai.com/v1/chat/completions",
        {"model": "m", "messages": []},
        {"choices": []},
    )
    assert r.family == "openai_chat"


# -- embeddings ----------------------------------------------------------------------------------

EMBEDDING = {
    "object": "list",
    "data": [
        {"object": "embedding", "index": 0, "embedding": [0.1, -0.2, 0.3]},
        {"object": "embedding", "index": 1, "embedding": [0.0, 0.1, 0.2]},
    ],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 8, "total_tokens": 8},
}


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1/embeddings",
        "https://res.openai.azure.com/openai/deployments/emb/embeddings?api-version=2024-10-21",
        "https://api.mistral.ai/v1/embeddings",
        "http://localhost:8000/v1/embeddings",
        "https://api.voyageai.com/v1/embeddings",
    ],
)
def test_embeddings_are_read_as_non_loop_calls(url: str) -> None:
    from openai.types import CreateEmbeddingResponse

    CreateEmbeddingResponse.model_validate(EMBEDDING)
    # Voyage: total only
    body = EMBEDDING if "voyage" not in url else {**EMBEDDING, "usage": {"total_tokens": 8}}
    r = rt(url, {"model": "text-embedding-3-small", "input": ["hello", "world"]}, body)
    assert (r.family, r.operation) == ("embeddings", "embed")
    assert (
        r.response is not None
        and r.response.usage is not None
        and r.response.usage.input_tokens == 8
    )
    assert r.response.usage.output_tokens is None and r.response.finish_reason is None
    assert r.response.provider_details == {"vectors": 2, "dimensions": 3, "object": "list"}
    assert r.request is not None and [m.text for m in r.request.messages] == ["hello", "world"]


def test_cohere_embed() -> None:
    body = {
        "id": "e1",
        "embeddings": {"float": [[0.1, 0.2]]},
        "texts": ["hi"],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 2}},
        "response_type": "embeddings_by_type",
    }
    r = rt(
        "https://api.cohere.com/v2/embed",
        {"model": "embed-english-v3.0", "texts": ["hi"], "input_type": "search_document"},
        body,
    )
    assert (r.family, r.operation) == ("embeddings", "embed")
    assert (
        r.response is not None
        and r.response.usage is not None
        and r.response.usage.input_tokens == 2
    )


def test_embeddings_make_no_turn_and_no_finding() -> None:
    from looptap.cassettes.analysis import analyse

    ex = Exchange(
        "POST",
        "https://api.openai.com/v1/embeddings",
        request_body=orjson.dumps({"model": "m", "input": "x"}),
        status=200,
        response_chunks=[(0.1, orjson.dumps(EMBEDDING))],
    )
    result = analyse([ex, ex])
    assert result.conversations == []


# -- Cohere chat ---------------------------------------------------------------------------------


def test_cohere_v2_stream_with_tool_call() -> None:
    events = [
        {"type": "message-start", "id": "m1", "delta": {"message": {"role": "assistant"}}},
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "I will look it up."}}},
        {
            "type": "tool-call-start",
            "index": 0,
            "delta": {
                "message": {
                    "tool_calls": {
                        "id": "get_weather_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                }
            },
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "delta": {"message": {"tool_calls": {"function": {"arguments": '{"city":'}}}},
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "delta": {"message": {"tool_calls": {"function": {"arguments": '"Paris"}'}}}},
        },
        {"type": "tool-call-end", "index": 0},
        {
            "type": "message-end",
            "delta": {
                "finish_reason": "TOOL_CALL",
                "usage": {
                    "billed_units": {"input_tokens": 41, "output_tokens": 25},
                    "tokens": {"input_tokens": 1441, "output_tokens": 54},
                },
            },
        },
    ]
    r = rt(
        "https://api.cohere.com/v2/chat",
        {
            "model": "command-r7b-12-2024",
            "messages": [{"role": "user", "content": "Weather?"}],
            "stream": True,
        },
        b"",
        chunks=sse(*events),
    )
    assert r.family == "cohere" and r.response is not None and r.response.complete
    (call,) = r.response.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "get_weather_1",
        "get_weather",
        {"city": "Paris"},
    )
    assert r.response.finish_reason is FinishReason.TOOL_CALL
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (41, 25)
    assert (
        r.response.parts[0].kind == "reasoning" and r.response.parts[0].text == "I will look it up."
    )


def test_cohere_v1_chat_with_tool_results_and_stream() -> None:
    req = {
        "model": "command-r",
        "message": "",
        "preamble": "Be brief.",
        "chat_history": [
            {"role": "USER", "message": "Weather in Paris?"},
            {
                "role": "CHATBOT",
                "message": "",
                "tool_calls": [{"name": "get_weather", "parameters": {"city": "Paris"}}],
            },
        ],
        "tool_results": [
            {
                "call": {"name": "get_weather", "parameters": {"city": "Paris"}},
                "outputs": [{"temp": 22}],
            }
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "d",
                "parameter_definitions": {"city": {"type": "str", "required": True}},
            }
        ],
    }
    resp = {
        "response_id": "r1",
        "text": "22C.",
        "generation_id": "g1",
        "finish_reason": "COMPLETE",
        "meta": {"billed_units": {"input_tokens": 30, "output_tokens": 4}},
    }
    r = rt("https://api.cohere.com/v1/chat", req, resp)
    assert r.family == "cohere" and r.request is not None
    assert [m.role for m in r.request.messages] == ["user", "assistant", "tool"]
    assert r.request.system[0].text == "Be brief." and r.request.tools[0].parameters == {
        "type": "object",
        "properties": {"city": {"type": "str"}},
        "required": ["city"],
    }
    assert (
        r.response is not None
        and r.response.text == "22C."
        and r.response.usage is not None
        and r.response.usage.input_tokens == 30
    )
    lines = [
        {"is_finished": False, "event_type": "stream-start", "generation_id": "g"},
        {"is_finished": False, "event_type": "text-generation", "text": "22"},
        {
            "is_finished": True,
            "event_type": "stream-end",
            "finish_reason": "COMPLETE",
            "response": {**resp, "text": "22C."},
        },
    ]
    body = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    r = rt(
        "https://api.cohere.com/v1/chat",
        {**req, "stream": True},
        body,
        chunks=[body[:40], body[40:]],
    )
    assert r.response is not None and r.response.text == "22C." and r.response.complete and r.stream


CHAT = "https://api.openai.com/v1/chat/completions"


@pytest.mark.parametrize(
    ("url", "choice", "mode"),
    [
        ("https://api.cohere.com/v2/chat", "REQUIRED", "required"),
        ("https://api.cohere.com/v2/chat", "NONE", "none"),
        ("https://api.cohere.com/v2/chat", None, None),
        (CHAT, "auto", "auto"),
        (CHAT, {"type": "function", "function": {"name": "get_weather"}}, "tool:get_weather"),
        (CHAT, {"type": "custom", "custom": {"name": "grep"}}, "tool:grep"),
        (
            CHAT,
            {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}},
            "required",
        ),
        (CHAT, {"name": "get_weather"}, "tool:get_weather"),  # the legacy function_call
    ],
)
def test_tool_choice_mode_of_chat_and_cohere_v2(url: str, choice: Any, mode: str | None) -> None:
    """Cohere v2 and Chat Completions share one reading of ``tool_choice``; Cohere's capitals
    come out in the normalised spelling."""
    key = "function_call" if isinstance(choice, dict) and set(choice) == {"name"} else "tool_choice"
    req = {
        "model": "m",
        "messages": [{"role": "user", "content": "Weather?"}],
        **({key: choice} if choice is not None else {}),
    }
    r = rt(url, req, {"message": "bad request"}, status=400)
    assert r.request is not None and r.request.tool_choice_mode == mode


# -- Bedrock InvokeModel -------------------------------------------------------------------------

BEDROCK = "https://bedrock-runtime.us-east-1.amazonaws.com/model/{}/invoke"


@pytest.mark.parametrize(
    ("model", "req", "resp", "text", "finish", "usage"),
    [
        (
            "us.amazon.nova-lite-v1:0",
            {
                "schemaVersion": "messages-v1",
                "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
                "inferenceConfig": {"maxTokens": 10},
            },
            {
                "output": {"message": {"role": "assistant", "content": [{"text": "Hello"}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
            },
            "Hello",
            FinishReason.COMPLETE,
            (3, 2),
        ),
        (
            "amazon.titan-text-express-v1",
            {"inputText": "Hi", "textGenerationConfig": {"maxTokenCount": 10}},
            {
                "inputTextTokenCount": 3,
                "results": [
                    {"tokenCount": 10, "outputText": "Hello there", "completionReason": "LENGTH"}
                ],
            },
            "Hello there",
            FinishReason.TRUNCATED_LENGTH,
            (3, 10),
        ),
        (
            "meta.llama3-8b-instruct-v1:0",
            {"prompt": "Hi", "max_gen_len": 10},
            {
                "generation": "Hello",
                "prompt_token_count": 4,
                "generation_token_count": 2,
                "stop_reason": "stop",
            },
            "Hello",
            FinishReason.COMPLETE,
            (4, 2),
        ),
        (
            "mistral.mistral-7b-instruct-v0:2",
            {"prompt": "<s>[INST] Hi [/INST]", "max_tokens": 10},
            {"outputs": [{"text": "Hello", "stop_reason": "length"}]},
            "Hello",
            FinishReason.TRUNCATED_LENGTH,
            (9, 2),  # from the response headers
        ),
        (
            "mistral.mistral-large-2407-v1:0",
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10},
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Hello"},
                        "stop_reason": "stop",
                    }
                ]
            },
            "Hello",
            FinishReason.COMPLETE,
            (9, 2),
        ),
        (
            "cohere.command-r-v1:0",
            {"message": "Hi", "chat_history": []},
            {
                "response_id": "r",
                "text": "Hello",
                "generation_id": "g",
                "finish_reason": "COMPLETE",
            },
            "Hello",
            FinishReason.COMPLETE,
            (9, 2),
        ),
        (
            "cohere.command-text-v14",
            {"prompt": "Hi", "max_tokens": 10},
            {
                "generations": [{"id": "g", "text": "Hello", "finish_reason": "COMPLETE"}],
                "id": "x",
                "prompt": "Hi",
            },
            "Hello",
            FinishReason.COMPLETE,
            (9, 2),
        ),
        (
            "ai21.jamba-1-5-mini-v1:0",
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10},
            {
                "id": "j",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Hello"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            },
            "Hello",
            FinishReason.COMPLETE,
            (5, 2),
        ),
        (
            "ai21.j2-mid-v1",
            {"prompt": "Hi", "maxTokens": 10},
            {
                "id": 1,
                "prompt": {"text": "Hi", "tokens": [{}]},
                "completions": [
                    {
                        "data": {"text": "Hello", "tokens": [{}, {}]},
                        "finishReason": {"reason": "endoftext"},
                    }
                ],
            },
            "Hello",
            FinishReason.COMPLETE,
            (1, 2),
        ),
        (
            "anthropic.claude-v2",
            {
                "prompt": "\n\nHuman: Hi\n\nAssistant:",
                "max_tokens_to_sample": 10,
                "anthropic_version": "bedrock-2023-05-31",
            },
            {"completion": " Hello", "stop_reason": "stop_sequence", "stop": "\n\nHuman:"},
            " Hello",
            FinishReason.COMPLETE,
            (9, 2),
        ),
    ],
)
def test_bedrock_invoke_bodies(
    model: str, req: Any, resp: Any, text: str, finish: FinishReason, usage: tuple[int, int]
) -> None:
    headers = [
        ("x-amzn-bedrock-input-token-count", "9"),
        ("x-amzn-bedrock-output-token-count", "2"),
    ]
    r = rt(BEDROCK.format(model), req, resp, headers=headers)
    assert (r.family, r.operation) == ("bedrock_invoke", "generate")
    assert r.request is not None and r.request.model == model and r.request.messages
    assert r.response is not None and r.response.text == text and r.response.finish_reason is finish
    assert (
        r.response.usage is not None
        and (r.response.usage.input_tokens, r.response.usage.output_tokens) == usage
    )


def test_bedrock_invoke_anthropic_messages_stays_anthropic() -> None:
    r = rt(
        BEDROCK.format("anthropic.claude-3-haiku-20240307-v1:0"),
        {"anthropic_version": "bedrock-2023-05-31", "messages": [], "max_tokens": 5},
        {"type": "message", "content": [], "role": "assistant"},
    )
    assert r.family == "anthropic"


def _chunk(d: Any) -> bytes:
    return _frame("chunk", {"bytes": base64.b64encode(orjson.dumps(d)).decode()})


def test_bedrock_invoke_streams() -> None:
    url = BEDROCK.format("meta.llama3-8b-instruct-v1:0").replace(
        "/invoke", "/invoke-with-response-stream"
    )
    frames = [
        _chunk(
            {
                "generation": "Hel",
                "prompt_token_count": 4,
                "generation_token_count": 1,
                "stop_reason": None,
            }
        ),
        _chunk(
            {
                "generation": "lo",
                "prompt_token_count": None,
                "generation_token_count": 2,
                "stop_reason": "stop",
                "amazon-bedrock-invocationMetrics": {"inputTokenCount": 4, "outputTokenCount": 2},
            }
        ),
    ]
    r = rt(url, {"prompt": "Hi"}, b"".join(frames))
    assert (
        r.stream and r.response is not None and r.response.text == "Hello" and r.response.complete
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (4, 2)
    url = BEDROCK.format("amazon.nova-micro-v1:0").replace(
        "/invoke", "/invoke-with-response-stream"
    )
    frames = [
        _chunk({"messageStart": {"role": "assistant"}}),
        _chunk({"contentBlockDelta": {"delta": {"text": "Hi"}, "contentBlockIndex": 0}}),
        _chunk({"messageStop": {"stopReason": "max_tokens"}}),
        _chunk(
            {
                "metadata": {"usage": {"inputTokens": 3, "outputTokens": 1}},
                "amazon-bedrock-invocationMetrics": {"inputTokenCount": 3, "outputTokenCount": 1},
            }
        ),
    ]
    r = rt(
        url,
        {
            "schemaVersion": "messages-v1",
            "messages": [{"role": "user", "content": [{"text": "x"}]}],
        },
        b"".join(frames),
    )
    assert (
        r.response is not None
        and r.response.text == "Hi"
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
    )
    assert r.response.usage is not None and r.response.usage.input_tokens == 3


def test_bedrock_invoke_embeddings() -> None:
    r = rt(
        BEDROCK.format("amazon.titan-embed-text-v2:0"),
        {"inputText": "hi"},
        {"embedding": [0.1, 0.2], "inputTextTokenCount": 2},
    )
    assert (r.family, r.operation) == ("bedrock_invoke", "embed")
    assert (
        r.response is not None
        and r.response.usage is not None
        and r.response.usage.input_tokens == 2
    )


# -- Anthropic /v1/complete ----------------------------------------------------------------------


def test_anthropic_legacy_complete() -> None:
    # The installed anthropic SDK no longer ships the Completion type: the fixture follows the
    # documented Text Completions response (type, id, completion, stop_reason, model, stop).
    body = {
        "type": "completion",
        "id": "compl_1",
        "completion": " Paris.",
        "stop_reason": "stop_sequence",
        "model": "claude-2.1",
        "stop": "\n\nHuman:",
        "log_id": "l",
    }
    req = {
        "model": "claude-2.1",
        "prompt": "Be brief.\n\nHuman: Capital of France?\n\nAssistant:",
        "max_tokens_to_sample": 20,
    }
    r = rt("https://api.anthropic.com/v1/complete", req, body)
    assert r.family == "anthropic_complete" and r.request is not None and r.response is not None
    assert r.request.system[0].text == "Be brief." and [m.role for m in r.request.messages] == [
        "user"
    ]
    assert r.response.text == " Paris." and r.response.finish_reason is FinishReason.COMPLETE
    assert r.response.usage is None  # the API reports none: unknown, not zero
    events = sse(
        {"type": "completion", "completion": " Par", "stop_reason": None, "model": "claude-2.1"},
        {
            "type": "completion",
            "completion": "is.",
            "stop_reason": "max_tokens",
            "model": "claude-2.1",
        },
        event="completion",
    )
    r = rt("https://api.anthropic.com/v1/complete", {**req, "stream": True}, b"", chunks=events)
    assert (
        r.response is not None
        and r.response.text == " Paris."
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
        and r.response.complete
    )


# -- watsonx, TGI, SageMaker ---------------------------------------------------------------------


def test_watsonx_generation_and_stream() -> None:
    url = "https://us-south.ml.cloud.ibm.com/ml/v1/text/generation?version=2023-05-29"
    body = {
        "model_id": "ibm/granite-13b-instruct-v2",
        "created_at": "2024-01-01T00:00:00Z",
        "results": [
            {
                "generated_text": "Paris",
                "generated_token_count": 2,
                "input_token_count": 6,
                "stop_reason": "eos_token",
            }
        ],
    }
    r = rt(
        url,
        {
            "input": "Capital of France?",
            "model_id": "ibm/granite-13b-instruct-v2",
            "project_id": "p",
            "parameters": {"max_new_tokens": 20},
        },
        body,
    )
    assert (r.family, r.operation) == ("watsonx", "generate")
    assert (
        r.request is not None
        and r.request.model == "ibm/granite-13b-instruct-v2"
        and r.request.params["max_new_tokens"] == 20
    )
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.COMPLETE
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (6, 2)
    first = {
        "model_id": "m",
        "results": [
            {
                "generated_text": "Par",
                "generated_token_count": 1,
                "input_token_count": 6,
                "stop_reason": "not_finished",
            }
        ],
    }
    last = {
        "model_id": "m",
        "results": [
            {
                "generated_text": "is",
                "generated_token_count": 2,
                "input_token_count": 6,
                "stop_reason": "max_tokens",
            }
        ],
    }
    r = rt(
        url.replace("generation", "generation_stream"),
        {"input": "x", "model_id": "m"},
        b"",
        chunks=sse(first, last, event="message"),
    )
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
        and r.response.complete
    )


def test_watsonx_beta_generation_routes_are_read() -> None:
    """The beta API (``/ml/v1-beta/generation/text`` and ``text_stream``, older SDKs) takes and
    answers the same bodies as ``/ml/v1/text/generation``: read as it, not as "not an LLM call"."""
    url = "https://us-south.ml.cloud.ibm.com/ml/v1-beta/generation/text?version=2023-05-29"
    body = {
        "model_id": "google/flan-ul2",
        "created_at": "2023-07-21T16:52:32.190Z",
        "results": [
            {
                "generated_text": "Paris",
                "generated_token_count": 2,
                "input_token_count": 6,
                "stop_reason": "eos_token",
            }
        ],
    }
    r = rt(
        url,
        {
            "input": "Capital of France?",
            "model_id": "google/flan-ul2",
            "project_id": "p",
            "parameters": {"max_new_tokens": 20},
        },
        body,
    )
    assert (r.family, r.operation) == ("watsonx", "generate")
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.COMPLETE
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (6, 2)
    first = {
        "model_id": "m",
        "results": [
            {
                "generated_text": "Par",
                "generated_token_count": 1,
                "input_token_count": 6,
                "stop_reason": "not_finished",
            }
        ],
    }
    last = {
        "model_id": "m",
        "results": [
            {
                "generated_text": "is",
                "generated_token_count": 2,
                "input_token_count": 6,
                "stop_reason": "max_tokens",
            }
        ],
    }
    r = rt(
        url.replace("/text?", "/text_stream?"),
        {"input": "x", "model_id": "m"},
        b"",
        chunks=sse(first, last, event="message"),
    )
    assert (r.family, r.operation) == ("watsonx", "generate")
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
        and r.response.complete
    )
    # other beta paths stay unread
    assert (
        rt(
            "https://us-south.ml.cloud.ibm.com/ml/v1-beta/generation/other", {"input": "x"}, {}
        ).family
        != "watsonx"
    )


def test_watsonx_chat_with_tool_call() -> None:
    url = "https://us-south.ml.cloud.ibm.com/ml/v1/text/chat?version=2024-05-01"
    body = {
        "id": "c",
        "model_id": "ibm/granite-3-8b-instruct",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
    }
    r = rt(
        url,
        {
            "model_id": "ibm/granite-3-8b-instruct",
            "messages": [{"role": "user", "content": "x"}],
            "project_id": "p",
        },
        body,
    )
    assert (
        r.family == "watsonx"
        and r.request is not None
        and r.request.model == "ibm/granite-3-8b-instruct"
    )
    assert (
        r.response is not None
        and r.response.tool_calls[0].name == "f"
        and r.response.finish_reason is FinishReason.TOOL_CALL
    )


def test_tgi_generate_and_stream() -> None:
    body = {
        "generated_text": "Paris",
        "details": {
            "finish_reason": "eos_token",
            "generated_tokens": 2,
            "seed": None,
            "prefill": [],
            "tokens": [],
        },
    }
    r = rt(
        "http://localhost:8080/generate",
        {"inputs": "Capital of France?", "parameters": {"max_new_tokens": 20, "details": True}},
        body,
        headers=[("x-prompt-tokens", "6"), ("x-model-id", "bigscience/bloom")],
    )
    assert (r.family, r.operation) == ("tgi", "generate")
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.COMPLETE
    )
    assert (
        r.response.usage is not None
        and (r.response.usage.input_tokens, r.response.usage.output_tokens) == (6, 2)
        and r.response.model == "bigscience/bloom"
    )
    events = sse(
        {
            "index": 1,
            "token": {"id": 1, "text": "Par", "logprob": -0.1, "special": False},
            "generated_text": None,
            "details": None,
        },
        {
            "index": 2,
            "token": {"id": 2, "text": "is", "logprob": -0.1, "special": False},
            "generated_text": "Paris",
            "details": {
                "finish_reason": "length",
                "generated_tokens": 2,
                "seed": None,
                "input_length": 6,
            },
        },
    )
    r = rt("http://localhost:8080/generate_stream", {"inputs": "x"}, b"", chunks=events)
    assert (
        r.response is not None
        and r.response.text == "Paris"
        and r.response.finish_reason is FinishReason.TRUNCATED_LENGTH
    )
    assert r.response.usage is not None and (
        r.response.usage.input_tokens,
        r.response.usage.output_tokens,
    ) == (6, 2)
    r = rt(
        "https://api-inference.huggingface.co/models/gpt2",
        {"inputs": "x"},
        [{"generated_text": "xy"}],
    )
    assert (
        r.family == "tgi"
        and r.request is not None
        and r.request.model == "gpt2"
        and r.response is not None
        and r.response.text == "xy"
    )


def test_ollama_generate_is_still_ollama() -> None:
    r = rt(
        "http://localhost:11434/api/generate",
        {"model": "llama3", "prompt": "x", "stream": False},
        {"model": "llama3", "response": "y", "done": True, "done_reason": "stop"},
    )
    assert r.family == "ollama"


def test_sagemaker_endpoints() -> None:
    url = "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/my-llm/invocations"
    r = rt(
        url, {"inputs": "Hi", "parameters": {"max_new_tokens": 5}}, [{"generated_text": "Hello"}]
    )
    assert r.family == "sagemaker" and r.request is not None and r.request.model == "my-llm"
    assert r.response is not None and r.response.text == "Hello"
    chat = {
        "id": "c",
        "model": "tgi",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    r = rt(url, {"messages": [{"role": "user", "content": "Hi"}]}, chat)
    assert (
        r.family == "sagemaker"
        and r.response is not None
        and r.response.finish_reason is FinishReason.COMPLETE
        and r.response.usage is not None
    )
    parts = b"".join(
        sse(
            {"token": {"text": "Hel", "special": False}, "generated_text": None, "details": None},
            {
                "token": {"text": "lo", "special": False},
                "generated_text": "Hello",
                "details": {"finish_reason": "eos_token", "generated_tokens": 2},
            },
        )
    )
    frames = [
        _frame("PayloadPart", {"Bytes": base64.b64encode(parts[:30]).decode()}),
        _frame("PayloadPart", {"Bytes": base64.b64encode(parts[30:]).decode()}),
    ]
    r = rt(
        url.replace("invocations", "invocations-response-stream"),
        {"inputs": "Hi", "stream": True},
        b"".join(frames),
    )
    assert (
        r.response is not None
        and r.response.text == "Hello"
        and r.response.finish_reason is FinishReason.COMPLETE
    )


def test_unknown_means_llm_looking_and_none_means_not() -> None:
    r = rt(
        "https://api.openai.com/v1/moderations",
        {"model": "omni-moderation-latest", "input": "x"},
        {"results": []},
    )
    assert r.family == "unknown"
    r = rt("https://example.com/upload", {"name": "x"}, {"ok": True})
    assert r.family == "none"


def test_other_services_routes_are_not_claimed() -> None:
    """A /v1/chat or /embeddings of another service is not Cohere's or an embedding call: it is
    left to the LLM-looking check (unknown), never labelled a family it is not."""
    r = rt("https://chat.example.com/api/v1/chat", {"channel": "c", "text": "hi"}, {"ok": True})
    assert r.family == "unknown"
    r = rt("https://vectors.example.com/embeddings", {"collection": "c"}, {"ok": True})
    assert r.family == "unknown"
    r = rt("https://api.cohere.com/v2/chat", {}, {"message": "invalid request"}, status=400)
    assert r.family == "cohere" and r.response is not None and r.response.error is not None


_CHAT_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("url", "req", "resp", "chunks"),
    [
        (  # a Gemini- or Ollama-compatible server: "stop" on a turn with tool calls
            "https://compat.example.com/v1/chat/completions",
            {"model": "m", "messages": []},
            {"choices": [{"message": {"tool_calls": [_CHAT_CALL]}, "finish_reason": "stop"}]},
            None,
        ),
        (
            "https://compat.example.com/v1/chat/completions",
            {"model": "m", "messages": [], "stream": True},
            b"",
            sse(
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **_CHAT_CALL}]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                done=True,
            ),
        ),
        (  # Cohere v1 says COMPLETE with tool calls
            "https://api.cohere.com/v1/chat",
            {"model": "command-r", "message": "hi"},
            {
                "text": "",
                "tool_calls": [{"name": "f", "parameters": {}}],
                "finish_reason": "COMPLETE",
            },
            None,
        ),
    ],
)
def test_a_turn_that_completed_with_tool_calls_is_a_tool_call(
    url: str, req: Any, resp: Any, chunks: list[bytes] | None
) -> None:
    r = rt(url, req, resp, chunks=chunks)
    assert r.response is not None and r.response.tool_calls
    assert r.response.finish_reason is FinishReason.TOOL_CALL, r.response.finish_reason


def test_realtime_usage_reads_its_cached_count_from_input_token_details() -> None:
    """Realtime's ``response.usage`` is the Responses usage with ``input_token_details`` (no
    ``s``): the cached count is read there, the audio and text split is kept raw."""
    from looptap.cassettes.providers import by_family

    usage = {
        "total_tokens": 30,
        "input_tokens": 20,
        "output_tokens": 10,
        "input_token_details": {"cached_tokens": 5, "text_tokens": 15, "audio_tokens": 0},
        "output_token_details": {"text_tokens": 10, "audio_tokens": 0},
    }
    done = {"type": "response.done", "response": {"id": "r", "status": "completed", "usage": usage}}
    adapter = by_family("openai_realtime")
    assert adapter is not None
    u = adapter.parse_response(done).usage
    assert u is not None
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (20, 10, 30)
    assert (u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens) == (5, None, None)
    assert u.raw == usage
