"""A run as HAR 1.2 (HTTP Archive), for browser devtools, mitmweb and other HTTP tools.

Each round trip is one entry. Bodies are the decoded bytes the cassette keeps (HAR's
``content.text`` is the body after Content-Encoding is removed, so the recorded headers stay as
they were); a streamed response is reassembled into its full text (the SSE or NDJSON text as it
arrived), with the chunk boundaries and their time offsets in the entry's ``_looptap.chunks``.
Bodies that are not UTF-8 are base64 (``content.encoding``). Timings come from the recording:
``wait`` is the time to the response headers, ``receive`` the rest of the body; an import without
times has zeros and a start laid out from the cassette's creation time.

looptap's view of the round trip (family, conversation and turn, finish reason, findings) rides in
the entry's ``_looptap`` object: HAR allows custom fields whose names start with an underscore.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from .._version import __version__
from ..parsing import RoundTrip
from ..reading import Run, timeline
from ..wire import Exchange, Headers

__all__ = ["har_chunks"]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _headers(h: Headers) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in h]


def _text(body: bytes) -> tuple[str, str | None]:
    """``(text, encoding)``: the body as text, base64 when it is not UTF-8."""
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def _cookies(h: Headers, name: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for k, v in h:
        if k.lower() != name:
            continue
        if name == "cookie":
            for piece in v.split(";"):
                n, _, val = piece.strip().partition("=")
                if n:
                    out.append({"name": n, "value": val})
        else:  # set-cookie: the first pair is the cookie, the rest are attributes
            n, _, val = v.split(";", 1)[0].strip().partition("=")
            if n:
                out.append({"name": n, "value": val})
    return out


def _ms(seconds: float | None) -> float:
    return round(max(seconds or 0.0, 0.0) * 1000, 3)


def _request(ex: Exchange) -> dict[str, Any]:
    """HAR's ``request``: the recorded request, its body as ``postData``."""
    url = urlsplit(ex.url)
    request: dict[str, Any] = {
        "method": ex.method,
        "url": ex.url,
        "httpVersion": "HTTP/1.1",
        "cookies": _cookies(ex.request_headers, "cookie"),
        "headers": _headers(ex.request_headers),
        "queryString": [
            {"name": k, "value": v} for k, v in parse_qsl(url.query, keep_blank_values=True)
        ],
        "headersSize": -1,
        "bodySize": len(ex.request_body),
    }
    if ex.request_body:
        text, enc = _text(ex.request_body)
        post: dict[str, Any] = {"mimeType": ex.request_header("content-type") or "", "text": text}
        if enc:
            # HAR 1.2 has no encoding for postData; said for readers that care
            post["_encoding"] = enc
        request["postData"] = post
    return request


def _response(ex: Exchange) -> dict[str, Any]:
    """HAR's ``response``: the recorded response (a transport error as ``_error``)."""
    body = ex.response_body
    text, enc = _text(body)
    content: dict[str, Any] = {
        "size": len(body),
        "mimeType": ex.response_header("content-type") or "",
        "text": text,
    }
    if enc:
        content["encoding"] = enc
    response: dict[str, Any] = {
        "status": ex.status if ex.status is not None else 0,
        "statusText": ex.reason or "",
        "httpVersion": "HTTP/1.1",
        "cookies": _cookies(ex.response_headers, "set-cookie"),
        "headers": _headers(ex.response_headers),
        "content": content,
        "redirectURL": ex.response_header("location") or "",
        "headersSize": -1,
        "bodySize": -1,
    }
    if ex.transport_error:
        response["_error"] = ex.transport_error
    return response


def _looptap(rt: RoundTrip, ex: Exchange, synthetic: bool, run: Run) -> dict[str, Any]:
    """The entry's ``_looptap`` extension: what looptap read of the round trip, and its turn's
    findings."""
    turn = run.analysis.turns.get(ex.seq) if ex.seq is not None else None
    resp = rt.response
    looptap: dict[str, Any] = {
        "seq": ex.seq,
        "family": rt.family,
        "operation": rt.operation,
        "stream": rt.stream,
        "model": (rt.request.model if rt.request else None) or (resp.model if resp else None),
        "finish_reason": resp.finish_reason_raw if resp else None,
        "complete": rt.complete,
        "timing": "synthetic" if synthetic else "recorded",
        "chunks": [{"offset": o, "size": len(c)} for o, c in ex.response_chunks],
    }
    if ex.decoded_from:
        looptap["decoded_from"] = ex.decoded_from
    if turn is not None:
        looptap["conversation"] = turn.conversation
        looptap["turn"] = turn.index
        looptap["findings"] = [
            {"code": f.code, "layer": f.layer, "severity": f.severity.value, "message": f.message}
            for f in turn.findings
        ]
    if rt.analysis_errors:
        looptap["analysis_errors"] = list(rt.analysis_errors)
    if rt.notes:
        looptap["notes"] = list(rt.notes)
    return looptap


def _entry(
    rt: RoundTrip, ex: Exchange, start: float, length: float, synthetic: bool, run: Run
) -> dict[str, Any]:
    request = _request(ex)
    response = _response(ex)
    wait = min(ex.ttfb, length) if ex.ttfb is not None else length
    receive = max(length - wait, 0.0)
    return {
        "startedDateTime": _iso(start),
        "time": round(_ms(wait) + _ms(receive), 3),
        "request": request,
        "response": response,
        "cache": {},
        "timings": {
            "blocked": -1,
            "dns": -1,
            "connect": -1,
            "ssl": -1,
            "send": 0,
            "wait": _ms(wait),
            "receive": _ms(receive),
        },
        "_looptap": _looptap(rt, ex, synthetic, run),
    }


def _log(run: Run) -> dict[str, Any]:
    return {
        "version": "1.2",
        "creator": {"name": "looptap", "version": __version__},
        "pages": [],
        "entries": [],
        "comment": f"looptap run {run.name}",
    }


def iter_entries(run: Run) -> Iterator[dict[str, Any]]:
    """The run's HAR entries, one round trip at a time."""
    for (ex, rt), (start, length, synthetic) in zip(
        run.pairs, timeline(run.epoch, run.exchanges), strict=True
    ):
        yield _entry(rt, ex, start, length, synthetic, run)


def har_chunks(run: Run) -> Iterator[bytes]:
    """The run as a HAR 1.2 document, JSON text a piece at a time (an entry per line), so that a
    run of a million round trips is written without being held."""
    head, _, tail = orjson.dumps({"log": _log(run)}).partition(b'"entries":[]')
    yield head + b'"entries":[\n'
    first = True
    for entry in iter_entries(run):
        yield (b"" if first else b",\n") + orjson.dumps(entry)
        first = False
    yield b"\n]" + tail + b"\n"
