"""Forking and comparing runs. One façade, its names pinned by
tests/replay/test_forking_surface.py, over: a fork's cursor in the replay server (``_cursor``; the
cursor as written and where it falls: ``_placement``), ``looptap run --from`` (``_fork``; its plan
handed to the replay server: ``_plan``) and ``--repeat`` (``_repeat``), a branch beside its origin
for the inspector (``_forkview``), where two runs diverge (``_rundiff``, ``looptap diff``; what it
finds and its report: ``_divergence``; what a fork itself changed: ``_forkchanges``) and rules
proposed from two recordings (``_proposal``, ``looptap rules propose``), all reading two runs
through ``_lineup``. The recorded requests sent to another model are the ``compare`` subpackage's
(``looptap compare``), which has its own façade.

Built on the serving side (:mod:`cassettes.replay.serving`), which never imports this package.
Names are loaded on first use (PEP 562): ``looptap replay`` needs only the cursor and the plan.
With the names imported plainly, replay's start (the command's module imported, the server built
on a 2-round-trip cassette) took 1.25x the CPU time (0.37 s against 0.29 s: the fork's report
loads the analysis; whole-process medians of 6 interleaved pairs, 2026-11-27).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy import on_first_use

_MODULES = {
    "_cursor": "Cursor bases_of live_bases live_router",
    "_placement": "CursorError parse_cursor",
    "_divergence": "Divergence divergence_lines",
    "_fork": (
        "ForkReplay ForkSource branch_meta fork_inputs locate origin_meta parse_from start_fork"
    ),
    "_forkview": "ForkComparison ForkRow fork_view",
    "_plan": "MAX_BYTES VERSION PlanError read_plan",
    "_proposal": "propose_files",
    "_repeat": "agreement agreement_lines",
    "_rundiff": "branch_diff comparing diff_analysed fork_lined_up",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from ._cursor import Cursor, bases_of, live_bases, live_router
    from ._divergence import Divergence, divergence_lines
    from ._fork import (
        ForkReplay,
        ForkSource,
        branch_meta,
        fork_inputs,
        locate,
        origin_meta,
        parse_from,
        start_fork,
    )
    from ._forkview import ForkComparison, ForkRow, fork_view
    from ._placement import CursorError, parse_cursor
    from ._plan import MAX_BYTES, VERSION, PlanError, read_plan
    from ._proposal import propose_files
    from ._repeat import agreement, agreement_lines
    from ._rundiff import (
        branch_diff,
        comparing,
        diff_analysed,
        fork_lined_up,
    )


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "MAX_BYTES",
    "VERSION",
    "Cursor",
    "CursorError",
    "Divergence",
    "ForkComparison",
    "ForkReplay",
    "ForkRow",
    "ForkSource",
    "PlanError",
    "agreement",
    "agreement_lines",
    "bases_of",
    "branch_diff",
    "branch_meta",
    "comparing",
    "diff_analysed",
    "divergence_lines",
    "fork_inputs",
    "fork_lined_up",
    "fork_view",
    "live_bases",
    "live_router",
    "locate",
    "origin_meta",
    "parse_cursor",
    "parse_from",
    "propose_files",
    "read_plan",
    "start_fork",
]
