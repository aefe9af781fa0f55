"""The stores behind a :class:`~cassettes.reading._incremental.RunReader`: :class:`TurnStore`
(each turn's full JSON, in an anonymous temporary file of compressed blocks, gone when closed)
and :class:`Places` (where each turn sits in it, by seq)."""

from __future__ import annotations

import tempfile
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator
from typing import IO, Any

from cassettes.analysis import Turn
from cassettes.reading._compression import compressor, decompressor

# the reader's own stores (cassettes.reading._incremental): no public surface
__all__: list[str] = []


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

    def __init__(self) -> None:
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
                self._file = tempfile.TemporaryFile(prefix="looptap-turns-", buffering=0)
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

    def kept(self) -> tuple[IO[bytes] | None, int, dict[str, Any]]:
        """Its file (``None``: nothing written yet), the bytes it holds, and where each block is
        in it: what a kept analysis keeps of it (the store must be flushed)."""
        with self._lock:
            assert not self._filling and not self._waiting, "flush the store before keeping it"
            return self._file, self._end, {"blocks": dict(self._blocks), "block": self._block}

    def adopt(self, file: IO[bytes], end: int, state: dict[str, Any]) -> None:
        """Read the blocks of a kept analysis' store from ``file`` (this process's own copy)."""
        file.flush()
        with self._lock:
            self._file, self._end = file, end
            self._blocks, self._block = dict(state["blocks"]), int(state["block"])
            self._filling, self._waiting = bytearray(), {}
            self._recent.clear()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None
            self._waiting.clear()
            self._recent.clear()
            self._filling = bytearray()


class Places:
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
