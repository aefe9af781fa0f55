"""``looptap run --from RUN@SELECTOR --repeat K``: the agent run K times from the cursor, and per
turn past it, how the K branches agree with each other and with the recording: a difference all K
branches share is systematic (the model or the edit), one they do not is the model's variance.

A turn's answer is compared as ``looptap compare`` does: the tool calls with their arguments (or
text / a refusal / an error: :func:`cassettes.replay.forking._lineup.turn_answer`). Each branch is
lined up with the origin from the cursor as ``looptap diff`` lines it up
(:func:`cassettes.replay.forking._lineup.lined_up`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ...hints import count
from ...reading import open_run, origin_of
from ...untrusted import clean_line
from ._lineup import lined_up, turn_answer, turns_of
from .rundiff import comparing_files

__all__ = ["agreement", "agreement_lines"]


@dataclass
class TurnAgreement:
    conversation: str
    turn: int
    recorded: str | None
    answers: list[str] = field(default_factory=list)

    @property
    def with_each_other(self) -> float:
        return (
            Counter(self.answers).most_common(1)[0][1] / len(self.answers) if self.answers else 0.0
        )

    @property
    def with_recording(self) -> float:
        return (
            sum(a == self.recorded for a in self.answers) / len(self.answers)
            if self.answers
            else 0.0
        )


def agreement(run: str | Path, branches: list[str | Path]) -> list[TurnAgreement]:
    """Per (origin conversation, turn) past the cursor: the K branches' answers and the
    recording's."""
    a = open_run(run, whole=True)
    out: dict[tuple[str, int], TurnAgreement] = {}
    for path in branches:
        origin = origin_of(path)
        if origin is None:
            continue
        b = open_run(path, whole=True)
        # conversations paired as `looptap diff` pairs them: with the fork's notes, the origin's
        # turns at the cursor as they were sent live
        compare = comparing_files(run, a.header, b.header)
        for conv_a, turn, seq_a, seq_b in turns_of(lined_up(a, b, path, origin, compare)[2]):
            rec = a.analysis.turns.get(seq_a) if seq_a is not None else None
            ta = out.setdefault(
                (conv_a, turn),
                TurnAgreement(conv_a, turn, turn_answer(rec) if rec is not None else None),
            )
            tb = b.analysis.turns.get(seq_b) if seq_b is not None else None
            ta.answers.append(turn_answer(tb) if tb is not None else "(no such turn)")
    return [out[k] for k in sorted(out)]


def agreement_lines(rows: list[TurnAgreement], k: int) -> list[str]:
    out = [
        f"looptap run --repeat: per turn past the cursor, how the {count(k, 'branch', 'branches')} "
        "written in this run agree"
    ]
    for r in rows:
        distinct = len(set(r.answers))
        kind = (
            "systematic: every branch answers alike, unlike the recording"
            if distinct == 1 and r.with_recording == 0
            else "as recorded in every branch"
            if r.with_recording == 1
            else "the model's variance: the branches differ"
        )
        out.append(
            f"  conversation {r.conversation}, turn {r.turn}: "
            f"{count(len(r.answers), 'branch', 'branches')}, with each other "
            f"{r.with_each_other:.0%} ({distinct} distinct answer{'s' if distinct != 1 else ''}), "
            f"with the recording {r.with_recording:.0%}: {kind}"
        )
    return [clean_line(line) for line in out]
