"""End to end through the real recorder, with real clients as separate processes.

    client process (official SDK / curl)  →  looptap run|record (mitmproxy, .venv-proxy)
                                           →  tests.support.upstream (recorded corpus responses)

The recorder runs from its own environment (mitmproxy 11 pins h11<=0.14, the SDKs need httpx2):
``$LOOPTAP_PROXY_PYTHON -m cassettes.cli`` or ``<repo>/.venv-proxy/bin/python -m cassettes.cli``.
The clients run with this interpreter (the test environment holds the SDKs). The fake upstream runs
in this process, so every test compares three views of each round trip: what the upstream sent
(:attr:`FakeUpstream.served`), what the client printed, and what the cassette holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]

from looptap.cassettes.analysis import Severity, analyse  # noqa: E402
from looptap.cassettes.parsing import RoundTrip, parse_all, parse_exchange  # noqa: E402
from looptap.cassettes.storage import RecordFile, read_records  # noqa: E402
from tests.support import progress  # noqa: E402
from tests.support.harness import outputs  # noqa: E402
from tests.support.recorder import RECORDER, SCRUB, RecorderProcess, needs_recorder  # noqa: E402
from tests.support.upstream import FakeUpstream, Served  # noqa: E402

CLIENT_PYTHON = sys.executable  # the test environment: openai, anthropic, google-genai

pytestmark = [needs_recorder]

#: Proxy and base-URL variables of the machine must not steer the clients or the recorder.
_SCRUB = SCRUB

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
#: What the fake upstream makes of that schema for the first tool call (synth_args).
WEATHER_ARGS = {"city": "value"}


# ---------------------------------------------------------------------------------------------
# Helpers


def base_env(secret: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    env.update(
        OPENAI_API_KEY=secret,
        ANTHROPIC_API_KEY=secret,
        GOOGLE_API_KEY=secret,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(REPO),
    )
    return env


def recorder_args(
    out: Path, confdir: Path, upstream: FakeUpstream | None = None, *extra: str
) -> list[str]:
    args = ["-o", str(out), "--confdir", str(confdir)]
    if upstream is not None:
        for name in ("openai", "anthropic", "gemini"):
            args += ["--upstream", f"{name}={upstream.url}"]
    return [*args, *extra]


def looptap_run(
    tmp_path: Path,
    confdir: Path,
    secret: str,
    client_code: str | None = None,
    *,
    cmd: list[str] | None = None,
    upstream: FakeUpstream | None = None,
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "run.jsonl"
    if client_code is not None:
        script = tmp_path / "client.py"
        script.write_text(CLIENT_PRELUDE + textwrap.dedent(client_code))
        cmd = [CLIENT_PYTHON, str(script)]
    assert cmd is not None
    argv = [*RECORDER, "run", *recorder_args(out, confdir, upstream, *extra), "--", *cmd]
    proc = progress.run(argv, env=base_env(secret), capture_output=True, text=True, cwd=tmp_path)
    return proc, out


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- "
        f"stderr\n{proc.stderr[-5000:]}"
    )


def expected_view(s: Served) -> tuple[str, list[list[Any]]]:
    """(text, [[tool name, arguments]]) of what the upstream sent, parsed by cassettes."""
    rt = parse_exchange(s.as_exchange())
    assert rt.response is not None, rt.analysis_errors
    return rt.response.text, [[c.name, c.arguments] for c in rt.response.tool_calls]


def load(out: Path) -> tuple[RecordFile, list[RoundTrip]]:
    cas = read_records(out)
    return cas, parse_all(cas.exchanges)


def assert_same_round_trip(ex: Any, rt: RoundTrip, s: Served, *, complete: bool = True) -> None:
    """The cassette's round trip is the one the upstream served, chunk for chunk."""
    where = f"seq {ex.seq} {ex.method} {ex.url} (served #{s.seq} {s.scenario} from {s.source})"
    assert urlsplit(ex.url).path == urlsplit(s.target).path, where
    assert ex.request_json() == s.request_json(), where
    assert rt.family == s.family, where
    assert rt.stream == s.stream, where
    assert ex.status == s.status, where
    if len(s.chunks) == 1 and s.body.lstrip()[:1] in (b"{", b"["):
        # The cassette stores a JSON body as JSON (cassettes/storage/_codec.py), so it is equal as
        # JSON, not byte for byte (``5.67e-06`` comes back as ``5.67e-6``, whitespace is dropped).
        assert json.loads(ex.response_body) == json.loads(s.body), where
    else:
        assert ex.response_body == s.body, where
    if s.stream:
        # Each SSE event went out as its own HTTP chunk, a few ms apart: the recorder's tee must
        # have captured them one by one, in order, with increasing time offsets.
        assert [c for _, c in ex.response_chunks] == s.chunks, where
        offsets = [t for t, _ in ex.response_chunks]
        assert all(t is not None for t in offsets) and offsets == sorted(offsets), where
    if complete:
        assert rt.response is not None and rt.response.complete is True, (
            where,
            rt.analysis_errors,
            rt.notes,
        )
        assert not rt.analysis_errors, (where, rt.analysis_errors)


def assert_no_secret(out: Path, secret: str, served: list[Served]) -> None:
    assert secret.encode() not in out.read_bytes(), f"the API key leaked into {out}"
    # …while the upstream did receive it: the recorder redacts the record, not the traffic.
    for s in served:
        values = " ".join(
            v
            for k, v in s.request_headers
            if k.lower() in ("authorization", "x-api-key", "x-goog-api-key")
        )
        assert secret in values, f"served #{s.seq} carried no API key: {s.request_headers}"


def check_client_run(
    proc: subprocess.CompletedProcess[str], out: Path, up: FakeUpstream, secret: str
) -> list[dict[str, Any]]:
    """Exit 0; one printed result per upstream response, equal to what the upstream sent; the
    cassette holds exactly those round trips; no secret on disk."""
    assert proc.returncode == 0, explain(proc)
    served = up.llm_served()
    printed = outputs(proc)
    assert len(printed) == len(served), (printed, [(s.target, s.scenario) for s in served])
    for p, s in zip(printed, served, strict=True):
        text, calls = expected_view(s)
        assert (p["text"] or "") == text, (p["call"], s.source)
        assert p["tool_calls"] == calls, (p["call"], s.source)
    cas, rts = load(out)
    assert not cas.problems, [str(p) for p in cas.problems]
    assert len(cas.exchanges) == len(served), explain(proc)
    for ex, rt, s in zip(cas.exchanges, rts, served, strict=True):
        assert_same_round_trip(ex, rt, s)
    assert_no_secret(out, secret, served)
    assert f"{len(served)} round trip" in proc.stderr, explain(proc)  # looptap run's summary
    return printed


CLIENT_PRELUDE = f'''\
import json, sys
def out(call, text, tool_calls=()):
    print(json.dumps({{"call": call, "text": text or "", "tool_calls": [list(c) for c in tool_calls]}}), flush=True)
def H(scenario):
    return {{"X-Fake-Upstream": scenario}}
WEATHER = {json.dumps(WEATHER_SCHEMA)}
'''  # noqa: E501


# ---------------------------------------------------------------------------------------------
# The three official SDKs in base-URL mode (the reverse listeners forward to the fake upstream)


OPENAI_CLIENT = """
from openai import OpenAI
c = OpenAI(max_retries=0)  # base URL and key from the environment looptap run sets up
ask = [{"role": "user", "content": "What is the capital of France?"}]

r = c.chat.completions.create(model="gpt-4o", messages=ask)
out("chat", r.choices[0].message.content)

s = c.chat.completions.create(model="gpt-4o", messages=ask, stream=True, stream_options={"include_usage": True})
out("chat-stream", "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices))

r = c.responses.create(model="gpt-4o", input="What is the capital of France?")
out("responses", r.output_text)

with c.responses.stream(model="gpt-4o", input="What is the capital of France?") as st:
    final = st.get_final_response()
out("responses-stream", final.output_text)

# A two-turn agent loop over streamed chat: tool call, tool result, final answer.
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER}}]
msgs = [{"role": "user", "content": "Weather in Paris?"}]
for turn in range(4):
    s = c.chat.completions.create(model="gpt-4o", messages=msgs, tools=tools, stream=True, extra_headers=H("tool_loop:1"))
    text, calls = "", {}
    for ch in s:
        for choice in ch.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                d = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                d["id"] += tc.id or ""
                d["name"] += (tc.function.name or "") if tc.function else ""
                d["args"] += (tc.function.arguments or "") if tc.function else ""
    calls = [calls[i] for i in sorted(calls)]
    out(f"chat-loop-{turn}", text, [(d["name"], json.loads(d["args"])) for d in calls])
    if not calls:
        break
    msgs.append({"role": "assistant", "content": text or None, "tool_calls": [
        {"id": d["id"], "type": "function", "function": {"name": d["name"], "arguments": d["args"]}} for d in calls]})
    msgs += [{"role": "tool", "tool_call_id": d["id"], "content": "sunny, 21 C"} for d in calls]

r = c.responses.create(model="gpt-4o", input="Weather in Paris?", extra_headers=H("tool_call"),
                       tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}])
out("responses-tool", r.output_text, [(o.name, json.loads(o.arguments)) for o in r.output if o.type == "function_call"])
"""  # noqa: E501

ANTHROPIC_CLIENT = """
import anthropic
c = anthropic.Anthropic(max_retries=0)
ask = [{"role": "user", "content": "Name a pelican."}]

def text_of(m):
    return "".join(b.text for b in m.content if b.type == "text")

def calls_of(m):
    return [(b.name, b.input) for b in m.content if b.type == "tool_use"]

m = c.messages.create(model="claude-sonnet-4-5", max_tokens=200, messages=ask)
out("messages", text_of(m))

with c.messages.stream(model="claude-sonnet-4-5", max_tokens=200, messages=ask) as st:
    m = st.get_final_message()
out("messages-stream", text_of(m))

tools = [{"name": "get_weather", "description": "Weather now", "input_schema": WEATHER}]
msgs = [{"role": "user", "content": "Weather in Paris?"}]
for turn in range(4):
    m = c.messages.create(model="claude-sonnet-4-5", max_tokens=200, messages=msgs, tools=tools, extra_headers=H("tool_loop:1"))
    out(f"messages-loop-{turn}", text_of(m), calls_of(m))
    uses = [b for b in m.content if b.type == "tool_use"]
    if not uses:
        break
    msgs.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input} if b.type == "tool_use" else {"type": "text", "text": b.text}
        for b in m.content]})
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "sunny, 21 C"} for b in uses]})

with c.messages.stream(model="claude-sonnet-4-5", max_tokens=200, messages=msgs[:1], tools=tools, extra_headers=H("tool_call")) as st:
    m = st.get_final_message()
out("messages-stream-tool", text_of(m), calls_of(m))
"""  # noqa: E501

GEMINI_CLIENT = """
from google import genai
from google.genai import types
c = genai.Client()  # GOOGLE_API_KEY and GOOGLE_GEMINI_BASE_URL from the environment
MODEL = "gemini-2.0-flash"

def text_of(resp):
    parts = (resp.candidates[0].content.parts or []) if resp.candidates and resp.candidates[0].content else []
    return "".join(p.text for p in parts if p.text and not p.thought)

def calls_of(resp):
    return [(f.name, f.args) for f in resp.function_calls or []]

r = c.models.generate_content(model=MODEL, contents="What is the capital of France?")
out("generate", text_of(r))

text = "".join(text_of(ch) for ch in c.models.generate_content_stream(model=MODEL, contents="What is the capital of France?"))
out("generate-stream", text)

tool = types.Tool(function_declarations=[types.FunctionDeclaration(name="get_weather", description="Weather now", parameters_json_schema=WEATHER)])
contents = [types.Content(role="user", parts=[types.Part.from_text(text="Weather in Paris?")])]
for turn in range(4):
    cfg = types.GenerateContentConfig(tools=[tool], http_options=types.HttpOptions(headers=H("tool_loop:1")))
    r = c.models.generate_content(model=MODEL, contents=contents, config=cfg)
    out(f"generate-loop-{turn}", text_of(r), calls_of(r))
    if not r.function_calls:
        break
    contents.append(r.candidates[0].content)
    contents.append(types.Content(role="user", parts=[
        types.Part.from_function_response(name=f.name, response={"result": "sunny, 21 C"}) for f in r.function_calls]))

cfg = types.GenerateContentConfig(tools=[tool], http_options=types.HttpOptions(headers=H("tool_call")))
text, calls = "", []
for ch in c.models.generate_content_stream(model=MODEL, contents=contents[:1], config=cfg):
    text += text_of(ch)
    calls += calls_of(ch)
out("generate-stream-tool", text, calls)
"""  # noqa: E501


@pytest.mark.parametrize(
    ("sdk", "code", "families"),
    [
        pytest.param(
            "openai", OPENAI_CLIENT, {"openai_chat": 4, "openai_responses": 3}, id="openai"
        ),
        pytest.param("anthropic", ANTHROPIC_CLIENT, {"anthropic": 5}, id="anthropic"),
        pytest.param("google.genai", GEMINI_CLIENT, {"gemini": 5}, id="google-genai"),
    ],
)
def test_sdk_through_reverse_listener(
    sdk: str,
    code: str,
    families: dict[str, int],
    tmp_path: Path,
    confdir: Path,
    upstream: FakeUpstream,
    secret: str,
) -> None:
    pytest.importorskip(sdk)
    proc, out = looptap_run(tmp_path, confdir, secret, code, upstream=upstream)
    printed = check_client_run(proc, out, upstream, secret)
    served = upstream.llm_served()
    got = {}
    for s in served:
        got[s.family] = got.get(s.family, 0) + 1
    assert got == families
    assert [s.stream for s in served].count(True) >= 2 and [s.stream for s in served].count(
        False
    ) >= 2
    # The agent loop: a call of the offered tool with schema-valid arguments, then a final text.
    loop = [p for p in printed if "-loop-" in p["call"]]
    assert [len(p["tool_calls"]) for p in loop] == [1, 0], loop
    assert loop[0]["tool_calls"] == [["get_weather", WEATHER_ARGS]]
    assert loop[1]["text"]
    tool = [p for p in printed if p["call"].endswith("-tool")]
    assert len(tool) == 1 and tool[0]["tool_calls"] == [["get_weather", WEATHER_ARGS]]
    # The recorded loop is one conversation whose second request carries the tool result.
    _, rts = load(out)
    loop_rts = [rt for rt, s in zip(rts, served, strict=True) if s.scenario == "tool_loop"]
    assert [len(rt.response.tool_calls) for rt in loop_rts if rt.response] == [1, 0]
    results = (
        [p for m in loop_rts[1].request.messages for p in m.parts if p.kind == "tool_result"]
        if loop_rts[1].request
        else []
    )
    assert len(results) == 1


EARLY_HANGUP_CLIENT = """
from openai import OpenAI
c = OpenAI(max_retries=0)
s = c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Capital of Mexico?"}], stream=True,
                              extra_headers=H("text; linger=0.5"))
out("chat-stream", "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices))
"""  # noqa: E501


@pytest.mark.slow(
    reason=(
        "the openai SDK's hang-up at [DONE] through the real recorder, read whole: "
        "test_mitmproxy_quirks.py's openai SSE cases by default"
    )
)
def test_stream_whole_when_client_hangs_up_after_terminal_event(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    """openai-python's sync stream stops reading at ``data: [DONE]`` and closes the connection
    before the chunked body's terminator (MITMPROXY.md §2), which mitmproxy reports as
    ``Client disconnected.``. The upstream lingers before the terminator so this happens every
    time. Every event was captured, so the round trip is complete, not a partial transport
    failure."""
    pytest.importorskip("openai")
    proc, out = looptap_run(tmp_path, confdir, secret, EARLY_HANGUP_CLIENT, upstream=upstream)
    assert proc.returncode == 0, explain(proc)
    (s,) = upstream.llm_served()
    assert outputs(proc)[0]["text"] == expected_view(s)[0]
    cas, rts = load(out)
    assert len(cas.exchanges) == 1 and not cas.problems
    ex, rt = cas.exchanges[0], rts[0]
    assert_same_round_trip(ex, rt, s)  # content-complete: all events, [DONE] included
    assert rt.complete is True, (
        "a stream whose terminal event was recorded is labelled partial: "
        f"transport_error={ex.transport_error!r}, RoundTrip.complete={rt.complete}, "
        f"response.complete={rt.response.complete if rt.response else None}"
    )


CANCELLING_CLIENT = """
from openai import OpenAI
c = OpenAI(max_retries=0)
s = c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Capital of Mexico?"}], stream=True,
                              extra_headers=H("drip; delay=3600"))
first = next(iter(s))
s.close()
out("cancelled", first.id)
"""  # noqa: E501


@pytest.mark.slow(
    reason=(
        "C.abandoned_answer on mitmproxy's words in process: "
        "test_api.py::test_a_stream_the_client_abandoned_is_not_the_apis_failure"
    )
)
def test_a_stream_the_client_cancels_is_the_clients_doing_not_the_apis(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    """A client that closes a stream mid-answer (a cancel, a client-side timeout): the upstream had
    sent one event and would send the next an hour later. mitmproxy says ``Client disconnected.``;
    the round trip is partial, and that is the client's doing: ``C.abandoned_answer`` (a
    warning: an answer that was coming was thrown away), never ``A.transport_error`` or
    ``A.stream_truncated`` (the API did not fail), nor a retryable error the client gave up on."""
    pytest.importorskip("openai")
    proc, out = looptap_run(tmp_path, confdir, secret, CANCELLING_CLIENT, upstream=upstream)
    assert proc.returncode == 0, explain(proc)
    cas, rts = load(out)
    assert len(cas.exchanges) == 1 and not cas.problems
    ex, rt = cas.exchanges[0], rts[0]
    assert ex.transport_error == "Client disconnected." and ex.status == 200, ex
    assert rt.cut_by_client and rt.complete is False, rt
    findings = analyse(cas.exchanges, rts).findings
    codes = {f.code: f for f in findings}
    assert "A.transport_error" not in codes and "A.stream_truncated" not in codes, findings
    assert "C.gave_up_on_retryable_error" not in codes, findings
    hung = codes["C.abandoned_answer"]
    assert hung.severity is Severity.WARNING and "after HTTP 200 and 1 event," in hung.message, hung


# ---------------------------------------------------------------------------------------------
# Forward-proxy mode (HTTP_PROXY) with curl


def curl(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    return progress.run(["curl", "-sS", "--noproxy", "", *args], capture_output=True, env=env)


@pytest.mark.slow(
    reason=(
        "the forward proxy's recording: "
        "test_e2e_frameworks.py::test_openai_sdk_over_https_forward_proxy and "
        "test_proxy_faults.py's forward cases by default"
    )
)
@pytest.mark.skipif(
    not any((Path(p) / "curl").exists() for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="curl not installed",
)
def test_curl_through_forward_proxy_records_llm_host(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    out = tmp_path / "fwd.jsonl"
    rec = RecorderProcess(out, confdir, None, "--record-host", "127.0.0.1", env=base_env(secret))
    try:
        for var in (
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
            "GOOGLE_GEMINI_BASE_URL",
            "HTTPS_PROXY",
            "SSL_CERT_FILE",
            "NODE_EXTRA_CA_CERTS",
        ):
            assert var in rec.env, rec.output
        proxy = rec.env["HTTP_PROXY"]
        assert urlsplit(proxy).hostname == "127.0.0.1"
        url = f"{upstream.url}/v1/chat/completions"
        body = {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
        }
        common = [
            "-x",
            proxy,
            "-H",
            "content-type: application/json",
            "-H",
            f"authorization: Bearer {secret}",
        ]
        streamed = curl(*common, "-N", url, "-d", json.dumps({**body, "stream": True}))
        plain = curl(*common, url, "-d", json.dumps(body))
    finally:
        rc = rec.stop()
    assert rc == 0, rec.output
    assert streamed.returncode == 0 and plain.returncode == 0, (streamed.stderr, plain.stderr)
    served = upstream.llm_served()
    assert [s.stream for s in served] == [True, False]
    assert streamed.stdout == served[0].body and b"data: [DONE]" in streamed.stdout
    assert plain.stdout == served[1].body
    cas, rts = load(out)
    assert not cas.problems
    assert len(cas.exchanges) == 2, rec.output
    for ex, rt, s in zip(cas.exchanges, rts, served, strict=True):
        # the real target, not the proxy
        assert urlsplit(ex.url).netloc == urlsplit(upstream.url).netloc
        assert_same_round_trip(ex, rt, s)
    assert_no_secret(out, secret, served)


@pytest.mark.skipif(
    not any((Path(p) / "curl").exists() for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="curl not installed",
)
def test_forward_proxy_passes_other_hosts_through_unrecorded(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    """Without --record-host, 127.0.0.1 is not an LLM API host: with the tools' HTTP not
    recorded (--no-tool-http; tests/proxy/test_e2e_tool_http.py records it), traffic flows and
    nothing is recorded."""
    script = (
        'curl -sS --noproxy "" -x "$HTTP_PROXY" "$U/ping" && '
        'curl -sS --noproxy "" -x "$HTTP_PROXY" -H "content-type: application/json" '
        '"$U/v1/chat/completions" -d \'{"model":"m","messages":[]}\''
    )
    env_cmd = ["env", f"U={upstream.url}", "sh", "-c", script]
    proc, out = looptap_run(tmp_path, confdir, secret, cmd=env_cmd, extra=("--no-tool-http",))
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.startswith("pong\n"), explain(proc)
    served = upstream.served
    assert [s.target for s in served] == ["/ping", "/v1/chat/completions"]
    # Both went through the forward proxy (absolute-form requests become origin-form upstream).
    assert all(s.complete for s in served)
    cas = read_records(out)
    assert cas.exchanges == [] and not cas.problems


# ---------------------------------------------------------------------------------------------
# Faults


FAULT_CLIENT = """
import openai
c = openai.OpenAI(max_retries=0)
ask = [{"role": "user", "content": "What is the capital of France?"}]

try:
    c.chat.completions.create(model="gpt-4o", messages=ask, extra_headers=H("rate_limit; retry_after=7"))
    out("rate_limit", "no error")
except openai.RateLimitError as e:
    out("rate_limit", f"{e.status_code} retry-after={e.response.headers.get('retry-after')}")

try:
    s = c.chat.completions.create(model="gpt-4o", messages=ask, stream=True, extra_headers=H("reset_mid_stream; after=3"))
    n = sum(1 for _ in s)
    out("reset", f"no error after {n} chunks")
except Exception as e:
    out("reset", f"raised {type(e).__name__}")

try:
    s = c.chat.completions.create(model="gpt-4o", messages=ask, stream=True, extra_headers=H("error_in_stream; after=2"))
    n = sum(1 for _ in s)
    out("error_in_stream", f"no error after {n} chunks")
except openai.APIError as e:
    out("error_in_stream", f"raised {type(e).__name__}: {e.message}")
"""  # noqa: E501


@pytest.mark.slow(
    reason=(
        "faults recorded as they happened through both listeners: test_proxy_faults.py by default"
    )
)
def test_faults_are_recorded_as_they_happened(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    pytest.importorskip("openai")
    proc, out = looptap_run(tmp_path, confdir, secret, FAULT_CLIENT, upstream=upstream)
    assert proc.returncode == 0, explain(proc)
    printed = {p["call"]: p["text"] for p in outputs(proc)}
    assert printed["rate_limit"] == "429 retry-after=7", explain(proc)
    assert printed["reset"].startswith("raised "), printed  # the client saw the reset
    assert printed["error_in_stream"].startswith("raised APIError"), printed
    served = upstream.llm_served()
    assert [s.scenario for s in served] == ["rate_limit", "reset_mid_stream", "error_in_stream"]
    limited, reset, errored = served
    assert reset.reset and len(reset.chunks) == 3
    cas, rts = load(out)
    assert not cas.problems
    assert len(cas.exchanges) == 3, explain(proc)
    by_status = dict(
        zip([s.scenario for s in served], zip(cas.exchanges, rts, strict=True), strict=True)
    )

    ex, rt = by_status["rate_limit"]
    assert_same_round_trip(ex, rt, limited)
    assert ex.status == 429 and ex.response_header("retry-after") == "7"
    assert (
        rt.response is not None
        and rt.response.error is not None
        and rt.response.error.status == 429
    )
    assert "rate limit" in (rt.response.error.message or "")

    ex, rt = by_status["reset_mid_stream"]
    assert_same_round_trip(ex, rt, reset, complete=False)  # the three events that did arrive
    assert ex.transport_error, "an upstream reset must be recorded as a transport error"
    assert rt.complete is False and rt.response is not None and rt.response.complete is False

    ex, rt = by_status["error_in_stream"]
    assert_same_round_trip(ex, rt, errored, complete=False)
    assert ex.status == 200
    assert rt.response is not None and rt.response.error is not None and rt.response.error.in_stream
    assert rt.response.complete is False  # no [DONE]
    assert_no_secret(out, secret, served)


# ---------------------------------------------------------------------------------------------
# Crash safety: SIGKILL mid-run


KILL_CLIENT = """
import openai
c = openai.OpenAI(max_retries=0)
ask = [{"role": "user", "content": "What is the capital of France?"}]
for i in range(3):
    r = c.chat.completions.create(model="gpt-4o", messages=ask + [{"role": "user", "content": f"turn {i}"}])
    out(f"done-{i}", r.choices[0].message.content)
# A slow stream the recorder is killed in the middle of.
for ch in c.chat.completions.create(model="gpt-4o", messages=ask, stream=True, extra_headers=H("text; delay=2")):
    pass
out("never", "")
"""  # noqa: E501


@pytest.mark.slow(
    reason=(
        "a recorder killed mid-run: test_proxy_crash.py's durable and first-second kills by default"
    )
)
def test_sigkill_mid_run_leaves_a_loadable_cassette(
    tmp_path: Path, confdir: Path, upstream: FakeUpstream, secret: str
) -> None:
    pytest.importorskip("openai")
    out = tmp_path / "killed.jsonl"
    script = tmp_path / "client.py"
    script.write_text(CLIENT_PRELUDE + textwrap.dedent(KILL_CLIENT))
    argv = [
        *RECORDER,
        "run",
        *recorder_args(out, confdir, upstream),
        "--",
        CLIENT_PYTHON,
        str(script),
    ]
    proc = subprocess.Popen(
        argv,
        env=base_env(secret),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=tmp_path,
    )
    try:
        # Kill once the slow stream is under way and the three completed round trips are on disk.
        def ready() -> bool:
            started = [s for s in upstream.llm_served() if s.stream and s.chunks]
            # header + 3 records
            return (
                bool(started and out.exists() and out.read_bytes().count(b"\n") >= 4)
                or proc.poll() is not None
            )

        progress.until(ready, interval=0.05, what="the slow stream under way")
        assert proc.poll() is None, (
            f"looptap run ended early: {proc.returncode} "
            f"{proc.stderr.read() if proc.stderr else ''}"
        )
        os.kill(proc.pid, signal.SIGKILL)  # looptap run itself, not its child
        progress.wait(proc)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the orphaned client (same process group)
        except ProcessLookupError:
            pass
        stdout = proc.stdout.read().decode() if proc.stdout else ""
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()
    done = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert [d["call"] for d in done] == ["done-0", "done-1", "done-2"]
    cas, rts = load(out)
    assert all(p.kind == "torn" for p in cas.problems), [str(p) for p in cas.problems]
    served = upstream.llm_served()
    assert len(cas.exchanges) == 3, (len(cas.exchanges), [str(p) for p in cas.problems])
    for ex, rt, s in zip(cas.exchanges, rts, served[:3], strict=True):
        assert_same_round_trip(ex, rt, s)
    assert secret.encode() not in out.read_bytes()
