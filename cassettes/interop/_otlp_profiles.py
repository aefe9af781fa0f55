"""Instrumentations as data: one :class:`Instrumentation` row per instrumentation and version
range, told by its spans' instrumentation scope, saying what of its spans is the agent's request
as sent and what the instrumentation made up (its defaults, its re-orderings, what it leaves out).
The import (:mod:`._otlp_in`) reads every span by the GenAI conventions (and OpenInference's or
openllmetry's older attributes where the span has them) and asks the span's row only where an
instrumentation departs from them. A span of a scope no row names is read by the conventions with
every field they leave uncertain marked inferred (:data:`UNPROFILED`), and the import says so once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PROFILES", "UNPROFILED", "Bodies", "Instrumentation", "OwnAttributes", "profile_of"]


@dataclass(frozen=True)
class Bodies:
    """An instrumentation that keeps the request and the answer in the API's own shapes (JSON
    attributes), outside the GenAI conventions: which span is a call, and where each part is."""

    #: (attribute, value) of a span that is a model call (the value, or its JSON string).
    call: tuple[str, str]
    #: The request (``messages``, ``tools`` …) as the SDK was given it.
    request: str
    #: The answer's message, or the API's whole answer holding it at :attr:`message_at`.
    answer: str
    model: str
    #: The usage, as the API reported it (``prompt_tokens`` … or ``input`` …).
    usage: str
    finish: str = ""
    #: Where the message is in a whole answer (OpenAI Chat's ``choices[0].message``); an answer
    #: that is the message itself (Anthropic's) is read as it is.
    message_at: tuple[str | int, ...] = ()
    #: (event name prefix, attribute) of the span events that keep a streamed answer's chunks as
    #: the API sent them: the answer is reassembled from them (by the family's provider), not
    #: taken from :attr:`answer`.
    chunks: tuple[str, str] | None = None
    #: The request is the SDK call's arguments as given: no ``stream``, not streamed (the flag
    #: is taken, not inferred).
    says_stream: bool = False


@dataclass(frozen=True)
class OwnAttributes:
    """An instrumentation that writes a call's content under its own attribute names, in its own
    message format (the Vercel AI SDK's ``ai.*``, read by :mod:`._otlp_aisdk`): where each is."""

    #: The attribute that names a span's operation, and its values that are a model call.
    operation: str
    calls: tuple[str, ...]
    #: The operations among them that stream.
    streamed: tuple[str, ...]
    #: The provider the call went to (its own id), and those it reads: id → the conventions'
    #: ``gen_ai.provider.name`` (a provider not here: its content is said unread).
    provider: str
    providers: dict[str, str] = field(hash=False)
    messages: str
    tools: str
    text: str
    tool_calls: str
    reasoning: str
    #: Its own finish reasons, by the provider they are put back for: its reason → the API's.
    finishes: dict[str, dict[str, str]] = field(default_factory=dict, hash=False)
    #: By provider, what of the request its spans do not keep (the provider's own defaults:
    #: Anthropic's ``max_tokens``, ``tool_choice``, a field it adds to each tool), marked inferred.
    inferred: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Instrumentation:
    """What one instrumentation writes, where it departs from the conventions."""

    #: How the import names it.
    name: str
    #: Its scope names (a scope that starts with one of them is its).
    scopes: tuple[str, ...]
    #: The versions this row was made from (tests/interop/traces/README.md).
    versions: str = ""
    #: Its spans carry the stream flag of every call (absent: not streamed): never inferred.
    says_stream: bool = False
    #: Its stream flag is a setting of the model object, not of the call (LangChain's
    #: ``streaming``): a ``false`` is not evidence (``.stream()`` streams with it false).
    stream_flag_is_a_setting: bool = False
    #: (attribute, prefix): a span whose attribute starts so carries a streamed call's answer, its
    #: request on the span before it (Logfire's ``streaming response from … took …`` log).
    stream_span: tuple[str, str] | None = None
    #: ``gen_ai.request.*`` values it writes for a parameter the agent did not send: such a value
    #: is not put in the request (``params`` stays inferred: a parameter not kept is no miss).
    defaults: dict[str, Any] = field(default_factory=dict, hash=False)
    #: It leaves the assistant's tool-call messages out of a history that has their results (an
    #: API may let a client do so, OpenAI Responses' ``previous_response_id``: only an
    #: instrumentation known for it gets them back).
    drops_tool_call_messages: bool = False
    #: Providers whose streamed answers' token counts it makes itself (the API sent none): not
    #: kept as the API's usage.
    counts_stream_usage: tuple[str, ...] = ()
    #: Its spans keep the API's own request and answer (Langfuse): read as a trajectory's. A span
    #: of its scope without them (MLflow's translation into the conventions) is read as one of
    #: an instrumentation without a profile.
    bodies: Bodies | None = None
    #: The ``gen_ai.provider.name`` its spans mean when they name none.
    provider: str | None = None
    #: Where OpenAI's ``strict`` of each function tool is (pydantic-ai's request parameters).
    strict_attribute: str | None = None
    #: It writes each Anthropic ``tool_use`` block also as a text part, its JSON (a part that
    #: repeats a tool call of the same message is left out).
    tool_use_as_text: bool = False
    #: Its content under its own names, in its own format (the Vercel AI SDK).
    own: OwnAttributes | None = None


PROFILES: tuple[Instrumentation, ...] = (
    Instrumentation("openllmetry", ("opentelemetry.instrumentation.openai",
                    "opentelemetry.instrumentation.anthropic"), "0.46.2, 0.62.4", says_stream=True),
    Instrumentation("openllmetry LangChain", ("opentelemetry.instrumentation.langchain",),
                    "0.62.4", tool_use_as_text=True),
    Instrumentation("openllmetry Bedrock", ("opentelemetry.instrumentation.bedrock",), "0.62.4"),
    Instrumentation("openinference", ("openinference.instrumentation.openai",
                    "openinference.instrumentation.anthropic",
                    "openinference.instrumentation.bedrock"), "0.1.66, 3.1.0, 0.1.61",
                    says_stream=True),
    Instrumentation("openinference LangChain", ("openinference.instrumentation.langchain",),
                    "0.1.80", stream_flag_is_a_setting=True),
    Instrumentation("openinference openai-agents",
                    ("openinference.instrumentation.openai_agents",), "2.6.0"),
    Instrumentation("pydantic-ai", ("pydantic-ai",), "2.68.0",
                    strict_attribute="model_request_parameters"),
    Instrumentation("the anthropic SDK's own spans", ("com.anthropic.sdk.python",), "2.14.0",
                    says_stream=True),
    Instrumentation("OTel contrib openai-v2", ("opentelemetry.instrumentation.openai_v2",
                    "opentelemetry.util.genai"), "2.4b0"),
    Instrumentation("OTel contrib google-genai",
                    ("opentelemetry.instrumentation.google_genai",), "1.3b0"),
    Instrumentation("OTel contrib vertexai", ("opentelemetry.instrumentation.vertexai",),
                    "2.2b0", provider="gcp.vertex_ai"),
    Instrumentation("OTel contrib botocore", ("opentelemetry.instrumentation.botocore",),
                    "0.66b2"),
    Instrumentation("Logfire", ("logfire.openai", "logfire.anthropic"), "5.4.0",
                    says_stream=True, stream_span=("logfire.msg_template", "streaming response")),
    Instrumentation("OpenLIT", ("openlit",), "1.45.0", counts_stream_usage=("openai",),
                    drops_tool_call_messages=True,
                    defaults={"temperature": (1.0, 1), "top_p": (1.0, 1), "top_k": (1.0, 1, -1),
                              "seed": ("", -1, 0), "stop_sequences": ([], "", ("",)),
                              "frequency_penalty": (0.0, 0), "presence_penalty": (0.0, 0),
                              "max_tokens": (-1,)}),
    Instrumentation("Langfuse", ("langfuse-sdk",), "5.0.4 (langfuse.openai)", bodies=Bodies(
        ("langfuse.observation.type", "generation"), "langfuse.observation.input",
        "langfuse.observation.output", "langfuse.observation.model.name",
        "langfuse.observation.usage_details", "langfuse.observation.metadata.finish_reason")),
    # its own attributes, not its translation into the conventions (MLFLOW_ENABLE_OTEL_GENAI_
    # SEMCONV), which loses a streamed answer's tool calls: the SDK call's arguments as given
    # (`stream` among them), its answer object, a stream's chunks as events
    Instrumentation("MLflow Tracing", ("mlflow.tracing.provider",), "3.17.2 (autolog)",
                    bodies=Bodies(
        ("mlflow.spanType", "CHAT_MODEL"), "mlflow.spanInputs", "mlflow.spanOutputs",
        "mlflow.llm.model", "mlflow.chat.tokenUsage", message_at=("choices", 0, "message"),
        chunks=("mlflow.chunk.item.", "mlflow.chunk.value"), says_stream=True)),
    # its own tracing: content in its events (its own Converse content blocks by default), the
    # tools on its agent span (names) and tool spans (schemas), no stream flag
    Instrumentation("Strands Agents", ("strands.telemetry.tracer",), "1.62.0"),
    # `gen_ai.span.kind` and the messages flattened under the conventions' names; the request's
    # parameters as sent (`gen_ai.request.parameters`, `stream` among them)
    Instrumentation("traceAI", ("traceai_openai",), "0.1.10 (traceai-openai)"),
    # its OTel export of its wrapped clients: the SDK call's arguments as given and its answer
    Instrumentation("LangSmith", ("langsmith",), "0.15.1 (wrap_openai)", bodies=Bodies(
        ("langsmith.span.kind", "llm"), "gen_ai.prompt", "gen_ai.completion",
        "gen_ai.request.model", "langsmith.metadata.usage_metadata",
        "gen_ai.response.finish_reasons", message_at=("choices", 0, "message"),
        says_stream=True)),
    # its model diagnostics: no content on its spans (the messages go to the logs API); its
    # finish reason the SDK's enum, `gen_ai.response.finish_reason`
    Instrumentation("Semantic Kernel", ("semantic_kernel",), "1.45.0"),
    # its OTel callback: the conventions' parts with OpenAI's `tool_calls` / `tool_call_id` beside
    # them, an answer's calls as `gen_ai.completion.N.function_call.*` (no ids); the stream flag on
    # a streamed call only; a stream's usage its own count when the API sent none (not kept)
    Instrumentation("LiteLLM", ("litellm",), "1.110.2 (its OTel callback)", says_stream=True,
                    counts_stream_usage=("openai",)),
    # Google ADK's own tracing (its Gemini model): the conventions' messages on its
    # `generate_content` spans, no stream flag, no provider named under its telemetry schema 1
    Instrumentation("Google ADK", ("gcp.vertex.agent",), "2.13.0", provider="gcp.gemini"),
    # its own telemetry (`experimental_telemetry`): a call's content under `ai.prompt.*` /
    # `ai.response.*` in its own message format, its finish reasons its own (`tool-calls`); its
    # OpenAI Chat and Anthropic models read, its other providers said unread
    Instrumentation("the Vercel AI SDK", ("ai",),
                    "6.0.325 (@ai-sdk/openai 3.0.141, @ai-sdk/anthropic 3.0.140)",
                    says_stream=True, own=OwnAttributes(
        "ai.operationId", ("ai.generateText.doGenerate", "ai.streamText.doStream"),
        ("ai.streamText.doStream",), "ai.model.provider",
        {"openai.chat": "openai", "anthropic.messages": "anthropic"},
        "ai.prompt.messages", "ai.prompt.tools", "ai.response.text", "ai.response.toolCalls",
        "ai.response.reasoning",
        # (Anthropic's stop_sequence is its `stop` too: rebuilt as end_turn, the same class)
        {"openai": {"tool-calls": "tool_calls", "content-filter": "content_filter"},
         "anthropic": {"stop": "end_turn", "tool-calls": "tool_use", "length": "max_tokens"}},
        {"anthropic": ("max_tokens", "params", "tool schemas")})),
    # its OpenTelemetry tracer (opentelemetry-haystack) with content tracing on: a call's input
    # and output as JSON in its own ChatMessage format (read by _otlp_haystack); no model asked
    # for, no stream flag, no parameters set when its generator was made
    Instrumentation("Haystack", ("haystack",), "3.4.1 (opentelemetry-haystack 2.0.0)"),
    Instrumentation("looptap's own export", ("looptap",), says_stream=True),
)  # fmt: skip

#: What reads a span of a scope no row names: the conventions alone, every uncertain field inferred.
UNPROFILED = Instrumentation("an instrumentation looptap has no profile of", ())


def profile_of(scope: Any) -> Instrumentation:
    """The row of the instrumentation whose scope ``scope`` is (:data:`UNPROFILED`: none)."""
    name = scope if isinstance(scope, str) else ""
    return next(
        (p for p in PROFILES if any(name == s or name.startswith(s + ".") for s in p.scopes)),
        UNPROFILED,
    )
