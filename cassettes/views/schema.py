"""The schema of the ``looptap.roundtrip/1`` object: the models.

:func:`~cassettes.views._roundtrip_object.roundtrip_json` (re-exported here) builds the stable,
documented per-round-trip object of ``looptap show --json`` (documented in ``docs/show-json.md``)
from plain values. Its schema is the model :class:`RoundTripJson`, from which the doc's field
table and ``docs/roundtrip.schema.json`` are generated (``python -m cassettes.views.schema --doc``).
Commands that print the object do not import this module (building the model classes is work no
such command needs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field

from ..models import FinishReason
from ._roundtrip_object import SCHEMA, roundtrip_json

__all__ = [
    "SCHEMA",
    "RoundTripJson",
    "doc_table",
    "roundtrip_json",
    "schema_text",
    "write_docs",
]

_HTTP = "the HTTP request (query string not included; it is redacted in the cassette)"


# -- the looptap.roundtrip/1 object ------------------------------------------------------------
#
# The models below are the schema: the field table of docs/show-json.md and
# docs/roundtrip.schema.json are generated from them (``python -m cassettes.views.schema --doc``; a
# test keeps both in sync). Fields are declared in output order, every one always present.


class _Object(BaseModel):
    """An object of the schema. Its fields say what the JSON holds; ``roundtrip_json`` builds the
    JSON itself (as plain dicts), so these models are instantiated only to validate it:
    their validators are built then (``defer_build``), not by every command that imports this
    module."""

    model_config = ConfigDict(frozen=True, defer_build=True)


class FinishReasonJson(_Object):
    """Why the generation stopped (`finish_reason`)."""

    raw: str | None = Field(
        description="exactly as sent (`stop`, `tool_use`, `MAX_TOKENS`, "
        "`incomplete:max_output_tokens` …)"
    )
    normalised: FinishReason | None = Field(
        description="one of " + ", ".join(f"`{r.value}`" for r in FinishReason)
    )


class UsageJson(_Object):
    """Token counts, inclusive (`usage`; null = not reported, never 0)."""

    input: int | None = Field(
        description="**all** input tokens, cached or not (Anthropic's `input_tokens + "
        "cache_creation + cache_read`; OpenAI's `prompt_tokens`)"
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
    arguments_error: str | None = Field(
        description="why `arguments_raw` is not valid JSON, else null"
    )
    ran_by: Literal["client", "server"] = Field(
        description="`server`: the API ran the tool itself (Anthropic's `server_tool_use`, an "
        "OpenAI Responses hosted call such as `web_search_call`) and put its result in the "
        "answer, so no result is due from the client; `client`: the client runs it"
    )


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
        description='`{"base": seq, "keep": n, "appended": m, "rewritten"?: true}` when the body '
        "was delta-encoded "
        "against an earlier request, else null"
    )


class RoundTripJson(_Object):
    # The docstring is the JSON Schema's description (docs/roundtrip.schema.json): one line.
    """One round trip: a line of `looptap show --json` (without the analysis additions) and the `derived` part of a cassette record."""  # noqa: E501

    model_config = ConfigDict(
        frozen=True,
        title=SCHEMA,
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    schema_: Literal["looptap.roundtrip/1"] = Field(
        alias="schema", description='`"looptap.roundtrip/1"`'
    )
    seq: int | None = Field(
        description="position in the run, from 0 (null only for a round trip parsed outside a run)"
    )
    started: str | None = Field(
        description="ISO-8601 UTC start time (null for imports, which record none)"
    )
    family: str = Field(
        description="`openai_chat` (incl. OpenAI-compatible servers), `openai_responses`, "
        "`anthropic`, `gemini`, `ollama`, `bedrock`; `unknown` for LLM-looking traffic no adapter "
        "claims; `none` for other HTTP traffic"
    )
    operation: str | None = Field(
        description="`generate` for model calls; otherwise what the endpoint does (`count_tokens`, "
        "`retrieve`, …); only `generate` round trips are fully parsed"
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
    finish_reason: FinishReasonJson = Field(
        description="why the generation stopped, as sent and normalised"
    )
    usage: UsageJson = Field(
        description="token counts as the API reported them (null where not reported)"
    )
    tool_calls: list[ToolCallJson] = Field(description="calls the model emitted, in order")
    text: str | None = Field(description="the assistant's text, concatenated")
    reasoning: str | None = Field(description="reasoning/thinking text when the API returned it")
    refusal: str | None = Field(description="refusal text (OpenAI `refusal`, …)")
    error: ErrorJson | None = Field(
        description="an error the API reported: an HTTP error "
        "body, or an error event inside a stream"
    )
    complete: bool | None = Field(
        description="the response's terminal marker was seen (`[DONE]`, `message_stop`, "
        "`response.completed`, a `finishReason`, `done: true`, `messageStop`); non-streamed bodies "
        "are complete; false on a transport error"
    )
    truncated: bool = Field(
        description="`complete` is false: the stream ended without its terminal event"
    )
    read: Literal["complete", "partial", "unread"] | None = Field(
        description="how looptap read the round trip: `complete`, `partial` (`unread` says "
        "what not; no finding rests on it) or `unread` (an LLM-looking call no adapter reads, or "
        "neither side parsed); null for traffic that is not an LLM API's"
    )
    unread: list[str] = Field(
        description="what of it looptap could not read: a message's or the answer's part of an "
        "unknown shape, the usage a stream never sent, what could not be parsed"
    )
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
        description="facts about the bytes: lying Content-Encoding, "
        "invalid UTF-8, a cut stream tail, …"
    )
    mcp: dict[str, Any] | None = Field(
        description="for a round trip to an MCP tool server (family `mcp`, operation `mcp "
        "<method>`): `method`, `id`, `answered`; for `tools/call` also `tool`, `arguments`, "
        "`tool_use_id` (the model's call it ran, when the client sends it in `_meta`), `result` "
        "(text) and `is_error`, or `error` (`code`, `message`); for `tools/list` the `tools` "
        "names; `linked` (from the analysis, `tools/call` only): `call_id`, `by` (`id` or "
        "`name_arguments`), `model_seq`, `conversation`, `turn` of the model's call it ran, or "
        "`candidates` (how many equal awaiting calls it could have run, when not linked)"
    )
    tool_http: dict[str, Any] | None = Field(
        default=None,
        description="only on a tool's HTTP call (a round trip the recorder's forward proxy took to "
        "a host that is not an LLM API's, marked `tool` in the cassette; family `none`, operation "
        "`tool_http`, never a turn): `method`, `host`, `path` (with the query; at most 300 "
        "characters), `status`, `transport_error`, `started` (epoch seconds), `duration` "
        "(seconds), `sent` and `got` (the start of the request and answer bodies as text, at "
        "most 300 characters each), `sent_bytes`, `got_bytes`; `linked` (from the analysis): "
        "`call_id`, `by` (`arguments`: of the calls awaiting their result, the one whose "
        "arguments the URL, query or body carries most of; `awaiting`: the only call awaiting), "
        "`tool`, `model_seq`, `conversation`, `turn` of the model's call it served, or "
        "`candidates` (how many awaiting calls fit equally, when not linked)",
    )


# -- the doc table and the JSON Schema, generated from RoundTripJson ----------------------------

#: The line of docs/show-json.md above the generated table.
DOC_MARK = (
    "<!-- generated from cassettes/views/schema.py (RoundTripJson) by `python -m "
    "looptap.cassettes.views.schema --doc`: edit the model, not this table -->"
)


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
        f"| {', '.join(f'`{k}`' for k in keys)} | {type_} | {meaning} |"
        for keys, type_, meaning in rows
    ]
    return "\n".join(lines) + "\n"


def schema_text() -> str:
    """The JSON Schema of the ``looptap.roundtrip/1`` object, as docs/roundtrip.schema.json holds
    it."""
    return (
        json.dumps(
            RoundTripJson.model_json_schema(mode="serialization"), indent=2, ensure_ascii=False
        )
        + "\n"
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
        prog="python -m looptap.cassettes.views.schema",
        description="The looptap.roundtrip/1 schema, from its model.",
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
