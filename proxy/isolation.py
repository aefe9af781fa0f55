"""A fork never changes what the user owns (docs/fork.md, "Where a fork runs"): ``looptap run
--from`` of a run whose working tree was recorded runs its agent in a scratch copy of the tree
(cassettes/shell/_fork.py) mounted over the path the recording ran in, in a mount namespace of its
own; where that mount cannot be made the fork is refused before anything is sent, unless
``--in-place`` (then what it may change is said). Either way the agent's ``HOME`` and temp folder
are scratch folders, and the recorded commands that wrote outside the tree are listed first."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..cassettes.hints import count
from ..cassettes.matching import here
from ..cassettes.reading import open_run
from ..cassettes.shell import changed_here, outside_writes, read_processes, scratch_tree
from . import messages

__all__ = ["Refused", "fork_tree", "in_place", "scratch_env"]

#: Paths of the tree listed by ``--in-place`` (the rest counted).
LISTED = 20


class Refused(Exception):
    """The fork cannot be isolated from the user's files, and ``--in-place`` was not given."""


def fork_tree(fork: Any, config: Any, target: Any, scratch: list[Path]) -> tuple[Any, list[str]]:
    """A fork of a run whose working tree was recorded runs its agent in a scratch copy of this
    working tree as the recording's start had it: this process moves there (the replay server and
    the branch's header take it as their working directory), its output paths made absolute
    first; the command prefix that shows the agent the copy at the recorded path
    (:func:`_masking`) is returned. Where that mount cannot be made, :class:`Refused` (checked
    before the tree is copied). A run without a recorded tree: said, nothing made."""
    origin = Path(os.path.abspath(fork.source.run))
    shell = open_run(origin, whole=True).shell
    root = shell.start.get("root") if shell.start is not None else None
    if shell.start is None:
        messages.emit(
            "the recording holds no working tree (recorded with --no-shell-trace): the fork runs "
            "the agent here, in your working tree, which the commands it runs again may change"
        )
        return target, []
    parent = Path(tempfile.mkdtemp(prefix="looptap-fork-tree-"))
    dest = parent / "tree"
    mask, why = (
        _masking(dest, root, parent)
        if isinstance(root, str)
        else (None, "the recording does not say which folder it ran in")
    )
    if mask is None:
        shutil.rmtree(parent, ignore_errors=True)
        raise Refused(
            f"the fork is refused: its agent cannot be isolated from your files ({why}): in your "
            "working tree, the commands it runs again and the absolute paths its recorded tool "
            "calls carry would change them. Nothing was sent. --in-place runs it in your working "
            "tree anyway, after saying what it may change"
        )
    assert isinstance(root, str)
    try:
        made = scratch_tree(origin, shell, Path.cwd(), dest)
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise
    assert made is not None
    scratch.append(dest)
    config.output = Path(os.path.abspath(config.output))
    fork.source = dataclasses.replace(fork.source, run=origin)
    target = dataclasses.replace(target, path=Path(os.path.abspath(target.path)))
    for line in made.said:
        messages.emit(line)
    messages.emit(
        f"the fork runs in a scratch copy of the working tree as at the recording's start: {dest} "
        f"({made.restored} files put back; --in-place runs it here instead)"
    )
    _outside_said(origin, root, dest)
    # a --confdir inside the tree copied (or under the recorded path the copy is mounted over)
    # moves with the copy: the CA files the recorder writes there at start are the agent's to
    # read, and the user's tree gets none of the fork's files
    conf = os.path.realpath(config.confdir)
    for tree in (os.getcwd(), root):
        tree = os.path.realpath(tree)
        if conf.startswith(tree + os.sep):
            config.confdir = dest / os.path.relpath(conf, tree)
            messages.emit(
                f"the recorder's confdir is inside the working tree: the fork uses its copy, "
                f"{config.confdir}, whose CA files the agent can read"
            )
            break
    os.chdir(dest)
    fork.meta.update(here())
    messages.emit(
        f"the agent sees the scratch tree at the recorded path {root} (a mount namespace of its "
        "own): the absolute paths its recorded tool calls carry reach the copy"
    )
    return target, mask


def in_place(fork: Any) -> None:
    """``--in-place``: what the fork may change in the user's tree (the paths the recording saw
    change) and outside it (the recorded commands that wrote there), said before it runs."""
    origin = Path(os.path.abspath(fork.source.run))
    shell = open_run(origin, whole=True).shell
    paths = changed_here(shell)
    what = (
        f"; the recording changed {count(len(paths), 'file')} here: "
        + ", ".join(paths[:LISTED])
        + (f", and {len(paths) - LISTED} more" if len(paths) > LISTED else "")
        if paths
        else ""
    )
    messages.emit(
        f"--in-place: the fork runs the agent in your working tree {os.getcwd()}, not in a "
        f"scratch copy: the commands it runs again may change it{what}"
    )
    root = shell.start.get("root") if shell.start is not None else None
    _outside_said(origin, root if isinstance(root, str) else os.getcwd(), Path.cwd())


def _outside_said(origin: Path, root: str, tree: Path) -> None:
    procs = read_processes(origin)
    for line in outside_writes(procs.processes, procs.traced, root, tree):
        messages.emit(line)


def scratch_env(folder: Path, environ: dict[str, str]) -> dict[str, str]:
    """The forked agent's ``HOME`` and temp folder (``TMPDIR``; ``TMP`` and ``TEMP`` where the
    environment sets them): empty folders made in ``folder`` (removed with it), said in one
    line."""
    home, tmp = folder / "home", folder / "tmp"
    home.mkdir(mode=0o700)
    tmp.mkdir(mode=0o700)
    env = {"HOME": str(home), "TMPDIR": str(tmp)}
    env.update({k: str(tmp) for k in ("TMP", "TEMP") if k in environ})
    messages.emit(
        f"the agent's HOME and temp folder are scratch folders: {home}, {tmp} (what it writes "
        "there is not kept; its settings in your HOME are not read: give them through its own "
        "variables)"
    )
    return env


def _masking(dest: Path, root: str, probe: Path) -> tuple[list[str] | None, str]:
    """The command prefix that runs the agent with ``dest`` mounted over ``root`` (the tree the
    recording ran in) in a mount namespace of its own (``unshare``, util-linux), in ``root``: the
    absolute paths of the recorded tool calls (Claude Code's ``Read``, ``Write``) reach the scratch
    copy, not the user's tree, and the agent sees the recorded working directory. Not root: a user
    namespace mapped to root for the mount, then one mapped back to the user's own ids. Tried
    first with ``probe`` (an existing folder) in place of ``dest``; ``None`` and why where it
    cannot be made (not Linux, no ``unshare``, user namespaces refused, ``root`` gone)."""
    exe = shutil.which("unshare")
    if not sys.platform.startswith("linux"):
        return None, f"no mount namespace on {sys.platform}"
    if exe is None:
        return None, "no unshare on PATH (util-linux)"
    if not os.path.isdir(root):
        return None, f"the folder the recording ran in, {root}, is not here"
    uid, gid = os.getuid(), os.getgid()
    then = "" if uid == 0 else f"{shlex.quote(exe)} --user --map-user={uid} --map-group={gid} -- "
    outer = [exe, "--mount"] if uid == 0 else [exe, "--user", "--map-root-user", "--mount"]
    script = f'r="$1"; shift; mount --bind "$0" "$r" && cd "$r" && exec {then}"$@"'
    prefix = [*outer, "--", "/bin/sh", "-c", script]
    try:
        done = subprocess.run(
            [*prefix, str(probe), root, "true"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"unshare could not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return None, "the mount namespace was refused: " + (said[-1][:200] if said else "?")
    return [*prefix, str(dest), root], ""
