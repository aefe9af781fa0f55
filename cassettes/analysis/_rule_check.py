"""The agent's rules (:mod:`~cassettes.analysis._rules`) checked on the calls of one answer, given
the history the request carried: each rule in force is a check of the analysis beside the
built-in ones (:func:`checks_of`), run, reported and folded as theirs are, its finding
``E.rule_broken`` graded by the rule's ``severity``; and what ``looptap rules learn`` tries each
proposal on (:func:`broken`)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..hints import count
from ..models import Message
from . import codes as codes
from ._context import CLIENT_KINDS, Check, TurnContext
from ._model import CallCheck, Finding, Turn
from ._rules import Rule, Rules
from .dispatch import is_error_result

__all__ = [
    "Done",
    "History",
    "broken",
    "checks_of",
    "each_call",
    "found_in",
    "histories",
    "key_of",
    "made",
]

#: The longest value a per-argument key or a provenance check reads (longer: not judged).
LONGEST_VALUE = 1000
#: How many conversations' latest histories the check keeps, to grow by the next turn's messages
#: (another conversation's next turn reads its history whole).
LIVE = 64


@dataclass(frozen=True)
class Done:
    """A call of the history: its name, its arguments (and each scalar one as a key, for
    ``per``), whether its result was an error, and whether it was made in the task (since the
    user's latest message). Never changed: a history's snapshot keeps what it saw."""

    name: str
    arguments: Any
    failed: bool = False
    task: bool = True
    keys: dict[str, str] = field(default_factory=dict, compare=False)


def made(name: str, arguments: Any) -> Done:
    """A call just made (its result not known yet)."""
    keys = {}
    for k in arguments if isinstance(arguments, dict) else ():
        key = key_of(arguments, k)
        if key is not None:
            keys[k] = key
    return Done(name, arguments, keys=keys)


@dataclass
class History:
    """What a request's history shows the rules: its calls in order, the user's latest message,
    the calls left without a result, and the texts a value may come from (``user`` for the
    user's messages, the tool's name for a result that is not an error). Grown one message at a
    time (:meth:`add`)."""

    calls: list[Done] = field(default_factory=list)
    said: str = ""
    texts: list[tuple[str, str, bool]] = field(default_factory=list)  # (source, text, in task)
    #: Each call's place in ``calls`` by its id, and the ids still without a result.
    at: dict[str, int] = field(default_factory=dict)
    unanswered: set[str] = field(default_factory=set)

    @property
    def pending(self) -> int:
        return len(self.unanswered)

    def add(self, m: Message) -> None:
        """The history with ``m`` after it."""
        text = _user_text(m)
        if text is not None and text.strip():
            self.calls = [replace(d, task=False) if d.task else d for d in self.calls]
            self.texts = [(s, t, False) for s, t, _ in self.texts]
            self.said = text
            self.texts.append(("user", text, True))
        for p in m.parts:
            c = p.tool_call
            if c is not None and c.name:
                self.calls.append(made(c.name, c.arguments))
                if c.id:
                    self.at[c.id] = len(self.calls) - 1
                    self.unanswered.add(c.id)
            r = p.tool_result
            if r is not None:
                self.unanswered.discard(r.call_id or "")
                j = self.at.get(r.call_id or "")
                if j is not None and is_error_result(r, r.content):
                    self.calls[j] = replace(self.calls[j], failed=True)
                elif j is not None:
                    self.texts.append((self.calls[j].name, r.content, True))

    def copy(self) -> History:
        return History(
            list(self.calls), self.said, list(self.texts), dict(self.at), set(self.unanswered)
        )


def _user_text(m: Message) -> str | None:
    if m.role != "user" or any(p.kind == "tool_result" for p in m.parts):
        return None
    return m.text


def histories(messages: Sequence[Message]) -> Iterator[tuple[History, list[tuple[str, Any]]]]:
    """Walking ``messages`` once: each answer's calls of the client's tools (``(name,
    arguments)``), with the history before it."""
    h = History()
    for m in messages:
        calls = [(c.name, c.arguments) for c in (p.tool_call for p in m.parts)
                 if c is not None and c.name and c.kind in CLIENT_KINDS]  # fmt: skip
        if m.role == "assistant" and calls:
            yield h.copy(), calls
        h.add(m)


def key_of(arguments: Any, per: str) -> str | None:
    """The value of argument ``per`` as a key (``None``: the call has none)."""
    if not isinstance(arguments, dict) or per not in arguments or arguments[per] is None:
        return None
    v = arguments[per]
    key = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return key[:LONGEST_VALUE] if key != "" else None


def found_in(value: str, text: str) -> bool:
    """Whether ``value`` is in ``text`` as a whole (not inside a longer word or number)."""
    at = text.find(value)
    while at >= 0:
        before = text[at - 1] if at > 0 else " "
        end = at + len(value)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or after.isalnum()):
            return True
        at = text.find(value, at + 1)
    return False


def _values(v: Any) -> list[str] | None:
    """The values of an argument a provenance rule looks for (a string, a number, or a list of
    them); ``None`` when it is none of these."""
    items = v if isinstance(v, list) else [v]
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, str | int | float):
            return None
        s = str(x).strip()
        if not s or len(s) > LONGEST_VALUE:
            return None
        out.append(s)
    return out


def broken(rule: Rule, name: str, arguments: Any, h: History, others: Sequence[str]) -> str:
    """Why calling ``name`` with ``arguments`` now breaks ``rule`` (``""``: it does not), the
    answer making the ``others`` calls too, after history ``h``: its kind's judge (:data:`JUDGES`)
    says."""
    key = key_of(arguments, rule.per) if rule.per else None
    if rule.per and key is None:
        return ""  # (keyed on an argument the call has not: not judged by the rule)
    matter = {"order": rule.first, "count": rule.tool, "forbidden": rule.after}.get(rule.kind, ())
    done = [
        d
        for d in h.calls
        if d.name in matter
        and not d.failed
        and (d.task or rule.scope == "conversation")
        and (not rule.per or d.keys.get(rule.per) == key)
    ]
    where = "this task" if rule.scope == "task" else "this conversation"
    said_key = f" for {rule.per} {key!r}" if rule.per else ""
    return JUDGES[rule.kind](_Call(rule, name, arguments, h, others, done, where, said_key))


@dataclass(frozen=True)
class _Call:
    """A call a rule judges: what every kind's judge reads."""

    rule: Rule
    name: str
    arguments: Any
    h: History
    others: Sequence[str]
    #: The calls of the history that count for the rule (of its tools, that did not fail, in its
    #: scope, with the same key).
    done: list[Done]
    #: Where it looks, in words (``this task``), and on which key (`` for order_id '7'``).
    where: str
    key: str


def _order(c: _Call) -> str:
    r = c.rule
    if c.name in r.then and not any(d.name in r.first for d in c.done):
        return f"{' or '.join(r.first)} was not called (or failed) before it in {c.where}{c.key}"
    return ""


def _consent(c: _Call) -> str:
    r = c.rule
    if c.name in r.tools and r.yes is not None and not r.yes.search(c.h.said.strip()):
        quoted = " ".join(c.h.said.split())[:80]
        return f"the user's latest message does not say yes ({quoted!r})"
    return ""


def _count(c: _Call) -> str:
    r = c.rule
    n = sum(1 for d in c.done if d.name in r.tool)
    if c.name in r.tool and n == r.max:
        return (
            f"it is call {n + 1} of {' or '.join(r.tool)} in {c.where}{c.key} "
            f"(at most {r.max}; failed calls not counted)"
        )
    return ""


def _forbidden(c: _Call) -> str:
    r = c.rule
    if c.name not in r.tool:
        return ""
    if r.pending and (c.others or c.h.pending):
        left = ", ".join(c.others) or count(c.h.pending, "call") + " unanswered"
        return f"calls are pending ({left})"
    before = [d.name for d in c.done if d.name in r.after]
    return f"it follows {before[-1]} in {c.where}{c.key}" if before else ""


def _provenance(c: _Call) -> str:
    r = c.rule
    if c.name not in r.tool or not isinstance(c.arguments, dict):
        return ""
    values = _values(c.arguments.get(r.argument))
    texts = [t for s, t, task in c.h.texts if s in r.sources and (task or r.scope != "task")]
    for v in values or ():
        if not any(found_in(v, t) for t in texts):
            return (
                f"its {r.argument} {v[:80]!r} appears in no earlier "
                f"{' or '.join(_source_words(r.sources))} in {c.where}"
            )
    return ""


#: Each kind of rule (:data:`~cassettes.analysis._rules.KINDS`), how a call breaks it: why, or "".
JUDGES: dict[str, Callable[[_Call], str]] = {
    "order": _order,
    "consent": _consent,
    "count": _count,
    "forbidden": _forbidden,
    "provenance": _provenance,
}


def _source_words(sources: Sequence[str]) -> list[str]:
    return ["user message" if s == "user" else f"{s} result" for s in sources]


def each_call(
    h: History, calls: Sequence[tuple[str, Any]]
) -> Iterator[tuple[int, History, list[str]]]:
    """Each call of one answer (``(name, arguments)``, after history ``h``): its index, the
    history a rule judges it by (the answer's earlier calls made: their results are not known
    yet), and the names of the answer's other calls."""
    for i in range(len(calls)):
        now = [made(n, x) for n, x in calls[:i]]
        others = [n for j, (n, _) in enumerate(calls) if j != i]
        yield i, replace(h, calls=[*h.calls, *now]), others


class _Turns:
    """The calls of the turn being judged, each with its history, made once for all the rules.
    The history is the one the C layer read (:class:`~cassettes.analysis._model.Dispatch`): that
    of the conversation's previous turn, kept (for the :data:`LIVE` latest conversations), with
    the messages this request appended (after the previous answer, where the API keeps the
    history: ``previous_response_id``); read whole where the request did not keep the previous
    one's history as it was (a history rewritten, trimmed or sent elsewhere)."""

    def __init__(self) -> None:
        self.turn: Turn | None = None
        self.calls: list[tuple[CallCheck, History, list[str]]] = []
        self.latest: OrderedDict[str, tuple[int, History]] = OrderedDict()

    def of(self, ctx: TurnContext) -> list[tuple[CallCheck, History, list[str]]]:
        if self.turn is not ctx.turn:
            calls = [c for c in ctx.turn.e.tool_calls if c.name and c.kind in CLIENT_KINDS]
            named = [(c.name or "", c.arguments) for c in calls]
            h = self._history(ctx)
            self.turn = ctx.turn
            self.calls = [(calls[i], hi, others) for i, hi, others in each_call(h, named)]
        return self.calls

    def _history(self, ctx: TurnContext) -> History:
        seq, h = self.latest.pop(ctx.conv.id, (None, History()))
        prev, c = ctx.prev, ctx.turn.c
        new = c.appended
        grows = prev is not None and seq == prev.seq
        if prev is not None and c.link == "previous_response_id":
            # the API holds the history: the answer it stored comes before the items sent
            answer = ctx.keys.answer(prev.rt.response)
            new = [answer, *new] if answer is not None else new
        elif prev is None or not c.kept == c.appended_from == prev.n_messages:
            grows = False
        h = h if grows else History()
        for m in new if grows else ctx.messages:
            h.add(m)
        self.latest[ctx.conv.id] = (ctx.seq, h)
        if len(self.latest) > LIVE:
            self.latest.popitem(last=False)
        return h


def checks_of(rules: Rules | None) -> tuple[Check, ...]:
    """Each rule of ``rules`` as a check: ``E.rule_broken`` on each call of the turn's answer that
    breaks it (named by the rule, so that one that fails is reported by its name)."""
    if rules is None:
        return ()
    turns = _Turns()
    return tuple(_check_of(rule, rules.path, turns) for rule in rules.rules)


def _check_of(rule: Rule, path: str, turns: _Turns) -> Check:
    def check(ctx: TurnContext) -> Iterator[Finding]:
        for c, h, others in turns.of(ctx):
            why = broken(rule, c.name or "", c.arguments, h, others)
            if why:
                yield ctx.finding(
                    codes.RULE_BROKEN,
                    f"The model called {c.name}, which breaks the rule {rule.name!r} "
                    f"({path}): {why}.",
                    grade=rule.severity.value,
                    tool_call_id=c.id,
                    rule=rule.name,
                    kind=rule.kind,
                    tool=c.name,
                    why=why,
                )

    check.__name__ = check.__qualname__ = f"rule {rule.name!r}"
    return check
