"""The baseline row of ``--verify``: the recorded run's own end state (its working tree as the
recording left it: :func:`cassettes.shell.scratch_tree` with ``end``) made in a scratch copy of
this working tree, the command run there with an empty scratch ``HOME`` and temp folder, the copy
removed after (kept with ``--keep-tree``). Nothing is sent."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..reading import open_run
from ._check import run_check

__all__ = ["baseline"]


def baseline(run: Path, command: str, seconds: float, keep: bool) -> dict[str, Any]:
    """``{"result": "verified" | "not verified" | "not judged", "exit", "timed_out", "why",
    "tree"}`` for the recorded run's end state."""
    shell = open_run(run, whole=True).shell
    parent = Path(tempfile.mkdtemp(prefix="looptap-verify-baseline-"))
    dest = parent / "tree"
    try:
        from ..shell import scratch_tree

        try:
            made = scratch_tree(run, shell, Path.cwd(), dest, end=True)
        except OSError as exc:
            return {"result": "not judged", "why": f"its end state could not be made: {exc}"}
        if made is None:
            return {"result": "not judged", "why": "the recording holds no working tree"}
        said = [s for s in made.said if "; left as in your tree" in s or "could not" in s]
        for name in ("home", "tmp"):
            (parent / name).mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update(HOME=str(parent / "home"), TMPDIR=str(parent / "tmp"))
        out = _run(command, dest, env, seconds)
        return {**out, **({"said": said[:20]} if said else {}), "tree": str(dest) if keep else None}
    finally:
        if not keep:
            shutil.rmtree(parent, ignore_errors=True)


def _run(command: str, tree: Path, env: dict[str, str], seconds: float) -> dict[str, Any]:
    got = run_check(command, tree, env, seconds)
    if got.get("error"):
        return {"result": "not judged", "why": f"the command could not start: {got['error']}"}
    if got["timed_out"]:
        return {**got, "result": "not verified", "why": f"timed out (past {seconds:g} s)"}
    return {**got, "result": "verified" if got["exit"] == 0 else "not verified"}
