"""The recorder's writer process: each exchange the proxy hands over (:mod:`proxy.pipe`) is
redacted, parsed, encoded and written here, so none of that shares the proxy's GIL. A module of its
own, importing no mitmproxy; the recording pipeline is imported inside :func:`writer_main`, in the
writer process only (the proxy process imports :mod:`proxy.pipe`, not this module's dependencies).
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import messages
from .pipe import PIPE_SIZE, FrameReader, frame, write_parts

if TYPE_CHECKING:
    from ..cassettes.recording.pipeline import CassetteWriter

__all__ = ["writer_main"]

#: Bytes the writer reads before it stores what they hold: a bound on its memory when it is behind.
_BATCH = 4 << 20


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
    path: str,
    fsync: bool,
    inbox: Any,
    outbox: Any,
    settle: float = 0.0,
    redact: tuple[list[str], list[str]] = ([], []),
    about: tuple[str, list[str]] = ("", []),
) -> None:
    """The writer process. ``inbox`` and ``outbox`` are ``multiprocessing`` connections, used only
    for their file descriptors (the framing is :func:`frame`)."""
    import signal

    from ..cassettes.errors import CassetteError
    from ..cassettes.recording import Redactor, run_about
    from ..cassettes.recording.pipeline import CassetteWriter

    # The proxy decides when to stop (the end of its pipe): a signal to the whole process group
    # (Ctrl-C, `timeout`, a CI runner's SIGTERM, `kill -- -PGID`) reaches the writer too, and
    # ending here would lose what it holds while the proxy goes on to a clean end.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
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
        # what the cassette's redactor learns is masked in messages too
        messages.set_redactor(redactor)
        writer = CassetteWriter(
            Path(path),
            meta={
                "source": "looptap proxy",
                **header_places(redactor),
                **run_about(about[0] or None, about[1], redactor.scrub),
            },
            redactor=redactor,
            fsync=fsync,
        )
    except (CassetteError, OSError, ValueError) as exc:
        answers.send("storage_error", messages.safe(f"cannot open {path}: {exc}"))
        return
    answers.send("ready", writer.next_seq)  # (its round trips' seq from here: counted by it)
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


def header_places(redactor: Any) -> dict[str, str]:
    """The agent's working directory and home for the header (this process's: the recorder's,
    which ``looptap run``'s child inherits), so that a replay elsewhere tolerates them
    (cassettes.places; read back by cassettes.matching, which the writer does not import: 126
    modules and pydantic, about 0.11 s of CPU a writer). A path the redactor would mask (a key
    in a folder's name) is left out: nothing secret reaches the header."""
    from ..cassettes.places import here

    return {k: v for k, v in here().items() if redactor.scrub(v) == v}


def _store(writer: CassetteWriter, item: Any, answers: _Answers) -> None:
    from ..cassettes.errors import CassetteError

    if isinstance(item, dict):  # a record beside the round trips (a traced process): redacted
        try:
            writer.append_side(item)
        except (CassetteError, ValueError, TypeError) as exc:
            messages.error(messages.safe(f"a process record could not be stored: {exc}"))
        answers.send("side", None)
        return
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
