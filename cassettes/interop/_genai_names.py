"""The span attributes ``export --otel`` writes and ``import`` reads back, named once: the GenAI
semantic conventions' (``gen_ai.*``), the HTTP client's, OpenInference's invocation parameters and
looptap's own, each with the other names an instrumentation writes the same thing under (read
after the first). The export writes the first name of each row; the import reads them in order.
"""

from __future__ import annotations

__all__ = [
    "AGENT_UNNAMED",
    "ERROR_CODE",
    "ERROR_MESSAGE",
    "ERROR_TYPE",
    "FAMILY",
    "FINISH_CLASS",
    "FINISH_REASONS",
    "INPUT_MESSAGES",
    "INVOCATION_PARAMETERS",
    "OPERATION",
    "OPERATIONS",
    "OPERATION_OWN",
    "OUTPUT_MESSAGES",
    "PROVIDER",
    "REQUEST_MODEL",
    "REQUEST_PARAMETER",
    "REQUEST_PARAMETERS",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "SERVER_ADDRESS",
    "SERVICE_NAME",
    "STATUS_CODE",
    "STREAM",
    "SYSTEM_INSTRUCTIONS",
    "TIMING",
    "TOOL_DEFINITIONS",
    "URL",
    "USAGE",
    "USAGE_FIELDS",
]  # fmt: skip

OPERATION = "gen_ai.operation.name"
#: looptap's own name of the round trip's operation, where the GenAI one says less (``embed``,
#: ``image``, ``speech`` … beside ``embeddings`` and ``generate_content``).
OPERATION_OWN = "looptap.operation"
#: looptap's operations whose GenAI name is the same in every family (the rest of a family's model
#: calls are its profile's ``otel_operation``).
OPERATIONS = {"embed": "embeddings"}
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
#: A sampling parameter (``max_tokens``, ``temperature`` …: the keys of ``REQUEST_FIELDS``).
REQUEST_PARAMETER = "gen_ai.request.{}"
STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
#: The content (JSON strings of semconv messages and parts), unless the export leaves it out.
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
#: The request's own parameters as sent (JSON: everything but the model, the history and the
#: tools, ``tool_choice`` among them), where the semconv keeps only the sampling ones.
INVOCATION_PARAMETERS = "llm.invocation_parameters"
#: The same, flattened under the conventions' prefix (traceAI).
REQUEST_PARAMETERS = "gen_ai.request.parameters"
URL = "url.full"
SERVER_ADDRESS = "server.address"
STATUS_CODE = "http.response.status_code"
#: The API's error message as it said it (the span status' message adds where it came from).
ERROR_MESSAGE = "looptap.error.message"
ERROR_TYPE = "looptap.error.type"
ERROR_CODE = "looptap.error.code"
FAMILY = "looptap.family"
#: The finish's normalised class (``cassettes.models.FinishReason``).
FINISH_CLASS = "looptap.finish_reason"
#: ``synthetic`` when the span's times were laid out by the export (a recording without them).
TIMING = "looptap.timing"
SERVICE_NAME = "service.name"
#: The OTel SDKs' spelling of a service nobody named (``unknown_service:EXECUTABLE``): the
#: export's for a run that names no agent, which the import reads as no name.
AGENT_UNNAMED = "unknown_service:looptap"

#: The usage counts: the key a rebuilt call keeps each under (``providers.Call.usage``), the
#: :class:`~cassettes.models.Usage` field it comes from, and its attributes (the semconv's first,
#: then OpenInference's and older openllmetry's).
USAGE_FIELDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("input_tokens", "input_tokens", (
        "gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.usage.prompt_tokens",
    )),
    ("output_tokens", "output_tokens", (
        "gen_ai.usage.output_tokens", "llm.token_count.completion",
        "gen_ai.usage.completion_tokens",
    )),
    ("cache_read", "cache_read_tokens", (
        "gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read",
        "gen_ai.usage.cache_read_input_tokens",
    )),
    ("cache_write", "cache_write_tokens", (
        "gen_ai.usage.cache_creation.input_tokens", "llm.token_count.prompt_details.cache_write",
        "gen_ai.usage.cache_creation_input_tokens",
    )),
    ("reasoning", "reasoning_tokens", (
        "gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning",
    )),
)  # fmt: skip
#: A call's usage key → its attributes, in the order they are read.
USAGE = {key: names for key, _field, names in USAGE_FIELDS}
