"""A :class:`~cassettes.reading.incremental.RunReader` to and from the rows of a kept analysis
(:mod:`cassettes.reading.kept`, docs/kept-analysis.md): :func:`take` stands a reader where the
reader that kept the rows stood once finished (or, for a file that grew since, where it stood
after its last round trip, to read and analyse only what was added), :func:`keep` keeps a
finished reader's analysis, and :func:`printed` serves the printed views kept with it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cassettes.analysis import continuation, plain_values
from cassettes.analysis.model import Conversation, Finding, RunAnalysis
from cassettes.reading import kept, printed_views
from cassettes.reading.stores import Places

if TYPE_CHECKING:
    from cassettes.reading.incremental import RunReader

# the reader's kept rows (cassettes.reading.incremental, cassettes.reading.run): no public surface
__all__: list[str] = []

_FINDINGS = TypeAdapter(list[Finding])

#: The version of :class:`ReaderState`'s JSON: rows of another are analysed again.
STATE_VERSION = 1
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

    version: Literal[1]
    #: The index (:meth:`~cassettes.storage.RecordIndex.snapshot`).
    header: dict[str, Any] | None
    format_version: int = Field(ge=0)
    problems: list[tuple[int, str, str]]
    tail: list[tuple[int, dict[str, Any]]] = Field(max_length=1)
    pos_of_seq: list[tuple[int, int]]
    pos: int = Field(ge=0)
    line: int = Field(ge=0)
    #: The reader's counts.
    first_index: int = Field(ge=0)
    records: int = Field(ge=0)
    families: dict[str, int] = Field(max_length=MAX_FAMILIES)
    first_started: float | None
    skipped: list[int]


def _checked(found: kept.Kept) -> ReaderState:
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
    ends = zip(offsets, lengths, strict=True)
    if any(at < 0 or length < 0 or at + length > state.pos for at, length in ends):
        raise ValueError("the reader's index reaches past its file")
    return state


def take(reader: RunReader) -> bool:
    """Before the reader's first step: take the kept analysis of its file when one checks out,
    and stand finished, as if the file had been read and analysed (``True``); for a file that
    grew from the kept bytes, stand where the reader that kept them stood after its last round
    trip, and hash the rest as it is read (``False``: the reader reads and analyses what was
    added); else hash the file as it is read, so that :func:`keep` can keep it."""
    index = reader.index
    assert reader.records == 0 and index.consumed == 0, (
        "a kept analysis is taken before anything is read"
    )
    if kept.disabled() or index.size() < kept.MIN_BYTES:
        return False
    found = kept.take(index.path, reader.store_dir)
    if found is None:
        index.digest = kept.hasher()
        return False
    try:
        parsed = _parsed(found)
    except ValueError:  # (rows this analyser does not read: analysed again, and kept anew)
        found.turns.close()
        index.digest = kept.hasher()
        return False
    if found.continuation is not None:
        _continue(reader, found, *parsed)
        return False
    _stand(reader, found, parsed[0], parsed[3])
    reader.analyser.first_index = parsed[0].first_index
    reader.analyser.take(parsed[1], parsed[2])
    reader.finished = True
    reader.kept_as = found.generation
    return True


def _continue(
    reader: RunReader,
    found: kept.Kept,
    state: ReaderState,
    result: RunAnalysis,
    flagged: dict[int, tuple[int, list[Finding]]],
    places: Places,
) -> None:
    """Stand ``reader`` where the reader that kept ``found`` stood after its last round trip,
    before its end-of-run pass (:mod:`cassettes.analysis.continuation`), to read what the file
    gained since; one that does not check out is read afresh (hashed as it is read)."""
    assert found.continuation is not None and found.usage is not None
    try:
        data = plain_values.sections(found.continuation)
        _stand(reader, found, state, places)
        reader.usage = dict(found.usage)
        continuation.restore(reader.analyser, data, result, flagged)
    except (ValueError, KeyError, OSError):  # (JSONDecodeError is one; CassetteError an OSError)
        if found.views is not None:
            found.views.close()
        reader.restart()
        reader.index.digest = kept.hasher()
        return
    reader.index.digest, reader.index.hashed = found.hashed, found.size
    reader.before = Before(
        len(found.offsets), {s: data for s, (_, data) in found.findings.items()},
        {s: c.model_dump_json().encode() for s, c in result.mcp_calls.items()}, found.views,
    )  # fmt: skip


class Before(NamedTuple):
    """What a continued reader's file held when its analysis was kept: its round trips (by
    position), their findings and MCP calls (JSON, by seq), and the printed views kept of them:
    the views a printing pass takes again where the analysis did not change them
    (:func:`each_view`)."""

    positions: int
    findings: dict[int, bytes]
    calls: dict[int, bytes]
    views: IO[bytes] | None


def each_view(reader: RunReader, each: Callable[[Any, Any], Any]) -> Iterator[Any]:
    """A printing pass (``each``: a round trip's printed view and growth row): for a continued
    reader, settled, the views kept of the round trips its file held before are taken again,
    but where the continued analysis changed what they show (a finding, the end-of-run pass's
    ones among them, or an MCP link: by seq); the others are ``each``'s. Else ``each`` of
    every round trip the reader read."""
    before = reader.before
    if before is None or before.views is None or not reader.settled:
        return (each(ex, rt) for ex, rt in reader.pairs)
    reader.before = None  # (once: the views are read from their file as they pass)
    return _reusing(reader, each, kept.views_in(before.views), _changed(reader, before),
                    before.positions)  # fmt: skip


def _changed(reader: RunReader, before: Before) -> set[int]:
    """The seqs whose views the continued analysis changed: their findings, or an MCP call's
    link (the MCP round trip's and the model's turn's)."""
    flagged = reader.analyser.state.flagged
    now = {s: _FINDINGS.dump_json(f) for s, (_, f) in flagged.items() if f}
    was = {s: data for s, data in before.findings.items() if data != b"[]"}
    changed = {s for s in now.keys() | was.keys() if now.get(s) != was.get(s)}
    calls = reader.analysis.mcp_calls
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
    reader: RunReader,
    each: Callable[[Any, Any], Any],
    views: Iterator[Any],
    changed: set[int],
    positions: int,
) -> Iterator[Any]:
    seqs = reader.index.seqs
    again = reader.reread()
    try:
        for pos in again.positions():
            view = next(views, None) if pos < positions else None
            if view is not None and seqs[pos] not in changed and view[0].get("seq") == seqs[pos]:
                yield view
            else:
                yield each(*again.pair_at(pos))
    finally:
        again.close()


def _stand(reader: RunReader, found: kept.Kept, state: ReaderState, places: Places) -> None:
    """Stand ``reader`` where the kept analysis ``found`` (:func:`~cassettes.reading.kept.take`,
    its rows read by :func:`_parsed`) left the reader that kept it: its index, store of turns and
    counts (the analyser's part is the caller's)."""
    index = {**dict(state), "offsets": found.offsets, "lengths": found.lengths, "seqs": found.seqs}
    reader.index.restore(index)
    block = max(found.blocks, default=-1) + 1
    reader.turn_store.adopt(found.turns, found.turns_end, {"blocks": found.blocks, "block": block})
    reader.places = places
    reader.records, reader.first_started = state.records, state.first_started
    reader.families = dict(state.families)
    reader.source.skipped.clear()  # (the set its forks share)
    reader.source.skipped.update(state.skipped)
    if reader.summarising:
        reader.unsummarised = iter(list(places))


def keep(reader: RunReader) -> bool:
    """Once the reader is finished: keep its analysis, for the next reader of the same bytes
    (when the file was hashed from its first byte as it was read: :func:`take`). Never raises."""
    index = reader.index
    if not reader.finished or index.digest is None or index.hashed != index.consumed:
        return False
    if index.pending:
        return False
    result, flagged = reader.analyser.kept()
    if len(result.conversations) > kept.MAX_CONVERSATIONS:
        return False  # (a kept analysis' conversations are read into memory)
    turns_file, _, turns = reader.turn_store.kept()
    more = reader.continuation
    state = {
        "version": STATE_VERSION, **index.snapshot(), "first_index": reader.analyser.first_index,
        "records": reader.records, "families": reader.families,
        "first_started": reader.first_started, "skipped": sorted(reader.source.skipped),
    }  # fmt: skip
    places, usage = reader.places, reader.usage
    try:
        reader.kept_as = kept.keep(
            index.path, index.hashed, index.digest.digest(), state,
            result.model_copy(update={"conversations": []}).model_dump_json().encode(),
            ((c.id, c.model_dump_json().encode()) for c in result.conversations),
            {s: (pos, _FINDINGS.dump_json(f)) for s, (pos, f) in flagged.items()},
            ((seq, usage.get(seq), places.get(seq)) for seq in places),
            (turns_file, turns["blocks"]), more,
        )  # fmt: skip
    except (TypeError, ValueError):  # (not kept: analysed again next time)
        return False
    return reader.kept_as is not None


def printed(reader: RunReader, make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """Each round trip's printed view: those kept with the reader's kept analysis when they check
    out, else ``make()``'s, kept for the next reader as they pass (docs/kept-analysis.md)."""
    if reader.kept_as is None:
        made: Iterator[Any] = make()
        return made
    taken = printed_views.views(reader.index.path, reader.kept_as)
    if taken is not None:
        return taken
    return _keeping(make(), printed_views.ViewsWriter(reader.index.path, reader.kept_as))


def _parsed(
    found: kept.Kept,
) -> tuple[ReaderState, RunAnalysis, dict[int, tuple[int, list[Finding]]], Places]:
    """A kept analysis' rows (:class:`~cassettes.reading.kept.Kept`) as the reader holds them:
    the reader's state (validated), the analysis with its conversations, the findings by turn,
    the turns' places. Raises ``ValueError`` for rows it cannot read or trust."""
    try:
        state = _checked(found)
        result = RunAnalysis.model_validate_json(found.analysis)
        result.conversations = [Conversation.model_validate_json(c) for c in found.conversations]
        flagged = {s: (pos, _FINDINGS.validate_json(f)) for s, (pos, f) in found.findings.items()}
        places = Places()
        for seq, block, offset, length in found.places:
            places.put(seq, (block, offset, length))
    except (KeyError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return state, result, flagged, places


def _keeping(views: Iterator[Any], writer: printed_views.ViewsWriter) -> Iterator[Any]:
    """``views``, each kept by ``writer`` before it is handed on; committed once all went by."""
    try:
        for v in views:
            writer.add(v)
            yield v
        writer.commit()
    finally:
        writer.abandon()


def continuation_of(reader: RunReader) -> bytes | None:
    """The reader's analysis after its last round trip, before the end-of-run pass, as the JSON a
    grown file is continued from (:mod:`cassettes.analysis.continuation`), compressed
    (:func:`~cassettes.reading.kept.packed`); ``None`` when some
    of it has no plain form, or it is more than :data:`~cassettes.reading.kept.MAX_CONTINUATION`
    bytes (the grown file is then analysed afresh)."""
    try:
        head, rest = plain_values.lines(continuation.capture(reader.analyser))
    except (TypeError, KeyError, ValueError, RecursionError):  # (orjson's errors are TypeErrors)
        return None
    with rest, rest.getbuffer() as view:  # (the view released before the buffer is closed)
        return kept.packed(head, view)
