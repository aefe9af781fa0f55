"""The user rules of one replay, fork or pytest test, read where they are written: a
``[tool.looptap]`` table (or a ``looptap.toml``) and flags (``--ignore`` …, pytest's ini lines and
marker arguments), in one place, checked before anything listens or is sent.

``looptap replay``, ``looptap run --from`` and ``looptap diff`` take the same flags
(:func:`cassettes.project.add_rule_flags`); the fork hands them to its replay server in the fork
plan (:mod:`cassettes.replay.forking.plan`), which reads the project's file itself from the same
run and working directory, so both read the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .. import providers
from ..project import RuleError, project_table
from ._rules import (
    MAX_RULES,
    Rules,
    parse_ignore,
    parse_substitution,
    parse_volatile_tool,
)

__all__ = ["from_flags", "from_table", "project_rules", "rules_from_config", "rules_of_args"]

_T = TypeVar("_T")

_TABLE_KEYS = ("ignore", "substitute", "volatile_tools", "volatile")


def from_table(table: Mapping[str, Any], where: str) -> Rules:
    """The rules a ``[tool.looptap]`` table (or a ``looptap.toml``) gives. Keys: ``ignore`` (paths,
    each a string ``PATH`` / ``FAMILY:PATH`` or a table ``{path, family}``), ``substitute`` (each
    ``"REGEX=REPLACEMENT"`` or ``{pattern, replacement, family}``), ``volatile_tools`` (names),
    ``volatile`` (the built-in detectors, true by default). Anything else is refused."""
    if not isinstance(table, Mapping):
        raise RuleError(f"{where}: [tool.looptap] must be a table")
    for k in table:
        if k not in _TABLE_KEYS:
            raise RuleError(
                f"{where}: unknown key {str(k)[:40]!r} in the looptap table (known: "
                f"{', '.join(_TABLE_KEYS)})"
            )
    rules = Rules(sources=[where])
    for item in _list(table, "ignore", where):
        rules.ignore.append(_entry(item, where, "ignore", parse_ignore, _IGNORE))
    for item in _list(table, "substitute", where):
        rules.substitute.append(_entry(item, where, "substitute", parse_substitution, _SUBSTITUTE))
    for item in _list(table, "volatile_tools", where):
        if not isinstance(item, str):
            raise RuleError(f"{where}: volatile_tools: each entry is a tool's name")
        rules.volatile_tools.append(_at(where, parse_volatile_tool, item))
    if "volatile" in table:
        if not isinstance(table["volatile"], bool):
            raise RuleError(f"{where}: volatile must be true or false")
        rules.volatile = table["volatile"]
    return Rules().extend(rules)


def rules_from_config(cassette: str | Path | None = None, cwd: str | Path | None = None) -> Rules:
    """The rules of the project's file (:func:`~cassettes.project.project_table`); none when
    there is no file or table."""
    found = project_table(cassette, cwd)
    return Rules() if found is None else from_table(*found)


#: An entry of ``ignore`` and of ``substitute`` as a table: its fields (besides ``family``), and
#: how a message says the entry's forms.
_IGNORE = (("path",), 'a path ("metadata.*") or {path = "…", family = "…"}')
_SUBSTITUTE = (
    ("pattern", "replacement"),
    '"REGEX=REPLACEMENT" or {pattern = "…", replacement = "…"}',
)


def _entry(
    item: Any, where: str, key: str, parse: Callable[..., _T], form: tuple[tuple[str, ...], str]
) -> _T:
    """One entry of ``key`` (``ignore``, ``substitute``): a string (``PATH`` /
    ``FAMILY:PATH``, ``"REGEX=REPLACEMENT"``), or a table of ``form``'s fields and ``family``."""
    if isinstance(item, str):
        return _at(where, parse, item)
    fields, said = form
    if (
        isinstance(item, Mapping)
        and all(isinstance(item.get(f), str) for f in fields)
        and set(item) <= {*fields, "family"}
    ):
        return _at(where, parse, *(item[f] for f in fields), _family(item, key, where))
    raise RuleError(f"{where}: {key}: each entry is {said}")


def _family(item: Mapping[str, Any], key: str, where: str) -> str | None:
    """An entry's ``family``: a string, or absent."""
    fam = item.get("family")
    if fam is not None and not isinstance(fam, str):
        raise RuleError(f"{where}: {key}: family must be a string")
    return fam


def _list(table: Mapping[str, Any], key: str, where: str) -> list[Any]:
    v = table.get(key, [])
    if not isinstance(v, list):
        raise RuleError(f"{where}: {key} must be a list")
    if len(v) > MAX_RULES:
        raise RuleError(f"{where}: {key}: more than {MAX_RULES} entries")
    return v


def _at(where: str, make: Callable[..., _T], *args: Any) -> _T:
    try:
        return make(*args)
    except RuleError as exc:
        raise RuleError(f"{where}: {exc}") from None


def from_flags(
    ignore: Iterable[str] = (),
    substitute: Iterable[str] = (),
    volatile_tools: Iterable[str] = (),
    where: str = "the command line",
) -> Rules:
    """The rules given as flags (``--ignore PATH``, ``--substitute REGEX=REPLACEMENT``,
    ``--volatile-tool NAME``) or as pytest ini lines and marker arguments."""
    rules = Rules(
        [parse_ignore(s) for s in ignore],
        [parse_substitution(s) for s in substitute],
        [parse_volatile_tool(n) for n in volatile_tools],
    )
    if rules:
        rules.sources.append(where)
    return Rules().extend(rules)


def project_rules(
    cassette: str | Path | None,
    ignore: Iterable[str] = (),
    substitute: Iterable[str] = (),
    volatile_tools: Iterable[str] = (),
    where: str = "the command line",
) -> Rules:
    """The project's rules for ``cassette`` (its ``looptap.toml`` or ``pyproject.toml``
    ``[tool.looptap]``) with the given ones added; a rule scoped to an API family no adapter
    speaks is refused. Raises :class:`~cassettes.project.RuleError` (one line)."""
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
