"""The user's check (``why --check CMD``, ``run --verify CMD``) run once, in a tree: ``/bin/sh -c
CMD`` in a session of its own (``prefix`` before it: a fork's mount namespace), within its own time
limit, past which its process group is killed. A branch's fork runs it in the branch's own tree
(proxy/verify_branch.py); :func:`end_state` runs it in a scratch copy of the recorded run's end
state (the baseline of both)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..reading import open_run

__all__ = ["end_state", "run_check"]


def run_check(
    command: str,
    tree: Path,
    env: dict[str, str],
    seconds: float,
    prefix: list[str] | None = None,
    output: int | None = subprocess.DEVNULL,
) -> dict[str, Any]:
    """``{"exit": N, "timed_out": False}``; ``{"exit": None, "timed_out": True, "seconds": S}``
    past the limit; ``{"exit": None, "timed_out": False, "error": …}`` when it could not start.
    ``output``: where its stdout and stderr go (a descriptor; default nowhere)."""
    try:
        proc = subprocess.Popen(
            [*(prefix or []), "/bin/sh", "-c", command],
            cwd=tree,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    except OSError as exc:
        return {"exit": None, "timed_out": False, "error": str(exc)}
    try:
        return {"exit": proc.wait(timeout=seconds), "timed_out": False}
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return {"exit": None, "timed_out": True, "seconds": seconds}


def end_state(
    run: Path, command: str, seconds: float, keep: bool = False, root: Path | None = None
) -> dict[str, Any]:
    """The check on the recorded run's own end state (its working tree as the recording left it:
    :func:`cassettes.shell.scratch_tree` with ``end``) made in a scratch copy of this working tree
    (``root``), run there with an empty scratch ``HOME`` and temp folder, the copy removed after
    (kept with ``keep``). Nothing is sent. ``{"result": "verified" | "not verified" | "not
    judged", "exit", "timed_out", "why", "tree"}``; ``"tree": False`` when the recording holds no
    working tree."""
    shell = open_run(run, whole=True).shell
    parent = Path(tempfile.mkdtemp(prefix="looptap-verify-baseline-"))
    dest = parent / "tree"
    try:
        from ..shell import scratch_tree

        try:
            made = scratch_tree(run, shell, root or Path.cwd(), dest, end=True)
        except OSError as exc:
            return {"result": "not judged", "why": f"its end state could not be made: {exc}"}
        if made is None:
            return {
                "result": "not judged",
                "why": "the recording holds no working tree",
                "tree": False,
            }
        said = [s for s in made.said if "; left as in your tree" in s or "could not" in s]
        for name in ("home", "tmp"):
            (parent / name).mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update(HOME=str(parent / "home"), TMPDIR=str(parent / "tmp"))
        out = _judged(run_check(command, dest, env, seconds), seconds)
        return {**out, **({"said": said[:20]} if said else {}), "tree": str(dest) if keep else None}
    finally:
        if not keep:
            shutil.rmtree(parent, ignore_errors=True)


def _judged(got: dict[str, Any], seconds: float) -> dict[str, Any]:
    if got.get("error"):
        return {"result": "not judged", "why": f"the command could not start: {got['error']}"}
    if got["timed_out"]:
        return {**got, "result": "not verified", "why": f"timed out (past {seconds:g} s)"}
    return {**got, "result": "verified" if got["exit"] == 0 else "not verified"}
