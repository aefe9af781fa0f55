"""The Bedrock Agents runtime (``bedrock-agent-runtime.{region}.amazonaws.com``): ``InvokeAgent``
(``POST /agents/{agentId}/agentAliases/{agentAliasId}/sessions/{sessionId}/text``),
``InvokeInlineAgent`` (``POST /agents/{sessionId}``),
``RetrieveAndGenerate`` (``POST /retrieveAndGenerate``) and ``RetrieveAndGenerateStream``
(``POST /retrieveAndGenerateStream``). Shapes from botocore's service model
(``bedrock-agent-runtime``).

``InvokeAgent`` takes ``{"inputText", "enableTrace", "sessionState": {"invocationId",
"returnControlInvocationResults"…}…}`` and answers an AWS event stream: ``chunk`` events (the
answer's text as base64 ``bytes``), ``trace`` events (the agent's steps: each
``modelInvocationInput`` names the ``foundationModel``, each
``modelInvocationOutput.metadata.usage`` counts ``inputTokens`` / ``outputTokens``; an
``observation`` of type ``FINISH`` carries the final response; a ``failureTrace`` a failure; a
``guardrailTrace`` ``INTERVENED``), ``returnControl`` (the action group calls handed to the client,
answered by the next request's ``sessionState.returnControlInvocationResults``), ``files``, and
exception events. The stream has no end event of its own: the final observation (with traces on), a
``returnControl`` or an exception ends it; without traces its completeness is unknown.

``InvokeInlineAgent`` is the same loop with the agent defined in the request: ``foundationModel``
(the model), ``instruction`` (its system prompt), ``actionGroups`` (its tools: each group's
``functionSchema.functions``, parameters as a name → ``{type, description, required}`` map, or a
built-in ``parentActionGroupSignature`` such as ``AMAZON.UserInput``), ``inputText`` and
``inlineSessionState`` (``invocationId``, ``returnControlInvocationResults``, and a
``conversationHistory`` of ``{role, content: [{text}]}`` messages). It answers the same event
stream.

``RetrieveAndGenerate`` answers ``{"output": {"text"}, "citations", "sessionId",
"guardrailAction"}``; the model is the request's ``retrieveAndGenerateConfiguration.*.modelArn``.
Its stream sends ``output`` (``{"text"}``), ``citation`` and ``guardrail`` (``{"action"}``) events.
Neither reports usage.

The conversation lives on the server, in the session: a request carries only its new turn, and
continues the session it names (the session id is the answer's id, and the request's
``previous_response_id``, as Responses' ``previous_response_id``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, unquote

from ... import bounds
from ...models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
)
from ...wire import Framed
from .._base import Provider
from .._profile import Profile
from .._values import as_obj, as_str
from ._agent_stream import AgentStream, action_call_id
from ._body import priced_model

__all__ = ["BedrockAgents"]

Item = dict[str, Any]

_SESSION_HEADERS = ("x-amz-bedrock-agent-session-id", "x-amzn-bedrock-knowledge-base-session-id")


def _route(url: SplitResult) -> str | None:
    segs = [unquote(s) for s in url.path.split("/") if s]
    if (
        len(segs) == 7
        and segs[0] == "agents"
        and segs[2] == "agentAliases"
        and segs[4] == "sessions"
        and segs[6] == "text"
    ):
        return "invoke_agent"
    if len(segs) == 2 and segs[0] == "agents":
        return "invoke_inline_agent"
    if segs == ["retrieveAndGenerate"]:
        return "rag"
    if segs == ["retrieveAndGenerateStream"]:
        return "rag_stream"
    return None


def _rag_model(body: Item) -> str | None:
    conf = as_obj(body.get("retrieveAndGenerateConfiguration"))
    for key in ("knowledgeBaseConfiguration", "externalSourcesConfiguration"):
        arn = as_str(as_obj(conf.get(key)).get("modelArn"))
        if arn:
            return arn.rsplit("/", 1)[-1] if arn.startswith("arn:") else arn
    return None


def _results(state: Item) -> list[Message]:
    results = [as_obj(r) for r in state.get("returnControlInvocationResults") or []]
    inv = as_str(state.get("invocationId"))
    out: list[Message] = []
    for i, r in enumerate(results):
        fn, api = as_obj(r.get("functionResult")), as_obj(r.get("apiResult"))
        block = fn or api
        name = (
            as_str(fn.get("function"))
            if fn
            else f"{api.get('httpMethod') or ''} {api.get('apiPath') or ''}".strip()
        )
        body = as_obj(block.get("responseBody"))
        text = "".join(as_str(as_obj(v).get("body")) or "" for v in body.values()) if body else ""
        state_ = as_str(block.get("responseState"))
        res = ToolResult(
            call_id=action_call_id(inv, i, len(results)),
            name=name,
            content=text,
            is_error=True if state_ == "FAILURE" else None,
        )
        out.append(Message(role="tool", parts=[Part(kind="tool_result", tool_result=res)]))
    return out


def _inline_request(family: str, b: Item, session: str) -> NormalisedRequest:
    """An ``InvokeInlineAgent`` request: the agent it defines (model, instruction, action groups)
    and its turn (the history it carries, the results handed back, the new input)."""
    state = as_obj(b.get("inlineSessionState"))
    messages: list[Message] = []
    for m in as_obj(state.get("conversationHistory")).get("messages") or []:
        m = as_obj(m)
        role = as_str(m.get("role"))
        texts = [as_str(as_obj(c).get("text")) for c in m.get("content") or []]
        if role in ("user", "assistant"):
            messages.append(
                Message(role=role, parts=[Part(kind="text", text=t) for t in texts if t])
            )
    messages += _results(state)
    if isinstance(b.get("inputText"), str) and b["inputText"]:
        messages.append(Message(role="user", parts=[Part(kind="text", text=b["inputText"])]))
    instruction = as_str(b.get("instruction"))
    params = {
        k: v
        for k, v in b.items()
        if k
        not in ("inputText", "instruction", "foundationModel", "actionGroups", "inlineSessionState")
    }
    model = as_str(b.get("foundationModel"))
    if model and model.startswith("arn:"):
        model = model.rsplit("/", 1)[-1]
    return NormalisedRequest(
        family=family,
        model=model,
        stream=True,
        system=[Part(kind="text", text=instruction)] if instruction else [],
        messages=messages,
        tools=_action_group_tools(b.get("actionGroups")),
        params=params,
        previous_response_id=session,
    )


def _action_group_tools(groups: Any) -> list[ToolSpec]:
    """The tools an inline agent's action groups declare: each function (its parameters map made
    a JSON Schema), or the built-in a group stands for (``AMAZON.UserInput`` …)."""
    tools: list[ToolSpec] = []
    for g in groups if isinstance(groups, list) else []:
        g = as_obj(g)
        builtin = as_str(g.get("parentActionGroupSignature"))
        if builtin:
            tools.append(
                ToolSpec(name=builtin, description=as_str(g.get("description")), kind=builtin)
            )
            continue
        for fn in as_obj(g.get("functionSchema")).get("functions") or []:
            fn = as_obj(fn)
            name = as_str(fn.get("name"))
            if not name:
                continue
            props = {
                k: {
                    "type": as_str(as_obj(v).get("type")) or "string",
                    **({"description": d} if (d := as_str(as_obj(v).get("description"))) else {}),
                }
                for k, v in as_obj(fn.get("parameters")).items()
            }
            required = [
                k
                for k, v in as_obj(fn.get("parameters")).items()
                if as_obj(v).get("required") is True
            ]
            schema: Item = {
                "type": "object",
                "properties": props,
                **({"required": required} if required else {}),
            }
            tools.append(
                ToolSpec(name=name, description=as_str(fn.get("description")), parameters=schema)
            )
        if g.get("apiSchema") is not None and not as_obj(g.get("functionSchema")).get("functions"):
            tools.append(
                ToolSpec(
                    name=as_str(g.get("actionGroupName")) or "api",
                    description=as_str(g.get("description")),
                    kind="api_schema",
                )
            )
    return tools


def _rag(
    output_text: str | None, guardrail: str | None, citations: list[Any], cut: bool, stream: bool
) -> NormalisedResponse:
    filtered = guardrail == "INTERVENED"
    answered = not cut and not stream  # a stream has no end event to say it was
    resp = NormalisedResponse(
        parts=[Part(kind="text", text=output_text)] if output_text else [],
        finish_reason_raw=guardrail if filtered else ("end" if answered else None),
        finish_reason=FinishReason.FILTERED
        if filtered
        else (FinishReason.COMPLETE if answered else None),
        complete=False if cut else (True if not stream else None),
        provider_details={"citations": citations} if citations else None,
    )
    if stream and not cut:
        resp.notes.append("RetrieveAndGenerateStream has no end event: completeness unknown")
    return resp


class BedrockAgents(Provider):
    family = "bedrock_agents"
    history_keys = ()
    profile = Profile(
        # the agent's model invocations are billed as the foundation model's tokens, and a trace's
        # ``foundationModel`` may be an inference profile (``us.anthropic…``, an ARN)
        price_provider="aws",
        price_model=priced_model,
        otel_provider="aws.bedrock",
        api_key_env=("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if route is None or method.upper() != "POST":
            return 0
        host = (url.hostname or "").lower()
        if host.startswith("bedrock-agent-runtime.") and host.endswith(
            (".amazonaws.com", ".amazonaws.com.cn")
        ):
            return 5
        b = as_obj(body)
        if route == "invoke_agent":
            return 4 if "inputText" in b or "sessionState" in b else 0
        if route == "invoke_inline_agent":
            return 4 if "foundationModel" in b and "instruction" in b else 0
        return 4 if "retrieveAndGenerateConfiguration" in b and "input" in b else 0

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        return _route(url) in ("invoke_agent", "invoke_inline_agent", "rag_stream")

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        route = _route(url)
        messages: list[Message] = []
        if route == "invoke_agent":
            segs = [unquote(s) for s in url.path.split("/") if s]
            state = as_obj(b.get("sessionState"))
            messages += _results(state)
            if isinstance(b.get("inputText"), str) and b["inputText"]:
                messages.append(
                    Message(role="user", parts=[Part(kind="text", text=b["inputText"])])
                )
            params = {k: v for k, v in b.items() if k != "inputText"}
            params.update(agentId=segs[1], agentAliasId=segs[3])
            return NormalisedRequest(
                family=self.family,
                model=None,
                stream=True,
                messages=messages,
                params=params,
                previous_response_id=segs[5],
            )
        if route == "invoke_inline_agent":
            return _inline_request(self.family, b, unquote(url.path.split("/")[-1]))
        text = as_str(as_obj(b.get("input")).get("text"))
        if text:
            messages.append(Message(role="user", parts=[Part(kind="text", text=text)]))
        return NormalisedRequest(
            family=self.family,
            model=_rag_model(b),
            stream=route == "rag_stream",
            messages=messages,
            params={k: v for k, v in b.items() if k != "input"},
            previous_response_id=as_str(b.get("sessionId")),
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        resp = _rag(
            as_str(as_obj(b.get("output")).get("text")),
            as_str(b.get("guardrailAction")),
            list(b.get("citations") or []),
            False,
            False,
        )
        resp.id = as_str(b.get("sessionId"))
        return resp

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        cut = bool(framed.tail)
        events = [
            (ev.event, (ev.headers or {}).get(":message-type"), _json(ev.data))
            for ev in framed.events
        ]
        if any(name in ("output", "citation", "guardrail") for name, _, _ in events):
            return self._rag_stream(events, cut)
        stream = AgentStream()
        for name, mtype, data in events:
            stream.event(name, as_str(mtype), data)
        resp = stream.response(cut)
        resp.events = len(events)
        return resp

    def _rag_stream(
        self, events: list[tuple[str | None, Any, Any]], cut: bool
    ) -> NormalisedResponse:
        text: list[str] = []
        citations: list[Any] = []
        guardrail: str | None = None
        error: ApiError | None = None
        for name, mtype, data in events:
            d = as_obj(data)
            if mtype in ("exception", "error"):
                error = ApiError(
                    type=name, message=as_str(d.get("message")), in_stream=True, raw=d or data
                )
            elif name == "output":
                text.append(as_str(d.get("text")) or "")
            elif name == "citation":
                citations.append(d)
            elif name == "guardrail":
                guardrail = as_str(d.get("action"))
        resp = _rag("".join(text) or None, guardrail, citations, cut, True)
        resp.events = len(events)
        if error is not None:
            resp.error, resp.finish_reason, resp.finish_reason_raw, resp.complete = (
                error,
                FinishReason.ERROR,
                error.type,
                True,
            )
        return resp

    def add_header_facts(
        self, response: NormalisedResponse, header: Callable[[str], str | None]
    ) -> None:
        """The session the answer belongs to is in a response header (its id for the threader)."""
        super().add_header_facts(response, header)  # (the error's type in its header)
        if response.id is None:
            response.id = next((v for v in (header(h) for h in _SESSION_HEADERS) if v), None)


def _json(data: str) -> Any:
    try:
        return bounds.loads(data) if data.strip() else None
    except ValueError:
        return None
