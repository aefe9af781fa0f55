"""``looptap why RUN.jsonl [--outcome …] [--samples K] -o DIR -- CMD`` (docs/why.md).

A core command: it only starts processes (each a ``looptap run --from`` in the recorder's
environment: the baseline, a fork that sends nothing, then each branch), so it needs no
mitmproxy here, runs from either environment, and the Python/pytest helper
(:mod:`cassettes.why._api`) calls the same code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from ..commands import WHY_OPTIONS, add_args
from ._confirm import confirm
from ._investigation import Refused, investigate, say

__all__ = ["cmd_why", "emit_result", "split_options"]


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
        add_args(p, (WHY_OPTIONS,))
        p.parse_args(options, namespace=args)


def cmd_why(args: argparse.Namespace) -> int:
    split_options(args)
    try:
        result = confirm(args) if args.confirm else investigate(args)
    except Refused as exc:
        for line in exc.lines:
            say(line)
        say(str(exc))
        return 2
    return emit_result(result, args.json)


def emit_result(result: Any, as_json: bool) -> int:
    """A command's result (``.doc``, ``.lines``, ``.status``) on stdout: its document as JSON
    (``--json``), else its lines; its exit status."""
    if as_json:
        sys.stdout.buffer.write(
            orjson.dumps(
                result.doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE, default=str
            )
        )
        sys.stdout.flush()
    else:
        for line in result.lines:
            print(line)
    return int(result.status)
