"""The ``looptap`` command.

Every subcommand is declared once in :mod:`cassettes.commands` (its arguments and its handler
as ``"module:function"``); the parser is built from those declarations and the handler's module
is imported only when its command runs (:mod:`cassettes.commands._registry`), so building the
parser loads no command's work.

Errors are converted here, at the boundary: one clear line on stderr and a non-zero exit, never a
traceback for bad input.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .. import interrupts
from ..errors import CassetteError

interrupts.watch()  # first: a Ctrl-C swallowed by any later import is still honoured

# orjson's module init assumes its own imports succeed: a Ctrl-C landing inside it (the first
# ~0.1 s of every command) is a segmentation fault, not a KeyboardInterrupt (ijl/orjson#310).
# SIGINT is held for the import and arrives right after it, as an ordinary KeyboardInterrupt.
_HELD = (
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if hasattr(signal, "pthread_sigmask")
    else None
)
try:
    import orjson  # noqa: F401 - every command's, held here (above)
finally:
    if _HELD is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _HELD)

from ..commands import (  # noqa: E402 - after the interrupt watch
    COMMANDS,
    EXIT_ERROR,
    EXIT_OK,
    add_command,
    err,
    loading,
)

__all__ = ["build_parser", "loading", "main", "subcommand_of", "tune_gc"]


class _Version(argparse.Action):
    """``--version``: the installed version, read when asked (``importlib.metadata`` is not
    loaded by every command)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from .._version import __version__

        parser.exit(message=f"looptap {__version__}\n")


def subcommand_of(argv: Sequence[str] | None) -> str | None:
    """The subcommand a command line names: its first argument that is not an option (the
    top-level options, ``-h`` and ``--version``, take no value); ``None`` when the top-level help
    comes first (``looptap -h show`` prints the top-level help, which lists every command)."""
    args = sys.argv[1:] if argv is None else argv
    for a in args:
        if a == "-h" or (len(a) > 2 and "--help".startswith(a)):
            return None
        if not a.startswith("-"):
            return a
    return None


def build_parser(command: str | None = None, outline: bool = False) -> argparse.ArgumentParser:
    """The ``looptap`` parser, built from the declarations (:data:`~.commands.COMMANDS`); with
    ``command``, only that subcommand (all of them when it names none, or one not declared). With
    ``outline``, a command line that names no declared command: each subcommand by its name and
    help line alone, what the top-level help and argparse's "invalid choice" list (``looptap
    --help`` builds no command's arguments)."""
    parser = argparse.ArgumentParser(
        prog="looptap",
        description="Record, inspect and replay LLM agent traffic; label what the model (E), the "
        "API (A) and the client (C) did.",
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = [c for c in COMMANDS if c.name == command]
    for c in named or COMMANDS:
        add_command(sub, c, outline=outline and not named)
    return parser


#: The cyclic garbage collector's thresholds for a looptap process. Reading a run allocates
#: millions of small containers, most of them kept to the end (summaries, hashes, the analysis):
#: with CPython's defaults (700, 10, 10) the collector walks them thousands of times, 7-8 % of
#: reading a large run (bench/inspector.py). Only the first generation's threshold is raised: older
#: generations at 50 held a hostile delta bomb's garbage longer (1.1 GB against 0.8 GB peak) for
#: 2 % more speed. A process may set its own collector, so the command line does; library
#: functions never touch it.
GC_THRESHOLDS = (10_000, 10, 10)


def tune_gc() -> None:
    """Collect less often, as :data:`GC_THRESHOLDS` says (what ``looptap`` does at start), and
    not at the interpreter's exit: there the collector walked every object the command left (the
    modules, pydantic's validators, the run), a fifth of a small ``show``'s CPU time, to free
    memory the process gives back by ending. ``gc.freeze`` runs from ``atexit``, so only when the
    process ends (a test calling :func:`main` keeps its collector until then); the exit handlers
    still run, and files are closed by their ``with`` blocks, not by the collector."""
    gc.set_threshold(*GC_THRESHOLDS)
    atexit.unregister(gc.freeze)  # once, however often main() runs in one process
    atexit.register(gc.freeze)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(subcommand_of(argv), outline=True)
    args = parser.parse_args(argv)
    # the words after ``looptap``, for a command handed to another interpreter (proxy/cli.py)
    args.cli_argv = list(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_ERROR
    tune_gc()
    from ..untrusted import guard_stdio

    # One output boundary: every line any command prints (its own, a plugin's, an error's) passes
    # through the sanitiser, so recorded text can never drive the terminal (cassettes/untrusted.py).
    with guard_stdio():
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except CassetteError as exc:
        err(f"error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except RecursionError:
        # Whatever a depth bound did not foresee (cassettes/bounds.py): one line, not a traceback.
        err("error: the input is nested too deep to be read")
        return EXIT_ERROR
    except MemoryError:
        # Whatever a budget did not foresee: one line, not a traceback (the memory is free again).
        err("error: out of memory (the input is too large for the memory this process may use)")
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (``looptap show … | head``): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        err(f"error: {exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}")
        return EXIT_ERROR
