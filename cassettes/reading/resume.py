"""A reader's working state, kept beside its finished analysis so that a file that grew is
continued from where the analysis stopped instead of analysed again from its first byte
(docs/kept-analysis.md, "A file that grew").

What is kept is what :class:`~cassettes.reading.incremental.RunReader` holds before the
end-of-run checks (which change it): the offset index, the analyser with its threader and the
checks' memory of each conversation (:class:`~cassettes.analysis.run.RunAnalyser`), where each
turn and parse sits in the stores, and the tables the analysis spilled to disk
(:class:`~cassettes.analysis.spill.Spill`: a copy of each file, kept as sections of their own).
It is pickled here and unpickled only by :mod:`cassettes.reading.kept`'s caller once the kept
file's MAC checks out under this machine's key (the same trust as the finished analysis').

The reader itself is not pickled: what refers to it (the analyser's hooks, bound methods of the
reader) is named, and bound to the reader that continues.
"""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import IO, Any

from cassettes.analysis.spill import Spill
from cassettes.reading.incremental import _Pickler
from cassettes.reading.packed import compressor, decompressor

# the reader's own: not a public way to read a run
__all__: list[str] = []


class _Dumper(_Pickler):
    """:class:`_Pickler` (models and enums compactly) naming the reader and each spill."""

    def __init__(self, file: IO[bytes], reader: object) -> None:
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self._reader = reader
        self.spills: list[Spill] = []

    def persistent_id(self, obj: Any) -> Any:
        if obj is self._reader:
            return "reader"
        if isinstance(obj, Spill):
            for i, known in enumerate(self.spills):
                if known is obj:
                    return ("spill", i, obj.tables)
            self.spills.append(obj)
            return ("spill", len(self.spills) - 1, obj.tables)
        return None


class _Loader(pickle.Unpickler):
    def __init__(self, file: IO[bytes], reader: object, spills: list[IO[bytes] | None]) -> None:
        super().__init__(file)
        self._reader = reader
        self._files = spills
        self._spills: dict[int, Spill] = {}

    def persistent_load(self, pid: Any) -> Any:
        if pid == "reader":
            return self._reader
        if isinstance(pid, tuple) and len(pid) == 3 and pid[0] == "spill":
            _, i, tables = pid
            if not isinstance(i, int) or not 0 <= i < len(self._files):
                raise pickle.UnpicklingError(f"no spill {i!r}")
            spill = self._spills.get(i)
            if spill is None:
                spill = self._spills[i] = Spill.adopt(self._files[i], int(tables))
            return spill
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


def dump(
    state: dict[str, Any], reader: object, directory: str | Path | None
) -> tuple[IO[bytes], int, list[tuple[IO[bytes] | None, int]]]:
    """``state`` pickled into an anonymous temporary file (the reader named, not pickled), its
    length, and a copy of the file of each spill it refers to with its length (``None``, 0:
    nothing spilled). Raises what pickling raises."""
    out: IO[bytes] = tempfile.TemporaryFile(prefix="looptap-working-", dir=directory)
    made: list[IO[bytes]] = [out]
    try:
        # compressed as it is pickled (zstd level 1: the recent round trips' histories, most of
        # it, are text)
        with compressor().stream_writer(out, closefd=False) as packed:
            dumper = _Dumper(packed, reader)
            dumper.dump(state)
        length = out.tell()
        spills: list[tuple[IO[bytes] | None, int]] = []
        for spill in dumper.spills:
            copy: IO[bytes] = tempfile.TemporaryFile(prefix="looptap-working-", dir=directory)
            made.append(copy)
            n = spill.backup(copy)
            if not n:
                made.remove(copy)
                copy.close()
            spills.append((copy, n) if n else (None, 0))
        made = []
        return out, length, spills
    finally:
        for f in made:
            f.close()


def load(file: IO[bytes], reader: object, spills: list[IO[bytes] | None]) -> Any:
    """What :func:`dump` pickled, read from ``file``'s start, the reader bound to ``reader`` and
    each spill made anew from its copy. Only for what this machine's key vouched for
    (:func:`cassettes.reading.kept.take`)."""
    file.seek(0)
    with decompressor().stream_reader(file, closefd=False) as unpacked:
        return _Loader(unpacked, reader, spills).load()
