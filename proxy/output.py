"""Where ``looptap record`` and ``looptap run`` write: ``-o FILE`` or ``-o +FILE``
(:func:`output_of`), an earlier cassette set aside rather than removed before the run
(:func:`prepare_output`), and put back when the run recorded nothing (:func:`settle_earlier`).
No mitmproxy here."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from ..cassettes.reading import open_run
from ..cassettes.storage import FileId, is_cassette, remove_if_same
from . import messages

__all__ = ["output_of", "prepare_output", "settle_earlier"]


def output_of(raw: str) -> tuple[Path, bool]:
    """The cassette path and whether to append to it (``+FILE``)."""
    if raw.startswith("+") and len(raw) > 1:
        return Path(raw[1:]), True
    return Path(raw), False


def prepare_output(target: Any, append: bool, fork: bool = False) -> tuple[int, Path | None]:
    """Set aside an existing cassette (the checked file, and only while it is still that file) to
    be replaced, or count what is in it when appending (the summary describes this run only).
    Returns the number of round trips recorded before this run and where the earlier file waits
    (renamed beside it, :func:`settle_earlier` puts it back if this run records nothing): a
    command that fails before its first round trip never costs the user a good recording."""
    path = target.path
    if target.replaces is None:
        return 0, None
    try:
        st = path.stat()
    except OSError:
        return 0, None
    if not append:
        if not st.st_size:
            remove_if_same(path, target.replaces)
            return 0, None
        earlier = is_cassette(path)
        aside = None if fork else path.with_name(f".{path.name}.{os.getpid()}.earlier")
        if not _move_if_same(path, target.replaces, aside):
            return 0, None
        # (a fork never appends, and replaces at once: its header is its first line)
        kept = "" if fork else ", kept until the command records a round trip"
        if earlier:
            instead = "" if fork else f"; -o +{path} appends to it instead"
            messages.emit(
                f"replacing the earlier recording in {path} ({st.st_size:,} bytes){kept}{instead}"
            )
        else:
            messages.emit(f"replacing {path} ({st.st_size:,} bytes, not a cassette; --force){kept}")
        return 0, aside

    try:
        return len(open_run(path, whole=True, formats=("looptap",))), None
    except Exception:
        return 0, None


def _move_if_same(path: Path, checked: Any, aside: Path | None) -> bool:
    """Remove ``path`` (``aside`` None) or rename it to ``aside``, only while it is still the file
    that was checked; whether it was moved."""
    if aside is None:
        return remove_if_same(path, checked)
    try:
        st = os.lstat(path)
        if FileId.of(st) != checked or os.path.lexists(aside):
            return False
        os.rename(path, aside)
    except OSError:
        return False
    return True


def _recorded_nothing(path: Path) -> bool:
    """Whether the cassette at ``path`` holds its header line and nothing else (or is missing)."""
    try:
        with path.open("rb") as f:
            f.readline()
            return not any(line.strip() for line in iter(lambda: f.readline(1 << 16), b""))
    except OSError:
        return True


def settle_earlier(path: Path, aside: Path | None) -> bool:
    """After the run: the earlier file set aside goes back in place when this run recorded nothing
    (what the run wrote, a header, is dropped), else it is removed. Whether it went back."""
    if aside is None:
        return False
    if _recorded_nothing(path):
        try:
            os.replace(aside, path)
        except OSError as exc:
            messages.error(f"error: the earlier recording is kept at {aside}: {exc}")
            return False
        messages.emit(f"the command recorded nothing: {path} keeps the earlier recording")
        return True
    with contextlib.suppress(OSError):
        aside.unlink()
    return False
