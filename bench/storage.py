"""Linear storage benchmark: a 300-turn agent conversation carrying ~150 KB of history per turn.

Prints, side by side in one run: the bytes the agent sent (what a naive recorder stores), the
unique content of the run, looptap's cassette size, and the cassette written without delta
encoding (a verbatim JSONL recorder), plus write and load times. Ratios are the result; absolute
times depend on the machine (shared, noisy 2-core boxes here).

    python bench/storage.py [--turns 300] [--context-kb 100]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.parsing import parse_all
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange


def _words(rng: random.Random, n: int) -> str:
    vocab = "the agent reads a file then calls a tool and checks the result before it answers with care".split()  # noqa: E501
    return " ".join(rng.choice(vocab) for _ in range(n))


def build_run(turns: int, context_kb: int, seed: int = 7) -> tuple[list[Exchange], int]:
    """The exchanges of one tool-loop conversation and the size of its unique content."""
    rng = random.Random(seed)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": _words(rng, 40),
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
        for i in range(12)
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": _words(rng, 400)},
        {
            "role": "user",
            "content": "Here is the repository dump:\n" + _words(rng, context_kb * 1024 // 5),
        },
    ]
    unique = len(orjson.dumps(history)) + len(orjson.dumps(tools))
    exchanges = []
    for turn in range(turns):
        body = {
            "model": "gpt-4o-mini",
            "messages": list(history),
            "tools": tools,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        args = orjson.dumps({"path": f"src/module_{turn}.py"}).decode()
        call_id = f"call_{turn:04d}"
        chunks = []
        base = {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion.chunk",
            "model": "gpt-4o-mini-2024-07-18",
        }
        first = base | {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "tool_1", "arguments": ""},
                            }
                        ],
                    },
                    "finish_reason": None,
                }
            ]
        }
        chunks.append(first)
        for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
            chunks.append(
                base
                | {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": 0, "function": {"arguments": piece}}]
                            },
                            "finish_reason": None,
                        }
                    ]
                }
            )
        chunks.append(
            base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        )
        chunks.append(
            base
            | {
                "choices": [],
                "usage": {
                    "prompt_tokens": 40000 + turn * 80,
                    "completion_tokens": 20,
                    "total_tokens": 40020 + turn * 80,
                },
            }
        )
        sse = [
            (0.05 * (i + 1), b"data: " + orjson.dumps(c) + b"\n\n") for i, c in enumerate(chunks)
        ] + [(0.3, b"data: [DONE]\n\n")]
        req = orjson.dumps(body)
        exchanges.append(
            Exchange(
                method="POST",
                url="https://api.openai.com/v1/chat/completions",
                request_headers=[
                    ("content-type", "application/json"),
                    ("authorization", "Bearer sk-bench-000000000000000000000"),
                ],
                request_body=req,
                status=200,
                response_headers=[("content-type", "text/event-stream")],
                response_chunks=sse,
                started=1.7e9 + turn,
                ttfb=0.05,
                duration=0.3,
            )
        )
        appended = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "tool_1", "arguments": args},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": _words(rng, 50)},
        ]
        history.extend(appended)
        unique += len(orjson.dumps(appended)) + sum(len(c) for _, c in sse)
    return exchanges, unique


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--context-kb", type=int, default=100)
    a = ap.parse_args()
    exchanges, unique = build_run(a.turns, a.context_kb)
    wire = sum(
        len(ex.request_body) + sum(len(c) for _, c in ex.response_chunks) for ex in exchanges
    )
    avg_hist = sum(len(ex.request_body) for ex in exchanges) / len(exchanges)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        t0 = time.perf_counter()
        with CassetteWriter(path) as w:
            for ex in exchanges:
                w.append(ex)
        t_write = time.perf_counter() - t0
        size = os.path.getsize(path)
        t0 = time.perf_counter()
        cas = read_records(path)
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        views = parse_all(cas.exchanges)
        t_parse = time.perf_counter() - t0
        assert len(cas.exchanges) == a.turns and not cas.problems
        assert [ex.request_json() for ex in cas.exchanges[-3:]] == [
            orjson.loads(ex.request_body) for ex in exchanges[-3:]
        ]
        assert all(v.response and v.response.complete for v in views)
        # The verbatim recorder: same records, full request every turn (no delta encoding).
        naive = Path(d) / "naive.jsonl"
        t0 = time.perf_counter()
        with open(naive, "wb") as f:
            for ex in exchanges:
                f.write(
                    orjson.dumps(
                        {
                            "request": orjson.loads(ex.request_body),
                            "response": [[t, c.decode()] for t, c in ex.response_chunks],
                        }
                    )
                    + b"\n"
                )
        t_naive_write = time.perf_counter() - t0
        naive_size = os.path.getsize(naive)
        t0 = time.perf_counter()
        with open(naive, "rb") as f:
            for line in f:
                orjson.loads(line)
        t_naive_load = time.perf_counter() - t0
    mb = 1024 * 1024
    print(
        f"looptap storage benchmark: {a.turns} turns, average request history "
        f"{avg_hist / 1024:.0f} KB"
    )
    print("(absolute times: shared 2-core machine, noisy; compare the ratios)")
    print()
    print(f"{'what':44} {'size':>10} {'× unique':>9}")
    print(f"{'unique content of the run':44} {unique / mb:>8.2f}MB {1.0:>9.2f}")
    print(
        f"{'bytes on the wire (requests + responses)':44} {wire / mb:>8.2f}MB {wire / unique:>9.2f}"
    )
    print(
        f"{'verbatim JSONL recorder (no delta)':44} {naive_size / mb:>8.2f}MB "
        f"{naive_size / unique:>9.2f}"
    )
    print(f"{'looptap cassette':44} {size / mb:>8.2f}MB {size / unique:>9.2f}")
    print()
    print(f"{'time':44} {'seconds':>10} {'× verbatim':>10}")
    print(
        f"{'looptap write (redact + analyse + encode)':44} {t_write:>10.3f} "
        f"{t_write / t_naive_write:>10.2f}"
    )
    print(
        f"{'looptap load (rebuild every request)':44} {t_load:>10.3f} "
        f"{t_load / t_naive_load:>10.2f}"
    )
    print(f"{'looptap parse all round trips':44} {t_parse:>10.3f}")
    print(f"{'verbatim write':44} {t_naive_write:>10.3f}")
    print(f"{'verbatim load':44} {t_naive_load:>10.3f}")


if __name__ == "__main__":
    main()
