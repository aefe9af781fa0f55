"""The runs ``looptap mcp`` may read: the files under its roots (symlinks resolved, anything else
refused with :class:`~cassettes.mcp._answers.QueryError`), opened on demand, the latest few kept
open while unchanged, and a recording in progress followed as it grows."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..fleet import RUN_SUFFIXES, run_files
from ..matching import rules_of_args
from ..project import RuleError, find_config
from ..reading import Run, open_run
from ..replay.forking.rundiff import comparing
from ._answers import QueryError, checked_roots, text

__all__ = ["RUN_SUFFIXES", "Runs"]


class Runs:
    """The runs under some root directories: each opened once while its file is unchanged (the
    latest ``keep`` kept), and each one ``tail`` follows read on where it stopped."""

    def __init__(self, roots: Sequence[str | Path], keep: int = 4) -> None:
        self.roots = checked_roots(roots)
        self.keep = keep
        #: file → (its size and modification time when opened, the run)
        self.opened: OrderedDict[Path, tuple[tuple[int, int], Run]] = OrderedDict()
        #: file → (the run followed as it grows, the file's inode)
        self.followed: OrderedDict[Path, tuple[Any, int]] = OrderedDict()

    def resolve(self, name: str) -> Path:
        """A run's file from its name as listed (relative to a root) or an absolute path; refused
        unless it is a regular cassette file under a root once symlinks are resolved."""
        real = self.under_roots(
            name, "a run is named by its path as list_runs gives it (recorded.runs[].run)", "run"
        )
        if real is not None:
            if not real.is_file() or real.suffix.lower() not in RUN_SUFFIXES:
                raise QueryError(
                    "this run is not a cassette (.jsonl) or vcrpy (.yaml) file", run=name
                )
            return real
        for path in self.files():  # a name as list_runs shows it: unsafe characters made visible
            if text(self.label(path), 300) == name:
                return path
        raise QueryError("no run of this name under the roots (list_runs names them)", run=name)

    def under_roots(self, name: str, how: str, field: str) -> Path | None:
        """What ``name`` (absolute, or relative to a root) is once symlinks are resolved, or
        ``None`` when it exists under no root; a name that is no name is refused with ``how``, a
        path that resolves outside the roots as such (the error's ``field`` holding the name)."""
        if not isinstance(name, str) or not name or "\x00" in name or len(name) > 4096:
            raise QueryError(how)
        given = Path(name)
        for c in [given] if given.is_absolute() else [r / given for r in self.roots]:
            try:
                real = c.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if not any(real.is_relative_to(r) for r in self.roots):
                raise QueryError(
                    "this is outside the directories this server may read", **{field: name}
                )
            return real
        return None

    def output_file(self, name: str, filename: str, how: str, field: str, writer: str) -> Path:
        """The ``filename`` a command (``writer``) wrote in its output directory ``name`` under a
        root, or that file named itself; refused when there is none (no symlink)."""
        real = self.under_roots(name, how, field)
        if real is None:
            raise QueryError("nothing of this name under the roots", **{field: name})
        path = real / filename if real.is_dir() else real
        if path.name != filename or not path.is_file() or path.is_symlink():
            raise QueryError(f"no {filename} here ({writer} -o DIR writes it)", **{field: name})
        return path

    def comparing(self, path_a: Path, a: Run, b: Run) -> Any:
        """How ``diff`` and ``fork_diff`` compare two runs' requests: as ``looptap diff`` does
        (:func:`cassettes.replay.forking.rundiff.comparing`: the built-in detectors, each run's with
        its own working directory and home, and the project's rules for A's cassette), the project's
        file read only when it is under a root (else no rules: this server reads nothing else)."""
        found = find_config(path_a)  # (as rules_of_args finds it)
        try:
            inside = found is not None and any(
                found[0].resolve().is_relative_to(r) for r in self.roots
            )
            rules = rules_of_args(None, path_a) if inside else None
        except (RuleError, OSError) as exc:
            raise QueryError(
                "the project's looptap rules for this run cannot be used",
                run=self.label(path_a),
                reason=str(exc),
            ) from None
        return comparing(rules, a.header, b.header)

    def label(self, path: Path) -> str:
        """The run's name as list_runs gives it: relative to its root (under the root's name
        when there are several roots)."""
        for r in self.roots:
            if path.is_relative_to(r):
                return (
                    str(path.relative_to(r))
                    if len(self.roots) == 1
                    else str(Path(r.name) / path.relative_to(r))
                )
        return str(path)

    def files(self) -> list[Path]:
        """Every cassette under the roots, newest first (symlinks leading out are left out)."""
        return run_files(self.roots)

    def open(self, name: str) -> tuple[Path, Run]:
        """The run ``name`` names, read and analysed (again only when its file changed)."""
        path = self.resolve(name)
        st = path.stat()
        stamp = (st.st_size, st.st_mtime_ns)
        hit = self.opened.get(path)
        if hit is not None and hit[0] == stamp:
            self.opened.move_to_end(path)
            return path, hit[1]
        try:
            run = open_run(path)
        except CassetteError as exc:  # its message may quote the file (a header's writer, a record)
            raise self.unreadable(path, exc) from None
        self.opened[path] = (stamp, run)
        while len(self.opened) > self.keep:
            self.opened.popitem(last=False)
        return path, run

    def follow(self, name: str) -> Any:
        """The run ``name`` names, followed as it grows (read on where the last call stopped; read
        again from the start when the file was replaced or shrank), read to its current end."""
        path = self.resolve(name)
        st = path.stat()
        live = self.followed.get(path)
        if live is None or live[1] != st.st_ino or st.st_size < live[0].read_bytes:
            try:
                live = (open_run(path, follow=True), st.st_ino)
            except CassetteError as exc:
                raise self.unreadable(path, exc) from None
            self.followed[path] = live
            while len(self.followed) > self.keep:
                self.followed.popitem(last=False)
        self.followed.move_to_end(path)
        try:
            while not live[0].step().at_end:
                pass
        except CassetteError as exc:
            raise self.unreadable(path, exc) from None
        return live[0]

    def unreadable(self, path: Path, exc: CassetteError) -> QueryError:
        """The error for a run looptap cannot read (the reader's reason under ``recorded``)."""
        return QueryError("looptap cannot read this run", run=self.label(path), reason=str(exc))
