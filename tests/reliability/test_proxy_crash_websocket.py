"""SIGKILL the whole recorder process group during WebSocket sessions: with ``--durable`` no turn
the agent received is missing from the cassette.

Each run is ``looptap run --durable -o run.jsonl -- python agent.py``: the agent opens Responses
WebSocket sessions through the OpenAI base URL (a loopback :class:`WsResponsesUpstream`, ten turns
a session) and runs turns as fast as it can, each ``response.create`` carrying a unique marker; it
prints the marker once it has received the turn's terminal event (``response.completed``). At a
random moment (seeded) the test kills the recorder's whole process group — recorder, writer
process and agent at once — and then checks:

* the cassette loads (at most one torn last record);
* **every turn the agent received is in the cassette, whole** (its request carries the marker,
  it is not cut, its last event is the terminal one): with ``--durable`` the message that
  completes a turn is forwarded only once the writer has stored the turn (``DurableGate``).

Without ``--durable`` the newest turns are lost (the writer lets hand-offs settle and is niced):
``bench/loss_window.py`` measures that window. ``LOOPTAP_SLOW=1`` runs 30 kills instead of 3
(``LOOPTAP_WS_KILLS=N``: N).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, clean_env
from tests.support.reliability import needs_recorder
from tests.support.ws_upstream import WsResponsesUpstream

pytestmark = [needs_recorder]

SLOW = os.environ.get("LOOPTAP_SLOW") == "1"
RUNS = int(os.environ.get("LOOPTAP_WS_KILLS", "30" if SLOW else "3"))

AGENT = r'''
import json, os, sys, time
from websockets.sync.client import connect
base = os.environ["OPENAI_BASE_URL"].replace("http://", "ws://", 1).rstrip("/")
run = sys.argv[1]
i = 0
while True:
    try:
        with connect(base + "/responses", additional_headers={"authorization": "Bearer sk-ws-crash-0123456789abcdef"},
                     open_timeout=30, close_timeout=1) as ws:
            for _ in range(10):
                marker = f"{run}-{i:05d}"
                ws.send(json.dumps({"type": "response.create", "model": "gpt-5",
                                    "input": [{"role": "user", "content": f"Say hi [{marker}]"}]}))
                while True:
                    ev = json.loads(ws.recv(timeout=30))
                    if ev.get("type") == "response.completed":
                        break
                print(json.dumps({"marker": marker, "t": time.time()}), flush=True)
                i += 1
    except Exception as e:
        print(json.dumps({"error": repr(e)}), flush=True)
        time.sleep(0.05)
'''  # noqa: E501


@dataclass
class Outcome:
    run: int
    completed: int = 0
    recorded: int = 0
    #: Turns the agent received but the cassette lacks: how long before the kill each was received.
    missing: list[float] = field(default_factory=list)
    torn: int = 0


@pytest.fixture(scope="module")
def ws_upstream() -> Iterator[WsResponsesUpstream]:
    pytest.importorskip("websockets")
    with WsResponsesUpstream() as up:
        yield up


def marker_of(body: bytes) -> str | None:
    text = body.decode("utf-8", "replace")
    if "[" not in text:
        return None
    return text.rsplit("[", 1)[1].split("]", 1)[0]


def kill_run(
    i: int, upstream: WsResponsesUpstream, root: Path, rng: random.Random, *, durable: bool
) -> Outcome:
    """One ``looptap run`` of the WebSocket agent, its process group SIGKILLed at a random moment
    once turns reach the disk (every fifth run: at any moment from the start, startup included)."""
    work = root / f"run{i:03d}"
    work.mkdir()
    (work / "agent.py").write_text(textwrap.dedent(AGENT))
    out = work / "run.jsonl"
    argv = [
        str(PROXY_PYTHON),
        "-m",
        "looptap.cassettes.cli",
        "run",
        "-o",
        str(out),
        "--confdir",
        str(root / "conf"),
        "--upstream",
        f"openai={upstream.url}",
        *(["--durable"] if durable else []),
        "--",
        sys.executable,
        str(work / "agent.py"),
        f"w{i:03d}",
    ]
    proc = subprocess.Popen(
        argv,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdout is not None
    if i % 5 == 4:
        time.sleep(rng.uniform(0.2, 5.0))
    else:
        # Hung only when the run stops progressing, never after so many seconds (a busy machine).
        progress.until(
            lambda: (
                proc.poll() is not None or (out.exists() and out.read_bytes().count(b"\n") >= 3)
            ),
            pids=[proc.pid],
            interval=0.02,
            what="turns on disk",
        )
        time.sleep(rng.uniform(0.0, 1.5))
    # The agent loops for ever: a run gone before the kill died on its own (said so, not as the
    # kill's ProcessLookupError once ``poll`` reaped it).
    assert proc.poll() is None, (
        f"run {i}: looptap run exited by itself (status {proc.returncode}) before the kill"
    )
    os.killpg(proc.pid, signal.SIGKILL)
    killed_at = time.time()
    progress.wait(proc)
    done = [json.loads(ln) for ln in proc.stdout.read().decode().splitlines() if ln.startswith("{")]
    proc.stdout.close()
    received = {d["marker"]: d["t"] for d in done if "marker" in d}
    outcome = Outcome(i, completed=len(received))
    if not out.exists() or out.stat().st_size == 0:
        outcome.missing = [killed_at - t for t in received.values()]
        return outcome
    cas = read_records(out)
    assert all(p.kind == "torn" for p in cas.problems) and len(cas.problems) <= 1, [
        str(p) for p in cas.problems
    ]
    outcome.torn = len(cas.problems)
    whole: set[str] = set()
    for ex in cas.exchanges:
        m = marker_of(ex.request_body)
        if m is None or ex.method != "POST":
            continue
        if (
            not ex.transport_error
            and ex.response_chunks
            and b"response.completed" in ex.response_chunks[-1][1]
        ):
            whole.add(m)
    outcome.recorded = len(whole)
    outcome.missing = [killed_at - t for m, t in received.items() if m not in whole]
    return outcome


def kill_runs(
    upstream: WsResponsesUpstream, root: Path, runs: int, *, durable: bool, seed: int
) -> list[Outcome]:
    rng = random.Random(seed)
    seeds = [random.Random(rng.random()) for _ in range(runs)]
    with ThreadPoolExecutor(2) as pool:
        return list(
            pool.map(lambda i: kill_run(i, upstream, root, seeds[i], durable=durable), range(runs))
        )


def test_sigkill_of_the_group_with_durable_loses_no_websocket_turn_the_agent_received(
    ws_upstream: WsResponsesUpstream, tmp_path: Path
) -> None:
    outcomes = kill_runs(
        ws_upstream,
        tmp_path,
        RUNS,
        durable=True,
        seed=int(os.environ.get("LOOPTAP_CRASH_SEED", "20261123")),
    )
    completed = sum(o.completed for o in outcomes)
    missing = [(o.run, round(age * 1000)) for o in outcomes for age in o.missing]
    summary = (
        f"{RUNS} SIGKILLs of the whole process group with --durable during WebSocket sessions: "
        f"{completed} turns received by the agents, {sum(o.recorded for o in outcomes)} recorded "
        f"whole, {len(missing)} received but missing {missing[:10]}; "
        f"{sum(o.torn for o in outcomes)} torn last records"
    )
    print(summary)
    assert completed > 0, summary
    assert missing == [], summary
