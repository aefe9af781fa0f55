"""Fake credentials of many vendors, streamed the way models stream text, and a scan for them
that owes nothing to looptap's detector.

* :func:`vendor_keys` — one syntactically valid, random fake key per vendor format (23 formats).
* :func:`pieces` — a text cut into pieces of 1–9 characters, the way a model streams tokens.
* renderers of one streamed reply per wire framing: OpenAI chat SSE, Ollama NDJSON, Bedrock
  ConverseStream and InvokeModelWithResponseStream event-stream frames, Responses events (one
  WebSocket message each).
* :func:`telling` — the pieces of a sentinel that chance does not make: 8 characters, 12 where
  they are all hex, 15 where all digits (about 47 bits each).
* :func:`leaks` — every sentinel, or any telling piece of one, found in a file's raw bytes,
  in its JSON strings decoded (``\\u`` escapes included, at two levels: a stored stream's events
  are JSON inside JSON strings) and in its base64 bodies. It searches literals only: nothing of
  ``cassettes`` is imported.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import struct
import zlib
from pathlib import Path
from typing import Any

__all__ = [
    "aws_frame",
    "bedrock_converse",
    "bedrock_invoke",
    "chat_sse",
    "leaks",
    "ollama_ndjson",
    "pieces",
    "responses_events",
    "spoken",
    "telling",
    "vendor_keys",
]

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    while True:
        out = "".join(secrets.choice(alphabet) for _ in range(n))
        if alphabet != _ALNUM or (any(c.isdigit() for c in out) and any(c.isupper() for c in out)):
            return out


def vendor_keys() -> dict[str, str]:
    """vendor → a fresh fake key in its published format (what a scanner must recognise)."""
    # (compact JSON with a random key id: an 8-character piece of a plain header's base64 also
    # occurs in the base64 of other JSON, Bedrock's events)
    jwt = lambda d: (  # noqa: E731
        base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()).decode().rstrip("=")
    )
    return {
        "openai": f"sk-proj-{_r(48)}",
        "anthropic": f"sk-ant-api03-{_r(93, _ALNUM + '_-')}AA",
        "github": f"ghp_{_r(36)}",
        "github-fine-grained": f"github_pat_{_r(22)}_{_r(59)}",
        "aws": "AKIA" + _r(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
        "google": f"AIza{_r(35)}",
        "google-oauth": f"ya29.{_r(60)}",
        "stripe": f"sk_live_{_r(24)}",
        "gitlab": f"glpat-{_r(20)}",
        "replicate": f"r8_{_r(37)}",
        "perplexity": f"pplx-{_r(48)}",
        "npm": f"npm_{_r(36, _LOWER)}",
        "sendgrid": f"SG.{_r(22)}.{_r(43)}",
        "databricks": f"dapi{_r(32, _HEX)}",
        "langsmith": f"lsv2_pt_{_r(32, _HEX)}_{_r(10, _HEX)}",
        "pinecone": f"pcsk_{_r(5)}_{_r(60)}",
        "mistral": _r(32),  # no format of its own: known by its name (see :func:`spoken`)
        "slack": f"xoxb-{_r(12, '0123456789')}-{_r(13, '0123456789')}-{_r(24)}",
        "huggingface": "hf_" + _r(34, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
        "groq": f"gsk_{_r(52)}",
        "xai": f"xai-{_r(80)}",
        "openai-ephemeral": f"ek_{_r(32, _HEX)}",
        "jwt": f"{jwt({'kid': _r(16), 'alg': 'HS256'})}.{jwt({'sub': _r(12), 'jti': _r(16)})}"
        f".{_r(43)}",
    }


def spoken(vendor: str, key: str) -> str:
    """How a reply quotes the key: as it is, or with the variable that names it for a format that
    is only known by its name (Mistral's 32 letters and digits)."""
    return f"MISTRAL_API_KEY={key}" if vendor == "mistral" else key


def pieces(text: str, seed: int = 0) -> list[str]:
    """``text`` in pieces of 1–9 characters (every length occurs)."""
    out: list[str] = []
    i, n = 0, 1 + seed % 9
    while i < len(text):
        out.append(text[i : i + n])
        i += n
        n = n % 9 + 1
    return out


# -- wire framings -----------------------------------------------------------------------------
def chat_sse(parts: list[str]) -> list[bytes]:
    events = [
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    ]
    for p in parts:
        events.append(
            b"data: "
            + json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": "gpt-4o",
                    "choices": [{"index": 0, "delta": {"content": p}}],
                }
            ).encode()
            + b"\n\n"
        )
    events.append(
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o",'
        b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    events.append(b"data: [DONE]\n\n")
    return events


def ollama_ndjson(parts: list[str]) -> list[bytes]:
    out = [
        json.dumps(
            {
                "model": "llama3.2",
                "created_at": "2026-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": p},
                "done": False,
            }
        ).encode()
        + b"\n"
        for p in parts
    ]
    out.append(
        json.dumps(
            {
                "model": "llama3.2",
                "created_at": "2026-01-01T00:00:01Z",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 10,
                "eval_count": len(parts),
            }
        ).encode()
        + b"\n"
    )
    return out


def aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    hb = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    prelude = struct.pack(">II", 16 + len(hb) + len(payload), len(hb))
    msg = prelude + struct.pack(">I", zlib.crc32(prelude)) + hb + payload
    return msg + struct.pack(">I", zlib.crc32(msg))


def _event(kind: str, body: dict[str, Any]) -> bytes:
    # Bedrock pads every event
    body = {**body, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"[: 5 + len(kind) % 20]}
    return aws_frame(
        {":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
        json.dumps(body).encode(),
    )


def bedrock_converse(parts: list[str]) -> list[bytes]:
    out = [_event("messageStart", {"role": "assistant"})]
    out += [
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}}) for p in parts
    ]
    out += [
        _event("contentBlockStop", {"contentBlockIndex": 0}),
        _event("messageStop", {"stopReason": "end_turn"}),
        _event(
            "metadata",
            {
                "usage": {
                    "inputTokens": 10,
                    "outputTokens": len(parts),
                    "totalTokens": 10 + len(parts),
                },
                "metrics": {"latencyMs": 100},
            },
        ),
    ]
    return out


def bedrock_invoke(parts: list[str]) -> list[bytes]:
    """InvokeModelWithResponseStream (Anthropic on Bedrock): each Anthropic event base64 in
    ``bytes``."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in parts
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": len(parts)},
        },
        {"type": "message_stop"},
    ]
    return [
        aws_frame(
            {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
            json.dumps(
                {"bytes": base64.b64encode(json.dumps(e).encode()).decode(), "p": "abcd"}
            ).encode(),
        )
        for e in events
    ]


def responses_events(parts: list[str], rid: str = "resp_1") -> list[dict[str, Any]]:
    """A Responses stream (one WebSocket message or SSE event each) streaming ``parts``."""
    text = "".join(parts)
    item = {
        "id": f"msg_{rid}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    resp = {
        "id": rid,
        "object": "response",
        "model": "gpt-5",
        "status": "in_progress",
        "output": [],
    }
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": resp},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
    ]
    out += [
        {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": p,
        }
        for p in parts
    ]
    # The finished text is repeated whole by the API in these two (a second copy to mask).
    out += [
        {
            "type": "response.output_text.done",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "text": text,
        },
        {
            "type": "response.completed",
            "response": {
                **resp,
                "status": "completed",
                "output": [item],
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": len(parts),
                    "total_tokens": 10 + len(parts),
                },
            },
        },
    ]
    return out


# -- the independent scan --------------------------------------------------------------------------
_U = re.compile(r"\\u([0-9a-fA-F]{4})")


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            out.append(str(k))
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def _haystacks(raw: bytes) -> list[str]:
    hay = [raw.decode("utf-8", "replace")]
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        strings: list[str] = []
        _strings(rec, strings)
        for s in strings:
            hay.append(s)
            # events stored as text keep their own escapes
            hay.append(_U.sub(lambda m: chr(int(m.group(1), 16)), s))
            if len(s) >= 8 and re.fullmatch(r"[A-Za-z0-9+/=\s]+", s):
                try:
                    hay.append(base64.b64decode(s).decode("utf-8", "replace"))
                except ValueError:
                    pass
    # Bedrock's events: each base64 payload searched as the text it carries, in its place (its
    # base64 is searched no more: the base64 of ``"text":"`` ends in ``QiOiJ``, as a JWT's
    # ``{"kid":"`` does, so a JWT piece whose other 3 characters a streamed word began with was
    # "found", about 1 run in 2,000)
    return [_BEDROCK_BYTES.sub(_decoded, h) for h in hay]


_BEDROCK_BYTES = re.compile(r'"bytes":\s*"([A-Za-z0-9+/=]+)"')


def _decoded(m: re.Match[str]) -> str:
    return base64.b64decode(m.group(1)).decode("utf-8", "replace")


#: Hex of either case: a piece of it is 12 characters long.
_HEXISH = frozenset("0123456789abcdefABCDEF")


def telling(secret: str) -> set[str]:
    """The pieces of ``secret`` that betray it: each 8 characters of it, or 12 where those are all
    hex, or 15 where all digits (the whole secret where it is shorter): about 47 bits each, so that
    a hash or id of looptap's own (hex: 32 bits in 8 characters; a count; a timestamp) does not
    match one by chance. With 8 characters of hex it did: a kept analysis' hashes matched a
    Sourcegraph token's piece in CI (the odds were about 1 run in 100)."""
    out: set[str] = set()
    for i in range(max(1, len(secret) - 7)):
        head = secret[i : i + 8]
        n = 15 if head.isdigit() else 12 if _HEXISH.issuperset(head) else 8
        if i + n <= len(secret) or i == 0:
            out.add(secret[i : i + n])
    return out


def leaks(path: Path, sentinels: dict[str, str]) -> list[str]:
    """Where a sentinel, or any :func:`telling` piece of one, is in ``path``: one line per
    (name, what was found)."""
    hay = "\n\x00\n".join(_haystacks(path.read_bytes()))
    found: list[str] = []
    for name, value in sentinels.items():
        if value in hay:
            found.append(f"{name}: whole")
            continue
        bits = telling(value)
        hit = next((b for b in sorted(bits) if b in hay), None)
        if hit is not None:
            found.append(f"{name}: a piece ({hit[:3]}…)")
    return found
