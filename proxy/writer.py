"""The recorder's writer process, and the pipe protocol between it and the proxy.

The proxy hands each captured exchange to this process (redaction, parsing, encoding, disk I/O),
so none of that shares the proxy's GIL. A module of its own, importing no mitmproxy: the process
starts fast, and it is importable by name when the addon is loaded as a script
(``mitmdump -s proxy/addon.py``).

Two plain OS pipes, one per direction, carry length-prefixed pickles (:func:`frame`):

* **proxy → writer**: one frame per exchange, written by the proxy's event loop itself with a
  non-blocking ``write`` (no feeder thread: with ``multiprocessing.Queue`` its feeder and a
  result-collector thread woke on every round trip and took the GIL from the event loop). Once a
  frame is in the pipe it lives in the kernel: a SIGKILL of the proxy does not lose it, the writer
  reads it, and the pipe's end-of-file is what tells the writer the proxy is gone.
* **writer → proxy**: ``("ready", None)`` once the cassette is open, then answers in the order
  the exchanges came, batched: ``("ok", n)`` for ``n`` stored round trips, ``("storage_error",
  msg)`` or ``("failed", msg)`` for one that was not.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from pathlib import Path
from typing import Any

from cassettes.errors import CassetteError
from cassettes.recording.pipeline import CassetteWriter
from cassettes.recording.redact import Redactor
from proxy import messages

__all__ = ["SETTLE", "FrameReader", "enlarge_pipe", "frame", "write_parts", "writer_main"]

_HEADER = struct.Struct("!Q")
#: The kernel's pipe buffer, raised from 64 KB where allowed (``/proc/sys/fs/pipe-max-size``, 1 MB by
#: default): what a SIGKILLed proxy had handed over but the writer had not read yet survives in it.
PIPE_SIZE = 1 << 20


#: Seconds the writer lets hand-offs gather before it stores them (not in durable mode, where each
#: response waits for its write). Storing a round trip the moment it ends put the writer's work
#: (0.7 ms for a streamed chat turn, 2 ms for a 200 KB history) right on top of the agent's next
#: request, which the proxy forwards at that same moment: time to first byte rose 1.5-1.8x on a
#: 2-core machine (bench/proxy.py), and in a run with the final code and no settling small and
#: 200 KB requests took +1.23 and +1.48 ms over bare mitmproxy (settled: +0.31, +0.21). Settled, the work falls into the idle time of the stream, and
#: a batch is one wake-up. What waits meanwhile is in the kernel's pipe, which a SIGKILL of the
#: proxy does not lose.
SETTLE = 0.01


#: Bytes the writer reads before it stores what they hold: a bound on its memory when it is behind.
_BATCH = 4 << 20


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
    """Reads whole frames from a pipe: :meth:`feed` what ``os.read`` returned, then :meth:`frames`."""

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


class _Answers:
    """The writer's side of the answer pipe. Writes block (the proxy reads them from its event
    loop); once the proxy is gone (EPIPE) answers are dropped and the writing goes on."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ok = 0
        self.alive = True

    def send(self, kind: str, msg: Any) -> None:
        if kind != "ok":
            self.flush()  # the stored ones first: the proxy matches answers by order
        if not self.alive:
            return
        parts = frame((kind, msg))
        try:
            while parts:
                parts = write_parts(self.fd, parts)
        except OSError:
            self.alive = False

    def flush(self) -> None:
        if self.ok:
            n, self.ok = self.ok, 0
            self.send("ok", n)


def writer_main(
    path: str, fsync: bool, inbox: Any, outbox: Any, settle: float = 0.0, redact: tuple[list[str], list[str]] = ([], [])
) -> None:
    """The writer process. ``inbox`` and ``outbox`` are ``multiprocessing`` connections, used only
    for their file descriptors (the framing is :func:`frame`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the proxy decides when to stop
    # Niced: on a 2-core machine an un-niced writer competes with the proxy and raised its added
    # latency from about +0.4 to +1.5 ms p50 (bench/proxy.py, run side by side). The cost: under
    # heavy CPU contention the writer falls behind, and what it has not read yet waits in the pipe
    # (survives a SIGKILL of the proxy) or, past the pipe's size, in the proxy (does not).
    try:
        os.nice(10)
    except OSError:
        pass
    in_fd, out_fd = inbox.fileno(), outbox.fileno()
    answers = _Answers(out_fd)
    messages.to_stderr()
    try:
        redactor = Redactor.configured(headers=redact[0], patterns=redact[1])
        messages.set_redactor(redactor)  # what the cassette's redactor learns is masked in messages too
        writer = CassetteWriter(Path(path), meta={"source": "looptap proxy"}, redactor=redactor, fsync=fsync)
    except (CassetteError, OSError, ValueError) as exc:
        answers.send("storage_error", messages.safe(f"cannot open {path}: {exc}"))
        return
    answers.send("ready", None)
    reader = FrameReader()
    eof = False
    with writer:
        behind = False
        while not eof:
            data = os.read(in_fd, PIPE_SIZE)  # blocks until the proxy writes, or is gone
            if not data:
                eof = True  # the proxy closed the pipe (stop) or died (SIGKILL): write what came
            elif settle and not behind:
                time.sleep(settle)  # (not when behind: then the backlog is the batch)
            reader.feed(data)
            got = len(data)
            while not eof and got < _BATCH and select.select([in_fd], [], [], 0)[0]:
                data = os.read(in_fd, PIPE_SIZE)
                if not data:
                    eof = True
                    break
                reader.feed(data)
                got += len(data)
            behind = got >= _BATCH
            items = reader.frames()
            for i, item in enumerate(items):
                if item is None:  # an explicit stop
                    eof = True
                    break
                _store(writer, item, answers)
                if i % 32 == 31:  # answer long batches as they go (durable mode waits on them)
                    answers.flush()
            if not eof and not select.select([in_fd], [], [], 0)[0]:
                answers.flush()  # nothing more waiting: say what was stored
        answers.flush()
    if reader.pending:
        answers.send("failed", "the proxy stopped in the middle of handing over a round trip")


def _store(writer: CassetteWriter, item: Any, answers: _Answers) -> None:
    try:
        writer.append(item)  # the pipeline removes the Content-Encoding the proxy left
        answers.ok += 1
    except CassetteError as exc:
        msg = messages.safe(f"{_which(item)}: {exc}")
        answers.send("storage_error", msg)
        if not answers.alive:  # the proxy is gone: say it here (otherwise the proxy does)
            messages.error(f"STORAGE ERROR, round trip not recorded: {msg}")
    except Exception as exc:
        msg = messages.safe(f"could not record {_which(item)}: {type(exc).__name__}: {exc}")
        answers.send("failed", msg)
        if not answers.alive:
            messages.error(msg)


def _which(item: Any) -> str:
    """Names a round trip in a message: method, URL (redacted by :func:`messages.safe`), sequence
    number and start time (UTC)."""
    parts = [str(getattr(item, "method", "?")), str(getattr(item, "url", "?"))]
    seq = getattr(item, "seq", None)
    if isinstance(seq, int):
        parts.append(f"#{seq}")
    started = getattr(item, "started", None)
    if isinstance(started, (int, float)):
        parts.append("at " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)))
    return " ".join(parts)
