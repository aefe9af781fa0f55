"""What the official SDKs do when the API misbehaves: every fault of ``looptap replay --fault`` x
every family x its SDK on default settings (its built-in retries on), measured against the replay
server, and what looptap's findings said about the run.

    python bench/faults.py [--write]

Per cell: the outcome the caller saw (the answer, or the exception class), how many attempts the
SDK made, the waits between them, whether it honoured the API's retry-after (1 s here), and the
findings looptap's analysis gave the served run. ``--write`` writes docs/faults-matrix.md.
Times come from a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
# Not bench/ itself: its mcp.py would shadow the mcp package the frameworks import.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from looptap.cassettes.analysis import analyse  # noqa: E402
from looptap.cassettes.recording.pipeline import CassetteWriter  # noqa: E402
from looptap.cassettes.replay.serving.faults import FaultPlan, parse_fault  # noqa: E402
from looptap.cassettes.replay.serving.server import ReplayServer  # noqa: E402
from looptap.cassettes.wire import Exchange  # noqa: E402

FAULTS = [
    "rate_limit",
    "overloaded",
    "server_error",
    "context_length",
    "reset",
    "slow_first_byte=1",
    "stream_cut=2",
    "error_event",
    "stall=1",
    "truncate",
    "content_filter",
    "refusal",
    "bad_arguments",
    "unoffered_tool",
    "schema_arguments",
]
STREAM_ONLY = {"stream_cut=2", "error_event", "stall=1"}
#: Faults that rewrite the answer: served on a real recorded tool-calling answer, once.
REWRITING = {
    "truncate",
    "content_filter",
    "refusal",
    "bad_arguments",
    "unoffered_tool",
    "schema_arguments",
}
#: The frameworks, on a text answer: the faults a non-streaming agent run meets.
FRAMEWORK_FAULTS = [
    "rate_limit",
    "overloaded",
    "server_error",
    "context_length",
    "reset",
    "truncate",
    "content_filter",
    "refusal",
]


def _json_ex(url: str, req: Any, resp: Any) -> Exchange:
    return Exchange(
        "POST",
        url,
        [],
        orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, orjson.dumps(resp))],
    )


def _sse_ex(url: str, req: Any, events: list[bytes]) -> Exchange:
    return Exchange(
        "POST",
        url,
        [],
        orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(0.01 * (i + 1), e) for i, e in enumerate(events)],
    )


_CHAT_REQ = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}
_CHAT_RESP = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
_CHAT_EVENTS = [
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
]
_CHAT_EVENTS += [
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n' % w
    for w in (b"Hel", b"lo", b" there")
]
_CHAT_EVENTS += [
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]
_RESP_REQ = {"model": "gpt-4o", "input": "Hi"}
_RESP_RESP = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "gpt-4o",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "metadata": {},
    "temperature": 1.0,
    "top_p": 1.0,
    "text": {"format": {"type": "text"}},
    "truncation": "disabled",
    "usage": {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 6,
    },
}
_ANT_REQ = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "Hi"}],
}
_ANT_RESP = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hello"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 2},
}
_ANT_EVENTS = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hel"}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"lo"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":2}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]
_GEM_REQ = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
_GEM_RESP = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "Hello"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 3},
    "modelVersion": "gemini-2.0-flash",
}
_GEM_URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"


def _openai_chat(url: str, stream: bool) -> str:
    import openai

    c = openai.OpenAI(base_url=url + "/v1", api_key="x")
    if stream:
        return "".join(
            ch.choices[0].delta.content or ""
            for ch in c.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], stream=True
            )
            if ch.choices
        )
    return (
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
        .choices[0]
        .message.content
        or ""
    )


def _openai_responses(url: str, stream: bool) -> str:
    import openai

    return (
        openai.OpenAI(base_url=url + "/v1", api_key="x")
        .responses.create(model="gpt-4o", input="Hi")
        .output_text
    )


def _anthropic(url: str, stream: bool) -> str:
    import anthropic

    c = anthropic.Anthropic(base_url=url, api_key="x")
    if stream:
        with c.messages.stream(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
        ) as s:
            return s.get_final_text()
    block = c.messages.create(
        model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
    ).content[0]
    return getattr(block, "text", "")


def _gemini(url: str, stream: bool) -> str:
    from google import genai

    c = genai.Client(api_key="x", http_options={"base_url": url, "api_version": "v1beta"})
    return c.models.generate_content(model="gemini-2.0-flash", contents="Hi").text or ""


#: family → (SDK label, recorded JSON exchange, recorded stream exchange or None, call)
FAMILIES: dict[str, tuple[str, Exchange, Exchange | None, Callable[[str, bool], str]]] = {
    "openai_chat": (
        "openai",
        _json_ex("https://api.openai.com/v1/chat/completions", _CHAT_REQ, _CHAT_RESP),
        _sse_ex(
            "https://api.openai.com/v1/chat/completions",
            {**_CHAT_REQ, "stream": True},
            _CHAT_EVENTS,
        ),
        _openai_chat,
    ),
    "openai_responses": (
        "openai",
        _json_ex("https://api.openai.com/v1/responses", _RESP_REQ, _RESP_RESP),
        None,
        _openai_responses,
    ),
    "anthropic": (
        "anthropic",
        _json_ex("https://api.anthropic.com/v1/messages", _ANT_REQ, _ANT_RESP),
        _sse_ex("https://api.anthropic.com/v1/messages", {**_ANT_REQ, "stream": True}, _ANT_EVENTS),
        _anthropic,
    ),
    "gemini": (
        "google-genai",
        _json_ex(_GEM_URL + ":generateContent", _GEM_REQ, _GEM_RESP),
        None,
        _gemini,
    ),
}


def _pydantic_ai(url: str, stream: bool) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    agent = Agent(
        OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=url + "/v1", api_key="x"))
    )
    return str(agent.run_sync("Hi").output)


def _openai_agents(url: str, stream: bool) -> str:
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    model = OpenAIResponsesModel(
        "gpt-4o", openai_client=openai.AsyncOpenAI(base_url=url + "/v1", api_key="x")
    )
    return str(
        Runner.run_sync(Agent(name="a", instructions="Be brief.", model=model), "Hi").final_output
    )


#: framework → (label, family, the recorded answer to its request, call)
FRAMEWORKS: dict[str, tuple[str, str, Any, Callable[[str, bool], str]]] = {
    "pydantic-ai": ("pydantic-ai", "openai_chat", _CHAT_RESP, _pydantic_ai),
    "openai-agents": ("openai-agents", "openai_responses", _RESP_RESP, _openai_agents),
}


def _seen(seen: Any) -> str:
    """A rewritten answer as the caller got it, in a few words."""
    calls = ", ".join(
        f"{n}({a if isinstance(a, str) else orjson.dumps(a).decode()})" for n, a in seen.calls
    )
    bits = (
        [f"finish {seen.finish}"]
        + ([f"refusal {seen.refusal!r}"] if seen.refusal else [])
        + ([f"text {seen.text[:20]!r}"] if seen.text else [])
    )
    return "; ".join(bits + ([f"calls {calls[:80]}"] if calls else ["no calls"]))


def _outcome(call: Callable[[], Any]) -> str:
    try:
        got = call()
    except Exception as exc:  # what the caller sees
        module = ".".join(
            part for part in type(exc).__module__.split(".") if not part.startswith("_")
        )
        return f"{module}.{type(exc).__name__}"
    if isinstance(got, str):
        return f"answer ({got[:40]!r})"
    return _seen(got)


def cell(work: Path, family: str, fault: str, framework: str | None = None) -> list[str]:
    from tests.replay.rewrite_support import captured, cassette_for, sdk_call

    stream = fault in STREAM_ONLY
    times = 1 if fault in REWRITING else 2
    kind = fault.partition("=")[0]
    if framework is not None:
        sdk, family, answer, fcall = FRAMEWORKS[framework]
        sent = captured(lambda url: fcall(url, False))
        target = sent.url.split("://", 1)[1].partition("/")[2]
        path = work / f"{framework}-{kind}.jsonl"
        with CassetteWriter(path) as w:
            w.append(
                Exchange(
                    "POST",
                    f"https://api.openai.com/{target}",
                    [],
                    sent.request_body,
                    status=200,
                    response_headers=[("content-type", "application/json")],
                    response_chunks=[(0.01, orjson.dumps(answer))],
                )
            )

        def call(url: str) -> Any:
            return fcall(url, False)
    elif fault in REWRITING or (stream and FAMILIES[family][2] is None):
        sdk = FAMILIES[family][0]
        # a real recorded tool-calling answer
        path, tool, schema = cassette_for(work, family, stream)

        def call(url: str) -> Any:
            return sdk_call(family, stream, url, tool, schema)
    else:
        sdk, plain, streamed, scall = FAMILIES[family]
        path = work / f"{family}-{kind}.jsonl"
        with CassetteWriter(path) as w:
            w.append(streamed if stream else plain)

        def call(url: str) -> Any:
            return scall(url, stream)

    plan = FaultPlan([parse_fault(f"request=1:{fault}*{times}")])
    t0 = time.monotonic()
    with ReplayServer(path, faults=plan) as srv:
        outcome = _outcome(lambda: call(srv.url))
        served = list(srv.served)
    if plan.skipped:
        outcome = f"(not injected: {plan.skipped[0][3]})"
    took = time.monotonic() - t0
    starts = [e.started for e in served if e.started is not None]
    waits = [b - a for a, b in itertools.pairwise(starts)]
    honoured = (
        "-"
        if fault not in ("rate_limit", "overloaded", "server_error") or not waits
        else ("yes" if min(waits) >= 0.9 else "no")
    )
    codes = sorted(
        {f"{f.code}" for f in analyse(served).findings if f.severity.value != "info"}
        | {f"{f.code} (info)" for f in analyse(served).findings if f.severity.value == "info"}
    )
    shown = fault if times == 2 else f"{fault} (once)"
    return [
        family,
        sdk,
        shown,
        outcome,
        str(len(served)),
        ", ".join(f"{w:.2f}" for w in waits) or "-",
        honoured,
        ", ".join(codes) or "-",
        f"{took:.1f}",
    ]


def main() -> int:
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the SDKs' notes on model names
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    args = ap.parse_args()
    rows = [
        "| family | client | fault (×2 unless once) | what the caller got | attempts | waits (s) | "
        "honoured retry-after | looptap findings | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [
            (family, fault, None)
            for family in args.families.split(",")
            if family
            for fault in args.faults.split(",")
        ]
        jobs += [
            ("", fault, fw)
            for fw in args.frameworks.split(",")
            if fw
            for fault in FRAMEWORK_FAULTS
            if fault in args.faults.split(",")
        ]
        for family, fault, fw in jobs:
            r = cell(Path(tmp), family, fault, fw)
            rows.append("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
            print(rows[-1], flush=True)
    if args.write:
        from importlib.metadata import version

        versions = ", ".join(
            f"{p} {version(p)}"
            for p in ("openai", "anthropic", "google-genai", "pydantic-ai-slim", "openai-agents")
        )
        (ROOT / "docs" / "faults-matrix.md").write_text(
            "# What the SDKs do when the API misbehaves\n\n"
            f"Generated by `python bench/faults.py --write` on {datetime.date.today()} "
            f"({platform.machine()}; {versions}). Each cell replays one recorded call with "
            "`--fault 'request=1:FAULT*2'` (the first two attempts fail, in the API's own format; "
            "retry-after 1 s where the API sends one) to the official SDK or framework on its "
            "default settings (its built-in retries on), then analyses the served run. Rewriting "
            "faults (truncate … schema_arguments) fire once, on a real recorded tool-calling "
            "answer (the frameworks get a text answer); the stream "
            "faults of Responses and Gemini also play a real recorded "
            "stream. `attempts` counts requests the server got; `waits` "
            "are the gaps between them.\n\n" + "\n".join(rows) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
