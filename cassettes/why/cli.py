"""``looptap why RUN.jsonl [--outcome …] [--samples K] -o DIR -- CMD`` (docs/why.md).

A core command: it only starts processes (the baseline replay, then each branch as ``looptap run
--from`` in the recorder's environment), so it needs no mitmproxy here, runs from either
environment, and the Python/pytest helper (:mod:`cassettes.why.api`) calls the same code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register_why", "split_options"]


def _err(msg: str) -> None:
    from cassettes.untrusted import clean_line

    print(clean_line(f"looptap why: {msg}"), file=sys.stderr, flush=True)


def register_why(sub: Any) -> None:
    p = sub.add_parser(
        "why",
        help="which layer made a recorded run fail: fork it with "
        "one suspect changed, K times, and count the flips",
        epilog="exit status: 0 a verdict was reached or said to be undetermined; 1 no intervention "
        "could be run or judged; 2 refused (the run does not fail by the outcome, a budget limit, "
        "a bad option or output directory): nothing sent. See docs/why.md",
    )
    p.add_argument("file", help="the recorded run that failed (a looptap cassette)")
    _add_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the agent command, after --")
    p.set_defaults(func=cmd_why)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--outcome",
        choices=("exit",),
        default="exit",
        help="what failed means (default: the command's exit status is not 0)",
    )
    p.add_argument(
        "--check",
        metavar="CMD",
        help="failed means: this shell command, run after "
        "the agent, exits with a status other than 0",
    )
    p.add_argument(
        "--finding",
        metavar="CODE",
        help="failed means: the run has a finding of this code (C.dropped_tool_result; "
        "E.rule_broken:NAME: the agent's rule NAME broken, docs/rules.md)",
    )
    p.add_argument(
        "--answer-matches", metavar="RE", help="failed means: the final answer matches RE"
    )
    p.add_argument(
        "--answer-not-matches",
        metavar="RE",
        help="failed means: the final answer does not match RE",
    )
    p.add_argument(
        "--samples", type=int, default=5, metavar="K", help="branches per intervention (default 5)"
    )
    p.add_argument(
        "--jobs", type=int, default=2, metavar="N", help="branches run at once (default 2)"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="where the branches and why.json go (a new directory, "
        "or an earlier why of this run with --resume)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the why in -o DIR: its finished branches are kept",
    )
    p.add_argument(
        "--result",
        action="append",
        default=[],
        metavar="CALL_ID=@FILE",
        help="the text a dropped tool result had (the recording never had it): the C repair puts "
        "it back (or CALL_ID=TEXT)",
    )
    p.add_argument(
        "--layer",
        action="append",
        choices=("E", "A", "C"),
        default=[],
        metavar="LAYER",
        help="run only the interventions of this layer (E, A or C; repeatable): a smaller budget "
        "for a suspicion you have",
    )
    p.add_argument("--model", help="also re-sample each E turn on this model (same API family)")
    p.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="where requests of that API go past the cursor (as looptap run)",
    )
    p.add_argument("--confdir", help="the recorder's configuration directory (as looptap run)")
    p.add_argument(
        "--max-requests",
        type=int,
        metavar="N",
        help="refuse (before anything is sent) when more live requests would be sent",
    )
    p.add_argument(
        "--max-cost",
        metavar="USD",
        help="refuse (before anything is sent) when the estimated cost is higher",
    )
    p.add_argument(
        "--allow-unknown-price",
        action="store_true",
        help="run under --max-cost although a model has no known price",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list the interventions and the live requests each costs; run nothing, send nothing",
    )
    p.add_argument(
        "--json", action="store_true", help="the verdict and every intervention as one JSON object"
    )


def split_options(args: argparse.Namespace) -> None:
    """The options written after the run: argparse gives a positional's remainder everything that
    follows it, options included; those before ``--`` are read here, the rest is the command."""
    rest = list(args.cmd)
    if "--" in rest:
        options, args.cmd = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
    elif rest and rest[0].startswith("-"):
        options, args.cmd = rest, []
    else:
        options = []
    if options:
        p = argparse.ArgumentParser(prog="looptap why", add_help=False)
        _add_options(p)
        p.parse_args(options, namespace=args)


def cmd_why(args: argparse.Namespace) -> int:
    import orjson

    from cassettes.why.investigation import Refused, investigate

    split_options(args)
    try:
        result = investigate(args)
    except Refused as exc:
        for line in exc.lines:
            _err(line)
        _err(str(exc))
        return 2
    if args.json:
        sys.stdout.buffer.write(
            orjson.dumps(
                result.doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str
            )
        )
        sys.stdout.flush()
    else:
        for line in result.lines:
            print(line)
    return result.status
