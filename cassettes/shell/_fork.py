"""A coding agent forked where it stood (``looptap run --from RUN@turn=N`` of a run recorded with
``--shell-trace``): the agent runs in a scratch copy of the working tree, never in the user's, as
the tree was when the recording sent its request at the cursor: the user's tree copied, every file
the recording saw change put back as it was at the start (its contents kept beside the cassette,
``RUN.jsonl.files/``), then each change seen before the cursor applied. What could not be put back
(contents not kept: too large, or holding a key) is said, and so is a user's tree that differs
from the recording's start."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._link import ShellRun
from ._records import Process
from ._tree import BREADTH, BY_BLOB, digest

__all__ = ["Scratch", "changed_here", "outside_writes", "scratch_tree"]

#: Recorded commands listed that wrote outside the tree, and paths each (the rest counted).
LISTED, PATHS = 20, 4


@dataclass
class Scratch:
    """The scratch tree made, and what is said of it (one line each)."""

    path: Path
    said: list[str] = field(default_factory=list)
    #: Files put back as they were at the cursor (written or removed).
    restored: int = 0
    #: The working tree's path the recording ran in (its ``files`` start record's ``root``).
    root: str | None = None


def _put(dest: Path, rel: str, sha: str | None, blobs: Path) -> str | None:
    """``rel`` under ``dest`` made the content ``sha`` (``None``: absent); why not, if not."""
    target = dest / rel
    if not os.path.realpath(target).startswith(os.path.realpath(dest) + os.sep):
        return f"{rel}: outside the tree, not touched"
    if sha is None:
        if target.is_file() or target.is_symlink():
            target.unlink()
        return None
    blob = blobs / sha
    if not blob.is_file():
        return f"{rel}: its contents were not kept; left as in your tree"
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    shutil.copyfile(blob, target)
    return None


def _compared(start: dict[str, Any], user_root: Path) -> list[str]:
    """What is said of the user's tree against the recording's start (its digest, taken the way
    the start record says: ``digest_of``)."""
    recorded = start.get("digest")
    of = start.get("digest_of")
    if "digest" in start and recorded is None:  # (read while the agent ran: not all of it)
        return [
            "the recording's start was not read whole (a file changed before it was read, or the"
            " run ended first): your tree was not compared with it"
        ]
    if not isinstance(recorded, str):
        return []
    if start.get("walk") != BREADTH:  # (depth first, venvs and caches by name: another walk)
        return ["the recording's start was taken by an older looptap: your tree was not compared"]
    if of not in (None, BY_BLOB):
        return [
            "the recording's start digest is of a kind this looptap does not read: not compared"
        ]
    own = start.get("own")
    left_out = frozenset(p for p in own if isinstance(p, str)) if isinstance(own, list) else None
    now, files, _cut = digest(
        str(user_root), of if isinstance(of, str) else None, left_out or frozenset()
    )
    if now is None:
        return [
            "the recording's start was taken in a git work tree and git cannot say what is in"
            " yours: your tree was not compared with it"
        ]
    if now != recorded:
        return [
            f"your working tree differs from the recording's start ({start.get('files')} files "
            f"then, {files} now): the fork runs in a copy of it, the files the recording saw "
            "change put back as they were at the cursor; other differences stay"
        ]
    return []


def scratch_tree(
    origin: Path,
    shell: ShellRun,
    user_root: Path,
    dest: Path,
    upto_seq: int | None = None,
    end: bool = False,
) -> Scratch | None:
    """The scratch tree for a fork of ``origin``, copied from ``user_root`` into ``dest`` (which
    must not exist): as at the recording's start (a fork's agent runs the prefix's tools again),
    or with ``upto_seq`` as when the recording sent that round trip's request (the changes seen
    before it applied), or with ``end`` as the recording left it (every change seen, the last
    scan's after the agent ended too: what ``--verify`` judges the recorded run on); ``None`` when
    the recording holds no working tree (not recorded with
    ``--shell-trace``)."""
    start = shell.start
    if start is None:
        return None
    root = start.get("root")
    out = Scratch(dest, root=root if isinstance(root, str) else None)
    if isinstance(root, str) and os.path.realpath(root) != os.path.realpath(user_root):
        out.said.append(f"the recording ran in {root}; the fork's tree is a copy of {user_root}")
    out.said.extend(_compared(start, user_root))
    shutil.copytree(user_root, dest, symlinks=True)
    blobs = Path(f"{origin}.files")
    # each changed path: as at the start (the first change's before), then each change seen
    # before the cursor's request (the scans placed at their requests by the linking)
    state: dict[str, str | None] = {}
    unread: dict[str, str] = {}  # (their start not read: left as in the user's tree)
    for scan in shell.tree:
        for c in scan["changes"]:
            path, why = c["path"], c.get("unread")
            if path not in state and path not in unread and why:
                unread[path] = why
            elif path not in unread:
                state.setdefault(path, c["before"])
    for scan in shell.tree:
        seq = scan["seq"]
        if not end and (upto_seq is None or seq is None or seq > upto_seq):
            continue
        for c in scan["changes"]:
            state[c["path"]] = c["after"]
            unread.pop(c["path"], None)
    out.said.extend(
        f"{rel}: {why}; left as in your tree" for rel, why in sorted(unread.items())[:20]
    )
    for rel, sha in sorted((r, s) for r, s in state.items() if r not in unread):
        why = _put(dest, rel, sha, blobs)
        if why is None:
            out.restored += 1
        else:
            out.said.append(why)
    return out


def _outside(path: str, root: str, tree: Path) -> str | None:
    """Why ``path`` (absolute, as the tracer saw it) lies outside the working tree the recording
    ran in (``root``) for an agent running in ``tree`` (its copy, or the user's tree itself);
    ``None`` when it lies inside."""
    path = os.path.normpath(path)
    for r in {os.path.normpath(root), os.path.realpath(root)}:
        if path == r or path.startswith(r.rstrip(os.sep) + os.sep):
            here = os.path.realpath(tree / os.path.relpath(path, r))
            mine = os.path.realpath(tree)
            if here == mine or here.startswith(mine.rstrip(os.sep) + os.sep):
                return None
            return "through a symlink leading out"
    return None if path.startswith(("/dev/", "/proc/")) else "outside the tree"


def outside_writes(processes: Sequence[Process], traced: bool, root: str, tree: Path) -> list[str]:
    """What is said before a fork runs the agent again of the recorded commands that wrote or
    removed a file outside the working tree (an absolute path elsewhere, ``$HOME``, a path in the
    tree whose symlink in ``tree`` leads out): one line each, the innermost program that did it
    (the tracer counts a write in every program above it), at most :data:`LISTED`. A recording
    whose commands' files were not traced (no ``--shell-trace``) is said not to be known."""
    if not any(p.output for p in processes):
        why = "not traced" if traced or processes else "not recorded"
        return [
            f"the recording's commands were {why} with their files (recorded without "
            "--shell-trace): what they wrote outside the working tree is not known"
        ]
    by: dict[tuple[str, str], Process] = {}
    said: dict[tuple[str, str], str] = {}
    for p in processes:  # (in order of start: a later one holding a write is further in)
        for op, path in p.files:
            where = _outside(path, root, tree)
            if where is not None:
                by[(op, path)] = p
                said[(op, path)] = where
    each: dict[int, list[str]] = {}
    who: dict[int, Process] = {}
    for (op, path), p in by.items():
        who[id(p)] = p
        each.setdefault(id(p), []).append(
            f"{'wrote' if op == 'write' else 'removed'} {path} ({said[(op, path)]})"
        )
    if not each:
        return []
    out = [
        f"{len(each)} of the recording's commands wrote outside the working tree: the fork runs "
        "the agent again, and these reach your files if it runs them again (its HOME and temp "
        "folder are scratch; other paths are not):"
    ]
    order = sorted(each, key=lambda k: (who[k].started, who[k].pid))
    for key in order[:LISTED]:
        p, what = who[key], each[key]
        command = " ".join(p.argv)[:160]
        more = f", and {len(what) - PATHS} more" if len(what) > PATHS else ""
        agent = " (the agent itself)" if p.agent else ""
        out.append(f"  `{command}`{agent}: " + ", ".join(what[:PATHS]) + more)
    if len(each) > LISTED:
        out.append(f"  … and {len(each) - LISTED} more commands")
    return out


def changed_here(shell: ShellRun) -> list[str]:
    """The paths (relative to the tree) the recording saw change, in order, each once: what a
    fork run in the user's own tree (``--in-place``) may change there again."""
    seen: dict[str, None] = {}
    for scan in shell.tree:
        for c in scan["changes"]:
            seen.setdefault(c["path"], None)
    return list(seen)
