"""The command registry's pieces: a command declared as data (:class:`Command`: its name, help,
arguments and handler as ``"module:function"``), the parser built from the declarations, and the
handler's module imported (:mod:`importlib`) only when its command runs. The declarations are in
:mod:`cassettes.commands`.

Arguments are declared as ``--help`` lists them (:data:`Args`): a mapping from the flags and the
metavar, as a usage line writes them (``"-o --output FILE"``; a positional's name, then its
metavar if it has one), to the help text, or to an :class:`Arg` when there is more to say than
the help (:func:`flag`, :func:`many` for the two commonest kinds).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from importlib import import_module
from typing import Any, TypeAlias

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "Arg",
    "Args",
    "Command",
    "Exclusive",
    "Extend",
    "Handler",
    "add_args",
    "add_command",
    "err",
    "flag",
    "loading",
    "many",
]

EXIT_OK = 0
EXIT_ERROR = 2
#: The run was read, but a check or analysis step failed on part of it (looptap's bug): those
#: round trips carry a ``<layer>.not_judged`` note (docs/reliability.md).
EXIT_NOT_JUDGED = 4


@dataclass(frozen=True)
class Arg:
    """One argument's help and its other ``add_argument`` keywords (its flags and metavar are
    its key in :data:`Args`)."""

    help: str | None
    options: dict[str, Any]

    def __init__(self, help: str | None = None, **options: Any) -> None:
        object.__setattr__(self, "help", help)
        object.__setattr__(self, "options", options)


def flag(help: str) -> Arg:
    """An option that takes no value: ``True`` when given."""
    return Arg(help, action="store_true")


def many(help: str, **options: Any) -> Arg:
    """A repeatable option: each value given appended to a list (empty when none is)."""
    return Arg(help, action="append", default=[], **options)


#: Arguments in the order ``--help`` lists them: ``"FLAGS… [METAVAR]"`` (or ``"name
#: [METAVAR]"``) to the help text or an :class:`Arg`.
Args: TypeAlias = Mapping[str, "str | Arg"]


@dataclass(frozen=True)
class Exclusive:
    """A mutually exclusive group of arguments."""

    args: Args


@dataclass(frozen=True)
class Extend:
    """Arguments another module adds (``"module:function"``, called with the parser and these
    keywords): a set of options shared with code outside the command line."""

    target: str
    options: dict[str, Any]

    def __init__(self, target: str, **options: Any) -> None:
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "options", options)


#: A command's arguments: mappings of them, exclusive groups, other modules' options, in order.
Section: TypeAlias = "Args | Exclusive | Extend"


class Command:
    """A subcommand: its name, its help line and its arguments, in order; ``run`` its handler
    (``"module:function"``, the function taking the parsed namespace and returning the exit
    status); ``subcommands`` its own subcommands (``subparsers``: ``add_subparsers``' keywords),
    each with its handler or the parent's; ``loading``: its module is imported under
    :func:`loading`."""

    def __init__(
        self,
        name: str,
        help: str | None,
        *args: Section,
        run: str | None = None,
        description: str | None = None,
        epilog: str | None = None,
        subparsers: dict[str, Any] | None = None,
        subcommands: tuple[Command, ...] = (),
        loading: bool = False,
    ) -> None:
        self.name, self.help, self.args, self.run = name, help, args, run
        self.description, self.epilog = description, epilog
        self.subparsers, self.subcommands = subparsers or {}, subcommands
        self.loading = loading


@contextmanager
def loading() -> Iterator[None]:
    """A command's imports, with the cyclic collector paused, then frozen (``gc.freeze``) the
    first time in a process. Importing builds a great many containers (classes, functions,
    pydantic's validators) that are never garbage: the collector walked each of them at least
    once, about 1 % of a small ``show``'s work, and every full collection of a long command walked
    them again; frozen, they are left out of every later collection. A process that runs
    :func:`main` again (the tests) freezes nothing more, so what its earlier work left stays
    collectable. As :func:`tune_gc`: for the command line, never for library callers."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
        if enabled:
            gc.enable()


def err(msg: str) -> None:
    """One line on stderr, as every command says what went wrong: ``looptap: MSG`` (shown as one
    line by the sanitiser, whatever recorded text MSG holds)."""
    from ..untrusted import clean_line  # (when something is said: not on every start-up)

    print(clean_line(f"looptap: {msg}"), file=sys.stderr)


class Handler:
    """A command's handler, imported when the command runs: an ``ImportError`` of its module (a
    package installed in another environment, a dependency missing) is one line and exit 2."""

    def __init__(self, name: str, target: str, loading: bool = False) -> None:
        self.name, self.target, self.loading = name, target, loading

    def resolve(self) -> Any:
        module, _, function = self.target.partition(":")
        with loading() if self.loading else nullcontext():
            return getattr(import_module(module), function)

    def __call__(self, args: argparse.Namespace) -> int:
        try:
            run = self.resolve()
        except ImportError as exc:
            err(f"error: '{self.name}' is unavailable in this environment: {exc}")
            return EXIT_ERROR
        return int(run(args))


def add_args(p: Any, sections: Sequence[Section]) -> None:
    """Each declared argument on ``p``, in order (the order ``--help`` lists them in)."""
    for s in sections:
        if isinstance(s, Exclusive):
            add_args(p.add_mutually_exclusive_group(), (s.args,))
        elif isinstance(s, Extend):
            module, _, function = s.target.partition(":")
            getattr(import_module(module), function)(p, **s.options)
        else:
            for key, spec in s.items():
                _add_arg(p, key, spec)


def _add_arg(p: Any, key: str, spec: str | Arg) -> None:
    """``key``'s flags (or a positional's name), then its metavar, as a usage line writes them."""
    words = key.split(" ")
    n = 1
    while n < len(words) and words[n].startswith("-"):
        n += 1
    kw = {"metavar": " ".join(words[n:])} if n < len(words) else {}
    if isinstance(spec, str):
        p.add_argument(*words[:n], help=spec, **kw)
    else:
        p.add_argument(*words[:n], help=spec.help, **kw, **spec.options)


def add_command(sub: Any, command: Command, outline: bool = False) -> None:
    """``command`` on the subparsers ``sub``: its arguments, its subcommands and its handler; with
    ``outline``, its name and help line alone (all its parent's help lists)."""
    if outline:
        sub.add_parser(command.name, help=command.help)
        return
    kw = {k: v for k, v in (("description", command.description), ("epilog", command.epilog)) if v}
    p = sub.add_parser(command.name, help=command.help, **kw)
    add_args(p, command.args)
    if command.subcommands:
        nested = p.add_subparsers(**command.subparsers)
        for c in command.subcommands:
            add_command(nested, c)
    if command.run is not None:
        p.set_defaults(func=Handler(command.name, command.run, command.loading))
