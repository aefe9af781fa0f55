"""How ``looptap record`` and ``looptap run`` hold a recorder: until a signal, or for the length of
a child command (beside the inspector with ``--inspect``); and what is said of round trips lost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from ..cassettes import interrupts
from ..cassettes.hints import HANDOVER, count
from ..cassettes.providers import start_advice
from ..cassettes.storage import copy_sealed, private_open
from . import messages
from .addon import LooptapRecorder
from .config import RecorderConfig, RecorderError
from .launcher import Recorder
from .shell_trace import TRACING, Tracer, probe
from .workspace import READ_AFTER, Workspace

__all__ = ["record_forever", "report_lost", "run_child"]


#: What ``looptap record`` says after a SIGUSR1 flush, followed by the number of round trips stored.
FLUSHED = "flushed:"


@contextlib.asynccontextmanager
async def _recording(config: RecorderConfig) -> AsyncIterator[Recorder]:
    """A started :class:`Recorder` (a ready file an earlier one left removed first: it must not be
    read as this one's); at the end, however it comes, its ready file removed and it stopped."""
    rec = Recorder(config)
    rec.clear_stale_ready()
    await rec.start()
    try:
        yield rec
    finally:
        rec.remove_ready()
        await rec.stop()


async def record_forever(config: RecorderConfig) -> int:
    """Record until SIGINT or SIGTERM (storing what was captured on SIGUSR1), the export lines
    printed once the recorder is ready; the exit status (3: round trips lost)."""
    async with _recording(config) as rec:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # Handlers first: whoever reads the export lines may signal a stop at once.
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # a Ctrl-C during start-up that nothing raised: stop, do not wait for another
        if interrupts.pending():
            stop.set()
        # SIGUSR1: store everything captured so far, then say how many round trips the cassette
        # holds (the pytest plugin records a whole test session through one recorder and cuts the
        # session cassette into one cassette per test at these marks).
        flushes: set[asyncio.Task[None]] = set()

        async def flush() -> None:
            await loop.run_in_executor(None, rec.addon.handoff.flush)
            # machine-read (cassettes/replay/testing/_recorder.py _FLUSHED): its words stay
            messages.emit(f"{FLUSHED} {rec.addon.handoff.recorded} round trips stored")

        def on_flush() -> None:
            task = loop.create_task(flush())
            flushes.add(task)
            task.add_done_callback(flushes.discard)

        if hasattr(signal, "SIGUSR1"):
            loop.add_signal_handler(signal.SIGUSR1, on_flush)
        rec.write_ready()  # after the handlers: its reader may signal at once
        for k, v in rec.env.items():  # (quoted when it must be: NODE_OPTIONS after the user's)
            print(f"export {k}={shlex.quote(v)}")
        sys.stdout.flush()  # the exports are out before the ready line
        messages.emit(f"recording to {config.output} (Ctrl-C to stop)")
        await stop.wait()
    messages.emit(
        f"stopped; {count(rec.addon.handoff.recorded, 'round trip')} recorded in {config.output}"
    )
    return 3 if report_lost(rec.addon) else 0


def report_lost(addon: LooptapRecorder) -> bool:
    """Name what could not be recorded (redacted lines from the recorder), loudly; True if any
    round trip was lost (``run`` and ``record`` then exit with status 3)."""
    h = addon.handoff
    lost = h.storage_errors + h.failed_records
    if not lost:
        return False

    messages.error(f"{count(lost, 'round trip')} could NOT be stored (exit status 3):")
    for line in h.lost[:10]:
        messages.error(f"  {line}")
    if len(h.lost) > 10:
        messages.error(f"  … and {len(h.lost) - 10} more")
    return True


async def run_child(
    config: RecorderConfig,
    argv: Sequence[str],
    child_log: Path | None = None,
    viewer: Sequence[str] | None = None,
    child_status: Path | None = None,
    child_env: Callable[[dict[str, str]], Awaitable[dict[str, str]]] | None = None,
) -> tuple[int, LooptapRecorder]:
    """Record ``argv`` as a child process; its exit status is returned with the addon.

    With ``viewer`` (``looptap run --inspect``), that command runs in the foreground terminal
    beside the child (the inspector following the cassette live), and the child's output goes to
    ``child_log`` so it does not draw over the inspector. The run ends when the child has exited
    and the viewer has been closed. A viewer closed early leaves a line on the terminal saying the
    child still runs (and where its output goes); the child's exit status is written to
    ``child_status``, where a viewer still open reads it (it stops saying "live"). ``child_env``
    turns the recorder's environment into the child's (a fork puts its replay server in front)."""
    async with _recording(config) as rec:
        rec.write_ready()
        env = {
            **{k: v for k, v in os.environ.items() if k not in HANDOVER},
            **(await child_env(dict(rec.env)) if child_env is not None else rec.env),
        }
        messages.emit(rec.exports(env))  # before the command starts: it may say nothing for a while
        for line in start_advice(argv, env):  # a client that will not work as started: what to do
            messages.emit(line)
        # The child's output may echo prompts and answers: created 0600, like the cassette.
        # Appended to, never through a link, only a regular file of this user (storage/_paths.py).
        try:
            log = private_open(child_log, append=True) if child_log is not None else None
        except OSError as exc:
            raise RecorderError(
                f"cannot write the command's output to {child_log}: {exc}"
            ) from None
        # ...as the redactor passes it, a line at a time (docs/redaction.md, "One gate")
        out, copy = _sealed_log(config, log) if log is not None else (None, None)
        try:
            # a Ctrl-C during start-up that nothing raised: the command is not started
            if interrupts.pending():
                return 130, rec.addon
            tracer = _tracer(config, rec) if config.shell_trace else None
            tree = (
                await _workspace(config, rec, child_env is not None) if config.shell_trace else None
            )
            try:
                proc = await asyncio.create_subprocess_exec(
                    *(tracer.argv(argv) if tracer is not None else argv),
                    env=env,
                    stdin=subprocess.DEVNULL if viewer else None,
                    stdout=out,
                    stderr=out,
                )
            except OSError as exc:
                if tracer is not None:
                    tracer.finish()
                raise FileNotFoundError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None

            def pass_on(sig: int) -> None:
                if proc.returncode is None:
                    root = tracer.root if tracer is not None else None
                    if root is not None:  # the agent, not its tracer
                        with contextlib.suppress(OSError):
                            os.kill(root, sig)
                        return
                    proc.send_signal(sig)

            for sig in (signal.SIGINT, signal.SIGTERM):
                # The child gets the terminal's SIGINT itself; SIGTERM is passed on.
                asyncio.get_running_loop().add_signal_handler(sig, pass_on, sig)
            rc = await _child_beside_viewer(
                proc, viewer, child_log, child_status, rec.addon.handoff.flush, tracer
            )
            if tree is not None:  # what the last answer's tools changed
                try:
                    await asyncio.get_running_loop().run_in_executor(None, tree.scan, None, True)
                except Exception as exc:  # (the run's record stands; its last scan is what is lost)
                    messages.error(messages.safe(f"the working tree's last scan failed: {exc}"))
        finally:
            if out is not None:
                os.close(out)
            if copy is not None:
                # what the command's own children still write after it ended is copied while the
                # recorder lives; the log is closed by the copy when they are done
                copy.join(timeout=2.0)
    return rc, rec.addon


def _sealed_log(config: RecorderConfig, log: Any) -> tuple[int, threading.Thread]:
    """The write end of a pipe whose every line reaches ``log`` as the redactor passes it, and
    the thread copying it (it closes ``log`` when the pipe ends)."""
    from ..cassettes.recording import Redactor

    redactor = Redactor.configured(
        headers=list(config.redact_headers), patterns=list(config.redact_patterns)
    )
    r, w = os.pipe()

    def copy() -> None:
        with os.fdopen(r, "rb") as src, log:
            copy_sealed(src, log, redactor.seal)

    thread = threading.Thread(target=copy, name="looptap-child-log", daemon=True)
    thread.start()
    return w, thread


async def _child_beside_viewer(
    proc: asyncio.subprocess.Process,
    viewer: Sequence[str] | None,
    child_log: Path | None,
    child_status: Path | None,
    stored: Callable[[], None],
    tracer: Tracer | None = None,
) -> int:
    """The child's exit status, once it has exited and the ``viewer`` started here beside it (if
    any) has been closed; a viewer closed first leaves a line saying the child still runs. The
    status is written to ``child_status`` as soon as the child exits and what it sent is stored
    (``stored``: the writer has answered for every round trip handed over): a viewer still open
    reads it, then the file once more, and must find every round trip there."""
    view = None
    if viewer:
        try:
            view = await asyncio.create_subprocess_exec(*viewer)
        except OSError as exc:
            messages.error(f"cannot start the inspector: {exc}")
    child = asyncio.ensure_future(proc.wait())
    if view is not None:
        viewing = asyncio.ensure_future(view.wait())
        done, _ = await asyncio.wait({child, viewing}, return_when=asyncio.FIRST_COMPLETED)
        if viewing in done and child not in done:
            where = f"; its output goes to {child_log}" if child_log is not None else ""
            messages.emit(
                f"the inspector was closed; the command is still running{where} (Ctrl-C stops it)"
            )
    rc = await child if tracer is None else await _traced_end(proc, child, tracer)
    if child_status is not None:
        await asyncio.get_running_loop().run_in_executor(None, stored)
        try:
            child_status.write_text(str(rc))
        except OSError:
            pass
    if view is not None:
        await view.wait()
    return rc


def _handing(rec: Recorder) -> Callable[[dict[str, Any]], None]:
    """Hands a record beside the round trips to the writer, from any thread (on the loop)."""
    loop = asyncio.get_running_loop()
    handoff = rec.addon.handoff

    def hand(item: dict[str, Any]) -> None:
        try:
            handoff.hand_over(item)
        except Exception as exc:  # the writer is gone: said once per record, the agent goes on
            messages.error(messages.safe(f"a {item.get('type')} record could not be stored: {exc}"))

    def emit(item: dict[str, Any]) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(hand, item)

    return emit


async def _workspace(config: RecorderConfig, rec: Recorder, fork: bool) -> Workspace | None:
    """The agent's working tree, walked now, its start contents read on a thread of their own
    while the agent starts (a ``fork``'s before it starts: its prefix, replayed at once, changes
    files before any request reaches the recorder), and taken at each model request
    (proxy/workspace.py); contents kept beside the cassette (``OUTPUT.files/``) unless the
    redactor finds a key in them."""
    from ..cassettes.recording import Redactor

    redactor = Redactor.configured(
        headers=list(config.redact_headers), patterns=list(config.redact_patterns)
    )

    here = os.path.realpath(os.getcwd())
    if here in (os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.sep)):
        messages.emit(
            f"the working tree is not taken ({here} is your home or the root directory, not a "
            "project's tree): the files the command changes are not recorded, and a fork of this "
            "run runs here"
        )
        return None
    keep = Path(str(config.output) + ".files")
    tree = Workspace(
        os.getcwd(),
        keep,
        _handing(rec),
        redactor.seal,
        _own(here, config.output, keep, Path(str(config.output) + ".log")),
        config.copy_tree,
    )
    loop = asyncio.get_running_loop()
    try:  # (the walk only: no file read before the agent starts, but in a fork)
        messages.emit(await loop.run_in_executor(None, tree.start))
        if fork:
            await loop.run_in_executor(None, tree.read)
    except OSError as exc:
        messages.error(f"the working tree could not be read ({exc}): its changes are not recorded")
        return None
    if not fork:
        threading.Thread(
            target=_read_quietly, args=(tree,), name="looptap-tree", daemon=True
        ).start()
    if rec.master is not None:
        rec.master.addons.add(tree)
    return tree


def _own(root: str, *paths: Path) -> frozenset[str]:
    """looptap's outputs under ``root`` (the cassette, its ``.files/``), relative to it: never
    taken as the agent's work, never copied into themselves."""
    out = set()
    for p in paths:
        rel = os.path.relpath(os.path.realpath(p), root)
        if not rel.startswith(os.pardir):
            out.add(rel)
    return frozenset(out)


def _read_quietly(tree: Workspace) -> None:
    with contextlib.suppress(OSError):  # (behind the agent's own start on a busy machine)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    tree.go.wait(READ_AFTER)  # (the agent's own start is not competed with)
    try:
        tree.read()
    except Exception as exc:  # (the scans say what changed; the start's record is what is lost)
        messages.error(messages.safe(f"the working tree's start could not be read: {exc}"))


def _tracer(config: RecorderConfig, rec: Recorder) -> Tracer | None:
    """The process tracer of this run (docs/shell-file-tools.md), or ``None`` with one line
    saying why it cannot run here and what is then not seen. Its records go to the writer from
    the event loop (the tracer reads on a thread of its own)."""
    if config.shell_trace not in TRACING:
        messages.emit(
            "shell commands not traced (a process tracer takes ptrace: the command's own "
            "debugger, strace or profiler would fail, a setuid program would lose its privilege);"
            " the working tree is recorded per turn; --shell-trace traces each program, its "
            "output and files"
        )
        return None
    why = probe()
    if why is not None:
        messages.emit(
            f"shell commands not traced: {why}; the command's processes, their exit statuses, "
            "output and files are not recorded"
        )
        return None
    loop = asyncio.get_running_loop()
    emit = _handing(rec)
    ended = asyncio.Event()

    def end() -> None:
        loop.call_soon_threadsafe(ended.set)

    messages.emit(
        "the command's processes are traced with ptrace (--shell-trace): a debugger, strace or "
        "profiler it runs cannot attach, a setuid program runs without its privilege"
    )
    tracer = Tracer(os.getcwd(), emit, end, full=config.shell_trace == "full")
    tracer.root_ended = ended
    tracer.start()
    return tracer


async def _traced_end(
    proc: asyncio.subprocess.Process, child: asyncio.Future[int], tracer: Tracer
) -> int:
    """The traced agent's exit status, once it has exited. strace would wait for every process
    the agent left running (a server, a daemon), and strace 6.1 was seen to wait for ever on
    threads of Claude Code left in a tracing stop after their leader's exit (a SIGTERM did not end
    it): so once the agent's own end is read, strace is ended (the kernel lets its tracees go on,
    untraced) and the agent's status is the run's."""
    assert tracer.root_ended is not None
    ended = asyncio.ensure_future(tracer.root_ended.wait())
    await asyncio.wait({child, ended}, return_when=asyncio.FIRST_COMPLETED)
    if not child.done():
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    rc = await child
    ended.cancel()
    await asyncio.get_running_loop().run_in_executor(None, tracer.finish)
    status = tracer.root_status
    return status if status is not None else rc
