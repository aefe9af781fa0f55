"""``looptap replay`` and ``looptap diff``, registered through the ``looptap.commands`` entry points.

Errors are converted by the core CLI (one line, non-zero exit); these commands only add theirs.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

__all__ = ["cmd_diff", "cmd_replay", "different_apis", "register_diff", "register_replay"]


def _err(msg: str) -> None:
    print(f"looptap: {msg}", file=sys.stderr)


def cmd_replay(args: argparse.Namespace) -> int:
    import asyncio  # here, not at the top: `looptap --help` loads every command module

    from cassettes.replay.server import ReplayServer, parse_pace

    try:
        parse_pace(args.pace)
    except ValueError as exc:
        _err(f"error: {exc}")
        return 2
    plan = None
    if args.fault:
        from cassettes.replay.faults import FaultPlan, FaultSpecError, parse_fault

        try:
            plan = FaultPlan([parse_fault(f) for f in args.fault], seed=args.fault_seed)
        except FaultSpecError as exc:
            _err(f"error: {exc}")
            return 2
    from cassettes.replay.server import IDLE_TIMEOUT, READ_TIMEOUT

    timeouts: list[float | None] = []
    for name, default in (("idle_timeout", IDLE_TIMEOUT), ("read_timeout", READ_TIMEOUT)):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            _err(f"error: --{name.replace('_', '-')} wants seconds (0: no limit), not {value!r}")
            return 2
        timeouts.append(default if value is None else (value or None))
    server = ReplayServer(
        Path(args.file), host=args.host, port=args.port, pace=args.pace, strict=args.strict, faults=plan, idle_timeout=timeouts[0], read_timeout=timeouts[1]
    )
    from cassettes.errors import problem_lines

    for p in problem_lines(server.problems):
        _err(f"warning: {args.file}: {p}")

    async def serve() -> bool:
        # Ctrl-C / SIGTERM handled from the start: a caller that stops the server as soon as it
        # reads the export lines must not land between them and the handlers (a KeyboardInterrupt
        # there skipped stop_async and could leave the process hanging).
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
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

        _err(f"replaying {args.file}: {count(n, 'round trip')} on {server.url}, pace {args.pace}{', strict' if args.strict else ''} (Ctrl-C to stop)")
        await stop.wait()
        await server.stop_async()
        return True

    if not asyncio.run(serve()):
        return 2
    for line in server.report_lines():
        _err(line.removeprefix("looptap "))
    if plan is not None:
        _err(f"replay: {len(plan.fired)} faults injected" + "".join(f"\n  request {n} (recorded #{seq}): {text}" for n, seq, text in plan.fired[:50]))
        if plan.skipped:
            _err(f"replay: {len(plan.skipped)} faults not injected (the recorded answer was served)"
                 + "".join(f"\n  request {n} (recorded #{seq}): {text}: {why}" for n, seq, text, why in plan.skipped[:50]))
    for m in server.misses:
        for line in m.lines():
            print(line, file=sys.stderr)
    return 1 if server.misses or server.internal_errors or (args.strict and server.unplayed()) else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from cassettes.errors import problem_lines
    from cassettes.interop.run import open_run
    from cassettes.replay.rundiff import diff_analysed, divergence_lines

    run_a, run_b = open_run(args.a), open_run(args.b)  # each read once, as a stream
    problems_a, problems_b = run_a.problems, run_b.problems
    unrelated = different_apis(run_a, run_b)
    if unrelated is not None:  # nothing to pair turn by turn: one line says so
        divs = [unrelated]
    else:
        divs = diff_analysed(run_a.analysis, run_b.analysis, _exchange(run_a), _exchange(run_b))
    for path, problems in ((args.a, problems_a), (args.b, problems_b)):
        for p in problem_lines(problems):
            _err(f"warning: {path}: {p}")
    if args.json:
        doc: dict[str, Any] = {"a": str(args.a), "b": str(args.b), "divergences": [d.as_json() for d in divs]}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str))
        sys.stdout.flush()
    elif unrelated is not None:
        print(f"looptap diff {args.a} {args.b}: {unrelated.message}")
    else:
        for line in divergence_lines(divs, f"looptap diff {args.a} {args.b}"):
            print(line)
    return 1 if divs else 0


def _exchange(run: Any) -> Any:
    """A run's round trip by seq (what the diff reads of each paired turn)."""

    def get(seq: int) -> Any:
        found = run.roundtrip(seq)
        if found is None:
            raise KeyError(seq)
        return found[0]

    return get


def _apis(run: Any) -> list[str]:
    """The APIs a run's conversations call (family, method and path), in order of first use."""
    from urllib.parse import urlsplit

    out: dict[str, None] = {}
    for conv in run.analysis.conversations:
        if not conv.turns:
            continue
        found = run.roundtrip(conv.turns[0])
        where = f" {found[0].method} {urlsplit(found[0].url).path}" if found is not None else ""
        out[f"{conv.family}{where}"] = None
    return list(out)


def different_apis(a: Any, b: Any) -> Any:
    """A single divergence when the two runs share no API (family and path): their turns are not
    two runs of one agent, and a turn-by-turn diff would only list every field of every request;
    ``None`` when they share one (or either has no LLM turn)."""
    from cassettes.replay.rundiff import Divergence

    apis_a, apis_b = _apis(a), _apis(b)
    if not apis_a or not apis_b or set(apis_a) & set(apis_b):
        return None
    return Divergence("A", f"the runs use different APIs ({', '.join(apis_a[:3])} against {', '.join(apis_b[:3])}): not two runs of one agent, nothing to compare turn by turn", None, None)


def register_replay(sub: Any) -> None:
    p = sub.add_parser("replay", help="serve a cassette as a fake upstream; prints the environment to export")
    p.add_argument("file", help="the run to replay: a looptap cassette, a vcrpy cassette or a mitmproxy flow file")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--host", default="127.0.0.1", help=argparse.SUPPRESS)
    p.add_argument("--pace", default="instant", help="stream pace: recorded, instant (default) or xN (N times faster than recorded)")
    p.add_argument("--strict", action="store_true", help="requests must come in recorded order, with the same API version headers; exit 1 if any round trip was left unplayed")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SELECTOR:KIND",
        help="inject a fault in the API's own format (repeatable), e.g. 'turn=1:overloaded*2', 'p=0.2:rate_limit', "
        "'seq=4:stream_cut=3', '*:slow_first_byte=5'; kinds: rate_limit, overloaded, server_error, context_length, "
        "reset, slow_first_byte, stall, stream_cut, error_event (docs/faults.md)",
    )
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the p= selectors (the same seed, the same faults)")
    p.add_argument("--idle-timeout", type=float, metavar="SECONDS", help="close a connection idle this long between requests or WebSocket frames (default 120; 0: never)")
    p.add_argument("--read-timeout", type=float, metavar="SECONDS", help="a request head must arrive, and a body may pause, at most this long (default 30; 0: no limit)")
    p.set_defaults(func=cmd_replay)


def register_diff(sub: Any) -> None:
    p = sub.add_parser("diff", help="where two runs of an agent diverge, by conversation, turn and layer (exit 1 if they do)")
    p.add_argument("a", help="the first run (a looptap cassette, a vcrpy cassette or a mitmproxy flow file)")
    p.add_argument("b", help="the second run (the same formats)")
    p.add_argument("--json", action="store_true", help="the divergences as JSON")
    p.set_defaults(func=cmd_diff)
