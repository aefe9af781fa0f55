"""The OpenTelemetry export read back by a real Arize Phoenix server.

Behind ``LOOPTAP_PHOENIX=1``: Phoenix is large (about 150 packages) and takes a minute or more to
start, so it lives in its own environment, ``LOOPTAP_PHOENIX_PYTHON`` (see docs/interop.md,
"Interoperability"). The test starts ``phoenix serve`` on 127.0.0.1 with a temporary working
directory, exports the demo run and a reasoning run over OTLP/HTTP (protobuf), and reads the spans
back through Phoenix's REST API. Phoenix converts GenAI semconv attributes to its own
(OpenInference) ones only when the message JSON validates against the semconv schemas, so the
``llm.input_messages.*`` it derives prove the messages are well-formed, not only stored.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.net import free_port
from looptap.cassettes.reading import open_run
from tests.interop.cassette_files import REASONING, build_request, write_cassette
from tests.support import progress

PHOENIX_PYTHON = os.environ.get("LOOPTAP_PHOENIX_PYTHON", "")
pytestmark = pytest.mark.skipif(
    os.environ.get("LOOPTAP_PHOENIX") != "1" or not Path(PHOENIX_PYTHON).exists(),
    reason="set LOOPTAP_PHOENIX=1 and LOOPTAP_PHOENIX_PYTHON "
    "to a Python with arize-phoenix installed",
)

#: Where the test writes what Phoenix returned (for the report).
SAMPLE_OUT = os.environ.get("LOOPTAP_PHOENIX_SAMPLE")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    grpc = free_port({port})
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen(
        [PHOENIX_PYTHON, "-m", "phoenix.server.main", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            try:
                # one probe; the wait is watched
                with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"phoenix did not start:\n{(work / 'phoenix.log').read_text()[-3000:]}")
            return False

        try:
            progress.until(healthy, pids=[proc.pid], interval=0.5, what="phoenix to start")
        except progress.Hung as exc:
            pytest.fail(
                f"phoenix did not start ({exc}):\n{(work / 'phoenix.log').read_text()[-3000:]}"
            )
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        progress.wait(proc)  # a Phoenix that stops progressing before it exits is killed
        log.close()


def _spans(base: str, project: str, expected: int) -> list[dict[str, Any]]:
    """The project's spans, once Phoenix has ingested ``expected`` of them (ingestion is async), or
    as they are once Phoenix (a child of this test) stops making progress."""
    spans: list[dict[str, Any]] = []

    def ingested() -> bool:
        nonlocal spans
        try:
            spans = _get(f"{base}/v1/projects/{project}/spans?limit=1000")["data"]
        except OSError:
            spans = []
        return len(spans) >= expected

    try:
        progress.until(ingested, interval=0.5, what="phoenix's ingestion")
    except progress.Hung:
        pass
    return spans


def test_phoenix_reads_back_spans_attributes_messages_and_findings(
    phoenix: str, demo_cassette: Path
) -> None:
    assert (
        main(
            [
                "export",
                str(demo_cassette),
                "--otel-endpoint",
                phoenix,
                "--project",
                "looptap-demo",
                "-q",
            ]
        )
        == 0
    )
    sent = build_request(open_run(demo_cassette))
    sent_spans = sent["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans = _spans(phoenix, "looptap-demo", len(sent_spans))
    assert len(spans) == len(sent_spans) == 15
    # the ids Phoenix stored are the ones looptap derived from the cassette
    assert {(s["context"]["trace_id"], s["context"]["span_id"]) for s in spans} == {
        (s["traceId"], s["spanId"]) for s in sent_spans
    }
    llm = [s for s in spans if s["span_kind"] == "LLM"]
    assert len(llm) == 11
    assert sorted(s["name"] for s in spans if s["name"].startswith("looptap conversation")) == [
        f"looptap conversation c{i}" for i in range(1, 5)
    ]
    # was UNKNOWN
    assert {s["span_kind"] for s in spans if s["name"].startswith("looptap conversation")} == {
        "AGENT"
    }
    by_seq = {s["attributes"]["looptap.seq"]: s for s in llm}
    s4 = by_seq[4]
    a = s4["attributes"]
    # GenAI semconv attributes, stored as sent
    assert a["gen_ai.provider.name"] == "anthropic" and a["gen_ai.operation.name"] == "chat"
    assert (
        a["gen_ai.request.model"] == "claude-sonnet-4-5"
        and a["gen_ai.response.model"] == "claude-sonnet-4-5-20250929"
    )
    assert a["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert a["gen_ai.usage.input_tokens"] == 889 and a["gen_ai.usage.output_tokens"] == 82
    # … and understood: Phoenix derived its own attributes from them (messages validated)
    assert a["llm.provider"] == "anthropic" and a["llm.model_name"] == "claude-sonnet-4-5"
    assert a["llm.token_count.prompt"] == 889 and a["llm.token_count.completion"] == 82
    assert a["llm.input_messages.0.message.role"] == "user"
    assert a["llm.input_messages.1.message.tool_calls.0.tool_call.function.name"] == "search_tools"
    assert (
        a["llm.input_messages.2.message.tool_call_id"]
        == a["llm.input_messages.1.message.tool_calls.0.tool_call.id"]
    )
    assert a["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "stock_lookup"
    assert json.loads(
        a["llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"]
    ) == {"ticker": "AAPL"}
    assert a["session.id"] == a["gen_ai.conversation.id"]
    # looptap's labels and findings
    assert (
        a["looptap.conversation"] == "c2"
        and a["looptap.turn"] == 1
        and a["looptap.layers.flagged"] == ["E"]
    )
    codes = [
        e["attributes"]["looptap.finding.code"]
        for e in s4["events"]
        if e["name"] == "looptap.finding"
    ]
    assert codes == ["E.arguments_schema", "C.cache_prefix_broken"]
    assert {s["parent_id"] for s in llm if s["attributes"]["looptap.conversation"] == "c2"} == {
        next(x["context"]["span_id"] for x in spans if x["name"] == "looptap conversation c2")
    }
    if SAMPLE_OUT:
        Path(SAMPLE_OUT).write_text(json.dumps(s4, indent=1, ensure_ascii=False))


def test_phoenix_reads_reasoning_parts_and_cache_tokens(phoenix: str, tmp_path: Path) -> None:
    cassette = write_cassette(REASONING, tmp_path / "reasoning.jsonl")
    assert (
        main(
            [
                "export",
                str(cassette),
                "--otel-endpoint",
                phoenix + "/v1/traces",
                "--project",
                "looptap-reasoning",
                "-q",
            ]
        )
        == 0
    )
    spans = _spans(phoenix, "looptap-reasoning", 3)
    first = next(s for s in spans if s["attributes"].get("looptap.seq") == 0)["attributes"]
    assert (
        first["gen_ai.provider.name"] == "deepseek"
        and first["gen_ai.usage.reasoning.output_tokens"] == 18
    )
    assert first["llm.token_count.prompt_details.cache_read"] == 256
    assert first["llm.output_messages.0.message.contents.0.message_content.type"] == "reasoning"
    assert first["llm.output_messages.0.message.contents.0.message_content.text"]
    assert first["llm.output_messages.0.message.finish_reason"] == "tool_call"
