"""The main screen's search across the run (plain Python, no Textual): the screen applies it.

:class:`Navigation` holds the last search (:class:`inspector.screens.search.Matches`, which ``n``
and ``N`` step through) and makes what the search dialog searches; the screen jumps to the turn.
"""

from __future__ import annotations

from collections.abc import Callable

from cassettes.reading.run import Run
from cassettes.views.search import SearchHit, search_turns
from inspector.screens.search import Matches
from inspector.turns import TurnIndex

__all__ = ["Navigation"]


class Navigation:
    """The last search, and what a new one searches."""

    def __init__(self) -> None:
        self.matches = Matches()

    @staticmethod
    def searcher(index: TurnIndex, source: Run) -> Callable[[str], list[SearchHit]]:
        """What the search dialog calls (in its worker): every turn of the run, read in full."""
        seqs = list(index.order)

        def search(query: str) -> list[SearchHit]:
            return search_turns((source.full_turn(s, remember=False) for s in seqs), query)

        return search
