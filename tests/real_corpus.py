"""Access to the real recordings vendored under tests/corpus (copied from ../shared/corpus)."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

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


#: What :func:`corpus_cover` reads of a file's text: each request's URI, method and status, and
#: the words that tell a streamed request or answer from a whole one.
_URI = re.compile(rb"^\s*uri: ([^\s?]+)", re.M)
_CODE = re.compile(rb"^\s*code: (\d+)", re.M)
_METHOD = re.compile(rb"^\s*method: (\w+)", re.M)
_IDS = re.compile(rb"[0-9a-f-]{8,}|\d+")
_STREAMED = (b"text/event-stream", b"application/vnd.amazon.eventstream", b"x-ndjson",
             b"stream: true", b'"stream":true', b'"stream": true')  # fmt: skip


@cache
def corpus_cover() -> tuple[Path, ...]:
    """The corpus files a walk of the whole corpus takes by default (issue 105: the walk of
    every file is the nightly run's): smallest first, every file whose text adds a wire shape no
    file before it had (an endpoint, its ids and numbers taken out; a method; a status; a
    streamed request or answer). 141 of 1,099 files, 2.5 of 21 MB, the last time it was
    counted; read from the text alone, so choosing costs no parse (once a process)."""
    seen: set[bytes] = set()
    cover = []
    for path in sorted(corpus_files(), key=lambda p: (p.stat().st_size, p)):
        text = path.read_bytes()
        shapes = {b"u" + _IDS.sub(b"N", u) for u in _URI.findall(text)}
        shapes |= {b"c" + c for c in _CODE.findall(text)}
        shapes |= {b"m" + m for m in _METHOD.findall(text)}
        shapes |= {w for w in _STREAMED if w in text}
        if not shapes <= seen:
            cover.append(path)
            seen |= shapes
    return tuple(sorted(cover))


#: The files whose round trips show every finding code, family, operation and stream flag (and
#: every field of ``show --json`` an export round trip changes) of the whole corpus, kept by
#: tests/interop/test_export_round_trip.py's nightly case (which names a new list when it no
#: longer does).
FINDINGS_COVER = Path(__file__).parent / "interop" / "fixtures" / "round_trip_cover.txt"


@cache
def findings_cover() -> tuple[Path, ...]:
    """:func:`corpus_cover` and the files of :data:`FINDINGS_COVER`: each wire shape and each
    finding code of the corpus, 178 of 1,099 files (3.9 of 21 MB) the last time it was counted.
    The default run's walk of the corpus where a test is about what the analysis finds (issue
    105); the nightly run walks every file."""
    listed = [CORPUS / n for n in FINDINGS_COVER.read_text().splitlines()
              if n and not n.startswith("#")]  # fmt: skip
    missing = sorted(str(p.relative_to(CORPUS)) for p in listed if not p.is_file())
    assert not missing, f"{FINDINGS_COVER.name} names files the corpus has not: {missing[:3]}"
    return tuple(sorted({*listed, *corpus_cover()}))


def cover_or_every(cost: str) -> pytest.MarkDecorator:
    """A corpus walk's ``files`` parameter (read by :func:`walked`): ``"cover"``
    (:func:`findings_cover`) by default, ``"every"`` corpus file in the nightly run (issue 105);
    ``cost``: what the whole corpus costs, said in the skip reason."""
    every = pytest.mark.slow(reason=f"every corpus file, not its cover: {cost}")
    return pytest.mark.parametrize("files", ["cover", pytest.param("every", marks=every)])


def walked(files: str) -> tuple[Path, ...] | list[Path]:
    """The files a walk parametrized by :func:`cover_or_every` reads."""
    return findings_cover() if files == "cover" else corpus_files()


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
