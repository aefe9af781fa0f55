"""``looptap replay``, ``diff``, ``compare`` and ``rules propose``: their handlers (declared in
:mod:`cassettes.commands`).

Errors are converted by the core CLI (one line, non-zero exit); these commands only add theirs.
"""

from __future__ import annotations

import argparse
import math
import re
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from cassettes.hints import count

__all__ = [
    "cmd_compare",
    "cmd_diff",
    "cmd_replay",
    "cmd_rules_propose",
    "different_apis",
]


def _err(msg: str) -> None:
    print(f"looptap: {msg}", file=sys.stderr)


class _Usage(Exception):
    """A command-line value that cannot be used (exit 2, one line)."""


def _fault_plan(args: argparse.Namespace) -> Any:
    if not args.fault:
        return None
    from cassettes.replay.serving.faults import FaultPlan, FaultSpecError, parse_fault

    try:
        return FaultPlan([parse_fault(f) for f in args.fault], seed=args.fault_seed)
    except FaultSpecError as exc:
        raise _Usage(str(exc)) from None


def _timeouts(args: argparse.Namespace) -> list[float | None]:
    from cassettes.replay.serving.server import IDLE_TIMEOUT, READ_TIMEOUT

    timeouts: list[float | None] = []
    for name, default in (("idle_timeout", IDLE_TIMEOUT), ("read_timeout", READ_TIMEOUT)):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise _Usage(f"--{name.replace('_', '-')} wants seconds (0: no limit), not {value!r}")
        timeouts.append(default if value is None else (value or None))
    return timeouts


def _cursor(args: argparse.Namespace) -> Any:
    """``--cursor`` with its ``--live`` upstreams and ``--model`` (a fork's replay server), or the
    fork's plan (``--fork-plan``: ``looptap run --from`` placed the cursor once; its rule flags and
    output files stand for this command line's)."""
    if args.fork_plan is not None:
        return _planned(args)
    if args.cursor is None:
        if args.live or args.model or args.edit or args.prefix != "strict":
            raise _Usage(
                "--live, --model, --edit and --prefix go with --cursor (where the run goes live)"
            )
        return None
    from cassettes.replay.forking.cursor import Cursor, CursorError, live_router, parse_cursor
    from cassettes.replay.live.edits import EditError, parse_edit

    bases: dict[str, str] = {}
    for item in args.live:
        name, sep, url = str(item).partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise _Usage(f"--live wants NAME=http(s)://host[:port], not {item[:80]!r}")
        bases[name.strip().lower()] = url.strip().rstrip("/")
    try:
        spec = parse_cursor(args.cursor)
        edits = [parse_edit(e) for e in args.edit]
    except (CursorError, EditError) as exc:
        raise _Usage(str(exc)) from None
    for e in edits:
        if e.selector is not None and e.selector != spec.text:
            raise _Usage(
                f"--edit {e.spec[:60]!r}: an edit applies from the fork's cursor ({spec.text}) on; "
                "its selector, if given, is the cursor's"
            )
    return Cursor(spec, live_router(bases), model=args.model, edits=edits, prefix=args.prefix)


def _planned(args: argparse.Namespace) -> Any:
    """The cursor of a fork's plan (:mod:`cassettes.replay.forking.plan`), its settings put on
    ``args``."""
    from cassettes.replay.forking.plan import PlanError, read_plan

    if args.cursor or args.live or args.model or args.edit:
        raise _Usage(
            "--fork-plan says where the run goes live: no --cursor, --live, --model or --edit"
        )
    try:
        plan = read_plan(args.fork_plan)
    except PlanError as exc:
        raise _Usage(str(exc)) from None
    args.prefix, args.no_volatile = plan.prefix, args.no_volatile or not plan.volatile
    for name, values in plan.rules.items():
        setattr(args, name, [*getattr(args, name, []), *values])
    args.tolerated_out, args.sent_out = plan.tolerated_out, plan.sent_out
    return plan.router(_edit_key() if plan.live_recorder else None)


def _edit_key() -> str:
    """The fork's per-run key for its edit marks (its live upstreams are its looptap recorders):
    read once from the environment (and removed from it), passed on to nothing."""
    import os

    from cassettes.wire.edited import KEY_ENV

    key = os.environ.pop(KEY_ENV, None)
    if not key:
        raise _Usage(
            f"the fork plan's edits need the fork's per-run key in {KEY_ENV} (looptap run --from "
            "gives it): without it the recorder accepts no edit marks"
        )
    return key


def cmd_replay(args: argparse.Namespace) -> int:
    from cassettes.replay.serving.server import ReplayServer, parse_pace

    try:
        parse_pace(args.pace)
        plan = _fault_plan(args)
        idle, read = _timeouts(args)
        cursor = _cursor(args)
        from cassettes.matching import rules_of_args

        # refused here, before the cassette is read or anything listens
        rules = rules_of_args(args, args.file)
        server = ReplayServer(
            Path(args.file),
            host=args.host,
            port=args.port,
            pace=args.pace,
            strict=args.strict,
            faults=plan,
            idle_timeout=idle,
            read_timeout=read,
            cursor=cursor,
            volatile=not args.no_volatile and rules.volatile is not False,
            rules=rules,
        )
    except (_Usage, ValueError) as exc:
        _err(f"error: {exc}")
        return 2
    from cassettes.errors import problem_lines

    for p in problem_lines(server.problems):
        _err(f"warning: {args.file}: {p}")
    if not _serve(server, args):
        return 2
    _report(server, plan, cursor)
    if getattr(args, "tolerated_out", None):
        _write_tolerated(server, args.tolerated_out)
    if getattr(args, "sent_out", None) and server.misses:
        _keep_sent(server, args.sent_out)
    return (
        1
        if server.misses
        or server.internal_errors
        or (args.strict and server.unplayed())
        or (cursor is not None and cursor.unapplied())
        else 0
    )


def _write_tolerated(server: Any, path: str) -> None:
    """What the replay tolerated, per recorded turn (:mod:`cassettes.matching`:
    redacted, cut), as JSON into ``path``, a file ``looptap run --from`` made for it and reads back
    into the branch cassette; never over another file (created anew, private)."""
    import orjson

    from cassettes.matching import turn_entries
    from cassettes.storage.store import write_private

    try:
        write_private(
            path,
            orjson.dumps(
                {
                    "tolerated": turn_entries(server.matcher),
                    "starts": _starts(server),
                    "failed": _failed(server),
                }
            ),
        )
    except OSError as exc:
        _err(
            "warning: the tolerated differences could not be written for the branch: "
            f"{exc.strerror or exc}"
        )


def _keep_sent(server: Any, path: str) -> None:
    """What the client sent, misses included, as a cassette at ``path`` (a file ``looptap run
    --from`` made room for in its private directory): the evidence for ``looptap rules propose``."""
    from cassettes.errors import CassetteError

    try:
        server.keep_sent(Path(path))
    except (CassetteError, OSError) as exc:
        _err(f"warning: what the client sent could not be kept: {exc}")


def _failed(server: Any) -> list[str]:
    """Why the fork failed, one line each (none: it did not): each request before the cursor that
    matched no recorded turn (its closest turn and what differs), each edit never applied."""
    cursor = server.router
    out = [f"the client diverged before the cursor at {m.headline}" for m in server.matcher.misses]
    out += [
        f"edit {e.label} never applied: no request sent live carried it"
        for e in (cursor.unapplied() if cursor is not None else [])
    ]
    return out[:20]


def _starts(server: Any) -> dict[str, Any]:
    """Where each conversation went live that the cursor did not place (known only now: at
    ``@divergence``, each; else each one a change past the cursor reached): conversation → (seq,
    turn)."""
    cursor = server.router
    if cursor is None:
        return {}
    by_seq = {r.seq: r for r in server.matcher.recorded}
    starts = cursor.starts if cursor.spec.divergence else cursor.reached
    return {str(c): [s, by_seq[s].turn if s in by_seq else None] for c, s in starts.items()}


def _serve(server: Any, args: argparse.Namespace) -> bool:
    """Serve until Ctrl-C / SIGTERM; ``False`` when the server could not listen."""
    import asyncio  # here, not at the top: `looptap --help` loads every command module

    async def serve() -> bool:
        # Ctrl-C / SIGTERM handled from the start: a caller that stops the server as soon as it
        # reads the export lines must not land between them and the handlers (a KeyboardInterrupt
        # there skipped stop_async and could leave the process hanging).
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        from cassettes import interrupts

        if interrupts.pending():  # a Ctrl-C during start-up that nothing raised
            stop.set()
        try:
            await server.start_async()
        except OSError as exc:
            why = "address already in use" if "in use" in str(exc) else (exc.strerror or str(exc))
            _err(f"error: cannot listen on {args.host}:{args.port}: {why}")
            return False
        for k, v in server.env.items():
            print(f"export {k}={v}")
        sys.stdout.flush()
        n = len(server.matcher.recorded)
        from cassettes.hints import count

        _err(
            f"replaying {args.file}: {count(n, 'round trip')} on {server.url}, pace "
            f"{args.pace}{', strict' if args.strict else ''} (Ctrl-C to stop)"
        )
        await stop.wait()
        await server.stop_async()
        return True

    return asyncio.run(serve())


def _report(server: Any, plan: Any, cursor: Any) -> None:
    from cassettes.hints import count

    for line in server.report_lines():
        _err(line.removeprefix("looptap "))
    if cursor is not None:
        for line in cursor.report_lines():
            _err(line)
    if plan is not None:
        _err(
            f"replay: {count(len(plan.fired), 'fault')} injected"
            + "".join(
                f"\n  request {n} (recorded #{seq}): {text}" for n, seq, text in plan.fired[:50]
            )
        )
        if plan.skipped:
            _err(
                f"replay: {count(len(plan.skipped), 'fault')} not "
                "injected (the recorded answer was served)"
                + "".join(
                    f"\n  request {n} (recorded #{seq}): {text}: {why}"
                    for n, seq, text, why in plan.skipped[:50]
                )
            )
    for m in server.misses:
        for line in m.lines():
            print(line, file=sys.stderr)


def cmd_diff(args: argparse.Namespace) -> int:
    from cassettes.errors import problem_lines
    from cassettes.matching import RuleError
    from cassettes.reading.run import open_run
    from cassettes.replay.forking.rundiff import (
        comparing,
        diff_analysed,
        diff_rules,
        divergence_lines,
        fork_lined_up,
    )
    from cassettes.views.progress import reading_line

    notes: list[str] = []
    if not _related(args, notes):
        return 2
    try:  # refused before either run is read
        rules = diff_rules(args.a, args)
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
    forked = fork_lined_up(args.a, args.b, run_a, run_b, notes, compare=compare)
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
        sys.stdout.buffer.write(
            orjson.dumps(
                _diff_doc(args, notes, divs),
                option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE,
                default=str,
            )
        )
        sys.stdout.flush()
    elif unrelated is not None:
        print(f"looptap diff {args.a} {args.b}: {unrelated.message}")
    else:
        from cassettes.untrusted import clean_line

        for line in notes:
            print(clean_line(line))
        for line in divergence_lines(divs, f"looptap diff {args.a} {args.b}"):
            print(line)
    # what the fork itself changed is no divergence
    return 1 if any(d.layer != "fork" for d in divs) else 0


def _related(args: argparse.Namespace, notes: list[str]) -> bool:
    """How ``args.a`` and ``args.b`` are related, said before either is read: a branch named
    first is compared from its origin (``args`` swapped), a branch beside a run it was not forked
    from is noted; ``False`` (said on stderr) when a branch's origin changed since the fork."""
    from cassettes.reading.branch import relate
    from cassettes.untrusted import clean_line

    rel = relate(args.a, args.b)
    if rel is not None and rel.changed is not None:  # one line, not a false divergence per turn
        _err(f"looptap diff: {clean_line(rel.changed)}")
        return False
    if rel is not None and rel.swapped:  # the branch named first: its origin is A all the same
        notes.append(
            clean_line(
                f"{args.a} is a branch of {args.b}: compared as looptap diff {args.b} {args.a} "
                "(the origin as A, the branch as B)"
            )
        )
        args.a, args.b = args.b, args.a
    # a branch named beside a run that is not its origin: said, then compared as two runs
    if rel is None:
        from cassettes.replay.forking.fork import origin_of

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
    from urllib.parse import urlsplit

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
    from cassettes.replay.forking.rundiff import Divergence

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
    from cassettes.errors import CassetteError
    from cassettes.recording.redact import Redactor
    from cassettes.replay.forking.propose import propose_files
    from cassettes.untrusted import clean_line

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
    from decimal import Decimal, InvalidOperation

    from cassettes.errors import CassetteError
    from cassettes.reading.run import open_run
    from cassettes.replay.forking.compare import (
        compare_run,
        estimate_costs,
        plan_requests,
        send_list,
        upstream_bases,
        where_sent,
    )
    from cassettes.replay.forking.cursor import live_router

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
    try:  # checked before anything is read or sent (storage/paths.py), as every output is
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
        sys.stdout.buffer.write(
            orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str)
        )
        sys.stdout.flush()
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
    from cassettes.untrusted import clean_line

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
    from cassettes.net import header_problem, said_name

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
    from cassettes.replay.forking.compare import BudgetError, check_budget
    from cassettes.untrusted import clean_line

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
    from cassettes.untrusted import clean_line

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
    following a link or blocking)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        return stat.S_ISREG(os.fstat(fd).st_mode) and _REPORT_START.match(f.read(256)) is not None


def _report_target(args: argparse.Namespace) -> Any:
    """Where ``--report`` saves (``None``: not asked), checked as every output is
    (docs/reliability.md, "Paths looptap writes"): never the run itself; an earlier comparison is
    replaced (said); any other file, a link, a directory, a device, a FIFO or a place that takes
    no file is refused."""
    from cassettes.storage.paths import UnsafePath, check_target, same_path

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
    from cassettes.recording.redact import Redactor

    redactor = Redactor.configured()
    redactor.headers(headers)
    return redactor


def _save_report(target: Any, doc: Any) -> None:
    """Write the comparison at the checked ``target`` whole, mode 0600 (storage/paths.py)."""
    from cassettes.storage.paths import write_new

    try:
        replaced = target.replaces is not None and target.path.stat().st_size > 0
    except OSError:
        replaced = False
    write_new(
        target,
        orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str),
    )
    _err(
        f"comparison saved to {target.path}"
        + (" (the earlier comparison there replaced)" if replaced else "")
    )

