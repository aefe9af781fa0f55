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
(:mod:`cassettes.replay.testing.recording`). Replay needs nothing but this package.

A request the cassette cannot answer fails the test with the closest recorded turn, the JSON
paths that differ and the layer they implicate, even when the agent swallowed the SDK's error:
said once, with the test's own frames that made the request and none of the SDK's
(:func:`failure_text`). ``--looptap-fail-unplayed`` (or ``looptap_fail_unplayed = true`` in the
ini file, or the marker's ``fail_unplayed=True``) also fails a test that left recorded round trips
unplayed. The terminal summary lists, per test, the round trips played and unplayed and the faults
injected.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cassettes.errors import CassetteError, ReplayMiss
from cassettes.replay.testing.unrewritten import spare_core

# Everything else is imported where it is used: this module loads in every pytest session of every
# project that has looptap installed, whether a test uses it or not.
if TYPE_CHECKING:
    from cassettes.net import Trust
    from cassettes.reading.run import Run
    from cassettes.replay.serving.faults import FaultPlan
    from cassettes.replay.serving.server import ReplayServer
    from cassettes.wire.exchange import Exchange

spare_core()  # the rest of the core loads as plain Python, not assertion-rewritten by pytest

__all__ = ["LooptapSession", "looptap"]

MODES = ("none", "once", "new_episodes", "all")
_SESSION = pytest.StashKey["LooptapSession"]()
_RECORDER = pytest.StashKey["SessionRecorder"]()
_REPORTS = pytest.StashKey[list[str]]()
_REPORTS_DIR = pytest.StashKey[Path]()
#: The exception the test raised when a replay miss made it fail (the SDK's error, an assertion).
_CAUSE = pytest.StashKey["BaseException | None"]()
_PLACEHOLDER_KEY = "looptap-replay-placeholder-key"


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
    config.stash[_REPORTS] = []


def _record_mode(config: pytest.Config, marker: pytest.Mark | None) -> str:
    mode = (
        (marker.kwargs.get("record_mode") if marker else None)
        or config.getoption("--looptap-record-mode")
        or config.getini("looptap_record_mode")
    )
    if not mode:
        mode = "none" if os.environ.get("CI") else "once"
    if mode not in MODES:
        raise pytest.UsageError(
            f"looptap: record mode must be one of {', '.join(MODES)}, not {mode!r}"
        )
    return str(mode)


def _default_path(item: pytest.Item) -> Path:
    name = re.sub(r"[^\w.\-\[\]]+", "_", item.name)
    return item.path.parent / "cassettes" / item.path.stem / f"{name}.jsonl"


class SessionRecorder:
    """The session's one recorder: started by the first test that records, stopped at the end of
    the session. :meth:`mark` says how many round trips it has stored; a test's round trips are
    those between its two marks (tests in one process run one after another)."""

    def __init__(self, upstreams: dict[str, str], confdir: Path, python: str | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="looptap-session-"))
        from cassettes.replay.testing.recording import RecorderProcess, SessionCassette

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


def _session_recorder(
    config: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> SessionRecorder:
    """The running session recorder, started now if there is none (or the last one died)."""
    rec = config.stash.get(_RECORDER, None)
    if rec is not None and rec.running:
        return rec
    if rec is not None:
        rec.stop()
    from cassettes.replay.testing.recording import recorder_python

    # LOOPTAP_PROXY_PYTHON relative to where pytest was started, whatever directory a test is in
    # now; a path that names nothing is said as missing (RecorderUnavailable) before anything
    # starts.
    python = recorder_python(config.invocation_params.dir)
    rec = SessionRecorder(
        _upstreams(config), tmp_path_factory.getbasetemp() / "looptap-mitmproxy-conf", python
    )
    config.stash[_RECORDER] = rec
    try:
        rec.start()
    except BaseException:
        rec.stop()
        del config.stash[_RECORDER]
        raise
    return rec


def pytest_unconfigure(config: pytest.Config) -> None:
    rec = config.stash.get(_RECORDER, None)
    if rec is not None:
        rec.stop()


@dataclass
class LooptapSession:
    """What the ``looptap`` fixture gives a test."""

    mode: str
    #: The cassette this test replays or records.
    path: Path
    server: ReplayServer | None = None
    #: The session's recorder while this test records, and how many round trips it had stored
    #: when the test began.
    recorder: SessionRecorder | None = None
    start_mark: int = 0
    #: Where this test's recorded round trips go before the cassette is put in place.
    recording: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: The faults injected into this replay (marker ``fault=``); ``faults_fired`` says which fired.
    faults: FaultPlan | None = None
    _run: Run | None = None

    @property
    def faults_fired(self) -> list[tuple[int, int | None, str]]:
        """(request number, recorded seq, fault) of every fault injected so far."""
        return list(self.faults.fired) if self.faults is not None else []

    @property
    def replaying(self) -> bool:
        return self.server is not None

    @property
    def url(self) -> str | None:
        """Where to point a client that does not read the base-URL variables: the replay server
        (it answers every API family at its own paths) or, when only recording, the recorder's
        first listener (every listener: :attr:`base_urls`)."""
        if self.server is not None:
            return self.server.url
        return next(iter(self.base_urls.values()), None)

    @property
    def base_urls(self) -> dict[str, str]:
        """The base-URL variables this test's environment got (``OPENAI_BASE_URL`` …)."""
        return {k: v for k, v in self.env.items() if k.endswith("_BASE_URL") or k.endswith("_HOST")}

    @property
    def run(self) -> Run:
        """The run so far: the requests the agent sent and the responses replayed (or, in
        ``new_episodes``, recorded now); when only recording, the recorded cassette (reading it
        ends the recording)."""
        from cassettes.reading.run import Run, open_run

        if self.server is not None:
            return Run(list(self.server.served))
        if self._run is None:
            self.finish_recording()
            src = (
                self.recording
                if self.recording is not None and self.recording.exists()
                else self.path
            )
            self._run = open_run(src, whole=True) if src.exists() else Run([])
        return self._run

    def finish_recording(self) -> None:
        """Cut this test's round trips out of the session's recording into :attr:`recording`."""
        rec, self.recorder = self.recorder, None
        if rec is None or self.recording is None:
            return
        end = rec.mark()
        mine = rec.between(self.start_mark, end)
        if mine:
            from cassettes.matching import here
            from cassettes.recording.pipeline import CassetteWriter

            # the agent runs in this process: its cwd and home are the run's (a replay elsewhere
            # tolerates them)
            with CassetteWriter(self.recording, meta=here()) as w:
                for ex in mine:
                    w.append(ex)

    def misses_text(self) -> str | None:
        if self.server is None or not self.server.misses:
            return None
        misses = self.server.misses
        head = f"replay miss at {misses[0].headline}"
        more = f" (and {len(misses) - 1} more unanswered requests)" if len(misses) > 1 else ""
        return f"{head}{more}\ncassette: {self.path}\n" + "\n\n".join(str(m) for m in misses)

    def unplayed_text(self) -> str | None:
        if self.server is None:
            return None
        left = self.server.unplayed()
        if not left:
            return None
        n = len(left)
        lines = [
            f"looptap: {n} recorded round trip{'s' if n != 1 else ''} of {self.path} "
            f"{'were' if n != 1 else 'was'} not played (the test asked for every one: "
            "fail_unplayed):"
        ]
        lines += [f"  {r.label}: {r.key.method} {r.key.target}" for r in left]
        return "\n".join(lines)


def _api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A placeholder key for each API whose SDK refuses to start without one (replay only)."""
    from cassettes import providers
    for fam in providers.FAMILIES:
        adapter = providers.by_family(fam)
        names = adapter.profile.api_key_env if adapter is not None else ()
        if names and not any(os.environ.get(n) for n in names):
            monkeypatch.setenv(names[0], _PLACEHOLDER_KEY)


def _fault_plan(marker: pytest.Mark | None) -> FaultPlan | None:
    """The marker's ``fault=`` (one spec or a list) and ``fault_seed=``, read."""
    given = marker.kwargs.get("fault") if marker is not None else None
    if not given:
        return None
    from cassettes.replay.serving.faults import FaultPlan, FaultSpecError, parse_fault

    specs = [given] if isinstance(given, str) else list(given)
    try:
        return FaultPlan(
            [parse_fault(str(f)) for f in specs],
            seed=int(marker.kwargs.get("fault_seed", 0)) if marker is not None else 0,
        )
    except (FaultSpecError, ValueError) as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None


def _fork_cursor(marker: pytest.Mark | None, base: Path | None = None) -> Any:
    """The marker's ``fork=`` cursor, with ``live=`` ({API name: base URL}), ``model=`` and
    ``edit=`` (one ``TARGET=@FILE``/``TARGET=text`` or a list; a file relative to ``base``, the
    test's directory): the options of ``looptap run --from`` (docs/fork.md). A value that cannot
    be used fails the test in one line, before the replay starts."""
    kw = marker.kwargs if marker is not None else {}
    given = kw.get("fork")
    if not given:
        if (
            kw.get("model") is not None
            or kw.get("edit")
            or kw.get("live")
            or kw.get("prefix") is not None
        ):
            pytest.fail(
                "looptap: model=, edit=, live= and prefix= go with "
                "fork='turn=N' (where the cassette goes live)",
                pytrace=False,
            )
        return None
    from cassettes.replay.forking.cursor import Cursor, CursorError, live_router, parse_cursor
    from cassettes.replay.live.edits import EditError, parse_edit

    live, model, edits, prefix = _fork_options(kw)
    try:
        spec = parse_cursor(given)
        parsed = [parse_edit(str(e), base) for e in ([edits] if isinstance(edits, str) else edits)]
    except (CursorError, EditError) as exc:
        pytest.fail(f"looptap: {exc}", pytrace=False)
    for e in parsed:
        if e.selector is not None and e.selector != spec.text:
            pytest.fail(
                f"looptap: edit {e.spec[:60]!r}: an edit applies from the fork's cursor "
                f"({spec.text}) on; its selector, if given, is the cursor's",
                pytrace=False,
            )
    return Cursor(
        spec,
        live_router({str(k).lower(): str(v).rstrip("/") for k, v in live.items()}),
        model=model,
        edits=parsed,
        prefix=prefix,
    )


def _fork_options(
    kw: Mapping[str, Any],
) -> tuple[dict[Any, Any], str | None, str | list[Any] | tuple[Any, ...], str]:
    """The marker's ``live=``, ``model=``, ``edit=`` and ``prefix=`` beside its ``fork=``, each
    checked: a value that cannot be used fails the test in one line."""
    live = kw.get("live") or {}
    if (
        not isinstance(live, dict)
        or not live
        or not all(
            isinstance(v, str) and v.startswith(("http://", "https://")) for v in live.values()
        )
    ):
        pytest.fail(
            "looptap: fork= needs live={NAME: 'http(s)://host[:port]'} (NAME as --looptap-upstream "
            "names an API: where requests past the cursor go)",
            pytrace=False,
        )
    model = kw.get("model")
    edits = kw.get("edit") or []
    prefix = kw.get("prefix") or "strict"
    if prefix not in ("strict", "tolerant"):
        pytest.fail(
            f"looptap: prefix= is 'strict' (the default) or 'tolerant', not {str(prefix)[:40]!r}",
            pytrace=False,
        )
    if (
        not isinstance(kw.get("fork"), str)
        or (model is not None and not isinstance(model, str))
        or not isinstance(edits, (str, list, tuple))
    ):
        pytest.fail(
            "looptap: fork= is a cursor such as 'turn=1', model= a model name, edit= "
            "'TARGET=@FILE' or a list of them",
            pytrace=False,
        )
    return live, model, edits, str(prefix)


def _upstreams(config: pytest.Config) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in config.getoption("--looptap-upstream") or []:
        name, sep, url = str(item).partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise pytest.UsageError(
                f"looptap: --looptap-upstream wants NAME=http(s)://host[:port], got {item!r}"
            )
        out[name.strip().lower()] = url.strip()
    return out


def _listener_fallback(recorder_env: dict[str, str]) -> Any:
    """new_episodes: a request the cassette lacks goes to the recorder's listener for its API (the
    fork's router: a listener is named after the vendor, and its families share the prefix)."""
    from urllib.parse import urlsplit

    from cassettes.replay.forking.cursor import live_router

    bases: dict[str, str] = {}
    from cassettes import providers
    for name, (_upstream, variables, _suffix) in providers.REVERSE_UPSTREAMS.items():
        for var in variables:
            if var in recorder_env:
                u = urlsplit(recorder_env[var])
                bases[name] = f"{u.scheme}://{u.netloc}"
                break
    return live_router(bases)


@pytest.fixture
def looptap(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LooptapSession]:
    """Replay (or record) this test's LLM traffic; see the module docstring."""
    item = request.node
    config = request.config
    marker = item.get_closest_marker("looptap")
    opts = _Options.of(item, config, marker)
    session = LooptapSession(mode=opts.mode, path=opts.path, faults=opts.plan)
    try:
        if opts.record:
            _start_recording(session, config, tmp_path_factory)
        if opts.replay:
            _start_replay(session, opts, monkeypatch)
    except BaseException:
        session.recorder = None
        if session.recording is not None:
            shutil.rmtree(session.recording.parent, ignore_errors=True)
        raise
    for k, v in session.env.items():
        monkeypatch.setenv(k, v)
    item.stash[_SESSION] = session
    try:
        yield session
    finally:
        _teardown(session, config, item.nodeid)


@dataclass
class _Options:
    """What the marker and the command line ask of one test's cassette."""

    mode: str
    path: Path
    pace: str
    strict: bool
    plan: Any
    replay: bool
    record: bool
    #: ``fork=``: the cursor past which requests go live (``None``: all replayed).
    cursor: Any = None
    #: Volatile spans tolerated when matching (marker ``volatile=``, else ``--looptap-no-volatile``,
    #: else the ini).
    volatile: bool = True
    #: The user rules (the project's file, the ini's, the marker's: :func:`_rules`).
    rules: Any = None

    @classmethod
    def of(cls, item: pytest.Item, config: pytest.Config, marker: pytest.Mark | None) -> _Options:
        kw = marker.kwargs if marker else {}
        mode = _record_mode(config, marker)
        given = (marker.args[0] if marker and marker.args else None) or kw.get("path")
        path = (item.path.parent / given) if given else _default_path(item)
        pace = _pace(kw, config)
        strict = bool(kw.get("strict") or config.getoption("--looptap-strict"))
        plan = _fault_plan(marker)
        exists = path.exists() and path.stat().st_size > 0
        if mode == "none" and not exists:
            pytest.fail(
                f"looptap: no cassette at {path} and the record mode is 'none'; record it with "
                "--looptap-record-mode=once",
                pytrace=False,
            )
        replay = exists and mode in ("none", "once", "new_episodes")
        record = mode == "all" or (mode == "once" and not exists) or mode == "new_episodes"
        if plan is not None and not replay:
            pytest.fail(
                f"looptap: faults are injected into a replayed run, and {path} is being recorded "
                f"(mode {mode}); record it first",
                pytrace=False,
            )
        if record:
            _check_recordable(path, mode)
        rules = _rules(kw, config, path)
        return cls(
            mode,
            path,
            pace,
            strict,
            plan,
            replay,
            record,
            _fork_cursor(marker, item.path.parent),
            _volatile(kw, config, rules.volatile),
            rules,
        )


def _volatile(kw: Mapping[str, Any], config: pytest.Config, table: bool | None = None) -> bool:
    """Whether the replay tolerates volatile spans: the marker's ``volatile=`` if given, else
    off with ``--looptap-no-volatile``, else the ``looptap_volatile`` ini value (on by default),
    else the project's ``[tool.looptap] volatile``."""
    if kw.get("volatile") is not None:
        return bool(kw["volatile"])
    if config.getoption("--looptap-no-volatile"):
        return False
    return bool(config.getini("looptap_volatile")) and table is not False


def _ini_rules(config: pytest.Config) -> None:
    """The ini's rules and the project's file (found from the rootdir), checked at start-up."""
    from cassettes.matching import RuleError, project_rules

    try:
        project_rules(
            Path(str(config.rootpath)) / "_",
            config.getini("looptap_ignore"),
            config.getini("looptap_substitute"),
            config.getini("looptap_volatile_tools"),
            "pytest's ini",
        )
    except RuleError as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None


def _rules(kw: Mapping[str, Any], config: pytest.Config, cassette: Path) -> Any:
    """The rules of one test: the project's file for its cassette, the ini's and the marker's
    ``ignore=``, ``substitute=`` and ``volatile_tools=`` (each one string or a list)."""
    from cassettes.matching import RuleError, project_rules

    def listed(name: str) -> list[str]:
        v = kw.get(name)
        return [] if v is None else [v] if isinstance(v, str) else [str(x) for x in v]

    why = None
    try:
        return project_rules(
            cassette,
            [*config.getini("looptap_ignore"), *listed("ignore")],
            [*config.getini("looptap_substitute"), *listed("substitute")],
            [*config.getini("looptap_volatile_tools"), *listed("volatile_tools")],
            "pytest's ini and marker",
        )
    except (RuleError, TypeError) as exc:
        why = str(exc)
    pytest.fail(f"looptap: {why}", pytrace=False)


def _pace(kw: Mapping[str, Any], config: pytest.Config) -> str:
    """The replay pace the marker or the command line asks for (``instant`` by default), checked."""
    from cassettes.replay.serving.server import parse_pace

    pace: str = kw.get("pace") or config.getoption("--looptap-pace") or "instant"
    try:
        parse_pace(pace)
    except ValueError as exc:
        raise pytest.UsageError(f"looptap: {exc}") from None
    return pace


def _check_recordable(path: Path, mode: str) -> None:
    """Checked before the test runs: only a cassette (or nothing) is written over."""
    from cassettes.storage.paths import UnsafePath, check_target
    from cassettes.storage.store import is_cassette

    refused = None
    try:
        check_target(
            path,
            "the test's cassette",
            owned=is_cassette,
            hint="give the marker another path",
            parents=True,
        )
    except UnsafePath as exc:
        refused = str(exc)
    if refused is not None:
        pytest.fail(f"looptap: cannot record (mode {mode}): {refused}", pytrace=False)


def _start_recording(
    session: LooptapSession, config: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> None:
    why = None
    try:
        recorder = _session_recorder(config, tmp_path_factory)
        session.start_mark = recorder.mark()
    except CassetteError as exc:
        why = str(exc)
    if why is not None:  # outside the handler: the failure is this one line, not a chain of two
        pytest.fail(
            f"looptap: cannot record {session.path} (mode {session.mode}): {why}", pytrace=False
        )
    session.recorder = recorder
    session.env = dict(recorder.env)
    # removed by _teardown
    session.recording = Path(tempfile.mkdtemp(prefix="looptap-rec-")) / "recording.jsonl"


def _start_replay(session: LooptapSession, opts: _Options, monkeypatch: pytest.MonkeyPatch) -> None:
    from cassettes.replay.serving.server import ReplayServer

    fallback = _listener_fallback(session.env) if opts.record else None
    # taken before the test's environment is set: a fork's live requests keep the real store
    trust = None if opts.record else _replaced_trust(os.environ)
    try:
        session.server = ReplayServer(
            opts.path,
            pace=opts.pace,
            strict=opts.strict,
            fallback=fallback,
            faults=opts.plan,
            cursor=opts.cursor,
            volatile=opts.volatile,
            rules=opts.rules,
            trust=trust,
        ).start()
    except CassetteError as exc:  # a cursor that selects nothing in the cassette
        pytest.fail(f"looptap: {exc}", pytrace=False)
    session.env = {**session.server.env}
    url = session.server.url
    # Fail closed for clients that ignore the base URL and honour a proxy: the replay
    # server refuses CONNECT, so nothing reaches a real API.
    no_proxy = ",".join(
        dict.fromkeys(
            [*(v for v in os.environ.get("NO_PROXY", "").split(",") if v), "127.0.0.1", "localhost"]
        )
    )
    session.env.update(
        HTTPS_PROXY=url,
        HTTP_PROXY=url,
        https_proxy=url,
        http_proxy=url,
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
    )
    if trust is not None:
        # ... and for those that ignore the proxy too: TLS to any host fails verification. The
        # SDKs' HTTP clients load this one certificate instead of the whole CA bundle, for each
        # transport they make (httpx makes one per proxy variable): most of a replayed test's cost.
        session.env.update(SSL_CERT_FILE=str(NO_HOST_CA), SSL_CERT_DIR=str(NO_HOST_CA.parent))
    _api_keys(monkeypatch)


#: The CA store of a replayed test: one self-signed CA certificate whose private key was never
#: kept (made once with ``openssl req -x509 -keyout /dev/null``), so it vouches for no host.
NO_HOST_CA = Path(__file__).parent / "trust" / "replay-ca.pem"


def _replaced_trust(env: Mapping[str, str]) -> Trust | None:
    """The store a replayed test's TLS would verify against (a
    :class:`~cassettes.net.Trust`), when it is to be replaced by :data:`NO_HOST_CA`;
    ``None`` when it is left alone: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` name a store of the
    user's own (not OpenSSL's default file or directory), or ``NO_PROXY`` names a host that is
    not loopback (reached directly, over TLS verified as usual)."""
    import ssl

    from cassettes.net import Trust

    paths = ssl.get_default_verify_paths()
    for var, default in (
        ("SSL_CERT_FILE", paths.openssl_cafile),
        ("SSL_CERT_DIR", paths.openssl_capath),
    ):
        given = env.get(var)
        if given and os.path.realpath(given) != os.path.realpath(default):
            return None
    if any(
        not _loopback(h)
        for var in ("NO_PROXY", "no_proxy")
        for h in env.get(var, "").split(",")
        if h.strip()
    ):
        return None
    return Trust.now()


def _loopback(entry: str) -> bool:
    """A ``NO_PROXY`` entry (a host, ``.domain``, ``host:port``, an address or a CIDR block) that
    names only this machine."""
    import ipaddress

    host = entry.strip().lower().lstrip(".").partition("/")[0]
    host = (
        host[1:].partition("]")[0]
        if host.startswith("[")
        else host.partition(":")[0]
        if host.count(":") == 1
        else host
    )
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _teardown(session: LooptapSession, config: pytest.Config, nodeid: str) -> None:
    reports = config.stash.get(_REPORTS, [])
    if session.server is not None:
        session.server.stop()
        reports.extend(
            f"{nodeid}: {line.removeprefix('looptap ')}" for line in _summary_lines(session)
        )
    rec = session.recording
    try:
        session.finish_recording()
        if rec is not None and rec.exists():
            _store_recording(session, rec, reports, nodeid)
    except CassetteError as exc:
        pytest.fail(
            f"looptap: could not store the round trips recorded for {session.path}: {exc}",
            pytrace=False,
        )
    finally:
        if rec is not None:  # a test that recorded nothing leaves its directory empty: removed too
            shutil.rmtree(rec.parent, ignore_errors=True)


def _store_recording(session: LooptapSession, rec: Path, reports: list[str], nodeid: str) -> None:
    """This test's recording put into its cassette (appended in ``new_episodes``). Raises
    :class:`CassetteError`."""
    from cassettes.hints import count
    from cassettes.reading.run import open_run
    from cassettes.recording.pipeline import CassetteWriter

    new = open_run(rec, whole=True).exchanges
    if not new:
        return
    session.path.parent.mkdir(parents=True, exist_ok=True)
    if session.server is not None:  # new_episodes: append what was recorded now
        with CassetteWriter(session.path) as w:
            for ex in new:
                w.append(ex)
        reports.append(
            f"{nodeid}: recorded {count(len(new), 'new round trip')} into {session.path}"
        )
    else:
        _place_recording(rec, session.path)
        reports.append(f"{nodeid}: recorded {count(len(new), 'round trip')} into {session.path}")


def _place_recording(rec: Path, path: Path) -> None:
    """The test's recording copied to its cassette: checked again (a cassette, or nothing, is
    replaced; never through a link), written under a private name beside it and put in place
    whole (storage/paths.py). Raises :class:`CassetteError`."""
    from cassettes.storage.paths import check_target, staged
    from cassettes.storage.store import is_cassette, open_regular

    target = check_target(
        path, "the test's cassette", owned=is_cassette, hint="give the marker another path"
    )
    with open_regular(rec) as src, staged(target) as s:
        shutil.copyfileobj(src, s.file)


@pytest.fixture(autouse=True)
def _looptap_marker(request: pytest.FixtureRequest) -> None:
    """The ``looptap`` marker implies the fixture."""
    if (
        request.node.get_closest_marker("looptap") is not None
        and "looptap" not in request.fixturenames
    ):
        request.getfixturevalue("looptap")


def _fail_unplayed(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("looptap")
    if marker is not None and marker.kwargs.get("fail_unplayed") is not None:
        return bool(marker.kwargs["fail_unplayed"])
    return bool(
        item.config.getoption("--looptap-fail-unplayed")
        or item.config.getini("looptap_fail_unplayed")
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A replay miss fails the test with its explanation, even if the agent swallowed the error."""
    try:
        result = yield
    except BaseException as exc:
        session = item.stash.get(_SESSION, None)
        text = session.misses_text() if session is not None else None
        if text is not None and not isinstance(exc, ReplayMiss):
            item.stash[_CAUSE] = exc
            raise ReplayMiss(text) from exc
        raise
    session = item.stash.get(_SESSION, None)
    if session is not None:
        text = session.misses_text()
        if text is not None:
            item.stash[_CAUSE] = None
            raise ReplayMiss(text)
        if _fail_unplayed(item):
            left = session.unplayed_text()
            if left is not None:
                pytest.fail(left, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test failed by a replay miss is reported by :func:`failure_text`: what diverged, once,
    and where the test made the request, without the SDK's frames. A replayed test that failed
    (by a miss or otherwise) gets a web page of its run; the failure says where."""
    report = yield
    session = item.stash.get(_SESSION, None)
    if (
        call.when == "call"
        and report.failed
        and session is not None
        and _CAUSE in item.stash
        and call.excinfo is not None
        and call.excinfo.errisinstance(ReplayMiss)
    ):
        text = failure_text(session, item.stash[_CAUSE], item.config.rootpath)
        if text is not None:
            # pytest's longrepr protocol: toterminal, reprcrash
            report.longrepr = _Explained(text, str(item.path), item.location[1] or 0)  # type: ignore[assignment]
    if (
        report.when == "call"
        and report.failed
        and session is not None
        and session.server is not None
    ):
        report.sections.append(("looptap", _write_html_report(item, session)))
        from cassettes.replay.forking.cursor import Cursor

        cursor = session.server.router
        if isinstance(cursor, Cursor):  # a forked test: which turns went live, on which model
            from cassettes.untrusted import clean_line

            report.sections.append(
                ("looptap fork", "\n".join(clean_line(ln) for ln in cursor.report_lines()))
            )
    if (
        report.when == "call"
        and session is not None
        and session.server is not None
        and session.server.matcher.tolerated
    ):
        report.sections.append(("looptap tolerated", _tolerated_text(session.server.matcher)))
    return report


def _tolerated_text(matcher: Any) -> str:
    """Every difference the replay tolerated, by recorded turn, with what tolerated it (a volatile
    span's detector, a rule, a changed tool result in a fork's tolerant prefix): in the test's
    report (shown with a failure, and with ``-rP`` for a test that passed)."""
    from cassettes.hints import count
    from cassettes.matching import report_lines, turn_entries
    from cassettes.untrusted import clean_line

    lines = report_lines(turn_entries(matcher), "")
    head = (
        f"{count(len(matcher.tolerated), 'recorded round trip')} answered a request that differed "
        "only in what was tolerated:"
    )
    return "\n".join(clean_line(ln) for ln in [head, *lines])


class _Crash:
    """What pytest's short summary reads of a failure (``reprcrash``)."""

    def __init__(self, message: str, path: str, lineno: int) -> None:
        self.message, self.path, self.lineno = message, path, lineno


class _Explained:
    """A failure's report as plain lines (pytest's ``longrepr`` protocol)."""

    def __init__(self, text: str, path: str, lineno: int) -> None:
        self.text = text
        self.reprcrash = _Crash(text.splitlines()[0], path, lineno)

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line, red=line.startswith("ReplayMiss"))

    def __str__(self) -> str:
        return self.text


#: Frames of these trees are never shown in a failure: the SDKs', pytest's and looptap's own.
_HIDDEN = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")
_MOST_FRAMES = 6


def _test_frames(exc: BaseException | None, root: Path) -> list[str]:
    """The test's own frames that led to ``exc`` (under pytest's root, outside every installed
    package and looptap), two lines each, the innermost last; at most :data:`_MOST_FRAMES`."""
    import linecache
    import traceback

    if exc is None:
        return []
    package = str(Path(__file__).resolve().parents[1])
    out: list[str] = []
    for fs in traceback.extract_tb(exc.__traceback__):
        path = fs.filename
        if (
            any(h in path for h in _HIDDEN)
            or path.startswith(package)
            or not path.startswith(str(root))
        ):
            continue
        code = (fs.line or linecache.getline(path, fs.lineno or 0)).strip()
        out.append(f"  {os.path.relpath(path, root)}:{fs.lineno}: in {fs.name}")
        if code:
            out.append(f"      {code[:160]}")
    return out[-2 * _MOST_FRAMES:]


def failure_text(session: LooptapSession, cause: BaseException | None, root: Path) -> str | None:
    """The failure message of a test that a replay miss failed, said once: the first miss (where:
    conversation, turn and seq; the layer's verdict; the JSON paths, recorded vs got), the other
    misses in a line each, where the test made the request and what the agent got instead. One
    function, so other reports can add their lines to it."""
    if session.server is None or not session.server.misses:
        return None
    misses = session.server.misses
    first = misses[0]
    lines = [f"ReplayMiss: replay miss at {first.headline}", f"cassette: {session.path}"]
    body = first.lines()
    lines.append("  " + body[0].removeprefix("looptap replay: "))
    verdicts = {f"  {v}" for v in first.verdicts[:1]}
    lines += [f"  {ln}" for ln in body[1:] if ln not in verdicts]
    if len(misses) > 1:
        lines.append(
            f"and {len(misses) - 1} more unanswered request{'s' if len(misses) > 2 else ''}:"
        )
        lines += [f"  {m.headline}" for m in misses[1:4]]
        if len(misses) > 4:
            lines.append(f"  … and {len(misses) - 4} more (the terminal summary lists them)")
    frames = _test_frames(cause, root)
    if frames:
        lines.append("where the test made the request:")
        lines += frames
    if cause is None:
        lines.append(
            "the agent caught the error looptap's replay answered with; the test failed on the miss"
        )
    elif not isinstance(cause, AssertionError):
        from cassettes.untrusted import clean_line

        first_line = str(cause).splitlines()[0] if str(cause) else ""
        said, ours, _ = first_line.partition("looptap replay:")
        said = clean_line(
            f"{type(cause).__module__}.{type(cause).__qualname__}: {said.rstrip(' -:')}"
        )[:200]
        lines.append(
            f"the agent got: {said}"
            + (" (looptap's answer to the unmatched request)" if ours else "")
        )
    return "\n".join(lines)


def _summary_lines(session: LooptapSession) -> list[str]:
    """The replay server's report for the terminal summary, a request answered by an injected
    fault that still carries the recorded answer (cut, slowed, rewritten) counted as played, and
    the faults injected, each with the recorded turn it hit."""
    server = session.server
    assert server is not None
    lines = server.report_lines()
    fired = session.faults.fired if session.faults is not None else []
    if not fired:
        return lines
    from cassettes.replay.serving.faults import STATUS_KINDS, parse_fault

    by_seq = {r.seq: r for r in server.matcher.recorded}
    answered = {r.seq for r in server.matcher.played()}
    for _n, seq, text in fired:
        if seq is not None and parse_fault(text).kind not in (*STATUS_KINDS, "reset"):
            answered.add(seq)
    lines[0] = re.sub(r"played [\d,]+ of", f"played {len(answered):,} of", lines[0], count=1)
    faulted = {
        f"  unplayed: {by_seq[seq].label}:"
        for seq in answered - {r.seq for r in server.matcher.played()}
        if seq in by_seq
    }
    # answered, by the fault
    lines = [ln for ln in lines if not any(ln.startswith(f) for f in faulted)]
    lines.append(f"  faults injected: {len(fired)}")
    for n, seq, text in fired[:20]:
        where = by_seq[seq].label if seq in by_seq else f"seq {seq}"
        lines.append(f"    request {n}: {text} at {where}")
    if len(fired) > 20:
        lines.append(f"    … and {len(fired) - 20} more")
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = config.stash.get(_REPORTS, [])
    if reports:
        terminalreporter.section("looptap")
        for line in reports:
            terminalreporter.write_line(line)


def _reports_folder(config: pytest.Config) -> Path:
    """Where the session's web reports go: pytest's cache directory, or without the cache (``-p
    no:cacheprovider``) one temporary directory for the whole session, made at its first report."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("looptap-reports"))
    folder = config.stash.get(_REPORTS_DIR, None)
    if folder is None or not folder.is_dir():
        folder = config.stash[_REPORTS_DIR] = Path(tempfile.mkdtemp(prefix="looptap-reports-"))
    return folder


def _write_html_report(item: pytest.Item, session: LooptapSession) -> str:
    """A failed replayed test's run as a web page (``looptap export --html``), under pytest's cache
    directory (``.pytest_cache/d/looptap-reports/``): the line the failure shows. Never fails the
    test itself: a page that cannot be written says why instead."""
    try:
        from cassettes.views.htmlpage import HtmlExtraMissing, render_html
        from cassettes.views.report import report_data

        run = session.run
        run.name = f"{item.nodeid} ({session.path.name})"  # the page's title
        try:
            page = render_html(report_data(run))
        except HtmlExtraMissing as exc:
            return f"looptap: no web page of this run: {exc}"
        folder = _reports_folder(item.config)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[-150:] or "test"
        from cassettes.storage.paths import check_target, staged

        path = folder / f"{name}.html"
        with staged(check_target(path, "the test's web report", force=True)) as s:
            s.file.write(page.encode())
        line = (
            f"looptap: the run as a web page: {path}  ({len(run.exchanges)} "
            "round trips; open it in a browser)"
        )
    except Exception as exc:  # a report is a help, never a second failure
        return f"looptap: could not write a web page of this run: {type(exc).__name__}: {exc}"
    return line + _write_failed_run(session, folder / f"{name}.jsonl")


def _write_failed_run(session: LooptapSession, path: Path) -> str:
    """What the agent sent in a failed replayed test (with the answers it got, misses included),
    as a cassette beside its web page, redacted as every cassette is: the evidence
    ``looptap rules propose`` reads against the recorded cassette. Never fails the test."""
    if session.server is None or not session.server.misses:
        return ""
    try:
        session.server.keep_sent(path)
        return (
            f"\nlooptap: what this test sent: {path}; rules that would make it match, if what "
            f"differs is volatile: looptap rules propose {session.path} {path}"
        )
    except Exception as exc:  # a help, never a second failure
        return f"\nlooptap: could not keep what this test sent: {type(exc).__name__}: {exc}"

