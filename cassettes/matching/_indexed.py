"""A looptap cassette served from its offset index: what the replay server holds per recorded
round trip is a few integers, not the exchange.

:class:`IndexedRecordings` reads the file once, a block at a time (the reader of a cassette's
records every streaming command uses, :class:`~cassettes.storage.RecordSource`), hands each
exchange to the :class:`~cassettes.matching.Matcher` (which keeps a hash of its
request key) and lets it go; a played round trip is read again from disk by its offset. The run
analysis that places the round trips in conversations and turns (needed for a miss or the report
only) is the streamed one (:func:`~cassettes.reading.open_run`). The memory budget of the
commands that read a whole run (``LOOPTAP_MEMORY_BUDGET_MB``) holds here too: one line, never a
``MemoryError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..reading import memory_budget, open_run, within_budget
from ..storage import BLOCK, RecordSource
from ..wire import Exchange

if TYPE_CHECKING:
    from ..analysis import McpCall

__all__ = ["IndexedRecordings"]

#: A recording up to this size is read whole to place its round trips in turns (:meth:`labels`).
WHOLE_BELOW = 16 << 20


class IndexedRecordings:
    """The exchanges of a looptap cassette by position (those that could be read, in file order),
    read again from disk on each :meth:`exchange`. :attr:`problems` are the damage found, as the
    whole-file reader reports it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # The readable records (one whose history delta cannot be rebuilt is skipped, as the
        # whole-file reader skips it), re-read through the cache of bodies the scan filled.
        self.source = RecordSource(self.path)
        self.index = self.source.index
        self._scanned = False

    @property
    def problems(self) -> list[str]:
        return [str(p) for p in sorted(self.source.problems, key=lambda p: p.line)]

    def __len__(self) -> int:
        return len(self.source)

    def scan(self) -> Iterator[Exchange]:
        """Every readable exchange, in file order (once: it builds the index)."""
        if self._scanned:
            raise RuntimeError("the recording was already scanned")
        self._scanned = True

        index = self.index
        budget = memory_budget()
        while True:
            recs = self.source.poll(BLOCK)
            at_end = index.consumed + index.pending >= index.size()
            yield from self._take(recs, len(index) - len(recs))
            within_budget(self.path, budget, "serving", index, len(self.source))
            if at_end:
                break
        tail = self.source.close_tail()
        yield from self._take(tail, len(index) - len(tail))

    def _take(self, recs: list[tuple[int, dict[str, object]]], first: int) -> Iterator[Exchange]:
        for _, ex in self.source.take(recs, first):  # type: ignore[arg-type]
            yield ex
        recs.clear()  # (the block's records: the exchanges go with the caller)

    def seq(self, i: int) -> int:
        return self.index.seqs[self.source.nth(i)]

    def exchange(self, i: int) -> Exchange:
        """The ``i``-th readable exchange, read again from disk."""
        changed = " (the file changed while it was served)"
        return self.source.exchange_at(self.source.nth(i), changed=changed)

    def labels(self) -> Iterator[tuple[int, str, int]]:
        """(position, conversation, turn) of every round trip the run analysis places in a turn
        (the streamed analysis: memory flat in the run's length)."""

        # A small run is analysed in memory, as a run held whole is (faster to start: a miss is
        # answered while the client waits); a large one as a stream.
        run = open_run(self.path, whole=self.index.size() <= WHOLE_BELOW)
        turns = run.analysis.turns
        for i in range(len(self.source)):
            turn = turns.get(self.seq(i))
            if turn is not None:
                yield i, turn.conversation, turn.index

    def tool_links(self) -> dict[int, McpCall]:
        """seq → the model's tool call each tool's HTTP call served (the run analysis's links)."""
        run = open_run(self.path, whole=self.index.size() <= WHOLE_BELOW)
        return {seq: c for seq, c in run.analysis.mcp_calls.items() if c.via == "http"}
