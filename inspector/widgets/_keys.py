"""The key line at the bottom: the most useful keys that fit the terminal's width, each whole.

Textual's footer draws every shown binding and cuts the line where the terminal ends (``space
P▏^p palette`` at 80 columns). This one fits: long labels when everything fits, then short ones,
then the least important keys left out — never a key or a word cut. ``?`` (help, every key) is
always there.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["KEYS", "KeyBar", "key_line"]

#: (key, label, short label), most important first.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("q", "quit", "quit"),
    ("?", "help", "help"),
    ("space", "play/pause", "play"),
    ("f", "next finding", "finding"),
    ("l", "layer", "layer"),
    ("c", "conversation", "conv"),
    ("/", "search", "search"),
    ("1 2 3", "turn/growth/findings", "tabs"),
    ("a", "all messages", "all"),
    ("r", "re-stream", "stream"),
    ("[ ]", "step", "step"),
    ("^p", "commands", "cmds"),
)


def _render(entries: list[tuple[str, str]]) -> Text:
    t = Text(no_wrap=True, end="")
    for i, (key, label) in enumerate(entries):
        if i:
            t.append("  ")
        t.append(key, style="bold")
        t.append(f" {label}")
    return t


def key_line(width: int, keys: tuple[tuple[str, str, str], ...] = KEYS) -> Text:
    """The key line for ``width`` cells: every key with its long label if that fits, else short
    labels, else the first keys (by importance) that fit whole."""
    for pick in (1, 2):
        line = _render([(k[0], k[pick]) for k in keys])
        if line.cell_len <= width:
            return line
    n = len(keys)
    while n > 1 and _render([(k[0], k[2]) for k in keys[:n]]).cell_len > width:
        n -= 1
    return _render([(k[0], k[2]) for k in keys[:n]])


class KeyBar(Static):
    """The key line, redrawn for the width it is given."""

    def on_resize(self) -> None:
        self.update(key_line(self.content_region.width or 80))

    def on_mount(self) -> None:
        self.update(key_line(self.content_region.width or 80))
