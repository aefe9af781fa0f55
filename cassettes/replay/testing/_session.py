"""The machinery of a test that uses looptap, loaded by the first one (the plugin's hooks,
:mod:`cassettes.replay.testing.plugin`, load in every pytest session and stay small): from what
the test asks (:mod:`cassettes.replay.testing._options`), its replay server, or its share of the
session's recorder, the environment the test gets, and what is kept at its end.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ...errors import CassetteError
from ...hints import count
from ...matching import here
from ...net import Trust
from ...reading import Run, open_run
from ...recording import seal
from ...storage import LINE, check_target, is_cassette, open_regular, staged
from ..serving.agent_env import placeholder_keys, tool_proxy_env
from ..serving.faults import FaultPlan
from ..serving.server import ReplayServer
from ._keys import RECORDER, REPORTS
from ._options import Options, upstreams
from ._report import add_sections, failure_text, summary_lines

if TYPE_CHECKING:
    from ...wire import Exchange
    from .recorder import SessionRecorder

__all__ = [
    "NO_HOST_CA",
    "LooptapSession",
    "add_sections",
    "end_session",
    "fail_unplayed",
    "failure_text",
    "looptap_session",
]


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
            # the agent runs in this process: its cwd and home are the run's (a replay elsewhere
            # tolerates them)
            _write(self.recording, mine, here())

    def unplayed_text(self) -> str | None:
        if self.server is None:
            return None
        left = self.server.unplayed_turns()
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


def looptap_session(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> LooptapSession:
    """The ``looptap`` fixture's start: this test's replay (or recording), its environment set;
    :func:`end_session` ends it."""
    item = request.node
    config = request.config
    marker = item.get_closest_marker("looptap")
    opts = Options.of(item, config, marker)
    session = LooptapSession(mode=opts.mode, path=opts.path, faults=opts.plan)
    try:
        if opts.record:
            _start_recording(session, config, tmp_path_factory)
        if opts.replay:
            _start_replay(session, opts, monkeypatch, config)
    except BaseException:
        session.recorder = None
        if session.recording is not None:
            shutil.rmtree(session.recording.parent, ignore_errors=True)
        raise
    for k, v in session.env.items():
        monkeypatch.setenv(k, v)
    return session


def _session_recorder(
    config: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> SessionRecorder:
    """The running session recorder, started now if there is none (or the last one died)."""
    rec = config.stash.get(RECORDER, None)
    if rec is not None and rec.running:
        return rec
    if rec is not None:
        rec.stop()
    from .recorder import SessionRecorder, recorder_python

    # LOOPTAP_PROXY_PYTHON relative to where pytest was started, whatever directory a test is in
    # now; a path that names nothing is said as missing (RecorderUnavailable) before anything
    # starts.
    python = recorder_python(config.invocation_params.dir)
    rec = SessionRecorder(
        upstreams(config), tmp_path_factory.getbasetemp() / "looptap-mitmproxy-conf", python
    )
    config.stash[RECORDER] = rec
    try:
        rec.start()
    except BaseException:
        rec.stop()
        del config.stash[RECORDER]
        raise
    return rec


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
    # removed by end_session
    session.recording = Path(tempfile.mkdtemp(prefix="looptap-rec-")) / "recording.jsonl"


def _listener_fallback(recorder_env: dict[str, str]) -> Any:
    """new_episodes: a request the cassette lacks goes to the recorder's listener for its API (the
    fork's router: a listener is named after the vendor, and its families share the prefix)."""
    from ..forking.cursor import live_router
    from ..live.upstreams import live_bases

    return live_router(live_bases(recorder_env))


def _start_replay(
    session: LooptapSession,
    opts: Options,
    monkeypatch: pytest.MonkeyPatch,
    config: pytest.Config,
) -> None:

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
        )
        session.server.start()
    except CassetteError as exc:  # a cursor that selects nothing in the cassette
        pytest.fail(f"looptap: {exc}", pytrace=False)
    session.env = {**session.server.env}
    # Fail closed for clients that ignore the base URL and honour a proxy: the replay server
    # refuses CONNECT, so nothing reaches a real API; and the tools' plain HTTP goes there too,
    # answered from the recording (the loopback as well when the recording's tools called it);
    # Node's fetch too (NODE_USE_ENV_PROXY, or the shim after the user's NODE_OPTIONS).
    session.env.update(
        tool_proxy_env(
            session.server.url,
            session.server.tool_hosts(),
            os.environ.get("NO_PROXY", ""),
            os.environ.get("NODE_OPTIONS", ""),
        )
    )
    if trust is not None:
        # ... and for those that ignore the proxy too: TLS to any host fails verification. The
        # SDKs' HTTP clients load this one certificate instead of the whole CA bundle, for each
        # transport they make (httpx makes one per proxy variable): most of a replayed test's cost.
        session.env.update(SSL_CERT_FILE=str(NO_HOST_CA), SSL_CERT_DIR=str(NO_HOST_CA.parent))
    # The tools' HTTPS hosts, served through CONNECT with a CA made for this replay: trusted
    # beside that store (or the user's own), only while the test runs.
    session.env.update(
        session.server.trust_env(os.environ, str(NO_HOST_CA) if trust is not None else None)
    )
    _api_keys(monkeypatch)


def _api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A placeholder key for each API whose SDK refuses to start without one (replay only)."""
    for name, value in placeholder_keys(os.environ).items():
        monkeypatch.setenv(name, value)


#: The CA store of a replayed test: one self-signed CA certificate whose private key was never
#: kept (made once with ``openssl req -x509 -keyout /dev/null``), so it vouches for no host.
NO_HOST_CA = Path(__file__).parent / "trust" / "replay-ca.pem"


def _replaced_trust(env: Mapping[str, str]) -> Trust | None:
    """The store a replayed test's TLS would verify against (a
    :class:`~cassettes.net.Trust`), when it is to be replaced by :data:`NO_HOST_CA`;
    ``None`` when it is left alone: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` name a store of the
    user's own (not OpenSSL's default file or directory), or ``NO_PROXY`` names a host that is
    not loopback (reached directly, over TLS verified as usual)."""
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


def end_session(session: LooptapSession, config: pytest.Config, nodeid: str) -> None:
    """The end of a test's session: its replay server stopped, its recording stored."""
    reports = config.stash.get(REPORTS, [])
    if session.server is not None:
        session.server.stop()
        reports.extend(
            f"{nodeid}: {line.removeprefix('looptap ')}" for line in summary_lines(session)
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
    new = open_run(rec, whole=True).exchanges
    if not new:
        return
    session.path.parent.mkdir(parents=True, exist_ok=True)
    if session.server is not None:  # new_episodes: append what was recorded now
        _write(session.path, new)
        reports.append(
            f"{nodeid}: recorded {count(len(new), 'new round trip')} into {session.path}"
        )
    else:
        _place_recording(rec, session.path)
        reports.append(f"{nodeid}: recorded {count(len(new), 'round trip')} into {session.path}")


def _write(path: Path, exchanges: Iterable[Exchange], meta: dict[str, Any] | None = None) -> None:
    """``exchanges`` written into the cassette at ``path`` (appended to one that exists; ``meta``
    in the header of one made now; the recording pipeline loads when a test records). Raises
    :class:`CassetteError`."""
    from ...recording.pipeline import CassetteWriter

    with CassetteWriter(path, meta=meta) as w:
        for ex in exchanges:
            w.append(ex)


def _place_recording(rec: Path, path: Path) -> None:
    """The test's recording copied to its cassette: checked again (a cassette, or nothing, is
    replaced; never through a link), written under a private name beside it and put in place
    whole (storage/_paths.py). Raises :class:`CassetteError`."""
    target = check_target(
        path, "the test's cassette", owned=is_cassette, hint="give the marker another path"
    )
    with open_regular(rec) as src, staged(target) as s:
        for line in iter(lambda: src.readline(LINE), b""):
            s.write(seal(line))


def fail_unplayed(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("looptap")
    if marker is not None and marker.kwargs.get("fail_unplayed") is not None:
        return bool(marker.kwargs["fail_unplayed"])
    return bool(
        item.config.getoption("--looptap-fail-unplayed")
        or item.config.getini("looptap_fail_unplayed")
    )
