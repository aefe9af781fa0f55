"""OpenTelemetry GenAI export: the payload against the OTLP protobuf schema (opentelemetry-proto),
the trace/span layout, the semconv attributes and messages, looptap's findings as events, stable
ids, and the OTLP/HTTP POST to a loopback receiver. The round trip through a real Phoenix server is
in ``test_phoenix.py`` (behind ``LOOPTAP_PHOENIX=1``)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from looptap.cassettes import providers
from looptap.cassettes.cli import main
from looptap.cassettes.interop import encode_request
from looptap.cassettes.reading import Run, open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import load_flows
from tests.interop.cassette_files import (
    CACHE_WRITE,
    FIXTURES,
    REASONING,
    build_request,
    write_cassette,
)

_IDS = ("traceId", "spanId", "parentSpanId")


def spans_of(req: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in req["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes as plain values (what an OTLP/JSON reader would decode)."""

    def val(v: dict[str, Any]) -> Any:
        (kind, x), = v.items()
        if kind == "intValue":
            return int(x)
        if kind == "arrayValue":
            return [val(i) for i in x.get("values", [])]
        return x

    return {a["key"]: val(a["value"]) for a in span.get("attributes", [])}


def to_protobuf_json(obj: Any) -> Any:
    """OTLP/JSON → protobuf's canonical JSON mapping: the one difference is that OTLP writes trace
    and span ids as hex where the canonical mapping of ``bytes`` is base64."""
    if isinstance(obj, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode() if k in _IDS else to_protobuf_json(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [to_protobuf_json(x) for x in obj]
    return obj


def llm_spans(req: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in spans_of(req) if s["kind"] == 3]


# -- the OTLP schema -------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["demo", "reasoning", "cache", "flows"])
def test_payload_is_a_valid_otlp_export_request_in_json_and_protobuf(
    source: str, demo_run: Run, tmp_path: Path
) -> None:
    run = {
        "demo": lambda: demo_run,
        "reasoning": lambda: open_run(write_cassette(REASONING, tmp_path / "r.jsonl")),
        "cache": lambda: open_run(write_cassette(CACHE_WRITE, tmp_path / "c.jsonl")),
        "flows": lambda: Run.of(load_flows(FIXTURES / "flows_mitmproxy11.mitm").exchanges, "flows"),
    }[source]()
    req = build_request(run)
    text = orjson.dumps(req).decode()
    # The JSON parses into the OTLP protobuf message: unknown fields or wrong types would raise.
    from_json = json_format.Parse(
        json.dumps(to_protobuf_json(json.loads(text))), ExportTraceServiceRequest()
    )
    # Every field survives: protobuf → canonical JSON → our JSON again.
    back = json_format.MessageToDict(from_json, use_integers_for_enums=True)
    assert back == to_protobuf_json(json.loads(text))
    # The hand-written protobuf encoder produces the same message, byte-exactly as protobuf would.
    wire = encode_request(req)
    from_wire = ExportTraceServiceRequest.FromString(wire)
    assert from_wire == from_json
    assert from_json.SerializeToString(deterministic=True) == wire
    assert len(from_wire.resource_spans[0].scope_spans[0].spans) == len(spans_of(req))


# -- layout ----------------------------------------------------------------------------------------


def test_one_trace_per_conversation_one_client_span_per_round_trip(demo_run: Run) -> None:
    req = build_request(demo_run)
    spans = spans_of(req)
    convs = demo_run.analysis.conversations
    client = llm_spans(req)
    roots = [s for s in spans if s["kind"] == 1]
    assert len(client) == len(demo_run.exchanges) == 11
    assert len(roots) == len(convs) == 4
    for conv, root in zip(convs, roots, strict=True):
        members = [s for s in client if attrs(s)["looptap.conversation"] == conv.id]
        assert [attrs(s)["looptap.seq"] for s in members] == conv.turns
        assert {s["traceId"] for s in members} == {root["traceId"]}
        assert all(s["parentSpanId"] == root["spanId"] for s in members)
        assert "parentSpanId" not in root
        # Phoenix showed UNKNOWN (issue 16)
        assert attrs(root)["openinference.span.kind"] == "AGENT"
        assert all(attrs(s)["openinference.span.kind"] == "LLM" for s in members)
        assert root["startTimeUnixNano"] == min(s["startTimeUnixNano"] for s in members)
        assert root["endTimeUnixNano"] == max(s["endTimeUnixNano"] for s in members)
    assert len({r["traceId"] for r in roots}) == 4
    assert len({s["spanId"] for s in spans}) == len(spans)


def test_ids_are_stable_across_exports_and_when_the_recording_grows(
    demo_cassette: Path, tmp_path: Path
) -> None:
    first = build_request(open_run(demo_cassette))
    assert build_request(open_run(demo_cassette)) == first
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(demo_cassette.read_bytes())
    with CassetteWriter(grown) as w:  # the recording goes on: one more round trip
        w.append(open_run(demo_cassette).exchanges[0])
    again = build_request(open_run(grown))
    old = {attrs(s)["looptap.seq"]: (s["traceId"], s["spanId"]) for s in llm_spans(first)}
    new = {attrs(s)["looptap.seq"]: (s["traceId"], s["spanId"]) for s in llm_spans(again)}
    assert len(new) == len(old) + 1
    assert all(new[seq] == ids for seq, ids in old.items())


def test_span_times_come_from_the_recording(tmp_path: Path) -> None:
    run = Run.of(load_flows(FIXTURES / "flows_mitmproxy11.mitm").exchanges, "flows")
    for span, ex in zip(llm_spans(build_request(run)), run.exchanges, strict=True):
        assert attrs(span)["looptap.timing"] == "recorded"
        assert int(span["startTimeUnixNano"]) == round(ex.started * 1e9)
        assert int(span["endTimeUnixNano"]) == round(ex.started * 1e9) + round(ex.duration * 1e9)
    # imports without wall-clock times are laid out in order from the cassette's creation time
    demo = open_run(write_cassette(CACHE_WRITE, tmp_path / "c.jsonl"))
    spans = llm_spans(build_request(demo))
    starts = [int(s["startTimeUnixNano"]) for s in spans]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    assert all(attrs(s)["looptap.timing"] == "synthetic" for s in spans)


# -- GenAI semantic conventions --------------------------------------------------------------------


def test_genai_attributes_and_messages_of_a_tool_loop(demo_run: Run) -> None:
    spans = llm_spans(build_request(demo_run))
    first, second = attrs(spans[0]), attrs(spans[1])
    assert spans[0]["name"] == "chat claude-sonnet-4-5"
    assert first["gen_ai.provider.name"] == "anthropic" and first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert first["gen_ai.response.model"] == "claude-sonnet-4-5-20250929"
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first["gen_ai.request.max_tokens"] == 4096
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (761, 85)
    assert first["gen_ai.conversation.id"] == second["gen_ai.conversation.id"]
    out = json.loads(first["gen_ai.output.messages"])
    assert out[0]["role"] == "assistant" and out[0]["finish_reason"] == "tool_call"
    call = next(p for p in out[0]["parts"] if p["type"] == "tool_call")
    assert call["name"] == "search_tools" and isinstance(call["arguments"], dict)
    # the next turn sends the call back and its result as a tool_call_response with the same id
    inp = json.loads(second["gen_ai.input.messages"])
    assert [m["role"] for m in inp] == ["user", "assistant", "user"]
    echoed = next(p for p in inp[1]["parts"] if p["type"] == "tool_call")
    result = next(p for p in inp[2]["parts"] if p["type"] == "tool_call_response")
    assert echoed["id"] == result["id"] == call["id"]
    assert "discovered_tools" in result["response"]
    tools = json.loads(second["gen_ai.tool.definitions"])
    assert [t["name"] for t in tools] == ["get_weather", "get_exchange_rate", "search_tools"]
    assert all(t["type"] == "function" and t["parameters"]["type"] == "object" for t in tools)
    for m in [*inp, *out]:  # every part has a semconv type and its required fields
        for p in m["parts"]:
            need = {
                "text": {"content"},
                "tool_call": {"name"},
                "tool_call_response": {"response"},
                "reasoning": {"content"},
            }
            assert need[p["type"]] <= set(p)


def test_reasoning_parts_and_reasoning_and_cache_tokens(tmp_path: Path) -> None:
    run = open_run(write_cassette(REASONING, tmp_path / "r.jsonl"))
    a0, a1 = (attrs(s) for s in llm_spans(build_request(run)))
    assert a0["gen_ai.provider.name"] == "deepseek"  # an OpenAI-format API on a known vendor's host
    assert a0["gen_ai.usage.reasoning.output_tokens"] == 18
    assert a0["gen_ai.usage.cache_read.input_tokens"] == 256
    # inclusive of the cache reads, as the semconv says
    assert a0["gen_ai.usage.input_tokens"] == 366
    out = json.loads(a0["gen_ai.output.messages"])
    assert [p["type"] for p in out[0]["parts"]] == ["reasoning", "tool_call"]
    assert out[0]["parts"][0]["content"]
    inp = json.loads(a1["gen_ai.input.messages"])
    assert [p["type"] for p in inp[1]["parts"]] == ["reasoning", "tool_call"]
    assert inp[2]["role"] == "tool" and inp[2]["parts"][0]["type"] == "tool_call_response"
    cache = [
        attrs(s)
        for s in llm_spans(
            build_request(open_run(write_cassette(CACHE_WRITE, tmp_path / "c.jsonl")))
        )
    ]
    assert cache[0]["gen_ai.provider.name"] == "aws.bedrock"
    assert any(a.get("gen_ai.usage.cache_creation.input_tokens", 0) > 0 for a in cache)
    assert any(a.get("gen_ai.usage.cache_read.input_tokens", 0) > 0 for a in cache)


def test_system_instructions_are_what_was_sent_beside_the_history(tmp_path: Path) -> None:
    run = open_run(write_cassette(CACHE_WRITE, tmp_path / "c.jsonl"))
    a = attrs(llm_spans(build_request(run))[0])
    system = json.loads(a["gen_ai.system_instructions"])
    assert system[0]["type"] == "text" and "SINGLE NUMBER" in system[0]["content"]
    # Bedrock's cachePoint block is an "other" part
    assert {p["type"] for p in system} <= {"text", "other"}
    assert all(m["role"] != "system" for m in json.loads(a["gen_ai.input.messages"]))


def test_no_content_leaves_messages_out(demo_run: Run) -> None:
    a = attrs(llm_spans(build_request(demo_run, content=False))[1])
    assert not {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.definitions",
        "gen_ai.system_instructions",
    } & set(a)
    assert a["gen_ai.usage.input_tokens"] == 887


def test_provider_names_follow_the_host_then_the_family() -> None:
    def name(family: str, host: str) -> str:
        adapter = providers.by_family(family)
        assert adapter is not None
        return adapter.profile.otel_provider_name(host)

    assert name("openai_chat", "127.0.0.1") == "openai"
    assert name("openai_chat", "api.groq.com") == "groq"
    assert name("openai_chat", "myres.openai.azure.com") == "azure.ai.openai"
    assert name("gemini", "generativelanguage.googleapis.com") == "gcp.gemini"
    assert name("gemini", "us-central1-aiplatform.googleapis.com") == "gcp.vertex_ai"
    assert name("anthropic", "us-east5-aiplatform.googleapis.com") == "gcp.vertex_ai"
    assert name("bedrock", "bedrock-runtime.us-east-1.amazonaws.com") == "aws.bedrock"
    assert name("ollama", "localhost") == "ollama"
    assert providers.by_family("gemini").profile.otel_operation == "generate_content"  # type: ignore[union-attr]


# -- looptap's view --------------------------------------------------------------------------------


def test_findings_ride_as_events_and_layer_labels_as_attributes(demo_run: Run) -> None:
    spans = llm_spans(build_request(demo_run))
    by_seq = {attrs(s)["looptap.seq"]: s for s in spans}
    flagged = by_seq[4]  # the model called stock_lookup with arguments that break its schema
    a = attrs(flagged)
    assert a["looptap.layers.flagged"] == ["E"]
    assert "E.arguments_schema" in a["looptap.findings.codes"]
    assert (
        a["looptap.c.link"] == "extends"
        and a["looptap.c.kept"] == 1
        and a["looptap.c.appended"] == 2
    )
    assert a["looptap.tokens.source"] == "reported" and isinstance(a["looptap.cost.usd"], float)
    events = [e for e in flagged["events"] if e["name"] == "looptap.finding"]
    ev = {x["key"]: next(iter(x["value"].values())) for x in events[0]["attributes"]}
    assert ev["looptap.finding.code"] == "E.arguments_schema" and ev["looptap.finding.layer"] == "E"
    assert (
        ev["looptap.finding.severity"] == "warning"
        and "stock_lookup" in ev["looptap.finding.message"]
    )
    assert len(events) == len(demo_run.analysis.turns[4].findings)
    assert "events" not in by_seq[0]  # no findings, no timing → no events


def test_errors_set_the_span_status(tmp_path: Path) -> None:
    from looptap.cassettes.wire import Exchange

    ex = Exchange(
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}',
        status=429,
        response_headers=[("content-type", "application/json")],
        response_chunks=[
            (
                None,
                b'{"error":{"message":"Rate limit reached","type":"requests",'
                b'"code":"rate_limit_exceeded"}}',
            )
        ],
    )
    (span,) = llm_spans(build_request(Run.of([ex])))
    assert span["status"] == {"code": 2, "message": "HTTP 429: Rate limit reached"}
    assert attrs(span)["error.type"] == "429"
    assert "gen_ai.output.messages" not in attrs(span)


# -- the CLI and OTLP/HTTP -------------------------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    got: ClassVar[list[tuple[str, str, bytes]]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).got.append((self.path, self.headers.get("content-type", ""), body))
        self.send_response(type(self).status)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"got": [], "status": 200})
    server = HTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_cli_posts_protobuf_and_json_to_an_otlp_http_endpoint(
    demo_cassette: Path, receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    out = tmp_path / "otel.json"
    assert (
        main(
            [
                "export",
                str(demo_cassette),
                "--otel",
                str(out),
                "--otel-endpoint",
                url,
                "--otel-header",
                "x-team=qa",
                "-q",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "export",
                str(demo_cassette),
                "--otel-endpoint",
                url + "/v1/traces",
                "--otel-protocol",
                "json",
                "-q",
            ]
        )
        == 0
    )
    (p1, ct1, body1), (p2, ct2, body2) = handler.got
    assert (p1, ct1, p2, ct2) == (
        "/v1/traces",
        "application/x-protobuf",
        "/v1/traces",
        "application/json",
    )
    written = orjson.loads(out.read_bytes())
    assert ExportTraceServiceRequest.FromString(body1) == ExportTraceServiceRequest.FromString(
        encode_request(written)
    )
    assert orjson.loads(body2) == written


def test_cli_reports_a_refusing_endpoint_and_bad_input_in_one_line(
    demo_cassette: Path,
    receiver: tuple[str, type[_Receiver]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, handler = receiver
    handler.status = 500
    assert main(["export", str(demo_cassette), "--otel-endpoint", url]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a cassette\n")
    assert main(["export", str(bad), "--otel", str(tmp_path / "x.json")]) == 2
    assert main(["export", str(demo_cassette), "--otel-header", "novalue", "--otel", "-"]) == 2
    assert main(["export", str(demo_cassette)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("looptap: error:") for line in lines), lines
    assert "refused the export: HTTP 500" in lines[0] and "cannot reach" not in lines[0]


def test_an_unreachable_endpoint_is_one_line_without_its_credentials(
    demo_cassette: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens on the port (bound, then closed): one ``cannot reach`` line, the URL's
    password redacted."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://user:sekrit-pw@127.0.0.1:{port}"
    assert main(["export", str(demo_cassette), "--otel-endpoint", url]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("looptap: error:") and "cannot reach" in line, line
    assert "sekrit-pw" not in line and f"127.0.0.1:{port}/v1/traces" in line


@pytest.mark.parametrize("protocol", ["protobuf", "json"])
def test_a_large_export_is_split_into_requests_that_together_hold_every_span(
    demo_run: Run, protocol: str
) -> None:
    from looptap.cassettes.interop import batches

    req = build_request(demo_run)
    whole = batches(req, protocol)
    assert len(whole) == 1
    limit = 12_000 if protocol == "protobuf" else 18_000
    parts = batches(req, protocol, limit=limit)
    assert len(parts) > 3 and all(len(p) <= limit for p in parts)

    def decode(body: bytes) -> ExportTraceServiceRequest:
        if protocol == "json":
            return json_format.Parse(
                json.dumps(to_protobuf_json(orjson.loads(body))), ExportTraceServiceRequest()
            )
        return ExportTraceServiceRequest.FromString(body)

    got = [
        s
        for body in parts
        for rs in decode(body).resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    want = [s for rs in decode(whole[0]).resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert got == want
    assert all(
        decode(b).resource_spans[0].resource == decode(whole[0]).resource_spans[0].resource
        for b in parts
    )


def test_a_recorded_stream_marks_its_first_token() -> None:
    # the streamed chat completion
    ex = load_flows(FIXTURES / "flows_mitmproxy11.mitm").exchanges[1]
    ex.response_chunks = [(0.25 + 0.01 * i, c) for i, (_, c) in enumerate(ex.response_chunks)]
    ex.started, ex.ttfb, ex.duration = 1_700_000_000.0, 0.2, 0.5
    (span,) = llm_spans(build_request(Run.of([ex])))
    assert int(span["startTimeUnixNano"]) == 1_700_000_000_000_000_000
    assert int(span["endTimeUnixNano"]) == 1_700_000_000_500_000_000
    (first,) = [e for e in span["events"] if e["name"] == "looptap.first_token"]
    assert int(first["timeUnixNano"]) == 1_700_000_000_250_000_000
    a = attrs(span)
    assert (
        a["gen_ai.request.stream"] is True
        and a["looptap.a.ttft_s"] == 0.25
        and a["looptap.a.ttfb_s"] == 0.2
    )
