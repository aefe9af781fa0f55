"""The JSON documents of a file an import reads, bounded: a file that is one document, or JSON
Lines (one a line), never holding more than :data:`DOC_LIMIT` bytes of it at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .. import bounds
from ..errors import ImportFormatError

__all__ = ["read_docs"]

#: The largest JSON document (a file read whole, or one line) an import parses.
DOC_LIMIT = bounds.MAX_DECODED_BYTES


def read_docs(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, document) of a JSON file or of each line of a JSON Lines file; 0 for a file
    that is one document. Never holds more than :data:`DOC_LIMIT` bytes of it."""
    try:
        fh: BinaryIO = path.open("rb")
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with fh:
        size = path.stat().st_size
        if size <= DOC_LIMIT:
            data = fh.read()
            try:
                yield 0, orjson.loads(data)
                return
            except orjson.JSONDecodeError:
                pass  # JSON Lines, or damaged: said line by line below
            fh.seek(0)
        yield from _lines(path, fh)


def _lines(path: Path, fh: BinaryIO) -> Iterator[tuple[int, Any]]:
    for n, line in enumerate(iter(lambda: fh.readline(DOC_LIMIT + 1), b""), 1):
        if len(line) > DOC_LIMIT:
            raise ImportFormatError(
                f"{path}: line {n} is longer than {DOC_LIMIT >> 20} MiB (one JSON document a "
                "line is expected); not imported"
            )
        if not line.strip():
            continue
        try:
            yield n, orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            where = "is cut short" if not line.endswith(b"\n") else "is not JSON"
            raise ImportFormatError(
                f"{path}: line {n} {where} ({str(exc).split(':')[0]}); nothing imported"
            ) from None
