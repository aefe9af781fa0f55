"""What mitmproxy 11.0.2 cannot pass, through the real recorder (docs/recorder.md, "What mitmproxy
11.0.2 does not pass"), each answer served by the project's fake upstream on loopback
(:mod:`tests.support.upstream`'s ``early_hints=``, ``trailers=``, ``duplicate_length=`` keys) to a
plain client (httpx) and to the real openai SDK, streamed (SSE) and not, directly and through
``looptap record``:

* ``103 Early Hints`` before the answer: mitmproxy took the first informational head for the
  answer and dropped the rest, so the client waited until its own timeout. The recorder now reads
  past them (:mod:`proxy.http1_fixes`, a version-guarded patch): the client gets the real answer,
  as directly, without the 1xx heads; the cassette holds the answer, with a note naming them.
* A chunked answer that ends with a trailer section: mitmproxy's HTTP/1 reader raises at the
  trailers, the last chunk never reaches the client, which waited until its timeout. The recorder
  now drops the trailer fields (the same module): the client gets the whole answer, ended, as
  directly, without the trailer fields; the cassette says they were announced and dropped.
* An equal duplicate ``Content-Length``: mitmproxy answers ``502`` (pinned here, so a change in
  mitmproxy is noticed): at once, and the cassette holds an A-layer transport error naming it.

A hang is found by lack of progress (:mod:`tests.support.progress`), never by seconds: every call
runs in a thread, with a client timeout so that thread ends too.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RecorderProcess, clean_env, needs_recorder
from tests.support.upstream import FakeUpstream
from tests.support.wire import http_request

httpx = pytest.importorskip("httpx2")
openai = pytest.importorskip("openai")

pytestmark = [needs_recorder]

KEY = "sk-looptap-quirks-0123456789abcdef"
ASK = [{"role": "user", "content": "What is the capital of France?"}]
#: The client's own limit: only so that a hung call's thread ends too; a hang is found earlier, by
#: lack of progress.
CLIENT_TIMEOUT = progress.STALL + 60


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(delay=0.0) as up:
        yield up


@pytest.fixture(scope="module")
def recorder(
    upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RecorderProcess]:
    tmp = tmp_path_factory.mktemp("quirks")
    with RecorderProcess(tmp / "run.jsonl", tmp / "conf", upstream.url) as rec:
        yield rec


def _call(fn: Callable[[], Any], pids: list[int], what: str) -> Any:
    """``fn()`` in a thread, waited for while this process, its threads (the fake upstream) and
    ``pids`` (the recorder) make progress: a client left waiting is :class:`progress.Hung`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except Exception as exc:  # what the client made of it, compared by the tests
            box["result"] = {"error": type(exc).__name__, "message": str(exc)[:500]}

    threading.Thread(target=run, daemon=True).start()
    return progress.until(lambda: box.get("result"), pids=[os.getpid(), *pids], what=what)


def _httpx(base: str, scenario: str, stream: bool) -> dict[str, Any]:
    body = {"model": "gpt-4o", "messages": ASK, "stream": stream}
    headers = {"authorization": f"Bearer {KEY}", "x-fake-upstream": scenario}
    with httpx.Client(timeout=CLIENT_TIMEOUT) as client:
        r = client.post(f"{base}/chat/completions", json=body, headers=headers)
        return {
            "status": r.status_code,
            "body": r.content,
            "headers": {k.lower(): v for k, v in r.headers.items()},
        }


def _openai(base: str, scenario: str, stream: bool) -> dict[str, Any]:
    client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=CLIENT_TIMEOUT)
    try:
        r = client.chat.completions.create(
            model="gpt-4o",
            messages=ASK,  # type: ignore[arg-type]
            stream=stream,
            extra_headers={"x-fake-upstream": scenario},
        )
        if stream:
            text = "".join(c.choices[0].delta.content or "" for c in r if c.choices)  # type: ignore[union-attr]
        else:
            text = r.choices[0].message.content  # type: ignore[union-attr]
        return {"text": text}
    except openai.APIStatusError as exc:
        return {"error": type(exc).__name__, "status": exc.status_code, "message": str(exc)[:500]}
    finally:
        client.close()


def _both(
    upstream: FakeUpstream, recorder: RecorderProcess, client: str, scenario: str, stream: bool
) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """What ``client`` got directly and through the recorder, and what the upstream served for
    the call through the recorder."""
    call = _httpx if client == "httpx" else _openai
    direct = _call(lambda: call(upstream.url + "/v1", scenario, stream), [], "the direct call")
    before = len(upstream.served)
    through = _call(
        lambda: call(recorder.env["OPENAI_BASE_URL"], scenario, stream),
        [recorder.pid],
        f"{client} through the recorder ({scenario}, stream={stream})",
    )
    served = upstream.wait_served(before + 1)[before:]
    return direct, through, served


def _recorded(recorder: RecorderProcess, scenario: str) -> list[Any]:
    """The round trips recorded so far for ``scenario`` (the recorder keeps running: the writer
    gets each one before the client has the answer's end; it is on disk a moment later)."""

    def found() -> list[Any]:
        if not recorder.out.exists():
            return []
        run = open_run(recorder.out)
        return [
            (ex, [f for f in run.analysis.findings if f.seq == ex.seq])
            for ex in run.exchanges
            if (ex.request_header("x-fake-upstream") or "") == scenario
        ]

    return progress.until(found, pids=[recorder.pid], what=f"the round trip of {scenario!r}")


@pytest.mark.parametrize("hints", [1, 3])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("client", ["httpx", "openai"])
def test_early_hints_are_dropped_and_the_answer_passes(
    upstream: FakeUpstream, recorder: RecorderProcess, client: str, stream: bool, hints: int
) -> None:
    scenario = f"text; early_hints={hints}; delay=0; tag={client}-{stream}"
    direct, through, served = _both(upstream, recorder, client, scenario, stream)
    assert served[0].complete, served[0]
    assert "error" not in through, through
    if client == "httpx":
        assert through["status"] == 200 and through["body"] == direct["body"] == served[0].body
    else:
        assert through == direct and through["text"], (direct, through)
    ((ex, findings),) = _recorded(recorder, scenario)
    _answered(ex, client, stream)
    assert ex.response_body == served[0].body
    times = f" ({hints} times)" if hints > 1 else ""
    said = f"informational: the upstream sent 103 Early Hints{times} before its answer;"
    assert [n for n in ex.notes if n.startswith("informational:")] == [
        f"{said} not passed to the client (mitmproxy passes no 1xx on)"
    ], ex.notes
    # (the fake upstream's recorded answer names another model than asked: so it does directly)
    assert {f.code for f in findings if f.layer == "A"} <= {"A.model_mismatch"}, findings


def test_after_early_hints_the_next_call_on_the_connection_gets_its_own_answer(
    upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """One client connection, two calls: the first, whose answer follows a ``103``, gets its text
    answer; the next, a tool call, gets its own. (mitmproxy alone took the ``103`` for the answer
    and the real answer for stray bytes: the first call hung.)"""
    base = recorder.env["OPENAI_BASE_URL"]
    body = {"model": "gpt-4o", "messages": ASK}
    scenarios = ("text; early_hints=1; tag=next", "tool_call; tag=next")

    def two_calls() -> list[tuple[Any, Any]]:
        with httpx.Client(timeout=CLIENT_TIMEOUT) as client:
            got = []
            for scenario in scenarios:
                r = client.post(
                    f"{base}/chat/completions", json=body, headers={"x-fake-upstream": scenario}
                )
                got.append((r, r.extensions["network_stream"].get_extra_info("client_addr")))
            return got

    before = len(upstream.served)
    (first, first_conn), (second, second_conn) = _call(
        two_calls, [recorder.pid], "two calls on one connection"
    )
    served = upstream.wait_served(before + 2)[before:]
    assert first_conn == second_conn  # the same connection to the recorder
    assert first.status_code == 200 and first.content == served[0].body, first.text
    assert first.json()["choices"][0]["message"]["content"], first.text
    assert second.status_code == 200 and second.content == served[1].body, second.text
    assert second.json()["choices"][0]["message"]["tool_calls"], second.text


def _answered(ex: Any, client: str, stream: bool) -> None:
    """Recorded as answered, 200, without a transport error. The openai sync SDK hangs up right
    after ``[DONE]`` (MITMPROXY.md §2): whether that comes before the message's last chunk is a race
    (seen once in a full suite), which mitmproxy names ``Client disconnected.``; the stream is
    whole either way (judged from its content)."""
    assert ex.status == 200, ex
    late = ("Client disconnected.",) if client == "openai" and stream else ()
    assert ex.transport_error in (None, *late), ex


@pytest.mark.parametrize("announced", ["announced", "unannounced"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("client", ["httpx", "openai"])
def test_trailers_are_dropped_and_the_answer_ends_whole(
    upstream: FakeUpstream, recorder: RecorderProcess, client: str, stream: bool, announced: str
) -> None:
    scenario = f"text; trailers={announced}; delay=0; tag={client}-{stream}"
    direct, through, served = _both(upstream, recorder, client, scenario, stream)
    assert served[0].trailers and served[0].complete, served[0]
    assert "error" not in through, through
    if client == "httpx":
        assert through["status"] == 200 and through["body"] == direct["body"] == served[0].body
    else:
        assert through == direct and through["text"], (direct, through)
    ((ex, findings),) = _recorded(recorder, scenario)
    _answered(ex, client, stream)
    assert ex.response_body == served[0].body
    dropped = [n for n in ex.notes if n.startswith("trailers:")]
    assert len(dropped) == (1 if announced == "announced" else 0), ex.notes
    assert not [f for f in findings if f.code == "A.transport_error"], findings


def test_a_request_with_trailers_reaches_the_upstream_whole(
    upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """The same reader reads a client's chunked request: its trailer fields are dropped too, and
    the request goes on (it used to stop there, the client waiting for an answer)."""
    body = json.dumps({"model": "gpt-4o", "messages": ASK}).encode()
    chunked = b"%x\r\n%s\r\n0\r\nx-client-sha256: 0\r\n\r\n" % (len(body), body)
    headers = [
        ("transfer-encoding", "chunked"),
        ("content-type", "application/json"),
        ("x-fake-upstream", "text; tag=request-trailers"),
    ]
    port = recorder.port()
    before = len(upstream.served)
    got = _call(
        lambda: http_request(
            "127.0.0.1",
            port,
            "POST",
            "/v1/chat/completions",
            headers,
            chunked,
            timeout=CLIENT_TIMEOUT,
        ),
        [recorder.pid],
        "a raw client's request with trailers",
    )
    assert got.status == 200 and got.complete and got.error is None, got
    assert upstream.wait_served(before + 1)[before].request_body == body


@pytest.mark.parametrize("client", ["httpx", "openai"])
def test_an_equal_duplicate_content_length_is_mitmproxys_502_at_once(
    upstream: FakeUpstream, recorder: RecorderProcess, client: str
) -> None:
    """Pinned: mitmproxy 11.0.2 reads ``Content-Length: N`` twice as ``N, N`` and rejects it,
    which RFC 9110 §8.6 allows (as it allows accepting identical values), answering 502 as RFC 9112
    §6.3 has a proxy do. If this test fails, mitmproxy changed: say so in docs/recorder.md."""
    scenario = f"text; duplicate_length=1; tag={client}"
    direct, through, served = _both(upstream, recorder, client, scenario, False)
    assert "error" not in direct, direct
    assert (
        len(served) == 1 and [k for k, _ in served[0].response_headers].count("content-length") == 2
    )
    if client == "httpx":
        assert through["status"] == 502, through
        assert b"invalid content-length header" in through["body"], through
    else:
        assert through["error"] == "InternalServerError" and through["status"] == 502, through
        assert through["message"] == "Error code: 502", through
    ((ex, findings),) = _recorded(recorder, scenario)
    assert ex.status is None and "invalid content-length header" in (ex.transport_error or "")
    assert [f.code for f in findings if f.layer == "A"] == ["A.transport_error"], findings


def _in_recorder_env(code: str) -> Any:
    """What ``code`` prints (JSON), run by the recorder's Python."""
    assert PROXY_PYTHON is not None
    proc = progress.run(
        [str(PROXY_PYTHON), "-c", code], capture_output=True, text=True, env=clean_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_http1_patches_are_version_guarded() -> None:
    """:mod:`proxy.http1_fixes` patches mitmproxy only in the versions it was checked against, and
    only once; any other version is left as it is, with the reason."""
    got = _in_recorder_env("""
import json
from mitmproxy.proxy.layers.http import _http1
from looptap.proxy import http1_fixes
reader, read_headers = _http1.make_body_reader, _http1.Http1Client.read_headers
refused = http1_fixes.apply("13.0.0")
untouched = (_http1.make_body_reader, _http1.Http1Client.read_headers) == (reader, read_headers)
first, again = http1_fixes.apply(), http1_fixes.apply()
chunked, fixed = _http1.make_body_reader(None), _http1.make_body_reader(5)
print(json.dumps({"refused": refused, "untouched": untouched, "first": first, "again": again,
                  "patched": type(chunked).__name__, "fixed": type(fixed).__name__,
                  "heads": _http1.Http1Client.read_headers is not read_headers}))
""")
    assert got["refused"] and "13.0.0" in got["refused"] and got["untouched"], got
    assert got["first"] is None and got["again"] is None, got
    assert got["patched"] != "ChunkedReader" and got["fixed"] == "ContentLengthReader", got
    assert got["heads"], got


def test_informational_heads_are_read_past_however_they_arrive() -> None:
    """mitmproxy's HTTP/1 client layer, patched, fed what a socket may deliver in one read (two
    ``103`` heads and half a ``100``), then the rest with the answer: it passes on the answer
    alone, ``101`` still ends the heads (a switch of protocols), and the request is left with what
    was dropped. (A real upstream's writes arrive split or joined as the kernel pleases: this
    drives both cases every time.)"""
    got = _in_recorder_env(r"""
import json
from mitmproxy import options
from mitmproxy.proxy import context, events
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.proxy.layers.http._events import RequestEndOfMessage, RequestHeaders
from mitmproxy.test import tflow, tutils
from looptap.proxy import http1_fixes

assert http1_fixes.apply() is None
hint = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"

def answer(reads):
    ctx = context.Context(tflow.tclient_conn(), options.Options())
    ctx.server = tflow.tserver_conn()
    client, request, got = _http1.Http1Client(ctx), tutils.treq(), []
    for event in [events.Start(), RequestHeaders(1, request, True), RequestEndOfMessage(1)]:
        list(client.handle_event(event))
    for data in reads:
        got += [repr(c) for c in client.handle_event(events.DataReceived(ctx.server, data))]
    return got, http1_fixes.informational.get(request)

print(json.dumps({
    "split": answer([hint * 2 + b"HTTP/1.1 100 Cont",
                     b"inue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]),
    "switch": answer([hint + b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n"]),
}))
""")
    commands, dropped = got["split"]
    assert dropped == {"103": 2, "100": 1}, got
    assert commands == [
        "Receive(ResponseHeaders(stream_id=1, response=Response(200, no content), "
        "end_stream=False))",
        "Receive(ResponseData(stream_id=1, data=b'ok'))",
        "Receive(ResponseEndOfMessage(stream_id=1))",
    ], got
    commands, dropped = got["switch"]
    assert dropped == {"103": 1} and "Response(101" in commands[0], got
