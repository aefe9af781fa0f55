"""A fork never changes what the user owns (docs/fork.md, "Where a fork runs"): ``looptap run
--from`` of a run whose working tree was recorded runs its agent in a scratch copy of the tree
(cassettes/shell/_fork.py) mounted over the path the recording ran in, in a mount namespace of its
own, where the user's ``HOME`` and temp folder are seen through scratch layers (overlays: the agent
reads what they hold at the same paths, its writes there go to the fork's scratch folder); where
that mount cannot be made the fork is refused before anything is sent, unless ``--in-place``
(then what it may change is said). The recorded commands that wrote outside the tree are listed
first."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import stat
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

__all__ = ["IN_PLACE_VAR", "Refused", "asked_in_place", "fork_tree", "in_place"]

#: Paths of the tree listed by ``--in-place`` (the rest counted).
LISTED = 20


#: What a refused fork would have done, and the way out.
_CHANGE = (
    "the commands it runs again and the absolute paths its recorded tool calls carry would "
    "change your files. Nothing was sent. --in-place runs it in your working tree anyway, after "
    "saying what it may change (LOOPTAP_IN_PLACE=1: every fork)"
)
#: The environment's form of ``--in-place`` (``1``): for every fork and ``why`` branch.
IN_PLACE_VAR = "LOOPTAP_IN_PLACE"


def asked_in_place(flag: bool) -> bool:
    """``--in-place`` given, or :data:`IN_PLACE_VAR` set to ``1``."""
    return flag or os.environ.get(IN_PLACE_VAR, "").strip() == "1"


class Refused(Exception):
    """The fork cannot be isolated from the user's files, and ``--in-place`` was not given."""


def fork_tree(
    fork: Any, config: Any, target: Any, scratch: list[Path]
) -> tuple[Any, list[str], dict[str, str]]:
    """A fork of a run whose working tree was recorded runs its agent in a scratch copy of this
    working tree as the recording's start had it: this process moves there (the replay server and
    the branch's header take it as their working directory), its output paths made absolute
    first; the command prefix that shows the agent the copy at the recorded path and its
    ``HOME`` and temp folder through scratch layers (:func:`_masking`) is returned, with what its
    environment changes (:func:`_scratch_env`). Where that mount cannot be made, or the run's
    tree was not recorded (no scratch copy of it can be made), :class:`Refused` (checked before
    the tree is copied)."""
    origin = Path(os.path.abspath(fork.source.run))
    shell = open_run(origin, whole=True).shell
    root = shell.start.get("root") if shell.start is not None else None
    if shell.start is None:
        raise Refused(
            "the fork is refused: the recording holds no working tree (recorded with "
            "--no-shell-trace, or not by looptap run), so no scratch copy of it can be made: in "
            f"your working tree, {_CHANGE}"
        )
    parent = Path(tempfile.mkdtemp(prefix="looptap-fork-tree-", dir=_outside_layers()))
    dest = parent / "tree"
    mask, why, layered = (
        _masking(dest, root, parent)
        if isinstance(root, str)
        else (None, "the recording does not say which folder it ran in", {})
    )
    if mask is None:
        shutil.rmtree(parent, ignore_errors=True)
        raise Refused(
            f"the fork is refused: its agent cannot be isolated from your files ({why}): in your "
            f"working tree, {_CHANGE}"
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
    return target, mask, _scratch_env(parent, layered, root)


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
        f"--in-place: the fork runs the agent in your working tree {os.getcwd()}, with your HOME "
        f"and temp folder, not in scratch ones: the commands it runs again may change them{what}"
    )
    root = shell.start.get("root") if shell.start is not None else None
    _outside_said(origin, root if isinstance(root, str) else os.getcwd(), Path.cwd())


def _outside_said(origin: Path, root: str, tree: Path) -> None:
    procs = read_processes(origin)
    for line in outside_writes(procs.processes, procs.traced, root, tree):
        messages.emit(line)


def _layers() -> dict[str, str]:
    """The folders of the user's that a fork's agent sees through a scratch layer, by name: its
    ``HOME`` and its temp folder (``TMPDIR``, else ``/tmp``), real paths."""
    out = {"home": os.path.realpath(os.path.expanduser("~"))}
    out["tmp"] = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
    return out


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _inner(name: str, other: str, folders: dict[str, str]) -> bool:
    """Whether ``folders[name]`` lies in ``folders[other]`` (the same folder: the later name)."""
    here, there = folders[name], folders[other]
    return _within(here, there) and (here != there or name > other)


def _outside_layers() -> str | None:
    """Where a fork's scratch folder goes: ``/var/tmp`` when it lies outside the layered folders
    (an overlay's scratch layer may not lie in the folder it covers), else the temp folder
    (``None``: then the temp folder is not layered, :func:`_layerable`)."""
    here = os.path.realpath("/var/tmp")
    if os.path.isdir(here) and os.access(here, os.W_OK | os.X_OK):
        if not any(_within(here, f) or _within(f, here) for f in _layers().values()):
            return here
    return None


def _layerable(root: str, scratch: Path) -> dict[str, str]:
    """Of :func:`_layers`, those a scratch layer can be put over: a folder, not ``/``, its path
    fit for an overlay's options, not holding the fork's scratch folder nor lying in the tree."""
    out = {}
    for name, folder in _layers().items():
        if not os.path.isdir(folder) or folder == os.sep or any(c in folder for c in ",:\\"):
            continue
        if _within(os.path.realpath(scratch), folder) or _within(folder, os.path.realpath(root)):
            continue
        out[name] = folder
    return out


def _scratch_env(folder: Path, layered: dict[str, str], root: str) -> dict[str, str]:
    """What the forked agent's environment changes, and one line saying its ``HOME`` and temp
    folder: each the user's own path seen through a scratch layer (``layered``: an overlay in its
    mount namespace; it reads what is there, what it writes goes to ``folder/NAME``), or inside
    ``root`` (the recorded tree, the scratch copy mounted over it: left as it is, the path the
    recording's requests carry), else an empty folder of ``folder`` (``HOME``, ``TMPDIR``, and
    ``TMP``/``TEMP`` where set)."""
    env: dict[str, str] = {}
    said = []
    places = _layers()
    for name, what, keys in (("home", "HOME", ("HOME",)), ("tmp", "temp folder", ("TMPDIR",))):
        if name in layered:
            outer = next((m for m in layered if m != name and _inner(name, m, layered)), name)
            said.append(f"its {what} {layered[name]} through a scratch layer ({folder / outer})")
            continue
        if _within(places[name], os.path.realpath(root)):
            said.append(f"its {what} {places[name]} in the scratch copy of the tree it lies in")
            continue
        (folder / name).mkdir(mode=0o700, exist_ok=True)
        env.update({k: str(folder / name) for k in keys})
        if name == "tmp":
            env.update({k: str(folder / name) for k in ("TMP", "TEMP") if k in os.environ})
        said.append(f"its {what} an empty scratch folder, {folder / name}")
    messages.emit(
        "the forked agent's writes stay in the fork's scratch folder: "
        + "; ".join(said)
        + " (a layer: it reads what your folder holds, with the same path; an empty folder: "
        "where no layer could be made, what it would read there is not found)"
    )
    return env


def _masking(dest: Path, root: str, probe: Path) -> tuple[list[str] | None, str, dict[str, str]]:
    """The command prefix that runs the agent with ``dest`` mounted over ``root`` (the tree the
    recording ran in) in a mount namespace of its own (``unshare``, util-linux), in ``root``: the
    absolute paths of the recorded tool calls (Claude Code's ``Read``, ``Write``) reach the scratch
    copy, not the user's tree, and the agent sees the recorded working directory. Not root: a user
    namespace mapped to root for the mount, then one mapped back to the user's own ids. The user's
    ``HOME`` and temp folder are overlaid there (:func:`_layerable`; their writes to
    ``probe/home`` and ``probe/tmp``), outer first; the copy is mounted through a descriptor opened
    before them (an overlay shows no mount beneath it). Tried first with ``probe`` (an existing
    folder) in place of ``dest``, with every layer, then fewer; ``None`` and why where the tree's
    mount cannot be made (not Linux, no ``unshare``, user namespaces refused, ``root`` gone), with
    the layers made."""
    exe = shutil.which("unshare")
    if not sys.platform.startswith("linux"):
        return None, f"no mount namespace on {sys.platform}", {}
    if exe is None:
        return None, "no unshare on PATH (util-linux)", {}
    if not os.path.isdir(root):
        return None, f"the folder the recording ran in, {root}, is not here", {}
    uid, gid = os.getuid(), os.getgid()
    then = "" if uid == 0 else f"{shlex.quote(exe)} --user --map-user={uid} --map-group={gid} -- "
    outer = [exe, "--mount"] if uid == 0 else [exe, "--user", "--map-root-user", "--mount"]
    script = (
        'r="$1"; l="$2"; n="$3"; shift 3; exec 3<"$0" || exit 96; while [ "$n" -gt 0 ]; do '
        'mount --bind "$1" "$l/.real-$2" && mount -t overlay overlay -o '
        '"lowerdir=$1,upperdir=$l/$2,workdir=$l/.work-$2" "$1" || exit 97; n=$((n - 1)); '
        'shift 2; done; m="$1"; shift; while [ "$m" -gt 0 ]; do '
        # (a socket gone since it was listed, ssh-agent's or a test's: nothing left to reach)
        'if [ -e "$l/.real-$1" ]; then mount --bind "$l/.real-$1" "$2" || '
        '[ ! -e "$l/.real-$1" ] || exit 95; fi; m=$((m - 1)); shift 2; done; '
        f'mount --bind /proc/self/fd/3 "$r" && exec 3<&- && cd "$r" && exec {then}"$@"'
    )
    prefix = [*outer, "--", "/bin/sh", "-c", script]
    can = _layerable(root, probe)
    # a folder inside another one layered (a HOME under /tmp) is seen through that one's layer:
    # no overlay of its own (one stacked inside another may be refused)
    inside = {n: m for n in can for m in can if m != n and _inner(n, m, can)}
    names = sorted(set(can) - set(inside), key=lambda n: len(can[n]))  # the outer first
    tries = [names, *([[n] for n in names] if len(names) > 1 else []), []] if names else [[]]
    for name in names:
        (probe / name).mkdir(mode=0o700)
        (probe / f".work-{name}").mkdir(mode=0o700)
        (probe / f".real-{name}").mkdir(mode=0o700)
    done: Any = None
    for layers in tries:
        args = [str(len(layers)), *[x for n in layers for x in (can[n], n)]]
        socks = _sockets({n: can[n] for n in layers})
        args += [str(len(socks)), *[x for pair in socks for x in pair]]
        try:
            done = subprocess.run(
                [*prefix, str(probe), root, str(probe), *args, "true"],
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"unshare could not run: {exc}", {}
        if done.returncode == 0:
            for name in set(names) - set(layers):  # (made empty by _scratch_env)
                shutil.rmtree(probe / name, ignore_errors=True)
            for name in names:
                if name not in layers:
                    shutil.rmtree(probe / f".work-{name}", ignore_errors=True)
                    shutil.rmtree(probe / f".real-{name}", ignore_errors=True)
            made = {n: can[n] for n in layers}
            made.update({n: can[n] for n, m in inside.items() if m in layers})
            return [*prefix, str(dest), root, str(probe), *args], "", made
    said = done.stderr.decode(errors="replace").strip().splitlines() if done else []
    return None, "the mount namespace was refused: " + (said[-1][:200] if said else "?"), {}


#: The Unix sockets looked for in a layered folder and the folders one level below it (ssh-agent's
#: ``/tmp/ssh-*/agent.N``, X11's ``/tmp/.X11-unix/X0``, tmux, an IDE's), and entries read for it.
SOCKETS, SCANNED = 64, 20000


def _sockets(layers: dict[str, str]) -> list[tuple[str, str]]:
    """The Unix sockets in the layered folders (two levels deep, bounded), each as the path of
    the folder's own view (``NAME/REL``, bound from ``.real-NAME`` in the namespace) and its path:
    a socket seen through an overlay cannot be connected to, so each is mounted back over it.
    Under the outermost layer that holds it; one made after the fork starts is not reached."""
    out: list[tuple[str, str]] = []
    seen = 0
    outer = sorted(layers.items(), key=lambda kv: len(kv[1]))
    for folder in [f for _n, f in outer]:
        todo, depth = [folder], 0
        while todo and depth < 2:
            nxt = []
            for d in todo:
                try:
                    with os.scandir(d) as it:
                        for e in it:
                            seen += 1
                            if seen > SCANNED or len(out) >= SOCKETS:
                                return out
                            if e.is_dir(follow_symlinks=False):
                                nxt.append(e.path)
                            elif stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode):
                                n, f = next((n, f) for n, f in outer if _within(e.path, f))
                                pair = (f"{n}/{os.path.relpath(e.path, f)}", e.path)
                                if pair not in out:
                                    out.append(pair)
                except OSError:
                    continue
            todo, depth = nxt, depth + 1
    return out
