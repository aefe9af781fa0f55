"""Access to the real recordings vendored under tests/corpus (copied from ../shared/corpus)."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from looptap.cassettes.storage import load_vcr
from looptap.cassettes.wire import Exchange

CORPUS = Path(os.environ.get("LOOPTAP_CORPUS") or Path(__file__).parent / "corpus")


#: Words a file's text must hold, case-folded: each entry, or one of an entry's alternatives.
Mentioning = tuple[bytes | tuple[bytes, ...], ...]


def corpus_files(pattern: str = "**/*.yaml", mentioning: Mentioning = ()) -> list[Path]:
    """Cassette files (gRPC ``*.xai.yaml`` recordings excluded: they are not HTTP LLM traffic);
    with ``mentioning``, only those whose text holds those words: a cheap first cut for a module
    that names its parametrized cases at collection (issue 105: reading and parsing the whole
    corpus there cost every xdist worker 19 s), its test of the whole corpus showing that the cut
    lost no case."""
    return sorted(
        p
        for p in CORPUS.glob(pattern)
        if not p.name.endswith(".xai.yaml") and (not mentioning or _mentions(p, mentioning))
    )


def _mentions(path: Path, mentioning: Mentioning) -> bool:
    text = path.read_bytes().lower()
    return all(
        any(w in text for w in (entry if isinstance(entry, tuple) else (entry,)))
        for entry in mentioning
    )


@cache
def _pristine(path: Path) -> tuple[Exchange, ...]:
    """``load_vcr(path)`` once per process; never handed out (see :func:`load`)."""
    return tuple(load_vcr(path))


def load(path: Path) -> list[Exchange]:
    """``load_vcr(path)`` of a corpus file, the YAML read once per process (a dozen test modules
    walk the whole corpus: about 8 s each): a deep copy every call, so a test that changes its
    exchanges (``seq``, a parse it caches, a body it edits) changes nobody else's. A file
    ``load_vcr`` refuses raises every time."""
    from looptap.cassettes.wire import UNSET

    # the "not parsed yet" marker stays itself
    return list(copy.deepcopy(_pristine(path), {id(UNSET): UNSET}))


@cache
def _load(path: Path) -> tuple[Exchange, ...]:
    return tuple(load(path))


def corpus_exchanges(
    pattern: str = "**/*.yaml", mentioning: Mentioning = ()
) -> Iterator[tuple[Path, int, Exchange]]:
    for path in corpus_files(pattern, mentioning):
        for i, ex in enumerate(_load(path)):
            yield path, i, ex


def rel(path: Path) -> str:
    return str(path.relative_to(CORPUS))
