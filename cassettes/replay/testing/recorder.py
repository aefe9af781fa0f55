"""Recording for the pytest plugin: the same recorder as ``looptap run``, as a child process.

The recorder needs mitmproxy, which lives in its own environment (its h11 pin clashes with the
SDKs'), so the plugin never imports it: it starts ``looptap record`` with the interpreter named by
``LOOPTAP_PROXY_PYTHON`` (or this one, when mitmproxy happens to be importable here), waits for
the ready file it writes once listening (``--ready-file``: the environment to export, the ports),
and stops it with SIGINT, which flushes every round trip to disk.

The plugin runs one recorder for a whole test session (per xdist worker): starting one costs
seconds (importing mitmproxy), a round trip milliseconds. Between tests it sends SIGUSR1, on which
the recorder stores everything captured so far and says how many round trips its cassette holds
(:meth:`RecorderProcess.flush`); :class:`SessionCassette` then reads the round trips between two
such marks, which are the test's, and the plugin writes them into the test's own cassette.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ...errors import CassetteError, RecorderUnavailable
from ...hints import HANDED_OFF, INVOKED_AS, count, looptap_command
from ...liveness import Progress
from ...wire import Exchange
from .ready import Ready, read_ready

__all__ = [
    "RecorderProcess",
    "SessionCassette",
    "SessionRecorder",
    "elsewhere",
    "hand_to",
    "how_to_install",
    "recorder_python",
]

#: The recorder's answer to SIGUSR1 (proxy/session.py ``FLUSHED``), with the number stored.
_FLUSHED = re.compile(r"^looptap: flushed: (\d+) round trips stored$")


def how_to_install() -> str:
    """What to do when no recorder is there: the command that creates its environment (by the
    looptap checkout's absolute path: it runs from the user's own project too), where it is found
    from then on (:func:`recorder_python`)."""
    from ...hints import recorder_install_command

    command, _python = recorder_install_command()
    return (
        "recording needs the looptap recorder (mitmproxy, in its own environment), not found: "
        f"create it with `{command}` (found there from then on; LOOPTAP_PROXY_PYTHON names one "
        "elsewhere), or replay only (--looptap-record-mode=none) with a recorded cassette"
    )


#: Variables of the machine that must not steer the recorder (it listens on loopback).
_SCRUB = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def recorder_python(base: Path | None = None) -> str | None:
    """The interpreter that can run the recorder, or ``None``: ``LOOPTAP_PROXY_PYTHON``, else this
    one when mitmproxy is importable here, else the environment set-up made
    (:func:`cassettes.hints.found_recorder`: the checkout's ``.venv-proxy``, whichever environment
    this looptap is installed in). ``LOOPTAP_PROXY_PYTHON`` is read as
    users write it: ``~`` expanded, a relative path taken from ``base`` (where pytest was started;
    default: the current directory), never resolved through its links (a virtual environment's
    ``python`` is one). Raises :class:`RecorderUnavailable` when it names no file: said as missing,
    not as an environment to create."""
    named = os.environ.get("LOOPTAP_PROXY_PYTHON", "").strip()
    if named:
        path = Path(named).expanduser()
        if not path.is_absolute():
            path = Path(os.path.abspath(base or Path.cwd())) / path
        if not path.exists():
            shown = os.path.normpath(path)
            where = (
                ""
                if shown == named
                else f" ({shown}"
                f"{', relative to where pytest runs' if not Path(named).expanduser().is_absolute() else ''}"  # noqa: E501
                ")"
            )
            raise RecorderUnavailable(f"LOOPTAP_PROXY_PYTHON={named}: no such file{where}")
        return str(path)
    if importlib.util.find_spec("mitmproxy") is not None:
        return sys.executable
    from ... import hints

    return hints.found_recorder()


def elsewhere() -> str | None:
    """The recorder's interpreter (:func:`recorder_python`) when it is another environment than
    this one and this command was not handed to this one already (:data:`~cassettes.hints.
    HANDED_OFF`): where a command that needs what the recorder's environment holds (mitmproxy,
    Textual, the mcp package: the README makes it with ``proxy,inspector,mcp,html``) runs when
    the looptap of the user's own project lacks it. ``None``: there is no such environment (none
    found, ``LOOPTAP_PROXY_PYTHON`` names no file, or this is it)."""
    try:
        python = recorder_python()
    except CassetteError:
        return None
    if (
        python is None
        or os.environ.get(HANDED_OFF)
        or os.path.abspath(python) == os.path.abspath(sys.executable)
    ):
        return None
    return python


def hand_to(python: str, words: Sequence[str]) -> str:
    """Run ``looptap WORDS`` (the words the user typed after ``looptap``) with the interpreter
    ``python``, by ``exec``: the same process, terminal, standard streams and signals, its hints
    said as the user runs looptap (:data:`~cassettes.hints.INVOKED_AS`), never handed on again
    (:data:`~cassettes.hints.HANDED_OFF`). Returns only when it cannot: the one line that says
    why."""
    env = {**os.environ, HANDED_OFF: "1", INVOKED_AS: looptap_command()}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(python, [python, "-m", "looptap.cassettes.cli", *words], env)
    except OSError as exc:
        return f"error: cannot run the recorder {python}: {exc.strerror or exc}"
    return ""  # not reached: execve replaced this process


#: Seconds a recorder that never became ready gets to exit on SIGINT before SIGKILL.
_NOT_READY_GRACE = 3.0


class RecorderProcess:
    """``looptap record -o OUTPUT`` in a child process, started by :meth:`start`, which waits for
    its ready file (:mod:`cassettes.replay.testing.ready`): ``ready`` holds that file, ``env`` what
    it says to export. ``args`` are more options for ``looptap record``; ``env`` replaces the
    child's environment (default: this one without proxy variables). The recorder runs in a session
    of its own, so :meth:`stop` and :meth:`kill` end it and its writer process together."""

    def __init__(
        self,
        output: Path,
        *,
        upstreams: dict[str, str] | None = None,
        confdir: Path | None = None,
        python: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.output = output
        self.upstreams = dict(upstreams or {})
        self.confdir = confdir
        #: ``None``: :func:`recorder_python`, read when the recorder starts.
        self.python = str(python) if python is not None else None
        self.args = tuple(args)
        self.child_env = env
        self.env: dict[str, str] = {}
        self.ready: Ready | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        #: The recorder's process id (kept after :meth:`stop`).
        self.pid: int | None = None
        #: Every line the recorder said, stdout and stderr (guarded by ``_said``).
        self._lines: list[str] = []
        self._drain: threading.Thread | None = None
        self._dir: str | None = None
        #: The counts the recorder answered SIGUSR1 with, in order (guarded by ``_said``).
        self._flushed: list[int] = []
        self._said = threading.Condition()

    def argv(self, ready_file: Path) -> list[str]:
        """The command line that starts the recorder (raises :class:`RecorderUnavailable`)."""
        python = self.python if self.python is not None else recorder_python()
        if python is None:
            raise RecorderUnavailable(how_to_install())
        argv = [python, "-m", "looptap.cassettes.cli", "record", "-o", str(self.output)]
        if self.confdir is not None:
            argv += ["--confdir", str(self.confdir)]
        for name, url in self.upstreams.items():
            argv += ["--upstream", f"{name}={url}"]
        return [*argv, *self.args, "--ready-file", str(ready_file)]

    def start(self, timeout: float = 60.0) -> dict[str, str]:
        """Start the recorder and wait until it listens (its ready file is there); returns the
        environment a client needs. Raises :class:`RecorderUnavailable` when the recorder cannot
        run here, :class:`CassetteError` when it exits first or makes no progress for ``timeout``
        seconds before it is ready (its process tree's CPU time, reads and writes, what it says:
        :class:`cassettes.liveness.Progress`; a busy machine slows a start, never fails it), with
        the end of what it said."""
        self._dir = tempfile.mkdtemp(prefix="looptap-recorder-")
        try:
            ready = self._start(Path(self._dir) / "ready.json", timeout)
        except BaseException:
            # Not started (it could not run, exited, was not ready, or a Ctrl-C came): nothing of
            # it is left, neither a process nor its directory.
            self.kill()
            raise
        self.ready = ready
        self.env = dict(ready["env"])
        return self.env

    def _start(self, ready_file: Path, timeout: float) -> Ready:
        argv = self.argv(ready_file)
        env = (
            self.child_env
            if self.child_env is not None
            else {k: v for k, v in os.environ.items() if k not in _SCRUB}
        )
        self.proc = proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.pid = proc.pid
        self._drain = threading.Thread(
            target=self._drain_output, name="looptap recorder output", daemon=True
        )
        self._drain.start()
        # waited for while it (and the writer it starts) is alive and moving, however busy the
        # machine: only ``timeout`` seconds without progress are a failed start
        moving = Progress(proc.pid, timeout, extra=lambda: len(self.log))
        while True:
            try:
                ready = read_ready(ready_file)
            except CassetteError:
                self.stop(timeout=_NOT_READY_GRACE)
                raise
            if ready is not None:
                break
            if proc.poll() is not None:
                self._drain.join(5)  # everything it said, up to its end
                text = self.log.strip()
                self.stop()
                if "needs mitmproxy" in text or "No module named" in text:
                    raise RecorderUnavailable(
                        f"{how_to_install()} ({text.splitlines()[-1] if text else 'no output'})"
                    )
                raise CassetteError(
                    f"the recorder exited with {proc.returncode} "
                    f"before it was ready: {text[-2000:]}"
                )
            if moving.stalled():
                text = self.log.strip()
                # Not ready: nothing recorded, nothing to flush. A short grace, then SIGKILL (a
                # child that inherited an ignored SIGINT would otherwise cost the full 30 s).
                self.stop(timeout=_NOT_READY_GRACE)
                raise CassetteError(
                    f"the recorder made no progress for {timeout:.0f} s and did not start (no "
                    f"ready file): {text[-2000:]}"
                )
            with self._said:
                self._said.wait(0.05)
        self._await_exports(ready, time.monotonic() + timeout)
        return ready

    def _await_exports(self, ready: Ready, deadline: float) -> None:
        """Wait until the export lines the recorder prints right after its ready file are in
        :attr:`log` (so what it said on starting is there once :meth:`start` returns), or it
        exits, or the start's deadline passes: the ready file is what counts, the lines only
        complete the log."""
        wanted = {f"export {k}=" for k in ready["env"]}
        with self._said:
            while True:
                seen = {line.split("=", 1)[0] + "=" for line in self._lines if "=" in line}
                left = deadline - time.monotonic()
                if wanted <= seen or left <= 0 or self.proc is None or self.proc.poll() is not None:
                    return
                self._said.wait(min(left, 0.05))

    def _drain_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            m = _FLUSHED.match(line.strip())
            with self._said:
                if m:
                    self._flushed.append(int(m.group(1)))
                self._lines.append(line)
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
                    why = (
                        "stopped"
                        if proc.poll() is not None
                        else f"did not answer within {timeout:.0f} s"
                    )
                    raise CassetteError(
                        f"the recorder {why} while storing the test's round trips: "
                        f"{self.log.strip()[-2000:]}"
                    )
                self._said.wait(min(left, 0.5))
            return self._flushed[before]

    @property
    def log(self) -> str:
        """Everything the recorder said so far (its export lines, notices and errors)."""
        with self._said:
            return "".join(self._lines)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGINT (the recorder flushes and exits), SIGKILL if it hangs; returns its exit code."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        return self.kill()

    def kill(self) -> int | None:
        """SIGKILL to the recorder and whatever of its session is left (its writer process);
        returns its exit code (``None`` if it was not started)."""
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            if self._drain is not None:
                self._drain.join(5)
            if proc.stdout is not None:
                proc.stdout.close()
            self.proc = None
        if self._dir is not None:  # its ready file's directory, whether or not the recorder started
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return proc.returncode if proc is not None else None


class SessionCassette:
    """The pytest plugin's reader of the cassette its recorder is still appending to, read as far as
    the plugin asks: the records of a growing cassette as the inspector reads them
    (:class:`~cassettes.storage.RecordSource`), each round trip rebuilt once (a session's
    cassette is read once in all, not once per test), requests stored as deltas rebuilt in full."""

    def __init__(self, path: Path) -> None:
        from ...storage import RecordSource

        self.path = path
        self.exchanges: list[Exchange] = []
        self._records = RecordSource(path)

    def upto(self, n: int) -> list[Exchange]:
        """The first ``n`` round trips (read from the file as far as needed)."""
        if len(self.exchanges) < n:
            self._read()
        if len(self.exchanges) < n:
            raise CassetteError(
                f"{self.path}: the recorder said it stored {count(n, 'round trip')}, the file "
                "holds "
                f"{len(self.exchanges)}"
            )
        return self.exchanges[:n]

    def _read(self) -> None:
        for _, rec in self._records.poll():  # whole lines only: the writer may be mid-record
            self.exchanges.append(self._records.rebuild(rec, checked=True))
        if self._records.problems:
            raise CassetteError(
                f"{self.path}: unreadable record in the session recording: "
                f"{self._records.problems[0]}"
            )


class SessionRecorder:
    """The session's one recorder: started by the first test that records, stopped at the end of
    the session. :meth:`mark` says how many round trips it has stored; a test's round trips are
    those between its two marks (tests in one process run one after another)."""

    def __init__(self, upstreams: dict[str, str], confdir: Path, python: str | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="looptap-session-"))
        self.process = RecorderProcess(
            self.dir / "session.jsonl", upstreams=upstreams, confdir=confdir, python=python
        )
        self.cassette = SessionCassette(self.process.output)
        self.env: dict[str, str] = {}

    def start(self) -> None:
        self.env = dict(self.process.start())

    @property
    def running(self) -> bool:
        return self.process.running

    def mark(self) -> int:
        return self.process.flush()

    def between(self, start: int, end: int) -> list[Exchange]:
        return self.cassette.upto(end)[start:end]

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
