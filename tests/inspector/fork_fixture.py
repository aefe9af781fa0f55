"""A recorded run and a branch forked from it at turn 1 with the first tool result edited, as
``looptap run --from run.jsonl@turn=1 --edit 'tool_result[call_A1]=@storm.txt'`` writes them
(tests/replay/test_fork_edits.py makes real ones through the recorder; these are built in-process
for the inspector's tests and snapshot)."""

from __future__ import annotations

from pathlib import Path

import orjson

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange, mark

URL = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
SYSTEM = {"role": "system", "content": "Use the weather tool."}
USER = {"role": "user", "content": "Weather in Paris, then somewhere warm?"}
ORIGINAL = "sunny, 21 C in Paris"
EDITED = "STORM WARNING: no flights from Paris"


def tool_call(cid: str, city: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": "get_weather", "arguments": f'{{"city":"{city}"}}'},
            }
        ],
    }


def tool_result(cid: str, text: str) -> dict[str, object]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def answer_body(content: str | None, call: tuple[str, str] | None = None) -> bytes:
    msg: dict[str, object] = {"role": "assistant", "content": content}
    if call is not None:
        msg["tool_calls"] = [
            {
                "id": call[0],
                "type": "function",
                "function": {"name": "get_weather", "arguments": f'{{"city":"{call[1]}"}}'},
            }
        ]
    return orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {"index": 0, "message": msg, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }
    )


def chat_exchange(
    messages: list[dict[str, object]], response: bytes, model: str = "gpt-4o"
) -> Exchange:
    body = orjson.dumps({"model": model, "messages": messages, "tools": TOOLS})
    return Exchange(
        "POST",
        URL,
        [("content-type", "application/json")],
        body,
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, response)],
        ttfb=0.01,
        started=1763768400.0,
    )


def origin() -> list[Exchange]:
    """Paris, then Lyon, then the answer."""
    h0 = [SYSTEM, USER]
    h1 = [*h0, tool_call("call_A1", "Paris"), tool_result("call_A1", ORIGINAL)]
    h2 = [*h1, tool_call("call_A2", "Lyon"), tool_result("call_A2", "sunny, 19 C in Lyon")]
    return [
        chat_exchange(h0, answer_body(None, ("call_A1", "Paris"))),
        chat_exchange(h1, answer_body(None, ("call_A2", "Lyon"))),
        chat_exchange(h2, answer_body("Sunny in Paris and Lyon.")),
    ]


def branch() -> list[Exchange]:
    """From turn 1, live: the model saw the storm and went to Nice; each request marked."""
    h1 = [SYSTEM, USER, tool_call("call_A1", "Paris"), tool_result("call_A1", EDITED)]
    h2 = [*h1, tool_call("call_B1", "Nice"), tool_result("call_B1", "sunny, 24 C in Nice")]
    out = [
        chat_exchange(h1, answer_body(None, ("call_B1", "Nice"))),
        chat_exchange(h2, answer_body("Go to Nice: the storm grounds Paris.")),
    ]
    for ex in out:
        ex.edits = [mark("tool_result[call_A1]", "turn=1", ["messages", 3, "content"], ORIGINAL)]
    return out


def write(folder: Path, *, with_origin: bool = True) -> Path:
    """``run.jsonl`` (unless ``with_origin`` is false) and ``branch.jsonl`` in ``folder``; the
    branch's path."""
    run = folder / "run.jsonl"
    if with_origin:
        with CassetteWriter(run) as w:
            for ex in origin():
                w.append(ex)
    meta = {
        "source": "looptap run --from",
        "origin": {
            "edits": ["tool_result[call_A1]"],
            "run": "run.jsonl",
            "cursor": {"text": "turn=1", "turn": 1, "conversation": None, "seq": None},
            "seq": 1,
            "starts": {"c1": 1},
            "model": None,
        },
    }
    path = folder / "branch.jsonl"
    with CassetteWriter(path, meta=meta) as w:
        for ex in branch():
            w.append(ex)
    return path


CHANGED = "rainy, 9 C in Paris"


def write_tolerant(folder: Path) -> Path:
    """``run.jsonl`` and ``branch.jsonl``, as ``looptap run --from run.jsonl@turn=2 --prefix
    tolerant`` writes them after the world changed (the Paris weather tool now says "rainy"): turn 1
    served in position, its changed result in the fork's note record; turn 2 live."""
    run = folder / "run.jsonl"
    with CassetteWriter(run) as w:
        for ex in origin():
            w.append(ex)
    h1 = [SYSTEM, USER, tool_call("call_A1", "Paris"), tool_result("call_A1", CHANGED)]
    h2 = [*h1, tool_call("call_A2", "Lyon"), tool_result("call_A2", "sunny, 19 C in Lyon")]
    meta = {
        "source": "looptap run --from",
        "origin": {
            "edits": [],
            "run": "run.jsonl",
            "prefix": "tolerant",
            "cursor": {"text": "turn=2", "turn": 2, "conversation": None, "seq": None},
            "seq": 2,
            "starts": {"c1": 2},
            "turn": 2,
            "turns": {"c1": 2},
            "model": None,
        },
    }
    path = folder / "branch.jsonl"
    with CassetteWriter(path, meta=meta) as w:
        w.append(chat_exchange(h2, answer_body("Rain in Paris, sun in Lyon.")))
    note = {
        "type": "note",
        "note": "fork",
        "prefix": "tolerant",
        "starts": {},
        "tolerated": [
            {
                "conversation": "c1",
                "turn": 1,
                "seq": 1,
                "tolerated": [
                    {
                        "path": "messages[3].content",
                        "by": "tool_result",
                        "recorded": ORIGINAL,
                        "live": CHANGED,
                    }
                ],
            }
        ],
    }
    with path.open("ab") as f:
        f.write(orjson.dumps(note) + b"\n")
    return path
