"""The stores behind a :class:`~cassettes.reading._incremental.RunReader`: :class:`TurnStore`
(each turn's full JSON), :class:`ParseStore` (each round trip's parse as the analysis made it,
a chain of requests kept as what each appended) and :class:`OwnViews` (each round trip's own
part of its printed view, for a run to be printed), each a table of compressed blocks in the
reader's temporary SQLite file (:class:`~cassettes.analysis.spill.Spill`: gone when closed),
and :class:`Places` (where each turn sits in the first, by seq)."""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson
from pydantic_core import PydanticSerializationError

from ..analysis import Turn, spill
from ..models import Part
from ..parsing import RoundTrip

# the reader's own stores (cassettes.reading._incremental): no public surface
__all__ = ["Pieces", "Unsealed", "as_sealed", "compressor", "decompressor", "json_lines"]


def compressor() -> Any:
    """A zstd compressor at level 1 (imported on the first block: a small run never fills one)."""
    import zstandard

    return zstandard.ZstdCompressor(level=1)


def decompressor() -> Any:
    """A zstd decompressor, for blocks this process wrote."""
    import zstandard

    return zstandard.ZstdDecompressor()


class Unsealed(ValueError):
    """What the redactor would mask, in an analysis to keep (a kept analysis keeps none of it)."""


def as_sealed(data: bytes, packed: bool = False) -> bytes:
    """``data`` when the redactor leaves it (decompressed, if ``packed``) as it is
    (docs/redaction.md, "One gate"), else :class:`Unsealed`."""
    from ..recording import seal  # (here: show's start never loads the redactor; a keep is rare)

    text = decompressor().decompressobj().decompress(data) if packed else data
    if seal(text) != text:
        raise Unsealed("an unmasked secret")
    return data


def json_lines(blocks: Iterable[tuple[int, bytes]]) -> Iterator[Any]:
    """The JSON values of compressed blocks of JSON lines (:meth:`TurnStore.blocks`, or rows of
    a kept analysis), one by one, in order."""
    for _, block in blocks:
        for line in decompressor().decompress(block).splitlines():
            yield orjson.loads(line)


class Pieces:
    """JSON lines written as they come (the state a grown file is continued from,
    :func:`~._analysis_cache.packed`), gathered into pieces of at least :attr:`PIECE` bytes of
    whole lines (a longer line is a piece of its own), each checked by the redactor's gate
    (:func:`as_sealed`: :class:`Unsealed` when it masks something) and compressed on its own into
    a row of the reader's temporary SQLite file (a table of its own), so that neither the JSON nor
    its compressed bytes are ever held whole: kept as rows of their own (:meth:`rows`), read back
    a piece at a time. ``limit``: bytes of JSON at most (:class:`OverflowError` past it)."""

    #: Bytes of JSON a piece holds at least (a block of :class:`TurnStore`'s size).
    PIECE = 256 * 1024

    def __init__(self, rows: spill.Spill, limit: int) -> None:
        self._rows, self._table, self._limit = rows, rows.table(), limit
        self._filling = bytearray()
        self._n = self.size = 0

    def write(self, line: bytes) -> None:
        """Add ``line`` (whole: a piece is cut between lines only)."""
        self.size += len(line)
        if self.size > self._limit:
            raise OverflowError("more than a kept state holds")
        self._filling += line
        if len(self._filling) >= self.PIECE:
            self.flush()

    def flush(self) -> None:
        """Write the lines gathered (the last piece: nothing more is coming)."""
        if self._filling:
            data = as_sealed(bytes(self._filling))
            self._filling = bytearray()
            self._rows.write(self._table, [(self._n, compressor().compress(data))])
            self._n += 1

    def rows(self) -> Iterator[tuple[int, bytes]]:
        """Each piece (its number, its compressed JSON), in order (flushed first)."""
        assert not self._filling, "flush the pieces before keeping them"
        return self._rows.rows(self._table)


#: KiB of SQLite's page cache for a store's file: its blocks are written once and read back
#: through the store's own cache of decompressed blocks (SQLite's default, 2 MB, added that to a
#: first ``show``'s peak).
CACHE = 64
#: Links of a chain of requests that each extend the previous one (:class:`ParseStore`) between two
#: checkpoints, and checkpoints between two whole message lists: a checkpoint keeps the messages
#: appended since the previous checkpoint, so restoring a round trip reads at most
#: ``2 * CHECKPOINT - 1`` records, and a conversation of n turns keeps its history whole
#: ``n / CHECKPOINT²`` times, not ``n / CHECKPOINT`` (whole lists were most of what a long
#: conversation stored: 114 of 178 MB for a 101 MB run of 100-turn conversations).
CHECKPOINT = 16
#: Parses restored lately (their request side), kept as bases for restoring the next one's
#: request (its kept messages are its base's): the latest turn of that many conversations.
SHOWN = 64


class TurnStore:
    """Full turns as JSON, compressed a block of turns at a time into rows of a
    :class:`~cassettes.analysis.spill.Spill` (the reader's temporary SQLite file, gone when
    closed; a table of its own): one thread puts while viewer threads get.

    A turn's place is known when it is put (block, offset, length in the block's JSON), so the
    caller keeps three integers per turn. The block being filled is read from memory. A full
    block is compressed by the put that filled it, with zstd at level 1 (the core's own
    dependency for ``Content-Encoding: zstd``): on a coding agent's turns and parses 4x faster
    than zlib at its fastest level, to half the size (442 vs 105 MB/s, 27:1 vs 14:1), and a
    block of similar turns compresses far better than turns one by one.
    """

    #: Uncompressed bytes per block (about 25 turns of a coding agent).
    BLOCK = 256 * 1024

    def __init__(self, rows: spill.Spill | None = None) -> None:
        self._rows = rows if rows is not None else spill.Spill(cache=CACHE)
        self._table = self._rows.table()
        self._lock = threading.Lock()
        self._filling = bytearray()
        self._block = 0  # number of the block being filled
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
            if len(self._filling) >= self.BLOCK:
                self._seal()
            return where

    def _seal(self) -> None:
        """Write the block being filled, compressed (the caller holds the lock)."""
        self._rows.write(self._table, [(self._block, compressor().compress(self._filling))])
        self._block += 1
        self._filling = bytearray()

    def _block_data(self, block: int) -> bytes | bytearray:
        """A block's JSON (the caller holds the lock)."""
        if block == self._block:
            return self._filling
        hit = self._recent.get(block)
        if hit is not None:
            self._recent.move_to_end(block)
            return hit
        packed = self._rows.value(self._table, block)
        if packed is None:
            raise KeyError(block)
        raw: bytes = decompressor().decompress(packed)
        self._recent[block] = raw
        while len(self._recent) > 4:
            self._recent.popitem(last=False)
        return raw

    def get(self, block: int, offset: int, length: int) -> Turn:
        return Turn.model_validate_json(self.get_data(block, offset, length))

    def get_data(self, block: int, offset: int, length: int) -> bytes:
        with self._lock:
            if self._closed:
                raise ValueError("the store of full turns is closed")
            return bytes(self._block_data(block)[offset : offset + length])

    def flush(self) -> None:
        """Write the block being filled: nothing more is coming (the run is finished), so
        nothing needs to stay in memory."""
        with self._lock:
            if self._filling and not self._closed:
                self._seal()

    def blocks(self) -> Iterator[tuple[int, bytes]]:
        """Each block (its number, its compressed JSON), in order: what a kept analysis keeps of
        the store (flushed first)."""
        assert not self._filling, "flush the store before keeping it"
        return self._rows.rows(self._table)

    def adopt(self, blocks: Iterable[tuple[int, bytes]]) -> None:
        """Hold the blocks of a kept analysis' store (:meth:`blocks`), in place of its own."""
        last = -1

        def each() -> Iterator[tuple[int, bytes]]:
            nonlocal last
            for block, data in blocks:
                last = max(last, block)
                yield block, data

        with self._lock:
            self._rows.db(self._table).execute(f"DELETE FROM {self._table}")
            self._rows.write(self._table, each())
            self._block, self._filling = last + 1, bytearray()
            self._recent.clear()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._rows.close()
            self._recent.clear()
            self._filling = bytearray()


def _part_lists(rt: RoundTrip) -> Iterator[list[Part]]:
    """The lists of parts a parse holds, in a fixed order: the request's system parts, each
    request message's parts, the response's."""
    if rt.request is not None:
        yield rt.request.system
        yield from (m.parts for m in rt.request.messages)
    if rt.response is not None:
        yield rt.response.parts


def _row(base_seq: int | None, keep: int, rt: RoundTrip) -> bytes | None:
    """A parse as a plain row: a head line (base seq, messages kept from it, the parse's
    incremental base, the poll it was read from, and where a tool result names itself: a field
    the parse's JSON leaves out) and the parse's JSON, every field (a list a parser appends to
    after making its model is not among the fields "set": leaving those out lost them); ``None``
    for one JSON cannot hold (text with a lone surrogate: the pass parses that round trip
    again). Read back, every field is set: nothing reads which fields of a parse were."""
    private = rt.__pydantic_private__ or {}
    named = [
        [i, j]
        for i, parts in enumerate(_part_lists(rt))
        for j, p in enumerate(parts)
        if p.tool_result is not None and p.tool_result.named
    ]
    head = orjson.dumps(
        [base_seq, keep, private.get("_reused"), private.get("_polled_from"), named]
    )
    try:
        return head + b"\n" + rt.__pydantic_serializer__.to_json(rt)
    except PydanticSerializationError:
        return None


def _parse(row: bytes) -> tuple[int | None, int, RoundTrip]:
    """What :func:`_row` made ``row`` of (read by the process that wrote it)."""
    head, _, body = row.partition(b"\n")
    base_seq, keep, reused, polled_from, named = orjson.loads(head)
    rt = RoundTrip.model_validate_json(body)
    private = rt.__pydantic_private__
    assert private is not None
    private["_reused"] = tuple(reused) if reused is not None else None
    private["_polled_from"] = polled_from
    if named:
        lists = list(_part_lists(rt))
        for i, j in named:
            result = lists[i][j].tool_result
            assert result is not None
            result.named = True
    return base_seq, keep, rt


class _Chain(NamedTuple):
    """Where a chain of parses stands after one of its links (see :class:`ParseStore`)."""

    checkpoint: int  # seq of the chain's latest checkpoint
    kept: int  # messages every link since that checkpoint kept of its base
    checkpoints: int  # checkpoints since the chain last kept its messages whole


class ParseStore:
    """Each round trip's parse as the analysis made it (:attr:`RunAnalyser.on_parse`), by position
    in the index, kept compactly in a store like the turns' (compressed blocks in an anonymous
    temporary file of this process), as plain rows (:func:`_row`: JSON, read back by validating
    it). A request parsed against the one it extends keeps only the messages it appended
    and names its base (seq, messages kept). Every :data:`CHECKPOINT`-th link of such a chain is
    a checkpoint: it names the previous checkpoint as its base instead (keeping what every link
    since kept of its own base), and every :data:`CHECKPOINT`-th checkpoint keeps its messages
    whole; restoring a round trip reads at most ``2 * CHECKPOINT - 1`` records."""

    def __init__(self, rows: spill.Spill | None = None) -> None:
        self._store = TurnStore(rows)
        # block, offset, length per position (-1: no parse kept; a block is 256 KB)
        self._where = array("i")
        # per position: links to the nearest checkpoint or whole message list
        self._depth = array("B")
        # position → (seq of its chain's latest checkpoint, messages every link since kept of its
        # base, checkpoints since the last whole list), for the latest round trips: as many as the
        # analysis holds conversations in memory (spill.KEEP); a request extending an older one
        # keeps its messages whole at its next checkpoint
        self._chains: OrderedDict[int, _Chain] = OrderedDict()
        # Parses restored lately, by position, request side only (bases for the next ones).
        self._shown: OrderedDict[int, RoundTrip] = OrderedDict()
        self._lock = threading.Lock()

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
        row = _row(base_seq, keep, packed)
        self._where.extend(self._store.put_data(row) if row is not None else (-1, 0, 0))
        self._depth.append(depth)

    def get(self, pos: int) -> tuple[int | None, int, RoundTrip] | None:
        """(base seq or ``None``, messages kept from it, the parse with the rest) at ``pos``."""
        if not 0 <= pos < len(self._depth) or self._where[3 * pos] < 0:
            return None
        w = self._where
        return _parse(self._store.get_data(w[3 * pos], w[3 * pos + 1], w[3 * pos + 2]))

    def restore(self, pos: int, position: Callable[[int], int | None]) -> RoundTrip | None:
        """The parse at ``pos``, restored with its request's whole message history from the chain
        of its bases (``position``: a seq's position in the index); ``None`` when none was kept.
        Safe to call from another thread than :meth:`put`'s."""
        chain: list[tuple[int, int | None, int, RoundTrip]] = []
        base: RoundTrip | None = None
        p = pos
        while True:
            with self._lock:
                hit = self._shown.get(p) if p != pos else None
            if hit is not None:
                base = hit
                break
            got = self.get(p)
            if got is None:
                return None
            base_seq, keep, rt = got
            chain.append((p, base_seq, keep, rt))
            if base_seq is None:
                break
            q = position(base_seq)
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

    def flush(self) -> None:
        self._store.flush()

    def close(self) -> None:
        self._store.close()


class OwnViews:
    """Each round trip's own part of its printed view (``show --json``'s object as its exchange
    and parse alone make it: :func:`~._show_objects.own_view`), as the analysis parsed it, by
    position in the index: JSON, kept in a store like the turns' (compressed blocks in the
    reader's temporary SQLite file), so that a printing pass takes it from there instead of
    reading the record again and restoring its parse. A position without one (``None``: none
    was made, or it has no exact JSON form) is made again by the pass."""

    def __init__(self, rows: spill.Spill | None = None) -> None:
        self._store = TurnStore(rows)
        self._where = array("q")  # block, offset, length per position (-1: none kept)

    def put(self, pos: int, data: bytes | None) -> None:
        """Keep ``data`` for the round trip at ``pos`` (``None``: none)."""
        if pos * 3 < len(self._where):
            raise ValueError(f"a view part is kept once per position ({pos})")
        while len(self._where) < 3 * pos:  # (records the analysis skipped, or parsed none of)
            self._where.extend((-1, 0, 0))
        self._where.extend(self._store.put_data(data) if data is not None else (-1, 0, 0))

    def get(self, pos: int) -> bytes | None:
        """The JSON kept for the round trip at ``pos`` (``None``: none)."""
        w = self._where
        if not 0 <= 3 * pos < len(w) or w[3 * pos] < 0:
            return None
        return self._store.get_data(w[3 * pos], w[3 * pos + 1], w[3 * pos + 2])

    def flush(self) -> None:
        self._store.flush()

    def close(self) -> None:
        self._store.close()


#: A turn's usage, as a kept analysis' row holds it: conversation, input and output tokens, cost
#: (a decimal's text).
Usage = tuple[str, int | None, int | None, str | None]


class Places:
    """Where each turn sits in the store, by seq, and its usage (:data:`Usage`, for the rows of a
    kept analysis): seven integers per turn in arrays and a cost's text in one buffer of bytes (a
    dict of tuples costs ten times that, a ``str`` a turn 40 bytes more), looked up by bisection
    while seqs come in increasing order (a cassette's do), through a dict once one does not."""

    def __init__(self) -> None:
        self._seqs = array("q")
        self._where = array("q")  # block, offset, length per turn
        self._dict: dict[int, int] | None = None  # seq → position, once seqs stop increasing
        # usage per turn: conversation (0: none, else 1 + its number), tokens (-1: none), cost
        self._convs: dict[str, int] = {}
        self._names: list[str] = []
        self._conv = array("q")
        self._tokens = array("q")
        # a turn's cost: its text's start and end in ``_text`` (-1: none); a text set again
        # (a turn moved) is appended, the old bytes left in place
        self._costs = array("q")
        self._text = bytearray()

    def put(self, seq: int, where: tuple[int, int, int], usage: Usage | None = None) -> None:
        if self._dict is None and self._seqs and seq <= self._seqs[-1]:
            self._dict = {s: i for i, s in enumerate(self._seqs)}
        if self._dict is not None:
            self._dict[seq] = len(self._seqs)
        self._seqs.append(seq)
        self._where.extend(where)
        if usage is not None:
            self._set(len(self._seqs) - 1, usage)

    def move(self, seq: int, where: tuple[int, int, int], usage: Usage | None = None) -> None:
        """A placed turn kept again elsewhere in the store (re-read by a later request)."""
        i = self._pos(seq)
        if i is None:
            raise KeyError(seq)
        self._where[3 * i : 3 * i + 3] = array("q", where)
        if usage is not None:
            self._set(i, usage)

    def _set(self, i: int, usage: Usage) -> None:
        grow = i + 1 - len(self._conv)  # (columns made for a run to be kept only)
        if grow > 0:
            self._conv.extend([0] * grow)
            self._tokens.extend([-1] * 2 * grow)
            self._costs.extend([-1] * 2 * grow)
        conv, tokens_in, tokens_out, cost = usage
        number = self._convs.get(conv)
        if number is None:
            self._names.append(conv)
            number = self._convs[conv] = len(self._names)
        self._conv[i] = number
        for k, n in enumerate((tokens_in, tokens_out)):
            self._tokens[2 * i + k] = n if n is not None and n >= 0 else -1
        if cost is None:
            self._costs[2 * i : 2 * i + 2] = array("q", (-1, -1))
        else:
            start = len(self._text)
            self._text += cost.encode("utf-8", "surrogatepass")
            self._costs[2 * i : 2 * i + 2] = array("q", (start, len(self._text)))

    def add_usage(self, usage: Mapping[int, Usage]) -> None:
        """The usage of turns already placed (a kept analysis' rows)."""
        for seq, row in usage.items():
            i = self._pos(seq)
            if i is not None:
                self._set(i, row)

    def usage(self, seq: int) -> Usage | None:
        """The turn's usage (``None``: none given)."""
        i = self._pos(seq)
        if i is None or i >= len(self._conv) or not self._conv[i]:
            return None
        tokens_in, tokens_out = (n if n >= 0 else None for n in self._tokens[2 * i : 2 * i + 2])
        start, end = self._costs[2 * i : 2 * i + 2]
        cost = None if start < 0 else self._text[start:end].decode("utf-8", "surrogatepass")
        return self._names[self._conv[i] - 1], tokens_in, tokens_out, cost

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
