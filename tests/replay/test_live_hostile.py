"""Issue 53, item 3: the live requests looptap sends itself — a fork's turns past its cursor (the
replay server's relay: ``looptap run --from``, the pytest plugin's ``fork=`` and ``looptap why``'s
branches run it) and ``looptap compare`` — go one per connection (``Connection: close``), and
one answer is read from each connection: a hostile upstream cannot hand one call another's
answer, and no call fails that the upstream did not fail.

The upstream is a :class:`~tests.support.scripted.ScriptedUpstream` that says which request it
answers (the marker of the request's last user message, and whose credential it carried) and,
after every answer, on the same connection: sends a second answer nobody asked for (``stale``),
closes the connection when a next request comes on it (``close``), or, idle a moment, sends
``408`` + ``Connection: close`` (``408``). Each live call is a fresh openai SDK client (retries
off) with a credential of its own.
The replay server's own reader refuses a request with both ``Content-Length`` and
``Transfer-Encoding: chunked`` (RFC 9112 6.3), so the request a client hid behind it never goes
live; what is sent upstream never carries both (compare included, whatever the cassette and
``--header`` say).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11
import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import (
    SYSTEM,
    TOOLS,
    chat_exchange,
    chat_request,
    chat_response,
    write,
)
from tests.support import progress
from tests.support.scripted import AFTER, Reply, ScriptedRequest, ScriptedUpstream

#: Live calls per scenario (each on a fresh client).
N = 6


def _key(marker: str) -> str:
    return f"sk-test-{marker}"


def echo(req: ScriptedRequest) -> Reply:
    """The answer names the request it answers: its last user message, and whose credential it
    carried (the key's own part: a key itself would be redacted from a report)."""
    who = req.headers.get("authorization", "").removeprefix(f"Bearer {_key('')}")
    return Reply.say(_answer(req.user_texts()[-1], who))


def _answer(marker: str, who: str) -> str:
    return f"ANSWER {marker} for {who}"


def _recording(markers: list[str]) -> list[Exchange]:
    """One conversation per marker, one turn each, every other one streamed (as :func:`_ask` asks
    it: a fork at turn=0 sends each live as the turn it is)."""
    return [
        chat_exchange(
            [SYSTEM, {"role": "user", "content": m}],
            chat_response(f"recorded {m}"),
            **({"stream": True} if i % 2 else {}),
        )
        for i, m in enumerate(markers)
    ]


def _each_request_alone(live: ScriptedUpstream, markers: list[str], key: str | None = None) -> None:
    """The upstream got each call once, in order (no retry, nothing hidden), on a connection of its
    own, with its own credential (``key``: the one every request carries) and no other in it, and
    never both ``Content-Length`` and ``Transfer-Encoding``."""
    log = [x.request for x in live.log]
    assert [r.user_texts()[-1] for r in log] == markers, [x.line() for x in live.log]
    for r in log:
        own = key or _key(r.user_texts()[-1])
        assert r.headers.get("authorization") == f"Bearer {own}", r.headers
        body = orjson.dumps(r.body)
        assert b"sk-test-" not in body and b"authorization" not in body.lower(), body[:400]
        assert "transfer-encoding" not in r.headers, r.headers
        assert "content-length" in r.headers, r.headers
    assert len({r.connection for r in log}) == len(log), [r.connection for r in log]


def _ask(url: str, marker: str, stream: bool) -> str:
    """One call on a fresh openai client (retries off) whose credential names ``marker``."""
    from openai import OpenAI

    client = OpenAI(base_url=url + "/v1", api_key=_key(marker), max_retries=0)
    asked = {"model": "gpt-4o", "messages": [SYSTEM, {"role": "user", "content": marker}]}
    try:
        if not stream:
            got = client.chat.completions.create(**asked, tools=TOOLS)  # type: ignore[call-overload]
            return str(got.choices[0].message.content)
        parts = client.chat.completions.create(**asked, tools=TOOLS, stream=True)  # type: ignore[call-overload]
        return "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
    except Exception as exc:  # the call failed: said in the list of answers the test compares
        return f"FAILED {type(exc).__name__}: {str(exc)[:160]}"


def _fork(upstream: str, markers: list[str]) -> ReplayServer:
    """The replay server of a fork at turn=0 (every turn live, to ``upstream``), as ``looptap run
    --from`` and the pytest plugin run it in process."""
    cursor = Cursor(parse_cursor("turn=0"), live_router({"openai": upstream}))
    return ReplayServer(_recording(markers), cursor=cursor)


def _afters(live: ScriptedUpstream, n: int) -> None:
    """The upstream did its hostile part after each of the ``n`` answers. Its handler counts that
    once it has written the answer, so the client can hold the last answer before it is counted:
    waited for (a hang is found by lack of progress), then the count must be exactly ``n``."""
    progress.until(lambda: live.afters >= n, what="the upstream's part after its last answer")
    assert live.afters == n


def _no_call_failed(srv: ReplayServer, n: int) -> None:
    assert srv.internal_errors == [] and srv.misses == [], srv.report_lines()
    got = [(ex.status, ex.transport_error) for ex in srv.served]
    assert got == [(200, None)] * n, got


# -- a fork's live turns ---------------------------------------------------------------------------


@pytest.mark.parametrize("after", AFTER)
def test_each_live_turn_of_a_fork_gets_its_own_answer_from_a_hostile_upstream(after: str) -> None:
    """``stale``: the answer nobody asked for is never any call's; ``close`` / ``408``: no call
    fails on a connection the upstream closed (streamed and not, alternately)."""
    markers = [f"REQ-{i}" for i in range(N)]
    with ScriptedUpstream(echo, after=after) as live, _fork(live.url, markers) as srv:
        answers = [_ask(srv.url, m, stream=i % 2 == 1) for i, m in enumerate(markers)]
        _afters(live, N)
    assert answers == [_answer(m, m) for m in markers]
    _each_request_alone(live, markers)
    _no_call_failed(srv, N)


def _raw(url: str, data: bytes) -> bytes:
    """``data`` sent on a fresh connection; every byte the server sent until it closed."""
    u = urlsplit(url)
    assert u.hostname is not None and u.port is not None
    out = b""
    # a bound on a hung server, not a timing: the server closes after its answer
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        s.sendall(data)
        while chunk := s.recv(65536):
            out += chunk
    return out


def _head(url: str, marker: str, framing: str) -> bytes:
    """A request head whose last header lines are ``framing`` (ending with the empty line)."""
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {urlsplit(url).netloc}\r\n"
        f"content-type: application/json\r\nauthorization: Bearer {_key(marker)}\r\n"
        f"{framing}\r\n\r\n"
    ).encode()


def _only_response(raw: bytes) -> tuple[int, bytes]:
    """The status and body of the one response in ``raw``, read by h11: nothing follows it but
    the close."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("host", "x")]))
    conn.receive_data(raw)
    conn.receive_data(b"")
    status, body = 0, b""
    while not isinstance(event := conn.next_event(), h11.EndOfMessage):
        if isinstance(event, h11.Response):
            status = event.status_code
        else:
            assert isinstance(event, h11.Data), event
            body += event.data
    assert conn.trailing_data == (b"", True), conn.trailing_data
    return status, body


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def test_a_request_framed_both_ways_is_refused_and_what_it_hid_never_goes_live() -> None:
    """The client's request frames its body both ways (a front end reading ``Content-Length``
    sees one request; a reader that goes by ``chunked`` sees a second one after the body, with
    another credential): answered 400 once, the connection closed, nothing of it sent live. A
    request framed ``chunked`` alone goes live with ``Content-Length`` only; every later call
    gets its own answer."""
    markers = [f"REQ-{i}" for i in range(N)]
    with ScriptedUpstream(echo) as live, _fork(live.url, markers) as srv:
        hidden_body = chat_request([SYSTEM, {"role": "user", "content": markers[1]}])
        hidden = (
            _head(srv.url, "HIDDEN", f"content-length: {len(hidden_body)}\r\nconnection: close")
            + hidden_body
        )
        front = _chunked(chat_request([SYSTEM, {"role": "user", "content": markers[0]}]))
        framing = f"content-length: {len(front) + len(hidden)}\r\ntransfer-encoding: chunked"
        refused = _raw(srv.url, _head(srv.url, "SMUGGLER", framing) + front + hidden)
        # a request framed chunked alone is fine: it goes live as itself
        body = chat_request([SYSTEM, {"role": "user", "content": markers[0]}])
        framed = _raw(
            srv.url,
            _head(srv.url, markers[0], "transfer-encoding: chunked\r\nconnection: close")
            + _chunked(body),
        )
        answers = [_ask(srv.url, m, stream=i % 2 == 1) for i, m in enumerate(markers[1:], 1)]
    # nothing of the refused request reached the upstream, nor its hidden second one
    everything = orjson.dumps([(x.request.headers, x.request.body) for x in live.log])
    assert b"HIDDEN" not in everything and b"SMUGGLER" not in everything, [
        x.line() for x in live.log
    ]
    _each_request_alone(live, markers)
    # one answer, a 400, and the connection closed: nothing after the body was read as a request
    status, said = _only_response(refused)
    assert status == 400 and b"both Transfer-Encoding and Content-Length" in said, refused
    status, got = _only_response(framed)
    assert status == 200, framed
    text = orjson.loads(got)["choices"][0]["message"]["content"]
    assert text == _answer(markers[0], markers[0])
    assert answers == [_answer(m, m) for m in markers[1:]]
    assert srv.refused == 1
    _no_call_failed(srv, N)


# -- compare ---------------------------------------------------------------------------------------


def _compare(
    capsys: pytest.CaptureFixture[str], run: Path, url: str, *extra: str
) -> tuple[int, dict[str, Any]]:
    rc = main(
        ["compare", str(run), "--upstream", f"openai={url}", "--samples", "2", "--json", *extra]
    )
    out = capsys.readouterr().out
    return rc, orjson.loads(out) if out else {}


@pytest.mark.parametrize("after", AFTER)
def test_each_request_compare_sends_gets_its_own_answer_from_a_hostile_upstream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], after: str
) -> None:
    markers = [f"REQ-{i}" for i in range(N // 2)]
    run = write(tmp_path / "run.jsonl", _recording(markers))
    key = _key("compare")
    with ScriptedUpstream(echo, after=after) as live:
        rc, doc = _compare(capsys, run, live.url, "--header", f"authorization: Bearer {key}")
        _afters(live, 2 * len(markers))
    assert rc == 0 and doc["stopped"] is None, doc
    turns = doc["turns"]
    assert isinstance(turns, list)
    assert [[s["text"] for s in t["samples"]] for t in turns] == [
        [_answer(m, "compare")] * 2 for m in markers
    ]
    assert all(t["errors"] == 0 for t in turns)
    _each_request_alone(live, [m for m in markers for _ in range(2)], key)


def test_what_compare_sends_never_carries_both_content_length_and_chunked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cassette's recorded requests and the user's ``--header`` name both framings: the
    upstream gets each request framed by its own ``Content-Length`` alone, its body whole."""
    markers = [f"REQ-{i}" for i in range(3)]
    exchanges = _recording(markers)
    for ex in exchanges:
        ex.request_headers += [("transfer-encoding", "chunked"), ("content-length", "5")]
    run = write(tmp_path / "run.jsonl", exchanges)
    key = _key("compare")
    with ScriptedUpstream(echo) as live:
        rc, doc = _compare(
            capsys,
            run,
            live.url,
            "--header",
            f"authorization: Bearer {key}",
            "--header",
            "Transfer-Encoding: chunked",
            "--header",
            "Content-Length: 3",
        )
    assert rc == 0 and doc["stopped"] is None, doc
    _each_request_alone(live, [m for m in markers for _ in range(2)], key)
    for x, ex in zip(live.log, [e for e in exchanges for _ in range(2)], strict=True):
        assert orjson.loads(ex.request_body) == x.request.body


def test_an_upstream_that_answers_before_taking_the_body_fails_that_call_alone() -> None:
    """An upstream that refuses a large body from its head (413) and closes before reading it
    resets the connection while the fork is still sending: that call is answered in the API's
    shape, naming what happened (it was a socket error past the relay: the client's connection
    dropped unanswered, nothing said); the next call is answered."""
    from openai import APIStatusError, OpenAI

    from tests.support.upstream import FakeUpstream

    class Small(FakeUpstream):
        max_body = 1 << 20

    with Small() as live, _fork(live.url, ["REQ-0", "REQ-1"]) as srv:
        client = OpenAI(base_url=srv.url + "/v1", api_key=_key("REQ-0"), max_retries=0)
        # more than the loopback's buffers hold: the reset comes while it is being sent
        big = [SYSTEM, {"role": "user", "content": "REQ-0 " + "x" * (32 << 20)}]
        with pytest.raises(APIStatusError, match="broke the connection off while taking the req"):
            client.chat.completions.create(model="gpt-4o", messages=big, tools=TOOLS)  # type: ignore[arg-type]
        # the fake answers from its corpus: a 200 is this call's answer
        ok = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": "REQ-1"}], tools=TOOLS
        )  # type: ignore[arg-type]
        assert ok.status_code == 200
    assert srv.internal_errors == [] and [ex.status for ex in srv.served] == [400, 200]
