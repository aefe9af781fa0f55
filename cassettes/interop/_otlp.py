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
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from ..errors import CassetteError
from ..recording import Redactor

__all__ = ["batches", "encode_request", "send", "traces_url"]


class ExportError(CassetteError, OSError):
    """The OTLP endpoint could not be reached or refused the export."""


# -- wire format -----------------------------------------------------------------------------------

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


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


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _len_field(field: int, payload: bytes) -> bytes:
    return _key(field, _LEN) + _varint(len(payload)) + payload


def _str(field: int, s: str | None) -> bytes:
    return _len_field(field, s.encode()) if s else b""


def _bytes_hex(field: int, h: str | None) -> bytes:
    return _len_field(field, bytes.fromhex(h)) if h else b""


def _uint(field: int, n: int | None) -> bytes:
    return _key(field, _VARINT) + _varint(n) if n else b""


def _fixed64(field: int, n: int | str | None) -> bytes:
    v = int(n or 0)
    return _key(field, _FIXED64) + struct.pack("<Q", v) if v else b""


def _msgs(field: int, items: list[Any] | None, enc: Callable[[Any], bytes]) -> bytes:
    return b"".join(_len_field(field, enc(i)) for i in items or [])


def _any_value(v: Mapping[str, Any]) -> bytes:
    # A oneof member is written even when it holds its type's default value.
    if "stringValue" in v:
        return _len_field(1, str(v["stringValue"]).encode())
    if "boolValue" in v:
        return _key(2, _VARINT) + _varint(1 if v["boolValue"] else 0)
    if "intValue" in v:
        return _key(3, _VARINT) + _varint(int(v["intValue"]))
    if "doubleValue" in v:
        return _key(4, _FIXED64) + struct.pack("<d", float(v["doubleValue"]))
    if "arrayValue" in v:
        return _len_field(5, _msgs(1, v["arrayValue"].get("values"), _any_value))
    if "kvlistValue" in v:
        return _len_field(6, _msgs(1, v["kvlistValue"].get("values"), _key_value))
    return b""


def _key_value(kv: Mapping[str, Any]) -> bytes:
    return _str(1, kv["key"]) + _len_field(2, _any_value(kv["value"]))


def _event(e: Mapping[str, Any]) -> bytes:
    return (
        _fixed64(1, e.get("timeUnixNano"))
        + _str(2, e.get("name"))
        + _msgs(3, e.get("attributes"), _key_value)
    )


def _status(s: Mapping[str, Any]) -> bytes:
    return _str(2, s.get("message")) + _uint(3, s.get("code"))


def _span(s: Mapping[str, Any]) -> bytes:
    out = (
        _bytes_hex(1, s.get("traceId"))
        + _bytes_hex(2, s.get("spanId"))
        + _str(3, s.get("traceState"))
        + _bytes_hex(4, s.get("parentSpanId"))
        + _str(5, s.get("name"))
        + _uint(6, s.get("kind"))
        + _fixed64(7, s.get("startTimeUnixNano"))
        + _fixed64(8, s.get("endTimeUnixNano"))
        + _msgs(9, s.get("attributes"), _key_value)
        + _msgs(11, s.get("events"), _event)
    )
    if "status" in s:
        out += _len_field(15, _status(s["status"]))
    return out


def _scope(s: Mapping[str, Any]) -> bytes:
    return (
        _str(1, s.get("name"))
        + _str(2, s.get("version"))
        + _msgs(3, s.get("attributes"), _key_value)
    )


def _scope_spans(ss: Mapping[str, Any]) -> bytes:
    out = _len_field(1, _scope(ss["scope"])) if "scope" in ss else b""
    return out + _msgs(2, ss.get("spans"), _span) + _str(3, ss.get("schemaUrl"))


def _resource_spans(rs: Mapping[str, Any]) -> bytes:
    out = (
        _len_field(1, _msgs(1, rs["resource"].get("attributes"), _key_value))
        if "resource" in rs
        else b""
    )
    return out + _msgs(2, rs.get("scopeSpans"), _scope_spans) + _str(3, rs.get("schemaUrl"))


def encode_request(req: Mapping[str, Any]) -> bytes:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (as :func:`~cassettes.interop._otel.iter_requests`
    builds it) in the protobuf wire format."""
    return _msgs(1, req.get("resourceSpans"), _resource_spans)


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
