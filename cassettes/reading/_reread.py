"""A pass over a :class:`~cassettes.reading._incremental.RunReader`'s round trips, read again from
disk in recording order (what a command goes through once the analysis is done: memory holds one
round trip at a time, not the run), and its turns restored from the reader's store on lookup: over
what the pass reads of the reader (:class:`Run`, which the reader is)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..analysis import Turn
from ..parsing import RoundTrip, parse_exchange
from ..storage import BODY_CACHE
from ..wire import Exchange

if TYPE_CHECKING:
    from ..storage import RecordSource
    from ._stores import Places

# the reader's own passes (cassettes.reading._incremental): no public surface
__all__: list[str] = []


class Run(Protocol):
    """What a pass reads of the run it goes through (a
    :class:`~cassettes.reading._incremental.RunReader`): its records (with their index), the
    analysis' parses, and its store of full turns."""

    source: RecordSource
    places: Places

    def parse_at(self, pos: int) -> RoundTrip | None: ...
    def full_turn(self, seq: int, *, remember: bool = ...) -> Turn: ...


class Reread:
    """The exchanges and parsed round trips of a :class:`Run`, read again from disk in
    recording order on every pass: :attr:`pairs` (exchange and round trip together),
    :attr:`exchanges` and :attr:`roundtrips` are sized iterables (a small cache of the latest
    records serves the same record to each), and :attr:`turns` maps a turn's seq to its full turn,
    restored from the run's store.

    The records the analysis skipped (unreadable) are skipped here too."""

    def __init__(self, run: Run, cache: int = 8) -> None:
        self._run = run
        # The run's records again, through a file handle and a cache of bodies of this pass's own.
        self._records = run.source.fork(BODY_CACHE, keep_open=True)
        # position → [exchange, round trip or None]
        self._recent: OrderedDict[int, list[Any]] = OrderedDict()
        self._cache = cache
        self.exchanges = Column(self, 0)
        self.roundtrips = Column(self, 1)
        self.pairs = Column(self, 2)
        self.turns = Turns(run)

    def __len__(self) -> int:
        return len(self._records)

    def positions(self) -> Iterator[int]:
        return self._records.positions()

    def _entry(self, pos: int) -> list[Any]:
        hit = self._recent.get(pos)
        if hit is not None:
            return hit
        entry = [self._records.exchange_at(pos), None]
        self._recent[pos] = entry
        while len(self._recent) > self._cache:
            self._recent.popitem(last=False)
        return entry

    def by_seq(self, seq: int) -> tuple[Exchange, RoundTrip] | None:
        """The round trip with this seq (the last one when a seq repeats), read again from disk."""
        pos = self._records.index.position(seq)  # (the run's index: its forks share it)
        if pos is None or pos in self._records.skipped:
            return None
        return self.pair_at(pos)

    def exchange_at(self, pos: int) -> Exchange:
        ex: Exchange = self._entry(pos)[0]
        return ex

    def roundtrip_at(self, pos: int) -> RoundTrip:
        entry = self._entry(pos)
        if entry[1] is None:
            entry[1] = self._run.parse_at(pos)  # the analysis' parse: not parsed again
        if entry[1] is None:
            ex = entry[0]
            base_seq = (ex.history_delta or {}).get("base")
            base = None
            if isinstance(base_seq, int):  # parse only what it appended to a recent request
                base = next(
                    (
                        e[1]
                        for e in self._recent.values()
                        if e[1] is not None and e[0].seq == base_seq
                    ),
                    None,
                )
            entry[1] = parse_exchange(ex, base)
        rt: RoundTrip = entry[1]
        return rt

    def pair_at(self, pos: int) -> tuple[Exchange, RoundTrip]:
        return self.exchange_at(pos), self.roundtrip_at(pos)

    def close(self) -> None:
        self._records.close()


class Column:
    """One column of a :class:`Reread` (exchanges, round trips, or both in pairs): sized,
    iterable, read lazily."""

    def __init__(self, reread: Reread, which: int) -> None:
        self._reread = reread
        self._which = which

    def __len__(self) -> int:
        return len(self._reread)

    def __iter__(self) -> Iterator[Any]:
        get = self._get()
        return (get(pos) for pos in self._reread.positions())

    def __getitem__(self, k: int) -> Any:
        """The k-th round trip (negative counts from the end), read again from disk."""
        n = len(self)
        if not -n <= k < n:
            raise IndexError(k)
        return self._get()(self._reread._records.nth(k % n))

    def _get(self) -> Any:
        r = self._reread
        return (r.exchange_at, r.roundtrip_at, r.pair_at)[self._which]


class Turns(Mapping[int, Turn]):
    """seq → full turn, restored from a reader's store on each lookup."""

    def __init__(self, run: Run) -> None:
        self._run = run

    def __getitem__(self, seq: int) -> Turn:
        if seq not in self._run.places:
            raise KeyError(seq)
        return self._run.full_turn(seq, remember=False)

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and seq in self._run.places

    def __iter__(self) -> Iterator[int]:
        return iter(self._run.places)

    def __len__(self) -> int:
        return len(self._run.places)
