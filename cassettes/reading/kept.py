"""Analyse a run once: a looptap cassette's analysis, kept after a reader computed it, and taken by
every later reader of the same bytes instead of analysing them again (docs/kept-analysis.md).

What is kept is what :class:`~cassettes.reading.incremental.RunReader` holds once it has read a
run to its end: the offset index, the analysis (conversations, findings, errors, MCP links), the
store of full turns and the store of the analysis' parses (``show``'s printing pass, the exports
and a viewer restore those, and parse nothing). It is kept in a cache file, not in the cassette
(the user's file is never written by a reader): ``$LOOPTAP_CACHE_DIR``, else
``$XDG_CACHE_HOME/looptap/analyses``, else ``~/.cache/looptap/analyses`` (directory 0700, file
0600, written to a temporary name and renamed), one file per cassette path.

A kept analysis is taken only when all of this holds, and analysed afresh otherwise (never
trusted blindly):

- the cassette has the size it had when it was analysed; a file that grew since (a recording that
  went on, one appended to) is *continued*: the reader's working state, kept as it stood before the
  end-of-run checks, is taken once the MAC below checks out over the bytes it was made from (the
  file's first bytes, hashed again), and the reader goes on from where it stopped; the grown
  file's analysis is then kept in its place;
- the analyser is the same: a digest of looptap's source (every module under ``cassettes/``),
  the Python and pydantic versions and genai-prices' price table (its version and data file);
- a MAC under this machine's key (the parse-once key of :mod:`cassettes.parsing.sealed`) checks
  out over the analyser's digest, **every byte of the cassette** and every byte of the kept
  file. So an edited cassette, an edited or swapped cache file, or one written with another key
  cannot hide a finding: the run is analysed again. The cassette is hashed as the analysis reads
  it (no second read); a later reader hashes it again before taking the kept analysis (about a
  second per GB: docs/kept-analysis.md).

Nothing is read from the kept file before its MAC is checked: its sections are copied to this
process's own anonymous temporary files as they are hashed, and only then unpickled.
``LOOPTAP_NO_CACHE=1`` (or ``--no-cache`` on the commands that read a run) neither takes nor keeps
one; a run under :data:`MIN_BYTES` is analysed faster than it is checked, and is not kept. Any
error while keeping (a read-only or full disk) leaves the run analysed as before, silently.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, NamedTuple

from cassettes.errors import CassetteError
from cassettes.storage.store import open_regular

__all__ = [
    "MAX_CONVERSATIONS",
    "MIN_BYTES",
    "Kept",
    "Resume",
    "analyser_digest",
    "analysis_mac",
    "disabled",
    "hasher",
    "keep",
    "location",
    "run_digest_of",
    "take",
]

#: Runs smaller than this are analysed without a kept analysis (analysing them is quicker than
#: checking one; tests lower it).
MIN_BYTES = 1 << 20
#: Runs of more conversations are not kept: a kept analysis' conversations are held in memory
#: when it is written and read (a model of about 1 KB each while pickled), where the analysis
#: spills them to disk.
MAX_CONVERSATIONS = 20_000
#: The kept file's first bytes (the format's version: another one is not read; 2 added the working
#: state a grown file is continued from).
MAGIC = b"looptap kept analysis 2\n"
#: Bytes copied at a time between files.
_CHUNK = 1 << 20


def disabled() -> bool:
    """``LOOPTAP_NO_CACHE`` is set (to anything but ``0`` or nothing)."""
    return os.environ.get("LOOPTAP_NO_CACHE", "").strip() not in ("", "0")


def _dir() -> Path:
    if os.environ.get("LOOPTAP_CACHE_DIR"):
        return Path(os.environ["LOOPTAP_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "looptap" / "analyses"


def location(cassette: str | Path) -> Path | None:
    """Where the analysis of the cassette at this path is kept (``None``: no cache directory,
    e.g. no home). Named by a digest of the cassette's resolved path."""
    try:
        name = hashlib.blake2b(
            str(Path(cassette).resolve()).encode("utf-8", "surrogateescape"), digest_size=16
        ).hexdigest()
        return _dir() / f"{name}.kept"
    except (OSError, RuntimeError):
        return None


@functools.cache
def analyser_digest() -> bytes | None:
    """A digest of what decides a run's analysis: looptap's source (every module under
    ``cassettes/``), the Python and pydantic versions, and genai-prices' price table (its version
    and data file, as the price memo names them: the turns' costs are part of the analysis).
    ``None`` when the source cannot be read: nothing is then kept or taken. Computed once a
    process."""
    import pydantic

    from cassettes.analysis import price_memo, rules
    from cassettes.parsing.sealed import source_digest

    root = Path(__file__).resolve().parents[1]  # cassettes/
    prices = json.dumps(price_memo.table_identity())
    agent_rules = rules.active()  # an agent's rules decide findings too (docs/rules.md)
    extra = f"{prices}\0{agent_rules.text if agent_rules else ''}"
    return source_digest(root, [root], f"{sys.version}\0{pydantic.VERSION}\0{extra}\0".encode())


def _key() -> bytes | None:
    from cassettes.parsing.sealed import machine_key

    return machine_key(create=True)


def hasher() -> Any | None:
    """A keyed hash to feed the cassette's bytes to as they are read (``None``: no key, nothing
    kept)."""
    if disabled():
        return None
    key = _key()
    return _run_hash(key) if key is not None else None


def _run_hash(key: bytes) -> Any:
    """HMAC-SHA-256: twice BLAKE2b's speed here (SHA extensions), which hashing a GB shows."""
    return hmac.new(key, b"looptap-run\0", "sha256")


class Resume(NamedTuple):
    """What a grown file is continued from (:func:`take` of a file larger than the one analysed):
    the reader's working state before the end-of-run checks, pickled by the reader (with the
    files of the analysis' spilled tables: ``None`` where nothing was spilled), in anonymous
    temporary files of this process; where it stopped reading; and the keyed hash of the file's
    bytes up to there, to be fed what the reader reads next."""

    state: IO[bytes]
    spills: list[IO[bytes] | None]
    at: int
    digest: Any


class Kept(NamedTuple):
    """A kept analysis, checked: the reader's state (pickled by the reader) and its two stores,
    each in an anonymous temporary file of this process. ``resume`` is set (and ``state`` empty)
    when the file grew since: what to continue from."""

    state: bytes
    turns: IO[bytes]
    parses: IO[bytes]
    #: The kept file's MAC (what its printed views are bound to: :func:`views`).
    mac: bytes
    resume: Resume | None = None

    def close(self) -> None:
        """Let go of its temporary files (when it is not taken after all)."""
        for f in (self.turns, self.parses, *(self._resume_files())):
            f.close()

    def _resume_files(self) -> list[IO[bytes]]:
        if self.resume is None:
            return []
        return [self.resume.state, *(f for f in self.resume.spills if f is not None)]


class Working(NamedTuple):
    """What :func:`keep` keeps to continue from (see :class:`Resume`): the bytes read when it was
    taken, the pickled state and its length, and each spill file with its length."""

    at: int
    state: IO[bytes]
    state_len: int
    spills: list[tuple[IO[bytes] | None, int]]


def analysis_mac(key: bytes, analyser: bytes, size: int, run_digest: bytes) -> Any:
    """The MAC a kept analysis carries, begun: over the analyser, the cassette's size and its keyed
    hash; the kept file's bytes are fed to it next."""
    h = hashlib.blake2b(key=key, digest_size=32, person=b"looptap-kept")
    h.update(analyser + size.to_bytes(8, "big") + run_digest)
    return h


def keep(
    cassette: Path,
    size: int,
    run_digest: bytes,
    state: bytes,
    turns: IO[bytes],
    turns_len: int,
    parses: IO[bytes],
    parses_len: int,
    working: Working | None = None,
) -> bytes | None:
    """Write the kept analysis of the cassette's first ``size`` bytes (whose keyed hash, fed as
    the analysis read them, is ``run_digest``), and the working state to continue it from when
    the file grows (``working``). ``turns``, ``parses`` and the working state's files are read
    from their start. Never raises: its MAC, ``None`` when it could not be kept."""
    where = location(cassette)
    key = _key()
    analyser = analyser_digest()
    if where is None or key is None or analyser is None:
        return None
    tmp: str | None = None
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".kept-", dir=where.parent)  # 0600
        mac = analysis_mac(key, analyser, size, run_digest)
        spills = working.spills if working is not None else []
        meta = json.dumps(
            {
                "size": size,
                "analyser": analyser.hex(),
                "resume": working.at if working is not None else None,
                "spills": len(spills),
            }
        ).encode()
        with os.fdopen(fd, "wb") as out:

            def put(data: bytes) -> None:
                mac.update(data)
                out.write(data)

            put(MAGIC)
            empty = io.BytesIO()
            sections: list[tuple[bytes | IO[bytes], int | None]] = [
                (meta, None),
                (state, None),
                (turns, turns_len),
                (parses, parses_len),
                (working.state, working.state_len) if working is not None else (b"", None),
                *((f if f is not None else empty, n) for f, n in spills),
            ]
            for section, length in sections:
                if isinstance(section, bytes):
                    put(len(section).to_bytes(8, "big"))
                    put(section)
                    continue
                assert length is not None
                put(length.to_bytes(8, "big"))
                section.seek(0)
                left = length
                while left:
                    chunk = section.read(min(_CHUNK, left))
                    if not chunk:
                        raise OSError("a store ended early")
                    put(chunk)
                    left -= len(chunk)
            digest: bytes = mac.digest()
            out.write(digest)
        os.replace(tmp, where)
        tmp = None
        return digest
    except (OSError, ValueError):
        return None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def run_digest_of(key: bytes, cassette: Path, size: int) -> bytes | None:
    """The keyed hash of the cassette's first ``size`` bytes, as :func:`hasher` gives it; ``None``
    when the file holds fewer."""
    got = _hashed(key, cassette, size, None)
    return got[0] if got is not None else None


def _hashed(key: bytes, cassette: Path, size: int, at: int | None) -> tuple[bytes, Any] | None:
    """The keyed hash of the cassette's first ``size`` bytes, and (``at``) a running hash of its
    first ``at`` bytes, to be fed more; ``None`` when the file holds fewer."""
    h = _run_hash(key)
    there: Any = None
    done = 0
    with open_regular(cassette) as f:
        while done < size:
            want = min(4 * _CHUNK, size - done)
            if at is not None and there is None and done < at:
                want = min(want, at - done)
            chunk = f.read(want)
            if not chunk:
                return None
            h.update(chunk)
            done += len(chunk)
            if at is not None and there is None and done == at:
                there = h.copy()
    if at is not None and there is None:
        return None
    digest: bytes = h.digest()
    return digest, there


class _Plan(NamedTuple):
    """What a kept file's meta section says, checked against the cassette as it is now."""

    raw: bytes
    size: int
    #: Where the kept working state stopped reading (a file that grew is continued from there).
    at: int | None
    spills: int
    grown: bool


def _plan(f: IO[bytes], analyser: bytes, cassette: Path) -> _Plan | None:
    """The kept file's meta section, when it is this analyser's and fits the cassette: the same
    size, or grown from a size a working state was kept for (one that shrank is analysed again)."""
    if f.read(len(MAGIC)) != MAGIC:
        return None
    raw = _section(f, 4096)
    if raw is None:
        return None
    meta = json.loads(raw)
    if not isinstance(meta, dict) or meta.get("analyser") != analyser.hex():
        return None
    size, at, spills = meta.get("size"), meta.get("resume"), meta.get("spills")
    if not isinstance(size, int) or not isinstance(spills, int) or not 0 <= spills < 16:
        return None
    now = os.stat(cassette).st_size
    grown = now > size and isinstance(at, int) and 0 < at <= size
    if size != now and not grown:
        return None
    return _Plan(raw, size, at if isinstance(at, int) else None, spills, grown)


def take(cassette: Path, store_dir: str | Path | None = None) -> Kept | None:
    """The kept analysis of the cassette as it is now, checked (see the module's docstring);
    ``None`` when there is none, or it does not check out. For a file that grew since, what to
    continue from (:attr:`Kept.resume`), when it was kept and checks out. Never raises."""
    if disabled():
        return None
    where = location(cassette)
    analyser = analyser_digest()
    key = _key() if where is not None and analyser is not None else None
    if where is None or analyser is None or key is None:
        return None
    made: list[IO[bytes]] = []
    try:
        with open_regular(where) as f:  # (a FIFO put there is no kept analysis, not a hang)
            plan = _plan(f, analyser, cassette)
            if plan is None:
                return None
            hashed = _hashed(key, cassette, plan.size, plan.at if plan.grown else None)
            if hashed is None:
                return None
            mac = analysis_mac(key, analyser, plan.size, hashed[0])
            mac.update(MAGIC + len(plan.raw).to_bytes(8, "big") + plan.raw)
            read = _Sections(f, mac, store_dir, made).read(plan)
            if read is None:
                return None
            digest = mac.digest()
            if not hmac.compare_digest(f.read(33), digest):
                return None
        made = []
        state, turns, parses, working = read
        if not plan.grown:
            return Kept(state, turns, parses, digest)
        assert plan.at is not None
        return Kept(b"", turns, parses, digest, _resume(working, plan.at, hashed[1]))
    except (OSError, ValueError, CassetteError):
        return None
    finally:
        for tmp in made:
            tmp.close()


class _Sections:
    """The sections of a kept file after its meta, each fed to the MAC: copied to anonymous
    temporary files of this process (``made``: closed by the caller unless all checks out), or
    read, or skipped where they are not needed."""

    def __init__(
        self, f: IO[bytes], mac: Any, store_dir: str | Path | None, made: list[IO[bytes]]
    ) -> None:
        self.f, self.mac, self.store_dir, self.made = f, mac, store_dir, made

    def copied(self) -> IO[bytes] | None:
        tmp: IO[bytes] = tempfile.TemporaryFile(prefix="looptap-kept-", dir=self.store_dir)
        self.made.append(tmp)
        return tmp if _copy_section(self.f, tmp, self.mac) else None

    def read(self, plan: _Plan) -> tuple[bytes, IO[bytes], IO[bytes], list[IO[bytes]]] | None:
        """The finished analysis (only its MAC for a grown file), its two stores, and for a
        grown file the working state and the spilled tables (only their MAC otherwise)."""
        f, mac = self.f, self.mac
        state = _section(f, 1 << 34, mac) if not plan.grown else _skip_section(f, mac)
        if state is None:
            return None
        turns, parses = self.copied(), self.copied()
        if turns is None or parses is None:
            return None
        working: list[IO[bytes]] = []
        for _ in range(1 + plan.spills):  # the working state and the spilled tables
            if plan.grown:
                got = self.copied()
                if got is None:
                    return None
                working.append(got)
            elif _skip_section(f, mac) is None:
                return None
        return state, turns, parses, working


def _resume(working: list[IO[bytes]], at: int, digest: Any) -> Resume:
    """What a grown file is continued from: the working state, and each spilled table's file
    (``None`` where nothing was spilled)."""
    spilled: list[IO[bytes] | None] = []
    for w in working[1:]:
        if os.fstat(w.fileno()).st_size:
            spilled.append(w)
        else:  # (nothing was spilled)
            w.close()
            spilled.append(None)
    return Resume(working[0], spilled, at, digest)


def _section(f: IO[bytes], limit: int, mac: Any = None) -> bytes | None:
    head = f.read(8)
    if len(head) != 8:
        return None
    n = int.from_bytes(head, "big")
    if n > limit:
        return None
    data = f.read(n)
    if len(data) != n:
        return None
    if mac is not None:
        mac.update(head + data)
    return data


def _skip_section(f: IO[bytes], mac: Any) -> Any:
    """A section fed to the MAC and not kept (``b""``; ``None`` when the file ends first)."""
    return b"" if _copy_section(f, None, mac) else None


def _copy_section(f: IO[bytes], out: IO[bytes] | None, mac: Any) -> bool:
    """A section fed to the MAC and copied to ``out`` (``None``: only fed); ``False`` when the
    file ends first."""
    head = f.read(8)
    if len(head) != 8:
        return False
    mac.update(head)
    left = int.from_bytes(head, "big")
    while left:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            return False
        mac.update(chunk)
        if out is not None:
            out.write(chunk)
        left -= len(chunk)
    if out is not None:
        out.flush()
    return True


# -- printed views: what show's printing pass made of each round trip ---------------------------

#: The views file's first bytes.
VIEWS_MAGIC = b"looptap kept views 1\n"
#: Uncompressed bytes of views per compressed block.
_VIEWS_BLOCK = 1 << 20


def _views_mac(key: bytes, kept_mac: bytes) -> Any:
    h = hashlib.blake2b(key=key, digest_size=32, person=b"looptap-views")
    h.update(kept_mac)
    return h


class ViewsWriter:
    """Keeps each round trip's printed view (a JSON-able object) as a printing pass makes them,
    bound to the kept analysis they were made from (its MAC): :meth:`commit` once the pass went
    through every round trip. Never raises: a view that cannot be kept ends the keeping."""

    def __init__(self, cassette: Path, kept_mac: bytes) -> None:
        self._where = location(cassette)
        self._tmp: str | None = None
        self._out: IO[bytes] | None = None
        self._buf = bytearray()
        key = _key()
        if self._where is None or key is None:
            return
        self._mac = _views_mac(key, kept_mac)
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=".views-", dir=self._where.parent)
            self._out = os.fdopen(fd, "wb")
            self._put(VIEWS_MAGIC)
        except OSError:
            self.abandon()

    def _put(self, data: bytes) -> None:
        assert self._out is not None
        self._mac.update(data)
        self._out.write(data)

    def add(self, view: Any) -> None:
        if self._out is None:
            return
        import orjson

        try:
            self._buf += orjson.dumps(view, option=orjson.OPT_APPEND_NEWLINE)
            if len(self._buf) >= _VIEWS_BLOCK:
                self._block()
        except (OSError, TypeError, orjson.JSONEncodeError):
            self.abandon()

    def _block(self) -> None:
        from cassettes.reading.packed import compressor

        packed = compressor().compress(bytes(self._buf))
        self._buf = bytearray()
        self._put(len(packed).to_bytes(8, "big") + packed)

    def commit(self) -> None:
        if self._out is None or self._where is None or self._tmp is None:
            return
        try:
            if self._buf:
                self._block()
            self._out.write(self._mac.digest())
            self._out.close()
            self._out = None
            os.replace(self._tmp, self._where.with_suffix(".views"))
            self._tmp = None
        except OSError:
            self.abandon()

    def abandon(self) -> None:
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass
            self._out = None
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None


def views(cassette: Path, kept_mac: bytes) -> list[bytes] | None:
    """The printed views kept for the kept analysis whose MAC is ``kept_mac``, checked, as
    compressed blocks of JSON lines (:func:`iter_views`); ``None`` when there are none that check
    out. Never raises."""
    if disabled():
        return None
    where = location(cassette)
    key = _key()
    if where is None or key is None:
        return None
    try:
        with open_regular(where.with_suffix(".views")) as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < len(VIEWS_MAGIC) + 32 or not data.startswith(VIEWS_MAGIC):
        return None
    body, mac = data[:-32], data[-32:]
    h = _views_mac(key, kept_mac)
    h.update(body)
    if not hmac.compare_digest(h.digest(), mac):
        return None
    blocks, at = [], len(VIEWS_MAGIC)
    while at < len(body):
        n = int.from_bytes(body[at : at + 8], "big")
        blocks.append(body[at + 8 : at + 8 + n])
        at += 8 + n
    return blocks if at == len(body) else None


def iter_views(blocks: list[bytes]) -> Any:
    """Each view kept in ``blocks`` (from :func:`views`), in order."""
    import orjson

    from cassettes.reading.packed import decompressor

    for block in blocks:
        for line in decompressor().decompress(block).splitlines():
            yield orjson.loads(line)
