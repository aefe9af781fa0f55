"""Volatile spans: what the built-in detectors (issue 44 item 1) cost the replay matcher, per
request, with them on and off side by side in one run.

    .venv/bin/python bench/volatile.py            # the corpus and a long agent run, about a minute
    .venv/bin/python bench/volatile.py --quick    # a few corpus files, a few seconds

Two bodies of traffic:

* **corpus**: every HTTP cassette of ``tests/corpus`` (vcrpy recordings made by other projects against
  the real APIs; ``LOOPTAP_CORPUS`` to point elsewhere), grouped by API family;
* **agent run**: one synthetic coding-agent conversation of 40 turns, each request re-sending the
  whole history (a system prompt with an environment block — date, cwd, platform — and tool
  results of ~2 KB with paths, timestamps, durations and ids), the shape the detectors meet most.

Per cassette, a matcher is built with the detectors off and one with them on (the recorded keys,
``build``), then every recorded request is matched once, in order, as a replay sends it (``match``,
per request); off and on alternate, three rounds, the fastest of the three kept per request.
Reported per group: requests, median request size, the median match time off and on and their
ratio, the total match time ratio, the build time ratio, the share of requests in which a detector
fired, and **merged**: pairs of recorded requests of one cassette that are different with the
detectors off and equal with them on (what a detector would make ambiguous in real traffic; it
should be 0). Every request must match its own recording in both modes (checked).

Absolute numbers depend on the machine (shared, noisy 2-core boxes here); the ratios are the point.
"""  # noqa: E501

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from real_corpus import corpus_files, load  # noqa: E402

from looptap.cassettes.matching import Matcher, Recorded, request_key  # noqa: E402
from looptap.cassettes.wire import Exchange  # noqa: E402

ROUNDS = 3


def agent_run(turns: int = 40, day: int = 24, salt: int = 0) -> list[Exchange]:
    """A coding agent's conversation on 2026-11-``day`` (``salt``: other ids, temp dirs and
    durations, as another run makes): every request the whole history so far."""
    system = (
        "You are a coding agent. Use the tools to inspect and change files.\n<env>\nWorking "
        f"directory: /home/alice/src/shop\nPlatform: linux\nToday's date: 2026-11-{day}\nGit "
        "branch: main\n</env>\n"
        + "Follow the house style. "
        * 60
    )
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Fix the failing test in tests/test_cart.py"},
    ]
    out: list[Exchange] = []
    tools = [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": f"{n} a path",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        for n in ("read", "ls", "run")
    ]
    for t in range(turns):
        body = orjson.dumps({"model": "gpt-4o", "messages": msgs, "tools": tools})
        out.append(
            Exchange(
                "POST",
                "https://api.openai.com/v1/chat/completions",
                [("content-type", "application/json")],
                body,
                status=200,
                response_headers=[("content-type", "application/json")],
                response_chunks=[(0.01, b"{}")],
            )
        )
        cid = f"call_{t:02d}Xk3jd9Qp2LmN8vR4tY6w"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"path":"tests"}'},
                    }
                ],
            }
        )
        listing = "\n".join(
            f"-rw-r--r-- 1 alice alice {1000 + i * 37} Nov {day} 09:{i:02d}:00 "
            f"/home/alice/src/shop/src/module_{t}_{i}.py"
            for i in range(12)
        )
        log = (
            f"============ 3 passed, 1 failed in {0.5 + t / 100 + salt:.2f}s ============\nrun id "
            f"9b2f64c1-7d3e-4a5b-8c6d-0e1f2a3b{salt:02d}{t:02d} at "
            f"2026-11-{day}T09:{t % 60:02d}:12Z\ncache /tmp/tmpk3j_x{t:03d}{salt}"
        )
        msgs.append(
            {
                "role": "tool",
                "tool_call_id": cid,
                "content": listing + "\n" + log + "\n" + "assert total == 42 " * 20,
            }
        )
    return out


def family(ex: Exchange) -> str:
    key = request_key(ex.method, ex.url, ex.request_headers, ex.request_body, ex.request_json())
    return type(key.adapter).family if key.adapter is not None else "other"


def measure(exchanges: list[Exchange]) -> dict[str, object]:
    """Build and match times (ns) per mode, the fastest of ROUNDS, and what fired."""
    best: dict[bool, list[int]] = {False: [], True: []}
    build: dict[bool, int] = {}
    for _ in range(ROUNDS):
        for on in (False, True):
            t0 = time.perf_counter_ns()
            m = Matcher(exchanges, volatile=on)
            b = time.perf_counter_ns() - t0
            build[on] = min(build.get(on, b), b)
            times = []
            for ex in exchanges:
                t0 = time.perf_counter_ns()
                got = m.match(ex.method, ex.url, ex.request_headers, ex.request_body)
                times.append(time.perf_counter_ns() - t0)
                if not isinstance(got, Recorded):
                    raise SystemExit(
                        "a recorded request did not match its own recording (volatile "
                        f"{'on' if on else 'off'}): {got.headline}"
                    )
            best[on] = (
                times if not best[on] else [min(a, c) for a, c in zip(best[on], times, strict=True)]
            )
    on = Matcher(exchanges, volatile=True)
    keys_on = [r.key for r in on.recorded]
    keys_off = [
        request_key(ex.method, ex.url, ex.request_headers, ex.request_body, ex.request_json())
        for ex in exchanges
    ]
    off_digests = [k.digest for k in keys_off]
    on_digests = [k.digest for k in keys_on]
    merged = sum(
        1
        for i in range(len(exchanges))
        for j in range(i + 1, len(exchanges))
        if off_digests[i] != off_digests[j] and on_digests[i] == on_digests[j]
    )
    return {
        "off": best[False],
        "on": best[True],
        "build_off": build[False],
        "build_on": build[True],
        "fired": sum(1 for k in keys_on if k.spans),
        "merged": merged,
        "sizes": [len(ex.request_body) for ex in exchanges],
    }


def next_day(turns: int) -> tuple[list[int], int, int, int]:
    """The agent run recorded on the 24th, its requests sent again on the 25th by another run
    (other date, ids, temp dirs, durations): match times with the detectors on (fastest of
    ROUNDS), how many matched on and off, and how many tolerated differences were listed."""
    recorded, live = agent_run(turns), agent_run(turns, day=25, salt=7)
    best: list[int] = []
    for _ in range(ROUNDS):
        m = Matcher(recorded, volatile=True)
        times = []
        for ex in live:
            t0 = time.perf_counter_ns()
            m.match(ex.method, ex.url, ex.request_headers, ex.request_body)
            times.append(time.perf_counter_ns() - t0)
        best = times if not best else [min(a, c) for a, c in zip(best, times, strict=True)]
    on = Matcher(recorded, volatile=True)
    matched_on = sum(
        isinstance(on.match(ex.method, ex.url, ex.request_headers, ex.request_body), Recorded)
        for ex in live
    )
    off = Matcher(recorded, volatile=False)
    matched_off = sum(
        isinstance(off.match(ex.method, ex.url, ex.request_headers, ex.request_body), Recorded)
        for ex in live
    )
    return best, matched_on, matched_off, sum(len(t) for t in on.tolerated.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 corpus files and a 10-turn agent run")
    args = ap.parse_args()
    files = corpus_files()
    if args.quick:
        files = files[:: max(1, len(files) // 20)]
    groups: dict[str, list[dict[str, object]]] = defaultdict(list)
    for path in files:
        try:
            exchanges = [ex for ex in load(path) if ex.request_body]
        except Exception:
            # a file load_vcr refuses (tests/test_corpus_* say which): not matched by anyone
            continue
        if exchanges:
            groups[family(exchanges[0])].append(measure(exchanges))
    groups[
        "agent run (synthetic, 40 turns)" if not args.quick else "agent run (synthetic, 10 turns)"
    ].append(measure(agent_run(10 if args.quick else 40)))
    print(
        f"volatile spans: matching with the built-in detectors off and on, {len(files)} corpus "
        f"files + one agent run; fastest of {ROUNDS} rounds per request"
    )
    print()
    print(
        "| traffic | requests | median request | match off (µs, median) | match on (µs, median) | "
        "on / off (median) | on / off (total) | build on / off | detector fired | merged |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    everything: dict[str, list[int]] = {"off": [], "on": []}
    for name in sorted(groups, key=lambda n: (n.startswith("agent"), n)):
        runs = groups[name]
        off = [t for r in runs for t in r["off"]]  # type: ignore[attr-defined]
        on = [t for r in runs for t in r["on"]]  # type: ignore[attr-defined]
        everything["off"] += off
        everything["on"] += on
        sizes = [s for r in runs for s in r["sizes"]]  # type: ignore[attr-defined]
        b_off = sum(int(r["build_off"]) for r in runs)  # type: ignore[call-overload]
        b_on = sum(int(r["build_on"]) for r in runs)  # type: ignore[call-overload]
        fired = sum(int(r["fired"]) for r in runs)  # type: ignore[call-overload]
        merged = sum(int(r["merged"]) for r in runs)  # type: ignore[call-overload]
        m_off, m_on = statistics.median(off) / 1000, statistics.median(on) / 1000
        print(
            f"| {name} | {len(off):,} | {statistics.median(sizes) / 1024:,.1f} KB | {m_off:,.0f} | "
            f"{m_on:,.0f} | {m_on / m_off:.2f} | {sum(on) / sum(off):.2f} | {b_on / b_off:.2f} | "
            f"{fired / len(off):.0%} | {merged} |"
        )
    off, on = everything["off"], everything["on"]
    print(
        f"| **all** | {len(off):,} | | {statistics.median(off) / 1000:,.0f} | "
        f"{statistics.median(on) / 1000:,.0f} | "
        f"{statistics.median(on) / statistics.median(off):.2f} | {sum(on) / sum(off):.2f} | | | |"
    )
    turns = 10 if args.quick else 40
    agent_off: list[int] = next(
        r["off"] for n, runs in groups.items() if n.startswith("agent") for r in runs
    )  # type: ignore[misc]
    times, matched_on, matched_off, listed = next_day(turns)
    print()
    print(
        f"The same agent run sent again the next day by another run ({turns} requests: other date, "
        "ids, temp dirs, durations):"
    )
    print(
        f"detectors on: {matched_on} of {turns} matched, {listed} tolerated differences listed, "
        f"match {statistics.median(times) / 1000:,.0f} µs median "
        f"({statistics.median(times) / statistics.median(agent_off):.2f}x the same run matched "
        f"with them off); detectors off: {matched_off} of {turns} matched"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
