"""Faults through the real recorder: the agent sees what it would have seen without it.

Each case sends the same request twice to the same fake-upstream scenario: once directly, once
through ``looptap record`` (a reverse listener, i.e. base-URL mode, and the forward proxy, i.e.
``HTTP_PROXY`` mode). A raw-socket client (tests/support/wire.py) records exactly what arrived: the
status, the end-to-end headers, the body bytes (chunked framing removed), whether the body ended
properly, and when each piece arrived. The two views must be equal, and the cassette must hold the
round trip, complete ones as complete, partial ones labelled (``transport_error``, ``notes``,
``complete`` false).
"""

from __future__ import annotations

import gzip
import itertools
import threading
import uuid
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.wire import Exchange
from tests.support import progress
from tests.support.recorder import RecorderProcess
from tests.support.reliability import MODES, Target, chat_body, needs_recorder, wait_recorded
from tests.support.upstream import FakeUpstream, Served
from tests.support.wire import Response

pytestmark = [needs_recorder]

CHAT = "/v1/chat/completions"
AUTH = [
    ("content-type", "application/json"),
    ("authorization", "Bearer sk-reliability-0123456789abcdef"),
]


def _h(scenario: str) -> list[tuple[str, str]]:
    return [*AUTH, ("x-fake-upstream", scenario)]


def assert_same_view(direct: Response, via: Response, where: str) -> None:
    """What the agent saw through the recorder is what it saw without it."""
    assert via.status == direct.status, where
    assert via.end_to_end_headers() == direct.end_to_end_headers(), where
    assert via.body == direct.body, (where, len(via.body), len(direct.body))
    assert via.complete == direct.complete, (where, via.error, direct.error)
    assert (via.error is None) == (direct.error is None), (where, via.error, direct.error)


def _gunzip(data: bytes) -> bytes:
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)


@dataclass
class Fault:
    scenario: str
    stream: bool
    #: The agent's body ends properly (terminator / Content-Length).
    client_complete: bool
    #: Check of the recorded round trip: (exchange, derived view, what the agent received).
    check: Callable[[Exchange, RoundTrip, Response], None]


def _partial_transport(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    assert ex.transport_error, "a cut response must carry its transport error"
    assert rt.complete is not True
    assert ex.response_body == got.body  # every byte that did arrive is kept


def _stream_partial(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    _partial_transport(ex, rt, got)
    assert rt.response is not None and rt.response.complete is False


def _unparseable(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    assert ex.response_body == got.body
    assert rt.complete is not True
    assert (
        rt.analysis_errors
        or rt.notes
        or (rt.response is not None and rt.response.complete is False)
    ), rt


def _no_terminal(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    assert ex.response_body == got.body and not ex.transport_error
    assert rt.response is not None and rt.response.complete is False


def _binary(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    assert ex.response_body == got.body and not ex.transport_error
    assert rt.complete is not True


def _note(text: str, decoded: bool) -> Callable[[Exchange, RoundTrip, Response], None]:
    def check(ex: Exchange, rt: RoundTrip, got: Response) -> None:
        assert any(text in n for n in ex.notes), ex.notes
        assert ex.response_body == (_gunzip(got.body) if decoded else got.body)
        assert rt.response is not None and rt.response.complete is True

    return check


def _gzip_stream(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    assert ex.decoded_from == "gzip" and not ex.notes, ex.notes
    assert ex.response_body == _gunzip(got.body)
    assert len(ex.response_chunks) > 3, "decoded event by event, not as one blob"
    assert rt.response is not None and rt.response.complete is True


def _error_in_stream(ex: Exchange, rt: RoundTrip, got: Response) -> None:
    assert ex.response_body == got.body and ex.status == 200
    assert rt.response is not None and rt.response.error is not None and rt.response.error.in_stream
    assert rt.response.complete is False


def _status(code: int) -> Callable[[Exchange, RoundTrip, Response], None]:
    def check(ex: Exchange, rt: RoundTrip, got: Response) -> None:
        assert ex.status == code and ex.response_body == got.body
        assert (
            rt.response is not None
            and rt.response.error is not None
            and rt.response.error.status == code
        )

    return check


FAULTS = {
    "reset-mid-stream": Fault("reset_mid_stream; after=3", True, False, _stream_partial),
    "close-mid-stream": Fault("reset_mid_stream; after=3; mode=fin", True, False, _stream_partial),
    "reset-mid-json": Fault("reset_mid_stream", False, False, _partial_transport),
    "truncated-json-close": Fault("reset_mid_stream; mode=fin", False, False, _partial_transport),
    "malformed-json": Fault("malformed; kind=json", False, True, _unparseable),
    "malformed-sse": Fault("malformed; kind=sse", True, True, _no_terminal),
    "binary-as-sse": Fault("malformed; kind=binary", True, True, _binary),
    "says-gzip-is-plain-stream": Fault(
        "lying_encoding; claim=gzip", True, True, _note("is not gzip", False)
    ),
    "says-gzip-is-plain-json": Fault(
        "lying_encoding; claim=gzip", False, True, _note("is not gzip", False)
    ),
    "says-br-is-plain-stream": Fault(
        "lying_encoding; claim=br", True, True, _note("could not be decoded", False)
    ),
    "unlabelled-gzip-stream": Fault(
        "lying_encoding; claim=none; actual=gzip",
        True,
        True,
        _note("without a Content-Encoding", True),
    ),
    "gzip-stream": Fault("lying_encoding; claim=gzip; actual=gzip", True, True, _gzip_stream),
    "error-in-200-stream": Fault("error_in_stream; after=2", True, True, _error_in_stream),
    "rate-limit": Fault("rate_limit; retry_after=3", False, True, _status(429)),
    "server-error": Fault("server_error", False, True, _status(500)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_seen_as_without_the_proxy_and_recorded(
    name: str, mode: str, upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    fault = FAULTS[name]
    direct = Target("direct", upstream).request(
        CHAT, _h(fault.scenario), chat_body(f"direct-{uuid.uuid4().hex}", fault.stream)
    )
    marker = f"{name}-{mode}-{uuid.uuid4().hex}"
    via = Target(mode, upstream, recorder).request(
        CHAT, _h(fault.scenario), chat_body(marker, fault.stream)
    )
    assert direct.complete is fault.client_complete, (direct.error, direct.complete)
    assert_same_view(direct, via, f"{name} via {mode}")
    cas, found = wait_recorded(recorder.out, marker)
    assert len(found) == 1, (recorder.output[-2000:], [str(p) for p in cas.problems])
    ex = found[0]
    fault.check(ex, parse_exchange(ex), via)


def _arrival(resp: Response, nbytes: int) -> float:
    """When the agent had received the first ``nbytes`` bytes of the body."""
    got = 0
    for t, piece in resp.pieces:
        got += len(piece)
        if got >= nbytes:
            return t
    raise AssertionError(f"only {got} of {nbytes} bytes arrived")


def _served(upstream: FakeUpstream, marker: str) -> Served:
    found = [s for s in upstream.served if marker.encode() in s.request_body]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("mode", MODES)
def test_slow_drip_events_reach_the_agent_one_by_one(
    mode: str, upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """SSE events 0.25 s apart, in lockstep with the agent (the upstream writes the next event only
    once the agent has the last, then waits 0.25 s: a recorder that held an event back would stop
    the stream, a hang by lack of progress, whatever the machine's load): each event reaches the
    agent before the next is sent, and the cassette keeps them as separate chunks with their
    times."""
    marker, key = f"drip-{mode}-{uuid.uuid4().hex}", uuid.uuid4().hex
    via = Target(mode, upstream, recorder).request(
        CHAT,
        _h(f"drip; delay=0.25; lockstep={key}"),
        chat_body(marker),
        stop=lambda r: upstream.ack(key, r.size),
    )
    s = _served(upstream, marker)
    assert via.complete and via.body == s.body
    assert len(s.chunks) >= 5
    sent = 0
    for i, chunk in enumerate(s.chunks[:-1]):
        sent += len(chunk)
        assert _arrival(via, sent) < s.sent_at[i + 1], (
            f"event {i} reached the agent only after event {i + 1} was sent (buffered)"
        )
    _, found = wait_recorded(recorder.out, marker)
    ex = found[0]
    assert [c for _, c in ex.response_chunks] == s.chunks
    offsets = [t for t, _ in ex.response_chunks]
    assert all(b - a > 0.15 for a, b in itertools.pairwise(offsets)), offsets  # recorded pace kept


@pytest.mark.parametrize("mode", MODES)
def test_slow_drip_bytes_pass_through_one_at_a_time(
    mode: str, upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """The first 48 bytes one byte per write, 10 ms apart and in lockstep with the agent (see
    above): every byte reaches the agent before the next is written, the body is whole, and the
    recorded stream parses to the same response. (The lockstep, not the pause, keeps the writes
    apart: 40 ms pauses, before session 54, cost about 4 s of waiting a case.)"""
    marker, key = f"dripb-{mode}-{uuid.uuid4().hex}", uuid.uuid4().hex
    direct = Target("direct", upstream).request(
        CHAT, _h("drip; unit=byte; bytes=48; delay=0.01"), chat_body(f"direct-{uuid.uuid4().hex}")
    )
    via = Target(mode, upstream, recorder).request(
        CHAT,
        _h(f"drip; unit=byte; bytes=48; delay=0.01; lockstep={key}"),
        chat_body(marker),
        stop=lambda r: upstream.ack(key, r.size),
    )
    assert_same_view(direct, via, f"byte drip via {mode}")
    s = _served(upstream, marker)
    late = [i for i in range(47) if _arrival(via, i + 1) >= s.sent_at[i + 1]]
    assert not late, f"bytes {late} reached the agent only after the next byte was sent"
    _, found = wait_recorded(recorder.out, marker)
    ex = found[0]
    assert ex.response_body == via.body
    assert len(ex.response_chunks) >= 48  # one chunk per byte write (loopback keeps them apart)
    rt, ref = parse_exchange(ex), parse_exchange(s.as_exchange())
    assert rt.response is not None and ref.response is not None
    assert rt.response.text == ref.response.text and rt.response.complete is True


@pytest.mark.parametrize("mode", MODES)
def test_rate_limit_and_server_error_storm(
    mode: str, upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """60 concurrent requests, a mix of 429, 500, streamed errors and good answers: every agent sees
    what the upstream sent it, and every round trip is recorded with its status."""
    scenarios = [
        ("rate_limit; retry_after=2", False),
        ("server_error", False),
        ("error_in_stream", True),
        ("text", True),
        ("text", False),
        ("rate_limit", True),
    ]
    refs = {
        sc: Target("direct", upstream).request(
            CHAT, _h(sc[0]), chat_body(f"ref-{uuid.uuid4().hex}", sc[1])
        )
        for sc in scenarios
    }
    run = uuid.uuid4().hex
    jobs = [(f"storm-{mode}-{run}-{i:03d}", scenarios[i % len(scenarios)]) for i in range(60)]
    target = Target(mode, upstream, recorder)

    def go(job: tuple[str, tuple[str, bool]]) -> tuple[str, tuple[str, bool], Response]:
        marker, sc = job
        return marker, sc, target.request(CHAT, _h(sc[0]), chat_body(marker, sc[1]))

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(go, jobs))
    for marker, sc, resp in results:
        assert_same_view(refs[sc], resp, f"{marker} {sc}")
    _, found = wait_recorded(recorder.out, f"storm-{mode}-{run}-", n=len(jobs))
    assert len(found) == len(jobs), f"{len(found)} of {len(jobs)} round trips recorded"
    by_marker = {m: resp for m, _, resp in results}
    for ex in found:
        marker = next(m for m in by_marker if m.encode() in ex.request_body)
        assert ex.status == by_marker[marker].status and ex.response_body == by_marker[marker].body
        assert not ex.transport_error


@pytest.mark.parametrize("mode", MODES)
def test_agent_that_hangs_up_early(
    mode: str, upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """The agent reads two pieces of a slow stream and closes the connection: the recorder closes
    the upstream side too, records what had arrived as partial, and keeps serving."""
    marker = f"hangup-{mode}-{uuid.uuid4().hex}"
    target = Target(mode, upstream, recorder)
    via = target.request(
        CHAT, _h("text; delay=0.2"), chat_body(marker), stop=lambda r: len(r.pieces) >= 2
    )
    assert via.error == "client hung up" and len(via.pieces) == 2
    s = _served(upstream, marker)
    progress.until(
        lambda: s.ended is not None,
        interval=0.05,
        what="the upstream stream's end after the agent left",
    )
    assert s.ended is not None and not s.complete, (
        "the upstream stream was not torn down after the agent left"
    )
    assert len(s.chunks) < 12, "the upstream kept streaming to nobody"
    _, found = wait_recorded(recorder.out, marker)
    ex = found[0]
    rt = parse_exchange(ex)
    assert ex.transport_error, "a round trip the agent abandoned must say so"
    assert rt.complete is False
    assert ex.response_body.startswith(via.body)
    # The proxy is still healthy.
    after = target.request(CHAT, _h("text"), chat_body(f"after-{marker}"))
    assert after.complete and after.status == 200


def test_concurrent_hangups_do_not_disturb_other_agents(
    upstream: FakeUpstream, recorder: RecorderProcess
) -> None:
    """Ten agents hang up at random points while ten others stream to the end on the same proxy."""
    run = uuid.uuid4().hex
    target = Target("reverse", upstream, recorder)
    ref = Target("direct", upstream).request(CHAT, _h("text; delay=0.02"), chat_body("ref"))
    results: dict[str, Response] = {}
    lock = threading.Lock()

    def agent(i: int) -> None:
        marker = f"mix-{run}-{i:02d}"
        stop = (lambda r, n=1 + i % 4: len(r.pieces) >= n) if i % 2 else None
        resp = target.request(CHAT, _h("text; delay=0.02"), chat_body(marker), stop=stop)
        with lock:
            results[marker] = resp

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(agent, range(20)))
    for marker, resp in results.items():
        i = int(marker.rsplit("-", 1)[1])
        if i % 2 == 0:
            assert_same_view(ref, resp, marker)
    _, found = wait_recorded(recorder.out, f"mix-{run}-", n=20)
    assert len(found) == 20
    for ex in found:
        i = int(ex.request_json()["messages"][0]["content"].rsplit("-", 1)[1].rstrip("]"))
        rt = parse_exchange(ex)
        assert rt.complete is (i % 2 == 0), (i, ex.transport_error)


def test_gzip_helper_matches_the_upstream() -> None:
    """The test's own gunzip agrees with the stdlib on a multi-flush stream (guards
    _note/_gzip_stream)."""
    comp = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    data = (
        comp.compress(b"data: 1\n\n")
        + comp.flush(zlib.Z_SYNC_FLUSH)
        + comp.compress(b"data: 2\n\n")
        + comp.flush()
    )
    assert _gunzip(data) == gzip.decompress(data) == b"data: 1\n\ndata: 2\n\n"
