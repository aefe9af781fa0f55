"""What every provider adapter has: one small surface and the helpers they share.

An adapter recognises its traffic and parses it into :mod:`cassettes.models`:

* :meth:`Provider.recognise` — a score for (method, URL, body); 0 means "not mine";
* :meth:`Provider.operation` — ``generate`` for a model call, or what else the endpoint does
  (``count_tokens``, ``retrieve`` …; only ``generate`` round trips are parsed further);
* :meth:`Provider.parse_request` — the request body → :class:`NormalisedRequest`;
* :meth:`Provider.parse_response` — a non-streamed 2xx body → :class:`NormalisedResponse`;
* :meth:`Provider.reassemble` — a framed stream → the same :class:`NormalisedResponse` a
  non-streamed call would give, with ``complete`` decided by the terminal event;
* :meth:`Provider.parse_error` — an error body → :class:`ApiError`.

Besides parsing, an adapter holds two objects it does not inherit: ``profile``, the API's
constants and capabilities as data (:class:`~cassettes.providers._profile.Profile`: pairing
errors, result layout, price and telemetry names, what replay matching ignores, key variables),
and ``replay``, how replay answers as the API (:class:`~cassettes.providers._replay.ReplayShapes`:
error and fault bodies, a rendered answer, a continuation), a family's own in its module.

Adapters must be lenient: unknown keys and enum values are kept (``provider_details``), missing
fields become ``None``. They may raise on hopeless input; the caller turns that into a labelled
analysis error and keeps the raw round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TypeGuard
from urllib.parse import SplitResult

import orjson

from cassettes import bounds
from cassettes.models import (
    USAGE_COUNTS,
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolCall,
    ToolSpec,
    Usage,
)
from cassettes.providers._profile import FREE_FORM_FIELDS, Profile, usage_keys
from cassettes.providers._replay import Rendered, ReplayShapes, reset_at, retry_after_value
from cassettes.wire.framing import Event, Framed

__all__ = [
    "FREE_FORM_FIELDS",
    "WS_TURN",
    "Chaining",
    "Profile",
    "Provider",
    "Rendered",
    "ReplayShapes",
    "WsRequest",
    "WsTurns",
    "answer_calls",
    "answer_text",
    "arguments_not_json",
    "as_int",
    "as_obj",
    "as_str",
    "audio_ref",
    "aws_payload_bytes",
    "azure_deployment",
    "call_arguments_object",
    "call_arguments_text",
    "compact_json",
    "error_from_body",
    "finish_lookup",
    "function_spec",
    "inline_history",
    "is_ws_turn",
    "json_events",
    "media_part",
    "other_spec",
    "parse_arguments",
    "pieces",
    "reset_at",
    "retry_after_value",
    "sse",
    "summed_usage",
    "text_of",
    "tool_call_from_object",
    "tool_call_from_string",
    "tool_choice_mode",
    "usage_keys",
]


class Provider:
    """One API family's adapter: recognising and parsing its traffic (below), with its
    ``profile`` (the API's constants) and its ``replay`` shapes, which it holds."""

    family: ClassVar[str] = "unknown"
    #: The API's constants and capabilities (the defaults: an API that says none of them).
    profile: ClassVar[Profile] = Profile()
    #: How replay answers as this API (the default: OpenAI's shapes).
    replay: ClassVar[ReplayShapes] = ReplayShapes()
    #: Operations that poll for a model call's answer (a stored response, a run's status). A poll
    #: whose answer carries tool calls for the client is read as the model call that delivered
    #: them (:func:`cassettes.parsing.roundtrip.parse_exchange`): a turn that continues the call it
    #: polls, so the results the client sends next answer calls the analysis has seen.
    poll_operations: ClassVar[frozenset[str]] = frozenset()
    #: The top-level keys that may hold the resent history (none: a prompt, or a server-kept one).
    history_keys: ClassVar[tuple[str, ...]] = ("messages", "contents", "input")

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        raise NotImplementedError

    def operation(self, method: str, url: SplitResult) -> str:
        return "generate"

    def parses(self, operation: str) -> bool:
        """Whether round trips of ``operation`` have their request and response parsed. Only
        ``generate`` calls are turns of a loop; a family that also reads a non-loop call (an
        embedding: usage and cost, no messages) adds its operation here."""
        return operation == "generate"

    def add_header_facts(
        self, response: NormalisedResponse, header: Callable[[str], str | None]
    ) -> None:
        """Complete a parsed response from the response headers (some APIs report usage only
        there). ``header`` looks a header up by name, case-insensitively."""

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

    def parse_response(self, body: Any) -> NormalisedResponse:
        raise NotImplementedError

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        raise NotImplementedError

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        return error_from_body(body, status)

    def error_answer(self, body: Any) -> NormalisedResponse:
        """A success's body that holds an error instead of an answer: :meth:`parse_error`'s
        error, the answer finished as ``error`` and complete."""
        return NormalisedResponse(
            error=self.parse_error(body, None), finish_reason=FinishReason.ERROR, complete=True
        )

    def item_path(self, body: Any, message_index: int, part_index: int | None = None) -> str | None:
        """The JSON path of a normalised history message (and one of its parts) in the request as
        sent, when the wire does not hold one item per message (``None``: ``KEY[message_index]``
        is right). Only asked when a finding needs a path."""
        return None

    def volatile_ids(self, body: Any, url: SplitResult) -> list[str]:
        """(Replay, beside ``replay``: it needs the parser.) Ids in a request body that differ from
        run to run (tool-call ids, made up by the model or the client): matching remaps them
        consistently instead of comparing them."""
        try:
            req = self.parse_request(body, url)
        except Exception:
            return []
        out: list[str] = []
        for m in req.messages:
            for p in m.parts:
                if p.tool_call is not None and p.tool_call.id:
                    out.append(p.tool_call.id)
                if p.tool_result is not None and p.tool_result.call_id:
                    out.append(p.tool_result.call_id)
        return out

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
        try:
            req = self.parse_request(body, url)
        except Exception:
            return []
        names = {
            p.tool_call.id: p.tool_call.name
            for m in req.messages
            for p in m.parts
            if p.tool_call is not None and p.tool_call.id
        }
        results = [
            p.tool_result for m in req.messages for p in m.parts if p.tool_result is not None
        ]
        if not results:
            return []
        return _locate_results(
            body,
            [
                (r.call_id, r.name or (names.get(r.call_id) if r.call_id else None), r.content)
                for r in results
            ],
        )

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


def sse(obj: Any, event: str | None = None) -> bytes:
    """One server-sent event carrying ``obj`` as JSON (with an ``event:`` line when named)."""
    head = b"event: %s\n" % event.encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def pieces(text: str, n: int = 3) -> list[str]:
    """``text`` in up to ``n`` consecutive pieces (a stream's deltas); none for an empty text."""
    if not text:
        return []
    step = max(1, -(-len(text) // n))
    return [text[i : i + step] for i in range(0, len(text), step)]


def answer_text(answer: NormalisedResponse, kind: str = "text") -> str:
    return "".join(p.text or "" for p in answer.parts if p.kind == kind)


def answer_calls(answer: NormalisedResponse) -> list[ToolCall]:
    """The answer's calls of the client's own functions (the server-side tools ran at the API and
    are not the client's to run: they are left out of a rendered answer)."""
    return [
        p.tool_call
        for p in answer.parts
        if p.kind == "tool_call" and p.tool_call is not None and p.tool_call.kind == "function"
    ]


def call_arguments_text(call: ToolCall) -> str:
    """A call's arguments as the string a string-carrying API sends (cut ones stay cut)."""
    if call.arguments_raw is not None:
        return call.arguments_raw
    return compact_json(call.arguments if call.arguments is not None else {})


def arguments_not_json(calls: list[ToolCall]) -> bool:
    """A call's arguments are text that is not JSON: an API that sends arguments as an object
    cannot carry them."""
    return any(c.arguments is None and c.arguments_raw is not None for c in calls)


def call_arguments_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object an object-carrying API sends."""
    return call.arguments if isinstance(call.arguments, dict) else {}


def finish_lookup(
    table: dict[str, FinishReason], raw: str | None, has_calls: bool = False
) -> FinishReason | None:
    """The G.1 class of a raw finish value: ``None`` when absent, ``unknown`` for an empty string,
    ``other`` for a value the table does not know (kept raw by the caller). A turn that carries
    tool calls but says it completed (Cohere v1, Gemini- and Ollama-compatible servers) is a tool
    call."""
    if raw is None:
        return None
    cls = table.get(raw, FinishReason.UNKNOWN if raw == "" else FinishReason.OTHER)
    return FinishReason.TOOL_CALL if cls is FinishReason.COMPLETE and has_calls else cls


def json_events(framed: Framed) -> Iterator[tuple[str | None, Any]]:
    """A stream's events as (event name, parsed JSON payload), in order. The ``[DONE]`` sentinel
    is yielded as ``("[DONE]", None)``; a payload that is not JSON as (name, ``None``); empty
    payloads (keep-alives) are skipped."""
    for ev in framed.events:
        data = ev.data.strip()
        if not data:
            continue
        if data == "[DONE]":
            yield "[DONE]", None
            continue
        try:
            yield ev.event, bounds.loads(data)
        except orjson.JSONDecodeError:
            yield ev.event, None


def aws_payload_bytes(ev: Event) -> bytes | None:
    """The bytes an AWS event-stream ``chunk`` / ``PayloadPart`` frame carries: the base64
    ``{"bytes": …}`` / ``{"Bytes": …}`` of InvokeModel streams, or the raw payload of SageMaker's.
    ``None`` for exception and error frames and undecodable payloads."""
    import base64
    import binascii

    if (ev.headers or {}).get(":message-type") in ("exception", "error"):
        return None
    data = ev.data.strip()
    if data.startswith("{"):
        try:
            payload = bounds.loads(data)
        except orjson.JSONDecodeError:
            payload = None
        if isinstance(payload, dict):
            b64 = payload.get("bytes", payload.get("Bytes"))
            if isinstance(b64, str):
                try:
                    return base64.b64decode(b64)
                except (binascii.Error, ValueError):
                    return None
    return ev.data.encode()


def azure_deployment(url: SplitResult) -> str | None:
    """The deployment name of an Azure OpenAI URL (``/openai/deployments/{name}/…``): on Azure the
    deployment, not the body, chooses the model."""
    parts = url.path.split("/")
    if "deployments" in parts:
        i = parts.index("deployments")
        return parts[i + 1] if i + 1 < len(parts) else None
    return None


def as_obj(v: Any) -> dict[str, Any]:
    """``v`` when it is a JSON object, else an empty one (lenient reads of optional objects)."""
    return v if isinstance(v, dict) else {}


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None




def summed_usage(inp: int | None, out: int | None, raw: Any) -> Usage | None:
    """The usage of an API that reports an input and an output count but no total: ``None`` when
    it reports neither, the total their sum when it reports both."""
    if inp is None and out is None:
        return None
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out if inp is not None and out is not None else None,
        raw=raw or None,
    )


def latest_count(before: int | None, now: int | None) -> int | None:
    """A count a stream repeats on its chunks: the latest, unless it is absent or 0 after a count
    (:func:`merged_usage`)."""
    return before if not now and before else now if now is not None else before


def merged_usage(before: Usage | None, now: Usage | None) -> Usage | None:
    """The usage of a stream that reports it on more than one chunk: each count as the latest
    chunk gives it, except that a 0 or an absent count never replaces the count an earlier chunk
    gave (watsonx sends the input count on its first chunk and 0 on the later ones; vLLM and Gemini
    repeat cumulative counts, the latest the largest). The total then covers what was kept."""
    if before is None or now is None:
        return now or before
    kept = {
        k: getattr(before, k)
        for k in USAGE_COUNTS
        if latest_count(getattr(before, k), getattr(now, k)) != getattr(now, k)
    }
    if not kept:
        return now
    merged = now.model_copy(update=kept)
    if isinstance(before.raw, dict) and isinstance(now.raw, dict):
        merged.raw = {
            **now.raw,
            **{k: v for k, v in before.raw.items() if v and not now.raw.get(k)},
        }
    if merged.input_tokens is not None and merged.output_tokens is not None:
        merged.total_tokens = max(
            merged.total_tokens or 0, merged.input_tokens + merged.output_tokens
        )
    return merged


def as_str(v: Any) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else str(v)


def compact_json(v: Any) -> str:
    return orjson.dumps(v).decode()


def parse_arguments(raw: str | None) -> tuple[Any, str | None]:
    """Parse a tool call's argument string. Empty means ``{}`` (what SDKs send for no arguments)."""
    if raw is None:
        return None, None
    if not raw.strip():
        return {}, None
    try:
        return bounds.loads(raw), None
    except orjson.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON: {exc}"


def tool_call_from_string(call_id: Any, name: Any, raw: Any, kind: str = "function") -> ToolCall:
    raw_s = raw if isinstance(raw, str) else (compact_json(raw) if raw is not None else None)
    parsed, err = parse_arguments(raw_s)
    return ToolCall(
        id=as_str(call_id) or None,
        name=as_str(name),
        arguments=parsed,
        arguments_raw=raw_s,
        arguments_error=err,
        kind=kind,
    )


def tool_call_from_object(call_id: Any, name: Any, args: Any, kind: str = "function") -> ToolCall:
    """A call whose arguments travel as a JSON object (Anthropic, Gemini, Ollama, Bedrock)."""
    if isinstance(args, str):
        return tool_call_from_string(call_id, name, args, kind)
    return ToolCall(
        id=as_str(call_id) or None,
        name=as_str(name),
        arguments=args,
        arguments_raw=compact_json(args) if args is not None else None,
        kind=kind,
    )


#: The modes a ``tool_choice`` string names, in the normalised spelling (Cohere v2 sends capitals).
_MODES = {"AUTO": "auto", "NONE": "none", "REQUIRED": "required"}


def tool_choice_mode(tc: Any) -> str | None:
    """The normalised mode of an OpenAI-style ``tool_choice`` (Chat Completions, and Cohere v2's
    ``REQUIRED`` / ``NONE``): ``auto``, ``none`` or ``required`` in any case, another string as
    sent, ``tool:NAME`` for a forced function or custom tool, an ``allowed_tools`` object's mode."""
    if tc is None:
        return None
    if isinstance(tc, str):
        return _MODES.get(tc.upper(), tc)
    if isinstance(tc, dict):
        for key in ("function", "custom"):
            if isinstance(tc.get(key), dict) and tc[key].get("name"):
                return f"tool:{tc[key]['name']}"
        if tc.get("name"):
            return f"tool:{tc['name']}"
        if isinstance(tc.get("allowed_tools"), dict):
            return as_str(tc["allowed_tools"].get("mode"))
        return as_str(tc.get("mode") or tc.get("type"))
    return None


def function_spec(f: dict[str, Any]) -> ToolSpec:
    """A function tool as OpenAI declares one (``name``, ``description``, JSON-schema
    ``parameters``): Chat's ``tools[].function`` and ``functions[]``, the Responses, Realtime and
    Assistants APIs' function tools, Ollama's, Cohere v2's and Gemini Interactions'."""
    params = f.get("parameters")
    return ToolSpec(
        name=as_str(f.get("name")) or "",
        description=as_str(f.get("description")),
        parameters=params if isinstance(params, dict) else None,
    )


def other_spec(t: dict[str, Any]) -> ToolSpec:
    """A tool that is no function (a provider's built-in), named by its name or else its type."""
    return ToolSpec(
        name=as_str(t.get("name") or t.get("type")) or "", kind=as_str(t.get("type")) or "other"
    )


def text_of(content: Any) -> str:
    """Flatten a content value (string, list of text-ish blocks, object) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_block_text(b) for b in content)
    if isinstance(content, dict):
        return _block_text(content)
    return str(content)


def _block_text(b: Any) -> str:
    if isinstance(b, str):
        return b
    if not isinstance(b, dict):
        return str(b)
    for key in ("text", "output", "content", "refusal"):
        v = b.get(key)
        if isinstance(v, str):
            return v
        if isinstance(v, list):
            return text_of(v)
    kind = b.get("type") or next(iter(b), "part")
    media = b.get("mime_type") or b.get("media_type") or b.get("mimeType")
    if media is None and isinstance(b.get("source"), dict):
        media = b["source"].get("media_type")
    return f"[{kind}{': ' + media if media else ''}]"


def media_part(block: dict[str, Any], media_type: str | None) -> Part:
    return Part(kind="media", media_type=media_type, provider_details={"block": block})


def error_from_body(body: Any, status: int | None, in_stream: bool = False) -> ApiError:
    """The common error shapes: ``{"error": {...}}``, ``{"error": "text"}``, ``{"message":
    ...}``."""
    if isinstance(body, list) and body:
        body = body[0]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return ApiError(
            status=status if status is not None else as_int(err.get("code")),
            type=as_str(err.get("type") or err.get("status")),
            code=as_str(err.get("code")),
            message=as_str(err.get("message")),
            in_stream=in_stream,
            raw=body,
        )
    if isinstance(err, str):
        return ApiError(status=status, message=err, in_stream=in_stream, raw=body)
    if isinstance(body, dict):
        msg = body.get("message") or body.get("Message") or body.get("detail")
        return ApiError(
            status=status,
            type=as_str(body.get("type") or body.get("__type") or body.get("code")),
            message=as_str(msg),
            in_stream=in_stream,
            raw=body,
        )
    return ApiError(status=status, message=as_str(body), in_stream=in_stream, raw=body)


#: Keys of a tool *call*'s object (its arguments): an object with one is never a result's.
_CALL_KEYS = frozenset({"input", "arguments", "args", "function"})
#: How deep and how many objects :func:`_locate_results` looks at (a body is untrusted).
_LOCATE_DEPTH = 16
_LOCATE_NODES = 200_000


def _locate_results(
    body: Any, results: list[tuple[str | None, str | None, str]]
) -> list[tuple[tuple[str | int, ...], str | None]]:
    """For :meth:`Provider.tool_result_paths`: each result's content path, found in body order."""
    out: list[tuple[tuple[str | int, ...], str | None]] = []
    pending = [r for r in results if r[2] and (r[0] or r[1])]
    for node, path in _objects_in_order(body):
        if not pending:
            break
        if _CALL_KEYS & node.keys():
            continue
        found = _result_in(node, pending)
        if found is not None:
            j, key = found
            out.append(((*path, key), pending[j][1]))
            del pending[j]
    return out


def _objects_in_order(body: Any) -> list[tuple[dict[str, Any], tuple[str | int, ...]]]:
    """The objects of ``body`` with their paths, in document order (a pre-order walk), no deeper
    than ``_LOCATE_DEPTH`` and within ``_LOCATE_NODES`` nodes visited."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(body, ())]
    seen = 0
    order: list[tuple[dict[str, Any], tuple[str | int, ...]]] = []
    while stack and seen < _LOCATE_NODES:
        node, path = stack.pop()
        seen += 1
        if len(path) > _LOCATE_DEPTH:
            continue
        if isinstance(node, dict):
            order.append((node, path))
            stack.extend(
                (v, (*path, k))
                for k, v in reversed(list(node.items()))
                if isinstance(v, (dict, list))
            )
        elif isinstance(node, list):
            stack.extend(
                (v, (*path, i))
                for i, v in reversed(list(enumerate(node)))
                if isinstance(v, (dict, list))
            )
    return order


def _result_in(
    node: dict[str, Any], pending: list[tuple[str | None, str | None, str]]
) -> tuple[int, str] | None:
    """The first pending result ``node`` holds — it carries the result's call id (or, without one,
    its name) and a value that flattens to its content — as (its index in ``pending``, the key
    of that value); ``None`` when it holds none."""
    values = {v for v in node.values() if isinstance(v, str)}
    for j, (call_id, name, content) in enumerate(pending):
        ident = call_id or name
        if ident not in values:
            continue
        key = next(
            (
                k
                for k, v in node.items()
                if not (isinstance(v, str) and v in (call_id, name)) and _flattens_to(v, content)
            ),
            None,
        )
        if key is not None:
            return j, key
    return None


def _flattens_to(value: Any, content: str) -> bool:
    """Whether ``value`` is what an adapter flattened to ``content`` (its text, or its JSON)."""
    if isinstance(value, str):
        return value == content
    try:
        return text_of(value) == content or compact_json(value) == content or (
            isinstance(value, dict) and len(value) == 1 and next(iter(value.values())) == content
        )
    except Exception:
        return False
