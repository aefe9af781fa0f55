"""An API family's profile: its constants and capabilities, as data the shared code reads.

One frozen :class:`Profile` per adapter (``Provider.profile``), beside parsing (the adapter's own
methods) and replay's shapes (``Provider.replay``, :mod:`cassettes.providers._replay`):

* what the API demands of a client's tool loop (pairing errors, results in one message, a
  tool-result error flag): read by the C-layer checks;
* how a call is looked up in genai-prices (cost columns);
* OpenTelemetry GenAI names (``looptap export --otel``) and how a trace's chat turn is rebuilt
  (``import``);
* what replay matching ignores or takes as the same request (volatile fields, defaults, the
  headers it compares) and the variables the API's SDKs read their key from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..models import FinishReason, NormalisedResponse, Usage

if TYPE_CHECKING:
    from ._rebuild_shape import RebuildShape
    from ._result_groups import ResultGroups

#: Hosts (glob patterns, first match wins) → OpenTelemetry GenAI ``gen_ai.provider.name`` (the
#: semconv well-known values). A family's format served elsewhere (a local server, a gateway) is
#: named after the family (``Profile.otel_provider``).
OTEL_PROVIDER_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    ("*.openai.azure.com", "azure.ai.openai"),
    ("*.cognitiveservices.azure.com", "azure.ai.openai"),
    ("*.services.ai.azure.com", "azure.ai.inference"),
    ("*.models.ai.azure.com", "azure.ai.inference"),
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("*-aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("aiplatform.*.rep.googleapis.com", "gcp.vertex_ai"),
    ("bedrock-runtime.*.amazonaws.com", "aws.bedrock"),
    ("bedrock-agent-runtime.*.amazonaws.com", "aws.bedrock"),
    ("bedrock-mantle.*.api.aws", "aws.bedrock"),
    ("api.groq.com", "groq"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.deepseek.com", "deepseek"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.com", "cohere"),
    ("api.cohere.ai", "cohere"),
    ("api.writer.com", "writer"),
)


__all__ = [
    "FREE_FORM_FIELDS",
    "REQUEST_FIELDS",
    "SETTINGS",
    "THINKING_FIELDS",
    "Profile",
    "asks_to_think",
    "request_field",
    "request_places",
    "usage_keys",
]


def usage_keys(usage: Usage) -> dict[str, int]:
    """``usage`` as genai-prices usage keys. Both use the inclusive convention: genai-prices'
    ``input_tokens`` counts cache reads and writes, its ``output_tokens`` counts reasoning."""
    pairs = (
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        ("cache_read_tokens", usage.cache_read_tokens),
        ("cache_write_tokens", usage.cache_write_tokens),
        ("output_reasoning_tokens", usage.reasoning_tokens),
    )
    return {key: v for key, v in pairs if v is not None and v >= 0}


#: Fields whose value is the caller's own data in most APIs (tool schemas, a tool call's input, a
#: function's response, metadata): :attr:`Profile.free_form_fields` unless a family adds its own.
FREE_FORM_FIELDS = frozenset(
    {
        "parameters",
        "input_schema",
        "schema",
        "json_schema",
        "arguments",
        "args",
        "response",
        "metadata",
    }
)


#: What a request sets (by its ``gen_ai.request.*`` name) → the fields every API family says it
#: with (docs/WIRE.md), first the likeliest: the one table the live rewrite (``max_tokens=N``), the
#: analysis (the cap a truncated answer hit) and the OTel export read.
REQUEST_FIELDS: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "top_p": ("top_p", "topP"),
    "top_k": ("top_k", "topK"),
    "frequency_penalty": ("frequency_penalty", "frequencyPenalty"),
    "presence_penalty": ("presence_penalty", "presencePenalty"),
    "max_tokens": (
        "max_tokens",  # OpenAI Chat (older), Anthropic, Cohere, Mistral, Writer, Replicate's LLMs
        "max_completion_tokens",  # OpenAI Chat
        "max_output_tokens",  # OpenAI Responses
        "maxOutputTokens",  # Gemini's generationConfig
        "maxTokens",  # Bedrock Converse's inferenceConfig
        "num_predict",  # Ollama's options
        "max_new_tokens",  # TGI's and watsonx.ai's parameters
        "maximum_tokens",  # Aleph Alpha
        "max_tokens_to_sample",  # Anthropic Text Completions
        "maxTokenCount",  # Amazon Titan's textGenerationConfig
        "max_gen_len",  # Meta Llama on Bedrock
    ),
    "seed": ("seed",),
    "choice.count": ("n", "candidateCount"),
    "stop_sequences": ("stop", "stop_sequences", "stopSequences"),
}
#: The objects of generation settings those fields sit in on some wires (the top level first).
SETTINGS = (
    "generationConfig",
    "generation_config",
    "options",
    "inferenceConfig",
    "parameters",
    "textGenerationConfig",
    "input",
)


def request_places(body: Any, name: str) -> list[tuple[dict[str, Any], tuple[str, ...], str]]:
    """Where ``body`` (a request as sent, or its ``params``) sets ``name`` (a key of
    :data:`REQUEST_FIELDS`): each (object, its path, the field), the top level first, then the
    :data:`SETTINGS` objects, each in the table's order."""
    if not isinstance(body, dict):
        return []
    objects = [(body, ())] + [(body[k], (k,)) for k in SETTINGS if isinstance(body.get(k), dict)]
    return [(o, at, f) for o, at in objects for f in REQUEST_FIELDS[name] if o.get(f) is not None]


def request_field(body: Any, name: str) -> tuple[str, Any] | None:
    """The first of :func:`request_places`: the field's dotted path and its value."""
    places = request_places(body, name)
    return (".".join((*places[0][1], places[0][2])), places[0][0][places[0][2]]) if places else None


#: The request fields that ask the model to think before it answers (docs/WIRE.md's "Thinking"
#: and "Reasoning control" rows: Anthropic's and Z.ai's ``thinking``, Gemini's ``thinkingConfig``,
#: OpenAI Responses' ``reasoning``, Chat's ``reasoning_effort``, Ollama's ``think``), looked for at
#: the top level, in the :data:`SETTINGS` objects and in Bedrock's ``additionalModelRequestFields``;
#: the values that turn it off; and, of a field's object, the keys that say on or off (an object
#: with none of them, ``{"summary": "auto"}``, says nothing: not asked).
THINKING_FIELDS = ("thinking", "thinkingConfig", "thinking_config", "reasoning", "reasoning_effort",
                   "reasoning_config", "think")  # fmt: skip
_THINKING_OFF = frozenset({"none", "disabled", "off", "false", "0"})
_THINKING_SAYS = ("type", "effort", "enabled", "thinkingBudget", "thinking_budget", "budget_tokens",
                  "thinkingLevel", "thinking_level", "max_tokens")  # fmt: skip


def _thinking_on(value: Any) -> bool:
    if isinstance(value, dict):
        said = [value[k] for k in _THINKING_SAYS if value.get(k) is not None]
        return bool(said) and all(_thinking_on(v) for v in said)
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, (int, float)):
        return value != 0  # a budget: 0 is off, -1 (Gemini's dynamic) on
    return isinstance(value, str) and value.strip().lower() not in _THINKING_OFF


def asks_to_think(params: Any) -> bool:
    """Whether a request (its body as sent, or its ``params``) asks the model to think before it
    answers: one of :data:`THINKING_FIELDS` set, and not to off."""
    if not isinstance(params, dict):
        return False
    places = [params, *(params.get(k) for k in (*SETTINGS, "additionalModelRequestFields"))]
    return any(
        _thinking_on(o[f]) for o in places if isinstance(o, dict) for f in THINKING_FIELDS if f in o
    )


@dataclass(frozen=True)
class Profile:
    """What one API family's wire is and demands, as data (the defaults: an API that says none of
    it)."""

    #: The API's raw finish reasons → their class (WIRE.md §G.1;
    #: :func:`~cassettes.providers._values.finish_lookup`: a value not here is ``other``).
    finishes: dict[str, FinishReason] = field(default_factory=dict, hash=False)

    #: What proves a stream of this family ended whole (its terminal evidence): the terminator
    #: or the final chunk that says so. A stream without it is truncated; a missing terminator
    #: alone is not, where the family's finish reason is its evidence. Listed in docs/coverage.md.
    stream_end: str = ""

    # -- what the API demands of the client's dispatch (WIRE.md §G) ---------------------------

    #: Regexes matching the API's error texts for mis-paired tool calls and results (WIRE.md
    #: §G.2). Such a 400 is reported by the API (A) but caused by the client's dispatch (C).
    pairing_errors: tuple[str, ...] = ()
    #: Regexes matching the API's error texts (or codes) for a request longer than the model's
    #: context window: the 400 a framework answers by trimming or summarising its history
    #: (docs/threading.md, "After an overflow"). Taken from the texts the frameworks match
    #: (strands-agents 1.62.0, crewai 1.15.30) and the APIs' own.
    overflow_errors: tuple[str, ...] = ()
    #: The API wants every result of one turn's calls in the single message right after it
    #: (Anthropic's rule: results spread over several user messages get a 400).
    results_in_one_message: bool = False
    #: Whether a tool result carries an error flag (``is_error``, a status) a client sets for a
    #: failed or declined call; without one such a call can only be said in the result's text.
    tool_error_flag: bool = False

    #: The response headers that carry the input and output counts when the body may not (TGI
    #: containers), and the served model (``None``: the API reports neither there).
    usage_headers: tuple[str, str] | None = None
    model_header: str | None = None

    # -- pricing with genai-prices -------------------------------------------------------------

    #: genai-prices' provider id for this family's own API, used to price a call whose host
    #: genai-prices does not recognise (a gateway or local proxy in front of the vendor's API).
    #: ``None`` when the wire format does not name the vendor (many hosts speak OpenAI's formats).
    price_provider: str | None = None
    #: genai-prices' provider id of the vendor whose own API this wire format is (its models are
    #: this family's; a fork's ``--model`` of another such vendor is another API family and is
    #: refused). ``None``: the format names no vendor's models.
    model_vendor: str | None = None
    #: ``price_model(model)``: a model name as genai-prices knows it (the wire may decorate it
    #: with a resource path or a region prefix).
    price_model: Callable[[str], str] = str
    #: ``price_usage(usage)``: ``usage`` as genai-prices usage keys (:func:`usage_keys`, which a
    #: family whose usage carries more, priced apart, extends).
    price_usage: Callable[[Usage], dict[str, int]] = usage_keys

    # -- OpenTelemetry GenAI names -------------------------------------------------------------

    #: ``gen_ai.provider.name`` for this family's own API, used when the host is not a known
    #: vendor's (a local server, a gateway): the wire format names the flavour.
    otel_provider: str = "unknown"
    #: ``gen_ai.operation.name`` of a generate call.
    otel_operation: str = "chat"
    #: How a trace's import reads and rebuilds a chat turn of this family (``None``: it is
    #: rebuilt in another's, an operation of its own by :meth:`Provider.rebuild`).
    rebuild: RebuildShape | None = None

    # -- replay matching and start-up ----------------------------------------------------------

    #: Request headers that change what the API does (versions, beta flags): compared when
    #: replay is strict. Every other header (SDK telemetry, user agent, auth) is ignored.
    replay_headers: tuple[str, ...] = ()
    #: Request fields replay does not compare, wherever they occur in the body: client telemetry
    #: that differs every run and does not change what the API does.
    volatile_fields: frozenset[str] = frozenset()
    #: The same, only at the top level of the body (the name may mean something deeper down,
    #: e.g. a tool parameter).
    volatile_top_fields: frozenset[str] = frozenset()
    #: Fields whose value is the caller's own data, not the API's fields (tool schemas, a tool
    #: call's input, a function's response, metadata): inside them ``null`` is a value, kept by
    #: replay matching. Everywhere else ``null`` and an absent field are the same request.
    free_form_fields: frozenset[str] = FREE_FORM_FIELDS
    #: Where the API's tool results and the calls they answer sit in a request's history: a group
    #: of results answering one turn's calls is compared in its calls' order, whatever order the
    #: client appended them in (:mod:`cassettes.providers._result_groups`). ``None``: compared
    #: as sent.
    result_groups: ResultGroups | None = None
    #: Top-level fields at their documented default, the same request as without them.
    field_defaults: tuple[tuple[str, Any], ...] = ()
    #: System text blocks that start with one of these are attribution the API reads and keeps
    #: out of the prompt: no part of the cached prefix (Claude Code's
    #: ``x-anthropic-billing-header:`` block, whose version hash follows the first user message
    #: and whose ``cch`` may change every request). A backend of another vendor may cache it as
    #: prompt (cannot know).
    attribution_system: tuple[str, ...] = ()
    #: Continuity tokens (docs/threading.md, "Provider evidence first"): the ``provider_details``
    #: keys of an answer's parts whose string value the API gives for the client to send back
    #: as it was (a thought signature, encrypted reasoning, an output item's id). A request that
    #: carries one links to the turn whose answer produced it; tool-call ids count in every
    #: family and need no entry here.
    continuity: frozenset[str] = frozenset()
    #: Environment variables this API's SDKs read their key from (the first is set to a
    #: placeholder when replaying with none set, so a keyless CI run can start the client).
    api_key_env: tuple[str, ...] = ()

    def is_attribution(self, text: str | None) -> bool:
        """``text`` (a system block's) is attribution, not prompt (:attr:`attribution_system`)."""
        head = (text or "")[:64].lstrip()
        return any(head.startswith(p) for p in self.attribution_system)

    def is_pairing_error(self, message: str | None) -> bool:
        return bool(message) and any(re.search(p, message or "") for p in self.pairing_errors)

    def is_overflow_error(self, code: str | None, message: str | None) -> bool:
        """The error says the request exceeded the model's context window."""
        said = f"{code or ''}\n{(message or '')[:2000]}"
        return any(re.search(p, said) for p in self.overflow_errors)

    def price_context(self, response: NormalisedResponse | None) -> dict[str, str]:
        """What selects a price variant in genai-prices (the service tier the response reports)."""
        details = (response.provider_details or {}) if response is not None else {}
        tier = details.get("service_tier")
        return {"service_tier": tier} if isinstance(tier, str) and tier else {}

    def otel_provider_name(self, host: str) -> str:
        """``gen_ai.provider.name`` of a call to ``host`` in this family's format: the vendor the
        host belongs to when it is a known one (OTEL_PROVIDER_HOSTS), else the family's own."""
        from fnmatch import fnmatch

        h = host.lower().rstrip(".")
        return next(
            (name for pat, name in OTEL_PROVIDER_HOSTS if fnmatch(h, pat)), self.otel_provider
        )
