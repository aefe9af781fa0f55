"""Through the real recorder (issue 71 item 13): an upstream echoes the request's
``authorization=Bearer KEY`` in a gzip body and resets the connection mid-body, after the first
characters of the key. The recorder stores what arrived, decoded as far as it goes: before, the
key's first characters reached the cassette (too few for any format to find, not the value
learned) and ``looptap verify`` called the file clean. Now the cut end is masked."""

from __future__ import annotations

import secrets
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from looptap.cassettes.storage import read_records
from looptap.cassettes.verify import scan_file
from tests.cassettes.test_cut_bodies import torn_gzip
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder

pytestmark = [needs_recorder]

#: How many of the key's characters the upstream sends before it resets.
SHOWN = 9
ECHO = "your request's headers:\nauthorization="


def _serve(listener: socket.socket) -> None:
    """One request per connection: the echo, gzip-compressed, cut after the key's first
    characters by a TCP reset (SO_LINGER 0)."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    break
                data += piece
            head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
            auth = next(
                (line.split(":", 1)[1].strip() for line in head.split("\r\n")[1:]
                 if line.lower().startswith("authorization:")),
                "",
            )  # fmt: skip
            scheme = "Bearer "
            whole, sent = torn_gzip(
                ECHO + scheme,
                auth[len(scheme) : len(scheme) + SHOWN],
                auth[len(scheme) + SHOWN :] + "\n" * 200,
            )
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-encoding: gzip\r\n"
                + f"content-length: {len(whole)}\r\n\r\n".encode()
                + sent
            )
            time.sleep(0.3)  # (what was sent is read before the reset discards it)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.fixture
def upstream() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_serve, args=(listener,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


AGENT = r"""
import os, sys, urllib.request
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
req = urllib.request.Request(base + "/chat/completions", data=b'{"model":"gpt-4o","messages":[]}',
                             headers={"content-type": "application/json", "authorization": "Bearer " + sys.argv[1]})
try:
    urllib.request.urlopen(req, timeout=60).read()
    print("read whole")
except Exception as e:
    print("cut:", type(e).__name__)
"""  # noqa: E501


def test_a_key_echoed_in_a_torn_gzip_body_never_reaches_the_cassette(
    upstream: str, tmp_path: Path
) -> None:
    key = "sk-proj-" + secrets.token_hex(24)
    out = tmp_path / "run.jsonl"
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    proc = progress.run(
        [*RECORDER, "run", "-o", str(out), "--upstream", f"openai={upstream}",
         "--confdir", str(tmp_path / "conf"), "--", sys.executable, str(agent), key],
        capture_output=True,
        env=clean_env(),
    )  # fmt: skip
    stdout, stderr = proc.stdout.decode(), proc.stderr.decode()
    assert "cut:" in stdout, (stdout, stderr)  # the agent saw the reset
    (ex,) = read_records(out).exchanges
    assert ex.transport_error, ex
    body = ex.response_body.decode()
    assert body == ECHO + "Bearer [REDACTED]", body  # what arrived, the key's start masked
    raw = out.read_bytes().decode()
    for where, text in (("cassette", raw), ("stdout", stdout), ("stderr", stderr)):
        assert key[:4] not in text, f"the key's first characters reached the {where}"
    assert scan_file(out) == []
