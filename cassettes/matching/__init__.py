"""Matching two requests that legitimately differ: what of a request's text is volatile between
two runs of one agent (dates, clocks, ids, temp paths, the working directory, ports), found by
shape, so that replay, the pytest plugin and a fork's prefix tolerate it the same way and say what
they tolerated (:mod:`cassettes.matching.volatile`). Plain text processing: it imports nothing
above the base, so every layer that compares or shows requests may use it.
"""

from __future__ import annotations

from cassettes.matching.volatile import (
    DETECTORS,
    NUMBERED,
    Detector,
    Numbering,
    Span,
    Tolerated,
    VolatileSpans,
    tolerated,
)

__all__ = [
    "DETECTORS",
    "NUMBERED",
    "Detector",
    "Numbering",
    "Span",
    "Tolerated",
    "VolatileSpans",
    "tolerated",
]
