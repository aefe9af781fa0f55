"""The user's network stays the user's (issue 100, item 2), under the real ``looptap run``.

1. Behind a proxy: a corporate forward proxy (mitmproxy 11.0.2's ``mitmdump`` in regular mode,
   in its own process on 127.0.0.1, asking for credentials, passing TLS through untouched) is
   the only way to the "internal" hosts ``tools.internal`` and ``models.internal``: those names
   resolve nowhere but in that proxy (its addon maps them to 127.0.0.1); any other host it
   refuses. The agent (the openai SDK and httpx from ``.venv-clients``, and curl) calls an HTTPS
   tool, a plain-HTTP tool and the model through ``HTTPS_PROXY``/``HTTP_PROXY`` (credentials in
   the URL), and works alone; under ``looptap run`` it works the same, every call recorded, the
   start says the proxy in one line, and the proxy's password is in no file and on no line. On
   f29135f5 the recorder replaced the proxy, and every call got a 502.
2. mTLS: a tool server (Python ``ssl``, ``CERT_REQUIRED``, TLS 1.2 and 1.3) that asks for a client
   certificate (an openssl-made CA, server and client certificates), which the agent trusts
   through ``SSL_CERT_FILE`` (so the recorder's check of the server passes): the agent's httpx and
   curl calls, with the client certificate, reach it under ``looptap run`` exactly as without
   it, the server sees the agent's certificate, and the host is said once on stderr and once on
   the record. On f29135f5 the connection was intercepted and the client certificate never
   reached the server.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from looptap.cassettes.storage import read_records
from tests.proxy.test_e2e_tool_http import CLIENTS_PYTHON, ToolServer
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedUpstream
from tests.support.tls import openssl

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command"),
    pytest.mark.skipif(shutil.which("curl") is None, reason="no curl command"),
]

PASSWORD = "corp-s3cret-Pw9x"
#: The names only the corporate proxy resolves.
INTERNAL = ("tools.internal", "models.internal")


def pki(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for the internal names, 127.0.0.1 and localhost, and a client
    certificate (``CN=agent-7``), each signed by the CA."""
    d = {n: directory / f"{n}.pem" for n in ("ca", "ca-key", "leaf", "leaf-key", "client", "client-key")}  # fmt: skip  # noqa: E501
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *ec, "-keyout", str(d["ca-key"]), "-out", str(d["ca"]), "-days", "2",
             "-subj", "/CN=looptap test corp CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    names = ",".join(f"DNS:{n}" for n in INTERNAL)
    for leaf, cn, ext in (
        ("leaf", "tools.internal", f"subjectAltName={names},IP:127.0.0.1,DNS:localhost\n"
                                   "extendedKeyUsage=serverAuth\n"),
        ("client", "agent-7", "extendedKeyUsage=clientAuth\n"),
    ):  # fmt: skip
        csr, extfile = directory / f"{leaf}.csr", directory / f"{leaf}.ext"
        extfile.write_text(ext)
        openssl(
            "req", *ec, "-keyout", str(d[f"{leaf}-key"]), "-out", str(csr), "-subj", f"/CN={cn}"
        )
        openssl("x509", "-req", "-in", str(csr), "-CA", str(d["ca"]), "-CAkey", str(d["ca-key"]),
                 "-CAcreateserial", "-out", str(d[leaf]), "-days", "2", "-extfile", str(extfile))  # fmt: skip  # noqa: E501
    return d


class TlsToolServer(ToolServer):
    """The weather API over HTTPS (the CA's server certificate); with ``client_cert``, it asks
    for a client certificate signed by the CA and refuses a handshake without one (mTLS), up to
    TLS ``version``. :attr:`peers` holds the client certificate's CN of each request."""

    def __init__(self, ca: dict[str, Path], client_cert: bool = False,
                 version: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED) -> None:  # fmt: skip
        super().__init__()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ca["leaf"], ca["leaf-key"])
        ctx.maximum_version = version
        if client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(ca["ca"])
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = self.url.replace("http://", "https://")
        self.peers: list[str] = []
        handler = self.server.RequestHandlerClass
        outer = self

        class Peer(handler):  # type: ignore[misc,valid-type]
            def do_GET(self) -> None:
                cert = self.connection.getpeercert() or {}
                outer.peers += [
                    v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"
                ] or ["(none)"]
                super().do_GET()

        self.server.RequestHandlerClass = Peer


CORP_ADDON = """
import json, os
MAP = json.loads(os.environ["CORP_MAP"])

def server_connect(data):
    host = data.server.address[0]
    with open(os.environ["CORP_LOG"], "a") as f:
        f.write(f"{host}:{data.server.address[1]}\\n")
    if host in MAP:
        data.server.address = (MAP[host], data.server.address[1])
    else:
        data.server.error = f"the corporate proxy does not reach {host}"
"""


class CorpProxy:
    """A forward proxy (mitmdump, regular mode, on 127.0.0.1) with a user and password, passing
    TLS through untouched, that alone reaches :data:`INTERNAL`; :meth:`asked` is each
    ``host:port`` it was asked to reach."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.log = directory / "corp.log"
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.url = f"http://corp:{PASSWORD}@127.0.0.1:{self.port}"

    def __enter__(self) -> CorpProxy:
        addon = self.dir / "corp_addon.py"
        addon.write_text(CORP_ADDON)
        mitmdump = Path(str(PROXY_PYTHON)).with_name("mitmdump")
        env = clean_env(CORP_MAP=json.dumps(dict.fromkeys(INTERNAL, "127.0.0.1")),
                        CORP_LOG=str(self.log))  # fmt: skip
        self.proc = subprocess.Popen(
            [str(mitmdump), "--mode", f"regular@{self.port}", "--listen-host", "127.0.0.1",
             "--ignore-hosts", ".*", "--proxyauth", f"corp:{PASSWORD}", "-q",
             "--set", f"confdir={self.dir / 'corp-conf'}", "-s", str(addon)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

        def up() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mitmdump ended: {self.proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False

        progress.until(up, pids=[self.proc.pid], what="the corporate proxy listening")
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait()

    def asked(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


AGENT = """
import json, os, ssl, subprocess, sys
import httpx
from openai import OpenAI

out = {}
if os.environ.get("TOOL_MTLS"):
    ctx = ssl.create_default_context()  # (SSL_CERT_FILE: the CA, or looptap's bundle holding it)
    ctx.load_cert_chain(os.environ["CLIENT_CERT"], os.environ["CLIENT_KEY"])
    r = httpx.get(os.environ["TOOL_MTLS"] + "/weather?city=Paris", verify=ctx, timeout=30)
    out["httpx"] = [r.status_code, r.json()["city"]]
    curl = subprocess.run(["curl", "-sS", "--fail", "--max-time", "30",
                           "--cert", os.environ["CLIENT_CERT"], "--key", os.environ["CLIENT_KEY"],
                           os.environ["TOOL_MTLS"] + "/weather?city=Rome"],
                          capture_output=True, text=True)
    out["curl"] = [curl.returncode, curl.stdout[-300:] + curl.stderr[-300:]]
else:
    r = httpx.get(os.environ["TOOL_HTTPS"] + "/weather?city=Paris", timeout=30)
    out["https"] = [r.status_code, r.text[:300]]
    r = httpx.get(os.environ["TOOL_HTTP"] + "/weather?city=Oslo", timeout=30)
    out["http"] = [r.status_code, r.text[:300]]
    curl = subprocess.run(["curl", "-sS", "--fail", "--max-time", "30",
                           os.environ["TOOL_HTTPS"] + "/weather?city=Rome"],
                          capture_output=True, text=True)
    out["curl"] = [curl.returncode, curl.stdout[-300:] + curl.stderr[-300:]]
    msg = OpenAI(timeout=30, max_retries=0).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]).choices[0].message
    out["model"] = msg.content
print("OUT " + json.dumps(out))
"""


def _run(
    tmp: Path, env: dict[str, str], looptap: bool
) -> tuple[dict, subprocess.CompletedProcess[str], Path]:  # type: ignore[type-arg]
    where = tmp / ("looptap" if looptap else "alone")
    where.mkdir()
    script = where / "agent.py"
    script.write_text(AGENT)
    command = [str(CLIENTS_PYTHON), str(script)]
    run = where / "run.jsonl"
    extra = dict(env)
    if looptap:
        command = [*RECORDER, "run", "-o", str(run), "--confdir", str(where / "conf"),
                   "--no-shell-trace", "--", *command]  # fmt: skip
        extra["LOOPTAP_PROXY_PYTHON"] = str(PROXY_PYTHON)
    scrub = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
             "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE", "NIX_SSL_CERT_FILE")  # fmt: skip
    proc = progress.run(command, env=clean_env(scrub=scrub, **extra), capture_output=True,
                        text=True, cwd=where)  # fmt: skip
    got = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("OUT ")]
    return (got[0] if got else {}), proc, run


def _files(root: Path) -> Iterator[Path]:
    for dirpath, _, names in os.walk(root):
        for name in names:
            yield Path(dirpath) / name


def test_an_agent_behind_a_proxy_works_the_same_under_looptap(tmp_path: Path) -> None:
    ca = pki(tmp_path)
    with (
        CorpProxy(tmp_path) as corp,
        TlsToolServer(ca) as https_tools,
        ToolServer() as http_tools,
        ScriptedUpstream(lambda _req: Reply.say("Hello from inside.")) as model,
    ):
        port = {"https": https_tools.url, "http": http_tools.url, "model": model.url}
        internal = {
            k: v.replace("127.0.0.1", "models.internal" if k == "model" else "tools.internal")
            for k, v in port.items()
        }
        env = {
            "HTTPS_PROXY": corp.url, "HTTP_PROXY": corp.url, "NO_PROXY": "localhost,127.0.0.1",
            "SSL_CERT_FILE": str(ca["ca"]), "CURL_CA_BUNDLE": str(ca["ca"]),
            "TOOL_HTTPS": internal["https"], "TOOL_HTTP": internal["http"],
            "OPENAI_BASE_URL": internal["model"] + "/v1", "OPENAI_API_KEY": "sk-test-corp",
        }  # fmt: skip
        alone, direct, _ = _run(tmp_path, env, looptap=False)
        assert alone["https"][0] == alone["http"][0] == 200, direct.stdout + direct.stderr[-2000:]
        assert alone["curl"][0] == 0 and alone["model"] == "Hello from inside.", alone
        asked_alone = len(corp.asked())
        got, proc, run = _run(tmp_path, env, looptap=True)
        https = internal["https"].removeprefix("https://")
        before, asked = corp.asked()[:asked_alone], corp.asked()[asked_alone:]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert got == alone, (got, proc.stderr[-3000:])  # the same answers, through the same proxy
    assert {a.split(":")[0] for a in asked} == set(INTERNAL), asked  # (it refuses any other)
    assert asked.count(https) == before.count(https) + 1  # the recorder's TLS check, through it
    said = [line for line in proc.stderr.splitlines() if "upstream proxy:" in line]
    assert said == [
        f"looptap: upstream proxy: http://127.0.0.1:{corp.port} (from HTTPS_PROXY and "
        "HTTP_PROXY), NO_PROXY honoured"
    ], proc.stderr[-3000:]
    exchanges = read_records(run).exchanges
    tools = sorted((ex.url.split("?")[0], ex.status) for ex in exchanges if ex.tool)
    assert tools == sorted(
        [(internal["https"] + "/weather", 200)] * 2 + [(internal["http"] + "/weather", 200)]
    ), tools
    assert [ex.status for ex in exchanges if not ex.tool] == [200]
    # the proxy's password: on no line, in no file the run wrote
    assert PASSWORD not in proc.stderr + proc.stdout
    for path in _files(tmp_path / "looptap"):
        assert PASSWORD.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["tls1.3", "tls1.2"]
)
def test_a_server_asking_for_a_client_certificate_passes_through(
    tmp_path: Path, version: ssl.TLSVersion
) -> None:
    ca = pki(tmp_path)
    with TlsToolServer(ca, client_cert=True, version=version) as tools:
        env = {"TOOL_MTLS": tools.url, "SSL_CERT_FILE": str(ca["ca"]),
               "CURL_CA_BUNDLE": str(ca["ca"]), "CLIENT_CERT": str(ca["client"]),
               "CLIENT_KEY": str(ca["client-key"])}  # fmt: skip
        alone, direct, _ = _run(tmp_path, env, looptap=False)
        assert alone["httpx"] == [200, "Paris"], direct.stdout + direct.stderr[-2000:]
        assert alone["curl"][0] == 0, alone
        got, proc, run = _run(tmp_path, env, looptap=True)
        peers = tools.peers
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert got == alone, (got, proc.stderr[-3000:])
    assert peers == ["agent-7"] * 4  # the agent's certificate reached the server, each time
    host = tools.url.removeprefix("https://")
    said = [line for line in proc.stderr.splitlines() if "client certificate" in line]
    assert len(said) == 1 and host in said[0] and "passes through untouched" in said[0], said
    notes = [
        json.loads(line) for line in run.read_text().splitlines() if '"passed-through"' in line
    ]
    assert [(n["host"], n["why"]) for n in notes] == [(host, "it asks for a client certificate")]
    assert not any(ex.tool for ex in read_records(run).exchanges)


def test_a_client_certificate_host_only_the_proxy_reaches_passes_through_it(
    tmp_path: Path,
) -> None:
    """An mTLS tool server only the corporate proxy reaches (``tools.internal``): passed through
    untouched, and through that proxy (mitmproxy's upstream tunnel under the raw relay, the
    proxy's credentials on its ``CONNECT``; which proxy, ``NO_PROXY`` included, as for every other
    connection: :meth:`UserProxy.route`), so the agent's calls with its certificate work as
    without looptap. On f29135f5 the connection was intercepted (the certificate never reached
    the server); on eac80643 it was passed through directly, and the name resolved nowhere."""
    ca = pki(tmp_path)
    with CorpProxy(tmp_path) as corp, TlsToolServer(ca, client_cert=True) as tools:
        url = tools.url.replace("127.0.0.1", "tools.internal")
        env = {"HTTPS_PROXY": corp.url, "NO_PROXY": "localhost", "TOOL_MTLS": url,
               "SSL_CERT_FILE": str(ca["ca"]), "CURL_CA_BUNDLE": str(ca["ca"]),
               "CLIENT_CERT": str(ca["client"]), "CLIENT_KEY": str(ca["client-key"])}  # fmt: skip
        alone, direct, _ = _run(tmp_path, env, looptap=False)
        assert alone["httpx"] == [200, "Paris"], direct.stdout + direct.stderr[-2000:]
        assert alone["curl"][0] == 0, alone
        asked_alone = len(corp.asked())
        got, proc, run = _run(tmp_path, env, looptap=True)
        asked = corp.asked()[asked_alone:]
        peers = tools.peers
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert got == alone, (got, proc.stderr[-3000:])
    assert peers == ["agent-7"] * 4  # the agent's certificate reached the server, each time
    host = url.removeprefix("https://")
    # through the proxy: the recorder's check, then each of the agent's two connections
    assert asked == [host] * 3, asked
    said = [line for line in proc.stderr.splitlines() if "client certificate" in line]
    assert len(said) == 1, proc.stderr[-3000:]
    assert f"passes through untouched, by your proxy http://127.0.0.1:{corp.port}," in said[0], said
    assert "passed through directly" not in proc.stderr and PASSWORD not in proc.stderr
    notes = [
        json.loads(line) for line in run.read_text().splitlines() if '"passed-through"' in line
    ]
    assert [(n["host"], n["why"]) for n in notes] == [(host, "it asks for a client certificate")]


def test_the_user_proxy_follows_no_proxy_and_the_scheme() -> None:
    """Which proxy a connection goes through (proxy/user_proxy.py), read as the agent's clients
    read the variables: the lower-case name first, ``ALL_PROXY`` for a scheme without its own,
    ``NO_PROXY``'s domains, networks and ports direct; a SOCKS proxy is said, not chained, and so
    is a stale looptap export (``LOOPTAP_RECORDER`` set, nothing listening at the proxy)."""
    code = """
import json
from looptap.proxy.user_proxy import from_environ
u = from_environ({"https_proxy": "http://a:1", "HTTPS_PROXY": "http://ignored:9",
                  "ALL_PROXY": "http://u:p@b:2", "no_proxy": ".corp.example,10.0.0.0/8,h.test:8080"})
u.own_ports = frozenset({4000})
r = lambda *a: (u.route(*a) or None) and u.route(*a).shown
print(json.dumps([r("https", "x.com", 443), r("http", "x.com", 80), r("https", "db.corp.example", 443),
                  r("http", "10.0.0.7", 80), r("http", "127.0.0.1", 4000), r("http", "127.0.0.1", 4001),
                  r("http", "h.test", 8080), r("http", "h.test", 80),
                  u.said(), from_environ({"ALL_PROXY": "socks5://s:1080"}).said(),
                  from_environ({"HTTPS_PROXY": f"http://127.0.0.1:{GONE}",
                                "LOOPTAP_RECORDER": "127.0.0.1:1"}).said()]))
"""  # noqa: E501
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # (bound, never listening: nothing answers there)
    code = code.replace("GONE", str(sock.getsockname()[1]))
    out = progress.run([str(PROXY_PYTHON), "-c", code], capture_output=True, text=True,
                       env=clean_env(), check=True)  # fmt: skip
    assert json.loads(out.stdout) == [
        "http://a:1", "http://b:2", None, None, None, "http://b:2", None, "http://b:2",
        ["upstream proxy: http://a:1 for https (from https_proxy); http://b:2 for http (from "
         "ALL_PROXY), NO_PROXY honoured"],
        ["ALL_PROXY is a socks5 proxy, which mitmproxy cannot forward through (http and https "
         "proxies only); the recorder connects directly"],
        [f"HTTPS_PROXY http://127.0.0.1:{sock.getsockname()[1]} is a looptap recorder that is "
         "gone (a stale export): not followed; the recorder connects directly"],
    ]  # fmt: skip
    sock.close()


def test_looptaps_own_https_calls_go_through_the_users_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What looptap sends live itself (:class:`cassettes.net.Upstream`, httpx: ``compare``, a
    replay server's direct calls) to an ``https`` upstream only the corporate proxy reaches goes
    through the proxy the environment names, with its credentials; a host ``NO_PROXY`` names goes
    direct. On f29135f5 no environment was consulted and the call could not connect."""
    import asyncio

    from looptap.cassettes.net import Upstream

    ca = pki(tmp_path)
    with CorpProxy(tmp_path) as corp, TlsToolServer(ca) as tools:
        for name, value in (("HTTPS_PROXY", corp.url), ("NO_PROXY", "localhost,127.0.0.1"),
                            ("SSL_CERT_FILE", str(ca["ca"]))):  # fmt: skip
            monkeypatch.setenv(name, value)

        async def get(base: str) -> tuple[int, bytes]:
            response = await Upstream(base).send("GET", "/weather?city=Paris", [], b"")
            return response.status, b"".join([p async for p in response.pieces()])

        internal = tools.url.replace("127.0.0.1", "tools.internal")
        through = asyncio.run(get(internal))
        direct = asyncio.run(get(tools.url))  # (127.0.0.1: in NO_PROXY)
        asked = corp.asked()
    assert through[0] == direct[0] == 200 and json.loads(through[1])["city"] == "Paris"
    assert asked == [internal.removeprefix("https://")]
