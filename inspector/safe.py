"""The inspector's side of the output boundary for untrusted text (see ``cassettes/untrusted.py``).

Two rules keep every widget safe, old or new:

1. **Wire or file text becomes a Rich ``Text`` through :func:`wire`** — never a markup string.
   Textual reads a plain ``str`` as markup in ``Static``, ``DataTable`` cells, ``Select`` and
   ``OptionList`` prompts, toasts and border titles, so a tool name like ``[@click=app.quit]``
   would become a live action. :func:`wire` cleans the text (controls, ESC, C1 and bidi shown
   visibly) and wraps it in ``Text``, which Textual never parses. ``App.notify`` is overridden in
   the app to clean and never parse markup.
2. **A line filter strips what a widget forgot** — :class:`UntrustedFilter` runs on every rendered
   line of every widget (toasts and the command palette included) and removes any control or
   invisible format character still there (they are zero cells wide, so the layout does not move).
   It is the safety net; :func:`wire` is what shows the reader that something was there.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from ..cassettes.untrusted import clean, clean_line, has_unsafe, strip_unsafe

__all__ = ["UntrustedFilter", "wire", "wire_line"]


def wire(text: object, style: str | Style = "") -> Text:
    """Untrusted text as a ``Text`` to render: cleaned, newlines kept, never markup."""
    return Text(clean(text if isinstance(text, str) else str(text)), style=style)


def wire_line(text: object, style: str | Style = "") -> Text:
    """:func:`wire` for one-line places (cells, labels, options): newlines shown as ``␤``."""
    return Text(clean_line(text if isinstance(text, str) else str(text)), style=style)


class UntrustedFilter(LineFilter):
    """Removes control and invisible format characters from every rendered segment."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(has_unsafe(seg.text) for seg in segments if not seg.control):
            return segments
        return [
            seg
            if seg.control or not has_unsafe(seg.text)
            else Segment(strip_unsafe(seg.text), seg.style)
            for seg in segments
        ]
