"""``looptap run --from … --verify CMD``: once the fork's agent has ended, the user's check runs in
the branch's own tree, as the agent saw it (docs/fork.md, "Which model would have fixed it"): an
isolated fork's scratch copy mounted at the recorded path, with the same scratch layers over
``HOME`` and the temp folder (:mod:`proxy.isolation`'s command prefix); ``--in-place``, the working
tree. Its exit status is the verdict, kept on the branch's record (the fork's ``note``:
:func:`cassettes.reading.fork_notes`'s ``verified``); it has a time limit of its own, past which its
process group is killed and the branch is not verified."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..cassettes.why import run_check
from . import messages

__all__ = ["verify_branch"]


def verify_branch(
    command: str, seconds: float, mask: list[str], env: dict[str, str], scratch: list[Path]
) -> dict[str, Any]:
    """Run ``command`` (``/bin/sh -c``) in the branch's tree (``scratch``'s copy through ``mask``,
    else here) with the agent's environment changes (``env``); its output goes to stderr. What
    it found, as the fork's note keeps it."""
    tree = scratch[0] if scratch else Path.cwd()
    full = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    full.update(env)
    got = run_check(command, tree, full, seconds, mask, output=2)
    if got.get("error"):
        messages.error(f"--verify: the command could not start: {got['error']}")
    elif got["timed_out"]:
        messages.emit(
            f"--verify: the command ran past its limit of {seconds:g} s in the branch's tree and "
            "was stopped: not verified (timed out)"
        )
    else:
        rc = got["exit"]
        messages.emit(
            f"--verify: the command exited {rc} in the branch's tree: "
            + ("verified" if rc == 0 else "not verified")
        )
    return got
