"""``looptap why DIR --confirm -- CMD``: a fix confirmed (docs/why.md "Confirming a fix").

An earlier ``why`` kept its run, outcome, verdict and the flags that reached its upstream in
``DIR/why.json``. Confirming runs the user's changed agent (``CMD``) K times as a fork of that run
at the verdict's turn — the recorded prefix served, live from the turn on — each an ordinary
``looptap run --from`` started by :class:`~cassettes.why._branches.Branches` (the same fork, the
same upstream and confdir, the same outcome reader as the investigation's branches), and says how
many runs now succeed, with the interval, and a before/after line per sample: DoVer's measure of a
repair, on the user's own fix. Every refusal comes before anything is sent. Once the first run
ended, the confirm says what all K runs are expected to send (:mod:`cassettes.why._expected`)
and keeps to it: never more than 110% of it (each run a fork with its share as its
``--max-requests``; a run stopped there is not judged), runs added while under 90%
(:mod:`cassettes.why._keep`).
"""

from __future__ import annotations

import argparse
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..hints import count
from ..reading import Run, open_run
from ..replay.forking.compare.budget import BudgetError
from ..replay.testing.recorder import how_to_install, recorder_python
from ..untrusted import clean_line
from ._branches import Branches, passed_flags, where_sent
from ._budget import check as check_budget
from ._interval import wilson
from ._intervention import Intervention
from ._investigation import Refused, Result, say
from ._keep import Kept, run_all
from ._outcome import Outcome, judged_from
from ._state import STATE, State, flags_said, given_last, kept_flags, read_state, run_digest
from ._suspects import heard, later_turns, live_turns, newest_texts

__all__ = ["confirm"]

#: Characters of an answer shown on a before/after line.
_SHOWN = 120
#: The outcomes a why.json may name (:class:`~cassettes.why._outcome.Outcome`).
_KINDS = ("exit", "check", "finding", "answer_matches", "answer_not_matches")


def _refused(message: str) -> Refused:
    return Refused(f"--confirm: {message}; nothing sent")


def _the_why(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The earlier why's directory and its state (``FILE`` names the directory or its why.json)."""
    where = Path(args.file)
    directory = where.parent if where.name == STATE and where.is_file() else where
    doc = read_state(directory / STATE) if directory.is_dir() else None
    if doc is None:
        raise _refused(
            f"{str(args.file)[:200]!r} is not the directory of an earlier looptap why (it "
            "holds its why.json: run.why, or the -o DIR it was given)"
        )
    return directory, doc


def _verdict_turn(doc: dict[str, Any]) -> tuple[dict[str, Any], str, int]:
    """The verdict a fix answers, and the conversation and turn it names."""
    v = doc.get("verdict")
    if not isinstance(v, dict) or not isinstance(v.get("conversation"), str):
        raise _refused(
            "the why holds no verdict (interrupted, or nothing could be run): no turn to confirm "
            "a fix from (finish it with --resume first)"
        )
    # a verdict of the layer only (E, the turn not determined): from the earliest turn it names
    turn = v.get("turn") if v.get("determined") else v.get("from_turn")
    if not isinstance(turn, int) or turn < 0 or not v.get("layer_determined"):
        said = clean_line(str(v.get("headline") or ""))[:300]
        raise _refused(
            f"the why's verdict names no cause ({said!r}): no turn to confirm a fix from"
        )
    return v, v["conversation"], turn


def _the_run(directory: Path, doc: dict[str, Any]) -> tuple[Path, Run]:
    """The run the why explained, as it was then (its sha256 checked)."""
    names = [str(doc.get(k)) for k in ("run_path", "run") if isinstance(doc.get(k), str)]
    tried = [Path(n) for n in names] + [directory.parent / Path(n).name for n in names]
    digest = doc.get("sha256")
    for path in tried:
        if path.is_file() and run_digest(path) == digest:
            try:
                return path.resolve(), open_run(path, whole=True, formats=("looptap",))
            except (CassetteError, ValueError) as exc:
                raise _refused(str(exc)) from None
    said = names[0][:200] if names else "?"
    raise _refused(
        f"the run the why explained ({said!r}) is not found as it was then (missing, or its "
        "bytes changed since: the sha256 the why kept differs)"
    )


def _outcome(doc: dict[str, Any]) -> Outcome:
    o = doc.get("outcome")
    if not (isinstance(o, dict) and o.get("kind") in _KINDS and isinstance(o.get("value"), str)):
        raise _refused("the why's outcome cannot be read from its why.json")
    return Outcome(str(o["kind"]), str(o["value"]))


def _flags(args: argparse.Namespace, doc: dict[str, Any]) -> list[str]:
    """The ``--upstream``/``--confdir`` the runs get: those given now and, of those the why kept
    (the investigation's, or an earlier ``--resume``'s or ``--confirm``'s), the ones not given
    again (:func:`given_last`), said on stderr; refused when the why kept none it could (an
    upstream URL with credentials, an older looptap) and none is given."""
    given = passed_flags(args)
    kept = doc.get("passed")
    if not given and not isinstance(kept, list):
        raise _refused(
            "the why did not keep the --upstream/--confdir it reached its upstream with (an "
            "upstream URL with credentials, or a why of an older looptap): give them again"
        )
    flags, how = given_last(given, kept)
    say(f"--confirm: the runs use the --upstream/--confdir {how}")
    return flags


def confirm(args: argparse.Namespace) -> Result:
    """Run the fixed agent (``args.cmd``) ``args.samples`` times from the verdict's turn of the
    why in ``args.file``; see the module docstring."""
    if args.samples < 1 or args.jobs < 1:
        raise _refused("--samples and --jobs want a count from 1")
    try:
        max_cost = Decimal(args.max_cost) if args.max_cost is not None else None
    except InvalidOperation:
        said = str(args.max_cost)[:40]
        raise _refused(f"--max-cost wants dollars (0.50), not {said!r}") from None
    directory, doc = _the_why(args)
    v, conversation, turn = _verdict_turn(doc)
    outcome = _outcome(doc)
    path, run = _the_run(directory, doc)
    passed = _flags(args, doc)
    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv and not args.dry_run:
        raise _refused("give the fixed agent's command after -- (it runs K times)")
    fork = _fork(run, str(v.get("layer") or "E"), conversation, turn)
    ups = [u for f, u in zip(passed[::2], passed[1::2], strict=True) if f == "--upstream"]
    try:
        budget = check_budget(
            run,
            [fork],
            args.samples,
            where_sent(run, ups),
            args.max_requests,
            max_cost,
            args.allow_unknown_price,
        )
    except BudgetError as exc:
        raise Refused(str(exc), exc.lines) from None
    except (CassetteError, ValueError) as exc:
        raise _refused(str(exc)) from None
    if args.dry_run:
        lines = [
            f"would run the fixed agent {count(args.samples, 'time')} from {fork.cursor} of "
            f"{path} on ({flags_said(passed)}): "
            f"{count(fork.expected(args.samples), 'live request')} expected",
            *budget,
        ]
        return Result(0, {"looptap": "why", "dry_run": True, "confirm": fork.cursor}, lines)
    python = recorder_python()
    if python is None:
        raise Refused(how_to_install())
    out = _new_directory(directory)
    for line in budget:
        say(line)
    runner = Branches(path, argv, outcome, out, passed, python)
    runner.in_place = bool(getattr(args, "in_place", False))
    runner.check_seconds = args.check_timeout
    kept = run_all(runner, fork, v, args.samples, args.jobs, args.max_requests, _shown)
    return _report(directory, doc, run, outcome, fork, argv, kept, out, passed)


def _fork(run: Run, layer: str, conversation: str, turn: int) -> Intervention:
    """The fork each run of the fixed agent is, with what it is expected to send live, counted as
    the investigation counts a repair's (:func:`cassettes.why._suspects.live_turns`: the turn and
    its conversation's later ones, the conversations its answer goes to, and those that hear a
    changed answer: :func:`~cassettes.why._suspects.heard`), since a fix changes what the agent
    says from the verdict's turn on; and at most, every turn linked to it. Before the turn, the
    recording is served while the fixed agent's requests match it; from the first that differs,
    live (the ``…:diverge`` cursor): a fix that shows before the verdict's turn is still run,
    and judged, never refused as a divergence. So at most, every turn of the conversation from
    its first and every turn linked to them (what ``--max-requests`` is kept against); where the
    fixed agent first differs is known only once it ran (:func:`cassettes.why._keep.run_all`), and
    so is what it sends past a refused request that ended its conversation (``past_end``: its
    answer and the turns it leads to are not in the recording)."""
    a = run.analysis
    where = (conversation, turn)
    newest = newest_texts(run)
    own = live_turns(a, where, held=False, repair=True)
    later = later_turns(a)
    at = next((t for t in a.turns.values() if (t.conversation, t.index) == where), None)
    past_end = (
        at is not None
        and (at.a.status or 0) >= 400
        and not any(t.conversation == conversation and t.index > turn for t in a.turns.values())
    )
    return Intervention(
        layer,
        conversation,
        turn,
        "your fixed agent, live from the verdict's turn",
        "confirm",
        seqs=heard(a, own, newest),
        reach=heard(a, later.get((conversation, 0), later.get(where, own)), newest),
        diverge=True,
        past_end=past_end,
    )


def _new_directory(directory: Path) -> Path:
    """A new directory in the why's for this confirmation's branches (``confirm``, ``confirm-2``
    …)."""
    n = 1
    while True:
        out = directory / ("confirm" if n == 1 else f"confirm-{n}")
        try:
            out.mkdir(mode=0o700)
            return out
        except FileExistsError:
            n += 1
        except OSError as exc:
            raise _refused(f"{out} cannot be created: {exc.strerror or exc}") from None


def _why_not(result: dict[str, Any]) -> str:
    return f": {result['why']}" if result.get("why") else ""


def _shown(runner: Branches, result: dict[str, Any]) -> str:
    """What a sample did, in the outcome's terms (its exit status, its check's, its final answer,
    whether it has the finding)."""
    kind = runner.outcome.kind
    if result["result"] not in ("flipped", "failed"):
        return "no sample" + _why_not(result)
    if kind == "exit":
        return f"exited {result['status']}"
    if kind == "check":
        return "the check passed" if result["result"] == "flipped" else "the check failed"
    judged = judged_from(open_run(runner.directory / result["branch"], whole=True))
    if kind == "finding":
        has = judged.findings is not None and runner.outcome.value in judged.findings
        return f"{'has' if has else 'has no'} finding {runner.outcome.value}"
    return f"answered {clean_line(judged.answer or '')[:_SHOWN]!r}"


def _before(doc: dict[str, Any], run: Run, outcome: Outcome) -> str:
    """What the recorded run did, in the outcome's terms."""
    kept = doc.get("recorded")
    rec: dict[str, Any] = kept if isinstance(kept, dict) else {}
    if outcome.kind == "exit":
        return f"exited {rec.get('exit')} against the recording"
    if outcome.kind == "check":
        return f"its check exited {rec.get('check')}"
    if outcome.kind == "finding":
        return f"has finding {outcome.value}"
    return f"answered {clean_line(judged_from(run).answer or '')[:_SHOWN]!r}"


def _report(
    directory: Path,
    doc: dict[str, Any],
    run: Run,
    outcome: Outcome,
    fork: Intervention,
    argv: list[str],
    kept: Kept,
    out: Path,
    passed: list[str],
) -> Result:
    results = kept.results
    ok = sum(r["result"] == "flipped" for r in results)
    n = sum(r["result"] in ("flipped", "failed") for r in results)
    low, high = wilson(ok, n)
    v = doc["verdict"]
    at = f"{fork.conversation} turn {fork.turn}"
    head = (
        f"the fixed agent succeeds in {ok}/{count(n, 'run')} (95% CI {low:.2f}–{high:.2f}) "
        f"from {at} on (the recorded prefix served while its requests match it, live from "
        "there); the recorded run failed"
        if n
        else f"no run of the fixed agent could be judged ({count(len(results), 'run')}: see below)"
    )
    before = _before(doc, run, outcome)
    sent = kept.sent
    expected = kept.estimate
    planned = len(results) - kept.added + kept.not_started
    lines = [
        f"confirm: {head}",
        f"outcome: failed means {outcome.describe()}",
        f"the verdict it answers: {v.get('headline')}",
        f"sent live: {count(sent, 'request')} ({expected.said(planned)}), through "
        f"{flags_said(passed)}",
        *kept.lines(),
        "before → after, per sample:",
        *(
            f"  sample {k}: before: failed ({before}) → after: "
            f"{'succeeded' if r['result'] == 'flipped' else r['result']} ({r['after']}): "
            f"{out / r['branch']}"
            for k, r in enumerate(results, 1)
        ),
    ]
    skipped = len(results) - n
    if skipped:
        lines.append(
            f"{skipped} of {count(len(results), 'run')} {'is' if skipped == 1 else 'are'} no "
            "sample, each said above"
        )
    record = {
        "directory": out.name,
        "command": argv,
        "cursor": fork.cursor,
        # what it was expected to send live (cassettes.why._expected), against what its runs
        # sent
        "expected_requests": round(expected.total),
        "expected": round(expected.total, 2),
        # how the runs were kept to it: at most `limit` in all; `ratio` = sent / expected; runs
        # stopped at the limit (not judged), planned and not started, added (sent under 90%)
        "limit": kept.limit,
        "ratio": round(sent / expected.total, 3) if expected.total else None,
        "stopped": kept.stopped,
        "not_started": kept.not_started,
        "added": kept.added,
        # at the ends of the model's error rate's 95% interval (the same where nothing was asked
        # again)
        "expected_low": round(expected.low, 2),
        "expected_high": round(expected.high, 2) if expected.high < float("inf") else None,
        "asked_again_per_run": round(expected.again, 3),
        "error_rate": None if expected.rate is None else round(expected.rate, 3),
        "budget_expected": expected.budget,
        "at_most": expected.most,
        "sent": sent,
        "upstream": flags_said(passed),
        "succeeded": ok,
        "samples": n,
        "invalid": skipped,
        "low": round(low, 4),
        "high": round(high, 4),
        "runs": results,
    }
    state = State(directory, doc)
    if doc.get("passed") != kept_flags(passed):
        state.put("passed", kept_flags(passed))  # the given last: what the next confirm reaches
    state.put("confirms", [*(doc.get("confirms") or []), record])
    report = {"looptap": "why", "confirm": record, "outcome": outcome.as_json(), "verdict": v}
    return Result(0 if n and ok == n else 1, report, [clean_line(ln) for ln in lines])
