"""An agent's own rules, declared in a small TOML file and checked on every turn (docs/rules.md).

The file is ``$LOOPTAP_RULES`` when that is set (empty: no rules), else ``looptap-rules.toml`` in
the working directory. Each ``[[rule]]`` has a ``name``, a ``kind`` and the fields of its kind:

=============  ===============================================================================
``order``      ``first`` (a tool) must have been called in the conversation before any of
               ``then`` (tools): "authenticate the user before any account tool"
``consent``    a call of one of ``tools`` needs the user's latest message to say yes (``yes``: a
               regular expression, by default yes / confirm / go ahead …)
``count``      at most ``max`` calls of ``tool`` per task (since the user's latest message)
``forbidden``  never ``tool`` with calls pending (``pending = true``: other calls in the same
               answer, or calls of the history left without a result), nor after any of
               ``after`` (tools) in the same task
=============  ===============================================================================

and optionally ``severity`` (``info``, ``warning``: the default, ``error``). A broken rule is the
finding ``E.rule_broken`` on the turn whose answer made the call (the model's emission), with the
rule's name in ``details.rule``. A file that cannot be read, or a rule that is wrong, raises
:class:`RulesError` in one line naming the file, the line and what is wrong.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cassettes.analysis._context import TurnContext
from cassettes.analysis._model import Finding, Severity
from cassettes.errors import CassetteError
from cassettes.hints import count
from cassettes.models import Message

__all__ = ["FILE", "Rules", "RulesError", "active", "active_text", "check_rules", "load"]

FILE = "looptap-rules.toml"
KINDS: dict[str, dict[str, type]] = {
    "order": {"first": str, "then": list},
    "consent": {"tools": list},
    "count": {"tool": str, "max": int},
    "forbidden": {"tool": str},
}
OPTIONAL = {"name", "kind", "severity", "yes", "pending", "after"}
YES = r"^\W*(?:yes|yep|yeah|y|sure|ok(?:ay)?|confirm(?:ed)?|go ahead|please do|do it)\b"


class RulesError(CassetteError, ValueError):
    """A rules file that cannot be read, or a rule in it that is wrong (one line)."""


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str
    severity: Severity = Severity.WARNING
    first: str = ""
    then: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    tool: str = ""
    max: int = 0
    yes: re.Pattern[str] = field(default_factory=lambda: re.compile(YES, re.IGNORECASE))
    pending: bool = False
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rules:
    path: str
    rules: tuple[Rule, ...]
    #: The file's text, part of what decides an analysis (the kept analysis is keyed by it).
    text: str = ""


def load(path: str | Path) -> Rules:
    """The rules of the file at ``path``; :class:`RulesError` in one line when it is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(f"{p}: cannot read the rules file: {exc.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise RulesError(f"{p}:{line.group(1) if line else 1}: not TOML: {exc}") from None
    starts = [i for i, s in enumerate(text.splitlines(), 1) if s.strip() == "[[rule]]"]
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise RulesError(f"{p}:1: unknown table {extra[0]!r}: a rules file holds [[rule]] only")
    raw = data.get("rule", [])
    if not isinstance(raw, list):
        raise RulesError(f"{p}:1: rules are [[rule]] tables, not one {type(raw).__name__}")
    rules = tuple(
        _rule(r, f"{p}:{starts[i] if i < len(starts) else 1}: rule {i + 1}")
        for i, r in enumerate(raw)
    )
    return Rules(str(p), rules, text)


def _rule(r: Any, where: str) -> Rule:
    if not isinstance(r, dict):
        raise RulesError(f"{where}: a rule is a [[rule]] table, not {type(r).__name__}")
    kind = r.get("kind")
    if kind not in KINDS:
        raise RulesError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    need = KINDS[str(kind)]
    unknown = sorted(set(r) - OPTIONAL - set(need))
    if unknown:
        raise RulesError(f"{where}: {kind} rule has no field {unknown[0]!r}")
    for k, typ in need.items():
        v = r.get(k)
        ok = isinstance(v, typ) and not isinstance(v, bool) and bool(v)
        if isinstance(v, list):
            ok = ok and all(isinstance(x, str) and x for x in v)
        if not ok or (isinstance(v, int) and v < 0):
            what = {str: "a tool name", list: "a list of tool names", int: "a positive integer"}
            raise RulesError(f"{where}: {kind} rule needs {k} = {what[typ]}")
    try:
        severity = Severity(r.get("severity", "warning"))
        yes = re.compile(r.get("yes", YES), re.IGNORECASE)
    except (ValueError, re.error, TypeError) as exc:
        raise RulesError(f"{where}: {exc}") from None
    return Rule(
        name=str(r.get("name") or f"{kind} rule"),
        kind=kind,
        severity=severity,
        first=r.get("first", ""),
        then=tuple(r.get("then", ())),
        tools=tuple(r.get("tools", ())),
        tool=r.get("tool", ""),
        max=r.get("max", 0),
        yes=yes,
        pending=r.get("pending") is True,
        after=tuple(r.get("after", ())),
    )


_loaded: dict[tuple[str, int, int], Rules] = {}


def active() -> Rules | None:
    """The rules in force: ``$LOOPTAP_RULES``, else ``looptap-rules.toml`` in the working
    directory, else none. Read again when the file changed."""
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
    return _loaded[key]


def active_text() -> str:
    """The text of the rules in force ("" for none): part of what decides a run's findings, so
    of what a kept analysis and a fleet index were made with."""
    rules = active()
    return rules.text if rules is not None else ""


def _user_text(m: Message) -> str | None:
    if m.role != "user" or any(p.kind == "tool_result" for p in m.parts):
        return None
    return m.text


def _history(messages: list[Message]) -> tuple[set[str], list[str], str, set[str | None]]:
    """What the request's history shows: the tools called in it, those called since the user's
    latest message (the task), that message, and the ids of calls with a result."""
    called: set[str] = set()
    task: list[str] = []
    said = ""
    answered: set[str | None] = set()
    for m in messages:
        text = _user_text(m)
        if text is not None and text.strip():
            task, said = [], text
        for p in m.parts:
            if p.tool_call is not None and p.tool_call.name:
                called.add(p.tool_call.name)
                task.append(p.tool_call.name)
            if p.tool_result is not None:
                answered.add(p.tool_result.call_id)
    return called, task, said, answered


def check_rules(ctx: TurnContext, rules: Rules) -> Iterator[Finding]:
    """E.rule_broken — a call of this turn's answer breaks one of ``rules``."""
    calls = [c for c in ctx.turn.e.tool_calls if c.name and c.kind in ("function", "custom")]
    if not calls or not rules.rules:
        return
    called, task, said, answered = _history(ctx.messages)
    pending_ids = [
        p.tool_call.id
        for m in ctx.messages
        for p in m.parts
        if p.tool_call is not None and p.tool_call.id and p.tool_call.id not in answered
    ]
    for c in calls:
        name = c.name or ""
        others = [x.name for x in calls if x is not c]
        for rule in rules.rules:
            broken = _broken(rule, name, called, task, said, others, pending_ids)
            if broken:
                yield ctx.finding(
                    "E.rule_broken",
                    rule.severity,
                    f"The model called {name}, which breaks the rule {rule.name!r} "
                    f"({rules.path}): {broken}.",
                    tool_call_id=c.id,
                    rule=rule.name,
                    kind=rule.kind,
                    tool=name,
                )
        called.add(name)
        task.append(name)


def _broken(
    rule: Rule,
    name: str,
    called: set[str],
    task: list[str],
    said: str,
    others: list[str | None],
    pending: list[str],
) -> str:
    """Why calling ``name`` now breaks ``rule`` (``""``: it does not)."""
    if rule.kind == "order" and name in rule.then and rule.first not in called:
        return f"{rule.first} was not called before it"
    if rule.kind == "consent" and name in rule.tools and not rule.yes.search(said.strip()):
        quoted = " ".join(said.split())[:80]
        return f"the user's latest message does not say yes ({quoted!r})"
    if rule.kind == "count" and name == rule.tool and task.count(name) == rule.max:
        return f"it is call {rule.max + 1} of {name} in this task (at most {rule.max})"
    if rule.kind == "forbidden" and name == rule.tool:
        if rule.pending and (others or pending):
            left = ", ".join(str(o) for o in others) or count(len(pending), "call") + " unanswered"
            return f"calls are pending ({left})"
        before = [a for a in rule.after if a in task]
        if before:
            return f"it follows {before[0]} in this task"
    return ""
