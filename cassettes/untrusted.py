"""The output boundary for untrusted text: what came from the wire or a file, made safe to show.

Everything looptap records is untrusted: model output can be steered by prompt injection, API error
bodies and headers come from servers, and cassettes are shared in repositories. Such text must never
reach a terminal raw. An ``ESC ] 52`` sequence writes the reader's clipboard, ``ESC [ 2J`` clears the
screen, cursor moves fake what the screen says, and bidi overrides make text read differently from
what it is.

:func:`clean` is the one sanitiser: every character that a terminal would act on, or that changes
how the characters around it are displayed, is replaced by a visible stand-in, never emitted:

- C0 controls and DEL → the Unicode control pictures (``ESC`` → ``␛``, ``BEL`` → ``␇``, ``CR`` → ``␍``);
  newline and tab are kept (``newlines=False`` shows newlines as ``␤`` and tabs as a space);
- C1 controls (U+0080–U+009F, among them the one-character CSI ``\\x9b``), bidi embeddings, overrides
  and isolates, zero-width and other invisible format characters, line/paragraph separators,
  lone surrogates and non-characters → an escape written out (``\\u202e``, ``\\x9b``).

The inspector wraps the same function (``inspector/safe.py``) so that wire text becomes a Rich
``Text`` (never a markup string); the CLI passes every printed line through :func:`clean`.
"""

from __future__ import annotations

import re

__all__ = ["clean", "clean_line", "has_unsafe"]

# Format characters that change how neighbouring text is displayed, or hide themselves:
# bidi marks/embeddings/overrides/isolates, zero-width (non-)joiners and spaces, word joiner and
# invisible operators, the BOM, interlinear annotation, line/paragraph separators, the Mongolian
# vowel separator, Hangul fillers, the language tag block; C1; surrogates; noncharacters.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"
    "\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ufeff\uffa0\ufff0-\ufffb\ufdd0-\ufdef\ufffe\uffff"
    "\ud800-\udfff"
    "\U000e0000-\U000e007f]"
)
_UNSAFE_LINE = re.compile(_UNSAFE.pattern[:-1] + "\n\t]")


def _visible(m: re.Match[str]) -> str:
    ch = m.group()
    code = ord(ch)
    if code < 0x20:
        if ch == "\n":
            return "␤"
        if ch == "\t":
            return " "
        return chr(0x2400 + code)
    if code == 0x7F:
        return "␡"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def clean(text: str, *, newlines: bool = True) -> str:
    """``text`` with every terminal control and invisible format character shown visibly.

    With ``newlines`` (the default) newlines and tabs are kept; without, the result is one line."""
    if not isinstance(text, str):
        text = str(text)
    pattern = _UNSAFE if newlines else _UNSAFE_LINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)


def clean_line(text: str) -> str:
    """:func:`clean` for a one-line field (a cell, a label, a title): newlines shown as ``␤``."""
    return clean(text, newlines=False)


def has_unsafe(text: str) -> bool:
    """Whether :func:`clean` would change ``text`` (newlines and tabs aside)."""
    return _UNSAFE.search(text) is not None
