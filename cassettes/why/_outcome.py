"""What "failed" means for a run, as the user says it, and how it is judged (docs/why.md).

    exit (default)          the agent command's exit status is not 0
    --check CMD             a shell check run after the agent exits with a status other than 0
    --finding CODE          the run has a finding of that code (``C.dropped_tool_result``;
                            ``E.rule_broken:NAME``: the agent's rule of that name broken)
    --answer-matches RE     the final answer matches RE (a wrong answer the user recognises)
    --answer-not-matches RE the final answer does not match RE (the right answer is missing)

A cassette does not hold the agent command's exit status, nor can a check be judged from it:
for those two the recorded run's outcome is taken by running the command once against the whole
recording (every answer served from it, nothing sent: a fork isolated as every branch is,
:meth:`cassettes.why._branches.Branches.baseline`), which also proves the command reproduces the
recorded run up to its end, as every fork needs.
A finding and the final answer are read from the recording itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..analysis.codes import RULE_BROKEN
from ..patterns import PatternError, UserPattern
from ..reading import Run, fork_notes, open_run
from ..wire import Exchange

__all__ = ["Judged", "Outcome", "OutcomeError", "judged_from", "lived_run", "parse_outcome"]

#: Characters of the final answer a pattern is matched against.
_ANSWER_LIMIT = 200_000


class OutcomeError(ValueError):
    """An outcome that cannot be read (a bad pattern, two outcomes at once)."""


@dataclass(frozen=True)
class Outcome:
    #: ``exit``, ``check``, ``finding``, ``answer_matches`` or ``answer_not_matches``.
    kind: str
    #: The check command, the finding code or the pattern (``""`` for exit).
    value: str = ""

    @property
    def needs_run(self) -> bool:
        """Judged on what the command does (its status, a check after it), not on a cassette."""
        return self.kind in ("exit", "check")

    def describe(self) -> str:
        return {
            "exit": "the command exits with a status other than 0",
            "check": f"the check {self.value!r} exits with a status other than 0",
            "finding": f"the run has a finding {self.value}",
            "answer_matches": f"the final answer matches {self.value!r}",
            "answer_not_matches": f"the final answer does not match {self.value!r}",
        }[self.kind]

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value}

    def failed(self, judged: Judged) -> bool | None:
        """Whether ``judged`` fails by this outcome; ``None`` when it cannot be told (a branch the
        fork could not run, a final answer it never gave)."""
        if self.kind == "exit":
            return None if judged.exit is None else judged.exit != 0
        if self.kind == "check":
            return None if judged.check is None else judged.check != 0
        if self.kind == "finding":
            return None if judged.findings is None else self.value in judged.findings
        if judged.answer is None:
            return None
        hit = UserPattern(self.value).search(judged.answer[:_ANSWER_LIMIT])
        return hit if self.kind == "answer_matches" else not hit


@dataclass
class Judged:
    """What an outcome is judged on, for the recording or one branch."""

    exit: int | None = None
    check: int | None = None
    findings: set[str] | None = None
    answer: str | None = None


def parse_outcome(args: Any) -> Outcome:
    """The outcome the command line asks for (at most one of ``--check``, ``--finding``,
    ``--answer-matches``, ``--answer-not-matches``; else ``--outcome exit``)."""
    given = [
        (k, v)
        for k, v in (
            ("check", args.check),
            ("finding", args.finding),
            ("answer_matches", args.answer_matches),
            ("answer_not_matches", args.answer_not_matches),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise OutcomeError(
            "give one outcome: --check, --finding, --answer-matches or --answer-not-matches (or "
            "none: the exit status)"
        )
    if not given:
        return Outcome("exit")
    kind, value = given[0]
    if kind.startswith("answer"):
        try:
            UserPattern(value)
        except PatternError as exc:
            raise OutcomeError(
                f"--{kind.replace('_', '-')}: not a pattern looptap takes: {exc}"
            ) from None
    if kind == "finding" and not re.fullmatch(r"[EAC]\.[a-z_]{1,80}(:[^\n]{1,80})?", value):
        raise OutcomeError(
            "--finding wants a finding code as looptap show names "
            f"it (C.dropped_tool_result; E.rule_broken:NAME for one of the agent's rules, "
            f"docs/rules.md), not {value[:60]!r}"
        )
    if kind == "check" and not value.strip():
        raise OutcomeError("--check wants a command")
    if kind == "check" and not getattr(args, "check_timeout", 1) > 0:
        raise OutcomeError("--check-timeout wants seconds above 0 (the check's own time limit)")
    return Outcome(kind, value)


def final_answer(run: Any) -> str | None:
    """The final answer of ``run`` (an opened run: its analysis): the text of the last turn that
    answered with text, in the order the round trips were recorded; ``None`` when none did."""
    for seq in sorted(run.analysis.turns, reverse=True):
        text = run.analysis.turns[seq].e.text
        if text:
            return str(text)
    return None


def lived_run(origin: Any, branch: Path) -> Any:
    """The run a branch's agent lived (an opened :class:`~cassettes.reading.Run`): every request
    it made, in the order made, answered by the recording (``origin``'s round trip: the prefix,
    and each recorded turn served after the change, in every conversation) or live (``branch``'s
    own round trip); ``None`` when the fork noted no order (a branch made before it, one past
    its cap). A branch holds only its live round trips: judged alone, a sub-agent's answer would
    stand for the run's and a parent's failing turns, served from the recording, would be no
    part of it. A continuation the fork asked for (the ``continue`` edit) stays after its turn."""
    lived = fork_notes(branch)["lived"]
    if lived is None:
        return None
    recorded = {ex.seq: ex for ex in origin.exchanges}
    live = iter(open_run(branch, whole=True).exchanges)
    out: list[Exchange] = []

    def take_live() -> None:
        for ex in live:
            out.append(ex)
            if ex.tool:  # a tool's call the branch holds (live, or served): beside its turns
                continue
            if not any(m.get("edit") == "continue" for m in ex.edits or []):
                return

    for seq in lived:
        if seq is None:
            take_live()
        elif seq in recorded:
            out.append(recorded[seq])
    out += list(live)
    copies = [replace(ex, seq=n, history_delta=None) for n, ex in enumerate(out)]
    return Run.of(copies, name=branch.name)


def judged_from(run: Any) -> Judged:
    """What the recording itself tells: its findings and final answer."""
    codes = {f.code for f in run.analysis.findings}
    # a broken agent rule also by its name (docs/rules.md): --finding "E.rule_broken:NAME"
    codes |= {
        f"{f.code}:{f.details['rule']}" for f in run.analysis.findings if f.code == RULE_BROKEN
    }
    return Judged(findings=codes, answer=final_answer(run))
