"""The embedded recorder behind ``looptap record`` and ``looptap run``.

One minimal mitmproxy ``Master`` per process (core, proxyserver, next_layer, tlsconfig and the
looptap addon: measurably cheaper per request than ``DumpMaster``, MITMPROXY.md §4), listening on
127.0.0.1 only: a reverse listener per API (OpenAI, Anthropic, Gemini, and any ``--upstream``), and
a forward proxy with mitmproxy's CA for clients that only honour ``HTTPS_PROXY``. mitmproxy carries
every byte on every listener: looptap only watches (docs/recorder.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import ssl
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mitmproxy import exceptions, master, options
from mitmproxy.addons import core, next_layer, proxyserver, tlsconfig
from mitmproxy.proxy.mode_specs import ProxyMode

from ..cassettes import __version__
from ..cassettes.errors import CassetteIOError
from ..cassettes.net import free_port, node_options, shim_left_out
from ..cassettes.replay.testing.ready import SCHEMA as READY_SCHEMA
from ..cassettes.replay.testing.ready import VERSION as READY_VERSION
from ..cassettes.replay.testing.ready import (
    Ready,
    ReadyListener,
    bare_url,
    check_ready_path,
    clear_stale,
    remove_ready,
    write_ready,
)
from ..cassettes.storage import (
    FileId,
    UnsafePath,
    check_dir,
    check_target,
    open_regular,
    write_plain,
)
from . import messages
from .addon import LooptapRecorder
from .config import RECORDER_VAR, Listener, RecorderConfig, RecorderError
from .durable import DurableGate
from .trust import UPSTREAM_FILE, UpstreamTrust, agent_ca_paths, upstream_bundle
from .user_proxy import from_environ

__all__ = [
    "BusyPort",
    "Recorder",
    "free_port",
]


class BusyPort(OSError):
    """A listener could not bind its port."""


#: The forward proxy's variables, in the order they are exported.
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


#: How many times a listener whose port was taken meanwhile gets another one (see
#: :meth:`Recorder._listen_elsewhere`).
_REPICKS = 8


def _in_use(cause: BaseException | None) -> bool:
    """Whether a listener failed because its port was taken."""
    return (
        isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE
    ) or "already in use" in str(cause)


def _port_of(spec: str) -> int:
    """The port of a listener's mode spec (``reverse:URL@PORT``, ``regular@PORT``)."""
    return int(spec.rsplit("@", 1)[-1])


def _quiet_cancellations(loop: asyncio.AbstractEventLoop) -> None:
    """A client still connected when the recorder stops (every SDK keeps its connection alive):
    the end of the event loop cancels mitmproxy's task for that connection, and asyncio's stream
    callback, asking the cancelled task for its exception, reports the cancellation as 'Exception
    in callback' with a traceback on the user's terminal. A cancellation is how the stop works,
    not an error: it is left unsaid; anything else goes to the handler that was there."""
    before = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError):
            return
        if before is not None:
            before(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class _Ready:
    def __init__(self) -> None:
        self.event = asyncio.Event()

    def running(self) -> None:
        self.event.set()


def _ca_bundle(confdir: Path, environ: Mapping[str, str]) -> tuple[Path, Path]:
    """(bundle of the existing trust store + the CA files the agent's environment names +
    mitmproxy's CA, Node's extra-CA file). Extends the trust store a client already uses; never
    replaces it: a host the recorder passes through untouched (proxy/trust.py) is verified by the
    agent against what it trusted before."""
    ca = confdir / "mitmproxy-ca-cert.pem"
    ca_pem = ca.read_text() if ca.exists() else ""
    existing = (
        environ.get("SSL_CERT_FILE")
        or ssl.get_default_verify_paths().cafile
        or "/etc/ssl/certs/ca-certificates.crt"
    )
    base = Path(existing).read_text() if existing and Path(existing).is_file() else ""
    named = [p.read_text(errors="replace") for p in agent_ca_paths(environ)[0]
             if p != Path(existing) and p.name not in CONF_FILES]  # fmt: skip
    bundle = confdir / "looptap-ca-bundle.pem"
    _write_conf(bundle, "".join(t.rstrip("\n") + "\n" for t in (base, *named) if t) + ca_pem)
    node_existing = environ.get("NODE_EXTRA_CA_CERTS")
    node_base = (
        Path(node_existing).read_text() if node_existing and Path(node_existing).is_file() else ""
    )
    node = confdir / "looptap-node-extra-ca.pem"
    _write_conf(node, (node_base.rstrip("\n") + "\n" if node_base else "") + ca_pem)
    return bundle, node


#: The files looptap itself keeps in ``--confdir`` (beside mitmproxy's own).
CONF_FILES = ("looptap-ca-bundle.pem", "looptap-node-extra-ca.pem", UPSTREAM_FILE)
#: mitmproxy's files in ``--confdir`` read at start (by mitmproxy; the certificate by looptap too).
CA_FILES = tuple(f"{options.CONF_BASENAME}-{n}.pem" for n in ("ca", "ca-cert", "dhparam"))
#: Locked (``flock``) while a recorder creates mitmproxy's CA or rewrites looptap's files in
#: ``--confdir``: recorders that start at once on one confdir (two ``looptap run``, a recorder per
#: xdist worker, all on ``~/.mitmproxy``) take turns, instead of one finding a file the other is
#: writing (a start refused, or two CAs where clients trust only one).
CONF_LOCK = "looptap-confdir.lock"


@contextlib.contextmanager
def confdir_lock(confdir: Path) -> Iterator[None]:
    """Hold ``--confdir``'s lock (blocks while another recorder holds it). The lock file is a
    regular file of this user, never followed through a link."""
    path = confdir / CONF_LOCK
    try:
        fd = os.open(
            path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600
        )
    except OSError as exc:
        raise RecorderError(
            f"the --confdir lock {path} cannot be opened: {exc.strerror or exc}"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise RecorderError(
                f"the --confdir lock {path} is not a regular "
                "file of this user: looptap does not use it"
            )
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def prepare_confdir(
    confdir: Path, key_size: int = options.KEY_SIZE, environ: Mapping[str, str] | None = None
) -> tuple[Path, Path]:
    """mitmproxy's CA in ``confdir`` (created whole if missing) and looptap's CA bundles (see
    :func:`_ca_bundle`), under :func:`confdir_lock`: mitmproxy creates its CA file by file, and a
    recorder starting meanwhile would read it half written or make its own."""
    from mitmproxy.certs import CertStore

    with confdir_lock(confdir):
        if not (confdir / f"{options.CONF_BASENAME}-ca.pem").exists():
            CertStore.create_store(confdir, options.CONF_BASENAME, key_size)
        return _ca_bundle(confdir, os.environ if environ is None else environ)


def check_confdir(confdir: Path) -> None:
    """``--confdir`` checked before anything starts (storage/_paths.py): a directory of this user
    (created 0700 when missing), and looptap's files in it regular files (replaced whole each
    start), never a link, a directory or a device; mitmproxy's CA files, where they are, regular
    files (a FIFO there would hang the start). Raises :class:`RecorderError`."""
    try:
        check_dir(confdir, "--confdir")
        for name in CONF_FILES:
            check_target(confdir / name, "the CA bundle", owned=lambda _p: True)
        for name in CA_FILES:
            if os.path.lexists(confdir / name):
                open_regular(confdir / name).close()
    except (UnsafePath, CassetteIOError) as exc:
        raise RecorderError(str(exc)) from None


def _write_conf(path: Path, text: str) -> None:
    """One of looptap's files in ``--confdir``, replaced whole (a private temporary renamed over
    it: a link at its name is refused, never followed). Certificates only: readable by all."""
    try:
        write_plain(  # (certificates: nothing looptap saw)
            check_target(path, "the CA bundle", owned=lambda _p: True), text.encode(), mode=0o644
        )
    except UnsafePath as exc:
        raise RecorderError(str(exc)) from None


def _refused(listeners: Sequence[Listener]) -> str:
    """Why mitmproxy refuses a listener's mode, in one line."""
    for lst in listeners:
        try:
            ProxyMode.parse(lst.spec)
        except ValueError as exc:
            if not lst.upstream:
                return f"{lst.spec}: {exc}"
            # Not the URL as given: it may hold a password or a key.
            return (
                f"--upstream {lst.name}: {bare_url(lst.upstream)} is not an upstream mitmproxy "
                "takes: http(s)://host[:port], without a path, user or query"
            )
    return "its proxy modes were refused"


class Recorder:
    """The running proxy. Use inside a running event loop: ``await start()``, ``await stop()``."""

    def __init__(self, config: RecorderConfig) -> None:
        self.config = config
        self.listeners = config.listeners()
        self.addon = LooptapRecorder()
        self.master: master.Master | None = None
        self._task: asyncio.Task[None] | None = None
        self.env: dict[str, str] = {}
        #: The ready file this recorder wrote (device, inode): the only one it removes.
        self._ready_id: FileId | None = None
        #: The CA bundles for clients (``prepare_confdir``), written at start.
        self._bundles: tuple[Path, Path] = (Path(), Path())

    async def start(self) -> None:
        cfg = self.config
        check_confdir(cfg.confdir)
        _quiet_cancellations(asyncio.get_running_loop())
        environ = cfg.environ or os.environ
        opts = options.Options(
            mode=[lst.spec for lst in self.listeners],
            listen_host=cfg.host,
            confdir=str(cfg.confdir),
            ssl_insecure=cfg.ssl_insecure,
        )
        self._bundles = prepare_confdir(cfg.confdir, opts.key_size, environ)
        with confdir_lock(cfg.confdir):  # upstreams verified against what the agent trusts
            trusted = upstream_bundle(cfg.confdir, environ)
        if trusted is not None:
            opts.update(ssl_verify_upstream_trusted_ca=str(trusted))
        m = master.Master(opts)
        ready = _Ready()
        # the proxies the agent's environment names: the recorder forwards through them
        user_proxy = from_environ(environ)
        trust = UpstreamTrust(user_proxy.route, self._note)
        gate = [DurableGate()] if cfg.durable else []
        faults: list[Any] = []
        if cfg.faults:  # (it imports the matcher: for --fault only, bench/startup.py)
            from .faults import LiveFaults

            faults = [LiveFaults()]
        m.addons.add(
            core.Core(),
            proxyserver.Proxyserver(),
            next_layer.NextLayer(),
            tlsconfig.TlsConfig(),
            trust,
            user_proxy,
            *faults,
            self.addon,
            *gate,
            ready,
        )
        # Addon-owned options exist only once their addon is added. Opening the cassette and
        # starting its writer happen here (the addon's ``configure``).
        try:
            opts.update(
                connection_strategy="lazy",
                http3=False,
                looptap_output=str(cfg.output),
                looptap_record_hosts=list(cfg.record_hosts),
                looptap_tool_http=cfg.tool_http,
                looptap_tool_http_exclude=list(cfg.tool_http_exclude),
                looptap_redact_headers=list(cfg.redact_headers),
                looptap_redact_patterns=list(cfg.redact_patterns),
                looptap_flow_bodies=False,
                looptap_durable=cfg.durable,
                looptap_fsync=cfg.fsync,
                looptap_agent=cfg.agent or "",
                looptap_command=list(cfg.command),
            )
            if cfg.faults:
                opts.update(looptap_faults=list(cfg.faults), looptap_fault_seed=cfg.fault_seed)
        except exceptions.OptionsError as exc:
            raise RecorderError(str(exc).removeprefix("looptap_output: ")) from None
        self.addon.edit_key = cfg.edit_key
        self.master = m
        self._task = asyncio.create_task(m.run())
        try:
            await self._listening(m, self._task, ready, opts)
        except BaseException:
            # a refusal, or a Ctrl-C (``asyncio.run`` cancels this task) before the ready line:
            # nothing of this recorder is left running, its writer included
            await self.stop()
            raise
        self.env = self._environment()
        user_proxy.own_ports = frozenset(lst.port for lst in self.listeners)
        for lst in self.listeners:
            if lst.note:
                messages.emit(lst.note)
        for line in user_proxy.said():
            messages.emit(line)
        # What start-up made (mitmproxy's modules, options, addons: most of the process' objects)
        # lives as long as the recorder: out of the collector's sight, so that a full collection
        # walks only what the traffic made (a pause in the middle of a request otherwise).
        import gc

        gc.collect()
        gc.freeze()

    async def _listening(
        self, m: master.Master, task: asyncio.Task[None], ready: _Ready, opts: options.Options
    ) -> None:
        """Wait until mitmproxy runs and every listener listens; raises what stopped it, or
        :class:`RecorderError` (:class:`BusyPort`) saying which listener could not listen."""
        cfg = self.config
        done, _ = await asyncio.wait(
            {task, asyncio.create_task(ready.event.wait())},
            return_when=asyncio.FIRST_COMPLETED,
        )
        if task in done:
            task.result()  # raises what stopped the master
        ps = m.addons.get("proxyserver")
        if len(ps.servers) < len(self.listeners):
            # mitmproxy refused the modes (logged, not raised): nothing listens at all.
            raise RecorderError(f"mitmproxy cannot listen as asked: {_refused(self.listeners)}")
        failed = await self._listen_elsewhere(opts, ps)
        if failed:
            spec, cause = failed[0]
            why = "address already in use" if _in_use(cause) else str(cause)
            raise BusyPort(f"cannot listen on {cfg.host}:{_port_of(spec)}: {why}")

    def _note(self, record: dict[str, Any]) -> None:
        """A record beside the round trips (a host passed through: :mod:`proxy.trust`)."""
        self.addon.handoff.hand_over(record)

    async def _listen_elsewhere(
        self, opts: options.Options, ps: proxyserver.Proxyserver
    ) -> list[tuple[str, Exception | None]]:
        """The listeners that could not listen, as (mode spec, why). A port looptap chose itself
        (no ``--port``) was free when tested, but anyone may bind it before mitmproxy does (another
        recorder choosing at the same moment: seen in CI under load): such a listener gets another
        port, a few times, before the start is refused. A port the user named is never changed."""
        for attempt in range(_REPICKS + 1):
            failed = [(s.mode.full_spec, s.last_exception) for s in ps.servers if not s.is_running]
            if (
                not failed
                or attempt == _REPICKS
                or self.config.base_port
                or not all(_in_use(cause) for _, cause in failed)
            ):
                break
            busy = {_port_of(spec) for spec, _ in failed}  # the ports of one recorder are distinct
            given = {lst.port for lst in self.listeners}
            for lst in self.listeners:
                if lst.port in busy:
                    lst.port = free_port(given)
                    given.add(lst.port)
            opts.update(mode=[lst.spec for lst in self.listeners])
            # The update above queues the same change; whichever runs second finds nothing to do.
            await ps.servers.update([ProxyMode.parse(lst.spec) for lst in self.listeners])
        return failed

    def _client_host(self) -> str:
        """The host a local client connects to (in a URL)."""
        host = self.config.host
        if host in ("0.0.0.0", "::", ""):
            return "127.0.0.1"  # a wildcard bind is reached locally through loopback
        return f"[{host}]" if ":" in host else host

    def url(self, lst: Listener) -> str:
        """What a client is pointed at: a reverse listener's base URL, the forward proxy's URL."""
        return f"http://{self._client_host()}:{lst.port}{lst.suffix if lst.upstream else ''}"

    def exports(self, env: dict[str, str]) -> str:
        """One line saying the recorder is up and what the command gets (read from ``env``, the
        child's environment: a fork's replay server may stand in front): each API's base-URL
        variables and where they point, the proxy for other hosts, the CA bundle. Only looptap's own
        URLs and paths are said, never a value of the user's (a key)."""
        parts: list[str] = []
        for lst in self.listeners:
            if lst.upstream is None:
                parts.append(
                    f"other hosts through HTTPS_PROXY={env.get('HTTPS_PROXY', self.url(lst))} (its "
                    "CA in SSL_CERT_FILE)"
                )
            elif lst.env:
                names = ", ".join(lst.env)
                parts.append(f"{lst.name} {env.get(lst.env[0], self.url(lst))} ({names})")
        return f"recorder up, recording into {self.config.output}; the command gets " + "; ".join(
            parts
        )

    def _direct(self) -> list[str]:
        """What the command reaches without the proxy (``NO_PROXY``): with the tools' HTTP recorded
        on loopback (the default), only this recorder's own listeners, so that a tool server on
        loopback is recorded, each as ``HOST:PORT`` (read by requests for names, urllib, undici,
        Go) and ``http://HOST:PORT`` (httpx's form); a client that cannot exclude a port
        (aiohttp, curl, requests for an address) reaches a listener through the forward proxy,
        which lets it through (:meth:`proxy.tool_http.ToolHttp.let_through`). With
        ``--no-tool-http-loopback`` (or the tools' HTTP off), the loopback."""
        if not (self.config.tool_http and self.config.tool_http_loopback):
            return ["127.0.0.1", "localhost"]
        host = self._client_host()
        return [
            f"{scheme}{h}:{lst.port}"
            for lst in self.listeners
            if lst.upstream
            for h in (host, "localhost")
            for scheme in ("", "http://")
        ]

    def _environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for lst in self.listeners:
            if lst.upstream is None:
                proxy = self.url(lst)
                env.update(dict.fromkeys(_PROXY_VARS, proxy), NODE_USE_ENV_PROXY="1")
                given = os.environ.get("NODE_OPTIONS", "")
                shim = node_options(given)  # (Node < 22.21)
                env.update({"NODE_OPTIONS": shim} if shim else {})
                left_out = shim_left_out(given, "the recorder")
                if left_out:  # (the value itself never said: it is the user's)
                    messages.emit(left_out, logging.WARNING)
                no_proxy = [v for v in os.environ.get("NO_PROXY", "").split(",") if v]
                env["NO_PROXY"] = env["no_proxy"] = ",".join(
                    dict.fromkeys([*no_proxy, *self._direct()])
                )
            else:
                for var in lst.env:
                    env[var] = self.url(lst)
        env[RECORDER_VAR] = ",".join(
            f"{self._client_host()}:{lst.port}" for lst in self.listeners if lst.upstream
        )
        bundle, node = self._bundles
        env.update(
            SSL_CERT_FILE=str(bundle),
            REQUESTS_CA_BUNDLE=str(bundle),
            CURL_CA_BUNDLE=str(bundle),
            NODE_EXTRA_CA_CERTS=str(node),
        )
        return env

    def ready(self) -> Ready:
        """What the ready file says (cassettes/replay/testing/_ready.py): where this recorder
        listens and what a client needs; no secret (the environment is the export lines')."""
        forward = next(lst for lst in self.listeners if lst.upstream is None)
        return Ready(
            schema=READY_SCHEMA,
            version=READY_VERSION,
            looptap=__version__,
            pid=os.getpid(),
            cassette=str(self.config.output.resolve()),
            listen_host=self.config.host,
            listeners=[
                ReadyListener(
                    name=lst.name,
                    mode="reverse" if lst.upstream else "forward",
                    host=self.config.host,
                    port=lst.port,
                    url=self.url(lst),
                    upstream=bare_url(lst.upstream) if lst.upstream else None,
                    env=list(lst.env if lst.upstream else _PROXY_VARS),
                )
                for lst in self.listeners
            ],
            proxy_url=self.url(forward),
            ca_cert=str(self.config.confdir / "mitmproxy-ca-cert.pem"),
            env=dict(self.env),
        )

    def clear_stale_ready(self) -> None:
        """Check the ready file's path (refused as :class:`RecorderError` unless free or a ready
        file an earlier recorder left) and remove such a left-over one: it must not be read as
        this recorder's."""
        path = self.config.ready_file
        if path is None:
            return
        try:
            clear_stale(check_ready_path(path, cassette=self.config.output))
        except UnsafePath as exc:
            raise RecorderError(str(exc)) from None

    def write_ready(self) -> None:
        """Write the ready file, if one was asked for; a failure stops the start (whoever waits
        for the file would wait in vain)."""
        path = self.config.ready_file
        if path is None:
            return
        try:
            self._ready_id = write_ready(path, self.ready())
        except UnsafePath as exc:
            raise RecorderError(str(exc)) from None
        except OSError as exc:
            raise RecorderError(
                f"cannot write the ready file {path}: {exc.strerror or exc}"
            ) from None

    def remove_ready(self) -> None:
        """Remove the ready file this recorder wrote, and only while it is still that file."""
        if self.config.ready_file is not None:
            remove_ready(self.config.ready_file, self._ready_id)
            self._ready_id = None

    async def stop(self) -> None:
        """Flush every captured round trip to disk, close the listeners and stop."""
        m = self.master
        if m is None:
            return
        await asyncio.get_running_loop().run_in_executor(None, self.addon.handoff.flush)
        ps = m.addons.get("proxyserver")
        try:
            await ps.servers.update([])  # shutdown() alone leaves the ports open (MITMPROXY.md §1)
        except Exception:
            pass
        m.shutdown()
        if self._task is not None:
            try:
                await self._task
            except BaseException:
                pass
        # (mitmproxy's done hook closes it, unless stopped before its servers were up)
        self.addon.handoff.close()
        self.master = None
