"""The cassette codec: exchanges ↔ JSON records, versioned; a request's history may be stored as a
delta of an earlier one (:mod:`cassettes.storage._delta`).

Never touches the disk (that is :mod:`cassettes.storage._store`). A cassette is JSON Lines: a header
record, then one record per round trip. See ``docs/cassette-format.md`` for the full schema.

Bodies are stored decoded and readable: a JSON body as JSON (``{"json": …}``), text as text, other
bytes as base64, and a stream as its ordered chunks with their time offsets
(``{"chunks": [[0.112, "data: …\\n\\n"], …]}``), so replay can be chunk for chunk at recorded pace.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import orjson

from .. import bounds
from ..bounds import RECORD_DEPTH, STORE_DEPTH, record_fits, too_deep
from ..errors import CassetteFormatError, NewerFormatError
from ..wire import Exchange, checked
from ._delta import HistoryDecoder
from ._validation import check_exchange_record, check_number

__all__ = [
    "FORMAT_VERSION",
    "MIGRATIONS",
    "depth_safe_record",
    "dumps_record",
    "exchange_to_record",
    "header_record",
    "loads_record",
    "migrate",
    "record_to_exchange",
]

MAGIC = "looptap-cassette"
FORMAT_VERSION = 1

#: ``MIGRATIONS[v]`` turns a version-``v`` record into a version ``v + 1`` record. Migrations run
#: step by step when an older cassette is read; a newer cassette is refused with a clear error.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def header_record(meta: dict[str, Any] | None = None, created: str | None = None) -> dict[str, Any]:
    from .._version import __version__

    return {
        "type": "header",
        "format": MAGIC,
        "format_version": FORMAT_VERSION,
        "writer": f"looptap {__version__}",
        "created": created,
        "meta": meta or {},
    }


def check_header(rec: Any) -> int:
    """The format version of a header record; raises if it is not a looptap header or too new."""
    if not isinstance(rec, dict) or rec.get("format") != MAGIC or rec.get("type") != "header":
        raise CassetteFormatError("not a looptap cassette (the first line is not a looptap header)")
    version = rec.get("format_version")
    if not isinstance(version, int) or version < 0:
        raise CassetteFormatError(f"cassette header has an invalid format_version: {version!r}")
    if version > FORMAT_VERSION:
        raise NewerFormatError(
            f"cassette format {version} was written by a newer looptap "
            f"({rec.get('writer', 'unknown')}); this looptap reads formats up to {FORMAT_VERSION}: "
            "upgrade looptap to read it"
        )
    return version


def migrate(rec: dict[str, Any], version: int) -> dict[str, Any]:
    for v in range(version, FORMAT_VERSION):
        step = MIGRATIONS.get(v)
        if step is None:
            raise CassetteFormatError(f"no migration from cassette format {v} to {v + 1}")
        rec = step(rec)
    return rec


def dumps_record(rec: dict[str, Any]) -> bytes:
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)


def _raw_form(data: bytes, t: float | None = None) -> dict[str, Any]:
    stored = _data_form(data)
    form: dict[str, Any] = {"text": stored} if isinstance(stored, str) else dict(stored)
    form["too_deep"] = True
    if t is not None:
        form["t"] = t
    return form


def depth_safe_record(rec: dict[str, Any], ex: Exchange) -> dict[str, Any]:
    """``rec`` made writable when something in it nests deeper than orjson writes (255 levels; a
    model controls how deep its tool-call arguments go): a JSON body too deep is stored as its raw
    text, labelled ``"too_deep": true`` (reading it back gives the exact bytes). Nothing recorded
    is lost."""

    out = dict(rec)
    req = dict(out["request"])
    if isinstance(req.get("body"), dict) and ("json" in req["body"] or "delta" in req["body"]):
        body = req["body"].get("json", req["body"].get("delta"))
        if too_deep(body, STORE_DEPTH):
            req["body"] = _raw_form(ex.request_body)
    out["request"] = req
    resp = out.get("response")
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict) and "json" in resp["body"]:
        if too_deep(resp["body"]["json"], STORE_DEPTH):
            resp = dict(resp)
            chunks = ex.response_chunks
            resp["body"] = _raw_form(
                b"".join(c for _, c in chunks), chunks[0][0] if chunks else None
            )
            out["response"] = resp
    return out


def loads_record(line: bytes) -> Any:
    """One parsed record line. Raises ``orjson.JSONDecodeError`` for a line that is not JSON and
    :class:`CassetteFormatError` for one nested deeper than looptap writes (every walk of a record
    is then bounded: see ``cassettes/bounds.py``)."""

    rec = orjson.loads(line)
    if not record_fits(rec, line, _BODY_LEVELS + bounds.WALK_DEPTH):
        if not record_fits(rec, line):
            raise CassetteFormatError(
                f"record nested deeper than looptap writes ({RECORD_DEPTH} levels)"
            )
        _bound_request_body(rec)
    return rec


#: Levels a record puts above its request body's JSON (record, request, body form).
_BODY_LEVELS = 3


def _bound_request_body(rec: Any) -> None:
    """A request body stored as JSON nesting deeper than :data:`~cassettes.bounds.WALK_DEPTH`
    (this looptap stores such a body as its raw text; an older one, or another tool, may not) is
    turned into that raw text, labelled ``too_deep``: its bytes are the same, and its parsed view
    is cut at the bound, as every reader's is. A history delta that deep was never written by
    looptap (a body cut for reading is stored whole): refused."""
    req = rec.get("request") if isinstance(rec, dict) else None
    if not isinstance(req, dict) or not isinstance(req.get("body"), dict):
        return
    form = req["body"]
    if "json" in form and bounds.too_deep(form["json"], bounds.WALK_DEPTH):
        req["body"] = {
            "text": orjson.dumps(form["json"], option=orjson.OPT_NON_STR_KEYS).decode(),
            "too_deep": True,
        }
    elif "delta" in form and bounds.too_deep(form["delta"], bounds.WALK_DEPTH - 2):
        raise CassetteFormatError(
            f"history delta {bounds.cut_reason()} (looptap stores such a request whole); skipped"
        )


# -- bodies ---------------------------------------------------------------------------------


def _t(t: float | None) -> float | None:
    return None if t is None else round(t, 6)


def _data_form(data: bytes) -> str | dict[str, str]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode()}


def encode_body(data: bytes, parsed: Any = None) -> dict[str, Any] | None:
    if not data:
        return None
    if parsed is not None:
        return {"json": parsed}
    stripped = data.lstrip()[:1]
    if stripped in (b"{", b"["):
        try:
            return {"json": orjson.loads(data)}
        except orjson.JSONDecodeError:
            pass
    form = _data_form(data)
    return {"text": form} if isinstance(form, str) else form


def decode_body(form: Any) -> tuple[bytes, Any]:
    """(bytes, parsed JSON or None) of a stored body form."""
    if form is None:
        return b"", None
    if not isinstance(form, dict):
        raise CassetteFormatError(f"body form is not an object: {type(form).__name__}")
    if "json" in form:
        return orjson.dumps(form["json"]), form["json"]
    if "text" in form:
        return str(form["text"]).encode("utf-8"), None
    if "b64" in form:
        return base64.b64decode(form["b64"]), None
    raise CassetteFormatError(f"unknown body form with keys {sorted(form)}")


def encode_chunks(
    chunks: list[tuple[float | None, bytes]], exact: bool = False
) -> dict[str, Any] | None:
    """A response body's stored form; ``exact``: a JSON body kept as the text it was (a tool's
    answer, which its client may hand the model as it came: replay serves those bytes), not as
    JSON."""
    if not chunks or (len(chunks) == 1 and not chunks[0][1]):
        return None
    if len(chunks) == 1:
        data = chunks[0][1]
        form = encode_body(data)
        if exact and form is not None and "json" in form and orjson.dumps(form["json"]) != data:
            raw = _data_form(data)
            form = {"text": raw} if isinstance(raw, str) else raw
        if form is not None:
            form["t"] = _t(chunks[0][0])
        return form
    return {"chunks": [[_t(t), _data_form(c)] for t, c in chunks]}


def decode_chunks(form: Any) -> list[tuple[float | None, bytes]]:
    if form is None:
        return []
    if isinstance(form, dict) and "chunks" in form:
        out: list[tuple[float | None, bytes]] = []
        for item in form["chunks"]:
            t, data = item
            if type(t) is not float or not 0 <= t <= 1e9:  # the common case checked in one step
                check_number(t, "a stream chunk's time offset", 0, 1e9)
            if isinstance(data, str):
                out.append((t, data.encode("utf-8")))
            elif isinstance(data, dict) and "b64" in data:
                out.append((t, base64.b64decode(data["b64"])))
            else:
                raise CassetteFormatError("a stream chunk is neither text nor base64")
        return out
    data, _ = decode_body(form)
    t = form.get("t") if isinstance(form, dict) else None
    check_number(t, "the response body's time offset", 0, 1e9)
    return [(t, data)]


# -- exchanges ------------------------------------------------------------------------------


def _header_out(headers: list[tuple[str, str]]) -> list[list[Any]]:
    """Header pairs as JSON. A value that is not valid Unicode (mitmproxy decodes header bytes
    with ``surrogateescape``) is stored as ``{"b64": …}`` of its bytes."""
    out: list[list[Any]] = []
    for k, v in headers:
        try:
            k.encode("utf-8")
            v.encode("utf-8")
            out.append([k, v])
        except UnicodeEncodeError:
            out.append(
                [
                    k.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                    {"b64": base64.b64encode(v.encode("utf-8", "surrogateescape")).decode()},
                ]
            )
    return out


def _header_in(headers: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in headers or []:
        if isinstance(v, dict) and "b64" in v:
            v = base64.b64decode(v["b64"]).decode("utf-8", "surrogateescape")
        out.append((str(k), str(v)))
    return out


def exchange_to_record(
    ex: Exchange,
    seq: int,
    request_form: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one exchange. ``request_form`` is the request body already encoded (the
    writer encodes it with :class:`HistoryEncoder` first, to parse the request incrementally
    against its history base); without it the body is stored in full."""
    if request_form is not None:
        req_body: dict[str, Any] | None = request_form
    elif ex.request_json_cut:  # nested deeper than a walk may go: the raw bytes, labelled
        req_body = _raw_form(ex.request_body)
    else:
        req_body = encode_body(ex.request_body, ex.request_json())
    rec: dict[str, Any] = {
        "type": "exchange",
        "seq": seq,
        "started": ex.started,
        "method": ex.method,
        "url": ex.url,
        "request": {"headers": _header_out(ex.request_headers), "body": req_body},
        "response": None
        if ex.status is None and not ex.response_chunks
        else {
            "status": ex.status,
            "reason": ex.reason,
            "headers": _header_out(ex.response_headers),
            "body": encode_chunks(ex.response_chunks, exact=ex.tool),
        },
        "timing": {"ttfb": _t(ex.ttfb), "duration": _t(ex.duration)},
    }
    if ex.decoded_from:
        rec["decoded_from"] = ex.decoded_from
    if ex.transport_error:
        rec["transport_error"] = ex.transport_error
    if ex.notes:
        rec["notes"] = ex.notes
    if ex.edits:
        rec["edits"] = ex.edits  # a fork's what-if edits (cassettes.wire._edit_marks)
    if ex.reconstructed:
        rec["reconstructed"] = ex.reconstructed  # an imported trace's (docs/cassette-format.md)
    if ex.tool:
        rec["tool"] = True  # a tool's HTTP call, not a model's (docs/cassette-format.md)
    return rec


def read_response(
    rec: dict[str, Any],
) -> tuple[int | None, list[tuple[str, str]], list[tuple[float | None, bytes]]]:
    """(status, headers, chunks) of a record's response, as a reader rebuilds them."""
    resp = rec.get("response")
    if not isinstance(resp, dict):
        return None, [], []
    return resp.get("status"), _header_in(resp.get("headers")), decode_chunks(resp.get("body"))


def _read_edits(ex: Exchange, value: Any) -> None:
    """A fork's edit marks (cassettes.wire._edit_marks), checked; marks that are not such are noted
    and dropped."""
    ex.edits = checked(value)
    if ex.edits is None:
        ex.notes.append("edits: the record's edit marks are malformed; ignored")


def _reconstructed(value: Any, notes: list[str]) -> dict[str, Any] | None:
    """An imported round trip's provenance mark, checked (version 1: ``from`` and ``inferred``
    lists of field names); one that is not such is noted and dropped."""
    if (
        isinstance(value, dict)
        and value.get("v") == 1
        and all(
            isinstance(value.get(k), list) and all(isinstance(n, str) for n in value[k])
            for k in ("from", "inferred")
        )
    ):
        return value
    notes.append("reconstructed: the record's provenance mark is malformed; ignored")
    return None


def record_to_exchange(
    rec: dict[str, Any], decoder: HistoryDecoder | None = None, *, checked: bool = False
) -> Exchange:
    """Rebuild an :class:`Exchange`. Raises :class:`CassetteFormatError` on a malformed record
    (``checked``: the caller already passed it through :func:`check_exchange_record`)."""
    if not checked:
        check_exchange_record(rec)
    try:
        req = rec["request"]
        resp = rec.get("response")
        ex = Exchange(
            method=str(rec["method"]),
            url=str(rec["url"]),
            request_headers=_header_in(req.get("headers")),
            started=rec.get("started"),
            seq=rec.get("seq"),
            transport_error=rec.get("transport_error"),
            notes=list(rec.get("notes") or []),
            decoded_from=rec.get("decoded_from"),
        )
        if "edits" in rec:
            _read_edits(ex, rec["edits"])
        if "reconstructed" in rec:
            ex.reconstructed = _reconstructed(rec["reconstructed"], ex.notes)
        ex.tool = rec.get("tool") is True
        body_form = req.get("body")
        if isinstance(body_form, dict) and "delta" in body_form:
            if decoder is None:
                raise CassetteFormatError("delta-encoded request body read without history state")
            parsed: Any = decoder.decode(body_form)
            ex.set_request_json(parsed, lazy_body=True)
            ex.history_delta = {
                k: v for k, v in body_form["delta"].items() if k in ("base", "keep", "rewritten")
            }
            ex.history_delta["appended"] = len(body_form["delta"]["append"])
        elif (
            isinstance(body_form, dict)
            and "text" in body_form
            and str(body_form["text"]).lstrip()[:1] in ("{", "[")
        ):
            # Stored as text though it looks like JSON: nested deeper than a walk may go (labelled
            # ``too_deep``; or than orjson parses, by an older looptap), or not JSON. Parsed when
            # first asked for, cut at the bound and labelled so, never passed off as "not JSON".
            ex.request_body, parsed = decode_body(body_form)
        else:
            ex.request_body, parsed = decode_body(body_form)
            capped = bounds.cap_lists(parsed)
            ex.set_request_json(
                capped,
                cut=capped is not parsed,
                reason=f"holds a list over {bounds.MAX_LIST:,} items",
            )
        if decoder is not None and ex.seq is not None:
            decoder.remember(ex.seq, parsed)
        if resp is not None:
            ex.status, ex.response_headers, ex.response_chunks = read_response(rec)
            ex.reason = resp.get("reason")
        timing = rec.get("timing") or {}
        ex.ttfb = timing.get("ttfb")
        ex.duration = timing.get("duration")
        return ex
    except CassetteFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CassetteFormatError(
            f"malformed exchange record: {type(exc).__name__}: {exc}"
        ) from None
