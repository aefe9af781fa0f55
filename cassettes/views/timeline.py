"""When each piece of a streamed response's text arrived: the timeline a player re-streams.

A stream is recorded chunk by chunk with time offsets. :func:`text_timeline` turns it into
``(offset, characters of text so far)`` points by reassembling growing prefixes of the stream's
events with the family's own reassembler (so no format knowledge lives here). The number of
prefixes is capped (:data:`MAX_POINTS`, evenly spread over the events), which keeps the cost linear
in the stream's length times that cap; the last point is always the whole text.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import providers
from ..parsing import RoundTrip
from ..wire import Exchange, Framed, frame

__all__ = ["TimelinePoint", "text_timeline"]

#: At most this many reassembled prefixes per stream.
MAX_POINTS = 120


@dataclass(frozen=True)
class TimelinePoint:
    #: Seconds from the request being sent.
    offset: float
    #: How many characters of the final text (``rt.response.text``) had arrived by then.
    chars: int


def text_timeline(ex: Exchange, rt: RoundTrip, max_points: int = MAX_POINTS) -> list[TimelinePoint]:
    """The text's arrival over time; empty when the response was not streamed, has no text, or
    its chunks carry no time offsets (imports)."""
    resp = rt.response
    adapter = providers.by_family(rt.family)
    if not rt.stream or resp is None or adapter is None or not resp.text:
        return []
    framed = frame(ex.response_chunks, ex.response_header("content-type"))
    events = framed.events
    if not events or any(e.offset is None for e in events):
        return []
    final = resp.text
    n = len(events)
    step = max(1, -(-n // max(1, max_points)))
    picks = list(range(step - 1, n, step))
    if not picks or picks[-1] != n - 1:
        picks.append(n - 1)
    out: list[TimelinePoint] = []
    chars = 0
    for i in picks:
        try:
            text = adapter.reassemble(Framed(kind=framed.kind, events=events[: i + 1])).text
        except Exception:  # a reassembler that cannot take a cut stream: skip this point
            continue
        # The text so far is a prefix of the final text; anything else (a provider that rewrites
        # earlier text) is shown by length only, never running backwards.
        chars = max(chars, min(len(text), len(final)))
        offset = events[i].offset
        assert offset is not None
        if chars == (out[-1].chars if out else 0):
            continue  # no new text at this point
        out.append(TimelinePoint(offset=offset, chars=chars))
    if not out or out[-1].chars != len(final):
        last = events[-1].offset
        assert last is not None
        out.append(TimelinePoint(offset=last, chars=len(final)))
    return out
