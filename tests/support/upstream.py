"""A loopback fake LLM upstream that serves *recorded* responses from the corpus.

Pure stdlib asyncio plus ``cassettes`` (no mitmproxy, no SDK, no httpx), so it runs in the test
environment and in the recorder's environment alike::

    python -m tests.support.upstream --port 0 --ready-file /tmp/port   # writes the port, serves
                                                                        # until SIGINT/SIGTERM

or in-process (a thread with its own event loop)::

    with FakeUpstream() as up:
        client = OpenAI(base_url=up.url + "/v1", api_key="x")
        ...
        up.served[-1].chunks     # exactly what was sent, piece by piece

**Routing.** The API family comes from the path: ``…/chat/completions`` (OpenAI Chat),
``…/responses`` (OpenAI Responses), ``…/messages`` (Anthropic), ``…:generateContent`` and
``…:streamGenerateContent`` (Gemini; SSE with ``alt=sse``, a chunked JSON array without). Streaming
follows the body's ``stream`` flag (or the Gemini method). Any other ``GET`` (``/ping``, ``/health``)
answers ``200 pong``: a non-LLM request for pass-through tests. Other paths get a 404.

**Responses** are real recordings picked from ``tests/corpus`` by family, stream flag and kind
(text, one tool call, parallel tool calls): a curated list first, a corpus scan as fallback, and
for the two slots the corpus lacks (parallel tool calls streamed over Responses and Gemini) a
stream synthesised from the recorded non-streamed body. Streams go out event by event (split at
the blank line that ends each SSE event), ``Transfer-Encoding: chunked``, with a small delay
between events; JSON bodies with ``Content-Length``. Tool calls are rewritten to the tools the
request offers (name and schema-valid arguments), so a real agent loop can run its tools.

**Scenarios**, chosen per request by the header ``X-Fake-Upstream: <name>[; key=value ...]`` (or
``<name>:<n>``), or for every request by ``default_scenario`` / ``--scenario``:

=====================  =========================================================================
``text`` (default)      a recorded text answer
``tool_call``           a recorded single tool call
``parallel_tool_calls`` a recorded response with two or more tool calls
``tool_loop``           a tool call until the request carries ``n`` (default 2) tool results, then
                        text; ``tool_loop:3`` is ``n=3``. Counted in the request's history, so a
                        Responses client chaining with ``previous_response_id`` needs ``n=1``.
``rate_limit``          429 with ``retry-after`` (``retry_after=``, default 1) and the family's body
``server_error``        500 with the family's error body
``error_in_stream``     200 stream: ``after`` (default 2) recorded events, then the family's error
                        event, then a clean end of body without the terminal marker
``reset_mid_stream``    ``after`` (default 3) recorded events, then a TCP reset (``mode=fin``: a
                        plain close); a JSON body is cut in half
``reset_before_response`` no response at all: a TCP reset once the request is read (``mode=fin``:
                        a plain close)
``drip``                a recorded stream sent slowly: one event per ``delay``, or with
                        ``unit=byte`` its first ``bytes`` (default 256) bytes one byte per write,
                        then the rest event by event (each write's send time is in ``sent_at``);
                        ``lockstep=KEY``: each write waits until the agent has every byte before
                        it (it says so with ``FakeUpstream.ack``, an ``http_request`` ``stop``
                        callback), then ``delay``: in step with the agent however loaded the machine
``malformed``           200 with a damaged body: ``kind=json`` (default; cut JSON, honest
                        Content-Length), ``kind=sse`` (a recorded stream with a non-JSON event and
                        no terminal event) or ``kind=binary`` (random bytes labelled as SSE)
``lying_encoding``      a recorded body whose Content-Encoding lies: ``claim=`` the header
                        (default ``gzip``; ``none`` sends none), ``actual=`` what the bytes really
                        are (``identity`` default, or ``gzip``: streams flushed per event)
``big``                 a response of ``size`` bytes (default 1 MiB), ``kind=json`` (one chat
                        completion, Content-Length, sent in 64 KiB writes) or ``kind=sse`` (chat
                        chunks of about 64 KiB each, then ``[DONE]``); the body's SHA-256 is in
                        :attr:`Served.sha256`, and the request body's in :attr:`Served.request_sha256`
=====================  =========================================================================

Common keys: ``delay=<seconds>`` between stream events (default: the server's ``delay``, 0.01 s),
``linger=<seconds>`` to wait after the last event before ending the chunked body (a client that
stops at its terminal event, like openai-python's sync stream at ``[DONE]``, then hangs up first),
``source=<corpus path>#<index>`` to serve that recording, ``set_cookie=<value>`` (or
``set_cookie_hex=<hex of the value>``, which keeps it out of the request's bytes) to add a
``Set-Cookie`` response header. Three keys frame the answer as mitmproxy 11.0.2 cannot pass it
(tests/proxy/test_mitmproxy_quirks.py): ``early_hints=<n>`` sends ``n`` ``103 Early Hints`` heads
before the answer's; ``trailers=announced`` (or ``unannounced``: no ``Trailer`` header) sends the
answer chunked, a JSON body too, and ends it with a trailer section carrying the body's SHA-256
(:attr:`Served.trailers`); ``duplicate_length=1`` sends a JSON body's ``Content-Length`` twice,
equal. Error statuses carry
``x-should-retry: false`` so the SDKs do not retry. Every response says which recording it came
from in ``x-fake-upstream-source``, and is logged in :attr:`FakeUpstream.served`.

**TLS.** ``FakeUpstream(tls=(cert, key))`` / ``--tls CERT KEY`` serves HTTPS with that certificate
chain and key (PEM) instead of plain HTTP; :attr:`FakeUpstream.url` then starts with ``https://``.
"""  # noqa: E501

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import itertools
import json
import os
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from looptap.cassettes import net as http1
from looptap.cassettes.net import BackgroundServer
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.storage import load_vcr
from looptap.cassettes.wire import Exchange

__all__ = ["CORPUS", "SCENARIOS", "FakeUpstream", "Served", "main", "split_events"]

CORPUS = Path(os.environ.get("LOOPTAP_CORPUS") or Path(__file__).resolve().parents[1] / "corpus")

SCENARIOS = (
    "text",
    "tool_call",
    "parallel_tool_calls",
    "tool_loop",
    "rate_limit",
    "server_error",
    "error_in_stream",
    "reset_mid_stream",
    "reset_before_response",
    "drip",
    "malformed",
    "lying_encoding",
    "big",
)

FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini")

#: Recordings known to fit each (family, stream, kind) slot, best first (paths under CORPUS).
_P = "pydantic-ai/tests/models/cassettes/"
_CURATED: dict[tuple[str, bool, str], tuple[str, ...]] = {
    ("openai_chat", False, "text"): (
        _P + "test_openai/test_openai_model_settings_temperature_ignored_on_gpt_5.yaml#0",
    ),
    ("openai_chat", True, "text"): (
        "pydantic-ai/tests/cassettes/test_dbos/test_dbos_agent_run_stream.yaml#0",
    ),
    ("openai_chat", False, "tool1"): (
        _P + "test_multimodal_tool_returns/"
        "test_multimodal_tool_return_matrix[direct-url-image-openai_chat].yaml#0",
    ),
    ("openai_chat", True, "tool1"): (
        _P + "test_openai/test_run_stream_sync_streams_real_model.yaml#0",
    ),
    ("openai_chat", False, "toolN"): (
        "pydantic-ai/tests/cassettes/test_dbos/test_dbos_agent_with_hitl_tool.yaml#0",
    ),
    ("openai_chat", True, "toolN"): (
        "pydantic-ai/tests/cassettes/test_dbos/test_complex_agent_run_in_workflow.yaml#0",
    ),
    ("openai_responses", False, "text"): (
        _P + "test_openai_responses/test_openai_responses_model_instructions.yaml#0",
    ),
    ("openai_responses", True, "text"): (
        _P + "test_openai_responses/test_openai_responses_stream.yaml#1",
    ),
    ("openai_responses", False, "tool1"): (
        _P
        + "test_openai_responses/test_openai_responses_model_simple_response_with_tool_call.yaml#0",
    ),
    ("openai_responses", True, "tool1"): (
        _P + "test_openai_responses/test_openai_responses_stream.yaml#0",
    ),
    ("openai_responses", False, "toolN"): (
        _P + "test_openai_responses/test_openai_responses_model_retry.yaml#0",
    ),
    ("anthropic", False, "text"): (_P + "test_anthropic/test_anthropic_model_instructions.yaml#0",),
    ("anthropic", True, "text"): (
        "llm-anthropic/tests/cassettes/test_anthropic/test_prompt.yaml#0",
    ),
    ("anthropic", False, "tool1"): (
        _P + "test_tool_choice_matrix/test_tool_choice_matrix[auto-anthropic].yaml#0",
    ),
    ("anthropic", True, "tool1"): (
        "llm-anthropic/tests/cassettes/test_anthropic/test_stream_events_tool_calls.yaml#0",
    ),
    ("anthropic", False, "toolN"): (
        "pydantic-ai/tests/models/anthropic/cassettes/test_output/"
        "test_mixed_tools_basemodel_output.yaml#0",
    ),
    ("anthropic", True, "toolN"): (
        "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml#0",
    ),
    ("gemini", False, "text"): (_P + "test_google/test_google_model.yaml#0",),
    ("gemini", True, "text"): (_P + "test_google/test_google_model_stream.yaml#0",),
    ("gemini", False, "tool1"): (_P + "test_google/test_google_tool_output.yaml#0",),
    ("gemini", True, "tool1"): (
        "pydantic-ai/tests/models/google/cassettes/test_structured_output/"
        "test_native_output_with_function_tools_stream.yaml#0",
    ),
    ("gemini", False, "toolN"): (
        _P + "test_google/test_google_instructions_only_with_tool_calls.yaml#0",
    ),
    # The corpus has no streamed parallel tool calls for these two: synthesised from the above.
    ("openai_responses", True, "toolN"): (),
    ("gemini", True, "toolN"): (),
}

_OFFICIAL_HOSTS = ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com")

#: Recorded response headers that must not be replayed (framing, encoding, cookies, volatile).
_DROP_HEADERS = frozenset(
    {
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "set-cookie",
        "date",
        "server",
        "alt-svc",
        "strict-transport-security",
        "cf-ray",
        "cf-cache-status",
        "vary",
        "x-envoy-upstream-service-time",
        "server-timing",
    }
)


# ---------------------------------------------------------------------------------------------
# SSE helpers


_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def split_events(body: bytes) -> list[bytes]:
    """An SSE body cut after each event's terminating blank line (separators kept, so the
    pieces join back to ``body`` byte for byte)."""
    out: list[bytes] = []
    pos = 0
    for m in _EVENT_END.finditer(body):
        out.append(body[pos : m.end()])
        pos = m.end()
    rest = body[pos:]
    if rest:
        if rest.strip() or not out:
            out.append(rest)
        else:
            out[-1] += rest
    return out


def _newline(chunk: bytes) -> bytes:
    return b"\r\n" if b"\r\n" in chunk else b"\n"


def event_json(chunk: bytes) -> Any:
    """The JSON of an SSE event's ``data:`` lines, or ``None`` (comment, ``[DONE]``, not JSON)."""
    data = [ln[5:].removeprefix(b" ") for ln in chunk.splitlines() if ln.startswith(b"data:")]
    if not data:
        return None
    try:
        return json.loads(b"\n".join(data))
    except ValueError:
        return None


def with_event_json(chunk: bytes, obj: Any) -> bytes:
    """``chunk`` with its ``data:`` lines replaced by one line holding ``obj``."""
    nl = _newline(chunk)
    lines = chunk.split(nl)
    out: list[bytes] = []
    placed = False
    for ln in lines:
        if ln.startswith(b"data:"):
            if not placed:
                out.append(b"data: " + _dumps(obj))
                placed = True
            continue
        out.append(ln)
    return nl.join(out)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def sse_event(obj: Any, event: str | None = None, nl: bytes = b"\n") -> bytes:
    head = b"event: " + event.encode() + nl if event else b""
    return head + b"data: " + _dumps(obj) + nl + nl


# ---------------------------------------------------------------------------------------------
# Corpus picking


@dataclass
class Recording:
    """One recorded response, ready to serve."""

    source: str
    family: str
    stream: bool
    status: int
    headers: list[tuple[str, str]]
    #: Streams: one piece per SSE event; JSON: the whole body as one piece.
    chunks: list[bytes]
    tool_call_ids: list[str] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)


def _kind(ex: Exchange) -> tuple[str, bool, str] | None:
    """(family, stream, kind) of a complete, successful, tool-or-text recording, else ``None``."""
    if ex.status != 200:
        return None
    rt = parse_exchange(ex)
    r = rt.response
    if rt.family not in FAMILIES or r is None or r.error or not r.complete or rt.analysis_errors:
        return None
    if r.finish_reason is None:
        return None
    kinds = {p.kind for p in r.parts}
    calls = r.tool_calls
    if kinds == {"text"} and r.text.strip():
        kind = "text"
    elif (
        calls
        and kinds <= {"tool_call", "text"}
        and all(c.kind == "function" and c.arguments is not None for c in calls)
    ):
        kind = "tool1" if len(calls) == 1 else "toolN"
    else:
        return None
    return rt.family, rt.stream, kind


def _recording(ex: Exchange, source: str, family: str, stream: bool) -> Recording:
    body = ex.response_body
    headers = [(k, v) for k, v in ex.response_headers if k.lower() not in _DROP_HEADERS]
    if not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("content-type", "text/event-stream" if stream else "application/json"))
    rt = parse_exchange(ex)
    ids = [c.id for c in (rt.response.tool_calls if rt.response else []) if c.id]
    return Recording(
        source,
        family,
        stream,
        ex.status or 200,
        headers,
        split_events(body) if stream else [body],
        ids,
    )


class Corpus:
    """Lazy, thread-safe access to the recordings the server serves."""

    def __init__(self, root: Path = CORPUS) -> None:
        self.root = Path(root)
        self._files: dict[str, list[Exchange]] = {}
        self._slots: dict[tuple[str, bool, str], Recording] = {}
        self._scanned: dict[tuple[str, bool, str], list[tuple[str, Exchange]]] | None = None
        self._lock = threading.Lock()

    def _load(self, rel: str) -> list[Exchange]:
        if rel not in self._files:
            self._files[rel] = load_vcr(self.root / rel)
        return self._files[rel]

    def by_source(self, source: str) -> Recording:
        rel, _, idx = source.rpartition("#")
        with self._lock:
            ex = self._load(rel)[int(idx)]
        rt = parse_exchange(ex)
        return _recording(ex, source, rt.family, rt.stream)

    def _scan(self) -> dict[tuple[str, bool, str], list[tuple[str, Exchange]]]:
        if self._scanned is None:
            found: dict[tuple[str, bool, str], list[tuple[str, Exchange]]] = {}
            for path in sorted(self.root.glob("**/*.yaml")):
                if path.name.endswith(".xai.yaml"):
                    continue
                try:
                    exchanges = load_vcr(path)
                except Exception:
                    continue
                for i, ex in enumerate(exchanges):
                    slot = _kind(ex)
                    if slot is not None:
                        found.setdefault(slot, []).append(
                            (f"{path.relative_to(self.root)}#{i}", ex)
                        )
            for cands in found.values():  # official hosts first, then the smallest body
                cands.sort(
                    key=lambda c: (
                        urlsplit(c[1].url).hostname not in _OFFICIAL_HOSTS,
                        len(c[1].response_body),
                    )
                )
            self._scanned = found
        return self._scanned

    def pick(self, family: str, stream: bool, kind: str) -> Recording:
        slot = (family, stream, kind)
        with self._lock:
            if slot in self._slots:
                return self._slots[slot]
            rec = None
            for source in _CURATED.get(slot, ()):
                rel, _, idx = source.rpartition("#")
                try:
                    ex = self._load(rel)[int(idx)]
                except Exception:
                    continue
                if _kind(ex) == slot:
                    rec = _recording(ex, source, family, stream)
                    break
            if rec is None and _CURATED.get(slot, None) != ():
                cands = self._scan().get(slot)
                if cands:
                    rec = _recording(cands[0][1], cands[0][0], family, stream)
        if rec is None and stream:
            flat = self.pick(family, False, kind)
            rec = Recording(
                flat.source + " (synthesised stream)",
                family,
                True,
                200,
                [("content-type", "text/event-stream")],
                synth_stream(family, flat.json()),
                flat.tool_call_ids,
            )
        if rec is None:
            raise LookupError(f"no recording in {self.root} for {family} stream={stream} {kind}")
        with self._lock:
            self._slots[slot] = rec
        return rec


# ---------------------------------------------------------------------------------------------
# Synthesised streams (only for slots the corpus has no recording for)


def synth_stream(family: str, body: Any, piece: int | list[int] = 0) -> list[bytes]:
    """A family-correct SSE stream carrying what a non-streamed response ``body`` carries; with
    ``piece``, each tool call's arguments go ``piece`` characters per event, as models stream them
    (or cut at the positions ``piece`` lists); Gemini sends a call whole, and its text so."""
    if family == "gemini":
        return [sse_event(b, nl=b"\r\n") for b in _gemini_pieces(body, piece)]
    if family == "openai_responses":
        return _synth_responses(body, piece)
    if family == "anthropic":
        return _synth_anthropic(body, piece)
    if family == "openai_chat":
        return _synth_chat(body, piece)
    raise ValueError(family)


def cut(text: str, piece: int | list[int]) -> list[str]:
    """``text`` in pieces of ``piece`` characters, or cut at the positions ``piece`` lists (whole
    when ``piece`` is 0 or none of them falls inside)."""
    if isinstance(piece, int):
        return [text[i : i + piece] for i in range(0, len(text), piece)] if piece else [text]
    cuts = sorted({c for c in piece if 0 < c < len(text)})
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def _gemini_pieces(body: dict[str, Any], piece: int | list[int]) -> list[dict[str, Any]]:
    """A Gemini answer as its stream's events: a text part ``piece`` by ``piece`` (the finish and
    the usage in the last event), the rest whole."""
    parts = body["candidates"][0]["content"]["parts"] if body.get("candidates") else []
    if not piece or len(parts) != 1 or "text" not in parts[0]:
        return [body]
    texts = cut(parts[0]["text"], piece)
    head = {k: v for k, v in body.items() if k != "usageMetadata"}
    events = []
    for i, text in enumerate(texts):
        cand = {**body["candidates"][0], "content": {"role": "model", "parts": [{"text": text}]}}
        if i < len(texts) - 1:
            cand.pop("finishReason", None)
        events.append({**(body if i == len(texts) - 1 else head), "candidates": [cand]})
    return events


def _synth_responses(resp: dict[str, Any], piece: int | list[int] = 0) -> list[bytes]:
    seq = itertools.count()
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        out.append(sse_event({"type": kind, "sequence_number": next(seq), **fields}, kind))

    start = {**resp, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for i, item in enumerate(resp.get("output") or []):
        if item.get("type") == "function_call":
            emit(
                "response.output_item.added",
                output_index=i,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for delta in cut(item.get("arguments", ""), piece):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item.get("id"),
                    output_index=i,
                    delta=delta,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item.get("id"),
                output_index=i,
                arguments=item.get("arguments", ""),
            )
        elif item.get("type") == "message":
            emit(
                "response.output_item.added",
                output_index=i,
                item={**item, "content": [], "status": "in_progress"},
            )
            for j, part in enumerate(item.get("content") or []):
                text = part.get("text", "")
                emit(
                    "response.content_part.added",
                    item_id=item.get("id"),
                    output_index=i,
                    content_index=j,
                    part={**part, "text": ""},
                )
                emit(
                    "response.output_text.delta",
                    item_id=item.get("id"),
                    output_index=i,
                    content_index=j,
                    delta=text,
                )
                emit(
                    "response.output_text.done",
                    item_id=item.get("id"),
                    output_index=i,
                    content_index=j,
                    text=text,
                )
                emit(
                    "response.content_part.done",
                    item_id=item.get("id"),
                    output_index=i,
                    content_index=j,
                    part=part,
                )
        else:
            emit("response.output_item.added", output_index=i, item=item)
        emit("response.output_item.done", output_index=i, item=item)
    emit("response.completed", response=resp)
    return out


def _synth_anthropic(msg: dict[str, Any], piece: int | list[int] = 0) -> list[bytes]:
    out = [
        sse_event(
            {"type": "message_start", "message": {**msg, "content": [], "stop_reason": None}},
            "message_start",
        )
    ]
    for i, block in enumerate(msg.get("content") or []):
        if block.get("type") == "tool_use":
            out.append(
                sse_event(
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "input": {}},
                    },
                    "content_block_start",
                )
            )
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in cut(json.dumps(block.get("input") or {}), piece)
            ]
        else:
            out.append(
                sse_event(
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "text": ""},
                    },
                    "content_block_start",
                )
            )
            deltas = [{"type": "text_delta", "text": block.get("text", "")}]
        out.extend(
            sse_event(
                {"type": "content_block_delta", "index": i, "delta": d}, "content_block_delta"
            )
            for d in deltas
        )
        out.append(sse_event({"type": "content_block_stop", "index": i}, "content_block_stop"))
    usage = {"output_tokens": (msg.get("usage") or {}).get("output_tokens", 0)}
    delta = {"stop_reason": msg.get("stop_reason"), "stop_sequence": msg.get("stop_sequence")}
    out.append(
        sse_event({"type": "message_delta", "delta": delta, "usage": usage}, "message_delta")
    )
    out.append(sse_event({"type": "message_stop"}, "message_stop"))
    return out


def _synth_chat(resp: dict[str, Any], piece: int | list[int] = 0) -> list[bytes]:
    base = {k: resp.get(k) for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    out: list[bytes] = []
    for ch in resp.get("choices") or []:
        msg = ch.get("message") or {}
        idx = ch.get("index", 0)
        out.append(
            sse_event(
                {
                    **base,
                    "choices": [
                        {
                            "index": idx,
                            "delta": {"role": "assistant", "content": msg.get("content") or ""},
                            "finish_reason": None,
                        }
                    ],
                }
            )
        )
        for j, tc in enumerate(msg.get("tool_calls") or []):
            fn = tc.get("function") or {}
            args = cut(fn.get("arguments") or "", piece) if piece else []
            first = {"index": j, "id": tc.get("id"), "type": "function"}
            calls = [{**first, "function": {**fn, "arguments": ""} if args else fn}]
            calls += [{"index": j, "function": {"arguments": a}} for a in args]
            out.extend(
                sse_event(
                    {
                        **base,
                        "choices": [
                            {"index": idx, "delta": {"tool_calls": [c]}, "finish_reason": None}
                        ],
                    }
                )
                for c in calls
            )
        out.append(
            sse_event(
                {
                    **base,
                    "choices": [
                        {"index": idx, "delta": {}, "finish_reason": ch.get("finish_reason")}
                    ],
                }
            )
        )
    if resp.get("usage"):
        out.append(sse_event({**base, "choices": [], "usage": resp["usage"]}))
    out.append(b"data: [DONE]\n\n")
    return out


# ---------------------------------------------------------------------------------------------
# Tool-call rewriting: the recorded calls become calls of the tools the request offers


def synth_args(schema: Any, k: int = 0) -> Any:
    """A small value that satisfies the JSON schema (or Gemini's OpenAPI subset) ``schema``."""
    if not isinstance(schema, dict):
        return {}
    for alt in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(alt), list) and schema[alt]:
            return synth_args(schema[alt][0], k)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "string")
    typ = str(typ or ("object" if "properties" in schema else "string")).lower()
    if typ == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = (
            schema.get("required") if isinstance(schema.get("required"), list) else list(props)
        )
        return {name: synth_args(props.get(name, {}), k) for name in required}
    if typ == "array":
        return [synth_args(schema.get("items", {}), k)] if schema.get("minItems") else []
    if typ == "integer":
        return int(schema.get("minimum", k + 1))
    if typ == "number":
        return float(schema.get("minimum", k + 1))
    if typ == "boolean":
        return True
    if typ == "null":
        return None
    return f"value-{k}" if k else "value"


class ToolRewriter:
    """Rewrites the tool calls of one response, consistently across all of its stream events:
    the k-th call (in order of appearance) calls ``tools[k % len(tools)]`` with arguments made
    from its schema; call ids get ``id_suffix`` so repeated turns do not reuse ids."""

    def __init__(self, tools: list[tuple[str, Any]], ids: list[str], id_suffix: str = "") -> None:
        self.tools = tools
        self.ids = set(ids)
        self.suffix = id_suffix
        self._order: dict[Any, int] = {}
        self._args_sent: set[Any] = set()

    def target(self, key: Any) -> tuple[str, Any, str]:
        k = self._order.setdefault(key, len(self._order))
        name, schema = self.tools[k % len(self.tools)]
        args = synth_args(schema, k)
        return name, args, json.dumps(args, separators=(",", ":"))

    def _first_args(self, key: Any) -> bool:
        first = key not in self._args_sent
        self._args_sent.add(key)
        return first

    def _ids(self, obj: Any) -> None:
        if not self.suffix or not self.ids:
            return
        if isinstance(obj, dict):
            for k, v in obj.items():
                if (
                    k in ("id", "call_id", "tool_use_id", "tool_call_id")
                    and isinstance(v, str)
                    and v in self.ids
                ):
                    obj[k] = v + self.suffix
                else:
                    self._ids(v)
        elif isinstance(obj, list):
            for v in obj:
                self._ids(v)

    # One method per family; each mutates ``obj`` (a whole body or one event's JSON).
    def openai_chat(self, obj: Any, stream: bool) -> None:
        for ch in obj.get("choices") or []:
            ci = ch.get("index", 0)
            if not stream:
                for j, tc in enumerate((ch.get("message") or {}).get("tool_calls") or []):
                    name, _, raw = self.target((ci, j))
                    tc.setdefault("function", {}).update(name=name, arguments=raw)
                continue
            for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                key = (ci, tc.get("index", 0))
                name, _, raw = self.target(key)
                fn = tc.get("function")
                if not isinstance(fn, dict):
                    continue
                if fn.get("name"):
                    fn["name"] = name
                if "arguments" in fn:
                    fn["arguments"] = raw if self._first_args(key) else ""

    def _responses_item(self, item: Any, i: int) -> None:
        if isinstance(item, dict) and item.get("type") == "function_call":
            name, _, raw = self.target(i)
            item["name"] = name
            if item.get("arguments") or item.get("status") == "completed":
                item["arguments"] = raw

    def openai_responses(self, obj: Any, stream: bool) -> None:
        if not stream or isinstance(obj.get("response"), dict):
            out = obj["response"].get("output") if stream else obj.get("output")
            for i, item in enumerate(out or []):
                self._responses_item(item, i)
            return
        kind = obj.get("type", "")
        i = obj.get("output_index")
        if "item" in obj:
            self._responses_item(obj["item"], i)
        elif kind == "response.function_call_arguments.delta":
            self.target(i)
            obj["delta"] = self.target(i)[2] if self._first_args(i) else ""
        elif kind == "response.function_call_arguments.done":
            name, _, raw = self.target(i)
            obj["arguments"] = raw
            if "name" in obj:
                obj["name"] = name

    def anthropic(self, obj: Any, stream: bool) -> None:
        if not stream:
            for i, block in enumerate(obj.get("content") or []):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    name, args, _ = self.target(i)
                    block.update(name=name, input=args)
            return
        kind = obj.get("type")
        i = obj.get("index")
        block = obj.get("content_block")
        if (
            kind == "content_block_start"
            and isinstance(block, dict)
            and block.get("type") == "tool_use"
        ):
            block["name"] = self.target(i)[0]
        elif (
            kind == "content_block_delta"
            and (obj.get("delta") or {}).get("type") == "input_json_delta"
            and i in self._order
        ):
            obj["delta"]["partial_json"] = self.target(i)[2] if self._first_args(i) else ""

    def gemini(self, obj: Any, stream: bool) -> None:
        for cand in obj.get("candidates") or []:
            for part in (cand.get("content") or {}).get("parts") or []:
                fc = part.get("functionCall") if isinstance(part, dict) else None
                if isinstance(fc, dict):
                    name, args, _ = self.target(len(self._order))
                    fc.update(name=name, args=args)

    def apply(self, family: str, obj: Any, stream: bool) -> Any:
        if not isinstance(obj, dict):
            return obj
        obj = copy.deepcopy(obj)
        if self.tools:
            getattr(self, family)(obj, stream)
        self._ids(obj)
        return obj


def rewrite_tool_calls(rec: Recording, tools: list[tuple[str, Any]], turn: int = 0) -> list[bytes]:
    """The recording's pieces with its tool calls made calls of ``tools`` (unchanged bytes for
    pieces that needed no change)."""
    rw = ToolRewriter(tools, rec.tool_call_ids, f"_{turn}" if turn else "")
    if not rec.stream:
        return [_dumps(rw.apply(rec.family, rec.json(), False))]
    out = []
    for chunk in rec.chunks:
        obj = event_json(chunk)
        if obj is None:
            out.append(chunk)
            continue
        new = rw.apply(rec.family, obj, True)
        out.append(chunk if new == obj else with_event_json(chunk, new))
    return out


# ---------------------------------------------------------------------------------------------
# Family-shaped errors


def error_body(family: str, status: int, message: str) -> dict[str, Any]:
    if family == "anthropic":
        kind = {
            429: "rate_limit_error",
            529: "overloaded_error",
            400: "invalid_request_error",
            404: "not_found_error",
        }.get(status, "api_error")
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_fake_upstream",
        }
    if family == "gemini":
        st = {
            429: "RESOURCE_EXHAUSTED",
            400: "INVALID_ARGUMENT",
            404: "NOT_FOUND",
            503: "UNAVAILABLE",
        }.get(status, "INTERNAL")
        return {"error": {"code": status, "message": message, "status": st}}
    kind = {429: "requests", 400: "invalid_request_error", 404: "invalid_request_error"}.get(
        status, "server_error"
    )
    code = {429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def stream_error_event(family: str, seq: int) -> bytes:
    msg = "fake upstream: the model failed mid-stream"
    if family == "anthropic":
        return sse_event(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        )
    if family == "openai_responses":
        return sse_event(
            {
                "type": "error",
                "code": "server_error",
                "message": msg,
                "param": None,
                "sequence_number": seq,
            },
            "error",
        )
    if family == "gemini":
        return sse_event({"error": {"code": 500, "message": msg, "status": "INTERNAL"}}, nl=b"\r\n")
    return sse_event(
        {"error": {"message": msg, "type": "server_error", "param": None, "code": None}}
    )


# ---------------------------------------------------------------------------------------------
# The server


class Request(http1.Request):
    """A request as the shipped HTTP/1.1 reader reads it, with what the scenarios look at."""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    def json(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass
class Served:
    """One request the fake upstream answered, and exactly what it sent back."""

    seq: int
    method: str
    target: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    family: str | None = None
    stream: bool = False
    scenario: str = "text"
    status: int = 0
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    #: The body as sent: one item per write (SSE event / JSON body / partial body).
    chunks: list[bytes] = field(default_factory=list)
    source: str | None = None
    #: The whole response went out (``False`` for a reset, or a client that went away).
    complete: bool = False
    reset: bool = False
    client_gone: bool = False
    started: float = 0.0
    ended: float | None = None
    #: When each item of ``chunks`` was written (``time.time()``; streams and ``big`` only).
    sent_at: list[float] = field(default_factory=list)
    #: Extra response headers asked for by the request (``set_cookie=``).
    extra_headers: list[tuple[str, str]] = field(default_factory=list)
    #: ``trailers=``: the trailer fields that ended the chunked body (``None``: no trailer section).
    trailers: list[tuple[str, str]] | None = None
    #: ``trailers=announced``: a ``Trailer`` header names them; ``duplicate_length=1``.
    announce_trailers: bool = False
    duplicate_length: bool = False
    #: SHA-256 of the response body (``big``) and of the request body (always).
    sha256: str | None = None
    request_sha256: str | None = None

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def request_json(self) -> Any:
        try:
            return json.loads(self.request_body) if self.request_body else None
        except ValueError:
            return None

    def request_header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.request_headers if k.lower() == name), None)

    def as_exchange(self) -> Exchange:
        """What was served, as a neutral exchange (for ``cassettes`` to parse)."""
        return Exchange(
            method=self.method,
            url="http://upstream" + self.target,
            request_headers=list(self.request_headers),
            request_body=self.request_body,
            status=self.status,
            response_headers=list(self.response_headers),
            response_chunks=[(None, c) for c in self.chunks],
            transport_error=None if self.complete else "reset by fake upstream",
        )


def family_of(path: str) -> str | None:
    if path.endswith("/chat/completions"):
        return "openai_chat"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith(":generateContent") or path.endswith(":streamGenerateContent"):
        return "gemini"
    return None


def parse_scenario(value: str | None) -> tuple[str, dict[str, str]]:
    if not value or not value.strip():
        return "text", {}
    head, *rest = [p.strip() for p in value.split(";")]
    params: dict[str, str] = {}
    if ":" in head:
        head, n = head.split(":", 1)
        params["n"] = n.strip()
    for p in rest:
        if "=" in p:
            k, v = p.split("=", 1)
            params[k.strip()] = v.strip()
    return head.strip(), params


def _offered_tools(family: str, target: str, body: Any) -> tuple[list[tuple[str, Any]], int]:
    """(function tools offered: name and schema, number of tool results in the history)."""
    from looptap.cassettes.providers import by_family

    adapter = by_family(family)
    if adapter is None or not isinstance(body, dict):
        return [], 0
    try:
        req = adapter.parse_request(body, urlsplit("http://upstream" + target))
    except Exception:
        return [], 0
    tools = [(t.name, t.parameters) for t in req.tools if t.kind == "function"]
    results = sum(1 for m in req.messages for p in m.parts if p.kind == "tool_result")
    return tools, results


class FakeUpstream:
    """The fake upstream. ``start()``/``stop()`` run it in a thread; ``await start_async()`` in a
    running loop; also a context manager."""

    label = "fake upstream"
    #: StreamReader buffer limit (the longest line or headers block it reads at once).
    read_limit = 1 << 20
    #: The largest request body read (a larger one is answered 413).
    max_body = http1.MAX_BODY

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        delay: float = 0.01,
        default_scenario: str | None = None,
        corpus: Path | str = CORPUS,
        tls: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
    ) -> None:
        #: (certificate chain PEM, private key PEM): serve HTTPS instead of plain HTTP.
        self.tls = (Path(tls[0]), Path(tls[1])) if tls is not None else None
        self.delay = delay
        self.default_scenario = default_scenario
        self.corpus = Corpus(Path(corpus))
        self.served: list[Served] = []
        #: ``lockstep=KEY`` streams: how many body bytes the agent said it has (``ack``).
        self.acks: dict[str, int] = {}
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._changed = threading.Condition()
        self._server = BackgroundServer(
            self._handle,
            host=host,
            port=port,
            label=self.label,
            read_limit=self.read_limit,
            ssl_context=self._ssl_context,
            start_failed=self._start_failed,
        )

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def port(self) -> int:
        """The port listened on (the one bound, once listening)."""
        return self._server.port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    # -- lifecycle (a BackgroundServer's) ------------------------------------------------------
    async def start_async(self) -> None:
        await self._server.start_async()

    async def stop_async(self) -> None:
        await self._server.stop_async()

    def start(self) -> Self:
        """Serve from a thread of its own; returns once listening."""
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.tls[0], self.tls[1])
        return ctx

    def _start_failed(self, exc: BaseException) -> Exception:
        return RuntimeError(f"fake upstream failed to start: {exc}")

    # -- observation ---------------------------------------------------------------------------
    def wait_served(self, n: int, pred: Callable[[Served], bool] | None = None) -> list[Served]:
        """Wait until ``n`` finished responses (matching ``pred``) were served; returns them. No
        wall-clock limit: it gives up (TimeoutError) only when neither this process (the upstream's
        threads) nor anything the test started made progress for ``progress.STALL`` seconds."""
        from tests.support.progress import POLL, Hung, Watch

        watch = Watch(
            os.getpid(),
            progress=lambda: len(self.served),
            what="the fake upstream's expected requests",
        )
        with self._changed:
            while True:
                done = [s for s in self.served if s.ended is not None and (pred is None or pred(s))]
                if len(done) >= n:
                    return done
                try:
                    watch.check()
                except Hung as exc:
                    raise TimeoutError(
                        f"fake upstream served {len(done)} of {n} expected responses: {exc}"
                    ) from None
                self._changed.wait(POLL)

    def llm_served(self) -> list[Served]:
        return [s for s in self.served if s.family is not None]

    def _log(self, s: Served) -> None:
        with self._changed:
            self.served.append(s)

    def _done(self, s: Served) -> None:
        with self._changed:
            s.ended = time.time()
            self._changed.notify_all()

    # -- HTTP/1.1 ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    req = await self._read_request(reader, writer)
                except http1.BadRequest as exc:
                    await http1.refuse(writer, exc)
                    break
                if req is None:
                    break
                keep = await self._respond(req, writer)
                conn = (req.header("connection") or "").lower()
                if not keep or conn == "close":
                    break
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
            ssl.SSLError,
        ):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | None:
        req = await http1.read_request(reader, writer, max_body=self.max_body)
        return None if req is None else Request(req.method, req.target, req.headers, req.body)

    async def _send_head(
        self, writer: asyncio.StreamWriter, status: int, headers: list[tuple[str, str]]
    ) -> None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        head = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()

    async def _respond(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; ``False`` when the connection must not be reused."""
        s = Served(
            next(self._seq), req.method, req.target, req.headers, req.body, started=time.time()
        )
        s.request_sha256 = hashlib.sha256(req.body).hexdigest()
        self._log(s)
        try:
            return await self._serve(req, s, writer)
        except (ConnectionError, asyncio.CancelledError):
            s.client_gone = True
            raise
        finally:
            self._done(s)

    async def _send_json(
        self,
        s: Served,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]] | None = None,
        ctype: str = "application/json",
    ) -> bool:
        hdrs = [
            (k, v)
            for k, v in (headers or [])
            if k.lower() not in ("content-type", "content-length")
        ]
        if s.trailers is not None:
            framing = [("transfer-encoding", "chunked"), *self._trailer_names(s)]
        else:
            framing = [("content-length", str(len(body)))] * (2 if s.duplicate_length else 1)
        hdrs = [("content-type", ctype), *hdrs, *framing, *s.extra_headers]
        if status >= 400:
            hdrs.append(("x-should-retry", "false"))
        s.status, s.response_headers = status, hdrs
        await self._send_head(writer, status, hdrs)
        if s.trailers is not None:
            writer.write(b"%x\r\n%s\r\n%s" % (len(body), body, self._last_chunk(s, body)))
        else:
            writer.write(body)
        await writer.drain()
        s.chunks.append(body)
        s.complete = True
        return True

    @staticmethod
    def _trailer_names(s: Served) -> list[tuple[str, str]]:
        return [("trailer", "x-fake-upstream-sha256")] if s.announce_trailers else []

    @staticmethod
    def _last_chunk(s: Served, body: bytes) -> bytes:
        """The end of a chunked body: the last chunk, then (``trailers=``) a trailer section."""
        if s.trailers is None:
            return b"0\r\n\r\n"
        s.trailers = [("x-fake-upstream-sha256", hashlib.sha256(body).hexdigest())]
        return (
            b"0\r\n"
            + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in s.trailers)
            + b"\r\n"
        )

    @staticmethod
    async def _send_early_hints(writer: asyncio.StreamWriter, n: int) -> None:
        """``n`` informational ``103 Early Hints`` heads, each in a write of its own."""
        for i in range(n):
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </hint/%d>; rel=preload\r\n\r\n" % i)
            await writer.drain()

    def ack(self, key: str, nbytes: int) -> bool:
        """The agent of a ``lockstep=KEY`` stream has ``nbytes`` body bytes (a ``stop`` callback of
        ``http_request``: returns ``False``, never hangs up)."""
        self.acks[key] = nbytes
        return False

    async def _send_stream(
        self,
        s: Served,
        writer: asyncio.StreamWriter,
        chunks: list[bytes],
        headers: list[tuple[str, str]],
        delay: float,
        reset_after: int | None = None,
        reset_mode: str = "rst",
        linger: float = 0.0,
        lockstep: str | None = None,
    ) -> bool:
        hdrs = [
            (k, v) for k, v in headers if k.lower() not in ("content-length", "transfer-encoding")
        ]
        hdrs.append(("transfer-encoding", "chunked"))
        hdrs += [*self._trailer_names(s), *s.extra_headers]
        s.status, s.response_headers = 200, hdrs
        await self._send_head(writer, 200, hdrs)
        sent = 0
        for i, chunk in enumerate(chunks):
            if reset_after is not None and i >= reset_after:
                await self._reset(writer, s, reset_mode)
                return False
            while lockstep is not None and self.acks.get(lockstep, 0) < sent:
                # the next write only once the agent has every byte so far
                await asyncio.sleep(0.001)
            if i and delay:
                # (then the pause: each write at least ``delay`` after the agent had the last)
                await asyncio.sleep(delay)
            sent += len(chunk)
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            s.chunks.append(chunk)
            s.sent_at.append(time.time())
        if reset_after is not None:
            await self._reset(writer, s, reset_mode)
            return False
        if linger:
            await asyncio.sleep(linger)
        writer.write(self._last_chunk(s, b"".join(chunks)))
        await writer.drain()
        s.complete = True
        return True

    async def _reset(self, writer: asyncio.StreamWriter, s: Served, mode: str) -> None:
        s.reset = True
        await writer.drain()
        await asyncio.sleep(max(self.delay, 0.05))  # let the peer read what was sent before the RST
        sock = writer.get_extra_info("socket")
        if mode != "fin" and sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        writer.transport.abort() if mode != "fin" else writer.close()

    async def _send_big(
        self, s: Served, writer: asyncio.StreamWriter, size: int, kind: str
    ) -> bool:
        """``size`` bytes of a chat completion (JSON with Content-Length, or SSE chunks)."""
        piece = 64 * 1024
        h = hashlib.sha256()
        if kind == "sse":
            hdrs = [
                ("content-type", "text/event-stream"),
                ("transfer-encoding", "chunked"),
                *s.extra_headers,
            ]
            s.status, s.response_headers = 200, hdrs
            await self._send_head(writer, 200, hdrs)
            sent, i = 0, 0
            while sent < size:
                text = "x" * max(1, min(piece, size - sent - 120))
                ev = sse_event(
                    {
                        "id": "chatcmpl-big",
                        "object": "chat.completion.chunk",
                        "model": "gpt-4o",
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"content": f"{i:08d}" + text},
                                "finish_reason": None,
                            }
                        ],
                    }
                )
                i += 1
                await self._write_chunk(writer, s, ev, h, chunked=True)
                sent += len(ev)
            for ev in (
                sse_event(
                    {
                        "id": "chatcmpl-big",
                        "object": "chat.completion.chunk",
                        "model": "gpt-4o",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                ),
                b"data: [DONE]\n\n",
            ):
                await self._write_chunk(writer, s, ev, h, chunked=True)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        else:
            prefix = (
                b'{"id":"chatcmpl-big","object":"chat.completion","created":1,"model":"gpt-4o",'
                b'"choices":[{"index":0,"message":{"role":"assistant","content":"'
            )
            suffix = (
                b'"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,'
                b'"completion_tokens":1,"total_tokens":2}}'
            )
            fill = max(0, size - len(prefix) - len(suffix))
            hdrs = [
                ("content-type", "application/json"),
                ("content-length", str(len(prefix) + fill + len(suffix))),
                *s.extra_headers,
            ]
            s.status, s.response_headers = 200, hdrs
            await self._send_head(writer, 200, hdrs)
            await self._write_chunk(writer, s, prefix, h)
            block = (b"0123456789abcdef" * (piece // 16))[:piece]
            left = fill
            while left > 0:
                await self._write_chunk(writer, s, block[: min(piece, left)], h)
                left -= min(piece, left)
            await self._write_chunk(writer, s, suffix, h)
        s.sha256 = h.hexdigest()
        s.complete = True
        return True

    async def _write_chunk(
        self, writer: asyncio.StreamWriter, s: Served, data: bytes, h: Any, chunked: bool = False
    ) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        await writer.drain()
        h.update(data)
        s.chunks.append(data)
        s.sent_at.append(time.time())

    async def _send_malformed(
        self, s: Served, writer: asyncio.StreamWriter, kind: str, delay: float
    ) -> bool:
        s.source = f"synthesised malformed {kind}"
        if kind == "binary":
            import random

            rng = random.Random(20261122)  # the same bytes for every request (direct vs proxied)
            chunks = [bytes(rng.randrange(256) for _ in range(200)) for _ in range(4)]
            return await self._send_stream(
                s, writer, chunks, [("content-type", "text/event-stream")], delay
            )
        body = (
            b'{"id":"chatcmpl-cut","object":"chat.completion","choices":[{"index":0,'
            b'"message":{"role":"assistant","content":"The capital of Fra'
        )
        return await self._send_json(s, writer, 200, body, [("x-fake-upstream-source", s.source)])

    async def _send_lying(
        self,
        s: Served,
        writer: asyncio.StreamWriter,
        chunks: list[bytes],
        headers: list[tuple[str, str]],
        stream: bool,
        params: dict[str, str],
        delay: float,
    ) -> bool:
        claim, actual = params.get("claim", "gzip"), params.get("actual", "identity")
        if actual == "gzip":
            comp = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            chunks = [comp.compress(c) + comp.flush(zlib.Z_SYNC_FLUSH) for c in chunks]
            chunks[-1] += comp.flush()
        elif actual != "identity":
            raise ValueError(f"lying_encoding: actual={actual!r} (identity or gzip)")
        headers = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
        if claim != "none":
            headers.append(("content-encoding", claim))
        if stream:
            return await self._send_stream(s, writer, chunks, headers, delay)
        return await self._send_json(
            s,
            writer,
            200,
            b"".join(chunks),
            headers,
            ctype=next((v for k, v in headers if k.lower() == "content-type"), "application/json"),
        )

    async def _serve(self, req: Request, s: Served, writer: asyncio.StreamWriter) -> bool:
        path = req.path
        family = family_of(path) if req.method == "POST" else None
        if family is None:
            if req.method in ("GET", "HEAD"):
                body = b"pong\n" if req.method == "GET" else b""
                s.scenario = "plain"
                return await self._send_json(s, writer, 200, body, ctype="text/plain")
            return await self._send_json(
                s,
                writer,
                404,
                _dumps({"error": {"message": f"fake upstream: no route for {req.method} {path}"}}),
            )
        body = req.json()
        s.family = family
        if family == "gemini":
            s.stream = path.endswith(":streamGenerateContent")
            sse = "sse" in parse_qs(urlsplit(req.target).query).get("alt", [])
        else:
            s.stream = bool(isinstance(body, dict) and body.get("stream"))
            sse = True
        scenario, params = parse_scenario(req.header("x-fake-upstream") or self.default_scenario)
        s.scenario = scenario
        if "set_cookie" in params:
            s.extra_headers.append(("set-cookie", params["set_cookie"]))
        if "set_cookie_hex" in params:  # the value kept out of the request's own bytes
            s.extra_headers.append(("set-cookie", bytes.fromhex(params["set_cookie_hex"]).decode()))
        if scenario not in SCENARIOS:
            msg = f"fake upstream: unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})"
            return await self._send_json(s, writer, 400, _dumps(error_body(family, 400, msg)))
        delay = float(params.get("delay", self.delay))
        if params.get("trailers") in ("announced", "unannounced"):
            s.trailers, s.announce_trailers = [], params["trailers"] == "announced"
        s.duplicate_length = params.get("duplicate_length") == "1"
        await self._send_early_hints(writer, int(params.get("early_hints", 0)))

        if scenario in ("rate_limit", "server_error"):
            status = 429 if scenario == "rate_limit" else 500
            msg = (
                "fake upstream: rate limit reached, retry later"
                if status == 429
                else "fake upstream: internal server error"
            )
            extra = [("retry-after", params.get("retry_after", "1"))] if status == 429 else []
            s.source = f"synthesised {status}"
            return await self._send_json(
                s,
                writer,
                status,
                _dumps(error_body(family, status, msg)),
                extra + [("x-fake-upstream-source", s.source)],
            )

        if scenario == "reset_before_response":
            s.source = "no response"
            await self._reset(writer, s, params.get("mode", "rst"))
            return False
        if scenario == "big":
            return await self._send_big(
                s, writer, int(params.get("size", 1 << 20)), params.get("kind", "json")
            )
        if scenario == "malformed" and params.get("kind", "json") in ("json", "binary"):
            return await self._send_malformed(s, writer, params.get("kind", "json"), delay)

        tools, results = _offered_tools(family, req.target, body)
        kind = "text"
        if scenario == "tool_call":
            kind = "tool1"
        elif scenario == "parallel_tool_calls":
            kind = "toolN"
        elif scenario == "tool_loop":
            kind = "tool1" if results < int(params.get("n", 2)) else "text"
        stream_pick = s.stream or scenario in ("error_in_stream", "drip", "malformed")
        try:
            rec = (
                self.corpus.by_source(params["source"])
                if "source" in params
                else self.corpus.pick(family, stream_pick, kind)
            )
        except (LookupError, OSError, ValueError, IndexError) as exc:
            return await self._send_json(
                s, writer, 500, _dumps(error_body(family, 500, f"fake upstream: {exc}"))
            )
        s.source = rec.source
        chunks = (
            rewrite_tool_calls(rec, tools, turn=results) if kind != "text" else list(rec.chunks)
        )
        headers = [*rec.headers, ("x-fake-upstream-source", rec.source)]

        if scenario == "error_in_stream":
            after = min(int(params.get("after", 2)), max(len(chunks) - 2, 1))
            chunks = [*chunks[:after], stream_error_event(family, after)]
            headers = [(k, v) for k, v in headers if k.lower() != "content-type"] + [
                ("content-type", "text/event-stream")
            ]
            return await self._send_stream(s, writer, chunks, headers, delay)

        if scenario == "malformed":  # kind=sse: a non-JSON event in the middle, no terminal event
            cut = max(1, len(chunks) // 2)
            bad = b"data: {not json, " + chunks[cut][:20].replace(b"\n", b" ") + b"\n\n"
            chunks = [*chunks[:cut], bad, *chunks[cut:-1]]
            return await self._send_stream(s, writer, chunks, headers, delay)
        if scenario == "lying_encoding":
            return await self._send_lying(s, writer, chunks, headers, rec.stream, params, delay)
        if scenario == "drip" and params.get("unit", "event") == "byte":
            head = b"".join(chunks)[: int(params.get("bytes", 256))]
            rest = split_events(b"".join(chunks)[len(head) :])
            chunks = [head[i : i + 1] for i in range(len(head))] + rest

        if not rec.stream:
            if scenario == "reset_mid_stream":
                body_bytes = chunks[0]
                hdrs = [(k, v) for k, v in headers if k.lower() != "content-length"] + [
                    ("content-length", str(len(body_bytes)))
                ]
                s.status, s.response_headers = rec.status, hdrs
                await self._send_head(writer, rec.status, hdrs)
                half = body_bytes[: len(body_bytes) // 2]
                writer.write(half)
                s.chunks.append(half)
                await self._reset(writer, s, params.get("mode", "rst"))
                return False
            return await self._send_json(s, writer, rec.status, chunks[0], headers)

        if family == "gemini" and not sse:  # streamGenerateContent without alt=sse: a JSON array
            objs = [event_json(c) for c in chunks]
            items = [_dumps(o) for o in objs if o is not None]
            chunks = [(b"[" if i == 0 else b",\r\n") + it for i, it in enumerate(items)] + [b"]"]
            headers = [(k, v) for k, v in headers if k.lower() != "content-type"] + [
                ("content-type", "application/json; charset=UTF-8")
            ]

        if scenario == "reset_mid_stream":
            after = min(int(params.get("after", 3)), max(len(chunks) - 1, 1))
            return await self._send_stream(
                s,
                writer,
                chunks,
                headers,
                delay,
                reset_after=after,
                reset_mode=params.get("mode", "rst"),
            )
        return await self._send_stream(
            s,
            writer,
            chunks,
            headers,
            delay,
            linger=float(params.get("linger", 0)),
            lockstep=params.get("lockstep"),
        )


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.support.upstream",
        description="Loopback fake LLM upstream serving recorded corpus responses.",
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--ready-file", help="write the listening port here once ready")
    ap.add_argument(
        "--scenario",
        default=None,
        help=f"default scenario ({', '.join(SCENARIOS)}); X-Fake-Upstream overrides it",
    )
    ap.add_argument("--delay", type=float, default=0.01, help="seconds between stream events")
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument(
        "--tls",
        nargs=2,
        metavar=("CERT", "KEY"),
        help="serve HTTPS with this certificate chain and key (PEM)",
    )
    args = ap.parse_args(argv)

    async def run() -> None:
        up = FakeUpstream(
            args.host,
            args.port,
            delay=args.delay,
            default_scenario=args.scenario,
            corpus=args.corpus,
            tls=args.tls,
        )
        await up.start_async()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.ready_file:
            tmp = Path(args.ready_file + ".tmp")
            tmp.write_text(f"{up.port}\n")
            os.replace(tmp, args.ready_file)
        print(f"fake upstream listening on {up.url}", flush=True)
        await stop.wait()
        await up.stop_async()

    asyncio.run(run())
    return 0


def _iter_slots() -> Iterator[tuple[str, bool, str]]:
    for fam in FAMILIES:
        for stream in (False, True):
            for kind in ("text", "tool1", "toolN"):
                yield fam, stream, kind


if __name__ == "__main__":
    sys.exit(main())
