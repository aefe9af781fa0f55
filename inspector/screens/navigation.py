"""Where the main screen's moves go (plain Python, no Textual): the screen applies them.

:class:`Navigation` holds the last search (:class:`inspector.screens.search.Matches`) and decides
the turn ``f``/``F`` moves to and what the search dialog searches; the screen moves its widgets
(the sidebar's list, the Turn tab, the tabs) there, as :class:`inspector.playback.Playback`
decides and the player applies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cassettes.analysis.dispatch import ordered_findings
from cassettes.views.search import SearchHit, search_turns
from cassettes.views.summary import TurnSummary
from inspector.screens.search import Matches
from inspector.source import TurnSource
from inspector.turns import TurnIndex

__all__ = ["Navigation"]


class Navigation:
    """The last search, and the walk of ``f``/``F`` through the findings."""

    def __init__(self) -> None:
        self.matches = Matches()

    @staticmethod
    def next_finding(rows: Sequence[TurnSummary], here: int | None, direction: int) -> int | None:
        """``f`` / ``F``: the next / previous turn with a finding in the order of the findings
        (the core's: root causes by severity, each followed by what it caused), among ``rows``;
        from a turn without one, ``f`` starts at the worst and ``F`` at the last (``None``: no
        further one)."""
        found = ordered_findings(f for t in rows for f in t.findings)
        walk = list(dict.fromkeys(f.seq for f in found if f.seq is not None))
        if here in walk:
            i = walk.index(here) + direction
        else:
            i = 0 if direction > 0 else len(walk) - 1
        return walk[i] if 0 <= i < len(walk) else None

    @staticmethod
    def searcher(index: TurnIndex, source: TurnSource) -> Callable[[str], list[SearchHit]]:
        """What the search dialog calls (in its worker): every turn of the run, read in full."""
        seqs = list(index.order)

        def search(query: str) -> list[SearchHit]:
            return search_turns((source.full_turn(s, remember=False) for s in seqs), query)

        return search
