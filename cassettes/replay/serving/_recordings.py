"""The recorded round trips a replay serves: a run opened from any format it is recorded in (a
looptap cassette, vcrpy, a mitmproxy flow file) or given as exchanges, a large looptap cassette
served from its offset index (:class:`~cassettes.matching.IndexedRecordings`), and the volatile
detectors of the places the run was recorded in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import CassetteError
from ...matching import IndexedRecordings, VolatileSpans, volatile_for
from ...reading import detect, first_turn, open_run, origin_in
from ...storage import open_regular, read_header
from ...wire import Exchange

__all__ = ["open_recordings"]


def _size(path: str | Path, unknown: int) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return unknown  # let the index reader say what is wrong with it


def _recorded_places(path: str | Path) -> VolatileSpans:
    """The volatile detectors for replaying the looptap cassette at ``path`` here: this process's
    cwd and home and those its header says the run was recorded in (cassettes.matching).
    Only the first line is read (at most 1 MiB); a header that cannot be read adds nothing (the
    readers that follow say what is wrong with the file)."""
    try:
        with open_regular(path) as f:
            first = f.readline(1 << 20)
        header = read_header(path, first.rstrip(b"\r\n"))[0]
    except (CassetteError, OSError, ValueError):
        header = None
    return volatile_for(header)


def open_recordings(
    cassette: str | Path | Sequence[Exchange], volatile: bool | VolatileSpans, indexed_from: int
) -> tuple[str, Any, Sequence[Exchange] | IndexedRecordings, int, bool | VolatileSpans]:
    """The recorded round trips to serve from ``cassette`` (a run's path, or exchanges), with the
    run's name, the problems reading it found, the turn its numbering starts at, and the volatile
    detectors (``True``: those of the places the run was recorded in). A looptap cassette of
    ``indexed_from`` bytes or more is served from its offset index."""
    problems: Any = []
    recordings: Sequence[Exchange] | IndexedRecordings
    # a fork's branch held in memory keeps its origin's turn numbers (cassettes.reading._branch)
    first = 0
    if isinstance(cassette, (str, Path)):
        # Any format a run is opened from (a looptap cassette, vcrpy, a mitmproxy flow file).
        # A large looptap cassette is served from its offset index (a played round trip is
        # read again from disk: memory flat in the run's size); a small one, and the other
        # formats (small by nature), are held in memory, which answers ~3x faster.
        source = str(cassette)
        looptap = detect(cassette) == "looptap"
        if looptap and volatile is True:
            volatile = _recorded_places(cassette)
        if looptap and _size(cassette, indexed_from) >= indexed_from:
            recordings = IndexedRecordings(cassette)
        else:
            run = open_run(cassette, whole=True)
            problems = run.problems
            recordings = list(run.exchanges)
            first = first_turn(origin_in(run.header))
    else:
        source = "<exchanges>"
        problems = []
        recordings = cassette
    if not isinstance(recordings, IndexedRecordings):
        for i, ex in enumerate(recordings):
            if ex.seq is None:
                ex.seq = i
    return source, problems, recordings, first, volatile
