"""Makes tests/interop/traces/: the fork tests' weather agent (3 turns: Paris, Lyon, the answer;
openai Chat and anthropic Messages, streamed and not) run once under ``looptap run`` against a
scripted loopback upstream, traced at the same time by a real instrumentation
(tests/interop/traced_agent.py). For each KIND it writes ``KIND.otlp.json`` (the spans the
instrumentation wrote, OTLP/JSON) and ``KIND.run.jsonl`` (looptap's recording of the same run):

    LOOPTAP_PROXY_PYTHON=.venv-proxy/bin/python PYTHONPATH=. .venv/bin/python \\
        tests/interop/make_traces.py --python ENV/bin/python [KIND ...]

ENV holds the instrumentations and SDKs at the versions tests/interop/traces/README.md names
(requirements-traces.txt beside it). Needs no network: the upstream is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.replay.test_fork import origin_route
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env
from tests.support.scripted import ScriptedUpstream

HERE = Path(__file__).parent
#: The APIs the agents call, each pointed at the scripted upstream.
APIS = ("openai", "anthropic", "gemini", "bedrock", "vertex")
OUT = HERE / "traces"
SDK_AGENT = HERE.parent / "replay" / "fork_agent.py"
FRAMEWORKS = HERE / "framework_agents.py"
#: KIND → (instrumentation, the agent it traces: the script and its arguments).
KINDS = {
    # Haystack's OpenTelemetry tracer: its Agent's LLM step spans hold the generator's input and
    # output as JSON, its own ChatMessage format (content on, and off)
    "haystack": ("haystack", [str(FRAMEWORKS), "haystack", "openai", "openai-stream"]),
    "haystack-content-off": ("haystack", [str(FRAMEWORKS), "haystack", "openai"]),
    # LiteLLM's OTel callback: semconv parts with OpenAI's tool_calls / tool_call_id beside them
    "litellm": ("litellm", [str(FRAMEWORKS), "litellm", "openai", "openai-stream"]),
    # Google ADK's own tracing: its default (the conventions' messages), and its schema 1
    # (``call_llm`` spans with its request and response as Gemini's contents, JSON)
    "adk": ("adk", [str(FRAMEWORKS), "adk", "gemini", "gemini-stream"]),
    "adk-legacy": ("adk", [str(FRAMEWORKS), "adk", "gemini", "gemini-stream"]),
    # ADK's LiteLLM model: OpenAI on the wire, its call_llm request still Gemini's shape
    "adk-litellm": ("adk", [str(FRAMEWORKS), "adk", "openai"]),
    "adk-litellm-default": ("adk", [str(FRAMEWORKS), "adk", "openai"]),
    # ADK 1.10.0: call_llm spans alone (its request and response, Gemini's), no generate_content
    "adk1": ("adk", [str(FRAMEWORKS), "adk", "gemini", "gemini-stream"]),
    # Strands Agents (its own tracing), in the latest conventions and in its default events
    "strands": ("strands", [str(FRAMEWORKS), "strands", "openai", "openai-stream"]),
    "strands-default": ("strands", [str(FRAMEWORKS), "strands", "openai", "openai-stream"]),
    # LangSmith's OTel export of its wrapped openai client
    "langsmith": ("langsmith", [str(SDK_AGENT), "openai", "openai-stream"]),
    # its wrap_anthropic rewrites the request (the system prompt as a message), the answer's calls
    # (OpenAI's tool_calls); it does not trace messages.stream()
    "langsmith-anthropic": ("langsmith", [str(SDK_AGENT), "anthropic", "anthropic-stream"]),
    # traceAI keeps no streamed answer: its streamed calls apart (the trace that cannot be read)
    "traceai": ("traceai", [str(SDK_AGENT), "openai"]),
    "traceai-stream": ("traceai", [str(SDK_AGENT), "openai-stream"]),
    # Semantic Kernel: its spans keep no content (it logs the messages to the logs API)
    "semantic-kernel": ("semantic-kernel", [str(FRAMEWORKS), "semantic-kernel", "openai"]),
    # …its diagnostics without the sensitive switch: no message is logged (metadata only)
    "semantic-kernel-metadata": ("semantic-kernel", [str(FRAMEWORKS), "semantic-kernel", "openai"]),
    "logfire": ("logfire", [str(SDK_AGENT)]),
    "mlflow": ("mlflow", [str(SDK_AGENT)]),
    "mlflow-langchain": ("mlflow", [str(FRAMEWORKS), "langchain"]),
    # MLflow's own attributes (mlflow.spanInputs / spanOutputs: the SDK's request and answer)
    # (it does not trace anthropic's messages.stream())
    "mlflow-native": ("mlflow", [str(SDK_AGENT), "openai", "openai-stream", "anthropic"]),
    "langfuse": ("langfuse", [str(SDK_AGENT), "openai", "openai-stream"]),
    # its wrapper of messages.stream breaks anthropic's stream helper (no get_final_message)
    "langtrace": ("langtrace", [str(SDK_AGENT), "openai", "openai-stream", "anthropic"]),
    "agentops": ("agentops", [str(SDK_AGENT)]),
    "logfire-pydantic-ai": ("logfire", [str(FRAMEWORKS), "pydantic-ai"]),
    "openlit": ("openlit", [str(SDK_AGENT)]),
    "openlit-langchain": ("openlit", [str(FRAMEWORKS), "langchain"]),
    "openllmetry": ("openllmetry", [str(SDK_AGENT)]),
    # 0.46's wrapper of messages.stream breaks anthropic 2.x's stream helper: not streamed there
    "openllmetry-legacy": ("openllmetry", [str(SDK_AGENT), "openai", "openai-stream", "anthropic"]),
    "openinference": ("openinference", [str(SDK_AGENT)]),
    "openllmetry-bedrock": ("openllmetry-bedrock", [str(SDK_AGENT), "bedrock", "bedrock-stream"]),
    "openinference-bedrock": (
        "openinference-bedrock",
        [str(SDK_AGENT), "bedrock", "bedrock-stream"],
    ),
    "botocore": ("botocore", [str(SDK_AGENT), "bedrock", "bedrock-stream"]),
    "google-genai": ("google-genai", [str(SDK_AGENT), "gemini", "gemini-stream"]),
    "vertexai": ("vertexai", [str(SDK_AGENT), "vertex"]),  # 2.2b0 traces no stream
    "vertexai-default": ("vertexai", [str(SDK_AGENT), "vertex"]),
    "openai-v2": ("openai-v2", [str(SDK_AGENT), "openai", "openai-stream"]),
    "openinference-langchain": ("openinference-langchain", [str(FRAMEWORKS), "langchain"]),
    "pydantic-ai": ("pydantic-ai", [str(FRAMEWORKS), "pydantic-ai"]),
    "openllmetry-langchain": ("openllmetry-langchain", [str(FRAMEWORKS), "langchain"]),
    "openinference-openai-agents": (
        "openinference-openai-agents",
        [str(FRAMEWORKS), "openai-agents", "openai", "openai-stream"],
    ),
}


#: KIND → (the labels of tests/interop/traced_ai_sdk.js, its TRACE_CONTENT): the Vercel AI SDK's
#: own telemetry on Node (``ai`` and the OTel JS SDK from LOOPTAP_NPM_CLIENTS), generateText and
#: streamText, with the content on and with its inputs or outputs not recorded.
NODE_KINDS = {
    "ai-sdk": (["generate", "stream"], ""),
    "ai-sdk-inputs-off": (["generate", "stream"], "inputs-off"),
    "ai-sdk-outputs-off": (["generate", "stream"], "outputs-off"),
    "ai-sdk-anthropic": (["anthropic-generate", "anthropic-stream"], ""),
}
AI_SDK_AGENT = HERE / "traced_ai_sdk.js"


#: KIND → the environment it is traced in, where not the others' (content on the spans).
SETTINGS = {
    "haystack": {"HAYSTACK_CONTENT_TRACING_ENABLED": "true", "HAYSTACK_TELEMETRY_ENABLED": "False"},
    "haystack-content-off": {"HAYSTACK_TELEMETRY_ENABLED": "False"},
    "litellm": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},  # (else it fetches its price list)
    **{k: {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
       for k in ("adk-legacy", "adk-litellm")},
    "adk-litellm-default": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    # (the endpoint switches the export on; its usage telemetry fetches a config from the
    # internet unless switched off)
    **{k: {"MLFLOW_ENABLE_OTEL_GENAI_SEMCONV": "true", "MLFLOW_ENABLE_OTLP_EXPORTER": "true",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
       for k in ("mlflow", "mlflow-langchain")},
    # MLflow's own attributes: not translated into the conventions
    "mlflow-native": {"MLFLOW_ENABLE_OTLP_EXPORTER": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"},
    # OpenLIT reads the variable as a switch: content on its spans with "true" only
    **{k: {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
       for k in ("openlit", "openlit-langchain")},
    "langtrace": {"LANGTRACE_ERROR_REPORTING": "False"},
    # botocore's messages go to the logs API as events, their content with "true" only
    "botocore": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "strands-default": {"OTEL_SEMCONV_STABILITY_OPT_IN": ""},  # its own content-block events
    "semantic-kernel": {
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS": "true",
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE": "true",
    },
    "semantic-kernel-metadata": {
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS": "true",
    },
    # (its OTel export only: no LangSmith server, its endpoint a closed loopback port)
    **{k: {"LANGSMITH_OTEL_ENABLED": "true", "LANGSMITH_OTEL_ONLY": "true",
           "LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "lsv2-traces",
           "LANGSMITH_ENDPOINT": "http://127.0.0.1:9"}
       for k in ("langsmith", "langsmith-anthropic")},
    # the instrumentation's default conventions: no content on its spans (events carry it)
    "vertexai-default": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    },
}


def _command(kind: str, python: str, trace: Path) -> list[str]:
    if kind in NODE_KINDS:
        return ["node", str(AI_SDK_AGENT), str(trace), *NODE_KINDS[kind][0]]
    instrumentation, agent = KINDS[kind]
    return [python, str(HERE / "traced_agent.py"), instrumentation, str(trace), *agent]


def make(kind: str, python: str, out: Path = OUT) -> None:
    env = clean_env(
        OPENAI_API_KEY="sk-test-traces",
        ANTHROPIC_API_KEY="sk-ant-test-traces",
        GOOGLE_API_KEY="gemini-test-traces",
        AWS_ACCESS_KEY_ID="AKIDTRACES",
        AWS_SECRET_ACCESS_KEY="secret-test-traces",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
    )
    env.update(SETTINGS.get(kind, {}))
    if kind in NODE_KINDS:
        npm = os.environ.get("LOOPTAP_NPM_CLIENTS") or str(HERE.parent.parent / ".npm-clients")
        env.update(NPM_CLIENTS=npm,
                   TRACE_CONTENT=NODE_KINDS[kind][1])  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, ScriptedUpstream(origin_route) as fake:
        t = Path(tmp)
        cmd = _command(kind, python, t / "trace.json")
        proc = progress.run(
            [*RECORDER, "run", "-o", str(t / "run.jsonl"), "--confdir", str(t / "conf"),
             *(f for api in APIS for f in ("--upstream", f"{api}={fake.url}")), "--",
             *cmd],
            env=env, capture_output=True, text=True, cwd=t,
        )  # fmt: skip
        if proc.returncode != 0:
            sys.exit(f"{kind}: the agent failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        out.mkdir(exist_ok=True)
        shutil.copyfile(t / "trace.json", out / f"{kind}.otlp.json")
        if (t / "trace.logs.pb").exists():  # (its log records in protobuf too: both encodings)
            shutil.copyfile(t / "trace.pb", out / f"{kind}.otlp.pb")
            shutil.copyfile(t / "trace.logs.pb", out / f"{kind}.logs.pb")
        shutil.copyfile(t / "run.jsonl", out / f"{kind}.run.jsonl")
    print(f"{kind}: {len(fake.log)} requests → {out / kind}.otlp.json, .run.jsonl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="the environment with the instrumentations")
    ap.add_argument("kinds", nargs="*", default=[*KINDS, *NODE_KINDS])
    args = ap.parse_args()
    for kind in args.kinds:
        make(kind, args.python)


if __name__ == "__main__":
    main()
