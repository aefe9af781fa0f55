"""An agent run traced by a real instrumentation, its spans written at exit as one OTLP/JSON
``ExportTraceServiceRequest`` line (hex ids, as the OTLP file exporter writes them) and as OTLP
protobuf beside it (``OUT.pb``); for an instrumentation that sends content to the logs API
(:data:`LOGGING`), its log records as a second line, an ``ExportLogsServiceRequest`` (and
``OUT.logs.pb``), from Python logging through the OTel SDK's ``LoggingHandler``:

    python traced_agent.py KIND OUT.json [AGENT.py] [the agent's arguments …]

AGENT.py defaults to tests/why/why_agent.py. KIND names the instrumentation (:data:`KINDS`); the
tracer provider is also made the global one, as an application sets it up, so that an SDK that
traces its own calls (anthropic 2.x, scope ``com.anthropic.sdk.python``) writes its spans too.
tests/interop/make_traces.py runs this under ``looptap run`` to make tests/interop/traces/.
"""

from __future__ import annotations

import atexit
import base64
import json
import runpy
import sys
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

AGENT = Path(__file__).resolve().parents[1] / "why" / "why_agent.py"
#: The processor that keeps the spans, for an instrumentation that makes its own tracer provider.
PROCESSORS: list[SimpleSpanProcessor] = []
EXPORTER: list[InMemorySpanExporter] = []


def _hex_ids(v: Any) -> Any:
    """protobuf's JSON form spells bytes in base64; OTLP/JSON spells ids in hex."""
    if isinstance(v, dict):
        return {
            k: base64.b64decode(x).hex()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(x, str)
            else _hex_ids(x)
            for k, x in v.items()
        }
    return [_hex_ids(x) for x in v] if isinstance(v, list) else v


def _openai_v2(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)


def _openinference(provider: TracerProvider) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)
    try:
        from openinference.instrumentation.anthropic import AnthropicInstrumentor
    except ImportError:  # the why tests' environment has the openai one only
        return
    AnthropicInstrumentor().instrument(tracer_provider=provider)


def _openllmetry(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)
    AnthropicInstrumentor().instrument(tracer_provider=provider)


def _langchain(provider: TracerProvider) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider)


def _pydantic_ai(provider: TracerProvider) -> None:
    from pydantic_ai import Agent, InstrumentationSettings

    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))


def _openai_agents(provider: TracerProvider) -> None:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)  # its processor alone


def _openllmetry_langchain(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    LangchainInstrumentor().instrument(tracer_provider=provider)


def _google_genai(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    GoogleGenAiSdkInstrumentor().instrument(tracer_provider=provider)


def _vertexai(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.vertexai import VertexAIInstrumentor

    VertexAIInstrumentor().instrument(tracer_provider=provider)


def _openllmetry_bedrock(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.bedrock import BedrockInstrumentor

    BedrockInstrumentor().instrument(tracer_provider=provider)


def _openinference_bedrock(provider: TracerProvider) -> None:
    from openinference.instrumentation.bedrock import BedrockInstrumentor

    BedrockInstrumentor().instrument(tracer_provider=provider)


def _botocore(provider: TracerProvider) -> None:
    """OTel contrib botocore: its messages go to the logs API (the global logger provider,
    :func:`_logs`), its spans keep the metadata."""
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor

    BotocoreInstrumentor().instrument(tracer_provider=provider)


def _logfire(provider: TracerProvider) -> None:
    """Logfire's own SDK: its tracer provider, exporting to this file only (no account)."""
    import logfire

    logfire.configure(
        send_to_logfire=False, console=False, service_name="weather-agent",
        additional_span_processors=list(PROCESSORS),
    )  # fmt: skip
    logfire.instrument_openai()
    logfire.instrument_anthropic()
    logfire.instrument_pydantic_ai()


def _openlit(provider: TracerProvider) -> None:
    import openlit

    openlit.init(service_name="weather-agent", disable_metrics=True, disable_batch=True)
    own = trace.get_tracer_provider()
    if own is not provider and isinstance(own, TracerProvider):  # it made its own
        own.add_span_processor(PROCESSORS[0])


def _mlflow(provider: TracerProvider) -> None:
    """MLflow Tracing's OTLP export, in the GenAI conventions (MLFLOW_ENABLE_OTEL_GENAI_SEMCONV),
    its exporter this file's (no collector)."""
    import mlflow
    import mlflow.tracing.provider as mlflow_provider

    mlflow_provider.get_otlp_exporter = lambda: EXPORTER[0]  # (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    mlflow.openai.autolog()
    mlflow.anthropic.autolog()
    mlflow.langchain.autolog()
    # its batch processor flushed before the file is written (atexit: last in, first run)
    atexit.register(lambda: mlflow_provider.provider.get().force_flush())


def _langfuse(provider: TracerProvider) -> None:
    """Langfuse's OTel-based SDK on the application's tracer provider; its own export goes to
    a throwaway exporter (no Langfuse server)."""
    from langfuse import Langfuse

    Langfuse(public_key="pk-lf-traces", secret_key="sk-lf-traces", host="http://127.0.0.1:9",
             tracer_provider=provider, span_exporter=InMemorySpanExporter())  # fmt: skip
    import langfuse.openai  # noqa: F401  (its drop-in wraps the openai SDK's calls)


def _langtrace(provider: TracerProvider) -> None:
    """Langtrace's SDK: its instrumentations trace on the global tracer provider (this file's);
    its own provider's export goes to a throwaway exporter (a host of its own: without one
    it wants an API key), its error reports and its check for
    a newer release (both to the internet) off."""
    import langtrace_python_sdk.langtrace as langtrace
    import langtrace_python_sdk.utils.llm as llm

    langtrace.check_if_sdk_is_outdated = lambda: None
    # a streamed answer without usage is counted with tiktoken's encoding, which it downloads:
    # offline, its own word count (what it falls back on for a prompt)
    llm.estimate_tokens_using_tiktoken = lambda text, _encoding: llm.estimate_tokens(text)
    langtrace.init(custom_remote_exporter=InMemorySpanExporter(), batch=False,
                   api_host="http://127.0.0.1:9", service_name="weather-agent")  # fmt: skip


def _agentops(provider: TracerProvider) -> None:
    """AgentOps' SDK with no API key (no sign-in), its instrumentations on its own tracer
    provider, which gets this file's processor too; its own exports go to a closed loopback
    port."""
    import agentops
    from agentops.sdk.core import tracer

    agentops.init(exporter_endpoint="http://127.0.0.1:9/v1/traces", auto_start_session=False,
                  endpoint="http://127.0.0.1:9", app_url="http://127.0.0.1:9",
                  env_data_opt_out=True)  # fmt: skip
    if tracer.provider is not None and tracer.provider is not provider:
        tracer.provider.add_span_processor(PROCESSORS[0])


def _strands(provider: TracerProvider) -> None:
    """Strands Agents' native tracing: its tracer is the global provider's (set above)."""


def _langsmith(provider: TracerProvider) -> None:
    """LangSmith's OTel export (``LANGSMITH_OTEL_ENABLED``, ``LANGSMITH_OTEL_ONLY``: no LangSmith
    server) of its wrapped clients (``wrap_openai``, ``wrap_anthropic``), on this file's provider;
    its background runs flushed before the file is written."""
    import anthropic
    import openai
    from langsmith import Client
    from langsmith.run_trees import get_cached_client
    from langsmith.wrappers import wrap_anthropic, wrap_openai

    wrapped = ((openai, "OpenAI", wrap_openai), (anthropic, "Anthropic", wrap_anthropic))
    for mod, cls, wrap in wrapped:
        original = getattr(mod, cls)
        setattr(mod, cls, lambda *a, _o=original, _w=wrap, **k: _w(_o(*a, **k)))
    assert Client  # (its client is made on first use)
    atexit.register(lambda: get_cached_client().flush())


def _semantic_kernel(provider: TracerProvider) -> None:
    """Semantic Kernel's model diagnostics: its tracer is the global provider's (set above)."""


def _traceai(provider: TracerProvider) -> None:
    from traceai_openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)


def _litellm(provider: TracerProvider) -> None:
    """LiteLLM's OTel callback on this file's provider (its content in the spans: the
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` make_traces sets)."""
    import litellm
    from litellm.integrations.opentelemetry import OpenTelemetry

    litellm.callbacks = [OpenTelemetry(tracer_provider=provider)]


def _haystack(provider: TracerProvider) -> None:
    """Haystack's OpenTelemetry tracer (opentelemetry-haystack, as its ``OpenTelemetryConnector``
    sets it up: scope ``haystack``); its content with ``HAYSTACK_CONTENT_TRACING_ENABLED``."""
    from haystack import tracing
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))


def _adk(provider: TracerProvider) -> None:
    """Google ADK's own tracing: its tracer is the global provider's (set above)."""


#: The instrumentations that send a call's messages to the logs API, and the Python logger they
#: log to (``""``: they write to the OTel logs API itself, no Python logging).
LOGGING = {"semantic-kernel": "semantic_kernel", "botocore": ""}


def _logs(kind: str) -> Any:
    """The OTel SDK's logs pipeline for ``kind``, as an application sets it up (a handler on the
    root logger, filtered to the library's logger), its records kept in memory."""
    import logging

    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    set_logger_provider(provider)
    if not LOGGING[kind]:
        return exporter
    handler = LoggingHandler(level=logging.INFO, logger_provider=provider)
    handler.addFilter(logging.Filter(LOGGING[kind]))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    return exporter


KINDS = {
    "haystack": _haystack,
    "litellm": _litellm,
    "adk": _adk,
    "strands": _strands,
    "langsmith": _langsmith,
    "traceai": _traceai,
    "semantic-kernel": _semantic_kernel,
    "agentops": _agentops,
    "langtrace": _langtrace,
    "mlflow": _mlflow,
    "langfuse": _langfuse,
    "logfire": _logfire,
    "openlit": _openlit,
    "openllmetry-bedrock": _openllmetry_bedrock,
    "openinference-bedrock": _openinference_bedrock,
    "botocore": _botocore,
    "google-genai": _google_genai,
    "vertexai": _vertexai,
    "openllmetry-langchain": _openllmetry_langchain,
    "openinference-openai-agents": _openai_agents,
    "openai-v2": _openai_v2,
    "openinference": _openinference,
    "openllmetry": _openllmetry,
    "openinference-langchain": _langchain,
    "pydantic-ai": _pydantic_ai,
}


def main() -> None:
    kind, out = sys.argv[1], Path(sys.argv[2])
    agent, args = AGENT, sys.argv[3:]
    if args and args[0].endswith(".py"):
        agent, args = Path(args[0]), args[1:]
    exporter = InMemorySpanExporter()
    EXPORTER.append(exporter)
    provider = TracerProvider()
    PROCESSORS.append(SimpleSpanProcessor(exporter))
    provider.add_span_processor(PROCESSORS[0])
    trace.set_tracer_provider(provider)
    logs = _logs(kind) if kind in LOGGING else None
    KINDS[kind](provider)

    def write() -> None:
        from google.protobuf.json_format import MessageToDict

        req = encode_spans(exporter.get_finished_spans())
        out.with_suffix(".pb").write_bytes(req.SerializeToString())
        lines = [json.dumps(_hex_ids(MessageToDict(req)))]
        if logs is not None:
            from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

            said = encode_logs(logs.get_finished_logs())
            out.with_suffix(".logs.pb").write_bytes(said.SerializeToString())
            lines.append(json.dumps(_hex_ids(MessageToDict(said))))
        out.write_text("".join(line + "\n" for line in lines))

    atexit.register(write)
    sys.argv = [str(agent), *args]
    runpy.run_path(str(agent), run_name="__main__")


if __name__ == "__main__":
    main()
