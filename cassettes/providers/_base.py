"""What every provider adapter has: one small surface and the helpers they share.

An adapter recognises its traffic and parses it into :mod:`cassettes.models`:

* :meth:`Provider.recognise` — a score for (method, URL, body); 0 means "not mine";
* :meth:`Provider.operation` — ``generate`` for a model call, or what else the endpoint does
  (``count_tokens``, ``retrieve`` …; only ``generate`` round trips are parsed further);
* :meth:`Provider.parse_request` — the request body → :class:`NormalisedRequest`;
* :meth:`Provider.parse_response` — a non-streamed 2xx body → :class:`NormalisedResponse`;
* :meth:`Provider.reassemble` — a framed stream → the same :class:`NormalisedResponse` a
  non-streamed call would give, with ``complete`` decided by the terminal event;
* :meth:`Provider.parse_body` — a 2xx body that is neither (an audio file, plain text), for the
  APIs that answer so;
* :meth:`Provider.parse_error` — an error body → :class:`ApiError`.

Besides parsing, an adapter holds two objects it does not inherit: ``profile``, the API's
constants and capabilities as data (:class:`~cassettes.providers._profile.Profile`: pairing
errors, result layout, price and telemetry names, what replay matching ignores, key variables),
and ``replay``, how replay answers as the API (:class:`~cassettes.providers._replay.ReplayShapes`:
error and fault bodies, a rendered answer, a continuation), a family's own in its module.

Adapters must be lenient: unknown keys and enum values are kept (``provider_details``), missing
fields become ``None``. They may raise on hopeless input; the caller turns that into a labelled
analysis error and keeps the raw round trip. The helpers they share for that live in ``_values``
(a body's values read leniently) and ``_replay`` (an answer rendered as the API sends it); each
family imports them from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeGuard
from urllib.parse import SplitResult

from .. import bounds
from ..models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolSpec,
)
from ..wire import Framed
from ._profile import Profile
from ._replay import ReplayShapes
from ._values import (
    as_int,
    as_obj,
    as_str,
    error_from_body,
    error_type_header,
    filled_usage,
    locate_results,
)

__all__ = [
    "WS_TURN",
    "Chaining",
    "Provider",
    "Rebuilt",
    "WsRequest",
    "WsTurns",
    "audio_ref",
    "inline_history",
    "is_ws_turn",
]


@dataclass
class Rebuilt:
    """What a trace kept of a request that is not a chat turn (:meth:`Provider.rebuild`): the
    model, the texts it asked about (a prompt, an embedding's inputs) and its parameters."""

    model: str | None
    texts: list[str]
    params: dict[str, Any]
    stream: bool = False
    #: Instructions sent beside what was asked (speech's ``instructions``).
    system: list[str] = field(default_factory=list)


class Provider:
    """One API family's adapter: recognising and parsing its traffic (below), with its
    ``profile`` (the API's constants) and its ``replay`` shapes, which it holds."""

    family: ClassVar[str] = "unknown"
    #: The API's constants and capabilities (the defaults: an API that says none of them).
    profile: ClassVar[Profile] = Profile()
    #: How replay answers as this API (the default: OpenAI's shapes).
    replay: ClassVar[ReplayShapes] = ReplayShapes()
    #: Operations that poll for a model call's answer (a stored response). A poll
    #: whose answer carries tool calls for the client is read as the model call that delivered
    #: them (:func:`cassettes.parsing.parse_exchange`): a turn that continues the call it
    #: polls, so the results the client sends next answer calls the analysis has seen.
    poll_operations: ClassVar[frozenset[str]] = frozenset()
    #: The operations whose round trips are parsed. Only ``generate`` calls are turns of a loop;
    #: a family that also reads a non-loop call (an embedding: usage and cost, no messages) adds
    #: its operation here.
    parsed_operations: ClassVar[frozenset[str]] = frozenset({"generate"})
    #: The top-level keys that may hold the resent history (none: a prompt, or a server-kept one).
    history_keys: ClassVar[tuple[str, ...]] = ("messages", "contents", "input")

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        raise NotImplementedError

    def operation(self, method: str, url: SplitResult) -> str:
        return "generate"

    def parses(self, operation: str) -> bool:
        """Whether round trips of ``operation`` have their request and response parsed
        (:attr:`parsed_operations`)."""
        return operation in self.parsed_operations

    def add_header_facts(
        self, response: NormalisedResponse, header: Callable[[str], str | None]
    ) -> None:
        """Complete a parsed response from the response headers (some APIs report usage only
        there: :attr:`Profile.usage_headers`, :attr:`Profile.model_header`). ``header`` looks a
        header up by name, case-insensitively. An error's type, where the service says it in a
        header (:func:`~cassettes.providers._values.error_type_header`: every API served on
        AWS), is taken too."""
        error_type_header(response, header)
        names = self.profile.usage_headers
        if names:
            response.usage = filled_usage(response.usage, *(as_int(header(h)) for h in names))
        if self.profile.model_header:
            response.model = response.model or header(self.profile.model_header)

    def history_key(self, body: Any) -> str | None:
        """The top-level key of the resent history (what delta encoding stores incrementally): the
        first of :attr:`history_keys` that holds a list; must agree with
        ``parse_request(...).history_key``."""
        if isinstance(body, dict):
            for key in self.history_keys:
                if isinstance(body.get(key), list):
                    return key
        return None

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

    def model_from_url(self, url: SplitResult) -> str | None:
        return None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        raise NotImplementedError

    #: The operations :meth:`rebuild` puts back from a trace of a call that is not a chat turn
    #: (an embedding, an image, a legacy completion: looptap's own export names them).
    rebuilt_operations: ClassVar[frozenset[str]] = frozenset()

    def rebuild(
        self, operation: str, url: SplitResult, asked: Rebuilt, answer: NormalisedResponse | None
    ) -> tuple[dict[str, Any], tuple[str, bytes] | None]:
        """A call of one of :attr:`rebuilt_operations` from what a trace kept: (the request body,
        the answer's content type and body as the API sends it, None when it has none)."""
        raise NotImplementedError

    def parse_response(self, body: Any) -> NormalisedResponse:
        raise NotImplementedError

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        raise NotImplementedError

    def parse_body(self, framed: Framed) -> NormalisedResponse | None:
        """A 2xx answer that is neither JSON nor a stream (``framed.kind`` ``text`` or
        ``binary``: speech's audio file, a transcript sent as plain text), or ``None`` when this
        API sends none (then it is labelled unreadable)."""
        return None

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        return error_from_body(body, status)

    def error_answer(self, body: Any) -> NormalisedResponse:
        """A success's body that holds an error instead of an answer: :meth:`parse_error`'s
        error, the answer finished as ``error`` and complete."""
        return NormalisedResponse(
            error=self.parse_error(body, None), finish_reason=FinishReason.ERROR, complete=True
        )

    def context_edits(
        self, params: dict[str, Any], details: dict[str, Any] | None
    ) -> tuple[list[str], list[str] | None]:
        """The context edits the request asked the API to make server-side (the API edits the
        history it is sent: clears old tool results, truncates) and those the response says it
        applied, each in words, from the request's ``params`` and the response's provider
        details (``None``: this API does not say what it applied); nothing for an API that
        makes none (docs/threading.md)."""
        return [], None

    def item_path(self, body: Any, message_index: int, part_index: int | None = None) -> str | None:
        """The JSON path of a normalised history message (and one of its parts) in the request as
        sent, when the wire does not hold one item per message (``None``: ``KEY[message_index]``
        is right). Only asked when a finding needs a path."""
        return None

    def merged_item_path(
        self,
        body: Any,
        message_index: int,
        part_index: int | None,
        item_parts: Callable[[Any], tuple[str, list[Part]]],
    ) -> str | None:
        """:meth:`item_path` of an API whose consecutive ``input`` items may make one message
        (:meth:`joins` says when): the items walked as the parse merges them, ``item_parts``
        giving each item's parts."""
        inp = body.get("input") if isinstance(body, dict) else None
        if not isinstance(inp, list):
            return None
        msg, seen = -1, 0
        for i, item in enumerate(inp[: bounds.MAX_LIST]):
            if not (msg >= 0 and self.joins(inp[i - 1], item)):
                msg, seen = msg + 1, 0
            if msg == message_index:
                seen += len(item_parts(item)[1])
                if part_index is None or seen > part_index:
                    return f"input[{i}]"
            elif msg > message_index:
                break
        return None

    def volatile_ids(self, body: Any, url: SplitResult) -> list[str]:
        """(Replay, beside ``replay``: it needs the parser.) Ids in a request body that differ from
        run to run (tool-call ids, made up by the model or the client): matching remaps them
        consistently instead of comparing them."""
        out: list[str] = []
        for p in self._request_parts(body, url):
            if p.tool_call is not None and p.tool_call.id:
                out.append(p.tool_call.id)
            if p.tool_result is not None and p.tool_result.call_id:
                out.append(p.tool_result.call_id)
        return out

    def _request_parts(self, body: Any, url: SplitResult) -> list[Part]:
        """The parts of a request body's messages; none when it does not parse."""
        try:
            req = self.parse_request(body, url)
        except Exception:
            return []
        return [p for m in req.messages for p in m.parts]

    def tool_result_paths(
        self, body: Any, url: SplitResult
    ) -> list[tuple[tuple[str | int, ...], str | None]]:
        """(Replay, beside :meth:`volatile_ids`.) Where each tool result of a request body holds
        what the tool returned — the JSON path of that value — and the tool's name (looked up
        from the call when the wire does not carry it), for a rule that treats a tool's results
        as volatile (:mod:`cassettes.matching`). A result not found is left out: it is
        compared as sent (fail closed). This reading finds, for each parsed result in order, the
        object that carries its call id (or, without one, its name) and a value that flattens
        to the parsed content; an adapter whose wire hides results otherwise overrides it."""
        parts = self._request_parts(body, url)
        names = {p.tool_call.id: p.tool_call.name for p in parts if p.tool_call and p.tool_call.id}
        results = [p.tool_result for p in parts if p.tool_result is not None]
        if not results:
            return []
        return locate_results(
            body,
            [
                (r.call_id, r.name or (names.get(r.call_id) if r.call_id else None), r.content)
                for r in results
            ],
        )

    def results_in_call_order(self, body: Any) -> Any:
        """(Replay, beside :meth:`tool_result_paths`.) ``body`` with each group of tool results
        that answers one turn's calls in its calls' order (the profile's ``result_groups``;
        ``body`` itself unchanged), so that matching compares the group whatever order the
        client appended it in."""
        groups = self.profile.result_groups
        history = self.history_key(body) if groups is not None else None
        return groups.in_call_order(body, history) if groups and history else body

    def side_call(self, body: Any, framed: Framed) -> dict[str, Any] | None:
        """For a call that is not a model call but belongs to the loop (an MCP tool server's
        ``tools/call``): what it did, for ``show`` and ``show --json``. ``None``: nothing to say."""
        return None

    def joins(self, prev: Any, item: Any) -> bool:
        """Whether the raw history ``item`` continues the normalised message of the item before it,
        ``prev``, instead of starting its own (an adapter that merges consecutive items says when).
        A parse of only a request's appended items is used only where the first of them does not
        join the last kept one, so it gives what the full parse gives."""
        return False

    def history_tools(self, items: list[Any]) -> list[ToolSpec]:
        """Tools offered inside the history (after the top-level ones in ``parse_request``'s
        ``tools``), so a parse of only the appended history can add those of the kept part."""
        return []

    def body_operation(self, operation: str, body: Any) -> str:
        """The operation once the body is known (a request can say it generates nothing)."""
        return operation

    def ws_turns(self) -> WsTurns | None:
        """For an API that runs turns over a WebSocket, how its messages make turns (see
        :class:`WsTurns`). ``None``: this API's WebSocket sessions are not read as turns."""
        return None

    def chaining(self) -> Chaining | None:
        """For an API whose requests may continue an answer the server keeps (a fork sends such a
        request self-contained when the live upstream never gave that answer; see
        :class:`Chaining`). ``None``: every request carries its whole history."""
        return None

    def url_with_model(self, url: SplitResult, model: str) -> str | None:
        """The request's path (with its query) naming ``model`` where it names one now
        (:meth:`model_from_url`: an Azure deployment, Gemini's ``/models/NAME:``, a Bedrock model
        id), or ``None`` when the path names no model."""
        from urllib.parse import quote, unquote

        named = self.model_from_url(url)
        if not named:
            return None
        segs = url.path.split("/")
        for i, seg in reversed(list(enumerate(segs))):  # the model comes after the API's prefix
            head, colon, tail = seg.partition(":")
            if unquote(seg) == named or (colon and unquote(head) == named):
                segs[i] = quote(model, safe="") + (colon + tail if unquote(seg) != named else "")
                return "/".join(segs) + (f"?{url.query}" if url.query else "")
        return None


@dataclass(frozen=True)
class Chaining:
    """How an API's request continues an answer the server keeps (the Responses API's
    ``previous_response_id``), over HTTP and over a WebSocket alike. Each rule is given JSON."""

    #: ``thread(request, answer)`` → (the id of the earlier answer the request continues, or
    #: ``None``; the id of ``answer`` (the response as sent whole, or a stream's or a session's
    #: closing event; ``None``: none); the items the turn adds to the conversation: its input,
    #: then the answer's output).
    thread: Callable[[Any, Any], tuple[str | None, str | None, list[Any]]]
    #: ``standalone(request, history)`` → the request carrying ``history`` (the conversation's
    #: items before it) itself, no longer continuing an earlier answer.
    standalone: Callable[[Any, list[Any]], Any]


def inline_history(
    thread: Callable[[Any, Any], tuple[str | None, str | None, list[Any]]], previous: str
) -> Callable[[Any, list[Any]], Any]:
    """The ``standalone`` rule (:class:`Chaining`) of an API whose request names the kept answer it
    continues by ``previous`` and carries its turn's items in ``input``: the request without
    ``previous``, its input the history, then the turn's own items (as ``thread`` reads them)."""

    def standalone(request: Any, history: list[Any]) -> Any:
        if not isinstance(request, dict):
            return request
        _, _, own = thread(request, None)
        return {
            **{k: v for k, v in request.items() if k != previous},
            "input": [*history, *own],
        }

    return standalone


#: The ``type`` of a WebSocket turn's request envelope (see :attr:`WsTurns.gathers`).
WS_TURN = "looptap.ws_turn"


def is_ws_turn(body: Any) -> TypeGuard[dict[str, Any]]:
    """``body`` is a WebSocket turn's request envelope (gathered client messages)."""
    return isinstance(body, dict) and body.get("type") == WS_TURN


@dataclass(frozen=True)
class WsTurns:
    """How an API's WebSocket messages make turns. Each rule is given a message's JSON (or
    ``None`` when it is not JSON)."""

    #: A client message that starts a turn (the turn's request).
    opens: Callable[[Any], bool]
    #: A server message that ends the turn (its terminal event).
    closes: Callable[[Any], bool]
    #: Client messages gathered into the next turn's request (a Realtime session's items and
    #: settings). With it, a turn's request body is an envelope, ``{"type": "looptap.ws_turn",
    #: "connection", "previous_response_id", "events": [the gathered messages…, the opener]}``;
    #: without it, the request body is the opener as sent.
    gathers: Callable[[Any], bool] | None = None
    #: The response id in a closing message (an envelope's ``previous_response_id`` for the next
    #: turn, so the turns of one connection thread into one conversation).
    response_id: Callable[[Any], str | None] | None = None
    #: A message with its bulky payloads replaced (audio by size and hash), or ``None`` to keep it.
    scrub: Callable[[Any], Any] | None = None
    #: How a turn continues an answer the server keeps, for a session that goes live part-way (a
    #: fork's cursor, docs/fork.md).
    chaining: Chaining | None = None


class WsProvider(Provider):
    """An API spoken only as WebSocket sessions at its own paths (OpenAI Realtime, Gemini Live):
    a turn's envelope there is surely its own, anything else there probably is."""

    #: How its messages make turns.
    turns: ClassVar[WsTurns]
    #: How a turn's gathered client messages fold into its request.
    gathered: ClassVar[type[WsRequest]]

    def at(self, url: SplitResult) -> bool:
        """Whether ``url`` is one of the API's session paths."""
        raise NotImplementedError

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if not self.at(url):
            return 0
        return 3 if is_ws_turn(body) else 2

    def ws_turns(self) -> WsTurns:
        return self.turns

    def session_model(self, named: str | None, url: SplitResult) -> str | None:
        """The model of a turn whose messages named ``named`` (the session's URL may name it)."""
        return named or self.model_from_url(url)

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        """A turn's envelope: its gathered messages folded in order, threaded to the connection's
        previous turn."""
        b = as_obj(body)
        req = self.gathered()
        for ev in b.get("events") or []:
            if isinstance(ev, dict):
                req.take(ev)
        return NormalisedRequest(
            family=self.family,
            model=self.session_model(req.model, url),
            stream=True,
            system=req.system,
            messages=req.messages,
            tools=req.tools,
            params=req.params,
            previous_response_id=as_str(b.get("previous_response_id")),
        )


class WsRequest:
    """A WebSocket turn's client messages folded into one request, each read by the API's
    :meth:`take`, in order."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.system: list[Part] = []
        self.tools: list[ToolSpec] = []
        self.params: dict[str, Any] = {}
        self.messages: list[Message] = []

    def take(self, ev: dict[str, Any]) -> None:
        raise NotImplementedError


def audio_ref(data: str) -> dict[str, Any]:
    """A base64 audio payload as stored: its decoded size and hash (the audio itself is dropped)."""
    import base64
    import binascii
    import hashlib

    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raw = data.encode("utf-8", "surrogateescape")
    return {"looptap_audio": {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}}
