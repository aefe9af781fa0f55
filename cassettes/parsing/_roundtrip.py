"""One raw :class:`~cassettes.wire.Exchange` → its parse, a :class:`RoundTrip`.

This is the single entry point from raw bytes to meaning: pick the adapter, frame the body, parse
or reassemble, and record every problem as a labelled analysis error instead of raising. Whatever
goes wrong here, the caller still has the raw exchange and a parse that says what is missing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, Field, PrivateAttr

from .. import providers
from ..models import FinishReason, Message, NormalisedRequest, NormalisedResponse, Part
from ..wire import Exchange, Framed, cut_by_client, form_fields, frame

__all__ = [
    "MAX_PARSE_BYTES",
    "ReadState",
    "RoundTrip",
    "parse_all",
    "parse_exchange",
    "side_call",
]

#: How a round trip was read (:attr:`RoundTrip.read`).
ReadState = Literal["complete", "partial", "unread"]

#: Analysis errors that are facts of the wire, all of it read: nothing of the call is unread.
_WIRE_FACTS = frozenset(
    {"no response recorded", "empty response body", "request has no body: nothing to parse"}
)

#: Bodies larger than this are kept but not parsed (a labelled partial result).
MAX_PARSE_BYTES = 50 * 1024 * 1024

#: Path fragments that make unknown traffic "LLM-looking": recorded raw and labelled ``unknown``.
_LLM_HINTS = (
    "/chat",
    "/completions",
    "/messages",
    "/responses",
    "/generate",
    "/predict",
    "/converse",
    "/invoke",
    "/embed",
)


class RoundTrip(BaseModel):
    """The parse of one round trip (recomputable from the raw exchange at any time)."""

    seq: int | None = None
    #: An adapter's family, ``unknown`` for LLM-looking traffic no adapter claims, ``none`` for
    #: other HTTP traffic (file downloads, OAuth …).
    family: str
    operation: str | None = None
    method: str
    url: str
    status: int | None = None
    stream: bool = False
    framing: str | None = None
    request: NormalisedRequest | None = None
    response: NormalisedResponse | None = None
    ttfb: float | None = None
    #: Offset of the first stream event, when chunk times were recorded.
    ttft: float | None = None
    duration: float | None = None
    transport_error: str | None = None
    notes: list[str] = Field(default_factory=list)
    analysis_errors: list[str] = Field(default_factory=list)
    #: Raw history length and the system parts that came from history messages, kept so a later
    #: request extending this one can be parsed incrementally (only what it appended).
    _raw_history_len: int | None = PrivateAttr(default=None)
    _history_system: list[Part] | None = PrivateAttr(default=None)
    #: Set when the request was parsed incrementally: its first ``keep`` messages are the base's.
    _reused: tuple[int, int] | None = PrivateAttr(default=None)
    #: For a poll read as the model call that delivered the calls it returned
    #: (``_poll_delivered``): the operation its route named (``retrieve``).
    _polled_from: str | None = PrivateAttr(default=None)

    @property
    def polled(self) -> bool:
        """A poll read as the model call that delivered the tool calls it returned."""
        return self._polled_from is not None

    @property
    def reused(self) -> tuple[int, int] | None:
        """(seq of the base, messages kept) when the request was parsed incrementally: its first
        ``keep`` messages are the base's (the threader reuses their keys); ``None`` otherwise."""
        return self._reused

    def forget_history_base(self) -> None:
        """This round trip is no longer a base for parsing a later request incrementally (its
        history was released); a request that extends it is parsed in full."""
        self._raw_history_len = None
        self._history_system = None

    @property
    def cut_by_client(self) -> bool:
        """Cut because the client hung up before the answer's end
        (:func:`~cassettes.wire.cut_by_client`), not by the upstream or the network."""
        return cut_by_client(self.transport_error)

    @property
    def complete(self) -> bool | None:
        if self.transport_error:
            return False
        return self.response.complete if self.response else None

    @property
    def unread(self) -> list[str]:
        """What of this round trip looptap could not read (issue 92): the request's and the
        answer's :attr:`~cassettes.models.NormalisedRequest.unread` labels, then what could not be
        parsed at all (``analysis_errors``)."""
        if self.family == "unknown":
            return ["a call of an API looptap does not read", *self.analysis_errors]
        out = list(self.request.unread) if self.request is not None else []
        if self.response is not None:
            out += [f"answer: {u}" for u in self.response.unread]
        return out + [e for e in self.analysis_errors if e not in _WIRE_FACTS]

    @property
    def read(self) -> ReadState | None:
        """How looptap read this round trip: ``complete`` (all of it), ``partial`` (some of it:
        :attr:`unread` says what not) or ``unread`` (an LLM-looking call no adapter reads, or
        one of which neither side could be parsed). ``None`` for traffic that is not an LLM
        API's (family ``none``, a tool's HTTP call): looptap claims nothing of it."""
        if self.family == "unknown":
            return "unread"
        if self.family == "none" or self.operation in (None, "tool_http", "websocket"):
            return None
        if not self.unread:
            return "complete"
        return "unread" if self.request is None and self.response is None else "partial"


def _looks_llm(url: SplitResult, body: Any) -> bool:
    if isinstance(body, dict) and (
        "messages" in body
        or "contents" in body
        or ("input" in body and "model" in body)
        or "prompt" in body
    ):
        return True
    return any(h in url.path for h in _LLM_HINTS) and isinstance(body, dict)


def parse_exchange(ex: Exchange, base: RoundTrip | None = None) -> RoundTrip:
    """Parse one exchange. Never raises: every problem becomes an ``analysis_errors`` entry.

    ``base`` is the parsed round trip that ``ex.history_delta`` says this request extends (the
    cassette reader records it). Then only the appended part of the history is parsed and the
    kept part is shared with ``base``, so parsing a long run costs what it appended, not what it
    re-sent. The result is the same as a full parse (``tests`` check it on the corpus).
    """
    try:
        url = urlsplit(ex.url)
    except ValueError:
        url = urlsplit("")
    rt = RoundTrip(
        seq=ex.seq,
        family="none",
        method=ex.method,
        url=ex.url,
        status=ex.status,
        ttfb=ex.ttfb,
        duration=ex.duration,
        transport_error=ex.transport_error,
        notes=list(ex.notes),
    )
    if ex.tool:
        # a tool's HTTP call (the recorder took it to a host that is not an LLM API's): never read
        # as a model's, whatever its body looks like; the analysis links it to the tool call it
        # served (cassettes.analysis._tool_http)
        rt.operation = "tool_http"
        return rt
    try:
        _parse_into(rt, ex, url, base)
    except Exception as exc:  # a bug in an adapter must never lose the round trip
        rt.analysis_errors.append(f"internal error while parsing: {type(exc).__name__}: {exc}")
    _trace_unread(rt, ex)
    return rt


def _trace_unread(rt: RoundTrip, ex: Exchange) -> None:
    """What an imported trace did not keep (the importer's ``reconstructed["unread"]``: the call's
    ``messages``, its ``answer``, a part of it such as its ``tool call ids``) joins the round
    trip's unread labels, so its read state says it and no finding rests on it."""
    said = (ex.reconstructed or {}).get("unread")
    if not isinstance(said, list) or rt.request is None:
        return
    if "messages" in said:
        rt.request.unread.append("messages: not kept by the trace")
    if "answer" in said:
        where = rt.response.unread if rt.response is not None else rt.request.unread
        where.append(
            "answer: not kept by the trace" if rt.response is None else "not kept by the trace"
        )
    for label in said:
        if isinstance(label, str) and label not in ("messages", "answer"):
            asked = label.startswith("messages:")  # (a part of the request: its history)
            answer = rt.response is not None and not asked
            where = rt.response.unread if answer and rt.response else rt.request.unread
            kept = label.endswith("not read")  # (kept by the trace, not read of it: n=2)
            where.append(label[:80] if kept else f"{label[:80]}: not kept by the trace")


_SYSTEM_ROLES = ("system", "developer")


def _history_system(messages: list[Message]) -> list[Part]:
    return [p for m in messages if m.role in _SYSTEM_ROLES for p in m.parts]


def _ends_with(parts: list[Part], tail: list[Part]) -> bool:
    n = len(tail)
    return n <= len(parts) and all(
        a is b for a, b in zip(parts[len(parts) - n :], tail, strict=True)
    )


def _incremental(
    adapter: providers.Provider,
    body: dict[str, Any],
    url: SplitResult,
    ex: Exchange,
    base: RoundTrip,
) -> tuple[NormalisedRequest, list[Part]] | None:
    """Parse only the appended history, when the adapter maps raw history items to messages one
    to one (checked on ``base``) and builds ``system`` as top-level parts + history system parts."""
    delta = ex.history_delta or {}
    req = base.request
    keep = delta.get("keep")
    # The private attributes read once each (pydantic serves them through a slow __getattr__).
    raw_len: int | None = base._raw_history_len
    base_system: list[Part] | None = base._history_system
    if req is None or raw_len is None or base_system is None or not isinstance(keep, int):
        return None
    key = req.history_key
    hist = body.get(key) if key else None
    if key is None or not isinstance(hist, list) or not 0 <= keep <= min(len(hist), raw_len):
        return None
    if raw_len != len(req.messages) or not _ends_with(req.system, base_system):
        return None
    if 0 < keep < len(hist) and adapter.joins(hist[keep - 1], hist[keep]):
        # the first appended item continues the last kept message: only the full parse says how
        return None
    partial = adapter.parse_request({**body, key: hist[keep:]}, url)
    appended_system = _history_system(partial.messages)
    if (
        partial.history_key != key
        or len(partial.messages) != len(hist) - keep
        or not _ends_with(partial.system, appended_system)
    ):
        return None
    kept_system = base_system if keep == len(req.messages) else _history_system(req.messages[:keep])
    top = partial.system[: len(partial.system) - len(appended_system)]
    partial.messages = req.messages[:keep] + partial.messages
    partial.system = top + kept_system + appended_system
    # offered inside the kept history (Responses' additional_tools)
    kept_tools = adapter.history_tools(hist[:keep])
    if kept_tools:
        appended_tools = adapter.history_tools(hist[keep:])
        cut = len(partial.tools) - len(appended_tools)
        partial.tools = partial.tools[:cut] + kept_tools + partial.tools[cut:]
    return partial, kept_system + appended_system


def parse_request_side(
    rt: RoundTrip,
    adapter: providers.Provider,
    body: Any,
    url: SplitResult,
    ex: Exchange,
    base: RoundTrip | None,
) -> None:
    got = None
    if base is not None and ex.history_delta and isinstance(body, dict):
        got = _incremental(adapter, body, url, ex, base)
        if got is not None and base.seq is not None:
            rt._reused = (base.seq, int(ex.history_delta["keep"]))
    if got is None:
        req = adapter.parse_request(body, url)
        got = req, _history_system(req.messages)
    req, rt._history_system = got
    hist = body.get(req.history_key) if isinstance(body, dict) and req.history_key else None
    rt._raw_history_len = len(hist) if isinstance(hist, list) else None
    rt.request = req
    _said_unread(req, base.request if base is not None and rt._reused else None)


#: Most labels of parts looptap could not read said per request or answer (the rest counted).
MAX_UNREAD_SAID = 16


def unknown_shape(p: Part) -> str | None:
    """What ``p`` is when it is of a shape its reader did not know (a part kept as its raw block,
    nothing read of it): the block's ``type`` or ``"part"``; ``None`` for every part read as what
    it is (server tools' blocks and other parts read with their facts included)."""
    d = p.provider_details
    if p.kind != "other" or not d or "block" not in d or not set(d) <= {"block", "type"}:
        return None
    t = d.get("type")
    if not isinstance(t, str):
        raw = d["block"]
        t = raw.get("type") if isinstance(raw, dict) else None
    return f"a {t[:40]!r} block" if isinstance(t, str) and t else "a part"


def _said(labels: list[str], more: int) -> list[str]:
    return labels + ([f"{more} more parts, not read"] if more else [])


def _said_unread(req: NormalisedRequest, base: NormalisedRequest | None) -> None:
    """Fill ``req.unread`` with the history's parts of an unknown shape (each with its message),
    reusing the base request's labels for the messages it shares with it (an incremental parse
    scans only the appended ones)."""
    msgs = req.messages
    start = 0
    if base is not None:
        for a, b in zip(msgs, base.messages, strict=False):
            if a is not b:
                break
            start += 1
        kept = [u for u in base.unread if (_message_no(u) or start + 1) <= start]
    else:
        kept = []
    labels, more = list(kept), 0
    for i, m in enumerate(msgs[start:], start + 1):
        for p in m.parts:
            what = unknown_shape(p)
            if what is None:
                continue
            if len(labels) < MAX_UNREAD_SAID:
                role = "".join(c for c in m.role[:20] if c.isprintable())
                labels.append(f"message {i} ({role}): {what}, not read")
            else:
                more += 1
    if labels or more:
        req.unread = _said(labels, more) + [u for u in req.unread if _message_no(u) is None]


def _message_no(label: str) -> int | None:
    head = label.split(" ", 2)
    return int(head[1]) if head[0] == "message" and len(head) > 1 and head[1].isdigit() else None


#: The keys of ``provider_details`` where a family's reader counts an answer's alternatives
#: (``n`` > 1: Chat Completions' and Completions' ``choices``, Gemini's ``candidates``, Aleph
#: Alpha's ``completions``): only the first is read.
_ALTERNATIVES = ("choices", "candidates", "completions")


def said_unread_answer(resp: NormalisedResponse) -> None:
    """Fill ``resp.unread`` with the answer's parts of an unknown shape, and its alternatives
    beyond the first (``n=2``): not read, so nothing is judged of the answer."""
    details = resp.provider_details or {}
    for key in _ALTERNATIVES:
        n = details.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n > 1:
            resp.unread.append(f"{key} 2 to {n} of {n} (n={n}): only the first is read")
    labels: list[str] = []
    more = 0
    for i, p in enumerate(resp.parts, 1):
        what = unknown_shape(p)
        if what is None:
            continue
        if len(labels) < MAX_UNREAD_SAID:
            labels.append(f"part {i}: {what}, not read")
        else:
            more += 1
    if labels or more:
        resp.unread[:0] = _said(labels, more)


#: How many unknown event types an unread label names (the rest are counted).
_EVENT_TYPES_SAID = 8


def said_unread_events(resp: NormalisedResponse) -> None:
    """Say, in ``resp.unread``, the stream's events the family's reader could not read: payloads
    that are not JSON (``unparsed_events``) and events of a type it does not know
    (``unknown_events``). Skipped before, they now make the answer partial, so no finding rests
    on an answer some of whose events were not read (issue 92)."""
    details = resp.provider_details or {}
    n = details.get("unparsed_events")
    if isinstance(n, int) and n > 0:
        resp.unread.append(f"stream: {n} event{'s' if n != 1 else ''} not JSON, not read")
    kinds = details.get("unknown_events")
    if isinstance(kinds, list) and kinds:
        names = sorted({str(k)[:40] if k is not None else "(unnamed)" for k in kinds})
        said = ", ".join(names[:_EVENT_TYPES_SAID])
        more = len(names) - _EVENT_TYPES_SAID
        resp.unread.append(
            f"stream: events of a type looptap does not read ({said}"
            + (f" and {more} more)" if more > 0 else ")")
        )


def parse_all(exchanges: Iterable[Exchange]) -> list[RoundTrip]:
    """Parse a run in order, each request against the earlier one its history delta names."""
    out: list[RoundTrip] = []
    by_seq: dict[int, RoundTrip] = {}
    for ex in exchanges:
        base_seq = (ex.history_delta or {}).get("base")
        rt = parse_exchange(ex, by_seq.get(base_seq) if isinstance(base_seq, int) else None)
        if ex.seq is not None:
            by_seq[ex.seq] = rt
        out.append(rt)
    return out


def _request_body(rt: RoundTrip, ex: Exchange) -> tuple[bool, Any]:
    """(whether the request body is over the analysis limit, its JSON or ``None``), with what
    limited its reading said in ``rt.analysis_errors``."""
    # A body rebuilt from a cassette's history delta is held as JSON: no size to guard, and
    # asking for its length would serialise it.
    too_big_req = not ex.request_is_lazy and len(ex.request_body) > MAX_PARSE_BYTES
    body = None if too_big_req else ex.request_json()
    if body is None and not too_big_req and not ex.request_is_lazy and ex.request_body:
        # a form that sends a file (an audio transcription, an image edit): its fields
        body = form_fields(ex.request_body, ex.request_header("content-type"))
    if body is not None and ex.request_json_cut:
        rt.analysis_errors.append(
            f"request body {ex.request_cut_reason or 'cut for reading'}: read that far (a marker "
            "stands for the rest); the raw body is kept whole"
        )
    if too_big_req:
        rt.analysis_errors.append(
            f"request body is {len(ex.request_body)} bytes, over the {MAX_PARSE_BYTES} byte "
            "analysis limit; kept raw, not parsed"
        )
    return too_big_req, body


def _parse_into(
    rt: RoundTrip,
    ex: Exchange,
    url: SplitResult,
    base: RoundTrip | None = None,
) -> None:
    too_big_req, body = _request_body(rt, ex)
    adapter = providers.detect(ex.method, url, body, rt.analysis_errors)
    if adapter is None:
        if _looks_llm(url, body) or too_big_req:
            rt.family = "unknown"
        return
    rt.family = adapter.family
    rt.operation = adapter.body_operation(adapter.operation(ex.method, url), body)
    # a WebSocket session's messages outside any turn (cassettes.recording.websocket): kept, not a
    # call
    if ex.status == 101:
        rt.operation = "websocket"
        return
    parsed = adapter.parses(rt.operation)  # generate, and the non-loop calls a family reads (embed)
    if body is None and not too_big_req and parsed:
        if ex.request_body:
            rt.analysis_errors.append("request body is not valid JSON; kept raw, not parsed")
        elif ex.method.upper() == "POST":
            rt.analysis_errors.append("request has no body: nothing to parse")
    rt.stream = adapter.is_stream(url, body)
    if body is not None and parsed:
        try:
            parse_request_side(rt, adapter, body, url, ex, base)
        except Exception as exc:
            rt.analysis_errors.append(f"request could not be parsed: {type(exc).__name__}: {exc}")
    if rt.request is None and parsed and (ex.status or 0) >= 400:
        # The API refused a request looptap could not read (no body, not JSON, too big, or one
        # its parser failed on): the call was made and failed all the same. An empty request
        # (its model from the URL, where the API names it there) makes it a turn, so the API's
        # answer gets its A finding in every family.
        rt.request = NormalisedRequest(
            family=adapter.family, model=adapter.model_from_url(url), stream=rt.stream
        )
    elif rt.request is None and parsed and rt.operation == "generate" and ex.status is not None:
        # A model call recorded without its request body (a cassette filter dropped it) or with
        # one looptap could not read: still a turn, its answer read and judged; nothing judged of
        # what it sent (the request said unread).
        rt.request = NormalisedRequest(
            family=adapter.family,
            model=adapter.model_from_url(url),
            stream=rt.stream,
            unread=[
                "request: no body recorded"
                if body is None and not ex.request_body and not too_big_req
                else "request: its body"
            ],
        )
    parse_response_side(rt, adapter, ex, body, parsed)
    _poll_delivered(rt, adapter)


def _poll_delivered(rt: RoundTrip, adapter: providers.Provider) -> None:
    """A poll whose answer carries the model's calls for the client (a background response
    retrieved) is the model call that delivered them: read as one, continuing the call it polls
    (``previous_response_id``), with no input of its own."""
    r = rt.response
    if (
        rt.operation not in adapter.poll_operations
        or rt.request is not None
        or r is None
        or not r.id
    ):
        return
    if not any(c.kind in ("function", "custom") for c in r.tool_calls):
        return
    rt.request = NormalisedRequest(
        family=rt.family, model=r.model, stream=rt.stream, previous_response_id=r.id
    )
    rt._polled_from, rt.operation = rt.operation, "generate"
    if _POLL_NOTE not in rt.notes:
        rt.notes.append(_POLL_NOTE)


_POLL_NOTE = (
    "a poll that returned the model's tool calls: read as the model call that delivered them"
)


def parse_response_side(
    rt: RoundTrip, adapter: providers.Provider, ex: Exchange, body: Any, parsed: bool
) -> None:
    """Everything parsing the response does. It reads the exchange's response, status, headers
    and transport error."""
    if ex.status is None and not ex.response_chunks:
        if not ex.transport_error:
            rt.analysis_errors.append("no response recorded")
        return
    size = sum(len(c) for _, c in ex.response_chunks)
    if size > MAX_PARSE_BYTES:
        rt.analysis_errors.append(
            f"response body is {size} bytes, over the {MAX_PARSE_BYTES} "
            "byte analysis limit; kept raw, not parsed"
        )
        return
    framed = frame(ex.response_chunks, ex.response_header("content-type"))
    rt.framing = framed.kind
    rt.notes.extend(framed.notes)
    if framed.events:
        first = next((e.offset for e in framed.events if e.offset is not None), None)
        rt.ttft = first
    status = ex.status or 0
    if status >= 400:
        rt.response = _error_response(adapter, framed, ex.status)
        adapter.add_header_facts(rt.response, ex.response_header)  # (an error sent without a body)
        if framed.kind == "json":  # a JSON document ends where it ends: none of it is missing
            _whole_despite_close(rt, "the answer's last byte")
        return
    # A retrieve of a stored response (Responses API, also resumed background streams) returns the
    # same response object as generate does.
    if rt.operation != "retrieve" and rt.operation not in adapter.poll_operations and not parsed:
        return
    _parse_response(rt, adapter, framed)
    if rt.response is not None:
        adapter.add_header_facts(rt.response, ex.response_header)
        if (
            rt.response.id is None
            and providers.is_ws_turn(body)
            and isinstance(body.get("turn_id"), str)
        ):
            # a WebSocket turn of an API without ids (cassettes.recording.websocket)
            rt.response.id = body["turn_id"]


def _error_response(
    adapter: providers.Provider, framed: Framed, status: int | None
) -> NormalisedResponse:
    if framed.kind == "json":
        body: Any = framed.value
    elif framed.kind == "json_array" and framed.value is not None:
        body = framed.value
    elif framed.events:
        body = framed.events[0].data
    else:
        body = framed.tail or None
    err = adapter.parse_error(body, status)
    err.status = status
    return NormalisedResponse(error=err, finish_reason=FinishReason.ERROR, complete=True)


def _parse_response(rt: RoundTrip, adapter: providers.Provider, framed: Framed) -> None:
    try:
        if framed.kind == "json":
            rt.response = adapter.parse_response(framed.value)
            rt.stream = False
        elif framed.kind in ("sse", "ndjson", "json_array", "aws_eventstream"):
            rt.response = adapter.reassemble(framed)
            rt.stream = True
            if framed.tail.strip():
                rt.notes.append(
                    f"stream ends with an incomplete piece ({len(framed.tail)} "
                    "chars) kept in the raw body"
                )
        elif framed.kind == "empty":
            rt.analysis_errors.append("empty response body")
        else:
            # an answer that is a file or plain text (speech's audio, a transcript as text)
            rt.response = adapter.parse_body(framed)
            if rt.response is None:
                rt.analysis_errors.append(
                    f"response body is not JSON or a known stream framing ({framed.kind})"
                )
        if rt.response is not None:
            said_unread_answer(rt.response)
            if rt.stream:
                said_unread_events(rt.response)
            rt.notes.extend(rt.response.notes)
            if rt.response.complete:
                # Clients hang up as soon as they read the terminal event (the openai sync client
                # does): the stream is whole, the closed connection is only a fact about it.
                _whole_despite_close(rt, "the stream's terminal event")
    except Exception as exc:
        rt.analysis_errors.append(f"response could not be parsed: {type(exc).__name__}: {exc}")


def _whole_despite_close(rt: RoundTrip, after: str) -> None:
    """A connection that closed (or failed) after the answer's end cut nothing: a note, not a
    transport error."""
    if rt.transport_error:
        rt.notes.append(
            f"connection closed after {after} ({rt.transport_error}); the round trip is whole"
        )
        rt.transport_error = None


def side_call(ex: Exchange, rt: RoundTrip) -> dict[str, Any] | None:
    """What a round trip that is not a model call did, when its family says (an MCP tool server's
    ``tools/call``: ``Provider.side_call``); ``None`` otherwise, or for a body it cannot read."""
    adapter = providers.by_family(rt.family) if rt.operation != "generate" else None
    if adapter is None or type(adapter).side_call is providers.Provider.side_call:
        return None
    try:
        return adapter.side_call(
            ex.request_json(), frame(ex.response_chunks, ex.response_header("content-type"))
        )
    except Exception:  # a malformed body: the round trip is still listed, without the details
        return None
