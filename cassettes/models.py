"""The normalised model every provider adapter parses into.

One vocabulary for five API families: a request is a list of messages made of parts (text, tool
call, tool result, reasoning, refusal, media, other) plus the tools offered, the tool choice and
the sampling parameters; a response is the parts the model emitted plus what the API reported
(finish reason raw and normalised, usage, error, completeness).

Token convention (inclusive, as in pydantic-ai): ``input_tokens`` is *all* input tokens, cached or
not, and ``output_tokens`` includes reasoning tokens. Providers that report differently (Anthropic's
``input_tokens`` excludes cache reads and writes; Gemini's ``candidatesTokenCount`` excludes
thoughts) are converted by their adapter. A count the provider did not report is ``None``, never 0.

Nothing the provider sent is lost: unknown keys and enum values are kept in ``raw`` /
``provider_details`` and never make parsing fail.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SERVER_KINDS",
    "USAGE_COUNTS",
    "ApiError",
    "FinishReason",
    "Message",
    "NormalisedRequest",
    "NormalisedResponse",
    "Part",
    "PartKind",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "emitted_calls",
    "user_messages",
]

PartKind = Literal["text", "tool_call", "tool_result", "reasoning", "refusal", "media", "other"]


class FinishReason(StrEnum):
    """Normalised finish classes (WIRE.md §G.1). The raw value is always kept beside it."""

    COMPLETE = "complete"
    TOOL_CALL = "tool_call"
    TRUNCATED_LENGTH = "truncated_length"
    TRUNCATED_CONTEXT = "truncated_context"
    FILTERED = "filtered"
    REFUSED = "refused"
    PAUSED = "paused"
    TOOL_CALL_ERROR = "tool_call_error"
    TOOL_LOOP_LIMIT = "tool_loop_limit"
    PROMPT_BLOCKED = "prompt_blocked"
    ERROR = "error"
    CANCELLED = "cancelled"
    NO_GENERATION = "no_generation"
    OTHER = "other"
    UNKNOWN = "unknown"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


#: OpenAI Responses' output items of tools OpenAI runs itself (WIRE.md B.3), kept as ``other``
#: parts by the parse (their history items are echoed as they are).
RESPONSES_SERVER_CALLS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
    }
)
#: Call kinds the provider runs itself, whose result it puts in the answer: no client result is
#: due. Anthropic's ``server_tool_use`` (web search, web fetch, code execution …, also on Bedrock)
#: and ``mcp_tool_use``, Gemini's built-in tools, OpenAI Responses' hosted calls.
SERVER_KINDS = frozenset({"server", "mcp", *RESPONSES_SERVER_CALLS})


class ToolCall(_Model):
    """A call the model emitted (layer E)."""

    id: str | None = None
    name: str | None = None
    #: Parsed arguments (usually an object). ``None`` when they could not be parsed.
    arguments: Any = None
    #: The arguments exactly as they travelled when the wire carries a string (OpenAI, streamed
    #: Anthropic ``partial_json``); otherwise the compact JSON of the object the wire carried.
    arguments_raw: str | None = None
    #: Why ``arguments_raw`` is not valid JSON, when it is not.
    arguments_error: str | None = None
    #: ``function`` for client tools; ``custom``, ``server`` (provider-executed) or a hosted type.
    kind: str = "function"

    @property
    def by_server(self) -> bool:
        """The provider ran this call and put its result in the answer (:data:`SERVER_KINDS`)."""
        return self.kind in SERVER_KINDS


class ToolResult(_Model):
    """A tool result the client sent back (layer C)."""

    call_id: str | None = None
    name: str | None = None
    #: The wire names the result itself (Gemini's ``functionResponse.name``): the name is part of
    #: what the model reads. Elsewhere ``name`` is looked up from the call (it may be missing when
    #: the call is not in the same request), so it is not part of the result's identity.
    named: bool = Field(default=False, exclude=True)
    #: The result flattened to text (non-text parts are described, e.g. ``[image/png]``).
    content: str = ""
    #: Only Anthropic has an explicit flag; ``None`` where the wire has none.
    is_error: bool | None = None


class Part(_Model):
    kind: PartKind
    text: str | None = None
    tool_call: ToolCall | None = None
    tool_result: ToolResult | None = None
    media_type: str | None = None
    #: Provider-only data: signatures, ids, annotations, the raw block of an ``other`` part.
    provider_details: dict[str, Any] | None = None


class Message(_Model):
    #: ``system``, ``developer``, ``user``, ``assistant`` or ``tool`` (Gemini ``model`` →
    #: assistant).
    role: str
    parts: list[Part] = Field(default_factory=list)
    provider_details: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        return "".join(p.text or "" for p in self.parts if p.kind == "text")


class ToolSpec(_Model):
    name: str
    description: str | None = None
    #: JSON Schema of the arguments (Gemini's OpenAPI subset is kept as sent).
    parameters: dict[str, Any] | None = None
    #: ``function`` for client tools, otherwise the provider's tool type (``web_search``, …).
    kind: str = "function"


class NormalisedRequest(_Model):
    family: str
    #: The model the client asked for (from the body, or the URL for Gemini/Bedrock/Azure).
    model: str | None = None
    stream: bool = False
    system: list[Part] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    #: The tool choice as sent, and normalised: ``auto``, ``none``, ``required`` or ``tool:<name>``.
    tool_choice: Any = None
    tool_choice_mode: str | None = None
    #: Everything else that shapes generation (temperature, max tokens, reasoning effort, …).
    params: dict[str, Any] = Field(default_factory=dict)
    previous_response_id: str | None = None
    #: The top-level body key holding the resent history (``messages``, ``input``, ``contents``).
    history_key: str | None = None
    #: What of this request looptap could not read, each a short label ("message 3: content of an
    #: unknown shape", "tools"); empty when all of it was read. A round trip with any is read
    #: ``partial``, and no finding rests on what is listed here (issue 92).
    unread: list[str] = Field(default_factory=list)


class Usage(_Model):
    """Token counts, inclusive convention (see the module docstring). ``None`` = not reported."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    raw: dict[str, Any] | None = None


#: :class:`Usage`'s token counts, by field name (what summing or merging usages walks).
USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "total_tokens",
)


class ApiError(_Model):
    """An error the API reported: an HTTP error body, or an error event inside a 200 stream."""

    status: int | None = None
    type: str | None = None
    code: str | None = None
    message: str | None = None
    in_stream: bool = False
    raw: Any = None


class NormalisedResponse(_Model):
    id: str | None = None
    #: The model the API says served the call.
    model: str | None = None
    role: str = "assistant"
    parts: list[Part] = Field(default_factory=list)
    finish_reason_raw: str | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    error: ApiError | None = None
    #: ``True`` when the terminal marker was seen (always for non-streamed bodies); ``False`` when a
    #: stream ended without it (truncated); ``None`` when it cannot be told.
    complete: bool | None = None
    #: How many stream events were reassembled (``None`` for a non-streamed body).
    events: int | None = None
    provider_details: dict[str, Any] | None = None
    #: Facts a reader should see that are not parse failures: values the API does not send
    #: (unknown enum strings), oddities of the recording. Shown as round-trip notes.
    notes: list[str] = Field(default_factory=list)
    #: What of this answer looptap could not read, each a short label ("part 2: content of an
    #: unknown shape", "stream end", "usage"); empty when all of it was read. A round trip with any
    #: is read ``partial``, and no finding rests on what is listed here (issue 92).
    unread: list[str] = Field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(p.text or "" for p in self.parts if p.kind == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [
            p.tool_call for p in self.parts if p.kind == "tool_call" and p.tool_call is not None
        ]


def _hosted_call(block: Any) -> ToolCall | None:
    """An OpenAI Responses hosted-call item (``web_search_call`` …) as the call it records: its
    id, the tool, what it was asked (the search action, the queries, the code, an MCP call's
    arguments; never an image it made)."""
    t = block.get("type") if isinstance(block, dict) else None
    if t not in RESPONSES_SERVER_CALLS:
        return None
    raw: str | None = None
    if t == "mcp_call":  # the arguments as the model wrote them, a JSON string
        raw = block.get("arguments") if isinstance(block.get("arguments"), str) else None
        try:
            args: Any = orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            args = None
    elif t == "web_search_call":
        args = block.get("action")
    else:  # the queries of a file search, the code the interpreter ran; nothing of an image
        key = {"file_search_call": "queries", "code_interpreter_call": "code"}.get(t)
        args = {key: block.get(key)} if key else None
    name = block.get("name") if t == "mcp_call" else t.removesuffix("_call")
    return ToolCall(
        id=block.get("id") if isinstance(block.get("id"), str) else None,
        name=name if isinstance(name, str) else None,
        arguments=args,
        arguments_raw=raw if raw is not None else _compact(args),
        kind=t,
    )


def _compact(v: Any) -> str | None:
    if v is None:
        return None
    try:
        return orjson.dumps(v).decode()
    except TypeError:
        return None


def emitted_calls(response: NormalisedResponse | None) -> list[ToolCall]:
    """Every call the model made, in order: its tool calls (the client's and the server's) and the
    calls OpenAI Responses records as hosted-call items (run by OpenAI; ``other`` parts)."""
    out: list[ToolCall] = []
    for p in response.parts if response is not None else ():
        if p.kind == "tool_call" and p.tool_call is not None:
            out.append(p.tool_call)
        elif p.kind == "other":
            hosted = _hosted_call((p.provider_details or {}).get("block"))
            if hosted is not None:
                out.append(hosted)
    return out


def user_messages(msgs: list[Message]) -> list[int]:
    """The indices of the user messages that say something (text, not a tool result): what a
    ``user[N]`` edit counts."""
    return [
        i
        for i, msg in enumerate(msgs)
        if msg.role == "user"
        and any(p.text for p in msg.parts)
        and not any(p.tool_result is not None for p in msg.parts)
    ]
