"""Big bodies through the real recorder: intact both ways, recorded, memory bounded.

A 100 MiB request body (one chat message), a 100 MiB SSE response (chat chunks of 64 KiB) and a
100 MiB JSON response, through a reverse listener and the forward proxy. The agent (raw socket)
and the upstream compare SHA-256 digests of what was sent and received; the cassette holds each
round trip with its whole body (the request's first bytes, with a note: the recorder keeps at
most ``proxy.capture.MAX_REQUEST`` of one, tests/reliability/test_proxy_upload.py); the peak
resident memory (``VmHWM``) of the proxy process and of
its writer process stays within a fixed multiple of the body size (the tee keeps the chunks it
forwards, the capture joins them once, the queue to the writer pickles them once; see
``PROXY_FACTOR``).

Both sizes run in the nightly run (``LOOPTAP_SLOW=1``, docs/suite.md: about 15 s and 8 s of
CPU): 40 MiB is over ``MAX_REQUEST``, 32 MiB, so the request is still cut to its first bytes; the
memory bounds are per body size. By default test_proxy_upload.py sends 65 MiB through the real
recorder (both listeners: forwarded whole, cut, memory bounded) and test_big_bodies.py shows the
writer's memory on big responses (session 55).
``LOOPTAP_BIG_MB`` runs one size instead of the two.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from looptap.cassettes.storage import read_records
from tests.support.recorder import RecorderProcess
from tests.support.reliability import Target, needs_recorder, wait_recorded
from tests.support.upstream import FakeUpstream, Served

pytestmark = [needs_recorder]

MIB = 1024 * 1024
#: The sizes in MiB, both nightly: 100 and 40 (over the recorder's 32 MiB ``MAX_REQUEST``: the
#: request's cut is shown at both).
SIZES = (
    [int(os.environ["LOOPTAP_BIG_MB"])]
    if os.environ.get("LOOPTAP_BIG_MB")
    else [
        pytest.param(
            100, marks=pytest.mark.slow(reason="100 MiB bodies, about 15 s of CPU; 40 MiB too")
        ),
        pytest.param(
            40,
            marks=pytest.mark.slow(
                reason="40 MiB bodies, about 8 s of CPU; by default test_proxy_upload.py sends"
                " 65 MiB through both listeners (the cut, the memory bound) and test_big_bodies.py"
                " the writer's big responses"
            ),
        ),
    ]
)
#: Peak RSS may exceed the idle RSS by at most this many body sizes. Measured (2 cores): proxy
#: +541 MB (5.2×) for 100 MiB — mitmproxy buffers a request body whole (its receive buffer grows by
#: reallocation), the tee keeps the chunks, the hand-off to the writer pickles them; the writer
#: 467 MB. Bounded per body, not per run: repeated 5 MiB bodies plateau
#: (tests/reliability/test_big_bodies.py covers the writer's side).
PROXY_FACTOR = 10
#: Session 11's stream-aware redactor took the writer's peak to 1,493 MB (factor 15): the secret
#: detector's keyword search held eight bytes per character of a 100 MiB body. It reads a window at
#: a time since (tests/cassettes/test_detector.py); measured in-process, the writer's peak is +212
#: MB.
WRITER_FACTOR = 8


def _served(up: FakeUpstream, marker: str) -> Served:
    # The agent can hold the last byte before the upstream's coroutine has resumed after its final
    # write and set the digest: wait until the upstream itself calls the response ended.
    (s,) = up.wait_served(1, pred=lambda s: marker.encode() in s.request_body[:4096])
    return s


def _response(up: FakeUpstream, rec: RecorderProcess, kind: str, mode: str, size: int) -> None:
    marker = f"big-{kind}-{mode}"
    body = json.dumps(
        {
            "model": "gpt-4o",
            "stream": kind == "sse",
            "messages": [{"role": "user", "content": marker}],
        }
    ).encode()
    resp = Target(mode, up, rec).request(
        "/v1/chat/completions",
        [
            ("content-type", "application/json"),
            ("x-fake-upstream", f"big; size={size}; kind={kind}"),
        ],
        body,
        keep_body=False,
        timeout=600,
    )
    s = _served(up, marker)
    assert resp.complete and resp.status == 200, resp.error
    assert resp.size >= size and resp.sha256 == s.sha256, (
        "the agent did not receive the body the upstream sent"
    )
    _, found = wait_recorded(rec.out, marker)
    (ex,) = found
    recorded = ex.response_body
    if kind == "json":  # stored as JSON: equal as JSON
        assert (
            len(recorded) >= size
            and json.loads(recorded)["choices"][0]["message"]["content"][:16] == "0123456789abcdef"
        )
    else:
        assert hashlib.sha256(recorded).hexdigest() == s.sha256
    assert not ex.transport_error


def _request(up: FakeUpstream, rec: RecorderProcess, size: int) -> None:
    marker = "big-request"
    body = json.dumps(
        {"model": "gpt-4o", "user": marker, "messages": [{"role": "user", "content": "y" * size}]}
    ).encode()
    resp = Target("reverse", up, rec).request(
        "/v1/chat/completions", [("content-type", "application/json")], body, timeout=600
    )
    assert resp.complete and resp.status == 200, resp.error
    s = _served(up, marker)
    assert s.request_sha256 == hashlib.sha256(body).hexdigest(), (
        "the upstream did not receive the body the agent sent"
    )
    _, found = wait_recorded(rec.out, marker)
    (ex,) = found
    # streamed to the upstream, its first bytes kept up to the quote that opens the long message
    assert body.startswith(ex.request_body) and ex.request_body.endswith(b'"content": ')
    assert any(n.startswith(f"request body: {len(body):,} bytes went to") for n in ex.notes)


@pytest.mark.parametrize("mb", SIZES, ids=lambda mb: f"{mb}MiB")
def test_big_bodies_through_the_recorder(tmp_path: Path, mb: int) -> None:
    """One test (one recorder) so that the memory figures cover all three round trips."""
    size = mb * MIB
    with (
        FakeUpstream(delay=0.0) as up,
        RecorderProcess(
            tmp_path / "run.jsonl", tmp_path / "conf", up.url, "--record-host", "127.0.0.1"
        ) as rec,
    ):
        idle = rec.stats()["proxy"]
        assert idle is not None
        _response(up, rec, "sse", "reverse", size)
        _response(up, rec, "json", "forward", size)
        _request(up, rec, size)
        stats = rec.stats()
        proxy, writer = stats["proxy"], stats.get("writer")
        assert proxy is not None and writer is not None
        report = (
            f"{mb} MiB bodies: proxy RSS idle {idle.rss / 1e6:.0f} MB, peak "
            f"{proxy.peak_rss / 1e6:.0f} MB, after {proxy.rss / 1e6:.0f} MB; writer peak "
            f"{writer.peak_rss / 1e6:.0f} MB, after {writer.rss / 1e6:.0f} MB"
        )
        print(report)
        assert proxy.peak_rss - idle.rss <= PROXY_FACTOR * size, report
        assert writer.peak_rss <= WRITER_FACTOR * size + 200e6, report
        assert rec.stop() == 0, rec.output[-2000:]
    cas = read_records(rec.out)
    assert len(cas.exchanges) == 3 and not cas.problems
