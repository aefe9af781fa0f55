"""``looptap replay --fault``: the API misbehaving in its own wire format, driven by the official
SDKs. Each fault raises what the real API's failure raises in the SDK (exception class, status,
message); where the SDK retries, the retry gets the recorded answer and the call succeeds."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.replay.serving.faults import FaultPlan, FaultSpecError, parse_fault
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import (
    REPO,
    SYSTEM,
    USER,
    chat_events,
    chat_exchange,
    chat_request,
    chat_response,
    sse_exchange,
    tool_loop,
    write,
)
from tests.replay.test_server import _anthropic_exchange, _gemini_exchange
from tests.support import progress

TOOLS = orjson.loads(chat_request([]))["tools"]


def _server(tmp_path: Path, exchanges: list[Any], *faults: str, seed: int = 0) -> ReplayServer:
    cas = write(tmp_path / "run.jsonl", exchanges)
    return ReplayServer(cas, faults=FaultPlan([parse_fault(f) for f in faults], seed=seed))


# -- the spec ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "arg", "times", "selector"),
    [
        ("turn=2:rate_limit*2", "rate_limit", 1.0, 2, ("turn", "2")),
        ("seq=4:stream_cut=3", "stream_cut", 3.0, 1, ("seq", "4")),
        ("overloaded", "overloaded", 1.0, 1, ("*", "")),
        ("*:slow_first_byte=0.5", "slow_first_byte", 0.5, 1, ("*", "")),
        ("p=0.2:server_error*3", "server_error", 1.0, 3, ("p", "0.2")),
        ("tool=get_weather:error_event", "error_event", None, 1, ("tool", "get_weather")),
    ],
)
def test_fault_specs_read(
    text: str, kind: str, arg: float | None, times: int, selector: tuple[str, str]
) -> None:
    f = parse_fault(text)
    assert (f.kind, f.arg, f.times, f.selector) == (kind, arg, times, selector)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("turn=2:teapot", "unknown fault 'teapot'"),
        ("turn=x:reset", "turn= wants a number"),
        ("p=2:reset", "p= wants a probability"),
        ("reset=3", "reset takes no value"),
        ("stall=soon", "stall= wants seconds"),
        ("overloaded*0", "'*' wants a count"),
        ("color=red:reset", "select requests with one of"),
    ],
)
def test_bad_fault_specs_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(FaultSpecError, match=says.replace("*", r"\*").replace("(", r"\(")):
        parse_fault(text)


# Numbers are ASCII digits and finite: str.isdigit() takes '²' (which int() refuses: a traceback
# at start-up, or a 500 for every request), float() takes nan, inf, '1_0', '+3' and ' 3'.
STRICT = [
    ("seq=1:reset*²", "'*' wants a count of attempts in digits, from 1 (e.g. *3), not '²'"),
    ("turn=²:reset", "turn= wants a number in digits, not '²'"),
    ("seq=١:reset", "seq= wants a number in digits, not '١'"),
    ("request=1_0:reset", "request= wants a number in digits, not '1_0'"),
    ("turn=+3:reset", "turn= wants a number in digits, not '+3'"),
    ("turn=" + "9" * 5000 + ":reset", "turn= wants a number in digits, not '99999"),
    ("reset*" + "9" * 5000, "'*' wants a count"),
    ("stall=nan", "stall= wants seconds (a decimal number such as 0.5), not 'nan'"),
    (
        "slow_first_byte=nan",
        "slow_first_byte= wants seconds (a decimal number such as 0.5), not 'nan'",
    ),
    ("slow_first_byte=inf", "not 'inf'"),
    ("stall=-0", "not '-0'"),
    ("stall=1e3", "not '1e3'"),
    ("stall= 3", "not ' 3'"),
    ("stream_cut=nan", "stream_cut= wants chunks (a whole number in digits), not 'nan'"),
    ("stream_cut=2.5", "stream_cut= wants chunks (a whole number in digits), not '2.5'"),
    ("stream_cut=³", "not '³'"),
    (
        "rate_limit=NaN",
        "rate_limit= wants retry-after seconds (a decimal number such as 0.5), not 'NaN'",
    ),
    ("truncate=nan", "truncate= wants fraction kept (a decimal number such as 0.5), not 'nan'"),
    ("p=nan:reset", "p= wants a probability in (0, 1] (a decimal such as 0.2), not 'nan'"),
    ("p=1e-1:reset", "not '1e-1'"),
    ("stall=4000", "between 0 and 3600, not '4000'"),
]


@pytest.mark.parametrize(("text", "says"), STRICT, ids=[t[:30] for t, _ in STRICT])
def test_fault_numbers_are_ascii_digits_and_finite(text: str, says: str) -> None:
    with pytest.raises(FaultSpecError) as err:
        parse_fault(text)
    msg = str(err.value)
    # one line, naming the bad part, bounded
    assert says in msg and "\n" not in msg and len(msg) < 300, msg


@pytest.mark.parametrize(
    ("text", "arg", "selector"),
    [
        ("stall=0.25", 0.25, ("*", "")),
        ("stall=.5", 0.5, ("*", "")),
        ("stall=3.", 3.0, ("*", "")),
        ("turn=02:stream_cut=2", 2.0, ("turn", "2")),
    ],
)
def test_fault_numbers_that_read(text: str, arg: float, selector: tuple[str, str]) -> None:
    f = parse_fault(text)
    assert (f.arg, f.selector) == (arg, selector)


def test_the_exit_report_counts_internal_errors(tmp_path: Path) -> None:
    """A bug of the server (here: a fault plan that throws) is answered 500 and counted in the
    report the replay command prints at exit; the command exits 1."""
    srv = _server(tmp_path, tool_loop(), "turn=1:reset")

    def broken(rec: Any) -> None:
        raise RuntimeError("boom")

    assert srv.faults is not None
    srv.faults.decide = broken  # type: ignore[method-assign]
    import urllib.error
    import urllib.request

    with srv:
        req = urllib.request.Request(
            srv.url + "/v1/chat/completions",
            data=chat_request([SYSTEM, USER]),
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 500
    lines = srv.report_lines()
    assert "1 internal error" in lines[0] and "1 internal errors" not in lines[0]
    assert any(
        "internal error (a looptap bug, answered 500): "
        "POST /v1/chat/completions: RuntimeError: boom" in ln
        for ln in lines
    )


# -- HTTP status faults, each SDK ------------------------------------------------------------------


def _openai_call(srv: ReplayServer, retries: int) -> Any:
    import openai

    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=retries)
    return client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=TOOLS)


@pytest.mark.parametrize(
    ("fault", "error", "status", "says"),
    [
        ("rate_limit=0", "RateLimitError", 429, "Rate limit reached"),
        ("overloaded=0", "InternalServerError", 503, "currently overloaded"),
        ("server_error=0", "InternalServerError", 500, "The server had an error"),
        ("context_length", "BadRequestError", 400, "maximum context length"),
    ],
)
def test_openai_sdk_sees_the_real_error_and_recovers_by_retrying(
    tmp_path: Path, fault: str, error: str, status: int, says: str
) -> None:
    openai = pytest.importorskip("openai")
    ok = chat_exchange([SYSTEM, USER], chat_response("It is sunny."))
    with _server(tmp_path, [ok], f"request=1:{fault}") as srv:
        with pytest.raises(getattr(openai, error)) as info:
            _openai_call(srv, retries=0)
        assert info.value.status_code == status and says in str(info.value)
        if status == 429:
            assert info.value.response.headers["retry-after"] == "0"
            assert info.value.response.headers["x-ratelimit-remaining-requests"] == "0"
        assert info.value.response.headers["x-looptap-fault"].startswith(fault.split("=")[0])
    # with the SDK's own retries (defaults otherwise): a retryable fault clears and the run goes on
    with _server(tmp_path, [ok], f"request=1:{fault}*2") as srv:
        if status == 400:
            with pytest.raises(openai.BadRequestError):  # not retryable: the SDK does not retry it
                _openai_call(srv, retries=2)
            assert [e.status for e in srv.served] == [400]
        else:
            r = _openai_call(srv, retries=2)
            assert r.choices[0].message.content == "It is sunny."
            assert [e.status for e in srv.served] == [status, status, 200]
            assert [int(e.request_header("x-stainless-retry-count") or 0) for e in srv.served] == [
                0,
                1,
                2,
            ]


@pytest.mark.parametrize(
    ("fault", "error", "status", "kind"),
    [
        ("rate_limit=0", "RateLimitError", 429, "rate_limit_error"),
        ("overloaded=0", "OverloadedError", 529, "overloaded_error"),
        ("server_error=0", "InternalServerError", 500, "api_error"),
        ("context_length", "BadRequestError", 400, "invalid_request_error"),
    ],
)
def test_anthropic_sdk_sees_the_real_error_and_recovers(
    tmp_path: Path, fault: str, error: str, status: int, kind: str
) -> None:
    anthropic = pytest.importorskip("anthropic")

    def call(srv: ReplayServer, retries: int) -> Any:
        client = anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=retries)
        return client.messages.create(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
        )

    with _server(tmp_path, [_anthropic_exchange()], f"request=1:{fault}") as srv:
        with pytest.raises(getattr(anthropic, error)) as info:
            call(srv, 0)
        assert info.value.status_code == status and info.value.body["error"]["type"] == kind
    with _server(tmp_path, [_anthropic_exchange()], f"request=1:{fault}") as srv:
        if status == 400:
            with pytest.raises(anthropic.BadRequestError):
                call(srv, 2)
        else:
            assert call(srv, 2).content[0].text == "Hello"
            assert [e.status for e in srv.served] == [status, 200]


@pytest.mark.parametrize(
    ("fault", "error", "code", "status"),
    [
        ("rate_limit", "ClientError", 429, "RESOURCE_EXHAUSTED"),
        ("overloaded", "ServerError", 503, "UNAVAILABLE"),
        ("server_error", "ServerError", 500, "INTERNAL"),
        ("context_length", "ClientError", 400, "INVALID_ARGUMENT"),
    ],
)
def test_google_genai_sdk_sees_the_real_error(
    tmp_path: Path, fault: str, error: str, code: int, status: str
) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import errors

    with _server(tmp_path, [_gemini_exchange()], f"request=1:{fault}") as srv:
        client = genai.Client(
            api_key="x", http_options={"base_url": srv.url, "api_version": "v1beta"}
        )
        with pytest.raises(getattr(errors, error)) as info:
            client.models.generate_content(model="gemini-2.0-flash", contents="Hi")
        assert (info.value.code, info.value.status) == (code, status)
        # google-genai does not retry by default (WIRE.md §D.6): the caller's next call gets the
        # answer
        again = client.models.generate_content(model="gemini-2.0-flash", contents="Hi")
        assert again.text == "Hello"
    if fault == "rate_limit":
        assert "retryDelay" in srv.served[0].response_body.decode()


# -- transport and stream faults ------------------------------------------------------------------


def test_reset_is_a_connection_error_and_the_retry_recovers(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    ok = chat_exchange([SYSTEM, USER], chat_response("It is sunny."))
    with _server(tmp_path, [ok], "request=1:reset") as srv:
        with pytest.raises(openai.APIConnectionError):
            _openai_call(srv, retries=0)
        assert (
            srv.served[0].transport_error
            and "looptap fault: reset" in srv.served[0].transport_error
        )
    with _server(tmp_path, [ok], "request=1:reset") as srv:
        assert _openai_call(srv, retries=1).choices[0].message.content == "It is sunny."


def test_slow_first_byte_delays_the_recorded_answer(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    ok = chat_exchange([SYSTEM, USER], chat_response("It is sunny."))
    with _server(tmp_path, [ok], "*:slow_first_byte=0.3") as srv:
        t0 = time.monotonic()
        assert _openai_call(srv, retries=0).choices[0].message.content == "It is sunny."
        assert time.monotonic() - t0 >= 0.3  # a lower bound: never early
    assert dict(srv.served[0].response_headers)["x-looptap-fault"] == "slow_first_byte=0.3"


def _stream(srv: ReplayServer, retries: int = 0) -> str:
    import openai

    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=retries)
    out = []
    for chunk in client.chat.completions.create(
        model="gpt-4o", messages=[SYSTEM, USER], tools=TOOLS, stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            out.append(chunk.choices[0].delta.content)
    return "".join(out)


def test_stream_faults_in_the_openai_sdk(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    events = chat_events(["Par", "is", " is", " sunny."])
    ex = sse_exchange(events, req=chat_request([SYSTEM, USER], stream=True))
    with _server(tmp_path, [ex], "request=1:stream_cut=2") as srv:
        with pytest.raises(Exception) as cut:
            _stream(srv)
        assert "incomplete" in str(cut.value).lower() or isinstance(
            cut.value, openai.APIConnectionError
        ), repr(cut.value)
        assert "stream cut after 2 chunks" in (srv.served[0].transport_error or "")
        # the recording is still there for the next attempt
        assert _stream(srv) == "Paris is sunny."
    with _server(tmp_path, [ex], "request=1:error_event") as srv:
        with pytest.raises(openai.APIError, match="The server had an error"):
            _stream(srv)
        assert _stream(srv) == "Paris is sunny."
    with _server(tmp_path, [ex], "request=1:stall=0.3") as srv:
        t0 = time.monotonic()
        assert _stream(srv) == "Paris is sunny."
        assert time.monotonic() - t0 >= 0.3


def test_anthropic_stream_error_event(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic")
    sse = [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
        b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
        b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,'
        b'"output_tokens":1}}}\n\n',
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hel"}}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"lo"}}\n\n',
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        b'"stop_sequence":null},"usage":{"output_tokens":2}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
    req = orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "Hi"}],
            "stream": True,
        }
    )
    ex = sse_exchange(sse, url="https://api.anthropic.com/v1/messages", req=req)
    with _server(tmp_path, [ex], "request=1:error_event") as srv:
        client = anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as info:
            with client.messages.stream(
                model="claude-sonnet-4-5",
                max_tokens=100,
                messages=[{"role": "user", "content": "Hi"}],
            ) as s:
                for _ in s:
                    pass
        assert info.value.body["error"]["type"] == "overloaded_error"
        with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
        ) as s:
            assert s.get_final_text() == "Hello"


# -- selectors -------------------------------------------------------------------------------------


def test_selectors_pick_turns_seqs_tools_and_seeded_draws(tmp_path: Path) -> None:
    loop = tool_loop()  # turn 0 calls get_weather, turn 1 answers
    plan = FaultPlan([parse_fault("turn=1:server_error")])
    with ReplayServer(loop, faults=plan) as srv:
        srv.matcher.label()
        recs = srv.matcher.recorded
        assert [plan.decide(r) is not None for r in recs] == [False, True]
    plan = FaultPlan([parse_fault("tool=get_weather:overloaded*2")])
    with ReplayServer(tool_loop(), faults=plan) as srv:
        first, second = srv.matcher.recorded
        assert [plan.decide(first) is not None for _ in range(3)] == [True, True, False]
        assert plan.decide(second) is None
    # the server numbers unnumbered exchanges 0, 1, …
    plan = FaultPlan([parse_fault("seq=1:reset")])
    with ReplayServer(tool_loop(), faults=plan) as srv:
        first, second = srv.matcher.recorded
        assert (plan.decide(first), plan.decide(second) is not None) == (None, True)

    def draws(seed: int) -> list[bool]:
        p = FaultPlan([parse_fault("p=0.5:rate_limit")], seed=seed)
        with ReplayServer(
            [chat_exchange([SYSTEM, USER], chat_response(str(i))) for i in range(40)], faults=p
        ) as srv:
            return [p.decide(r) is not None for r in srv.matcher.recorded]

    assert draws(1) == draws(1) and draws(1) != draws(2)
    assert 8 < sum(draws(1)) < 32


def test_replay_command_injects_and_reports(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    cas = write(
        tmp_path / "run.jsonl", [chat_exchange([SYSTEM, USER], chat_response("It is sunny."))]
    )
    bad = progress.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "replay",
            str(cas),
            "--fault",
            "turn=x:reset",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "looptap: error: --fault 'turn=x:reset': turn= wants a number in digits, not 'x'"
    ]
    bad = progress.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "replay",
            str(cas),
            "--fault",
            "seq=1:reset*²",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "looptap: error: --fault 'seq=1:reset*²': '*' wants a count "
        "of attempts in digits, from 1 (e.g. *3), not '²'"
    ]
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "replay",
            str(cas),
            "--fault",
            "request=1:overloaded=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert p.stdout is not None
        env: dict[str, str] = {}
        while "OPENAI_BASE_URL" not in env:
            line = p.stdout.readline()
            assert line, "looptap replay printed no OPENAI_BASE_URL"
            if line.startswith("export "):
                k, _, v = line.removeprefix("export ").strip().partition("=")
                env[k] = v
        client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key="x", max_retries=1)
        r = client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, USER], tools=TOOLS)
        assert r.choices[0].message.content == "It is sunny."
    finally:
        p.send_signal(2)
        _, err = progress.communicate(p)
    assert "1 fault injected" in err and "request 1 (recorded #0): request=1:overloaded=0" in err
