"""The official SDKs against replayed answers that a rewriting fault changed: each family's SDK
call, streamed and not, what it surfaced (finish, text, refusal, tool calls), and a recording of
a real tool-calling answer paired with the exact request the SDK sends (captured first)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.replay.serving.faults import FaultPlan, parse_fault
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.storage import load_vcr
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import write

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
_P = "pydantic-ai/tests/models/cassettes/"
#: A real answer with one tool call per family and mode (the recording the fault rewrites).
ANSWERS = {
    ("openai_chat", False): _P + "test_multimodal_tool_returns/"
    "test_multimodal_tool_return_matrix[direct-url-image-openai_chat].yaml#0",
    ("openai_chat", True): _P + "test_openai/test_run_stream_sync_streams_real_model.yaml#0",
    ("openai_responses", False): _P
    + "test_openai_responses/test_openai_responses_model_simple_response_with_tool_call.yaml#0",
    ("openai_responses", True): _P + "test_openai_responses/test_openai_responses_stream.yaml#0",
    ("anthropic", False): _P
    + "test_tool_choice_matrix/test_tool_choice_matrix[auto-anthropic].yaml#0",
    (
        "anthropic",
        True,
    ): "llm-anthropic/tests/cassettes/test_anthropic/test_stream_events_tool_calls.yaml#0",
    ("gemini", False): _P + "test_google/test_google_tool_output.yaml#0",
    (
        "gemini",
        True,
    ): "pydantic-ai/tests/models/google/cassettes/test_structured_output/"
    "test_native_output_with_function_tools_stream.yaml#0",
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


@dataclass
class Seen:
    """What the caller got, in one vocabulary across the SDKs."""

    finish: str | None = None
    text: str = ""
    refusal: str = ""
    # (name, arguments as the SDK gave them)
    calls: list[tuple[str, Any]] = field(default_factory=list)


def recorded_answer(family: str, stream: bool) -> tuple[Exchange, str, dict[str, Any]]:
    """The recorded exchange, its call's name, and the tool schema to offer under that name."""
    from looptap.cassettes.parsing import parse_exchange

    rel, _, idx = ANSWERS[(family, stream)].rpartition("#")
    ex = load_vcr(CORPUS / rel)[int(idx)]
    rt = parse_exchange(ex)
    assert rt.response is not None
    call = rt.response.tool_calls[0]
    assert isinstance(call.arguments, dict), call
    props = {
        k: {
            "type": {
                str: "string",
                int: "integer",
                float: "number",
                bool: "boolean",
                list: "array",
                dict: "object",
            }.get(type(v), "string")
        }
        for k, v in call.arguments.items()
    }
    schema = {
        "type": "object",
        "properties": props or {"x": {"type": "string"}},
        "required": sorted(props),
    }
    return ex, call.name or "", schema


def sdk_call(
    family: str, stream: bool, url: str, tool: str, schema: dict[str, Any], retries: int = 0
) -> Seen:
    if family in ("openai_chat", "openai_responses"):
        import openai

        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=retries)
        if family == "openai_chat":
            tools: Any = [{"type": "function", "function": {"name": tool, "parameters": schema}}]
            msgs: Any = [{"role": "user", "content": "Use the tool."}]
            if not stream:
                r = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=tools)
                m = r.choices[0].message
                return Seen(
                    r.choices[0].finish_reason,
                    m.content or "",
                    m.refusal or "",
                    [(c.function.name, c.function.arguments) for c in m.tool_calls or []],
                )
            seen, calls = Seen(), {}
            for ch in client.chat.completions.create(
                model="gpt-4o", messages=msgs, tools=tools, stream=True
            ):
                if not ch.choices:
                    continue
                d = ch.choices[0].delta
                seen.text += d.content or ""
                seen.refusal += d.refusal or ""
                for tc in d.tool_calls or []:
                    name, args = calls.get(tc.index, ("", ""))
                    calls[tc.index] = (
                        name + ((tc.function.name or "") if tc.function else ""),
                        args + ((tc.function.arguments or "") if tc.function else ""),
                    )
                seen.finish = ch.choices[0].finish_reason or seen.finish
            seen.calls = [calls[i] for i in sorted(calls)]
            return seen
        rtools: Any = [{"type": "function", "name": tool, "parameters": schema}]
        if stream:
            final = None
            for ev in client.responses.create(
                model="gpt-4o", input="Use the tool.", tools=rtools, stream=True
            ):
                if ev.type in ("response.completed", "response.incomplete"):
                    final = ev.response
                if ev.type == "error":  # the SDK hands an error event to the caller as an event
                    return Seen(f"error event ({ev.code})")
            if final is None:
                return Seen("stream ended without response.completed")
            r = final
        else:
            r = client.responses.create(model="gpt-4o", input="Use the tool.", tools=rtools)
        seen = Seen(r.status + (f":{r.incomplete_details.reason}" if r.incomplete_details else ""))
        for item in r.output:
            if item.type == "message":
                for part in item.content:
                    if part.type == "output_text":
                        seen.text += part.text
                    elif part.type == "refusal":
                        seen.refusal += part.refusal
            elif item.type == "function_call":
                seen.calls.append((item.name, item.arguments))
        return seen
    if family == "anthropic":
        import anthropic

        client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=retries)
        kw: Any = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "Use the tool."}],
            "tools": [{"name": tool, "input_schema": schema}],
        }
        if stream:
            with client.messages.stream(**kw) as s:
                m = s.get_final_message()
        else:
            m = client.messages.create(**kw)
        seen = Seen(m.stop_reason)
        for b in m.content:
            if b.type == "text":
                seen.text += b.text
            elif b.type == "tool_use":
                seen.calls.append((b.name, b.input))
        return seen
    from google import genai

    client = genai.Client(api_key="x", http_options={"base_url": url, "api_version": "v1beta"})
    config: Any = {
        "tools": [{"function_declarations": [{"name": tool, "parameters_json_schema": schema}]}],
        "automatic_function_calling": {"disable": True},
    }
    seen = Seen()
    responses = (
        client.models.generate_content_stream(
            model="gemini-2.0-flash", contents="Use the tool.", config=config
        )
        if stream
        else [
            client.models.generate_content(
                model="gemini-2.0-flash", contents="Use the tool.", config=config
            )
        ]
    )
    for r in responses:
        for cand in r.candidates or []:
            if cand.finish_reason is not None:
                seen.finish = (
                    cand.finish_reason.value
                    if hasattr(cand.finish_reason, "value")
                    else str(cand.finish_reason)
                )
            for part in (cand.content.parts if cand.content and cand.content.parts else []):
                if part.text:
                    seen.text += part.text
                if part.function_call:
                    seen.calls.append(
                        (part.function_call.name, dict(part.function_call.args or {}))
                    )
    return seen


def captured(call: Callable[[str], Any]) -> Exchange:
    """The request a client sends, captured by a first call (given the server's URL) that misses."""
    with ReplayServer(
        [
            Exchange(
                "POST",
                "https://example.invalid/none",
                [],
                b"{}",
                status=200,
                response_chunks=[(0.0, b"{}")],
            )
        ]
    ) as srv:
        try:
            call(srv.url)
        except Exception as exc:
            if not srv.served:
                raise RuntimeError(f"the client sent nothing: {exc!r}") from exc
        return srv.served[0]


def cassette_for(tmp: Path, family: str, stream: bool) -> tuple[Path, str, dict[str, Any]]:
    """A one-round-trip cassette: the request the SDK sends (captured from a first call that
    misses), answered by the real recorded tool-calling answer."""
    ex, tool, schema = recorded_answer(family, stream)
    sent = captured(lambda url: sdk_call(family, stream, url, tool, schema))
    origin = {
        "openai_chat": "https://api.openai.com",
        "openai_responses": "https://api.openai.com",
        "anthropic": "https://api.anthropic.com",
        "gemini": "https://generativelanguage.googleapis.com",
    }[family]
    target = sent.url.split("://", 1)[1].partition("/")[2]
    rec = Exchange(
        "POST",
        f"{origin}/{target}",
        [("content-type", "application/json")],
        sent.request_body,
        status=200,
        response_headers=[(k, v) for k, v in ex.response_headers if k.lower() in ("content-type",)]
        or [("content-type", "application/json")],
        response_chunks=ex.response_chunks,
        ttfb=0.01,
    )
    return write(tmp / f"{family}-{stream}.jsonl", [rec]), tool, schema


def replay(
    cas: Path, fault: str, family: str, stream: bool, tool: str, schema: dict[str, Any]
) -> tuple[Seen | BaseException, ReplayServer, FaultPlan]:
    plan = FaultPlan([parse_fault(fault)])
    with ReplayServer(cas, faults=plan) as srv:
        try:
            out: Seen | BaseException = sdk_call(family, stream, srv.url, tool, schema)
        except Exception as exc:
            out = exc
    return out, srv, plan


def is_json(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


__all__ = ["Seen", "cassette_for", "is_json", "orjson", "replay", "sdk_call"]
