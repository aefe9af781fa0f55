"""One ``looptap why``, start to end: read the run, judge the recorded outcome, list the
interventions, check the budget, run the branches, say the verdict. Every refusal comes before
anything is sent (:class:`Refused`, exit 2)."""

from __future__ import annotations

import argparse
import sys
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..hints import command_line, count
from ..reading import Run, open_run
from ..replay.forking.compare.budget import BudgetError
from ..replay.testing.recorder import how_to_install, recorder_python
from ..storage import check_input
from ..untrusted import clean_line
from ._branches import BASELINE, Branches, WhyRunError, environmental, passed_flags, where_sent
from ._budget import Purse
from ._budget import check as check_budget
from ._intervention import Intervention
from ._interventions import interventions
from ._outcome import Outcome, OutcomeError, judged_from, parse_outcome
from ._state import STATE, State, WhyDirError, given_last, kept_flags, read_state, run_digest
from ._tally import Tally
from ._together import flips_alone, rounds, together_verdict
from ._verdict import Verdict, only_context, verdict

__all__ = ["Refused", "Result", "default_output", "investigate", "say"]


@dataclass
class Result:
    """What an investigation ends with: its exit status, the JSON document ``--json`` prints and
    the text report's lines (cleaned for a terminal)."""

    status: int
    doc: dict[str, Any]
    lines: list[str]

    @property
    def verdict(self) -> dict[str, Any]:
        """The verdict (``layer``, ``conversation``, ``turn``, ``flips``, ``samples``, ``low``,
        ``high`` …); empty for a dry run."""
        v = self.doc.get("verdict")
        return v if isinstance(v, dict) else {}


class Refused(CassetteError):
    """Nothing was sent: why, in one line (and the lines before it: the budget)."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = list(lines or [])


def say(line: str) -> None:
    """A line of ``looptap why`` on stderr, cleaned for a terminal."""
    print(clean_line(f"looptap why: {line}"), file=sys.stderr, flush=True)


def _options(args: argparse.Namespace) -> tuple[Outcome, list[str], Decimal | None, dict[str, str]]:
    if args.samples < 1 or args.jobs < 1:
        raise Refused("--samples and --jobs want a count from 1")
    try:
        outcome = parse_outcome(args)
        max_cost = Decimal(args.max_cost) if args.max_cost is not None else None
    except OutcomeError as exc:
        raise Refused(str(exc)) from None
    except InvalidOperation:
        raise Refused(f"--max-cost wants dollars (0.50), not {str(args.max_cost)[:40]!r}") from None
    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv and not args.dry_run:
        raise Refused(
            "nothing to run: every branch runs the agent again; give its command after -- (looptap "
            "why run.jsonl -o why/ -- python agent.py)"
        )
    results: dict[str, str] = {}
    for item in args.result:
        cid, sep, value = str(item).partition("=")
        if not sep or not cid:
            raise Refused(f"--result wants CALL_ID=@FILE or CALL_ID=TEXT, not {str(item)[:60]!r}")
        if value.startswith("@"):  # read by the fork from its own working directory: made absolute
            path = Path(value[1:]).expanduser().resolve()
            if not path.is_file():
                raise Refused(f"--result {cid}: no such file {value[1:][:200]!r}")
            value = f"@{path}"
        results[cid] = value
    return outcome, argv, max_cost, results


def investigate(args: argparse.Namespace) -> Result:

    outcome, argv, max_cost, results = _options(args)
    if args.resume and args.output is not None:
        _last_upstream(args)
    bases, path, run, found = _suspects(args, results, outcome)
    recorded = None
    if not outcome.needs_run:
        recorded = outcome.failed(judged_from(run))
        if not recorded:
            raise _not_failing(outcome)
    runnable = [i for i in found if i.missing is None]
    if args.resume and args.output is None:
        raise Refused("--resume continues the why in -o DIR: give the directory of the earlier one")
    try:
        lines = check_budget(
            run,
            runnable,
            args.samples,
            bases,
            args.max_requests,
            max_cost,
            args.allow_unknown_price,
            _kept(args) if args.resume else None,
        )
    except BudgetError as exc:
        raise Refused(str(exc), exc.lines) from None
    together = _together_budget(args, run, runnable, bases, max_cost, lines)
    cap = _at_most(args, runnable, together, lines)
    if args.dry_run:
        return _dry_run(args, outcome, found, lines)
    if args.output is None:
        args.output = str(default_output(path))
        say(f"the branches go to {args.output} (a new directory beside the run; -o DIR names one)")

    python = recorder_python()
    if python is None:
        raise Refused(how_to_install())

    state = _opened(args, path, argv, outcome, recorded)
    runner = Branches(path.resolve(), argv, outcome, state.directory, passed_flags(args), python)
    runner.in_place = bool(getattr(args, "in_place", False))
    runner.check_seconds = args.check_timeout
    runner.purse = Purse(cap)  # nothing past the at-most said (or --max-requests) is ever sent
    if recorded is None:
        try:
            _recorded_by_running(state, runner)
        except Refused:
            if not args.resume:
                _forget(state)  # refused before anything was sent: the new directory goes again
            raise
    say(_fails(outcome, state.doc["recorded"]))  # first: what every branch is measured against
    for line in lines:
        say(line)
    return _run(args, path, state, outcome, found, runner, together)


def _last_upstream(args: argparse.Namespace) -> None:
    """``--resume``: the branches get the ``--upstream``/``--confdir`` given now and, of those the
    earlier run kept in its why.json, the ones not given again (:func:`given_last`; given to
    ``args``, said on stderr): never the vendors' APIs because a flag was left out."""
    doc = read_state(Path(args.output) / STATE) or {}
    flags, how = given_last(passed_flags(args), doc.get("passed"))
    pairs = list(zip(flags[::2], flags[1::2], strict=True))
    args.upstream = [v for f, v in pairs if f == "--upstream"]
    args.confdir = next((v for f, v in pairs if f == "--confdir"), None)
    if flags or doc.get("passed"):
        say(f"--resume: the branches use the --upstream/--confdir {how}")


def _suspects(
    args: argparse.Namespace, results: dict[str, str], outcome: Outcome
) -> tuple[dict[str, str], Path, Run, list[Intervention]]:
    """Where each API's requests go, the run named and the interventions to try in it (those of
    ``--layer``'s layers; an E re-sample holds its later turns when the outcome is judged on what
    the command did, which includes the turns served after the change)."""
    try:
        path = check_input(Path(args.file), "the run")
        run = open_run(path, whole=True, formats=("looptap",))
        bases = where_sent(run, args.upstream)
    except (CassetteError, ValueError) as exc:
        raise Refused(str(exc)) from None
    found = [
        i
        for i in interventions(run, results, args.model, hold=outcome.needs_run)
        if not args.layer or i.layer in args.layer
    ]
    return bases, path, run, found


def _opened(
    args: argparse.Namespace, path: Path, argv: list[str], outcome: Outcome, recorded: bool | None
) -> State:
    """The why's directory (``-o``), opened or resumed, with whether the recorded run fails by
    the outcome: read from the recording (``recorded``), else found by running it once."""
    fresh = {
        "outcome": outcome.as_json(),
        "samples": args.samples,
        "command": argv,
        "run_path": str(path.resolve()),
        "passed": kept_flags(passed_flags(args)),  # --confirm reaches the same upstream with them
    }
    try:
        state = State.open(Path(args.output), path, run_digest(path), args.resume, fresh)
    except (WhyDirError, OSError) as exc:
        raise Refused(str(exc)) from None
    if args.resume and state.doc.get("passed") != fresh["passed"]:
        state.put("passed", fresh["passed"])  # the given last: what a later --confirm reaches
    if recorded is not None:
        state.put("recorded", {"failed": True, "read": "the recording"})
    return state


def _kept(args: argparse.Namespace) -> dict[str, int]:
    """Per intervention (its key), the branches the earlier why in ``-o`` kept (``--resume``; what
    the budget leaves out). Nothing when it cannot be read: the state is checked when opened."""

    doc = read_state(Path(args.output) / STATE) or {}
    branches = doc.get("branches")
    if not isinstance(branches, dict):
        return {}
    return {
        str(k): sum(
            1
            for n, r in v.items()
            if isinstance(r, dict) and str(n).isdigit() and not environmental(r)
        )
        for k, v in branches.items()
        if isinstance(v, dict)
    }


def default_output(run: Path) -> Path:
    """A new directory's path beside ``run`` for its branches (``run.why``, else ``run.why-2``
    …): never a path that exists."""
    import os

    base = run.with_name(run.name.removesuffix(".jsonl") + ".why")
    n = 1
    while os.path.lexists(base if n == 1 else f"{base}-{n}"):
        n += 1
    return base if n == 1 else Path(f"{base}-{n}")


def _recorded_by_running(state: Any, runner: Branches) -> None:
    """The recorded outcome of an exit status or a check: the command run once against the whole
    recording, a fork that sends nothing (:meth:`Branches.baseline`), kept in the state (a resumed
    why does not run it again)."""

    outcome = runner.outcome
    kept = state.doc.get("recorded")
    if isinstance(kept, dict) and isinstance(kept.get("failed"), bool):
        failed: bool = kept["failed"]
    else:
        if runner.in_place:
            say(
                "--in-place: the command runs against the recording, and each branch, in your "
                "working tree, with your HOME and temp folder: the commands it runs again may "
                "change them"
            )
        try:
            judged = runner.baseline()
        except WhyRunError as exc:
            raise Refused(str(exc)) from None
        failed = bool(outcome.failed(judged))
        state.put("recorded", {"failed": failed, "exit": judged.exit, "check": judged.check})
    if not failed:
        raise _not_failing(outcome)


def _not_failing(outcome: Outcome) -> Refused:
    return Refused(
        f"the recorded run does not fail by the outcome ({outcome.describe()}): nothing to "
        "explain, nothing sent"
    )


def _fails(outcome: Outcome, recorded: dict[str, Any]) -> str:
    """The line that says the recorded run fails by the outcome, and how that was told."""
    if outcome.kind == "exit":
        how = f"against the recording (nothing sent) the command exited {recorded.get('exit')}"
    elif outcome.kind == "check":
        how = (
            "after the command against the recording (nothing sent) the check exited "
            f"{recorded.get('check')}"
        )
    else:
        how = "read from the recording"
    return f"the recorded run fails by the outcome ({outcome.describe()}): {how}"


def _forget(state: Any) -> None:
    """Remove the output directory this why just made (its state file and the baseline's files
    only: its branch, log and kept file contents; nothing else in it)."""
    import contextlib
    import shutil

    shutil.rmtree(state.directory / f"{BASELINE}.files", ignore_errors=True)
    for name in (BASELINE, f"{BASELINE}.log", STATE):
        with contextlib.suppress(OSError):
            (state.directory / name).unlink()
    with contextlib.suppress(OSError):
        state.directory.rmdir()


def _dry_run(
    args: argparse.Namespace, outcome: Outcome, found: list[Intervention], lines: list[str]
) -> Result:

    doc = {
        "looptap": "why",
        "dry_run": True,
        "run": str(args.file),
        "outcome": outcome.as_json(),
        "samples": args.samples,
        "budget": lines,
        "interventions": [i.as_json() for i in found],
    }
    out = [
        f"outcome: failed means {outcome.describe()}"
        + (
            " (judged first by running the command against the recording; not in --dry-run)"
            if outcome.needs_run
            else ""
        )
    ]
    for i in found:
        cost = i.cost(args.samples) if i.missing is None else f"not run: {i.missing}"
        out.append(f"would fork at {i.cursor}{i.options}: {i.layer}: {i.what}: {cost}")
    return Result(0, doc, [clean_line(ln) for ln in [*out, *lines]])


def _together_budget(
    args: argparse.Namespace,
    run: Any,
    runnable: list[Intervention],
    bases: dict[str, str],
    max_cost: Decimal | None,
    lines: list[str],
) -> bool:
    """Whether the combinations tried when no single change flips the outcome fit the limits
    (:mod:`cassettes.why._together`); a line said either way (``lines``)."""
    tried = rounds(runnable)
    extra = [c for r in tried for c in r]
    if not extra:
        return False
    more = sum(c.live_requests for c in extra) * args.samples
    first = sum(c.live_requests for c in tried[0]) * args.samples
    try:
        check_budget(
            run, runnable + extra, args.samples, bases, args.max_requests, max_cost,
            args.allow_unknown_price, _kept(args) if args.resume else None,
        )  # fmt: skip
    except BudgetError:
        lines.append(
            f"the {count(len(extra), 'combination')} of repairs tried when no single change flips "
            f"it ({count(more, 'request')} more) would go over the limits: not tried"
        )
        return False
    later = len(extra) - len(tried[0])  # the three together: only if no pair flipped it
    bound = f" (up to {count(more, 'request')} with {count(later, 'combination')} more, tried "
    lines.append(
        f"and {count(first, 'request')} more for {count(len(tried[0]), 'combination')} of repairs"
        f"{bound + 'only if none of those flips it)' if later else ''}, sent only if no single "
        "change flips it"
    )
    return True


def _at_most(
    args: argparse.Namespace, runnable: list[Intervention], together: bool, lines: list[str]
) -> int:
    """The most the branches send live in all, said (``lines``) before anything is sent and kept
    to (:class:`Purse`): each branch's at-most (every turn its fork may reach, and the
    continuations it may ask for), the combinations' when they may be tried, the branches an
    earlier run kept left out; ``--max-requests`` when lower. A branch whose agent would send
    more (a changed answer that makes it go on longer than the recording) is stopped there and
    is no sample: the figure said first is never passed."""
    kept = _kept(args) if args.resume else {}
    combos = [c for r in rounds(runnable) for c in r] if together else []
    most: int = sum(
        i.most_requests * max(0, int(args.samples) - kept.get(i.key, 0))
        for i in [*runnable, *combos]
    )
    if args.max_requests is not None and args.max_requests < most:
        lines.append(
            f"at most {count(args.max_requests, 'request')} sent live in all (--max-requests)"
        )
        return int(args.max_requests)
    lines.append(
        f"at most {count(most, 'request')} sent live in all (every turn each fork may reach, "
        "live): the branches are kept to it; one that would pass it is stopped there and is no "
        "sample"
    )
    return most


def _run(
    args: argparse.Namespace,
    path: Path,
    state: Any,
    outcome: Outcome,
    found: list[Intervention],
    runner: Branches,
    together: bool,
) -> Result:
    state.put("interventions", [i.as_json() for i in found])
    _sample(args, runner, state, found)
    tallies = _tallies(state, found, args.samples)
    combos = [c for r in rounds(found) for c in r]
    untried = (
        []
        if together or not combos
        else [
            f"{count(len(combos), 'combination')} of repairs (causes needed together) not tried: "
            "over the limits"
        ]
    )
    v = verdict(tallies, args.samples, untried)
    tried: list[Intervention] = []
    for combos in rounds(found) if together and flips_alone(tallies, v) else []:
        say(f"no single change flipped it: trying {count(len(combos), 'combination')} of repairs")
        state.put("interventions", [i.as_json() for i in [*found, *tried, *combos]])
        _sample(args, runner, state, combos)
        tried += combos
        if any(t.flips for t in _tallies(state, combos, args.samples)):
            break
    if tried:
        v = together_verdict(v, tallies, _tallies(state, tried, args.samples), args.samples)
    doc = {
        "looptap": "why",
        "run": str(args.file),
        "outcome": outcome.as_json(),
        "recorded": state.doc.get("recorded"),
        "samples": args.samples,
        "output": str(state.directory),
        **v.as_json(),
    }
    state.put("verdict", doc["verdict"])
    state.put("report", doc["interventions"])
    return Result(
        0 if v.refused or only_context(v.ranked) or any(t.samples for t in v.ranked) else 1,
        doc,
        report_lines(v, outcome, state.directory, path, runner.argv, runner.passed),
    )


def _sample(
    args: argparse.Namespace, runner: Branches, state: Any, found: list[Intervention]
) -> None:
    """Run the branches of ``found`` not kept yet (``--jobs`` at a time), each kept as it ends."""
    from concurrent.futures import ThreadPoolExecutor

    ks = range(1, args.samples + 1)
    todo = [
        (i, k)
        for i in found
        if i.missing is None
        for k in ks
        if state.branch(i.key, k) is None or environmental(state.branch(i.key, k))
    ]
    again = [(i, k) for i, k in todo if state.branch(i.key, k) is not None]
    done = sum(1 for i in found if i.missing is None for k in ks) - len(todo)
    if done or again:
        kept = count(done, "branch", "branches")
        said = f"--resume: {kept} kept from the earlier run, {len(todo)} to run"
        if again:
            why = str(state.branch(*_key(again[0]))["why"])[:200]
            said += (
                f" ({len(again)} of them again: {'it' if len(again) == 1 else 'they'} got no "
                f"sample for a reason of the environment, not of the change: {why})"
            )
        say(said)

    runner.plan(todo)
    stopping = threading.Event()

    def one(item: tuple[Intervention, int]) -> None:
        i, k = item
        if stopping.is_set():
            return
        result = runner.one(i, k)
        # A branch that ended after a Ctrl-C is no sample (the interrupt it was passed decided its
        # status, not the outcome): not kept, --resume runs it again.
        if stopping.is_set():
            say(
                f"{i.layer} {i.conversation} turn {i.turn} ({i.kind}) sample {k}/{args.samples}: "
                "interrupted, not kept (--resume runs it again)"
            )
            return
        state.put_branch(i.key, k, result)
        say(
            f"{i.layer} {i.conversation} turn {i.turn} ({i.kind}) "
            f"sample {k}/{args.samples}: {result['result']}"
            + (f": {result['why']}" if result.get("why") else "")
        )

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        try:
            for _ in pool.map(one, todo):
                pass
        except KeyboardInterrupt:
            # first, then the branches still running are interrupted, then waited for
            stopping.set()
            runner.interrupt()
            raise


def _key(item: tuple[Intervention, int]) -> tuple[str, int]:
    return item[0].key, item[1]


def _tallies(state: Any, found: list[Intervention], samples: int) -> list[Tally]:
    ks = range(1, samples + 1)
    return [Tally.of(i, (state.branch(i.key, k) for k in ks if i.missing is None)) for i in found]


def report_lines(
    v: Verdict,
    outcome: Outcome,
    directory: Path,
    run: Path,
    argv: list[str] | None = None,
    passed: list[str] | None = None,
) -> list[str]:
    """The report as text (each line cleaned for a terminal); ``passed``: the ``looptap run``
    options every branch had (``--upstream``, ``--confdir``), which the fork that tests a fix needs
    too, to reach the same upstream (never the real API's host instead). Each command is built
    from its words (:func:`cassettes.hints.command_line`), whatever the recording holds."""
    lines = [
        f"verdict: {v.headline}",
        f"outcome: failed means {outcome.describe()}; a flip is a branch that does not fail",
    ]
    i = v.best.intervention if v.refused and v.best is not None else None
    if i is not None and i.fix:
        fork = ["looptap", "run", "--from", f"{run}@{i.cursor}", *i.fix, *(passed or [])]
        lines.append(
            "to test a fix: " + command_line([*fork, "-o", "fixed.jsonl", "--", *(argv or ["CMD"])])
        )
    if v.determined and v.best is not None:
        confirm = command_line(["looptap", "why", str(directory), "--confirm", "--"])
        lines.append(
            f"to confirm a fix: {confirm} FIXED_AGENT_COMMAND (runs it K times from the verdict's "
            "turn, live after it)"
        )
    lines.append("interventions, ranked:")
    lines += [f"  {t.line()}" for t in v.ranked]
    if any(t.branches for t in v.ranked):  # none ran (a refusal only): no directory to point at
        diff = command_line(["looptap", "diff", str(run), f"{directory}/BRANCH.jsonl"])
        lines.append(
            f"branches (ordinary branch cassettes) in {directory}: {diff} shows what each changed"
        )
    return [clean_line(ln) for ln in lines]
