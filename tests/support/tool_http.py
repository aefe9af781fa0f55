"""What the tools' HTTP tests and the secrets bench (bench/tool_secrets.py) share: a tool server on
127.0.0.1 (:class:`LoopbackServer`, given its request handler) and ``looptap replay`` started with
its export lines read (:func:`start_replay`, :func:`stop_replay`)."""

from __future__ import annotations

import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.recorder import RECORDER

#: looptap's pytest plugin (its ``pytest11`` entry point, pyproject.toml).
PLUGIN = "looptap.cassettes.replay.testing.plugin"


class LoopbackServer:
    """A threading HTTP server on 127.0.0.1 (a free port) answering with ``handler``; a context
    manager that serves while it is open. :attr:`seen` is for the handler to note requests in."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.seen: list[object] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def restart(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Listen anew with ``handler`` (a subclass's own), before the server is started."""
        self.server.server_close()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_replay(
    run: Path, *flags: str, env: dict[str, str], cwd: Path | None = None
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``looptap replay RUN`` started, with the variables its export lines give the agent (read
    up to the last one); raises :class:`RuntimeError` with its stderr when it ends first."""
    proc = subprocess.Popen(
        [*RECORDER, "replay", *flags, str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, cwd=cwd,
    )  # fmt: skip
    assert proc.stdout is not None
    got: dict[str, str] = {}
    while "REPLICATE_API_TOKEN" not in got:  # the last export line
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(proc.stderr.read() if proc.stderr else "replay ended")
        name, _, value = line.strip().removeprefix("export ").partition("=")
        got[name] = value
    return proc, got


def stop_replay(proc: subprocess.Popen[str], timeout: float = 300) -> str:
    """Stop a replay as Ctrl-C does; its stderr (its report)."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=timeout)
    return err


def run_plugged(pytester: pytest.Pytester) -> pytest.RunResult:
    """The user's test (``pytester``'s files) run in a pytest of its own over a recording
    (``--looptap-record-mode=none``), with looptap's plugin alone: the test environment's other
    plugins are not what a user's test of an agent loads, and starting them took about 5 s of the
    inner pytest's 5.4 at load 20 (0.7 s with looptap's alone)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest_subprocess(
            "-p", PLUGIN, "-p", "no:cacheprovider", "--looptap-record-mode=none"
        )
