"""A running ``looptap record`` (the real recorder, in its own environment) for tests and benches.

The recorder runs from ``$LOOPTAP_PROXY_PYTHON`` (mitmproxy 11 cannot share the test environment,
see MITMPROXY.md §0), in a new session so that it and its writer process can be killed together.
:class:`RecorderProcess` is the shipped one (:mod:`cassettes.replay.testing.recorder`, which waits
for the recorder's ready file) with what tests look at: its listening ports, and the CPU time and
memory of the proxy process and of its writer process, read from ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from looptap.cassettes.errors import CassetteError
from looptap.cassettes.replay.testing.recorder import RecorderProcess as Shipped
from tests.support import progress

__all__ = [
    "PROXY_PYTHON",
    "RECORDER",
    "SCRUB",
    "ProcStats",
    "RecorderProcess",
    "children",
    "clean_env",
    "needs_recorder",
    "proc_stats",
    "proxy_python",
    "recorded_or_live",
]

REPO = Path(__file__).resolve().parents[2]

#: Proxy and base-URL variables of the machine must not steer the recorder or the clients.
SCRUB = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_API_BASE",
    "GOOGLE_VERTEX_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
)


def proxy_python() -> Path | None:
    """The recorder's interpreter: ``LOOPTAP_PROXY_PYTHON``, else ``<repo>/.venv-proxy/bin/python``
    (what ``.ci/run`` creates); ``None`` when neither exists."""
    value = os.environ.get("LOOPTAP_PROXY_PYTHON")
    path = Path(value) if value else REPO / ".venv-proxy" / "bin" / "python"
    return path if path.exists() else None


PROXY_PYTHON = proxy_python()
#: ``looptap`` from the recorder's environment.
RECORDER = [str(PROXY_PYTHON), "-m", "looptap.cassettes.cli"]

#: Skips a test when there is no recorder environment, saying how to make one.
needs_recorder = pytest.mark.skipif(
    PROXY_PYTHON is None or sys.platform == "win32",
    reason="the recorder runs in its own environment (mitmproxy 11 pins h11<=0.14): set "
    "LOOPTAP_PROXY_PYTHON or create .venv-proxy (python3 -m venv .venv-proxy && "
    ".venv-proxy/bin/pip install -e '.[proxy]'); POSIX only",
)


def recorded_or_live(what: str) -> list[object]:
    """A module fixture's ``params`` (issue 105): ``"recorded"``, its run as the fixture recorded it
    live once (committed beside the module), by default; ``"live"``, recorded again through the
    real recorder, in the nightly run. ``what``: what is recorded, and its cost."""
    live = pytest.mark.slow(
        reason=f"{what} recorded again through looptap run: every test reads it as recorded by "
        "default ([recorded])"
    )
    return ["recorded", pytest.param("live", marks=[live, needs_recorder])]


def clean_env(*, scrub: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """This process's environment without the variables that would steer a client or the recorder
    (:data:`SCRUB`, plus ``scrub``), with ``extra`` set."""
    drop = {*SCRUB, *scrub}
    env = {k: v for k, v in os.environ.items() if k.upper() not in drop}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), **extra)
    return env


@dataclass
class ProcStats:
    pid: int
    #: CPU seconds (user + system) used so far.
    cpu: float
    #: Resident set size now, and its peak (VmHWM), in bytes.
    rss: int
    peak_rss: int


def proc_stats(pid: int) -> ProcStats | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    kb = {
        ln.split(":")[0]: int(ln.split()[1])
        for ln in status.splitlines()
        if ln.startswith(("VmRSS", "VmHWM"))
    }
    return ProcStats(pid, cpu, kb.get("VmRSS", 0) * 1024, kb.get("VmHWM", 0) * 1024)


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                out += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


class RecorderProcess:
    """``looptap record -o OUT --upstream openai=… …`` until :meth:`stop` (SIGINT) or :meth:`kill`.

    The shipped :class:`cassettes.replay.testing.recorder.RecorderProcess` (which waits for the
    recorder's ready file) in the tests' terms: started at once, a failure to start is an
    ``AssertionError`` with all the recorder said, ``output`` is that text, and the ports and the
    recorder's processes can be looked up."""

    def __init__(
        self,
        out: Path,
        confdir: Path,
        upstream_url: str | None = None,
        *extra: str,
        env: dict[str, str] | None = None,
        python: Path | None = None,
        ready_timeout: float | None = None,
    ) -> None:
        py = python or PROXY_PYTHON
        if py is None:
            raise RuntimeError("LOOPTAP_PROXY_PYTHON is not set")
        self.out = out
        upstreams = (
            {name: upstream_url for name in ("openai", "anthropic", "gemini")}
            if upstream_url
            else {}
        )
        self.recorder = Shipped(
            out, upstreams=upstreams, confdir=confdir, python=py, args=extra, env=env or clean_env()
        )
        try:
            # The shipped helper's own limit (its API takes seconds, no progress signal): the
            # suite's absolute ceiling unless a test asks for less (a refusal it checks).
            self.env: dict[str, str] = self.recorder.start(
                progress.CEILING if ready_timeout is None else ready_timeout
            )
        except CassetteError as exc:
            raise AssertionError(
                f"looptap record did not get ready: {exc}\n{self.output}"
            ) from None
        assert self.recorder.pid is not None and self.recorder.ready is not None
        self._pid = self.recorder.pid
        self._rc: int | None = None
        #: The recorder's ready file (cassettes/replay/testing/_ready.py).
        self.ready = self.recorder.ready

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def output(self) -> str:
        """Everything the recorder said (stdout and stderr)."""
        return self.recorder.log

    def port(self, var: str = "OPENAI_BASE_URL") -> int:
        port = urlsplit(self.env[var]).port
        assert port is not None
        return port

    @property
    def forward_port(self) -> int:
        return self.port("HTTP_PROXY")

    def ports(self) -> dict[str, int]:
        out = {}
        for var in (
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
            "GOOGLE_GEMINI_BASE_URL",
            "HTTP_PROXY",
        ):
            if var in self.env:
                out[var] = self.port(var)
        return out

    def writer_pids(self) -> list[int]:
        """The writer process: the recorder's multiprocessing (spawn) child that is not its
        resource tracker."""
        return [c for c in children(self.pid) if "spawn_main" in cmdline(c)]

    def helper_pids(self) -> list[int]:
        """Every child process of the recorder (writer and multiprocessing's resource tracker)."""
        return children(self.pid)

    def stats(self) -> dict[str, ProcStats | None]:
        out: dict[str, ProcStats | None] = {"proxy": proc_stats(self.pid)}
        for i, pid in enumerate(self.writer_pids()):
            out["writer" if i == 0 else f"writer{i}"] = proc_stats(pid)
        return out

    def stop(self) -> int:
        """SIGINT, then SIGKILL to whatever of the recorder's session is left; its exit code. The
        recorder gets all the time it needs to flush while it makes progress (CPU time, I/O): only
        a recorder that stopped progressing is killed, however busy the machine."""
        proc = self.recorder.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(progress.Hung):
                progress.wait(proc, kill=False, what="the recorder's shutdown")
        rc = self.recorder.stop(0)
        self._rc = rc if rc is not None else self._rc
        assert self._rc is not None
        return self._rc

    def kill(self) -> None:
        rc = self.recorder.kill()
        self._rc = rc if rc is not None else self._rc

    def __enter__(self) -> RecorderProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
