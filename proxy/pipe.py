"""The pipe protocol between the recorder's proxy process and its writer process.

Two plain OS pipes, one per direction, carry length-prefixed pickles (:func:`frame`):

* **proxy → writer**: one frame per exchange, written by the proxy's event loop itself with a
  non-blocking ``write`` (no feeder thread: with ``multiprocessing.Queue`` its feeder and a
  result-collector thread woke on every round trip and took the GIL from the event loop). Once a
  frame is in the pipe it lives in the kernel: a SIGKILL of the proxy does not lose it, the writer
  reads it, and the pipe's end-of-file is what tells the writer the proxy is gone.
* **writer → proxy**: ``("ready", SEQ)`` once the cassette is open (``SEQ``: its first round
  trip's ``seq``), then answers in the order the exchanges came, batched: ``("ok", n)`` for
  ``n`` stored round trips, ``("storage_error", msg)`` or ``("failed", msg)`` for one that was
  not.

A module of its own, importing nothing of ``cassettes``: the mitmproxy process imports this, not
the writer's pipeline (pydantic, the parser, the codec and the store stay in the writer process).
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

__all__ = ["PIPE_SIZE", "SETTLE", "FrameReader", "enlarge_pipe", "frame", "write_parts"]

_HEADER = struct.Struct("!Q")
#: The kernel's pipe buffer, raised from 64 KB where allowed (``/proc/sys/fs/pipe-max-size``, 1 MB
#: by default): what a SIGKILLed proxy had handed over but the writer had not read yet survives in
#: it.
PIPE_SIZE = 1 << 20


#: Seconds the writer lets hand-offs gather before it stores them (not in durable mode, where each
#: response waits for its write). Storing a round trip the moment it ends put the writer's work
#: (0.7 ms for a streamed chat turn, 2 ms for a 200 KB history) right on top of the agent's next
#: request, which the proxy forwards at that same moment: time to first byte rose 1.5-1.8x on a
#: 2-core machine (bench/proxy.py), and in a run with the final code and no settling small and
#: 200 KB requests took +1.23 and +1.48 ms over bare mitmproxy (settled: +0.31, +0.21). Settled, the
#: work falls into the idle time of the stream, and a batch is one wake-up. What waits meanwhile is
#: in the kernel's pipe, which a SIGKILL of the proxy does not lose.
SETTLE = 0.01



def frame(obj: Any) -> list[memoryview]:
    """One message on the pipe, in two parts (written with ``writev``: a 100 MB body is not copied
    once more to put its header in front): 8-byte big-endian length, then the pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return [memoryview(_HEADER.pack(len(data))), memoryview(data)]


def write_parts(fd: int, parts: list[memoryview]) -> list[memoryview]:
    """``writev`` as much of ``parts`` as the pipe takes now; returns what is left (empty: all)."""
    try:
        n = os.writev(fd, parts)
    except BlockingIOError:
        return parts
    left = []
    for p in parts:
        if n >= len(p):
            n -= len(p)
            continue
        left.append(p[n:])
        n = 0
    return left


def enlarge_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except (OSError, ImportError):
        pass  # not Linux, or over the limit: the default size only shortens what survives a crash


class FrameReader:
    """Reads whole frames from a pipe: :meth:`feed` what ``os.read`` returned, then
    :meth:`frames`."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> list[Any]:
        out = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= _HEADER.size:
            (n,) = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + n
            if len(buf) < end:
                break
            out.append(pickle.loads(memoryview(buf)[pos + _HEADER.size : end]))
            pos = end
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> bool:
        """A frame (or part of one) is buffered."""
        return bool(self._buf)
