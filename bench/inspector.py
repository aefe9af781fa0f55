"""Inspector benchmark: time to first screen and peak memory for ~10 MB, ~100 MB and ~1 GB cassettes.

A synthetic run of realistic shape: many agent conversations of 100 turns each; every turn streams
a ~1.5 KB answer as ~60 SSE text deltas with chunk timings, then calls a tool, and the client sends
back a ~4 KB tool result (so every request re-sends a growing history, stored as a history delta,
as looptap's writer stores it). One 100-turn conversation is recorded with the real
``CassetteWriter``; bigger files repeat it with the seqs, history bases and a conversation marker
in the first user message rewritten, so each copy is its own conversation.

Each measurement runs in a fresh child process: the headless app (``App.run_test``, 160×45) from
``build_app`` until the turn list shows turns and the first turn's messages are on screen (first
screen), then until the whole file is read and analysed; peak RSS is the child's VmHWM.
The batch path (``read_records`` + ``analyse``, what ``looptap show`` does) is measured too, up
to ``--batch-limit`` MB. Files go to a temporary directory (``--dir`` keeps them).
Absolute times come from a shared, noisy 2-core machine: compare the rows with each other.

    python bench/inspector.py [--sizes 10 100 1000] [--dir /tmp/looptap-bench] [--no-batch] [--write]

Each size is measured twice, side by side: as recorded (the writer's stored parse of each
response is taken back, ``cassettes.parsing.sealed``) and with the stored parses removed (every response
framed and reassembled from its raw bytes, as for a cassette from another machine).
"""  # noqa: E501

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

# This file is bench/inspector.py: keep its directory off the import path, or ``import inspector``
# would find this script instead of the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TURNS = 100
MARK = b"CONV-000000"

TOOLS = [
    {
        "name": name,
        "description": f"{name.replace('_', ' ')} in the workspace; returns "
        "JSON with the result and any warnings",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "pattern": {"type": "string"},
                "limit": {"type": "integer"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    }
    for name in (
        "read_file",
        "list_dir",
        "grep",
        "run_tests",
        "write_file",
        "git_diff",
        "search_docs",
        "open_url",
    )
]
WORDS = "the agent reads the file and then decides which function to call next based on the test output".split()  # noqa: E501


def _sse(events: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    return [
        f"event: {name}\ndata: {orjson.dumps(data).decode()}\n\n".encode() for name, data in events
    ]


def _turn(i: int, history: list[dict[str, Any]]) -> Any:
    from looptap.cassettes.wire import Exchange

    text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(260))
    call_id = f"toolu_{i:06d}"
    args = {"path": f"src/module_{i}.py", "limit": 200}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": "You are a careful coding agent. " * 30,
        "tools": TOOLS,
        "stream": True,
        "messages": history,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{i:06d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 1500 + 1200 * i, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    words = text.split(" ")
    for k in range(0, len(words), 5):
        piece = " ".join(words[k : k + 5]) + " "
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": call_id,
                    "name": "read_file",
                    "input": {},
                },
            },
        )
    )
    events.append(
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": orjson.dumps(args).decode()},
            },
        )
    )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 420},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    chunks = [(round(0.4 + 0.02 * k, 3), c) for k, c in enumerate(_sse(events))]
    ex = Exchange(
        method="POST",
        url="https://api.anthropic.com/v1/messages",
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=chunks,
        started=1_763_700_000.0 + i,
        ttfb=0.35,
        duration=chunks[-1][0],
    )
    history.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": call_id, "name": "read_file", "input": args},
            ],
        }
    )
    result = "\n".join(
        f"{n:4d}  def function_{i}_{n}(x):  return x * {n}  # {WORDS[n % len(WORDS)]}"
        for n in range(90)
    )
    history.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}],
        }
    )
    return ex


def template(path: Path) -> None:
    """One conversation of TURNS turns, recorded with the real writer."""
    from looptap.cassettes.recording.pipeline import CassetteWriter

    history: list[dict[str, Any]] = [
        {"role": "user", "content": f"{MARK.decode()}: fix the failing tests in src/."}
    ]
    with CassetteWriter(path, meta={"source": "bench/inspector.py"}) as w:
        for i in range(TURNS):
            w.append(_turn(i, history))


_SEQ = re.compile(rb'"(seq|base)":(\d+)')


def sealed_ok(tmpl: Path) -> bool:
    """Whether this tree reads the template as it was written. Since issue 56 no reader takes a
    stored parse (``parsed`` blocks are ignored), so any template serves: always true (kept for
    bench/perf.py's callers, which regenerated a template another looptap had sealed)."""
    return tmpl.exists()


def unsealed(run: Path, out: Path) -> None:
    """A run without its stored parses: what a cassette from another machine, or from a looptap
    before parse once, costs to read (every response framed and reassembled again)."""
    with run.open("rb") as src, out.open("wb") as f:
        f.write(src.readline())
        for line in src:  # a line at a time: the parent's peak memory is inherited by the children
            rec = orjson.loads(line)
            rec.pop("parsed", None)
            f.write(orjson.dumps(rec) + b"\n")


def generate(path: Path, target: int, tmpl: Path) -> None:
    """Copies of the template conversation until the file reaches ``target`` bytes."""
    lines = tmpl.read_bytes().splitlines(keepends=True)
    header, records = lines[0], lines[1:]
    with path.open("wb") as out:
        out.write(header)
        size, copy = len(header), 0
        while size < target:
            offset = copy * len(records)
            marker = f"CONV-{copy:06d}".encode()

            def shift(m: re.Match[bytes], offset: int = offset) -> bytes:
                return b'"' + m.group(1) + b'":' + str(int(m.group(2)) + offset).encode()

            for line in records:
                line = _SEQ.sub(shift, line).replace(MARK, marker)
                out.write(line)
                size += len(line)
            copy += 1


# -- measurement (child process) --------------------------------------------------------------


def _hwm_mb() -> float:
    """This process's peak RSS. Not ``ru_maxrss``: Linux keeps that across ``exec``, so a child
    would report the benchmark parent's peak (which reads the big files) as its own."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_app(path: str) -> dict[str, Any]:
    import asyncio

    from looptap.cassettes.cli import tune_gc

    tune_gc()  # as the looptap command does before any subcommand
    t_start = time.perf_counter()
    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import TurnList

    t_import = time.perf_counter() - t_start
    out: dict[str, Any] = {"import_s": t_import}

    async def main() -> None:
        t0 = time.perf_counter()
        app = build_app(path)
        async with app.run_test(size=(160, 45)) as pilot:
            main = app.main  # the screen that holds the run (its reader, `reading`)
            reading = main.reading
            while not (app.query_one(TurnList).turns and reading.request_of is not None):
                await pilot.pause(0.01)
            out["first_screen_s"] = time.perf_counter() - t0
            out["first_screen_rss_mb"] = _hwm_mb()
            out["turns_at_first_screen"] = len(reading.index.turns)
            # Plain sleeps, not pilot.pause: a pause waits until every widget has processed a
            # message it posts to each, 20 times a second, which would load the UI thread (and
            # so the reader) with work a person using the app does not cause.
            while not (main.reading.complete or main.reading.failed):
                await asyncio.sleep(0.05)
            out["full_read_s"] = time.perf_counter() - t0
            out["turns"] = len(reading.index.turns)
            out["conversations"] = len(reading.index.conv)
            # A turn deep in the file, its full history re-read from disk through the index.
            t1 = time.perf_counter()
            turn_list = app.query_one(TurnList)
            turn_list.action_last()
            seq = turn_list.selected_seq
            while reading.request_of != seq:
                await pilot.pause(0.01)
            out["last_turn_s"] = time.perf_counter() - t1
            out["failed"] = main.reading.failed

    asyncio.run(main())
    out["peak_rss_mb"] = _hwm_mb()
    return out


def child_batch(path: str) -> dict[str, Any]:
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.cli import tune_gc
    from looptap.cassettes.storage import read_records

    tune_gc()  # as the looptap command does before any subcommand

    t0 = time.perf_counter()
    cas = read_records(path)
    analysis = analyse(cas.exchanges)
    return {
        "batch_s": time.perf_counter() - t0,
        "turns": len(analysis.turns),
        "peak_rss_mb": _hwm_mb(),
    }


def _child(mode: str, path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {mode} {path} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _fmt_batch(batch: dict[str, Any] | None) -> str:
    return f"{batch['batch_s']:.1f} s ({batch['peak_rss_mb']:.0f} MB)" if batch else "not run"


def _ensure(root: Path, name: str, mb: int, tmpl: Path) -> Path:
    path = root / f"{name}-{mb}mb.jsonl"
    if not path.exists() or path.stat().st_size < mb * 1_000_000:
        t = time.perf_counter()
        generate(path, mb * 1_000_000, tmpl)
        print(
            f"generated {path.name}: {path.stat().st_size / 1e6:.0f} MB in "
            f"{time.perf_counter() - t:.1f} s",
            file=sys.stderr,
        )
    return path


def _ratios(rows: list[tuple[str, int, dict[str, Any], dict[str, Any] | None]]) -> list[str]:
    out = []
    for (n1, size, a1, b1), (n2, _, a2, b2) in itertools.pairwise(rows):
        if n1 == "run" and n2 == "unsealed":
            r = f"inspector {a2['full_read_s'] / a1['full_read_s']:.2f}×"
            if b1 and b2:
                r += f", batch {b2['batch_s'] / b1['batch_s']:.2f}×"
            out.append(f"{size / 1e6:,.0f} MB: {r}")
    return out


def _write_doc(table: str, ratios: list[str]) -> None:
    import datetime
    import platform

    doc = Path(__file__).resolve().parents[1] / "docs" / "inspector-performance.md"
    text = (
        "# Reading large runs: measured\n\n"
        f"Generated by `python bench/inspector.py --write` on {datetime.date.today()} "
        f"({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; a "
        "shared machine: compare the rows with each other, not with another machine). What is "
        "measured: the docstring of `bench/inspector.py`.\n\n" + table + "\n\n"
    )
    if ratios:
        text += (
            "Time to read with every response parsed from its raw bytes, over the time taking the "
            "writer's stored parses: " + "; ".join(ratios) + ".\n\n"
        )
    text += (
        "The rows without stored parses are the same runs with their `parsed` blocks removed: what "
        "a cassette recorded on another machine, or by a looptap before parse once, costs to "
        "read.\n"
    )
    doc.write_text(text)
    print(f"wrote {doc}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=[10, 100, 1000], help="cassette sizes in MB"
    )
    ap.add_argument(
        "--dir", help="where to write (and reuse) the cassettes; default: a temporary directory"
    )
    ap.add_argument(
        "--no-batch", action="store_true", help="skip the read_records + analyse comparison"
    )
    ap.add_argument(
        "--batch-limit",
        type=int,
        default=1000,
        help="largest size (MB) measured with the batch path",
    )
    ap.add_argument(
        "--no-unsealed", action="store_true", help="skip the same runs without their stored parses"
    )
    ap.add_argument(
        "--write", action="store_true", help="write the table to docs/inspector-performance.md"
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, path = args.child
        print(json.dumps(child_app(path) if mode == "app" else child_batch(path)))
        return
    tmp = None if args.dir else tempfile.TemporaryDirectory(prefix="looptap-bench-")
    root = Path(args.dir or (tmp.name if tmp else "."))
    root.mkdir(parents=True, exist_ok=True)
    tmpl = root / "template.jsonl"
    if tmpl.exists() and not sealed_ok(tmpl):
        # Written by a looptap whose parser differs, or under another machine key: start again.
        print(
            "the kept template's stored parses are not this looptap's: regenerating",
            file=sys.stderr,
        )
        # what this script made (--dir may hold other files)
        for old in [tmpl, *root.glob("*-*mb.jsonl")]:
            old.unlink()
    if not tmpl.exists():
        template(tmpl)
    if not sealed_ok(tmpl):
        raise SystemExit(
            "the writer's stored parses are not taken back by the reader (looptap.cassettes.parsing.sealed)"  # noqa: E501
        )
    rows: list[tuple[str, int, dict[str, Any], dict[str, Any] | None]] = []
    for mb in args.sizes:
        run = _ensure(root, "run", mb, tmpl)
        kinds = [("run", run)]
        if not args.no_unsealed:
            # The same run, turn for turn, with its stored parses removed.
            bare = root / f"unsealed-{mb}mb.jsonl"
            if not bare.exists() or bare.stat().st_mtime < run.stat().st_mtime:
                unsealed(run, bare)
            kinds.append(("unsealed", bare))
        for name, path in kinds:
            app = _child("app", path)
            batch = _child("batch", path) if not args.no_batch and mb <= args.batch_limit else None
            rows.append((name, path.stat().st_size, app, batch))
            print(
                f"{name} {mb} MB: {app}" + (f"  batch: {batch}" if batch else ""), file=sys.stderr
            )
    lines = [
        "| cassette | stored parses | turns (conversations) | first screen | RSS at first screen | "
        "whole file read + analysed | peak RSS | last turn's history re-read | `read_records` + "
        "`analyse` (peak RSS) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, size, app, batch in rows:
        lines.append(
            f"| {size / 1e6:,.0f} MB | {'taken' if name == 'run' else 'removed: parsed from raw'} "
            f"| {app['turns']:,} ({app['conversations']:,}) | {app['first_screen_s']:.2f} s "
            f"| {app['first_screen_rss_mb']:.0f} MB | {app['full_read_s']:.1f} s | "
            f"{app['peak_rss_mb']:.0f} MB | {app['last_turn_s']:.2f} s | {_fmt_batch(batch)} |"
        )
    table = "\n".join(lines)
    ratios = _ratios(rows)
    print()
    print(table)
    if ratios:
        print("\nparsed from raw / stored parses taken: " + "; ".join(ratios))
    print(
        f"\n(start-up imports before the app: {rows[0][2]['import_s']:.2f} s; first screen is "
        "measured from build_app)"
    )
    if args.write:
        _write_doc(table, ratios)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
