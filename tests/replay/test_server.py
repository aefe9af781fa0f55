"""The replay server on loopback: chunk-for-chunk streams at a chosen pace, errors once, fails
closed in each API's own error shape, refuses CONNECT; and the ``replay`` / ``diff`` commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.replay.serving.plan import MISS_CODE
from looptap.cassettes.replay.serving.server import ReplayServer, parse_pace
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import (
    CALL,
    CHAT_URL,
    RESULT,
    SYSTEM,
    USER,
    chat_events,
    chat_exchange,
    chat_request,
    chat_response,
    raw_request,
    sse_exchange,
    tool_loop,
    write,
)
from tests.support import progress

REPO = Path(__file__).resolve().parents[2]


def test_stream_is_served_chunk_for_chunk_with_recorded_headers(tmp_path: Path) -> None:
    events = chat_events(["Par", "is", " is", " sunny."])
    cas = write(tmp_path / "s.jsonl", [sse_exchange(events)])
    with ReplayServer(cas) as srv:
        status, headers, chunks = raw_request(
            srv.url, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER], stream=True)
        )
    assert status == 200
    assert [c for _, c in chunks] == events  # one HTTP chunk per recorded chunk, in order
    h = dict(headers)
    assert (
        h["content-type"] == "text/event-stream"
        and h["x-request-id"] == "req_1"
        and h["transfer-encoding"] == "chunked"
    )
    assert h["x-looptap-replay"] == "seq=0"
    assert [c for _, c in srv.served[0].response_chunks] == events
    assert srv.unplayed() == [] and srv.misses == []


def _sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays ``asyncio.sleep`` is asked for while a replay server serves (then slept as
    asked): in the product only the player waits so (pace, faults), and this test's client is a
    plain socket."""
    import asyncio

    sleep = asyncio.sleep
    slept: list[float] = []

    async def spy(delay: float, *args: Any) -> Any:
        slept.append(delay)
        return await sleep(delay, *args)

    monkeypatch.setattr(asyncio, "sleep", spy)
    return slept


@pytest.mark.parametrize("pace", ["recorded", "x2", "instant"])
def test_pace(tmp_path: Path, pace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    gap, n = 0.3, 6
    events = chat_events(["w"] * (n - 2))
    cas = write(tmp_path / "s.jsonl", [sse_exchange(events, gap=gap, ttfb=0.02)])
    recorded = [0.02 + i * gap for i in range(len(events))]
    slept = _sleeps(monkeypatch)
    with ReplayServer(cas, pace=pace) as srv:
        _, _, chunks = raw_request(
            srv.url, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER], stream=True)
        )
    got = [t for t, _ in chunks]
    speed = parse_pace(pace)
    if speed == 0:
        # Instant: the server waits for nothing (a bound in seconds would measure the machine's
        # load).
        assert slept == [], slept
    else:
        assert slept, "a paced replay that never waited"
        want = [t / speed for t in recorded]
        # Never early. How late a chunk may be is not asserted: lateness is the machine's load, and
        # a shared, busy machine makes it anything (a 0.1 s bound failed under load 22).
        assert all(g >= w - 0.005 for g, w in zip(got, want, strict=True)), (got, want)


def test_recorded_error_is_played_once_without_sdk_retries(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    err = orjson.dumps(
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    )
    ex = chat_exchange([SYSTEM, USER], err, status=429)
    ex.response_headers += [("retry-after", "20"), ("x-should-retry", "true")]
    cas = write(tmp_path / "e.jsonl", [ex])
    with ReplayServer(cas) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=3)
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(
                model="gpt-4o",
                messages=[SYSTEM, USER],
                tools=orjson.loads(chat_request([]))["tools"],
            )
    # no retries (served once, told not to retry), hence no retry-after wait: checked without a
    # clock
    assert "Rate limit reached" in str(info.value)
    assert (
        len(srv.served) == 1 and dict(srv.served[0].response_headers)["x-should-retry"] == "false"
    )


def test_recorded_sdk_retry_is_replayed_as_a_retry(tmp_path: Path) -> None:
    """429 then the same request answered: the recording shows the SDK retrying, so it may."""
    openai = pytest.importorskip("openai")
    err = orjson.dumps(
        {"error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}}
    )
    first = chat_exchange([SYSTEM, USER], err, status=429)
    first.response_headers += [("retry-after", "30")]
    ok = chat_exchange([SYSTEM, USER], chat_response("It is sunny."))
    cas = write(tmp_path / "r.jsonl", [first, ok])
    with ReplayServer(cas) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=2)
        r = client.chat.completions.create(
            model="gpt-4o", messages=[SYSTEM, USER], tools=orjson.loads(chat_request([]))["tools"]
        )
    # the SDK waited 0 s, not 30 (no clock needed)
    assert dict(srv.served[0].response_headers).get("retry-after") == "0"
    assert r.choices[0].message.content == "It is sunny."
    assert [e.status for e in srv.served] == [429, 200] and srv.unplayed() == []


def _anthropic_exchange() -> Exchange:
    req = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    resp = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    return Exchange(
        "POST",
        "https://api.anthropic.com/v1/messages",
        [("anthropic-version", "2023-06-01")],
        orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, orjson.dumps(resp))],
    )


def _gemini_exchange() -> Exchange:
    req = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    resp = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Hello"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 3},
        "modelVersion": "gemini-2.0-flash",
    }
    return Exchange(
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent",
        [],
        orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, orjson.dumps(resp))],
    )


def test_misses_fail_closed_in_each_sdks_own_error(tmp_path: Path) -> None:
    """A changed request gets a 400 in the API's error shape; each SDK raises it with the
    explanation intact, and nothing is retried."""
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    genai = pytest.importorskip("google.genai")
    from google.genai import errors as genai_errors

    cas = write(tmp_path / "m.jsonl", [*tool_loop(), _anthropic_exchange(), _gemini_exchange()])
    with ReplayServer(cas) as srv:
        oc = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=3)
        with pytest.raises(openai.BadRequestError) as oi:
            oc.chat.completions.create(
                model="gpt-4o", messages=[SYSTEM, {**USER, "content": "Weather in Rome?"}]
            )
        assert oi.value.code == MISS_CODE
        assert "conversation c1, turn 0 (seq 0)" in str(oi.value) and "messages[1].content" in str(
            oi.value
        )

        ac = anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=3)
        with pytest.raises(anthropic.BadRequestError) as ai:
            ac.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=100,
                messages=[{"role": "user", "content": "Hello?"}],
            )
        assert "C: the user input at messages[0] changed (messages[0].content)" in str(ai.value)

        gc = genai.Client(api_key="x", http_options={"base_url": srv.url, "api_version": "v1beta"})
        with pytest.raises(genai_errors.ClientError) as gi:
            gc.models.generate_content(model="gemini-2.0-flash", contents="Hello?")
        assert gi.value.code == 400 and "contents[0].parts[0].text" in str(gi.value)
        # What was recorded still plays.
        assert gc.models.generate_content(model="gemini-2.0-flash", contents="Hi").text == "Hello"
    # one request each: no SDK retried
    assert [e.status for e in srv.served] == [400, 400, 400, 200]
    assert len(srv.misses) == 3


def test_exhausted_cassette_and_connect_are_refused(tmp_path: Path) -> None:
    cas = write(tmp_path / "x.jsonl", [chat_exchange([SYSTEM, USER], chat_response("ok"))])
    with ReplayServer(cas) as srv:
        assert (
            raw_request(srv.url, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER]))[0]
            == 200
        )
        status, headers, chunks = raw_request(
            srv.url, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER])
        )
        assert status == 400 and dict(headers)["x-should-retry"] == "false"
        msg = orjson.loads(chunks[0][1])["error"]["message"]
        assert "exhausted" in msg and "already played" in msg
        status, _, chunks = raw_request(srv.url, "CONNECT", "api.openai.com:443")
        assert status == 403 and b"replayed offline" in chunks[0][1]


def test_what_it_does_not_serve_is_refused_in_plain_text_and_kept(tmp_path: Path) -> None:
    """CONNECT, and a WebSocket upgrade where no session is replayed: a plain-text refusal that
    closes the connection, kept among the served exchanges as it was sent."""
    upgrade = {
        "connection": "Upgrade",
        "upgrade": "websocket",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
    }
    with ReplayServer(write(tmp_path / "t.jsonl", tool_loop())) as srv:
        connect = raw_request(srv.url, "CONNECT", "api.example.com:443")
        ws = raw_request(srv.url, "GET", "/v1/chat/completions", headers=upgrade)
    for (status, headers, chunks), want, said in (
        (connect, 403, b"looptap replay refuses CONNECT api.example.com:443: the run is replayed"),
        (ws, 400, b"looptap replay: no WebSocket session is replayed at /v1/chat/completions"),
    ):
        body = chunks[0][1]
        assert status == want and body.startswith(said)
        assert headers == [
            ("content-type", "text/plain"),
            ("content-length", str(len(body))),
            ("connection", "close"),
        ]
    assert [(e.status, e.response_chunks[0][1]) for e in srv.served] == [
        (403, connect[2][0][1]),
        (400, ws[2][0][1]),
    ]


def test_a_live_upstream_that_cannot_be_reached_is_a_502_in_the_apis_shape(
    tmp_path: Path,
) -> None:
    """Past a fork's cursor the request goes live; an upstream that cannot be reached is the
    API's own error (502, looptap_upstream_error), kept with the failure as its transport error."""
    import socket

    from looptap.cassettes.replay.forking.cursor import Cursor, live_router
    from looptap.cassettes.replay.forking.placement import parse_cursor

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    cursor = Cursor(parse_cursor("turn=0"), live_router({"openai": down}))
    with ReplayServer(write(tmp_path / "t.jsonl", tool_loop()), cursor=cursor) as srv:
        status, headers, chunks = raw_request(
            srv.url, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER])
        )
    error = orjson.loads(chunks[0][1])["error"]
    assert status == 502 and error["code"] == "looptap_upstream_error"
    assert error["message"].startswith(
        f"looptap: the live upstream failed: cannot connect to {down}"
    )
    assert headers[:3] == [
        ("content-type", "application/json"),
        ("x-looptap-replay", "live past the cursor"),
        ("content-length", str(len(chunks[0][1]))),
    ]
    (served,) = srv.served
    assert served.status == 502 and served.response_headers == headers[:3]
    assert served.transport_error is not None and down in served.transport_error


def test_recorded_transport_failure_is_replayed_as_one(tmp_path: Path) -> None:
    events = chat_events(["a", "b", "c"])
    ex = sse_exchange(events[:2])
    ex.transport_error = "upstream reset the connection"
    cas = write(tmp_path / "t.jsonl", [ex])
    with ReplayServer(cas) as srv:
        with pytest.raises((ConnectionError, ValueError, OSError)):
            raw_request(
                srv.url, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER], stream=True)
            )
    assert [c for _, c in srv.served[0].response_chunks] == events[:2]


# ---------------------------------------------------------------------------------------------
# The commands


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``looptap ARGS`` in this process (the boundary's error conversion included)."""
    import contextlib
    import io

    from looptap.cassettes.cli import main

    out, err = io.StringIO(), io.StringIO()
    buf = io.BytesIO()  # `looptap diff --json` writes bytes to sys.stdout.buffer
    stdout = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:
            rc = int(exc.code or 0)
    stdout.flush()
    out.write(buf.getvalue().decode())
    return subprocess.CompletedProcess(["looptap", *args], rc, out.getvalue(), err.getvalue())


def test_replay_command_prints_exports_serves_and_reports(tmp_path: Path) -> None:
    cas = write(tmp_path / "run.jsonl", tool_loop())
    proc = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", str(cas)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        exports: dict[str, str] = {}
        while "GEMINI_API_BASE" not in exports:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            k, _, v = line.strip().removeprefix("export ").partition("=")
            exports[k] = v
        assert exports["OPENAI_BASE_URL"].startswith("http://127.0.0.1:") and exports[
            "OPENAI_BASE_URL"
        ].endswith("/v1")
        base = exports["OPENAI_BASE_URL"].removesuffix("/v1")
        assert exports["ANTHROPIC_BASE_URL"] == exports["GOOGLE_GEMINI_BASE_URL"] == base
        assert (
            raw_request(base, "POST", "/v1/chat/completions", chat_request([SYSTEM, USER]))[0]
            == 200
        )
        assert (
            raw_request(
                base,
                "POST",
                "/v1/chat/completions",
                chat_request([SYSTEM, USER, CALL, {**RESULT, "content": "x"}]),
            )[0]
            == 400
        )
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = progress.communicate(proc)
    assert proc.returncode == 1, err  # a miss happened
    assert "played 1 of 2 recorded round trips, 1 unmatched request\n" in err
    assert "C: the tool result for call_A1 changed (messages[3].content)" in err


def test_replay_command_bad_input_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not a cassette\n")
    proc = _cli("replay", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip().startswith("looptap: error:")
        and len(proc.stderr.strip().splitlines()) == 1
    )
    proc = _cli("replay", str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "cannot open" in proc.stderr
    good = write(tmp_path / "g.jsonl", tool_loop())
    proc = _cli("replay", str(good), "--pace", "sometimes")
    assert proc.returncode == 2 and "pace must be" in proc.stderr and "Traceback" not in proc.stderr


def test_diff_command_text_and_json(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", tool_loop())
    same = write(tmp_path / "same.jsonl", tool_loop())
    changed = tool_loop()
    b_second = chat_exchange(
        [SYSTEM, USER, CALL, {**RESULT, "content": "rainy"}], chat_response("It is rainy in Paris.")
    )
    b = write(tmp_path / "b.jsonl", [changed[0], b_second])
    proc = _cli("diff", str(a), str(same))
    assert proc.returncode == 0 and "do not diverge" in proc.stdout
    proc = _cli("diff", str(a), str(b))
    assert proc.returncode == 1, proc.stderr
    assert "conversation c1 (A) ↔ c1 (B):" in proc.stdout
    assert (
        "turn 1 (seq 1 ↔ 1): C: the tool result for call_A1 changed (messages[3].content)"
        in proc.stdout
    )
    assert 'messages[3].content: A "sunny, 21 C", B "rainy"' in proc.stdout
    assert "turn 1 (seq 1 ↔ 1): E: the model emitted something else (text)" in proc.stdout
    doc = json.loads(_cli("diff", str(a), str(b), "--json").stdout)
    assert [(d["layer"], d["turn"], d["path"]) for d in doc["divergences"]] == [
        ("C", 1, "messages[3].content"),
        ("E", 1, "response.text"),
    ]
    # A run that went on longer: the extra turn is named.
    longer = write(
        tmp_path / "l.jsonl",
        [
            *tool_loop(),
            chat_exchange(
                [
                    SYSTEM,
                    USER,
                    CALL,
                    RESULT,
                    {"role": "assistant", "content": "It is sunny in Paris."},
                    {"role": "user", "content": "Lyon?"},
                ],
                chat_response("Also sunny."),
            ),
        ],
    )
    proc = _cli("diff", str(a), str(longer))
    assert (
        "C: run B went on for 1 more turn (from turn 2); the other stopped after turn 1"
        in proc.stdout
    ), proc.stdout


def test_environment_points_every_sdk_at_one_port(tmp_path: Path) -> None:
    cas = write(tmp_path / "e.jsonl", tool_loop())
    srv = ReplayServer(cas, port=0)
    env = srv.env
    assert (
        env["OPENAI_BASE_URL"].endswith("/v1")
        and "ANTHROPIC_BASE_URL" in env
        and "GOOGLE_GEMINI_BASE_URL" in env
    )
    assert os.environ.get("LOOPTAP_NEVER_SET") is None
    with pytest.raises(ValueError):
        parse_pace("x0")
    assert (
        parse_pace("recorded") == 1.0 and parse_pace("2x") == 2.0 and parse_pace("instant") == 0.0
    )
    assert CHAT_URL.startswith("https://")


def test_diff_names_real_ids_and_says_what_the_findings_say(tmp_path: Path) -> None:
    """A result sent back under an id the model never gave: the diff shows each run's real ids (not
    the <id:N> placeholders they were compared as) and what looptap's findings call it."""
    a = write(tmp_path / "a.jsonl", tool_loop())
    good = tool_loop()
    bogus = chat_exchange(
        [SYSTEM, USER, CALL, {**RESULT, "tool_call_id": "call_bogus"}],
        chat_response("It is sunny in Paris."),
    )
    b = write(tmp_path / "b.jsonl", [good[0], bogus])
    proc = _cli("diff", str(a), str(b))
    assert proc.returncode == 1, proc.stderr
    assert "<id:" not in proc.stdout, proc.stdout
    assert 'A "call_A1", B "call_bogus"' in proc.stdout, proc.stdout
    assert (
        "looptap on B's turn: C.wrong_tool_call_id" in proc.stdout
        and "`call_bogus` for get_weather (the model's id: call_A1)" in proc.stdout
    ), proc.stdout
    doc = json.loads(_cli("diff", str(a), str(b), "--json").stdout)
    first = doc["divergences"][0]
    assert any(f.startswith("C.wrong_tool_call_id") for f in first["findings_b"])
    assert "<id:" not in json.dumps(first["changes"])
