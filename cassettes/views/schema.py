"""The ``looptap.roundtrip/1`` object: :func:`roundtrip_json` and its schema, the models.

:func:`roundtrip_json` is the stable, documented per-round-trip object of ``looptap show --json``
(documented in ``docs/show-json.md``); it is also stored as the ``derived`` part of each cassette
record so ``jq`` can read a cassette directly. Its schema is the model :class:`RoundTripJson`,
from which the doc's field table and ``docs/roundtrip.schema.json`` are generated
(``python -m cassettes.views.schema --doc``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from cassettes.models import ApiError, FinishReason, NormalisedRequest, NormalisedResponse, Part, Usage
from cassettes.parsing.roundtrip import RoundTrip, side_call
from cassettes.wire.exchange import Exchange

__all__ = [
    "DOC_MARK",
    "SCHEMA",
    "ErrorJson",
    "FinishReasonJson",
    "RequestJson",
    "RoundTripJson",
    "TimingJson",
    "ToolCallJson",
    "UsageJson",
    "doc_table",
    "roundtrip_json",
    "schema_text",
    "write_docs",
]

SCHEMA = "looptap.roundtrip/1"
_HTTP = "the HTTP request (query string not included; it is redacted in the cassette)"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _joined(parts: list[Part], kind: str) -> str | None:
    texts = [p.text for p in parts if p.kind == kind and p.text is not None]
    return "".join(texts) if texts else None


# -- the looptap.roundtrip/1 object ------------------------------------------------------------
#
# The models below are the schema: the field table of docs/show-json.md and
# docs/roundtrip.schema.json are generated from them (``python -m cassettes.views.schema --doc``; a test
# keeps both in sync). Fields are declared in output order, every one always present.


class _Object(BaseModel):
    """An object of the schema. Its fields say what the JSON holds; ``roundtrip_json`` builds the
    JSON itself (:func:`_object`), so these models are instantiated only to validate it: their
    validators are built then (``defer_build``), not by every command that imports this module."""

    model_config = ConfigDict(frozen=True, defer_build=True)


class FinishReasonJson(_Object):
    """Why the generation stopped (`finish_reason`)."""

    raw: str | None = Field(
        description="exactly as sent (`stop`, `tool_use`, `MAX_TOKENS`, `incomplete:max_output_tokens` …)"
    )
    normalised: FinishReason | None = Field(
        description="one of " + ", ".join(f"`{r.value}`" for r in FinishReason)
    )


class UsageJson(_Object):
    """Token counts, inclusive (`usage`; null = not reported, never 0)."""

    input: int | None = Field(
        description="**all** input tokens, cached or not (Anthropic's `input_tokens + cache_creation + cache_read`; OpenAI's `prompt_tokens`)"
    )
    output: int | None = Field(description="output tokens including reasoning")
    cache_read: int | None = Field(description="input tokens read from the prompt cache")
    cache_write: int | None = Field(description="input tokens written to the prompt cache")
    reasoning: int | None = Field(description="reasoning/thinking tokens (a part of `output`)")
    total: int | None = Field(description="as reported")


class ToolCallJson(_Object):
    """A call the model emitted (an item of `tool_calls`)."""

    id: str | None = Field(description="the call's id; null when the wire has none")
    name: str | None = Field(description="the tool the model called")
    arguments: Any = Field(description="parsed (usually an object); null if unparseable")
    arguments_raw: str | None = Field(
        description="the string as sent, or the compact JSON of the object the wire carried"
    )
    arguments_error: str | None = Field(description="why `arguments_raw` is not valid JSON, else null")


class ErrorJson(_Object):
    """An error the API reported (`error`)."""

    status: int | None = Field(description="the HTTP status it came with")
    type: str | None = Field(description="the error type, as sent")
    code: str | None = Field(description="the error code, as sent")
    message: str | None = Field(description="the error message, as sent")
    in_stream: bool = Field(description="true for an error event inside a 200 stream")


class TimingJson(_Object):
    """Seconds from the start of the request (`timing`)."""

    ttfb: float | None = Field(description="to the response headers")
    ttft: float | None = Field(description="to the first stream event")
    duration: float | None = Field(description="to the end of the response")


class RequestJson(_Object):
    """What the client sent, as parsed (`request`)."""

    messages: int = Field(description="how many messages the request holds")
    tools: list[str] = Field(description="the names of the tools offered")
    tool_choice: str | None = Field(description="`auto`, `none`, `required`, `tool:<name>` …")
    previous_response_id: str | None = Field(description="as sent (Responses API)")
    # A plain mapping, not a model: its keys come in the order the cassette stored them.
    history: dict[str, int | bool] | None = Field(
        description='`{"base": seq, "keep": n, "appended": m, "rewritten"?: true}` when the body was delta-encoded '
        "against an earlier request, else null"
    )


class RoundTripJson(_Object):
    """One round trip: a line of `looptap show --json` (without the analysis additions) and the `derived` part of a cassette record."""

    model_config = ConfigDict(
        frozen=True,
        title=SCHEMA,
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    schema_: Literal["looptap.roundtrip/1"] = Field(alias="schema", description='`"looptap.roundtrip/1"`')
    seq: int | None = Field(
        description="position in the run, from 0 (null only for a round trip parsed outside a run)"
    )
    started: str | None = Field(description="ISO-8601 UTC start time (null for imports, which record none)")
    family: str = Field(
        description="`openai_chat` (incl. OpenAI-compatible servers), `openai_responses`, `anthropic`, `gemini`, `ollama`, "
        "`bedrock`; `unknown` for LLM-looking traffic no adapter claims; `none` for other HTTP traffic"
    )
    operation: str | None = Field(
        description="`generate` for model calls; otherwise what the endpoint does (`count_tokens`, `retrieve`, …); "
        "only `generate` round trips are fully parsed"
    )
    method: str = Field(description=_HTTP)
    host: str = Field(description=_HTTP)
    path: str = Field(description=_HTTP)
    model_requested: str | None = Field(
        description="from the body, or the URL (Gemini, Vertex, Bedrock, Azure deployments)"
    )
    model_served: str | None = Field(description="what the API says served the call")
    stream: bool = Field(
        description="the response was streamed (SSE, NDJSON, JSON array or AWS event-stream)"
    )
    transport: Literal["http", "websocket"] = Field(
        description="`http`, or `websocket` for a turn recorded from a WebSocket session "
        "(Responses over a WebSocket: one `response.create` and its events)"
    )
    status: int | None = Field(description="HTTP status (null if no response arrived)")
    finish_reason: FinishReasonJson = Field(description="why the generation stopped, as sent and normalised")
    usage: UsageJson = Field(description="token counts as the API reported them (null where not reported)")
    tool_calls: list[ToolCallJson] = Field(description="calls the model emitted, in order")
    text: str | None = Field(description="the assistant's text, concatenated")
    reasoning: str | None = Field(description="reasoning/thinking text when the API returned it")
    refusal: str | None = Field(description="refusal text (OpenAI `refusal`, …)")
    error: ErrorJson | None = Field(
        description="an error the API reported: an HTTP error body, or an error event inside a stream"
    )
    complete: bool | None = Field(
        description="the response's terminal marker was seen (`[DONE]`, `message_stop`, `response.completed`, a `finishReason`, "
        "`done: true`, `messageStop`); non-streamed bodies are complete; false on a transport error"
    )
    truncated: bool = Field(description="`complete` is false: the stream ended without its terminal event")
    timing: TimingJson = Field(
        description="seconds from the start of the request, each null when not recorded"
    )
    request: RequestJson | None = Field(
        description="the request as parsed (null when there is none to parse)"
    )
    transport_error: str | None = Field(
        description="the exchange is partial (upstream reset, client disconnected)"
    )
    analysis_errors: list[str] = Field(
        description="what could not be parsed, and why; the raw round trip is always kept"
    )
    notes: list[str] = Field(
        description="facts about the bytes: lying Content-Encoding, invalid UTF-8, a cut stream tail, …"
    )
    mcp: dict[str, Any] | None = Field(
        description="for a round trip to an MCP tool server (family `mcp`, operation `mcp <method>`): `method`, `id`, `answered`; "
        "for `tools/call` also `tool`, `arguments`, `tool_use_id` (the model's call it ran, when the client sends it in "
        "`_meta`), `result` (text) and `is_error`, or `error` (`code`, `message`); for `tools/list` the `tools` names; "
        "`linked` (from the analysis, `tools/call` only): `call_id`, `by` (`id` or `name_arguments`), `model_seq`, "
        "`conversation`, `turn` of the model's call it ran, or `candidates` (how many equal awaiting calls it could have "
        "run, when not linked)"
    )


#: Each model's JSON keys, in order.
_KEYS: dict[type[BaseModel], tuple[str, ...]] = {
    m: tuple(f.alias or name for name, f in m.model_fields.items())
    for m in (RoundTripJson, FinishReasonJson, UsageJson, ToolCallJson, ErrorJson, TimingJson, RequestJson)
}


def _object(model: type[BaseModel], **values: Any) -> dict[str, Any]:
    """``values``, checked to be the JSON keys of ``model`` in its order: what
    ``model.model_validate(values).model_dump(mode="json", by_alias=True)`` gives for values that
    are JSON values of the field types already (the tests check it on every corpus round trip).

    Not that pydantic call itself: each recorded round trip is turned into this object once, by
    the recorder's writer, and validating and dumping it doubles the cost of the whole function
    (``model_construct`` and dumping triple it; this check adds a third). Keywords keep the order
    they are passed in, so the check is a tuple comparison."""
    if tuple(values) != _KEYS[model]:
        raise TypeError(
            f"{model.__name__} takes {', '.join(_KEYS[model])} in this order, not {', '.join(values)}"
        )
    return values


def roundtrip_json(rt: RoundTrip, ex: Exchange | None = None) -> dict[str, Any]:
    """``rt`` (and its exchange, when at hand) as a :class:`RoundTripJson` object, in JSON values."""
    resp = rt.response
    req = rt.request
    url = urlsplit(rt.url)
    complete = rt.complete
    return _object(
        RoundTripJson,
        **{"schema": SCHEMA},  # (the key is the field's alias: ``schema`` is a BaseModel method)
        seq=rt.seq,
        started=_iso(ex.started) if ex is not None else None,
        family=rt.family,
        operation=rt.operation,
        method=rt.method,
        host=url.netloc,
        path=url.path,
        model_requested=req.model if req else None,
        model_served=resp.model if resp else None,
        stream=rt.stream,
        transport=_transport(ex),
        status=rt.status,
        finish_reason=_finish_json(resp),
        usage=_usage_json(resp.usage if resp else None),
        tool_calls=_tool_calls_json(resp),
        text=_joined(resp.parts, "text") if resp else None,
        reasoning=_joined(resp.parts, "reasoning") if resp else None,
        refusal=_joined(resp.parts, "refusal") if resp else None,
        error=_error_json(resp.error if resp else None),
        complete=complete,
        truncated=complete is False,
        timing=_object(TimingJson, ttfb=rt.ttfb, ttft=rt.ttft, duration=rt.duration),
        request=_request_json(req, ex),
        transport_error=rt.transport_error,
        analysis_errors=list(rt.analysis_errors),
        notes=list(rt.notes),
        mcp=side_call(ex, rt) if ex is not None else None,
    )


def _transport(ex: Exchange | None) -> str:
    # A turn recorded from a WebSocket session (cassettes.recording.websocket) says so in its notes.
    return "websocket" if ex is not None and any(n.startswith("websocket ") for n in ex.notes) else "http"


def _finish_json(resp: NormalisedResponse | None) -> dict[str, Any]:
    return _object(
        FinishReasonJson,
        raw=resp.finish_reason_raw if resp else None,
        normalised=resp.finish_reason.value if resp and resp.finish_reason else None,
    )


def _usage_json(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return _object(UsageJson, input=None, output=None, cache_read=None, cache_write=None, reasoning=None, total=None)
    return _object(
        UsageJson,
        input=usage.input_tokens,
        output=usage.output_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
        reasoning=usage.reasoning_tokens,
        total=usage.total_tokens,
    )


def _tool_calls_json(resp: NormalisedResponse | None) -> list[dict[str, Any]]:
    return [
        _object(ToolCallJson, id=tc.id, name=tc.name, arguments=tc.arguments, arguments_raw=tc.arguments_raw, arguments_error=tc.arguments_error)
        for tc in (resp.tool_calls if resp else [])
    ]


def _error_json(err: ApiError | None) -> dict[str, Any] | None:
    if err is None:
        return None
    return _object(ErrorJson, status=err.status, type=err.type, code=err.code, message=err.message, in_stream=err.in_stream)


def _request_json(req: NormalisedRequest | None, ex: Exchange | None) -> dict[str, Any] | None:
    if req is None:
        return None
    return _object(
        RequestJson,
        messages=len(req.messages),
        tools=[t.name for t in req.tools],
        tool_choice=req.tool_choice_mode,
        previous_response_id=req.previous_response_id,
        history=ex.history_delta if ex is not None else None,
    )


# -- the doc table and the JSON Schema, generated from RoundTripJson ----------------------------

#: The line of docs/show-json.md above the generated table.
DOC_MARK = "<!-- generated from cassettes/views/schema.py (RoundTripJson) by `python -m cassettes.views.schema --doc`: edit the model, not this table -->"


def _type_name(t: Any) -> str:
    if get_origin(t) is list:
        return "list of strings" if get_args(t) == (str,) else "list"
    if get_origin(t) is Literal or (isinstance(t, type) and issubclass(t, str)):  # str, a StrEnum
        return "string"
    if t is bool or t is int:
        return t.__name__
    if t is float:
        return "number"
    if t is dict or get_origin(t) is dict or (isinstance(t, type) and issubclass(t, BaseModel)):
        return "object"
    return "any JSON value"


def _members(annotation: Any) -> tuple[Any, ...]:
    return get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)


def _doc_type(annotation: Any) -> str:
    members = _members(annotation)
    names = [_type_name(t) for t in members if t is not type(None)]
    return " \\| ".join(names + (["null"] if type(None) in members else []))


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (alone, or as a list's items), and whether in a list."""
    for t in _members(annotation):
        if get_origin(t) is list:
            (item,) = get_args(t)
            if isinstance(item, type) and issubclass(item, BaseModel):
                return item, True
        elif isinstance(t, type) and issubclass(t, BaseModel):
            return t, False
    return None, False


def _doc_rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """(field, type, meaning) of each field, then of the fields of the object it holds."""
    for name, field in model.model_fields.items():
        inner, many = _nested(field.annotation)
        key = f"{prefix}{field.alias or name}{'[]' if many else ''}"
        yield key, _doc_type(field.annotation), (field.description or "").replace("|", "\\|")
        if inner is not None:
            yield from _doc_rows(inner, f"{key}.")


def doc_table() -> str:
    """The field table of docs/show-json.md. Neighbours with the same type and meaning share a row
    (``method``, ``host``, ``path``)."""
    rows: list[tuple[list[str], str, str]] = []
    for key, type_, meaning in _doc_rows(RoundTripJson):
        if rows and rows[-1][1:] == (type_, meaning):
            rows[-1][0].append(key)
        else:
            rows.append(([key], type_, meaning))
    lines = ["| field | type | meaning |", "|---|---|---|"]
    lines += [
        f"| {', '.join(f'`{k}`' for k in keys)} | {type_} | {meaning} |" for keys, type_, meaning in rows
    ]
    return "\n".join(lines) + "\n"


def schema_text() -> str:
    """The JSON Schema of the ``looptap.roundtrip/1`` object, as docs/roundtrip.schema.json holds it."""
    return (
        json.dumps(RoundTripJson.model_json_schema(mode="serialization"), indent=2, ensure_ascii=False) + "\n"
    )


def write_docs(root: Path) -> None:
    """Rewrite the field table of ``root``/docs/show-json.md (the table under :data:`DOC_MARK`)
    and ``root``/docs/roundtrip.schema.json from the model."""
    page = root / "docs" / "show-json.md"
    lines = page.read_text().splitlines(keepends=True)
    start = lines.index(DOC_MARK + "\n") + 1
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = [doc_table()]
    page.write_text("".join(lines))
    (root / "docs" / "roundtrip.schema.json").write_text(schema_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cassettes.views.schema", description="The looptap.roundtrip/1 schema, from its model."
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--doc",
        metavar="ROOT",
        nargs="?",
        const=".",
        help="rewrite ROOT/docs/show-json.md's field table and ROOT/docs/roundtrip.schema.json",
    )
    what.add_argument("--schema", action="store_true", help="print the JSON Schema")
    args = parser.parse_args(argv)
    if args.schema:
        sys.stdout.write(schema_text())
    else:
        write_docs(Path(args.doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
