"""A repair that cannot apply (docs/why.md "Interventions"): an intervention whose fork
``looptap run --from`` would refuse when it places its cursor — an edit no recorded request at or
past the cursor carries (a result put back where the client dropped the call too, so no request
holds a call to answer; a cap where no request sets one), a model of another API family — is not
run and not estimated: every branch of it would fail before sending anything. It is said, in the
fork's own words (:func:`cassettes.replay.forking.placement.place`, the check the fork makes)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import CassetteError
from ..replay.forking.fork import labelled
from ..replay.forking.placement import parse_cursor, place
from ..replay.live.edits import Edit, parse_edit
from ._intervention import Intervention

__all__ = ["refused_forks"]


def refused_forks(run: Any, found: list[Intervention]) -> None:
    """Each of ``found`` that can run (edits, or another model) placed as its fork would place
    it; one the fork would refuse gets the reason as its :attr:`~Intervention.missing`."""
    recorded: list[Any] | None = None
    for i in found:
        if i.missing is not None or not (i.edits or i.model):
            continue
        if recorded is None:
            recorded = labelled(run)
        try:
            place(parse_cursor(i.cursor), recorded, "the run", i.model, _edits(i))
        except (CassetteError, ValueError) as exc:
            i.missing = f"the fork cannot apply it: {exc}"


def _edits(i: Intervention) -> list[Edit]:
    """``i``'s edits as the fork reads them; a text from the recording (:attr:`literal`) as it
    is, never read as a file's name."""
    out = []
    for e in i.edits:
        if e in i.literal:
            target, _, value = e.partition("=")
            out.append(replace(parse_edit(f"{target}=x"), spec=e, value=value))
        else:
            out.append(parse_edit(e))
    return out
