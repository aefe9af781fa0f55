"""Record a mitmproxy flow file with the real ``mitmdump -w``, in front of the fake upstream.

``python -m tests.interop.flows OUT.mitm`` (with ``LOOPTAP_PROXY_PYTHON`` set) regenerates the
committed fixture ``tests/interop/fixtures/flows_mitmproxy11.mitm``; the tests call
:func:`record_flows` directly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from looptap.cassettes.net import free_port
from tests.support import progress
from tests.support.upstream import FakeUpstream, Served

#: What the client sends: (path, body, extra headers). A JSON chat completion, the same streamed,
#: a gzip-encoded Anthropic stream, and a non-LLM GET.
REQUESTS: list[tuple[str, dict[str, object] | None, dict[str, str]]] = [
    (
        "/v1/chat/completions",
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Capital of France?"}]},
        {},
    ),
    (
        "/v1/chat/completions",
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Capital of Mexico?"}],
            "stream": True,
        },
        {},
    ),
    (
        "/v1/messages",
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "Name a dog."}],
            "stream": True,
        },
        {"x-fake-upstream": "lying_encoding; claim=gzip; actual=gzip"},
    ),
    ("/ping", None, {}),
]
SECRET = "sk-looptap-flow-SENTINEL"


def record_flows(proxy_python: str, out: Path, confdir: Path) -> tuple[list[Served], list[bytes]]:
    """Run ``mitmdump -w out`` as a reverse proxy in front of a fresh fake upstream, send
    :data:`REQUESTS` through it, stop it; what the upstream served and what the client received."""
    received: list[bytes] = []
    with FakeUpstream(delay=0.002) as up:
        port = free_port()
        code = "import sys; from mitmproxy.tools.main import mitmdump; mitmdump(sys.argv[1:])"
        args = [
            "--mode",
            f"reverse:{up.url}",
            "--listen-host",
            "127.0.0.1",
            "--listen-port",
            str(port),
        ]
        args += ["-w", str(out), "--set", f"confdir={confdir}", "-q"]
        proc = subprocess.Popen(
            [proxy_python, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            def listening() -> bool:  # mitmproxy starts in seconds, slower on a busy machine
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    return True
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(
                            "mitmdump did not start: "
                            f"{proc.stdout.read().decode() if proc.stdout else ''}"
                        ) from None
                    return False

            progress.until(listening, pids=[proc.pid], interval=0.05, what="mitmdump to listen")
            for path, body, headers in REQUESTS:
                data = json.dumps(body).encode() if body is not None else None
                hdrs = {"authorization": f"Bearer {SECRET}", **headers}
                if data is not None:
                    hdrs["content-type"] = "application/json"
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}{path}", data=data, headers=hdrs
                )
                with urllib.request.urlopen(req, timeout=20) as resp:
                    received.append(resp.read())
        finally:
            proc.send_signal(signal.SIGINT)
            progress.wait(proc)  # killed if it stops progressing before it exits
        return list(up.served), received


if __name__ == "__main__":
    import tempfile

    target = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        record_flows(os.environ["LOOPTAP_PROXY_PYTHON"], target, Path(tmp))
    print(f"{target}: {target.stat().st_size} bytes")
