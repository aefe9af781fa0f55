"""A line of progress a person can read while the suite runs (issue 105, item 3; docs/suite.md).

``-q`` under pytest-xdist prints a dot a test and its percentages only as each line of dots fills:
on a loaded machine nothing came for minutes, and a run stuck in one test looked like one still
collecting. Here the process that prints (xdist's controller, or pytest itself without xdist)
says, every :data:`EVERY` seconds (30 by default), from the session's start:

    suite: progress 4:30: 1,234 of 5,535 tests done (1,230 passed, 1 failed, 3 skipped),
    4,301 to go, 3 running

(one line)

before the tests are known, ``collecting`` (and how many of xdist's workers have collected); and
when no test has finished for :data:`STALL` seconds (300 by default) it says so, naming the tests
still running and for how long: a stall is said, never judged (a ``why`` run's fixture may take
that long on a loaded machine; the hang detection of tests/support/progress.py judges). The
counts are pytest's own categories (``pytest_report_teststatus``), a test counted when its
teardown is reported. ``LOOPTAP_PROGRESS_EVERY=0`` turns the lines off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import pytest

__all__ = ["EVERY", "STALL", "Heartbeat", "pytest_configure"]

#: Seconds between two lines (default 30; 0: no lines).
EVERY = "LOOPTAP_PROGRESS_EVERY"
#: Seconds without a finished test before a stall is said (default 300).
STALL = "LOOPTAP_STALL_AFTER"
#: The order the counts are said in; any other category of pytest's comes after them.
ORDER = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name) or default))
    except ValueError:
        return default


def _clock(seconds: float) -> str:
    s = int(round(seconds, 6))  # (start + 31 is 30.999… in floats)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


class Heartbeat:
    """The counts, kept from the reports the printing process receives, and the thread that says
    them."""

    def __init__(self, config: pytest.Config, every: float, stall: float) -> None:
        self.config = config
        self.every = every
        self.stall = stall
        self.lock = threading.Lock()
        self.total: int | None = None
        self.workers = int(getattr(config.option, "numprocesses", 0) or 0)
        self.collected = 0  # workers whose collection is in
        self.done = 0
        self.counts: dict[str, int] = {}
        self.running: dict[str, float] = {}
        self.start = self.last = time.monotonic()
        self.stalled = False
        self.stop = threading.Event()
        # Without xdist this process runs the tests, and while one runs pytest captures what is
        # written to its standard output (fd 1): the lines go to a copy of it taken now, before
        # any test (pytest_configure, the capture suspended). xdist's controller runs none.
        self.fd: int | None = None
        if not self.workers:
            try:
                self.fd = os.dup(sys.stdout.fileno())
            except (OSError, ValueError, AttributeError):  # (no file behind it: the reporter's)
                self.fd = None
        self.thread = threading.Thread(target=self._beat, name="looptap-heartbeat", daemon=True)

    # -- what the session reports ------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.start = self.last = time.monotonic()
        self.thread.start()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        with self.lock:  # (without xdist: this process collected)
            self.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        with self.lock:
            self.collected += 1
            self.total = len(ids)  # every worker collects the same tests

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        category = self.config.hook.pytest_report_teststatus(report=report, config=self.config)[0]
        with self.lock:
            if category:
                self.counts[category] = self.counts.get(category, 0) + 1
            if report.when == "teardown":
                self.done += 1
                self.running.pop(report.nodeid, None)
                self.last = time.monotonic()
                self.stalled = False

    def pytest_sessionfinish(self) -> None:
        self.stop.set()

    def pytest_unconfigure(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()  # (it ends a line it is writing, then sees the stop)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    # -- what is said ------------------------------------------------------------------------
    def line(self, now: float) -> str:
        """The progress line at ``now`` (``time.monotonic()``)."""
        with self.lock:
            head = f"progress {_clock(now - self.start)}: "
            if self.total is None:
                if self.workers and self.collected:
                    return f"{head}collecting ({self.collected} of {self.workers} workers done)"
                return head + "collecting"
            said = [c for c in ORDER if c in self.counts] + sorted(set(self.counts) - set(ORDER))
            counts = ", ".join(f"{self.counts[c]:,} {c}" for c in said)
            out = (
                f"{head}{self.done:,} of {self.total:,} tests done"
                + (f" ({counts})" if counts else "")
                + f", {max(0, self.total - self.done):,} to go, {len(self.running)} running"
            )
            quiet = now - self.last
            if self.running and quiet >= self.stall:
                longest = sorted(self.running.items(), key=lambda kv: kv[1])[:5]
                out += (
                    f"\nsuite: stall: no test has finished for {_clock(quiet)}; running: "
                    + ", ".join(f"{nodeid} ({_clock(now - t)})" for nodeid, t in longest)
                    + (f" and {len(self.running) - 5} more" if len(self.running) > 5 else "")
                )
            return out

    def _beat(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        while not self.stop.wait(self.every):
            self.say(self.line(time.monotonic()), reporter)

    def say(self, text: str, reporter: Any) -> None:
        text = "suite: " + text
        if self.fd is not None:  # (this process runs the tests: past the capture of their output)
            os.write(self.fd, f"\n{text}\n".encode(errors="replace"))
        elif reporter is not None:  # xdist's controller: on a line of its own, after any dots
            if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
                reporter.write("\n")
            reporter.write_line(text)
            reporter.flush()


def pytest_configure(config: pytest.Config) -> None:
    """Registered in the process that prints only (never in an xdist worker)."""
    every = _seconds(EVERY, 30)
    if hasattr(config, "workerinput") or every <= 0 or config.option.collectonly:
        return
    config.pluginmanager.register(
        Heartbeat(config, every, _seconds(STALL, 300)), "looptap-heartbeat"
    )
