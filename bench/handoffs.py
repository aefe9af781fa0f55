"""Handed loops read again, timed: a LangGraph supervisor's run of N round trips (issue 90,
docs/threading.md "Handoffs read again"). Each round the supervisor transfers to its worker, the
worker calls a tool twice and answers, and the supervisor's next request carries the worker's last
answer alone (``last_message``: every round's loop is moved to a conversation of its own when the
supervisor goes on) or the worker's whole loop (``full_history``: one conversation, nothing moved).
The cassette stores each request as a history delta (as looptap's writer does); the whole layer
analysis is timed turn by turn. Flat time per turn across the run, and the two modes alike, is the
claim: a move costs the moved loop's turns once, never a walk over the run. Absolute times come
from a shared, noisy 2-core machine: compare the ratios.

    .venv/bin/python bench/handoffs.py [--turns 200 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.analysis import RunAnalyser
from looptap.cassettes.storage import dumps_record, header_record, read_records

SUPERVISOR = "You manage a weather expert. Assign weather questions to it, then answer."
WORKER = "You are a weather assistant. Use the get_weather tool for every city."


def _tool(name: str) -> dict[str, Any]:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": params}}


def _call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(args).decode()},
    }


def _answer(seq: int, text: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{seq}",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


class Writer:
    """The cassette: each request a delta over an earlier one (its base and kept length)."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.seq = 0

    def request(self, body: dict[str, Any], answer: dict[str, Any]) -> int:
        rec = {
            "type": "exchange",
            "seq": self.seq,
            "started": 1.7e9 + self.seq,
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "request": {"headers": [["content-type", "application/json"]], "body": body},
            "response": {
                "status": 200,
                "reason": "OK",
                "headers": [["content-type", "application/json"]],
                "body": {"json": answer, "t": 0.1},
            },
            "timing": {"ttfb": 0.1, "duration": 0.2},
        }
        self.f.write(dumps_record(rec))
        self.seq += 1
        return self.seq - 1


def _delta(base: int, keep: int, append: list[Any], system: str, tool: str) -> dict[str, Any]:
    """A request that keeps ``keep`` messages of request ``base`` (its system message replaced
    by ``system``: written whole when it changes) and appends ``append``."""
    return (
        {"json": {"model": "gpt-4o", "messages": append, "tools": [_tool(tool)]}}
        if base < 0
        else {
            "delta": {
                "base": base,
                "key": "messages",
                "keep": keep,
                "append": append,
                "order": ["model", "messages", "tools"],
                "inherit": ["model"],
                "set": {"tools": [_tool(tool)]},
            },
        }
    )


def write_run(path: Path, turns: int, mode: str) -> None:
    """Rounds of four round trips (the supervisor's transfer, the worker's two calls and its
    answer) and the supervisor's last answer; each agent's request a delta over that agent's
    previous one (the supervisor's over its last, the worker's first over its last first)."""
    sup: list[Any] = [
        {"role": "system", "content": SUPERVISOR},
        {"role": "user", "content": "Weather?"},
    ]
    with open(path, "wb") as f:
        f.write(dumps_record(header_record({"source": "bench/handoffs.py"})))
        w = Writer(f)
        rounds = max(1, (turns - 1) // 4)
        sup_at = first_at = -1  # the agents' previous requests (seq), and their lengths
        sup_len = first_len = 0
        for k in range(rounds):
            transfer = _call(f"call_t{k}", "transfer_to_weather_expert", {})
            sup_at = w.request(
                _delta(
                    sup_at,
                    sup_len,
                    sup[sup_len:] if sup_at >= 0 else list(sup),
                    SUPERVISOR,
                    "transfer_to_weather_expert",
                ),
                _answer(w.seq, None, [transfer]),
            )
            sup_len = len(sup)
            handed = [
                {"role": "assistant", "content": None, "tool_calls": [transfer]},
                {"role": "tool", "tool_call_id": f"call_t{k}", "content": "Transferred"},
            ]
            history = [{"role": "system", "content": WORKER}, *sup[1:], *handed]
            body = _delta(
                first_at,
                first_len,
                history[first_len:] if first_at >= 0 else history,
                WORKER,
                "get_weather",
            )
            loop: list[Any] = []
            prev = -1
            for city in ("Paris", "Tokyo"):
                call = _call(f"call_{city}{k}", "get_weather", {"city": city})
                if prev >= 0:
                    body = _delta(
                        prev, len(history) + len(loop) - 2, loop[-2:], WORKER, "get_weather"
                    )
                prev = w.request(body, _answer(w.seq, None, [call]))
                if city == "Paris":
                    first_at, first_len = prev, len(history)
                loop += [
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {
                        "role": "tool",
                        "tool_call_id": f"call_{city}{k}",
                        "content": f"WEATHER: {city} {k}",
                    },
                ]
            report = f"REPORT {k}: Paris is sunny, Tokyo rainy; pack sunglasses and an umbrella."
            w.request(
                _delta(prev, len(history) + len(loop) - 2, loop[-2:], WORKER, "get_weather"),
                _answer(w.seq, report, []),
            )
            sup += (
                handed
                + (loop if mode == "full_history" else [])
                + [{"role": "assistant", "content": report}]
            )
        w.request(
            _delta(sup_at, sup_len, sup[sup_len:], SUPERVISOR, "transfer_to_weather_expert"),
            _answer(w.seq, "Done.", []),
        )


def run(turns: int, mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        write_run(path, turns, mode)
        cas = read_records(path)
        analyser = RunAnalyser()
        per_turn: list[float] = []
        t0 = time.perf_counter()
        for ex in cas.exchanges:
            s = time.perf_counter()
            analyser.add(ex)
            per_turn.append(time.perf_counter() - s)
        result = analyser.finish()
        total = time.perf_counter() - t0
    n = len(per_turn)
    tenth = max(1, n // 10)
    return {
        "mode": mode,
        "turns": n,
        "conversations": len(result.conversations),
        "analyse_s": total,
        "mean_us": total / n * 1e6,
        "first_us": statistics.median(per_turn[:tenth]) * 1e6,
        "last_us": statistics.median(per_turn[-tenth:]) * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, nargs="+", default=[200, 2000])
    a = ap.parse_args()
    print("a supervisor's run: handed loops moved (last_message) or kept (full_history)")
    print("(shared 2-core machine: absolute times are noisy; compare the ratios)\n")
    print(
        f"{'mode':>13} {'turns':>6} {'convs':>6} {'analyse':>8} {'µs/turn':>8} "
        f"{'first 10%':>10} {'last 10%':>9} {'last/first':>10}"
    )
    for n in a.turns:
        for mode in ("last_message", "full_history"):
            r = run(n, mode)
            print(
                f"{r['mode']:>13} {r['turns']:>6} {r['conversations']:>6} {r['analyse_s']:>7.2f}s "
                f"{r['mean_us']:>8.0f} {r['first_us']:>9.0f}µ {r['last_us']:>8.0f}µ "
                f"{r['last_us'] / r['first_us']:>10.2f}"
            )


if __name__ == "__main__":
    main()
