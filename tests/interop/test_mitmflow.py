"""Importing mitmproxy flow files without mitmproxy: the tnetstring reader, the flow layout of the
committed fixture (written by the real mitmdump 11), older/newer format versions, damaged files,
and — with ``LOOPTAP_PROXY_PYTHON`` — a fresh capture through the real mitmdump."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.errors import ImportFormatError
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import (
    is_flow_file,
    load_flows,
    read_flows,
    read_records,
    tnetstring_pop,
)
from tests.interop.cassette_files import FIXTURES, REPO
from tests.support.tnetstring import tnet

FIXTURE = FIXTURES / "flows_mitmproxy11.mitm"



def http_flow(
    version: Any = 20,
    *,
    body: bytes = b"",
    resp_body: bytes | None = b"{}",
    headers: list[Any] | None = None,
    resp_headers: list[Any] | None = None,
    error: str | None = None,
    byte_keys: bool = False,
) -> dict[Any, Any]:
    req = {
        "http_version": b"HTTP/1.1",
        "headers": headers or [[b"content-type", b"application/json"]],
        "content": body,
        "trailers": None,
        "timestamp_start": 1700000000.0,
        "timestamp_end": 1700000000.01,
        "host": "api.openai.com",
        "port": 443,
        "method": b"POST",
        "scheme": b"https",
        "authority": b"",
        "path": b"/v1/chat/completions",
    }
    resp = (
        None
        if resp_body is None and error
        else {
            "http_version": b"HTTP/1.1",
            "headers": resp_headers or [[b"content-type", b"application/json"]],
            "content": resp_body,
            "trailers": None,
            "timestamp_start": 1700000000.5,
            "timestamp_end": 1700000001.25,
            "status_code": 200,
            "reason": b"OK",
        }
    )
    flow: dict[Any, Any] = {
        "version": version,
        "type": "http",
        "id": "f1",
        "error": {"msg": error, "timestamp": 1700000001.0} if error else None,
        "client_conn": {},
        "server_conn": {},
        "intercepted": False,
        "is_replay": None,
        "marked": "",
        "metadata": {},
        "comment": "",
        "timestamp_created": 1700000000.0,
        "request": req,
        "response": resp,
        "websocket": None,
        "backup": None,
    }
    if byte_keys:
        flow = {k.encode(): v for k, v in flow.items()}
    return flow


# -- tnetstrings -----------------------------------------------------------------------------------


def test_tnetstring_reader_reads_every_type() -> None:
    value = {"a": [1, -2, 3.5, True, False, None, b"\x00\xff", "h\u00e9"], "nested": {"k": []}}
    data = tnet(value) + b"trailing"
    got, end = tnetstring_pop(memoryview(data))
    assert got == value
    assert data[end:] == b"trailing"


@pytest.mark.parametrize(
    "data",
    [
        b"5:abc,",
        b"3:abc",
        b"x:abc,",
        b"3:abc?",
        b"4:tru!!",
        b"2:ab~",
        b"3:1.x^",
        b"6:1:a,1:}",
        b"2:\xff\xfe;",
        b"99999999999999:a,",
    ],
)
def test_tnetstring_reader_rejects_malformed_input(data: bytes) -> None:
    with pytest.raises(ImportFormatError):
        tnetstring_pop(memoryview(data))


def test_flow_files_are_told_apart_from_yaml_and_json() -> None:
    assert is_flow_file(FIXTURE.read_bytes()[:16])
    assert not is_flow_file(b"interactions:\n- request:")
    assert not is_flow_file(b'{"log": {}}')
    assert not is_flow_file(b"1: a YAML mapping")


def test_export_and_textconv_read_flow_files_directly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    har = tmp_path / "flows.har"
    assert (
        main(["export", str(FIXTURE), "--har", str(har), "--otel", str(tmp_path / "o.json"), "-q"])
        == 0
    )
    assert len(orjson.loads(har.read_bytes())["log"]["entries"]) == 4
    otlp = (tmp_path / "o.json").read_bytes()
    # the OTLP file format: one request per line
    assert otlp.count(b"\n") == 1 and otlp.endswith(b"\n")
    assert main(["textconv", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "imported run: 4 round trips, 3 conversations" in out
    assert "  > [0] user text: Capital of France?" in out


# -- the fixture written by mitmdump 11 (flow format 21) -------------------------------------------


def test_fixture_from_real_mitmdump_imports_as_exchanges() -> None:
    flows = load_flows(FIXTURE)
    assert flows.versions == {21}
    assert not flows.skipped
    exs = flows.exchanges
    assert [ex.method for ex in exs] == ["POST", "POST", "POST", "GET"]
    assert all(ex.url.startswith("http://127.0.0.1:") for ex in exs)
    assert [ex.url.split("/", 3)[3] for ex in exs] == [
        "v1/chat/completions",
        "v1/chat/completions",
        "v1/messages",
        "ping",
    ]
    for ex in exs:
        assert ex.started is not None and ex.ttfb is not None and ex.duration is not None
        assert 0 <= ex.ttfb <= ex.duration < 30
    rts = parse_all(exs)
    assert [rt.family for rt in rts] == ["openai_chat", "openai_chat", "anthropic", "none"]
    # JSON body, stream split back into SSE events, gzip stream decoded then split.
    assert len(exs[0].response_chunks) == 1 and rts[0].stream is False
    assert len(exs[1].response_chunks) > 3 and all(
        c.endswith(b"\n\n") for _, c in exs[1].response_chunks
    )
    assert exs[2].decoded_from == "gzip" and exs[2].response_chunks[0][1].startswith(b"event: ")
    for rt in rts[:3]:
        assert rt.response is not None and rt.response.complete is True and rt.response.text
        assert not rt.analysis_errors
    assert rts[0].request is not None and rts[0].request.messages[0].text == "Capital of France?"
    assert exs[3].response_body == b"pong\n"


def test_cli_import_of_flow_file_writes_a_redacted_cassette(tmp_path: Path) -> None:
    out = tmp_path / "flows.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "import", str(FIXTURE), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "4 round trips, 3 LLM (anthropic 1, openai_chat 2)" in proc.stdout
    cas = read_records(out)
    assert cas.header["meta"]["source"] == "mitmproxy" and not cas.problems
    assert len(cas.exchanges) == 4
    assert b"sk-looptap-flow-SENTINEL" in FIXTURE.read_bytes()  # the secret is in the capture …
    assert b"sk-looptap-flow-SENTINEL" not in out.read_bytes()  # … and never reaches the cassette


# -- other versions and damaged files (crafted with the encoder above) -----------------------------


def test_flow_format_20_mitmproxy10_layout_and_gzip_request() -> None:
    body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
    data = tnet(
        http_flow(
            20,
            body=gzip.compress(body),
            headers=[[b"content-type", b"application/json"], [b"content-encoding", b"gzip"]],
            resp_body=b'{"choices":[{"message":{"role":"assistant","content":"hello"},'
            b'"finish_reason":"stop"}],"model":"gpt-4o"}',
        )
    )
    flows = read_flows(data)
    (ex,) = flows.exchanges
    assert ex.url == "https://api.openai.com/v1/chat/completions"
    assert ex.request_body == body
    assert ex.ttfb == pytest.approx(0.5) and ex.duration == pytest.approx(1.25)
    (rt,) = parse_all([ex])
    assert rt.response is not None and rt.response.text == "hello"


def test_old_byte_keyed_flows_and_newer_versions_are_read_leniently() -> None:
    data = tnet(http_flow(7, byte_keys=True)) + tnet(http_flow(22))
    flows = read_flows(data)
    assert flows.versions == {7, 22}
    assert len(flows.exchanges) == 2
    assert any("newer than the 21" in n for n in flows.exchanges[1].notes)


def test_tuple_versions_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ImportFormatError, match=r"flow format version 0\.16.*too old"):
        read_flows(tnet(http_flow([0, 16])))


def test_non_http_flows_are_skipped_and_counted() -> None:
    tcp = {"version": 21, "type": "tcp", "id": "t", "messages": [], "error": None}
    flows = read_flows(tnet(tcp) + tnet(http_flow(21)) + tnet({**tcp, "type": "dns"}))
    assert len(flows.exchanges) == 1
    assert flows.skipped == {"tcp": 1, "dns": 1}


def test_a_flow_without_response_keeps_the_error() -> None:
    (ex,) = read_flows(tnet(http_flow(21, resp_body=None, error="Connection killed."))).exchanges
    assert ex.status is None and ex.transport_error == "Connection killed."


def test_a_cut_file_keeps_the_flows_before_the_cut() -> None:
    whole = FIXTURE.read_bytes()
    first_len, start = int(whole.split(b":", 1)[0]), whole.index(b":") + 1
    cut = whole[: start + first_len + 1 + 200]  # the first flow whole, then 200 bytes of the second
    flows = read_flows(cut, "cut.mitm")
    assert len(flows.exchanges) == 1
    assert "cut or damaged" in flows.exchanges[0].notes[-1]


@pytest.mark.parametrize(
    "content", [b"", b"12345", b"not a flow", b"3:abc,", b"9:" + b"[" * 9 + b"]"]
)
def test_garbage_gives_one_clear_line_from_the_cli(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.mitm"
    bad.write_bytes(content)
    assert main(["import", str(bad)]) == 2  # an exception escaping main would fail the test
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("looptap: error:"), err
    assert not (tmp_path / "bad.jsonl").exists()


# -- a fresh capture through the real mitmdump -----------------------------------------------------


def test_fresh_capture_by_real_mitmdump_matches_what_was_served(
    proxy_python: str, tmp_path: Path
) -> None:
    from tests.interop.flows import REQUESTS, record_flows

    served, received = record_flows(proxy_python, tmp_path / "flows.mitm", tmp_path / "conf")
    flows = load_flows(tmp_path / "flows.mitm")
    assert len(flows.exchanges) == len(REQUESTS) == len(served)
    for ex, s, got in zip(flows.exchanges, served, received, strict=True):
        assert ex.request_json() == s.request_json()
        # the decoded body is what the upstream sent, minus the gzip it was sent with
        sent = s.body
        if ex.decoded_from == "gzip":
            sent = gzip.decompress(sent)
            assert gzip.decompress(got) == sent
        else:
            assert got == sent
        assert ex.response_body == sent
    rts = parse_all(flows.exchanges)
    assert all(rt.response is not None and rt.response.complete for rt in rts[:3])
