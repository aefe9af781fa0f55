"""What looptap writes that it made from a cassette — exports, pages, the fleet index, the kept
analysis, a rewritten branch — sealed again as it is written (docs/redaction.md, "One gate"): a
cassette from an older looptap, or edited by hand, may hold what its own redaction missed, and
every file made from it would hold it too.

:func:`seal` is the writers' one way to :class:`~cassettes.storage.Redacted` bytes (the text
masked by the redactor's scrubber: the values learned, every known format, a value after a
credential's name, a URL's password, encoded payloads: what ``looptap verify`` flags);
:func:`scrubbed` masks the strings of plain data (a record, a row) one by one, so JSON stays JSON.
One redactor per process, with the project's patterns (``[tool.looptap.redact]``) when they read.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any

import orjson

from ..storage import Redacted
from ._redactor import REDACTED, Redactor
from ._streams import merge

#: JSON's escapes of a quote, a backslash and a slash: a JSON text held in a JSON string (a body
#: in a HAR, a tool call's arguments in an export) writes its keys' quotes so.
_ESCAPE = re.compile(r'\\[\\"/]')
#: The same, its character a group (what ``split`` keeps).
_ESCAPED = re.compile(r'\\([\\"/])')
#: JSON held in JSON held in JSON, at most: the levels of escapes read.
LEVELS = 3

__all__ = ["Sealing", "derived", "scrubbed", "seal", "sealed_json"]


@functools.cache
def derived() -> Redactor:
    """The redactor of what is made from cassettes: the project's patterns, or the rules alone
    when its table does not read (the recorder says why; an export is never refused for it)."""
    try:
        return Redactor.configured()
    except ValueError:
        return Redactor()


def seal(data: bytes) -> Redacted:
    """``data`` as a writer takes it: every secret the redactor finds in it masked, in the text
    as it is and as JSON held in its strings reads (:func:`_unescaped`: ``{\\"password\\": …}``
    of a body in a HAR is a credential by name, as ``{"password": …}`` is)."""
    text = data.decode("utf-8", "surrogateescape")
    spans = _spans(derived(), text)
    if not spans:
        return Redacted(data)
    pieces: list[str] = []
    pos = 0
    for s, e in spans:
        pieces += [text[pos:s], REDACTED]
        pos = e
    return Redacted(("".join(pieces) + text[pos:]).encode("utf-8", "surrogateescape"))


def _spans(r: Redactor, text: str) -> list[tuple[int, int]]:
    """Where ``r`` masks ``text``, and its views with :data:`LEVELS` levels of JSON's escapes
    read (each found in a view mapped back to the text: an escape's backslash with its
    character, so the mask never leaves half an escape). A value's quotes, and a backslash
    after it, are never masked: a JSON text stays JSON, at every level. A level's keywords are
    the level before's, but those a backslash taken out can make or unmake, searched again
    (:meth:`~._detector.Detector.unescaped`: one search of all of them a text, not a level)."""
    found: list[tuple[int, int]] = []
    view, maps = text, []
    present: frozenset[str] | None = None
    for level in range(LEVELS + 1):
        if level:
            if _ESCAPE.search(view) is None:
                break
            view, removed = _unescaped(view)
            maps.append(removed)
        spaced = _spaced(view)
        if present is None:
            present = r.detector.keywords(spaced)
        else:
            present = r.detector.unescaped(present, spaced)
        for s, e in r.spans(spaced, present):
            while s < e and view[s] in "\"'":
                s += 1
            while e > s and view[e - 1] in "\"'\\":  # (nor an escape's backslash)
                e -= 1
            if s == e:
                continue
            k = s
            while k > 0 and view[k - 1] == "\\":
                k -= 1
            s -= (s - k) % 2  # (an escape it starts in: masked with its backslash)
            for back in reversed(maps):
                s, e = s + bisect_left(back, s), e - 1 + bisect_right(back, e - 1) + 1
            found.append((s, e))
    return merge(found)


#: An escape of a newline, a tab or a return at a deeper level of JSON held in JSON (``\\\\n``,
#: ``\\\\\\n``, …; one level's, ``\\n``, is read by ``str.replace``).
_BLANK = re.compile(r"\\\\+[ntr]")
_BLANKS = {"n": "\n", "t": "\t", "r": "\r"}
#: What :func:`_spaced` reads besides one level's ``\\n``: a backslash escaped, ``\\t``, ``\\r``.
_RARE = re.compile(r"\\[\\tr]")


def _spaced(view: str) -> str:
    """``view`` with JSON's escapes of a newline, a tab and a return, at any level, read as the
    blank they are (spaces, then it: the same length, so a place in it is the same place in
    ``view``): a YAML held in a JSON string says ``separate_signature: true\\n``, whose value is
    ``true``, not ``true\\n``."""
    if "\\" not in view:
        return view
    if _RARE.search(view) is None:  # (one scan, by C, where four read the text: JSON's \n only)
        return view.replace("\\n", " \n")
    if "\\\\" in view:  # (two or more backslashes before the letter; one, by str.replace)
        view = _BLANK.sub(lambda m: " " * (len(m.group(0)) - 1) + _BLANKS[m.group(0)[-1]], view)
    return view.replace("\\n", " \n").replace("\\t", " \t").replace("\\r", " \r")


def _unescaped(text: str) -> tuple[str, list[int]]:
    """``text`` with one level of JSON's escapes of a quote, a backslash and a slash read; where
    each escape's character stands in the result (ascending: what maps a place back)."""
    parts = _ESCAPED.split(text)  # (the text between escapes, each escape's character between)
    # (each escape's character stands after the text before it and the characters before it)
    removed = [at + n for n, at in enumerate(accumulate(map(len, parts[:-1:2])))]
    return "".join(parts), removed


def sealed_json(value: Any) -> Redacted:
    """``value`` (a row, a record) as a line of JSON, each of its strings scrubbed."""
    return Redacted(orjson.dumps(scrubbed(value), option=orjson.OPT_APPEND_NEWLINE))


def scrubbed(value: Any, redactor: Redactor | None = None, depth: int = 0) -> Any:
    """``value`` with every string (keys too) masked by ``redactor`` (bounded: depth 16); a list
    of strings alone (an argv) is read as the command line it makes."""
    r = redactor if redactor is not None else derived()
    if depth > 16:
        return None
    if isinstance(value, str):
        return r.scrub(value)
    if isinstance(value, dict):
        return {r.scrub(str(k)): scrubbed(v, r, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, str) for v in value):
            return r.scrub_words(list(value))
        return [scrubbed(v, r, depth + 1) for v in value]
    return value


class Sealing:
    """A binary stream that writes to ``dst`` (a :class:`~cassettes.storage.Staged` file, stdout)
    each piece sealed (:func:`seal`): an export written a piece at a time."""

    def __init__(self, dst: Any) -> None:
        self._dst = dst

    def write(self, data: bytes) -> int:
        self._dst.write(seal(bytes(data)))
        return len(data)

    def flush(self) -> None:
        self._dst.flush()
