"""The keeper: the analysis of the run the recorder's writer records, kept as it is recorded, so
that the first ``looptap show`` or inspector after a recording takes it instead of analysing the run
(issue 48; docs/kept-analysis.md).

The writer (:mod:`proxy.writer`) starts it with :func:`start` once the cassette reaches
:data:`cassettes.reading.kept.MIN_BYTES`: a process of its own, off the request path (neither the
proxy's process nor the writer's, so it takes no GIL from either), at the lowest priority the
system has (``SCHED_IDLE``, else nice 19: it runs on what the proxy, the writer and the agent leave
idle), on one core (``LOOPTAP_WORKERS=1``: its ``show`` forks no workers,
:mod:`cassettes.reading.parallel`), in a session of its own (a Ctrl-C at the terminal is the
recorder's to handle), with its output going nowhere and a pipe from the writer as its input.

It follows the cassette as it grows with the reader every command uses (``open_run(path,
follow=True, cache=True)``), which hashes every byte as it reads it: its memory is a reader's, and
past :func:`~cassettes.reading.run.memory_budget` (or
:data:`~cassettes.reading.kept.MAX_CONVERSATIONS`) it gives up. After a clean stop the writer,
having closed the cassette, writes ``end SIZE``: the keeper reads to that size, runs the end-of-run
checks and keeps the analysis of exactly the bytes it read (:func:`cassettes.reading.kept.keep`: a
MAC under this machine's key over all of them), then ``show``'s printed views of it (a ``looptap
show --json`` whose output goes nowhere: the first ``show`` after the recording then reads neither
the records nor the stores), and exits. It keeps nothing when the writer's end of the pipe closes
without that line (the writer was killed), when the file does not end where the writer said
(something appended since), or on any error. A reader checks a kept analysis anyway (size, analyser,
every byte): what the keeper keeps is taken for exactly the bytes it analysed, never for others
(or continued, for a file that grew from them).

Recording onto a cassette whose analysis is kept (``looptap run -o +FILE``), the keeper's reader
continues that analysis from where it ended once the bytes it was made from check out (the working
state kept beside it: docs/kept-analysis.md, "A file that grew"), and analyses only the round
trips appended.

This module imports only the standard library; :class:`Keeper` imports the core where it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from cassettes.reading.keeping import Claim

__all__ = ["Keeper", "end", "main", "start"]

#: Seconds between two looks at the cassette while it is recorded (the file's end is read then).
POLL = 1.0
#: What the writer says after a clean stop, followed by the cassette's size and a newline.
END = b"end "

# Run by the keeper's interpreter (isolated: neither the working directory nor PYTHONPATH decides
# what it imports): the lowest priority first, then the writer's own import path.
_BOOT = (
    "import os, sys\n"
    "try:\n"
    "    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "except (AttributeError, OSError):\n"
    "    try:\n"
    "        os.nice(19)\n"
    "    except (AttributeError, OSError):\n"
    "        pass\n"
    "os.environ['LOOPTAP_WORKERS'] = '1'\n"  # one core, idle: no worker processes of show's
    "import json\n"
    "sys.path[:] = json.loads(sys.argv[2])\n"
    "from proxy.keeper import main\n"
    "sys.exit(main(sys.argv[1], claim=int(sys.argv[3]) if len(sys.argv) > 3 else None))\n"
)


def start(path: str | Path, claim: int | None = None) -> subprocess.Popen[bytes] | None:
    """Start the keeper of the cassette at ``path``; ``None`` when it could not be started (the
    recording goes on as without it). Its input is the pipe :func:`end` writes to; ``claim``, the
    writer's claim on the keeping (:class:`cassettes.reading.keeping.Claim`), is inherited."""
    extra = [str(claim)] if claim is not None else []
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, os.path.abspath(path), json.dumps([os.path.abspath(p) for p in sys.path]), *extra],  # noqa: E501
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd="/", pass_fds=() if claim is None else (claim,),
        )  # fmt: skip
    except (OSError, ValueError):
        return None


def end(keeper: subprocess.Popen[bytes], size: int | None) -> None:
    """Tell the keeper the recording stopped cleanly with the cassette at ``size`` bytes (``None``:
    not cleanly, nothing is to be kept), and let it finish on its own. Never raises, never waits."""
    pipe = keeper.stdin
    if pipe is None:
        return
    try:
        if size is not None:
            pipe.write(END + b"%d\n" % size)
        pipe.close()
    except OSError:  # the keeper gave up already
        pass
    keeper.poll()  # (reaped, if it has ended)


class Keeper:
    """The analysis of one cassette, followed as it grows and kept once it is complete."""

    def __init__(self, path: str | Path, claim: Claim | None = None) -> None:
        from cassettes.reading.run import memory_budget, open_run

        self.path = Path(path)
        self.run = open_run(self.path, follow=True, cache=True)
        self._budget = memory_budget()
        #: The writer's claim on the keeping: what a reader waiting for this keeper watches.
        self.claim = claim

    def follow(self) -> bool:
        """Analyse what the file gained since; ``False`` when it is no longer worth keeping (more
        memory than a reader may take, more conversations than are kept)."""
        from cassettes.reading import kept
        from cassettes.reading.run import rss

        while True:
            batch = self.run.step()
            if self.claim is not None:
                self.claim.progress(self.run.read_bytes)
            used = rss() if self._budget is not None else None
            if used is not None and self._budget is not None and used > self._budget:
                return False
            if len(self.run.analysis.conversations) > kept.MAX_CONVERSATIONS:
                return False
            if batch.at_end:
                return True

    def finish(self, size: int) -> bool:
        """The writer stopped cleanly with the cassette at ``size`` bytes: read to there, run the
        end-of-run checks and keep the analysis. ``False`` (nothing kept) when the file does not end
        there."""
        if not self.follow():
            return False
        if self.run.read_bytes != size or self.run.still_written:
            return False
        if self.claim is not None:
            self.claim.step("checking")
        self.run.finish()  # the reader keeps the analysis of every byte it hashed
        return True

    def close(self) -> None:
        self.run.close()
        if self.claim is not None:  # kept, or given up: a waiting reader goes on
            self.claim.close()


def main(path: str, control: IO[bytes] | None = None, claim: int | None = None) -> int:
    """The keeper process: follow the cassette at ``path`` until the writer says where it ended
    (``end SIZE`` on ``control``, standard input by default), then keep its analysis. 0: kept.
    ``claim``: the file descriptor of the writer's claim on the keeping, held until the analysis
    is kept (or given up), then let go before ``show``'s views are made."""
    from cassettes.errors import CassetteError
    from cassettes.reading.keeping import Claim

    fd = (control or sys.stdin.buffer).fileno()
    said = b""
    keeper: Keeper | None = None
    held = Claim.inherited(claim) if claim is not None else None
    try:
        keeper = Keeper(path, held)
        held = None  # the keeper's to let go of now
        while True:
            if not keeper.follow():
                return 1
            if not select.select([fd], [], [], POLL)[0]:
                continue
            data = os.read(fd, 64)
            if not data:
                return 1  # the writer is gone without a clean stop: nothing is kept
            said += data
            if b"\n" in said:
                size = _size(said)
                if size is None or not keeper.finish(size):
                    return 1
                keeper.close()
                keeper = None
                return _views(path)
    except (CassetteError, OSError, ValueError, MemoryError):
        return 1
    finally:
        if keeper is not None:
            keeper.close()
        if held is not None:
            held.close()


def _views(path: str) -> int:
    """Keep ``show``'s printed views of the analysis just kept: ``looptap show --json`` (which takes
    that analysis), its output going nowhere. 0: shown."""
    from cassettes.cli import main as cli

    with (
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        try:
            return cli(["show", "--json", path])
        except SystemExit as exc:
            return 0 if exc.code in (0, None) else 1


def _size(said: bytes) -> int | None:
    line = said.split(b"\n", 1)[0]
    if not line.startswith(END) or not line[len(END) :].isdigit():
        return None
    return int(line[len(END) :])
