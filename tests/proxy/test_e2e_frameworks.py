"""End to end through the real recorder: agent frameworks, and the forward proxy over HTTPS.

    client process (pydantic-ai / openai-agents / openai SDK / curl)
        →  looptap run (mitmproxy, .venv-proxy)
        →  tests.support.upstream (recorded corpus responses; plain HTTP, or HTTPS with a
           self-signed certificate made by this module)

1. Two agent frameworks, pydantic-ai (Chat Completions) and openai-agents (Responses), each in its
   own process, run a real multi-turn tool loop through ``looptap run``'s reverse listener for
   OpenAI (they read ``OPENAI_BASE_URL``; nothing in their code names the proxy), once plainly and
   once streamed. The fake upstream's default scenario is ``tool_loop:1``: a call of the offered
   tool, then a final text once the request carries the tool's result. Each agent run must be one
   conversation of two round trips whose second request pairs the result with turn 0's call.
2. The forward proxy over HTTPS, the mode for clients that only honour ``HTTPS_PROXY``: the
   upstream serves TLS with a certificate nobody trusts, the recorder intercepts ``127.0.0.1``
   (``--record-host``) and does not verify the upstream (``--ssl-insecure``), and the clients trust
   only the recorder's CA bundle (``SSL_CERT_FILE`` / ``--cacert``). A client that succeeds has
   therefore talked TLS to mitmproxy with a certificate signed by its CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]

from looptap.cassettes.analysis import RunAnalysis, Severity, analyse  # noqa: E402
from looptap.cassettes.parsing import (  # noqa: E402
    RoundTrip,
    parse_all,
    parse_exchange,
)
from looptap.cassettes.storage import RecordFile, read_records  # noqa: E402
from tests.support import progress  # noqa: E402
from tests.support.harness import outputs  # noqa: E402
from tests.support.recorder import RECORDER, SCRUB, needs_recorder  # noqa: E402
from tests.support.upstream import FakeUpstream, Served  # noqa: E402

CLIENT_PYTHON = sys.executable  # the test environment: openai, pydantic-ai, openai-agents
HAVE_CURL = shutil.which("curl") is not None

pytestmark = [needs_recorder]

#: Proxy, trust-store and base-URL variables of the machine must not steer the clients or the
#: recorder.
_SCRUB = (
    *SCRUB,
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "OPENAI_AGENTS_DISABLE_TRACING",
    "LOGFIRE_TOKEN",
)


# ---------------------------------------------------------------------------------------------
# Helpers


def base_env(secret: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    env.update(OPENAI_API_KEY=secret, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
    return env


def looptap_run(
    tmp_path: Path,
    confdir: Path,
    secret: str,
    cmd: list[str],
    *,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "run.jsonl"
    argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(confdir), *extra, "--", *cmd]
    proc = progress.run(
        argv, env={**base_env(secret), **(env or {})}, capture_output=True, text=True, cwd=tmp_path
    )
    return proc, out


def python_client(tmp_path: Path, code: str) -> list[str]:
    script = tmp_path / "client.py"
    script.write_text(CLIENT_PRELUDE + textwrap.dedent(code))
    return [CLIENT_PYTHON, str(script)]


CLIENT_PRELUDE = '''\
import json, os, sys
def out(**kw):
    print(json.dumps(kw), flush=True)
'''


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- "
        f"stderr\n{proc.stderr[-6000:]}"
    )


def load(out: Path) -> tuple[RecordFile, list[RoundTrip]]:
    cas = read_records(out)
    return cas, parse_all(cas.exchanges)


def assert_recorded(
    cas: RecordFile, rts: list[RoundTrip], served: list[Served], origin: str | None = None
) -> None:
    """The cassette holds exactly the round trips the upstream served, complete (at ``origin``)."""
    assert not cas.problems, [str(p) for p in cas.problems]
    assert len(cas.exchanges) == len(served), (
        [ex.url for ex in cas.exchanges],
        [s.target for s in served],
    )
    for ex, rt, s in zip(cas.exchanges, rts, served, strict=True):
        where = f"seq {ex.seq} {ex.method} {ex.url} (served #{s.seq} {s.scenario} from {s.source})"
        u = urlsplit(ex.url)
        assert origin is None or f"{u.scheme}://{u.netloc}" == origin, where
        assert u.path == urlsplit(s.target).path, where
        assert ex.request_json() == s.request_json(), where
        assert ex.status == s.status == 200, where
        assert rt.family == s.family and rt.stream == s.stream, where
        if s.stream:
            assert ex.response_body == s.body, where
            assert [c for _, c in ex.response_chunks] == s.chunks, where
        else:
            assert json.loads(ex.response_body) == json.loads(s.body), where
        assert rt.response is not None and rt.response.complete is True, (
            where,
            rt.analysis_errors,
            rt.notes,
        )
        assert not rt.analysis_errors, (where, rt.analysis_errors)


def assert_no_secret(out: Path, secret: str, served: list[Served]) -> None:
    assert secret.encode() not in out.read_bytes(), f"the API key leaked into {out}"
    # …while the upstream did receive it: the recorder redacts the record, not the traffic
    for s in served:
        assert secret in (s.request_header("authorization") or ""), (
            f"served #{s.seq} carried no API key"
        )


# ---------------------------------------------------------------------------------------------
# 1. Agent frameworks: a real tool loop through the reverse listener


#: The frameworks must reach the recorder through the base URL looptap exported, never the internet.
_GUARD = """
base = os.environ.get("OPENAI_BASE_URL", "")
if not base.startswith("http://127.0.0.1:"):
    sys.exit(f"OPENAI_BASE_URL is not the recorder's listener: {base!r}")
"""

PYDANTIC_AI_CLIENT = _GUARD + """
from importlib.metadata import version
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

# provider="openai": the AsyncOpenAI client takes OPENAI_BASE_URL and OPENAI_API_KEY from the environment.
agent = Agent(OpenAIChatModel("gpt-4o"), system_prompt="Answer with the weather tool.")

@agent.tool_plain
def get_weather(city: str) -> str:
    \"\"\"The weather in a city right now.\"\"\"
    out(tool="get_weather", city=city)
    return f"sunny, 21 C in {city}"

out(run="plain", final=agent.run_sync("Weather in Paris?").output, version=version("pydantic-ai-slim"))
with agent.run_stream_sync("Weather in Lyon?") as result:
    text = "".join(result.stream_text(delta=True))
out(run="stream", final=text)
"""  # noqa: E501

OPENAI_AGENTS_CLIENT = _GUARD + """
import asyncio
from importlib.metadata import version
from agents import Agent, Runner, function_tool, set_tracing_disabled

set_tracing_disabled(True)  # besides OPENAI_AGENTS_DISABLE_TRACING=1: no trace export to the internet

@function_tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city right now.\"\"\"
    out(tool="get_weather", city=city)
    return f"sunny, 21 C in {city}"

# The default model provider: the Responses API on AsyncOpenAI(), which reads OPENAI_BASE_URL.
agent = Agent(name="weather", instructions="Answer with the weather tool.", tools=[get_weather], model="gpt-4o")

async def main():  # one event loop for both runs: the cached AsyncOpenAI client's pool is bound to it
    result = await Runner.run(agent, "Weather in Paris?")
    out(run="plain", final=result.final_output, version=version("openai-agents"))
    streamed = Runner.run_streamed(agent, "Weather in Lyon?")
    async for _ in streamed.stream_events():
        pass
    out(run="stream", final=streamed.final_output)
asyncio.run(main())
"""  # noqa: E501


@pytest.fixture
def loop_upstream() -> Iterator[FakeUpstream]:
    # The frameworks send no X-Fake-Upstream header: every request gets the tool loop. n=1: text
    # once the request carries one tool result.
    with FakeUpstream(delay=0.005, default_scenario="tool_loop:1") as up:
        yield up


@pytest.mark.parametrize(
    ("module", "code", "family"),
    [
        pytest.param(
            "pydantic_ai",
            PYDANTIC_AI_CLIENT,
            "openai_chat",
            id="pydantic-ai",
            marks=pytest.mark.slow(
                reason="a framework's tool loop threaded: pydantic-ai's own recordings read in"
                " process (tests/cassettes/test_corpus.py), the Chat family's recording in"
                " test_e2e_sdks.py[openai] by default"
            ),
        ),
        pytest.param(
            "agents",
            OPENAI_AGENTS_CLIENT,
            "openai_responses",
            id="openai-agents",
            marks=pytest.mark.slow(
                reason="openai-agents' Runner through the real recorder by default in"
                " tests/replay/test_fork_responses.py; the Responses family's recording in"
                " test_e2e_sdks.py[openai]; tool loops threaded in process (tests/cassettes)"
            ),
        ),
    ],
)
def test_framework_tool_loops_thread_into_conversations(
    module: str,
    code: str,
    family: str,
    tmp_path: Path,
    confdir: Path,
    loop_upstream: FakeUpstream,
    secret: str,
) -> None:
    """One client process, two agent runs (plain, then streamed), each a tool call and a final
    answer."""
    pytest.importorskip(module)
    up = loop_upstream
    # the reverse listener for OpenAI forwards to the fake upstream
    extra = ("--upstream", f"openai={up.url}")
    cmd = python_client(tmp_path, code)
    proc, out = looptap_run(
        tmp_path, confdir, secret, cmd, extra=extra, env={"OPENAI_AGENTS_DISABLE_TRACING": "1"}
    )
    assert proc.returncode == 0, explain(proc)

    printed = outputs(proc)
    tools = [p for p in printed if "tool" in p]
    finals = [p for p in printed if "final" in p]
    # The tool really ran, once per agent run, with the arguments the upstream made up for its
    # schema.
    assert tools == [{"tool": "get_weather", "city": "value"}] * 2, explain(proc)
    assert [p["run"] for p in finals] == ["plain", "stream"] and all(p["final"] for p in finals), (
        explain(proc)
    )

    served = up.llm_served()
    assert [s.family for s in served] == [family] * 4, [(s.target, s.scenario) for s in up.served]
    assert [s.stream for s in served] == [False, False, True, True]
    assert all(s.scenario == "tool_loop" for s in served)
    cas, rts = load(out)
    assert_recorded(cas, rts, served)
    assert_no_secret(out, secret, served)
    assert "4 round trips" in proc.stderr, explain(proc)  # looptap run's summary

    # Each run: the model's tool call, then its answer to the tool result, which the agent printed.
    assert [len(rt.response.tool_calls) if rt.response else None for rt in rts] == [1, 0, 1, 0]
    for rt in rts[0::2]:
        (call,) = rt.response.tool_calls if rt.response else [None]
        assert (
            call is not None and call.name == "get_weather" and call.arguments == {"city": "value"}
        )
    assert [p["final"] for p in finals] == [
        rt.response.text if rt.response else None for rt in rts[1::2]
    ]

    ra = analyse(cas.exchanges, rts)
    assert not ra.errors, ra.errors
    seqs = [ex.seq for ex in cas.exchanges]
    assert [c.turns for c in ra.conversations] == [seqs[:2], seqs[2:]], [
        c.model_dump() for c in ra.conversations
    ]
    for conv in ra.conversations:
        assert_one_threaded_loop(ra, conv.id, conv.turns)
    findings = [*ra.findings, *(f for t in ra.turns.values() for f in t.findings)]
    bad = [
        f for f in findings if f.layer == "C" and f.severity in (Severity.WARNING, Severity.ERROR)
    ]
    assert not bad, [f.model_dump() for f in bad]


def assert_one_threaded_loop(ra: RunAnalysis, conv: str, seqs: list[int]) -> None:
    """Two turns of one conversation: turn 1 extends turn 0 and returns the result of its call."""
    t0, t1 = (ra.turns[s] for s in seqs)
    assert t0.conversation == t1.conversation == conv
    assert (t0.index, t1.index) == (0, 1)
    assert t0.c.link == "start" and t1.c.link == "extends", (t0.c.link, t1.c.link)
    assert t1.previous_seq == t0.seq
    assert [c.name for c in t0.e.tool_calls] == ["get_weather"]
    assert len(t1.c.pairings) == 1, t1.c.pairings
    p = t1.c.pairings[0]
    assert p.call_turn == 0 and p.in_history, p
    assert p.call_id is not None and p.call_id == t0.e.tool_calls[0].id, (p, t0.e.tool_calls)


# ---------------------------------------------------------------------------------------------
# 2. The forward proxy over HTTPS (HTTPS_PROXY + the recorder's CA bundle)


def make_self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for IP 127.0.0.1 (and localhost), in no trust store."""
    cert_path, key_path = directory / "upstream-cert.pem", directory / "upstream-key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:  # the openssl command line instead
        progress.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=looptap fake upstream",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout",
                str(key_path),
                "-out",
                str(cert_path),
            ],
            check=True,
            capture_output=True,
        )
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "looptap fake upstream")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


@pytest.fixture(scope="module")
def upstream_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_self_signed(tmp_path_factory.mktemp("upstream-tls"))


@pytest.fixture
def tls_upstream(upstream_cert: tuple[Path, Path]) -> Iterator[FakeUpstream]:
    with FakeUpstream(delay=0.005, tls=upstream_cert) as up:
        assert up.url.startswith("https://127.0.0.1:")
        yield up


#: A forward-proxy client: NO_PROXY cleared (looptap puts 127.0.0.1 in it, for its own listeners)
#: so that 127.0.0.1 goes through HTTPS_PROXY; trust only from SSL_CERT_FILE (the recorder's
#: bundle).
HTTPS_OPENAI_CLIENT = """
for var in ("NO_PROXY", "no_proxy", "OPENAI_BASE_URL"):
    os.environ.pop(var, None)
assert os.environ["HTTPS_PROXY"].startswith("http://127.0.0.1:"), os.environ.get("HTTPS_PROXY")
assert os.path.isfile(os.environ["SSL_CERT_FILE"]), os.environ.get("SSL_CERT_FILE")
from openai import OpenAI
c = OpenAI(base_url=UPSTREAM + "/v1", max_retries=0)  # HTTPS_PROXY and SSL_CERT_FILE from the environment
ask = [{"role": "user", "content": "What is the capital of France?"}]
s = c.chat.completions.create(model="gpt-4o", messages=ask, stream=True, stream_options={"include_usage": True})
out(call="chat-stream", text="".join(ch.choices[0].delta.content or "" for ch in s if ch.choices))
r = c.chat.completions.create(model="gpt-4o", messages=ask)
out(call="chat", text=r.choices[0].message.content or "")
"""  # noqa: E501


def _text_of(s: Served) -> str:
    rt = parse_exchange(s.as_exchange())
    assert rt.response is not None, rt.analysis_errors
    return rt.response.text or ""


def test_openai_sdk_over_https_forward_proxy(
    tmp_path: Path,
    confdir: Path,
    tls_upstream: FakeUpstream,
    upstream_cert: tuple[Path, Path],
    secret: str,
) -> None:
    pytest.importorskip("openai")
    up = tls_upstream
    cmd = python_client(tmp_path, f"UPSTREAM = {up.url!r}\n" + HTTPS_OPENAI_CLIENT)
    proc, out = looptap_run(
        tmp_path, confdir, secret, cmd, extra=("--record-host", "127.0.0.1", "--ssl-insecure")
    )
    assert proc.returncode == 0, explain(proc)
    served = up.llm_served()
    assert [s.stream for s in served] == [True, False], [(s.target, s.scenario) for s in up.served]
    printed = outputs(proc)
    assert [p["call"] for p in printed] == ["chat-stream", "chat"]
    for p, s in zip(printed, served, strict=True):
        assert p["text"] and p["text"] == _text_of(s), (p, s.source)
    cas, rts = load(out)
    assert_recorded(cas, rts, served, up.url)  # https://127.0.0.1:<upstream>, not the proxy
    assert_no_secret(out, secret, served)
    assert "2 round trips" in proc.stderr, explain(proc)
    # The client trusted the recorder's bundle only: mitmproxy's CA is in it, the upstream's
    # certificate is not.
    bundle = (confdir / "looptap-ca-bundle.pem").read_text()
    assert (confdir / "mitmproxy-ca-cert.pem").read_text().strip() in bundle
    assert upstream_cert[0].read_text().strip() not in bundle


@pytest.mark.slow(
    reason=(
        "the forward proxy's HTTPS through the recorder's bundle: "
        "test_openai_sdk_over_https_forward_proxy by default"
    )
)
@pytest.mark.skipif(not HAVE_CURL, reason="curl not installed")
def test_curl_over_https_forward_proxy(
    tmp_path: Path, confdir: Path, tls_upstream: FakeUpstream, secret: str
) -> None:
    up = tls_upstream
    url = f"{up.url}/v1/chat/completions"
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
    }
    (tmp_path / "stream.json").write_text(json.dumps({**body, "stream": True}))
    (tmp_path / "plain.json").write_text(json.dumps(body))
    curl = (
        'curl -sS --fail-with-body --max-time 30 --noproxy "" -x "$HTTPS_PROXY" --cacert '
        '"$SSL_CERT_FILE" -H "content-type: application/json" -H "authorization: Bearer '
        '$OPENAI_API_KEY"'
    )
    script = (
        # Control: straight to the upstream the bundle does not trust its certificate (exit 60) and
        # nothing reaches it; through the proxy the same bundle works.
        f'{curl} --noproxy "*" "$U" -d @plain.json -o /dev/null 2>direct.err; echo "direct=$?" '
        f'>direct.rc; {curl} -N "$U" -d @stream.json -o streamed.out && {curl} "$U" -d @plain.json '
        '-o plain.out'
    )
    proc, out = looptap_run(
        tmp_path,
        confdir,
        secret,
        ["env", f"U={url}", "sh", "-c", script],
        extra=("--record-host", "127.0.0.1", "--ssl-insecure"),
    )
    assert proc.returncode == 0, explain(proc)
    assert (tmp_path / "direct.rc").read_text().strip() == "direct=60", (
        tmp_path / "direct.err"
    ).read_text()
    served = up.llm_served()
    assert [s.stream for s in served] == [True, False], [
        (s.target, s.scenario, s.client_gone) for s in up.served
    ]
    streamed, plain = (
        (tmp_path / "streamed.out").read_bytes(),
        (tmp_path / "plain.out").read_bytes(),
    )
    assert streamed == served[0].body and b"data: [DONE]" in streamed
    assert plain == served[1].body
    cas, rts = load(out)
    assert_recorded(cas, rts, served, up.url)
    assert_no_secret(out, secret, served)
