"""The fork's per-request cost: before the cursor (served from the recording) and after it (through
the replay server, the recorder and the upstream), against plain replay and plain recording, side
by side in one run.

    .venv/bin/python bench/fork.py            # N = 150 two-turn conversations
    .venv/bin/python bench/fork.py --quick    # N = 30
    .venv/bin/python bench/fork.py --write    # and the table into docs/fork.md ("What a fork costs")

A cassette of N conversations of two turns each (OpenAI Chat, non-streamed, ~1 KB requests) is
recorded against a scripted fake upstream; then the same 2N requests are sent, one at a time over
one keep-alive connection, to

1. ``looptap replay RUN`` (plain replay: every request served from the recording);
2. ``looptap record`` (plain recording: every request through the recorder to the fake);
3. ``looptap replay RUN --cursor turn=1 --live openai=<recorder>`` with that recorder in front of
   the fake (the fork): turn 0 of each conversation is before the cursor, turn 1 after it.

Reported: the median and p90 wall time per request (ms), each median as a ratio of plain replay's,
and the CPU time the looptap processes used per request (µs; not inflated by other people's load
on the shared machine): for the fork, the replay server's and its recorder's together; for plain
recording, the recorder's. The load average is printed before and after (the machine is shared:
wall times move with it, the CPU figures much less). Needs the recorder's environment
(``LOOPTAP_PROXY_PYTHON``).
"""  # noqa: E501

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DOC = REPO / "docs" / "fork.md"
BEGIN, END = "<!-- fork-cost:begin (bench/fork.py --write) -->", "<!-- fork-cost:end -->"

from looptap.cassettes.replay.testing.recorder import RecorderProcess  # noqa: E402
from tests.support.recorder import children, proc_stats  # noqa: E402
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def route(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        return Reply.tool("get_weather", {"city": "Paris"})
    return Reply.say("Sunny in Paris.")


def first_request(i: int) -> dict[str, object]:
    return {
        "model": "gpt-4o",
        "tools": TOOLS,
        "messages": [
            {
                "role": "system",
                "content": "You are a helpful assistant that answers with the weather tool. " * 8,
            },
            {"role": "user", "content": f"Question {i}: what is the weather in Paris?"},
        ],
    }


def cpu(pids: list[int]) -> float:
    """CPU seconds of these processes and their children."""
    total = 0.0
    for pid in pids:
        for p in [pid, *children(pid)]:
            s = proc_stats(p)
            total += s.cpu if s is not None else 0.0
    return total


class Client:
    """One keep-alive connection; :meth:`post` returns (status, parsed body, seconds)."""

    def __init__(self, base: str) -> None:
        u = urlsplit(base)
        self.prefix = u.path.rstrip("/")
        self.conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=120)

    def post(self, body: bytes) -> tuple[int, object, float]:
        t0 = time.perf_counter()
        self.conn.request(
            "POST",
            self.prefix + "/chat/completions",
            body=body,
            headers={"content-type": "application/json", "authorization": "Bearer sk-bench"},
        )
        r = self.conn.getresponse()
        data = r.read()
        return r.status, orjson.loads(data) if data else None, time.perf_counter() - t0


def conversation(client: Client, i: int, times: list[list[float]]) -> None:
    """Turn 0, then turn 1 with the tool result; the seconds of each go to ``times[0]`` /
    ``times[1]``."""
    req = first_request(i)
    status, doc, t = client.post(orjson.dumps(req))
    assert status == 200, (status, doc)
    times[0].append(t)
    msg = doc["choices"][0]["message"]  # type: ignore[index]
    call = msg["tool_calls"][0]
    req["messages"] = [
        *req["messages"],
        {"role": "assistant", "content": None, "tool_calls": [call]},  # type: ignore[list-item]
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"},
    ]
    status, doc, t = client.post(orjson.dumps(req))
    assert status == 200, (status, doc)
    times[1].append(t)


def replay_server(run: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", str(run), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.strip().split("=", 1)[1]


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(2)
    _, err = proc.communicate(timeout=60)
    return err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write", action="store_true", help="write the table into docs/fork.md")
    args = ap.parse_args()
    n = 30 if args.quick else 150
    load0 = os.getloadavg()
    rows: dict[str, tuple[list[float], float]] = {}
    with tempfile.TemporaryDirectory() as tmp, ScriptedUpstream(route, delay=0.0) as fake:
        run = Path(tmp) / "run.jsonl"
        rec = RecorderProcess(run, upstreams={"openai": fake.url}, confdir=Path(tmp) / "conf")
        env = rec.start()
        assert rec.pid is not None
        client = Client(env["OPENAI_BASE_URL"])
        times: list[list[float]] = [[], []]
        c0 = cpu([rec.pid])
        for i in range(n):
            conversation(client, i, times)
        rows["plain recording (recorder → fake)"] = (
            times[0] + times[1],
            (cpu([rec.pid]) - c0) / (2 * n),
        )
        rec.stop()  # stores every round trip: the cassette the fork replays

        proc, url = replay_server(run)
        client = Client(url)
        times = [[], []]
        c0 = cpu([proc.pid])
        for i in range(n):
            conversation(client, i, times)
        rows["plain replay"] = (times[0] + times[1], (cpu([proc.pid]) - c0) / (2 * n))
        stop(proc)

        branch = Path(tmp) / "branch.jsonl"
        live = RecorderProcess(branch, upstreams={"openai": fake.url}, confdir=Path(tmp) / "conf")
        live_env = live.start()
        assert live.pid is not None
        u = urlsplit(live_env["OPENAI_BASE_URL"])
        proc, url = replay_server(
            run, "--cursor", "turn=1", "--live", f"openai={u.scheme}://{u.netloc}"
        )
        client = Client(url)
        times = [[], []]
        c_prefix = c_live = 0.0
        for i in range(n):
            before = cpu([proc.pid, live.pid])
            status, doc, t = client.post(orjson.dumps(first_request(i)))
            assert status == 200, (status, doc)
            c_prefix += cpu([proc.pid, live.pid]) - before
            times[0].append(t)
        # turn 1 exactly as recorded (with the recorded call's id): matched at the cursor, sent live
        from looptap.cassettes.reading import open_run

        recorded = [
            ex for ex in open_run(run, whole=True).exchanges if b'"tool"' in ex.request_body
        ]
        for ex in recorded:
            before = cpu([proc.pid, live.pid])
            status, doc, t = client.post(ex.request_body)
            assert status == 200, (status, doc)
            c_live += cpu([proc.pid, live.pid]) - before
            times[1].append(t)
        err = stop(proc)
        live.stop()
        rows["fork, before the cursor (served from the recording)"] = (times[0], c_prefix / n)
        rows["fork, after the cursor (replay → recorder → fake)"] = (
            times[1],
            c_live / max(1, len(recorded)),
        )
    load1 = os.getloadavg()
    base = statistics.median(rows["plain replay"][0])
    lines = [
        "| path | requests | median ms | p90 ms | median "
        "/ plain replay | looptap CPU µs per request |",
        "|---|---|---|---|---|---|",
    ]
    for label, (ts, c) in rows.items():
        ts = sorted(ts)
        med = statistics.median(ts)
        lines.append(
            f"| {label} | {len(ts)} | {med * 1e3:.2f} | {ts[int(0.9 * (len(ts) - 1))] * 1e3:.2f} | "
            f"{med / base:.2f}× | {c * 1e6:,.0f} |"
        )
    table = "\n".join(lines)
    load = f"load average {load0[0]:.1f} before, {load1[0]:.1f} after on {os.cpu_count()} cores"
    print(
        f"fork benchmark ({'quick' if args.quick else 'full'}): {n} two-turn conversations, one "
        f"request at a time, one keep-alive connection; {load}"
    )
    print(
        "fork replay server: "
        f"{next((ln for ln in err.splitlines() if 'fork at' in ln), '').strip()}"
    )
    print()
    print(table)
    if args.write:
        text = DOC.read_text()
        if BEGIN not in text or END not in text:
            raise SystemExit(f"{DOC} has no {BEGIN} … {END} section")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        stamp = time.strftime("%Y-%m-%d", time.gmtime())
        DOC.write_text(
            f"{head}{BEGIN}\n{table}\n\n(measured {stamp} with "
            f"`bench/fork.py{' --quick' if args.quick else ''}`: {n} two-turn conversations; "
            f"{load})\n{END}{tail}"
        )
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
