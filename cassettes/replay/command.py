"""``looptap replay``'s handler (declared in :mod:`cassettes.commands`; ``diff``, ``compare`` and
``rules propose`` are :mod:`cassettes.replay.comparison`'s).

Errors are converted by the core CLI (one line, non-zero exit); these commands only add theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from .. import interrupts
from ..errors import CassetteError, problem_lines
from ..hints import count
from ..matching import rules_of_args, turn_entries
from ..storage import write_private
from ..wire import KEY_ENV
from .forking.cursor import Cursor, live_router
from .forking.placement import CursorError, parse_cursor
from .forking.plan import PlanError, read_plan
from .forking.served import keep_served
from .live.edits import EditError, parse_edits
from .live.upstreams import bases_of
from .serving.agent_env import export_lines, placeholder_keys
from .serving.faults import FaultPlan, FaultSpecError, parse_fault
from .serving.server import IDLE_TIMEOUT, READ_TIMEOUT, ReplayServer, parse_pace

__all__ = ["cmd_replay"]


def _err(msg: str) -> None:
    print(f"looptap: {msg}", file=sys.stderr)


class _Usage(Exception):
    """A command-line value that cannot be used (exit 2, one line)."""


def _fault_plan(args: argparse.Namespace) -> Any:
    if not args.fault:
        return None

    try:
        return FaultPlan([parse_fault(f) for f in args.fault], seed=args.fault_seed)
    except FaultSpecError as exc:
        raise _Usage(str(exc)) from None


def _timeouts(args: argparse.Namespace) -> list[float | None]:
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

    try:
        bases = bases_of(args.live, "--live")
        spec = parse_cursor(args.cursor)
        edits = parse_edits(args.edit, spec.text)
    except (CursorError, EditError, ValueError) as exc:
        raise _Usage(str(exc)) from None
    return Cursor(spec, live_router(bases), model=args.model, edits=edits, prefix=args.prefix)


def _planned(args: argparse.Namespace) -> Any:
    """The cursor of a fork's plan (:mod:`cassettes.replay.forking.plan`), its settings put on
    ``args``."""
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
    args.live_tools = args.live_tools or plan.live_tools
    args.tool_proxy, args.tool_proxy_ca = plan.tool_proxy, plan.tool_proxy_ca
    return plan.router(_edit_key() if plan.live_recorder else None)


def _edit_key() -> str:
    """The fork's per-run key for its edit marks (its live upstreams are its looptap recorders):
    read once from the environment (and removed from it), passed on to nothing."""
    key = os.environ.pop(KEY_ENV, None)
    if not key:
        raise _Usage(
            f"the fork plan's edits need the fork's per-run key in {KEY_ENV} (looptap run --from "
            "gives it): without it the recorder accepts no edit marks"
        )
    return key


def cmd_replay(args: argparse.Namespace) -> int:
    try:
        parse_pace(args.pace)
        plan = _fault_plan(args)
        idle, read = _timeouts(args)
        cursor = _cursor(args)
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
            live_tools=args.live_tools,
            tool_proxy=getattr(args, "tool_proxy", None),
            tool_proxy_ca=getattr(args, "tool_proxy_ca", None),
        )
    except (_Usage, ValueError) as exc:
        _err(f"error: {exc}")
        return 2

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
        or (args.strict and server.unplayed_turns())
        or (cursor is not None and cursor.unapplied())
        else 0
    )


def _write_tolerated(server: Any, path: str) -> None:
    """What the replay tolerated, per recorded turn (:mod:`cassettes.matching`:
    redacted, cut), as JSON into ``path``, a file ``looptap run --from`` made for it and reads back
    into the branch cassette; never over another file (created anew, private)."""

    try:
        write_private(
            path,
            orjson.dumps(
                {
                    "tolerated": turn_entries(server.matcher),
                    "starts": _starts(server),
                    "failed": _failed(server),
                    # the run as the agent lived it: per request answered, the recorded seq served
                    # or None (sent live); none kept past the cap (not known then)
                    "lived": _lived(server),
                    # stopped at the fork's limit of live requests (cassettes.replay.forking.limit)
                    "stopped": server.router.limit.as_json()
                    if getattr(server.router, "limit", None) is not None
                    else None,
                }
            ),
        )
    except OSError as exc:
        _err(
            "warning: the tolerated differences could not be written for the branch: "
            f"{exc.strerror or exc}"
        )
    # the tools' calls answered from the recording, for the branch (forking/served.py)
    if server.log.tool_origins:
        try:
            keep_served(
                os.path.join(os.path.dirname(path), "served-tools.jsonl"),
                list(server.served),
                server.log.tool_origins,
            )
        except (OSError, CassetteError) as exc:
            _err(f"warning: the tools' served calls could not be kept for the branch: {exc}")


def _keep_sent(server: Any, path: str) -> None:
    """What the client sent, misses included, as a cassette at ``path`` (a file ``looptap run
    --from`` made room for in its private directory): the evidence for ``looptap rules propose``."""
    try:
        server.keep_sent(Path(path))
    except (CassetteError, OSError) as exc:
        _err(f"warning: what the client sent could not be kept: {exc}")


def _failed(server: Any) -> list[str]:
    """Why the fork failed, one line each (none: it did not): each request before the cursor that
    matched no recorded turn (its closest turn and what differs), each edit never applied."""
    cursor = server.router
    out = [
        f"a tool's call the recording does not answer failed closed (--tools-offline): {m.headline}"
        if _tool_miss(m)
        else f"the client diverged before the cursor at {m.headline}"
        for m in server.matcher.misses
    ]
    out += [
        f"edit {e.label} never applied: no request sent live carried it"
        for e in (cursor.unapplied() if cursor is not None else [])
    ]
    return out[:20]


def _tool_miss(m: Any) -> bool:
    """A miss of a tool's request (the matcher's :meth:`~cassettes.matching.Matcher.match_tool`:
    its closest is a recorded tool call, or none was to its host; a ``CONNECT`` refused), not of
    a model request: the cursor, before or past which it came, says nothing of it."""
    closest = m.closest
    return (
        m.method == "CONNECT"
        or (closest is not None and bool(closest.exchange.tool))
        or m.reason.startswith(("no tool HTTP call to ", "the tools' HTTP calls are not replayed"))
    )


def _lived(server: Any) -> list[int | None] | None:
    """Every request the fork answered, in order: the recorded seq served, or ``None`` (sent live)
    (:attr:`cassettes.replay.forking.cursor.Cursor.lived`); ``None`` past its cap (not known)."""
    return server.router.lived_order() if server.router is not None else None


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

    async def serve() -> bool:
        # Ctrl-C / SIGTERM handled from the start: a caller that stops the server as soon as it
        # reads the export lines must not land between them and the handlers (a KeyboardInterrupt
        # there skipped stop_async and could leave the process hanging).
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        if interrupts.pending():  # a Ctrl-C during start-up that nothing raised
            stop.set()
        try:
            await server.start_async()
        except OSError as exc:
            why = "address already in use" if "in use" in str(exc) else (exc.strerror or str(exc))
            _err(f"error: cannot listen on {args.host}:{args.port}: {why}")
            return False
        # the proxy variables when the recording's tools made HTTP calls (answered here too; with
        # Node's fetch shim after the user's NODE_OPTIONS), the CA store trusting the replay's CA
        # when some were HTTPS (the store this process has, and that CA), the base URLs, and a
        # placeholder key for each SDK that will not start without one: each value quoted, none
        # with a control character
        tools = len(server.matcher.index.tools)
        proxy = server.proxy_env(os.environ) if tools else {}
        trust = server.trust_env(os.environ)
        lines, left = export_lines({**proxy, **trust, **server.env, **placeholder_keys(os.environ)})
        for line in lines:
            print(line)
        sys.stdout.flush()
        for name in left:
            _err(f"not exported: {name} (its value holds a control character)")
        from ..net import shim_left_out

        left_out = shim_left_out(os.environ.get("NODE_OPTIONS", ""), "the replay server")
        if tools and left_out:
            _err(left_out)
        n = len(server.matcher.recorded) - tools
        live = "; those it does not answer go live" if args.live_tools else ""
        _err(
            f"replaying {args.file}: {count(n, 'round trip')}"
            + (
                f" (and {count(tools, 'tool HTTP call')}, served through HTTP_PROXY"
                + (" and HTTPS_PROXY with a CA made for this replay" if trust else "")
                + f"{live})"
                if tools
                else ""
            )
            + f" on {server.url}, pace "
            f"{args.pace}{', strict' if args.strict else ''} (Ctrl-C to stop)"
        )
        await stop.wait()
        await server.stop_async()
        return True

    return asyncio.run(serve())


def _report(server: Any, plan: Any, cursor: Any) -> None:

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
