"""Recorded data never becomes protocol (issue 42, heading 2): a hostile cassette — CR/LF in a
recorded request header's name and value (a smuggled ``DELETE /v1/files/…`` that would carry the
user's key), in recorded response headers (an injected ``Set-Cookie``, a second status line), and
recorded credentials and cookies — goes through ``compare``, ``run --from`` (a fork) and the
replay server (in process, as ``looptap replay`` runs it and as the pytest plugin runs it for a
test), against a raw-socket upstream that logs every byte it receives and a raw-socket client that
reads every byte it is sent. Exactly the expected requests arrive, the user's credential is in its
own request only, no recorded credential or cookie is sent, and no client sees a split response.
Each dropped header is said, by name, never by value.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import chat_response, tool_loop, write
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder

pytest_plugins = ["pytester"]

USER_KEY = "sk-user-own-key-7f3a9c"
SMUGGLED = (
    "application/json\r\nContent-Length: 0\r\n\r\nDELETE /v1/files/file-abc HTTP/1.1\r\nHost: up"
)
BAD_NAME = "x-a: 1\r\nx-injected"
RECORDED_SECRETS = (b"RECORDED-COOKIE", b"sk-RECORDED-KEY", b"RECORDED-GOOG")
#: What a split response would show: an injected header line, a second status line.
INJECTED_RESPONSE = [
    ("x-note", "ok\r\nSet-Cookie: session=stolen"),
    ("x-two", "a\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"),
    ("x-nul", "a\x00b"),
]
_REQUEST_LINE = re.compile(rb"(?:^|\n)([A-Z]+) (\S+) HTTP/1\.[01]\r\n")


def hostile(tmp_path: Path) -> tuple[Path, list[Exchange]]:
    """The two-turn tool loop, every turn carrying the hostile headers (written as a hand-made
    cassette would hold them: the recorded credentials are not redacted)."""
    exchanges = tool_loop()
    for ex in exchanges:
        ex.request_headers += [
            ("cookie", "x"),
            ("authorization", "x"),
            ("x-goog-api-key", "x"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            (BAD_NAME, "1"),
            ("content-type", SMUGGLED),
            ("openai-beta", "assistants=v2"),
        ]
        ex.response_headers += INJECTED_RESPONSE
    path = write(tmp_path / "hostile.jsonl", exchanges)
    # the writer redacted them: put them back as a hand-made file holds them
    text = path.read_text()
    for name, value in (
        ("cookie", "sid=RECORDED-COOKIE"),
        ("authorization", "Bearer sk-RECORDED-KEY-0123456789abcdef"),
        ("x-goog-api-key", "RECORDED-GOOG"),
    ):
        text = re.sub(rf'\["{name}","[^"]*"\]', f'["{name}","{value}"]', text)
    # (the writer masks the injected cookie's value too, since redaction goes by class: put the
    # split line back whole, as a hand-made file holds it)
    note = json.dumps(list(INJECTED_RESPONSE[0]), separators=(",", ":"))
    text = re.sub(r'\["x-note","(?:[^"\\]|\\.)*"\]', lambda _: note, text)
    path.write_text(text)
    from looptap.cassettes.reading import open_run

    # the hostile values are in the file, as a hand-made cassette has them
    got = next(iter(open_run(path, whole=True).exchanges))
    assert ("content-type", SMUGGLED) in got.request_headers and (
        BAD_NAME,
        "1",
    ) in got.request_headers
    assert ("cookie", "sid=RECORDED-COOKIE") in got.request_headers and INJECTED_RESPONSE[
        0
    ] in got.response_headers
    return path, exchanges


class RawUpstream:
    """Logs every byte each connection sends; answers one request per connection (a chat
    completion, ``Connection: close``), then reads on until the client closes: bytes smuggled
    after the first request are logged too."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.received: list[bytes] = []
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RawUpstream:
        self._accept.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # close() alone does not wake a thread blocked in accept() on Linux (it waited out the
        # join's 30 s on every upstream); shutdown() does (accept fails with EINVAL).
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._accept.join(30)
        for t in self._threads:
            t.join(60)

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        # a client that neither sends nor closes: not a test's wait, a thread's bound
        conn.settimeout(120)
        data = b""
        with conn:
            try:
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?im)^content-length:[ \t]*([0-9]+)", head)
                need = int(m.group(1)) if m else 0
                while len(rest) < need and (chunk := conn.recv(65536)):
                    data += chunk
                    rest += chunk
                body = chat_response("It is 30 C in Paris (live).")
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    b"%d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
                )
                conn.shutdown(socket.SHUT_WR)
                while chunk := conn.recv(65536):
                    data += chunk
            except OSError:
                pass
            finally:
                self.received.append(data)

    def requests(self) -> list[tuple[bytes, bytes, bytes]]:
        """(method, target, the request's bytes up to the next request line) of every request line
        received."""
        out = []
        for data in self.received:
            starts = list(_REQUEST_LINE.finditer(data))
            for i, m in enumerate(starts):
                out.append(
                    (
                        m.group(1),
                        m.group(2),
                        data[
                            m.start() : starts[i + 1].start() if i + 1 < len(starts) else len(data)
                        ],
                    )
                )
        return out


def _checked_upstream(up: RawUpstream, expected: int) -> int:
    """The upstream got exactly ``expected`` POSTs, one per connection, each with the user's key
    once and no recorded secret or injected header; the bytes checked."""
    reqs = up.requests()
    assert [(m, t) for m, t, _ in reqs] == [(b"POST", b"/v1/chat/completions")] * expected, [
        r[:2] for r in reqs
    ]
    assert len(up.received) == expected
    for _, _, raw in reqs:
        assert raw.count(USER_KEY.encode()) == 1 and re.search(
            rb"(?im)^authorization: Bearer " + USER_KEY.encode() + rb"\r$", raw
        ), raw[:2000]
    everything = b"".join(up.received)
    for needle in (b"DELETE", b"x-injected", b"Set-Cookie", b"x-hop", *RECORDED_SECRETS):
        assert needle.lower() not in everything.lower(), needle
    return len(everything)


def test_compare_sends_no_recorded_header_that_cannot_be_sent_and_no_recorded_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = hostile(tmp_path)
    with RawUpstream() as up:
        rc = main(
            [
                "compare",
                str(run),
                "--upstream",
                f"openai={up.url}",
                "--samples",
                "1",
                "--header",
                f"authorization: Bearer {USER_KEY}",
                "--json",
            ]
        )
    err = capsys.readouterr().err
    assert rc == 0, err
    # two recorded turns, one sample each: two requests, nothing else
    checked = _checked_upstream(up, 2)
    # each request carries the recorded content-type that can be sent, and the user's key
    for _, _, raw in up.requests():  # the recorded headers that say what the request means still go
        assert re.search(rb"(?im)^content-type: application/json\r$", raw) and re.search(
            rb"(?im)^openai-beta: assistants=v2\r$", raw
        )
        # client telemetry is the recorded client's, not this one's
        assert b"x-stainless-os" not in raw.lower()
    # said by name (escaped), once per recorded round trip; never the value
    assert (
        err.count("recorded header 'content-type'") == 2
        and err.count("'x-a: 1␍␤x-injected' of round trip") == 2
    ), err
    assert "DELETE" not in err and "file-abc" not in err and USER_KEY not in err
    print(f"compare: {len(up.requests())} requests, {checked:,} bytes checked at the raw upstream")


def test_compare_refuses_a_header_of_the_user_that_would_split_the_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = hostile(tmp_path)
    with RawUpstream() as up:
        rc = main(
            [
                "compare",
                str(run),
                "--upstream",
                f"openai={up.url}",
                "--header",
                f"authorization: Bearer {USER_KEY}\r\nX-Evil: 1",
            ]
        )
    err = capsys.readouterr().err
    assert rc == 2 and "--header 'authorization' cannot be sent" in err and USER_KEY not in err, err
    assert up.received == []  # nothing sent before the refusal


def _raw_exchange(url: str, body: bytes, key: str | None = None) -> bytes:
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        auth = f"authorization: Bearer {key}\r\n" if key else ""
        s.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: {u.netloc}\r\ncontent-type: "
            f"application/json\r\n{auth}content-length: {len(body)}\r\nconnection: "
            "close\r\n\r\n".encode()
            + body
        )
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def _one_response(raw: bytes) -> bytes:
    """The response is one message: one status line, no injected header, the body as framed."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep and raw.count(b"HTTP/1.1 ") == 1, raw[:600]
    lines = head.split(b"\r\n")
    assert lines[0].startswith(b"HTTP/1.1 200 ")
    names = [ln.split(b":", 1)[0].strip().lower() for ln in lines[1:]]
    assert all(re.fullmatch(rb"[!#$%&'*+.^_`|~0-9a-z-]+", n) for n in names), names
    assert (
        b"set-cookie" not in names
        and b"x-note" not in names
        and b"x-two" not in names
        and b"x-nul" not in names
    ), names
    length = next(
        (
            int(ln.split(b":", 1)[1])
            for ln in lines[1:]
            if ln.lower().startswith(b"content-length:")
        ),
        None,
    )
    assert length == len(body), (length, len(body))
    return body


def test_the_replay_server_never_splits_a_response(tmp_path: Path) -> None:
    run, exchanges = hostile(tmp_path)
    with ReplayServer(run) as srv:
        raws = [_raw_exchange(srv.url, ex.request_body) for ex in exchanges]
    for raw, ex in zip(raws, exchanges, strict=True):
        body = _one_response(raw)
        assert orjson.loads(body) == orjson.loads(ex.response_chunks[0][1])
    report = "\n".join(srv.report_lines())
    assert (
        "6 headers not sent" in report
        and report.count("dropped: response header 'x-note'") == 2
        and "'x-two'" in report
        and "'x-nul'" in report
    ), report
    assert "stolen" not in report and "HTTP/1.1 200" not in report
    for ex in srv.served:  # the served run keeps what was sent, and says what was not
        assert not {k for k, _ in ex.response_headers} & {"x-note", "x-two", "x-nul"}
        assert sum("response header" in n and "not sent" in n for n in ex.notes) == 3
    print(
        f"replay: {len(raws)} responses, {sum(map(len, raws)):,} "
        "bytes read by the raw client, one status line each"
    )


def test_looptap_replay_never_splits_a_response(tmp_path: Path) -> None:
    """The same server as the ``looptap replay`` command runs it (a process, its own exports)."""
    run, exchanges = hostile(tmp_path)
    p = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
    )
    try:
        assert p.stdout is not None
        url = ""
        while not url:
            line = p.stdout.readline()
            assert line, "looptap replay printed no OPENAI_BASE_URL"
            if line.startswith("export OPENAI_BASE_URL="):
                url = line.strip().partition("=")[2]
        raws = [_raw_exchange(url, ex.request_body) for ex in exchanges]
    finally:
        p.send_signal(signal.SIGINT)
        _, err = progress.communicate(p)
    for raw, ex in zip(raws, exchanges, strict=True):
        assert orjson.loads(_one_response(raw)) == orjson.loads(ex.response_chunks[0][1])
    assert "stolen" not in err, err[-3000:]
    print(
        f"looptap replay: {len(raws)} responses, {sum(map(len, raws)):,} bytes read by the raw "
        "client, one status line each"
    )


PLUGIN_TEST = """
import os, socket
from urllib.parse import urlsplit
import pytest

@pytest.mark.looptap("hostile.jsonl")
def test_raw_client(looptap):
    u = urlsplit(os.environ["OPENAI_BASE_URL"])
    for i in range(2):
        body = open(f"turn{i}.json", "rb").read()
        with socket.create_connection((u.hostname, u.port), timeout=120) as s:
            s.sendall(f"POST /v1/chat/completions HTTP/1.1\\r\\nhost: {u.netloc}\\r\\ncontent-type: application/json\\r\\n"
                      f"content-length: {len(body)}\\r\\nconnection: close\\r\\n\\r\\n".encode() + body)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        open(f"answer{i}.http", "wb").write(out)
"""  # noqa: E501


def test_the_pytest_plugin_never_splits_a_response(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same server as the pytest plugin runs it for a test (the ``looptap`` marker)."""
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "CI"):
        monkeypatch.delenv(k, raising=False)
    _, exchanges = hostile(pytester.path)
    for i, ex in enumerate(exchanges):
        (pytester.path / f"turn{i}.json").write_bytes(ex.request_body)
    pytester.makepyfile(test_inner=PLUGIN_TEST)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "--looptap-record-mode=none"
    )
    result.assert_outcomes(passed=1)
    raws = [(pytester.path / f"answer{i}.http").read_bytes() for i in range(2)]
    for raw, ex in zip(raws, exchanges, strict=True):
        assert orjson.loads(_one_response(raw)) == orjson.loads(ex.response_chunks[0][1])
    print(
        f"pytest plugin: {len(raws)} responses, {sum(map(len, raws)):,} bytes read by the raw "
        "client, one status line each"
    )


AGENT = '''
import os, socket, sys
from urllib.parse import urlsplit
u = urlsplit(os.environ["OPENAI_BASE_URL"])
for body_file, out_file in zip(sys.argv[1::2], sys.argv[2::2]):
    body = open(body_file, "rb").read()
    with socket.create_connection((u.hostname, u.port), timeout=120) as s:
        head = (f"POST {u.path.rstrip('/')}/chat/completions HTTP/1.1\\r\\nhost: {u.netloc}\\r\\ncontent-type: application/json\\r\\n"
                f"authorization: Bearer {os.environ['OPENAI_API_KEY']}\\r\\ncontent-length: {len(body)}\\r\\nconnection: close\\r\\n\\r\\n")
        s.sendall(head.encode() + body)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    open(out_file, "wb").write(out)
print("agent done")
'''  # noqa: E501


@needs_recorder
@pytest.mark.slow(
    reason=(
        "a fork through the recorder (about 3 s of CPU): what a fork sends live goes through "
        "the forwarder, which drops a splitting header in the process in "
        "test_the_forwarder_drops_a_header_that_would_split_the_request, and its replayed "
        "prefix is the replay server's, shown in "
        "test_the_replay_server_never_splits_a_response"
    )
)
def test_a_fork_of_a_hostile_cassette_splits_nothing(tmp_path: Path) -> None:
    run, exchanges = hostile(tmp_path)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    args: list[str] = []
    for i, ex in enumerate(exchanges):
        (tmp_path / f"turn{i}.json").write_bytes(ex.request_body)
        args += [str(tmp_path / f"turn{i}.json"), str(tmp_path / f"answer{i}.http")]
    with RawUpstream() as up:
        argv = [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=1",
            "-o",
            str(tmp_path / "branch.jsonl"),
            "--confdir",
            str(tmp_path / "conf"),
            "--upstream",
            f"openai={up.url}",
            "--",
            sys.executable,
            str(agent),
            *args,
        ]
        proc = progress.run(
            argv,
            env=clean_env(OPENAI_API_KEY=USER_KEY),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
    assert proc.returncode == 0 and "agent done" in proc.stdout, proc.stderr[-4000:]
    # turn 0 from the recording, turn 1 live: one request at the upstream
    checked = _checked_upstream(up, 1)
    raws = [(tmp_path / f"answer{i}.http").read_bytes() for i in range(2)]
    # the prefix, served whole and unsplit
    assert orjson.loads(_one_response(raws[0])) == orjson.loads(exchanges[0].response_chunks[0][1])
    assert raws[1].count(b"HTTP/1.1 ") == 1 and b"(live)" in raws[1]
    assert "stolen" not in proc.stderr and USER_KEY not in proc.stderr
    # said, by name
    assert "dropped: response header 'x-note'" in proc.stderr and "'x-two'" in proc.stderr, (
        proc.stderr[-3000:]
    )
    print(
        f"fork: {len(up.requests())} request at the upstream ({checked:,} bytes checked), "
        f"{sum(map(len, raws)):,} bytes read by the agent"
    )


def test_the_forwarder_drops_a_header_that_would_split_the_request() -> None:
    """net.Upstream.send (a fork's live requests, compare's) drops with h11's rules: a
    header value holding CR/LF is dropped and said, never written as a second request."""
    import asyncio

    from looptap.cassettes.net import Upstream

    body = b'{"model": "gpt-4o", "messages": []}'
    headers = [
        ("content-type", "application/json"),
        ("authorization", f"Bearer {USER_KEY}"),
        (
            "x-note",
            "a\r\nContent-Length: 0\r\n\r\nDELETE /v1/files/file-abc "
            "HTTP/1.1\r\nHost: up\r\nX-Pad: b",
        ),
    ]

    async def send(up: RawUpstream, *said: list[str]) -> int:
        response = await Upstream(up.url).send("POST", "/v1/chat/completions", headers, body, *said)
        return len(b"".join([piece async for piece in response.pieces()]))

    with RawUpstream() as up:
        assert asyncio.run(send(up)) > 0
    _checked_upstream(up, 1)  # one request: no DELETE after it
    said: list[str] = []
    with RawUpstream() as up:
        assert asyncio.run(send(up, said)) > 0
    _checked_upstream(up, 1)
    assert said == [
        "request header 'x-note' not sent: its value holds "
        "CR, LF or NUL (it would split the message)"
    ], said


def test_the_forwarder_sends_the_request_as_given_byte_for_byte() -> None:
    """Upstream.send (httpx) writes the request as it was given: the target as it came (no URL
    normalised), the headers in their order and case, nothing added (no user agent, no accepted
    encodings), its own Host, Content-Length and Connection: close; one request per connection."""
    import asyncio

    from looptap.cassettes.net import Upstream

    body = b'{"model": "gpt-4o", "messages": []}'
    headers = [
        ("Content-Type", "application/json"),
        ("authorization", f"Bearer {USER_KEY}"),
        ("X-Title", "caf\u00e9 [1]"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "keep-alive, x-hop"),
        ("x-hop", "dropped"),
    ]
    target = "/chat/./{completions}?q=a%2Fb&x=[1]|~"

    async def send(up: RawUpstream) -> bytes:
        response = await Upstream(up.url + "/v1/").send("POST", target, headers, body)
        return b"".join([piece async for piece in response.pieces()])

    with RawUpstream() as up:
        assert b"(live)" in asyncio.run(send(up))
    host = up.url.removeprefix("http://").encode()
    assert up.received == [
        b"POST /v1/chat/./{completions}?q=a%2Fb&x=[1]|~ HTTP/1.1\r\nHost: " + host + b"\r\n"
        b"Content-Type: application/json\r\nauthorization: Bearer " + USER_KEY.encode() + b"\r\n"
        b"X-Title: caf\xe9 [1]\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        + body
    ]
