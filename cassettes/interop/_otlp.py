"""OTLP transport: the OTLP/JSON request of :mod:`cassettes.interop._otel` as protobuf; the POST.

The core carries no protobuf runtime, so the few OTLP trace messages are encoded by hand: the
protobuf wire format is small (varints, fixed64, length-delimited fields) and the schema is fixed
(``opentelemetry/proto/collector/trace/v1``). The tests decode the bytes with the official
``opentelemetry-proto`` classes and compare them with the JSON parsed by protobuf's own JSON
mapping, field for field.

OTLP/HTTP: ``POST {endpoint}/v1/traces`` with ``application/x-protobuf`` (what every collector and
Phoenix accept) or ``application/json``, by httpx (the client every request looptap sends uses).
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from ..errors import CassetteError
from ..recording import Redactor

__all__ = ["batches", "encode_request", "send", "traces_url"]


class ExportError(CassetteError, OSError):
    """The OTLP endpoint could not be reached or refused the export."""


# -- wire format -----------------------------------------------------------------------------------

_VARINT, _FIXED64, _LEN = 0, 1, 2

#: The OTLP trace messages (``opentelemetry/proto/{collector/trace,trace,common}/v1``) as the
#: encoder reads them: each message's fields in order, (number, OTLP/JSON key, kind). A kind is a
#: scalar's encoding (``str``, ``hex`` bytes, ``uint``, ``fixed64``, ``double``; not written at its
#: type's default), another message (written whenever its key is there) or ``*`` and a message
#: (repeated). ``any_value`` is a oneof: its first member present is written, default or not.
_MESSAGES: dict[str, tuple[tuple[int, str, str], ...]] = {
    "request": ((1, "resourceSpans", "*resource_spans"),),
    "resource_spans": (
        (1, "resource", "resource"), (2, "scopeSpans", "*scope_spans"), (3, "schemaUrl", "str"),
    ),
    "resource": ((1, "attributes", "*key_value"),),
    "scope_spans": ((1, "scope", "scope"), (2, "spans", "*span"), (3, "schemaUrl", "str")),
    "scope": ((1, "name", "str"), (2, "version", "str"), (3, "attributes", "*key_value")),
    "span": (
        (1, "traceId", "hex"), (2, "spanId", "hex"), (3, "traceState", "str"),
        (4, "parentSpanId", "hex"), (5, "name", "str"), (6, "kind", "uint"),
        (7, "startTimeUnixNano", "fixed64"), (8, "endTimeUnixNano", "fixed64"),
        (9, "attributes", "*key_value"), (11, "events", "*event"), (15, "status", "status"),
    ),
    "event": ((1, "timeUnixNano", "fixed64"), (2, "name", "str"), (3, "attributes", "*key_value")),
    "status": ((2, "message", "str"), (3, "code", "uint")),
    "key_value": ((1, "key", "str"), (2, "value", "any_value")),
    "any_value": (
        (1, "stringValue", "str"), (2, "boolValue", "uint"), (3, "intValue", "uint"),
        (4, "doubleValue", "double"), (5, "arrayValue", "values"), (6, "kvlistValue", "kvlist"),
    ),
    "values": ((1, "values", "*any_value"),),
    "kvlist": ((1, "values", "*key_value"),),
}  # fmt: skip


def _varint(n: int) -> bytes:
    if n < 0:
        n &= (1 << 64) - 1  # int64 two's complement, ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | _LEN) + _varint(len(payload)) + payload


def _scalar(field: int, kind: str, v: Any) -> bytes:
    """A scalar field: its key and its value in the kind's encoding."""
    if kind == "str":
        return _len_field(field, str(v).encode())
    if kind == "hex":
        return _len_field(field, bytes.fromhex(v))
    if kind == "fixed64":
        return _varint(field << 3 | _FIXED64) + struct.pack("<Q", int(v))
    if kind == "double":
        return _varint(field << 3 | _FIXED64) + struct.pack("<d", float(v))
    return _varint(field << 3 | _VARINT) + _varint(int(v))  # uint, and a bool as 0 or 1


def _message(name: str, m: Mapping[str, Any]) -> bytes:
    """The OTLP/JSON object ``m`` as the protobuf message ``name`` of :data:`_MESSAGES`."""
    out = bytearray()
    for field, key, kind in _MESSAGES[name]:
        if key not in m:
            continue
        v = m[key]
        if kind[0] == "*":
            out += b"".join(_len_field(field, _message(kind[1:], i)) for i in v or [])
        elif kind in _MESSAGES:
            out += _len_field(field, _message(kind, v))
        elif (v and (kind != "fixed64" or int(v))) or name == "any_value":
            out += _scalar(field, kind, v)
        if name == "any_value":
            break  # a oneof: its first member present only, written even at its default
    return bytes(out)


def encode_request(req: Mapping[str, Any]) -> bytes:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (as :func:`~cassettes.interop._otel.iter_requests`
    builds it) in the protobuf wire format."""
    return _message("request", req)


# -- OTLP/HTTP -------------------------------------------------------------------------------------


def traces_url(endpoint: str) -> str:
    """The signal URL: an endpoint that already ends in ``/v1/traces`` is used as given, a base
    endpoint gets it appended (as ``OTEL_EXPORTER_OTLP_ENDPOINT`` works)."""
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/traces"):
        path += "/v1/traces"  # before the query string, not after it
    return urlunsplit(parts._replace(path=path))


#: A request body above this is split (collectors commonly refuse bodies over 4 MiB).
MAX_BODY_BYTES = 3 * 1024 * 1024


def _encode(req: Mapping[str, Any], protocol: str) -> bytes:
    return orjson.dumps(req) if protocol == "json" else encode_request(req)


def batches(
    req: Mapping[str, Any], protocol: str = "protobuf", limit: int = MAX_BODY_BYTES
) -> list[bytes]:
    """The request as one or more bodies of at most ``limit`` bytes (a single span larger than that
    still goes alone): spans in order, each batch with the same resource and scope. A run's spans
    carry the whole history they sent, so a long run easily outgrows one request."""
    whole = _encode(req, protocol)
    if len(whole) <= limit:
        return [whole]
    out: list[bytes] = []
    for rs in req.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            # What a batch costs besides its spans (resource, scope, the length prefixes that grow
            # with the batch), then each span's own encoded size.
            base = (
                len(
                    _encode(
                        {"resourceSpans": [{**rs, "scopeSpans": [{**ss, "spans": []}]}]}, protocol
                    )
                )
                + 16
            )
            groups: list[list[Any]] = [[]]
            size = base
            for span in ss.get("spans", []):
                n = len(_encode({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, protocol))
                if groups[-1] and size + n > limit:
                    groups.append([])
                    size = base
                groups[-1].append(span)
                size += n
            for group in groups:
                if group:
                    out.append(
                        _encode(
                            {"resourceSpans": [{**rs, "scopeSpans": [{**ss, "spans": group}]}]},
                            protocol,
                        )
                    )
    return out


def send(
    req: Mapping[str, Any],
    endpoint: str,
    protocol: str = "protobuf",
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, int]:
    """POST the request to the OTLP/HTTP endpoint, split into bodies of at most
    :data:`MAX_BODY_BYTES`; ``(last HTTP status, requests sent)``. Raises :class:`ExportError`."""
    ctype = "application/json" if protocol == "json" else "application/x-protobuf"

    url = traces_url(endpoint)
    shown = Redactor().url(url)  # what error messages name: credentials in the URL redacted
    if not url.startswith(("http://", "https://")):
        raise ExportError(f"OTLP endpoint must be an http:// or https:// URL, got {shown!r}")
    import httpx2  # (the network client only when an export is sent: textconv shares this module)

    status = 0
    bodies = batches(req, protocol)
    try:  # (the system's CA store and the environment's proxies, as urllib had them)
        with httpx2.Client(timeout=timeout, verify=ssl.create_default_context()) as client:
            for body in bodies:
                resp = client.post(
                    url, content=body, headers={"Content-Type": ctype, **(headers or {})}
                )
                status = resp.status_code
                if status >= 400:
                    detail = resp.content[:300].decode("utf-8", "replace").strip()
                    raise ExportError(
                        f"{shown} refused the export: HTTP {status} "
                        f"{resp.reason_phrase}{': ' + detail if detail else ''}"
                    )
    except ExportError:
        raise
    except (httpx2.HTTPError, OSError) as exc:
        raise ExportError(f"cannot reach {shown}: {exc}") from None
    return status, len(bodies)
