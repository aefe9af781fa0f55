"""The command registry (cassettes/commands/): every command is declared once, its handler named as
``"module:function"`` and imported only when the command runs; a handler whose module cannot be
imported here is one line and exit 2, and the listing of every command says so without importing
it."""

from __future__ import annotations

import argparse
import pkgutil
from collections.abc import Iterator

import pytest

import looptap.cassettes.commands as commands
from looptap.cassettes.commands import (
    COMMANDS,
    Arg,
    Args,
    Command,
    Handler,
    add_args,
    add_command,
    declared,
    flag,
    many,
)


def _every(commands: tuple[Command, ...]) -> Iterator[Command]:
    for c in commands:
        yield c
        yield from _every(c.subcommands)


def test_every_declared_handler_names_a_function_that_exists() -> None:
    """A misspelt ``"module:function"`` would only show when a user ran the command: each one is
    resolved here (proxy/cli.py imports without mitmproxy, inspector/cli.py without Textual)."""
    handlers = [c for c in _every(COMMANDS) if c.run]
    assert len(handlers) >= 18
    for c in handlers:
        assert c.run is not None
        assert callable(Handler(c.name, c.run).resolve()), c.run


def test_the_names_are_unique_and_declared_finds_them() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    assert declared("why").run == "looptap.cassettes.why:cmd_why"
    with pytest.raises(KeyError):
        declared("no-such-command")


def test_a_command_whose_module_is_not_installed_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = Command(
        "gone",
        "a command of a package not installed here",
        {"--flag": flag("a flag")},
        run="looptap_no_such_package.cli:cmd_gone",
    )
    parser = argparse.ArgumentParser(prog="looptap")
    add_command(parser.add_subparsers(dest="command"), missing)
    args = parser.parse_args(["gone", "--flag"])
    assert args.flag is True and args.func(args) == 2
    err = capsys.readouterr().err
    assert err == (
        "looptap: error: 'gone' is unavailable in this environment: "
        "No module named 'looptap_no_such_package'\n"
    )


def test_an_argument_is_declared_as_its_usage_line_writes_it() -> None:
    """A declaration's key is the flags, then the metavar (a positional: its name, then its
    metavar); its value the help, or an :class:`Arg` with the other keywords."""
    parser = argparse.ArgumentParser(prog="x", add_help=False)
    declared_args: Args = {
        "-o --output FILE": "where",
        "--json": flag("as JSON"),
        "--upstream NAME=URL": many("where to"),
        "--header 'NAME: VALUE'": many("a header"),
        "--jobs N": Arg("at once", type=int, default=1),
        "dirs DIR": Arg("directories", nargs="+"),
    }
    add_args(parser, (declared_args,))
    assert " ".join(parser.format_usage().split()) == (
        "usage: x [-o FILE] [--json] [--upstream NAME=URL] [--header 'NAME: VALUE'] [--jobs N] "
        "DIR [DIR ...]"
    )
    args = parser.parse_args(["d1", "-o", "out", "--upstream", "a=b", "--upstream", "c=d"])
    assert vars(args) == {
        "output": "out",
        "json": False,
        "upstream": ["a=b", "c=d"],
        "header": [],
        "jobs": 1,
        "dirs": ["d1"],
    }


def test_the_registry_facade_names_are_pinned() -> None:
    """cassettes.commands is the façade of the declarations and the registry (issue 56): a name
    added to or dropped from its surface is a decision seen in review; its modules are private."""
    assert commands.__all__ == [
        "COMMANDS", "EXIT_ERROR", "EXIT_NOT_JUDGED", "EXIT_OK", "WHY_OPTIONS",
        "Arg", "Args", "Command", "Handler",
        "add_args", "add_command", "declared", "err", "flag", "loading", "many",
    ]  # fmt: skip
    assert all(getattr(commands, name) is not None for name in commands.__all__)
    modules = [m.name for m in pkgutil.iter_modules(commands.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
