"""A looptap cassette of a run in any format (:func:`cassette_of`), for readers that follow a
cassette file as it is written (the inspector): another tool's file is imported into a temporary
one first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import CassetteError
from ._formats import detect
from ._run import _read

__all__ = ["cassette_of"]


@contextmanager
def cassette_of(path: str | Path, *, live: bool = False) -> Iterator[Path]:
    """A looptap cassette holding the run at ``path``, for readers that follow a cassette file
    (the inspector): the file itself when it is one (or, with ``live``, always: a recording being
    written), or when its format cannot be told (the reader then says what is wrong); else the run
    imported into a temporary cassette (redacted, as ``looptap import`` writes it), deleted on
    exit."""
    p = Path(path)
    kind = "looptap"
    if not live:
        try:
            kind = detect(p)
        except (CassetteError, OSError):
            kind = "looptap"
    if kind not in ("vcr", "mitmproxy"):
        yield p
        return
    import shutil
    import tempfile

    from ..recording.pipeline import CassetteWriter

    run = _read(p, kind, whole=True)  # the format told above, not told again
    tmp = Path(tempfile.mkdtemp(prefix="looptap-"))
    try:
        out = tmp / f"{p.name}.jsonl"
        with CassetteWriter(out, meta={"source": kind, "imported_from": p.name}) as w:
            for ex in run.exchanges:
                w.append(ex)
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
