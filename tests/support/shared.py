"""Inputs built once per test session and read by every xdist worker (issue 105, item 2): the
hostile files of tests/hostile/corpus.py (31 files, 21-33 s of CPU to build on a loaded 2-core
machine, its compression bombs most of it) were built by each module that reads them, on whichever
worker ran it. Here the first test that asks builds them into a directory the session's controller
named (``LOOPTAP_TEST_SHARED``; the workers inherit it), under a lock; every other one, on any
worker, waits for that build and copies the result into its own directory (a test may write beside
its inputs; the built copy is never handed out). Without xdist the process itself names the
directory. The build must give the same files whoever runs it: the workers' collections are the
same, and so is what they read."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["SHARED_DIR", "copy", "name_directory"]

SHARED_DIR = "LOOPTAP_TEST_SHARED"


def name_directory(config: pytest.Config) -> None:
    """In the controller (or the only process): the session's directory of shared inputs."""
    if hasattr(config, "workerinput"):
        return  # (a worker: the controller's, inherited)
    where = tempfile.mkdtemp(prefix="looptap-test-shared-")
    os.environ[SHARED_DIR] = where
    config.add_cleanup(lambda: shutil.rmtree(where, ignore_errors=True))


def copy(name: str, make: Callable[[Path], object], dest: Path) -> Path:
    """``make(directory)`` run once in the session (the first caller, under a lock; a build that
    failed is made again by the next caller), its files copied to ``dest``; returns ``dest``."""
    root = os.environ.get(SHARED_DIR)
    if not root or not os.path.isdir(root):  # (no session directory: built here, as before)
        make(dest)
        return dest
    built = Path(root) / name
    with open(Path(root) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (the holder is building; a dead one lets go)
        if not built.is_dir():
            part = Path(root) / f"{name}.part"
            shutil.rmtree(part, ignore_errors=True)
            make(part)
            part.rename(built)
    shutil.copytree(built, dest, dirs_exist_ok=True)
    return dest
