"""What a SIGKILL of the whole recorder process group loses, with and without ``--durable``.

    .venv/bin/python bench/loss_window.py                     # 8 kills per row (about 4 minutes)
    .venv/bin/python bench/loss_window.py --kills 20 --load 32
    .venv/bin/python bench/loss_window.py --write             # also rewrites its table in docs/reliability.md

Each kill is one ``looptap run -o run.jsonl [--durable] -- python agent.py`` (the recorder from
``$LOOPTAP_PROXY_PYTHON``, default ``.venv-proxy/bin/python``): the agent runs ``agents`` threads,
each as fast as it can, over HTTP (chat completions through the OpenAI base URL, streamed and
not, from ``python -m tests.support.upstream`` in its own process) or over a WebSocket (Responses
turns, ten a connection, from a loopback :class:`tests.support.ws_upstream.WsResponsesUpstream`).
Every round trip carries a marker; the agent prints it, with the time, once it has received the
response's end (a turn's terminal event). After 1–3 s of traffic (random, seeded) the recorder's
whole process group is SIGKILLed — recorder, writer process and agent at once — and the cassette
is read: a round trip the agent received that the cassette lacks is lost, and its *age* is how
long before the kill the agent had received it. The **loss window** of a kill is the age of the
oldest round trip it lost (0 when it lost none).

Rows: idle (1 agent) and under load (``--load`` agents, by default 16 on HTTP and 8 on WebSocket,
on a 2-core machine that also runs the upstream), each without and with ``--durable``. A kill of
the recorder's main process alone loses nothing (tests/reliability/test_proxy_crash.py): the
hand-off pipe outlives it and the writer drains it; this bench is about the writer dying too.
"""  # noqa: E501

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

__all__ = ["Kill", "main", "one_kill"]

DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- loss-window:begin (bench/loss_window.py --write) -->", "<!-- loss-window:end -->"

AGENT = r'''
import hashlib, http.client, json, os, sys, threading, time
from urllib.parse import urlsplit
kind, agents, run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
def say(marker):
    line = json.dumps({"marker": marker, "t": time.time()})
    with lock:
        sys.stdout.write(line + "\n"); sys.stdout.flush()
def http_agent(a):
    u = urlsplit(os.environ["OPENAI_BASE_URL"])
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    i = 0
    while True:
        marker = f"{run}-{a:02d}-{i:05d}"
        body = json.dumps({"model": "gpt-4o", "stream": i % 2 == 0, "messages": [{"role": "user", "content": f"Capital of France? [{marker}]"}]})
        try:
            c.request("POST", u.path + "/chat/completions", body, {"content-type": "application/json", "authorization": "Bearer sk-loss-0123456789abcdefghij"})
            r = c.getresponse(); r.read()
            say(marker)
        except Exception:
            c.close(); c = http.client.HTTPConnection(u.hostname, u.port, timeout=60); time.sleep(0.05)
        i += 1
def ws_agent(a):
    from websockets.sync.client import connect
    base = os.environ["OPENAI_BASE_URL"].replace("http://", "ws://", 1).rstrip("/")
    i = 0
    while True:
        try:
            with connect(base + "/responses", open_timeout=60, close_timeout=1) as ws:
                for _ in range(10):
                    marker = f"{run}-{a:02d}-{i:05d}"
                    i += 1
                    ws.send(json.dumps({"type": "response.create", "model": "gpt-5", "input": [{"role": "user", "content": f"Hi [{marker}]"}]}))
                    while json.loads(ws.recv(timeout=60)).get("type") != "response.completed":
                        pass
                    say(marker)
        except Exception:
            time.sleep(0.05)
for a in range(agents):
    threading.Thread(target=http_agent if kind == "http" else ws_agent, args=(a,), daemon=True).start()
while True:
    time.sleep(3600)
'''  # noqa: E501


@dataclass
class Kill:
    kind: str
    agents: int
    durable: bool
    completed: int = 0
    #: Ages (s before the kill) of the round trips the agent received that the cassette lacks.
    lost: list[float] = field(default_factory=list)
    #: Round trips the agent received in the last second before the kill (the load at that moment).
    rate: int = 0

    @property
    def window(self) -> float:
        return max(self.lost, default=0.0)


def _marker(body: bytes) -> str | None:
    text = body.decode("utf-8", "replace")
    return text.rsplit("[", 1)[1].split("]", 1)[0] if "[" in text else None


def one_kill(
    kind: str,
    agents: int,
    durable: bool,
    upstream: str,
    work: Path,
    rng: random.Random,
    python: Path,
) -> Kill:
    """One ``looptap run`` killed (whole group, SIGKILL) after 1–3 s of traffic."""
    from looptap.cassettes.storage import read_records
    from tests.support.recorder import clean_env

    work.mkdir(parents=True)
    (work / "agent.py").write_text(AGENT)
    out = work / "run.jsonl"
    argv = [
        str(python),
        "-m",
        "looptap.cassettes.cli",
        "run",
        "-o",
        str(out),
        "--confdir",
        str(work.parent / "conf"),
        "--upstream",
        f"openai={upstream}",
        *(["--durable"] if durable else []),
        "--",
        sys.executable,
        str(work / "agent.py"),
        kind,
        str(agents),
        work.name,
    ]
    proc = subprocess.Popen(
        argv,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and not (out.exists() and out.read_bytes().count(b"\n") >= 3)
    ):
        time.sleep(0.02)
    time.sleep(rng.uniform(1.0, 3.0))
    os.killpg(proc.pid, signal.SIGKILL)
    killed = time.time()
    proc.wait(10)
    got = {}
    for line in proc.stdout.read().decode().splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            got[d["marker"]] = d["t"]
    proc.stdout.close()
    k = Kill(
        kind,
        agents,
        durable,
        completed=len(got),
        rate=sum(1 for t in got.values() if killed - t <= 1.0),
    )
    recorded: set[str] = set()
    if out.exists():
        for ex in read_records(out).exchanges:
            m = _marker(ex.request_body)
            if m is not None and not ex.transport_error:
                recorded.add(m)
    k.lost = sorted(killed - t for m, t in got.items() if m not in recorded)
    return k


def _row(kills: list[Kill]) -> str:
    k0 = kills[0]
    windows = [k.window * 1000 for k in kills]
    lost = [len(k.lost) for k in kills]
    rate = statistics.median(k.rate for k in kills)
    where = "HTTP" if k0.kind == "http" else "WebSocket"
    return (
        f"| {where} | {k0.agents} | {'yes' if k0.durable else 'no'} | {len(kills)} | {rate:.0f}/s "
        f"| {sum(k.completed for k in kills):,} | {sum(lost):,} | {statistics.median(lost):.0f} / "
        f"{max(lost)} | {statistics.median(windows):.0f} / {max(windows):.0f} |"
    )


HEAD = (
    "| transport | agents | `--durable` | kills | round trips/s received in the last second before "
    "the kill (median) | round trips received | lost | lost per kill, median / max | loss window "
    "ms, median / max |\n|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=8, help="kills per row")
    ap.add_argument(
        "--load",
        type=int,
        default=0,
        help="agents under load (default: 16 over HTTP, 8 over WebSocket)",
    )
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--only", choices=("http", "ws"), help="one transport only")
    ap.add_argument(
        "--write", action="store_true", help=f"rewrite the table in {DOC.relative_to(ROOT)}"
    )
    args = ap.parse_args(argv)
    python = Path(os.environ.get("LOOPTAP_PROXY_PYTHON") or ROOT / ".venv-proxy" / "bin" / "python")
    import logging

    # every killed agent's connection is "failed"
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    from tests.support.ws_upstream import WsResponsesUpstream

    rng = random.Random(args.seed)
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="looptap-loss-") as tmp:
        root = Path(tmp)
        ready = root / "port"
        up = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.upstream",
                "--port",
                "0",
                "--ready-file",
                str(ready),
                "--delay",
                "0.002",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not ready.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            http_url = f"http://127.0.0.1:{ready.read_text().strip()}"
            with WsResponsesUpstream() as ws:
                n = 0
                for kind in ("http", "ws"):
                    if args.only and kind != args.only:
                        continue
                    url = http_url if kind == "http" else ws.url
                    for agents in (1, args.load or (16 if kind == "http" else 8)):
                        for durable in (False, True):
                            kills = []
                            for _ in range(args.kills):
                                n += 1
                                kills.append(
                                    one_kill(
                                        kind,
                                        agents,
                                        durable,
                                        url,
                                        root / f"k{n:03d}",
                                        random.Random(rng.random()),
                                        python,
                                    )
                                )
                            rows.append(_row(kills))
                            print(rows[-1], flush=True)
        finally:
            up.terminate()
            up.wait(10)
    table = HEAD + "\n" + "\n".join(rows)
    print()
    print(table)
    if args.write:
        text = DOC.read_text()
        if BEGIN not in text or END not in text:
            raise SystemExit(f"{DOC} has no {BEGIN} … {END} section")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        stamp = time.strftime("%Y-%m-%d", time.gmtime())
        load = os.getloadavg()[0]
        DOC.write_text(
            f"{head}{BEGIN}\n{table}\n\n(measured {stamp}, {args.kills} kills a row, load average "
            f"{load:.1f} at the end)\n{END}{tail}"
        )
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
