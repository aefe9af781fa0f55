"""Load through the real recorder: N concurrent agents × T streamed turns, a growing history each.

    .venv/bin/python bench/load.py                    # 50 agents × 100 turns (about 2-4 minutes)
    .venv/bin/python bench/load.py --agents 10 --turns 10
    .venv/bin/python bench/load.py --direct           # also the same load without the recorder

Processes, all on 127.0.0.1: the fake upstream (``python -m tests.support.upstream``, serving a
recorded OpenAI chat stream, 12 SSE events), ``looptap record`` from ``$LOOPTAP_PROXY_PYTHON``
(default ``.venv-proxy/bin/python``), and this process running the agents as asyncio tasks over
raw keep-alive HTTP/1.1 connections (no SDK: the client must not be the bottleneck). Each agent
is one conversation: turn ``t`` sends its whole history — the first user message naming the
agent, then every assistant answer it streamed back (reassembled from the deltas) and the next
user message — so the cassette's history-delta encoding and conversation threading work on real
growth.

Checked after the run (and by tests/reliability/test_load.py): every round trip is in the
cassette (zero lost), each recorded response body has the SHA-256 the agent computed on what it
received (zero corrupted), and ``cassettes.analysis.analyse`` threads the cassette into exactly N
conversations of T turns, each holding exactly its agent's round trips in order.

Measured: wall time, round trips/s and SSE events/s, per-round-trip latency (p50/p99) and time to
the first byte, the time the writer needed after the last response to have everything on disk,
and the CPU time and peak RSS of the proxy process and of its writer process (``/proc``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

__all__ = ["LoadResult", "check_cassette", "main", "run_load"]


@dataclass
class Sample:
    agent: int
    turn: int
    sha: str
    events: int
    ttfb: float
    total: float
    done_at: float


@dataclass
class LoadResult:
    agents: int
    turns: int
    target: str
    wall: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    drain: float | None = None
    proxy_cpu: float | None = None
    proxy_peak_rss: int | None = None
    writer_cpu: float | None = None
    writer_peak_rss: int | None = None
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def round_trips(self) -> int:
        return len(self.samples)

    def pct(self, attr: str, q: float) -> float:
        xs = sorted(getattr(s, attr) for s in self.samples)
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, int(q * len(xs)))]


# ---------------------------------------------------------------------------------------------
# The agents


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, float]:
    head = await reader.readuntil(b"\r\n\r\n")
    first = time.perf_counter()
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
    }
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return status, b"".join(parts), first
    n = int(headers.get("content-length", "0"))
    return status, await reader.readexactly(n), first


def _assistant_text(body: bytes) -> tuple[str, int]:
    text, events = [], 0
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            events += 1
            obj = json.loads(line[6:])
            for ch in obj.get("choices") or []:
                text.append((ch.get("delta") or {}).get("content") or "")
    return "".join(text), events


async def _agent(a: int, turns: int, port: int, run: str, result: LoadResult) -> None:
    history: list[dict[str, str]] = [
        {"role": "system", "content": "You are a load-test agent."},
        {"role": "user", "content": f"Agent {a} of run {run}: what is the capital of France?"},
    ]
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    try:
        for t in range(turns):
            body = json.dumps({"model": "gpt-4o", "stream": True, "messages": history}).encode()
            head = (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: "
                "application/json\r\nAuthorization: Bearer "
                f"sk-load-0123456789abcdefghijklmn\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            start = time.perf_counter()
            writer.write(head + body)
            await writer.drain()
            status, data, first = await _read_response(reader)
            end = time.perf_counter()
            if status != 200:
                result.errors.append(f"agent {a} turn {t}: HTTP {status}")
                return
            text, events = _assistant_text(data)
            result.samples.append(
                Sample(
                    a,
                    t,
                    hashlib.sha256(data).hexdigest(),
                    events,
                    first - start,
                    end - start,
                    time.time(),
                )
            )
            history.append({"role": "assistant", "content": text})
            history.append({"role": "user", "content": f"Agent {a}, turn {t + 1}: and then?"})
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        result.errors.append(f"agent {a}: {type(exc).__name__}: {exc}")
    finally:
        writer.close()


async def _agents(agents: int, turns: int, port: int, run: str, result: LoadResult) -> None:
    await asyncio.gather(*(_agent(a, turns, port, run, result) for a in range(agents)))


# ---------------------------------------------------------------------------------------------
# Processes


def _start_upstream(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = workdir / "upstream.port"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.upstream",
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--delay",
            "0",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"fake upstream did not start: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{ready.read_text().strip()}"


def check_cassette(path: Path, result: LoadResult) -> dict[str, Any]:
    """Zero lost, zero corrupted, every conversation threaded as its agent sent it."""
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.storage import read_records

    cas = read_records(path)
    by_key: dict[tuple[int, int], Any] = {}
    for ex in cas.exchanges:
        msgs = ex.request_json()["messages"]
        agent = int(msgs[1]["content"].split(" ", 2)[1])
        turn = (len(msgs) - 2) // 2
        by_key[(agent, turn)] = ex
    sent = {(s.agent, s.turn): s for s in result.samples}
    lost = sorted(set(sent) - set(by_key))
    corrupted = sorted(
        k
        for k in sent
        if k in by_key and hashlib.sha256(by_key[k].response_body).hexdigest() != sent[k].sha
    )
    run = analyse(cas.exchanges)
    seq_of = {k: ex.seq for k, ex in by_key.items()}
    expected = sorted(
        sorted(seq_of[(a, t)] for t in range(result.turns) if (a, t) in seq_of)
        for a in range(result.agents)
    )
    threaded = sorted(sorted(c.turns) for c in run.conversations)
    in_order = all(c.turns == sorted(c.turns) for c in run.conversations)
    return {
        "recorded": len(cas.exchanges),
        "problems": [str(p) for p in cas.problems],
        "lost": lost,
        "corrupted": corrupted,
        "conversations": len(run.conversations),
        "turns_per_conversation": sorted({len(c.turns) for c in run.conversations}),
        "threaded_as_sent": threaded == expected and in_order,
        "cassette_bytes": path.stat().st_size,
    }


def run_load(
    agents: int,
    turns: int,
    workdir: Path,
    *,
    direct: bool = False,
    proxy_python: Path | None = None,
) -> LoadResult:
    """One load run (through ``looptap record`` unless ``direct``); checks the cassette."""
    from tests.support.recorder import RecorderProcess

    result = LoadResult(agents, turns, "direct" if direct else "looptap")
    up_proc, up_url = _start_upstream(workdir)
    rec = None
    try:
        port = int(up_url.rsplit(":", 1)[1])
        if not direct:
            out = workdir / "load.jsonl"
            rec = RecorderProcess(
                out, workdir / "conf", up_url, python=proxy_python, ready_timeout=120
            )
            port = rec.port()
            before = rec.stats()
        run = os.urandom(4).hex()
        t0 = time.perf_counter()
        asyncio.run(_agents(agents, turns, port, run, result))
        result.wall = time.perf_counter() - t0
        if rec is not None:
            expected = len(result.samples)
            t1 = time.monotonic()
            while time.monotonic() - t1 < 300 and out.read_bytes().count(b"\n") - 1 < expected:
                time.sleep(0.05)
            result.drain = time.monotonic() - t1
            after = rec.stats()
            p0, p1 = before.get("proxy"), after.get("proxy")
            w0, w1 = before.get("writer"), after.get("writer")
            if p0 and p1:
                result.proxy_cpu, result.proxy_peak_rss = p1.cpu - p0.cpu, p1.peak_rss
            if w0 and w1:
                result.writer_cpu, result.writer_peak_rss = w1.cpu - w0.cpu, w1.peak_rss
            rc = rec.stop()  # waits while the recorder makes progress (tests.support.progress)
            if rc != 0:
                result.errors.append(f"looptap record exited {rc}: {rec.output[-1000:]}")
            result.checks = check_cassette(out, result)
    finally:
        if rec is not None:
            rec.kill()
        up_proc.send_signal(signal.SIGTERM)
        try:
            up_proc.wait(10)
        except subprocess.TimeoutExpired:
            up_proc.kill()
    return result


# ---------------------------------------------------------------------------------------------
# Report


def table(results: list[LoadResult]) -> list[str]:
    rows = [
        "| target | agents × turns | round trips | wall s | round trips/s | SSE events/s | latency "
        "p50 / p99 ms | TTFB p50 ms | writer drain s | proxy CPU s (cores) | proxy peak RSS MB | "
        "writer CPU s | writer peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def num(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    for r in results:
        events = sum(s.events for s in r.samples)
        wall = r.wall or float("nan")
        cores = "—" if r.proxy_cpu is None else f"{r.proxy_cpu:.1f} ({r.proxy_cpu / wall:.2f})"
        rows.append(
            f"| {r.target} | {r.agents} × {r.turns} | {r.round_trips} | {wall:.1f} | "
            f"{r.round_trips / wall:.0f} | {events / wall:.0f} | {r.pct('total', 0.5) * 1000:.0f} "
            f"/ {r.pct('total', 0.99) * 1000:.0f} | {r.pct('ttfb', 0.5) * 1000:.0f} | "
            f"{num(r.drain, '.2f')} | {cores} | "
            f"{num(r.proxy_peak_rss and r.proxy_peak_rss / 1e6, '.0f')} | "
            f"{num(r.writer_cpu, '.1f')} | "
            f"{num(r.writer_peak_rss and r.writer_peak_rss / 1e6, '.0f')} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument(
        "--direct",
        action="store_true",
        help="also run the same load without the recorder, for comparison",
    )
    ap.add_argument(
        "--proxy-python",
        default=os.environ.get("LOOPTAP_PROXY_PYTHON") or str(ROOT / ".venv-proxy/bin/python"),
    )
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="looptap-load-") as tmp:
        if args.direct:
            d = Path(tmp) / "direct"
            d.mkdir()
            results.append(run_load(args.agents, args.turns, d, direct=True))
        w = Path(tmp) / "looptap"
        w.mkdir()
        res = run_load(args.agents, args.turns, w, proxy_python=Path(args.proxy_python))
        results.append(res)
    for line in table(results):
        print(line)
    c = res.checks
    print(
        f"\ncassette: {c.get('recorded')} round trips recorded of {res.round_trips} completed; "
        f"lost {len(c.get('lost', []))}, corrupted {len(c.get('corrupted', []))}; "
        f"{c.get('conversations')} conversations of {c.get('turns_per_conversation')} turns, "
        f"threaded as sent: {c.get('threaded_as_sent')}; {c.get('cassette_bytes', 0) / 1e6:.1f} MB "
        f"on disk; errors: {res.errors or 'none'}"
    )
    ok = (
        not res.errors
        and not c.get("lost")
        and not c.get("corrupted")
        and c.get("threaded_as_sent")
        and res.round_trips == args.agents * args.turns
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
