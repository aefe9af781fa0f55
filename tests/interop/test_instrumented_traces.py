"""Traces written by real instrumentations (tests/interop/traces/, made by make_traces.py: the fork
tests' weather agent — openai Chat and anthropic Messages, streamed and not, 3 turns each — run once
under ``looptap run`` against a scripted upstream and traced at the same time) imported as the run
that happened: the recording of the same run's conversations, turns, tool calls, tool results,
text, usage and stream flag; the anthropic SDK's own spans merged, never a second round trip; a fork
at turn 2, the pytest replay and ``why`` on the imported run."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from tests.interop.cassette_files import REPO
from tests.interop.make_traces import AI_SDK_AGENT, APIS, NODE_KINDS, make
from tests.interop.test_import_traces import show_json
from tests.replay.test_fork import AGENT as FORK_AGENT
from tests.replay.test_fork import new_model_route
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import ScriptedUpstream

TRACES = Path(__file__).with_name("traces")
FRAMEWORKS = Path(__file__).with_name("framework_agents.py")
#: Each trace: what the trace cannot say, so is marked inferred and left out of the comparison.
KINDS = {
    "logfire": (),
    "logfire-pydantic-ai": ("stream",),  # pydantic-ai's span does not say; Logfire's spans do
    "openlit": ("tools",),  # it writes no tool definitions on its OpenAI and Anthropic spans
    "langfuse": ("stream",),  # its spans keep the API's request and answer, not the stream flag
    # MLflow's own attributes: the SDK call's arguments (`stream` among them), its answer, a
    # stream's chunks (its translation into the conventions loses a stream's tool calls)
    "mlflow-native": (),
    "openllmetry": (),
    "openllmetry-legacy": (),
    "openinference": (),
    # its "stream"/"streaming" is the model's setting, not the call's: a false is not evidence
    "openinference-langchain": ("stream",),
    "openllmetry-langchain": ("stream",),  # its span does not say; the anthropic SDK's span does
    "pydantic-ai": ("stream",),  # pydantic-ai's span does not say; the anthropic SDK's span does
    "openai-v2": ("stream", "tools"),
    "google-genai": ("stream",),  # gen_ai.request.stream is on a streamed call only
    "vertexai": ("stream", "tools"),  # 2.2b0 writes neither (and traces no streamed call)
    "openinference-bedrock": (),
    "openllmetry-bedrock": ("stream",),  # its span does not say (nor the whole model id)
    # its LLM span keeps the Responses answer; the scripted upstream echoes no tools in it
    "openinference-openai-agents": ("stream", "tools"),
    # Strands Agents 1.62.0: no stream flag; its tools from its agent and tool spans; in the
    # latest conventions and in its default events (its own Converse content blocks)
    "strands": ("stream",),
    "strands-default": ("stream",),
    "traceai": (),  # traceAI 0.1.10: gen_ai.span.kind, flattened gen_ai.input.messages.N
    "langsmith": (),  # LangSmith 0.15.1's OTel export: the API's request and answer
    # LiteLLM 1.110.2's OTel callback: text parts with OpenAI's tool_calls / tool_call_id beside
    # them; an answer's calls without ids (gen_ai.completion.N.function_call.*)
    "litellm": (),
    # Google ADK 2.13.0's own tracing, no stream flag: its default (the conventions' messages on
    # generate_content spans) and its telemetry schema 1 (call_llm spans with its LlmRequest and
    # LlmResponse, Gemini's contents, read by the Gemini provider)
    # (schema 1: its LlmResponse's `partial`, set in its streaming mode only, says a stream; an
    # unstreamed call is not said)
    "adk": ("stream",),
    "adk-legacy": ("stream",),
    # Google ADK 1.10.0: call_llm spans alone (no finish reason kept: inferred, said)
    "adk1": ("stream",),
    # the Vercel AI SDK 6.0.325's own telemetry (generateText and streamText on OpenAI Chat):
    # its doGenerate / doStream spans, its content under ai.prompt.* / ai.response.*
    "ai-sdk": (),
    "ai-sdk-anthropic": (),  # (on @ai-sdk/anthropic 3.0.140: Anthropic Messages)
    # Haystack 3.4.1's OpenTelemetry tracer (opentelemetry-haystack 2.0.0), content on: its Agent's
    # LLM step spans, the generator's input and output in its own ChatMessage JSON; no stream flag
    "haystack": ("stream",),
    # Semantic Kernel 1.45.0, sensitive diagnostics: its spans keep the metadata, the messages
    # are its log records (OpenAI Chat's messages as JSON bodies) joined by span id; no tools
    "semantic-kernel": ("stream", "tools"),
    # OTel contrib botocore 0.66b2 (content "true"): the messages are its log records (the OTel
    # logs API's events: Converse content blocks as maps), joined by span id; no tools, no stream
    "botocore": ("stream", "tools"),
}


def facts(v: dict[str, Any], lacks: set[str]) -> dict[str, Any]:
    """What an imported round trip must share with the recording of the same call."""
    appended = v["layers"]["C"].get("appended") or []
    results = [
        (p["tool_result"]["call_id"], p["tool_result"]["content"])
        for m in appended
        for p in m["parts"]
        if p["kind"] == "tool_result"
    ]
    return {
        "kind": v["conversation_kind"],
        "turn": v["turn"],
        "calls": [(c["id"], c["name"], c["arguments"]) for c in v["tool_calls"]],
        "results": results,
        "text": v["text"] or None,  # a stream of tool calls sends an empty text delta
        "usage": ((v["usage"] or {}).get("input"), (v["usage"] or {}).get("output")),
        "stream": None if "stream" in lacks else v["stream"],
        "tools": None if "tools" in lacks else v["request"]["tools"],
        # (a finding on the tools offered: not made where the trace did not keep them, such as
        # Semantic Kernel's, whose recording has the scripted model call `get_weather` where the
        # kernel offered `weather-get_weather`)
        "findings": sorted(
            f["code"]
            for f in v["findings"]
            if f["severity"] != "info" and not ("tools" in lacks and f["code"] in _ON_TOOLS)
        ),
    }


_ON_TOOLS = {"E.tool_not_offered"}


def _conversations(views: list[dict[str, Any]], lacks: set[str]) -> list[list[dict[str, Any]]]:
    convs: dict[str, list[dict[str, Any]]] = {}
    for v in views:
        convs.setdefault(v["conversation"], []).append(facts(v, lacks))
    return sorted(convs.values(), key=lambda c: orjson.dumps(c))


def imported(kind: str, tmp_path: Path) -> Path:
    out = tmp_path / f"{kind}.jsonl"
    assert main(["import", "-q", str(TRACES / f"{kind}.otlp.json"), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_real_instrumentations_trace_imports_as_the_recording_of_the_same_run(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lacks = set(KINDS[kind])
    recorded = show_json(TRACES / f"{kind}.run.jsonl", capsys)
    views = show_json(imported(kind, tmp_path), capsys)
    # one round trip per call: the anthropic SDK's own spans are not a second one
    assert len(views) == len(recorded)
    assert _conversations(views, lacks) == _conversations(recorded, lacks)
    streamed = {_said(v): v["stream"] for v in recorded}
    for v in views:
        mark = set(v["reconstructed"]["inferred"])
        assert not {"messages", "output", "history"} & mark, mark
        # the stream flag where the trace says it, else marked inferred
        assert "stream" in mark or v["stream"] == streamed[_said(v)], v["notes"]
        if "stream" not in lacks:
            assert "stream" not in mark, v["notes"]


def _said(v: dict[str, Any]) -> bytes:
    f = facts(v, {"stream", "tools"})
    return orjson.dumps([f["calls"], f["results"], f["text"], v["request"]["messages"]])


def test_the_anthropic_sdks_own_span_is_merged_with_its_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """openllmetry 0.62.4 counts a streamed answer's output as 24 (message_start's 1 and
    message_delta's 23); the anthropic SDK's span of the same call says the API's 23, kept, and
    the round trip says so."""
    views = show_json(imported("openllmetry", tmp_path), capsys)
    streamed = [v for v in views if v["family"] == "anthropic" and v["stream"]]
    assert len(streamed) == 3 and all(v["usage"]["output"] in (23, 13) for v in streamed)
    notes = [n for v in views for n in v["notes"] if "one call, two spans" in n]
    assert len(notes) == 6 and any("output_tokens 24 → 23" in n for n in notes), notes


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_malformed_message_json_is_imported_with_a_note_and_content_said_truthfully(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = orjson.loads((TRACES / "openllmetry.otlp.json").read_bytes())
    broken = next(s for s in _spans(doc) if s["name"] == "openai.chat")
    for a in broken["attributes"]:
        if a["key"] == "gen_ai.input.messages":
            a["value"] = {"stringValue": '[{"role": "user", "parts": [{"type": "te'}
    src, out = tmp_path / "broken.otlp.json", tmp_path / "broken.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    capsys.readouterr()
    assert main(["import", str(src), "-o", str(out)]) == 0
    said = capsys.readouterr()
    assert "no message content" not in said.out + said.err  # 11 of 12 have theirs
    views = show_json(out, capsys)
    assert len(views) == 12
    noted = [v for v in views if any("not valid JSON" in n for n in v["notes"])]
    assert len(noted) == 1
    assert "malformed input.messages" in noted[0]["reconstructed"]["inferred"]


def test_the_older_openllmetry_attributes_are_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    out = tmp_path / "legacy.jsonl"
    assert main(["import", str(TRACES / "openllmetry-legacy.otlp.json"), "-o", str(out)]) == 0
    assert "no message content" not in capsys.readouterr().out
    assert sum(len(v["tool_calls"]) for v in show_json(out, capsys)) == 6


def _fork(
    trace: Path, tmp_path: Path, agent: list[str], **more: str
) -> tuple[Any, ScriptedUpstream]:
    env = clean_env(
        OPENAI_API_KEY="sk-test-fork", ANTHROPIC_API_KEY="sk-ant-fork", GOOGLE_API_KEY="g-fork",
        AWS_ACCESS_KEY_ID="AKIDFORK", AWS_SECRET_ACCESS_KEY="secret-fork", **more,
    )  # fmt: skip
    up = [f for api in APIS for f in ("--upstream", f"{api}=URL")]
    with ScriptedUpstream(new_model_route, validate=True) as fake:
        argv = [
            *RECORDER, "run", "--from", f"{trace}@turn=2", "-o", str(tmp_path / "branch.jsonl"),
            "--confdir", str(tmp_path / "conf"), *(u.replace("URL", fake.url) for u in up), "--",
            *agent,
        ]  # fmt: skip
        proc = progress.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    return proc, fake


#: The traces whose agent runs on the SDKs alone (the test environment's), with the labels run.
SDK_KINDS = {
    "logfire": (),
    "openlit": (),
    "langfuse": ("openai", "openai-stream"),
    "mlflow-native": ("openai", "openai-stream", "anthropic"),  # it traces no messages.stream()
    "openllmetry": (),
    "openinference": (),
    "openllmetry-legacy": ("openai", "openai-stream", "anthropic"),
    "openai-v2": ("openai", "openai-stream"),  # no stream flag, no tools in its trace
    "google-genai": ("gemini", "gemini-stream"),
    "traceai": ("openai",),
    "langsmith": ("openai", "openai-stream"),
}


#: The forks of an SDK's imported trace by default: OpenLLMetry's (the Chat and Messages agents,
#: streamed or not) and google-genai's (Gemini). The other kinds' forks run nightly: the same fork
#: of the same agents, and each kind's imported run answering every request its agent sent is
#: shown in process below (``test_every_request_the_agent_sent_is_answered_by_the_imported_run``;
#: session 55, h105m).
FORK_DEFAULT = ("openllmetry", "google-genai")
_NIGHTLY_FORK = pytest.mark.slow(
    reason="the same fork of the same agent from another instrumentation's trace (2-4 s of CPU); "
    "its matching is shown in process by test_every_request_the_agent_sent_is_answered_by_the_"
    "imported_run"
)


@needs_recorder
@pytest.mark.parametrize(
    "kind", [k if k in FORK_DEFAULT else pytest.param(k, marks=_NIGHTLY_FORK) for k in SDK_KINDS]
)
def test_a_fork_at_turn_2_of_an_imported_trace_serves_the_prefix(kind: str, tmp_path: Path) -> None:
    """``run --from IMPORTED@turn=2`` with the agent that made the trace: the 2 turns before the
    cursor served from the trace's answers, only turn 2 live, exit 0."""
    trace = imported(kind, tmp_path)
    labels = SDK_KINDS[kind]
    proc, fake = _fork(trace, tmp_path, [sys.executable, str(FORK_AGENT), *labels])
    n = len(labels) or 4
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(fake.log) == n, [x.line() for x in fake.log]
    assert all(len(x.request.tool_results()) == 2 for x in fake.log)
    assert proc.stdout.count("NEW MODEL") == n, proc.stdout


#: The traces whose agent is fork_agent.py on an SDK the test environment lacks (the traces' has
#: it: boto3, google-cloud-aiplatform).
SDKS_ELSEWHERE = ("openinference-bedrock", "vertexai")
_TRACES_VENV = REPO / ".venv-traces" / "bin" / "python"  # .ci/run makes it
FRAMEWORKS_PYTHON = os.environ.get("LOOPTAP_TRACES_PYTHON") or (
    str(_TRACES_VENV) if _TRACES_VENV.exists() else None
)


@needs_recorder
@pytest.mark.skipif(
    not FRAMEWORKS_PYTHON,
    reason="LOOPTAP_TRACES_PYTHON: an environment made from tests/interop/traces/requirements.txt "
    "(LangChain, pydantic-ai)",
)
@pytest.mark.parametrize(
    ("kind", "framework"),
    [
        ("openinference-langchain", "langchain"),
        # (a second trace of the same framework's agent: nightly, session 55, h105m)
        pytest.param("openllmetry-langchain", "langchain", marks=_NIGHTLY_FORK),
        ("pydantic-ai", "pydantic-ai"),
        pytest.param("logfire-pydantic-ai", "pydantic-ai", marks=_NIGHTLY_FORK),
        ("openinference-openai-agents", "openai-agents openai openai-stream"),
        ("openinference-bedrock", "bedrock bedrock-stream"),
        ("vertexai", "vertex"),
    ],
)
def test_a_fork_at_turn_2_of_a_frameworks_trace(kind: str, framework: str, tmp_path: Path) -> None:
    """The LangChain, pydantic-ai and openai-agents agents forked from their imported traces (the
    last on the Responses API): what the trace does
    not keep (langchain-anthropic's ``is_error: false``, pydantic-ai's ``tool_choice``, its
    ``max_completion_tokens``, its re-spelled arguments, whether a call streamed) is no miss, and
    a streamed call the trace did not flag gets its answer as a stream."""
    trace = imported(kind, tmp_path)
    # boto3 and the Vertex AI SDK: in the traces' environment
    script = FORK_AGENT if kind in SDKS_ELSEWHERE else FRAMEWORKS
    agent = [str(FRAMEWORKS_PYTHON), str(script), *framework.split()]
    n = len(framework.split()[script is FRAMEWORKS :]) or 4
    proc, fake = _fork(trace, tmp_path, agent)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(fake.log) == n and proc.stdout.count("NEW MODEL") == n, proc.stdout
    assert all(len(x.request.tool_results()) == 2 for x in fake.log), [x.line() for x in fake.log]


def _recorded_requests(kind: str) -> list[Any]:
    from looptap.cassettes.reading import open_run

    return list(open_run(TRACES / f"{kind}.run.jsonl", whole=True).exchanges)


#: Traces whose requests cannot be matched, and why (what the import says of them).
UNMATCHED = {
    "openllmetry-bedrock": "model id",  # it writes the model without its `anthropic.`
    # its default spans (and ADK 1.10's) say no stream: Gemini's streamed calls go to another URL
    "adk": "stream",
    "adk1": "stream",
    "botocore": "stream",  # (ConverseStream is another URL; its spans do not say which)
}


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in UNMATCHED])
def test_every_request_the_agent_sent_is_answered_by_the_imported_run(
    kind: str, tmp_path: Path
) -> None:
    """Replay's matcher on the imported run, given the requests the agent really sent (the
    recording of the same run): each is answered by its own call, a field looptap inferred never
    the reason for a miss; what was left out of the comparison is on the record."""
    from looptap.cassettes.matching import Matcher
    from looptap.cassettes.reading import open_run

    matcher = Matcher(open_run(imported(kind, tmp_path), whole=True).exchanges)
    for ex in _recorded_requests(kind):
        found = matcher.match(ex.method, ex.url, ex.request_headers, ex.request_body)
        assert not hasattr(found, "reason"), (ex.url, getattr(found, "reason", ""))
    assert matcher.count_unplayed() == 0
    inferred = {t.path for ts in matcher.tolerated.values() for t in ts if t.detector == "inferred"}
    if kind == "pydantic-ai":
        assert ("tool_choice",) in inferred and ("max_completion_tokens",) in inferred


def test_only_what_was_inferred_is_left_out(tmp_path: Path) -> None:
    """A parameter the trace kept (max_tokens, sent as max_completion_tokens), changed, and a
    changed message are misses still; a parameter the trace has no word of is not."""
    from looptap.cassettes.matching import Matcher
    from looptap.cassettes.reading import open_run

    ex = _recorded_requests("pydantic-ai")[0]
    body = orjson.loads(ex.request_body)
    rome = [*body["messages"][:-1], {"role": "user", "content": "Rome?"}]
    cases = [
        ({**body, "max_completion_tokens": 999}, False),
        ({**body, "messages": rome}, False),
        ({**body, "temperature": 0.5}, True),
    ]
    run = imported("pydantic-ai", tmp_path)
    for changed, answered in cases:
        matcher = Matcher(open_run(run, whole=True).exchanges)
        found = matcher.match(ex.method, ex.url, ex.request_headers, orjson.dumps(changed))
        assert hasattr(found, "reason") is not answered, changed


def test_no_content_is_said_of_the_round_trips_that_have_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A span of a call the instrumentation did not trace (the anthropic SDK's own, alone) is
    metadata only; the import says so of it, not of the run."""
    doc = orjson.loads((TRACES / "openllmetry.otlp.json").read_bytes())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            if ss["scope"]["name"] == "opentelemetry.instrumentation.anthropic":
                ss["spans"] = ss["spans"][1:]  # one call the instrumentation missed
    src = tmp_path / "partial.otlp.json"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    capsys.readouterr()
    assert main(["import", str(src), "-o", str(tmp_path / "partial.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "12 round trips" in out and "1 of 12 round trips without message content" in out, out


def test_an_empty_assistant_message_in_a_spans_input_does_not_split_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pydantic-ai has been seen to open an Anthropic call's input with an empty assistant
    message: no API takes one, so it is left out (with a note) and the run is the same."""
    doc = orjson.loads((TRACES / "pydantic-ai.otlp.json").read_bytes())
    touched = 0
    for span in _spans(doc):
        for a in span["attributes"]:
            value = a["value"].get("stringValue", "")
            if a["key"] == "gen_ai.input.messages" and '"toolu_' in value:
                msgs = orjson.loads(value)
                empty = {"role": "assistant", "parts": []}
                a["value"] = {"stringValue": orjson.dumps([*msgs[:1], empty, *msgs[1:]]).decode()}
                touched += 1
    assert touched
    src = tmp_path / "empty.otlp.json"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    out = tmp_path / "empty.jsonl"
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    lacks = set(KINDS["pydantic-ai"])
    recorded = show_json(TRACES / "pydantic-ai.run.jsonl", capsys)
    assert _conversations(views, lacks) == _conversations(recorded, lacks)
    assert sum(any("empty assistant message" in n for n in v["notes"]) for v in views) == touched


def test_a_bedrock_model_the_trace_cut_is_said_on_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """openllmetry's bedrock 0.62.4 writes ``claude-3-haiku-20240307-v1:0`` for the model id
    ``anthropic.claude-3-haiku-20240307-v1:0`` the agent called: the import line says the model id
    was inferred, each round trip says why a fork or replay cannot match it; the rest of the run
    (conversations, calls, results, usage) is the recording's."""
    capsys.readouterr()
    out = tmp_path / "b.jsonl"
    assert main(["import", str(TRACES / "openllmetry-bedrock.otlp.json"), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "model id" in said and said.count("\n") == 1, said
    views = show_json(out, capsys)
    assert len(views) == 6 and all("model id" in v["reconstructed"]["inferred"] for v in views)
    assert all(any("not a whole Bedrock model id" in n for n in v["notes"]) for v in views)


@pytest.mark.parametrize(
    ("kind", "n", "file"),
    [("botocore", 6, "otlp.pb"), ("vertexai-default", 3, "otlp.json"),
     ("semantic-kernel", 3, "otlp.pb"), ("semantic-kernel-metadata", 3, "otlp.json"),
     ("haystack-content-off", 3, "otlp.json")],
)  # fmt: skip
def test_a_trace_without_content_imports_as_metadata_and_says_so(
    kind: str, n: int, file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OTel contrib botocore 0.66b2, vertexai 2.2b0 under its default conventions (no
    ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``) and Semantic Kernel 1.45.0
    (its sensitive diagnostics on; its spans alone, in protobuf, without its log records; or
    its diagnostics without the sensitive switch: its log records hold no message) keep a
    call's messages out of its spans (they go to the logs API as events), and Haystack 3.4.1 with
    its content tracing off keeps none: the import is the models, usage and finish
    reasons of the calls the recording has, and says in one line that fork and replay need the
    messages."""
    capsys.readouterr()
    out = tmp_path / f"{kind}.jsonl"
    assert main(["import", str(TRACES / f"{kind}.{file}"), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "no message content in the trace" in said and "fork and replay" in said, said
    assert said.count("\n") == 1, said
    views, recorded = show_json(out, capsys), show_json(TRACES / f"{kind}.run.jsonl", capsys)

    def usage(vs: list[dict[str, Any]]) -> list[Any]:
        return sorted((v["usage"]["input"], v["usage"]["output"]) for v in vs)

    if kind == "haystack-content-off":  # (no usage either: its reply's meta is content)
        assert len(views) == n == len(recorded)
        assert all(v["usage"]["input"] is None and v["model_requested"] == "unknown" for v in views)
    else:
        assert len(views) == n and usage(views) == usage(recorded)
        # the model the agent called (whether it streamed: not said)
        assert {v["model_requested"] for v in views} == {v["model_requested"] for v in recorded}
    # what it could not read is said on each round trip, and nothing is judged on it
    for v in views:
        assert v["reconstructed"]["unread"] == ["answer", "messages"], v["reconstructed"]
        assert [f["code"] for f in v["findings"] if f["severity"] != "info"] == []
        # and the round trip's read state says it (issue 92: unknown is an answer)
        assert v["read"] == "partial", v["read"]
        assert {"messages: not kept by the trace", "answer: not kept by the trace"} <= set(
            v["unread"]
        ), v["unread"]
    if kind == "semantic-kernel":  # its finish reasons, the SDK's enum (FinishReason.TOOL_CALLS)
        finishes = sorted(str(v["finish_reason"]["raw"]) for v in views)
        assert finishes == sorted(str(v["finish_reason"]["raw"]) for v in recorded)


def test_an_instrumentation_without_a_profile_is_read_by_the_conventions_and_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """openllmetry's trace under scope names no profile knows: the same run (what the
    conventions give), its parameters and stream flag inferred, and one line saying so."""
    doc = orjson.loads((TRACES / "openllmetry.otlp.json").read_bytes())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["scope"]["name"] = "acme.llm." + ss["scope"]["name"].rsplit(".", 1)[-1]
    src, out = tmp_path / "acme.otlp.json", tmp_path / "acme.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    capsys.readouterr()
    assert main(["import", str(src), "-o", str(out)]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "no profile of" in line]
    assert len(said) == 1 and "read by the GenAI conventions" in said[0], said
    views = show_json(out, capsys)
    recorded = show_json(TRACES / "openllmetry.run.jsonl", capsys)
    assert _conversations(views, {"stream"}) == _conversations(recorded, {"stream"})
    for v in views:
        mark = set(v["reconstructed"]["inferred"])
        assert "params" in mark and ("stream" in mark or v["stream"]), mark


def test_openlit_takes_the_system_prompt_once_and_its_defaults_as_not_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenLIT 1.45 writes the system prompt in its system instructions and its input messages,
    and temperature 1.0, top_p 1.0, top_k 1.0, seed 0, stop [] for parameters the agent never
    sent: one system prompt, none of those in the rebuilt requests, and a changed parameter it
    kept (Anthropic's max_tokens) is named as what changed, not the system prompt."""
    from looptap.cassettes.matching import Matcher
    from looptap.cassettes.reading import open_run

    run = imported("openlit", tmp_path)
    for ex in open_run(run, whole=True).exchanges:
        body = orjson.loads(ex.request_body)
        system = body.get("system") or [m for m in body["messages"] if m["role"] == "system"]
        assert system in ("Use the weather tool.", [{"role": "system", "content": "Use the "
                                                     "weather tool."}]), system  # fmt: skip
        assert not {"temperature", "top_p", "top_k", "seed", "stop", "stop_sequences"} & set(body)
    sent = next(ex for ex in _recorded_requests("openlit") if ex.url.endswith("/v1/messages"))
    body = {**orjson.loads(sent.request_body), "max_tokens": 999}
    found = Matcher(open_run(run, whole=True).exchanges).match(
        sent.method, sent.url, sent.request_headers, orjson.dumps(body)
    )
    said = [str(v) for v in getattr(found, "verdicts", [])]
    assert said and "max_tokens" in said[0] and "system prompt" not in said[0], said


#: An environment with Strands Agents (tests/interop/traces/requirements-strands.txt).
STRANDS_PYTHON = os.environ.get("LOOPTAP_STRANDS_PYTHON")


@needs_recorder
@pytest.mark.skipif(
    not STRANDS_PYTHON,
    reason="LOOPTAP_STRANDS_PYTHON: an environment from tests/interop/traces/"
    "requirements-strands.txt (Strands Agents)",
)
@pytest.mark.parametrize("kind", ["strands", "strands-default"])
def test_a_fork_at_turn_2_of_a_strands_trace(kind: str, tmp_path: Path) -> None:
    """Strands Agents' agent forked from its imported trace (the latest conventions', and its
    default events with its own content blocks): its tool results (``[{"text": …}]`` in the
    trace) and its tools (its agent and tool spans') match what it sends again."""
    trace = imported(kind, tmp_path)
    agent = [str(STRANDS_PYTHON), str(FRAMEWORKS), "strands", "openai", "openai-stream"]
    proc, fake = _fork(trace, tmp_path, agent)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(fake.log) == 2 and proc.stdout.count("NEW MODEL") == 2, proc.stdout
    assert all(len(x.request.tool_results()) == 2 for x in fake.log), [x.line() for x in fake.log]


def test_a_call_whose_answer_the_trace_lost_is_said_unread_and_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """traceAI 0.1.10 keeps a streamed call's request but not its answer (no output, no usage):
    each such round trip says its answer is unread, and no finding above info rests on it."""
    views = show_json(imported("traceai-stream", tmp_path), capsys)
    recorded = show_json(TRACES / "traceai-stream.run.jsonl", capsys)
    assert len(views) == len(recorded) == 3
    for v in views:
        assert v["reconstructed"]["unread"] == ["answer"], v["reconstructed"]
        assert any("answer is unread" in n for n in v["notes"]), v["notes"]
        assert [f["code"] for f in v["findings"] if f["severity"] != "info"] == []
        assert v["model_requested"] == "gpt-4o-mini"  # (its request parameters say it)
    # what it kept is read: the requests the agent sent, tools and tool results
    assert [v["request"]["tools"] for v in views] == [v["request"]["tools"] for v in recorded]
    assert [facts(v, set())["results"] for v in views] == [
        facts(v, set())["results"] for v in recorded
    ]


def test_a_status_the_trace_says_only_in_words_is_inferred_and_judges_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A call span that ended in an exception saying ``Error code: 503 - … overloaded`` and no
    status attribute: status 503 (not 500), inferred and said, and its A finding an info note
    that says it rests on the inferred status (a recording says 503 and ``A.overloaded``)."""
    doc = orjson.loads((TRACES / "strands.otlp.json").read_bytes())
    span = next(s for s in _spans(doc) if s["name"] == "chat")
    span["events"] = [e for e in span["events"] if "output" not in orjson.dumps(e).decode()]
    span["status"] = {"code": 2, "message": "Error code: 503 - {'type': 'error', 'error': "
                      "{'type': 'overloaded_error', 'message': 'Overloaded'}}"}  # fmt: skip
    src, out = tmp_path / "503.otlp.json", tmp_path / "503.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    v = show_json(out, capsys)[0]
    assert v["status"] == 503 and "status" in v["reconstructed"]["inferred"]
    assert any("status 503 read from the error's words" in n for n in v["notes"])
    a = [f for f in v["findings"] if f["layer"] == "A"]
    assert a and all(f["severity"] == "info" and f["details"]["inferred"] == "status" for f in a)
    assert {f["code"] for f in a} <= {"A.overloaded", "A.http_error"}


def test_messages_in_the_apis_own_shapes_are_read_by_the_familys_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """openllmetry's trace with each span's ``gen_ai.input.messages`` / ``output.messages``
    rewritten in its API's own shape (OpenAI Chat messages with ``tool_calls`` and ``tool``
    messages; Anthropic's ``tool_use`` / ``tool_result`` blocks), as some instrumentations write
    them: the same run as the recording (no empty message, no orphan result, finish kept)."""
    from looptap.cassettes.providers import from_parts

    doc = orjson.loads((TRACES / "openllmetry.otlp.json").read_bytes())
    rewritten = 0
    for span in _spans(doc):
        a = {x["key"]: x for x in span["attributes"]}
        family = {"openai": "openai_chat", "anthropic": "anthropic"}.get(
            (a.get("gen_ai.provider.name") or a.get("gen_ai.system") or {"value": {}})["value"]
            .get("stringValue", "")
        )
        if family is None or "gen_ai.input.messages" not in a:
            continue
        inputs = orjson.loads(a["gen_ai.input.messages"]["value"]["stringValue"])
        outputs = orjson.loads(a["gen_ai.output.messages"]["value"]["stringValue"])
        _, api_in = from_parts(family, inputs, True)
        _, api_out = from_parts(family, [{**outputs[0], "role": "assistant"}], True)
        api_out[-1]["finish_reason"] = outputs[0].get("finish_reason")
        a["gen_ai.input.messages"]["value"] = {"stringValue": orjson.dumps(api_in).decode()}
        a["gen_ai.output.messages"]["value"] = {"stringValue": orjson.dumps(api_out).decode()}
        rewritten += 1
    assert rewritten == 12
    _as_openllmetrys_run(doc, tmp_path, capsys)


def _as_openllmetrys_run(
    doc: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> list[dict[str, Any]]:
    """The import of ``doc`` (openllmetry's trace, rewritten): its views, asserted the recorded
    run's conversations."""
    src, out = tmp_path / "rewritten.otlp.json", tmp_path / "rewritten.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    recorded = show_json(TRACES / "openllmetry.run.jsonl", capsys)
    assert _conversations(views, set()) == _conversations(recorded, set())
    return views


def test_an_answer_written_as_openais_choices_list_is_read_by_the_openai_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """openllmetry's trace with each OpenAI span's ``gen_ai.output.messages`` rewritten as the
    response's own ``choices`` list (``[{"index", "message", "finish_reason"}]``), as some
    instrumentations write it (issue 102 item 2): read by the OpenAI Chat provider, the same run
    as the recording, and no warning (before: empty answers, read complete, with false
    ``A.tool_calls_without_calls`` and ``E.empty_response``)."""
    from looptap.cassettes.providers import from_parts

    doc = orjson.loads((TRACES / "openllmetry.otlp.json").read_bytes())
    rewritten = 0
    for span in _spans(doc):
        a = {x["key"]: x for x in span["attributes"]}
        named = (a.get("gen_ai.provider.name") or a.get("gen_ai.system") or {"value": {}})["value"]
        if named.get("stringValue") != "openai" or "gen_ai.output.messages" not in a:
            continue
        outputs = orjson.loads(a["gen_ai.output.messages"]["value"]["stringValue"])
        _, api_out = from_parts("openai_chat", [{**outputs[0], "role": "assistant"}], True)
        raw = {"tool_call": "tool_calls"}.get(outputs[0].get("finish_reason"), "stop")
        choices = [{"index": 0, "message": api_out[-1], "finish_reason": raw}]
        a["gen_ai.output.messages"]["value"] = {"stringValue": orjson.dumps(choices).decode()}
        rewritten += 1
    assert rewritten == 6
    views = _as_openllmetrys_run(doc, tmp_path, capsys)
    assert [f["code"] for v in views for f in v["findings"] if f["severity"] != "info"] == []
    assert all(v["read"] == "complete" for v in views), [v["unread"] for v in views]


def test_tools_the_call_span_lacks_are_its_agent_spans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """traceAI's trace with its tool definitions moved from each LLM span to an agent span over
    them (``gen_ai.span.kind`` ``AGENT``, ``gen_ai.tool.definitions``), as agent frameworks write
    them: each call offers its agent's tools, said in its notes; the run is the recording's."""
    doc = orjson.loads((TRACES / "traceai.otlp.json").read_bytes())
    spans = _spans(doc)
    defs = next(a for a in spans[0]["attributes"] if a["key"] == "gen_ai.tool.definitions")
    agent_id = "00000000000000a1"
    for s in spans:
        s["attributes"] = [a for a in s["attributes"] if not a["key"].startswith("gen_ai.tool.")]
        s["parentSpanId"] = agent_id
    agent = {
        **spans[0],
        "spanId": agent_id,
        "name": "agent",
        "events": [],
        "attributes": [{"key": "gen_ai.span.kind", "value": {"stringValue": "AGENT"}}, defs],
    }
    agent.pop("parentSpanId")
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append(agent)
    src, out = tmp_path / "agent.otlp.json", tmp_path / "agent.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    recorded = show_json(TRACES / "traceai.run.jsonl", capsys)
    assert _conversations(views, set()) == _conversations(recorded, set())
    assert all(any("its agent span's" in n for n in v["notes"]) for v in views)


def test_a_request_the_instrumentation_rewrote_into_another_apis_shape_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LangSmith 0.15.1's ``wrap_anthropic`` keeps Anthropic calls' requests with the system
    prompt as a ``system`` message (OpenAI's shape) and an answer's calls as OpenAI's
    ``tool_calls``: not read as either API's call (no false C findings on a history it rewrote),
    said on each round trip; one round trip per call with the anthropic SDK's own span (the same
    response id), its models and usage the recording's."""
    views = show_json(imported("langsmith-anthropic", tmp_path), capsys)
    recorded = show_json(TRACES / "langsmith-anthropic.run.jsonl", capsys)
    assert len(views) == len(recorded) == 6

    def usage(vs: list[dict[str, Any]]) -> list[Any]:
        return sorted((v["usage"]["input"], v["usage"]["output"]) for v in vs)

    assert usage(views) == usage(recorded)
    # (it traced the 3 non-streamed calls: messages.stream() has the anthropic SDK's span alone)
    assert sum(any("another API's shape" in n for n in v["notes"]) for v in views) == 3
    for v in views:
        assert v["reconstructed"]["unread"] == ["answer", "messages"]
        assert [f["code"] for f in v["findings"] if f["severity"] != "info"] == []


#: Frameworks traced in environments of their own: KIND → (the variable naming the environment,
#: its requirements file, the agent's arguments to framework_agents.py).
OWN_ENVS = {
    # (LiteLLM's pins are a part of ADK's: one environment serves both, .ci/run's .venv-adk)
    "litellm": ("LOOPTAP_ADK_PYTHON", "requirements-adk.txt", "litellm openai openai-stream"),
    # (its default says no stream: a streamed call's URL is not the one the import rebuilds)
    "adk": ("LOOPTAP_ADK_PYTHON", "requirements-adk.txt", "adk gemini"),
    "adk-legacy": ("LOOPTAP_ADK_PYTHON", "requirements-adk.txt", "adk gemini gemini-stream"),
    "adk1": ("LOOPTAP_ADK1_PYTHON", "requirements-adk1.txt", "adk gemini"),
    # Haystack 3.4.1 is in the client matrix's agents environment (.venv-agents)
    "haystack": (
        "LOOPTAP_AGENTS_PYTHON",
        "../../clients/requirements-agents.txt",
        "haystack openai openai-stream",
    ),
    # (Semantic Kernel's environment is 384 MB: not made by .ci/run; its trace is committed)
    "semantic-kernel": (
        "LOOPTAP_SK_PYTHON",
        "requirements-semantic-kernel.txt",
        "semantic-kernel openai",
    ),
}


@needs_recorder
@pytest.mark.parametrize("kind", list(OWN_ENVS))
def test_a_fork_at_turn_2_of_a_trace_made_in_its_own_environment(kind: str, tmp_path: Path) -> None:
    """The agent that made the trace (LiteLLM's ``completion()``, Google ADK's ``LlmAgent``,
    Haystack's ``Agent``, Semantic Kernel's automatic function calling: its messages read from its
    log records) forked from its imported trace:
    the 2 turns before the cursor served from the trace's answers (their tool calls' ids among
    them), only turn 2 live, exit 0."""
    var, requirements, args = OWN_ENVS[kind]
    python = os.environ.get(var)
    if not python:
        pytest.skip(f"{var}: an environment from tests/interop/traces/{requirements}")
    trace = imported(kind, tmp_path)
    proc, fake = _fork(trace, tmp_path, [python, str(FRAMEWORKS), *args.split()])
    n = len(args.split()) - 1
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(fake.log) == n and proc.stdout.count("NEW MODEL") == n, proc.stdout
    assert all(len(x.request.tool_results()) == 2 for x in fake.log), [x.line() for x in fake.log]


def test_an_answers_tool_calls_kept_without_ids_take_them_from_the_next_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LiteLLM 1.110.2 keeps an answer's tool calls as ``gen_ai.completion.N.function_call.*``
    (no id) and its messages as text parts with OpenAI's ``tool_calls`` / ``tool_call_id``: each
    answer's calls take their ids from the next request, which carries them; the last answer of a
    conversation cut from the trace keeps none, says its ids unread, and judges nothing on them."""
    views = show_json(imported("litellm", tmp_path), capsys)
    assert all(any("taken from the next request" in n for n in v["notes"])
               for v in views if v["tool_calls"])  # fmt: skip
    doc = orjson.loads((TRACES / "litellm.otlp.json").read_bytes())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    del spans[1:3]  # the first conversation's turns 1 and 2
    src, out = tmp_path / "cut.otlp.json", tmp_path / "cut.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    first = show_json(out, capsys)[0]
    assert first["tool_calls"][0]["name"] == "get_weather"
    assert "tool call ids" in first["reconstructed"]["unread"] and first["read"] == "partial"
    assert [f["code"] for f in first["findings"] if f["severity"] != "info"] == []


def test_adks_call_of_a_litellm_model_is_not_read_as_gemini(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Google ADK 2.13.0 on its LiteLLM model (``openai/gpt-4o-mini``: OpenAI's API on the wire)
    keeps its call_llm request in Gemini's shape, ADK's own: that span is not read as a Gemini
    call; its generate_content span names no provider the model is one of, so each call is said
    unread and nothing is judged on it (one round trip per call, as the recording has)."""
    views = show_json(imported("adk-litellm", tmp_path), capsys)
    recorded = show_json(TRACES / "adk-litellm.run.jsonl", capsys)
    assert len(views) == len(recorded) == 3
    assert all(v["family"] == "openai_chat" for v in recorded)
    for v in views:
        assert v["family"] != "gemini" and v["read"] == "unread", v["unread"]
        assert [f["code"] for f in v["findings"] if f["severity"] != "info"] == []


def test_adks_default_trace_of_a_litellm_model_is_read_as_openai(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same agent under ADK's default schema: its generate_content spans name the provider
    (``openai``), so each is read as an OpenAI Chat call, the recording's run; only the tool
    results' spelling differs (ADK keeps each as an object, LiteLLM sent it as ``json.dumps``
    text): equal as JSON."""
    views = show_json(imported("adk-litellm-default", tmp_path), capsys)
    recorded = show_json(TRACES / "adk-litellm-default.run.jsonl", capsys)

    def said(vs: list[dict[str, Any]]) -> list[Any]:
        out = []
        for v in vs:
            f = facts(v, {"stream"})
            f["results"] = [(i, orjson.loads(r)) for i, r in f["results"]]
            out.append(f)
        return out

    assert said(views) == said(recorded)
    assert all(v["read"] == "complete" for v in views)


# -- the Vercel AI SDK (Node): its own telemetry, each content mode ------------------------------


@pytest.mark.parametrize(("kind", "unread"), [("ai-sdk-inputs-off", "messages"),
                                              ("ai-sdk-outputs-off", "answer")])  # fmt: skip
def test_the_ai_sdks_content_not_recorded_is_said_unread_and_never_judged(
    kind: str, unread: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The AI SDK 6.0.325 with ``recordInputs: false`` (no ``ai.prompt.*``) or ``recordOutputs:
    false`` (no ``ai.response.text`` / ``toolCalls``): each round trip says the part it lacks
    unread and is judged on nothing (not even an info finding: with the requests unread, which
    request followed an answer is not known); what it kept (usage, finish, stream, the answers'
    tool calls, the requests' tool results) is the recording's."""
    views = show_json(imported(kind, tmp_path), capsys)
    recorded = show_json(TRACES / f"{kind}.run.jsonl", capsys)
    assert len(views) == len(recorded) == 6

    def kept(vs: list[dict[str, Any]]) -> list[Any]:
        out = []
        for v in vs:
            f = facts(v, set())
            said = [f["calls"]] if unread == "messages" else [f["results"], f["tools"]]
            out.append((f["usage"], f["stream"], v["finish_reason"]["raw"], *said))
        return sorted(out, key=orjson.dumps)

    assert kept(views) == kept(recorded)
    for v in views:
        assert v["read"] == "partial" and v["unread"] == [f"{unread}: not kept by the trace"]
        assert v["findings"] == [], v["findings"]


#: Node packages for the AI SDK's traced agent: .ci/run's .npm-clients (ai, @ai-sdk/openai and
#: the OTel JS SDK at pinned versions), or LOOPTAP_NPM_CLIENTS.
NPM_CLIENTS = Path(os.environ.get("LOOPTAP_NPM_CLIENTS") or REPO / ".npm-clients")
needs_ai_sdk = pytest.mark.skipif(
    shutil.which("node") is None
    or not (NPM_CLIENTS / "node_modules" / "@opentelemetry" / "sdk-trace-base").is_dir()
    or not (NPM_CLIENTS / "node_modules" / "ai").is_dir(),
    reason="node, and LOOPTAP_NPM_CLIENTS (.ci/run's .npm-clients) with ai and the OTel JS SDK",
)


@needs_recorder
@needs_ai_sdk
@pytest.mark.parametrize("kind", ["ai-sdk", "ai-sdk-anthropic"])
def test_a_fork_at_turn_2_of_the_ai_sdks_trace(kind: str, tmp_path: Path) -> None:
    """The AI SDK's agent (generateText and streamText, ``stopWhen``; OpenAI Chat, Anthropic
    Messages) forked from its imported trace: the 2 turns before the cursor served from the
    trace's answers (their tool calls' ids, the stream as a stream), only turn 2 live, exit 0."""
    trace = imported(kind, tmp_path)
    agent = ["node", str(AI_SDK_AGENT), "", *NODE_KINDS[kind][0]]
    proc, fake = _fork(trace, tmp_path, agent, NPM_CLIENTS=str(NPM_CLIENTS))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(fake.log) == 2 and proc.stdout.count("NEW MODEL") == 2, proc.stdout
    assert all(len(x.request.tool_results()) == 2 for x in fake.log), [x.line() for x in fake.log]


@needs_recorder
@needs_ai_sdk
def test_the_ai_sdks_trace_made_live_imports_as_its_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The committed traces' maker, live: the AI SDK's agent run under ``looptap run`` and traced
    by its own telemetry at the same time; the import is the recording."""
    make("ai-sdk", sys.executable, tmp_path)
    recorded = show_json(tmp_path / "ai-sdk.run.jsonl", capsys)
    out = tmp_path / "imported.jsonl"
    assert main(["import", "-q", str(tmp_path / "ai-sdk.otlp.json"), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    assert len(views) == len(recorded) == 6
    assert _conversations(views, set()) == _conversations(recorded, set())


# -- Haystack (its OpenTelemetry tracer) and Semantic Kernel (its log records) --------------------


def test_haystacks_step_spans_are_read_as_openai_chat_calls_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Haystack 3.4.1's Agent step spans name neither the chat generator nor the model asked
    for: each round trip is OpenAI Chat and says so, its model the one that answered (its reply's
    meta), and nothing inferred is a warning (0 findings above info)."""
    views = show_json(imported("haystack", tmp_path), capsys)
    assert len(views) == 6
    for v in views:
        assert any("do not name its chat generator" in n for n in v["notes"]), v["notes"]
        assert v["read"] == "complete" and v["model_requested"] == "gpt-4o-mini"
        assert [f["code"] for f in v["findings"] if f["severity"] != "info"] == []


def test_haystacks_parts_it_cannot_read_are_said_and_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ChatMessage part of a kind the reader does not take (an image) and a second reply are
    named on the round trip, which is ``partial`` and judged on nothing resting on them."""
    doc = orjson.loads((TRACES / "haystack.otlp.json").read_bytes().splitlines()[0])
    span = _spans(doc)[0]
    for kv in span["attributes"]:
        value = orjson.loads(kv["value"]["stringValue"])
        if kv["key"].endswith(".input"):
            value["messages"][1]["content"].append({"image": {"base64_image": "AAAA"}})
        else:
            value["replies"].append(value["replies"][0])
        kv["value"]["stringValue"] = orjson.dumps(value).decode()
    src, out = tmp_path / "cut.otlp.json", tmp_path / "cut.jsonl"
    src.write_bytes(orjson.dumps(doc) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    first = next(v for v in show_json(out, capsys) if v["turn"] == 0 and v["tool_calls"])
    assert first["read"] == "partial", first["unread"]
    said = " ".join(first["unread"])
    assert "'image' part" in said and "output messages 2 to 2" in said, said
    assert [f["code"] for f in first["findings"] if f["severity"] != "info"] == []


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_semantic_kernels_log_records_are_joined_to_its_spans(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Semantic Kernel 1.45.0 logs each message of a call (``gen_ai.*.message``, ``gen_ai.choice``
    events: OpenAI Chat's messages as JSON bodies) to the logs API: joined to its chat span by
    span id, in the same OTLP/JSON file or a protobuf logs file beside the protobuf trace
    (``--logs``), they are the call's messages and answer, the recording's run."""
    out = tmp_path / "sk.jsonl"
    if encoding == "json":
        argv = [str(TRACES / "semantic-kernel.otlp.json")]
    else:
        argv = [str(TRACES / "semantic-kernel.otlp.pb"), "--logs",
                str(TRACES / "semantic-kernel.logs.pb")]  # fmt: skip
    assert main(["import", "-q", *argv, "-o", str(out)]) == 0
    lacks = set(KINDS["semantic-kernel"])
    views, recorded = (
        show_json(out, capsys),
        show_json(TRACES / "semantic-kernel.run.jsonl", capsys),
    )
    assert _conversations(views, lacks) == _conversations(recorded, lacks)
    assert all(v["read"] == "complete" for v in views)


def test_log_records_of_spans_not_in_the_file_are_counted_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log record is joined by trace and span id only: a record naming another trace's span
    is not read into this one, and the import says how many were left."""
    lines = (TRACES / "semantic-kernel.otlp.json").read_bytes().splitlines()
    logs = orjson.loads(lines[1])
    for rl in logs["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for r in sl["logRecords"]:
                r["traceId"] = "0" * 31 + "1"
    src, out = tmp_path / "other.otlp.json", tmp_path / "other.jsonl"
    src.write_bytes(lines[0] + b"\n" + orjson.dumps(logs) + b"\n")
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    assert all(v["read"] == "partial" for v in views)
    assert any("event log records of spans not in the file" in n for n in views[0]["notes"])


def _has_haystack_tracer(python: str | None) -> bool:
    if not python:
        return False
    probe = "import haystack_integrations.tracing.opentelemetry, opentelemetry.exporter.otlp"
    return progress.run([python, "-c", probe], capture_output=True).returncode == 0


@needs_recorder
def test_haystacks_trace_made_live_imports_as_its_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The committed Haystack trace's maker, live: Haystack's Agent run under ``looptap run``
    and traced by its OpenTelemetry tracer at the same time; the import is the recording."""
    python = os.environ.get("LOOPTAP_AGENTS_PYTHON")
    if not _has_haystack_tracer(python):
        pytest.skip("LOOPTAP_AGENTS_PYTHON: .venv-agents with opentelemetry-haystack")
    make("haystack", str(python), tmp_path)
    recorded = show_json(tmp_path / "haystack.run.jsonl", capsys)
    out = tmp_path / "imported.jsonl"
    assert main(["import", "-q", str(tmp_path / "haystack.otlp.json"), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    assert len(views) == len(recorded) == 6
    assert _conversations(views, {"stream"}) == _conversations(recorded, {"stream"})
