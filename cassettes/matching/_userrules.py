"""The user rules of one replay, fork or pytest test: the project's file and the flags, in one
place, checked before anything listens or is sent (:mod:`cassettes.matching`,
:mod:`cassettes.matching`).

``looptap replay``, ``looptap run --from`` and ``looptap diff`` take the same flags
(:func:`cassettes.project.add_rule_flags`); the fork hands them to its replay server in the fork
plan (:mod:`cassettes.replay.forking._plan`), which reads the project's file itself from the same
run and working directory, so both read the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cassettes import providers

if TYPE_CHECKING:  # the flags are registered at start-up; the rules are read when a command runs
    from cassettes.matching._rules import Rules

__all__ = ["project_rules", "rules_of_args"]


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


def rules_of_args(args: Any, cassette: str | Path | None) -> Rules:
    """:func:`project_rules` for a command line with the flags of
    :func:`~cassettes.project.add_rule_flags`."""
    return project_rules(
        cassette,
        getattr(args, "ignore", ()) or (),
        getattr(args, "substitute", ()) or (),
        getattr(args, "volatile_tool", ()) or (),
    )
