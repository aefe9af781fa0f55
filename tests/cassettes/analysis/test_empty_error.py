"""Issue 83 item 5b: an API error sent with an empty body gets its A finding in every API family,
whatever the request looked like (a body the family reads, none, one that is not JSON), and the
error's type where the service names it in a header (``x-amzn-ErrorType``: every API on AWS,
Anthropic's Messages on Bedrock included).

Was, on fec4f2c2: no finding at all for a request looptap could not read (an InvokeModel whose
``body`` was not JSON — the usual way to get its 400 — or any family's empty or non-JSON body),
and no type for Claude on InvokeModel (the Anthropic adapter did not read the header).

``ROUTES`` names a model call of every family the registry holds; a family added later fails
``test_every_family_is_tried`` until it has one. The families whose calls are not turns of a
loop (embeddings, OpenAI's media endpoints, an MCP tool server, an A2A agent) have their errors
read (``show`` prints them) but no finding: the analysis judges turns only.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from looptap.cassettes import providers
from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

M = [{"role": "user", "content": "hi"}]
AWS = "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
AMZN = [
    ("x-amzn-ErrorType", "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/")
]

#: family → (method, URL, a body the family reads, response headers of its empty error).
ROUTES: dict[str, tuple[str, str, Any, list[tuple[str, str]]]] = {
    "openai_chat": (
        "POST",
        "https://api.openai.com/v1/chat/completions",
        {"model": "gpt-4o", "messages": M},
        [],
    ),
    "openai_responses": (
        "POST",
        "https://api.openai.com/v1/responses",
        {"model": "gpt-4o", "input": "hi"},
        [],
    ),
    "openai_realtime": ("GET", "https://api.openai.com/v1/realtime?model=gpt-realtime", None, []),
    "anthropic": (
        "POST",
        "https://api.anthropic.com/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 9, "messages": M},
        [],
    ),
    "gemini": (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        [],
    ),
    "gemini_live": (
        "GET",
        "https://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
        None,
        [],
    ),
    "gemini_interactions": (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/interactions",
        {"model": "gemini-2.5-flash", "input": "hi"},
        [],
    ),
    "ollama": ("POST", "http://localhost:11434/api/chat", {"model": "llama3.2", "messages": M}, []),
    "bedrock": (
        "POST",
        AWS + "amazon.nova-lite-v1%3A0/converse",
        {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        AMZN,
    ),
    "bedrock_invoke": (
        "POST",
        AWS + "mistral.mistral-7b-instruct-v0%3A2/invoke",
        {"prompt": "hi", "max_tokens": 9},
        AMZN,
    ),
    "bedrock_agents": (
        "POST",
        "https://bedrock-agent-runtime.us-east-1.amazonaws.com/agents/A1/agentAliases/B1/sessions/S1/text",
        {"inputText": "hi"},
        AMZN,
    ),
    "openai_completions": (
        "POST",
        "https://api.openai.com/v1/completions",
        {"model": "gpt-3.5-turbo-instruct", "prompt": "hi"},
        [],
    ),
    "cohere": ("POST", "https://api.cohere.com/v2/chat", {"model": "command-r", "messages": M}, []),
    "anthropic_complete": (
        "POST",
        "https://api.anthropic.com/v1/complete",
        {"model": "claude-2.1", "prompt": "\n\nHuman: hi\n\nAssistant:", "max_tokens_to_sample": 9},
        [],
    ),
    "watsonx": (
        "POST",
        "https://us-south.ml.cloud.ibm.com/ml/v1/text/generation?version=2024-05-01",
        {"model_id": "ibm/granite-13b-instruct-v2", "input": "hi"},
        [],
    ),
    "tgi": ("POST", "http://localhost:8080/generate", {"inputs": "hi", "parameters": {}}, []),
    "sagemaker": (
        "POST",
        "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/llama/invocations",
        {"inputs": "hi"},
        AMZN,
    ),
    "writer": (
        "POST",
        "https://api.writer.com/v1/chat",
        {"model": "palmyra-x5", "messages": M},
        [],
    ),
    "portkey_prompt": (
        "POST",
        "https://api.portkey.ai/v1/prompts/pp-weather/completions",
        {"variables": {"city": "Paris"}},
        [],
    ),
    "aleph_alpha": (
        "POST",
        "https://api.aleph-alpha.com/complete",
        {"model": "luminous-base", "prompt": "hi", "maximum_tokens": 9},
        [],
    ),
    "replicate": (
        "POST",
        "https://api.replicate.com/v1/models/meta/meta-llama-3-8b-instruct/predictions",
        {"input": {"prompt": "hi"}},
        [],
    ),
    # not turns: the error is read, no finding
    "a2a": (
        "POST",
        "http://localhost:9999/",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}],
                    "messageId": "m1",
                }
            },
        },
        [],
    ),
    "embeddings": (
        "POST",
        "https://api.openai.com/v1/embeddings",
        {"model": "text-embedding-3-small", "input": "hi"},
        [],
    ),
    "openai_media": (
        "POST",
        "https://api.openai.com/v1/images/generations",
        {"model": "gpt-image-1", "prompt": "a kettle"},
        [],
    ),
    "mcp": (
        "POST",
        "http://localhost:8000/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "x", "arguments": {}},
        },
        [],
    ),
}
NOT_TURNS = ("embeddings", "openai_media", "mcp", "a2a")

#: The request bodies tried: the family's own, none, and one that is not JSON.
BODIES = ("read", "none", "not json")


def _exchange(family: str, body: str, status: int) -> Exchange:
    method, url, own, headers = ROUTES[family]
    raw = {
        "read": json.dumps(own).encode() if own is not None else b"",
        "none": b"",
        "not json": b"prompt=hi&max_tokens=9",
    }[body]
    return Exchange(
        method,
        url,
        request_headers=[("content-type", "application/json")],
        request_body=raw,
        status=status,
        response_headers=[("content-type", "application/json"), *headers],
        response_chunks=[],
        seq=0,
    )


def test_every_family_is_tried() -> None:
    assert sorted(ROUTES) == sorted(providers.FAMILIES)


@pytest.mark.parametrize("status", [400, 404, 500])
@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("family", sorted(ROUTES))
def test_an_empty_error_gets_its_a_finding_in_every_family(
    family: str, body: str, status: int
) -> None:
    ex = _exchange(family, body, status)
    rt = parse_exchange(ex)
    if body == "read" or ROUTES[family][0] == "GET" or family in ("bedrock_invoke",):
        assert rt.family == family, (rt.family, rt.analysis_errors)
    err = rt.response.error if rt.response is not None else None
    if rt.family in NOT_TURNS or rt.family == "none":
        # read (status, type), not judged: no turn
        assert rt.family == "none" or (err is not None and err.status == status)
        return
    assert err is not None and err.status == status, rt
    found = [f for f in analyse([ex], [rt]).findings if f.layer == "A"]
    assert [f.code for f in found] == ["A.http_error"], (family, body, found)
    assert f"HTTP {status}" in found[0].message
    if ROUTES[family][3]:  # the service named the error's type in a header
        assert err.type == "ValidationException" and "ValidationException" in found[0].message


@pytest.mark.parametrize("body", BODIES)
def test_claude_on_invoke_model_names_the_type_of_its_empty_error(body: str) -> None:
    """Anthropic's Messages on Bedrock (read by the Anthropic adapter) and its header."""
    claude = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9, "messages": M}
    raw = {"read": json.dumps(claude).encode(), "none": b"", "not json": b"hi"}[body]
    for model in (
        "anthropic.claude-3-haiku-20240307-v1%3A0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0",
        "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2F"
        "us.anthropic.claude-3-5-haiku-20241022-v1%3A0",
    ):
        ex = Exchange(
            "POST",
            AWS + model + "/invoke",
            request_body=raw,
            status=400,
            response_headers=AMZN,
            response_chunks=[],
            seq=0,
        )
        rt = parse_exchange(ex)
        (a,) = [f for f in analyse([ex], [rt]).findings if f.layer == "A"]
        assert a.code == "A.http_error" and "ValidationException" in a.message, (model, a)
