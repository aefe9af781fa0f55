"""The counts of a turn a later request re-read into a conversation of its own (issue 90,
docs/threading.md "Handoffs read again"; test_handoff_returned.py's supervisor runs).

A moved turn is its new conversation's turn k from 0. Its first turn follows no request of that
conversation: nothing it sent is *as before* or *changed* and nothing was dropped, every message
is its own, as on any conversation's first turn (a handoff read as one from the start says the
same). The later turns keep what they said against the loop's turn before them. The analysis kept
whole (``RunAnalyser`` with its turns) and the reader's turns restored from their store
(``show --json``, the inspector) say it from one place, :func:`looptap.cassettes.analysis.
_rehome.place`. Before session 48's merge the JSON said the first moved turn's history was "as
before" against the transfer's request, in another conversation, while ``show`` said none was."""

from __future__ import annotations

import pytest
from test_handoff_returned import FAMILIES4, _supervised

from looptap.cassettes.analysis import RunAnalysis


def _counts(run: RunAnalysis, seq: int) -> tuple[int, int, int, int, int]:
    n = run.turns[seq].c.counts
    assert n is not None
    return n.sent, n.as_before, n.changed, n.new, n.dropped


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_moved_first_turn_counts_every_message_its_own(family: str) -> None:
    run = _supervised(family, back=True)
    first, second = run.turns[1], run.turns[2]
    assert (first.index, first.previous_seq) == (0, None)
    sent = _counts(run, 1)[0]
    assert _counts(run, 1) == (sent, 0, 0, sent, 0)
    # the loop's next turn: against the loop's first, all it sent before as before
    n = _counts(run, 2)
    assert second.previous_seq == 1 and n[1] == sent and n[2] == n[4] == 0
