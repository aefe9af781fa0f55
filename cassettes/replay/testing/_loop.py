"""One event loop for a pytest session's replay servers.

Each replayed test still gets its own :class:`~cassettes.replay.serving._server.ReplayServer` (its
own port, cassette, matcher and log), but the servers run one after another in one event loop on
one thread, started by the first test that replays and stopped with the session: a thread per
test, started and waited for, then joined, was most of what a replayed test cost beyond vcrpy's.

A test's server is stopped at the test's end (its connections cancelled, its port closed), so a
test that failed or left a request hanging leaves nothing behind for the next one. If the loop
itself cannot stop a server (a bug that blocks it), it is abandoned, its thread left to end with
the process, and the next test gets a new one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["SessionLoop"]

T = TypeVar("T")

#: Seconds a server may take to start listening or to stop, past which the loop counts as wedged.
WEDGED_AFTER = 15.0


class SessionLoop:
    """An event loop on a daemon thread of its own; :meth:`run` runs a coroutine in it."""

    name = "looptap replay"

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _running(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=_serve, args=(self._loop,), name=self.name, daemon=True
            )
            self._thread.start()
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s result, run in the loop (started on first use). A loop that does not finish
        it in :data:`WEDGED_AFTER` seconds is abandoned (the next call starts another) and
        :class:`RuntimeError` is raised."""
        future = asyncio.run_coroutine_threadsafe(coro, self._running())
        try:
            return future.result(WEDGED_AFTER)
        except TimeoutError:
            future.cancel()
            wedged, self._loop, self._thread = self._loop, None, None
            if wedged is not None:  # it stops if it is ever unblocked; else ends with the process
                wedged.call_soon_threadsafe(wedged.stop)
            raise RuntimeError(
                f"looptap: the replay servers' event loop did not answer in {WEDGED_AFTER:g} s; "
                "the next test gets a new one"
            ) from None

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WEDGED_AFTER)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's thread: runs it until it is stopped, then closes it."""
    try:
        loop.run_forever()
    finally:
        loop.close()
