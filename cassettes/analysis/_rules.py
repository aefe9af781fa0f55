"""An agent's own rules, declared in a small TOML file and checked on every turn (docs/rules.md).

The file is ``$LOOPTAP_RULES`` when that is set (empty: no rules), else ``looptap-rules.toml`` in
the working directory, named on stderr in one line when it is picked up so (a checkout's file is
not the user's). Each ``[[rule]]`` has a ``name``, a ``kind`` and the fields of its kind; a field
that names tools takes one name or a list of them (any of them):

==============  ==============================================================================
``order``       one of ``first`` must have been called, and not failed, before any of ``then``
                ("authenticate the user, by email or by name and zip, before any account tool")
``consent``     a call of one of ``tools`` needs the user's latest message to say yes (``yes``:
                a pattern, RE2, by default yes / confirm / go ahead …)
``count``       at most ``max`` calls of ``tool`` that did not fail
``forbidden``   never ``tool`` with calls pending (``pending = true``: other calls in the same
                answer, or calls of the history left without a result), nor after a call of any
                of ``after`` that did not fail
``provenance``  the value of ``argument`` in a call of ``tool`` must appear earlier in a result of
                one of ``from`` (tool names; ``"user"``: the user's messages): never invented
==============  ==============================================================================

``scope``: how far back a rule looks, ``task`` (since the user's latest message) or
``conversation``; by default ``conversation`` for order and provenance, ``task`` for count and
forbidden. ``per``: an argument the calls are keyed on (order, count, forbidden): only calls with
the same value of it count ("at most one item change per order_id"). ``severity``: ``info``,
``warning`` (the default: ``E.rule_broken``'s row) or ``error``. A file that cannot be read, or a
rule that is wrong, raises :class:`RulesError` in one line naming the file, the line and what is
wrong. A broken rule is the finding ``E.rule_broken`` of the check
:func:`~cassettes.analysis._rule_check.check_rules`, one of the analysis' checks.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..bounds import parse_toml
from ..errors import CassetteError, CassetteIOError
from ..hints import count
from ..patterns import PatternError, UserPattern
from ..storage import read_config
from ..untrusted import clean_line
from ._model import Severity
from .codes import ROWS, RULE_BROKEN

__all__ = [
    "FILE",
    "KINDS",
    "SCOPES",
    "Rule",
    "Rules",
    "RulesError",
    "active",
    "active_text",
    "load",
    "parse_rules",
    "using",
]

FILE = "looptap-rules.toml"


class Kind(NamedTuple):
    """A kind of rule, one row each in :data:`KINDS`."""

    #: The fields it must have, and the type each needs (``tuple``: tool names).
    need: dict[str, type]
    #: Its optional fields (besides ``name``, ``severity``, ``scope``).
    optional: frozenset[str] = frozenset()
    #: How far back it looks unless its ``scope`` says.
    scope: str = "task"


KINDS: dict[str, Kind] = {
    "order": Kind({"first": tuple, "then": tuple}, frozenset({"per"}), "conversation"),
    "consent": Kind({"tools": tuple}, frozenset({"yes"})),
    "count": Kind({"tool": tuple, "max": int}, frozenset({"per"})),
    "forbidden": Kind({"tool": tuple}, frozenset({"pending", "after", "per"})),
    "provenance": Kind({"tool": tuple, "argument": str, "from": tuple}, scope="conversation"),
}
SCOPES = ("task", "conversation")
YES = r"^\W*(?:yes|yep|yeah|y|sure|ok(?:ay)?|confirm(?:ed)?|go ahead|please do|do it)\b"
_WHAT = {
    tuple: "a tool name or a list of tool names",
    str: "a non-empty string",
    int: "a positive integer",
}


class RulesError(CassetteError, ValueError):
    """A rules file that cannot be read, or a rule in it that is wrong (one line)."""


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str
    severity: Severity = Severity.WARNING
    #: ``task`` or ``conversation`` (see the module's docstring).
    scope: str = "task"
    first: tuple[str, ...] = ()
    then: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    tool: tuple[str, ...] = ()
    max: int = 0
    #: What counts as yes, compiled by RE2 (case-insensitive) like every user pattern.
    yes: UserPattern | None = None
    pending: bool = False
    after: tuple[str, ...] = ()
    #: The argument calls are keyed on ("" for none).
    per: str = ""
    argument: str = ""
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rules:
    path: str
    rules: tuple[Rule, ...]
    #: The file's text, part of what decides an analysis (the kept analysis is keyed by it).
    text: str = ""


def load(path: str | Path) -> Rules:
    """The rules of the file at ``path``; :class:`RulesError` in one line when it is wrong."""
    p = Path(path)
    try:  # bounded: at most MAX_CONFIG bytes, a regular file (never a FIFO), refused at once
        text = read_config(p, "the rules file")
    except CassetteIOError as exc:
        raise RulesError(str(exc)) from None
    return parse_rules(text, str(p))


def parse_rules(text: str, where: str) -> Rules:
    """The rules of ``text`` (the file ``where``); :class:`RulesError` in one line when wrong."""
    try:
        data = parse_toml(text)  # nested at most TOML_DEPTH levels
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise RulesError(f"{where}:{line.group(1) if line else 1}: not TOML: {exc}") from None
    starts = [i for i, s in enumerate(text.splitlines(), 1) if s.strip() == "[[rule]]"]
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise RulesError(f"{where}:1: unknown table {extra[0]!r}: a rules file holds [[rule]] only")
    raw = data.get("rule", [])
    if not isinstance(raw, list):
        raise RulesError(f"{where}:1: rules are [[rule]] tables, not one {type(raw).__name__}")
    rules = tuple(
        _rule(r, f"{where}:{starts[i] if i < len(starts) else 1}: rule {i + 1}")
        for i, r in enumerate(raw)
    )
    return Rules(where, rules, text)


def _names(v: Any) -> tuple[str, ...] | None:
    """One tool name or a list of them, as a tuple (``None``: neither, or empty)."""
    names = [v] if isinstance(v, str) else v
    if not isinstance(names, list) or not names:
        return None
    if not all(isinstance(x, str) and x for x in names):
        return None
    return tuple(names)


def _rule(r: Any, where: str) -> Rule:
    if not isinstance(r, dict):
        raise RulesError(f"{where}: a rule is a [[rule]] table, not {type(r).__name__}")
    kind = r.get("kind")
    if kind not in KINDS:
        raise RulesError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    need = KINDS[str(kind)].need
    allowed = {"name", "kind", "severity", "scope"} | KINDS[kind].optional | set(need)
    unknown = sorted(set(r) - allowed)
    if unknown:
        raise RulesError(f"{where}: {kind} rule has no field {unknown[0]!r}")
    got: dict[str, Any] = {}
    for k, typ in {**need, "after": tuple}.items():
        v = r.get(k)
        if v is None and k not in need:
            continue
        value = _names(v) if typ is tuple else v
        ok = value is not None and isinstance(value, typ) and not isinstance(value, bool)
        if not ok or not value or (isinstance(value, int) and value < 1):
            raise RulesError(f"{where}: {kind} rule needs {k} = {_WHAT[typ]}")
        got[k] = value
    for k in ("per", "name"):
        if k in r and (not isinstance(r[k], str) or not r[k].strip()):
            raise RulesError(f"{where}: {k} must be {_WHAT[str]}, not {r[k]!r}")
    scope = r.get("scope", KINDS[kind].scope)
    if scope not in SCOPES:
        raise RulesError(f"{where}: scope must be task or conversation, not {scope!r}")
    if "pending" in r and not isinstance(r["pending"], bool):
        raise RulesError(f"{where}: pending must be true or false, not {r['pending']!r}")
    try:
        severity = Severity(r.get("severity", ROWS[RULE_BROKEN].severity))
    except ValueError as exc:
        raise RulesError(f"{where}: {exc}") from None
    yes = _yes_of(r["yes"], where) if "yes" in r else None
    return Rule(
        name=str(r.get("name") or f"{kind} rule"),
        kind=kind,
        severity=severity,
        scope=scope,
        yes=yes if yes is not None else (_default_yes() if kind == "consent" else None),
        pending=r.get("pending") is True,
        per=r.get("per", ""),
        **{"sources" if k == "from" else k: v for k, v in got.items()},
    )


def _yes_of(pattern: Any, where: str) -> UserPattern:
    """A rule's ``yes``, compiled by RE2 and matched case-insensitively; refused in one line."""
    if not isinstance(pattern, str) or not pattern:
        raise RulesError(f"{where}: yes must be a pattern (a non-empty string), not {pattern!r}")
    try:
        UserPattern(pattern)  # (refused as the user wrote it)
    except PatternError as exc:
        raise RulesError(f"{where}: yes = {pattern!r}: {exc}") from None
    return UserPattern("(?i)" + pattern)


@functools.cache
def _default_yes() -> UserPattern:
    return UserPattern("(?i)" + YES)


_loaded: dict[tuple[str, int, int], Rules] = {}
_forced: list[Rules | None] = []


@contextmanager
def using(rules: Rules | None) -> Iterator[None]:
    """Within the block, ``rules`` are in force whatever the environment and the working
    directory say (``looptap rules check``: a dry run of a file that is not in force)."""
    _forced.append(rules)
    try:
        yield
    finally:
        _forced.pop()


def active() -> Rules | None:
    """The rules in force: ``$LOOPTAP_RULES``, else ``looptap-rules.toml`` in the working
    directory (named on stderr in one line, once), else none. Read again when the file changed."""
    if _forced:
        return _forced[-1]
    named = os.environ.get("LOOPTAP_RULES")
    if named is not None and not named.strip():
        return None
    p = Path(named) if named else Path(FILE)
    try:
        st = p.stat()
    except OSError:
        if named:
            raise RulesError(f"{p}: LOOPTAP_RULES names no readable file") from None
        return None
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _loaded:
        _loaded[key] = load(p)
        if not named and _main_process():
            # picked up, not asked for: say so, and how to turn it off (once: not by the workers
            # of a `looptap index --jobs N`, whose parent said it)
            print(
                f"looptap: the agent's rules of {clean_line(key[0])} are in force "
                f"({count(len(_loaded[key].rules), 'rule')}; LOOPTAP_RULES= for none)",
                file=sys.stderr,
            )
    return _loaded[key]


def _main_process() -> bool:
    import multiprocessing  # (here: a command that picks no file up does not load it)

    return multiprocessing.parent_process() is None


def active_text() -> str:
    """The text of the rules in force ("" for none): part of what decides a run's findings, so
    of what a kept analysis and a fleet index were made with."""
    rules = active()
    return rules.text if rules is not None else ""
