"""``looptap rules learn``: the agent's rules (docs/rules.md) that hold in every passing trace,
proposed for a person to review, each with the traces that support it — specification mining, as
Daikon does for programs' invariants.

A trace is one conversation: its messages, the last answer's calls included. Each proposal is a
rule of the rules file's own kinds, tried by the same checker as ``E.rule_broken``
(:func:`~cassettes.analysis._rule_check.broken`) on every answer of every trace: one that any
answer breaks is not proposed. A rule that holds is proposed only where the traces give it a
chance to fail, so that it does not hold by accident:

- it governs tools called in at least ``min_support`` traces (its support);
- ``consent``: some call in the traces was made without a yes (the yes is not just always there);
- ``count``: only "at most one", keyed on an argument (``per``) only where some trace calls the tool
  for two values of it; the broadest scope and key that hold;
- ``forbidden … after``: only where at least two traces make both calls (on the same key), always
  in the other order; ``forbidden … pending``: only where at least two traces have answers of
  several calls, and the tools are never in them;
- ``provenance``: only an argument with two values or more, each found whole in an earlier result
  or user message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from ..models import Message
from ._rule_check import (
    History,
    _source_words,
    broken,
    each_call,
    found_in,
    histories,
    key_of,
)
from ._rules import Rule, _default_yes

__all__ = ["MIN_SUPPORT", "Proposal", "Trace", "learn"]

#: The least number of traces a proposal must be exercised in (``--min-support``).
MIN_SUPPORT = 5
#: The most distinct tools the search of "any of two" considers (pairs grow as its square).
MOST_TOOLS = 60


@dataclass(frozen=True)
class Trace:
    """One conversation of a passing run: ``ref`` names it (``run.jsonl c3``)."""

    ref: str
    messages: Sequence[Message]


@dataclass
class _Answer:
    trace: str
    h: History
    calls: list[tuple[str, Any]]


@dataclass
class Proposal:
    rule: Rule
    #: What holds, in words (the comment above the rule).
    said: str
    support: list[str] = field(default_factory=list)


def _answers(traces: Sequence[Trace]) -> list[_Answer]:
    return [_Answer(t.ref, h, calls) for t in traces for h, calls in histories(t.messages)]


def _each_call(
    answers: Iterable[_Answer],
) -> Iterable[tuple[_Answer, str, Any, History, list[str]]]:
    """Each call with the history as the checker sees it (:func:`each_call`)."""
    for a in answers:
        for i, h, others in each_call(a.h, a.calls):
            yield a, *a.calls[i], h, others


def _holds(rule: Rule, answers: Sequence[_Answer]) -> bool:
    return not any(broken(rule, n, x, h, others) for _, n, x, h, others in _each_call(answers))


def learn(traces: Sequence[Trace], min_support: int = MIN_SUPPORT) -> list[Proposal]:
    """The rules that hold in every trace and are exercised in ``min_support`` of them."""
    answers = _answers(traces)
    calls_of: dict[str, list[tuple[_Answer, Any, History]]] = defaultdict(list)
    for a, name, args, h, _ in _each_call(answers):
        calls_of[name].append((a, args, h))
    runs = {n: sorted({a.trace for a, _, _ in cs}) for n, cs in calls_of.items()}
    frequent = sorted(n for n, r in runs.items() if len(r) >= max(1, min_support))
    found: list[Proposal] = []
    orders = _orders(frequent, calls_of, answers)
    found += orders
    found += _consent(frequent, calls_of, answers)
    found += _counts(frequent, calls_of, answers)
    found += _after(frequent, calls_of, answers, orders)
    found += _alone(frequent, answers)
    found += _provenance(frequent, calls_of, answers)
    for p in found:
        governed = {*p.rule.then, *p.rule.tools, *p.rule.tool}
        p.support = sorted({r for n in governed for r in runs.get(n, [])}, key=_natural)
    return [p for p in found if len(p.support) >= min_support]


def _natural(ref: str) -> tuple[Any, ...]:
    head, _, conv = ref.rpartition(" c")
    return (head, int(conv)) if conv.isdigit() else (ref, 0)


def _keys(cs: Sequence[tuple[_Answer, Any, History]]) -> list[str]:
    """The arguments every call of a tool has (a scalar value): what ``per`` may name; those
    more tools of the history take first (an entity's key, ``order_id``, before ``item_ids``)."""
    shared: set[str] | None = None
    takers: dict[str, set[str]] = defaultdict(set)
    last: dict[str, History] = {}  # each trace's latest history before a call of the tool
    for a, args, h in cs:
        have = {k for k in args if key_of(args, k) is not None} if isinstance(args, dict) else set()
        shared = have if shared is None else shared & have
        last[a.trace] = h
    for h in last.values():
        for d in h.calls:
            for k in d.keys:
                takers[k].add(d.name)
    return sorted(shared or (), key=lambda k: (-len(takers[k]), k))


def _before(h: History, per: str, args: Any) -> set[str]:
    key = key_of(args, per) if per else None
    return {d.name for d in h.calls if not d.failed and (not per or d.keys.get(per) == key)}


def _orders(
    frequent: list[str], calls_of: dict[str, list[tuple[_Answer, Any, History]]], answers: Any
) -> list[Proposal]:
    """``first`` (one tool, or any of two never both made) before ``then``, keyed where it can."""
    groups: dict[tuple[tuple[str, ...], str], list[str]] = defaultdict(list)
    for b in frequent:
        cs = calls_of[b]
        befores = [_before(h, "", args) - {b} for _, args, h in cs]
        always = set.intersection(*befores) if befores else set()
        keyed = {k: [_before(h, k, args) - {b} for _, args, h in cs] for k in _keys(cs)}
        for f in sorted(always):
            per = next((k for k, bs in keyed.items() if all(f in s for s in bs)), "")
            groups[((f,), per)].append(b)
        seen = sorted(set().union(*befores) - always)[:MOST_TOOLS] if befores else []
        for f1, f2 in combinations(seen, 2):
            hit = [(f1 in s, f2 in s) for s in befores]
            each = [
                {a.trace for (a, _, _), (x, _) in zip(cs, hit, strict=True) if x == side}
                for side in (True, False)
            ]
            # each call after exactly one of them, and each of them in two traces or more
            if all(x != y for x, y in hit) and min(len(e) for e in each) >= 2:
                groups[((f1, f2), "")].append(b)
    out = []
    for (first, per), then in groups.items():
        rule = Rule("", "order", scope="conversation", first=first, then=tuple(then), per=per)
        if _holds(rule, answers):
            name = f"{' or '.join(first)} before {', '.join(then)}"
            said = (
                f"a call of {' or '.join(first)} that did not fail came before every call of "
                f"{', '.join(then)}" + (f" with the same {per}" if per else "")
            )
            out.append(Proposal(replace(rule, name=name + (f" (same {per})" if per else "")), said))
    return out


def _consent(
    frequent: list[str], calls_of: dict[str, list[tuple[_Answer, Any, History]]], answers: Any
) -> list[Proposal]:
    yes = _default_yes()
    said = [(n, yes.search(h.said.strip())) for n, cs in calls_of.items() for _, _, h in cs]
    if all(ok for _, ok in said):
        return []  # every call followed a yes: the yes tells nothing apart
    tools = tuple(n for n in frequent if all(ok for m, ok in said if m == n))
    if not tools:
        return []
    rule = Rule(f"yes before {', '.join(tools)}", "consent", tools=tools, yes=yes)
    return (
        [
            Proposal(
                rule,
                f"the user's latest message said yes before every call of {', '.join(tools)}"
                ", and not before some other calls",
            )
        ]
        if _holds(rule, answers)
        else []
    )


def _counts(
    frequent: list[str], calls_of: dict[str, list[tuple[_Answer, Any, History]]], answers: Any
) -> list[Proposal]:
    """At most one call of a tool: in a conversation, per key, in a task, per key in a task."""
    out = []
    for b in frequent:
        cs = calls_of[b]
        keys = _keys(cs)
        for scope in ("conversation", "task"):
            tried = [("", True)] + [(k, _two_values(cs, k, scope)) for k in keys]
            for per, contrast in tried:
                rule = Rule("", "count", scope=scope, tool=(b,), max=1, per=per)
                if contrast and _holds(rule, answers):
                    name = f"at most one {b}" + (f" per {per}" if per else "") + f" in a {scope}"
                    out.append(
                        Proposal(
                            replace(rule, name=name),
                            f"no {scope} called {b} twice"
                            + (f" for the same {per}" if per else "")
                            + " without the first call failing",
                        )
                    )
                    break
            else:
                continue
            break
    return out


def _two_values(cs: Sequence[tuple[_Answer, Any, History]], per: str, scope: str) -> bool:
    """Whether some trace calls the tool for two values of ``per`` (in one task, for ``task``)."""
    seen: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    for a, args, h in cs:
        where = (a.trace, h.said if scope == "task" else "")
        seen[where].add(key_of(args, per))
        if len(seen[where]) > 1:
            return True
    return False


def _after(
    frequent: list[str],
    calls_of: dict[str, list[tuple[_Answer, Any, History]]],
    answers: Any,
    orders: list[Proposal],
) -> list[Proposal]:
    """No ``b`` after ``a`` on the same key, where some trace called ``b`` after ``a`` for
    another value of it (so it can follow ``a``), and two traces or more made both on one value,
    ``b`` first. (Unkeyed, "never after" holds by accident of every tool called first.)"""
    implied = {(f, t) for p in orders for f in p.rule.first for t in p.rule.then}
    out = []
    for a_, b in ((x, y) for x in frequent for y in frequent if x != y):
        if (b, a_) in implied:
            continue
        for per in _keys(calls_of[a_]):
            both = {ans.trace for ans, args, h in calls_of[a_] if b in _before(h, per, args)}
            later = [
                ans.trace
                for ans, args, h in calls_of[b]
                if any(d.name == a_ and not d.failed for d in h.calls)
            ]
            rule = Rule("", "forbidden", scope="conversation", tool=(b,), after=(a_,), per=per)
            if len(both) >= 2 and later and _holds(rule, answers):
                out.append(Proposal(
                    replace(rule, name=f"no {b} after {a_} (same {per})"),
                    f"{b} was never called after {a_} for the same {per}, though it was for "
                    f"another ({len(later)} traces), and {len(both)} traces called both on one "
                    f"{per}, {b} first",
                ))  # fmt: skip
                break
    return out


def _alone(frequent: list[str], answers: Sequence[_Answer]) -> list[Proposal]:
    """Tools never called with other calls pending, where the agent does call several at once."""
    several = {a.trace for a in answers if len(a.calls) > 1}
    if len(several) < 2:
        return []
    rule = Rule("", "forbidden", tool=tuple(frequent), pending=True)
    tools = tuple(n for n in frequent if _holds(replace(rule, tool=(n,)), answers))
    if not tools:
        return []
    return [
        Proposal(
            replace(rule, name=f"{', '.join(tools)} alone", tool=tools),
            f"{', '.join(tools)} never shared an answer or waited on other calls, though "
            f"{len(several)} traces made several calls at once",
        )
    ]


def _provenance(
    frequent: list[str], calls_of: dict[str, list[tuple[_Answer, Any, History]]], answers: Any
) -> list[Proposal]:
    out = []
    for b in frequent:
        cs = calls_of[b]
        for arg in sorted({k for _, args, _ in cs if isinstance(args, dict) for k in args}):
            values = [
                _strings(args.get(arg)) if isinstance(args, dict) else None for _, args, _ in cs
            ]
            if any(v is None for v in values) or len({tuple(v or ()) for v in values}) < 2:
                continue
            each = []
            for v, (_, _, h) in zip(values, cs, strict=True):
                have = {s for s, _, _ in h.texts}
                each.append({s for s in have if all(_in_source(x, s, h) for x in v or ())})
            sources = set.intersection(*each) or _either(each)
            if not sources:
                continue
            rule = Rule(
                f"{b} {arg} from {' or '.join(sorted(sources))}",
                "provenance",
                scope="conversation",
                tool=(b,),
                argument=arg,
                sources=tuple(sorted(sources)),
            )
            if _holds(rule, answers):
                out.append(
                    Proposal(
                        rule,
                        f"every {arg} of {b} was found whole in an earlier "
                        + " or ".join(_source_words(sorted(sources))),
                    )
                )
    return out


def _either(each: list[set[str]]) -> set[str]:
    """Two sources, each needed, one of which every call's value came from (empty: none)."""
    seen = sorted(set().union(*each))[:MOST_TOOLS]
    for s1, s2 in combinations(seen, 2):
        hit = [(s1 in e, s2 in e) for e in each]
        if (
            all(x or y for x, y in hit)
            and not all(x for x, _ in hit)
            and not all(y for _, y in hit)
        ):
            return {s1, s2}
    return set()


def _strings(v: Any) -> list[str] | None:
    """An argument's values a provenance rule can look for: strings of 3 characters or more."""
    items = v if isinstance(v, list) else [v]
    out = [str(x).strip() for x in items if isinstance(x, str | int) and not isinstance(x, bool)]
    if not items or len(out) != len(items) or any(len(x) < 3 or len(x) > 200 for x in out):
        return None
    return out


def _in_source(value: str, source: str, h: History) -> bool:
    return any(s == source and found_in(value, t) for s, t, _ in h.texts)
