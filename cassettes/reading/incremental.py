"""The reader behind :class:`cassettes.Run` for a looptap cassette: read and analysed a piece at a
time, for very large files and for recordings still being written (``open_run(path)``, which reads a
run to its end, and ``open_run(path, follow=True)``, which follows it as it grows). Not a second way
to read a run: :class:`RunReader` is what :class:`~cassettes.reading.run.Run` delegates to.

:class:`RunReader` reads the file through :class:`cassettes.storage.source.RecordSource` (record
offsets, request bodies, a torn tail, a file still growing) and feeds the records, batch by batch,
through the incremental layer analysis (:class:`~cassettes.analysis.run.RunAnalyser`, which
releases what later turns no longer need), then releases each exchange's raw bytes. Each analysed
turn is kept as a
:class:`~cassettes.views.summary.TurnSummary` (what a turn list, the findings, the growth chart and
navigation read: a few hundred bytes); the full turn goes, compressed, to an anonymous temporary
file and :meth:`RunReader.full_turn` restores it (a small cache keeps the recently shown
ones). :meth:`RunReader.by_seq` re-reads one round trip in full (its whole message history)
when a viewer shows it; :meth:`RunReader.reread` goes through every round trip again, one at a time.

What still grows with the run is about 3 KB per turn (the summary and growth bar, the threader's
hashes, the checks' memory of call ids and calls, the index entries) and the latest turn of each
conversation; the store of full turns takes about 1 KB of disk per turn (compressed 256 KB of
turns at a time).
"""

from __future__ import annotations

import io
import pickle
import tempfile
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import IO, Any, NamedTuple

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined

from cassettes.analysis import spill
from cassettes.analysis.model import RunAnalysis, Turn
from cassettes.analysis.run import RunAnalyser
from cassettes.parsing.roundtrip import RoundTrip, parse_exchange
from cassettes.reading.packed import compressor, decompressor
from cassettes.storage.index import BLOCK, BODY_CACHE
from cassettes.storage.source import RecordSource
from cassettes.storage.store import Problem
from cassettes.views.summary import TurnSummary, summarise
from cassettes.wire.exchange import Exchange

# the reader behind cassettes.Run (open_run): not a second public way to read a run
__all__: list[str] = []

#: Full turns kept restored for viewers (the most recently shown ones).
TURN_CACHE = 64
#: Parses restored lately (their request side), kept as bases for restoring the next one's
#: request (its kept messages are its base's): the latest turn of that many conversations.
SHOWN = 64
#: Links of a chain of requests that each extend the previous one (:class:`ParseStore`) between two
#: checkpoints, and checkpoints between two whole message lists: a checkpoint keeps the messages
#: appended since the previous checkpoint, so restoring a round trip reads at most
#: ``2 * CHECKPOINT - 1`` records, and a conversation of n turns keeps its history whole
#: ``n / CHECKPOINT²`` times, not ``n / CHECKPOINT`` (whole lists were most of what a long
#: conversation pickled: 114 of 178 MB for a 101 MB run of 100-turn conversations).
CHECKPOINT = 16
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


class TurnStore:
    """Full turns as JSON, compressed a block of turns at a time into an anonymous temporary file
    (gone when closed): one thread puts while viewer threads get.

    A turn's place is known when it is put (block, offset, length in the block's JSON), so the
    caller keeps three integers per turn. The block being filled, and a block being compressed,
    are read from memory. A full block is compressed by the thread that filled it, with zstd at
    level 1 (the core's own dependency for ``Content-Encoding: zstd``): on a coding agent's turns
    and parses 4x faster than zlib at its fastest level, to half the size (442 vs 105 MB/s, 27:1
    vs 14:1), and a block of similar turns compresses far better than turns one by one. A
    background thread compressed with zlib until 2026-11-24: each block handed the interpreter
    lock back and forth between the threads several times, and on a busy machine the reader
    waited for a compressor that held the lock but had no core (a 101 MB batch read: 2,188
    voluntary context switches with it, 10 without).
    """

    #: Uncompressed bytes per block (about 25 turns of a coding agent).
    BLOCK = 256 * 1024

    def __init__(self, directory: str | Path | None = None) -> None:
        self._dir = directory
        self._file: IO[bytes] | None = None
        self._end = 0
        self._lock = threading.Lock()
        self._filling = bytearray()
        self._block = 0  # number of the block being filled
        self._waiting: dict[int, bytes] = {}  # sealed blocks being compressed and written
        self._blocks: dict[int, tuple[int, int]] = {}  # block → (offset, length) in the file
        self._recent: OrderedDict[int, bytes] = OrderedDict()  # decompressed blocks, last used last
        self._closed = False

    def put(self, turn: Turn) -> tuple[int, int, int]:
        return self.put_data(turn.__pydantic_serializer__.to_json(turn))

    def put_data(self, data: bytes) -> tuple[int, int, int]:
        """Keep ``data``; where it is (block, offset, length), for :meth:`get_data`."""
        with self._lock:
            if self._closed:
                raise ValueError("the store of full turns is closed")
            where = (self._block, len(self._filling), len(data))
            self._filling += data
            if len(self._filling) < self.BLOCK:
                return where
            block = self._seal()
        self._compress(block)
        return where

    def _seal(self) -> int:
        """End the block being filled: it is compressed next (the caller holds the lock)."""
        block, self._block = self._block, self._block + 1
        self._waiting[block] = bytes(self._filling)
        self._filling = bytearray()
        return block

    def _compress(self, block: int) -> None:
        with self._lock:
            data = self._waiting.get(block)
        if data is None:
            return
        # outside the lock: a viewer's thread may read meanwhile
        packed = compressor().compress(data)
        with self._lock:
            if self._closed:
                return
            if self._file is None:
                self._file = tempfile.TemporaryFile(
                    prefix="looptap-turns-", dir=self._dir, buffering=0
                )
            at = self._end
            self._file.seek(at)
            self._file.write(packed)
            self._file.flush()  # (a buffered copy, adopted or resumed: a fork reads the file)
            self._end += len(packed)
            self._blocks[block] = (at, len(packed))
            del self._waiting[block]

    def _block_data(self, block: int) -> bytes | bytearray:
        """A block's JSON (the caller holds the lock)."""
        if block == self._block:
            return self._filling
        data = self._waiting.get(block)
        if data is not None:
            return data
        hit = self._recent.get(block)
        if hit is not None:
            self._recent.move_to_end(block)
            return hit
        assert self._file is not None
        at, length = self._blocks[block]
        self._file.seek(at)
        raw: bytes = decompressor().decompress(self._file.read(length))
        self._recent[block] = raw
        while len(self._recent) > 4:
            self._recent.popitem(last=False)
        return raw

    def get(self, block: int, offset: int, length: int) -> Turn:
        return Turn.model_validate_json(self.get_data(block, offset, length))

    def get_data(self, block: int, offset: int, length: int) -> bytes:
        with self._lock:
            return bytes(self._block_data(block)[offset : offset + length])

    def flush(self) -> None:
        """Compress the block being filled: nothing more is coming (the run is finished), so
        nothing needs to stay in memory."""
        with self._lock:
            block = self._seal() if self._filling and not self._closed else None
        if block is not None:
            self._compress(block)

    def buffered(self) -> int:
        """Bytes held in memory for the file: the block being filled and a block being compressed
        (two blocks at most, however long the run)."""
        with self._lock:
            return len(self._filling) + sum(len(d) for d in self._waiting.values())

    @property
    def size(self) -> int:
        """Bytes on disk (compressed blocks) and in memory (blocks not yet compressed)."""
        with self._lock:
            return self._end + len(self._filling) + sum(len(d) for d in self._waiting.values())

    def kept(self) -> tuple[IO[bytes] | None, int, dict[str, Any]]:
        """Its file (``None``: nothing written yet), the bytes it holds, and where each block is
        in it: what a kept analysis keeps of it (the store must be flushed)."""
        with self._lock:
            assert not self._filling and not self._waiting, "flush the store before keeping it"
            return self._file, self._end, {"blocks": dict(self._blocks), "block": self._block}

    def adopt(self, file: IO[bytes], end: int, state: dict[str, Any]) -> None:
        """Read the blocks of a kept analysis' store from ``file`` (this process's own copy)."""
        file.flush()  # (a forked reader reads it through a file description of its own)
        with self._lock:
            self._file, self._end = file, end
            self._blocks, self._block = dict(state["blocks"]), int(state["block"])
            self._filling, self._waiting = bytearray(), {}
            self._recent.clear()

    def reopen(self) -> None:
        """In a process forked from the one that wrote the store (:mod:`.parallel`): read it
        through a file description of this process's own. A fork shares its parent's file offset,
        and a read is a seek then a read: two processes reading at once would read each other's
        places. (Its file is unbuffered, or flushed when adopted or resumed and after each block
        written.)"""
        with self._lock:
            if self._file is not None:
                path = f"/proc/self/fd/{self._file.fileno()}"
                self._file = open(path, "rb", buffering=0)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None
            self._waiting.clear()
            self._recent.clear()
            self._filling = bytearray()


def _model(
    cls: type[BaseModel],
    fields: dict[str, Any],
    fields_set: set[str],
    extra: dict[str, Any] | None,
    private: dict[str, Any] | None,
) -> BaseModel:
    """A model as :class:`_Pickler` took it apart (what pydantic's ``__setstate__`` does)."""
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__pydantic_fields_set__", fields_set)
    object.__setattr__(obj, "__pydantic_extra__", extra)
    object.__setattr__(obj, "__pydantic_private__", private)
    object.__setattr__(obj, "__dict__", fields)
    return obj


class _Pickler(pickle.Pickler):
    """The pickler of :class:`ParseStore`: a model is its fields, fields set, extra and private
    attributes, as with pydantic's own ``__getstate__``, but without a state dict built per model
    by a Python method, and an enum member is its value. What it writes unpickles to an equal
    tree (the same types, fields set and private attributes; ``tests/cassettes/test_parse_once.py``)
    in half the time (the parse store was a seventh of a batch read's CPU, most of it in
    ``BaseModel.__getstate__``)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, BaseModel):
            private = obj.__pydantic_private__
            if private:
                private = {k: v for k, v in private.items() if v is not PydanticUndefined}
            return _model, (
                type(obj),
                obj.__dict__,
                obj.__pydantic_fields_set__,
                obj.__pydantic_extra__,
                private,
            )
        if isinstance(obj, Enum):
            return type(obj), (obj._value_,)
        return NotImplemented


def _dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


class _Chain(NamedTuple):
    """Where a chain of parses stands after one of its links (see :class:`ParseStore`)."""

    checkpoint: int  # seq of the chain's latest checkpoint
    kept: int  # messages every link since that checkpoint kept of its base
    checkpoints: int  # checkpoints since the chain last kept its messages whole


class ParseStore:
    """Each round trip's parse as the analysis made it (:attr:`RunAnalyser.on_parse`), by position
    in the index, kept compactly in a store like the turns' (compressed blocks in an anonymous
    temporary file of this process: what is read back is what this process wrote, so it is
    pickled). A request parsed against the one it extends keeps only the messages it appended
    and names its base (seq, messages kept). Every :data:`CHECKPOINT`-th link of such a chain is
    a checkpoint: it names the previous checkpoint as its base instead (keeping what every link
    since kept of its own base), and every :data:`CHECKPOINT`-th checkpoint keeps its messages
    whole; restoring a round trip reads at most ``2 * CHECKPOINT - 1`` records."""

    def __init__(self, directory: str | Path | None) -> None:
        self._store = TurnStore(directory)
        # block, offset, length per position (-1: no parse kept; a block is 256 KB)
        self._where = array("i")
        # per position: links to the nearest checkpoint or whole message list
        self._depth = array("B")
        # position → (seq of its chain's latest checkpoint, messages every link since kept of its
        # base, checkpoints since the last whole list), for the latest round trips: as many as the
        # analysis holds conversations in memory (spill.KEEP); a request extending an older one
        # keeps its messages whole at its next checkpoint
        self._chains: OrderedDict[int, _Chain] = OrderedDict()

    def put(self, pos: int, rt: RoundTrip, base_pos: int | None) -> None:
        while len(self._depth) < pos:  # (a record the analysis skipped)
            self._where.extend((-1, 0, 0))
            self._depth.append(0)
        req, reused = rt.request, rt.reused
        keep = 0
        base_seq: int | None = None
        depth = 0
        chain: _Chain | None = None  # what a later link of this one's chain needs
        # set when this one is a checkpoint: checkpoints since a whole list
        checkpoints: int | None = None
        if req is not None and reused is not None and base_pos is not None and base_pos < pos:
            held = self._chains.get(base_pos)
            if self._depth[base_pos] + 1 < CHECKPOINT:  # a link: named against its own base
                base_seq, keep = reused
                depth = self._depth[base_pos] + 1
                chain = (
                    _Chain(held.checkpoint, min(held.kept, keep), held.checkpoints)
                    if held is not None
                    else None
                )
            elif held is not None and held.checkpoints + 1 < CHECKPOINT:
                # a checkpoint: against the previous one
                base_seq, keep = held.checkpoint, min(held.kept, reused[1])
                checkpoints = held.checkpoints + 1
        if base_seq is None:
            checkpoints = 0  # its messages whole
        # the chain's latest checkpoint: a later link keeps at most its messages
        if checkpoints is not None and rt.seq is not None:
            chain = _Chain(rt.seq, len(req.messages) if req is not None else 0, checkpoints)
        if chain is not None and rt.seq is not None:
            self._chains[pos] = chain
            while len(self._chains) > spill.KEEP:
                self._chains.popitem(last=False)
        if req is not None and base_seq is not None:
            req = req.model_copy(update={"messages": req.messages[keep:]})
        packed = rt.model_copy(update={"request": req})
        packed.forget_history_base()  # (a restored parse is no base for parsing a request)
        self._where.extend(self._store.put_data(_dumps((base_seq, keep, packed))))
        self._depth.append(depth)

    def get(self, pos: int) -> tuple[int | None, int, RoundTrip] | None:
        """(base seq or ``None``, messages kept from it, the parse with the rest) at ``pos``."""
        if not 0 <= pos < len(self._depth) or self._where[3 * pos] < 0:
            return None
        w = self._where
        got: tuple[int | None, int, RoundTrip] = pickle.loads(
            self._store.get_data(w[3 * pos], w[3 * pos + 1], w[3 * pos + 2])
        )
        return got

    def buffered(self) -> int:
        """Bytes held in memory for the store (bounded, whatever the run's length)."""
        return self._store.buffered()

    def flush(self) -> None:
        self._store.flush()

    def reopen(self) -> None:
        self._store.reopen()

    def close(self) -> None:
        self._store.close()


class _Places:
    """Where each turn sits in the store, by seq: four integers per turn in arrays (a dict of
    tuples costs ten times that), looked up by bisection while seqs come in increasing order (a
    cassette's do), through a dict once one does not."""

    def __init__(self) -> None:
        self._seqs = array("q")
        self._where = array("q")  # block, offset, length per turn
        self._dict: dict[int, int] | None = None  # seq → position, once seqs stop increasing

    def put(self, seq: int, where: tuple[int, int, int]) -> None:
        if self._dict is None and self._seqs and seq <= self._seqs[-1]:
            self._dict = {s: i for i, s in enumerate(self._seqs)}
        if self._dict is not None:
            self._dict[seq] = len(self._seqs)
        self._seqs.append(seq)
        self._where.extend(where)

    def _pos(self, seq: int) -> int | None:
        # a round trip read without a seq (a malformed record) has no place
        if not isinstance(seq, int):
            return None
        if self._dict is not None:
            return self._dict.get(seq)
        i = bisect_left(self._seqs, seq)
        return i if i < len(self._seqs) and self._seqs[i] == seq else None

    def get(self, seq: int) -> tuple[int, int, int]:
        i = self._pos(seq)
        if i is None:
            raise KeyError(seq)
        w = self._where
        return w[3 * i], w[3 * i + 1], w[3 * i + 2]

    def __contains__(self, seq: int) -> bool:
        return self._pos(seq) is not None

    def __len__(self) -> int:
        return len(self._dict) if self._dict is not None else len(self._seqs)

    def __iter__(self) -> Iterator[int]:
        if self._dict is not None:
            return iter(self._dict)
        return iter(self._seqs)


class RunReader:
    """A cassette read and analysed a batch at a time, with memory bounded by summaries (behind
    :class:`~cassettes.reading.run.Run`).

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
        store_dir: str | Path | None = None,
        *,
        summaries: bool = True,
        cache: bool = False,
    ) -> None:
        #: The cassette's records (index and request bodies), read ahead by :meth:`step`.
        self.source = RecordSource(path, body_cache)
        self.index = self.source.index
        # Take a kept analysis on the first step, or keep this one once finished
        # (docs/kept-analysis.md).
        self._cache = cache
        self._dir = store_dir
        # The records for viewers re-reading one round trip: a cache of bodies of their own, so a
        # viewer thread can read while another thread steps the analysis.
        self._viewer = self.source.fork(16)
        # Parses restored lately, by position, request side only (bases for the next ones).
        self._shown: OrderedDict[int, RoundTrip] = OrderedDict()
        self.analyser = RunAnalyser(self._reload, keep_turns=False)
        # The analysis' parse of each round trip, kept for the printers and viewers (parse once).
        self._parses = ParseStore(store_dir)
        self._at = 0  # position in the index of the record being analysed
        self.analyser.on_parse = self._keep_parse
        #: Every turn read so far, by seq, as a summary (the full turn: :meth:`full_turn`); left
        #: empty with ``summaries=False`` (a command going through the run once: the turns are
        #: read from the store only, which keeps memory at a few integers per turn).
        self.summaries: dict[int, TurnSummary] = {}
        self._summarise = summaries
        self._places = _Places()
        # seq → conversation, input and output tokens, cost (a decimal's text) of each turn, for
        # the rows of a kept analysis
        self._usage: dict[int, tuple[str, int | None, int | None, str | None]] = {}
        self._store = TurnStore(store_dir)
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
        # The turns of a kept analysis not yet summarised (a step summarises KEPT_STEP of them).
        self._unsummarised: Iterator[int] | None = None
        # The pass over the records read so far that :attr:`pairs` and its columns go through.
        self._again: _Reread | None = None
        # Once :meth:`settle` ran: the analysis of the whole run, its turns restored on lookup.
        self._settled: RunAnalysis | None = None

    @property
    def analysis(self) -> RunAnalysis:
        """The run's conversations, errors and (once finished) findings; its ``turns`` stay empty
        (see :attr:`summaries`, :meth:`full_turn`, and :meth:`whole` for small runs) until
        :meth:`settle`, which maps them from the store."""
        return self._settled if self._settled is not None else self.analyser.result

    @property
    def problems(self) -> list[Problem]:
        return self.index.problems

    # -- what a Run reads through it (the same members as a run held in memory, reading.held) ----
    @property
    def damage(self) -> list[Problem]:
        """Damage found while reading, by line and kind (``torn``, ``corrupt`` …)."""
        return self.index.problems

    @property
    def pairs(self) -> _Column:
        """(exchange, round trip) of every round trip read so far, read again from disk in
        recording order on each pass; :attr:`exchanges` and :attr:`roundtrips` one side of it."""
        return self._pass().pairs

    @property
    def exchanges(self) -> _Column:
        return self._pass().exchanges

    @property
    def roundtrips(self) -> _Column:
        return self._pass().roundtrips

    def _pass(self) -> _Reread:
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

    def printed(self, make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """Each round trip's printed view: those kept with the run's kept analysis when they check
        out, else ``make()``'s, kept for the next reader as they pass (docs/kept-analysis.md)."""
        if self.kept_as is None:
            made: Iterator[Any] = make()
            return made
        from cassettes.reading import kept

        taken = kept.views(self.index.path, self.kept_as)
        if taken is not None:
            return taken
        return _keeping(make(), kept.ViewsWriter(self.index.path, self.kept_as))

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

    def reopen(self) -> None:
        """In a process forked from this reader's (:mod:`.parallel`, once settled): read the
        stores through file descriptions of its own (:meth:`TurnStore.reopen`)."""
        self._store.reopen()
        self._parses.reopen()

    def step(self, max_bytes: int | None = BLOCK) -> Batch:
        """Read and analyse what the file gained (up to about ``max_bytes``)."""
        if self._cache:
            self._cache = False
            if self.take_kept():
                return self._summarised(self.records, list(self.index.problems))
        if self._unsummarised is not None:
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
            from cassettes.reading.branch import branch_origin, first_turn

            self.analyser.first_index = first_turn(
                branch_origin(self.index.header, self.index.path)
            )
        for pos, ex in self.source.take(recs, first):  # (one that cannot be read: skipped)
            self.records += 1
            if ex.started is not None and self.first_started is None:
                self.first_started = ex.started
            self._at = pos
            turn = self.analyser.add(ex)
            family = self.analyser.last_family
            self.families[family] = self.families.get(family, 0) + 1
            if turn is not None:
                self._places.put(turn.seq, self._store.put(turn))
                if self.index.digest is not None:  # (to be kept: its row says so much of it)
                    t = turn.tokens
                    cost = str(t.cost) if t.cost is not None else None
                    self._usage[turn.seq] = (turn.conversation, t.input, t.output, cost)
                if self._summarise:
                    summary = summarise(turn)
                    self.summaries[turn.seq] = summary
                    turns.append(summary)
            # The analysis has what it needs from the raw exchange (checks read only the current
            # turn's exchange): drop its bytes so memory holds the analysis, not the file.
            ex.response_chunks = []
            ex.request_body = b""
            ex.set_request_json(None)
        return turns

    def _keep_parse(self, rt: RoundTrip) -> None:
        """The analyser parsed the round trip being analysed: keep that parse (before the analysis
        reads it, which resolves referenced items in place)."""
        reused = rt.reused
        self._parses.put(
            self._at, rt, self.index.position(reused[0]) if reused is not None else None
        )

    def parse_at(self, pos: int) -> RoundTrip | None:
        """The analysis' parse of the round trip at ``pos`` (a position in the index), restored,
        with its request's whole message history; ``None`` when none was kept (the caller parses).
        Safe to call from another thread than :meth:`step`'s."""
        chain: list[tuple[int, int | None, int, RoundTrip]] = []
        base: RoundTrip | None = None
        p = pos
        while True:
            with self._lock:
                hit = self._shown.get(p) if p != pos else None
            if hit is not None:
                base = hit
                break
            got = self._parses.get(p)
            if got is None:
                return None
            base_seq, keep, rt = got
            chain.append((p, base_seq, keep, rt))
            if base_seq is None:
                break
            q = self.index.position(base_seq)
            if q is None or q >= p:
                return None
            p = q
        for p, base_seq, keep, rt in reversed(chain):
            if base_seq is not None:
                if (
                    base is None
                    or base.request is None
                    or rt.request is None
                    or len(base.request.messages) < keep
                ):
                    return None
                rt.request.messages = base.request.messages[:keep] + rt.request.messages
            with self._lock:
                # A base needs only the request side (a response may be a 100 MB stream).
                self._shown[p] = (
                    rt.model_copy(update={"response": None}) if rt.response is not None else rt
                )
                self._shown.move_to_end(p)
                while len(self._shown) > SHOWN:
                    self._shown.popitem(last=False)
            base = rt
        return base

    def finish(self) -> tuple[dict[str, Any], float | None, dict[str, int]]:
        """The file is complete: report a torn tail and run the end-of-run checks (once; the
        findings they add appear in the summaries' ``findings``). Returns the run's header, the
        creation time it names else the first recorded start (``None``: neither), and the round
        trips by API family."""
        if not self.finished:
            self.finished = True
            tail = self.source.close_tail()
            self._analyse(tail, len(self.index) - len(tail))
            self.analyser.finish()
            self._store.flush()
            self._parses.flush()
            self.keep_analysis()  # when the file was hashed as it was read (take_kept)
        return self.index.header or {}, self.first_started, dict(self.families)

    def take_kept(self) -> bool:
        """Before the first :meth:`step`: take the kept analysis of this file when one checks
        out (:mod:`cassettes.reading.kept`), and stand finished, as if the file had been read and
        analysed; else hash the file as it is read, so that :meth:`keep_analysis` can keep it."""
        from cassettes.reading import kept

        assert self.records == 0 and self.index.consumed == 0, (
            "a kept analysis is taken before anything is read"
        )
        if kept.disabled() or self.index.size() < kept.MIN_BYTES:
            return False
        found = kept.take(self.index.path, self._dir)
        if found is None:
            self.index.digest = kept.hasher()
            return False
        try:
            parsed = _parsed(found)
        except ValueError:  # (rows this analyser does not read: analysed again, and kept anew)
            found.turns.close()
            self.index.digest = kept.hasher()
            return False
        self._adopt(found, *parsed)
        self.kept_as = found.generation
        return True

    def _summarised(self, records: int, problems: list[Problem]) -> Batch:
        """The next :data:`KEPT_STEP` turns of a kept analysis, summarised (a viewer's first
        screen need not wait for all of them); at the end when none is left."""
        turns: list[TurnSummary] = []
        if self._unsummarised is not None:
            for seq in self._unsummarised:
                turns.append(summarise(self.full_turn(seq, remember=False)))
                self.summaries[seq] = turns[-1]
                if len(turns) >= KEPT_STEP:
                    break
            else:
                self._unsummarised = None
        return Batch(
            turns=turns, records=records, problems=problems, at_end=self._unsummarised is None
        )

    def _adopt(
        self,
        found: Any,
        result: RunAnalysis,
        flagged: dict[int, tuple[int, list[Any]]],
        places: _Places,
    ) -> None:
        """Stand where the kept analysis ``found`` (:func:`~cassettes.reading.kept.take`, its rows
        read by :func:`_parsed`) left the reader that kept it."""
        state = found.state
        self.index.restore(state)
        self.analyser.first_index = state["first_index"]
        self.analyser.take(result, flagged)
        self._store.adopt(found.turns, found.turns_end, {"blocks": found.blocks,
                          "block": max(found.blocks, default=-1) + 1})  # fmt: skip
        self._places = places
        self.records, self.first_started = state["records"], state["first_started"]
        self.families = state["families"]
        self.source.skipped.clear()  # (the set its forks share)
        self.source.skipped.update(state["skipped"])
        if self._summarise:
            self._unsummarised = iter(list(self._places))
        self.finished = True

    def keep_analysis(self) -> bool:
        """Once finished: keep the analysis, for the next reader of the same bytes (when the file
        was hashed from its first byte as it was read: :meth:`take_kept`). Never raises."""
        from cassettes.analysis.model import Finding
        from cassettes.reading import kept

        index = self.index
        if (
            not self.finished
            or index.digest is None
            or index.hashed != index.consumed
            or index.pending
        ):
            return False
        result, flagged = self.analyser.kept()
        if len(result.conversations) > kept.MAX_CONVERSATIONS:
            return False  # (a kept analysis' conversations are read into memory)
        turns_file, _, turns = self._store.kept()
        findings = TypeAdapter(list[Finding])
        state = {
            **index.snapshot(), "first_index": self.analyser.first_index,
            "records": self.records, "families": self.families,
            "first_started": self.first_started, "skipped": sorted(self.source.skipped),
        }  # fmt: skip
        try:
            self.kept_as = kept.keep(
                index.path, index.hashed, index.digest.digest(), state,
                result.model_copy(update={"conversations": []}).model_dump_json().encode(),
                ((c.id, c.model_dump_json().encode()) for c in result.conversations),
                {s: (pos, findings.dump_json(f)) for s, (pos, f) in flagged.items()},
                ((seq, self._usage.get(seq), self._places.get(seq)) for seq in self._places),
                (turns_file, turns["blocks"]),
            )  # fmt: skip
        except (TypeError, ValueError):  # (not kept: analysed again next time)
            return False
        return self.kept_as is not None

    def full_turn(self, seq: int, *, remember: bool = True) -> Turn:
        """A turn with everything the analysis gave it, restored from the store (a small cache
        keeps the recently shown ones; ``remember=False`` for a pass over many turns, such as a
        search). Safe to call from another thread than :meth:`step`'s."""
        with self._lock:
            turn = self._turns.get(seq)
            if turn is not None:
                self._turns.move_to_end(seq)
                return turn
        turn = self._store.get(*self._places.get(seq))
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
        turns = {seq: self.full_turn(seq) for seq in self._places}
        # every field, the turns restored
        return RunAnalysis(**{**dict(a), "conversations": list(a.conversations), "turns": turns})

    def _reload(self, seq: int) -> tuple[Exchange, RoundTrip, Turn]:
        """An earlier round trip, read again for the analysis (a ``previous_response_id`` that
        points back at a turn whose context was released)."""
        ex = self.source.exchange_by_seq(seq)
        return ex, parse_exchange(ex), self.full_turn(seq).model_copy()

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

    def reread(self) -> _Reread:
        """Every round trip read so far, read again from disk in recording order on each pass
        (for commands that go through a whole run once its analysis is done: memory holds one
        round trip at a time, not the run)."""
        return _Reread(self)

    def close(self) -> None:
        """Delete the store of full turns and parses (the summaries stay readable)."""
        self._store.close()
        self._parses.close()


def _parsed(found: Any) -> tuple[RunAnalysis, dict[int, tuple[int, list[Any]]], _Places]:
    """A kept analysis' rows (:class:`~cassettes.reading.kept.Kept`) as the reader holds them:
    the analysis with its conversations, the findings by turn, the turns' places. Raises
    ``ValueError`` for rows it cannot read."""
    from cassettes.analysis.model import Conversation, Finding

    try:
        result = RunAnalysis.model_validate_json(found.state["analysis"])
        result.conversations = [Conversation.model_validate_json(c) for c in found.conversations]
        findings = TypeAdapter(list[Finding])
        flagged = {s: (pos, findings.validate_json(f)) for s, (pos, f) in found.findings.items()}
        places = _Places()
        for seq, block, offset, length in found.places:
            places.put(seq, (block, offset, length))
    except (KeyError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return result, flagged, places


def _keeping(views: Iterator[Any], writer: Any) -> Iterator[Any]:
    """``views``, each kept by ``writer`` before it is handed on; committed once all went by."""
    try:
        for v in views:
            writer.add(v)
            yield v
        writer.commit()
    finally:
        writer.abandon()


class _Reread:
    """The exchanges and parsed round trips of an :class:`RunReader`, read again from disk in
    recording order on every pass: :attr:`pairs` (exchange and round trip together),
    :attr:`exchanges` and :attr:`roundtrips` are sized iterables (a small cache of the latest
    records serves the same record to each), and :attr:`turns` maps a turn's seq to its full turn,
    restored from the run's store.

    The records the analysis skipped (unreadable) are skipped here too."""

    def __init__(self, run: RunReader, cache: int = 8) -> None:
        self._run = run
        # The run's records again, through a file handle and a cache of bodies of this pass's own.
        self._records = run.source.fork(BODY_CACHE, keep_open=True)
        # position → [exchange, round trip or None]
        self._recent: OrderedDict[int, list[Any]] = OrderedDict()
        self._cache = cache
        self.exchanges = _Column(self, 0)
        self.roundtrips = _Column(self, 1)
        self.pairs = _Column(self, 2)
        self.turns = _Turns(run)

    def __len__(self) -> int:
        return len(self._records)

    def positions(self) -> Iterator[int]:
        return self._records.positions()

    def _entry(self, pos: int) -> list[Any]:
        hit = self._recent.get(pos)
        if hit is not None:
            return hit
        entry = [self._records.exchange_at(pos), None]
        self._recent[pos] = entry
        while len(self._recent) > self._cache:
            self._recent.popitem(last=False)
        return entry

    def by_seq(self, seq: int) -> tuple[Exchange, RoundTrip] | None:
        """The round trip with this seq (the last one when a seq repeats), read again from disk."""
        pos = self._run.index.position(seq)
        if pos is None or pos in self._records.skipped:
            return None
        return self.pair_at(pos)

    def exchange_at(self, pos: int) -> Exchange:
        ex: Exchange = self._entry(pos)[0]
        return ex

    def roundtrip_at(self, pos: int) -> RoundTrip:
        entry = self._entry(pos)
        if entry[1] is None:
            entry[1] = self._run.parse_at(pos)  # the analysis' parse: not parsed again
        if entry[1] is None:
            ex = entry[0]
            base_seq = (ex.history_delta or {}).get("base")
            base = None
            if isinstance(base_seq, int):  # parse only what it appended to a recent request
                base = next(
                    (
                        e[1]
                        for e in self._recent.values()
                        if e[1] is not None and e[0].seq == base_seq
                    ),
                    None,
                )
            entry[1] = parse_exchange(ex, base)
        rt: RoundTrip = entry[1]
        return rt

    def pair_at(self, pos: int) -> tuple[Exchange, RoundTrip]:
        return self.exchange_at(pos), self.roundtrip_at(pos)

    def close(self) -> None:
        self._records.close()


class _Column:
    """One column of a :class:`_Reread` (exchanges, round trips, or both in pairs): sized,
    iterable, read lazily."""

    def __init__(self, reread: _Reread, which: int) -> None:
        self._reread = reread
        self._which = which

    def __len__(self) -> int:
        return len(self._reread)

    def __iter__(self) -> Iterator[Any]:
        get = self._get()
        return (get(pos) for pos in self._reread.positions())

    def __getitem__(self, k: int) -> Any:
        """The k-th round trip (negative counts from the end), read again from disk."""
        n = len(self)
        if not -n <= k < n:
            raise IndexError(k)
        return self._get()(self._reread._records.nth(k % n))

    def _get(self) -> Any:
        r = self._reread
        return (r.exchange_at, r.roundtrip_at, r.pair_at)[self._which]


class _Turns(Mapping[int, Turn]):
    """seq → full turn, restored from an :class:`RunReader`'s store on each lookup."""

    def __init__(self, run: RunReader) -> None:
        self._run = run

    def __getitem__(self, seq: int) -> Turn:
        if seq not in self._run._places:
            raise KeyError(seq)
        return self._run.full_turn(seq, remember=False)

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and seq in self._run._places

    def __iter__(self) -> Iterator[int]:
        return iter(self._run._places)

    def __len__(self) -> int:
        return len(self._run._places)
