"""HAR 1.2 export: the document against the HAR 1.2 required fields (a JSON Schema written from the
spec), streamed bodies reassembled with their chunk timing, timings from the recording, binary
bodies, and the file opened by a real consumer: mitmproxy's own HAR reader."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.interop import har_chunks
from looptap.cassettes.reading import Run
from looptap.cassettes.storage import load_flows
from looptap.cassettes.wire import Exchange
from tests.interop.cassette_files import FIXTURES, HAR_SCHEMA
from tests.support import progress


def build_har(run: Run) -> Any:
    """The HAR document ``looptap export --har`` writes."""
    return orjson.loads(b"".join(har_chunks(run)))


@pytest.fixture
def flows_run() -> Run:
    return Run.of(load_flows(FIXTURES / "flows_mitmproxy11.mitm").exchanges, "flows")


def test_har_has_every_required_field(demo_run: Run, flows_run: Run) -> None:
    for run in (demo_run, flows_run):
        har = build_har(run)
        jsonschema.validate(har, HAR_SCHEMA)
        assert len(har["log"]["entries"]) == len(run.exchanges)
        json.dumps(har)  # plain JSON all the way down


def test_streamed_bodies_are_reassembled_with_their_chunks(flows_run: Run) -> None:
    entries = build_har(flows_run)["log"]["entries"]
    for entry, ex in zip(entries, flows_run.exchanges, strict=True):
        content = entry["response"]["content"]
        assert content["text"] == ex.response_body.decode()
        assert content["size"] == len(ex.response_body)
        assert sum(c["size"] for c in entry["_looptap"]["chunks"]) == content["size"]
    sse = entries[1]
    assert sse["response"]["content"]["mimeType"].startswith("text/event-stream")
    assert sse["response"]["content"]["text"].rstrip().endswith("data: [DONE]")
    assert len(sse["_looptap"]["chunks"]) > 3 and sse["_looptap"]["stream"] is True
    gz = entries[2]  # sent gzip-encoded: the text is the decoded stream, the headers as recorded
    assert gz["_looptap"]["decoded_from"] == "gzip"
    assert gz["response"]["content"]["text"].startswith("event: message_start")
    assert {"name": "content-encoding", "value": "gzip"} in gz["response"]["headers"]
    assert (
        entries[0]["_looptap"]["conversation"] == "c1"
        and entries[0]["_looptap"]["family"] == "openai_chat"
    )


def test_timings_come_from_the_recording(flows_run: Run) -> None:
    for entry, ex in zip(build_har(flows_run)["log"]["entries"], flows_run.exchanges, strict=True):
        assert ex.started is not None and ex.ttfb is not None and ex.duration is not None
        started = datetime.fromisoformat(
            entry["startedDateTime"].replace("Z", "+00:00")
        ).timestamp()
        assert started == pytest.approx(ex.started, abs=0.001)
        t = entry["timings"]
        assert t["wait"] == pytest.approx(ex.ttfb * 1000, abs=0.01)
        assert entry["time"] == pytest.approx(ex.duration * 1000, abs=0.01)
        assert t["send"] + t["wait"] + t["receive"] == pytest.approx(entry["time"], abs=0.01)
        assert entry["_looptap"]["timing"] == "recorded"


def test_binary_bodies_are_base64_and_query_strings_split() -> None:
    blob = bytes(range(256))
    ex = Exchange(
        method="POST",
        url="https://example.test/v1/upload?key=REDACTED&mode=raw",
        request_headers=[("content-type", "application/octet-stream"), ("cookie", "a=1; b=2")],
        request_body=b"\xff\xfe raw",
        status=200,
        response_headers=[
            ("content-type", "image/png"),
            ("set-cookie", "sid=xyz; Path=/; HttpOnly"),
        ],
        response_chunks=[(0.01, blob[:100]), (0.02, blob[100:])],
        started=1_700_000_000.0,
        ttfb=0.01,
        duration=0.02,
    )
    har = build_har(Run.of([ex]))
    jsonschema.validate(har, HAR_SCHEMA)
    (entry,) = har["log"]["entries"]
    content = entry["response"]["content"]
    assert content["encoding"] == "base64" and base64.b64decode(content["text"]) == blob
    assert entry["_looptap"]["chunks"] == [
        {"offset": 0.01, "size": 100},
        {"offset": 0.02, "size": 156},
    ]
    assert entry["request"]["queryString"] == [
        {"name": "key", "value": "REDACTED"},
        {"name": "mode", "value": "raw"},
    ]
    assert entry["request"]["cookies"] == [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]
    assert entry["response"]["cookies"] == [{"name": "sid", "value": "xyz"}]
    assert entry["request"]["postData"]["_encoding"] == "base64"


# mitmproxy's HAR reader, run in the recorder's environment: one JSON line per flow it loads.
_READ_WITH_MITMPROXY = r"""
import hashlib, json, sys
from mitmproxy.io import FlowReader
with open(sys.argv[1], "rb") as fh:
    for f in FlowReader(fh).stream():
        print(json.dumps({
            "method": f.request.method, "url": f.request.url, "status": f.response.status_code,
            "request_sha": hashlib.sha256(f.request.get_content() or b"").hexdigest(),
            "response_sha": hashlib.sha256(f.response.get_content() or b"").hexdigest(),
            "content_type": f.response.headers.get("content-type", ""),
            "start": f.request.timestamp_start, "end": f.response.timestamp_end,
        }))
"""


def test_mitmproxy_opens_the_har(proxy_python: str, demo_cassette: Path, tmp_path: Path) -> None:
    flows_cassette = tmp_path / "flows.jsonl"
    assert (
        main(["import", str(FIXTURES / "flows_mitmproxy11.mitm"), "-o", str(flows_cassette), "-q"])
        == 0
    )
    for cassette in (demo_cassette, flows_cassette):
        har_path = tmp_path / (cassette.stem + ".har")
        assert main(["export", str(cassette), "--har", str(har_path), "-q"]) == 0
        proc = progress.run(
            [proxy_python, "-c", _READ_WITH_MITMPROXY, str(har_path)],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        flows = [json.loads(line) for line in proc.stdout.splitlines()]
        har = json.loads(har_path.read_text())
        from looptap.cassettes.reading import open_run

        run = open_run(cassette)
        assert len(flows) == len(run.exchanges) == len(har["log"]["entries"])
        for flow, ex, entry in zip(flows, run.exchanges, har["log"]["entries"], strict=True):
            assert (flow["method"], flow["url"], flow["status"]) == (ex.method, ex.url, ex.status)
            # mitmproxy re-applies the recorded Content-Encoding and decodes it again: the body it
            # shows is the decoded body looptap recorded, byte for byte
            assert flow["response_sha"] == hashlib.sha256(ex.response_body).hexdigest()
            assert flow["request_sha"] == hashlib.sha256(ex.request_body).hexdigest()
            assert flow["end"] - flow["start"] == pytest.approx(entry["time"] / 1000, abs=0.002)
