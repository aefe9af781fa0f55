"""A run laid out in time: its epoch (:func:`epoch`: when it was recorded) and each round trip's
start and length (:func:`timeline`), the same on every export of the same file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from ..wire import Exchange

__all__ = ["epoch", "header_time", "timeline"]


def header_time(header: Any) -> float | None:
    """When the run under ``header`` was recorded (its ``created`` time, epoch seconds; a time
    without a zone is UTC's, so the same file lays out the same everywhere), or ``None`` when the
    header does not say it in a form read here."""
    created = header.get("created") if isinstance(header, Mapping) else None
    if not isinstance(created, str) or len(created) > 64:
        return None
    try:
        when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def epoch(header: dict[str, Any], exchanges: Iterable[Exchange]) -> float:
    """The header's creation time, else the first recorded start, else 0."""
    created = header_time(header)
    if created is not None:
        return created
    if isinstance(exchanges, list):  # a run read from disk has its epoch given
        return next((ex.started for ex in exchanges if ex.started is not None), 0.0)
    return 0.0


def _length(ex: Exchange) -> float:
    """How long the round trip took: its recorded duration, else the last chunk's offset, else
    the time to the response headers, else 0."""
    if ex.duration is not None:
        return max(ex.duration, 0.0)
    last = max((o for o, _ in ex.response_chunks if o is not None), default=None)
    if last is not None:
        return max(last, 0.0)
    return max(ex.ttfb or 0.0, 0.0)


def timeline(start: float, exchanges: Iterable[Exchange]) -> Iterator[tuple[float, float, bool]]:
    """``(start, seconds, synthetic)`` per exchange of a run whose epoch is ``start``, in order
    (one pass over the run, nothing kept). A round trip without a recorded start (an import) is
    laid out after the previous one, from the run's epoch, so the layout is the same on every
    export of the same file."""
    cursor = start
    for ex in exchanges:
        length = _length(ex)
        if ex.started is None:
            yield cursor, length, True
            cursor += length + 0.001
        else:
            yield ex.started, length, False
            cursor = max(cursor, ex.started + length)
