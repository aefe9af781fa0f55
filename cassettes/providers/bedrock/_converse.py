"""Bedrock Converse's adapter and Bedrock's replay shapes (see the package's docstring), with a
``ConverseStream`` answer rendered from a normalised one (what replay serves for a round trip
rebuilt from a trace that says the call streamed): AWS event-stream frames, as the runtime sends
them and botocore reads them."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult

import orjson

from ... import bounds
from ...models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
)
from ...wire import Framed
from .._base import Provider
from .._parts import has_calls
from .._profile import FREE_FORM_FIELDS, Profile
from .._rebuild_families import BEDROCK
from .._replay import Rendered, ReplayShapes, answer_calls, answer_text, call_arguments_text
from .._result_groups import ResultGroups
from .._values import as_obj, as_str, error_from_body
from ._body import (
    ACTIONS,
    FINISH,
    STRUCTURAL,
    converse_finish,
    details_of,
    model_action,
    part_of,
    tool_choice_of,
    tools_of,
    usage_from,
)
from ._stream import ConverseStream

_STOP = {
    FinishReason.TOOL_CALL: "tool_use",
    FinishReason.TRUNCATED_LENGTH: "max_tokens",
    FinishReason.FILTERED: "content_filtered",
}


def _frame(event: str, payload: dict[str, Any]) -> bytes:
    heads = {":event-type": event, ":content-type": "application/json", ":message-type": "event"}
    hb = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in heads.items()
    )
    body = orjson.dumps(payload)
    prelude = struct.pack(">II", 16 + len(hb) + len(body), len(hb))
    msg = prelude + struct.pack(">I", zlib.crc32(prelude)) + hb + body
    return msg + struct.pack(">I", zlib.crc32(msg))


def render_converse_stream(answer: NormalisedResponse) -> Rendered:
    """``answer`` as ``ConverseStream`` events: the text block by one delta, each tool call's
    start and its input as one JSON-string delta, the stop reason, the usage."""
    out = [_frame("messageStart", {"role": "assistant"})]
    blocks: list[tuple[dict[str, Any] | None, dict[str, Any]]] = []
    text = answer_text(answer)
    if text:
        blocks.append((None, {"text": text}))
    for c in answer_calls(answer):
        use = {"toolUse": {"toolUseId": c.id or "", "name": c.name}}
        blocks.append((use, {"toolUse": {"input": call_arguments_text(c)}}))
    for n, (first, delta) in enumerate(blocks):
        if first is not None:
            out.append(_frame("contentBlockStart", {"contentBlockIndex": n, "start": first}))
        out.append(_frame("contentBlockDelta", {"contentBlockIndex": n, "delta": delta}))
        out.append(_frame("contentBlockStop", {"contentBlockIndex": n}))
    stop = _STOP.get(answer.finish_reason, "end_turn") if answer.finish_reason else "end_turn"
    out.append(_frame("messageStop", {"stopReason": stop}))
    u = answer.usage
    if u is not None:
        i, o = u.input_tokens or 0, u.output_tokens or 0
        usage = {"inputTokens": i, "outputTokens": o, "totalTokens": i + o}
        out.append(_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 0}}))
    return Rendered("application/vnd.amazon.eventstream", out)


class BedrockReplay(ReplayShapes):
    """How replay answers as the Bedrock runtime (Converse, InvokeModel): its error body is
    ``{"message", "__type"}``."""

    def error(self, status: int, message: str, code: str) -> Any:
        return {"message": message, "__type": code}

    def render_answer(
        self, answer: NormalisedResponse, stream: bool, url: SplitResult, request: Any
    ) -> Rendered | None:
        """A ConverseStream answer (a Converse one is served as its JSON body)."""
        if not stream or not url.path.endswith("/converse-stream"):
            return None
        return render_converse_stream(answer)


def _result_of(block: Any) -> str | None:
    """A ``toolResult`` block answers the ``toolUse`` its ``toolUseId`` names."""
    tr = block.get("toolResult")
    return (tr.get("toolUseId") or "") if isinstance(tr, dict) else None


def _calls_of(block: Any) -> list[Any]:
    tu = block.get("toolUse")
    return [tu.get("toolUseId")] if isinstance(tu, dict) else []


class BedrockConverse(Provider):
    family = "bedrock"
    profile = Profile(
        continuity=frozenset({"signature", "redacted"}),  # a reasoning block's
        stream_end=(
            "messageStop (its stopReason); the metadata event after it carries usage only, said "
            "unread when missing"
        ),
        rebuild=BEDROCK,
        finishes=FINISH,
        overflow_errors=(
            r"Input is too long for requested model",
            r"(?i)ValidationException.{0,200}too long",
            r"prompt is too long",
            r"(?i)input length and `max_tokens` exceed context limit",
        ),
        pairing_errors=(
            r"(?i)toolResult blocks? .{0,80}exceeds? the number of toolUse blocks",
            r"(?i)number of toolResult blocks .{0,60}toolUse blocks",
            r"(?i)`tool_use` ids were found without `tool_result` blocks",
            r"(?i)toolUse.{0,60}without.{0,20}toolResult",
            r"Expected toolResult blocks at messages\.\d+\.content",
        ),
        tool_error_flag=True,  # toolResult.status
        result_groups=ResultGroups(_result_of, _calls_of, parts="content"),
        price_provider="aws",
        otel_provider="aws.bedrock",
        # toolUse.input and a toolResult's {"json": …} are the caller's data
        free_form_fields=frozenset({*FREE_FORM_FIELDS, "input", "json"}),
    )
    replay = BedrockReplay()

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        found = model_action(url)
        if method.upper() != "POST" or found is None or found[1] not in ACTIONS:
            return 0
        return 3 if found[1] != "count-tokens" else 2

    def operation(self, method: str, url: SplitResult) -> str:
        found = model_action(url)
        return ACTIONS.get(found[1], "unknown") if found else "unknown"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        found = model_action(url)
        return found is not None and found[1] == "converse-stream"

    def model_from_url(self, url: SplitResult) -> str | None:
        found = model_action(url)
        return found[0] if found else None

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b: dict[str, Any] = as_obj(body)
        messages: list[Message] = []
        for m in b.get("messages") or []:
            if not isinstance(m, dict):
                messages.append(
                    Message(
                        role="unknown", parts=[Part(kind="other", provider_details={"block": m})]
                    )
                )
                continue
            content = m.get("content")
            parts = (
                [part_of(c) for c in content] if isinstance(content, list) else [part_of(content)]
            )
            messages.append(Message(role=as_str(m.get("role")) or "unknown", parts=parts))
        system = (
            [part_of(s) for s in b.get("system") or []] if isinstance(b.get("system"), list) else []
        )
        tool_config = b.get("toolConfig")
        tc = tool_config.get("toolChoice") if isinstance(tool_config, dict) else None
        params = {k: v for k, v in b.items() if k not in STRUCTURAL}
        if isinstance(b.get("inferenceConfig"), dict):
            params.update(b["inferenceConfig"])  # maxTokens, temperature, topP, stopSequences
        return NormalisedRequest(
            family=self.family,
            model=self.model_from_url(url),
            stream=self.is_stream(url, b),
            system=system,
            messages=messages,
            tools=tools_of(tool_config),
            tool_choice=tc,
            tool_choice_mode=tool_choice_of(tc),
            params=params,
            history_key="messages",
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b: dict[str, Any] = as_obj(body)
        if "output" not in b and ("message" in b or "Message" in b):
            return self.error_answer(b)
        msg = as_obj(as_obj(b.get("output")).get("message"))
        content = msg.get("content")
        raw = as_str(b.get("stopReason"))
        parts = [part_of(c) for c in content] if isinstance(content, list) else []
        return NormalisedResponse(
            role=as_str(msg.get("role")) or "assistant",
            parts=parts,
            finish_reason_raw=raw,
            finish_reason=converse_finish(raw, b.get("trace"), has_calls(parts)),
            usage=usage_from(b.get("usage")),
            complete=True,
            provider_details=details_of(b) or None,
        )

    def parse_error(self, body: Any, status: int | None) -> ApiError:
        if isinstance(body, str):
            try:
                body = bounds.loads(body)
            except orjson.JSONDecodeError:
                pass
        return error_from_body(body, status)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return ConverseStream().read(framed)

    def add_header_facts(
        self, response: NormalisedResponse, header: Callable[[str], str | None]
    ) -> None:
        super().add_header_facts(response, header)  # (the error's type in its header)
