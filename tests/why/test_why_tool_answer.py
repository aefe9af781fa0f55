"""``looptap why`` on a run whose tool fails 30% of the time (issue 84, item 4): the openai SDK
agent with httpx tools (tests/proxy/test_e2e_tool_http.py's, which hands the model ``{}`` when its
call fails) recorded through ``looptap run --tool-http``; its weather API answers 503 to three
calls in ten (a seeded draw), and the recorded run's Lyon call is one of them (planted). The
scripted model says "could not" when a result is empty: the run failed.

- With the tools served (the branches' tool calls answered from the run while they match), the E
  re-samples never flip (the scripted model answers alike; only the layer changed may change the
  outcome), and the C intervention that answers the failed call with what the same API answered
  when it succeeded (Tokyo's 200) flips every sample: the planted cause.
- Without them (the same run with its tool exchanges left out, as a replay before item 4 saw it:
  the branches' tools call the flaky API live), the same E re-samples flip on the tool's draws
  (K = 4: 0 of 8 served, 4 of 8 live; docs/why.md).
"""

from __future__ import annotations

import json
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.proxy.test_e2e_tool_http import CLIENTS_PYTHON, OPENAI_AGENT, TOOL_KEY, looptap_run
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, clean_env, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"),
]

#: Samples per intervention (K).
K = 4
#: How often the weather API fails.
FAIL_RATE = 0.3


class FlakyWeather:
    """``GET /weather?city=…`` on 127.0.0.1: 503 with chance :data:`FAIL_RATE` (seeded), and to
    the first Lyon call when ``plant`` is set."""

    def __init__(self, seed: int, plant: bool = False) -> None:
        self.rng, self.plant, self.seen = random.Random(seed), plant, []
        outer, lock = self, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                city = (parse_qs(urlsplit(self.path).query).get("city") or ["?"])[0]
                with lock:
                    planted = outer.plant and city == "Lyon"
                    outer.plant = outer.plant and not planted
                    fail = planted or outer.rng.random() < FAIL_RATE
                    outer.seen.append((city, fail))
                status, body = (503, {"error": "weather backend overloaded"}) if fail else (
                    200, {"city": city, "temp_c": 10 + len(city), "sky": "clear"})  # fmt: skip
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def model(req: ScriptedRequest) -> Reply:
    results = req.tool_results()
    if not results:
        return Reply(calls=(Call("get_weather", {"city": "Lyon"}), Call("get_weather", {"city": "Tokyo"})))  # fmt: skip  # noqa: E501
    if any(r.strip() in ("", "{}") for r in results):
        return Reply.say("I could not get the weather.")
    return Reply.say("Lyon and Tokyo are clear.")


def _why(tmp: Path, run: Path, fake: ScriptedUpstream, tool_url: str) -> dict[str, Any]:
    proc = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "why", str(run),
         "--upstream", f"openai={fake.url}", "--confdir", str(tmp / "conf"),
         "--answer-matches", "could not", "--samples", str(K), "--json", "-o", str(tmp / "why"),
         "--", str(CLIENTS_PYTHON), str(tmp / "agent.py")],
        env=clean_env(OPENAI_API_KEY="sk-test-tools", TOOL_URL=tool_url, TOOL_KEY=TOOL_KEY,
                      LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON)),
        capture_output=True, text=True, cwd=tmp,
    )  # fmt: skip
    assert proc.returncode in (0, 1) and proc.stdout.startswith("{"), proc.stderr[-3000:]
    return dict(json.loads(proc.stdout))


def _flips(doc: dict[str, Any], kind: str) -> tuple[int, int]:
    branches = [
        b for i in doc["interventions"] if i["kind"] == kind for b in i.get("branches") or []
    ]
    return sum(b.get("result") == "flipped" for b in branches), len(branches)


@pytest.mark.slow(
    reason="a recording and two whys (about 70 s of CPU); the tool-answer intervention is chosen "
    "in process in tests/why/test_why_untested.py, a fork serves the tools in "
    "tests/proxy/test_e2e_tool_replay.py"
)
def test_tools_served_the_branches_vary_with_the_layer_changed_only(tmp_path: Path) -> None:
    flaky = FlakyWeather(seed=5, plant=True)
    try:
        with ScriptedUpstream(model) as fake:
            proc, run = looptap_run(tmp_path, OPENAI_AGENT, fake, flaky)  # type: ignore[arg-type]
            assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
            assert "answer: I could not get the weather." in proc.stdout, flaky.seen
            assert ("Lyon", True) in flaky.seen and ("Tokyo", False) in flaky.seen, flaky.seen
            served = _why(tmp_path, run, fake, flaky.url)
            # the same run without its tools' HTTP: the branches' tools call the flaky API live
            bare_dir = tmp_path / "bare"
            bare_dir.mkdir()
            (bare_dir / "agent.py").write_text(OPENAI_AGENT)
            bare = bare_dir / "run.jsonl"
            lines = run.read_bytes().splitlines(keepends=True)
            bare.write_bytes(
                b"".join(ln for ln in lines if b'"tool":true' not in ln.replace(b" ", b""))
            )
            live = _why(bare_dir, bare, fake, flaky.url)
    finally:
        flaky.close()
    c = next(i for i in served["interventions"] if i["kind"] == "c-tool-answer")
    assert c["finding"] == "C.tool_http_error_hidden" and c["runnable"], c
    assert c["edits"][0].startswith("tool_answer[") and '"city": "Tokyo"' in c["edits"][0], c
    assert _flips(served, "c-tool-answer") == (K, K), served
    e_served = _flips(served, "e-resample")
    e_live = _flips(live, "e-resample")
    assert e_served[1] >= K and e_served[0] == 0, served
    assert not any(i["kind"] == "c-tool-answer" for i in live["interventions"])
    # the tool's draws reach the live branches: with 30% failures per call, both of the turn's
    # two calls succeed in about half of them (seed 5: measured, the figure in docs/why.md;
    # seed 7 happened to draw a failure in each of its first 8 pairs)
    print(f"K={K}: E flips with the tools served {e_served}, live {e_live}")
    assert e_live[0] > 0, (live, flaky.seen)
