"""The answer of ``InvokeAgent`` and ``InvokeInlineAgent``: their AWS event stream (``chunk``
text, ``trace`` steps with the models and their usage, ``returnControl`` calls, ``files``,
exceptions) read into one answer. The shapes are drawn in
:mod:`cassettes.providers.bedrock._agents`, the adapter."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from ...models import ApiError, FinishReason, NormalisedResponse, Part, ToolCall, Usage
from .._values import as_int, as_obj, as_str, compact_json

__all__ = ["AgentStream", "action_call_id"]

Item = dict[str, Any]


def action_call_id(invocation: str | None, i: int, n: int) -> str | None:
    """An action group call has no id of its own: the ``invocationId`` of the hand-over names
    them all, so each is that id, numbered when there are several."""
    if invocation is None:
        return None
    return invocation if n == 1 else f"{invocation}#{i}"


def _calls(rc: Item) -> list[Part]:
    inputs = [as_obj(i) for i in rc.get("invocationInputs") or []]
    inv = as_str(rc.get("invocationId"))
    parts: list[Part] = []
    for i, item in enumerate(inputs):
        fn, api = (
            as_obj(item.get("functionInvocationInput")),
            as_obj(item.get("apiInvocationInput")),
        )
        block = fn or api
        params = {
            as_str(p.get("name")) or "": p.get("value")
            for p in block.get("parameters") or []
            if isinstance(p, dict)
        }
        if api:
            name = f"{api.get('httpMethod') or ''} {api.get('apiPath') or ''}".strip()
            body = as_obj(api.get("requestBody"))
            args: Item = {**params, **({"requestBody": body} if body else {})}
        else:
            name = as_str(fn.get("function")) or ""
            args = params
        details = {
            k: block[k]
            for k in ("actionGroup", "actionInvocationType", "agentId", "collaboratorName")
            if block.get(k) is not None
        }
        call = ToolCall(
            id=action_call_id(inv, i, len(inputs)),
            name=name,
            arguments=args,
            arguments_raw=compact_json(args),
        )
        parts.append(Part(kind="tool_call", tool_call=call, provider_details=details or None))
    return parts


def _usage(total: list[Item]) -> Usage | None:
    if not total:
        return None
    inp = sum(as_int(u.get("inputTokens")) or 0 for u in total)
    out = sum(as_int(u.get("outputTokens")) or 0 for u in total)
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        raw={"model_invocations": total},
    )


def _walk_traces(trace: Item, on: Callable[[str, Item], None]) -> None:
    """Each step of a ``trace`` event (``orchestrationTrace``, ``preProcessingTrace`` …) to
    ``on``."""
    inner = as_obj(trace.get("trace"))
    for kind, step in inner.items():
        if isinstance(step, dict):
            on(kind, step)


class AgentStream:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[Part] = []
        self.models: list[str] = []
        self.usage: list[Item] = []
        self.final: str | None = None
        self.error: ApiError | None = None
        self.filtered = False
        self.traces = 0
        self.citations: list[Any] = []
        self.files: list[Any] = []

    def step(self, kind: str, step: Item) -> None:
        if kind == "failureTrace":
            self.error = ApiError(
                type="failureTrace",
                code=as_str(step.get("failureCode")),
                message=as_str(step.get("failureReason")),
                in_stream=True,
                raw=step,
            )
            return
        if kind == "guardrailTrace" and step.get("action") == "INTERVENED":
            self.filtered = True
        model = as_str(as_obj(step.get("modelInvocationInput")).get("foundationModel"))
        if model and model not in self.models:
            self.models.append(model)
        usage = as_obj(
            as_obj(as_obj(step.get("modelInvocationOutput")).get("metadata")).get("usage")
        )
        if usage:
            self.usage.append(usage)
        obs = as_obj(step.get("observation"))
        if obs.get("type") == "FINISH" or "finalResponse" in obs:
            self.final = as_str(as_obj(obs.get("finalResponse")).get("text")) or ""

    def event(self, name: str | None, msg_type: str | None, data: Any) -> None:
        if msg_type in ("exception", "error"):
            d = as_obj(data)
            self.error = ApiError(
                type=name,
                message=as_str(d.get("message")) or as_str(d.get("Message")),
                in_stream=True,
                raw=d or data,
            )
        elif name == "chunk":
            d = as_obj(data)
            raw = d.get("bytes")
            if isinstance(raw, str):
                try:
                    self.text.append(base64.b64decode(raw).decode("utf-8", "replace"))
                except (binascii.Error, ValueError):
                    pass
            cites = as_obj(d.get("attribution")).get("citations")
            self.citations.extend(cites if isinstance(cites, list) else [])
        elif name == "trace":
            self.traces += 1
            _walk_traces(as_obj(data), self.step)
        elif name == "returnControl":
            self.calls.extend(_calls(as_obj(data)))
        elif name == "files":
            self.files.append(data)

    def response(self, cut: bool) -> NormalisedResponse:
        text = "".join(self.text)
        parts: list[Part] = [Part(kind="text", text=text)] if text else []
        parts += self.calls
        raw: str | None
        if self.error is not None:
            raw, cls = self.error.type, FinishReason.ERROR
        elif self.calls:
            raw, cls = "returnControl", FinishReason.TOOL_CALL
        elif self.filtered:
            raw, cls = "INTERVENED", FinishReason.FILTERED
        elif self.final is not None:
            raw, cls = "FINISH", FinishReason.COMPLETE
        else:
            raw, cls = None, None
        ended = cls is not None and not cut
        resp = NormalisedResponse(
            model=self.models[-1] if self.models else None,
            parts=parts,
            finish_reason_raw=raw,
            finish_reason=cls if ended or self.error is not None else None,
            usage=_usage(self.usage),
            error=self.error,
            complete=True
            if ended or self.error is not None
            else (False if cut or self.traces else None),
            provider_details={
                k: v
                for k, v in (
                    ("foundation_models", self.models),
                    ("citations", self.citations),
                    ("files", self.files),
                )
                if v
            }
            or None,
        )
        if resp.complete is False:
            resp.notes.append(
                "agent stream without its final response, a returnControl or an exception: cut"
            )
        elif resp.complete is None:
            resp.notes.append(
                "agent stream without traces (enableTrace off): no event says it ended; "
                "completeness unknown"
            )
        return resp
