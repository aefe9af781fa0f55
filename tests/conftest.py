"""Suite-wide: looptap's cache (kept analyses) lives in a temporary directory for the session,
never in the home of whoever runs the tests. Set in the
environment, so the recorder and every other child process the tests start use it too.

And the commands the tests start get Ctrl-C as a terminal gives it: a suite started as a background
job of a non-interactive shell (``cmd &``, ``setsid nohup …``) inherits SIGINT *ignored*, and every
child would too (an ignored signal stays ignored across exec). The tests that press Ctrl-C
(test_lost_interrupt, test_doc_commands' servers, the recorder's stop) then waited on commands that
never saw it: a fresh-clone run launched that way failed 7 of them.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path

import httpcore2  # noqa: F401  (see below)
import pytest

from tests.support import heartbeat, phases, scheduling, shared

try:  # (the recorder's environment runs a few of these tests without Hypothesis)
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    # Hypothesis' deadline (200 ms an example) and its too-slow health check are timed
    # assertions: on a loaded machine a slow example failed a correct property test (test_roots,
    # once under -n 2). Off for every property test of the suite; a hang is caught by lack of
    # progress, never by seconds.
    settings.register_profile(
        "looptap", deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile("looptap")

# pytest's assertion rewriting of the ~490 test modules is kept in their __pycache__ for the next
# session: the machines set PYTHONDONTWRITEBYTECODE, and pytest then rewrote every module again in
# every worker of every run (a third of a worker's collection: `--collect-only`, one process, 84 s
# with nothing kept, 40 s with the rewrites kept; docs/suite.md). This process only: the commands
# the tests start still inherit the variable.
sys.dont_write_bytecode = False

# httpx loads httpcore's exceptions on its first request and keeps them; the plugin's tests run
# pytest in process (pytester), which drops every module imported during the run afterwards: a
# first live request made there (cassettes.net's) would leave httpx mapping the classes of an
# httpcore since dropped, and a later TLS failure would escape as httpcore2.ConnectError. Loaded
# here, before any run, it stays the same module for the whole session.


#: The skip reason of a ``slow`` test in the default run.
SLOW_RUN = "LOOPTAP_SLOW=1 (the nightly run, docs/suite.md)"


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Python's own handler (a KeyboardInterrupt), as for a suite started from a terminal: the
        # children then start with SIGINT at its default (a handler is reset by exec, SIG_IGN is
        # not).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    cache = tempfile.mkdtemp(prefix="looptap-test-cache-")  # kept analyses (docs/kept-analysis.md)
    os.environ["LOOPTAP_CACHE_DIR"] = cache
    # `looptap run` traces the command's processes and takes its working tree by default on Linux
    # (docs/shell-file-tools.md): the suite's runs, compared record by record, opt out; the tests
    # of the tracer (tests/proxy/test_shell_trace.py, tests/clients/test_shell_tools.py) remove it
    os.environ.setdefault("LOOPTAP_SHELL_TRACE", "off")
    # so their forks (of runs with no working tree: refused without it, proxy/isolation.py) run
    # in the test's folder, as --in-place; the tests of a fork's isolation remove it with the above
    os.environ.setdefault("LOOPTAP_IN_PLACE", "1")
    # a check or analysis step that raises on a recording raises in the suite, loudly, where a
    # user's show or run gets the contained result (docs/reliability.md); its own tests unset it
    os.environ.setdefault("LOOPTAP_RAISE_CONTAINED", "1")
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
    scheduling.name_directory(config)
    shared.name_directory(config)  # inputs built once a session (tests/support/shared.py)
    heartbeat.pytest_configure(config)  # a line of progress every 30 s (the printing process)
    if phases.phase() == "core":  # nothing of the matrix is found (the guard below)
        os.environ.update(phases.absent_env())


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The matrix phase imports only the modules that need the matrix (tests/support/phases.py):
    its collection costs what they cost."""
    if (
        phases.phase() == "matrix"
        and collection_path.suffix == ".py"
        and collection_path.name.startswith("test_")
        and not phases.in_phase(collection_path, "matrix")
    ):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (.ci/run), the tests that share one instance of a module- or
    class-scoped fixture go to one xdist worker together (tests/support/scheduling.py), and so do
    the tests that read the session's agent runs (``tool_agent_run``, tests/proxy/conftest.py:
    each agent recorded once); every other test goes to whichever worker is idle. Without xdist
    this does nothing.

    A test marked ``slow`` (``@pytest.mark.slow(reason=...)``) is skipped unless ``LOOPTAP_SLOW=1``:
    the nightly run's (docs/suite.md, "The nightly run"), which lists every such module and why.

    Under ``LOOPTAP_PHASE`` only the phase's tests run (tests/support/phases.py); the others are
    deselected."""
    if os.environ.get("LOOPTAP_SLOW", "") in ("", "0"):
        for item in items:
            mark = item.get_closest_marker("slow")
            if mark is not None:
                why = mark.kwargs.get("reason", "")
                item.add_marker(pytest.mark.skip(reason=f"{SLOW_RUN}{': ' + why if why else ''}"))
    which = phases.phase()
    if which is not None:
        keep = [i for i in items if phases.in_phase(i.path, which)]
        if len(keep) != len(items):
            kept = set(keep)
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = keep
    scheduling.publish(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The guard of the core phase: a core test that skips or fails naming what only the matrix
    installs (its path, its variable, or the absent path the core phase points it at) needed the
    matrix without naming it in its module: an error that says so, never a quiet skip."""
    report = yield
    if phases.phase() == "core" and (report.skipped or report.failed):
        named = phases.needed_in(str(report.longrepr))
        if named:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} ran in the core phase but needs {', '.join(named)}, which only "
                "the matrix phase installs: name it in the module (tests/support/phases.py)\n"
                f"{report.longrepr}"
            )
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getoption("dist") != "loadgroup":
        return None
    return scheduling.make_scheduler(config, log)
