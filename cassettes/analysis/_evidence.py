"""No finding rests on a field looptap inferred (docs/interop.md): an imported round trip
(:attr:`~cassettes.wire.Exchange.reconstructed`) names the fields its source gave; a
finding resting on another (looptap inferred it when it rebuilt the round trip, or it is not
known) is no evidence, and the analysis demotes it to a note that says so, once, for every
reader (show, ``--json``, the totals, ``why``, exports, the inspector, the fleet)."""

from __future__ import annotations

from typing import Any

from ._model import Finding, Severity
from .codes import ROWS

__all__ = ["demote_inferred"]


def demote_inferred(findings: list[Finding], reconstructed: dict[str, Any] | None) -> None:
    """Make each finding that rests on a field the source did not give an info note saying it
    is no evidence (``details.inferred`` names the field; what a finding rests on is its
    row's ``rests_on``)."""
    if not reconstructed:
        return
    given = set(reconstructed.get("from") or ())
    for f in findings:
        field = ROWS[f.code].rests_on
        if field and field not in given:
            f.severity = Severity.INFO
            f.details["inferred"] = field
            f.message = f"not evidence: rests on the {field} looptap inferred. {f.message}"
