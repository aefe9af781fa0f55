"""What a run reader (:mod:`cassettes.reading._incremental`) stands on and keeps, as values, to
and from the rows of a kept analysis (:mod:`._analysis_cache`, docs/kept-analysis.md):
:func:`take` reads and checks the kept analysis of a file (:class:`Taken`: the reader stands where
the reader that kept the rows stood once finished, or, for a file that grew since, where it stood
after its last round trip, to read and analyse only what was added), :func:`keep` keeps a finished
reader's analysis from the values it hands over, and :func:`printed` serves the printed views kept
with it. The reader applies what it takes to itself: nothing here names it."""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..analysis import (
    Conversation,
    Finding,
    McpCall,
    RunAnalyser,
    RunAnalysis,
    Turn,
    capture,
    spill,
)
from ..storage import SHELL_PLACES, RecordIndex
from ..views import turn_layers_json
from . import _analysis_cache, _database
from ._reread import Reread
from ._stores import Pieces, Places, TurnStore

# the reader's kept rows (cassettes.reading._incremental, cassettes.reading._run): no public surface
__all__: list[str] = []

_FINDINGS = TypeAdapter(list[Finding])

#: The version of :class:`ReaderState`'s JSON: rows of another are analysed again.
#: 2: the places of the shell tracer's records (``shell``).
STATE_VERSION = 2
#: API families a reader counts round trips of (a run names a handful): more is not a kept state.
MAX_FAMILIES = 256
#: Bytes of a reader's state's JSON (its index's problems, a damaged file's one per bad line,
#: are most of it): more is not read.
MAX_STATE = 64 << 20


class ReaderState(BaseModel):
    """Where a reader stood once it had read and analysed its file to the end, beside the
    analysis' rows (the ``run`` row's ``reading``, JSON; the index's three arrays of offsets,
    lengths and seqs beside it): what the next reader of the same bytes stands on. Validated
    before anything is taken from it (its version, every field's type, its bounds against the
    file and the index): a state that does not check out is analysed again, never trusted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[2]
    #: The index (:meth:`~cassettes.storage.RecordIndex.snapshot`).
    header: dict[str, Any] | None
    format_version: int = Field(ge=0)
    problems: list[tuple[int, str, str]]
    tail: list[tuple[int, dict[str, Any]]] = Field(max_length=1)
    pos_of_seq: list[tuple[int, int]]
    pos: int = Field(ge=0)
    line: int = Field(ge=0)
    #: Where the lines that may be the shell tracer's records are (offset, length), or
    #: ``None``: too many to keep (:attr:`~cassettes.storage.RecordIndex.shell`).
    shell: list[tuple[int, int]] | None = Field(max_length=SHELL_PLACES)
    #: The reader's counts.
    first_index: int = Field(ge=0)
    records: int = Field(ge=0)
    families: dict[str, int] = Field(max_length=MAX_FAMILIES)
    first_started: float | None
    skipped: list[int]


def _checked(found: _analysis_cache.Kept) -> ReaderState:
    """The reader's state kept with ``found``, validated against the file and the index's arrays
    (``ValueError`` when it does not check out)."""
    if len(found.reading) > MAX_STATE:
        raise ValueError("the reader's state is too big to be one")
    state = ReaderState.model_validate_json(found.reading)
    offsets, lengths, seqs = found.offsets, found.lengths, found.seqs
    n = len(offsets)
    if state.pos != found.size or not len(lengths) == len(seqs) == n:
        raise ValueError("the reader's state is not the one of these bytes")
    if state.records > n + len(state.tail) or len(state.pos_of_seq) > n:
        raise ValueError("the reader's state counts more records than its index holds")
    if any(not 0 <= p < n for _, p in state.pos_of_seq) or any(
        not 0 <= p < n for p in state.skipped
    ):
        raise ValueError("the reader's state names records its index does not hold")
    ends = itertools.chain(zip(offsets, lengths, strict=True), state.shell or ())
    if any(at < 0 or length < 0 or at + length > state.pos for at, length in ends):
        raise ValueError("the reader's index reaches past its file")
    return state


class Taken(NamedTuple):
    """A kept analysis that checked out (:func:`take`): its rows (:class:`~.kept.Kept`) and what
    they hold, parsed (:func:`_parsed`), for a reader to stand on."""

    found: _analysis_cache.Kept
    state: ReaderState
    result: RunAnalysis
    flagged: dict[int, tuple[int, list[Finding]]]
    places: Places


def take(index: RecordIndex, turns: TurnStore) -> Taken | None:
    """Before a reader's first step: the kept analysis of its file (``index``'s) when one checks
    out, for the reader to stand on, finished, as if the file had been read and analysed (or,
    for a file that grew from the kept bytes, where the reader that kept them stood after its
    last round trip), its blocks of full turns put in ``turns``; else ``None``, and the file
    hashed as it is read, so that :func:`keep` can keep it."""
    if _analysis_cache.disabled() or index.size() < _analysis_cache.MIN_BYTES:
        return None
    found = _analysis_cache.take(index.path, turns)
    if found is None:
        index.digest = _analysis_cache.hasher()
        return None
    try:
        parsed = _parsed(found)
    except ValueError:  # (rows this analyser does not read: analysed again, and kept anew)
        turns.adopt(())
        if found.views is not None:
            found.views.close()
        index.digest = _analysis_cache.hasher()
        return None
    return Taken(found, *parsed)


class Before(NamedTuple):
    """What a continued reader's file held when its analysis was kept: its round trips (by
    position), their findings and MCP calls (JSON, by seq), and the printed views kept of them:
    the views a printing pass takes again where the analysis did not change them
    (:func:`each_view`)."""

    positions: int
    findings: dict[int, bytes]
    calls: dict[int, bytes]
    views: TurnStore | None


def each_view(
    before: Before,
    views: TurnStore,
    flagged: dict[int, tuple[int, list[Finding]]],
    calls: Mapping[int, McpCall],
    again: Callable[[], Reread],
    seqs: Sequence[int],
    each: Callable[[Reread, int], Any],
    turn_of: Callable[[int], Turn],
    relabelled: Iterable[int] = (),
) -> Iterator[Any]:
    """A printing pass (``each``: a round trip's printed view and growth row, by its position in
    a pass) of a continued reader, settled (``again``: a pass over its round trips, at
    ``seqs``): the views kept of the round trips its file held before (``views``, their turns'
    layers taken again from ``turn_of``: :func:`filled`) are taken again, but where the
    continued analysis (``flagged``, ``calls``) changed what they show (a finding, the end-of-run
    pass's ones among them, or an MCP link: by seq; ``relabelled``: the turns whose
    conversation's kind it read again); the others are ``each``'s."""
    changed = _changed(flagged, calls, before) | set(relabelled)
    kept = _analysis_cache.views_in(views)
    return _reusing(again, seqs, each, kept, changed, before.positions, turn_of)


def _changed(
    flagged: dict[int, tuple[int, list[Finding]]], calls: Mapping[int, McpCall], before: Before
) -> set[int]:
    """The seqs whose views the continued analysis changed: their findings, or an MCP call's
    link (the MCP round trip's and the model's turn's)."""
    now = {s: _FINDINGS.dump_json(f) for s, (_, f) in flagged.items() if f}
    was = {s: data for s, data in before.findings.items() if data != b"[]"}
    changed = {s for s in now.keys() | was.keys() if now.get(s) != was.get(s)}
    for s in before.calls.keys() | calls.keys():
        call, old = calls.get(s), before.calls.get(s)
        if call is not None and call.model_dump_json().encode() == old:
            continue
        changed.add(s)
        linked_before = orjson.loads(old).get("model_seq") if old is not None else None
        for linked in (call.model_seq if call is not None else None, linked_before):
            if isinstance(linked, int):
                changed.add(linked)
    return changed


def _reusing(
    reread: Callable[[], Reread],
    seqs: Sequence[int],
    each: Callable[[Reread, int], Any],
    views: Iterator[Any],
    changed: set[int],
    positions: int,
    turn_of: Callable[[int], Turn],
) -> Iterator[Any]:
    again = reread()
    try:
        for pos in again.positions():
            view = next(views, None) if pos < positions else None
            if view is not None and seqs[pos] not in changed and view[0].get("seq") == seqs[pos]:
                yield filled(view, turn_of)
            else:
                yield each(again, pos)
    finally:
        again.close()


def keep(
    index: RecordIndex,
    result: RunAnalysis,
    flagged: dict[int, tuple[int, list[Finding]]],
    turns: TurnStore,
    state: dict[str, Any],
    places: Places,
    more: Pieces | None,
) -> bytes | None:
    """A finished reader's analysis kept, for the next reader of the same bytes (its file, hashed
    from its first byte as it was read: :func:`take`, ``index``): its analyser's ``result`` and
    ``flagged``, its store of turns (``turns``), where it stands (``state``: a
    :class:`ReaderState` but its version), its turns' ``places`` (with their usage), its analysis
    before the end-of-run pass (``more``: :func:`continuation_of`). The generation of the rows
    (``None``: not kept). Never raises."""
    assert index.digest is not None
    if len(result.conversations) > _analysis_cache.MAX_CONVERSATIONS:
        return None  # (a kept analysis' conversations are read into memory)
    try:
        return _analysis_cache.keep(
            index.path, index.hashed, index.digest.digest(), {"version": STATE_VERSION, **state},
            result.model_copy(update={"conversations": []}).model_dump_json().encode(),
            ((c.id, c.model_dump_json().encode()) for c in result.conversations),
            {s: (pos, _FINDINGS.dump_json(f)) for s, (pos, f) in flagged.items()},
            ((seq, places.usage(seq), places.get(seq)) for seq in places),
            turns.blocks(), more,
        )  # fmt: skip
    except (TypeError, ValueError):  # (not kept: analysed again next time)
        return None


def printed(
    path: Path,
    generation: bytes | None,
    make: Callable[[], Iterator[Any]],
    kind: str = "views",
    turn_of: Callable[[int], Turn] | None = None,
) -> Iterator[Any]:
    """Each round trip's printed view (``kind``: or the lines of text printed,
    :data:`~._database.KINDS`): those kept with the kept analysis (``generation``) of the file
    at ``path`` when they check out, else ``make()``'s, kept for the next reader as they pass
    (docs/kept-analysis.md). A view is kept without its turn's layers (:func:`bare`) and taken
    with them again from its turn as the kept analysis holds it (``turn_of``: a seq's turn,
    from the kept blocks of full turns; :func:`filled`)."""
    if generation is None:
        made: Iterator[Any] = make()
        return made
    taken = None if _analysis_cache.disabled() else _database.views(path, generation, kind)
    if taken is not None and kind == "views":
        assert turn_of is not None, "kept views are filled from their turns"
        return (filled(view, turn_of) for view in taken)
    if taken is not None:
        return taken
    return _keeping(make(), path, generation, kind)


#: What a kept view (``[view, growth row]``) of a model call leaves out: its turn's layers and
#: tokens (:func:`~cassettes.views.turn_layers_json`: about 80 % of a view's bytes), which the
#: kept analysis holds already (its turn, in the blocks of full turns): kept as ``null``, so the
#: view's keys keep their order.
LEFT_OUT: dict[str, None] = {"layers": None, "tokens": None}


def bare(item: list[Any]) -> list[Any]:
    """A printed view and its growth row as they are kept: a model call's (``turn`` set: the
    view was made with :func:`~cassettes.views.turn_json` of its turn) without :data:`LEFT_OUT`;
    any other as it is. The view handed in is not changed (it is printed)."""
    v, row = item
    if v.get("turn") is None or v.get("layers") is None:
        return item
    return [{**v, **LEFT_OUT}, row]


def filled(item: list[Any], turn_of: Callable[[int], Turn]) -> list[Any]:
    """A kept view (:func:`bare`) as it was made: a model call's layers and tokens made again
    from its turn (``turn_of``, by the view's seq: the kept turn the printing pass made it of,
    the same JSON read back, so the same values)."""
    v = item[0]
    if v.get("turn") is not None and v.get("layers") is None:
        v.update(turn_layers_json(turn_of(v["seq"])))
    return item


def _parsed(
    found: _analysis_cache.Kept,
) -> tuple[ReaderState, RunAnalysis, dict[int, tuple[int, list[Finding]]], Places]:
    """A kept analysis' rows (:class:`~._analysis_cache.Kept`) as the reader holds them:
    the reader's state (validated), the analysis with its conversations, the findings by turn,
    the turns' places. Raises ``ValueError`` for rows it cannot read or trust."""
    try:
        state = _checked(found)
        result = RunAnalysis.model_validate_json(found.analysis)
        result.conversations = [Conversation.model_validate_json(c) for c in found.conversations]
        flagged = {s: (pos, _FINDINGS.validate_json(f)) for s, (pos, f) in found.findings.items()}
    except (KeyError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return state, result, flagged, found.places


def _keeping(views: Iterator[Any], path: Path, generation: bytes, kind: str) -> Iterator[Any]:
    """``views``, each handed on once it is put in compressed blocks of JSON lines (a
    :class:`~._stores.TurnStore`, as full turns are kept), then kept as the rows of the kept
    analysis ``generation`` (:func:`~._database.keep_views`) once all went by. A view that cannot
    be kept ends the keeping, never the pass."""
    store: TurnStore | None = TurnStore()
    try:
        for v in views:
            if store is not None:
                try:
                    kept = bare(v) if kind == "views" else v
                    store.put_data(orjson.dumps(kept, option=orjson.OPT_APPEND_NEWLINE))
                except (OSError, TypeError, sqlite3.Error):  # (orjson's errors are TypeErrors)
                    store.close()
                    store = None
            yield v
        if store is not None:
            with contextlib.suppress(OSError, sqlite3.Error):
                store.flush()
                _database.keep_views(path, generation, kind, store.blocks())
    finally:
        if store is not None:
            store.close()


def continuation_of(analyser: RunAnalyser, rows: spill.Spill) -> Pieces | None:
    """A reader's analysis (``analyser``) after its last round trip, before the end-of-run pass,
    as the JSON a grown file is continued from (:mod:`cassettes.analysis._continuation`),
    written as it comes in compressed pieces into rows of ``rows``, the reader's temporary SQLite
    file (:func:`~._analysis_cache.packed`); ``None`` when some of it has no plain form, the
    redactor's gate masks some of it, or it is more than
    :data:`~._analysis_cache.MAX_CONTINUATION` bytes (the grown file is then analysed afresh)."""
    try:
        return _analysis_cache.packed(capture(analyser), rows)
    except (TypeError, KeyError, ValueError, RecursionError):  # (orjson's errors are TypeErrors)
        return None
