"""A Ctrl-C is never lost.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread is at that moment.
During start-up (the first second of every command: imports, the CA made on a first run) that can
be a place that cannot raise: a weakref callback of the import machinery, a ``__del__``, a garbage
collector callback. Python then prints ``Exception ignored in: …`` and goes on; a command that
serves until Ctrl-C (``record``, ``run``, ``replay``, ``mcp --http``) printed its ready line and
waited for a Ctrl-C that had already come.

:func:`watch` notes such a swallowed interrupt (through :data:`sys.unraisablehook`, without
replacing Python's SIGINT handler, so ``asyncio.run`` still turns Ctrl-C into cancelling its main
task), and a command about to wait for Ctrl-C asks :func:`pending` (in ``asyncio.run``) first, or
calls :func:`check`; so does the reader of looptap cassettes before each block
(:meth:`~cassettes.storage.RecordIndex.poll`), so a command reading a huge run stops within a
block instead of running on for minutes.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["check", "pending", "watch"]

_seen = False
_previous: Any = None


def _hook(unraisable: Any) -> None:
    global _seen
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _seen = True  # honoured at the next check; nothing to print for a Ctrl-C
        return
    _previous(unraisable)


def watch() -> None:
    """Note Ctrl-Cs that Python swallows from now on (idempotent)."""
    global _previous
    if sys.unraisablehook is not _hook:
        _previous = sys.unraisablehook
        sys.unraisablehook = _hook


def pending() -> bool:
    """For a server about to wait in ``asyncio.run`` for Ctrl-C: a Ctrl-C came and was swallowed
    before it could stop anything, or ``asyncio.run``'s Ctrl-C cancelled the running task and
    something let the cancellation go."""
    import asyncio  # (loaded already: this runs in a running loop)

    task = asyncio.current_task()
    return _seen or (task is not None and task.cancelling() > 0)


def check() -> None:
    """Raise the ``KeyboardInterrupt`` a swallowed Ctrl-C should have raised (in the main thread,
    where Python raises it; elsewhere nothing)."""
    if _seen and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt
