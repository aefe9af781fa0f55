"""OpenAI Responses adapter: the real recordings first, hand-written wire samples for the rest."""

from __future__ import annotations

import glob
from collections.abc import Iterator
from functools import cache
from urllib.parse import urlsplit

import orjson
import pytest
from real_corpus import CORPUS, corpus_exchanges, corpus_files, rel

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.providers.openai_responses import OpenAIResponses
from looptap.cassettes.wire import Event, Exchange, Framed, frame, parse_sse

A = OpenAIResponses()


@cache
def _exchanges() -> tuple[tuple[str, int, Exchange, RoundTrip], ...]:
    """Every corpus exchange whose URL mentions a Responses-family path (or a neighbour we must not
    claim)."""
    out = []
    for path in corpus_files():
        if not any(
            n in path.read_bytes()
            for n in (b"/responses", b"/conversations", b"/vector_stores", b"/v1/files")
        ):
            continue
        for p, i, ex in corpus_exchanges(glob.escape(str(path.relative_to(CORPUS)))):
            out.append((rel(p), i, ex, parse_exchange(ex)))
    return tuple(out)


def _ours() -> Iterator[tuple[str, int, Exchange, RoundTrip]]:
    return (t for t in _exchanges() if t[3].family == "openai_responses")


def _one(name: str, index: int = 0) -> RoundTrip:
    for r, i, _, rt in _exchanges():
        if r.endswith(name) and i == index:
            return rt
    raise LookupError(name)


def _sse(*events: dict[str, object], done: bool = False, names: bool = True) -> Framed:
    body = b""
    for e in events:
        if names:
            body += b"event: " + str(e["type"]).encode() + b"\n"
        body += b"data: " + orjson.dumps(e) + b"\n\n"
    if done:
        body += b"data: [DONE]\n\n"
    return parse_sse([(None, body)])


# --- corpus ------------------------------------------------------------------------------------


def test_corpus_has_responses_traffic() -> None:
    ops = {rt.operation for *_, rt in _ours()}
    assert {"generate", "retrieve", "compact", "count_tokens"} <= ops
    assert sum(1 for *_, rt in _ours() if rt.operation == "generate") > 300


def test_corpus_parses_without_analysis_errors() -> None:
    bad = [(r, i, rt.analysis_errors) for r, i, _, rt in _ours() if rt.analysis_errors]
    assert bad == []


def test_corpus_generate_calls_have_request_and_response() -> None:
    for r, i, ex, rt in _ours():
        if rt.operation != "generate":
            continue
        assert rt.request is not None, (r, i)
        assert rt.response is not None, (r, i)
        if (ex.status or 0) >= 400:
            assert rt.response.error is not None and rt.response.error.message, (r, i)
        else:
            assert rt.response.complete is True, (r, i)
            assert rt.response.finish_reason_raw is not None, (r, i)


def test_neighbour_endpoints_are_not_claimed() -> None:
    others = [
        (ex.method, urlsplit(ex.url).path)
        for *_, ex, rt in _exchanges()
        if rt.family == "openai_responses"
    ]
    assert not any(
        p.startswith(("/v1/conversations", "/v1/files", "/v1/vector_stores")) for _, p in others
    )
    seen = [
        rt.family
        for *_, ex, rt in _exchanges()
        if "/conversations" in ex.url or "/vector_stores" in ex.url
    ]
    assert seen and "openai_responses" not in seen  # the corpus does have them


def test_every_corpus_stream_accumulates_like_its_terminal_event() -> None:
    """Drop the terminal event: the accumulated items must give the same text, calls and
    reasoning."""
    compared = 0
    for r, i, ex, rt in _ours():
        if rt.framing != "sse" or rt.operation != "generate" or rt.response is None:
            continue
        framed = frame(ex.response_chunks)
        cut = Framed("sse", [e for e in framed.events if '"response.completed"' not in e.data])
        partial = A.reassemble(cut)
        full = rt.response
        assert partial.complete is False and full.complete is True, (r, i)
        assert partial.usage is None and partial.finish_reason is None, (r, i)
        assert partial.text == full.text, (r, i)
        got = [(c.id, c.name, c.arguments) for c in partial.tool_calls]
        assert got == [(c.id, c.name, c.arguments) for c in full.tool_calls], (r, i)
        assert [p.kind for p in partial.parts] == [p.kind for p in full.parts], (r, i)
        compared += 1
    assert compared >= 35


def test_function_call_stream() -> None:
    rt = _one("test_openai_responses/test_openai_responses_stream.yaml", 0)
    resp = rt.response
    assert resp is not None and rt.stream and resp.complete
    (call,) = resp.tool_calls
    assert call.id == "call_kL0PCQV7M2WMoVX8V8OtYSAL" and call.name == "get_capital"
    assert call.arguments == {"country": "France"} and call.arguments_raw == '{"country":"France"}'
    assert resp.parts[0].provider_details == {
        "id": "fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2",
        "status": "completed",
    }
    assert resp.finish_reason_raw == "completed" and resp.finish_reason is FinishReason.TOOL_CALL
    assert resp.usage is not None and (
        resp.usage.input_tokens,
        resp.usage.output_tokens,
        resp.usage.total_tokens,
    ) == (255, 16, 271)


def test_tool_result_request_keeps_the_wire_call_id() -> None:
    # This 2025 recording sent the item id (fc_…) as call_id; the adapter reports what travelled.
    req = _one("test_openai_responses/test_openai_responses_stream.yaml", 1).request
    assert req is not None and req.history_key == "input"
    assert [m.role for m in req.messages] == ["user", "assistant", "tool"]
    result = req.messages[2].parts[0].tool_result
    assert result is not None and result.call_id.startswith("fc_") and result.content == "Paris"  # type: ignore[union-attr]
    assert req.system == []  # instructions "" is no system prompt


def test_openrouter_stream_without_event_names_and_with_done() -> None:
    resp = _one("test_openai_responses_raw_cot_stream_openrouter.yaml").response
    assert resp is not None and resp.complete and resp.text == "4"
    assert resp.parts[0].kind == "reasoning" and "2+2" in (resp.parts[0].text or "")
    assert resp.provider_details is not None and resp.provider_details["done_sentinel"] is True


def test_hand_edited_status_is_flagged_not_fatal() -> None:
    resp = _one("test_openai_responses/test_openai_previous_response_id.yaml").response
    assert resp is not None
    assert resp.finish_reason_raw == "complete" and resp.finish_reason is FinishReason.OTHER
    assert (
        resp.provider_details is not None and resp.provider_details["unknown_status"] == "complete"
    )


def test_background_queued_is_not_a_finish() -> None:
    resp = _one("test_background_mode_vcr.yaml").response
    assert resp is not None and resp.finish_reason_raw == "queued" and resp.finish_reason is None
    assert resp.usage is None and resp.parts == []


def test_background_resumed_stream_reassembles() -> None:
    rt = _one("test_background_mode_streaming_starting_after_vcr.yaml", 1)
    assert rt.operation == "retrieve" and rt.stream
    ex = next(
        ex
        for r, i, ex, _ in _exchanges()
        if r.endswith("test_background_mode_streaming_starting_after_vcr.yaml") and i == 1
    )
    resp = A.reassemble(frame(ex.response_chunks))
    assert (
        resp.complete
        and resp.text == "2 + 2 equals 4."
        and resp.finish_reason is FinishReason.COMPLETE
    )


def test_background_retrieve_that_returns_the_call_is_the_turn_that_delivered_it() -> None:
    """pydantic-ai's background mode with a tool: POST (queued), GET until the response holds the
    function call, POST the output. The retrieve is the turn the call came on, and the output pairs
    with it (issue 45; before, the call was never seen: pydantic-ai re-sends it in ``input``, so
    only clients that continue by ``previous_response_id`` alone got a false orphan)."""
    name = "test_background_mode_with_tool_vcr.yaml"
    rt = _one(name, 1)
    assert (
        rt.operation == "generate"
        and rt.polled
        and [c.name for c in rt.response.tool_calls] == ["get_weather"]
    )  # type: ignore[union-attr]
    exs = [ex for r, _, ex, _ in _exchanges() if r.endswith(name)]
    run = analyse(exs)
    assert sorted(run.turns) == [0, 1, 2] and run.findings == []
    assert [p.call_turn for p in run.turns[2].c.pairings] == [1]


def test_http_error() -> None:
    resp = _one("test_openai_responses_model_http_error.yaml").response
    assert resp is not None and resp.error is not None
    assert (resp.error.status, resp.error.type, resp.error.code) == (
        400,
        "invalid_request_error",
        "decimal_below_min_value",
    )


def test_string_input_and_previous_response_id() -> None:
    # (a retrieve read as the model call that delivered its calls sends no input: not a string
    # input)
    strings = [
        rt.request
        for *_, rt in _ours()
        if rt.request is not None and rt.request.history_key is None and not rt.polled
    ]
    assert strings and all(len(r.messages) == 1 and r.messages[0].role == "user" for r in strings)
    req = _one("test_openai_responses/test_openai_previous_response_id.yaml", 1).request
    assert req is not None and req.previous_response_id == "resp_1234"


def test_reasoning_items_keep_encrypted_content() -> None:
    found = [
        p
        for *_, rt in _ours()
        if rt.request is not None
        for m in rt.request.messages
        for p in m.parts
        if p.kind == "reasoning"
        and p.provider_details
        and p.provider_details.get("encrypted_content")
    ]
    assert found
    assert all(
        p.provider_details and str(p.provider_details.get("id", "")).startswith("rs_")
        for p in found[:5]
    )


def test_cached_usage_is_inclusive() -> None:
    cached = [
        rt.response.usage
        for *_, rt in _ours()
        if rt.response and rt.response.usage and rt.response.usage.cache_read_tokens
    ]
    assert cached
    for u in cached:
        assert (
            u.input_tokens is not None
            and u.cache_read_tokens is not None
            and u.input_tokens >= u.cache_read_tokens
        )


# --- recognition and operations ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "operation"),
    [
        ("POST", "https://api.openai.com/v1/responses", "generate"),
        ("POST", "https://x.openai.azure.com/openai/v1/responses?api-version=preview", "generate"),
        ("POST", "http://localhost:8787/openai/responses", "generate"),
        ("POST", "https://openrouter.ai/api/v1/responses", "generate"),
        ("GET", "https://api.openai.com/v1/responses/resp_1", "retrieve"),
        ("POST", "https://api.openai.com/v1/responses/resp_1/cancel", "cancel"),
        ("POST", "https://api.openai.com/v1/responses/input_tokens", "count_tokens"),
        ("POST", "https://api.openai.com/v1/responses/compact", "compact"),
    ],
)
def test_recognise_and_operation(method: str, url: str, operation: str) -> None:
    u = urlsplit(url)
    assert A.recognise(method, u, {"input": "hi", "model": "m"}) > 0
    assert A.operation(method, u) == operation


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1/conversations",
        "https://api.openai.com/v1/files",
        "https://api.openai.com/v1/vector_stores/vs_1/files",
        "https://api.openai.com/v1/chat/completions",
    ],
)
def test_not_recognised(url: str) -> None:
    assert A.recognise("POST", urlsplit(url), {"input": "hi", "model": "m"}) == 0


# --- request parsing (hand-written) -----------------------------------------------------------


def test_request_items() -> None:
    body = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Use tools."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "hi"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAA"},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "think"}],
                "encrypted_content": "xyz",
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "f",
                "arguments": '{"a":1}',
            },
            {"type": "custom_tool_call", "call_id": "call_2", "name": "g", "input": "raw text"},
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": [{"type": "input_text", "text": "ok"}],
            },
            {"type": "custom_tool_call_output", "call_id": "call_2", "output": "done"},
            {"type": "item_reference", "id": "msg_9"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        ],
        "tools": [
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            {"type": "custom", "name": "g"},
            {"type": "web_search"},
            {"type": "mcp", "server_label": "docs"},
        ],
        "tool_choice": {"type": "function", "name": "f"},
        "previous_response_id": "resp_0",
        "temperature": 0.2,
    }
    req = A.parse_request(body, urlsplit("https://api.openai.com/v1/responses"))
    assert [p.text for p in req.system] == ["Be brief.", "Use tools."]
    assert [m.role for m in req.messages] == [
        "developer",
        "user",
        "assistant",
        "tool",
        # one message per result, as Chat's tool messages (a history's parse then extends its
        # prefix's)
        "tool",
        "assistant",  # an item reference stands in the model-side turn (the analysis resolves it)
    ]
    ref = req.messages[5].parts[0]
    assert (
        ref.kind == "other"
        and ref.provider_details is not None
        and ref.provider_details["item_reference"] == "msg_9"
    )
    user = req.messages[1]
    assert [p.kind for p in user.parts] == ["text", "media"] and user.parts[
        1
    ].media_type == "image/png"
    turn = req.messages[2]
    assert [p.kind for p in turn.parts] == ["reasoning", "tool_call", "tool_call"]
    assert turn.parts[0].text == "think" and turn.parts[0].provider_details == {
        "id": "rs_1",
        "encrypted_content": "xyz",
    }
    call, custom = turn.parts[1].tool_call, turn.parts[2].tool_call
    assert call is not None and (call.id, call.name, call.arguments) == ("call_1", "f", {"a": 1})
    assert custom is not None and (custom.kind, custom.arguments) == ("custom", "raw text")
    results = [p.tool_result for m in req.messages[3:5] for p in m.parts]
    assert [(r.call_id, r.content) for r in results if r] == [("call_1", "ok"), ("call_2", "done")]
    # the reference and the hosted call, one model-side turn
    assert [p.kind for p in req.messages[5].parts] == ["other", "other"]
    assert [(t.name, t.kind) for t in req.tools] == [
        ("f", "function"),
        ("g", "custom"),
        ("web_search", "web_search"),
        ("docs", "mcp"),
    ]
    assert req.tool_choice_mode == "tool:f" and req.previous_response_id == "resp_0"
    assert req.params == {"temperature": 0.2} and req.model == "gpt-5"


@pytest.mark.parametrize(
    ("choice", "mode"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ({"type": "allowed_tools", "mode": "required", "tools": []}, "required"),
        ({"type": "web_search"}, "tool:web_search"),
        ({"type": "mcp", "server_label": "s"}, "tool:s"),
    ],
)
def test_tool_choice_modes(choice: object, mode: str) -> None:
    req = A.parse_request(
        {"input": "x", "tool_choice": choice}, urlsplit("https://api.openai.com/v1/responses")
    )
    assert req.tool_choice_mode == mode and req.history_key is None


# --- response parsing (hand-written) ----------------------------------------------------------


def _body(status: str, **extra: object) -> dict[str, object]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": "m",
        "output": [],
        "error": None,
        "incomplete_details": None,
        **extra,
    }


@pytest.mark.parametrize(
    ("status", "extra", "raw", "cls"),
    [
        (
            "incomplete",
            {"incomplete_details": {"reason": "max_output_tokens"}},
            "incomplete:max_output_tokens",
            FinishReason.TRUNCATED_LENGTH,
        ),
        (
            "incomplete",
            {"incomplete_details": {"reason": "content_filter"}},
            "incomplete:content_filter",
            FinishReason.FILTERED,
        ),
        (
            "incomplete",
            {"incomplete_details": {"reason": "brand_new"}},
            "incomplete:brand_new",
            FinishReason.OTHER,
        ),
        ("cancelled", {}, "cancelled", FinishReason.CANCELLED),
        ("in_progress", {}, "in_progress", None),
        ("paused_forever", {}, "paused_forever", FinishReason.OTHER),
    ],
)
def test_finish_states(
    status: str, extra: dict[str, object], raw: str, cls: FinishReason | None
) -> None:
    resp = A.parse_response(_body(status, **extra))
    assert (resp.finish_reason_raw, resp.finish_reason) == (raw, cls)


def test_failed_response_carries_the_error() -> None:
    resp = A.parse_response(_body("failed", error={"code": "server_error", "message": "boom"}))
    assert resp.finish_reason is FinishReason.ERROR
    assert resp.error is not None and (resp.error.code, resp.error.message) == (
        "server_error",
        "boom",
    )


def test_output_items_in_order_and_unknown_items_kept() -> None:
    resp = A.parse_response(
        _body(
            "completed",
            output=[
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "hm"}],
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [
                        {"type": "refusal", "refusal": "no"},
                        {
                            "type": "output_text",
                            "text": "ok",
                            "annotations": [{"type": "url_citation"}],
                        },
                    ],
                },
                {"type": "hologram_call", "id": "h_1"},
            ],
            usage={
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 3},
                "total_tokens": 15,
            },
        )
    )
    assert [p.kind for p in resp.parts] == ["reasoning", "refusal", "text", "other"]
    assert resp.parts[0].text == "hm" and resp.parts[2].provider_details == {
        "id": "msg_1",
        "annotations": [{"type": "url_citation"}],
    }
    assert resp.finish_reason is FinishReason.COMPLETE
    u = resp.usage
    assert u is not None and (
        u.input_tokens,
        u.cache_read_tokens,
        u.output_tokens,
        u.reasoning_tokens,
        u.total_tokens,
        u.cache_write_tokens,
    ) == (10, 4, 5, 3, 15, None)


# --- streams (hand-written) -------------------------------------------------------------------

_CREATED = {"type": "response.created", "response": _body("in_progress")}
_MSG = [
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
    },
    {
        "type": "response.content_part.added",
        "output_index": 0,
        "content_index": 0,
        "part": {"type": "output_text", "text": ""},
    },
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hel"},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "lo"},
]
_CALL = [
    {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": "",
        },
    },
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":'},
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"},
]


def test_truncated_stream_is_incomplete_with_partial_content() -> None:
    resp = A.reassemble(_sse(_CREATED, *_MSG, *_CALL))
    assert resp.complete is False and resp.finish_reason is None and resp.usage is None
    assert resp.text == "Hello"
    (call,) = resp.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "f", {"a": 1})
    assert resp.events == 1 + len(_MSG) + len(_CALL)


def test_error_event_mid_stream() -> None:
    err = {
        "type": "error",
        "code": "server_error",
        "message": "The server had an error",
        "param": None,
        "sequence_number": 5,
    }
    resp = A.reassemble(_sse(_CREATED, *_MSG, err))
    assert resp.complete is False and resp.finish_reason is FinishReason.ERROR
    assert resp.error is not None and resp.error.in_stream and resp.error.code == "server_error"
    assert resp.text == "Hello"


def test_incomplete_terminal_event() -> None:
    final = _body(
        "incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        output=None,
        usage={"input_tokens": 3, "output_tokens": 7, "total_tokens": 10},
    )
    resp = A.reassemble(_sse(_CREATED, *_MSG, {"type": "response.incomplete", "response": final}))
    assert resp.complete is True and resp.finish_reason is FinishReason.TRUNCATED_LENGTH
    assert resp.finish_reason_raw == "incomplete:max_output_tokens"
    assert resp.text == "Hello"  # output null in the terminal event: rebuilt from the stream
    assert resp.usage is not None and resp.usage.output_tokens == 7


def test_failed_terminal_event() -> None:
    final = _body("failed", error={"code": "rate_limit_exceeded", "message": "slow down"})
    resp = A.reassemble(_sse(_CREATED, {"type": "response.failed", "response": final}))
    assert resp.complete is True and resp.finish_reason is FinishReason.ERROR
    assert (
        resp.error is not None and resp.error.in_stream and resp.error.code == "rate_limit_exceeded"
    )


def test_terminal_event_is_authoritative_and_unknown_events_ignored() -> None:
    final = _body(
        "completed",
        output=[
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello!"}],
            }
        ],
    )
    odd = {"type": "response.teleport.delta", "output_index": 0, "delta": "?"}
    resp = A.reassemble(
        _sse(
            _CREATED,
            *_MSG,
            odd,
            {"type": "response.completed", "response": final},
            names=False,
            done=True,
        )
    )
    assert (
        resp.complete is True
        and resp.text == "Hello!"
        and resp.finish_reason is FinishReason.COMPLETE
    )


def test_reasoning_summary_and_refusal_deltas() -> None:
    events = [
        _CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []},
        },
        {
            "type": "response.reasoning_summary_part.added",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "Think",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "ing",
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        },
        {
            "type": "response.content_part.added",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "refusal", "refusal": ""},
        },
        {
            "type": "response.refusal.delta",
            "output_index": 1,
            "content_index": 0,
            "delta": "I can't",
        },
    ]
    resp = A.reassemble(_sse(*events))
    assert [(p.kind, p.text) for p in resp.parts] == [
        ("reasoning", "Thinking"),
        ("refusal", "I can't"),
    ]


def test_garbage_event_is_counted_not_fatal() -> None:
    framed = Framed("sse", [Event(data="{not json", event="response.output_text.delta")])
    resp = A.reassemble(framed)
    assert resp.complete is False and resp.provider_details == {"unparsed_events": 1}
