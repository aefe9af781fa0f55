"""Where a rule took JSON's punctuation for an assignment (docs/redaction.md, "JSON's commas").

gitleaks' keyword rules (``password``, ``discord``, ``adafruit`` … followed by one of ``=``, ``:``,
``=>``, ``,`` …) read a ``,`` as a name given its value, so ``password,"s3cr3t"`` in a CSV line
or a log is a credential. In JSON text that comma only separates neighbours: in a schema's
``"required": ["password", "metadata"]`` the rule's "value" is the next list item, and in
``{"type": "password", "metadata": {…}}`` the next key. The redaction of a parsed body reads each
string alone and keeps them; a scan of the text (the seal of an export, ``verify`` of a HAR, JSON
held in a string) would mask or flag them. :func:`item_after_comma` says when a find is such a
neighbour: a JSON string after a ``,`` in a list or an object, read back to the ``[`` or the key's
``:`` that proves it JSON (a quoted CSV line reads as none). The detector then keeps the find only
when its rules find it in that item read with the one before it as a command line's two words
(``["--password", "s3cr3t"]``: what the redaction of an argv reads), whatever the rule.
"""

from __future__ import annotations

import re

__all__ = ["item_after_comma"]

#: How far back a list or an object is read for its opening ``[`` or its key's ``:``
#: (characters; a find's whole walk, nested values skipped a character at a time, is within it):
#: past it, the comma is not proven JSON's, and the find stands.
REACH = 1 << 12
#: How many elements back, at most.
ELEMENTS = 64
_BLANK = " \t\r\n"
#: A literal of JSON (what it holds outside strings besides its punctuation), read backwards.
_LITERAL = re.compile(r"true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERAL_CHARS = frozenset("truefalsn0123456789.eE+-")


def _back(text: str, i: int) -> int:
    """The last non-blank place before ``i`` (-1: none)."""
    i -= 1
    while i >= 0 and text[i] in _BLANK:
        i -= 1
    return i


def _escaped(text: str, i: int) -> bool:
    """Whether the character at ``i`` follows an odd run of backslashes (an escape's)."""
    k = i
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    return (i - k) % 2 == 1


def _opening(text: str, close: int, floor: int) -> int:
    """Where the string whose closing quote is at ``close`` opens (-1: not before ``floor``)."""
    i = text.rfind('"', floor, close)
    while i >= floor and _escaped(text, i):
        i = text.rfind('"', floor, i)
    return i


def _closing(text: str, opening: int, ceiling: int) -> int:
    """Where the string opened at ``opening`` closes (-1: not before ``ceiling``)."""
    i = text.find('"', opening + 1, ceiling)
    while i >= 0 and _escaped(text, i):
        i = text.find('"', i + 1, ceiling)
    return i


def _element_start(text: str, end: int, floor: int) -> int:
    """Where the JSON value whose last character is at ``end`` starts (-1: not one, or not
    before ``floor``): a string, a literal, or a whole object or list (its strings skipped)."""
    c = text[end]
    if c == '"':
        return _opening(text, end, floor)
    if c in "]}":
        depth, i = 0, end
        while i >= floor:
            c = text[i]
            if c == '"' and not _escaped(text, i):
                i = _opening(text, i, floor)
                if i < 0:
                    return -1
            elif c in "]}":
                depth += 1
            elif c in "[{":
                depth -= 1
                if depth == 0:
                    return i
            i -= 1
        return -1
    i = end
    while i >= floor and text[i] in _LITERAL_CHARS:
        i -= 1
    return i + 1 if i < end and _LITERAL.fullmatch(text, i + 1, end + 1) else -1


def _in_json(text: str, start: int, memo: dict[int, bool]) -> bool:
    """Whether the value at ``start`` is an element of a JSON list or a value of an object,
    read back over its neighbours (at most :data:`ELEMENTS`, :data:`REACH` characters) to the
    list's ``[`` or a key's ``:`` (a string before it). ``memo``: what walks before this one in
    the same text said of the elements they passed (the finds of one list are read once)."""
    floor = max(0, start - REACH)
    passed: list[int] = []
    found = False
    for _ in range(ELEMENTS):
        if start in memo:
            found = memo[start]
            break
        passed.append(start)
        i = _back(text, start)
        if i < floor:
            break
        if text[i] == "[":
            found = True
            break
        if text[i] == ":":
            k = _back(text, i)
            found = k >= floor and text[k] == '"' and _opening(text, k, floor) >= 0
            break
        if text[i] != ",":
            break
        i = _back(text, i)
        if i < floor:
            break
        start = _element_start(text, i, floor)
        if start < 0:
            break
    for p in passed:
        memo[p] = found
    return found


def item_after_comma(
    text: str, s: int, e: int, memo: dict[int, bool] | None = None
) -> tuple[str, str, int] | None:
    """When ``text[s:e]`` (a rule's find, its quotes or not) lies in a JSON string that follows
    a ``,`` after another string, in a list or an object of JSON text: the string before it,
    the string itself (their insides) and where the latter's inside starts. ``None`` otherwise.
    ``memo``: one per text, for its finds in order (:func:`_in_json`)."""
    q = s if text[s : s + 1] == '"' else s - 1
    if q < 0 or text[q] != '"' or _escaped(text, q):
        return None
    comma = _back(text, q)
    if comma < 0 or text[comma] != ",":
        return None
    close = _back(text, comma)
    if close < 0 or text[close] != '"' or _escaped(text, close):
        return None
    opening = _opening(text, close, max(0, close - REACH))
    end = _closing(text, q, min(len(text), q + REACH))
    if opening < 0 or end < 0 or e > end + 1:
        return None
    k = end + 1  # (what follows it: JSON goes on, or the text ends)
    while k < len(text) and text[k] in _BLANK:
        k += 1
    if k < len(text) and text[k] not in ",]}:":
        return None
    if not _in_json(text, opening, {} if memo is None else memo):
        return None
    return text[opening + 1 : close], text[q + 1 : end], q + 1
