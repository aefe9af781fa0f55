"""``looptap diff``, ``looptap compare`` and ``looptap rules propose``: the commands that set two
runs side by side, or a run beside a candidate model's answers (declared in
:mod:`cassettes.commands`, this module imported when one of them runs).

Errors are converted by the core CLI (one line, non-zero exit); these commands only add theirs.
"""

from __future__ import annotations

import argparse
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..errors import CassetteError, problem_lines
from ..hints import command_line, count
from ..matching import rules_of_args
from ..net import header_problem, said_name
from ..project import RuleError
from ..reading import Relation, open_run, origin_of, relate
from ..recording import Redactor, seal
from ..storage import UnsafePath, check_target, open_regular, same_path, write_new
from ..untrusted import clean_line
from ..views import reading_line
from .forking.compare.budget import (
    BudgetError,
    check_budget,
    estimate_costs,
    plan_requests,
    send_list,
    upstream_bases,
    where_sent,
)
from .forking.compare.sending import compare_run
from .forking.cursor import live_router
from .forking.divergence import Divergence, divergence_lines
from .forking.proposal import propose_files
from .forking.rundiff import comparing, diff_analysed, fork_lined_up

__all__ = ["cmd_compare", "cmd_diff", "cmd_rules_propose", "different_apis"]


def _err(msg: str) -> None:
    print(f"looptap: {msg}", file=sys.stderr)


def _json(doc: Any) -> bytes:
    """A ``--json`` document (or a saved report) as written: indented, ending in a newline."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str)


def _print_json(doc: Any) -> None:
    sys.stdout.buffer.write(_json(doc))
    sys.stdout.flush()


def cmd_diff(args: argparse.Namespace) -> int:
    notes: list[str] = []
    rel = relate(args.a, args.b)  # (the origin's digest computed once)
    if not _related(args, rel, notes):
        return 2
    try:  # refused before either run is read
        rules = rules_of_args(args, args.a)
    except RuleError as exc:
        _err(f"error: {exc}")
        return 2
    with reading_line(Path(args.a).name) as progress:
        run_a = open_run(args.a, progress=progress)  # each read once, as a stream
    with reading_line(Path(args.b).name) as progress:
        run_b = open_run(args.b, progress=progress)
    problems_a, problems_b = run_a.problems, run_b.problems
    # the requests compared as `looptap replay A` matches them: A's project rules and the flags,
    # each run's detectors
    compare = comparing(rules, run_a.header, run_b.header, volatile=not args.no_volatile)
    # A branch forked from A is lined up from its cursor; else runs on no common API are one line.
    forked = None if rel is None else fork_lined_up(rel, run_a, run_b, notes, compare=compare)
    unrelated = None if forked is not None else different_apis(run_a, run_b)
    if forked is not None:
        divs = forked
    elif unrelated is not None:  # nothing to pair turn by turn: one line says so
        divs = [unrelated]
    else:
        divs = diff_analysed(
            run_a.analysis,
            run_b.analysis,
            run_a.exchange_by_seq,
            run_b.exchange_by_seq,
            compare=compare,
        )
    for path, problems in ((args.a, problems_a), (args.b, problems_b)):
        for p in problem_lines(problems):
            _err(f"warning: {path}: {p}")
    if args.json:
        _print_json(_diff_doc(args, notes, divs))
    elif unrelated is not None:
        print(f"looptap diff {args.a} {args.b}: {unrelated.message}")
    else:
        for line in notes:
            print(clean_line(line))
        for line in divergence_lines(divs, f"looptap diff {args.a} {args.b}"):
            print(line)
    # what the fork itself changed is no divergence
    return 1 if any(d.layer != "fork" for d in divs) else 0


def _related(args: argparse.Namespace, rel: Relation | None, notes: list[str]) -> bool:
    """How ``args.a`` and ``args.b`` are related (``rel``), said before either is read: a branch
    named first is compared from its origin (``args`` swapped), a branch beside a run it was not
    forked from is noted; ``False`` (said on stderr) when a branch's origin changed since the
    fork (the prefix cannot be compared: a turn-by-turn diff would only invent divergences)."""
    if rel is not None and rel.changed is not None:  # one line, not a false divergence per turn
        _err(f"looptap diff: {clean_line(rel.changed)}")
        return False
    if rel is not None and rel.swapped:  # the branch named first: its origin is A all the same
        notes.append(
            clean_line(
                f"{args.a} is a branch of {args.b}: compared as "
                f"{command_line(['looptap', 'diff', args.b, args.a])} (the origin as A, the "
                "branch as B)"
            )
        )
        args.a, args.b = args.b, args.a
    # a branch named beside a run that is not its origin: said, then compared as two runs
    if rel is None:
        for branch, other in ((args.b, args.a), (args.a, args.b))[: 1 if args.a == args.b else 2]:
            o = origin_of(branch) if Path(branch).is_file() else None
            if o is not None:
                notes.append(
                    clean_line(
                        f"{branch} is a branch of {o.get('run')}, not of {other} (not the run it "
                        "was forked from): compared as two runs, turn by turn"
                    )
                )
    return True


def _diff_doc(args: argparse.Namespace, notes: list[str], divs: list[Any]) -> dict[str, Any]:
    """``looptap diff --json``'s document."""
    doc: dict[str, Any] = {
        "a": str(args.a),
        "b": str(args.b),
        "notes": notes,
        "divergences": [d.as_json() for d in divs],
    }
    # what the matching tolerated (a branch: its prefix's first)
    if getattr(divs, "tolerated", None):
        doc["tolerated"] = divs.tolerated  # type: ignore[attr-defined]
    if getattr(divs, "tolerated_left_out", 0):  # past tolerated.MAX_TURNS turns: counted, not kept
        doc["tolerated_left_out"] = divs.tolerated_left_out  # type: ignore[attr-defined]
    if getattr(divs, "left_out", 0):  # past MAX_DIVERGENCES: counted, not kept
        doc["left_out"] = divs.left_out  # type: ignore[attr-defined]
    return doc


def _apis(run: Any) -> list[str]:
    """The APIs a run's conversations call (family, method and path), in order of first use."""
    out: dict[str, None] = {}
    for conv in run.analysis.conversations:
        if not conv.turns:
            continue
        found = run.by_seq(conv.turns[0])
        where = f" {found[0].method} {urlsplit(found[0].url).path}" if found is not None else ""
        out[f"{conv.family}{where}"] = None
    return list(out)


def different_apis(a: Any, b: Any) -> Any:
    """A single divergence when the two runs share no API (family and path): their turns are not
    two runs of one agent, and a turn-by-turn diff would only list every field of every request;
    ``None`` when they share one (or either has no LLM turn)."""
    apis_a, apis_b = _apis(a), _apis(b)
    if not apis_a or not apis_b or set(apis_a) & set(apis_b):
        return None
    return Divergence(
        "A",
        f"the runs use different APIs ({', '.join(apis_a[:3])} against {', '.join(apis_b[:3])}): "
        "not two runs of one agent, nothing to compare turn by turn",
        None,
        None,
    )


def cmd_rules_propose(args: argparse.Namespace) -> int:
    """Exit 0: the proposed rules (and the built-in detectors) make the runs match; 1: a real
    divergence remains (listed); 2: a run could not be read."""
    try:
        proposal, problems = propose_files(args.a, args.b)
    except CassetteError as exc:
        _err(f"error: {exc}")
        return 2
    for p in problems:
        _err(f"warning: {p}")
    # the values shown are the runs' request text: a key in one is not printed
    redactor = Redactor.configured()
    if args.json:
        print(
            orjson.dumps(
                redactor.document({**proposal.as_json(), "toml": proposal.toml()}),
                option=orjson.OPT_INDENT_2,
            ).decode()
        )
        return 0 if proposal.matches else 1
    lines = [
        f"{len(proposal.differences)} difference{'s' if len(proposal.differences) != 1 else ''} "
        f"between the requests of {args.a} and {args.b} ({count(proposal.pairs, 'turn')} lined up):"
    ]
    lines += [f"  {d.line()}" for d in proposal.differences]
    lines += [f"  {u}" for u in proposal.unpaired]
    if proposal.matches:
        lines.append(
            "with the rules below (and the built-in detectors) all "
            f"{count(proposal.pairs, 'turn')} match"
        )
    else:
        lines.append(
            "with the rules below (and the built-in detectors) "
            f"{proposal.pairs - len(proposal.remaining)} of {count(proposal.pairs, 'turn')} "
            "match; still "
            "diverging:"
        )
        lines += [f"  {c} turn {t} at {p}" for c, t, p in proposal.remaining[:20]]
    for line in lines:
        print(clean_line(redactor.scrub(line)))
    print()
    # TOML to paste: its anchors are recorded text, cleaned like the rest
    for line in proposal.toml().splitlines():
        print(clean_line(redactor.scrub(line)))
    return 0 if proposal.matches else 1


def cmd_compare(args: argparse.Namespace) -> int:
    if args.samples < 1:
        _err("error: --samples wants a count from 1")
        return 2
    try:
        max_cost = Decimal(args.max_cost) if args.max_cost is not None else None
    except InvalidOperation:
        _err(f"error: --max-cost wants dollars (0.50), not {args.max_cost[:40]!r}")
        return 2
    try:
        bases = upstream_bases(args.upstream)
    except ValueError as exc:
        _err(f"error: {exc}")
        return 2
    headers = _extra_headers(args.header)
    if headers is None:
        return 2
    try:  # checked before anything is read or sent (storage/_paths.py), as every output is
        report, redactor = _report_target(args), _report_redactor(headers)
    except (CassetteError, ValueError) as exc:
        _err(f"error: {exc}")
        return 2
    run = open_run(args.file, whole=True)
    planned, skipped = send_list(plan_requests(run), args.include_errors)
    router = live_router(bases)
    targets = [where_sent(p, router, args.model) for p in planned]
    unserved = [p.seq for p, (target, _) in zip(planned, targets, strict=True) if target is None]
    if unserved:
        _err(
            f"error: no upstream serves the API of seq {', '.join(map(str, unserved[:5]))} (give "
            "one with --upstream NAME=URL): nothing sent"
        )
        return 2
    if skipped:
        _err(f"skipped: {', '.join(skipped)} (recorded errors: --include-errors sends them)")
    estimate_costs(planned, router, args.model, [target for target, _ in targets])
    if not _within_budget(args, planned, max_cost):
        return 2
    if args.dry_run:
        _would_send(args, planned, targets)
        return 0
    result = compare_run(run, planned, router, args.model, args.samples, headers, skipped)
    result.run = str(args.file)
    # the candidate's answers may echo a key, as a recorded body may
    doc = redactor.document(result.as_json())
    if args.json:
        _print_json(doc)
    else:
        for line in result.lines():
            print(line)
    # saved for later readers (looptap mcp's comparison tool): what --json prints
    if report is not None:
        try:
            _save_report(report, doc)
        except CassetteError as exc:
            _err(f"error: the comparison was not saved: {exc}")
            return 2
    return _compared(result)


def _would_send(
    args: argparse.Namespace, planned: list[Any], targets: list[tuple[str | None, str | None]]
) -> None:
    """``looptap compare --dry-run``: what would be sent, a line per recorded request."""
    for p, (target, note) in zip(planned, targets, strict=True):
        print(
            clean_line(
                f"would send {args.samples}×: seq {p.seq} (conversation {p.conversation}, turn "
                f"{p.turn}) {p.ex.method} {target}"
                + (f" with model {args.model} ({note})" if args.model else "")
            )
        )


def _extra_headers(given: list[str]) -> list[tuple[str, str]] | None:
    """``--header NAME: VALUE``, each as sent with every request; ``None`` (said on stderr) when
    one is not a header or cannot be sent (CR, LF, NUL: it would split the request)."""
    headers = []
    for h in given:
        k, sep, v = str(h).partition(":")
        if not sep or not k.strip():
            _err("error: --header wants 'NAME: VALUE'")
            return None
        if header_problem(k.strip(), v.strip()) is not None:
            _err(
                f"error: --header {said_name(k.strip())} cannot be sent: "
                f"{header_problem(k.strip(), v.strip())}"
            )
            return None
        headers.append((k.strip(), v.strip()))
    return headers


def _within_budget(args: argparse.Namespace, planned: list[Any], max_cost: Any) -> bool:
    """The budget's lines on stderr; ``False`` (said) when the comparison would go over it."""
    try:
        for line in check_budget(
            planned, args.samples, args.max_requests, max_cost, args.allow_unknown_price, args.model
        ):
            _err(clean_line(line))
    except BudgetError as exc:
        for line in exc.lines:
            _err(clean_line(line))
        _err(clean_line(f"error: {exc}"))
        return False
    return True


def _compared(result: Any) -> int:
    """``looptap compare``'s exit code: 1 when the setup failed or no request got an answer."""
    if result.stopped is not None:  # the setup failed (transport, credentials): not a comparison
        _err(clean_line(f"error: the comparison stopped {result.stopped}"))
        return 1
    if result.turns and not result.verdict()["answers"]:  # every request answered with an error
        _err(
            clean_line(
                "error: no answers to compare: "
                f"{count(result.verdict()['errors'], 'request')}, every one answered with an "
                "error (see the report)"
            )
        )
        return 1
    return 0


#: What starts a saved comparison (``Comparison.as_json`` indented): a report looptap may replace.
_REPORT_START = re.compile(rb'\A\{\s*"looptap"\s*:\s*"compare"')


def _is_report(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as a saved comparison does (read without
    following a link or blocking: :func:`~cassettes.storage.open_regular`)."""
    try:
        with open_regular(path, follow=False) as f:
            return _REPORT_START.match(f.read(256)) is not None
    except OSError:
        return False


def _report_target(args: argparse.Namespace) -> Any:
    """Where ``--report`` saves (``None``: not asked), checked as every output is
    (docs/reliability.md, "Paths looptap writes"): never the run itself; an earlier comparison is
    replaced (said); any other file, a link, a directory, a device, a FIFO or a place that takes
    no file is refused."""
    if args.report is None:
        return None
    saved = Path(args.report) if args.report else Path(str(args.file) + ".compare.json")
    if same_path(saved, args.file):
        raise UnsafePath(
            f"the report {saved} is the run it compares: give --report a path of its own"
        )
    return check_target(
        saved,
        "the report",
        owned=_is_report,
        hint="it is not a comparison looptap saved; give --report a new path",
    )


def _report_redactor(headers: list[tuple[str, str]]) -> Any:
    """The cassettes' redactor (with the project's configuration), taught the credentials
    ``--header`` sends, for what the comparison prints as JSON and saves."""
    redactor = Redactor.configured()
    redactor.headers(headers)
    return redactor


def _save_report(target: Any, doc: Any) -> None:
    """Write the comparison at the checked ``target`` whole, mode 0600 (storage/_paths.py)."""
    try:
        replaced = target.replaces is not None and target.path.stat().st_size > 0
    except OSError:
        replaced = False
    write_new(target, seal(_json(doc)))
    _err(
        f"comparison saved to {target.path}"
        + (" (the earlier comparison there replaced)" if replaced else "")
    )
