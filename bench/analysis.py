"""Linear analysis benchmark: runs of 100, 1,000 and 10,000 turns with a growing history.

One agent conversation per run: a system prompt and a task, then every turn the model calls a tool
and the client appends the call and its result (~0.5 KB), so turn N re-sends N×2 messages. The
cassette stores each request as a history delta (as looptap's writer does), the benchmark reads it
back and runs the whole layer analysis, timing every turn. Flat time per turn across the run and
across run lengths is the claim; the table prints it side by side in one run. Absolute times come
from a shared, noisy 2-core machine: compare the ratios.

    python bench/analysis.py [--turns 100 1000 10000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.analysis import RunAnalyser
from looptap.cassettes.storage import dumps_record, header_record, read_records

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} a file in the workspace",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read_file", "list_dir", "grep", "run_tests")
]


def _response(turn: int, n_prompt: int) -> bytes:
    return orjson.dumps(
        {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{turn}",
                                "type": "function",
                                "function": {
                                    "name": "read_file",
                                    "arguments": orjson.dumps({"path": f"src/m{turn}.py"}).decode(),
                                },
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": 18,
                "total_tokens": n_prompt + 18,
                "prompt_tokens_details": {"cached_tokens": max(0, n_prompt - 300)},
            },
        }
    )


def write_run(path: Path, turns: int) -> tuple[int, int]:
    """Write the cassette; return (bytes of the history the last request re-sent, bytes on the
    wire)."""
    system = {"role": "system", "content": "You are a careful coding agent. " * 40}
    task = {"role": "user", "content": "Find and fix the failing test in this repository."}
    history_bytes = len(orjson.dumps([system, task]))
    wire = 0
    with open(path, "wb") as f:
        f.write(dumps_record(header_record({"source": "bench/analysis.py"})))
        for turn in range(turns):
            if turn == 0:
                body: dict[str, Any] = {
                    "json": {"model": "gpt-4o-mini", "messages": [system, task], "tools": TOOLS}
                }
            else:
                call = {
                    "id": f"call_{turn - 1}",
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": orjson.dumps({"path": f"src/m{turn - 1}.py"}).decode(),
                    },
                }
                appended = [
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {
                        "role": "tool",
                        "tool_call_id": f"call_{turn - 1}",
                        "content": f"def f{turn}():\n    return {turn}\n" * 8,
                    },
                ]
                history_bytes += len(orjson.dumps(appended))
                body = {
                    "delta": {
                        "base": turn - 1,
                        "key": "messages",
                        "keep": 2 * turn,
                        "append": appended,
                        "order": ["model", "messages", "tools"],
                        "inherit": ["model", "tools"],
                        "set": {},
                    }
                }
            resp = _response(turn, 600 + turn * 140)
            wire += history_bytes + len(resp)
            rec = {
                "type": "exchange",
                "seq": turn,
                "started": 1.7e9 + turn,
                "method": "POST",
                "url": "https://api.openai.com/v1/chat/completions",
                "request": {"headers": [["content-type", "application/json"]], "body": body},
                "response": {
                    "status": 200,
                    "reason": "OK",
                    "headers": [["content-type", "application/json"]],
                    "body": {"json": orjson.loads(resp), "t": 0.8},
                },
                "timing": {"ttfb": 0.8, "duration": 0.9},
            }
            f.write(dumps_record(rec))
    return history_bytes, wire


def run(turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        history_bytes, wire = write_run(path, turns)
        size = os.path.getsize(path)
        t0 = time.perf_counter()
        cas = read_records(path)
        t_read = time.perf_counter() - t0
        analyser = RunAnalyser()
        per_turn: list[float] = []
        t0 = time.perf_counter()
        for ex in cas.exchanges:
            s = time.perf_counter()
            analyser.add(ex)
            per_turn.append(time.perf_counter() - s)
        result = analyser.finish()
        t_analyse = time.perf_counter() - t0
        assert len(result.turns) == turns and len(result.conversations) == 1
        bad = [f for f in result.findings if f.severity.value != "info"]
        assert not bad, bad[:3]
    tenth = max(1, turns // 10)
    return {
        "turns": turns,
        "cassette_mb": size / 1e6,
        "last_history_mb": history_bytes / 1e6,
        "wire_mb": wire / 1e6,
        "read_s": t_read,
        "analyse_s": t_analyse,
        "first_us": statistics.median(per_turn[:tenth]) * 1e6,
        "last_us": statistics.median(per_turn[-tenth:]) * 1e6,
        "mean_us": (t_read + t_analyse) / turns * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, nargs="+", default=[100, 1000, 10000])
    a = ap.parse_args()
    rows = [run(n) for n in a.turns]
    base = rows[0]
    print("looptap layer-analysis benchmark (one conversation, history grows by 2 messages a turn)")
    print("(shared 2-core machine: absolute times are noisy; compare the ratios)")
    print()
    print(
        f"{'turns':>6} {'cassette':>9} {'last req':>9} {'wire':>9} {'read':>7} {'analyse':>8} "
        f"{'µs/turn':>8} {'first 10%':>10} {'last 10%':>9} {'last/first':>10} "
        f"{'vs 1st run':>10} {'wire MB/s':>10}"
    )
    for r in rows:
        print(
            f"{r['turns']:>6} {r['cassette_mb']:>7.1f}MB {r['last_history_mb']:>7.2f}MB "
            f"{r['wire_mb']:>7.0f}MB {r['read_s']:>6.2f}s {r['analyse_s']:>7.2f}s "
            f"{r['mean_us']:>8.0f} {r['first_us']:>9.0f}µ {r['last_us']:>8.0f}µ "
            f"{r['last_us'] / r['first_us']:>10.2f} {r['mean_us'] / base['mean_us']:>10.2f} "
            f"{r['wire_mb'] / (r['read_s'] + r['analyse_s']):>10.0f}"
        )


if __name__ == "__main__":
    main()
