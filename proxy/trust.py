"""What the recorder trusts upstream, and the hosts it leaves alone (docs/recorder.md, "HTTPS
tools: what the recorder trusts").

The recorder trusts what the agent trusts: the CA files and directories the agent's environment
names (:data:`CA_VARS`) plus the system store and mitmproxy's own (certifi), in one bundle handed to
mitmproxy's ``ssl_verify_upstream_trusted_ca`` (:func:`upstream_bundle`). mitmproxy carries and
verifies every byte; looptap only chooses its trust store.

A host the recorder still cannot verify (a certificate the agent trusts in its code, ``verify=``
a path, ``rejectUnauthorized: false``; a server that asks for a client certificate) must not be
broken: intercepting it would hand the agent an error it never had without looptap. Whether to
intercept is decided at the client's hello, before the agent's handshake, so :class:`UpstreamTrust`
asks once per host and port: mitmproxy's own TLS client (the context its ``tlsconfig`` addon
makes for a real upstream connection, the same options, hostname check included) shakes hands with
the server; one that fails at TLS is passed through untouched from then on (mitmproxy's
``ignore_connection``: the agent's own TLS reaches the server, unrecorded) and said once by host.
A probe that fails before TLS (refused, reset, no answer in time) decides nothing: the connection
is intercepted as before, and the agent gets the failure it would have had.

A server that asks for a client certificate (mTLS: its ``CertificateRequest``, seen through
pyOpenSSL's info callback on mitmproxy's TLS client, during the probe or, where the probe decided
nothing, an intercepted handshake) is passed through the same way from then on: the agent's own
certificate reaches it, which the recorder does not have. Under TLS 1.3 such a server's refusal of
a handshake without a certificate comes after the client's side of it is done, so a verified
probe alone would not tell it. Where the agent's environment names a proxy
(:mod:`proxy.user_proxy`), the probe goes through it (``CONNECT``), as mitmproxy's own connection
would. Each host passed through is said once on stderr and once on the record (a ``note`` record,
``"note": "passed-through"``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..cassettes.storage import UnsafePath, check_target, write_plain
from . import messages
from .user_proxy import Proxy, tunnel

__all__ = ["CA_VARS", "TLS_FAILED", "UpstreamTrust", "agent_ca_paths", "upstream_bundle"]

#: The variables through which an agent's HTTP clients are told which CAs to trust: requests and
#: curl (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``), OpenSSL and what reads its defaults (httpx,
#: aiohttp, urllib: ``SSL_CERT_FILE``, ``SSL_CERT_DIR``), Node (``NODE_EXTRA_CA_CERTS``).
CA_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS")
DIR_VAR = "SSL_CERT_DIR"
#: The recorder's bundle in ``--confdir``.
UPSTREAM_FILE = "looptap-upstream-ca.pem"
#: Bounds on what is read: files of a directory, bytes of one file.
_DIR_FILES, _FILE_BYTES = 4096, 8 << 20
#: How long the probe waits for the server (seconds); past it nothing is decided.
PROBE_TIMEOUT = 10.0
#: A connection held for the probe longer than this (seconds) is said, once by host: the agent's
#: first call to a server slow to answer TLS waits for the recorder's check (at most
#: PROBE_TIMEOUT). It is held, never intercepted unchecked: a server the recorder cannot verify
#: would then fail the agent's call, an error it would not have had without looptap.
PROBE_GRACE = 1.0
#: Why a server that asks for a client certificate is passed through.
CLIENT_CERT = "it asks for a client certificate"
#: OpenSSL's state once a client has read the server's ``CertificateRequest`` (TLS 1.2 and 1.3).
_CERT_REQUEST = b"SSLv3/TLS read server certificate request"


def agent_ca_paths(environ: Mapping[str, str]) -> tuple[list[Path], list[Path]]:
    """(CA files, CA directories) the agent's environment names (each that exists)."""
    files = [Path(environ[v]) for v in CA_VARS if environ.get(v, "").strip()]
    dirs = [Path(d) for d in environ.get(DIR_VAR, "").split(os.pathsep) if d.strip()]
    return [f for f in dict.fromkeys(files) if f.is_file()], [d for d in dirs if d.is_dir()]


def _pem(path: Path) -> list[str]:
    """The PEM certificates of one file (bounded); none for what cannot be read."""
    try:
        with path.open("rb") as f:
            text = f.read(_FILE_BYTES).decode("ascii", "replace")
    except OSError:
        return []
    blocks: list[str] = []
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    at = text.find(begin)
    while at >= 0:
        stop = text.find(end, at)
        if stop < 0:
            break
        blocks.append(text[at : stop + len(end)])
        at = text.find(begin, stop)
    return blocks


def _system() -> list[Path]:
    """The system store (OpenSSL's default file) and certifi's (mitmproxy's own default)."""
    import certifi

    paths = ssl.get_default_verify_paths()
    found = [Path(p) for p in (paths.openssl_cafile, paths.cafile, certifi.where()) if p]
    found.append(Path("/etc/ssl/certs/ca-certificates.crt"))
    return [p for p in dict.fromkeys(found) if p.is_file()]


def upstream_bundle(confdir: Path, environ: Mapping[str, str]) -> Path | None:
    """Write the recorder's trust store into ``confdir`` (replaced whole) and return its path: the
    system's and certifi's, and each CA file and directory the agent's environment names, each
    certificate once (the system store and certifi's mostly hold the same ones). ``None`` when it
    cannot be written (a full disk, a file size limit): said once, and mitmproxy verifies with its
    default (certifi) as before; a host that then fails verification is passed through untouched
    (:class:`UpstreamTrust`), so the agent is not broken by it."""
    files, dirs = agent_ca_paths(environ)
    certs = [c for p in (*_system(), *files) for c in _pem(p)]
    for d in dirs:
        try:
            names = sorted(os.listdir(d))[:_DIR_FILES]
        except OSError:
            continue
        certs += [c for n in names if (d / n).is_file() for c in _pem(d / n)]
    path = confdir / UPSTREAM_FILE
    body = "\n".join(dict.fromkeys(certs)) + "\n"
    try:
        write_plain(  # (certificates: nothing looptap saw)
            check_target(path, "the CA bundle", owned=lambda _p: True), body.encode(), mode=0o644
        )
    except UnsafePath as exc:
        from .config import RecorderError

        raise RecorderError(str(exc)) from None
    except OSError as exc:
        messages.emit(
            f"looptap: the recorder's trust store {path} could not be written "
            f"({exc.strerror or exc}): upstreams are verified with mitmproxy's default (certifi) "
            "only, and a host it cannot verify is passed through unrecorded"
        )
        return None
    return path


def _handshake(
    conn: Any, address: tuple[str, int], timeout: float, via: Proxy | None = None
) -> str | None:
    """mitmproxy's TLS client ``conn`` (a pyOpenSSL connection on memory BIOs) shakes hands with
    the server at ``address`` (through the proxy ``via``, when one is named): ``None`` when it
    verified; why not when TLS failed. Raises :class:`OSError` when the server could not be
    reached or did not answer."""
    from OpenSSL import SSL

    if via is not None and via.scheme != "http":
        raise OSError("an https proxy: not probed")  # (nothing decided)
    to = (via.host, via.port) if via is not None else address
    with socket.create_connection(to, timeout=timeout) as sock:
        if via is not None:
            rest = tunnel(sock, via, address)
            if rest:
                conn.bio_write(rest)
        while True:
            try:
                conn.do_handshake()
                return None
            except SSL.WantReadError:
                pass
            except SSL.Error as exc:
                last = exc.args[0][-1] if exc.args and exc.args[0] else ()
                return str(last[-1]) if last else "TLS failed"
            try:
                while out := conn.bio_read(65536):
                    sock.sendall(out)
            except SSL.WantReadError:
                pass
            data = sock.recv(65536)
            if not data:
                raise ConnectionResetError("the server closed the connection during TLS")
            conn.bio_write(data)


def _upstream_tunnel() -> Any:
    """mitmproxy's own upstream-proxy tunnel layer (what its upstream mode puts under a
    ``CONNECT``), ``None`` where this mitmproxy has none by that name: it has no public name."""
    try:
        from mitmproxy.proxy.layers.http._upstream_proxy import HttpUpstreamProxy
    except ImportError:
        return None
    return HttpUpstreamProxy


class UpstreamTrust:
    """mitmproxy addon: at a forward-proxy client's TLS hello, a host the recorder cannot verify,
    or that asks for a client certificate, is passed through untouched (:mod:`proxy.trust`).
    ``route`` says which proxy a connection goes through (:meth:`proxy.user_proxy.UserProxy.route`);
    ``note`` puts a record beside the round trips."""

    def __init__(
        self,
        route: Callable[[str, str, int], Proxy | None] | None = None,
        note: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        #: (host, port, SNI) → ``None`` (verified) or why its TLS failed (passed through).
        self.known: dict[tuple[str, int, str], str | None] = {}
        self._asking: dict[tuple[str, int, str], asyncio.Future[str | None]] = {}
        #: The hosts whose probe a connection was not held for (said once each).
        self.slow: set[tuple[str, int, str]] = set()
        #: (host, port) of servers an intercepted handshake found asking for a client certificate.
        self.client_cert: set[tuple[str, int]] = set()
        self._route = route
        self._note = note
        #: mitmproxy's TLS client contexts watched by :meth:`_info`, and the connections it saw
        #: read a ``CertificateRequest``.
        self._watched: weakref.WeakSet[Any] = weakref.WeakSet()
        self._asked: weakref.WeakSet[Any] = weakref.WeakSet()

    def _watch(self, conn: Any) -> None:
        """Watch the handshakes of ``conn``'s context (mitmproxy's, shared by its connections
        with the same options) for a ``CertificateRequest``."""
        context = conn.get_context()
        if context not in self._watched:
            self._watched.add(context)
            context.set_info_callback(self._info)

    def _info(self, conn: Any, where: int, _ret: int) -> None:
        from OpenSSL import SSL

        try:  # (an exception here would be printed by cffi, never raised)
            if where & SSL.SSL_CB_CONNECT_LOOP and conn.get_state_string() == _CERT_REQUEST:
                self._asked.add(conn)
        except Exception:
            pass

    def tls_start_server(self, data: Any) -> None:
        if data.ssl_conn is not None:
            self._watch(data.ssl_conn)

    def tls_established_server(self, data: Any) -> None:
        self._asked_on(data)

    def _asked_on(self, data: Any) -> None:
        """An intercepted handshake whose server asked for a client certificate: its host passes
        through from the next connection on (said once)."""
        from mitmproxy.proxy import mode_specs

        address = data.conn.address
        if (
            data.ssl_conn not in self._asked
            or address is None
            or not isinstance(data.context.client.proxy_mode, mode_specs.RegularMode)
        ):
            return
        where = (str(address[0]), int(address[1]))
        if where not in self.client_cert:
            self.client_cert.add(where)
            self._say(data.conn.sni or where[0], where[1], CLIENT_CERT)

    async def tls_clienthello(self, data: Any) -> None:
        from mitmproxy.proxy import mode_specs

        context = data.context
        if (
            data.ignore_connection
            or context.server.address is None
            or not isinstance(context.client.proxy_mode, mode_specs.RegularMode)
        ):
            return
        if await self._passes(context, data.client_hello.sni or ""):
            data.ignore_connection = True

    async def next_layer(self, nextlayer: Any) -> None:
        """A connection the agent tunnels (``CONNECT``) to a server passed through untouched (a
        host :meth:`_passes`, or ignored by mitmproxy's own options) goes through the proxy the
        agent's environment names for it, as without looptap: mitmproxy chains only what it
        intercepts, so its raw relay is put under mitmproxy's own upstream tunnel (its
        ``CONNECT``, with the proxy's credentials: :meth:`UserProxy.http_connect_upstream`)."""
        from mitmproxy.proxy import mode_specs
        from mitmproxy.proxy.layers import TCPLayer
        from mitmproxy.proxy.layers.tls import ServerTLSLayer, parse_client_hello

        layer, context = nextlayer.layer, nextlayer.context
        address = context.server.address
        if (
            layer is None
            or self._route is None
            or address is None
            or context.server.via is not None
            or not isinstance(context.client.proxy_mode, mode_specs.RegularMode)
        ):
            return
        via = self._route("https", str(address[0]), int(address[1]))
        if via is None:
            return
        if isinstance(layer, ServerTLSLayer):  # (the agent's TLS: intercepted, or passed through)
            try:
                hello = parse_client_hello(nextlayer.data_client())
            except ValueError:
                return
            if hello is None or not await self._passes(context, hello.sni or ""):
                return
        elif not isinstance(layer, TCPLayer):
            return
        tunnel = _upstream_tunnel()
        if tunnel is None:
            self._unchained(address, via)
            return
        made = layer
        while made is not None:  # (the layers mitmproxy chose, replaced: out of its stack)
            if made in context.layers:
                context.layers.remove(made)
            made = getattr(made, "child_layer", None)
        context.server.via = via.spec
        stack = tunnel.make(context, True)
        stack /= TCPLayer(context, ignore=True)
        nextlayer.layer = stack[0]

    def _unchained(self, address: tuple[str, int], via: Proxy) -> None:
        messages.emit(
            f"{address[0]}:{address[1]}: passed through directly, not through your proxy "
            f"{via.shown}: this mitmproxy's upstream tunnel was not found; where only that proxy "
            "reaches this host, the agent's connection to it fails under looptap"
        )

    async def _passes(self, context: Any, sni: str) -> bool:
        """Whether the agent's TLS to ``context``'s server passes through untouched: a server
        found asking for a client certificate, or one the recorder's TLS check (asked once per
        host, port and SNI; a connection held for it) failed on."""
        from mitmproxy import ctx

        address = context.server.address
        key = (str(address[0]), int(address[1]), sni)
        if key[:2] in self.client_cert:
            return True
        if ctx.options.ssl_insecure:
            return False
        if key not in self.known:
            asking = self._asking.get(key)
            if asking is None:
                asking = self._asking[key] = asyncio.ensure_future(self._probe(context, sni))
                asking.add_done_callback(lambda done: self._decided(key, sni, done))
            try:
                try:
                    await asyncio.wait_for(asyncio.shield(asking), PROBE_GRACE)
                except TimeoutError:
                    if key not in self.slow:
                        self.slow.add(key)
                        messages.emit(
                            f"{sni or key[0]}:{key[1]}: the server took over {PROBE_GRACE:g} s "
                            "to answer the recorder's TLS check; the agent's first connection "
                            f"to it was held for it (at most {PROBE_TIMEOUT:g} s), so that a "
                            "server the recorder cannot verify is passed through, never broken"
                        )
                    await asking
            except Exception:  # not reached, refused, no answer: nothing decided
                return False
        return self.known.get(key) is not None

    def _decided(self, key: tuple[str, int, str], sni: str, done: asyncio.Future[Any]) -> None:
        """The probe of ``key`` ended: its verdict kept (said once when TLS failed), whether a
        connection waited for it or not; a probe that failed before TLS decides nothing."""
        self._asking.pop(key, None)
        if done.cancelled() or done.exception() is not None or key in self.known:
            return
        failed = done.result()
        self.known[key] = failed
        if failed is not None:
            self._say(sni or key[0], key[1], failed)

    def _say(self, host: str, port: int, why: str) -> None:
        """A host passed through (by the proxy the agent's environment names for it, when one
        does: :meth:`next_layer`), said on stderr and on the record."""
        via = self._route("https", host, port) if self._route is not None else None
        untouched = "through untouched" + (f", by your proxy {via.shown}," if via else "")
        if why == CLIENT_CERT:
            messages.emit(
                f"{host}:{port}: {CLIENT_CERT} (mTLS); its traffic passes {untouched} "
                "and is not recorded: the agent's own certificate reaches it, as without looptap"
            )
        else:
            messages.emit(
                f"{host}:{port}: the recorder cannot verify this server's "
                f"certificate ({why}); its traffic passes {untouched} and is "
                "not recorded (the agent checks it as it would without looptap; to "
                "record it, give its CA in REQUESTS_CA_BUNDLE, SSL_CERT_FILE, "
                "SSL_CERT_DIR, CURL_CA_BUNDLE or NODE_EXTRA_CA_CERTS, or --ssl-insecure)"
            )
        if self._note is not None:
            record = {"type": "note", "note": "passed-through", "host": f"{host}:{port}"}
            try:
                self._note({**record, "why": why})
            except Exception:  # (the writer gone: the line above said it)
                pass

    async def _probe(self, context: Any, sni: str) -> str | None:
        """mitmproxy's own upstream TLS (its ``tlsconfig`` addon's context for this server) tried
        once, in a thread: ``None`` verified, else why TLS failed."""
        from mitmproxy import connection, ctx, tls

        server = connection.Server(address=context.server.address)
        server.sni = sni or None
        start = tls.TlsData(server, context.fork())
        ctx.master.addons.get("tlsconfig").tls_start_server(start)
        conn = start.ssl_conn
        assert conn is not None
        self._watch(conn)
        host, port = context.server.address[:2]
        via = self._route("https", host, port) if self._route is not None else None
        failed = await asyncio.get_running_loop().run_in_executor(
            None, _handshake, conn, (host, port), PROBE_TIMEOUT, via
        )
        return CLIENT_CERT if conn in self._asked else failed

    def tls_failed_server(self, data: Any) -> None:
        """The recorder's own handshake with a server failed (a certificate changed since the
        probe, a probe that decided nothing): the round trip says so
        (:data:`cassettes.wire.RECORDER_MADE`)."""
        put(TLS_FAILED, data.conn.id, data.conn.error or "TLS failed")
        self._asked_on(data)


#: The upstream connections (mitmproxy's ids) whose TLS handshake, the recorder's own, failed, and
#: why: the newest 1,024 (a round trip on one is handed over right after).
TLS_FAILED: OrderedDict[str, str] = OrderedDict()


def put(table: OrderedDict[str, str], key: str, value: str) -> None:
    table[key] = value
    while len(table) > 1024:
        table.popitem(last=False)
