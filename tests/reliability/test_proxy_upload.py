"""A 65 MiB upload through the real recorder (issue 53 item 4): forwarded whole and answered by the
upstream, never a 413 (the proxy does not break an upload the API would take), the recorder's
memory bounded by what it keeps of a request (``proxy.capture.MAX_REQUEST``), not by the upload,
and the cassette saying what it kept (the body's first bytes and a note of how many went out).

Through a reverse listener with the openai SDK (retries off: one request, its ``Content-Length``
over the limit) and through the forward proxy with a raw socket sending it chunked (no length:
streamed from its first byte). Before, mitmproxy held the whole body and the recorder copied it
on: the proxy grew by +195 to +256 MiB and the writer by +272 MiB for 65 MiB (bench/upload.py has
the figures for 1, 65 and 200 MiB)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.recorder import RecorderProcess
from tests.support.reliability import Target, needs_recorder, wait_recorded
from tests.support.upstream import FakeUpstream

pytestmark = [needs_recorder]

SIZE = 65 << 20
MIB = 1 << 20
#: ``proxy.capture.MAX_REQUEST`` (mitmproxy, which it imports, lives in the recorder's environment:
#: the note checked below says the recorder's own figure).
MAX_REQUEST = 32 * MIB
#: What the proxy and the writer may grow by, at most, for an upload of any size: the bytes kept
#: (chunks, joined, pickled for the writer) and room for the allocator. Not the upload's size.
GROWTH = 3 * MAX_REQUEST + 32 * MIB


def _chunked(body: bytes, step: int = MIB) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + step]), body[i : i + step])
        for i in range(0, len(body), step)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("how", ["reverse-sdk", "forward-chunked"])
def test_a_large_upload_is_answered_with_the_recorders_memory_bounded(
    tmp_path: Path, how: str
) -> None:
    marker = f"upload-{how}"
    message = {"role": "user", "content": "y" * SIZE}
    body = json.dumps({"model": "gpt-4o", "messages": [message]}).encode()
    with (
        FakeUpstream(delay=0.0) as up,
        RecorderProcess(
            tmp_path / "run.jsonl", tmp_path / "conf", up.url, "--record-host", "127.0.0.1"
        ) as rec,
    ):
        idle = rec.stats()
        if how == "reverse-sdk":
            from openai import OpenAI

            client = OpenAI(base_url=rec.env["OPENAI_BASE_URL"], api_key="sk-x", max_retries=0)
            answer = client.chat.completions.create(
                model="gpt-4o",
                messages=[message],  # type: ignore[list-item]
                extra_query={"m": marker},  # (the body is cut: the URL tells the round trip)
            )
            assert answer.choices[0].message.content
        else:
            resp = Target("forward", up, rec).request(
                f"/v1/chat/completions?m={marker}",
                [("content-type", "application/json"), ("transfer-encoding", "chunked")],
                _chunked(body),
                timeout=600,
            )
            assert resp.complete and resp.status == 200, resp.error
        (served,) = up.wait_served(1)
        assert len(served.request_body) >= SIZE and marker in served.target
        if how == "forward-chunked":  # the very bytes the agent sent
            assert served.request_sha256 == hashlib.sha256(body).hexdigest()
        _, found = wait_recorded(rec.out, marker)
        stats = rec.stats()
        grew = {k: (v.peak_rss - old.rss) for k, v in stats.items() if v and (old := idle.get(k))}
        report = ", ".join(f"{k} +{g / MIB:.0f} MiB" for k, g in grew.items())
        print(f"{SIZE >> 20} MiB upload ({how}): {report}")
        assert set(grew) >= {"proxy", "writer"} and all(g <= GROWTH for g in grew.values()), report
        assert rec.stop() == 0, rec.output[-2000:]
    (ex,) = found
    assert 0 < len(ex.request_body) <= MAX_REQUEST and served.request_body.startswith(
        ex.request_body
    )
    sent = len(served.request_body)
    said = " ".join(ex.notes)
    assert (
        f"request body: {sent:,} bytes went to the upstream; the cassette keeps the first " in said
    )
    assert f"keeps at most {MAX_REQUEST // MIB} MiB of a request" in said, said
    assert ex.status == 200 and not ex.transport_error
