"""The replay server: a loopback HTTP/1.1 server that answers an agent from a cassette.

Any agent uses it as its base URL (one port serves every API family; requests are routed by what
they are, not where they go). Recorded responses go out as they were recorded: headers, status,
and streams chunk for chunk (``Transfer-Encoding: chunked``, one HTTP chunk per recorded chunk,
flushed each), instantly, at the recorded pace or scaled (``x2`` is twice as fast).

**Fails closed.** A request no recorded round trip answers, or one that arrives after the cassette
is exhausted, never goes anywhere else: it gets an error in the API's own error shape (so the SDK
raises it with the message intact) saying which recorded turn is closest, what differs (JSON
paths) and which layer that implicates, and the miss is kept for the test that ran the agent.
``CONNECT`` (an agent that ignores the base URL and uses a proxy) is refused, but to a host the
recording's tools called: over HTTPS, the server answers as the tool's host would, through a
CA made for this replay (:mod:`._tls`; :meth:`ReplayServer.trust_env` makes the agent trust it);
over plain HTTP (or to the server's own address), a tunnel whose requests are served as sent to
that host (Node's undici tunnels plain HTTP through a proxy).

**Errors once.** A recorded error response is played once, with the header that stops the SDK's
retries, unless the recording itself shows the SDK retrying (the same request recorded again
next): then the SDK is told to retry at once, and its retry gets the next recording.

It runs inside an event loop (``await start_async()``) or in a thread of its own (``start()`` /
``stop()``, or as a context manager) for pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ...hints import count
from ...matching import (
    IndexedRecordings,
    Matcher,
    Miss,
    Recorded,
    Rules,
    VolatileSpans,
    clip,
    here,
    report_lines,
    tool_host,
    turn_entries,
)
from ...net import BackgroundServer, BadRequest, Request, read_request, refuse
from ...storage import check_target, staged
from ...untrusted import clean_line
from ...wire import Exchange, decode_chunks
from ._player import Player
from ._recordings import open_recordings
from ._relay import LiveRelay
from ._sender import Sender, ServedLog
from ._websocket import WebSocketReplay
from .agent_env import OWN_NAMES, replay_env, tool_proxy_env
from .faults import FaultPlan
from .plan import Fallback, Forward, Planner, Router, ToolAnswer

if TYPE_CHECKING:
    from ...net import Trust
    from ._tls import ToolTLS

__all__ = ["IDLE_TIMEOUT", "READ_TIMEOUT", "ReplayServer", "parse_pace"]

#: Seconds a connection may wait between requests (or WebSocket frames) before it is closed.
IDLE_TIMEOUT = 120.0
#: Seconds a request head may take to arrive, and the longest a request body may pause.
READ_TIMEOUT = 30.0
#: Seconds a client may leave an answer unread (no byte of it taken) before its connection is
#: dropped.
WRITE_TIMEOUT = 60.0
#: Bytes of request bodies the server keeps in :attr:`ReplayServer.served` beyond those equal
#: to a recorded request (which are shared with the recording, free): past it, a served
#: exchange keeps the body's size in a note instead of the body.
RETAIN_BODIES = 64 << 20
#: Unplayed round trips the report names one by one (then how many more): a run of a million
#: round trips stopped after a few gets a short report, not a million lines.
UNPLAYED_LISTED = 100

#: A looptap cassette at least this large is served from its offset index; a smaller one is
#: held in memory (about 16 bytes per byte of the file: 8 MB costs ~130 MB, and answers ~3x
#: faster than reading each played round trip again from disk).
IN_MEMORY_BELOW = 8 << 20


def parse_pace(value: str) -> float:
    """``instant`` → 0, ``recorded`` → 1, ``x2``/``2x``/``2`` → 2 (times faster than recorded)."""
    v = value.strip().lower()
    if v == "instant":
        return 0.0
    if v == "recorded":
        return 1.0
    try:
        speed = float(v.strip("x"))
    except ValueError:
        raise ValueError(
            f"pace must be 'recorded', 'instant' or xN (a speed factor), not {value!r}"
        ) from None
    if speed <= 0:
        raise ValueError(f"pace factor must be positive, not {value!r}")
    return speed


class ReplayServer(BackgroundServer):
    """Serve a cassette on ``host:port`` (0: a free port), in the caller's event loop or a thread of
    its own (:class:`~cassettes.net.BackgroundServer`). See the module docstring."""

    label = "the replay server"

    def _preload(self) -> None:
        # the HTTP/1.1 reader and writer (cassettes.net)
        import h11  # noqa: F401
        import wsproto.connection  # WebSocket sessions (cassettes.net)
        import wsproto.events  # noqa: F401

    #: The largest request head (and chunk-size line) read; a larger one is answered 431.
    read_limit = 1 << 20
    #: The largest request body read; a larger one is answered 413.
    max_body = 256 << 20

    def __init__(
        self,
        cassette: str | Path | Sequence[Exchange],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        pace: str = "instant",
        strict: bool = False,
        fallback: Fallback | None = None,
        faults: FaultPlan | None = None,
        idle_timeout: float | None = IDLE_TIMEOUT,
        read_timeout: float | None = READ_TIMEOUT,
        write_timeout: float | None = WRITE_TIMEOUT,
        retain_bodies: int = RETAIN_BODIES,
        cursor: Router | None = None,
        volatile: bool | VolatileSpans = True,
        rules: Rules | None = None,
        trust: Trust | None = None,
        live_tools: bool = False,
        tool_proxy: str | None = None,
        tool_proxy_ca: str | None = None,
    ) -> None:
        opened = open_recordings(cassette, volatile, IN_MEMORY_BELOW)
        self.source, self.problems, recordings, first, volatile = opened
        speed = parse_pace(pace)
        self.matcher = Matcher(
            recordings, strict=strict, first_turn=first, volatile=volatile, rules=rules, tools=True
        )
        if isinstance(recordings, IndexedRecordings):
            self.problems = recordings.problems  # (known once the file is read)
        #: Faults to inject (``--fault``); ``faults.fired`` lists what was injected.
        self.faults = faults
        if faults is not None and faults.needs_turns:
            self.matcher.label()
        if cursor is not None:
            # placed in the recording's turns (refused if it selects none, saying what the run has)
            cursor.bind(self.matcher, self.source if self.source != "<exchanges>" else "the run")
        #: A fork's router (its cursor): which requests go live, and the report of them.
        self.router = cursor
        #: Decides every answer (the player and the relay below only speak it).
        #: (a fork's: a tool's live call through its recorder, an HTTPS one trusting
        #: ``tool_proxy_ca``, the recorder's CA, in the tunnel)
        tool_trust: Trust | None = None
        if tool_proxy and tool_proxy_ca:
            from ...net import Trust  # (an HTTP client's module: loaded for a fork alone)

            tool_trust = Trust(tool_proxy_ca, None)
        self.planner = Planner(
            self.matcher, faults, fallback, cursor, live_tools, tool_proxy, tool_trust
        )
        #: Writes every answer (the one seam to the wire), and keeps each request answered.
        self.sender = Sender(write_timeout)
        self.log = ServedLog(self.matcher, lambda: self.url, retain_bodies)
        #: Recorded answers (and faults) at the recorded pace or scaled.
        self.player = Player(self.matcher, self.sender, self.log, speed)
        #: Requests sent on to a live upstream (requests that are not recorded or that fall past
        #: a fork's cursor), their answers relayed; TLS verified against ``trust`` (``None``: the
        #: environment's store).
        self.relay = LiveRelay(self.player, router=cursor, trust=trust)
        #: Answers the WebSocket sessions, turn by turn, as the planner decides.
        self.websockets = WebSocketReplay(
            self.planner, self.player, idle_timeout=idle_timeout, trust=trust
        )
        #: The hosts the recording's tools called, by scheme (``http``, ``https``; ``None``:
        #: either), once asked.
        self._hosts_by_scheme: dict[str | None, frozenset[str]] = {}
        #: The hosts the recording's model calls went to (:meth:`_model_hosts`), once asked.
        self._model_hosts_seen: frozenset[str] | None = None
        #: The CA and certificate of the HTTPS tools' hosts, made when the server starts (while
        #: it runs; ``None`` when the recording's tools called no host over HTTPS).
        self.tls: ToolTLS | None = None
        #: Failures of the server itself (answered with a 500); empty unless looptap has a bug.
        self.internal_errors: list[str] = []
        #: Requests that could not be read, answered 400 (408, 413 …) and closed: how many, and
        #: the first few reasons.
        self.refused = 0
        self.refusals: list[str] = []
        #: ``None``: no limit (see :data:`IDLE_TIMEOUT`, :data:`READ_TIMEOUT`).
        self.idle_timeout = idle_timeout
        self.read_timeout = read_timeout
        #: Connections waiting for their next request (closed first when out of descriptors).
        self._idle: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        super().__init__(
            self._handle,
            host=host,
            port=port,
            label=self.label,
            read_limit=self.read_limit,
            preload=self._preload,
            shed_idle=self._shed_idle,
        )

    async def start_async(self) -> None:
        hosts = self.https_tool_hosts()
        if hosts and self.tls is None:
            from ._tls import ToolTLS

            self.tls = ToolTLS(hosts)
        try:
            await super().start_async()
        except BaseException:
            self._drop_tls()
            raise

    async def stop_async(self) -> None:
        try:
            await super().stop_async()
        finally:
            self._drop_tls()

    def _drop_tls(self) -> None:
        if self.tls is not None:
            self.tls.close()
            self.tls = None

    # -- public view ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return replay_env(self.url)

    def proxy_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The proxy variables that send the agent's other HTTP (its tools') here:
        :func:`~.agent_env.tool_proxy_env` for this server and the hosts its recording's tools
        called (Node's shim after ``environ``'s ``NODE_OPTIONS``)."""
        return tool_proxy_env(self.url, self.tool_hosts(), node=environ.get("NODE_OPTIONS", ""))

    def tool_hosts(self) -> list[str]:
        """The hosts (``host:port``) the recording's tools called."""
        return self.matcher.tool_hosts()

    def https_tool_hosts(self) -> list[str]:
        """The hosts (``host:port``) the recording's tools called over HTTPS."""
        return self.matcher.tool_hosts("https")

    def trust_env(self, environ: Mapping[str, str], base: str | None = None) -> dict[str, str]:
        """While the server runs and serves HTTPS tools: the variables that make the agent trust
        its CA (:meth:`ToolTLS.trust_env <cassettes.replay.serving._tls.ToolTLS.trust_env>`: a
        bundle of ``base`` — default the store ``environ`` names, else OpenSSL's — and the CA);
        else none."""
        return self.tls.trust_env(environ, base) if self.tls is not None else {}

    @property
    def served(self) -> list[Exchange]:
        """Every request answered, as an exchange: the live request and what was sent back."""
        return self.log.served

    @property
    def misses(self) -> list[Miss]:
        return list(self.matcher.misses)

    def unplayed(self) -> list[Recorded]:
        return self.matcher.unplayed()

    def unplayed_turns(self) -> list[Recorded]:
        """What was recorded and never played, but the tools' calls when they may go live
        (``live_tools``: a tool that ran live made its own calls instead)."""
        skip = self._skipped()
        return [r for r in self.matcher.unplayed() if r.index not in skip]

    def _skipped(self) -> frozenset[int]:
        return frozenset(self.matcher.index.tools) if self.planner.live_tools else frozenset()

    def keep_sent(self, path: Path) -> None:
        """What the client sent (with the answers it got, misses included), as a cassette at
        ``path``, redacted as every cassette is, with this machine's cwd and home in its header: the
        evidence ``looptap rules propose`` reads against the recording. Raises :class:`OSError`,
        :class:`~cassettes.errors.CassetteError`."""
        from ...recording.pipeline import CassetteWriter

        with (
            staged(check_target(path, "the failed run's cassette", force=True)) as s,
            CassetteWriter(s.path, meta=here()) as w,
        ):
            for ex in list(self.served):
                w.append(ex)

    def report_lines(self) -> list[str]:
        """The report of the replay: what was played, went live, missed, refused, dropped."""
        # from the recording: a fork's requests past its cursor went live
        tool_ix = set(self.matcher.index.tools)
        played = [r.index for r in self.matcher.played()]
        tools = len(tool_ix)
        served = sum(1 for i in played if i in tool_ix)
        head = [
            f"looptap replay {self.source}: played {len(played) - served:,} of "
            f"{count(len(self.matcher.recorded) - tools, 'recorded round trip')}"
            + (f" and served {served:,} of {count(tools, 'tool HTTP call')}" if tools else "")
        ]
        if self.planner.tools_live:
            head.append(f"{count(self.planner.tools_live, 'tool request')} sent live")
        if self.router is not None:
            head.append(f"{count(self.router.sent, 'request')} went live past the cursor")
        head.append(count(len(self.matcher.misses), "unmatched request"))
        for n, noun, said in (
            (len(self.internal_errors), "internal error", "{}"),
            (self.refused, "unreadable request", "{} refused"),
            (
                self.sender.write_timeouts,
                "connection",
                f"{{}} dropped (answer unread for {self.sender.write_timeout:g} s)",
            ),
            (self.accept_pauses, "time", "accepting paused {} (out of file descriptors)"),
            (
                self.sender.headers_dropped,
                "header",
                "{} not sent (they would have split the message)",
            ),
        ):
            if n:
                head.append(said.format(count(n, noun)))
        out = [", ".join(head), *_unplayed_lines(self.matcher, self._skipped())]
        if self.matcher.tolerated:
            n = len(self.matcher.tolerated)
            out.append(
                f"  {n} recorded round trip{'s' if n != 1 else ''} answered a request that "
                "differed only in what was tolerated (also in the served exchanges' notes):"
            )
            out += [clean_line(line) for line in report_lines(turn_entries(self.matcher), "    ")]
        for m in self.matcher.misses:
            out.append(f"  unmatched: {m.method} {clip(m.target)}: {clip(m.reason)}")
        for e in self.internal_errors[:20]:
            out.append(f"  internal error (a looptap bug, answered 500): {clip(e)}")
        for why in self.refusals:
            out.append(f"  refused: {why}")
        for line in self.sender.drops:
            out.append(f"  dropped: {line}")
        return out

    # -- HTTP/1.1 ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            await self._serve(reader, writer, task)
        except (
            asyncio.CancelledError,  # a stop: ends the connection quietly
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
            ssl.SSLError,
        ):
            pass
        finally:
            self._idle.pop(task, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        task: asyncio.Task[None],
    ) -> None:
        #: Inside a CONNECT tunnel: ``scheme://host:port`` of the recorded tool host (or of this
        #: server) its requests go to.
        tunnel: str | None = None
        while True:
            try:
                self._idle[task] = writer
                req = await self._read_request(reader, writer, lambda: self._idle.pop(task, None))
            except BadRequest as exc:
                self.refused += 1
                if len(self.refusals) < 20:
                    self.refusals.append(f"{exc.status}: {clip(str(exc))}")
                await refuse(writer, exc)
                return
            if req is None:
                return
            if tunnel is not None:
                # the host is the one the tunnel was opened to: not the request's Host header,
                # nor its SNI, nor an absolute URL it names (all the client's to say)
                req.absolute = tunnel + _origin_form(req.target)
            elif req.method == "CONNECT":
                tunnel = await self._tunnel(req, writer)
                if tunnel is None:
                    return
                continue
            websocket = tunnel is None and (req.header("upgrade") or "").lower() == "websocket"
            try:
                if websocket:
                    await self.websockets.serve(req, reader, writer)
                    return
                keep = await self._respond(req, writer)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug here must reach the test as an error, not a hang
                self.internal_errors.append(
                    f"{req.method} {clip(req.target)}: {type(exc).__name__}: {clip(str(exc))}"
                )
                await self.sender.internal_error(writer, exc, websocket=websocket)
                return
            if not keep or (req.header("connection") or "").lower() == "close":
                return

    def _shed_idle(self) -> int:
        idle = list(self._idle.values())
        self._idle.clear()
        for w in idle:
            with contextlib.suppress(Exception):
                w.close()
        return len(idle)

    async def _read_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        started: Callable[[], object] | None = None,
    ) -> Request | None:
        req = await read_request(
            reader,
            writer,
            max_body=self.max_body,
            idle_timeout=self.idle_timeout,
            read_timeout=self.read_timeout,
            started=started,
        )
        if req is not None:
            enc = req.header("content-encoding")
            if enc and req.body:
                try:
                    req.body = b"".join(c for _, c in decode_chunks([(None, req.body)], enc).chunks)
                except (ValueError, MemoryError) as exc:
                    raise BadRequest(
                        f"the request body could not be decoded ({clip(enc, 40)}): "
                        f"{clip(str(exc), 200)}"
                    ) from None
        return req

    # -- the HTTP sender: speaks what the planner decided ------------------------------------------
    async def _respond(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        t0 = asyncio.get_running_loop().time()
        if req.method == "CONNECT":  # (inside a tunnel)
            return await self._connect(req, writer)
        url = self._tool_url(req)  # (a tunnel's requests: the tunnel's host, :meth:`_serve`)
        answer = self.planner.plan(req) if url is None else self.planner.plan_tool(req, url)
        if isinstance(answer, ToolAnswer):
            kind = "application/json" if answer.body[:1] in (b"{", b"[") else "text/plain"
            notes = [answer.note]
            body, rec = answer.body, answer.rec
            return await self.player.json(
                req, writer, answer.status, [], body, rec, None, notes, kind
            )
        if isinstance(answer, Forward):
            return await self.relay.forward(req, writer, answer)
        return await self.player.answer(req, writer, answer, t0)

    def _tool_url(self, req: Request) -> str | None:
        """The URL of a tool's request: one sent here in absolute form (as to a forward proxy)
        for another host than this server; ``None`` for the rest (the model calls, sent to the
        base URL, through the proxy variables to this server's own address, or in absolute form
        to the host the recording's model calls went to, none of its tools': a plain-HTTP model
        server a client reaches through ``HTTP_PROXY``). A model request is a model call whatever
        form it arrives in: matched as a turn, under a fork's cursor and its request budget."""
        if req.absolute is None:
            return None
        u = urlsplit(req.absolute)
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            return req.absolute
        if self._is_own(u.hostname or "", port):
            return None
        host = tool_host(req.absolute)
        return None if host in self._model_hosts() and host not in self._hosts() else req.absolute

    def _model_hosts(self) -> frozenset[str]:
        """The hosts (``host:port``) the recording's model calls (not its tools') went to."""
        if self._model_hosts_seen is None:
            tools = set(self.matcher.index.tools)
            self._model_hosts_seen = frozenset(
                tool_host(r.exchange.url) for r in self.matcher.recorded if r.index not in tools
            )
        return self._model_hosts_seen

    def _is_own(self, hostname: str, port: int) -> bool:
        """Whether ``hostname:port`` is this server's own address (as the proxy variables name it,
        or as a client may write it)."""
        return port == self.port and hostname.strip("[]").lower() in OWN_NAMES | {self.host}

    async def _tunnel(self, req: Request, writer: asyncio.StreamWriter) -> str | None:
        """``CONNECT`` to a host the recording's tools called (its ``host:port`` as recorded):
        answered 200, then, for a host called over HTTPS, TLS with the replay's certificate for
        it; for a host called over plain HTTP, or this server's own address (a model call through
        the proxy variables), the tunnel's requests are served as sent to ``http://host:port``
        (Node's undici tunnels plain HTTP so: its ``ProxyAgent``, ``EnvHttpProxyAgent``, the
        built-in ``fetch`` under ``NODE_USE_ENV_PROXY``). Returns ``scheme://host:port``; to any
        other host refused (:meth:`_connect`), ``None``."""
        if "/" in req.target:
            await self._connect(req, writer)
            return None
        host = tool_host(f"https://{req.target}")
        tls = self.tls
        if tls is not None and host in self._hosts("https") and tls.serves(host):
            await self.sender.send_head(writer, 200, [], req=req)
            try:
                await writer.start_tls(tls.context, ssl_handshake_timeout=self.read_timeout or 60.0)
            except (ssl.SSLError, ConnectionError, TimeoutError) as exc:
                # the tool's call is not served: a miss, so the test fails closed even when the
                # agent swallowed its client's error
                why = (
                    f"the TLS handshake for the HTTPS tool host {host} failed "
                    f"({type(exc).__name__}: {clip(str(exc), 200)}): the client did not trust the "
                    "replay's CA (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS), pins "
                    "its server's certificate, or speaks only HTTP/2"
                )
                self.matcher.misses.append(Miss("CONNECT", host, clean_line(why)))
                return None
            return f"https://{host}"
        host = tool_host(f"http://{req.target}")
        name, _, port = host.rpartition(":")
        own = port.isdigit() and self._is_own(name, int(port))
        if not own and host not in self._hosts("http"):
            await self._connect(req, writer)
            return None
        await self.sender.send_head(writer, 200, [], req=req)
        return f"http://{host}"

    async def _connect(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        """``CONNECT`` refused: to a host the recording's tools called that no tunnel serves (an
        HTTPS tool's host whose name no certificate may carry), a miss too (the test fails
        closed)."""
        host = tool_host(f"https://{req.target}")
        if host in self._hosts():
            msg = (
                f"looptap replay refuses CONNECT {clip(req.target)}: the recording's tools called "
                f"{host}, but not over HTTPS with a name a certificate may carry; "
                "record the tool again, or let it go live"
            )
            self.matcher.misses.append(Miss("CONNECT", req.target, msg))
        else:
            msg = (
                f"looptap replay refuses CONNECT {req.target}: the run is replayed offline from "
                f"{self.source}; point the client's base URL at the replay server instead"
            )
        return await self.player.refuse(req, writer, 403, msg)

    def _hosts(self, scheme: str | None = None) -> frozenset[str]:
        if scheme not in self._hosts_by_scheme:
            self._hosts_by_scheme[scheme] = frozenset(self.matcher.tool_hosts(scheme))
        return self._hosts_by_scheme[scheme]


def _origin_form(target: str) -> str:
    """A request target's path and query (of an absolute-form target too)."""
    if target.startswith("/"):
        return target
    u = urlsplit(target)
    return (u.path or "/") + (f"?{u.query}" if u.query else "")


def _unplayed_lines(matcher: Matcher, skip: frozenset[int] = frozenset()) -> list[str]:
    """The round trips never played (but ``skip``), one line each up to
    :data:`UNPLAYED_LISTED`."""
    unplayed = matcher.count_unplayed() - sum(1 for i in skip if not matcher.recorded[i].plays)
    if not unplayed:
        return []
    matcher.label()
    out: list[str] = []
    for r in matcher.recorded:
        if len(out) == UNPLAYED_LISTED:
            out.append(f"  … and {count(unplayed - len(out), 'more unplayed round trip')}")
            break
        if not r.plays and r.index not in skip:
            out.append(f"  unplayed: {r.label}: {r.key.method} {clip(r.key.target)}")
    return out
