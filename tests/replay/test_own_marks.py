"""An upstream never speaks for looptap: the response headers only looptap writes
(``x-looptap-fault``, ``x-looptap-replay``, ``x-looptap-miss``;
:mod:`cassettes.wire._own_headers`) are dropped from an upstream's answer by whatever records or
relays it, and the round trip says so.

Before, an upstream (a gateway, a hostile server) sending ``x-looptap-fault`` made its own 429 read
as one looptap injected ("[injected by looptap: …]"), and ``x-looptap-replay: miss`` made its error
read as a replay miss, the client's divergence (layer C) instead of the API's.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import OWN_RESPONSE_HEADERS, without_own
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, needs_recorder

NOTE = json.dumps(
    {
        "closest": "conversation c1, turn 0",
        "reason": "forged",
        "verdicts": [{"layer": "C", "message": "FORGED DIVERGENCE"}],
        "changes": [],
    }
)

#: One request, answered 429 in OpenAI's shape, with looptap's own marks forged on it.
AGENT = r"""
import json, os, urllib.error, urllib.request
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}).encode()
req = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
                             headers={"content-type": "application/json", "authorization": "Bearer sk-test-marks"})
try:
    urllib.request.urlopen(req).read()
except urllib.error.HTTPError as exc:
    exc.read()  # the whole answer (else whether its body is recorded is a race with the exit)
    print("status", exc.code, "marks", sorted(k for k in exc.headers.keys() if k.lower().startswith("x-looptap")))
"""  # noqa: E501


@pytest.fixture
def forging_upstream() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = orjson.dumps(
                {
                    "error": {
                        "message": "Rate limit reached",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                }
            )
            self.send_response(429)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.send_header("x-looptap-fault", "turn=0:rate_limit (forged by the upstream)")
            self.send_header("x-looptap-replay", "miss")
            self.send_header("x-looptap-miss", NOTE)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@needs_recorder
def test_an_upstreams_forged_looptap_marks_are_dropped_by_the_recorder(
    tmp_path: Path, forging_upstream: str
) -> None:
    run = tmp_path / "run.jsonl"
    proc = progress.run(
        [
            *RECORDER,
            "run",
            "-o",
            str(run),
            "--confdir",
            str(tmp_path / "conf"),
            "--upstream",
            f"openai={forging_upstream}",
            "--",
            sys.executable,
            "-c",
            AGENT,
        ],
        env=clean_env(OPENAI_API_KEY="sk-test-marks"),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # the agent gets the API's answer, not looptap's marks
    assert "status 429 marks []" in proc.stdout, proc.stdout
    [ex] = read_records(run).exchanges
    assert not [k for k, _ in ex.response_headers if k.lower().startswith("x-looptap")], (
        ex.response_headers
    )
    assert any(
        "looptap's own headers (x-looptap-fault, x-looptap-replay, x-looptap-miss)" in n
        for n in ex.notes
    ), ex.notes
    findings = analyse([ex], parse_all([ex])).findings
    assert findings and all("injected" not in f.details for f in findings), findings
    assert not any(
        "injected by looptap" in f.message or f.code == "C.diverged_from_recording"
        for f in findings
    ), findings
    # the API's own rate limit, read as the API's
    assert [f.code for f in findings if f.layer == "A"] == ["A.rate_limited"], findings
    show = cli_run("show", str(run))  # (in this process: what it says)
    assert show.returncode == 0, show.stderr
    assert "injected by looptap" not in show.stdout and "FORGED DIVERGENCE" not in show.stdout, (
        show.stdout
    )


def test_a_relay_drops_looptap_marks_from_an_upstreams_answer() -> None:
    headers = [
        ("Content-Type", "application/json"),
        ("X-Looptap-Fault", "forged"),
        ("x-looptap-replay", "miss"),
        ("x-looptap-miss", "{}"),
        ("x-looptap-fault", "again"),
        ("x-request-id", "req_1"),
    ]
    kept, dropped = without_own(headers)
    assert kept == [("Content-Type", "application/json"), ("x-request-id", "req_1")]
    assert dropped == list(OWN_RESPONSE_HEADERS)


def test_the_replay_server_relays_an_upstreams_answer_without_looptaps_marks(
    forging_upstream: str,
) -> None:
    """A request the cassette cannot answer goes to the live upstream (a fork past its cursor, the
    plugin's fallback): the marks the upstream forged reach neither the client nor the replay's
    log, which the analysis reads; the replay's own ``x-looptap-replay`` says what it did."""
    import urllib.error
    import urllib.request

    from looptap.cassettes.replay.serving.server import ReplayServer
    from looptap.cassettes.storage import load_vcr

    repo = Path(__file__).resolve().parents[2]
    with ReplayServer(
        load_vcr(repo / "cassettes/examples/tool_loop_anthropic.yaml"),
        fallback=lambda method, target, body: forging_upstream,
    ) as srv:
        body = orjson.dumps(
            {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "new"}]}
        )
        req = urllib.request.Request(
            f"{srv.url}/v1/chat/completions",
            data=body,
            method="POST",
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req)
        got = err.value
        served = list(srv.served)
    assert got.code == 429
    assert "x-looptap-fault" not in got.headers and "x-looptap-miss" not in got.headers, got.headers
    assert got.headers.get("x-looptap-replay") not in (None, "miss"), got.headers
    [ex] = served
    assert [v for k, v in ex.response_headers if k.lower() == "x-looptap-fault"] == []
    assert [v for k, v in ex.response_headers if k.lower() == "x-looptap-replay"] == [
        got.headers["x-looptap-replay"]
    ]
    assert any(
        "looptap's own headers (x-looptap-fault, x-looptap-replay, x-looptap-miss)" in n
        for n in ex.notes
    ), ex.notes
