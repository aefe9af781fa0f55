"""Paths a user names that looptap writes or removes: the cassette (``-o``), the ready file,
exports, imports, ``.gitattributes``, the recorder's ``--confdir`` (docs/reliability.md, "Paths
looptap writes").

One policy for all of them:

* **checked first** (:func:`check_target`), before anything is recorded or written: a symbolic
  link, a directory, a device, a FIFO or a socket at the path is refused with one line; an existing
  regular file is refused unless the caller knows it to be looptap's own (a cassette, a ready file
  left by a recorder that is gone), or the user said ``--force``; an empty file of one's own holds
  nothing to lose (``mktemp`` reserves names that way) and is taken;
* **created exclusively, never through a link**: whole files are written under a private,
  unpredictable name in the same directory (``mkstemp``: ``O_CREAT|O_EXCL``, mode 0600) and then
  linked into place (``link`` fails when the name exists) or, for a file checked to be looptap's,
  renamed over it (``rename`` replaces the name, never what a link points at); files opened to
  append are opened ``O_NOFOLLOW`` and refused unless regular and their owner's;
* **removed only when still looptap's**: :func:`remove_if_same` unlinks a path only while it is
  the very file (device and inode) looptap created.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import CassetteIOError
from ._gate import Redacted, sealed

__all__ = [
    "FileId",
    "Target",
    "UnsafePath",
    "check_input",
    "check_target",
    "describe",
    "open_append",
    "process_start",
    "read_config",
    "read_input",
    "reclaim_staged",
    "remove_if_same",
    "same_path",
    "staged",
    "write_new",
    "write_plain",
]


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from ``/proc``), ``"0"`` where
    there is no ``/proc`` and the process exists; ``None`` when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None
    except OSError:
        raw = b""
    if raw:
        # (the command name may hold spaces and parentheses)
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 19 and fields[19].isdigit():
            return fields[19].decode()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return "0"


class UnsafePath(CassetteIOError):
    """A path looptap was asked to write or remove that it refuses to touch: one line for the
    user."""


@dataclass(frozen=True)
class FileId:
    """Which file a name referred to: its device and inode."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls(st.st_dev, st.st_ino)


@dataclass(frozen=True)
class Target:
    """A checked destination: ``replaces`` is the file found there that may be replaced (``None``:
    the name was free, and must still be when the file is put in place)."""

    path: Path
    replaces: FileId | None = None


#: What each kind of file is called in a message, in the order it is tested.
_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def describe(st: os.stat_result) -> str:
    """What a non-regular file is, for a message."""
    return next((kind for test, kind in _KINDS if test(st.st_mode)), "not a regular file")


def _lstat(path: Path, what: str = "") -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafePath(
            f"{what + ' ' if what else ''}{path}: cannot be checked: {exc.strerror or exc}"
        ) from None


def check_target(
    path: str | Path,
    what: str,
    *,
    owned: Callable[[Path], bool] | None = None,
    force: bool = False,
    hint: str = "",
    parents: bool = False,
    appends: bool = False,
) -> Target:
    """Check ``path`` before looptap writes ``what`` there (``"the ready file"``, ``"the
    cassette"``).

    Refused (:class:`UnsafePath`) when the name is a symbolic link, a directory, a device, a FIFO
    or a socket, whatever ``force`` says; when it is a regular file, it may be replaced if
    ``owned(path)`` says it is looptap's own, if ``force``, or if it is empty and this user's;
    anything else is refused, the message ending with ``hint`` (how to say otherwise). A file to
    be created or replaced must also have a place that takes one (:func:`_check_place`: its
    directory, or with ``parents`` the nearest that exists, the writer making the rest); a file
    that exists and is appended to (``appends``) needs none."""
    path = Path(path)
    st = _lstat(path, what)
    if st is None:
        _check_place(path, what, parents)
        return Target(path)
    if not stat.S_ISREG(st.st_mode):
        extra = "; name the file itself" if stat.S_ISLNK(st.st_mode) else ""
        raise UnsafePath(
            f"{what} {path} is {describe(st)}: looptap does "
            f"not write to, replace or remove it{extra}"
        )
    if (
        force
        or (st.st_size == 0 and st.st_uid == os.geteuid())
        or (owned is not None and owned(path))
    ):
        if not appends:
            _check_place(path, what, parents)
        return Target(path, FileId.of(st))
    if owned is None:  # nothing looptap replaces on its own here: only --force does
        raise UnsafePath(f"{what} {path} exists{f' ({hint})' if hint else ': refused'}")
    raise UnsafePath(
        f"{what} {path} already exists and is not looptap's: refused{f' ({hint})' if hint else ''}"
    )


def _check_place(path: Path, what: str, parents: bool) -> None:
    """Refuse (:class:`UnsafePath`) a ``path`` no file can be created at: its directory (with
    ``parents``, the nearest one that exists) missing, not a directory, or not taking a new file.
    Tried, not guessed from modes (which root ignores): a private file is created there and
    removed at once (named as :func:`staged` names its files, so one a killed process left is
    reclaimed), so a read-only file system, ``/proc``, a directory of another user or a path under
    a file are refused before anything starts."""
    directory = path.parent
    for _ in range(256):
        try:
            st = os.stat(directory)
        except FileNotFoundError:
            if parents and directory.parent != directory:
                directory = directory.parent
                continue
            raise UnsafePath(
                f"{what} {path} cannot be written: the directory {directory} does not exist"
            ) from None
        except OSError as exc:
            raise UnsafePath(
                f"{what} {path} cannot be written: {directory}: {exc.strerror or exc}"
            ) from None
        break
    else:
        raise UnsafePath(f"{what} {path} cannot be written: no directory of it exists")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(
            f"{what} {path} cannot be written: {directory} is {describe(st)}, not a directory"
        )
    try:
        fd, probe = _mkstemp(path, directory)
    except OSError as exc:
        raise UnsafePath(
            f"{what} {path} cannot be written: no file can be created in {directory} "
            f"({exc.strerror or exc})"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _input_kind(st: os.stat_result, what: str, path: Path) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise CassetteIOError(
            f"{what} {path} is {describe(st)}: looptap reads "
            "runs and edit files only from regular files"
        )


def check_input(path: str | Path, what: str) -> Path:
    """A file looptap will read (the run ``--from`` forks, an ``--edit`` file): it must exist and
    be a regular file (a link to one is followed). A FIFO, a device, a directory or a socket is
    refused with one line (:class:`~cassettes.errors.CassetteIOError`), never opened: reading
    one would block or never end."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CassetteIOError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise CassetteIOError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    _input_kind(st, what, path)
    return path


def read_input(path: str | Path, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``: opened without blocking (a FIFO
    named in its place opens at once and is refused, :func:`check_input`'s line), checked on the
    open file, then read."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CassetteIOError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise CassetteIOError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    try:
        _input_kind(os.fstat(fd), what, path)
    except CassetteIOError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        try:
            return f.read(limit)
        except OSError as exc:
            raise CassetteIOError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None


#: The most looptap reads of a file it finds on its own (a project's ``looptap.toml`` or
#: ``pyproject.toml``, the agent's ``looptap-rules.toml``): a configuration is a few KiB.
MAX_CONFIG = 1 << 20


def read_config(path: str | Path, what: str, limit: int = MAX_CONFIG) -> str:
    """The text of the configuration file ``path`` (:func:`read_input`: a regular file, never a
    FIFO), refused in one line naming it when it is over ``limit`` bytes (at once, before any of
    it is parsed) or not UTF-8."""
    raw = read_input(path, what, limit + 1)
    if len(raw) > limit:
        raise CassetteIOError(f"{what} {path} is larger than {limit >> 10:,} KiB: not read")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteIOError(
            f"{what} {path} is not UTF-8 text (byte {exc.start:,}): not read"
        ) from None


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether two names are the same file: the same inode when both exist, else the same absolute
    path (with the directory's links resolved)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        pa, pb = Path(a), Path(b)
        return pa.parent.resolve() / pa.name == pb.parent.resolve() / pb.name


def _mkstemp(path: Path, directory: Path) -> tuple[int, str]:
    """A private file in ``directory`` (``mkstemp``), named as :func:`reclaim_staged` reads."""
    pid = os.getpid()
    prefix = f".{path.name}.{pid}-{process_start(pid) or 0}-"
    return tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)


@dataclass
class Staged:
    """A private file beside its destination, written before it is put in place: what
    :meth:`write` passes (only :class:`~._gate.Redacted` bytes: docs/redaction.md, "One gate"),
    or a :class:`~cassettes.recording.pipeline.CassetteWriter` writing ``path`` (it seals each
    line it appends)."""

    path: Path
    _file: BinaryIO

    def write(self, data: Redacted) -> None:
        self._file.write(sealed(data))

    def flush(self) -> None:
        self._file.flush()


@contextlib.contextmanager
def staged(target: Target, *, mode: int = 0o600) -> Iterator[Staged]:
    """A private, unpredictably named file (``mkstemp``, mode 0600) in the destination's directory
    to write what the redactor passed (:class:`Staged`); when the block ends without an exception
    it is flushed, synced and put in place by :func:`_place`, else removed. Exports, pages,
    rewritten branches and every file made from a cassette go through it: a cassette from an
    older looptap, or edited by hand, is sealed again here, never copied as it reads."""
    with _staged(target, mode) as (path, f):
        yield Staged(path, f)


def write_plain(target: Target, data: bytes, *, mode: int = 0o600) -> FileId:
    """Write ``data`` whole at ``target`` as :func:`write_new` does, unsealed: only for what
    holds nothing looptap saw (a CA bundle of the system's certificates, a replay's ready file,
    a line added to ``.gitattributes``); tests/test_write_gate.py lists its callers."""
    with _staged(target, mode) as (_, f):
        f.write(data)
        return FileId.of(os.fstat(f.fileno()))


@contextlib.contextmanager
def _staged(target: Target, mode: int) -> Iterator[tuple[Path, BinaryIO]]:
    """:func:`staged`'s file, raw (its name carries the writer's pid and start time,
    ``.NAME.<pid>-<start>-XXXX.tmp``: one left by a writer killed outright, SIGKILL or a crash,
    is removed by the next write of the same target, :func:`reclaim_staged`)."""
    reclaim_staged(target.path)
    try:
        fd, tmp = _mkstemp(target.path, target.path.parent)
    except OSError as exc:
        raise CassetteIOError(
            f"cannot write in {target.path.parent}: {exc.strerror or exc}"
        ) from None
    tmp_path = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode != 0o600:
                os.fchmod(f.fileno(), mode)
            yield tmp_path, f
            f.flush()
            os.fsync(f.fileno())
        _place(tmp_path, target)
    finally:
        with contextlib.suppress(OSError):
            tmp_path.unlink()


def reclaim_staged(path: Path) -> list[Path]:
    """Remove the staged files of ``path`` (:func:`staged`: ``.<name>.<pid>-<start>-….tmp``) whose
    writer has ended without cleaning up (a reused pid counts as ended); the paths removed. Only
    regular files of this user named by that scheme are touched (``lstat``: never a link), never
    this process's own; never a reason for a write to fail."""
    prefix, me = f".{path.name}.", os.getuid() if hasattr(os, "getuid") else None
    removed: list[Path] = []
    try:
        entries = os.scandir(path.parent)
    except OSError:
        return removed
    with entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            parts = name[len(prefix) : -len(".tmp")].split("-", 2)
            if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
                continue
            pid, start = int(parts[0]), parts[1]
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (
                pid == os.getpid()
                or not stat.S_ISREG(st.st_mode)
                or (me is not None and st.st_uid != me)
                or process_start(pid) in (start, "0")  # (still running)
            ):
                continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _place(tmp: Path, target: Target) -> None:
    """Put the written ``tmp`` at ``target.path``: linked when the name must be free (refused if
    it was taken meanwhile), renamed over the checked file when one may be replaced (refused if
    another file took its name meanwhile)."""
    path = target.path
    if target.replaces is None:
        try:
            os.link(tmp, path)  # fails if the name exists, whatever it is; follows nothing
            return
        except FileExistsError:
            raise UnsafePath(
                f"{path} appeared while looptap was writing it: left as it is"
            ) from None
        except OSError as exc:
            if exc.errno not in (
                errno.EPERM,
                errno.EOPNOTSUPP,
                errno.ENOTSUP,
                errno.EXDEV,
                errno.EMLINK,
                errno.ENOSYS,
            ):
                raise CassetteIOError(f"cannot create {path}: {exc.strerror or exc}") from None
        # A file system without hard links: rename, once the name is checked to be still free.
        if _lstat(path) is not None:
            raise UnsafePath(f"{path} appeared while looptap was writing it: left as it is")
    else:
        st = _lstat(path)
        if st is not None and (FileId.of(st) != target.replaces or not stat.S_ISREG(st.st_mode)):
            raise UnsafePath(
                f"{path} was replaced by another file while looptap was writing it: left as it is"
            )
    try:
        os.replace(tmp, path)  # replaces the name itself, never what a link at it points to
    except OSError as exc:
        raise CassetteIOError(f"cannot create {path}: {exc.strerror or exc}") from None


def write_new(target: Target, data: Redacted, *, mode: int = 0o600) -> FileId:
    """Write ``data`` whole at ``target`` (:func:`staged`); the identity of the file created."""
    with staged(target, mode=mode) as s:
        s.write(data)
        created = FileId.of(os.stat(s.path))
    return created


def remove_if_same(path: str | Path, created: FileId | None) -> bool:
    """Remove ``path`` if it is still the file ``created`` (what looptap made); a file someone
    else put there since is left alone. Whether it was removed."""
    if created is None:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or FileId.of(st) != created:
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def open_append(path: str | Path, what: str) -> tuple[int, bool]:
    """``path`` opened to append (a file descriptor) and whether it was created: created with
    ``O_EXCL`` (mode 0600) when the name is free; otherwise opened without following a link
    (``O_NOFOLLOW``) or blocking on a FIFO, and refused (:class:`UnsafePath`) unless it is a
    regular file of this user."""
    path = Path(path)
    base = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    created = True
    try:
        fd = os.open(path, base | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        created = False
        try:
            fd = os.open(path, base)
        except OSError as exc:
            st = _lstat(path)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise UnsafePath(
                    f"{what} {path} is {describe(st)}: looptap does not write to it"
                ) from None
            raise CassetteIOError(
                f"cannot open {path} for writing: {exc.strerror or exc}"
            ) from None
    except OSError as exc:
        raise CassetteIOError(f"cannot open {path} for writing: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        why = describe(st) if not stat.S_ISREG(st.st_mode) else "a file of another user"
        raise UnsafePath(f"{what} {path} is {why}: looptap does not write to it")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd, created
