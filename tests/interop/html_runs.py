"""Runs for the HTML report's tests and bench: a long tool loop (``long_run``) and a run whose
recorded text carries script injections (``hostile_run``)."""

from __future__ import annotations

from pathlib import Path

import orjson

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange

URL = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
#: What a recording may carry to break out of the page: each sets a global or the title if it runs.
PAYLOADS = (
    "<script>window.__pwned_script = 1; document.title = 'pwned';</script>",
    '<img src=x onerror="window.__pwned_img = 1; document.title = \'pwned\'">',
    "</script><script>window.__pwned_close = 1</script><!--",
    "\u2028</script>\u2029<svg onload=\"window.__pwned_svg=1\">",
    "&lt;script&gt;window.__pwned_entity=1&lt;/script&gt; {{ 7*7 }}",
)


def _exchange(
    messages: list[dict[str, object]],
    answer: dict[str, object],
    usage: tuple[int, int],
    started: float,
) -> Exchange:
    body = {
        "id": "chatcmpl-x", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": answer, "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}],  # noqa: E501
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},  # noqa: E501
    }  # fmt: skip
    return Exchange(
        "POST", URL, [("content-type", "application/json")],
        orjson.dumps({"model": "gpt-4o", "messages": messages, "tools": TOOLS}),
        status=200, response_headers=[("content-type", "application/json")],
        response_chunks=[(0.2, orjson.dumps(body))], ttfb=0.2, started=started, duration=0.2,
    )  # fmt: skip


def conversation_turns(
    conv: int, turns: int, text: str = "", start: float = 1_763_700_000.0
) -> list[Exchange]:
    """One tool loop of ``turns`` turns: each answer calls read_file, the next request sends its
    result."""
    history: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": f"task {conv}: fix the failing tests. {text}"},
    ]
    out = []
    for i in range(turns):
        last = i == turns - 1
        call_id = f"call_{conv}_{i}"
        answer: dict[str, object] = {
            "role": "assistant",
            "content": f"Turn {i}: reading the next file. {text}" if last else None,
        }
        if not last:
            answer["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": orjson.dumps({"path": f"src/m{i}.py"}).decode(),
                    },
                }
            ]
        tokens = 60 + 45 * i
        out.append(_exchange(list(history), answer, (tokens, 12), start + conv * 1000 + i))
        if not last:
            history.append(answer)
            history.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": f"def f{i}(x):\n    return x * {i}\n{text}",
                }
            )
    return out


def write(path: Path, exchanges: list[Exchange]) -> Path:
    with CassetteWriter(path, meta={"source": "tests/interop/html_runs.py"}) as w:
        for ex in exchanges:
            w.append(ex)
    return path


def long_exchanges(conversations: int = 10, turns: int = 100) -> list[Exchange]:
    """``conversations`` × ``turns`` turns (1,000 by default), interleaved as agents run side by
    side."""
    convs = [conversation_turns(c, turns) for c in range(conversations)]
    return [ex for i in range(turns) for c in convs for ex in [c[i]]]


def long_run(path: Path, conversations: int = 10, turns: int = 100) -> Path:
    """:func:`long_exchanges` as a cassette."""
    return write(path, long_exchanges(conversations, turns))


def hostile_run(path: Path) -> Path:
    """Two conversations whose user text, tool results and answers carry every payload."""
    text = " ".join(PAYLOADS)
    return write(path, conversation_turns(0, 3, text) + conversation_turns(1, 2, text))
