"""The looptap pytest plugin: replay cassettes to the real agent code, record them when asked.

    @pytest.mark.looptap                      # cassettes/<module>/<test>.jsonl beside the test file
    def test_agent(looptap):
        answer = my_agent.run("Weather in Paris?")   # its SDK reads OPENAI_BASE_URL … from the env
        assert "sunny" in answer
        looptap.run.assert_no_findings(layer="C")
        assert looptap.run.total_tokens < 50_000

The ``looptap`` fixture (requested, or implied by the ``looptap`` marker) points the SDKs' base-URL
variables at an in-process replay server for the test, and sets a placeholder API key where none
is set. A replayed test also gets the proxy variables and a CA store that trusts no host
(:data:`NO_HOST_CA`), so a client that ignores the base URL reaches nothing real (docs/testing.md,
"What a replayed test's environment gets"). Record modes, as in pytest-recording
(``--looptap-record-mode``):

* ``none`` — replay only; a missing cassette is an error (the default when ``CI`` is set);
* ``once`` — replay when the cassette exists, else record it (the default otherwise);
* ``new_episodes`` — replay, and record the requests the cassette cannot answer, appended to it;
* ``all`` — record every time, replacing the cassette.

Recording runs ``looptap record`` (the mitmproxy recorder, like ``looptap run``) as a child process
from ``LOOPTAP_PROXY_PYTHON``; it forwards to the real APIs or to ``--looptap-upstream NAME=URL``.
One recorder serves the whole session (per xdist worker), started when the first test records:
each test's round trips are cut out of the session's recording at the test's start and end
(:mod:`cassettes.replay.testing.recorder`). Replay needs nothing but this package.

A request the cassette cannot answer fails the test with the closest recorded turn, the JSON
paths that differ and the layer they implicate, even when the agent swallowed the SDK's error:
said once, with the test's own frames that made the request and none of the SDK's
(:func:`cassettes.replay.testing._report.failure_text`). ``--looptap-fail-unplayed`` (or
``looptap_fail_unplayed = true`` in the ini file, or the marker's ``fail_unplayed=True``) also
fails a test that left recorded round trips unplayed. The terminal summary lists, per test, the
round trips played and unplayed and the faults injected.

This module holds the hooks only: it loads in every pytest session of every project that has
looptap installed, whether a test uses it or not. What a test that uses looptap needs is loaded by
the first one (:mod:`cassettes.replay.testing._session`, :mod:`~cassettes.replay.testing._report`).
"""

from __future__ import annotations

import importlib
from collections.abc import Generator, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from ...errors import ReplayMiss
from ...project import RuleError, project_table
from ._keys import MISS, MODES, RECORDER, REPORTS
from ._rewrite import spare_core

if TYPE_CHECKING:
    from ._session import LooptapSession

spare_core()  # the rest of the core loads as plain Python, not assertion-rewritten by pytest

__all__ = ["LooptapSession", "looptap"]

#: The test's session, kept by the fixture for the hooks.
_SESSION: pytest.StashKey[LooptapSession] = pytest.StashKey()


def _machinery() -> ModuleType:
    """What a test that uses looptap needs, loaded by the first one. Looked up by its name, not
    as this package's attribute (``from . import _session``): a pytester run in the process drops
    the modules it imported when it ends, and the attribute would hand the next run the dropped
    copy, whose replay server then matched with classes the fresh fork cursor does not know."""
    return importlib.import_module(f"{__package__}._session")


def __getattr__(name: str) -> Any:
    """The machinery's public names, from here too (``NO_HOST_CA``, ``LooptapSession``)."""
    if name in ("NO_HOST_CA", "LooptapSession"):
        return getattr(_machinery(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("looptap", "looptap: replay and record LLM traffic")
    group.addoption(
        "--looptap-record-mode",
        choices=MODES,
        default=None,
        help="none (default when CI is set), once (default otherwise), new_episodes or all",
    )
    group.addoption(
        "--looptap-fail-unplayed",
        action="store_true",
        default=False,
        help="fail a test that leaves recorded round trips unplayed",
    )
    group.addoption(
        "--looptap-pace",
        default=None,
        help="stream pace when replaying: instant (default), recorded or xN",
    )
    group.addoption(
        "--looptap-strict",
        action="store_true",
        default=False,
        help="requests must come in recorded order (with the same API version headers)",
    )
    group.addoption(
        "--looptap-no-volatile",
        action="store_true",
        default=False,
        help="compare requests as sent: no date, id, temp path, cwd or loopback port tolerated",
    )
    group.addoption(
        "--looptap-upstream",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="when recording: forward NAME's API to URL instead of the real one",
    )
    parser.addini("looptap_record_mode", "default record mode", default="")
    parser.addini(
        "looptap_fail_unplayed",
        "fail a test that leaves recorded round trips unplayed",
        type="bool",
        default=False,
    )
    parser.addini(
        "looptap_volatile",
        "tolerate volatile spans (dates, ids, temp paths, "
        "cwd, loopback ports) when matching a replay",
        type="bool",
        default=True,
    )
    parser.addini(
        "looptap_ignore",
        "JSON paths of the request body not compared when matching a replay (one a line; "
        "metadata.*, or FAMILY:PATH for one API family)",
        type="linelist",
        default=[],
    )
    parser.addini(
        "looptap_substitute",
        "REGEX=REPLACEMENT applied to the request's strings "
        "on both sides when matching a replay (one a line)",
        type="linelist",
        default=[],
    )
    parser.addini(
        "looptap_volatile_tools",
        "tools whose results are not compared when matching a replay (one a line)",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    _ini_rules(config)  # a rule that cannot be used: one usage error line, before any test runs
    config.addinivalue_line(
        "markers",
        "looptap(path=None, *, record_mode=None, pace=None, strict=None, volatile=None, "
        "ignore=None, substitute=None, volatile_tools=None, fail_unplayed=None, fault=None, "
        "fault_seed=0): replay (or record) this test's LLM traffic from a looptap cassette; "
        "fault='turn=1:overloaded*2' (or a list) injects API faults into the replay; fork='turn=1' "
        "(or 'divergence'), live={NAME: URL}, model=None, edit=None ('TARGET=@FILE' or a list), "
        "prefix='strict' (or 'tolerant'): the cassette's prefix replayed, from the cursor on live, "
        "as looptap run --from (docs/fork.md)",
    )
    config.stash[REPORTS] = []


def _ini_rules(config: pytest.Config) -> None:
    """The ini's rules and the project's file (found from the rootdir), checked at start-up. The
    rules' machinery loads only when one of them declares some: a session of a project that
    declares none reads its file and nothing more."""
    cassette = Path(str(config.rootpath)) / "_"
    ignore, substitute, tools = (
        config.getini(f"looptap_{k}") for k in ("ignore", "substitute", "volatile_tools")
    )
    try:
        if ignore or substitute or tools or project_table(cassette) is not None:
            from ...matching import project_rules  # the rules' machinery, when used

            project_rules(cassette, ignore, substitute, tools, "pytest's ini")
    except RuleError as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.stash.get(RECORDER, None)
    if recorder is not None:
        recorder.stop()


@pytest.fixture
def looptap(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LooptapSession]:
    """Replay (or record) this test's LLM traffic; see the module docstring."""
    machinery = _machinery()
    session = machinery.looptap_session(request, monkeypatch, tmp_path_factory)
    request.node.stash[_SESSION] = session
    try:
        yield session
    finally:
        machinery.end_session(session, request.config, request.node.nodeid)


@pytest.fixture(autouse=True)
def _looptap_marker(request: pytest.FixtureRequest) -> None:
    """The ``looptap`` marker implies the fixture."""
    if (
        request.node.get_closest_marker("looptap") is not None
        and "looptap" not in request.fixturenames
    ):
        request.getfixturevalue("looptap")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A replay miss fails the test with its explanation, even if the agent swallowed the error."""
    try:
        result = yield
    except ReplayMiss:
        raise
    except BaseException as exc:
        miss = _replay_miss(item, exc)
        if miss is not None:
            raise miss from exc
        raise
    miss = _replay_miss(item, None)
    if miss is not None:
        raise miss
    session = item.stash.get(_SESSION, None)
    if session is not None and _machinery().fail_unplayed(item):
        left = session.unplayed_text()
        if left is not None:
            pytest.fail(left, pytrace=False)
    return result


def _replay_miss(item: pytest.Item, cause: BaseException | None) -> ReplayMiss | None:
    """The failure of a test whose replay missed, said once
    (:func:`cassettes.replay.testing._report.failure_text`; ``cause``: what the agent raised,
    ``None`` when it swallowed the error), kept for the test's report; ``None``: nothing missed."""
    session = item.stash.get(_SESSION, None)
    if session is None:
        return None
    text = _machinery().failure_text(session, cause, item.config.rootpath)
    if text is None:
        return None
    miss = item.stash[MISS] = ReplayMiss(text)
    return miss


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A replayed test's failure said by looptap, and the sections it adds
    (:func:`cassettes.replay.testing._report.add_sections`)."""
    report = yield
    session = item.stash.get(_SESSION, None)
    if session is not None:
        _machinery().add_sections(item, call, report, session)
    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = config.stash.get(REPORTS, [])
    if reports:
        terminalreporter.section("looptap")
        for line in reports:
            terminalreporter.write_line(line)
