"""``looptap run --from RUN@SEL --model A,B --repeat K --verify CMD -o DIR -- AGENT``: which model
(or which edit) would have made the check pass, and how sure that is (docs/fork.md, "Which model
would have fixed it"). Built from ``looptap why``'s parts, nothing of the fork re-implemented:
each branch is an ordinary ``looptap run --from … --verify CMD`` run by
:class:`cassettes.why.Branches` as ``why --check`` runs it (its own isolated scratch tree,
``--max-requests`` of its share of :class:`~cassettes.why.Purse`), ``--jobs`` at a time; the
verdict per model is k of K verified with the Wilson interval ``why`` reads flips by; the failed
branches are compared turn by turn as ``--repeat`` compares branches
(:func:`cassettes.replay.forking.repeat.agreement`)."""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from ..errors import CassetteError
from ..reading import fork_notes, open_run
from ..replay.testing.recorder import how_to_install, recorder_python
from ..untrusted import clean_line
from ..why import Branches, Outcome, Purse, Refused, emit_result, end_state, passed_flags, wilson
from ._plan import Row, plan

__all__ = ["Result", "cmd_verify", "verify_run"]


def say(line: str) -> None:
    print(clean_line(f"looptap run --verify: {line}"), file=sys.stderr, flush=True)


@dataclass
class Result:
    """What ``--verify`` ends with: its exit status, the JSON document ``--json`` prints and the
    text report's lines."""

    status: int
    doc: dict[str, Any]
    lines: list[str]

    @property
    def rows(self) -> dict[str, dict[str, Any]]:
        """The rows by model (``"recorded"``: the recorded model), each ``verified``, ``judged``,
        ``samples``, ``low``, ``high``, ``cost``, ``sent``, ``branches``."""
        return {(r["model"] or "recorded"): r for r in self.doc.get("rows", [])}


#: ``looptap run``'s options every branch is given as they were (how the prefix is matched).
_PREFIX = (
    ("prefix", "--prefix"),
    ("ignore", "--ignore"),
    ("substitute", "--substitute"),
    ("volatile_tool", "--volatile-tool"),
)


def _passed(args: argparse.Namespace) -> list[str]:
    out = passed_flags(args)
    for dest, flag in _PREFIX:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value] if value else []:
            out += [flag, str(v)]
    out += (
        ["--tools-offline"] * bool(args.tools_offline)
        + ["--no-volatile"] * bool(args.no_volatile)
        + ["--keep-tree"] * bool(args.keep_tree)
    )
    return out


def verify_run(args: argparse.Namespace) -> Result:
    """Every refusal (:class:`Refused`) comes before anything is sent."""
    from ..replay.forking.fork import parse_from

    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise Refused("nothing to run: give the agent's command after -- (each branch runs it)")
    try:
        source = parse_from(args.from_run)
    except (CassetteError, ValueError) as exc:
        raise Refused(str(exc)) from None
    run = Path(source.run).resolve()
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise Refused(f"-o {out}: with --verify, -o names a directory for the branches")
    p = plan(args, str(run), source.cursor.text)
    for line in p.lines:
        say(line)
    python = recorder_python()
    if python is None:
        raise Refused(how_to_install())
    out.mkdir(parents=True, exist_ok=True)
    runner = Branches(
        run, argv, Outcome("check", args.verify), out.resolve(), _passed(args), python
    )
    runner.in_place = bool(args.in_place)
    runner.env_in_place = False
    runner.check_seconds = float(args.verify_timeout)
    runner.purse = Purse(p.at_most)
    items = [(r, k) for r in p.rows for k in range(1, p.samples + 1)]
    runner.plan([(r, k) for r, k in items])
    base = end_state(run, args.verify, float(args.verify_timeout), bool(args.keep_tree))
    say(f"the recorded run's end state: {base['result']}" + _why(base))
    results: dict[tuple[str, int], dict[str, Any]] = {}
    lock = threading.Lock()

    def one(item: tuple[Row, int]) -> None:
        r, k = item
        got = _judged(runner.one(r, k), out)
        with lock:
            results[(r.key, k)] = got
        say(f"{r.name} branch {k}/{p.samples}: {got['result']}" + _why(got))

    with ThreadPoolExecutor(max_workers=int(args.jobs)) as pool:
        try:
            list(pool.map(one, items))
        except KeyboardInterrupt:
            runner.interrupt()
            raise
    rows = [
        _row(r, [results[(r.key, k)] for k in range(1, p.samples + 1)], run, out) for r in p.rows
    ]
    sent = sum(x.get("sent") or 0 for x in results.values())
    doc = {
        "looptap": "verify",
        "run": str(run),
        "cursor": source.cursor.text,
        "command": args.verify,
        "samples": p.samples,
        "at_most": p.at_most,
        "sent": sent,
        "baseline": base,
        "rows": rows,
        "output": str(out),
    }
    from ..storage import write_sealed
    from ..views.htmlpage import HtmlExtraMissing
    from ._report import lines, page

    seal = runner.redactor.seal
    write_sealed(out / "verify.json", seal(orjson.dumps(doc, option=orjson.OPT_INDENT_2)))
    text = lines(doc)
    try:
        write_sealed(out / "verify.html", seal(page(doc).encode()))
        text.append(f"the report as a page: {out / 'verify.html'}")
    except HtmlExtraMissing as exc:
        text.append(f"no page written: {exc}")
    return Result(0, doc, text)


def _why(got: dict[str, Any]) -> str:
    return f" ({got['why']})" if got.get("why") else ""


def _judged(got: dict[str, Any], out: Path) -> dict[str, Any]:
    """A branch's result (``why``'s: flipped, failed, invalid) as verified, not verified or not
    judged, with why."""
    note = (
        fork_notes(out / got["branch"])["verified"]
        if (out / got.get("branch", "")).is_file()
        else None
    )
    kind = {"flipped": "verified", "failed": "not verified"}.get(
        got.get("result", ""), "not judged"
    )
    why = got.get("why")
    if kind == "not verified" and note is not None and note["timed_out"]:
        why = f"timed out (past {note['seconds']:g} s)"
    elif kind == "not verified" and note is not None:
        why = f"exit status {note['exit']}"
    return {**got, "result": kind, "why": why}


def _row(r: Row, got: list[dict[str, Any]], run: Path, out: Path) -> dict[str, Any]:
    judged = [g for g in got if g["result"] != "not judged"]
    k = sum(g["result"] == "verified" for g in judged)
    low, high = wilson(k, len(judged))
    cost, priced = Decimal(0), True
    for g in got:
        path = out / g["branch"]
        try:
            c = open_run(path, whole=True).cost if path.is_file() else None
        except CassetteError:
            c = None
        priced = priced and (c is not None or not g.get("sent"))
        cost += c or 0
    failed = [out / g["branch"] for g in got if g["result"] == "not verified"]
    return {
        "model": r.model,
        "name": r.name,
        "edits": list(r.edits),
        "verified": k,
        "judged": len(judged),
        "samples": len(got),
        "low": round(low, 3),
        "high": round(high, 3),
        "cost": str(cost) if priced else None,
        "sent": sum(g.get("sent") or 0 for g in got),
        "branches": got,
        "failed": [p.name for p in failed],
        "differed": _differed(run, failed),
    }


def _differed(run: Path, failed: list[Path]) -> dict[str, Any] | None:
    """Where the failed branches first differed from each other, turn by turn past the cursor as
    ``--repeat`` compares branches; ``None`` with fewer than two."""
    if len(failed) < 2:
        return None
    from ..replay.forking.repeat import agreement

    try:
        rows = agreement(run, [str(p) for p in failed])
    except CassetteError as exc:
        return {"error": str(exc)}
    for t in rows:
        if len(set(t.answers)) > 1:
            return {
                "conversation": t.conversation,
                "turn": t.turn,
                "answers": sorted(set(t.answers))[:5],
            }
    return {"conversation": None, "turn": None, "answers": []}


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        result = verify_run(args)
    except Refused as exc:
        for line in exc.lines:
            say(line)
        say(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        say(f"interrupted: the branches that ended are in {args.output}, no report written")
        return 130
    return emit_result(result, bool(args.json))
