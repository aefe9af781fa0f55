"""Raw bytes to meaning: one exchange parsed through its provider into a :class:`RoundTrip` of the
normalised models (:mod:`cassettes.models`), in ``_roundtrip``; a run parsed in order, each
request against the one its history delta extends (:func:`parse_all`). The adapters themselves
live in ``cassettes/providers/``. One private module behind this façade (its names pinned by
tests/cassettes/test_parsing_surface.py)."""

from __future__ import annotations

from ._roundtrip import (
    MAX_PARSE_BYTES,
    RoundTrip,
    parse_all,
    parse_exchange,
    parse_request_side,
    parse_response_side,
    side_call,
)

__all__ = [
    "MAX_PARSE_BYTES",
    "RoundTrip",
    "parse_all",
    "parse_exchange",
    "parse_request_side",
    "parse_response_side",
    "side_call",
]
