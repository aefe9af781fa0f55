"""Never break a tool (issue 91, item 2): an agent whose HTTPS tool server (127.0.0.1, a
certificate from a private CA made here with OpenSSL's command line) is trusted through its
environment runs unchanged under the real ``looptap run``, its tool's HTTP recorded, 0 C findings.

The matrix, each client with each variable it reads (checked first without looptap: the agent
works): requests 2.34.2 (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``), httpx 0.28.1
(``SSL_CERT_FILE``, ``SSL_CERT_DIR``), aiohttp 3.14.5 with ``trust_env=True`` (``SSL_CERT_FILE``,
``SSL_CERT_DIR``: OpenSSL's defaults), all from ``.venv-clients``, and Node 20's built-in
``fetch`` (``NODE_EXTRA_CA_CERTS``). The model is a scripted Chat Completions server
(:class:`~tests.support.scripted.ScriptedUpstream`) the Python agents reach with the openai SDK,
the Node agent with ``fetch``.

And a CA the agent trusts in its code alone (requests' ``verify=`` a path): the recorder cannot
verify that server, so its traffic passes through untouched (said once, by host), and the agent
runs as it does without looptap. On c86d115d every one of these failed: mitmproxy verified the tool
server against certifi, and the agent got a 502 ("Certificate verify failed") it never had.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import random
import shutil
import ssl
import subprocess
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange
from tests.proxy.test_e2e_tool_http import CLIENTS_PYTHON, NODE, ToolServer
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream
from tests.support.tls import private_ca

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command"),
]


#: What names the CAs an agent trusts (proxy/trust.py).
CA_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
           "NODE_EXTRA_CA_CERTS")  # fmt: skip


class PrivateToolServer(ToolServer):
    """The weather API over HTTPS, its certificate signed by the private CA."""

    def __init__(self, ca: dict[str, Path]) -> None:
        super().__init__()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ca["leaf"], ca["leaf-key"])
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = self.url.replace("http://", "https://")


def route(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        return Reply.tool("get_weather", {"city": "Paris"})
    return Reply.say("It is clear in Paris.")


PY_AGENT = """
import asyncio, hashlib, json, os, sys
from openai import OpenAI

VERIFY = os.environ.get("TOOL_VERIFY")

def get_weather(base, client, city):
    url = base + "/weather?city=" + city
    if client == "requests":
        import requests
        r = requests.get(url, **({"verify": VERIFY} if VERIFY else {}))
        r.raise_for_status()
        return r.content
    if client == "httpx":
        import httpx
        r = httpx.get(url)
        r.raise_for_status()
        return r.content
    import aiohttp
    async def go():
        async with aiohttp.ClientSession(trust_env=os.environ.get("TRUST_ENV") != "0") as s:
            async with s.get(url) as r:
                r.raise_for_status()
                return await r.read()
    return asyncio.run(go())

client = OpenAI()
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
# One conversation per tool server (TOOL_URL and TOOL_CLIENT: space-separated, paired).
for base, how in zip(os.environ["TOOL_URL"].split(), os.environ["TOOL_CLIENT"].split()):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    for _ in range(3):
        msg = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
        if not msg.tool_calls:
            print("answer:", msg.content)
            break
        messages.append(msg.model_dump(exclude_none=True))
        for tc in msg.tool_calls:
            got = get_weather(base, how, **json.loads(tc.function.arguments))
            digest = f"{len(got)} {hashlib.sha256(got).hexdigest()}"
            print("tool", base, digest)  # (what reached the agent, every byte)
            messages.append({"role": "tool", "tool_call_id": tc.id,
                             "content": got.decode() if len(got) < 1 << 16 else digest})
"""  # noqa: E501

NODE_AGENT = """
const crypto = require("crypto");
const base = process.env.OPENAI_BASE_URL.replace(/\\/$/, "");
const tools = [{type: "function", function: {name: "get_weather", parameters: {
  type: "object", properties: {city: {type: "string"}}}}}];
async function converse(toolUrl) {
  const messages = [{role: "user", content: "Weather in Paris?"}];
  for (let i = 0; i < 3; i++) {
    const r = await fetch(base + "/chat/completions", {method: "POST",
      headers: {"content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY},
      body: JSON.stringify({model: "gpt-4o", messages, tools})});
    const msg = (await r.json()).choices[0].message;
    if (!msg.tool_calls) { console.log("answer: " + msg.content); return; }
    messages.push(msg);
    for (const tc of msg.tool_calls) {
      const city = JSON.parse(tc.function.arguments).city;
      const t = await fetch(toolUrl + "/weather?city=" + city);
      if (!t.ok) throw new Error("tool " + t.status);
      const got = Buffer.from(await t.arrayBuffer());
      const digest = got.length + " " + crypto.createHash("sha256").update(got).digest("hex");
      console.log("tool " + toolUrl + " " + digest);  // (what reached the agent, every byte)
      messages.push({role: "tool", tool_call_id: tc.id, content: got.length < 65536 ? got.toString() : digest});
    }
  }
}
async function main() {  // one conversation per tool server (TOOL_URL: space-separated)
  for (const url of process.env.TOOL_URL.split(" ")) await converse(url);
}
main().catch((e) => { console.error(String(e), e.cause ? String(e.cause) : ""); process.exit(1); });
"""  # noqa: E501

#: (client, the variable it trusts the CA through).
MATRIX = [
    ("requests", "REQUESTS_CA_BUNDLE"), ("requests", "CURL_CA_BUNDLE"),
    ("httpx", "SSL_CERT_FILE"), ("httpx", "SSL_CERT_DIR"),
    ("aiohttp", "SSL_CERT_FILE"), ("aiohttp", "SSL_CERT_DIR"),
    ("node", "NODE_EXTRA_CA_CERTS"),
]  # fmt: skip


def _agent(tmp: Path, client: str, fake: ScriptedUpstream, tool_url: str, env: dict[str, str],
           looptap: bool, *flags: str,
           ) -> tuple[subprocess.CompletedProcess[str], Path]:  # fmt: skip
    node = client.split()[0] == "node"
    script = tmp / ("agent.cjs" if node else "agent.py")
    script.write_text(NODE_AGENT if node else PY_AGENT)
    command = [NODE or "node" if node else str(CLIENTS_PYTHON), str(script)]
    run = tmp / "run.jsonl"
    base = {"TOOL_URL": tool_url, "TOOL_CLIENT": client, "OPENAI_API_KEY": "sk-test-trust"}
    if looptap:
        command = [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp / "conf"),
                   "--upstream", f"openai={fake.url}", *flags, "--", *command]  # fmt: skip
        base["LOOPTAP_PROXY_PYTHON"] = str(PROXY_PYTHON)
    else:
        base["OPENAI_BASE_URL"] = fake.url + "/v1"
    scrub = (*CA_VARS, "AWS_CA_BUNDLE", "NIX_SSL_CERT_FILE")  # (this machine sets them all)
    proc = progress.run(command, env=clean_env(scrub=scrub, **base, **env), capture_output=True,
                        text=True, cwd=tmp)  # fmt: skip
    return proc, run


def _c_findings(run: Path) -> list[str]:
    read = open_run(run)
    return [f.code for f in read.analysis.findings if f.code.startswith("C.")]


@pytest.mark.parametrize(("client", "var"), MATRIX)
def test_a_tool_trusting_a_private_ca_runs_unchanged(client: str, var: str, tmp_path: Path) -> None:
    if client == "node" and NODE is None:
        pytest.skip("no node")
    ca = private_ca(tmp_path)
    env = {var: str(ca["dir"] if var == "SSL_CERT_DIR" else ca["ca"])}
    with ScriptedUpstream(route) as fake, PrivateToolServer(ca) as tools:
        direct, _ = _agent(tmp_path, client, fake, tools.url, env, looptap=False)
        assert direct.returncode == 0, direct.stdout + direct.stderr[-2000:]  # (it works alone)
        proc, run = _agent(tmp_path, client, fake, tools.url, env, looptap=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: It is clear in Paris." in proc.stdout
    assert len(tools.seen) == 2
    tool = [ex for ex in read_records(run).exchanges if ex.tool]
    assert [(ex.status, ex.transport_error) for ex in tool] == [(200, None)]  # recorded, verified
    assert json.loads(tool[0].response_body)["city"] == "Paris"
    assert _c_findings(run) == []
    assert "cannot verify" not in proc.stderr


def test_a_server_the_recorder_cannot_verify_passes_through_untouched(tmp_path: Path) -> None:
    """The CA is the agent's in its code only (``requests.get(url, verify=path)``): the recorder
    cannot know it. The connection passes through (mitmproxy's ``ignore_connection``), the agent
    verifies the server itself and gets its answer; stderr names the host once."""
    ca = private_ca(tmp_path)
    env = {"TOOL_VERIFY": str(ca["ca"])}
    with ScriptedUpstream(route) as fake, PrivateToolServer(ca) as tools:
        proc, run = _agent(tmp_path, "requests", fake, tools.url, env, looptap=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: It is clear in Paris." in proc.stdout and len(tools.seen) == 1
    host = tools.url.removeprefix("https://")
    said = [line for line in proc.stderr.splitlines() if "cannot verify" in line]
    assert len(said) == 1 and host in said[0] and "passes through untouched" in said[0], said
    assert [ex.tool for ex in read_records(run).exchanges] == [False, False]
    assert _c_findings(run) == []


def test_a_loopback_tool_server_is_recorded_by_default(tmp_path: Path) -> None:
    """Issue 91, item 3: no flag, a plain-HTTP tool server on 127.0.0.1 (requests 2.34.2, httpx
    0.28.1): its call is recorded and linked, and the run's summary says nothing unseen. On
    c86d115d ``NO_PROXY`` held the loopback and the call went unseen, unsaid."""
    for client in ("requests", "httpx"):
        where = tmp_path / client
        where.mkdir()
        with ScriptedUpstream(route) as fake, ToolServer() as tools:
            proc, run = _agent(where, client, fake, tools.url, {}, True)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        tool = [ex for ex in read_records(run).exchanges if ex.tool]
        assert [ex.status for ex in tool] == [200], client
        assert "no tool HTTP seen" not in proc.stderr


def test_the_summary_says_tool_calls_ran_with_no_tool_http_seen(tmp_path: Path) -> None:
    """aiohttp's default ``ClientSession()`` (``trust_env=False``) ignores the proxy variables,
    and ``--no-tool-http-loopback`` leaves the loopback direct: the tool call runs unseen, and the
    run's summary says how many and how to see them. On c86d115d nothing said it."""
    cases = {
        "aiohttp-default": ("aiohttp", {"TRUST_ENV": "0"}, (), "aiohttp without"),
        "opted-out": ("requests", {}, ("--no-tool-http-loopback",), "--no-tool-http-loopback"),
        "off": ("requests", {}, ("--no-tool-http",), "--no-tool-http"),
    }
    for name, (client, env, flags, how) in cases.items():
        where = tmp_path / name
        where.mkdir()
        with ScriptedUpstream(route) as fake, ToolServer() as tools:
            proc, run = _agent(where, client, fake, tools.url, env, True, *flags)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        assert len(tools.seen) == 1 and not any(ex.tool for ex in read_records(run).exchanges)
        said = [line for line in proc.stderr.splitlines() if "no tool HTTP seen" in line]
        assert len(said) == 1 and "1 tool call ran with no tool HTTP seen" in said[0], name
        assert how in said[0], (name, said)


@functools.cache
def _answer() -> bytes:
    """The tool's JSON answer: random digits so that it does not shrink much (2.8 MB, each
    encoding's compressed form just over 1 MiB: the smallest that crosses the bound). Digits, not
    base64: the recorder's secret scan reads random base64 about 5x slower (2.6 s a MiB at load
    20), and twelve such answers kept ``looptap run`` busy 86 s after its agent's end."""
    rnd = random.Random(91)
    items = [{"id": i, "v": "".join(rnd.choices("0123456789", k=64))} for i in range(33_000)]
    return json.dumps({"city": "Paris", "items": items}).encode()


@functools.cache
def _packed(encoding: str) -> bytes:
    import brotli
    import zstandard

    pack = {
        "gzip": gzip.compress,
        "deflate": zlib.compress,
        "br": lambda b: brotli.compress(b, quality=5),  # (a server's dynamic-content level)
        "zstd": zstandard.ZstdCompressor().compress,
    }[encoding]
    packed: bytes = pack(_answer())
    assert len(packed) > 1 << 20, (encoding, len(packed))
    return packed


class GzipToolServer(ToolServer):
    """``/weather`` answered with a JSON body over 1 MiB once compressed (``Content-Encoding:``
    ``encoding``, :func:`_answer`), framed by ``framing``: a ``content-length``, the connection's
    close (HTTP/1.0), or HTTP/1.1 ``chunked`` transfer-encoding."""

    def __init__(self, framing: str, encoding: str = "gzip") -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        super().__init__()
        self.body = _answer()
        packed = _packed(encoding)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if framing == "chunked" else "HTTP/1.0"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer.seen.append(("GET", self.path, None))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-encoding", encoding)
                if framing == "length":
                    self.send_header("content-length", str(len(packed)))
                if framing == "chunked":
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for i in range(0, len(packed), 1 << 16):  # (as a server streams it)
                    piece = packed[i : i + (1 << 16)]
                    if framing == "chunked":
                        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
                    self.wfile.write(piece)
                if framing == "chunked":
                    self.wfile.write(b"0\r\n\r\n")

        self.server.server_close()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)


#: Every form of a compressed tool answer over 1 MiB (client, Content-Encoding, framing): gzip
#: framed by a length or the connection's close (session 46), chunked transfer-encoding, brotli,
#: zstd and deflate, and the httpx, aiohttp and Node clients (each reads and decodes the answer
#: itself; the recorder's tee keeps the first MiB, the writer decodes it).
GZIP = [("requests", "gzip", "length"), ("requests", "gzip", "close")]
FORMS = [
    ("requests", "gzip", "chunked"), ("requests", "deflate", "chunked"),
    ("requests", "br", "length"), ("requests", "br", "chunked"),
    ("requests", "zstd", "length"), ("requests", "zstd", "chunked"),
    ("httpx", "gzip", "chunked"), ("httpx", "gzip", "length"),
    ("aiohttp", "gzip", "chunked"), ("aiohttp", "gzip", "length"),
    ("node", "gzip", "chunked"), ("node", "gzip", "length"),
]  # fmt: skip


@dataclass
class Form:
    """One form's share of its agent's run: the run's process, the tool exchanges recorded for
    its server, and the server (its answer, the requests it saw)."""

    proc: subprocess.CompletedProcess[str]
    tool: list[Exchange]
    server: GzipToolServer


@pytest.fixture(scope="module")
def compressed(tmp_path_factory: pytest.TempPathFactory) -> Callable[[tuple[str, ...]], Form]:
    """Record once, read per form: one ``looptap run`` of the Python agent carries every Python
    client's form (one conversation and one tool server each, in turn), one of the Node agent
    the Node forms; each form's exchange is told apart by its server's port."""
    runs: dict[bool, dict[tuple[str, ...], Form]] = {}

    def recorded(form: tuple[str, ...]) -> Form:
        node = form[0] == "node"
        if node not in runs:
            forms = [f for f in GZIP + FORMS if (f[0] == "node") == node]
            tmp = tmp_path_factory.mktemp("forms")
            with contextlib.ExitStack() as stack:
                fake = stack.enter_context(ScriptedUpstream(route))
                servers = [GzipToolServer(f[2], f[1]) for f in forms]
                for server in servers:
                    stack.enter_context(server)
                urls, clients = " ".join(s.url for s in servers), " ".join(f[0] for f in forms)
                proc, run = _agent(tmp, clients, fake, urls, {}, True)
            exchanges = [ex for ex in read_records(run).exchanges if ex.tool]
            runs[node] = {
                f: Form(proc, [ex for ex in exchanges if ex.url.startswith(s.url + "/")], s)
                for f, s in zip(forms, servers, strict=True)
            }
        return runs[node][form]

    return recorded


def _kept_its_first_mib(form: Form) -> None:
    proc, server = form.proc, form.server
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    # (the agent's call of this server returned; what its client decoded is its own: requests 2.34.2
    # leaves br as sent without the brotli package, urllib3 2.8.0 decodes 1.2 of zstd's 2 MB)
    assert any(line.startswith(f"tool {server.url} ") for line in proc.stdout.splitlines())
    assert len(server.seen) == 1, server.seen
    (tool,) = form.tool
    got = tool.response_body
    assert len(got) >= 1 << 20, (len(got), tool.notes)
    assert server.body.startswith(got), (got[:80], tool.notes)
    assert any("went to the client" in n for n in tool.notes), tool.notes


@pytest.mark.parametrize("framing", ["length", "close"], ids=["content-length", "until-close"])
def test_a_gzip_tool_answer_over_1_mib_keeps_its_first_mib(
    compressed: Callable[[tuple[str, ...]], Form], framing: str
) -> None:
    """Issue 91, item 5: a tool's gzip answer whose compressed body passes the 1 MiB bound is kept
    decoded, its start, cut before a quote, with a note; on c86d115d it was kept as 0 bytes."""
    _kept_its_first_mib(compressed(("requests", "gzip", framing)))


@pytest.mark.parametrize(("client", "encoding", "framing"), FORMS)
def test_a_compressed_tool_answer_over_1_mib_keeps_its_first_mib_in_every_form(
    compressed: Callable[[tuple[str, ...]], Form], client: str, encoding: str, framing: str
) -> None:
    """Issue 91, item 5 (the forms session 46 did not try): whatever the framing, the encoding
    and the client, the tool's answer is kept decoded, its first MiB at least, with the note of
    how many bytes went to the client; never 0 bytes."""
    if client == "node" and NODE is None:
        pytest.skip("no node")
    _kept_its_first_mib(compressed((client, encoding, framing)))


def test_a_node_options_with_a_newline_is_said(tmp_path: Path) -> None:
    """Issue 91, item 5: the user's ``NODE_OPTIONS`` holds a newline, so looptap's ``--require``
    shim cannot be added to it (the value is left as given): ``looptap run`` says so, once, and
    what it costs, never the value. On c86d115d nothing was said, and the Node agent's
    ``fetch`` tools went past the recorder unseen."""
    if NODE is None:
        pytest.skip("no node")
    users = "--max-old-space-size=300\n--title=agent-secret-title"
    with ScriptedUpstream(route) as fake, ToolServer() as tools:
        proc, _ = _agent(tmp_path, "node", fake, tools.url, {"NODE_OPTIONS": users}, True)
    said = [line for line in proc.stderr.splitlines() if "NODE_OPTIONS not extended" in line]
    assert len(said) == 1 and "control character" in said[0], proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("looptap:")]
    assert not any("agent-secret-title" in line for line in ours)  # (node says it itself)


class SlowTlsToolServer(ToolServer):
    """The weather API over HTTPS (the private CA's leaf), each connection's handshake answered
    only after ``delay`` seconds (a slow server); :attr:`events` says, in order, each connection
    accepted and each handshake done (by the connection's number)."""

    def __init__(self, ca: dict[str, Path], delay: float) -> None:
        import time

        super().__init__()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ca["leaf"], ca["leaf-key"])
        self.url = self.url.replace("http://", "https://")
        self.events: list[tuple[str, int]] = []
        events, server = self.events, self.server
        plain = server.finish_request

        def finish_request(request: Any, client_address: Any) -> None:
            n = sum(1 for e in events if e[0] == "accept") + 1
            events.append(("accept", n))
            time.sleep(delay)  # (the server's slowness, not a test's decision)
            try:
                tls = ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):  # (mitmproxy's eager connection, closed unused)
                events.append(("failed", n))
                return
            events.append(("handshake", n))
            plain(tls, client_address)

        server.finish_request = finish_request  # type: ignore[method-assign]


def test_a_slow_tls_server_held_for_the_trust_probe_is_said(tmp_path: Path) -> None:
    """Issue 91 (the trust probe's delay): a tool server that takes 3 s to answer each TLS
    handshake: the agent's first call is held for the recorder's check (never intercepted
    unchecked: a server the recorder cannot verify would then fail the call), stderr says so once
    by host, and the call is recorded (200) with no C finding. On c86d115d the connection waited
    for the probe's whole handshake (up to 10 s), silently."""
    ca = private_ca(tmp_path)
    with ScriptedUpstream(route) as fake, SlowTlsToolServer(ca, 3.0) as tools:
        env = {"REQUESTS_CA_BUNDLE": str(ca["ca"])}
        proc, run = _agent(tmp_path, "requests", fake, tools.url, env, looptap=True)
        events = list(tools.events)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert ("handshake", 1) in events or ("handshake", 2) in events, events
    said = [line for line in proc.stderr.splitlines() if "TLS check" in line]
    assert len(said) == 1 and "was held for it" in said[0], proc.stderr[-3000:]
    tool = [ex for ex in read_records(run).exchanges if ex.tool]
    assert [(ex.status, ex.transport_error) for ex in tool] == [(200, None)]
    assert not _c_findings(run)
