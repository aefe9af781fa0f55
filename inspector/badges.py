"""How severities and layers look: shared by the turn list, the panes and the findings table."""

from __future__ import annotations

from rich.text import Text

from ..cassettes.analysis import Finding, Layer, Severity
from ..cassettes.views import SEVERITY_MARK, layer_findings

__all__ = ["LAYERS", "SEVERITY_MARK", "layer_badges", "severity_style"]

LAYERS: tuple[Layer, ...] = ("E", "A", "C")


def severity_style(sev: Severity | None) -> str:
    """Rich style of a badge for the worst finding of a layer (``None``: nothing found)."""
    if sev is None:
        return "bold green"
    return {
        Severity.ERROR: "bold white on red",
        Severity.WARNING: "bold black on yellow",
        Severity.INFO: "bold cyan",
    }[sev]


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(n: int) -> str:
    """One character: ``²`` for 2 findings, ``⁺`` for ten or more."""
    return str(n).translate(_SUPERSCRIPT) if n < 10 else "⁺"


def layer_badges(findings: list[Finding]) -> Text:
    """``E  A² C ``: each letter coloured by its layer's worst finding, and the layer's number of
    findings beside its own letter (so a count never reads as another layer's)."""
    out = Text()
    for i, (layer, (sev, n)) in enumerate(layer_findings(findings).items()):
        if i:
            out.append(" ")
        out.append(layer, style=severity_style(sev))
        out.append(superscript(n) if n else " ", style=severity_style(sev) if n else "")
    return out
