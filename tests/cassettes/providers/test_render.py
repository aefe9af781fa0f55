"""Rendering an answer back onto the wire (replay's rewriting faults): for every 2xx answer of the
corpus in the families that render, the rendered bytes, streamed and not, parse back to the same
answer: text, refusal, the client's tool calls (name, id, arguments), finish class and token
counts."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

import orjson
import pytest
from real_corpus import corpus_exchanges

from looptap.cassettes import providers
from looptap.cassettes.models import FinishReason, NormalisedResponse
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

RENDERED = ("openai_chat", "openai_responses", "anthropic", "gemini", "ollama")


def _sig(r: NormalisedResponse) -> dict[str, Any]:
    u = r.usage
    return {
        "text": "".join(p.text or "" for p in r.parts if p.kind == "text"),
        "refusal": "".join(p.text or "" for p in r.parts if p.kind == "refusal"),
        "calls": [
            (c.name, c.id, c.arguments)
            for p in r.parts
            if p.kind == "tool_call" and (c := p.tool_call) is not None and c.kind == "function"
        ],
        "finish": r.finish_reason,
        "usage": (u.input_tokens, u.output_tokens) if u is not None else None,
    }


def _flipped(adapter: Any, url: SplitResult, body: Any) -> tuple[str, bytes] | None:
    """The same request asking for the other mode (streamed ↔ not)."""
    if adapter.family == "gemini":
        path = url.path
        if path.endswith(":streamGenerateContent"):
            return urlunsplit(
                url._replace(
                    path=path.replace(":streamGenerateContent", ":generateContent"), query=""
                )
            ), orjson.dumps(body)
        if path.endswith(":generateContent"):
            return urlunsplit(
                url._replace(
                    path=path.replace(":generateContent", ":streamGenerateContent"), query="alt=sse"
                )
            ), orjson.dumps(body)
        return None
    if not isinstance(body, dict) or not url.path.rstrip("/").endswith(
        ("/chat/completions", "/responses", "/messages", "/api/chat", "/api/generate")
    ):
        return None
    stream = adapter.is_stream(url, body)
    return urlunsplit(url), orjson.dumps({**body, "stream": not stream})


def _parse_rendered(
    ex: Exchange, url: str, body: bytes, adapter: Any, answer: NormalisedResponse
) -> NormalisedResponse | None:
    parts = urlsplit(url)
    request = orjson.loads(body)
    stream = adapter.is_stream(parts, request)
    r = adapter.replay.render_answer(answer, stream, parts, request)
    if r is None:
        return None
    headers = [("content-type", r.content_type)] + (
        [("transfer-encoding", "chunked")] if stream else []
    )
    out = Exchange(
        method=ex.method,
        url=url,
        request_headers=ex.request_headers,
        request_body=body,
        status=200,
        response_headers=headers,
        response_chunks=[(0.0, c) for c in r.chunks],
    )
    rt = parse_exchange(out)
    assert rt.response is not None
    assert rt.response.complete is not False, (url, rt.response.notes)
    return rt.response


def test_corpus_answers_render_and_parse_back() -> None:
    counts: Counter[tuple[str, str]] = Counter()
    wrong = []
    for path, i, ex in corpus_exchanges():
        if ex.status != 200:
            continue
        rt = parse_exchange(ex)
        answer = rt.response
        if answer is None or answer.error is not None or rt.request is None or rt.polled:
            continue  # (a poll read as a model call has no request body to render against)
        url, body = urlsplit(ex.url), ex.request_json()
        adapter = providers.detect(ex.method, url, body)
        if adapter is None or adapter.family not in RENDERED:
            continue
        want = _sig(answer)
        known = answer.finish_reason in (
            FinishReason.COMPLETE,
            FinishReason.TOOL_CALL,
            FinishReason.TRUNCATED_LENGTH,
            FinishReason.FILTERED,
            FinishReason.REFUSED,
        )
        if not known:
            continue  # rendering gives every answer a finish reason
        for mode, request in (
            ("as recorded", (ex.url, ex.request_body)),
            ("other mode", _flipped(adapter, url, body)),
        ):
            if request is None:
                continue
            got = _parse_rendered(ex, *request, adapter, answer)
            if got is None:
                counts[(adapter.family, "no form")] += 1
                continue
            counts[(adapter.family, mode)] += 1
            sig = _sig(got)
            # A call the API sent without an id may get one where the wire format requires it.
            sig["calls"] = [
                (n, cid if w[1] is not None else None, a)
                for (n, cid, a), w in zip(sig["calls"], want["calls"], strict=False)
            ] + sig["calls"][len(want["calls"]) :]
            if sig != want:
                wrong.append((str(path), i, mode, want, sig))
    assert not wrong, wrong[:3]
    for family in ("openai_chat", "openai_responses", "anthropic", "gemini"):
        assert counts[(family, "as recorded")] >= 100 and counts[(family, "other mode")] >= 100, (
            counts
        )
    print(dict(counts))


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_renders_chat_and_generate(stream: bool) -> None:
    from looptap.cassettes.models import Part, ToolCall, Usage

    adapter = providers.detect(
        "POST", urlsplit("http://127.0.0.1:11434/api/chat"), {"model": "m", "messages": []}
    )
    assert adapter is not None and adapter.family == "ollama"
    answer = NormalisedResponse(
        model="m",
        parts=[
            Part(kind="text", text="Hello there"),
            Part(kind="tool_call", tool_call=ToolCall(name="f", arguments={"a": 1})),
        ],
        finish_reason=FinishReason.TRUNCATED_LENGTH,
        usage=Usage(input_tokens=5, output_tokens=7),
    )
    for route in ("chat", "generate"):
        body = {
            "model": "m",
            "stream": stream,
            **({"messages": []} if route == "chat" else {"prompt": "hi"}),
        }
        ex = Exchange(
            method="POST",
            url=f"http://127.0.0.1:11434/api/{route}",
            request_body=orjson.dumps(body),
        )
        got = _parse_rendered(ex, ex.url, ex.request_body, adapter, answer)
        assert got is not None
        assert "".join(p.text or "" for p in got.parts if p.kind == "text") == "Hello there"
        assert (
            got.finish_reason is FinishReason.TRUNCATED_LENGTH and got.finish_reason_raw == "length"
        )
        assert (got.usage.input_tokens, got.usage.output_tokens) == (5, 7)
        calls = [p.tool_call for p in got.parts if p.kind == "tool_call"]
        assert [(c.name, c.arguments) for c in calls] == (
            [("f", {"a": 1})] if route == "chat" else []
        )
