"""A family's chat turn as a trace's import rebuilds it, as data its profile holds
(:attr:`Profile.rebuild <cassettes.providers._profile.Profile.rebuild>`; the families' own in
:mod:`cassettes.providers._rebuild_families`): the URL, request and answer it is given
(:mod:`cassettes.providers._rebuild` adds what every family shares), and what the import asks of
the family (the provider names a span calls it by, its finish reasons and parameters, its tool
shape, what a trace leaves out of its history). A family without a shape is rebuilt in the
fallback's (OpenAI Chat), said in the round trip's notes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    """One model call as a source kept it. ``messages``/``output`` are in ``family``'s wire shape
    (an OpenAI Chat message list and assistant message; Anthropic ``messages`` and a
    ``{"content": [blocks]}`` answer); ``given``/``inferred`` name the fields by origin."""

    family: str
    source: str
    messages: list[dict[str, Any]]
    output: dict[str, Any] | None = None
    #: The model asked for (the request's), and the one that answered when the source says it
    #: apart (the answer's; else the same).
    model: str | None = None
    served: str | None = None
    system: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish: str | None = None
    #: The finish's normalised class (:class:`~cassettes.models.FinishReason`), where the source
    #: says it (looptap's export): the class of a raw finish looptap reads no class from.
    finish_class: str | None = None
    response_id: str | None = None
    started: float | None = None
    duration: float | None = None
    error: str | None = None
    #: The HTTP status of an error answer, and its ``type`` and ``code``, where the source kept them
    #: (else 500 and ``api_error``: ``status`` inferred).
    status: int | None = None
    error_fields: dict[str, str] = field(default_factory=dict)
    #: Sampling parameters the source kept, by the family's own names (``max_tokens`` …).
    params: dict[str, Any] = field(default_factory=dict)
    #: ``params`` are the request's own, by its own names, as sent (looptap's export): a family
    #: whose rebuilt request names a few of them otherwise puts the rest back as they were.
    as_sent: bool = False
    #: The client asked for a stream: the answer is rendered as this API streams it.
    stream: bool = False
    given: set[str] = field(default_factory=set)
    inferred: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: The service that made the call (an OTLP resource's ``service.name``), if it was named.
    service: str | None = None
    #: A Gemini call to Vertex AI, and its region when the trace names it (its server's host).
    vertex: bool = False
    region: str | None = None
    #: The operation of a call that is not a chat turn (looptap's own export names it: ``embed``,
    #: ``image`` …), rebuilt in its family's own shape (:attr:`Provider.rebuilt_operations`).
    operation: str | None = None
    #: The URL the call went to, where the source kept it (``url.full``): the round trip is
    #: rebuilt there when the family's adapter reads it as this family's call (a compatible
    #: vendor's host, an Azure deployment's path), else at the family's own.
    url: str | None = None
    #: What of the call the source kept but looptap could not read, or did not keep (short
    #: labels: ``answer``, ``messages`` …): the round trip's read state.
    unread: list[str] = field(default_factory=list)


__all__ = ["CHAT_PARAMS", "NO_SHAPE", "Call", "RebuildShape", "finish", "said_nothing"]

#: OpenAI Chat's request parameters: those an invocation-parameters attribute may hold beside a
#: framework's own settings (LangChain's ``model_name``, ``_type``, ``streaming``, ``max_retries``
#: …), which no request carries; and the names a family without a list of its own takes.
CHAT_PARAMS = frozenset(
    "temperature top_p max_tokens max_completion_tokens n stop presence_penalty "
    "frequency_penalty logit_bias logprobs top_logprobs seed response_format tool_choice "
    "parallel_tool_calls user stream_options reasoning_effort service_tier store metadata "
    "modalities prediction audio verbosity web_search_options prompt_cache_key "
    "safety_identifier".split()
)
Built = tuple[str, dict[str, Any], dict[str, Any] | None]


def _function_tool(d: dict[str, Any], params: dict[str, Any], strict: Any) -> dict[str, Any]:
    """A tool as OpenAI's function tool (``strict`` where the trace said it)."""
    fn = {"name": d["name"], "parameters": params}
    if d.get("description"):
        fn["description"] = d["description"]
    if isinstance(strict, bool):
        fn["strict"] = strict
    return {"type": "function", "function": fn}


def _nothing(call: Call, *_: Any) -> None:
    return None


@dataclass(frozen=True)
class RebuildShape:
    """How one family's chat turn is rebuilt from a trace, and what its import asks of the
    family (the defaults: a family that has no shape, an operation rebuilt in its own)."""

    #: (URL, request, the answer when it is built here) of a call; ``None``: no chat turn of it.
    build: Callable[[Call], Built] | None = None
    #: The answer is rendered by the API's own renderer, as replay serves it, from the parts the
    #: trace kept (``build`` gives no answer).
    rendered: bool = False
    #: The start of a response id made up for an answer.
    id_prefix: str = "chatcmpl"
    #: Semconv (and other families') finish reasons → this family's own.
    finishes: dict[str, str] = field(default_factory=dict, hash=False)
    #: The request parameters an invocation-parameters attribute may hold beside a framework's own
    #: settings (``None``: not listed, each one kept, put back under OpenAI Chat's names).
    api_params: frozenset[str] | None = None
    #: A parameter kept under a name the API has another for, and what is then inferred.
    unsure_names: dict[str, str] = field(default_factory=dict, hash=False)
    #: What a span's ``gen_ai.provider.name`` (or ``gen_ai.system`` …) calls this API, a URL path
    #: that ends as the API's, a span that echoes the API's answer (openai-agents), a server host
    #: that is the API's (where no provider is named): a call said so is rebuilt in this family.
    otel_names: tuple[str, ...] = ()
    path_end: str | None = None
    echoed: bool = False
    hosts: tuple[str, ...] = ()
    #: The family calls are rebuilt in when nothing says another (OpenAI Chat).
    fallback: bool = False
    #: How the notes name it.
    title: str = ""
    #: An answer's content is a list of blocks (an answer of nothing is ``[]``, not ``""``).
    blocks: bool = False
    #: A call under an agent span is rebuilt with the history its agent's earlier calls sent and
    #: got, where its span kept only its new messages.
    continues_history: bool = False
    #: ``tool(definition, schema, strict)``: a tool definition in the family's request shape.
    tool: Callable[[dict[str, Any], dict[str, Any], Any], dict[str, Any]] = _function_tool
    #: ``settle(call, parts)``: what is inferred of (and filled in) a history read from a span
    #: whose input messages had ``parts``.
    settle: Callable[[Call, list[Any]], None] = _nothing
    #: ``place(call, provider, host)``: where the call went, as the span's provider and server
    #: say (a Gemini call to Vertex AI, its region).
    place: Callable[[Call, str, str], None] = _nothing
    #: A tool call's id in a trace is the instrumentation's own (the wire has none: Gemini's).
    call_ids_made_up: bool = False
    #: History items that echo an earlier answer's items get the ids it was rendered with.
    links_items: bool = False

    def param_name(self, names: tuple[str, ...]) -> str | None:
        """The first of ``names`` (a setting's, ``REQUEST_FIELDS``) this family's request takes."""
        takes = self.api_params or CHAT_PARAMS
        return next((k for k in names if k in takes), None)

    def says(self, provider: str, path: str, echoed: bool, host: str) -> bool:
        """A span's provider, URL path, echo or server says a call is this family's."""
        return (
            provider in self.otel_names
            or bool(self.path_end and path.endswith(self.path_end))
            or (self.echoed and echoed)
            or (not provider and any(host.endswith(h) for h in self.hosts))
        )


#: The shape of a family that has none (an operation rebuilt in its own shape, by its adapter).
NO_SHAPE = RebuildShape()


# -- shared by the answers built here ------------------------------------------------------------


def said_nothing(call: Call) -> bool:
    """The source kept the call's content, and its answer holds nothing (no text, no call) and
    says no finish: a body with no response in it, which no finish is inferred for (a normal
    end would make it an empty answer)."""
    out = call.output or {}
    return (
        not call.finish
        and "messages" in call.given
        and not any(out.get(k) for k in ("content", "tool_calls", "parts"))
    )


def finish(call: Call, shape: RebuildShape) -> str | None:
    """The answer's finish: the source's, else read off its tool calls (inferred)."""
    if call.finish:
        return call.finish
    if said_nothing(call):
        return None
    call.inferred.add("finish_reason")
    out = call.output or {}
    blocks = out.get("content") if shape.blocks else None
    calls = bool(out.get("tool_calls")) or (
        isinstance(blocks, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)
    )
    said = "tool_call" if calls else "stop"
    return shape.finishes.get(said, said)
