"""OTLP traces read back as model calls: each LLM span's messages as the GenAI semantic
conventions write them (:mod:`cassettes.interop._otlp_semconv`), as OpenInference's flattened
attributes (:mod:`cassettes.interop._otlp_openinference`) or as the API's own bodies an
instrumentation keeps (its profile's ``Bodies``); the tools offered (``gen_ai.tool.definitions``,
``llm.tools.N.tool.json_schema``), usage, finish reasons, models and provider read here, looptap's
own export among them.

Each LLM span is one call, in the order the spans started (a file's order is not trusted: spans
arrive as their exporter batched them). Agent and tool spans (``invoke_agent``, ``execute_tool``,
OpenInference ``AGENT``/``TOOL``/``CHAIN``) are not calls: the conversations, their kinds and
parents are what looptap's analysis finds in the rebuilt requests, as for a recorded run. Where an
instrumentation keeps on each LLM span only that call's new messages, the agent span a call runs
under says which calls are one conversation: each is rebuilt with the history its agent's earlier
calls sent and got (OpenAI Chat and Anthropic; ``history`` inferred).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..hints import count
from ..providers import Call, by_family, from_parts, kept_block, shape_of, trace_family
from . import _genai_names as genai
from ._otlp_aisdk import ai_sdk_call
from ._otlp_bodies import message_at, plain, reassembled
from ._otlp_haystack import haystack_call
from ._otlp_merge import merged
from ._otlp_numbered import ids_from_history, numbered_tools
from ._otlp_openinference import (
    echoed_tools,
    flattened_messages,
    openinference,
    openinference_tools,
    response_echo,
)
from ._otlp_params import params
from ._otlp_profiles import UNPROFILED, Instrumentation, profile_of
from ._otlp_semconv import semconv, typed
from ._otlp_shapes import ADK_REQUEST, adk_call
from ._otlp_spans import (
    SCOPE,
    SERVICE,
    UNJOINED,
    ancestors,
    attributes,
    json_attribute,
    listed,
    read_spans,
    span_id,
)
from ._trajectory import is_anthropic, trajectory_calls  # (the API's own message shapes)

__all__ = ["otlp_calls"]

_CALL_OPS = {"chat", "text_completion", "generate_content", "responses"}
#: A text completion is a call in others' traces (openllmetry's legacy completions); in looptap's
#: own export (``looptap.family`` set), ``text_completion`` is the legacy completions API, which
#: no chat turn stands for: only these operations of looptap's are rebuilt as calls.
_LOOPTAP_CALL_OPS = _CALL_OPS - {"text_completion"}


def otlp_calls(path: Path, kind: str, logs: tuple[Path, ...] = ()) -> list[Call]:
    """The model calls of an OTLP file (its event log records, and those of ``logs``, joined to
    their spans), in the order they started."""
    spans = read_spans(path, kind, logs)
    ids = {span_id(s.get("spanId")) for _, s in spans}

    def start(item: tuple[int, dict[str, Any]]) -> tuple[int, int]:
        try:
            return int(item[1].get("startTimeUnixNano") or 0), item[0]
        except (TypeError, ValueError):
            return 0, item[0]

    by_id = {span_id(s.get("spanId")): s for _, s in spans}
    answered: dict[Any, dict[str, Any]] = {}  # a tool call's id → the answer that made it
    tools = _AgentTools(by_id)
    found = [
        (span, call)
        for _, span in sorted(spans, key=start)
        if (call := _call(span, answered, tools))
    ]
    # Google ADK's call_llm span read: its generate_content child (schema 1 of ADK 2.x) is the
    # same call in the conventions' words, not a second one
    adk = {
        span_id(s.get("spanId")) for s, _ in found if ADK_REQUEST in attributes(s.get("attributes"))
    }
    found = [(s, c) for s, c in found if span_id(s.get("parentSpanId")) not in adk]
    calls = []
    histories: dict[str, list[dict[str, Any]]] = {}  # by agent span: what its calls sent and got
    for span, call in merged(found, by_id):
        if call.output is None and call.error is None:
            _answer_unread(call)
        parent = span_id(span.get("parentSpanId"))
        if parent and parent not in ids:
            call.notes.append(
                f"imported: the span's parent {parent[:16]} is not in the file (read as a root)"
            )
        agent = _agent_of(span, by_id)
        if agent is not None and shape_of(call.family).continues_history:
            _continue_history(call, histories.setdefault(agent, []))
        calls.append(call)
    ids_from_history(calls)
    if not calls:
        raise ImportFormatError(
            f"{path}: {count(len(spans), 'span')}, none of a model call (no gen_ai.* chat or "
            "OpenInference LLM span); nothing imported"
        )
    lost = spans[0][1].get(UNJOINED)
    if lost:
        calls[0].notes.append(f"imported: {count(lost, 'event log record')} of spans not in the "
                              "file: not read")  # fmt: skip
    return calls


def _answer_unread(call: Call) -> None:
    """A call whose request the trace kept and its answer not, in no span (traceAI's streamed
    calls): the answer is unread, and nothing is judged on it (``output`` inferred)."""
    call.inferred.add("output")
    call.unread.append("answer")
    # (an empty answer, marked unread: the usage and finish the span kept are still the API's)
    call.output = {"content": [] if shape_of(call.family).blocks else "", "parts": []}
    call.notes.append(
        "imported: the trace kept this call's request but not its answer: the answer is "
        "unread, nothing is judged on it"
    )


def _agent_of(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str | None:
    """The id of the nearest agent span (``invoke_agent``, an ``AGENT`` span kind) ``span`` runs
    under, if any (a cycle of parents, or a parent not in the file, ends the walk)."""
    for parent in ancestors(span, by_id):
        a = attributes(by_id[parent].get("attributes"))
        kind = a.get("openinference.span.kind", a.get("gen_ai.span.kind"))  # (traceAI: the latter)
        if a.get(genai.OPERATION) == "invoke_agent" or str(kind or "").upper() == "AGENT":
            return parent
    return None


class _AgentTools:
    """The tools an agent span says its model calls were offered, for a call span that says
    none: the conventions' ``gen_ai.tool.definitions`` on the agent's span, else the names it
    lists (``gen_ai.agent.tools``, Strands Agents) with the description and schema each of its
    tool spans kept (``gen_ai.tool.description``, ``gen_ai.tool.json_schema``)."""

    def __init__(self, by_id: dict[str, dict[str, Any]]) -> None:
        self.by_id = by_id
        self.schemas: dict[tuple[str | None, str], dict[str, Any]] | None = None

    def __call__(self, span: dict[str, Any]) -> list[Any]:
        agent = _agent_of(span, self.by_id)
        a = attributes(self.by_id[agent].get("attributes")) if agent else {}
        defs = json_attribute(a.get(genai.TOOL_DEFINITIONS))
        if isinstance(defs, list):
            return defs
        names = json_attribute(a.get("gen_ai.agent.tools"))
        if not isinstance(names, list):
            return []
        if self.schemas is None:  # (the tool spans, once)
            self.schemas = {}
            for s in self.by_id.values():
                t = attributes(s.get("attributes"))
                if t.get(genai.OPERATION) == "execute_tool" and isinstance(t.get(_TOOL), str):
                    schema = json_attribute(t.get("gen_ai.tool.json_schema"))
                    said = {"description": t.get("gen_ai.tool.description"), "parameters": schema}
                    self.schemas[(_agent_of(s, self.by_id), t[_TOOL])] = said
        return [
            {"name": n, **self.schemas.get((agent, n), {})} for n in names if isinstance(n, str)
        ]


_TOOL = "gen_ai.tool.name"


def _continue_history(call: Call, history: list[dict[str, Any]]) -> None:
    """Rebuild ``call`` with its agent's history before it when its span kept only its new
    messages (its history does not open as the agent's first call's did); then add what it sent
    and got to ``history``."""
    if history and call.messages[:1] != history[:1] and "messages" in call.given:
        call.messages = [*history, *call.messages]
        call.inferred.add("history")
        call.notes.append(
            "imported: the span kept only this call's new messages; the history before them is "
            "its agent's earlier calls' (inferred)"
        )
    history[:] = [*call.messages, {"role": "assistant", **(call.output or {})}]


def _is_call(a: dict[str, Any], span: dict[str, Any]) -> bool:
    op = a.get(genai.OPERATION)
    if a.get(genai.FAMILY) is not None:  # looptap's own: its operation says what it was
        adapter = by_family(str(a[genai.FAMILY]))
        own = a.get(genai.OPERATION_OWN)
        # (not chat turns: their own; an operation the family's adapter does not rebuild, such as
        # a Responses compaction, is left out rather than rebuilt as a chat turn)
        if adapter is not None and (adapter.rebuilt_operations or own not in (None, "generate")):
            return _own_operation(a) is not None
        return op in _LOOPTAP_CALL_OPS
    kind = a.get("openinference.span.kind", a.get("gen_ai.span.kind"))  # (traceAI: the latter)
    if op is None and kind is not None:
        return str(kind).upper() == "LLM"
    if op is not None and op not in _CALL_OPS:
        return False  # an agent's, a tool's, a framework's own step (Strands' event loop cycle)
    events = {e.get("name") for e in span.get("events") or [] if isinstance(e, dict)}
    return (
        op in _CALL_OPS
        or a.get("llm.request.type") in ("chat", "completion")  # openllmetry before 0.50
        or genai.INPUT_MESSAGES in a
        or any(str(e).startswith("gen_ai.") for e in events)
    )


def _own_operation(a: dict[str, Any]) -> str | None:
    """The operation of a call looptap's own export names that is not a chat turn (an embedding,
    an image, a legacy completion), which its family's adapter rebuilds in the family's shape."""
    adapter = by_family(str(a.get(genai.FAMILY)))
    op = a.get(genai.OPERATION_OWN)
    return op if adapter is not None and op in adapter.rebuilt_operations else None


def _provider(a: dict[str, Any], prof: Instrumentation) -> str:
    """The provider the span names (the semconv's, older openllmetry's, OpenInference's), else
    the one its instrumentation means."""
    named = a.get(genai.PROVIDER) or a.get("gen_ai.system")
    named = named or a.get("llm.provider") or a.get("llm.system") or prof.provider
    return str(named or "").lower()


def _family(a: dict[str, Any], prof: Instrumentation) -> str:
    """The API family a call is rebuilt in: looptap's own label, the URL, the provider named."""
    fam = str(a.get(genai.FAMILY))
    if shape_of(fam).build is not None or _own_operation(a) is not None:
        return fam
    path = str(a.get(genai.URL) or "").split("?")[0]
    host = str(a.get(genai.SERVER_ADDRESS) or "")
    return trace_family(_provider(a, prof), path, response_echo(a) is not None, host)


def _call(
    span: dict[str, Any], answered: dict[Any, dict[str, Any]], agent_tools: _AgentTools
) -> Call | None:
    a = attributes(span.get("attributes"))
    prof = profile_of(span.get(SCOPE))
    a = adk_call(a) or a  # (Google ADK's call_llm span: its request and answer, Gemini's)
    # (the AI SDK's own names; Haystack's ChatMessage JSON)
    a, said, unread = (
        ai_sdk_call(a, prof) or haystack_call(a, span.get("name"), prof) or (a, [], [])
    )
    rewritten = prof.bodies is not None and _rewritten(a, prof)
    if prof.bodies is not None and not rewritten:
        shaped = _api_shaped(a, span, prof)
        if shaped is not None or a.get(prof.bodies.call[0]) is not None:
            return shaped
        prof = UNPROFILED  # (its spans without its own attributes: the conventions')
    elif rewritten:  # read by the conventions: its metadata, no content (said)
        prof = replace(prof, bodies=None)
    if not _is_call(a, span):
        return None
    family = _family(a, prof)
    oi = flattened_messages(a) and not any(
        k in (genai.INPUT_MESSAGES, genai.OUTPUT_MESSAGES) for k in a
    )
    call = Call(family, "an OpenInference trace" if oi else "an OTel GenAI trace", [])
    call.service = span.get(SERVICE)
    call.operation = _own_operation(a)
    if a.get(genai.FAMILY) is not None:  # looptap's own: tool calls' ids and parameters as sent
        call.given.add("tool_call.id")
        call.as_sent = True
    if isinstance(a.get(genai.URL), str):
        call.url = a[genai.URL]
    shape = shape_of(family)
    shape.place(call, _provider(a, prof), str(a.get(genai.SERVER_ADDRESS) or ""))
    inputs, system, output, finish = openinference(a, span) if oi else semconv(a, span, call, prof)
    if prof.drops_tool_call_messages:
        inputs = _calls_restored(inputs, answered, call)
    made = listed((output or {}).get("parts"))
    for p in typed(made, "tool_call"):
        if p.get("id"):
            answered[p["id"]] = {"role": "assistant", "parts": made}
    call.given.add("provider" if genai.PROVIDER in a or "llm.provider" in a else "")
    if shape.fallback and a.get(genai.FAMILY) not in (None, family):
        call.notes.append(f"imported: a {a[genai.FAMILY]} call, rebuilt as {shape.title}")
    _content(call, inputs, system, output)
    _tools(call, _offered(call, a, span, oi, agent_tools), a, prof)
    _metadata(call, a, span, finish, prof)
    call.given.discard("")
    call.notes += said
    call.unread += unread
    if prof.own is not None:  # (what its spans do not keep of a provider's request)
        call.inferred |= set(prof.own.inferred.get(_provider(a, prof), ()))
    if rewritten:
        call.notes.append(REWRITTEN_NOTE.format(name=prof.name, provider=_provider(a, prof)))
    if prof is UNPROFILED:
        call.inferred |= {"params"} | (set() if call.stream else {"stream"})
        call.notes.append(UNPROFILED_NOTE.format(scope=str(span.get(SCOPE) or "none")[:80]))
    return call


#: What a round trip says whose span keeps its request in another API's shape than its provider's.
REWRITTEN_NOTE = (
    "imported: {name} kept this {provider} call's request in another API's shape (rewritten by "
    "the instrumentation): its content is not read, nothing is judged on it"
)


def _rewritten(a: dict[str, Any], prof: Instrumentation) -> bool:
    """The span's request is in another API's shape than the provider it names (LangSmith's
    ``wrap_anthropic`` writes Anthropic's system prompt as a ``system`` message): not read as a
    call of either."""
    b = prof.bodies
    req = json_attribute(a.get(b.request)) if b is not None else None
    named = _provider(a, prof)
    if not isinstance(req, dict) or not isinstance(req.get("messages"), list) or not named:
        return False
    messages = req["messages"]
    family = trace_family(named, "", False, "")
    if shape_of(family).fallback:
        return False  # (a provider no family is named by: the shape says)
    around = {"system": req.get("system")}
    shaped = (
        "anthropic"
        if is_anthropic([m for m in messages if isinstance(m, dict)], around)
        else "openai_chat"
    )
    return family in ("anthropic", "openai_chat") and family != shaped


#: What a round trip read from spans of an instrumentation no profile names says.
UNPROFILED_NOTE = (
    "imported: spans of scope {scope!r}, an instrumentation looptap has no profile of: read by "
    "the GenAI conventions, what they leave uncertain (parameters, the stream flag) inferred"
)


def _api_shaped(a: dict[str, Any], span: dict[str, Any], prof: Instrumentation) -> Call | None:
    """A call span that keeps the API's own request and answer (:class:`Bodies`), read as the
    last call of a trajectory; its parameters (the instrumentation's defaults among them) are not
    said, nor its stream flag unless the profile says the request has it."""
    b, name = prof.bodies, prof.name
    assert b is not None
    req = json_attribute(a.get(b.request))
    out = message_at(json_attribute(a.get(b.answer)), b.message_at)
    out = {"content": out} if isinstance(out, str) else out  # (a streamed text: the text alone)
    if b.call[1] not in (a.get(b.call[0]), plain(a.get(b.call[0]))):
        return None
    if not isinstance(req, dict) or not isinstance(out, dict):
        return None
    messages = req.get("messages")
    if not isinstance(messages, list):
        return None
    model = plain(a.get(b.model)) or req.get("model")
    around = {"model": model, "tools": req.get("tools") or [], "system": req.get("system")}
    answer = {**{k: v for k, v in out.items() if k != "role"}, "role": "assistant"}
    try:
        call = trajectory_calls([*messages, answer], around, f"{name} span")[-1]
    except (ImportFormatError, IndexError):
        return None
    streamed = reassembled(span, call.family, b.chunks) if b.chunks else None
    if streamed is not None:  # the chunks the API sent, not the instrumentation's summary
        call.output = streamed
    call.source = f"an OTel trace ({name})"
    usage = json_attribute(a.get(b.usage))
    usage = usage if isinstance(usage, dict) else {}
    for key, names in (
        ("input_tokens", ("prompt_tokens", "input", "input_tokens")),
        ("output_tokens", ("completion_tokens", "output", "output_tokens")),
    ):
        v = next((usage[n] for n in names if isinstance(usage.get(n), int)), None)
        if v is not None:
            call.usage[key] = v
    call.given |= {"usage"} if call.usage else set()
    finish = json_attribute(a.get(b.finish)) if b.finish else None
    finish = finish[0] if isinstance(finish, list) and finish else finish  # (the conventions')
    finish = finish.strip('"') if isinstance(finish, str) else None
    if finish:
        call.finish = finish
        call.given.add("finish_reason")
    call.inferred |= {"params"}
    if b.says_stream:  # the SDK call's arguments as given: no `stream`, not streamed
        call.stream = req.get("stream") is True
    else:
        call.inferred.add("stream")
    call.service = span.get(SERVICE)
    _timing(call, span, a)
    return call


def _content(
    call: Call, inputs: list[Any] | None, system: list[str], output: dict[str, Any] | None
) -> None:
    if inputs is None and output is None:
        call.inferred |= {"messages", "output"}
        call.notes.append(
            "imported: the trace kept no message content (metadata only): no turns, tool calls, "
            "fork or replay from it"
        )
        call.output = {"content": [] if shape_of(call.family).blocks else "", "parts": []}
        call.unread += ["messages", "answer"]
        return
    if inputs is None:  # (its answer kept, its request not: the AI SDK's recordInputs false)
        call.inferred.add("messages")
        call.unread.append("messages")
        call.notes.append(
            "imported: the trace kept this call's answer but not its request: the messages sent "
            "are unread, nothing is judged on them"
        )
    _account(call, inputs, output)
    sys_parts, call.messages = from_parts(call.family, inputs or [], "tool_call.id" in call.given)
    call.system = system + sys_parts
    call.given |= {"messages"} if inputs is not None else set()
    shape = shape_of(call.family)
    if output is not None and (shape.rendered or call.operation):
        call.output = {"parts": [p for p in output.get("parts") or [] if isinstance(p, dict)]}
        call.given.add("output")  # (rendered by the API's own renderer: parts as they are)
    elif output is not None:
        _, out = from_parts(call.family, [{"role": "assistant", **output}])
        call.output = {k: v for k, v in (out[-1] if out else {}).items() if k != "role"}
        call.given.add("output")
    shape.settle(call, [p for m in inputs or [] for p in listed(m.get("parts"))])


#: The conventions' part types a rebuilt call carries (a reasoning text is said apart: no part
#: carries what an API needs back, docs/interop.md).
_CONSUMED = frozenset({"text", "tool_call", "tool_call_response", "reasoning"})


def _account(call: Call, inputs: list[Any] | None, output: dict[str, Any] | None) -> None:
    """Every part of the span's messages the rebuilt call does not carry (a ``blob``, ``uri`` or
    ``file``, a part type no reader knows) is named unread: the round trip is ``partial`` and no
    finding rests on that side (issue 102: content not consumed leaves a trace)."""
    sides = (("messages: ", inputs or []), ("", [output] if output else []))
    for side, messages in sides:
        left = sorted({
            str(p.get("type"))[:40] for m in messages for p in listed(m.get("parts"))
            if isinstance(p, dict) and p.get("type") not in _CONSUMED and kept_block(p) is None
        })  # fmt: skip
        call.unread += [f"{side}a {t!r} part, not read" for t in left]


def _calls_restored(
    inputs: list[Any] | None, answered: dict[Any, dict[str, Any]], call: Call
) -> list[Any] | None:
    """The input with the assistant messages an instrumentation left out (OpenLIT's OpenAI
    history: tool results without the message that made the calls) put back before their
    results, from the earlier answer that made those calls."""
    if not inputs:
        return inputs
    made = {p.get("id") for m in inputs for p in typed(m.get("parts"), "tool_call")}
    out: list[Any] = []
    for m in inputs:
        ids = [p.get("id") for p in typed(m.get("parts"), "tool_call_response")]
        lost = next((answered[i] for i in ids if i not in made and i in answered), None)
        if lost is not None:
            out.append(lost)
            made |= {p.get("id") for p in lost["parts"] if isinstance(p, dict)}
            call.inferred.add("assistant tool-call messages")
        out.append(m)
    if "assistant tool-call messages" in call.inferred:
        call.notes.append(
            "imported: the span's input has tool results without the assistant message that "
            "made the calls: put back from the earlier answer that made them (inferred)"
        )
    return out


def _metadata(
    call: Call, a: dict[str, Any], span: dict[str, Any], finish: Any, prof: Instrumentation
) -> None:
    _served(call, a)
    reasons = a.get(genai.FINISH_REASONS)
    raw = reasons[0] if isinstance(reasons, list) and reasons else finish
    if raw is None and isinstance(a.get(_FINISH_ONE), str):  # Semantic Kernel's: one, its enum
        raw = _ENUM.sub(lambda m: m.group(1).lower(), a[_FINISH_ONE].split(",")[0])
    if isinstance(raw, str) and raw and raw != "unknown":
        call.finish = shape_of(call.family).finishes.get(raw, raw)
        call.given.add("finish_reason")
    if isinstance(a.get(genai.FINISH_CLASS), str):
        call.finish_class = a[genai.FINISH_CLASS]
    params(call, a, span, prof)
    usage = {k: next((a[n] for n in ns if a.get(n) is not None), None)
             for k, ns in genai.USAGE.items()}  # fmt: skip
    call.usage = {k: v for k, v in usage.items() if isinstance(v, int) and v >= 0}
    if call.usage and call.stream and _provider(a, prof) in prof.counts_stream_usage:
        call.usage = {}
        call.notes.append(f"imported: {prof.name} counts a streamed answer's tokens itself (the "
                          "API sent no usage): its count is not kept")  # fmt: skip
    if call.usage:
        call.given.add("usage")
    _timing(call, span, a)
    _error(call, a, span)


def _error(call: Call, a: dict[str, Any], span: dict[str, Any]) -> None:
    """An answer the span says failed, with no output: the API's words, its status (the
    trace's, else the one its words give, inferred), type and code."""
    status: dict[str, Any] = span["status"] if isinstance(span.get("status"), dict) else {}
    if status.get("code") in (2, "STATUS_CODE_ERROR") and not call.output:
        said = a.get(genai.ERROR_MESSAGE)  # the API's words (looptap's), else the span status'
        call.error = str(said if isinstance(said, str) else status.get("message") or "error")
        call.given.add("error")
        code = a.get(genai.STATUS_CODE)
        if isinstance(code, int) and 400 <= code <= 599:
            call.status = code
            call.given.add("status")
        elif (said_code := _STATUS_SAID.search(call.error[:200])) is not None:
            call.status = int(said_code.group(1))  # the words' status: inferred, never evidence
            call.inferred.add("status")
            call.notes.append(f"imported: status {call.status} read from the error's words "
                              "(the trace kept no status: inferred)")  # fmt: skip
        for key, attr in (("type", genai.ERROR_TYPE), ("code", genai.ERROR_CODE)):
            v = a.get(attr)
            if isinstance(v, str) and v and v != str(code):
                call.error_fields[key] = v


#: A finish reason written alone (Semantic Kernel), as the SDK's enum (``FinishReason.STOP``).
_FINISH_ONE = "gen_ai.response.finish_reason"
_ENUM = re.compile(r"^FinishReason\.([A-Z_]+)$")


#: An HTTP error status an exception's words give (``Error code: 503 - …``, ``503 Service
#: Unavailable``, ``… status 529 …``).
_STATUS_SAID = re.compile(r"(?<![\d.])(4\d\d|5\d\d)(?![\d.])")


def _served(call: Call, a: dict[str, Any]) -> None:
    """The model asked for and the one that answered, and the response's id, where the trace
    kept them (the request is rebuilt with the model asked for: the one the agent sends)."""
    asked, served = a.get(genai.REQUEST_MODEL), a.get(genai.RESPONSE_MODEL)
    invoked = json_attribute(a.get(genai.REQUEST_PARAMETERS))  # (traceAI's, when it says no model)
    model = asked or served or a.get("llm.model_name") or (invoked or {}).get("model")
    if isinstance(model, str) and model:
        call.model = model
        call.given.add("model")
    if isinstance(served, str) and served and served != model:
        call.served = served
    rid = a.get(genai.RESPONSE_ID)
    if rid is None and a.get("output.mime_type") == "application/json":  # OpenInference
        body = json_attribute(a.get("output.value"))
        rid = body.get("id") if isinstance(body, dict) else None
    if isinstance(rid, str) and rid:
        call.response_id = rid
        call.given.add("response.id")


def _timing(call: Call, span: dict[str, Any], a: dict[str, Any]) -> None:
    """When the call started and how long it took: the span's own times (looptap's export of a
    recording without times lays its spans out one after the other, and says so: no start, and
    only a duration that was recorded)."""
    try:
        t0, t1 = int(span.get("startTimeUnixNano") or 0), int(span.get("endTimeUnixNano") or 0)
    except (TypeError, ValueError):
        t0 = t1 = 0
    if a.get(genai.TIMING) == "synthetic":
        call.duration = (t1 - t0) / 1e9 if t1 > t0 else None
        return
    if t0 > 0:
        call.started, call.duration = t0 / 1e9, max(0, t1 - t0) / 1e9 if t1 >= t0 else None
        call.given.add("timing")


def _offered(
    call: Call, a: dict[str, Any], span: dict[str, Any], oi: bool, agent_tools: _AgentTools
) -> list[Any]:
    """The tool definitions the span keeps (the conventions', OpenInference's, a Responses
    answer's echo, openllmetry's numbered ones), else its agent span's."""
    said = json_attribute(a.get(genai.TOOL_DEFINITIONS))
    tools: list[Any] = (
        said
        if isinstance(said, list)
        else ((openinference_tools(a) or echoed_tools(a)) if oi else numbered_tools(a))
    )
    if not tools and (tools := agent_tools(span)):
        call.notes.append("imported: the tools offered are its agent span's")
    return tools


def _tools(call: Call, defs: list[Any], a: dict[str, Any], prof: Instrumentation) -> None:
    """The tools offered, from semconv definitions (``parameters``) or OpenInference's JSON
    schemas (the OpenAI shape, or the Anthropic one with ``input_schema``), in the call's family's
    request shape. A tool whose schema the trace does not give gets an empty one: ``tool schemas``
    inferred; OpenAI's ``strict`` comes from pydantic-ai's ``model_request_parameters``."""
    strict = _strict(a, prof)
    out: list[dict[str, Any]] = []
    for d in defs:
        if isinstance(d, dict) and isinstance(d.get("function"), dict):  # the OpenAI shape
            d = {**d["function"], **({"strict": d["strict"]} if "strict" in d else {})}
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            continue
        schemas = (d.get(k) for k in ("parameters", "input_schema", "inputSchema"))
        params = next((x for x in schemas if isinstance(x, dict)), None)
        if params is None:
            call.inferred.add("tool schemas")
            params = {"type": "object", "properties": {}}
        out.append(shape_of(call.family).tool(d, params, strict.get(d["name"], d.get("strict"))))
    call.tools = out
    # most instrumentations do not record the tools offered
    (call.given if out else call.inferred).add("tools")


def _strict(a: dict[str, Any], prof: Instrumentation) -> dict[str, bool]:
    """Each function tool's ``strict`` (OpenAI), where the instrumentation keeps it apart
    (pydantic-ai's ``model_request_parameters``)."""
    mrp = json_attribute(a.get(prof.strict_attribute)) if prof.strict_attribute else None
    tools = mrp.get("function_tools") if isinstance(mrp, dict) else None
    return {
        t["name"]: t["strict"]
        for t in (tools if isinstance(tools, list) else [])
        if isinstance(t, dict)
        and isinstance(t.get("name"), str)
        and isinstance(t.get("strict"), bool)
    }
