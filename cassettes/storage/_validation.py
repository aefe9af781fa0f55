"""An exchange record's fields checked before it is read: each has the type and the range looptap
writes (:func:`check_exchange_record`), so one bad record is skipped and labelled by the
codec's readers (:mod:`cassettes.storage._codec`) instead of failing a command later."""

from __future__ import annotations

from typing import Any

from ..errors import CassetteFormatError

__all__ = ["check_exchange_record", "check_number"]


def check_number(value: Any, name: str, low: float, high: float, *, integer: bool = False) -> None:
    """Raise :class:`CassetteFormatError` when ``value`` (a field called ``name``) is not a
    number (an integer), or lies outside ``low``..``high``; ``None`` passes."""
    if value is None:
        return
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok:
        raise CassetteFormatError(
            f"malformed exchange record: {name} is {type(value).__name__}, not "
            f"{'an integer' if integer else 'a number'}"
        )
    if not (low <= value <= high):  # also false for NaN
        raise CassetteFormatError(f"malformed exchange record: {name} {value!r} is out of range")


def _string(value: Any, name: str, *, optional: bool = True, limit: int | None = None) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise CassetteFormatError(
            f"malformed exchange record: {name} is {type(value).__name__}, not a string"
        )
    if limit is not None and len(value) > limit:
        raise CassetteFormatError(
            f"malformed exchange record: {name} is longer than {limit:,} characters"
        )


def _object(value: Any, name: str, *, optional: bool = True) -> Any:
    if (value is not None or not optional) and not isinstance(value, dict):
        raise CassetteFormatError(f"malformed exchange record: {name} is not an object")
    return value


def _headers_ok(value: Any, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise CassetteFormatError(
            f"malformed exchange record: {name} is not a list of [name, value] pairs"
        )
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise CassetteFormatError(
                f"malformed exchange record: {name} holds something other than [name, value] pairs"
            )
        v = pair[1]
        if not (isinstance(v, str) or (isinstance(v, dict) and isinstance(v.get("b64"), str))):
            raise CassetteFormatError(
                f"malformed exchange record: {name} has a value that is not a string"
            )


def check_exchange_record(rec: dict[str, Any]) -> None:
    """Raise :class:`CassetteFormatError` naming the first field of an exchange record that has
    the wrong type or an impossible value, so one bad record is skipped and labelled instead of
    failing a command later (a status of ``1e21``, a start time of ``"yesterday"``, a URL that
    does not parse)."""
    from urllib.parse import urlsplit

    check_number(rec.get("seq"), "seq", 0, 2**53, integer=True)
    check_number(rec.get("started"), "started", -1e11, 1e11)
    _string(rec.get("method"), "method", optional=False, limit=256)
    _string(rec.get("url"), "url", optional=False)
    try:
        _ = urlsplit(rec["url"]).port
    except ValueError as exc:
        raise CassetteFormatError(
            f"malformed exchange record: url does not parse ({exc})"
        ) from None
    req = _object(rec.get("request"), "request", optional=False)
    _headers_ok(req.get("headers"), "request.headers")
    _object(req.get("body"), "request.body")
    resp = _object(rec.get("response"), "response")
    if resp is not None:
        check_number(resp.get("status"), "response.status", 0, 999, integer=True)
        _string(resp.get("reason"), "response.reason", limit=65536)
        _headers_ok(resp.get("headers"), "response.headers")
        _object(resp.get("body"), "response.body")
    timing = _object(rec.get("timing"), "timing")
    if timing is not None:
        check_number(timing.get("ttfb"), "timing.ttfb", 0, 1e9)
        check_number(timing.get("duration"), "timing.duration", 0, 1e9)
    _string(rec.get("transport_error"), "transport_error")
    _string(rec.get("decoded_from"), "decoded_from", limit=256)
    notes = rec.get("notes")
    if notes is not None and not (
        isinstance(notes, list) and all(isinstance(n, str) for n in notes)
    ):
        raise CassetteFormatError("malformed exchange record: notes is not a list of strings")
