"""What the inspector needs of a run being read: the seam between the app and the core's reader.

The app holds no copy of the run's turns: the summaries live in the reader (``summaries``, by seq)
and the app keeps only seq indexes (recording order, per conversation). Everything the app asks of
the reader is listed here, so a change of the core's run types touches this protocol and the one
place that builds the reader (:func:`open_source`), not the app.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from cassettes.analysis.model import Conversation, McpCall, Turn
from cassettes.parsing.roundtrip import RoundTrip
from cassettes.reading.incremental import Batch
from cassettes.reading.run import open_run
from cassettes.storage.store import Problem
from cassettes.views.summary import TurnSummary
from cassettes.wire.exchange import Exchange

__all__ = ["TurnSource", "open_source"]


class TurnSource(Protocol):
    """A run read a batch at a time (``step`` in one thread; the viewer methods from others)."""

    @property
    def summaries(self) -> Mapping[int, TurnSummary]: ...

    @property
    def problems(self) -> list[Problem]: ...

    @property
    def records(self) -> int: ...

    def step(self, max_bytes: int | None = ...) -> Batch: ...

    def progress(self) -> float | None:
        """Share of the file read so far (``None``: unknown)."""
        ...

    def finish(self) -> None: ...

    def conversations(self) -> list[Conversation]: ...

    def mcp_calls(self) -> list[McpCall]: ...

    def full_turn(self, seq: int, *, remember: bool = True) -> Turn: ...

    def by_seq(self, seq: int) -> tuple[Exchange, RoundTrip]: ...


class _Followed:
    """A :class:`cassettes.Run` followed as its file grows (``open_run(path, follow=True)``)
    behind :class:`TurnSource`."""

    def __init__(self, path: Path, *, live: bool = False) -> None:
        # A finished run takes the analysis kept by an earlier reader (docs/kept-analysis.md).
        self.run = open_run(path, follow=True, cache=not live)

    @property
    def summaries(self) -> Mapping[int, TurnSummary]:
        return self.run.summaries

    @property
    def problems(self) -> list[Problem]:
        return self.run.damage

    @property
    def records(self) -> int:
        return self.run.records

    def step(self, max_bytes: int | None = 4 * 1024 * 1024) -> Batch:
        return self.run.step(max_bytes)

    def progress(self) -> float | None:
        return self.run.progress()

    def finish(self) -> None:
        self.run.finish()

    def conversations(self) -> list[Conversation]:
        return list(self.run.analysis.conversations)

    def mcp_calls(self) -> list[McpCall]:
        return list(self.run.analysis.mcp_calls.values())

    def full_turn(self, seq: int, *, remember: bool = True) -> Turn:
        return self.run.full_turn(seq, remember=remember)

    def by_seq(self, seq: int) -> tuple[Exchange, RoundTrip]:
        found = self.run.by_seq(seq)
        if found is None:
            raise KeyError(seq)
        return found


def open_source(path: Path, *, live: bool = False) -> TurnSource:
    return _Followed(path, live=live)
