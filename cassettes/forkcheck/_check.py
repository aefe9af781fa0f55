"""The user's check (``--verify CMD``) run once, in a tree: ``/bin/sh -c CMD`` in a session of its
own (``prefix`` before it: a fork's mount namespace), within its own time limit, past which its
process group is killed. What both a branch's fork (proxy/verify_branch.py) and the baseline
(:mod:`cassettes.forkcheck._baseline`) run it with."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["run_check"]


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
