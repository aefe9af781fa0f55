"""A run's exchanges held in memory (``Run.of``, imports, a cassette read whole), behind the same
members as the reader of a looptap cassette read as a stream
(:class:`~cassettes.reading._incremental.RunReader`), so that :class:`~cassettes.reading._run.Run`
reads every run one way: parsed and analysed on first use, found by seq through a table made on
first use, never followed (each ``step`` is at its end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..parsing import RoundTrip, parse_all
from ..wire import Exchange

if TYPE_CHECKING:
    from ..analysis import RunAnalysis, Turn
    from ..storage import Problem
    from ..views import TurnSummary
    from ._incremental import Batch

__all__: list[str] = []  # what Run holds for exchanges in memory: not a second way to read a run


class Held:
    """Exchanges in a list, their parses and analysis made on first use."""

    def __init__(
        self,
        exchanges: list[Exchange],
        analysis: RunAnalysis | None = None,
        problems: Sequence[str] = (),
        first_turn: Callable[[], int] | None = None,
    ) -> None:
        self.exchanges = exchanges
        self._roundtrips: list[RoundTrip] | None = None
        self._pairs: list[tuple[Exchange, RoundTrip]] | None = None
        self._analysis = analysis
        #: Damage its loader found, one line each (a looptap cassette read whole, an import).
        self.problems: list[str] = list(problems)
        # The number of a conversation's first turn (a fork's branch keeps its origin's), asked
        # when the run is analysed.
        self._first_turn = first_turn
        self._summaries: dict[int, TurnSummary] | None = None
        self._by_seq: dict[int | None, tuple[Exchange, RoundTrip]] | None = None

    @property
    def roundtrips(self) -> list[RoundTrip]:
        if self._roundtrips is None:
            self._roundtrips = parse_all(list(self.exchanges))
        return self._roundtrips

    @property
    def pairs(self) -> list[tuple[Exchange, RoundTrip]]:
        if self._pairs is None:
            self._pairs = list(zip(self.exchanges, self.roundtrips, strict=True))
        return self._pairs

    @property
    def analysis(self) -> RunAnalysis:
        if self._analysis is None:
            from ..analysis import analyse

            first = self._first_turn() if self._first_turn is not None else 0
            self._analysis = analyse(list(self.exchanges), list(self.roundtrips), first)
        return self._analysis

    # -- nothing to follow: a run in memory is read to its end
    @property
    def damage(self) -> list[Problem]:
        return []

    @property
    def records(self) -> int:
        return len(self.exchanges)

    @property
    def seqs(self) -> Sequence[int]:
        return [ex.seq for ex in self.exchanges if ex.seq is not None]

    @property
    def read_bytes(self) -> int:
        return 0

    @property
    def still_written(self) -> bool:
        return False

    def progress(self) -> float | None:
        return 1.0

    def step(self, max_bytes: int | None = None) -> Batch:
        from ._incremental import Batch

        return Batch(turns=[], records=0, problems=[], at_end=True)

    def finish(self) -> None:
        return None

    def close(self) -> None:
        return None

    def printed(self, make: Callable[[], Iterator[Any]], kind: str = "views") -> Iterator[Any]:
        return make()

    # -- turns and round trips by seq
    @property
    def summaries(self) -> Mapping[int, TurnSummary]:
        if self._summaries is None:
            from ..views import summarise

            turns = self.analysis.turns
            self._summaries = {s: summarise(turns[s]) for s in sorted(turns)}
        return self._summaries

    def full_turn(self, seq: int, *, remember: bool = True) -> Turn:
        return self.analysis.turns[seq]

    def find(self, seq: int) -> tuple[Exchange, RoundTrip] | None:
        if self._by_seq is None:
            self._by_seq = {ex.seq: (ex, rt) for ex, rt in self.pairs}
        return self._by_seq.get(seq)

    def find_exchange(self, seq: int) -> Exchange:
        found = self.find(seq)
        if found is None:
            raise KeyError(seq)
        return found[0]
