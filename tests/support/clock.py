"""Running a client with its clock moved (libfaketime), for the tests that replay or fork a run
"the next day".

The library is preloaded into the one command, with ``FAKETIME`` as an offset (``+1d``), not
through the ``faketime`` wrapper: the wrapper shares its clock through a POSIX semaphore and shared
memory, and under ``looptap run`` (the agent a child of the recorder, Claude Code's Bun spawning
its own) ``sem_open`` failed with "File exists" and the agent never started. The monotonic clocks
are left alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``): only the date moves, timers and timeouts run as
they do.

What it reaches: a dynamically linked process that reads the clock through libc — CPython
(``datetime.now()``), Node (``new Date()``), Claude Code's ``claude.exe`` (Bun). Not a static
binary (Codex's musl build): it calls the kernel's vDSO directly, and no preload is loaded into it.
"""

from __future__ import annotations

import glob

import pytest

__all__ = ["LIBFAKETIME", "moved", "needs_faketime"]


def _find() -> str | None:
    for pattern in (
        "/usr/lib/*/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


#: The library's path, or ``None`` when libfaketime is not installed.
LIBFAKETIME = _find()

needs_faketime = pytest.mark.skipif(
    LIBFAKETIME is None,
    reason="libfaketime is not installed (apt-get install faketime; "
    ".ci/run installs it when run as root with apt)",
)


def moved(offset: str = "+1d") -> dict[str, str]:
    """The environment that runs a process with its clock moved by ``offset`` (``+1d``, ``-2h``)."""
    assert LIBFAKETIME is not None, "check needs_faketime first"
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
