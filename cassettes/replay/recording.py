"""Recording for the pytest plugin: the same recorder as ``looptap run``, as a child process.

The recorder needs mitmproxy, which lives in its own environment (its h11 pin clashes with the
SDKs'), so the plugin never imports it: it starts ``looptap record`` with the interpreter named by
``LOOPTAP_PROXY_PYTHON`` (or this one, when mitmproxy happens to be importable here), reads the
environment lines it prints, and stops it with SIGINT, which flushes every round trip to disk.

The plugin runs one recorder for a whole test session (per xdist worker): starting one costs
seconds (importing mitmproxy), a round trip milliseconds. Between tests it sends SIGUSR1, on which
the recorder stores everything captured so far and says how many round trips its cassette holds
(:meth:`RecorderProcess.flush`); :class:`SessionCassette` then reads the round trips between two
such marks, which are the test's, and the plugin writes them into the test's own cassette.
"""

from __future__ import annotations

import importlib.util
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cassettes.errors import CassetteError, RecorderUnavailable
from cassettes.exchange import Exchange

__all__ = ["HOW_TO_INSTALL", "RecorderProcess", "SessionCassette", "recorder_python"]

#: The recorder's answer to SIGUSR1 (proxy/launcher.py ``FLUSHED``), with the number stored.
_FLUSHED = re.compile(r"^looptap: flushed: (\d+) round trips stored$")

HOW_TO_INSTALL = (
    "recording needs the looptap recorder (mitmproxy, in its own environment): create it with "
    "`python3 -m venv .venv-proxy && .venv-proxy/bin/pip install uv && .venv-proxy/bin/uv pip install "
    "--python .venv-proxy/bin/python --override .ci/proxy-overrides.txt -e '.[proxy]'` and set "
    "LOOPTAP_PROXY_PYTHON=.venv-proxy/bin/python; or replay only (--looptap-record-mode=none) with a recorded cassette"
)

#: Variables of the machine that must not steer the recorder (it listens on loopback).
_SCRUB = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def recorder_python() -> str | None:
    """The interpreter that can run the recorder, or ``None``."""
    named = os.environ.get("LOOPTAP_PROXY_PYTHON")
    if named:
        return named if Path(named).exists() else None
    if importlib.util.find_spec("mitmproxy") is not None:
        return sys.executable
    return None


class RecorderProcess:
    """``looptap record -o OUTPUT`` in a child process; ``env`` holds what it says to export."""

    def __init__(self, output: Path, *, upstreams: dict[str, str] | None = None, confdir: Path | None = None, python: str | None = None) -> None:
        self.output = output
        self.upstreams = dict(upstreams or {})
        self.confdir = confdir
        self.python = python or recorder_python()
        self.env: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        self._drain: threading.Thread | None = None
        #: The counts the recorder answered SIGUSR1 with, in order (guarded by ``_said``).
        self._flushed: list[int] = []
        self._said = threading.Condition()

    def start(self, timeout: float = 60.0) -> dict[str, str]:
        if self.python is None:
            raise RecorderUnavailable(HOW_TO_INSTALL)
        argv = [self.python, "-m", "cassettes.cli", "record", "-o", str(self.output)]
        if self.confdir is not None:
            argv += ["--confdir", str(self.confdir)]
        for name, url in self.upstreams.items():
            argv += ["--upstream", f"{name}={url}"]
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stderr.fileno()
        buf = b""
        while b"recording to" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise CassetteError(f"the recorder did not start within {timeout:.0f} s: {buf.decode(errors='replace')[-2000:]}")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buf += chunk
            elif self.proc.poll() is not None:
                break
        self._stderr.append(buf.decode(errors="replace"))
        if self.proc.poll() is not None:
            text = ("".join(self._stderr) + self.proc.stderr.read().decode(errors="replace")).strip()
            if "needs mitmproxy" in text or "No module named" in text:
                raise RecorderUnavailable(f"{HOW_TO_INSTALL} ({text.splitlines()[-1] if text else 'no output'})")
            raise CassetteError(f"the recorder exited with {self.proc.returncode}: {text[-2000:]}")
        # The exports were flushed to stdout before the ready line went to stderr.
        os.set_blocking(self.proc.stdout.fileno(), False)
        data = b""
        try:
            while chunk := self.proc.stdout.read(65536):
                data += chunk
        except BlockingIOError:
            pass
        for line in data.decode(errors="replace").splitlines():
            if line.startswith("export ") and "=" in line:
                k, _, v = line.removeprefix("export ").partition("=")
                self.env[k.strip()] = v.strip()
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()
        return self.env

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            m = _FLUSHED.match(line.strip())
            with self._said:
                if m:
                    self._flushed.append(int(m.group(1)))
                else:
                    self._stderr.append(line)
                self._said.notify_all()
        with self._said:
            self._said.notify_all()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def flush(self, timeout: float = 120.0) -> int:
        """Have the recorder store every round trip captured so far; returns how many round trips
        its cassette then holds. Everything a client has received by now is among them (the
        recorder hands a round trip over before its last byte reaches the client)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            raise CassetteError(f"the recorder is not running: {self.log.strip()[-2000:]}")
        with self._said:
            before = len(self._flushed)
        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        with self._said:
            while len(self._flushed) <= before:
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None:
                    why = "stopped" if proc.poll() is not None else f"did not answer within {timeout:.0f} s"
                    raise CassetteError(f"the recorder {why} while storing the test's round trips: {self.log.strip()[-2000:]}")
                self._said.wait(min(left, 0.5))
            return self._flushed[before]

    @property
    def log(self) -> str:
        return "".join(self._stderr)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGINT (the recorder flushes and exits), SIGKILL if it hangs; returns its exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._drain is not None:
            self._drain.join(5)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        self.proc = None
        return proc.returncode


class SessionCassette:
    """Reads a cassette that a running recorder appends to, a few records at a time: the round
    trips stored since the last read are parsed once (a session's cassette is read once in all,
    not once per test). Requests stored as deltas of earlier ones are rebuilt in full."""

    def __init__(self, path: Path) -> None:
        from cassettes.codec import HistoryDecoder

        self.path = path
        self.exchanges: list[Exchange] = []
        self._offset = 0
        self._version: int | None = None
        self._decoder = HistoryDecoder()

    def upto(self, n: int) -> list[Exchange]:
        """The first ``n`` round trips (read from the file as far as needed)."""
        if len(self.exchanges) < n:
            self._read()
        if len(self.exchanges) < n:
            raise CassetteError(f"{self.path}: the recorder said it stored {n} round trips, the file holds {len(self.exchanges)}")
        return self.exchanges[:n]

    def _read(self) -> None:
        import orjson

        from cassettes.codec import check_header, loads_record, migrate, record_to_exchange
        from cassettes.errors import CassetteFormatError
        from cassettes.store import open_regular

        with open_regular(self.path) as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # whole lines only: the writer may be mid-record
        for raw in data[:end].splitlines():
            self._offset += len(raw) + 1
            if not raw.strip():
                continue
            try:
                rec = loads_record(raw)
            except (orjson.JSONDecodeError, CassetteFormatError) as exc:
                raise CassetteError(f"{self.path}: unreadable record in the session recording: {exc}") from None
            if self._version is None:
                self._version = check_header(rec)
                continue
            rec = migrate(rec, self._version)
            if rec.get("type") == "exchange":
                self.exchanges.append(record_to_exchange(rec, self._decoder))
