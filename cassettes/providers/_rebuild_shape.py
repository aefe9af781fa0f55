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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import Provider
    from ._rebuild import Call

__all__ = ["CHAT_PARAMS", "NO_SHAPE", "RebuildShape", "finish", "rebuilt_in", "said_nothing",
           "shape_of", "trace_family"]  # fmt: skip

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


def _shaped() -> list[tuple[Provider, RebuildShape]]:
    from . import _providers

    return [(p, p.profile.rebuild) for p in _providers() if p.profile.rebuild is not None]


def shape_of(family: str) -> RebuildShape:
    """``family``'s rebuild shape (:data:`NO_SHAPE` when it has none)."""
    return next((s for p, s in _shaped() if p.family == family), NO_SHAPE)


def rebuilt_in(family: str) -> Provider:
    """The adapter a chat turn of ``family`` is rebuilt as: its own, else the fallback's."""
    shaped = _shaped()
    return next((p for p, _ in shaped if p.family == family), None) or next(
        p for p, s in shaped if s.fallback
    )


def trace_family(provider: str, path: str, echoed: bool, host: str) -> str:
    """The family a trace's call is rebuilt in: the first (in recognition order) whose shape the
    span's provider, URL path, answer echo or server says, else the fallback."""
    said = [(p, s) for p, s in _shaped() if s.says(provider, path, echoed, host) or s.fallback]
    return next((p for p, s in said if not s.fallback), said[0][0]).family


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
