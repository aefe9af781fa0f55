"""The addon file loads into mitmproxy's own tools, as users run them: ``mitmdump -s
proxy/addon.py`` and ``mitmweb -s proxy/addon.py``, each as a real process in reverse mode in front
of the fake upstream, with a real HTTP client; the cassette it writes holds the round trips."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

from looptap.cassettes.net import free_port  # noqa: E402
from looptap.cassettes.parsing import parse_all  # noqa: E402
from looptap.cassettes.storage import read_records  # noqa: E402
from tests.support import progress  # noqa: E402
from tests.support.upstream import FakeUpstream  # noqa: E402

PROXY_PYTHON = Path(os.environ.get("LOOPTAP_PROXY_PYTHON") or REPO / ".venv-proxy/bin/python")
BIN = PROXY_PYTHON.parent

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.skipif(
        not (BIN / "mitmdump").exists(),
        reason=f"mitmproxy's tools are not installed beside {PROXY_PYTHON}",
    ),
]


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until the tool listens on ``port`` (hung only if it stops progressing)."""

    def listening() -> bool:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise AssertionError(f"the tool exited with {proc.returncode}:\n{out}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    progress.until(listening, pids=[proc.pid], what=f"a listener on port {port}")


def _chat(port: int, stream: bool) -> bytes:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    }
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": "Bearer sk-looptap-SENTINEL-stocktools",
        },
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return bytes(resp.read())


@pytest.mark.parametrize(
    "tool",
    [
        "mitmdump",
        pytest.param(
            "mitmweb",
            marks=pytest.mark.slow(
                reason="the same addon file in mitmproxy's other stock tool; mitmdump's by default"
            ),
        ),
    ],
)
def test_addon_file_records_through_the_stock_tool(tool: str, tmp_path: Path) -> None:
    with FakeUpstream(delay=0.005) as up:
        # a port another test binds between free_port() and the tool's own bind leaves the tool
        # dead and this test talking to that other listener: seen once under xdist (the tool's
        # log empty, our upstream asked nothing); such a try is made again on a new port
        for attempt in range(3):
            out = tmp_path / f"run{attempt}.jsonl"
            port = free_port()
            cmd = [
                str(BIN / tool),
                "-s", str(REPO / "proxy" / "addon.py"),
                "--set", f"looptap_output={out}",
                "--set", f"confdir={tmp_path / 'conf'}",
                "--mode", f"reverse:{up.url}@{port}",
                "--listen-host", "127.0.0.1",
                "-q",
            ]  # fmt: skip
            if tool == "mitmweb":
                cmd += [
                    "--web-host",
                    "127.0.0.1",
                    "--web-port",
                    str(free_port({port})),
                    "--set",
                    "web_open_browser=false",
                ]
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path
            )
            try:
                _wait_listening(port, proc)
                plain = _chat(port, stream=False)
                streamed = _chat(port, stream=True)
                alive = proc.poll() is None
            except AssertionError:  # (the tool exited before it listened: its port was taken)
                alive = False
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                log = progress.communicate(proc)[0].decode(errors="replace")
            if alive or up.llm_served():
                break
        served = up.llm_served()
    assert len(served) == 2, log
    assert json.loads(plain)["choices"], log
    assert b"data: [DONE]" in streamed, log
    cas = read_records(out)
    assert not cas.problems, cas.problems
    rts = parse_all(cas.exchanges)
    assert [rt.family for rt in rts] == ["openai_chat", "openai_chat"], log
    assert [rt.stream for rt in rts] == [False, True]
    assert all(rt.complete for rt in rts)
    # What the client received is what the cassette holds, byte for byte.
    assert cas.exchanges[0].response_body == plain
    assert cas.exchanges[1].response_body == streamed
    assert b"SENTINEL-stocktools" not in out.read_bytes()
