"""``looptap record`` and ``looptap run``: their handlers (declared in :mod:`cassettes.commands`,
imported when one of them runs). Both need mitmproxy, imported with this module where it is
installed; an environment without it (the SDK and replay side) says how to install it, in one
line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..cassettes.errors import CassetteError, CassetteIOError
from ..cassettes.hints import HANDED_OFF, count, install_command, recorder_install_command
from ..cassettes.lazy import init_on_first_use
from ..cassettes.recording import agent_name, run_about
from ..cassettes.replay.live.upstreams import bases_of
from ..cassettes.replay.testing.ready import check_ready_path
from ..cassettes.replay.testing.recorder import hand_to, recorder_python
from ..cassettes.storage import UnsafePath, check_target, is_cassette, same_path
from . import messages
from .output import output_of, prepare_output, settle_earlier

# mitmproxy.master imports mitmproxy.addons.termlog, and that package's __init__ imports all 31
# default addons (flask and jinja2 for the onboarding app, passlib and ldap3 for proxy auth,
# aioquic's QUIC parser …) where the recorder runs four: 420 of the 1,160 modules a `looptap run`
# loaded, and every branch of a `looptap why` is such a run (docs/startup.md, docs/suite.md). The
# package's __init__ runs when one of its own names is read (a stock mitmdump's default_addons);
# its submodules import alone. Nothing is done where mitmproxy is not installed.
init_on_first_use("mitmproxy.addons")
try:  # mitmproxy: in the recorder's environment only; elsewhere record and run say how to get it
    from .config import RecorderConfig, RecorderError
    from .launcher import BusyPort, check_confdir
    from .session import record_forever, report_lost, run_child
except ImportError:
    MITMPROXY = False
else:
    MITMPROXY = True

__all__ = ["cmd_record", "cmd_run", "hand_off"]


def hand_off(args: argparse.Namespace) -> str:
    """Without mitmproxy here (the ``looptap`` of the user's project): run this very command with
    the recorder's interpreter (:func:`~cassettes.replay.testing.recorder_python`:
    ``LOOPTAP_PROXY_PYTHON``, else the checkout's ``.venv-proxy``), by ``exec``
    (:func:`~cassettes.replay.testing.recorder.hand_to`). Returns only when it cannot: the one
    line that says what to do."""
    try:
        python = recorder_python()
    except CassetteError as exc:
        return f"error: {exc}"
    if os.environ.get(HANDED_OFF) or (
        python is not None and os.path.abspath(python) == os.path.abspath(sys.executable)
    ):  # the recorder's environment is this one, and has no mitmproxy: repaired, never made anew
        return (
            f"error: the recorder's environment {sys.prefix} has no mitmproxy; install it there: "
            f"{install_command('proxy', 'inspector', 'mcp', 'html')}"
        )
    if python is None:
        command, _ = recorder_install_command()
        return (
            "error: recording needs the looptap recorder (mitmproxy, in an environment of its "
            f"own), not found: create it with `{command}`, then run this again"
        )
    return hand_to(python, getattr(args, "cli_argv", sys.argv[1:]))


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _warn_exposure(args: argparse.Namespace) -> None:
    host = args.listen_host
    if host not in _LOOPBACK and not host.startswith("127."):
        messages.error(
            f"warning: listening on {host}, not loopback: anyone who can reach this machine can "
            "send requests through the proxy and read the responses; use it only on a trusted "
            "network"
        )


def _check_paths(args: argparse.Namespace, config: Any, child_log: Path | None = None) -> Any:
    """Every path this command writes, checked before anything starts (storage/_paths.py,
    docs/reliability.md "Paths looptap writes"): the cassette, the ready file, the command's
    output log, ``--confdir``. The cassette's :class:`~cassettes.storage.Target`; raises
    :class:`~cassettes.storage.UnsafePath` or the recorder's ``RecorderError``."""
    path, append = output_of(args.output)
    if getattr(args, "from_run", None) is not None:
        _check_fork_outputs(
            args,
            [
                ("the cassette", path),
                ("the ready file", config.ready_file),
                ("the command's output log", child_log),
            ],
        )
        if append:
            raise UnsafePath(
                f"-o +{path}: a fork writes a branch of its own (its header names the run it "
                "forks), never appended to a cassette; give -o a new path"
            )
    target = check_target(
        path,
        "the cassette",
        owned=is_cassette,
        force=not append and args.force,
        hint="-o +FILE appends only to a looptap cassette" if append else "--force replaces it",
        appends=append,
        parents=True,
    )
    if config.ready_file is not None:
        check_ready_path(config.ready_file, cassette=path)
    if child_log is not None:
        if config.ready_file is not None and same_path(child_log, config.ready_file):
            raise UnsafePath(
                f"the ready file {config.ready_file} is the command's output log: give "
                "--ready-file a path of its own"
            )
        check_target(child_log, "the command's output log", owned=lambda _p: True, appends=True)
    check_confdir(config.confdir)
    return target


def _check_fork_outputs(args: argparse.Namespace, outputs: list[tuple[str, Path | None]]) -> None:
    """A fork never writes what it reads: no output (``-o``, the ready file, the output log) may
    be the run ``--from`` names or an ``--edit`` file, as a name, a link or a hard link
    (:func:`~cassettes.storage.same_path`: the same inode, or the same resolved path)."""
    from ..cassettes.replay.forking.fork import fork_inputs

    inputs = fork_inputs(args)
    for what, out in outputs:
        for i, src in enumerate(inputs):
            if out is not None and same_path(out, src):
                read = "the run --from forks" if i == 0 else "an --edit file"
                raise UnsafePath(
                    f"{what} {out} is {read} ({src}): a fork never "
                    "writes over what it reads; give it a new path"
                )


def _config(args: argparse.Namespace) -> Any:
    if args.fault:  # (the fault injector imports the matcher: for --fault only, bench/startup.py)
        from ..cassettes.replay.serving.faults import FaultSpecError
        from .faults import live_plan

        try:
            live_plan(list(args.fault), args.fault_seed)
        except FaultSpecError as exc:
            raise SystemExit(f"looptap: error: {exc}") from None

    try:
        upstreams = bases_of(args.upstream, "--upstream")
    except ValueError as exc:
        raise SystemExit(f"looptap: error: {exc}") from None
    try:
        agent = agent_name(getattr(args, "agent", None), os.environ)
    except ValueError as exc:
        messages.error(f"error: {exc}")
        raise SystemExit(2) from None  # the recorder does not start (docs/recorder.md)
    return RecorderConfig(
        output=output_of(args.output)[0],
        base_port=args.port,
        upstreams=upstreams,
        record_hosts=tuple(args.record_host),
        tool_http=not args.no_tool_http,
        tool_http_exclude=tuple(args.tool_http_exclude),
        tool_http_loopback=not args.no_tool_http_loopback,
        redact_headers=tuple(args.redact_header),
        redact_patterns=tuple(args.redact_pattern),
        ssl_insecure=args.ssl_insecure,
        confdir=Path(args.confdir).expanduser(),
        fsync=args.fsync,
        host=args.listen_host,
        durable=args.durable,
        faults=tuple(args.fault),
        fault_seed=args.fault_seed,
        ready_file=Path(args.ready_file) if args.ready_file else None,
        environ=dict(os.environ),
        agent=agent,
    )


def _about(config: Any) -> dict[str, Any]:
    """The header's ``agent`` and ``command`` of a fork's branch, masked as the recorder's writer
    masks them (its redactor, with the extra names and patterns given)."""
    from ..cassettes.recording import Redactor

    try:
        redactor = Redactor.configured(
            headers=list(config.redact_headers), patterns=list(config.redact_patterns)
        )
    except ValueError:  # a bad pattern: the recorder says so when it opens the cassette
        redactor = Redactor()
    return run_about(config.agent, config.command, redactor.scrub)


def cmd_record(args: argparse.Namespace) -> int:
    messages.to_stderr()
    _warn_exposure(args)
    if not MITMPROXY:
        messages.error(hand_off(args))
        return 2
    config = _config(args)

    try:
        target = _check_paths(args, config)
    except (CassetteIOError, RecorderError) as exc:
        messages.error(f"error: {exc}")
        return 2
    _, aside = prepare_output(target, output_of(args.output)[1])
    try:
        return asyncio.run(record_forever(config))
    except (BusyPort, RecorderError) as exc:
        messages.error(f"error: {exc}")
        return 2
    finally:
        settle_earlier(target.path, aside)


def _default_output() -> str:
    """``--inspect`` without ``-o``: a new ``run-DATE-TIME.jsonl`` in the current directory (never
    an existing file)."""
    stem = time.strftime("run-%Y%m%d-%H%M%S")
    name, n = f"{stem}.jsonl", 1
    while Path(name).exists() or Path(name + ".log").exists():
        n += 1
        name = f"{stem}-{n}.jsonl"
    return name


#: The options only a fork (``--from``) takes, by their dests, and what a plain run given one says.
_FORK_ONLY = (
    (
        ("model", "edit"),
        "--model and --edit go with --from RUN@SELECTOR: they change what a fork sends live; a "
        "plain run records the agent as it is",
    ),
    (
        ("prefix",),
        "--prefix goes with --from RUN@SELECTOR: it says how the fork's prefix is matched; a "
        "plain run matches nothing",
    ),
    (
        ("max_requests",),
        "--max-requests goes with --from RUN@SELECTOR: it limits what a fork sends live; a plain "
        "run sends what the agent sends",
    ),
    (
        ("verify", "json", "max_cost", "allow_unknown_price"),
        "--verify (and --json, --max-cost, --allow-unknown-price with it) goes with --from "
        "RUN@SELECTOR: it judges the forks' branches by a command",
    ),
    (
        ("no_volatile",),
        "--no-volatile goes with --from RUN@SELECTOR: it changes how the fork's prefix is "
        "matched; a plain run matches nothing",
    ),
    (
        ("ignore", "substitute", "volatile_tool"),
        "--ignore, --substitute and --volatile-tool go with --from RUN@SELECTOR: they change how "
        "the fork's prefix is matched; a plain run matches nothing",
    ),
)


def cmd_run(args: argparse.Namespace) -> int:
    messages.to_stderr()
    for dests, said in _FORK_ONLY if args.from_run is None else ():
        if any(getattr(args, d, None) not in (None, False, []) for d in dests):
            messages.error(f"error: {said}")
            return 2
    if args.output is None:
        if not args.inspect:
            messages.error(
                "error: -o FILE names the cassette to record into (looptap run -o run.jsonl -- "
                "python agent.py); only --inspect may leave it out"
            )
            return 2
        args.output = _default_output()  # said with where the command's output goes (_run_once)
        args.output_chosen = True
    if getattr(args, "verify", None) is not None and not getattr(args, "verify_one", False):
        from ..cassettes.forkcheck import cmd_verify  # (the branches judged by a command)

        return cmd_verify(args)
    repeat = getattr(args, "repeat", 1)
    if repeat < 1 or (repeat > 1 and args.from_run is None):
        messages.error(
            "error: --repeat K (K from 1) goes with --from: the agent run K times from the cursor"
        )
        return 2
    if repeat == 1:
        return _run_once(args)
    return _run_repeated(args, repeat)


def _run_repeated(args: argparse.Namespace, repeat: int) -> int:
    """``--repeat K``: K forks into OUTPUT.1 … OUTPUT.K, then how they agree turn by turn. Every
    output is checked (the rule of ``-o``) and the fork itself (run, cursor, edits) before the
    first branch starts; every branch runs whatever the others did; the failed ones are listed,
    and only branches written and finished in this run are compared (never a file an earlier run
    left)."""
    out, append = output_of(args.output)
    if append:
        messages.error(
            f"error: -o +{out}: a fork writes branches of their own, "
            "never appended to a cassette; give -o a new path"
        )
        return 2
    ones: list[argparse.Namespace] = []
    for i in range(1, repeat + 1):
        one = copy.copy(args)
        one.output = str(out.with_name(f"{out.stem}.{i}{out.suffix}"))
        ones.append(one)
    if not MITMPROXY:
        messages.error(hand_off(args))
        return 2
    from ..cassettes.replay.forking.fork import parse_from, start_fork
    from ..cassettes.replay.forking.repeat import agreement, agreement_lines

    try:
        for one in ones:
            _check_paths(one, _config(one))
        start_fork(args)
    except (CassetteError, RecorderError, ValueError, OSError) as exc:
        messages.error(f"error: {exc}")
        return 2
    written: list[Path] = []
    failed: list[tuple[int, int]] = []
    for i, one in enumerate(ones, 1):
        messages.emit(f"--repeat: run {i} of {repeat} into {one.output}")
        mine: list[Path] = []
        status = _run_once(one, mine)
        if status:
            failed.append((i, status))
        else:
            written += mine
    if failed:
        messages.error(
            f"--repeat: {len(failed)} of {count(repeat, 'run')} "
            "failed, left out of the comparison: "
            + ", ".join(f"run {i} (exit status {status})" for i, status in failed)
        )
    rc = failed[0][1] if failed else 0
    if not written:
        messages.error("--repeat: no run finished: no branches to compare")
        return rc or 1

    try:
        rows = agreement(parse_from(args.from_run).run, [str(b) for b in written])
    except CassetteError as exc:
        messages.error(f"error: the branches could not be compared: {exc}")
        return rc or 1
    for line in agreement_lines(rows, len(written)):
        messages.emit(line)
    return rc


def _run_once(args: argparse.Namespace, written: list[Path] | None = None) -> int:
    """One ``run`` (a fork with ``--from``); a fork's branch cassette, once begun, is added to
    ``written`` (``--repeat`` compares only the branches it wrote). A fork's scratch tree is
    removed when it ends, unless ``--keep-tree`` (:func:`_end_scratch`)."""
    home = os.getcwd()
    scratch: list[Path] = []
    try:
        return _run_one(args, written, scratch)
    finally:
        for tree in scratch:
            _end_scratch(tree, home, getattr(args, "keep_tree", False))


def _end_scratch(tree: Path, home: str, keep: bool) -> None:
    """The end of a fork's scratch tree (``tree``, in a temporary folder of its own): this process
    goes back to ``home`` (the next ``--repeat`` branch copies the user's tree, not this one), and
    the tree is removed, or kept with ``keep``; one line says which. Its changes are on the
    branch's record either way (``files`` records, their contents beside it)."""
    with contextlib.suppress(OSError):
        os.chdir(home)
    if keep:
        messages.emit(f"the fork's scratch tree is kept: {tree} (remove it when done)")
        return
    shutil.rmtree(tree.parent, ignore_errors=True)
    if tree.parent.exists():
        messages.emit(f"the fork's scratch tree could not be removed entirely: {tree}")
    else:
        messages.emit(
            f"the fork's scratch tree was removed ({tree}; its changes are on the branch's "
            "record; --keep-tree keeps it)"
        )


def _run_one(args: argparse.Namespace, written: list[Path] | None, scratch: list[Path]) -> int:
    """:func:`_run_once`'s run; the scratch tree a fork makes is added to ``scratch``."""
    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        messages.error("error: nothing to run (looptap run -o run.jsonl -- python agent.py)")
        return 2
    if not MITMPROXY:
        messages.error(hand_off(args))
        return 2
    config = _config(args)
    config.command = tuple(argv)
    config.shell_trace = _shell_trace(args)
    config.copy_tree = bool(getattr(args, "copy_tree", False))
    _warn_exposure(args)

    try:
        target = _check_paths(
            args, config, Path(str(config.output) + ".log") if args.inspect else None
        )
    except (CassetteIOError, RecorderError) as exc:
        messages.error(f"error: {exc}")
        return 2
    try:
        # the fork --from asks for, checked, no file touched yet; its edits' marks are accepted
        # from its own replay server only (the fork's modules are imported for a fork only)
        fork = None
        if args.from_run is not None:
            from ..cassettes.replay.forking.fork import start_fork

            fork = start_fork(args)
    except (CassetteError, ValueError, OSError) as exc:
        messages.error(f"error: {exc}")
        return 2
    if fork is not None and fork.edits:
        config.edit_key = fork.edit_key
    if fork is not None:  # an API the run reached elsewhere than at its vendor goes there again
        config.upstreams = {**fork.goes.pinned, **config.upstreams}
        for line in fork.goes.lines():
            messages.emit(line)
    scratch_env: dict[str, str] = {}
    mask: list[str] = []
    if fork is not None:  # (imported for a fork only)
        from . import isolation

        try:
            if isolation.asked_in_place(getattr(args, "in_place", False)):
                isolation.in_place(fork)
            else:
                target, mask, scratch_env = isolation.fork_tree(fork, config, target, scratch)
                argv = [*mask, *argv]  # (config.command, the branch's header, stays the agent's)
        except isolation.Refused as exc:
            messages.error(f"error: {exc}")
            return 2
        except OSError as exc:
            messages.error(f"error: the fork's scratch tree could not be made: {exc}")
            return 2
    if fork is not None:  # the branch's header is written here, not by the recorder's writer
        fork.meta.update(_about(config))
    inspecting = _inspecting(args, config)
    if isinstance(inspecting, str):
        messages.error(inspecting)
        return 2
    viewer, child_log, child_status = inspecting
    before, aside = prepare_output(target, output_of(args.output)[1], fork is not None)
    if fork is not None:
        try:
            fork.begin(target.path)
        except (CassetteError, OSError) as exc:
            messages.error(f"error: {exc}")
            return 2
        if written is not None:
            written.append(target.path)
    try:
        rc, addon = asyncio.run(
            _run_child(config, argv, child_log, viewer, child_status, fork, scratch_env)
        )
    except (BusyPort, RecorderError, CassetteIOError) as exc:
        messages.error(f"error: {exc}")
        return 2
    except FileNotFoundError as exc:
        messages.error(f"error: {exc}")
        return 127
    finally:
        kept = settle_earlier(target.path, aside)
    if child_status is not None:
        shutil.rmtree(child_status.parent, ignore_errors=True)
        messages.emit(f"the command exited with status {rc}")
    from .summary import EXIT_NOT_JUDGED, Summary, summary_lines, unseen_how  # (when read)

    summary = Summary() if kept else summary_lines(config.output, before, unseen_how(config))
    for line in summary:
        messages.emit(line)
    if fork is not None and getattr(args, "verify", None):  # in the branch's tree, as its agent
        from .verify_branch import verify_branch

        fork.tolerated["verified"] = verify_branch(
            args.verify, args.verify_timeout, mask, scratch_env, scratch
        )
    if fork is not None:
        rc = _finish_fork(fork, target.path, rc)
    if report_lost(addon):
        return int(rc or 3)
    return int(rc or (EXIT_NOT_JUDGED if summary.not_judged else 0))


def _inspecting(
    args: argparse.Namespace, config: Any
) -> tuple[list[str] | None, Path | None, Path | None] | str:
    """With ``--inspect``: the inspector's command line (following the recording), the file the
    command's output goes to (said here) and where the recorder writes the command's exit status;
    or why the inspector cannot run here. Without it, none of them."""
    if not args.inspect:
        return None, None, None
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return (
            "error: --inspect needs a terminal (stdin and stdout are not one); "
            "record without it and open the cassette later with looptap inspect"
        )
    if importlib.util.find_spec("textual") is None:
        return (
            "error: --inspect needs the inspector in this environment: "
            f"{install_command('proxy', 'inspector')}"
        )
    child_log = Path(str(config.output) + ".log")
    child_status = Path(tempfile.mkdtemp(prefix="looptap-run-")) / "exit-status"
    chosen = (
        f"recording into {config.output} (no -o given); "
        if getattr(args, "output_chosen", False)
        else ""
    )
    messages.emit(f"{chosen}the command's output goes to {child_log}")
    inspect = [sys.executable, "-m", "looptap.cassettes.cli", "inspect", "--live", "--child-status"]
    return [*inspect, str(child_status), str(config.output)], child_log, child_status


def _finish_fork(fork: Any, path: Path, rc: int) -> int:
    """The end of a fork's run: what the prefix tolerated added to the branch's record, the fork's
    report said; the run's status (1 when the fork failed and the command did not)."""
    try:
        fork.finish(path)  # what the prefix tolerated, on the branch's record
    except (CassetteIOError, OSError) as exc:
        messages.error(f"error: the tolerated differences could not be added to {path}: {exc}")
        rc = rc or 1
    for line in fork.report:
        messages.emit(line)
    if fork.status and not rc:
        messages.error(
            "the fork failed (above): a request before the cursor matched no recorded turn (the "
            "client diverged beyond what the prefix mode tolerates), or an edit never applied; "
            "exit status 1"
        )
        return 1
    return rc


async def _run_child(
    config: Any,
    argv: list[str],
    child_log: Any,
    viewer: Any,
    child_status: Any,
    fork: Any,
    scratch_env: dict[str, str],
) -> Any:
    """:func:`~proxy.session.run_child`, with a fork's replay server in front of the recorder
    when ``--from`` is given, and what an isolated fork changes of its agent's environment
    (``scratch_env``: proxy/isolation.py)."""

    async def forked(env: dict[str, str]) -> dict[str, str]:
        return {**await fork.start(env), **scratch_env}

    try:
        return await run_child(
            config,
            argv,
            child_log=child_log,
            viewer=viewer,
            child_status=child_status,
            child_env=None if fork is None else forked,
        )
    finally:
        if fork is not None:
            fork.status = await fork.stop()


def _shell_trace(args: argparse.Namespace) -> str:
    """How ``looptap run`` traces the command (docs/shell-file-tools.md): ``--no-shell-trace``,
    ``--shell-trace``, else ``$LOOPTAP_SHELL_TRACE`` (``off``, ``tree``, ``processes``, ``full``),
    else the default: the working tree per turn, no process tracer (a tracer takes ptrace: the
    agent's own debugger, strace or profiler would fail, a setuid program would lose its
    privilege; ``processes`` and ``full`` are opt-in)."""
    if getattr(args, "no_shell_trace", False):
        return ""
    if getattr(args, "shell_trace", False):
        return "full"
    said = os.environ.get("LOOPTAP_SHELL_TRACE", "").strip().lower()
    return {"off": "", "0": "", "no": "", "processes": "processes", "full": "full"}.get(
        said, "tree"
    )
