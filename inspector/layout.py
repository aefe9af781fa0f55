"""The inspector's layouts, decided from sizes and findings (no Textual): the app applies them.

Three layouts, by terminal size (``inspector.tcss``): wide (three layer panes side by side), narrow
(under :data:`NARROW` columns: the layer panes as tabs) and compact (under :data:`COMPACT_WIDTH`
columns or :data:`COMPACT_HEIGHT` rows: the turn list above one pane at full width, the messages
one of its tabs). In the narrow and compact layouts one pane is shown at a time (a :data:`View`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..cassettes.analysis import Finding, Layer
from ..cassettes.views import SEVERITY_RANK, layer_findings
from .badges import LAYERS, SEVERITY_MARK

__all__ = [
    "FOCUS_NAMES",
    "TAB_LABEL",
    "VIEWS",
    "View",
    "layer_to_bring_up",
    "layout_classes",
    "sidebar_width",
    "tab_labels",
    "width_sample",
]

#: The layer tabs (narrow and compact layouts): long labels, and the short ones used when the long
#: ones do not all fit. ``M`` (the messages) is a tab only in the compact layout.
View = Literal["M", "E", "A", "C"]
VIEWS: tuple[View, ...] = ("M", "E", "A", "C")
TAB_LABEL: dict[View, tuple[str, str]] = {
    "M": ("Messages", "Msgs"),
    "E": ("E emission", "E"),
    "A": ("A API verdict", "A"),
    "C": ("C client", "C"),
}
#: Below these sizes the layout folds (see ``inspector.tcss``): under NARROW columns the E, A and
#: C panes are tabs; under COMPACT_WIDTH columns or COMPACT_HEIGHT rows the turn list goes above
#: one pane at full width; under TINY_* only the list and that pane remain.
NARROW = 120
COMPACT_WIDTH, COMPACT_HEIGHT = 100, 28
TINY_WIDTH, TINY_HEIGHT = 70, 20
#: The turn list's width: what its rows need, within these bounds (a share of the terminal).
LIST_MIN, LIST_SHARE = 30, 0.42
#: The widest turn list beside the panes (wide layout).
LIST_MAX = 56
#: Rows measured for the turn list's width at each end of a long list.
WIDTH_SAMPLE = 200
#: The widgets named on the playback line when focus is on them (keys then act on that pane).
FOCUS_NAMES = {"pane-e": "E pane", "pane-a": "A pane", "pane-c": "C pane", "messages": "messages"}


def layout_classes(width: int, height: int) -> dict[str, bool]:
    """The screen's layout classes for a terminal of this size."""
    compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
    return {
        "-narrow": width < NARROW and not compact,
        "-compact": compact,
        "-tiny": width < TINY_WIDTH or height < TINY_HEIGHT,
    }


def width_sample(seqs: list[int]) -> list[int]:
    """The turns whose rows tell the list's width well enough: the first and the latest (a row's
    width varies with its finish and token counts only; measuring every turn of a huge run would
    not pay)."""
    return seqs[:WIDTH_SAMPLE] + seqs[-WIDTH_SAMPLE:] if len(seqs) > 2 * WIDTH_SAMPLE else seqs


def sidebar_width(terminal_width: int, need: int) -> int:
    """The turn list's width: what its rows ``need``, within a share of the terminal."""
    cap = int(terminal_width * LIST_SHARE) if terminal_width < NARROW else LIST_MAX
    return max(LIST_MIN, min(need + 2, cap))


def api_quiet(status: int | None, error: bool) -> str:
    """What A says with no finding of its own: ``ok``, or the error the API answered (a 400 whose
    finding the client's layer holds), never "ok" then."""
    if status is not None and status >= 400:
        return f"HTTP {status}"
    return "error" if error else "ok"


def tab_labels(
    findings: Sequence[Finding], *, compact: bool, room: int, api: str = "ok"
) -> dict[View, str]:
    """Each layer tab says its layer's findings (``E ✖1``; A without one: ``api``, from
    :func:`api_quiet`); the long labels if they all fit in ``room`` cells, else the short ones, so
    every layer's count is always on screen."""
    marks: dict[View, str] = {"M": ""}
    for layer, (sev, n) in layer_findings(findings).items():
        quiet = api if layer == "A" else "ok"
        marks[layer] = f" {SEVERITY_MARK[sev]}{n}" if sev is not None else f" {quiet}"
    shown = [v for v in VIEWS if v != "M" or compact]
    # Each tab takes its label and two cells of padding.
    long = sum(len(TAB_LABEL[v][0] + marks[v]) + 2 for v in shown)
    pick = 0 if long <= room else 1
    return {v: TAB_LABEL[v][pick] + (marks[v] if v != "M" else "") for v in VIEWS}


def layer_to_bring_up(findings: Sequence[Finding], shown: View) -> Layer | None:
    """One pane at a time: the layer to show instead of ``shown`` for a turn with these findings
    (the worst first) — for a warning or an error always, for any finding when the shown layer
    has none; ``None``: keep ``shown``."""
    level = {layer: SEVERITY_RANK[sev] for layer, (sev, _) in layer_findings(findings).items()}
    best = max(LAYERS, key=lambda x: (level[x], -LAYERS.index(x)))
    if level[best] == 0:
        return None
    current = level[shown] if shown != "M" else 0
    if (level[best] >= 2 and level[best] > current) or current == 0:
        return best
    return None
