"""The user rules of one replay, fork or pytest test: the project's file and the flags, in one
place, checked before anything listens or is sent (:mod:`cassettes.matching`,
:mod:`cassettes.matching`).

``looptap replay``, ``looptap run --from`` and ``looptap diff`` take the same flags
(:func:`add_rule_flags`); the fork hands them to its replay server in the fork plan
(:mod:`cassettes.replay.forking._plan`), which reads the project's file itself from the same run and
working directory, so both read the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cassettes import providers

if TYPE_CHECKING:  # the flags are registered at start-up; the rules are read when a command runs
    from cassettes.matching._rules import Rules

__all__ = ["add_rule_flags", "project_rules", "rules_of_args"]


def project_rules(
    cassette: str | Path | None,
    ignore: Iterable[str] = (),
    substitute: Iterable[str] = (),
    volatile_tools: Iterable[str] = (),
    where: str = "the command line",
) -> Rules:
    """The project's rules for ``cassette`` (its ``looptap.toml`` or ``pyproject.toml``
    ``[tool.looptap]``) with the given ones added; a rule scoped to an API family no adapter
    speaks is refused. Raises :class:`~cassettes.matching.RuleError` (one line)."""
    from cassettes.matching._ruletable import from_flags, rules_from_config

    rules = rules_from_config(cassette).extend(
        from_flags(ignore, substitute, volatile_tools, where)
    )
    if rules.scoped():  # the adapters loaded only then
        rules.check_families(set(providers.FAMILIES))
    return rules


def add_rule_flags(p: Any, fork: bool = False, what: str | None = None) -> None:
    """``--ignore``, ``--substitute`` and ``--volatile-tool`` (repeatable) on a command's parser
    (``what``: what they match, in the help; ``looptap diff`` compares the requests so too)."""
    what = what or ("the fork's prefix" if fork else "the replay")
    for flag, metavar, said in (
        (
            "--ignore",
            "PATH",
            "ignore this JSON path of the request body (wildcards: metadata.*, "
            "messages[*].content[*].cache_control; one API family only: FAMILY:PATH); repeatable; "
            "added to pyproject.toml's [tool.looptap] (docs/testing.md)",
        ),
        (
            "--substitute",
            "REGEX=REPLACEMENT",
            "write every match of REGEX in the request's strings as REPLACEMENT, on both sides "
            "(split at the last '='); repeatable",
        ),
        (
            "--volatile-tool",
            "NAME",
            "the results of the tool NAME are not compared (what the world says now); repeatable",
        ),
    ):
        p.add_argument(
            flag, action="append", default=[], metavar=metavar, help=f"when matching {what}: {said}"
        )


def rules_of_args(args: Any, cassette: str | Path | None) -> Rules:
    """:func:`project_rules` for a command line with :func:`add_rule_flags`'s flags."""
    return project_rules(
        cassette,
        getattr(args, "ignore", ()) or (),
        getattr(args, "substitute", ()) or (),
        getattr(args, "volatile_tool", ()) or (),
    )

