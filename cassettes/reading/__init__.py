"""Reading a run: :func:`open_run` and :class:`Run` (``_run``), one class over every format
(``_formats`` tells it), a looptap cassette read and analysed a batch at a time, large or still
growing (``_incremental``: :class:`RunReader`, its stores of turns and parses, compressed rows of
its temporary SQLite file, ``_stores``, its passes again ``_reread``) or exchanges held in memory
(``_memory_reader``), both behind one interface (``_reader``). A run's analysis kept as SQLite
rows for the next reader of the same bytes (``_analysis_cache``; the file ``_database``, the
views printed with it among its rows; what a reader stands on ``_snapshot``). A fork's branch and
its origin (``_branch``), the memory budget (``_budget``), ``show --json``'s objects
(``_show_objects``), a run in time (``_timeline``), a conversation as a run hands it out
(``_conversation``), another tool's file as a cassette (``_conversion``).

Names load on first use (PEP 562): ``looptap replay`` takes the run class without the
analysis-backed reader and its SQLite keep. With the names imported plainly, replay's start (the
command's module imported, the server built on a 2-round-trip cassette) took 1.31x the CPU time
(0.40 s against 0.29 s; whole-process medians of 6 interleaved pairs, 2026-11-27)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import on_first_use

# Each name with the private module that defines it, loaded on first use.
_MODULES = {
    "_run": "Run open_run",
    "_incremental": "Batch RunReader",
    "_branch": (
        "Relation branch_line branch_origin first_turn fork_notes locate origin_fields origin_in "
        "origin_of read_entries relate with_notes"
    ),
    "_budget": "RunTooLargeError memory_budget within_budget",
    "_conversion": "cassette_of",
    "_formats": "detect sniff",
    "_analysis_cache": "MAX_CONTINUATION analyser_digest keep packed",
    "_database": "APPLICATION_ID SCHEMA location",
    "_show_objects": "show_objects show_pairs",
    "_stores": "CHECKPOINT ParseStore Pieces TurnStore compressor decompressor",
    "_timeline": "header_time timeline",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

if TYPE_CHECKING:
    from ._analysis_cache import MAX_CONTINUATION, analyser_digest, keep, packed
    from ._branch import (
        Relation,
        branch_line,
        branch_origin,
        first_turn,
        fork_notes,
        locate,
        origin_fields,
        origin_in,
        origin_of,
        read_entries,
        relate,
        with_notes,
    )
    from ._budget import RunTooLargeError, memory_budget, within_budget
    from ._conversion import cassette_of
    from ._database import APPLICATION_ID, SCHEMA, location
    from ._formats import detect, sniff
    from ._incremental import Batch, RunReader
    from ._run import Run, open_run
    from ._show_objects import show_objects, show_pairs
    from ._stores import CHECKPOINT, ParseStore, Pieces, TurnStore, compressor, decompressor
    from ._timeline import header_time, timeline


__getattr__ = on_first_use(__name__, _EXPORTS)


__all__ = [
    "APPLICATION_ID",
    "CHECKPOINT",
    "MAX_CONTINUATION",
    "SCHEMA",
    "Batch",
    "ParseStore",
    "Pieces",
    "Relation",
    "Run",
    "RunReader",
    "RunTooLargeError",
    "TurnStore",
    "analyser_digest",
    "branch_line",
    "branch_origin",
    "cassette_of",
    "compressor",
    "decompressor",
    "detect",
    "first_turn",
    "fork_notes",
    "header_time",
    "keep",
    "locate",
    "location",
    "memory_budget",
    "open_run",
    "origin_fields",
    "origin_in",
    "origin_of",
    "packed",
    "read_entries",
    "relate",
    "show_objects",
    "show_pairs",
    "sniff",
    "timeline",
    "with_notes",
    "within_budget",
]
