"""User rules: what a project says legitimately changes between two runs of its agent, beyond
what the built-in detectors find (:mod:`cassettes.matching`).

Three kinds, one mechanism:

- **ignore a JSON path** of the request body, with wildcards (``metadata.*``,
  ``messages[*].content[*].cache_control``), optionally for one API family only
  (``anthropic:metadata.user_id``): a path that ends in a key ignores the key's value and its
  presence; one that ends in an index ignores the element's value (the list keeps its length);
- **substitute by regular expression** (``run-[0-9a-f]{8}`` → ``run-<id>``), applied to every
  string of both bodies before comparing;
- **a tool's results are volatile** (by the tool's name): what the tool returned is not compared.

Each rule, applied, is a :class:`~cassettes.matching._volatile.Span` named after it (``rule``),
so that two requests equal only thanks to it yield a :class:`~cassettes.matching.Tolerated`
saying which rule tolerated what — never a silent match, never a rewrite of what is recorded or
served: the caller compares what :meth:`Rules.prepare` and :meth:`Rules.substitute` give and
keeps the original.

Rules are untrusted input too (a project's file, a command line): a path or a pattern that
cannot be used is one :class:`RuleError` line. A pattern is matched by RE2, in time linear in the
text whatever its shape (:mod:`cassettes.patterns`), and refused when it matches the empty
string.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ..jsonpath import ANY_INDEX, ANY_KEY, PathItem, Segment, format_path, parse_path
from ..patterns import PatternError, Template, UserPattern
from ..project import RuleError
from ._volatile import IGNORED, TOOL_RESULT, Span

__all__ = [
    "IgnorePath",
    "Rules",
    "Substitution",
    "parse_ignore",
    "parse_substitution",
    "parse_volatile_tool",
]

#: The detector name of the spans a substitution makes (a :class:`Tolerated`'s ``detector``; an
#: ignored value's and a tool result's, ``IGNORED`` and ``TOOL_RESULT``, are the volatile module's).
SUBSTITUTED: Final = "substituted"

#: What an ignored list element, and a volatile tool's result, are compared as.
IGNORED_MARK: Final = "<ignored>"
TOOL_RESULT_MARK: Final = "<tool result>"

#: Bounds on a rule: a pattern's length, rules in all (a path's: :mod:`cassettes.jsonpath`).
MAX_PATTERN = 1000
MAX_RULES = 500
#: The longest text a span keeps of an ignored value or a tool result (the rest is summarised).
MAX_SHOWN = 4096
#: Matches of one substitution in one string kept as spans (the rest counted in one).
MAX_MATCHES = 200


# ---------------------------------------------------------------------------------------------
# The rules


@dataclass(frozen=True)
class IgnorePath:
    """Ignore the value at ``path`` (and, when it ends in a key, its presence)."""

    path: tuple[Segment, ...]
    #: Only in requests of this API family (``None``: every family).
    family: str | None = None

    @property
    def text(self) -> str:
        return f"ignore {self.family + ':' if self.family else ''}{format_path(self.path, '')}"


@dataclass(frozen=True)
class Substitution:
    """Write every match of ``pattern`` in a string as ``replacement`` (both sides; read as
    ``template``)."""

    pattern: UserPattern
    replacement: str
    template: Template = field(compare=False, repr=False)
    family: str | None = None

    @property
    def text(self) -> str:
        return (
            f"substitute {self.family + ':' if self.family else ''}"
            f"{self.pattern.pattern}={self.replacement}"
        )


def parse_ignore(spec: str, family: str | None = None) -> IgnorePath:
    """``PATH`` or ``FAMILY:PATH`` (``anthropic:metadata.user_id``)."""
    head, colon, rest = spec.partition(":")
    if (
        colon
        and family is None
        and re.fullmatch(r"[a-z][a-z0-9_]*", head.strip())
        and not rest.startswith(("[", "."))
    ):
        family, spec = head.strip(), rest
    return IgnorePath(parse_path(spec), family)


def parse_substitution(
    spec: str, replacement: str | None = None, family: str | None = None
) -> Substitution:
    """``REGEX=REPLACEMENT`` (split at the last ``=``; a replacement with ``=`` in it is written in
    the table form), or the pattern and its replacement given apart. The pattern is matched by RE2,
    in time linear in the text (:mod:`cassettes.patterns`). Refused: a pattern RE2 does not take
    (a look-around, a backreference), one longer than :data:`MAX_PATTERN` or that matches the
    empty string; a replacement naming a group the pattern lacks."""
    if replacement is None:
        pattern, eq, replacement = spec.rpartition("=")
        if not eq:
            raise RuleError(
                f"substitute {spec[:80]!r}: write REGEX=REPLACEMENT "
                "(the replacement follows the last '=')"
            )
    else:
        pattern = spec
    shown = pattern[:80]
    if not pattern:
        raise RuleError(f"substitute {spec[:80]!r}: the pattern is empty")
    if len(pattern) > MAX_PATTERN:
        raise RuleError(
            f"substitute {shown!r}…: the pattern is longer than {MAX_PATTERN} characters"
        )
    try:
        rx = UserPattern(pattern)
    except PatternError as exc:
        raise RuleError(f"substitute {shown!r}: not a pattern looptap takes: {exc}") from None
    if rx.matches_empty():
        raise RuleError(
            f"substitute {shown!r}: the pattern matches the empty string (it would rewrite every "
            "position of every string)"
        )
    try:
        template = rx.template(replacement)
    except PatternError as exc:
        raise RuleError(
            f"substitute {shown!r}: the replacement {replacement[:40]!r} cannot be used: {exc}"
        ) from None
    return Substitution(rx, replacement, template, family)


def parse_volatile_tool(name: str) -> str:
    n = name.strip()
    if not n or len(n) > 200 or any(ch.isspace() for ch in n):
        raise RuleError(
            f"volatile tool {name[:80]!r}: a tool's name, as the agent declares it (no spaces)"
        )
    return n


@dataclass
class Rules:
    """The user rules of one replay, pytest test or fork (see the module docstring)."""

    ignore: list[IgnorePath] = field(default_factory=list)
    substitute: list[Substitution] = field(default_factory=list)
    volatile_tools: list[str] = field(default_factory=list)
    #: Where the rules were read (``pyproject.toml [tool.looptap]``, ``--ignore`` …), for messages.
    sources: list[str] = field(default_factory=list)
    #: The table's ``volatile`` (the built-in detectors on or off), when it says.
    volatile: bool | None = None

    def __bool__(self) -> bool:
        return bool(self.ignore or self.substitute or self.volatile_tools)

    def extend(self, other: Rules) -> Rules:
        """These rules and ``other``'s (each once); the other's ``volatile``, when it says."""
        out = Rules(
            list(self.ignore),
            list(self.substitute),
            list(self.volatile_tools),
            [*self.sources, *other.sources],
            self.volatile,
        )
        for r in other.ignore:
            if r not in out.ignore:
                out.ignore.append(r)
        for s in other.substitute:
            if all(s.text != t.text for t in out.substitute):
                out.substitute.append(s)
        for n in other.volatile_tools:
            if n not in out.volatile_tools:
                out.volatile_tools.append(n)
        if other.volatile is not None:
            out.volatile = other.volatile
        if len(out.ignore) + len(out.substitute) + len(out.volatile_tools) > MAX_RULES:
            raise RuleError(f"more than {MAX_RULES} rules")
        return out

    def check_families(self, known: Collection[str]) -> None:
        """Refuse a rule scoped to a family no adapter speaks (a typo would make it apply
        nowhere)."""
        for r in self.scoped():
            if r.family not in known:
                raise RuleError(
                    f"{r.text[:100]}: unknown API family {r.family!r} (one of: "
                    f"{', '.join(sorted(known))})"
                )

    def scoped(self) -> list[IgnorePath | Substitution]:
        """The rules scoped to one API family."""
        out: list[IgnorePath | Substitution] = [r for r in self.ignore if r.family is not None]
        return out + [s for s in self.substitute if s.family is not None]

    # -- applying ----------------------------------------------------------------------------
    def wants_results(self) -> bool:
        """Whether :meth:`prepare` needs the body's tool results located (a tool rule is set)."""
        return bool(self.volatile_tools)

    def prepare(
        self,
        body: Any,
        family: str | None,
        results: Sequence[tuple[tuple[PathItem, ...], str | None]] = (),
    ) -> tuple[Any, list[Span]]:
        """The body as compared: the results of volatile tools (``results``: each result's content
        path and tool name, as the family's adapter locates them) and the ignored paths written
        out; and a span for each, with the value it stood for. ``body`` itself is not changed."""
        spans: list[Span] = []
        tools = set(self.volatile_tools)
        for path, name in results:
            if name in tools and path:
                body = _written_out(body, path, 0, (), spans, f"volatile tool {name}", TOOL_RESULT)
        for rule in self.ignore:
            if rule.family is None or rule.family == family:
                body = _written_out(body, rule.path, 0, (), spans, rule.text, IGNORED)
        return body, spans

    def substitutions(self, family: str | None) -> list[Substitution]:
        return [s for s in self.substitute if s.family is None or s.family == family]


def substitute(
    subs: Sequence[Substitution], text: str, path: tuple[PathItem, ...]
) -> tuple[str, list[Span]]:
    """``text`` with every substitution applied in turn, and a span per match (the text it
    replaced): at most :data:`MAX_MATCHES` per rule and string, then one span counting the rest
    (a pattern that matches every word of a long text keeps a bounded record, the same on both
    sides)."""
    spans: list[Span] = []
    for s in subs:
        text, found = s.pattern.sub(s.template, text)
        if found:
            spans.extend(Span(path, SUBSTITUTED, f, s.text) for f in found[:MAX_MATCHES])
            if len(found) > MAX_MATCHES:
                spans.append(
                    Span(
                        path,
                        SUBSTITUTED,
                        f"(and {len(found) - MAX_MATCHES:,} more matches)",
                        s.text,
                    )
                )
    return text, spans


def _shown(value: Any) -> str:
    """An ignored value as a span keeps it: its text, bounded (equal values give equal texts)."""
    text = (
        value
        if isinstance(value, str)
        else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    )
    if len(text) <= MAX_SHOWN:
        return text
    import hashlib

    return (
        f"{text[:MAX_SHOWN]}… [{len(text):,} characters, sha256 "
        f"{hashlib.sha256(text.encode()).hexdigest()[:16]}]"
    )


def _written_out(
    value: Any,
    path: Sequence[Segment],
    i: int,
    at: tuple[PathItem, ...],
    spans: list[Span],
    rule: str,
    detector: str,
) -> Any:
    """``value`` (at body path ``at``) with what ``path[i:]`` names written out, and a span for
    each value it stood for: an ignored key (``IGNORED``) dropped, an ignored list element
    written :data:`IGNORED_MARK`, a volatile tool's result (``TOOL_RESULT``)
    :data:`TOOL_RESULT_MARK`. Unchanged parts shared."""
    seg = path[i]
    last = i == len(path) - 1
    out: Any
    whole: Collection[Any]
    if isinstance(value, dict) and (seg is ANY_KEY or isinstance(seg, str)):
        out, whole = dict(value), value.keys()
    elif isinstance(value, list) and (seg is ANY_INDEX or isinstance(seg, int)):
        out, whole = list(value), range(len(value))
    else:
        return value
    keys: Collection[Any] = (
        whole if seg is ANY_KEY or seg is ANY_INDEX else [seg] if seg in whole else []
    )
    if not keys:
        return value
    for k in keys:
        if not last:
            out[k] = _written_out(value[k], path, i + 1, (*at, k), spans, rule, detector)
            continue
        spans.append(Span((*at, k), detector, _shown(value[k]), rule))
        if detector != IGNORED:
            out[k] = TOOL_RESULT_MARK
        elif isinstance(out, dict):
            del out[k]
        else:
            out[k] = IGNORED_MARK
    return out
