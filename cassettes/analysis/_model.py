"""What the layer analysis produces: turns in conversations, E/A/C layers, findings, token growth.

A *round trip* is one HTTP exchange; a *conversation* is a chain of round trips whose histories
extend each other; a *turn* is a round trip's place in its conversation (0-based ``index``). For
every turn the analysis gives three layers — what the model emitted (E), what the API reported
(A), what the client dispatched (C) — plus token accounting and the findings that fired.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_serializer

from ..models import SERVER_KINDS, ApiError, FinishReason, Message, Usage

__all__ = [
    "ApiReport",
    "CallCheck",
    "ContextChange",
    "Conversation",
    "Dispatch",
    "Emission",
    "Finding",
    "Layer",
    "McpCall",
    "Pairing",
    "RunAnalysis",
    "Segments",
    "Severity",
    "TokenCount",
    "ToolHttp",
    "Turn",
    "kind_text",
]

Layer = Literal["E", "A", "C"]


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """How grave it is: info 0, warning 1, error 2."""
        return _SEVERITIES.index(self)


_SEVERITIES = tuple(Severity)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class Finding(_Model):
    """Something a layer did that a careful engineer would want to know about."""

    #: Stable identifier, ``<layer>.<name>`` (e.g. ``C.dropped_tool_result``); never reused.
    code: str
    layer: Layer
    severity: Severity
    #: One or two sentences a person understands without reading the code.
    message: str
    conversation: str | None = None
    turn: int | None = None
    #: The round trip's position in the cassette.
    seq: int | None = None
    #: JSON path into the request (``messages[4].content[0]``) or response, when one applies.
    path: str | None = None
    tool_call_id: str | None = None
    #: Another turn this finding points at (e.g. the turn whose calls a pairing 400 complains
    #: about).
    related_turn: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class CallCheck(_Model):
    """One tool call the model emitted, checked against what was offered."""

    id: str | None = None
    name: str | None = None
    arguments: Any = None
    arguments_raw: str | None = None
    #: Why the arguments are not valid JSON, if they are not.
    parse_error: str | None = None
    #: Schema violations (missing required, wrong type, not in enum …), each with its JSON path.
    schema_errors: list[str] = Field(default_factory=list)
    #: The tool was among those offered in the request (``None`` when no tools list was sent).
    offered: bool | None = None
    #: The call's kind (:attr:`cassettes.models.ToolCall.kind`): ``function`` / ``custom`` for the
    #: client's tools; ``server``, ``mcp`` or a hosted item's type for one the provider ran.
    kind: str = "function"

    @property
    def by_server(self) -> bool:
        """The provider ran the call and answered it itself: no client result is due."""
        return self.kind in SERVER_KINDS


class Emission(_Model):
    """E — what the model emitted this turn."""

    text: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[CallCheck] = Field(default_factory=list)
    #: No text, no tool call, no refusal (reasoning alone does not count).
    empty: bool = False


class ApiReport(_Model):
    """A — what the API reported."""

    status: int | None = None
    finish_reason_raw: str | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    ttfb: float | None = None
    ttft: float | None = None
    duration: float | None = None
    model_requested: str | None = None
    model_served: str | None = None
    request_id: str | None = None
    #: Rate-limit and retry headers as sent (``x-ratelimit-remaining-tokens``, ``retry-after`` …).
    rate_limit: dict[str, str] = Field(default_factory=dict)
    error: ApiError | None = None
    complete: bool | None = None
    stream: bool = False
    #: How looptap read the round trip (``complete``, ``partial``, ``unread``) and what not
    #: (:attr:`~cassettes.parsing.RoundTrip.read`, issue 92).
    read: str | None = None
    unread: list[str] = Field(default_factory=list)


class Pairing(_Model):
    """A tool result the client sent, and the call it answers."""

    call_id: str | None = None
    name: str | None = None
    #: Turn whose response emitted the call (``None`` when no model turn of this run did).
    call_turn: int | None = None
    #: A matching call exists: emitted by the model, or present in the history the client sent.
    in_history: bool = False
    is_error: bool | None = None
    #: Index of the result's message in this request's history.
    message_index: int | None = None
    #: The name of the call the result's id belongs to, when the result names another function.
    call_name: str | None = None


class ContextChange(_Model):
    """What the client's context management did to the history on this turn (docs/threading.md,
    "Context management"): what it dropped, cleared and put in its place. Indexes into the
    previous request are those of its normalised history (``from_seq``'s request messages)."""

    #: ``trimmed`` (messages dropped), ``summarised`` (dropped, and a summary put in their place)
    #: or ``cleared`` (tool results or reasoning emptied in place, nothing dropped).
    kind: Literal["trimmed", "summarised", "cleared"]
    #: seq of the previous round trip of the conversation: the request whose history was managed.
    from_seq: int
    #: Indexes, in ``from_seq``'s request history, of the messages dropped.
    dropped: list[int] = Field(default_factory=list)
    #: The dropped messages counted by role (``user``, ``assistant``, ``tool``, ``system``).
    dropped_roles: dict[str, int] = Field(default_factory=dict)
    #: The plain user messages dropped (no tool results), each clipped to 200 characters.
    dropped_user: list[str] = Field(default_factory=list)
    #: The latest plain user message of the previous request is among the dropped ones.
    question_dropped: bool = False
    #: The names of the tools whose calls were in the dropped messages.
    dropped_tools: list[str] = Field(default_factory=list)
    #: Indexes, in ``from_seq``'s request history, of the messages cleared in place.
    cleared: list[int] = Field(default_factory=list)
    #: Indexes, in this request's history, of the messages put in place of the dropped ones.
    summary: list[int] = Field(default_factory=list)
    #: seq of the round trip whose answer the summary carries (a compaction), if any.
    summary_by_seq: int | None = None
    #: That round trip is a side call of the conversation (not one of its own turns).
    summary_by_side_call: bool = False
    #: Ids of the previous turn's calls whose results went to that compaction (its request
    #: answered them): run and summarised, not dropped.
    summarised_calls: list[str] = Field(default_factory=list)
    #: Index in this request's history where the dropped messages stood (where restoring them
    #: puts them back, in order).
    restore_at: int = 0
    #: The user's task or instructions dropped that nothing the request keeps carries (clipped to
    #: 200 characters): what ``C.user_instruction_dropped`` quotes.
    lost: list[str] = Field(default_factory=list)
    #: Whether the user's task (the latest plain user message before) is among ``lost``.
    task_lost: bool = False
    #: The user's task or instructions dropped that no message carries word for word but that
    #: the summary's writer saw (or a summary of unknown origin stands for): it may restate
    #: them (said with ``C.history_trimmed``, never a warning).
    restated: list[str] = Field(default_factory=list)
    #: seq of the request the API refused as too long for the model's context window, when the
    #: management answered that error (``from_seq`` then), else ``None``.
    after_overflow: int | None = None


class MessageCounts(_Model):
    """The messages a request sent, each counted once (docs/show-json.md): ``as_before`` (as the
    previous request of its conversation sent it) + ``changed`` (history sent again, not as it
    was: edited, cleared in place, a summary in place of what was dropped) + ``new`` (this turn's
    own: the previous answer's echo, tool results, new input) = ``sent``. ``dropped``: the
    previous request's messages this one does not carry at all (not part of ``sent``)."""

    sent: int = 0
    as_before: int = 0
    changed: int = 0
    new: int = 0
    dropped: int = 0


class Dispatch(_Model):
    """C — what the client sent, relative to the previous turn of the same conversation."""

    #: Messages carried over unchanged from the previous request.
    kept: int = 0
    #: Messages of the previous request that were dropped or changed (history rewritten).
    rewritten: int = 0
    #: The messages this request added (the assistant echo, tool results, new user input …).
    appended: list[Message] = Field(default_factory=list)
    #: Index in this request's history of the first appended message.
    appended_from: int = 0
    #: The previous turn's assistant output was echoed back verbatim (``None`` for a first turn).
    echoed_assistant: bool | None = None
    pairings: list[Pairing] = Field(default_factory=list)
    tools_offered: list[str] = Field(default_factory=list)
    tool_choice: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    #: What the client's context management did to the history (``None``: nothing was managed).
    context: ContextChange | None = None
    #: The request's messages, each counted once (``None``: which of its history came back as
    #: it was could not be read: a history longer than the comparison's bound).
    counts: MessageCounts | None = None
    #: How this turn was linked to its conversation.
    link: Literal["start", "extends", "rewritten", "previous_response_id", "header", "retry"] = (
        "start"
    )


class Segments(_Model):
    """The input split by what it carries, estimated from text size and scaled to the reported
    total."""

    system: int = 0
    tools: int = 0
    user: int = 0
    assistant: int = 0
    tool_results: int = 0
    #: Of the above, what this turn appended (new input, not history re-sent; on a
    #: conversation's first turn, all of it).
    new: int = 0
    #: Of ``new``, the tool results (the rest of it is user and assistant messages).
    new_tool_results: int = 0


class TokenCount(_Model):
    """Token accounting for one turn (inclusive convention: ``input`` = uncached + cache read +
    write)."""

    input: int | None = None
    input_uncached: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    output: int | None = None
    reasoning: int | None = None
    #: ``reported`` when the provider sent usage, ``estimated`` when looptap estimated it.
    source: Literal["reported", "estimated", "missing"] = "missing"
    segments: Segments | None = None
    #: Cost of this turn in USD; ``None`` = unknown (no price known), never 0 for unknown.
    cost: Decimal | None = None
    #: Sum of the known costs of this conversation so far (``None`` while none is known).
    cumulative_cost: Decimal | None = None
    #: ``False`` once a billed turn of the conversation had no known price (``cumulative_cost`` is
    #: then a lower bound); ``None`` while there is no cumulative cost.
    cost_complete: bool | None = None
    cumulative_input: int | None = None
    cumulative_output: int | None = None
    price_source: str | None = None
    #: The price is a guess: the host is not a provider genai-prices knows (a local server, a
    #: gateway), so the model's list price was taken by its name. Shown as ``~$…``.
    price_estimated: bool = False
    #: ``cumulative_cost`` holds an estimated price (of this turn or an earlier one): ``~$…`` too.
    cumulative_estimated: bool = False


class Turn(_Model):
    seq: int
    conversation: str
    index: int
    #: seq of the previous turn in this conversation.
    previous_seq: int | None = None
    family: str
    e: Emission
    a: ApiReport
    c: Dispatch
    tokens: TokenCount
    #: Root causes first, each followed by what it caused
    #: (:func:`~cassettes.analysis.dispatch.ordered_findings`).
    findings: list[Finding] = Field(default_factory=list)


class Conversation(_Model):
    id: str
    family: str
    #: seqs of its turns, in order.
    turns: list[int] = Field(default_factory=list)
    #: ``X-Looptap-Conversation`` header value, when the client set one.
    label: str | None = None
    #: The first words of its first user message (at most 60 characters), to tell conversations
    #: apart at a glance; recorded text, so shown only through the untrusted-text boundary.
    title: str | None = None
    #: seq of the turn this conversation branched from (its parent), if any.
    parent_seq: int | None = None
    #: How it branched from its parent (docs/threading.md; :data:`KIND_WORDS` says each in words):
    #: ``sub_agent`` (its first words are the prompt a tool call of the parent turn asked for:
    #: Claude Code's Task tool), ``agent_tool`` (an agent used as a tool, handed the user's
    #: question word for word while the parent waits for the tool's result), ``handoff`` (the run
    #: went on under the agent the parent's transfer call named), ``group_chat`` (another agent of a
    #: group chat: it received the parent turn's answer as a user message), ``sibling`` (an
    #: independent prompt that shares its opening with the parent's: a few-shot prompt of an
    #: optimiser) or ``side_call`` (something asked over the parent's history or about its call:
    #: another system prompt and tool set over it — a summary, compaction, a title —, a question
    #: asked while the parent's calls run — a progress summary —, or a request quoting the
    #: parent's call — a label for the tools used).
    branch: str | None = None

    @property
    def kind(self) -> str:
        """``main`` for a conversation of its own, else how it branched (:attr:`branch`)."""
        return self.branch or "main"


#: How a view says a conversation's kind, before its parent's ``#seq`` (``show``, the inspector,
#: the HTML page): one wording for every view.
KIND_WORDS: dict[str, str] = {
    "sub_agent": "sub-agent of",
    "agent_tool": "agent used as a tool by",
    "handoff": "handoff from",
    "group_chat": "group chat with",
    "sibling": "sibling of",
    "side_call": "side call on",
}


def kind_text(kind: str, parent_seq: int | None) -> str:
    """``handoff from #3``: a conversation's kind and parent in words (empty for a main one)."""
    if parent_seq is None:
        return ""
    return f"{KIND_WORDS.get(kind, 'branched from')} #{parent_seq}"


class ToolHttp(_Model):
    """What a tool's HTTP call sent and got (a round trip the recorder took to a host that is not
    an LLM API's): bounded, redacted as the cassette is, never markup."""

    method: str
    host: str
    #: The path and query (at most 300 characters).
    path: str
    status: int | None = None
    transport_error: str | None = None
    #: Epoch seconds; seconds from the request to the answer's last byte.
    started: float | None = None
    duration: float | None = None
    #: The start of the request body and of the answer's, as text (at most 300 characters each;
    #: ``None``: empty), and their sizes in bytes as kept.
    sent: str | None = None
    got: str | None = None
    sent_bytes: int = 0
    got_bytes: int = 0


class McpCall(_Model):
    """A tool's side of a model's tool call, and the call it ran (layer C: the client executing
    it): an MCP ``tools/call``, or a tool's own HTTP call (``via == "http"``)."""

    #: seq of the MCP round trip, or of the tool's HTTP round trip.
    seq: int
    #: The MCP server's tool; for a tool's HTTP call, the model's tool it served (when linked).
    tool: str | None = None
    #: The model's tool-call id it ran, when looptap could tell.
    call_id: str | None = None
    #: How: ``id`` (the client sent the model's tool-use id in ``_meta``), ``name_arguments``
    #: (the one model call awaiting its result with this tool and these arguments); for a tool's
    #: HTTP call ``arguments`` (of the model calls awaiting their result, the one whose arguments
    #: the URL, query or body carries most of) or ``awaiting`` (the only model call awaiting its
    #: result; none of its arguments seen).
    linked_by: Literal["id", "name_arguments", "arguments", "awaiting"] | None = None
    #: ``mcp`` (a tools/call to an MCP server) or ``http`` (a tool's own HTTP call: :attr:`http`).
    via: Literal["mcp", "http"] = "mcp"
    http: ToolHttp | None = None
    #: The turn whose answer made the call (its seq, conversation and 0-based index).
    model_seq: int | None = None
    conversation: str | None = None
    turn: int | None = None
    #: Model calls awaiting a result that it could equally have run (several: not linked).
    candidates: int = 0
    is_error: bool = False
    #: The JSON-RPC error's message, when the server answered with one.
    error: str | None = None
    #: The start of the result's text (at most 300 characters); ``None`` when none was recorded.
    result: str | None = None


class RunAnalysis(_Model):
    #: In order of their first turn. The analyser keeps them compact and gives each as a
    #: :class:`Conversation` on access (a copy: read it, do not change it).
    conversations: Sequence[Conversation] = Field(default_factory=list)
    #: Turns by seq (LLM generation round trips only).
    turns: dict[int, Turn] = Field(default_factory=dict)
    #: The run's, in the same order as a turn's (root causes first, by severity).
    findings: list[Finding] = Field(default_factory=list)
    #: Checks that failed with an internal error (the rest of the analysis still ran).
    errors: list[str] = Field(default_factory=list)
    #: The tools' side by seq: MCP ``tools/call`` round trips and tools' HTTP calls (``via``), each
    #: with the model's call it ran.
    mcp_calls: dict[int, McpCall] = Field(default_factory=dict)

    @field_serializer("conversations", mode="wrap")
    def _conversations_as_list(
        self, value: Sequence[Conversation], handler: SerializerFunctionWrapHandler
    ) -> Any:
        # the analyser's compact Sequence dumps as the list it stands for
        return handler(list(value))
