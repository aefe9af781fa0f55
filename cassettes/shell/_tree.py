"""The files of a working tree, walked and hashed the one way the recorder (proxy/workspace.py)
and a fork's scratch tree (:mod:`._fork`) both do it (bounded)."""

from __future__ import annotations

import hashlib
import operator
import os
import shutil
import subprocess
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import IO

__all__ = [
    "BLOB",
    "BREADTH",
    "BY_BLOB",
    "FILES",
    "GIT",
    "HASHED",
    "KEPT",
    "NAMED",
    "SKIPPED",
    "GitTree",
    "Stat",
    "Walk",
    "blob_id",
    "digest",
    "file_hash",
    "git_blobs",
    "git_tree",
    "read_bytes",
    "tree_line",
    "walk",
]

#: Files walked a scan, bytes hashed per file, bytes per blob kept, bytes of blobs kept a run.
FILES, HASHED, BLOB, KEPT = 20000, 16 << 20, 1 << 20, 256 << 20
#: Bytes of one git command's output read (past it the tree is taken without git).
GIT = 64 << 20
#: Directories not walked by name: version control's own store, the packages a package manager
#: installs, tools' caches. Others are left out by what they hold (:func:`_not_work`).
SKIPPED = frozenset(
    ".git .hg .svn node_modules __pycache__ .tox .nox .mypy_cache .pytest_cache .ruff_cache".split()
)
_VCS = frozenset((".git", ".hg", ".svn"))
#: The first line of a ``CACHEDIR.TAG`` (https://bford.info/cachedir/): the folder is a cache.
_CACHEDIR = b"Signature: 8a477f597d28d172789f06886806bc55"
_NAME = operator.attrgetter("name")
#: How each left-out folder is named when said (:attr:`Walk.skipped`'s keys).
VENV, PACKAGES, CACHE, OWN = "virtual environment", "node_modules", "cache", "looptap's own output"


def read_bytes(path: str, size: int) -> bytes | None:
    """The file's bytes when it is at most :data:`HASHED` bytes and readable, else ``None``."""
    if size > HASHED:
        return None
    try:
        with open(path, "rb", buffering=0) as f:
            return f.read(HASHED + 1)
    except OSError:
        return None


def file_hash(path: str, size: int) -> tuple[str | None, bytes | None]:
    """The file's sha256 and, when small enough to keep, its bytes (read once)."""
    data = read_bytes(path, size)
    if data is None:
        return None, None
    return hashlib.sha256(data).hexdigest(), (data if len(data) <= BLOB else None)


def blob_id(data: bytes) -> str:
    """git's id of a blob of ``data`` (its object's sha1), computed without git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


#: A file as a walk saw it: (size, mtime_ns, inode), from its ``lstat``.
Stat = tuple[int, int, int]
#: A file a walk listed by its name only (``names``: no ``lstat``), its :data:`Stat` not taken.
NAMED: Stat = (-1, -1, -1)


@dataclass
class Walk:
    """A walk of a tree: its regular files by path (relative to the root) and their ``lstat``
    (:data:`Stat`, or :data:`NAMED`); whether it stopped at its bound (``cut``); the directories
    it listed to their end (``whole``, ``""`` the root), every directory it found (``dirs``) and
    the inode of each it listed (``folders``: one replaced since, a folder moved in, is another);
    the folders it left out, by why (``skipped``); the files whose inode changed at or after the
    walk's ``changed`` instant (``fresh``: their ``st_ctime_ns``)."""

    files: dict[str, Stat] = field(default_factory=dict)
    cut: bool = False
    whole: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    folders: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    fresh: set[str] = field(default_factory=set)


def _not_work(root: str, rel: str, entries: list[os.DirEntry[str]]) -> str | None:
    """Why the folder ``rel`` is not the user's work, by what it holds: a virtual environment
    (its ``pyvenv.cfg``, whatever the folder's name; a conda environment's ``conda-meta``), a
    cache (a ``CACHEDIR.TAG`` with the standard's signature); ``None`` when it is."""
    names = {e.name for e in entries}
    if "pyvenv.cfg" in names or "conda-meta" in names:
        return VENV
    if "CACHEDIR.TAG" in names:
        try:
            with open(os.path.join(root, rel, "CACHEDIR.TAG"), "rb") as f:
                if f.read(len(_CACHEDIR)) == _CACHEDIR:
                    return CACHE
        except OSError:
            pass
    return None


#: How a folder is opened to be listed: by a descriptor (each entry's ``lstat`` is then an
#: ``fstatat`` relative to it, not a lookup of its whole path: 8 % less CPU a walk), never
#: through a link that replaced it since its parent was listed.
_LIST = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_LIST_BELOW = _LIST | os.O_NOFOLLOW


def walk(
    root: str,
    limit: int = FILES,
    own: frozenset[str] = frozenset(),
    since: Walk | None = None,
    names: int | None = None,
    changed: int | None = None,
) -> Walk:
    """Every regular file under ``root`` (links not followed; :data:`SKIPPED` folders, a folder
    :func:`_not_work` names and the paths in ``own`` — looptap's outputs, relative to ``root`` —
    left out), up to ``limit`` files, breadth first. With ``since`` (the start's walk) a folder
    the start found but did not list to its end is not entered: a file there is not one the
    start missed. With ``names`` (a device) the files of a folder on that device are listed by
    name only (:data:`NAMED`: the directory's blocks read, no inode); with ``changed`` (ns, the
    clock files' times are stamped by) the files whose ``st_ctime_ns`` is not older are
    ``fresh``."""
    out = Walk()
    queue = deque([""])  # (breadth first: past the bound, the deepest files are the ones cut)
    left = limit
    while queue:
        rel = queue.popleft()
        try:
            fd = os.open(os.path.join(root, rel), _LIST_BELOW) if rel else os.open(root, _LIST)
        except OSError:
            continue
        try:
            here = os.fstat(fd)
            out.folders[rel] = here.st_ino
            by_name = names is not None and here.st_dev == names
            left = _listed(root, rel, fd, out, queue, left, own, since, by_name, changed)
        finally:
            os.close(fd)
        if left < 0:
            out.cut = True
            return out
    return out


def _listed(
    root: str,
    rel: str,
    fd: int,
    out: Walk,
    queue: deque[str],
    left: int,
    own: frozenset[str],
    since: Walk | None,
    by_name: bool = False,
    changed: int | None = None,
) -> int:
    """The folder ``rel`` (open as ``fd``) walked into ``out`` (its folders queued): how many
    files the walk may still take, ``-1`` when it reached one more (the walk is cut)."""
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=_NAME)
    except OSError:
        return left
    why = _not_work(root, rel, entries) if rel else None
    if why is not None:
        out.skipped.setdefault(why, []).append(rel)
        return left
    files = out.files
    for e in entries:
        name = f"{rel}/{e.name}" if rel else e.name
        if name in own:
            out.skipped.setdefault(OWN, []).append(name)
            continue
        try:
            if e.is_dir(follow_symlinks=False):  # (no stat: the entry's type)
                if e.name in SKIPPED:
                    if e.name not in _VCS:  # (version control's store: not said)
                        kind = PACKAGES if e.name == "node_modules" else CACHE
                        out.skipped.setdefault(kind, []).append(name)
                    continue
                out.dirs.add(name)
                if since is None or name in since.whole or name not in since.dirs:
                    queue.append(name)
                continue
            if not e.is_file(follow_symlinks=False):
                continue
            if by_name:  # (the entry's type only: no inode read)
                if not left:
                    return -1
                files[name] = NAMED
                left -= 1
                continue
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if not left:
            return -1
        files[name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        if changed is not None and st.st_ctime_ns >= changed:
            out.fresh.add(name)
        left -= 1
    out.whole.add(rel)
    return left


# -- a tree in a git work tree: what git already holds is not read -------------------------------


@dataclass(frozen=True)
class GitTree:
    """What git says of a work tree's files (paths relative to the tree taken): the tracked files
    whose contents equal their index entry (git's own stat-cache check, ``git status``) by blob
    id; every other tracked path; the untracked files not ignored; and the directories whose
    files git does not list one by one (a submodule, a nested repository). A file in none of
    them is ignored (a build output)."""

    clean: dict[str, str]
    tracked: frozenset[str]
    untracked: frozenset[str]
    opaque: tuple[str, ...]

    def ignored(self, rel: str) -> bool:
        return (
            rel not in self.tracked
            and rel not in self.untracked
            and not any(rel.startswith(d) for d in self.opaque)
        )


def _git(root: str, args: list[str], data: bytes | None = None) -> bytes | None:
    """``git ARGS`` run read-only in ``root`` (no optional locks: the index is never refreshed;
    no fsmonitor hook; no prompt), its output bounded by :data:`GIT`; ``None`` when git is
    missing, fails or says more."""
    exe = shutil.which("git")
    if exe is None:
        return None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    cmd = [exe, "--no-optional-locks", "-c", "core.fsmonitor=false", "-C", root, *args]
    try:
        with subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        ) as p:
            assert p.stdout is not None
            if data is not None:  # (written beside the read: git answers as it reads)
                threading.Thread(target=_feed, args=(p.stdin, data), daemon=True).start()
            out = p.stdout.read(GIT + 1)
            if len(out) > GIT:
                p.kill()
            return out if p.wait() == 0 and len(out) <= GIT else None
    except (OSError, ValueError):
        return None


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    try:
        assert pipe is not None
        with pipe:
            pipe.write(data)
    except (OSError, ValueError):
        pass  # (git ended first: its exit says)


def git_tree(root: str) -> GitTree | None:
    """What git says of the tree under ``root``; ``None`` when it is not in a git work tree, git
    is missing or fails (the tree is then taken file by file)."""
    head = _git(root, ["rev-parse", "--is-inside-work-tree", "--show-prefix"])
    lines = (head or b"").decode(errors="replace").split("\n")
    if len(lines) < 2 or lines[0] != "true":
        return None
    prefix = lines[1]
    listed = _git(root, ["ls-files", "-s", "-v", "-z"])
    status = _git(
        root,
        ["status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignore-submodules=all"]
        + ["--", "."],
    )
    if listed is None or status is None:
        return None
    changed: set[str] = set()
    untracked: set[str] = set()
    opaque: list[str] = []
    fields = status.split(b"\0")
    i = 0
    while i < len(fields):
        f = fields[i].decode(errors="surrogateescape")
        i += 1
        kind, cols = f[:1], {"1": 8, "2": 9, "u": 10, "?": 1}.get(f[:1])
        if cols is None:
            continue
        path = f.split(" ", cols)[-1]
        i += kind == "2"  # (a rename's original path follows)
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix) :]
        if kind == "?" and rel.endswith("/"):
            opaque.append(rel)  # a nested repository: git does not go in
        (untracked if kind == "?" else changed).add(rel)
    clean: dict[str, str] = {}
    tracked: set[str] = set()
    for entry in listed.split(b"\0"):
        meta, _, raw = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) != 4:
            continue
        rel = raw.decode(errors="surrogateescape")
        tag, mode, oid, stage = (p.decode(errors="replace") for p in parts)
        tracked.add(rel)
        if mode == "160000":
            opaque.append(f"{rel}/")  # a submodule: its files are its own repository's
        elif tag == "H" and stage == "0" and rel not in changed and mode != "120000":
            clean[rel] = oid  # (a lowercase tag: assumed unchanged, never checked: read)
    if not tracked or _converted(root, clean):
        return None  # (none tracked here: a tree git ignores whole, or not yet committed)
    return GitTree(clean, frozenset(tracked), frozenset(untracked), tuple(opaque))


def _converted(root: str, clean: dict[str, str]) -> bool:
    """Leave out of ``clean`` the files a checkout writes other than as git holds them (a
    ``filter``, ``ident``, ``working-tree-encoding``, ``eol=crlf``: their bytes are not the
    blob's; they are read as outside git); ``True`` when every text file may be (``core.autocrlf``
    or ``core.eol`` set) or git cannot say: the tree is then taken without git."""
    conf = _git(root, ["config", "-z", "--get-regexp", r"^core\.(autocrlf|eol)$"])
    if conf:  # (none set: git exits 1, nothing said)
        for item in conf.split(b"\0"):
            _key, _, value = item.partition(b"\n")
            if value.lower() not in (b"false", b"lf", b"native", b""):
                return True
    paths = [rel for rel in clean if "\0" not in rel]
    attrs = ["filter", "ident", "working-tree-encoding", "eol"]
    out = _git(
        root,
        ["check-attr", "-z", "--stdin", *attrs],
        "".join(f"{rel}\0" for rel in paths).encode(errors="surrogateescape"),
    )
    if out is None:
        return True
    fields = out.split(b"\0")
    for i in range(0, len(fields) - 2, 3):
        path, attr, setting = (f.decode(errors="surrogateescape") for f in fields[i : i + 3])
        if setting in ("unspecified", "unset") or (attr == "eol" and setting == "lf"):
            continue
        clean.pop(path, None)
    return False


def git_blobs(root: str, wanted: dict[str, str]) -> dict[str, bytes]:
    """The contents of blobs by path (``{path: blob id}``: files a checkout writes as git holds
    them, :func:`_converted`), bounded as a file read; a blob git does not have, or past the
    bound, is left out."""
    out: dict[str, bytes] = {}
    asked = list(wanted.items())
    for at in range(0, len(asked), 512):
        part = asked[at : at + 512]
        got = _git(
            root,
            ["cat-file", "--batch"],
            "".join(f"{oid}\n" for _rel, oid in part).encode(),
        )
        pos = 0
        for rel, _oid in part:
            if got is None:
                break
            nl = got.find(b"\n", pos)
            head = got[pos:nl].split() if nl >= 0 else []
            if len(head) != 3 or head[1] != b"blob" or not head[2].isdigit():
                pos = nl + 1 if nl >= 0 else len(got)
                continue  # (missing: git says "ID missing")
            size = int(head[2])
            body = got[nl + 1 : nl + 1 + size]
            pos = nl + 1 + size + 1
            if len(body) == size and size <= HASHED:
                out[rel] = body
    return out


def tree_line(root: str, rel: str, size: int, git: GitTree) -> tuple[str, bytes | None]:
    """A file's line in the digest of a tree in git (its blob id: from the index when clean, else
    computed from its bytes; an ignored file by its size, not read), and its bytes when read."""
    oid = git.clean.get(rel)
    if oid is not None:
        return oid, None
    if git.ignored(rel):
        return f"size {size}", None
    data = read_bytes(os.path.join(root, rel), size)
    return (blob_id(data) if data is not None else f"size {size}"), data


#: The start record's ``walk`` when its tree was walked as :func:`walk` walks it (absent: depth
#: first, the virtual environments and caches left out by their names only; not compared).
BREADTH = "breadth"
#: The start record's ``digest_of`` for a digest of blob ids (absent: each file's sha256).
BY_BLOB = "git-blobs"


def digest(
    root: str, of: str | None = None, own: frozenset[str] = frozenset()
) -> tuple[str | None, int, bool]:
    """The digest of the tree under ``root`` as the recorder takes it at a run's start (``own``:
    the paths it left out as its outputs), how many files, and whether the walk was cut: with
    ``of`` :data:`BY_BLOB` (the start was in a git work tree) each file's path and git blob id
    (:func:`tree_line`; ``None`` when git cannot say here: not compared), else each file's path
    and sha256 (every file read), in walk order."""
    seen = walk(root, own=own)
    files, cut = seen.files, seen.cut
    listing = hashlib.sha256()
    if of == BY_BLOB:
        git = git_tree(root)
        if git is None:
            return None, len(files), cut
        for rel, st in files.items():
            line, _ = tree_line(root, rel, st[0], git)
            listing.update(f"{rel}\0{line}\n".encode(errors="surrogateescape"))
        return listing.hexdigest(), len(files), cut
    for rel, st in files.items():
        sha, _ = file_hash(os.path.join(root, rel), st[0])
        listing.update(f"{rel}\0{sha}\n".encode(errors="surrogateescape"))
    return listing.hexdigest(), len(files), cut
