"""The reader behind :class:`cassettes.Run` for a looptap cassette: read and analysed a piece at a
time, for very large files and for recordings still being written (``open_run(path)``, which reads a
run to its end, and ``open_run(path, follow=True)``, which follows it as it grows). Not a second way
to read a run: :class:`RunReader` is what :class:`~cassettes.reading._run.Run` delegates to.

:class:`RunReader` reads the file through :class:`cassettes.storage.RecordSource` (record
offsets, request bodies, a torn tail, a file still growing) and feeds the records, batch by batch,
through the incremental layer analysis (:class:`~cassettes.analysis._analyser.RunAnalyser`, which
releases what later turns no longer need), then releases each exchange's raw bytes. Each analysed
turn is kept as a
:class:`~cassettes.views.TurnSummary` (what a turn list, the findings, the growth chart and
navigation read: a few hundred bytes); the full turn goes, compressed, to the reader's temporary
SQLite file and :meth:`RunReader.full_turn` restores it (a small cache keeps the recently shown
ones). :meth:`RunReader.by_seq` re-reads one round trip in full (its whole message history)
when a viewer shows it; :meth:`RunReader.reread` goes through every round trip again, one at a time.
The stores are :mod:`._stores`', the passes :mod:`._reread`'s, and taking or keeping the analysis
of a run read before (docs/kept-analysis.md) :mod:`._snapshot`'s, in values the reader hands
over or stands on (:meth:`RunReader.take`).

What still grows with the run is about 3 KB per turn (the summary and growth bar, the threader's
hashes, the checks' memory of call ids and calls, the index entries) and the latest turn of each
conversation; the store of full turns takes about 1 KB of disk per turn (compressed 256 KB of
turns at a time).
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from ..analysis import RunAnalyser, RunAnalysis, Turn, restore, sections, spill
from ..parsing import RoundTrip, parse_exchange
from ..storage import BLOCK, BODY_CACHE, Problem, RecordSource
from ..views import TurnSummary, summarise
from ..wire import Exchange
from . import _analysis_cache, _snapshot
from ._branch import branch_origin, first_turn
from ._reread import Column, Reread
from ._show_objects import own_view_json
from ._stores import CACHE, OwnViews, ParseStore, Pieces, Places, TurnStore

# the reader behind cassettes.Run (open_run): not a second public way to read a run
__all__: list[str] = []

#: Full turns kept restored for viewers (the most recently shown ones).
TURN_CACHE = 64
#: The findings of a finished kept turn's summary that has none: one list for all (a list each
#: was 56 bytes a turn in the inspector of a kept analysis). A continued run's summaries keep
#: their own: its end-of-run pass fills the list of a conversation's last turn.
NO_FINDINGS: list[Any] = []
#: Turns of a kept analysis a :meth:`RunReader.step` summarises (a few hundred ms of work: the
#: inspector shows the first ones without waiting for all).
KEPT_STEP = 512


@dataclass
class Batch:
    """What one :meth:`RunReader.step` read."""

    #: The turns analysed in this batch (generation round trips), in recording order.
    turns: list[TurnSummary]
    #: Round trips read, including non-generation ones.
    records: int
    #: Problems found in this batch (corrupt lines, unreadable records).
    problems: list[Problem]
    #: Nothing more to read right now (end of what the file holds).
    at_end: bool


class RunReader:
    """A cassette read and analysed a batch at a time, with memory bounded by summaries (behind
    :class:`~cassettes.reading._run.Run`).

    ``step()`` until ``at_end``; then ``finish()`` for the end-of-run checks. For a recording in
    progress keep calling ``step()`` (new records appear as the writer completes them) and call
    ``finish()`` once it is done, if ever. ``step`` runs in one thread; the viewer methods
    (:meth:`full_turn`, :meth:`exchange_by_seq`, :meth:`by_seq`) may be called from others.
    """

    def __init__(
        self,
        path: str | Path,
        body_cache: int = BODY_CACHE,
        turn_cache: int = TURN_CACHE,
        *,
        summaries: bool = True,
        cache: bool = False,
        views: bool = False,
    ) -> None:
        self._made = (path, body_cache, turn_cache, summaries, views)  # (:meth:`restart`)
        #: The cassette's records (index and request bodies), read ahead by :meth:`step`.
        self.source = RecordSource(path, body_cache)
        self.index = self.source.index
        # Take a kept analysis on the first step, or keep this one once finished
        # (docs/kept-analysis.md).
        self._cache = cache
        # The records for viewers re-reading one round trip: a cache of bodies of their own, so a
        # viewer thread can read while another thread steps the analysis.
        self._viewer = self.source.fork(16)
        self.analyser = RunAnalyser(self._reload, keep_turns=False)
        #: The analysis' parse of each round trip, kept for the printers and viewers (parse once).
        # The reader's temporary SQLite file: its stores' rows (parses and full turns).
        self._rows = spill.Spill(cache=CACHE)
        self.parses = ParseStore(self._rows)
        #: With ``views`` (a run to be printed: ``show``, ``index``): each round trip's own part
        #: of its printed view, made as the analysis parses it (:meth:`each_view` takes it).
        self.own_views = OwnViews(self._rows) if views else None
        self._at = 0  # position in the index of the record being analysed
        self._ex: Exchange | None = None  # and its exchange (while the analyser parses it)
        self.analyser.on_parse = self._keep_parse
        #: Every turn read so far, by seq, as a summary (the full turn: :meth:`full_turn`); left
        #: empty with ``summaries=False`` (a command going through the run once: the turns are
        #: read from the store only, which keeps memory at a few integers per turn).
        self.summaries: dict[int, TurnSummary] = {}
        self._moved = 0  # the analysis' re-read turns whose summaries were placed again
        self.summarising = summaries
        #: Where each turn's full JSON is in :attr:`turn_store`, by seq, and (a run to be kept)
        #: its usage, for the rows of a kept analysis.
        self.places = Places()
        #: Every turn's full JSON (:meth:`full_turn`).
        self.turn_store = TurnStore(self._rows)
        self._turns: OrderedDict[int, Turn] = OrderedDict()  # recently restored full turns
        self._turn_cache = turn_cache
        self._lock = threading.Lock()
        #: Round trips read so far (generation or not).
        self.records = 0
        #: Round trips read so far by API family ("none" for traffic that is not an LLM API's).
        self.families: dict[str, int] = {}
        #: The first recorded start time among the round trips read (epoch seconds).
        self.first_started: float | None = None
        self.finished = False
        #: The generation of the kept analysis this reader took or kept (``None``: neither).
        self.kept_as: bytes | None = None
        #: The turns of a kept analysis not yet summarised (a step summarises KEPT_STEP of them).
        self.unsummarised: Iterator[int] | None = None
        # The pass over the records read so far that :attr:`pairs` and its columns go through.
        self._again: Reread | None = None
        # Once :meth:`settle` ran: the analysis of the whole run, its turns restored on lookup.
        self._settled: RunAnalysis | None = None
        #: Its analysis after the last round trip, before the end-of-run pass (compressed JSON
        #: lines), to be kept
        #: for the file to be continued from once it grew (:func:`._snapshot.continuation_of`).
        self.continuation: Pieces | None = None
        #: Continued from where a kept analysis of the file's first bytes left off: what those
        #: held (docs/kept-analysis.md, "A file that grew"; ``None``: not continued).
        self.before: _snapshot.Before | None = None

    def restart(self) -> None:
        """Stand before the first byte again, nothing read (a kept state that did not check out
        half-way through taking it)."""
        self.close()
        self.source.close()
        self._viewer.close()
        self.analyser.state.threader.close()
        self.analyser.state.spill.close()
        path, body_cache, turn_cache, summaries, views = self._made
        self.__init__(path, body_cache, turn_cache, summaries=summaries, views=views)  # type: ignore[misc]

    @property
    def analysis(self) -> RunAnalysis:
        """The run's conversations, errors and (once finished) findings; its ``turns`` stay empty
        (see :attr:`summaries`, :meth:`full_turn`, and :meth:`whole` for small runs) until
        :meth:`settle`, which maps them from the store."""
        return self._settled if self._settled is not None else self.analyser.result

    @property
    def problems(self) -> list[Problem]:
        return self.index.problems

    # -- what a Run reads through it (the same members as a run held in memory, _memory_reader)
    @property
    def damage(self) -> list[Problem]:
        """Damage found while reading, by line and kind (``torn``, ``corrupt`` …)."""
        return self.index.problems

    @property
    def pairs(self) -> Column:
        """(exchange, round trip) of every round trip read so far, read again from disk in
        recording order on each pass; :attr:`exchanges` and :attr:`roundtrips` one side of it."""
        return self._pass().pairs

    @property
    def exchanges(self) -> Column:
        return self._pass().exchanges

    @property
    def roundtrips(self) -> Column:
        return self._pass().roundtrips

    def _pass(self) -> Reread:
        if self._again is None:
            self._again = self.reread()
        return self._again

    @property
    def seqs(self) -> Sequence[int]:
        return self.index.seqs

    @property
    def read_bytes(self) -> int:
        return self.index.consumed

    @property
    def still_written(self) -> bool:
        return self.index.pending > 0

    def progress(self) -> float | None:
        """Share of the file read so far (``None``: unknown, or an empty file)."""
        size = self.index.size()
        return self.index.consumed / size if size else None

    def find(self, seq: int) -> tuple[Exchange, RoundTrip] | None:
        """The round trip with this seq: once settled, from the pass over the run (``None`` when
        there is none); before, as :meth:`by_seq` reads it for a viewer (``KeyError``)."""
        if self._settled is not None:
            return self._pass().by_seq(seq)
        return self.by_seq(seq)

    def find_exchange(self, seq: int) -> Exchange:
        """The exchange with this seq (``KeyError`` when there is none; see :meth:`find`)."""
        if self._settled is None:
            return self.exchange_by_seq(seq)
        found = self._pass().by_seq(seq)
        if found is None:
            raise KeyError(seq)
        return found[0]

    def each_view(
        self,
        each: Callable[[Exchange, RoundTrip], Any],
        rest: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Iterator[Any]:
        """A printing pass (:func:`._snapshot.each_view`: a continued run takes again the views of
        what it held before, where its analysis did not change them): ``each(exchange, round
        trip)`` of every round trip, or, given ``rest``, ``rest(own part)`` of one whose own part
        of its view (:attr:`own_views`) was made as the analysis parsed it (its record is not
        read again, nor its parse restored)."""
        at = self._view_at(each, rest)
        before = self.before
        if before is None or before.views is None or not self.settled:
            again = self._pass()
            return (at(again, pos) for pos in again.positions())
        self.before = None  # (once: the views are read from their file as they pass)
        st = self.analyser.state
        flagged, calls = st.flagged, self.analysis.mcp_calls
        return _snapshot.each_view(before, before.views, flagged, calls, self.reread,
                                  self.index.seqs, at, self._kept_turn,
                                  st.relabelled)  # fmt: skip

    def _view_at(
        self,
        each: Callable[[Exchange, RoundTrip], Any],
        rest: Callable[[dict[str, Any]], Any] | None,
    ) -> Callable[[Reread, int], Any]:
        """A round trip's printed view by its position, in a pass: from its own part kept as
        the analysis parsed it, else ``each`` of the pair read again."""
        own = self.own_views if rest is not None else None

        def at(again: Reread, pos: int) -> Any:
            data = own.get(pos) if own is not None else None
            if data is None or rest is None:
                return each(*again.pair_at(pos))
            return rest(orjson.loads(data))

        return at

    def printed(self, make: Callable[[], Iterator[Any]], kind: str = "views") -> Iterator[Any]:
        """Each round trip's printed view, or ``kind`` (:func:`._snapshot.printed`: those kept
        with the run's kept analysis when they check out, else ``make()``'s)."""
        return _snapshot.printed(self.index.path, self.kept_as, make, kind, self._kept_turn)

    def _kept_turn(self, seq: int) -> Turn:
        """A turn as its store holds it (what a printing pass made its view of; a kept analysis'
        blocks, for a reader that took one), not remembered: a pass reads the store's blocks in
        order, a few decompressed at a time."""
        return self.turn_store.get(*self.places.get(seq))

    def settle(self) -> None:
        """The run is read to its end and finished: hold its analysis with every turn mapped from
        the store, and go through its round trips by a fresh pass (a command's output pass)."""
        self.analyser.release()  # keep the run's analysis, not the analyser's working state
        self._again = self.reread()
        turns: Mapping[int, Any] = self._again.turns
        # every other field as the analysis left it
        self._settled = self.analyser.result.model_copy(update={"turns": turns})

    @property
    def settled(self) -> bool:
        """Read to its end, finished and settled (:meth:`settle`): nothing of it changes now."""
        return self._settled is not None

    def step(self, max_bytes: int | None = BLOCK) -> Batch:
        """Read and analyse what the file gained (up to about ``max_bytes``)."""
        if self._cache:
            self._cache = False
            if take(self):
                return self._summarised(self.records, list(self.index.problems))
        if self.unsummarised is not None:
            return self._summarised(0, [])
        before = len(self.index.problems)
        recs = self.index.poll(max_bytes)
        turns = self._analyse(recs, len(self.index) - len(recs))
        at_end = self.index.consumed + self.index.pending >= self.index.size()
        return Batch(
            turns=turns, records=len(recs), problems=self.index.problems[before:], at_end=at_end
        )

    def _analyse(self, recs: list[tuple[int, dict[str, Any]]], first: int) -> list[TurnSummary]:
        """Analyse records the index just read (``first``: the index position of the first one)."""
        turns: list[TurnSummary] = []
        if recs and self.records == 0:  # a fork's branch keeps its origin's turn numbers
            self.analyser.first_index = first_turn(
                branch_origin(self.index.header, self.index.path)
            )
        for pos, ex in self.source.take(recs, first):  # (one that cannot be read: skipped)
            self.records += 1
            if ex.started is not None and self.first_started is None:
                self.first_started = ex.started
            self._at, self._ex = pos, ex
            turn = self.analyser.add(ex)
            self._ex = None
            family = self.analyser.last_family
            self.families[family] = self.families.get(family, 0) + 1
            if turn is not None:
                usage = None
                if self.index.digest is not None:  # (to be kept: its row says so much of it)
                    t = turn.tokens
                    cost = str(t.cost) if t.cost is not None else None
                    usage = (turn.conversation, t.input, t.output, cost)
                self.places.put(turn.seq, self.turn_store.put(turn), usage)
                if self.summarising:
                    summary = summarise(turn)
                    self.summaries[turn.seq] = summary
                    turns.append(summary)
                self._place_moved()
            # The analysis has what it needs from the raw exchange (checks read only the current
            # turn's exchange): drop its bytes so memory holds the analysis, not the file.
            ex.response_chunks = []
            ex.request_body = b""
            ex.set_request_json(None)
        return turns

    def _place_moved(self) -> None:
        """Turns a later request re-read into another conversation (the analysis' ``moved``:
        :mod:`cassettes.analysis._rehome`) are kept again where they are now (their store entry,
        their usage row, their summary), so every reader of the run, a kept analysis too, finds
        them there."""
        moved = self.analyser.state.moved
        if len(moved) == self._moved:
            return
        for seq, (conv, index, _first) in list(moved.items())[self._moved :]:
            if seq not in self.places:
                continue
            # (its place, previous turn and counts: RunAnalyser.placed, the core's one place)
            turn = self.analyser.placed(self.turn_store.get(*self.places.get(seq)))
            usage = self.places.usage(seq)
            self.places.move(
                seq, self.turn_store.put(turn), (conv, *usage[1:]) if usage is not None else None
            )
            with self._lock:
                self._turns.pop(seq, None)
            old = self.summaries.get(seq)
            if old is not None and seq in self.analyser.state.reread:  # its layers read again
                self.summaries[seq] = summarise(turn)
            elif old is not None:
                self.summaries[seq] = replace(
                    old, conversation=conv, index=index, previous_seq=turn.previous_seq
                )
        self._moved = len(moved)

    def _keep_parse(self, rt: RoundTrip) -> None:
        """The analyser parsed the round trip being analysed: keep that parse (before the analysis
        reads it, which resolves referenced items in place)."""
        reused = rt.reused
        self.parses.put(
            self._at, rt, self.index.position(reused[0]) if reused is not None else None
        )
        if self.own_views is not None and self._ex is not None:
            # (what the pass would make of that parse restored, and of the record read again)
            self.own_views.put(self._at, own_view_json(self._ex, rt))

    def parse_at(self, pos: int) -> RoundTrip | None:
        """The analysis' parse of the round trip at ``pos`` (a position in the index), restored,
        with its request's whole message history; ``None`` when none was kept (the caller parses).
        Safe to call from another thread than :meth:`step`'s."""
        return self.parses.restore(pos, self.index.position)

    def finish(self) -> tuple[dict[str, Any], float | None, dict[str, int]]:
        """The file is complete: report a torn tail and run the end-of-run checks (once; the
        findings they add appear in the summaries' ``findings``). Returns the run's header, the
        creation time it names else the first recorded start (``None``: neither), and the round
        trips by API family."""
        if not self.finished:
            self.finished = True
            if self.index.digest is not None and not self.index.pending:
                # before the end-of-run pass, which a continued run redoes
                self.continuation = _snapshot.continuation_of(self.analyser, self._rows)
            tail = self.source.close_tail()
            self._analyse(tail, len(self.index) - len(tail))
            self.analyser.finish()
            self.turn_store.flush()
            self.parses.flush()
            if self.own_views is not None:
                self.own_views.flush()
            keep(self)  # when the file was hashed as it was read (take)
            self.continuation = None  # (kept, or not to be: its rows stay in the spill)
        return self.index.header or {}, self.first_started, dict(self.families)

    def _summarised(self, records: int, problems: list[Problem]) -> Batch:
        """The next :data:`KEPT_STEP` turns of a kept analysis, summarised (a viewer's first
        screen need not wait for all of them); at the end when none is left."""
        turns: list[TurnSummary] = []
        if self.unsummarised is not None:
            for seq in self.unsummarised:
                summary = summarise(self.full_turn(seq, remember=False))
                if not summary.findings and self.finished:  # (a finished run's: never filled)
                    summary = replace(summary, findings=NO_FINDINGS)
                turns.append(summary)
                self.summaries[seq] = summary
                if len(turns) >= KEPT_STEP:
                    break
            else:
                self.unsummarised = None
        at_end = self.unsummarised is None and self.finished  # (a continued file: read on)
        return Batch(turns=turns, records=records, problems=problems, at_end=at_end)

    def full_turn(self, seq: int, *, remember: bool = True) -> Turn:
        """A turn with everything the analysis gave it, restored from the store (a small cache
        keeps the recently shown ones; ``remember=False`` for a pass over many turns, such as a
        search). Safe to call from another thread than :meth:`step`'s."""
        with self._lock:
            turn = self._turns.get(seq)
            if turn is not None:
                self._turns.move_to_end(seq)
                return turn
        turn = self.turn_store.get(*self.places.get(seq))
        summary = self.summaries.get(seq)
        findings = summary.findings if summary is not None else self.analyser.findings_of(seq)
        if findings is not None:
            turn.findings = findings  # end-of-run checks may add to them
        if not remember:
            return turn
        with self._lock:
            self._turns[seq] = turn
            while len(self._turns) > self._turn_cache:
                self._turns.popitem(last=False)
        return turn

    def whole(self) -> RunAnalysis:
        """The analysis with every turn restored (memory grows with the run: for tests, exports
        and small runs)."""
        a = self.analyser.result
        turns = {seq: self.full_turn(seq) for seq in self.places}
        # every field, the turns restored
        return RunAnalysis(**{**dict(a), "conversations": list(a.conversations), "turns": turns})

    def _reload(self, seq: int) -> tuple[Exchange, RoundTrip, Turn]:
        """An earlier round trip, read again for the analysis (a ``previous_response_id`` that
        points back at a turn whose context was released)."""
        ex = self.source.exchange_by_seq(seq)
        # (not remembered: the end-of-run pass may yet give it findings a viewer must see)
        return ex, parse_exchange(ex), self.full_turn(seq, remember=False).model_copy()

    def exchange_by_seq(self, seq: int) -> Exchange:
        """The full exchange of the round trip with this seq, already read, rebuilt from disk (safe
        to call from another thread than the one calling :meth:`step`)."""
        return self._viewer.exchange_by_seq(seq)

    def by_seq(self, seq: int) -> tuple[Exchange, RoundTrip]:
        """The exchange and parsed round trip with this seq, with the complete message history.
        The parse is the analysis' (:meth:`parse_at`: nothing is parsed again, a jump to a turn
        included); a round trip the analysis kept no parse of is parsed."""
        ex = self.exchange_by_seq(seq)
        pos = self.index.position(seq)
        rt = self.parse_at(pos) if pos is not None else None
        return ex, rt if rt is not None else parse_exchange(ex)

    def reread(self) -> Reread:
        """Every round trip read so far, read again from disk in recording order on each pass
        (for commands that go through a whole run once its analysis is done: memory holds one
        round trip at a time, not the run)."""
        return Reread(self)

    def close(self) -> None:
        """Delete the store of full turns and parses (the summaries stay readable)."""
        self.turn_store.close()
        self.parses.close()
        if self.own_views is not None:
            self.own_views.close()
        if self.before is not None and self.before.views is not None:
            self.before.views.close()


# -- the kept analysis (docs/kept-analysis.md): taken before a reader's first step, kept once it
# finished; the values are :mod:`._snapshot`'s, applied to the reader here.


def take(reader: RunReader) -> bool:
    """Before the reader's first step: take the kept analysis of its file when one checks out,
    and stand finished, as if the file had been read and analysed (``True``); for a file that
    grew from the kept bytes, stand where the reader that kept them stood after its last round
    trip, and hash the rest as it is read (``False``: the reader reads and analyses what was
    added); else hash the file as it is read, so that :func:`keep` can keep it
    (:func:`._snapshot.take`)."""
    assert reader.records == 0 and reader.index.consumed == 0, (
        "a kept analysis is taken before anything is read"
    )
    taken = _snapshot.take(reader.index, reader.turn_store)
    if taken is None:
        return False
    if taken.found.continuation is not None:
        _continue(reader, taken)
        return False
    _stand_on(reader, taken)
    reader.analyser.first_index = taken.state.first_index
    reader.analyser.take(taken.result, taken.flagged)
    reader.finished = True
    reader.kept_as = taken.found.generation
    return True


def _continue(reader: RunReader, taken: _snapshot.Taken) -> None:
    """Stand where the reader that kept ``taken`` stood after its last round trip, before its
    end-of-run pass (:mod:`cassettes.analysis._continuation`), to read what the file gained
    since; one that does not check out is read afresh (hashed as it is read)."""
    found = taken.found
    assert found.continuation is not None and found.usage is not None
    try:
        data = sections(found.continuation)
        _stand_on(reader, taken)
        reader.places.add_usage(found.usage)
        restore(reader.analyser, data, taken.result, taken.flagged)
    except (ValueError, KeyError, OSError):  # (JSONDecodeError is one; CassetteError too)
        if found.views is not None:
            found.views.close()
        reader.restart()
        reader.index.digest = _analysis_cache.hasher()
        return
    reader.index.digest, reader.index.hashed = found.hashed, found.size
    reader.before = _snapshot.Before(
        len(found.offsets), {s: data for s, (_, data) in found.findings.items()},
        {s: c.model_dump_json().encode() for s, c in taken.result.mcp_calls.items()},
        found.views,
    )  # fmt: skip


def _stand_on(reader: RunReader, taken: _snapshot.Taken) -> None:
    """Stand where the kept analysis ``taken`` (:func:`._snapshot.take`) left the reader that
    kept it: its index, store of turns and counts (the analyser's part is the caller's)."""
    found, state, places = taken.found, taken.state, taken.places
    arrays = {"offsets": found.offsets, "lengths": found.lengths, "seqs": found.seqs}
    reader.index.restore({**dict(state), **arrays})
    reader.places = places
    reader.records, reader.first_started = state.records, state.first_started
    reader.families = dict(state.families)
    reader.source.skipped.clear()  # (the set its forks share)
    reader.source.skipped.update(state.skipped)
    if reader.summarising:  # (the seqs as they are now, 8 bytes each: a continued file adds more)
        reader.unsummarised = iter(array("q", places))


def keep(reader: RunReader) -> None:
    """Once finished: keep the analysis, for the next reader of the same bytes, when the file
    was hashed from its first byte as it was read (:func:`take`; :func:`._snapshot.keep`)."""
    index = reader.index
    if not reader.finished or index.digest is None or index.hashed != index.consumed:
        return
    if index.pending:
        return
    result, flagged = reader.analyser.kept()
    state = {
        **index.snapshot(), "first_index": reader.analyser.first_index, "records": reader.records,
        "families": reader.families, "first_started": reader.first_started,
        "skipped": sorted(reader.source.skipped),
    }  # fmt: skip
    reader.kept_as = _snapshot.keep(index, result, flagged, reader.turn_store, state,
                                 reader.places, reader.continuation)  # fmt: skip
