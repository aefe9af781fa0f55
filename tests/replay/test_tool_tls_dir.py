"""The replay's TLS directory (issue 91, item 5): the leaf key that serves every HTTPS tool host
of a cassette never stays on disk (loaded, then removed), and a directory a SIGKILLed replay left
is removed by the next one's start. On c86d115d the key stayed for the server's whole life, and
a killed replay's directory (key included, valid 7 days) was never cleaned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

HOLD = """
import sys
from looptap.cassettes.replay.serving._tls import ToolTLS
t = ToolTLS(["127.0.0.1:8443", "api.tools.example:443"])
print(t.dir, flush=True)
sys.stdin.read()  # until killed
"""


def test_a_killed_replay_leaves_no_key_and_its_directory_is_cleaned_next_time(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        left = Path(proc.stdout.readline().strip())
        assert left.parent == tmp_path and left.is_dir()
        files = sorted(p.name for p in left.iterdir())
        assert files == ["leaf.pem", "replay-tool-ca.pem"], files  # no key: loaded, removed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert left.is_dir()  # what a SIGKILL leaves: certificates, no key
    subprocess.run([sys.executable, "-c", HOLD.replace("sys.stdin.read()", "t.close()")],
                   env=env, check=True, capture_output=True)  # fmt: skip
    assert not left.exists()  # the next replay's start removed it
    assert list(tmp_path.iterdir()) == []  # (and its own at its close)
