"""An OTLP trace file's spans (OTLP/JSON, one ``ExportTraceServiceRequest`` a line or one
document, or OTLP protobuf with opentelemetry-proto), and their attributes as Python values.

Log records (the Logs data model: ``ExportLogsServiceRequest`` lines in the same OTLP/JSON file, as
the OTLP file exporter writes every signal, or a logs file in JSON or protobuf given beside it) that
are events (an ``eventName``, or an ``event.name`` attribute) are joined to their span by trace id
and span id: each becomes one of the span's events, its body (a map, or a string of JSON) kept
under :data:`BODY`, in the order the records were made. A record of a span not in the file is
counted, not read (:data:`UNJOINED`)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .. import bounds
from ..errors import ImportFormatError
from ..recording import valid_agent
from ._documents import read_docs

__all__ = [
    "BODY",
    "SCOPE",
    "SERVICE",
    "UNJOINED",
    "ancestors",
    "attributes",
    "flattened",
    "json_attribute",
    "listed",
    "read_spans",
    "span_id",
]

#: The key a span read here keeps its instrumentation scope's name under.
SCOPE = "looptap.scope"
#: The key a span read here keeps its resource's ``service.name`` under, when one was set (an
#: SDK's default, ``unknown_service…``, is none): the fleet names the run's agent from it.
SERVICE = "looptap.service"

#: The key an event made of a log record keeps the record's body under (its attributes are the
#: record's).
BODY = "looptap.body"
#: The key the first span read keeps the count of event records of spans not in the file under.
UNJOINED = "looptap.unjoined_logs"

#: The largest OTLP file imported: its spans are held to be put in order, about 10 times the
#: file's size in memory (a 28.7 MB file of 4,400 spans peaked at 271 MB).
OTLP_LIMIT = 128 << 20


def _value(v: Any, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` (JSON form) as a Python value."""
    if not isinstance(v, dict) or depth > bounds.WALK_DEPTH:
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in v or "boolValue" in v:
        return v.get("doubleValue", v.get("boolValue"))
    if "arrayValue" in v:
        return [_value(x, depth + 1) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values"), depth + 1)
    return v.get("bytesValue")


def ancestors(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> Iterator[str]:
    """The ids of ``span``'s parent, its parent's … while they are in the file (``by_id``); a cycle
    of parents ends the walk."""
    seen: set[str] = set()
    parent = span_id(span.get("parentSpanId"))
    while parent and parent in by_id and parent not in seen:
        seen.add(parent)
        yield parent
        parent = span_id(by_id[parent].get("parentSpanId"))


def listed(v: Any) -> list[Any]:
    """``v`` if it is a list, else an empty one (an attribute a trace may hold in any shape)."""
    return v if isinstance(v, list) else []


def attributes(kvs: Any, depth: int = 0) -> dict[str, Any]:
    """A span's (or an event's) ``attributes``, OTLP ``KeyValue``s in JSON form, as a dict."""
    out: dict[str, Any] = {}
    for kv in kvs if isinstance(kvs, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = _value(kv.get("value"), depth)
    return out


def json_attribute(v: Any) -> Any:
    """An attribute that holds JSON as a string (as the semconv has it), parsed and bounded."""
    if isinstance(v, str) and v[:1] in ("[", "{"):
        try:
            return bounds.loads(v)
        except orjson.JSONDecodeError:
            return None
    return v


def flattened(a: dict[str, Any], key: re.Pattern[str]) -> list[dict[str, Any]]:
    """Attributes flattened by number (OpenInference's ``llm.input_messages.N.message.FIELD``,
    openllmetry's ``gen_ai.prompt.N.FIELD`` …): ``key`` matches one, its groups N and FIELD; one
    ``{FIELD: value}`` per N, in N's order."""
    by: dict[int, dict[str, Any]] = {}
    for k, v in a.items():
        m = key.fullmatch(k)
        if m is not None:
            by.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return [fields for _, fields in sorted(by.items())]


def _spans_of(doc: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        raise ImportFormatError(f"{where}: not an OTLP ExportTraceServiceRequest")
    spans: list[dict[str, Any]] = []
    for rs in doc.get("resourceSpans") or doc.get("resource_spans") or []:
        if not isinstance(rs, dict):
            continue
        resource = rs.get("resource")
        service = valid_agent(
            attributes(resource.get("attributes") if isinstance(resource, dict) else None).get(
                "service.name"
            )
        )
        if service is not None and service.startswith("unknown_service"):
            service = None
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        for ss in scopes if isinstance(scopes, list) else []:
            scope = (ss or {}).get("scope")
            name = scope.get("name") if isinstance(scope, dict) else None
            for s in (ss or {}).get("spans") or []:
                if isinstance(s, dict):
                    s = {**s, SCOPE: name} if isinstance(name, str) else s
                    spans.append({**s, SERVICE: service} if service is not None else s)
    return spans


def _records_of(doc: Any) -> list[dict[str, Any]]:
    """The log records of an ``ExportLogsServiceRequest`` (JSON form) that are events."""
    out = []
    for rl in listed(doc.get("resourceLogs") or doc.get("resource_logs")):
        for sl in listed((rl or {}).get("scopeLogs") or (rl or {}).get("scope_logs")):
            for r in listed((sl or {}).get("logRecords") or (sl or {}).get("log_records")):
                if isinstance(r, dict):
                    a = attributes(r.get("attributes"))
                    name = r.get("eventName") or a.get("event.name")
                    if isinstance(name, str) and name:
                        out.append({**r, "name": name})
    return out


def _body(v: Any) -> dict[str, Any]:
    """A log record's body as a map: a map as it is, a string of a JSON object parsed (bounded);
    anything else as ``{"content": …}`` (the conventions' events keep a message's text so)."""
    body = _value(v)
    parsed = json_attribute(body) if isinstance(body, str) else body
    if isinstance(parsed, dict):
        return parsed
    return {"content": body} if body is not None else {}


def _joined(spans: list[dict[str, Any]], records: list[dict[str, Any]]) -> int:
    """Each event record made one of its span's events (by span id, and trace id where both say
    one), in the order the records were made; how many name no span in the file."""
    by_id = {(span_id(s.get("traceId")), span_id(s.get("spanId"))): s for s in spans}
    only_span = {span_id(s.get("spanId")): s for s in spans}
    lost = 0
    events: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    for n, r in enumerate(records):
        trace, sid = span_id(r.get("traceId")), span_id(r.get("spanId"))
        span = by_id.get((trace, sid)) if trace else only_span.get(sid)
        if span is None:
            lost += 1
            continue
        try:
            t = int(r.get("timeUnixNano") or r.get("observedTimeUnixNano") or 0)
        except (TypeError, ValueError):
            t = 0
        event = {"name": r["name"], "timeUnixNano": t, "attributes": r.get("attributes"),
                 BODY: _body(r.get("body"))}  # fmt: skip
        events.setdefault(id(span), []).append((t, n, event))
    for span in spans:
        said = events.get(id(span))
        if said:
            span["events"] = [
                *listed(span.get("events")),
                *(e for *_, e in sorted(said, key=lambda x: x[:2])),
            ]
    return lost


def _proto_docs(path: Path, logs: bool = False) -> list[tuple[int, Any]]:
    try:
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise ImportFormatError(
            f"{path}: OTLP protobuf needs opentelemetry-proto (pip install opentelemetry-proto), "
            "or export the traces as OTLP/JSON"
        ) from None
    if path.stat().st_size > bounds.MAX_DECODED_BYTES:
        raise ImportFormatError(f"{path}: OTLP protobuf over 64 MiB; not imported (split it)")
    msg = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
    try:
        msg.ParseFromString(path.read_bytes())
    except Exception:  # the protobuf runtime's DecodeError, by implementation
        raise ImportFormatError(f"{path}: not OTLP protobuf (it does not decode)") from None
    return [(0, MessageToDict(msg))]


def span_id(v: Any) -> str:
    """A span id as OTLP/JSON spells it (hex); protobuf's JSON form gives base64."""
    if not isinstance(v, str) or not v:
        return ""
    if re.fullmatch(r"[0-9a-fA-F]+", v):
        return v.lower()
    try:
        return base64.b64decode(v).hex()
    except ValueError:
        return v


def _sized(path: Path) -> None:
    if path.stat().st_size > OTLP_LIMIT:
        raise ImportFormatError(
            f"{path}: {path.stat().st_size >> 20} MiB of OTLP is more than an import holds "
            f"({OTLP_LIMIT >> 20} MiB); split it by trace and import the parts"
        )


def read_spans(
    path: Path, kind: str, logs: tuple[Path, ...] = ()
) -> list[tuple[int, dict[str, Any]]]:
    """The spans of an OTLP file (``kind`` ``"otlp-proto"``: protobuf, else OTLP/JSON), each with
    its place in the file, the event log records of the file and of ``logs`` (OTLP/JSON or
    protobuf logs files) joined to them."""
    _sized(path)
    docs = _proto_docs(path) if kind == "otlp-proto" else read_docs(path)
    spans: list[tuple[int, dict[str, Any]]] = []
    records: list[dict[str, Any]] = []
    for n, doc in docs:
        where = f"{path}, line {n}" if n else str(path)
        if isinstance(doc, dict) and ("resourceLogs" in doc or "resource_logs" in doc):
            records += _records_of(doc)
            continue
        spans.extend((len(spans), s) for s in _spans_of(doc, where))
    for extra in logs:
        _sized(extra)
        with extra.open("rb") as fh:
            proto = not fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"["))
        for _, doc in _proto_docs(extra, logs=True) if proto else read_docs(extra):
            records += _records_of(doc) if isinstance(doc, dict) else []
    if not spans:
        raise ImportFormatError(f"{path}: no spans in it; nothing imported")
    lost = _joined([s for _, s in spans], records) if records else 0
    if lost:
        spans[0][1][UNJOINED] = lost
    return spans
