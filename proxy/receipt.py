"""One round trip's acknowledgement (``looptap_durable``): the hand-off (:mod:`proxy.handoff`)
makes a :class:`Receipt` on the event loop for a round trip it gives the writer, and releases it,
from whichever thread reads the writer's answer, once the writer has answered for it or can no
longer answer; the durable gate (:mod:`proxy.durable`) holds the end of the response until then.
No mitmproxy in here."""

from __future__ import annotations

import asyncio

__all__ = ["Receipt", "runs_here"]


class Receipt:
    """One round trip's acknowledgement, made on an event loop: :meth:`wait` returns once the
    writer has answered for it (stored, or said why not) or can no longer answer."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: asyncio.Future[None] = loop.create_future()

    @property
    def released(self) -> bool:
        return self._future.done()

    async def wait(self) -> None:
        await self._future

    def release(self) -> None:
        """From any thread: on the receipt's own loop at once, else through it."""
        if runs_here(self._loop):
            self._set()
            return
        try:
            self._loop.call_soon_threadsafe(self._set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _set(self) -> None:
        if not self._future.done():
            self._future.set_result(None)


def runs_here(loop: asyncio.AbstractEventLoop | None) -> bool:
    """Whether ``loop`` is the event loop running in this thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
