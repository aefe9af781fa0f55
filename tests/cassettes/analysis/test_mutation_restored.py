"""A mutation's consequence folds under its root (issue 90, docs/threading.md "Each shape, and what
C says"): a client whose one request was changed on its way out (the client matrix's injector, a
gateway's or a middleware's edit of the copy it sent) re-sends its real history next. That
request differs from the mutated one again, so ``C.history_mutated`` is found on it too; it is the
mutation undone, said as its consequence (info, ``caused_by`` the mutated round trip), only by
evidence: the request is the line the mutation changed, word for word (the request before it and
that request's answer), then what the mutated request appended and its answer. Any other change
stands as its own warning.

On c86d115d the restoring request was a second ``C.history_mutated`` warning on every variant."""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import WEATHER, AgentScript, Call
from test_context_mutations import FAMILIES4, R1, SYSTEM, VARIANTS, Item, _base_items, _render

from looptap.cassettes.analysis import RunAnalysis
from looptap.cassettes.analysis.codes import Severity

#: The requests' histories: the real history up to each answer (seqs 0..5); #4 is mutated.
ASKS = (1, 3, 5, 8, 10, 12)
MUTATED, RESTORED = 4, 5


def _calls(h: list[Item]) -> list[Call]:
    return [it[2][0] for it in h if it[0] == "asst" and it[2]]


def _run(family: str, variant: str, then: Any = None) -> RunAnalysis:
    """The agent's run; its request #4 carries ``variant``'s bug, and #5 its real history
    (``then`` edits that history further: another change of the client's)."""
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    full = _base_items(family)
    calls = _calls(full)
    for seq, n in enumerate(ASKS):
        h = list(full[:n])
        if seq == MUTATED:
            VARIANTS[variant](h, calls)
        if seq == RESTORED and then is not None:
            then(h)
        s.history = _render(family, h)
        if n < len(full):
            s.reply(full[n][1], calls=full[n][2])
        else:
            s.reply("Sunny in Lisbon. Museums: Gulbenkian and the Tile Museum.")
    return s.analyse()


def _mutated(run: RunAnalysis) -> dict[int, tuple[Severity, Any, Any]]:
    return {
        f.seq or 0: (f.severity, f.details.get("caused_by"), f.details.get("caused_by_seq"))
        for f in run.findings
        if f.code == "C.history_mutated"
    }


TABLE = [(v, f) for v in VARIANTS for f in FAMILIES4]


@pytest.mark.parametrize(("variant", "family"), TABLE, ids=[f"{v}-{f}" for v, f in TABLE])
def test_the_real_history_re_sent_folds_under_the_mutation(variant: str, family: str) -> None:
    run = _run(family, variant)
    assert len(run.conversations) == 1
    assert _mutated(run) == {
        MUTATED: (Severity.WARNING, None, None),
        RESTORED: (Severity.INFO, "C.history_mutated", MUTATED),
    }
    serious = [f for f in run.findings if f.severity in (Severity.WARNING, Severity.ERROR)]
    assert {(f.code, f.seq) for f in serious} == {("C.history_mutated", MUTATED)}
    restored = next(f for f in run.findings if f.code == "C.history_mutated" and f.seq == RESTORED)
    assert "restores what turn 3 sent before turn 4's change" in restored.message


def _result_changed(output: str) -> Any:
    def edit(h: list[Item]) -> None:
        i = next(i for i, it in enumerate(h) if it[0] == "res" and it[1][0][1] == output)
        call, out = h[i][1][0]
        h[i] = ("res", [(call, out + " (edited)")])

    return edit


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_restore_that_changes_what_the_mutated_request_appended_stands(family: str) -> None:
    # #4 appended the Sintra result; #5 restores #4's change but rewrites that result: a change
    # of its own, not the mutation undone
    run = _run(family, "longer", then=_result_changed("cloudy, 19 C"))
    assert _mutated(run)[RESTORED] == (Severity.WARNING, None, None)


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_third_text_is_no_restore(family: str) -> None:
    # #5 sends the Lisbon result neither as #3 sent it nor as #4 changed it
    run = _run(family, "longer", then=_result_changed(R1))
    assert _mutated(run)[RESTORED] == (Severity.WARNING, None, None)


@pytest.mark.parametrize("family", FAMILIES4)
def test_the_mutated_line_kept_is_said_once(family: str) -> None:
    # the client keeps the mutated history: #5 extends #4, nothing more to say
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    full = _base_items(family)
    calls = _calls(full)
    mutated = list(full)
    VARIANTS["equal"](mutated, calls)
    for seq, n in enumerate(ASKS):
        h = full[:n] if seq < MUTATED else mutated[:n]
        s.history = _render(family, h)
        if n < len(full):
            s.reply(full[n][1], calls=full[n][2])
        else:
            s.reply("Sunny in Lisbon.")
    assert _mutated(s.analyse()) == {MUTATED: (Severity.WARNING, None, None)}
