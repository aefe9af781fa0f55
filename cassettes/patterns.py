"""Regular expressions a user gives looptap (``--substitute`` and ``substitute`` rules,
``--redact-pattern`` and ``[tool.looptap.redact] patterns``, ``verify --pattern``, ``why
--answer-matches``), matched in time linear in the text by RE2 (google-re2), never by a
backtracking engine: a pattern such as ``(a|a)*b`` or ``(a+)+$`` takes as long on a megabyte of
``a`` as ``a`` does, instead of doubling its time with every character.

RE2 has no look-around (``(?=``, ``(?<=``, ``(?!``, ``(?<!``), no backreference (``\\1`` in a
pattern), no possessive or atomic group, and spells Python's ``\\Z`` as ``\\z``; ``\\d``, ``\\w``
and ``\\b`` are ASCII. A pattern that uses one is refused in one line naming what and where
(:class:`PatternError`), before anything runs. RE2 is imported when a user pattern is compiled:
a command that has none never loads it.

A replacement (:meth:`UserPattern.template`) is literal text in which ``\\1`` … ``\\99``,
``\\g<1>`` and ``\\g<name>`` name a group and ``\\\\`` is a backslash; any other backslash is
refused. (Expanded here: google-re2's ``Match.expand`` reads a replacement's literal text through
``unicode_escape``, which turns ``é`` into ``Ã©``.)
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from .errors import CassetteError
from .lazy import pattern

__all__ = ["PatternError", "Template", "UserPattern"]

#: A replacement's pieces: literal text, or the number of a group.
Template = tuple[str | int, ...]

#: In a replacement: a group (``\1``, ``\g<name>``), a backslash (``\\``), or a bare backslash.
_REFERENCE = pattern(r"\\(?:([1-9][0-9]?)|g<([^<>]*)>|(\\))|\\")
#: Lone surrogates (bytes a body could not decode, kept by ``surrogateescape``): not UTF-8, which
#: RE2 matches; each is matched as U+FFFD, one character for one, so every offset stays.
_LONE = pattern("[\ud800-\udfff]")
#: What an RE2 error names after its reason (``invalid perl operator: (?<=``).
_NAMED = pattern(r"^(?P<reason>[^:]+): (?P<what>.+)$", re.S)


class PatternError(CassetteError, ValueError):
    """A user pattern or replacement RE2 cannot take: one line saying what, and where."""


class UserPattern:
    """One user pattern, compiled by RE2 (see the module's docstring)."""

    __slots__ = ("_rx", "pattern")

    def __init__(self, pattern: str) -> None:
        import re2  # (here: only a command with a user pattern loads it)

        options = re2.Options()
        options.log_errors = False  # (RE2 would also log a refusal on stderr)
        self.pattern = pattern
        try:
            self._rx: Any = re2.compile(pattern, options)
        except re2.error as exc:
            raise PatternError(_said(pattern, exc)) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __reduce__(self) -> tuple[Any, ...]:
        return (UserPattern, (self.pattern,))

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r})"

    def finditer(self, text: str) -> Iterator[Any]:
        """Each match in ``text``, leftmost first, as :func:`re.finditer` gives them (``span``,
        ``group``, ``lastindex``); offsets are ``text``'s."""
        found = self._rx.finditer(text)
        try:
            first = next(found)
        except StopIteration:
            return iter(())
        except UnicodeEncodeError:  # (lone surrogates: raised before the first match)
            return iter(self._rx.finditer(_LONE.sub("\ufffd", text)))
        return itertools.chain((first,), found)

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``."""
        return next(self.finditer(text), None) is not None

    def matches_empty(self) -> bool:
        """Whether a match can be empty. RE2's only zero-width parts are ``^ $ \\A \\z \\b \\B``:
        an empty match of any pattern made of them shows in ``""`` or in ``"a a"``."""
        return any(m.start() == m.end() for t in ("", "a a") for m in self.finditer(t))

    def template(self, replacement: str) -> Template:
        """``replacement`` read as a template for this pattern's matches (see the module's
        docstring); :class:`PatternError` for a group the pattern lacks or a stray backslash."""
        pieces: list[str | int] = []
        at = 0
        for ref in _REFERENCE.finditer(replacement):
            pieces.append(replacement[at : ref.start()])
            at = ref.end()
            number, name, backslash = ref.groups()
            if backslash:
                pieces.append("\\")
                continue
            if number is None and name is None:
                raise PatternError(
                    f"a backslash at position {ref.start()} of the replacement is neither a "
                    "group (\\1, \\g<name>) nor doubled (\\\\)"
                )
            group = number or name
            index = int(group) if group.isdigit() else self._rx.groupindex.get(group)
            if index is None or index > self._rx.groups:
                raise PatternError(
                    f"the replacement names group {group!r}, which the pattern lacks"
                )
            pieces.append(index)
        pieces.append(replacement[at:])
        return tuple(p for p in pieces if p != "")

    def sub(self, template: Template, text: str) -> tuple[str, list[str]]:
        """``text`` with every match replaced by ``template`` expanded, and the texts matched."""
        out: list[str] = []
        found: list[str] = []
        end = 0
        for m in self.finditer(text):
            start, stop = m.span()
            out.append(text[end:start])
            out.extend(p if isinstance(p, str) else (m.group(p) or "") for p in template)
            found.append(text[start:stop])
            end = stop
        if not found:
            return text, found
        out.append(text[end:])
        return "".join(out), found


def _said(pattern: str, exc: Exception) -> str:
    """RE2's refusal as one line, with the position of what it names in ``pattern``."""
    raw = exc.args[0] if exc.args else str(exc)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    named = _NAMED.match(text)
    if named is None:
        return f"RE2 cannot use it: {text}"
    what = named["what"]
    if what == "(?P" and "(?P=" in pattern:  # (RE2 names a backreference by its start alone)
        what = "(?P="
    at = pattern.find(what)
    where = f" at position {at}" if at >= 0 else ""
    hint = ""
    if what.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?P=")) or re.fullmatch(r"\\[0-9]+", what):
        hint = " (no look-around or backreference: user patterns are matched in linear time)"
    elif what == "\\Z":
        hint = " (write \\z)"
    return f"{named['reason']} {what!r}{where}{hint}"
