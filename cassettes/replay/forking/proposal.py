"""Rules proposed from evidence (``looptap rules propose A B``): two recordings of the same agent
are lined up as ``looptap diff`` lines them up (conversations in the order they started, turns by
index), their requests compared as replay compares them, and every difference classified by the
kind of value it holds — a date, a uuid, a random id, a path, a port, a number, free text, inside
the result of which tool.

Only what is volatile by kind is proposed, and narrowly: a difference the built-in detectors
already tolerate needs no rule; a random id or a weekday in text the model reads gets a
substitution anchored on the literal text before (or after) it; a volatile value in a request
field the model does not read (``metadata.session``) gets that one path ignored, for that API
family. A number, a name, an instruction, a tool result's words — anything the model would read
differently — is listed as a real divergence and never proposed. The proposal is then checked: the
two runs compared again with the proposed rules, and whatever still differs is said (the turn and
path), so "these rules make them match" is a measured claim. Nothing is written: the user pastes
the ``[tool.looptap]`` block printed.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from ...analysis import RunAnalysis
from ...hints import count
from ...jsonpath import format_path
from ...matching import (
    Change,
    Numbering,
    RequestKey,
    Rules,
    VolatileSpans,
    clip,
    json_diff,
    parse_ignore,
    parse_substitution,
    window,
)
from ...project import RuleError
from ...reading import open_run
from ...wire import Exchange
from ._lineup import Comparing, conversation_pairs

__all__ = ["propose_files"]

#: Top-level request fields whose text the model reads (besides the family's history key): a
#: volatile value there is substituted narrowly, never its path ignored.
_READ = frozenset(
    {
        "system",
        "instructions",
        "system_instruction",
        "systemInstruction",
        "tools",
        "prompt",
        "input",
        "messages",
        "contents",
        "tool_config",
        "toolConfig",
        "preamble",
    }
)
#: Texts longer than this are compared as free text only (not split into tokens).
_MAX_TEXT = 50_000
_MAX_TOKENS = 8_000
_TOKENS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")
_WEEKDAYS = tuple(calendar.day_name)
#: The literal text a proposed substitution is anchored on: the plain characters next to the
#: token (never a space, a placeholder or a control character: the pattern is printed).
_LEFT = re.compile(r"[A-Za-z0-9_.:/@#+-]{0,40}$")
_RIGHT = re.compile(r"[A-Za-z0-9_.:/@#+-]{0,40}")
_MONTHS = tuple(calendar.month_name)[1:]
#: The built-in detectors' names as kinds a reader knows.
_KIND_OF_DETECTOR = {
    "tmp": "path",
    "cwd": "path",
    "home": "path",
    "datetime": "date",
    "timestamp": "date",
    "epoch": "date",
}


@dataclass
class Difference:
    """One way the two runs' requests differ (listed once, at the first turn it is seen)."""

    conversation: str
    turn: int
    path: str
    #: What the values are: ``date``, ``uuid``, ``id``, ``path``, ``port``, ``number``, ``free
    #: text`` …
    kind: str
    a: str
    b: str
    #: The tool whose result holds the difference, when one does.
    tool: str | None = None
    #: ``builtin`` (the built-in detectors tolerate it), ``rule`` (:attr:`rule` proposed) or
    #: ``divergence`` (a real one: not proposed).
    verdict: str = "divergence"
    #: The rules proposed for it (``ignore PATH``, ``substitute REGEX=REPLACEMENT``).
    rules: list[str] = field(default_factory=list)
    #: How many more turns repeat it (a system prompt is sent again every turn).
    again: int = 0

    def line(self) -> str:
        what = f"{self.kind} in the result of tool {self.tool}" if self.tool else self.kind
        head = f"{self.conversation} turn {self.turn} {self.path}: {what} ({self.a} → {self.b})"
        if self.verdict == "builtin":
            tail = "tolerated by the built-in detectors (no rule needed)"
        elif self.verdict == "rule":
            tail = "proposed: " + "; ".join(self.rules)
        else:
            tail = "a real divergence: not proposed" + (
                f" (if what {self.tool} returns is the world's — a listing, a clock — "
                f'volatile_tools = ["{self.tool}"] would tolerate it; the model reads it)'
                if self.tool
                else ""
            )
        return f"{head}: {tail}" + (
            f" [again in {self.again} later turn{'s' if self.again != 1 else ''}]"
            if self.again
            else ""
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "turn": self.turn,
            "path": self.path,
            "kind": self.kind,
            "tool": self.tool,
            "a": self.a,
            "b": self.b,
            "verdict": self.verdict,
            "rules": self.rules,
            "again": self.again,
        }


@dataclass
class Proposal:
    differences: list[Difference] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    substitute: list[str] = field(default_factory=list)
    #: Turn pairs compared, and those still differing with the proposed rules (conversation, turn,
    #: path).
    pairs: int = 0
    remaining: list[tuple[str, int, str]] = field(default_factory=list)
    #: Whole conversations or turns one run has and the other not.
    unpaired: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not self.remaining and not self.unpaired

    def rules(self) -> Rules:
        return Rules(
            [parse_ignore(i) for i in self.ignore], [parse_substitution(s) for s in self.substitute]
        )

    def toml(self) -> str:
        """The ``[tool.looptap]`` block to paste (``#`` comments where nothing is proposed)."""
        out = ["[tool.looptap]"]
        if self.ignore:
            out.append("ignore = [" + ", ".join(_toml_str(i) for i in self.ignore) + "]")
        if self.substitute:
            out.append("substitute = [" + ", ".join(_toml_str(s) for s in self.substitute) + "]")
        if not self.ignore and not self.substitute:
            out.append(
                "# no rule needed"
                if any(d.verdict == "builtin" for d in self.differences) or not self.differences
                else "# no rule proposed"
            )
        if any(d.verdict == "builtin" for d in self.differences):
            out.append(
                "# the built-in detectors (on by default) tolerate the rest: keep volatile = true"
            )
        return "\n".join(out)

    def as_json(self) -> dict[str, Any]:
        return {
            "differences": [d.as_json() for d in self.differences],
            "proposed": {"ignore": self.ignore, "substitute": self.substitute},
            "pairs": self.pairs,
            "remaining": [{"conversation": c, "turn": t, "path": p} for c, t, p in self.remaining],
            "unpaired": self.unpaired,
            "matches": self.matches,
        }


def _toml_str(s: str) -> str:
    if "'" not in s and "\n" not in s and all(c >= " " for c in s):
        return f"'{s}'"
    return json.dumps(s, ensure_ascii=True)


# ---------------------------------------------------------------------------------------------
# Lining the runs up


def _pairs(ra: RunAnalysis, rb: RunAnalysis, p: Proposal) -> list[tuple[str, int, int, int]]:
    """(conversation, turn, seq in A, seq in B) of every pair of turns, as ``looptap diff`` pairs
    them."""
    out: list[tuple[str, int, int, int]] = []
    for ca, cb, first in conversation_pairs(ra, rb):
        if ca is None or cb is None:
            only = ca or cb
            assert only is not None
            p.unpaired.append(
                f"run {'A' if ca else 'B'} has a conversation the other never started ({only.id}, "
                f"{count(len(only.turns), 'turn')})"
            )
            continue
        for k in range(min(len(ca.turns), len(cb.turns))):
            out.append((ca.id, k + first, ca.turns[k], cb.turns[k]))
        if len(ca.turns) != len(cb.turns):
            who = "A" if len(ca.turns) > len(cb.turns) else "B"
            p.unpaired.append(
                f"{ca.id}: run {who} went on for "
                f"{count(abs(len(ca.turns) - len(cb.turns)), 'more turn')} "
                f"(from turn {min(len(ca.turns), len(cb.turns)) + first})"
            )
    return out


def propose_files(path_a: str, path_b: str) -> tuple[Proposal, list[str]]:
    """The rules that would make the requests of run B (the file ``path_b``, any format
    ``looptap`` reads) match run A's, and what they would not; also the two files' problems."""
    a, b = open_run(path_a), open_run(path_b)
    exa, exb = a.exchange_by_seq, b.exchange_by_seq
    p = Proposal()
    pairs = _pairs(a.analysis, b.analysis, p)
    p.pairs = len(pairs)
    seen: dict[tuple[str, str, str], Difference] = {}
    vs = VolatileSpans()
    for conv, turn, sa, sb in pairs:
        xa, xb = exa(sa), exb(sb)
        ka, kb = Comparing().key(xa), Comparing().key(xb)
        if ka.is_json and kb.is_json:
            changes = json_diff(ka.body, kb.body)
        elif ka.body != kb.body:
            changes = [Change((), "changed", *window(ka.body, kb.body))]
        else:
            changes = []
        if (ka.method, ka.path) != (kb.method, kb.path):
            p.unpaired.append(
                f"{conv} turn {turn}: {ka.method} {ka.path} against {kb.method} {kb.path}"
            )
        tools = {**_tools(ka), **_tools(kb)}
        family = ka.adapter.family if ka.adapter is not None else None
        history = ka.history_key()
        for c in changes:
            d = _classify(c, conv, turn, tools, family, history, vs)
            key = (d.path, d.a, d.b)
            if key in seen:
                seen[key].again += 1
                continue
            seen[key] = d
            p.differences.append(d)
            for rule in d.rules:
                kind, _, text = rule.partition(" ")
                target = p.ignore if kind == "ignore" else p.substitute
                if text not in target:
                    target.append(text)
    _check(p, pairs, exa, exb)
    return p, [*a.problems, *b.problems]


def _tools(key: RequestKey) -> dict[tuple[Any, ...], str]:
    """Each tool result's content path (as the compared body holds it) → the tool's name."""
    if key.adapter is None or key.raw is None:
        return {}
    try:
        found = key.adapter.tool_result_paths(key.raw, key.url)
    except Exception:
        return {}
    return {tuple(path): name for path, name in found if name}


def _check(
    p: Proposal,
    pairs: Sequence[tuple[str, int, int, int]],
    exa: Callable[[int], Exchange],
    exb: Callable[[int], Exchange],
) -> None:
    """Compare the runs again with the proposed rules (and the built-in detectors): what still
    differs."""
    same = Comparing(VolatileSpans(), p.rules())
    for conv, turn, sa, sb in pairs:
        ka, kb = same.key(exa(sa)), same.key(exb(sb))
        if ka.digest == kb.digest:
            continue
        first = json_diff(ka.body, kb.body, limit=1) if ka.is_json and kb.is_json else []
        p.remaining.append((conv, turn, first[0].where if first else "(body)"))


# ---------------------------------------------------------------------------------------------
# Classifying one difference


def _classify(
    c: Change,
    conv: str,
    turn: int,
    tools: dict[tuple[Any, ...], str],
    family: str | None,
    history: str | None,
    vs: VolatileSpans,
) -> Difference:
    where = format_path(c.path)
    tool = next((name for path, name in tools.items() if c.path[: len(path)] == path), None)
    shown_a, shown_b = (
        window(c.expected, c.actual, 60)
        if c.kind == "changed"
        else (clip(repr(c.expected), 60), clip(repr(c.actual), 60))
    )
    d = Difference(conv, turn, where, "", shown_a, shown_b, tool)
    if c.kind != "changed":
        d.kind = (
            f"{'a field only run B sends' if c.kind == 'added' else 'a field only run A sends'}"
        )
        return d
    a, b = c.expected, c.actual
    if not (isinstance(a, str) and isinstance(b, str)):
        d.kind = (
            "number"
            if isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            else "value"
        )
        return d
    kind, subs = _text_kind(a, b, vs)
    d.kind = kind
    if kind.startswith("built-in:"):
        d.kind, d.verdict = kind.removeprefix("built-in:"), "builtin"
        return d
    if subs is None:
        return d
    read = bool(c.path) and (c.path[0] in _READ or c.path[0] == history)
    if not read and tool is None:
        path = format_path(c.path, "")
        d.rules, d.verdict = [f"ignore {family + ':' if family else ''}{path}"], "rule"
        return d
    if subs:
        d.rules, d.verdict = [f"substitute {s}" for s in subs], "rule"
    return d


def _text_kind(a: str, b: str, vs: VolatileSpans) -> tuple[str, list[str] | None]:
    """What two differing strings differ in: ``built-in:KIND`` (the detectors make them equal),
    a volatile kind with the substitutions that would (narrow, each checked), or a kind that is
    not volatile (``None``: nothing proposed)."""
    na, fa = vs.normalise(a, Numbering())
    nb, fb = vs.normalise(b, Numbering())
    detectors = [
        _KIND_OF_DETECTOR.get(d, d) for (d, x), (_, y) in zip(fa, fb, strict=False) if x != y
    ]
    if na == nb:
        return "built-in:" + (", ".join(dict.fromkeys(detectors)) or "date"), None
    if max(len(na), len(nb)) > _MAX_TEXT:
        return "free text", None
    ta, tb = _TOKENS.findall(na), _TOKENS.findall(nb)
    if max(len(ta), len(tb)) > _MAX_TOKENS:
        return "free text", None
    kinds: list[str] = []
    subs: list[str] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op != "replace" or i2 - i1 != 1 or j2 - j1 != 1:
            return "free text", None
        x, y = ta[i1], tb[j1]
        kind = _token_kind(x, y)
        kinds.append(kind)
        if kind not in ("id", "date"):
            return kind, None
        sub = _substitution(kind, x, "".join(ta[max(0, i1 - 12) : i1]), "".join(ta[i2 : i2 + 12]))
        if sub is None:
            return kind, None
        if sub not in subs:
            subs.append(sub)
    kind = ", ".join(dict.fromkeys([*detectors, *kinds])) or "free text"
    return kind, subs


def _token_kind(x: str, y: str) -> str:
    if (x in _WEEKDAYS and y in _WEEKDAYS) or (x in _MONTHS and y in _MONTHS):
        return "date"
    if x.isdigit() and y.isdigit():
        return "number"
    if (
        len(x) == len(y)
        and len(x) >= 6
        and _random(x)
        and _random(y)
        and _charset(x) == _charset(y)
    ):
        return "id"
    return "free text"


def _random(t: str) -> bool:
    """Letters and digits mixed, as a machine makes an id (a word or a number is not one)."""
    return (
        t.isalnum()
        and t.isascii()
        and any(ch.isdigit() for ch in t)
        and any(ch.isalpha() for ch in t)
    )


def _charset(t: str) -> str:
    if all(ch in "0123456789abcdef" for ch in t):
        return "[0-9a-f]"
    if all(ch in "0123456789ABCDEF" for ch in t):
        return "[0-9A-F]"
    return "[A-Za-z0-9]"


def _substitution(kind: str, token: str, before: str, after: str) -> str | None:
    """A narrow ``REGEX=REPLACEMENT`` for a volatile token: anchored on the literal text just
    before it (to the last space or placeholder) or else just after it; ``None`` when neither
    gives an anchor (a bare token is not proposed: the rule would reach any word of its shape)."""
    if kind == "date":
        names = _WEEKDAYS if token in _WEEKDAYS else _MONTHS
        body, repl = (
            r"\b(?:" + "|".join(names) + r")\b",
            "<weekday>" if token in _WEEKDAYS else "<month>",
        )
        return _checked(f"{body}={repl}")
    # (RE2 matches user patterns: no look-around, so the anchor is matched and written back; the
    # anchors' characters need no escape in a replacement)
    body = f"{_charset(token)}{{{len(token)}}}"
    left = _LEFT.search(before)
    if left is not None and left.group():
        return _checked(f"{re.escape(left.group())}{body}\\b={left.group()}<id>")
    right = _RIGHT.match(after)
    if right is not None and right.group():
        return _checked(f"\\b{body}{re.escape(right.group())}=<id>{right.group()}")
    return None


def _checked(spec: str) -> str | None:
    try:
        parse_substitution(spec)
    except RuleError:
        return None
    return spec
