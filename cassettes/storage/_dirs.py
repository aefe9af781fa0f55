"""The directories looptap keeps its own files in (``--confdir``: the CA and its bundles; the kept
analyses' cache): a directory of this user's, that no one else may enter."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from ._paths import UnsafePath, describe

__all__ = ["check_dir"]


def check_dir(path: str | Path, what: str, *, create: bool = True, tighten: bool = False) -> Path:
    """A directory looptap keeps files in (``--confdir``, the kept analyses' cache): created (mode
    0700, with its parents) when missing and ``create``; refused unless it is a directory of this
    user (a link to one is followed: the directory is what it names). With ``tighten``, one others
    may enter (a mode looser than 0700: made by hand, shared) is made 0700, and a line on stderr
    says so."""
    path = Path(path)
    try:
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafePath(f"{what} {path} cannot be created: {exc.strerror or exc}") from None
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UnsafePath(f"{what} {path} cannot be checked: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{what} {path} is {describe(st)}, not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafePath(
            f"{what} {path} belongs to another user: looptap keeps its files only in a "
            "directory of its own"
        )
    if tighten and st.st_mode & 0o077:
        mode = stat.S_IMODE(st.st_mode)
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise UnsafePath(
                f"{what} {path} is mode {mode:04o} and cannot be made 0700: {exc.strerror or exc}"
            ) from None
        print(
            f"looptap: {what} {path} was mode {mode:04o} (others could read or plant files in "
            "it); made 0700",
            file=sys.stderr,
        )
    return path
