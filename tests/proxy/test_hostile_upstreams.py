"""The recorder never mixes one client's traffic with another's, whatever the upstream does wrong
(issue 53): through the real recorder with its defaults, in front of a loopback upstream that breaks
HTTP/1.1 (:mod:`tests.support.scripted`'s ``wire`` and ``quirks``), every client gets its own
answer, no client's credential or prompt arrives inside another's request, no call fails that the
upstream did not fail, and the cassette holds each round trip as it was sent and answered.

The clients are the real openai SDK (retries off), fresh clients one per call, one client reused for
several calls, and some calls at once; each request carries a marker (``REQ-n`` in its prompt and
its ``X-Req`` header, echoed by the upstream in its answer) and its client's own key. CL+TE request
smuggling is sent on raw sockets. A pooling forwarder in front of such an upstream gave one client
the previous one's answer (``REQ-1`` got ``STALE: answer to REQ-0``), failed innocent clients on
connections the upstream had closed, and forwarded a request with both ``Content-Length`` and
``Transfer-Encoding`` so that the next client's request, ``Authorization`` and all, became its body.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from looptap.cassettes import open_run
from tests.support import progress
from tests.support.recorder import RecorderProcess, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream
from tests.support.wire import http_request

pytestmark = [needs_recorder]

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx2")  # the SDK's own HTTP library

MARKER = re.compile(r"REQ-\d+\b")


def answer_to(marker: str) -> str:
    return f"answer to {marker}"


@dataclass
class Client:
    """An openai SDK client with a key of its own, on an HTTP client of its own."""

    sdk: Any
    http: Any

    def close(self) -> None:
        self.sdk.close()
        self.http.close()


@dataclass
class Call:
    marker: str
    key: str
    #: The upstream answers this call wrongly on purpose (it may fail, or be labelled).
    spoiled: bool
    answer: str | None = None
    error: str | None = None


class Hostile:
    """A recorder with its defaults in front of a hostile :class:`ScriptedUpstream`, and the calls
    made through it. ``wire(n)``: how the answer to ``REQ-n`` goes out; ``spoils``: the wires that
    spoil the call itself (the call may fail)."""

    def __init__(
        self,
        out: Path,
        confdir: Path,
        wire: Callable[[int], str] = lambda n: "",
        quirks: tuple[str, ...] = (),
        spoils: frozenset[str] = frozenset(),
        idle: float = 0.05,
    ) -> None:
        self.out = out
        self.confdir = confdir
        self.wire = wire
        self.spoils = spoils
        self.calls: list[Call] = []
        self.heads = 0
        self._n = itertools.count()
        self._lock = threading.Lock()
        self.up = ScriptedUpstream(self.route, delay=0, quirks=quirks, idle=idle)
        self.base = ""

    def route(self, req: ScriptedRequest) -> Reply:
        found = MARKER.findall(req.last_user_text()) or [req.headers.get("x-req", "?")]
        return Reply.say(answer_to(found[0]), wire=self.wire(_number(found[0])))

    @contextmanager
    def running(self) -> Iterator[Hostile]:
        with self.up, RecorderProcess(self.out, self.confdir, self.up.url) as rec:
            self.base = rec.env["OPENAI_BASE_URL"]
            yield self
            assert rec.stop() == 0, rec.output

    # -- clients ---------------------------------------------------------------------------------
    def client(self) -> Client:
        http = httpx.Client()
        key = f"sk-hostile-{secrets.token_hex(8)}"
        sdk = openai.OpenAI(base_url=self.base, api_key=key, max_retries=0, http_client=http)
        return Client(sdk, http)

    def call(self, client: Client | None = None, *, head: bool = False, big: int = 0) -> Call:
        """One chat completion (on ``client``, else on a fresh client closed after it), after a
        ``HEAD`` on the same HTTP client when ``head``; ``big`` pads the prompt."""
        n = next(self._n)
        marker = f"REQ-{n}"
        own = client or self.client()
        call = Call(marker, own.sdk.api_key, self.wire(n) in self.spoils)
        with self._lock:
            self.calls.append(call)
        try:
            if head:
                own.http.head(f"{self.base}/models")
                with self._lock:
                    self.heads += 1
            got = own.sdk.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": f"{marker}: say hello" + " ." * big}],
                extra_headers={"X-Req": marker},
            )
            call.answer = got.choices[0].message.content
        except (openai.APIError, httpx.HTTPError, ValueError) as exc:
            call.error = f"{type(exc).__name__}: {exc}"
        finally:
            if client is None:
                own.close()
        return call

    def drive(
        self,
        *,
        head: bool = False,
        big: int = 0,
        idle: str = "",
        fresh: int = 4,
        reused: int = 4,
        threads: int = 3,
        each: int = 2,
    ) -> None:
        """``fresh`` calls one after the other on fresh clients, ``reused`` on one client, then
        ``threads`` threads of ``each`` calls at once, the first thread on the reused client.

        ``idle``: the upstream closes connections left idle (:meth:`settled`). The reused client
        then waits after each call until the upstream closed what it was going to close, as a
        client not racing the upstream's close would (and no thread shares it); so do the fresh
        clients after the 408s of ``idle="408"``, and not after the unannounced closes of
        ``idle="close"``: a fresh client must come on a fresh connection, however soon."""
        for _ in range(fresh):
            self.call(head=head, big=big)
            if idle == "408":
                self.settled()
        keep = self.client()
        try:
            for _ in range(reused):
                self.call(keep, head=head, big=big)
                if idle:
                    self.settled()

            def worker(i: int) -> None:
                for _ in range(each):
                    self.call(keep if i == 0 and not idle else None, head=head, big=big)
                    if idle == "408":
                        self.settled()

            workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
            for t in workers:
                t.start()
            for t in workers:
                progress.until(lambda t=t: not t.is_alive(), what="the concurrent calls")
        finally:
            keep.close()

    def settled(self) -> None:
        """Once every connection the upstream is going to close idle is closed."""
        progress.until(lambda: self.up.idling == 0, interval=0.01, what="the upstream's closes")

    # -- what must hold --------------------------------------------------------------------------
    def check(self) -> None:
        self.check_clients()
        self.check_upstream()
        self.check_cassette()

    def check_clients(self) -> None:
        """Every call got its own answer, but for those the upstream spoiled (which may fail)."""
        wrong = [
            (c.marker, c.answer, c.error)
            for c in self.calls
            if c.answer != answer_to(c.marker) and not (c.spoiled and c.answer is None)
        ]
        assert not wrong, f"{len(wrong)} of {len(self.calls)} calls went wrong: {wrong}"

    def check_upstream(self) -> None:
        """Each request reached the upstream once, alone: its body holds its own marker and no one
        else's, with its own key, and no key is inside any request's body."""
        by_marker = {c.marker: c for c in self.calls}
        keys = {c.key for c in self.calls}
        arrived: Counter[str] = Counter()
        for logged in self.up.log:
            req = logged.request
            if req.method == "HEAD":
                continue
            text = req.raw.decode("latin-1")
            found = MARKER.findall(text)
            assert len(found) == 1 and found[0] in by_marker, f"a request mixed: {found}\n{text}"
            own = by_marker[found[0]]
            stolen = [k for k in keys - {own.key} if k in text]
            assert not stolen, f"{own.marker} carried another client's key\n{text}"
            assert req.headers.get("authorization") == f"Bearer {own.key}", found
            assert req.headers.get("x-req") == own.marker, found
            arrived[own.marker] += 1
        assert _once(self.calls, arrived), f"not arrived once: {arrived}"

    def check_cassette(self) -> None:
        """One record per request, each with its own answer or, for a spoiled call, labelled (a
        transport error, or the body not read as an answer); no A.http_error."""
        run = open_run(self.out)
        posts: Counter[str] = Counter()
        spoiled = {c.marker: c.spoiled for c in self.calls}
        heads = 0
        for ex, rt in run.pairs:
            if ex.method == "HEAD":
                heads += 1
                continue
            marker = next((v for k, v in ex.request_headers if k.lower() == "x-req"), "?")
            # the upstream's URL, also for a request mitmproxy refused before routing it
            assert ex.url.startswith(self.up.url + "/"), (marker, ex.url)
            assert set(MARKER.findall(ex.request_body.decode("latin-1"))) <= {marker}, marker
            posts[marker] += 1
            said = _content(ex.response_body) if ex.transport_error is None else None
            what = (marker, ex.status, said, ex.transport_error)
            if not spoiled.get(marker, True):
                assert MARKER.findall(ex.request_body.decode("latin-1")) == [marker], marker
                assert (ex.status, said) == (200, answer_to(marker)), what
            assert said is None or said == answer_to(marker), what
            labelled = ex.transport_error or rt.analysis_errors or (ex.status or 0) >= 400
            assert said is not None or labelled, what
        assert heads == self.heads
        assert _once(self.calls, posts), f"not recorded once: {posts}"
        errors = [f.message for f in run.findings("A") if f.code == "A.http_error"]
        assert not errors, errors


def _once(calls: list[Call], seen: Counter[str]) -> bool:
    """Each call seen once (a spoiled one at most once), and nothing else."""
    return set(seen) <= {c.marker for c in calls} and all(
        seen[c.marker] == 1 or (c.spoiled and seen[c.marker] == 0) for c in calls
    )


def _number(marker: str) -> int:
    return int(marker[4:]) if marker.startswith("REQ-") and marker[4:].isdigit() else -1


def _content(body: bytes) -> str | None:
    try:
        return str(json.loads(body)["choices"][0]["message"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


# ---------------------------------------------------------------------------------------------
# 2-8: the openai SDK


def test_a_stale_second_answer_reaches_no_one(tmp_path: Path, confdir: Path) -> None:
    """Every answer is followed by one nobody asked for: the next client never gets it."""
    with Hostile(tmp_path / "run.jsonl", confdir, wire=lambda n: "stale").running() as h:
        h.drive()
    h.check()


@pytest.mark.slow(
    reason=(
        "another hostile upstream met by the same per-connection pairing of answers; by "
        "default the stale second answer, the CL+TE smuggling and the unparseable head "
        "(this module)"
    )
)
@pytest.mark.parametrize("spoil", ["short", "204"])
def test_a_spoiled_answer_spoils_its_own_call_only(
    tmp_path: Path, confdir: Path, spoil: str
) -> None:
    """Every third answer is spoiled: its Content-Length 3 bytes short (``short``), or a 204 with a
    body (``204``). That call may fail; the bytes left over reach no later call."""
    wire = lambda n: spoil if n % 3 == 0 else ""  # noqa: E731
    with Hostile(
        tmp_path / "run.jsonl", confdir, wire=wire, spoils=frozenset({spoil})
    ).running() as h:
        h.drive()
    h.check()


@pytest.mark.slow(
    reason=(
        "another hostile upstream met by the same per-connection pairing of answers; by "
        "default the stale second answer, the CL+TE smuggling and the unparseable head "
        "(this module)"
    )
)
def test_a_body_after_a_head_answer_reaches_no_one(tmp_path: Path, confdir: Path) -> None:
    """Each call follows a HEAD on the same HTTP client, answered with a body."""
    with Hostile(tmp_path / "run.jsonl", confdir, quirks=("head_body",)).running() as h:
        h.drive(head=True)
    h.check()


@pytest.mark.slow(
    reason=(
        "another hostile upstream met by the same per-connection pairing of answers; by "
        "default the stale second answer, the CL+TE smuggling and the unparseable head "
        "(this module)"
    )
)
def test_an_idle_408_and_close_fails_no_later_call(tmp_path: Path, confdir: Path) -> None:
    """The upstream answers 408 and closes each connection left idle; the next call comes once it
    has."""
    with Hostile(tmp_path / "run.jsonl", confdir, wire=lambda n: "idle408").running() as h:
        h.drive(idle="408")
    h.check()


@pytest.mark.slow(
    reason=(
        "another hostile upstream met by the same per-connection pairing of answers; by "
        "default the stale second answer, the CL+TE smuggling and the unparseable head "
        "(this module)"
    )
)
def test_a_close_at_reuse_fails_no_call(tmp_path: Path, confdir: Path) -> None:
    """One answer in five is followed by an unannounced close (a little later: as a next request
    could come on it)."""
    wire = lambda n: "close" if n % 5 == 4 else ""  # noqa: E731
    with Hostile(tmp_path / "run.jsonl", confdir, wire=wire, idle=0.2).running() as h:
        h.drive(idle="close", fresh=10, reused=5, each=5)
    h.check()


@pytest.mark.slow(
    reason=(
        "another hostile upstream met by the same per-connection pairing of answers; by "
        "default the stale second answer, the CL+TE smuggling and the unparseable head "
        "(this module)"
    )
)
def test_an_answer_before_the_body_is_read_goes_to_its_own_call(
    tmp_path: Path, confdir: Path
) -> None:
    """The upstream answers from the request's head, then reads its body (256 KiB prompts)."""
    with Hostile(tmp_path / "run.jsonl", confdir, quirks=("early",)).running() as h:
        h.drive(big=1 << 17)
    h.check()


# ---------------------------------------------------------------------------------------------
# 1: CL+TE request smuggling, on raw sockets


def test_a_request_with_content_length_and_chunked_smuggles_nothing(
    tmp_path: Path, confdir: Path
) -> None:
    """Client A sends a request with both ``Content-Length`` and ``Transfer-Encoding: chunked``
    whose chunked body hides the head of a second request, A's, with room for a body; the upstream
    frames by ``Content-Length``. Then client B sends an ordinary request with its own key and
    prompt: B's request must reach the upstream as B's, and B get its own answer; A gets a 400
    (or its own answer)."""
    h = Hostile(tmp_path / "run.jsonl", confdir, quirks=("cl_framing",))
    a = Call("REQ-0", f"sk-smuggler-{secrets.token_hex(8)}", spoiled=True)
    b = Call("REQ-1", f"sk-victim-{secrets.token_hex(8)}", spoiled=False)
    h.calls += [a, b]
    own = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "REQ-0: hi"}]})
    hidden = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: api\r\n"
        f"Authorization: Bearer {a.key}\r\nContent-Type: application/json\r\n"
        "Content-Length: 400\r\n\r\n"
    )
    data = (own + hidden).encode()
    size = b"%x\r\n" % len(data)
    with h.running():
        port = urlsplit(h.base).port
        assert port is not None
        got_a = _raw_chat(
            port,
            a,
            size + data + b"\r\n0\r\n\r\n",
            [("Content-Length", str(len(size) + len(own))), ("Transfer-Encoding", "chunked")],
        )
        prompt = {"role": "user", "content": "REQ-1: my secret plans" + " ." * 400}
        body = json.dumps({"model": "gpt-4o", "messages": [prompt]}).encode()
        got_b = _raw_chat(port, b, body, [("Content-Length", str(len(body)))])
    h.check_upstream()
    assert got_b.answer == answer_to(b.marker), got_b
    assert got_a.status == 400 or got_a.answer == answer_to(a.marker), got_a
    h.check_cassette()


@dataclass
class _Got:
    status: int | None
    answer: str | None
    error: str | None


def _raw_chat(port: int, call: Call, body: bytes, framing: list[tuple[str, str]]) -> _Got:
    """One chat request on a raw socket, its key first among its headers; what came back."""
    got = http_request(
        "127.0.0.1",
        port,
        "POST",
        "/v1/chat/completions",
        [
            ("Host", f"127.0.0.1:{port}"),
            ("Authorization", f"Bearer {call.key}"),
            ("Content-Type", "application/json"),
            ("X-Req", call.marker),
            ("Connection", "keep-alive"),
            *framing,
        ],
        body,
        timeout=progress.STALL,
    )
    call.answer = _content(got.body) if got.status == 200 else None
    return _Got(got.status, call.answer, got.error)


# ---------------------------------------------------------------------------------------------
# An unparseable answer


@pytest.mark.slow(
    reason=(
        "an error flow recorded with mitmproxy's words: "
        "test_addon_inprocess.py::test_error_flows_are_recorded_with_their_transport_error "
        "(in the recorder's environment) by default"
    )
)
def test_an_unparseable_answer_head_is_mitmproxys_502_and_recorded_so(
    tmp_path: Path, confdir: Path
) -> None:
    wire = lambda n: "bad_head" if n in (1, 5) else ""  # noqa: E731
    with Hostile(
        tmp_path / "run.jsonl", confdir, wire=wire, spoils=frozenset({"bad_head"})
    ).running() as h:
        h.drive(threads=0)
    failed = {c.marker: c.error for c in h.calls if c.error}
    assert set(failed) == {"REQ-1", "REQ-5"}, failed
    got_502 = [e.startswith("InternalServerError: Error code: 502") for e in failed.values()]
    assert all(got_502), failed
    h.check()
    said = [ex.transport_error for ex in open_run(h.out).exchanges if ex.transport_error]
    assert said == ["Cannot parse HTTP response: Bad HTTP response line: b'HTTP/1.1 2OO OK'"] * 2
