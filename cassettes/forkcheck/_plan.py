"""What ``looptap run --from RUN@SEL --verify CMD`` will run, checked before anything is sent: one
row per model named (``--model A,B``; ``recorded``: the run's own model), each with the ``--edit``
items, K branches each (``--repeat``); each branch a fork started with ``--max-requests`` of its
share, so the at-most said first is a true upper bound; ``--max-cost`` kept against it with
``looptap why``'s budget (:func:`cassettes.why.budget_lines`: the same pricing, the same
refusal)."""

from __future__ import annotations

import argparse
import copy
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from ..errors import CassetteError
from ..hints import count
from ..reading import open_run
from ..replay.forking.compare.budget import BudgetError
from ..why import Intervention, Refused, budget_lines, live_turns, where_sent

__all__ = ["Plan", "Row", "plan"]

#: A branch may send this many times the recorded continuation live by default (another model may
#: take more steps than the recorded one); ``--max-requests`` sets it per branch.
HEADROOM = 3


@dataclass
class Row(Intervention):
    """One row of the report: a model (``None``: the recorded one) with the edits, forked at the
    user's selector (an :class:`Intervention` to ``why``'s branches and budget)."""

    selector: str = ""

    @property
    def cursor(self) -> str:
        return self.selector

    @property
    def name(self) -> str:
        """The row as the report names it."""
        return (self.model or "recorded model") + (" + edits" if self.edits else "")

    @property
    def key(self) -> str:
        return re.sub(
            r"[^A-Za-z0-9._-]", "_", (self.model or "recorded") + "-edited" * bool(self.edits)
        )[:120]


@dataclass
class Plan:
    rows: list[Row]
    samples: int
    #: What each branch may send live at most (its ``--max-requests``).
    per_branch: int
    #: The budget lines (what is said before anything is sent).
    lines: list[str] = field(default_factory=list)

    @property
    def at_most(self) -> int:
        return self.per_branch * self.samples * len(self.rows)


def models_of(given: str | None) -> list[str | None]:
    """``--model A,B,…`` as rows (``recorded``, or none given: the run's own model)."""
    names = [m.strip() for m in (given or "").split(",") if m.strip()] or ["recorded"]
    out = [None if m == "recorded" else m for m in names]
    if len(set(out)) < len(out):
        raise Refused(f"--model names a model twice: {given[:200] if given else ''}")
    return out


def plan(args: argparse.Namespace, run_path: str, selector: str) -> Plan:
    """The rows, each fork checked as ``looptap run --from`` checks it (cursor, model's family,
    edits, rules, upstreams: :func:`cassettes.replay.forking.fork.start_fork`, no file touched),
    and the budget; raises :class:`Refused` before anything is sent."""
    from ..replay.forking.fork import start_fork

    samples = int(args.repeat)
    if samples < 1 or int(args.jobs) < 1:
        raise Refused("--repeat and --jobs want a count from 1")
    if not float(args.verify_timeout) > 0:
        raise Refused("--verify-timeout wants seconds above 0 (the check's own time limit)")
    if not str(args.verify).strip():
        raise Refused("--verify wants a command (its exit status 0: verified)")
    try:
        max_cost = Decimal(args.max_cost) if args.max_cost is not None else None
    except InvalidOperation:
        raise Refused(f"--max-cost wants dollars (0.50), not {str(args.max_cost)[:40]!r}") from None
    run = open_run(run_path, whole=True)
    if run.shell.start is None:
        raise Refused(
            "--verify runs each branch in its own copy of the working tree, and the recording "
            "holds none (recorded with --no-shell-trace): record the run again without it"
        )
    models = models_of(args.model)
    if args.in_place and samples * len(models) > 1:
        raise Refused(
            "--in-place with several branches: each branch needs a tree of its own (the "
            "branches run at once, and one's files would be another's); drop --in-place"
        )
    rows: list[Row] = []
    for m in models:
        one = copy.copy(args)
        one.model, one.output = m, None
        try:
            fork = start_fork(one)
        except (CassetteError, ValueError, OSError) as exc:
            raise Refused(f"{m or 'the recorded model'}: {exc}") from None
        placed = fork.placed
        assert placed is not None  # (start_fork places it)
        seqs = sorted(
            {
                s
                for conv, turn in placed.turns.items()
                if conv is not None and turn is not None
                for s in live_turns(run.analysis, (conv, turn), held=False, repair=True)
            }
            | set(placed.starts.values())
        )
        rows.append(
            Row(
                "V",
                "",
                0,
                "verify",
                "verify",
                edits=list(args.edit),
                model=m,
                seqs=seqs,
                selector=selector,
            )
        )
    recorded = max(len(r.seqs) for r in rows)
    per = args.max_requests if args.max_requests is not None else HEADROOM * max(recorded, 1)
    for r in rows:  # each may send `per` at most: the budget prices that many of its turns
        r.extra = max(0, per - len(r.seqs))
        r.reach = list(r.seqs)
        r.cap_lifted = True  # (its extra is headroom, not a cut answer's continuation)
    bases = where_sent(run, list(args.upstream))
    try:
        lines = budget_lines(
            run, list[Intervention](rows), samples, bases, None, max_cost, args.allow_unknown_price
        )
    except BudgetError as exc:
        said = [_head(exc.lines[0], rows, samples, per), *exc.lines[1:]]
        raise Refused(_named(str(exc), rows), [_named(x, rows) for x in said]) from None
    # (why's line on re-sampled answers that reach other conversations says nothing here)
    lines = [
        _named(_head(lines[0], rows, samples, per, expected=True), rows),
        *[_named(x, rows) for x in lines[1:] if "re-sampled" not in x],
    ]
    lines.append(
        f"at most {count(per * samples * len(rows), 'request')} sent live in all: "
        f"{count(len(rows), 'model')} × {count(samples, 'branch', 'branches')} × {per} each "
        + (
            "(--max-requests)"
            if args.max_requests is not None
            else f"({HEADROOM}× the {count(recorded, 'recorded turn')} from the cursor; "
            "--max-requests N sets it)"
        )
        + "; a branch that would pass it is stopped there and is not judged"
    )
    return Plan(rows, samples, per, lines)


def _head(line: str, rows: list[Row], samples: int, per: int, expected: bool = False) -> str:
    """The budget's first line, its count of requests said for these rows (``why``'s says
    interventions and samples)."""
    shape = f"{count(len(rows), 'model')} × {count(samples, 'branch', 'branches')}"
    n = re.match(r"^(?:at most )?([\d,]+) requests?(?: expected)? \([^)]*\)", line)
    if n is None:
        return line
    if expected:
        said = (
            f"{count(int(n.group(1).replace(',', '')), 'request')} expected ({shape}, as recorded)"
        )
    else:
        said = f"at most {count(len(rows) * samples * per, 'request')} ({shape} × {per})"
    return said + line[n.end() :]


def _named(text: str, rows: list[Row]) -> str:
    """``why``'s budget prices "the recorded model and" the others; said without it when no row
    uses the recorded model (nothing is sent for it)."""
    return (
        text if any(r.model is None for r in rows) else text.replace("the recorded model and ", "")
    )
