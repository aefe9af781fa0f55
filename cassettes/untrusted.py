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

import codecs
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "SafeBinaryStream",
    "SafeTextStream",
    "clean",
    "clean_line",
    "guard_stdio",
    "has_unsafe",
    "json_safe",
    "strip_unsafe",
]

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


def strip_unsafe(text: str) -> str:
    """``text`` without its controls and invisible format characters (newlines and tabs kept).
    For places where the width must not change: every removed character is zero cells wide in a
    terminal, except a lone surrogate, which becomes U+FFFD."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda m: "\ufffd" if "\ud800" <= m.group() <= "\udfff" else "", text)


def has_unsafe(text: str) -> bool:
    """Whether :func:`clean` would change ``text`` (newlines and tabs aside)."""
    return _UNSAFE.search(text) is not None


# -- the byte form: JSON and other bytes written to stdout ------------------------------------

_UNSAFE_BYTES_TEXT = _UNSAFE  # the same set; newline and tab are kept


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # an invalid UTF-8 byte, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # Outside the BMP: a JSON surrogate pair, so the escape stays valid JSON.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_safe(data: bytes) -> bytes:
    """``data`` (JSON, or any bytes bound for a terminal) with every control and invisible format
    character written as a JSON escape (``\\u001b``, ``\\u009b``, ``\\u202e``) and invalid UTF-8
    bytes as ``\\xNN``. Valid JSON stays valid and parses to the same value: outside strings JSON
    holds only ASCII structure, and orjson already escapes C0 inside strings; what it leaves raw
    (C1, bidi, zero-width, line separators) becomes an escape."""
    text = data.decode("utf-8", "surrogateescape")
    if _UNSAFE_BYTES_TEXT.search(text) is None:
        return data
    return _UNSAFE_BYTES_TEXT.sub(_escaped, text).encode("utf-8", "surrogateescape")


class SafeBinaryStream:
    """A binary stream wrapper that passes everything written through :func:`json_safe`
    (incrementally: a UTF-8 sequence split between two writes is decoded whole). ``text_layer``,
    when given, is flushed first, so that text printed before the bytes comes out before them."""

    def __init__(self, raw: Any, text_layer: Any = None) -> None:
        self._raw = raw
        self._text_layer = text_layer
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._text_layer is not None:
            self._text_layer.flush()
        text = self._decoder.decode(bytes(data))
        if text:
            self._raw.write(_UNSAFE_BYTES_TEXT.sub(_escaped, text).encode("utf-8", "surrogateescape"))
        return len(data)

    def flush(self) -> None:
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self._raw.write(_UNSAFE_BYTES_TEXT.sub(_escaped, tail).encode("utf-8", "surrogateescape"))
        self._raw.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class SafeTextStream:
    """A text stream wrapper that passes everything written through :func:`clean` (newlines and
    tabs kept); its ``buffer`` is a :class:`SafeBinaryStream`. The CLI installs it on stdout and
    stderr for the life of a command (:func:`guard_stdio`), so no command can print wire text raw."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        raw_buffer = getattr(raw, "buffer", None)
        self.buffer = SafeBinaryStream(raw_buffer, raw) if raw_buffer is not None else None

    def write(self, text: str) -> int:
        self._raw.write(clean(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.buffer is not None:
            self.buffer.flush()
        self._raw.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@contextmanager
def guard_stdio() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` are :class:`SafeTextStream` wrappers
    (full-screen apps such as the inspector write to ``sys.__stdout__`` and are not affected)."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, SafeTextStream):
        sys.stdout = SafeTextStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, SafeTextStream):
        sys.stderr = SafeTextStream(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = saved
