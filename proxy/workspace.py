"""The working tree of a coding agent, per turn (docs/shell-file-tools.md): the recorder takes
the tree the agent runs in (its working directory) at the start and again each time the agent
sends a model request (it waits for the answer then: what changed since the last request is what
its tools did for the last answer; the answer reaches it once that scan has ended), and writes
one ``files`` record per change seen: each file created, changed or removed, with its size and
sha256 before and after.

The agent is not kept waiting: before it starts the tree is only listed (by names, bounded by
:data:`FILES` files; virtual environments, ``node_modules``, caches and looptap's own outputs left
out, and said; each file's start ``stat`` is its first, the start's only when its inode's ctime is
older than the start: :mod:`looptap.cassettes.shell._ctime`); each file's start contents are
read beside the model's latency, from the agent's first model request (or :data:`READ_AFTER`
seconds after its start), a file at a time on a thread of their own (in a fork before it
starts): a turn's reply waits for its scan's walk, and for the read only until
:data:`READ_WAIT` seconds past the first request (a small tree's read ends in it); a file that
changed before the read reached it is said ``unread``, never taken as the start. Nothing is written
for a file the agent never changes: its start contents are held in memory (:data:`HELD` bytes)
and kept beside the cassette (``RUN.jsonl.files/``, mode 0700, each blob 0600, named by its
sha256) at its first change, with each change's, so that a fork can rebuild the tree as it was
(``--copy-tree``: every file's at once). In a git work tree what git already holds is not read: a
tracked file git finds clean is named by its blob id, and its start contents are taken from git
(``git cat-file``) at its first change; an ignored file (a build output) is seen by its size only,
and a change of it says its start was not read (``unread``). Git is only read (no optional locks:
the index is never refreshed). A content the redactor would mask (a key in a ``.env``, in a file
of the tree or from git) is not kept: its record says ``withheld``. Past the walk's bound a file
the start did not reach is never taken as created, and one it did reach is followed by its own
``lstat`` (a removal is never lost); the cut is said once. Bounded: files over :data:`HASHED`
bytes named by size only, :data:`KEPT` bytes read at the start, blobs over :data:`BLOB` bytes not
kept, :data:`KEPT` bytes of blobs a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cassettes.shell import (
    BLOB,
    BREADTH,
    BY_BLOB,
    CTIME_KEPT,
    FILES,
    GIT,
    HASHED,
    KEPT,
    NAMED,
    GitTree,
    Stat,
    Walk,
    file_hash,
    filesystem,
    git_blobs,
    git_tree,
    instant,
    read_bytes,
    stamped_from,
    tree_line,
    walk,
)
from ..cassettes.storage import Redacted, write_sealed
from . import messages

__all__ = ["READ_AFTER", "Workspace"]

#: A file as seen: (size, mtime_ns, inode, sha256 or None when too large to hash or not read).
Seen = tuple[int, int, int, str | None]
#: Why a file's start contents were not read (a ``files`` change's ``unread``).
IGNORED = "ignored by git: its contents at the start were not read"
CHANGED = "it changed after the agent started, before its start was read"
#: (A file listed by name at the start whose inode changed since, its mtime older than the start:
#: a chmod, a new link, or contents written with their time set back; which, no record says.)
INODE = (
    "its inode changed after the agent started (its ctime), its mtime did not, before its start"
    " was read: whether its contents changed is not known"
)
ENDED = "the run ended before its start was read"
PAST = f"past the start's bound on bytes read ({KEPT >> 20} MiB)"
LARGE = "its contents at the start: too large to hash"
UNREADABLE = "its contents at the start could not be read"
#: Seconds the start's read waits for the agent's first model request before it begins anyway: it
#: runs beside the model's latency, not the agent's own start (a file changed before the read
#: reached it is said ``unread``).
READ_AFTER = 1.0
#: Seconds past the first model request that a reply still waits for the start's read to end: a
#: small tree's read ends in that time (the agent's first tools then find every start kept, and a
#: fork can restore them); a big one's does not, and what it did not reach is said ``unread``.
READ_WAIT = 2.0
#: Bytes of start contents held in memory (written beside the cassette at a file's first change).
HELD = 64 << 20
#: How each kind of folder left out is said: (one, many).
_KINDS = {
    "virtual environment": ("virtual environment", "virtual environments"),
    "node_modules": ("node_modules folder", "node_modules folders"),
    "cache": ("cache", "caches"),
    "looptap's own output": ("output of this run", "outputs of this run"),
}


#: A file's :data:`Seen` before its contents were read: its walk's :data:`Stat` and this.
_UNREAD: tuple[None] = (None,)
#: A file's :data:`Seen` when the start listed it by name only (one object: told by identity).
_NAMED_SEEN: Seen = (*NAMED, None)


def _stat3(st: os.stat_result) -> Stat:
    return st.st_size, st.st_mtime_ns, st.st_ino


def _left(kind: str, rels: list[str]) -> str:
    """``3 virtual environments (env, tools/py, .venv)``: a kind of folder left out, said."""
    one, many = _KINDS.get(kind, (kind, kind))
    names = ", ".join(rels[:3]) + (f" and {len(rels) - 3:,} more" if len(rels) > 3 else "")
    return f"{len(rels):,} {one if len(rels) == 1 else many} ({names})"


class Workspace:
    """The tree under ``root``: listed at the start (:meth:`start`, names only: the agent is
    not kept waiting), its start contents read on a thread of their own (:meth:`read`; else by
    the first scan) and at each model request what changed (:meth:`scan`, from any thread:
    serialised, after the read); each change is handed to ``emit`` as a ``files`` record. The
    start contents of a file are kept in ``keep`` at its first change (held in memory until then,
    :data:`HELD` bytes), as ``seal`` (the redactor) passes them, unless it masked something in
    them (docs/redaction.md, "One gate"); with ``copy`` every file's at once.
    ``own``: looptap's own outputs (paths relative to ``root``), never walked."""

    def __init__(
        self,
        root: str,
        keep: Path,
        emit: Callable[[dict[str, Any]], None],
        seal: Callable[[bytes], Redacted],
        own: frozenset[str] = frozenset(),
        copy: bool = False,
    ) -> None:
        self.root = root
        self.keep = keep
        self.emit = emit
        self.seal = seal
        self.own = own
        self.copy = copy
        #: Files a walk follows (:data:`FILES`).
        self.limit = FILES
        self.seen: dict[str, Seen] = {}
        self.kept = 0
        self.cut = False
        self.first = Walk()
        #: The start's instant on the clock file times are stamped by (:func:`instant`), and
        #: whether the start listed the files by name only (their ctime trusted: ``start``).
        self.since = 0
        self.names = False
        #: Files git held clean at the start, not yet changed: their blob ids.
        self.in_git: dict[str, str] = {}
        #: Files whose start contents were not read, not yet changed: why.
        self.unread: dict[str, str] = {}
        #: Start contents not written yet (the file has not changed), and their bytes in all.
        self.held: dict[str, bytes] = {}
        self._held = 0
        self._lock = threading.Lock()
        #: The start's read: begun; the files it has still to read (in walk order), what git
        #: said, bytes read, the digest so far and whether it is whole; its record written.
        self._read = False
        self._todo: dict[str, Stat] = {}
        self._git: GitTree | None = None
        self._bytes = 0
        self._listing = hashlib.sha256()
        self._whole = True
        self._unread = 0
        self._done = threading.Event()
        #: The scans walking now: the start's reading waits for none (it never slows a reply).
        self._walking = 0
        self._calm = threading.Condition()
        #: Set at the first model request (or the run's end): the start's read may begin.
        self.go = threading.Event()
        #: Until when (monotonic) a reply waits for the start's read: set at the first request.
        self._read_until: float | None = None
        self._ending = threading.Event()
        self._cut_said = False
        #: Each model request's scan, by flow id: its reply waits for it.
        self._scans: dict[str, Any] = {}

    def _blob(self, sha: str | None, data: bytes | None) -> str | None:
        """Keep ``data`` under its sha256; ``None`` when kept, else why not."""
        if sha is None:
            return "too large to hash"
        if data is None:
            return "too large to keep"
        clean = self.seal(data)
        if clean != data:
            return "withheld: it holds a secret"
        path = self.keep / sha
        if path.exists():
            return None
        if self.kept + len(data) > KEPT:
            return "past the run's bound on kept contents"
        try:
            self.keep.mkdir(mode=0o700, exist_ok=True)
            if not write_sealed(path, clean):
                return None
        except OSError as exc:
            return f"not kept ({exc.strerror or exc})"
        self.kept += len(data)
        return None

    def _look(self, rel: str, st: Stat) -> tuple[Seen, str | None]:
        sha, data = file_hash(os.path.join(self.root, rel), st[0])
        return (*st, sha), self._blob(sha, data)

    def start(self) -> str:
        """The tree at the start, walked (bounded by :data:`FILES` files): on a filesystem that
        keeps each inode's change time (:data:`CTIME_KEPT`), by the files' names only, each
        file's start ``stat`` taken later by the first thing that reads it, as the start's only
        when its ctime is older than the start (:meth:`_first_stat`); elsewhere by ``stat``.
        What it left out and whether it was cut, said in one line (returned)."""
        with self._lock:
            self.at = time.time()
            fs = filesystem(self.root)
            self.since = instant()
            try:
                device = os.stat(self.root).st_dev if fs in CTIME_KEPT else None
            except OSError:
                device = None
            self.names = device is not None
            self.first = walk(self.root, self.limit, self.own, names=device)
            if device is not None:  # (the agent starts once a change of it is stamped after)
                self.since = stamped_from(self.since)
            self.cut = self.first.cut
            if self.names:
                self.seen = dict.fromkeys(self.first.files, _NAMED_SEEN)
            else:
                self.seen = {rel: st + _UNREAD for rel, st in self.first.files.items()}
            self._todo = dict(self.first.files)
        line = f"the working tree: {len(self.seen):,} files followed"
        left = [_left(kind, rels) for kind, rels in self.first.skipped.items()]
        if left:
            line += "; left out: " + "; ".join(left)
        if self.cut:
            self._cut_said = True
            line += f"; past {self.limit:,} files the walk stops: the rest is not followed"
        if not self.names:
            told = "".join(c for c in (fs or "")[:40] if c.isalnum() or c in "._-") or "not told"
            line += f"; each file's stat taken at the start (filesystem {told}: no ctime trusted)"
        return line

    def read(self) -> None:
        """The start's contents, read after the agent started (each file's sha256, or in a git work
        tree what git does not hold: :func:`git_tree`), a file at a time so that a turn's scan
        never waits for the rest (a file a scan finds changed before it was read is said
        ``unread``, never read as the start), then one ``files`` record with the count and a
        digest of the whole (a fork compares the user's tree with it); the run's end stops the
        reading (but with ``copy``)."""
        with self._lock:
            if self._read:
                return
            self._read = True
        try:
            if self._ending.is_set():  # (the run ended first: nothing read, all said unread)
                return
            git = git_tree(self.root)
            with self._lock:
                self._git = git
            for rel in list(self._todo):  # (in walk order: the digest's)
                if self._ending.is_set():
                    break
                with self._calm:  # (a scan walking: the reply waits for it; this does not)
                    self._calm.wait_for(lambda: not self._walking or self._ending.is_set())
                st = self._todo.get(rel)  # (None: a scan found it changed first)
                if st == NAMED:  # (its stat not taken yet: taken now, outside the lock)
                    st = self._stat_for_read(rel, *self._first_stat(rel))
                if st is None:
                    continue
                got = self._fetch(rel, st, git)  # (read outside the lock: a scan never waits)
                with self._lock:
                    if self._todo.pop(rel, None) is not None:
                        self._read_one(rel, st, git, got)
        finally:
            with self._lock:
                self._started()

    def _stat_for_read(self, rel: str, found: Stat, why: str | None) -> Stat | None:
        """A file's start stat as the read took it (:meth:`_first_stat`), unless a scan took it
        first; ``None`` when its start is not to be read (it changed since: said ``unread``)."""
        with self._lock:
            if rel not in self._todo:
                return None
            st = self.seen[rel][:3]
            if st == NAMED:
                if why is not None:
                    del self._todo[rel]
                    self._not_read(rel, why)
                    self._whole = False
                    return None
                st = found
                self.seen[rel] = st + _UNREAD
            self._todo[rel] = st
            return st

    def _fetch(
        self, rel: str, st: Stat, git: GitTree | None
    ) -> tuple[str | None, bytes | None] | None:
        """A file's start contents as read (its digest line in a git work tree, its bytes);
        ``None`` when it is not read (git holds it clean, git ignores it, past :data:`KEPT`)."""
        if git is not None and (rel in git.clean or git.ignored(rel)):
            return None
        if self._bytes + st[0] > KEPT:
            return None
        if git is not None:
            return tree_line(self.root, rel, st[0], git)
        return None, read_bytes(os.path.join(self.root, rel), st[0])

    def _read_one(
        self,
        rel: str,
        st: Stat,
        git: GitTree | None,
        got: tuple[str | None, bytes | None] | None,
    ) -> None:
        line = None
        if git is not None and rel in git.clean:
            if self._same(rel, st):
                self.in_git[rel] = line = git.clean[rel]
            else:
                self._not_read(rel, CHANGED)
        elif git is not None and git.ignored(rel):
            self._not_read(rel, IGNORED)
            line = f"size {st[0]}"
        elif got is None:
            self._not_read(rel, PAST)
        else:
            self._bytes += min(st[0], HASHED)
            line = self._take(rel, st, git, *got)
        if line is None:
            self._whole = False
        else:
            self._listing.update(f"{rel}\0{line}\n".encode(errors="surrogateescape"))

    def _started(self) -> None:
        """The start's record, once (the files not read by then: ``unread``, the run ended)."""
        if self._done.is_set():
            return
        self._done.set()  # (before the record: a scan waiting for it never waits for ever)
        if self._todo:
            self.unread.update(dict.fromkeys(self._todo, ENDED))
            self._unread += len(self._todo)
            self._todo.clear()
            self._whole = False
        git = self._git
        self.emit(
            {
                "type": "files",
                "at": self.at,
                "start": True,
                "root": self.root,
                "files": len(self.first.files),
                "digest": self._listing.hexdigest() if self._whole else None,
                "cut": self.cut,
                "unread": self._unread,
                "held": len(self.held),
                "skipped": {k: v[:100] for k, v in self.first.skipped.items()},
                "own": sorted(self.own),
                "walk": BREADTH,
                **({"digest_of": BY_BLOB, "in_git": len(self.in_git)} if git is not None else {}),
            }
        )

    def _not_read(self, rel: str, why: str) -> None:
        """A file whose start contents were not read: why, on its first change's record."""
        self.unread[rel] = why
        self._unread += 1

    def _same(self, rel: str, st: Stat) -> bool:
        """Whether the file is still as its start stat ``st`` says (listed by name at the start:
        and its inode unchanged since the start, in the start's folder)."""
        try:
            now = os.lstat(os.path.join(self.root, rel))
        except OSError:
            return False
        if _stat3(now) != st:
            return False
        return not self.names or (now.st_ctime_ns < self.since and self._folder_kept(rel))

    def _folder_kept(self, rel: str) -> bool:
        """Whether the folder holding ``rel`` is the start's (not one moved in since: its files
        keep their old ctimes)."""
        parent = rel.rpartition("/")[0]
        try:
            return os.lstat(os.path.join(self.root, parent)).st_ino == self.first.folders[parent]
        except (OSError, KeyError):
            return False

    def _first_stat(self, rel: str) -> tuple[Stat, str | None]:
        """The first stat of a file the start listed by name, and why it is not its start stat
        (``None`` when it is): it is when its inode's change time is older than the start (no
        user can set a ctime) and its folder is the start's; else it changed since (its start
        is not known: ``unread``)."""
        try:
            found = os.lstat(os.path.join(self.root, rel))
        except OSError:
            return NAMED, CHANGED
        if not stat.S_ISREG(found.st_mode):
            return NAMED, CHANGED
        fresh = found.st_ctime_ns >= self.since
        return _stat3(found), self._not_start(fresh, found.st_mtime_ns, self._folder_kept(rel))

    def _not_start(self, fresh: bool, mtime: int, folder_kept: bool) -> str | None:
        """The one rule by which a file the start listed by name is not as the start had it, from
        its first stat (the read's, :meth:`_first_stat`, or a scan's, :meth:`_since_start`): its
        folder another since (a folder moved in: ``CHANGED``), or its inode's ctime not older
        than the start (``CHANGED`` when its mtime moved too, else ``INODE``); ``None`` when the
        first stat is the start's."""
        if not folder_kept:
            return CHANGED
        if fresh:
            return CHANGED if mtime >= self.since else INODE
        return None

    def _take(
        self,
        rel: str,
        st: Stat,
        git: GitTree | None,
        line: str | None,
        data: bytes | None,
    ) -> str | None:
        """A file's start contents, read (:meth:`_fetch`): its digest line (its sha256, or its
        git blob id in a git work tree), its bytes held (or kept with ``copy``); ``None`` when it
        changed since the walk (then not the start: ``unread``)."""
        if not self._same(rel, st):
            self._not_read(rel, CHANGED)
            return None
        if data is None:  # too large to hash, or not readable
            self._not_read(rel, LARGE if st[0] > HASHED else UNREADABLE)
            return line if git is not None else "None"
        sha = hashlib.sha256(data).hexdigest()
        self.seen[rel] = (*st, sha)
        if self.copy:
            self._blob(sha, data if len(data) <= BLOB else None)
        elif len(data) <= BLOB and self._held + len(data) <= HELD:
            self.held[rel] = data
            self._held += len(data)
        return line if git is not None else sha

    def _from_git(self, rels: list[str]) -> None:
        """The start contents of files git held clean, at their first change (or removal): taken
        from git, checked against the start's size, hashed and kept as a change's ``before``."""
        wanted = {rel: self.in_git.pop(rel) for rel in rels if rel in self.in_git}
        got: dict[str, bytes] = {}
        part: dict[str, str] = {}
        size = 0
        for rel, oid in wanted.items():  # (asked in parts whose blobs fit git's output bound)
            if self.seen[rel][0] > HASHED:
                continue
            if part and size + self.seen[rel][0] > GIT // 2:
                got |= git_blobs(self.root, part)
                part, size = {}, 0
            part[rel] = oid
            size += self.seen[rel][0] + 64
        if part:
            got |= git_blobs(self.root, part)
        for rel in wanted:
            was = self.seen[rel]
            data = got.get(rel)
            if was[0] > HASHED:
                self.unread[rel] = LARGE
                continue
            if data is None or len(data) != was[0]:
                self.unread[rel] = "its contents at the start were not found in git"
                continue
            sha = hashlib.sha256(data).hexdigest()
            self._blob(sha, data if len(data) <= BLOB else None)  # (not kept: a fork says so)
            self.seen[rel] = (*was[:3], sha)

    def scan(self, at: float | None = None, last: bool = False) -> None:
        """What changed since the last scan, as one ``files`` record (none when nothing did; the
        ``last`` one always, and it ends the start's reading where it is but with ``copy``)."""
        if last:  # (with --copy-tree every file's start is read: asked for)
            if not self.copy:
                self._ending.set()
            self.go.set()
            self.read()  # (here when no request began it; else it ends where it is)
            self._done.wait()
        with self._calm:
            self._walking += 1
        try:
            self._scan(at, last)
        finally:
            with self._calm:
                self._walking -= 1
                self._calm.notify_all()

    def _scan(self, at: float | None, last: bool) -> None:
        with self._lock:
            since = self.since if self.names else None
            now = walk(self.root, self.limit, self.own, self.first, changed=since)
            files = now.files
            replaced: set[str] = set()  # (files the start listed by name, in a folder replaced)
            # a file seen before that this walk did not reach (a folder the start did not list
            # to its end, or past this walk's bound): by its own lstat; gone only when it is
            for rel in [rel for rel in self.seen if rel not in files]:
                try:
                    found = os.lstat(os.path.join(self.root, rel))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except OSError:
                    files[rel] = self.seen[rel][:3]  # not judged: taken as it was
                    continue
                if stat.S_ISREG(found.st_mode):
                    files[rel] = _stat3(found)
                    if since is not None and found.st_ctime_ns >= since:
                        now.fresh.add(rel)
                    if self.seen[rel] is _NAMED_SEEN and not self._folder_kept(rel):
                        replaced.add(rel)
            changes: list[dict[str, Any]] = []
            gone = [rel for rel in self.seen if rel not in files]
            git = self.in_git
            if git:  # (files git held clean at the start: their start contents, from git)
                moved = [r for r, st in files.items() if r in git and self.seen[r][:3] != st]
                if moved or gone:
                    self._from_git(moved + gone)
            was_seen = self.seen
            first = self.first.folders  # (the folders this walk found replaced: another inode)
            other = {d for d, ino in now.folders.items() if first.get(d, ino) != ino}
            if other:
                replaced.update(r for r in files if r.rpartition("/")[0] in other)
            fresh, unread = now.fresh, self.unread
            for rel, st in files.items():
                was = was_seen.get(rel)
                if was is _NAMED_SEEN:  # (its first stat: the start's?)
                    if st == NAMED:
                        continue  # (its lstat failed: not judged)
                    suspect = rel in fresh or rel in replaced or unread.get(rel, ENDED) is not ENDED
                    why = self._since_start(rel, st, fresh, replaced) if suspect else None
                    if why is None:
                        self.seen[rel] = st + _UNREAD
                        if rel in self._todo:
                            self._todo[rel] = st
                        continue
                    if self._todo.pop(rel, None) is not None:
                        self._not_read(rel, why)
                        self._whole = False
                    else:
                        self.unread[rel] = why
                elif was is not None and was[:3] == st:
                    continue
                elif self._todo.pop(rel, None) is not None:  # (changed before the read reached it)
                    self._not_read(rel, CHANGED)
                    self._whole = False
                seen, why = self._look(rel, st)
                if was is not None and was[3] == seen[3] and seen[3] is not None:
                    self.seen[rel] = seen  # touched, not changed
                    continue
                self.seen[rel] = seen
                change = self._change(rel, was, seen[3], seen[0])
                if why is not None:
                    change["unkept"] = why
                changes.append(change)
            for rel in gone:
                if self._todo.pop(rel, None) is not None:
                    self._not_read(rel, CHANGED)
                    self._whole = False
                changes.append(self._change(rel, self.seen.pop(rel), None, 0))
            if now.cut and not self._cut_said:
                self._cut_said = True
                messages.emit(
                    f"the working tree passed {self.limit:,} files: files created past them are "
                    "not followed (the record says so)"
                )
            if changes or last:
                self.emit(
                    {
                        "type": "files",
                        "at": at if at is not None else time.time(),
                        "changes": changes[:FILES],
                        "cut": now.cut or self.cut,
                        **({"last": True} if last else {}),
                    }
                )

    def _since_start(self, rel: str, st: Stat, fresh: set[str], replaced: set[str]) -> str | None:
        """Why the first stat ``st`` a scan took of a file the start listed by name is not its
        start stat (:meth:`_first_stat`'s rule: ``fresh``, its ctime not older than the start;
        ``replaced``, its folder another since); ``None`` when it is."""
        why = self.unread.get(rel)
        if why is not None and why != ENDED:
            return why  # (the read found it changed first)
        return self._not_start(rel in fresh, st[1], rel not in replaced)

    def _change(self, rel: str, was: Seen | None, after: str | None, size: int) -> dict[str, Any]:
        """A change's record: a file whose start was not read says so (``before`` ``"unread"``);
        a file's start contents held are kept now, at its first change."""
        held = self.held.pop(rel, None)
        if held is not None:
            self._held -= len(held)
            self._blob(hashlib.sha256(held).hexdigest(), held)  # (not kept: a fork says so)
        unread = self.unread.pop(rel, None)
        if unread is None and was is not None and was[:3] == NAMED:
            unread = CHANGED  # (its start stat never taken)
        if unread is not None:
            return {"path": rel, "before": "unread", "unread": unread, "after": after, "size": size}
        before = None if was is None else was[3]
        return {"path": rel, "before": before, "after": after, "size": size}

    # -- as a mitmproxy addon: a model request is a turn's boundary ------------------------------
    def requestheaders(self, flow: Any) -> None:
        """A request the agent sent to a model (a reverse listener's, or an LLM API host's through
        the forward proxy): the tree is scanned on a thread of its own, the request goes on; its
        reply waits for what is left of the scan (:meth:`responseheaders`)."""
        if not _model_request(flow):
            return
        if self._read_until is None:
            self._read_until = time.monotonic() + READ_WAIT
        self.go.set()  # (the start's read: beside the model's latency, no longer the agent's start)
        at = flow.request.timestamp_start
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._scans[flow.id] = done
        threading.Thread(target=self._scan_quietly, args=(at, loop, done), daemon=True).start()

    async def responseheaders(self, flow: Any) -> None:
        """The model's reply reaches the agent once the tree at its request is taken: the agent
        acts on the reply (its tools change files), so a scan still running then would take the
        next turn's changes as this one's. The scan runs beside the model's latency; the reply
        waits only for what is left of it (the walk), and for the start's read only until
        :data:`READ_WAIT` seconds past the first request."""
        done = self._scans.pop(flow.id, None)
        if done is not None:
            await done
            left = (self._read_until or 0.0) - time.monotonic()
            if left > 0 and not self._done.is_set():  # (a small tree's read: READ_WAIT)
                await asyncio.to_thread(self._done.wait, left)

    # a reply made without upstream response headers (an addon's) waits the same way
    response = responseheaders

    def error(self, flow: Any) -> None:
        self._scans.pop(flow.id, None)

    def _scan_quietly(self, at: float, loop: asyncio.AbstractEventLoop, done: Any) -> None:
        # (not niced, unlike the start's reading: the reply waits for it, so the agent does)
        try:
            self.scan(at)
        except Exception:
            pass  # the tree could not be read: the next scan says what changed since
        finally:
            with contextlib.suppress(RuntimeError):  # (the loop closed: nothing waits)
                loop.call_soon_threadsafe(_settle, done)


def _settle(done: Any) -> None:
    if not done.done():
        done.set_result(None)


def _model_request(flow: Any) -> bool:
    from mitmproxy.proxy import mode_specs

    from ..cassettes.providers import is_llm_host

    if isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode):
        mcp = ("mcp-protocol-version", "mcp-session-id")
        return not any(h in flow.request.headers for h in mcp)
    req = flow.request
    return bool(is_llm_host(req.pretty_host, (), req.path))
