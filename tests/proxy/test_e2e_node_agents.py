"""End to end through the real recorder with Node clients and real coding agents.

    openai-node / Node fetch / Claude Code / Codex CLI  →  looptap run (mitmproxy, .venv-proxy)
                                                        →  tests.support.upstream (corpus responses)

Like ``test_e2e_sdks.py``: the real ``looptap run`` from the recorder's environment, the client as
its child process, a loopback fake upstream in this process. Nothing leaves 127.0.0.1.

The Node packages are not Python dependencies; they live in ``<repo>/.npm-agents`` (gitignored),
installed with::

    npm install --prefix .npm-agents openai @anthropic-ai/claude-code @openai/codex 'undici@^7'

(``LOOPTAP_NPM_AGENTS`` points elsewhere). Each test skips, saying which package is missing, when
``node`` or its package is absent.

What each client needs to stay offline (found by pointing it at a logging CONNECT proxy):

* **Claude Code**: ``ANTHROPIC_BASE_URL`` (the recorder's Anthropic listener) and
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``. Without the latter it opens CONNECTs to
  ``api.anthropic.com:443`` through ``HTTPS_PROXY`` for its event logging (6 per run; 3 with
  ``DISABLE_TELEMETRY=1`` alone). A fresh ``HOME`` holds its ``.claude.json``.
* **Codex CLI**: a ``model_providers`` entry with ``wire_api = "responses"`` (``"chat"`` is refused
  by 0.169: "`wire_api = "chat"` is no longer supported"), ``[features] plugins = false`` (else
  it syncs plugins: ``github.com``, ``api.github.com``, ``chatgpt.com``) and ``[analytics]
  enabled = false`` (else ``ab.chatgpt.com``).
* **Node 20 ``fetch``** ignores ``HTTPS_PROXY`` and ``NODE_USE_ENV_PROXY`` (MITMPROXY.md §5). What
  works on Node 20: undici's ``ProxyAgent``/``EnvHttpProxyAgent`` from the npm ``undici`` package,
  as the ``dispatcher`` of one call (built-in ``fetch`` or ``undici.fetch``, or openai-node's
  ``fetchOptions``) or installed with ``setGlobalDispatcher`` (the built-in ``fetch`` shares the
  global dispatcher slot), and what ``looptap run`` does with no change to the client: its
  ``NODE_OPTIONS=--require`` shim (cassettes/net/node_env_proxy.cjs) puts Node's own undici
  ``Agent`` (the one the built-in ``fetch`` uses) through the proxy.
"""

from __future__ import annotations

import datetime as dt
import inspect
import ipaddress
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]

from looptap.cassettes.parsing import RoundTrip, parse_all, parse_exchange  # noqa: E402
from looptap.cassettes.storage import RecordFile, read_records  # noqa: E402
from tests.clients.outcome import codex_wrapper  # noqa: E402
from tests.support import progress  # noqa: E402
from tests.support.harness import outputs  # noqa: E402
from tests.support.recorder import RECORDER, SCRUB, needs_recorder  # noqa: E402
from tests.support.upstream import FakeUpstream, Served  # noqa: E402

NPM = Path(os.environ.get("LOOPTAP_NPM_AGENTS") or REPO / ".npm-agents")
MODULES = NPM / "node_modules"
NODE = shutil.which("node")
INSTALL_HINT = (
    f"npm install --prefix {NPM} openai @anthropic-ai/claude-code @openai/codex @google/gemini-cli "
    "opencode-ai 'undici@^7' (.ci/run pins the versions)"
)

pytestmark = [needs_recorder]

#: Proxy, base-URL and key variables of the machine must not steer the clients or the recorder.
_SCRUB = (
    *SCRUB,
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "NODE_OPTIONS",
    "NODE_USE_ENV_PROXY",
)


def need(pkg: str, *, bin_name: str | None = None, node: bool = True) -> Path:
    """The installed package's directory (or its ``.bin`` entry), or skip saying how to install it.
    ``node``: the package runs on node (Claude Code's npm package ships a native executable)."""
    if node and NODE is None:
        pytest.skip(f"node is not on PATH (needed by {pkg})")
    path = MODULES / pkg
    if not (path / "package.json").is_file():
        pytest.skip(f"{pkg} is not installed in {MODULES} ({INSTALL_HINT})")
    if bin_name is None:
        return path
    exe = MODULES / ".bin" / bin_name
    if not exe.exists():
        pytest.skip(f"{pkg} is installed but {exe} is missing ({INSTALL_HINT})")
    return exe


def version_of(pkg: str) -> str:
    return str(json.loads((MODULES / pkg / "package.json").read_text())["version"])


# ---------------------------------------------------------------------------------------------
# Helpers


def run_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        **extra,
    )
    return env


def looptap_run(
    tmp_path: Path,
    confdir: Path,
    cmd: list[str],
    env: dict[str, str],
    *,
    upstream: FakeUpstream | None = None,
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "run.jsonl"
    argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(confdir)]
    if upstream is not None:
        for name in ("openai", "anthropic", "gemini"):
            argv += ["--upstream", f"{name}={upstream.url}"]
    argv += [*extra, "--", *cmd]
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {**env, "PYTHONPATH": str(REPO)}  # the recorder imports cassettes/ and proxy/ from here
    proc = progress.run(
        argv, env=env, capture_output=True, text=True, cwd=work, stdin=subprocess.DEVNULL
    )
    return proc, out


def explain(proc: subprocess.CompletedProcess[str], up: FakeUpstream | None = None) -> str:
    served = (
        ""
        if up is None
        else "\n--- served\n"
        + "\n".join(f"{s.method} {s.target} -> {s.status} ({s.scenario})" for s in up.served)
    )
    return (
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- "
        f"stderr\n{proc.stderr[-5000:]}{served}"
    )


def expected_view(s: Served) -> tuple[str, list[list[Any]]]:
    rt = parse_exchange(s.as_exchange())
    assert rt.response is not None, rt.analysis_errors
    return rt.response.text, [[c.name, c.arguments] for c in rt.response.tool_calls]


def load(out: Path) -> tuple[RecordFile, list[RoundTrip]]:
    cas = read_records(out)
    assert not cas.problems, [str(p) for p in cas.problems]
    return cas, parse_all(cas.exchanges)


def recorded_request_json(s: Served) -> Any:
    """The request body as the cassette should hold it: exactly what was sent (no credential
    travels in these bodies; session ids are identifiers and are kept)."""
    body = s.request_body.decode()
    return json.loads(body) if body else None


def assert_same_round_trip(ex: Any, rt: RoundTrip, s: Served) -> None:
    """The cassette's round trip is the one the upstream served, chunk for chunk, and complete."""
    where = f"seq {ex.seq} {ex.method} {ex.url} (served #{s.seq} {s.scenario} from {s.source})"
    assert urlsplit(ex.url).path == urlsplit(s.target).path, where
    assert ex.request_json() == recorded_request_json(s), where
    assert (rt.family, rt.stream, ex.status) == (s.family, s.stream, s.status), where
    if s.stream:
        assert [c for _, c in ex.response_chunks] == s.chunks, where
        offsets = [t for t, _ in ex.response_chunks]
        assert all(t is not None for t in offsets) and offsets == sorted(offsets), where
    else:
        assert json.loads(ex.response_body) == json.loads(s.body), where
    assert rt.response is not None and rt.response.complete is True, (
        where,
        rt.analysis_errors,
        rt.notes,
    )
    assert not rt.analysis_errors, (where, rt.analysis_errors)


def check_cassette(
    out: Path, served: list[Served], secret: str, proc: subprocess.CompletedProcess[str]
) -> list[RoundTrip]:
    """The cassette holds exactly the served LLM round trips, in order; the key is not on disk
    although the upstream received it."""
    cas, rts = load(out)
    assert len(cas.exchanges) == len(served), explain(proc)
    for ex, rt, s in zip(cas.exchanges, rts, served, strict=True):
        assert_same_round_trip(ex, rt, s)
    assert secret.encode() not in out.read_bytes(), f"the API key leaked into {out}"
    for s in served:
        values = " ".join(
            v for k, v in s.request_headers if k.lower() in ("authorization", "x-api-key")
        )
        assert secret in values, f"served #{s.seq} carried no API key: {s.request_headers}"
    assert f"{len(served)} round trip" in proc.stderr, explain(proc)  # looptap run's summary
    return rts


def tool_results(rt: RoundTrip) -> int:
    return sum(
        1
        for m in (rt.request.messages if rt.request else [])
        for p in m.parts
        if p.kind == "tool_result"
    )


# ---------------------------------------------------------------------------------------------
# openai-node in base-URL mode (OPENAI_BASE_URL from looptap run)


OPENAI_NODE_CLIENT = r"""
import { createRequire } from "node:module";
const require = createRequire(process.env.NPM_AGENTS + "/package.json");
const OpenAI = require("openai").default ?? require("openai");
const out = (call, text, calls = []) => console.log(JSON.stringify({call, text: text ?? "", tool_calls: calls}));
const c = new OpenAI({maxRetries: 0});  // base URL and key from the environment looptap run sets up
const ask = [{role: "user", content: "What is the capital of France?"}];

const r = await c.chat.completions.create({model: "gpt-4o", messages: ask});
out("chat", r.choices[0].message.content);

let s = await c.chat.completions.create({model: "gpt-4o", messages: ask, stream: true, stream_options: {include_usage: true}});
let t = ""; for await (const ch of s) t += ch.choices[0]?.delta?.content ?? "";
out("chat-stream", t);

const rr = await c.responses.create({model: "gpt-4o", input: "What is the capital of France?"});
out("responses", rr.output_text);

const st = c.responses.stream({model: "gpt-4o", input: "What is the capital of France?"});
const fin = await st.finalResponse();
out("responses-stream", fin.output_text);

// Two-turn agent loop over streamed chat: tool call, tool result, final answer.
const WEATHER = {type: "object", properties: {city: {type: "string"}}, required: ["city"]};
const tools = [{type: "function", function: {name: "get_weather", description: "Weather now", parameters: WEATHER}}];
const msgs = [{role: "user", content: "Weather in Paris?"}];
for (let turn = 0; turn < 4; turn++) {
  const st = c.chat.completions.stream({model: "gpt-4o", messages: msgs, tools}, {headers: {"X-Fake-Upstream": "tool_loop:1"}});
  const m = (await st.finalChatCompletion()).choices[0].message;
  const calls = m.tool_calls ?? [];
  out(`chat-loop-${turn}`, m.content, calls.map(x => [x.function.name, JSON.parse(x.function.arguments)]));
  if (!calls.length) break;
  msgs.push({role: "assistant", content: m.content ?? null, tool_calls: calls});
  for (const x of calls) msgs.push({role: "tool", tool_call_id: x.id, content: "sunny, 21 C"});
}
"""  # noqa: E501


def test_openai_node_base_url(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    need("openai")
    script = tmp_path / "client.mjs"
    script.write_text(OPENAI_NODE_CLIENT)
    env = run_env(tmp_path, OPENAI_API_KEY=secret, NPM_AGENTS=str(NPM))
    proc, out = looptap_run(
        tmp_path, confdir, [NODE or "node", str(script)], env, upstream=upstream
    )
    assert proc.returncode == 0, explain(proc, upstream)
    served = upstream.llm_served()
    assert served == upstream.served, "openai-node sent something besides the LLM calls"
    assert [(urlsplit(s.target).path, s.stream) for s in served] == [
        ("/v1/chat/completions", False),
        ("/v1/chat/completions", True),
        ("/v1/responses", False),
        ("/v1/responses", True),
        ("/v1/chat/completions", True),
        ("/v1/chat/completions", True),
    ]
    assert all(
        s.request_header("user-agent") == f"OpenAI/JS {version_of('openai')}" for s in served
    )
    printed = outputs(proc)
    assert len(printed) == len(served), explain(proc, upstream)
    for p, s in zip(printed, served, strict=True):
        text, calls = expected_view(s)
        assert (p["text"], p["tool_calls"]) == (text, calls), (p["call"], s.source)
    assert (
        printed[4]["tool_calls"] == [["get_weather", {"city": "value"}]]
        and printed[5]["tool_calls"] == []
    )
    rts = check_cassette(out, served, secret, proc)
    assert [tool_results(rt) for rt in rts[4:]] == [0, 1]


# ---------------------------------------------------------------------------------------------
# Node fetch through the forward proxy (HTTPS_PROXY from looptap run)


NODE_FETCH_CLIENT = r"""
import { createRequire } from "node:module";
const require = createRequire(process.env.NPM_AGENTS + "/package.json");
const undici = require("undici");
const OpenAI = require("openai").default ?? require("openai");
const U = process.env.TARGET;
const P = process.env.HTTPS_PROXY;
const headers = {"content-type": "application/json", "authorization": `Bearer ${process.env.OPENAI_API_KEY}`};
const req = (call, stream) => ({method: "POST", headers, body: JSON.stringify({model: "gpt-4o", stream, messages: [{role: "user", content: call}]})});
async function go(call, f) {
  try { const r = await f(); console.log(JSON.stringify({call, status: r.status, body: await r.text()})); }
  catch (e) { console.log(JSON.stringify({call, error: String(e), cause: String(e.cause?.code ?? e.cause)})); }
}
console.log(JSON.stringify({call: "env", node: process.version, proxy: P, no_proxy: process.env.NO_PROXY ?? null}));
// Node 20's fetch: no proxy support of its own (HTTPS_PROXY and NODE_USE_ENV_PROXY are ignored);
// through the proxy all the same under looptap run (its NODE_OPTIONS=--require shim).
await go("builtin", () => fetch(U + "/v1/chat/completions", req("builtin", false)));
// undici's ProxyAgent as the dispatcher of one built-in fetch call (a CONNECT tunnel).
await go("builtin+ProxyAgent", () => fetch(U + "/v1/chat/completions", {...req("builtin+ProxyAgent", true), dispatcher: new undici.ProxyAgent(P)}));
// undici's own fetch with EnvHttpProxyAgent (reads HTTP(S)_PROXY and NO_PROXY).
await go("undici+EnvHttpProxyAgent", () => undici.fetch(U + "/v1/chat/completions", {...req("undici+EnvHttpProxyAgent", false), dispatcher: new undici.EnvHttpProxyAgent()}));
// The global dispatcher: every later built-in fetch goes through the proxy.
undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
await go("builtin+setGlobalDispatcher", () => fetch(U + "/v1/chat/completions", req("builtin+setGlobalDispatcher", true)));
// openai-node against the real URL, proxied through fetchOptions.
const c = new OpenAI({baseURL: U + "/v1", maxRetries: 0, fetchOptions: {dispatcher: new undici.ProxyAgent(P)}});
const s = await c.chat.completions.create({model: "gpt-4o", messages: [{role: "user", content: "openai-node+ProxyAgent"}], stream: true});
let t = ""; for await (const ch of s) t += ch.choices[0]?.delta?.content ?? "";
console.log(JSON.stringify({call: "openai-node+ProxyAgent", status: 200, body: t}));
"""  # noqa: E501

PROXIED = [
    "builtin+ProxyAgent",
    "undici+EnvHttpProxyAgent",
    "builtin+setGlobalDispatcher",
    "openai-node+ProxyAgent",
]


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 nobody trusts: the upstream of the HTTPS case."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "looptap fake upstream")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    crt, pem = tmp_path / "upstream.crt", tmp_path / "upstream.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return crt, pem


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_node_fetch_through_forward_proxy(
    scheme: str, tmp_path: Path, confdir: Path, secret: str
) -> None:
    """http: the target is plain HTTP, tunnelled through the forward proxy. https: the upstream has
    a self-signed certificate (the recorder runs with --ssl-insecure); Node accepts mitmproxy's
    certificate through NODE_EXTRA_CA_CERTS, which looptap run exports.

    looptap run exports NO_PROXY=127.0.0.1,localhost (its own listeners are there); the target is
    on 127.0.0.1 too, so the client here runs with NO_PROXY emptied, as for a remote API."""
    need("openai")
    need("undici")
    if scheme == "https" and "tls" not in inspect.signature(FakeUpstream).parameters:
        pytest.skip("this tests.support.upstream.FakeUpstream cannot serve HTTPS (no tls= option)")
    tls = self_signed(tmp_path) if scheme == "https" else None
    kwargs: dict[str, Any] = {"tls": tls} if tls else {}  # tls= is new in tests.support.upstream
    with FakeUpstream(delay=0.01, **kwargs) as up:
        script = tmp_path / "client.mjs"
        script.write_text(NODE_FETCH_CLIENT)
        env = run_env(tmp_path, OPENAI_API_KEY=secret, NPM_AGENTS=str(NPM), TARGET=up.url)
        cmd = ["env", "NO_PROXY=", "no_proxy=", NODE or "node", str(script)]
        extra = ("--record-host", "127.0.0.1", *(("--ssl-insecure",) if tls else ()))
        proc, out = looptap_run(tmp_path, confdir, cmd, env, extra=extra)
    assert proc.returncode == 0, explain(proc, up)
    printed = {p["call"]: p for p in outputs(proc)}
    node_version = printed["env"]["node"]
    for call in PROXIED:
        assert printed[call].get("status") == 200, (call, printed[call])
    # the plain built-in fetch through the proxy too, on every Node: NODE_USE_ENV_PROXY from 22.21
    # and 24, looptap run's NODE_OPTIONS shim before (Node 20); straight to the upstream (https:
    # whose certificate nobody trusts) it failed, and was not recorded, before the shim
    assert printed["builtin"].get("status") == 200, printed["builtin"]

    by_call = {s.request_json()["messages"][0]["content"]: s for s in up.llm_served()}
    recorded_calls = ["builtin", *PROXIED]
    assert (set(by_call) - {"builtin"}) == set(PROXIED)
    for call in PROXIED:
        assert by_call[call].complete, call
    streamed = {"builtin+ProxyAgent", "builtin+setGlobalDispatcher", "openai-node+ProxyAgent"}
    assert {c for c in PROXIED if by_call[c].stream} == streamed
    for call in ("builtin+ProxyAgent", "builtin+setGlobalDispatcher", "undici+EnvHttpProxyAgent"):
        assert printed[call]["body"].encode() == by_call[call].body, call

    cas, rts = load(out)
    recorded = [ex.request_json()["messages"][0]["content"] for ex in cas.exchanges]
    assert sorted(recorded) == sorted(recorded_calls), (node_version, recorded, explain(proc))
    for ex, rt in zip(cas.exchanges, rts, strict=True):
        s = by_call[ex.request_json()["messages"][0]["content"]]
        assert (
            urlsplit(ex.url).scheme == scheme and urlsplit(ex.url).netloc == urlsplit(up.url).netloc
        ), ex.url
        assert_same_round_trip(ex, rt, s)
    assert secret.encode() not in out.read_bytes()


# ---------------------------------------------------------------------------------------------
# Claude Code (`claude -p`) in base-URL mode (ANTHROPIC_BASE_URL from looptap run)


#: Keeps Claude Code to the Messages API: with only DISABLE_TELEMETRY it still opens CONNECTs to
#: api.anthropic.com through HTTPS_PROXY; CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC stops them all.
CLAUDE_OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}


@pytest.mark.parametrize(
    ("scenario", "args", "turns"),
    [
        pytest.param(None, [], 1, id="text"),
        # Only the Read tool offered, so the fake upstream's tool call reads a file ("value", which
        # does not exist: Claude Code answers with an error tool_result) and the loop ends in text.
        pytest.param("tool_loop:1", ["--tools", "Read"], 2, id="tool_loop"),
    ],
)
def test_claude_code_print(
    scenario: str | None,
    args: list[str],
    turns: int,
    tmp_path: Path,
    confdir: Path,
    upstream: FakeUpstream,
    secret: str,
) -> None:
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    env = run_env(tmp_path, ANTHROPIC_API_KEY=secret, **CLAUDE_OFFLINE)
    if scenario:
        env["ANTHROPIC_CUSTOM_HEADERS"] = f"X-Fake-Upstream: {scenario}"
    cmd = [
        str(claude),
        "-p",
        "Read notes.txt and summarise it.",
        "--model",
        "claude-sonnet-4-5",
        "--output-format",
        "json",
        "--no-session-persistence",
        *args,
    ]
    proc, out = looptap_run(tmp_path, confdir, cmd, env, upstream=upstream)
    assert proc.returncode == 0, explain(proc, upstream)
    result = outputs(proc)[-1]
    assert (
        result["type"] == "result"
        and result["subtype"] == "success"
        and result["is_error"] is False
    ), result
    assert result["num_turns"] == turns, result
    served = upstream.llm_served()
    assert served == upstream.served, (
        f"Claude Code sent more than Messages calls: {[s.target for s in upstream.served]}"
    )
    assert len(served) == turns, explain(proc, upstream)
    version = version_of("@anthropic-ai/claude-code")
    for s in served:
        assert (s.method, s.target, s.family, s.stream) == (
            "POST",
            "/v1/messages?beta=true",
            "anthropic",
            True,
        )
        assert (s.request_header("user-agent") or "").startswith(f"claude-cli/{version} "), (
            s.request_headers
        )
        assert (
            s.request_header("x-api-key") == secret
            and s.request_header("anthropic-version") == "2023-06-01"
        )
        assert "claude-code-20250219" in (s.request_header("anthropic-beta") or "")
        assert s.request_json()["model"] == "claude-sonnet-4-5"
    assert result["result"] == expected_view(served[-1])[0]
    rts = check_cassette(out, served, secret, proc)
    assert [tool_results(rt) for rt in rts] == list(range(turns))
    if turns == 2:
        first = rts[0]
        assert first.request is not None and first.response is not None
        assert [t.name for t in first.request.tools] == ["Read"]
        assert [(c.name, c.arguments) for c in first.response.tool_calls] == [
            ("Read", {"file_path": "value"})
        ]


# ---------------------------------------------------------------------------------------------
# Codex CLI (`codex exec`) with a custom model provider pointing at the recorder's OpenAI listener


CODEX_CONFIG = """\
model = "gpt-5-codex"
model_provider = "looptap"

# Off: they contact ab.chatgpt.com (analytics) and github.com, api.github.com, chatgpt.com
# (plugin catalogue sync) through HTTPS_PROXY.
[analytics]
enabled = false

[features]
plugins = false

[model_providers.looptap]
name = "looptap recorder"
base_url = "{base_url}"
env_key = "LOOPTAP_CODEX_KEY"
wire_api = "responses"
supports_websockets = false
{headers}
"""


@pytest.mark.parametrize(
    ("scenario", "turns"),
    [
        pytest.param(None, 1, id="text"),
        # Codex offers its shell tool first: the fake upstream's call runs `value` (not a command:
        # exit 127) in Codex's read-only sandbox, and the loop ends in text.
        pytest.param("tool_loop:1", 2, id="tool_loop"),
    ],
)
def test_codex_exec(
    scenario: str | None,
    turns: int,
    tmp_path: Path,
    confdir: Path,
    upstream: FakeUpstream,
    secret: str,
) -> None:
    codex = need("@openai/codex", bin_name="codex")
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    # looptap run picks the listener's port at start-up and exports it as OPENAI_BASE_URL; Codex
    # reads base_url from config.toml only, so a shell wrapper writes the file from the variable.
    headers = f'http_headers = {{ "X-Fake-Upstream" = "{scenario}" }}' if scenario else ""
    template = CODEX_CONFIG.format(base_url="@OPENAI_BASE_URL@", headers=headers)
    wrapper = codex_wrapper(tmp_path, codex, template)
    env = run_env(tmp_path, CODEX_HOME=str(codex_home), LOOPTAP_CODEX_KEY=secret)
    cmd = [str(wrapper), "exec", "--skip-git-repo-check", "What is the capital of France?"]
    proc, out = looptap_run(tmp_path, confdir, cmd, env, upstream=upstream)
    assert proc.returncode == 0, explain(proc, upstream)
    config = (codex_home / "config.toml").read_text()
    assert re.search(r'base_url = "http://127\.0\.0\.1:\d+/v1"', config), config
    served = upstream.llm_served()
    assert served == upstream.served, (
        f"Codex sent more than Responses calls: {[s.target for s in upstream.served]}"
    )
    assert len(served) == turns, explain(proc, upstream)
    for s in served:
        assert (s.method, s.target, s.family, s.stream) == (
            "POST",
            "/v1/responses",
            "openai_responses",
            True,
        )
        assert s.request_header("authorization") == f"Bearer {secret}"
        assert s.request_header("accept") == "text/event-stream"
        body = s.request_json()
        assert (
            body["model"] == "gpt-5-codex"
            and body["stream"] is True
            and "previous_response_id" not in body
        )
    final = expected_view(served[-1])[0]
    assert final and final in proc.stdout, explain(proc, upstream)
    rts = check_cassette(out, served, secret, proc)
    assert [tool_results(rt) for rt in rts] == list(range(turns))
    if turns == 2:
        first = rts[0]
        assert first.request is not None and first.response is not None
        offered = [t.name for t in first.request.tools if t.kind == "function"]
        assert [c.name for c in first.response.tool_calls] == offered[:1], offered
