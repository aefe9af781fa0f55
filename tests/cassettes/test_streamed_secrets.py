"""A secret a model streams a few characters per event is masked in every stored copy.

Each reply quotes 23 vendors' fake keys and the agent's own credentials (its Bearer token, its
``x-api-key`` and the ``api_key`` of its request body, neutral random strings that only the values
the recorder learned from the request can catch), cut in pieces of 1–9 characters, one per event,
over each framing: OpenAI chat SSE, Ollama NDJSON, Bedrock ConverseStream and
InvokeModelWithResponseStream frames, Responses over a WebSocket (a turn, and a session looptap
cannot read as turns), with the events one chunk each and cut at arbitrary bytes. Everything goes
through the recording pipeline (``CassetteWriter``: redact, parse, derived view, sealed parse,
file); the file is then searched byte for byte, JSON-decoded and base64-decoded, for each secret
and each 8-character piece of one, by :func:`tests.support.secret_streams.leaks` (no looptap
detector). The reply's own words stay readable.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.recording import REDACTED, Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.recording.websocket import WsSession
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange
from tests.support.secret_streams import (
    bedrock_converse,
    bedrock_invoke,
    chat_sse,
    leaks,
    ollama_ndjson,
    pieces,
    responses_events,
    spoken,
    vendor_keys,
)

FRAMINGS = {
    "sse": ("https://api.openai.com/v1/chat/completions", "text/event-stream", chat_sse),
    "ndjson": ("http://localhost:11434/api/chat", "application/x-ndjson", ollama_ndjson),
    "bedrock-converse": (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream",
        "application/vnd.amazon.eventstream",
        bedrock_converse,
    ),
    "bedrock-invoke": (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-5-sonnet-20240620-v1%3A0/invoke-with-response-stream",
        "application/vnd.amazon.eventstream",
        bedrock_invoke,
    ),
}


def _neutral(tag: str) -> str:
    return f"{tag}Q{secrets.token_hex(14)}"


def _reply(keys: dict[str, str], own: dict[str, str]) -> str:
    quoted = "; ".join(f"{v}: {spoken(v, k)}" for v, k in keys.items())
    return (
        f"Here are the keys you asked for. {quoted}. And yours: {own['bearer']} {own['x-api-key']} "
        f"{own['api_key']}. Done."
    )


def _request(url: str, own: dict[str, str]) -> tuple[list[tuple[str, str]], bytes]:
    headers = [
        ("authorization", f"Bearer {own['bearer']}"),
        ("x-api-key", own["x-api-key"]),
        ("content-type", "application/json"),
    ]
    msg = {"role": "user", "content": "Print the keys."}
    if "bedrock" in url:  # Anthropic Messages on Bedrock (no model field: the URL names it)
        body = orjson.dumps(
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 500,
                "api_key": own["api_key"],
                "messages": [msg],
            }
        )
    else:
        body = orjson.dumps(
            {"model": "m", "stream": True, "api_key": own["api_key"], "messages": [msg]}
        )
    return headers, body


def _write(path: Path, exchanges: list[Exchange]) -> None:
    with CassetteWriter(path, meta={"agent": "test"}) as w:
        for ex in exchanges:
            w.append(ex)


def _all(keys: dict[str, str], own: dict[str, str]) -> dict[str, str]:
    return {**keys, **{f"own {k}": v for k, v in own.items()}}


@pytest.mark.parametrize("cut", ["per-event", "every-7-bytes"])
@pytest.mark.parametrize("framing", list(FRAMINGS))
def test_a_streamed_secret_is_masked_everywhere(framing: str, cut: str, tmp_path: Path) -> None:
    url, ctype, render = FRAMINGS[framing]
    keys, own = (
        vendor_keys(),
        {k: _neutral(k.replace("-", "")) for k in ("bearer", "x-api-key", "api_key")},
    )
    assert len(keys) >= 20
    text = _reply(keys, own)
    events = render(pieces(text, seed=len(framing)))
    assert max(len(p) for p in pieces(text)) == 9 and min(len(p) for p in pieces(text)) == 1
    raw = b"".join(events)
    chunks = (
        [(0.01 * i, e) for i, e in enumerate(events)]
        if cut == "per-event"
        else [(0.001 * i, raw[i : i + 7]) for i in range(0, len(raw), 7)]
    )
    headers, body = _request(url, own)
    ex = Exchange(
        "POST",
        url,
        headers,
        body,
        200,
        "OK",
        [("content-type", ctype)],
        chunks,
        started=1_700_000_000.0,
    )
    # the parser reassembles it
    assert parse_exchange(ex).response is not None and keys["github"] in (
        parse_exchange(ex).response.text or ""
    )
    out = tmp_path / "run.jsonl"
    _write(out, [ex])
    assert out.stat().st_size > 0
    found = leaks(out, _all(keys, own))
    assert not found, found
    # Still readable: the reply's words and where each key was.
    got = read_records(out).exchanges[0]
    rt = parse_exchange(got)
    assert rt.response is not None and rt.complete
    said = rt.response.text or ""
    assert said.startswith(
        "Here are the keys you asked for. openai: [REDACTED]; anthropic: [REDACTED]"
    ) and said.endswith(". Done."), said[:200]
    assert said.count(REDACTED) >= len(keys) + 3


def test_the_raw_events_keep_their_number_and_their_times() -> None:
    keys = vendor_keys()
    events = chat_sse(pieces(f"key {keys['groq']} end"))
    chunks = [(0.01 * i, e) for i, e in enumerate(events)]
    out = Redactor().chunks(chunks)
    assert [t for t, _ in out] == [t for t, _ in chunks]
    said = "".join(
        orjson.loads(c[6:])["choices"][0]["delta"].get("content", "")
        for _, c in out
        if c.startswith(b"data: {")
    )
    assert said == "key [REDACTED] end"
    untouched = [c for (_, c), (_, o) in zip(chunks, out, strict=True) if c == o]
    assert len(untouched) >= len(chunks) - 12  # only the events the key ran through were rewritten


def test_a_clean_stream_is_left_byte_for_byte() -> None:
    """The twin: words that look like nothing secret, cut the same way, are not touched."""
    events = chat_sse(
        pieces("The task: ask for max_tokens and the tokenizer; skip the keyboard. " * 5)
    )
    chunks = [(0.01 * i, e) for i, e in enumerate(events)]
    assert Redactor().chunks(chunks) == chunks


def _ws_messages(keys: dict[str, str], own: dict[str, str]) -> list[tuple[bool, bytes]]:
    text = _reply(keys, own)
    create = orjson.dumps({"type": "response.create", "model": "gpt-5", "api_key": own["api_key"],
                           "input": [{"role": "user", "content": "Print the keys."}]})
    return [
        (True, create),
        *((False, orjson.dumps(e)) for e in responses_events(pieces(text, seed=3))),
    ]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/some-unknown-socket"])
def test_a_secret_streamed_over_a_websocket_is_masked(path: str, tmp_path: Path) -> None:
    """A turn (read as a Responses stream) and a session looptap cannot read (kept as its messages,
    ``text/x-looptap-websocket``): field names redacted in every JSON message, streamed keys masked
    across messages, the subprotocol's key and the session's credentials masked."""
    keys, own = (
        vendor_keys(),
        {k: _neutral(k.replace("-", "")) for k in ("bearer", "x-api-key", "api_key")},
    )
    proto_key = _neutral("proto")
    short = "hunter2"  # too short to learn: only field-name redaction of the message masks it
    session = WsSession(
        f"wss://api.openai.com{path}",
        [
            ("authorization", f"Bearer {own['bearer']}"),
            ("x-api-key", own["x-api-key"]),
            (
                "sec-websocket-protocol",
                f"realtime, openai-insecure-api-key.{proto_key}, openai-beta.realtime-v1",
            ),
        ],
        started=1_700_000_000.0,
    )
    exchanges: list[Exchange] = []
    t = 1_700_000_000.0
    for from_client, msg in [
        (True, orjson.dumps({"type": "session.update", "session": {"password": short}})),
        *_ws_messages(keys, own),
    ]:
        t += 0.01
        exchanges += session.message(from_client, msg, t)
    exchanges += session.end(1000)
    kinds = {ex.response_header("content-type") for ex in exchanges}
    # (the session.update before the first turn is a message outside any turn: kept as sent)
    assert kinds == (
        {"text/event-stream", "text/x-looptap-websocket"}
        if path == "/v1/responses"
        else {"text/x-looptap-websocket"}
    ), kinds
    out = tmp_path / "run.jsonl"
    _write(out, exchanges)
    # (a secret shorter than a telling piece is looked for whole: secret_streams.telling)
    found = leaks(out, {**_all(keys, own), "subprotocol key": proto_key, "password": short})
    assert not found, found
    cas = read_records(out)
    protos = {ex.request_header("sec-websocket-protocol") for ex in cas.exchanges}
    assert protos == {"realtime, openai-insecure-api-key.[REDACTED], openai-beta.realtime-v1"}


def test_mcp_session_ids_and_minted_keys_are_redacted(tmp_path: Path) -> None:
    """``Mcp-Session-Id`` (whoever holds it speaks in the session) and a key minted by
    ``POST /v1/realtime/client_secrets`` or Gemini's ``auth_tokens`` (then sent back by the
    client) are masked, there and wherever they appear later."""
    sid = secrets.token_hex(16)
    ek = "ek_" + secrets.token_hex(16)
    gemini = secrets.token_urlsafe(30)
    mcp = Exchange(
        "POST",
        "http://127.0.0.1:9000/mcp",
        [("mcp-session-id", sid), ("content-type", "application/json")],
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        200,
        "OK",
        [("mcp-session-id", sid), ("content-type", "application/json")],
        [(0.01, b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')],
    )
    minted = Exchange(
        "POST",
        "https://api.openai.com/v1/realtime/client_secrets",
        [("authorization", "Bearer sk-none-at-all")],
        b'{"session":{"type":"realtime","model":"gpt-realtime"}}',
        200,
        "OK",
        [("content-type", "application/json")],
        [
            (
                0.01,
                orjson.dumps(
                    {
                        "value": ek,
                        "expires_at": 1756310470,
                        "session": {"type": "realtime", "model": "gpt-realtime"},
                    }
                ),
            )
        ],
    )
    token = Exchange(
        "POST",
        "https://generativelanguage.googleapis.com/v1alpha/auth_tokens",
        [("x-goog-api-key", "k" * 20)],
        b'{"uses":1}',
        200,
        "OK",
        [("content-type", "application/json")],
        [(0.01, orjson.dumps({"name": f"auth_tokens/{gemini}", "uses": 1}))],
    )
    reuse = Exchange(
        "GET",
        f"wss://generativelanguage.googleapis.com/ws/x?access_token={gemini}",
        [("authorization", f"Bearer {ek}"), ("x-note", f"echo {gemini} {sid}")],
        b"",
        101,
        "",
        [],
        [],
    )
    out = tmp_path / "run.jsonl"
    _write(out, [mcp, minted, token, reuse])
    found = leaks(out, {"mcp session id": sid, "ephemeral key": ek, "gemini token": gemini})
    assert not found, found
    got = read_records(out).exchanges
    assert got[0].request_header("mcp-session-id") == REDACTED
    assert orjson.loads(got[1].response_body) == {
        "value": REDACTED,
        "expires_at": 1756310470,
        "session": {"type": "realtime", "model": "gpt-realtime"},
    }
    assert orjson.loads(got[2].response_body)["uses"] == 1


def test_a_key_a_model_repeats_in_the_next_request_is_masked_there_too(tmp_path: Path) -> None:
    """A key found only across events (a neutral value the recorder learned) is learned: the
    agent sends the reply back in its history, whole, and it is masked there as well."""
    keys = vendor_keys()
    text = f"use {keys['pinecone']} now"
    events = chat_sse(pieces(text))
    url, _, _ = FRAMINGS["sse"]
    first = Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        b'{"model":"m","messages":[]}',
        200,
        "OK",
        [("content-type", "text/event-stream")],
        [(0.01 * i, e) for i, e in enumerate(events)],
    )
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "assistant", "content": text}, {"role": "user", "content": "thanks"}],
    }
    second = Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        orjson.dumps(body),
        200,
        "OK",
        [("content-type", "text/event-stream")],
        [(0.01, chat_sse(["ok"])[1])],
    )
    out = tmp_path / "run.jsonl"
    _write(out, [first, second])
    assert not leaks(out, {"pinecone": keys["pinecone"]})
