"""Gemini adapter (WIRE.md §D): the real recordings first, hand-made wire samples for the gaps."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from real_corpus import Mentioning, corpus_exchanges, rel

from looptap.cassettes.models import FinishReason, NormalisedResponse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.providers import detect
from looptap.cassettes.providers.gemini import Gemini, usage_from
from looptap.cassettes.wire import Exchange

G = Gemini()
AI_STUDIO = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
STREAM_URL = AI_STUDIO + ":streamGenerateContent?alt=sse"


#: The files that can hold a generation request (its URL names it): read at collection;
#: test_the_cut_of_the_corpus_loses_no_exchange checks the cut against the whole corpus.
MENTIONING: Mentioning = (b"generatecontent",)


def _gemini_corpus(mentioning: Mentioning = MENTIONING) -> list[tuple[str, int, Exchange]]:
    out = []
    for path, i, ex in corpus_exchanges("pydantic-ai/**/*.yaml", mentioning):
        u = urlsplit(ex.url)
        if (
            u.path.endswith((":generateContent", ":streamGenerateContent"))
            and "/publishers/anthropic/" not in u.path
        ):
            out.append((rel(path), i, ex))
    return out


GEMINI_CORPUS = _gemini_corpus()


def _one(name: str, index: int) -> RoundTrip:
    for path, i, ex in GEMINI_CORPUS:
        if path.endswith("/" + name) and i == index:
            return parse_exchange(ex)
    raise LookupError(name)


def _sse(*chunks: Any, sep: str = "\r\n\r\n") -> bytes:
    return "".join(f"data: {orjson.dumps(c).decode()}{sep}" for c in chunks).encode()


def _stream(body: bytes, url: str = STREAM_URL, status: int = 200) -> RoundTrip:
    req = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    ex = Exchange("POST", url, request_body=req, status=status, response_chunks=[(0.1, body)])
    rt = parse_exchange(ex)
    assert not rt.analysis_errors, rt.analysis_errors
    return rt


def _resp(rt: RoundTrip) -> NormalisedResponse:
    assert rt.response is not None
    return rt.response


def _chunk(
    parts: list[Any], finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    out: dict[str, Any] = {
        "candidates": [cand],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    if usage:
        out["usageMetadata"] = usage
    return out


# --- recognition --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "operation", "model", "stream"),
    [
        (AI_STUDIO + ":generateContent", "generate", "gemini-2.5-flash", False),
        (STREAM_URL, "generate", "gemini-2.5-flash", True),
        (
            "https://generativelanguage.googleapis.com/v1/models/gemini-pro:generateContent",
            "generate",
            "gemini-pro",
            False,
        ),
        (
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
            "publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
            "generate",
            "gemini-2.0-flash",
            True,
        ),
        (
            "https://aiplatform.googleapis.com/v1beta1/projects/p/locations/global/publishers/"
            "google/models/gemini-3-pro:generateContent",
            "generate",
            "gemini-3-pro",
            False,
        ),
        (
            "https://aiplatform.eu.rep.googleapis.com/v1/projects/p/locations/eu/publishers/google/"
            "models/m1:generateContent",
            "generate",
            "m1",
            False,
        ),
        (
            "https://aiplatform.googleapis.com/v1beta1/publishers/google/models/"
            "m2:streamGenerateContent",
            "generate",
            "m2",
            True,
        ),
        (
            "http://localhost:8787/google-vertex/v1beta1/"
            "publishers/google/models/M:generateContent",
            "generate",
            "M",
            False,
        ),
        (AI_STUDIO + ":countTokens", "count_tokens", "gemini-2.5-flash", False),
        (
            "https://generativelanguage.googleapis.com/v1beta/cachedContents",
            "cached_contents",
            None,
            False,
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta/fileSearchStores/abc",
            "file_search_stores",
            None,
            False,
        ),
        (
            "https://generativelanguage.googleapis.com/upload/v1beta/fileSearchStores/"
            "s:uploadToFileSearchStore",
            "file_search_stores",
            None,
            False,
        ),
    ],
)
def test_recognised(url: str, operation: str, model: str | None, stream: bool) -> None:
    u = urlsplit(url)
    assert G.recognise("POST", u, {"contents": []}) > 0
    assert G.operation("POST", u) == operation
    assert G.model_from_url(u) == model
    assert G.is_stream(u, {}) is stream


@pytest.mark.parametrize(
    "url",
    [
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/"
        "anthropic/models/claude-3-5-sonnet:streamRawPredict",
        "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/"
        "anthropic/models/claude:generateContent",
        "https://api.openai.com/v1/files",
        "https://api.openai.com/v1/models/gpt-4o",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/google.gemma-3-27b-it/converse",
    ],
)
def test_not_recognised(url: str) -> None:
    assert G.recognise("POST", urlsplit(url), {"contents": []}) == 0


# --- the corpus -------------------------------------------------------------------------------


def test_corpus_has_gemini_traffic() -> None:
    assert len(GEMINI_CORPUS) > 300
    assert sum(1 for _, _, ex in GEMINI_CORPUS if ":streamGenerateContent" in ex.url) >= 18


def test_the_cut_of_the_corpus_loses_no_exchange() -> None:
    """The whole of pydantic-ai's corpus read (here, not at collection): the same exchanges."""
    assert [(p, i) for p, i, _ in _gemini_corpus(())] == [(p, i) for p, i, _ in GEMINI_CORPUS]


@pytest.mark.parametrize(
    ("path", "index", "ex"), GEMINI_CORPUS, ids=[f"{p}#{i}" for p, i, _ in GEMINI_CORPUS]
)
def test_corpus_exchange_parses(path: str, index: int, ex: Exchange) -> None:
    rt = parse_exchange(ex)
    assert rt.family == "gemini"
    assert rt.operation == "generate"
    assert not rt.analysis_errors
    assert rt.request is not None and rt.request.history_key == "contents"
    assert rt.request.model and rt.request.model in ex.url
    assert all(m.role in ("user", "assistant") for m in rt.request.messages)
    r = _resp(rt)
    assert r.finish_reason is not None
    if (rt.status or 0) >= 400:
        assert r.error is not None and r.error.status == rt.status and r.error.message
        return
    assert r.complete is True  # every recorded Gemini call and stream ran to its end
    assert r.error is None
    u = r.usage
    assert u is not None
    if None not in (u.input_tokens, u.output_tokens, u.total_tokens):
        assert u.input_tokens + u.output_tokens == u.total_tokens  # type: ignore[operator]
    if rt.stream:
        assert rt.framing == "sse" and r.events and r.events > 0


def test_corpus_non_generation_endpoints_are_named() -> None:
    ops = set()
    for _, _, ex in corpus_exchanges("pydantic-ai/**/test_google_model_file_search*.yaml"):
        rt = parse_exchange(ex)
        if "fileSearchStores" in ex.url:
            assert rt.family == "gemini" and rt.request is None and rt.response is None
            ops.add(rt.operation)
    assert ops == {"file_search_stores"}


def test_streamed_tool_call_with_signature() -> None:
    rt = _one("test_google_streaming_tool_call_thought_signature.yaml", 0)
    r = _resp(rt)
    assert rt.stream and r.events == 2
    assert [p.kind for p in r.parts] == ["tool_call"]  # the trailing {"text": ""} leaves no part
    call = r.tool_calls[0]
    assert (call.id, call.name, call.arguments, call.arguments_raw) == (
        None,
        "get_country",
        {},
        "{}",
    )
    sig = r.parts[0].provider_details["thought_signature"]  # type: ignore[index]
    assert sig.startswith("EpwICpkIAXLI2nxl")
    assert r.finish_reason_raw == "STOP" and r.finish_reason is FinishReason.TOOL_CALL
    assert r.usage is not None
    assert (
        r.usage.input_tokens,
        r.usage.output_tokens,
        r.usage.reasoning_tokens,
        r.usage.total_tokens,
    ) == (
        29,
        212,
        202,
        241,
    )
    assert (r.id, r.model) == ("QUVVadTSNJ6_qtsPvN7J8Q0", "gemini-3-pro-preview")


def test_tool_result_on_next_request_and_usage_from_last_chunk() -> None:
    rt = _one("test_google_streaming_tool_call_thought_signature.yaml", 1)
    req = rt.request
    assert req is not None
    assert [m.role for m in req.messages] == ["user", "assistant", "user"]
    echoed = req.messages[1].parts[0]
    assert (
        echoed.tool_call is not None
        and echoed.tool_call.id == "pyd_ai_29bf73b69e02448588e15893d47a3e7e"
    )
    # The client sent the signature back URL-safe; it decodes to the same bytes as the server's.
    first = (
        _resp(_one("test_google_streaming_tool_call_thought_signature.yaml", 0))
        .parts[0]
        .provider_details
    )
    assert first is not None and echoed.provider_details is not None
    assert base64.urlsafe_b64decode(
        echoed.provider_details["thought_signature"]
    ) == base64.b64decode(first["thought_signature"])
    result = req.messages[2].parts[0]
    assert result.kind == "tool_result" and result.tool_result is not None
    assert (result.tool_result.call_id, result.tool_result.name, result.tool_result.content) == (
        "pyd_ai_29bf73b69e02448588e15893d47a3e7e",
        "get_country",
        "Mexico",
    )
    assert req.tools[0].name == "get_country" and req.tools[0].parameters == {
        "additionalProperties": False,
        "properties": {},
        "type": "object",
    }
    r = _resp(rt)
    assert r.text == "The capital of Mexico is Mexico City."
    # promptTokenCount changed on the last chunk
    assert r.usage is not None and r.usage.input_tokens == 257


def test_thinking_stream_merges_parts_and_keeps_signature_on_its_part() -> None:
    r = _resp(_one("test_google_model_thinking_part_iter.yaml", 0))
    assert [p.kind for p in r.parts] == ["reasoning", "text"]
    assert (
        r.parts[0].text
        and r.parts[0].text.startswith("**Clarifying User Goals**")
        and "**Developing a Safety Protocol**" in r.parts[0].text
    )
    assert r.parts[0].provider_details is None
    assert (
        r.parts[1].provider_details is not None
        and "thought_signature" in r.parts[1].provider_details
    )
    assert (
        r.usage is not None
        and r.usage.reasoning_tokens
        and r.usage.output_tokens
        and r.usage.output_tokens > r.usage.reasoning_tokens
    )


def test_tool_use_prompt_tokens_count_as_input() -> None:
    r = _resp(_one("test_google_model_file_search_tool_stream.yaml", 3))
    assert r.usage is not None and r.usage.raw is not None
    assert (
        r.usage.input_tokens
        == r.usage.raw["promptTokenCount"] + r.usage.raw["toolUsePromptTokenCount"]
    )
    assert [p.kind for p in r.parts] == ["other", "text"]  # executableCode, then the answer
    assert r.parts[0].provider_details and "executableCode" in r.parts[0].provider_details["block"]


def test_server_side_tool_invocations() -> None:
    r = _resp(_one("test_native_output_with_builtin_tools_stream.yaml", 0))
    kinds = [(p.kind, p.tool_call.kind if p.tool_call else None) for p in r.parts]
    assert kinds[:2] == [("tool_call", "server"), ("tool_result", None)]
    assert r.parts[0].tool_call is not None and r.parts[0].tool_call.name == "GOOGLE_SEARCH_WEB"
    assert (
        r.parts[1].tool_result is not None
        and r.parts[1].tool_result.call_id == r.parts[0].tool_call.id
    )
    assert r.finish_reason is FinishReason.COMPLETE  # server calls are not client tool calls


def test_snake_case_request() -> None:
    rt = _one("test_multimodal_tool_return_matrix[direct-binary-audio-google_vertex].yaml", 1)
    req = rt.request
    assert req is not None
    calls = [p for m in req.messages for p in m.parts if p.kind == "tool_call"]
    results = [p for m in req.messages for p in m.parts if p.kind == "tool_result"]
    assert calls and results
    assert calls[0].provider_details and "thought_signature" in calls[0].provider_details
    assert results[0].tool_result and results[0].tool_result.content.startswith('{"error":')


def test_function_response_with_multimodal_parts() -> None:
    rt = _one(
        "test_multimodal_tool_return_matrix[direct-uploaded_file-document-google_gemini3].yaml", 2
    )
    assert rt.request is not None
    results = [p.tool_result for m in rt.request.messages for p in m.parts if p.tool_result]
    assert any(r.content == "[application/pdf]" for r in results)


def test_safety_block_has_zero_output_derived_from_total() -> None:
    r = _resp(_one("test_google_model_safety_settings.yaml", 0))
    assert r.finish_reason_raw == "SAFETY" and r.finish_reason is FinishReason.FILTERED
    assert r.parts == []
    assert r.usage is not None and (
        r.usage.input_tokens,
        r.usage.output_tokens,
        r.usage.reasoning_tokens,
    ) == (14, 0, None)
    assert (
        r.provider_details
        and r.provider_details["candidate"]["safetyRatings"][0]["blocked"] is True
    )


def test_prompt_blocked_without_candidates() -> None:
    r = _resp(_one("test_google_model_armor_prompt_template_text_gets_blocked.yaml", 1))
    assert r.finish_reason_raw == "MODEL_ARMOR" and r.finish_reason is FinishReason.PROMPT_BLOCKED
    assert r.complete is True and r.parts == []
    assert r.usage is not None and r.usage.input_tokens is None and r.usage.output_tokens is None


def test_unexpected_tool_call_is_a_tool_call_error() -> None:
    r = _resp(_one("test_multimodal_tool_return_matrix[direct-binary-audio-google_vertex].yaml", 0))
    assert (
        r.finish_reason_raw == "UNEXPECTED_TOOL_CALL"
        and r.finish_reason is FinishReason.TOOL_CALL_ERROR
    )
    assert r.provider_details and r.provider_details["candidate"]["finishMessage"].startswith(
        "Unexpected tool call"
    )


def test_corpus_http_error() -> None:
    rt = _one("test_model_name_suggestion[google].yaml", 0)
    err = _resp(rt).error
    assert err is not None
    assert (err.status, err.type, err.code) == (404, "NOT_FOUND", "404")
    assert err.message and err.message.startswith("models/gemini-3.6-flahs is not found")


# --- requests -----------------------------------------------------------------------------------


def test_request_fields() -> None:
    body = {
        "system_instruction": {"parts": [{"text": "be brief"}]},
        "contents": [
            {
                "parts": [
                    {"text": "look"},
                    {"inline_data": {"mime_type": "image/png", "data": "AAAA"}},
                ]
            },
            {
                "role": "model",
                "parts": [
                    {"text": "hmm", "thought": True},
                    {"functionCall": {"name": "f", "args": {"a": 1}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "f", "response": {"output": "done"}}},
                    {"videoMetadata": {"fps": 1}},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "f", "description": "d", "parameters": {"type": "OBJECT"}}
                ]
            },
            {"googleSearch": {}},
            {"code_execution": {}},
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 50},
        "safetySettings": [],
    }
    req = G.parse_request(body, urlsplit(AI_STUDIO + ":generateContent"))
    assert [p.text for p in req.system] == ["be brief"]
    assert [m.role for m in req.messages] == ["user", "assistant", "user"]
    assert [p.kind for p in req.messages[0].parts] == ["text", "media"]
    assert req.messages[0].parts[1].media_type == "image/png"
    assert [p.kind for p in req.messages[1].parts] == ["reasoning", "tool_call"]
    assert req.messages[1].parts[1].tool_call is not None and req.messages[1].parts[
        1
    ].tool_call.arguments == {"a": 1}
    assert (
        req.messages[2].parts[0].tool_result is not None
        and req.messages[2].parts[0].tool_result.content == "done"
    )
    assert req.messages[2].parts[1].kind == "other"
    assert [(t.name, t.kind) for t in req.tools] == [
        ("f", "function"),
        ("googleSearch", "googleSearch"),
        ("codeExecution", "codeExecution"),
    ]
    assert req.tools[0].parameters == {"type": "OBJECT"}
    assert req.tool_choice_mode == "tool:f"
    assert req.params == {"temperature": 0.2, "maxOutputTokens": 50, "safetySettings": []}
    assert req.model == "gemini-2.5-flash" and req.stream is False


@pytest.mark.parametrize(
    ("config", "mode"),
    [
        ({"functionCallingConfig": {"mode": "AUTO"}}, "auto"),
        ({"functionCallingConfig": {"mode": "ANY"}}, "required"),
        (
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a", "b"]}},
            "required",
        ),
        ({"function_calling_config": {"mode": "NONE"}}, "none"),
        ({"functionCallingConfig": {"mode": "VALIDATED"}}, "validated"),
        ({"functionCallingConfig": {"mode": "SOMETHING_NEW"}}, "something_new"),
        ({"includeServerSideToolInvocations": True}, None),
    ],
)
def test_tool_choice_mode(config: dict[str, Any], mode: str | None) -> None:
    req = G.parse_request(
        {"contents": [], "toolConfig": config}, urlsplit(AI_STUDIO + ":generateContent")
    )
    assert req.tool_choice == config and req.tool_choice_mode == mode


# --- hand-made streams ----------------------------------------------------------------------------


def test_truncated_stream_is_incomplete() -> None:
    body = _sse(
        _chunk(
            [{"text": "Once upon"}],
            usage={"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        )
    )
    r = _resp(_stream(body))
    assert r.text == "Once upon"
    assert r.complete is False and r.finish_reason is None
    assert r.usage is not None and r.usage.output_tokens == 2


def test_mid_stream_error_chunk() -> None:
    err = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    r = _resp(_stream(_sse(_chunk([{"text": "Par"}]), err)))
    assert r.text == "Par"
    assert (
        r.error is not None
        and r.error.in_stream
        and (r.error.status, r.error.type) == (503, "UNAVAILABLE")
    )
    assert r.complete is False and r.finish_reason is FinishReason.ERROR


def test_mid_stream_error_without_data_prefix() -> None:
    body = (
        _sse(_chunk([{"text": "Par"}]))
        + b'{\n  "error": {\n    "code": 500,\n    "message": "Internal error",\n    "status": '
        b'"INTERNAL"\n  }\n}\n'
    )
    r = _resp(_stream(body))
    assert r.error is not None and r.error.in_stream and r.complete is False


def test_unknown_finish_reason_and_unknown_part() -> None:
    body = _sse(_chunk([{"hologram": {"x": 1}}, {"text": "ok"}], finish="BRAND_NEW_REASON"))
    r = _resp(_stream(body))
    assert r.finish_reason_raw == "BRAND_NEW_REASON" and r.finish_reason is FinishReason.OTHER
    # a part of a kind no reader knows: kept whole, named by its key (said unread, issue 102)
    assert r.parts[0].kind == "other" and r.parts[0].provider_details == {
        "block": {"hologram": {"x": 1}},
        "type": "hologram",
    }
    assert r.complete is True


def test_malformed_function_call_without_content() -> None:
    chunk = {
        "candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
    }
    r = _resp(_stream(_sse(_chunk([{"text": "Let me"}]), chunk)))
    assert (
        r.finish_reason is FinishReason.TOOL_CALL_ERROR
        and r.complete is True
        and r.text == "Let me"
    )


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ("TOO_MANY_TOOL_CALLS", FinishReason.TOOL_LOOP_LIMIT),
        ("MAX_TOKENS", FinishReason.TRUNCATED_LENGTH),
        ("RECITATION", FinishReason.FILTERED),
        ("LANGUAGE", FinishReason.OTHER),
    ],
)
def test_finish_classes(raw: str, cls: FinishReason) -> None:
    r = G.parse_response(_chunk([{"functionCall": {"name": "f", "args": {}}}], finish=raw))
    assert r.finish_reason is cls and r.complete is True


def test_signature_on_trailing_empty_text_and_separate_signed_parts() -> None:
    body = _sse(
        _chunk([{"text": "A", "thoughtSignature": "c2lnMQ=="}]),
        _chunk([{"text": "B"}]),
        _chunk([{"text": "C", "thoughtSignature": "c2lnMg=="}]),
        _chunk([{"text": "", "thoughtSignature": "c2lnMw=="}], finish="STOP"),
        sep="\n\n",
    )
    r = _resp(_stream(body))
    assert [(p.text, (p.provider_details or {}).get("thought_signature")) for p in r.parts] == [
        ("AB", "c2lnMQ=="),
        ("C", "c2lnMg=="),
        ("", "c2lnMw=="),
    ]


def test_signature_only_part_attaches_to_the_text_before_it() -> None:
    body = _sse(_chunk([{"text": "Hi"}]), _chunk([{"thoughtSignature": "c2ln"}], finish="STOP"))
    r = _resp(_stream(body))
    assert [(p.kind, p.text, p.provider_details) for p in r.parts] == [
        ("text", "Hi", {"thought_signature": "c2ln"})
    ]


def test_parallel_calls_stay_separate_and_ordered() -> None:
    body = _sse(
        _chunk(
            [
                {"functionCall": {"name": "a", "args": {"x": 1}}},
                {"functionCall": {"name": "a", "args": {"x": 2}}},
            ]
        ),
        _chunk([{"functionCall": {"name": "b", "args": {}, "id": "c3"}}], finish="STOP"),
    )
    r = _resp(_stream(body))
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        (None, "a", {"x": 1}),
        (None, "a", {"x": 2}),
        ("c3", "b", {}),
    ]
    assert r.finish_reason is FinishReason.TOOL_CALL


def test_vertex_streamed_function_call_arguments() -> None:
    body = _sse(
        _chunk([{"functionCall": {"name": "write", "willContinue": True}}]),
        _chunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [
                            {"jsonPath": "$.path", "stringValue": "a.txt"},
                            {"jsonPath": "$.text", "stringValue": "hel", "willContinue": True},
                        ],
                        "willContinue": True,
                    }
                }
            ]
        ),
        _chunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [
                            {"jsonPath": "$.text", "stringValue": "lo"},
                            {"jsonPath": "$.opts.n", "numberValue": 2},
                            {"jsonPath": "$.tags[1]", "boolValue": True},
                        ],
                        "willContinue": True,
                    }
                }
            ]
        ),
        _chunk([{"functionCall": {}}], finish="STOP"),
    )
    r = _resp(
        _stream(
            body,
            url="https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/"
            "google/models/gemini-3-pro:streamGenerateContent?alt=sse",
        )
    )
    assert len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert call.name == "write"
    assert call.arguments == {
        "path": "a.txt",
        "text": "hello",
        "opts": {"n": 2},
        "tags": [None, True],
    }


def test_json_array_stream_gives_the_same_result() -> None:
    chunks = [
        _chunk(
            [{"text": "Hel"}],
            usage={"promptTokenCount": 4, "candidatesTokenCount": 1, "totalTokenCount": 5},
        ),
        _chunk(
            [{"text": "lo"}],
            finish="STOP",
            usage={
                "promptTokenCount": 4,
                "candidatesTokenCount": 2,
                "thoughtsTokenCount": 7,
                "totalTokenCount": 13,
            },
        ),
    ]
    pieces = [b"[" + orjson.dumps(chunks[0]), b",\r\n" + orjson.dumps(chunks[1]), b"]"]
    ex = Exchange(
        "POST",
        AI_STUDIO + ":streamGenerateContent",
        request_body=b'{"contents":[]}',
        status=200,
        response_chunks=[(0.1 * i, c) for i, c in enumerate(pieces)],
    )
    rt = parse_exchange(ex)
    assert rt.framing == "json_array" and not rt.analysis_errors
    r = _resp(rt)
    assert r.text == "Hello" and r.complete is True and r.events == 2
    assert r.usage is not None and (
        r.usage.input_tokens,
        r.usage.output_tokens,
        r.usage.reasoning_tokens,
    ) == (4, 9, 7)
    sse = _resp(_stream(_sse(*chunks)))
    assert (sse.parts, sse.usage, sse.finish_reason) == (r.parts, r.usage, r.finish_reason)


def test_cut_json_array_stream_is_incomplete() -> None:
    pieces = [
        b"[" + orjson.dumps(_chunk([{"text": "Hel"}])),
        b',\r\n{"candidates": [{"content": {"par',
    ]
    ex = Exchange(
        "POST",
        AI_STUDIO + ":streamGenerateContent",
        request_body=b'{"contents":[]}',
        status=200,
        response_chunks=[(0.1, pieces[0]), (0.2, pieces[1])],
    )
    r = _resp(parse_exchange(ex))
    assert r.text == "Hel" and r.complete is False


# --- errors ---------------------------------------------------------------------------------------


def test_error_wrapped_in_a_list_keeps_retry_info() -> None:
    body = [
        {
            "error": {
                "code": 429,
                "message": "You exceeded your current quota, please "
                "check your plan and billing details.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}
                        ],
                    },
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
                ],
            }
        }
    ]
    ex = Exchange(
        "POST",
        STREAM_URL,
        request_body=b'{"contents":[]}',
        status=429,
        response_chunks=[(0.1, orjson.dumps(body))],
    )
    err = _resp(parse_exchange(ex)).error
    assert err is not None and (err.status, err.type, err.code) == (
        429,
        "RESOURCE_EXHAUSTED",
        "429",
    )
    assert err.raw["error"]["details"][1]["retryDelay"] == "37s"  # the list wrapper is unwrapped


def test_error_info_reason_becomes_the_code() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            ],
        }
    }
    err = G.parse_error(orjson.dumps(body).decode(), 400)
    assert (err.status, err.type, err.code, err.message) == (
        400,
        "INVALID_ARGUMENT",
        "API_KEY_INVALID",
        "API key not valid.",
    )
    assert G.parse_error("upstream connect error", 502).message == "upstream connect error"


def test_usage_missing_counts_stay_unknown() -> None:
    u = usage_from(
        {
            "promptTokenCount": 10,
            "cachedContentTokenCount": 6,
            "candidatesTokenCount": 3,
            "totalTokenCount": 13,
        }
    )
    assert u is not None and (
        u.input_tokens,
        u.cache_read_tokens,
        u.output_tokens,
        u.reasoning_tokens,
    ) == (
        10,
        6,
        3,
        None,
    )
    empty = usage_from({"trafficType": "ON_DEMAND"})
    assert empty is not None and (empty.input_tokens, empty.output_tokens, empty.total_tokens) == (
        None,
        None,
        None,
    )


def test_registry_routes_gemini_and_its_openai_compat_endpoint_apart() -> None:
    body = {"contents": [{"parts": [{"text": "x"}]}]}
    p = detect("POST", urlsplit(AI_STUDIO + ":generateContent"), body)
    assert p is not None and p.family == "gemini"
    compat = detect(
        "POST",
        urlsplit("https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"),
        {"messages": []},
    )
    assert compat is not None and compat.family == "openai_chat"
