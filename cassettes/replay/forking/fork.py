"""``looptap run --from RUN@SELECTOR``: run an agent again, its recorded prefix served from RUN and
its continuation live from the cursor on (docs/fork.md).

The agent talks to a replay server (a child process: ``looptap replay RUN --cursor SELECTOR
--live NAME=URL …``) that answers the prefix from the recording, fail closed; a request past the
cursor goes on to the recorder's listener for its API, which sends it to the live upstream and
records it into the branch cassette. The recorder's process stays what it is (no matcher, no
analysis in it); nothing before the cursor leaves the machine.

The branch cassette's header names its origin (``meta.origin``: the run, the cursor, the first
seq at it, the model asked for), so ``looptap diff RUN branch`` lines the two up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from ... import bounds
from ...errors import CassetteError
from ...hints import command_line
from ...matching import Matcher, here, rules_of_args
from ...reading import first_turn, open_run, origin_fields, origin_in, read_entries
from ...recording import Redactor
from ...storage import CassetteFile, check_input
from ...wire import KEY_ENV, new_key
from ..live.edits import Edit, edit_file, parse_edit, parse_edits
from ..live.upstreams import (
    Destinations,
    bases_of,
    destinations,
    live_bases,
    named_listeners,
    recorded_origins,
)
from ..serving.agent_env import read_export, replay_env
from .placement import CursorSpec, parse_cursor, place
from .plan import RULES, ForkPlan
from .served import merge_served

__all__ = ["ForkReplay", "ForkSource", "labelled", "parse_from", "sent_lines"]

#: The key of the branch's origin in the cassette header's ``meta``.
ORIGIN = "origin"
#: The ``note`` of the record a fork appends to its branch (what the prefix tolerated).
NOTE = "fork"


@dataclass(frozen=True)
class ForkSource:
    run: Path
    cursor: CursorSpec


def parse_from(text: str) -> ForkSource:
    """``RUN.jsonl@SELECTOR`` (the selector as docs/fork.md says); the run must exist."""
    run, at, sel = text.rpartition("@")
    if not at or not run or not sel:
        raise CassetteError(
            f"--from wants RUN.jsonl@SELECTOR (e.g. run.jsonl@turn=2), not {text[:80]!r}"
        )
    path = Path(run)
    if not os.path.lexists(path):
        raise CassetteError(f"--from: no such run {run[:200]!r}")
    return ForkSource(check_input(path, "--from"), parse_cursor(sel))


def fork_inputs(args: Any) -> list[Path]:
    """The files a fork reads (the run ``--from`` names, the ``--edit`` files), none opened: what
    none of its outputs may be (docs/reliability.md, "Paths looptap writes")."""
    run = str(args.from_run).rpartition("@")[0]
    files = [Path(run)] if run else []
    return files + [
        f for f in (edit_file(e) for e in getattr(args, "edit", []) or []) if f is not None
    ]


def origin_meta(
    source: ForkSource,
    model: str | None,
    starts: dict[str | None, int] | None = None,
    edits: list[str] | None = None,
    turns: dict[str | None, int | None] | None = None,
    branch: Path | None = None,
    prefix: str = "strict",
) -> dict[str, Any]:
    """``meta.origin`` of a branch: the run (as typed, absolute, relative to the branch, and its
    sha256 as it was at the fork: :mod:`cassettes.reading._branch` checks it), the cursor, the first
    seq at it and the origin's turn index there per conversation (``turn``: the number every view
    gives the branch's first turn), the model asked for, the edits."""
    known = [t for t in (turns or {}).values() if isinstance(t, int)]
    return {
        "edits": list(edits or []),
        "run": str(source.run),
        "cursor": source.cursor.as_json(),
        "seq": min(starts.values()) if starts else source.cursor.seq,
        "starts": {str(k): v for k, v in (starts or {}).items()},
        "turn": min(known) if known else (source.cursor.turn or 0),
        "turns": {str(k): v for k, v in (turns or {}).items()},
        "model": model,
        "prefix": prefix,
        **origin_fields(source.run, branch),
    }


@dataclass(frozen=True)
class Placement:
    """Where a fork's cursor falls in its run (:func:`locate`): the first recorded round trip at
    it per conversation (conversation → seq), the origin's turn there, and the edits checked
    against the recording, with the value each target had where the recording first sends it."""

    starts: dict[str | None, int]
    turns: dict[str | None, int | None]
    edits: list[Edit]
    recorded_values: dict[str, Any]
    #: Where the run sent each API's requests (``upstreams.recorded_origins``).
    origins: dict[str, set[str]] = field(default_factory=dict)


def labelled(run: Any) -> list[Any]:
    """The recorded round trips of an opened ``run``, labelled by turn as a fork places its cursor
    in them (:func:`cassettes.replay.forking.placement.place`)."""
    matcher = Matcher(list(run.exchanges), first_turn=first_turn(origin_in(run.header)))
    matcher.label()
    return list(matcher.recorded)


def locate(source: ForkSource, model: str | None, edits: list[Edit]) -> Placement:
    """The fork's cursor placed in its run, once, with the model and the ``edits`` it would send
    (:func:`cassettes.replay.forking.placement.place`). A cursor that selects no recorded turn, a
    model of another API family, or an edit whose target the recording does not have is refused
    here (:class:`~cassettes.replay.forking.placement.CursorError`), before any file is touched
    and before anything is sent."""
    run = open_run(source.run, whole=True)  # (a branch forked again: numbered as show numbers it)
    recorded = labelled(run)
    starts, values = place(source.cursor, recorded, str(source.run), model, edits)
    at = set(starts.values())
    turns = {r.conversation: r.turn for r in recorded if r.seq in at}
    return Placement(starts, turns, list(edits), values, recorded_origins(run.pairs))


def branch_meta(
    source: ForkSource,
    model: str | None,
    edits: list[str] | None = None,
    branch: Path | None = None,
    prefix: str = "strict",
    placed: Placement | None = None,
) -> dict[str, Any]:
    """The branch cassette's header ``meta`` (for a branch at ``branch``), naming its origin: the
    cursor as :func:`locate` placed it (``placed``, else placed here with no edit)."""
    at = placed or locate(source, model, [])
    # the branch's own cwd and home (its agent is this process's child), as a recording's header has
    # them
    return {
        "source": "looptap run --from",
        **here(),
        ORIGIN: origin_meta(source, model, at.starts, edits, at.turns, branch, prefix),
    }


@dataclass
class ForkReplay:
    """The replay server of a fork, as a child process (see the module docstring)."""

    source: ForkSource
    model: str | None = None
    #: ``--edit`` specs, passed on as given (checked by :func:`start_fork`).
    edits: list[str] = field(default_factory=list)
    #: This run's key for the edit marks (cassettes.wire._edit_marks): given to the replay server in
    #: its environment and to the recorder in process (``RecorderConfig.edit_key``), never to the
    #: agent nor on a command line.
    edit_key: str = field(default_factory=new_key, repr=False)
    #: ``False``: the prefix compared as sent (``looptap run --from … --no-volatile``).
    volatile: bool = True
    #: The rule flags given (``--ignore``, ``--substitute``, ``--volatile-tool``: checked by
    #: :func:`start_fork`), passed on; the replay server reads the project's file itself.
    rules: dict[str, list[str]] = field(default_factory=dict)
    #: The cursor as :func:`start_fork` placed it (``None``: placed when the fork starts).
    placed: Placement | None = None
    #: A tool's HTTP call the recording does not answer goes live (``False``: it fails,
    #: ``--tools-offline``).
    live_tools: bool = True
    #: How the prefix is matched: ``strict`` or ``tolerant`` (``--prefix``; docs/fork.md).
    prefix: str = "strict"
    #: What the replay server tolerated (per recorded turn) and, for ``@divergence``, where each
    #: conversation went live: read back when it stops, written into the branch (:meth:`finish`).
    tolerated: dict[str, Any] = field(default_factory=dict)
    _dir: str | None = None
    #: The tools' calls the replay server answered from the recording (its file, moved out of
    #: :attr:`_dir` when it stops), for :meth:`finish` to put into the branch.
    _served: str | None = None
    proc: asyncio.subprocess.Process | None = None
    report: list[str] = field(default_factory=list)
    #: The most requests sent live (``--max-requests``; ``None``: no limit).
    max_requests: int | None = None
    #: The replay server's exit status once stopped (1: the prefix diverged).
    status: int = 0
    #: The branch cassette's header ``meta`` (:func:`branch_meta`), written by :meth:`begin`.
    meta: dict[str, Any] = field(default_factory=dict)
    #: Where its live requests go, decided once (``upstreams.destinations``): the recorder is
    #: given :attr:`Destinations.pinned` as ``--upstream``.
    goes: Destinations = field(default_factory=lambda: destinations({}, {}))
    _err: Any = None

    def begin(self, path: Path) -> None:
        """Start the branch cassette at ``path`` (free: checked, and an earlier one replaced, by
        the caller): its header names the origin; the recorder appends after it."""
        CassetteFile(path, meta=self.meta).close()

    def plan(
        self, bases: dict[str, str], tool_proxy: str | None = None, tool_ca: str | None = None
    ) -> ForkPlan:
        """What the replay server is told (:mod:`cassettes.replay.forking.plan`), the cursor placed
        once: ``bases``, the recorder's listener per API name; ``tool_proxy``, its forward proxy
        (the live tools' requests go through it: recorded into the branch), ``tool_ca`` the CA
        it intercepts TLS with."""
        at = self.placed
        if at is None:
            at = locate(self.source, self.model, [parse_edit(e) for e in self.edits])
        out = self._dir
        return ForkPlan(
            self.source.cursor,
            starts=list(at.starts.items()),
            live=dict(bases),
            model=self.model,
            edits=list(at.edits),
            recorded_values=dict(at.recorded_values),
            prefix="tolerant" if self.prefix == "tolerant" else "strict",
            volatile=self.volatile,
            rules={k: v for k, v in self.rules.items() if k in RULES},
            live_recorder=bool(self.edits),
            live_tools=self.live_tools,
            tool_proxy=tool_proxy if self.live_tools else None,
            tool_proxy_ca=tool_ca if self.live_tools and tool_proxy else None,
            tolerated_out=os.path.join(out, "tolerated.json") if out is not None else None,
            sent_out=os.path.join(out, "sent.jsonl") if out is not None else None,
            max_requests=self.max_requests,
        )

    async def start(self, recorder_env: dict[str, str]) -> dict[str, str]:
        """Start the replay server with the recorder's listeners as its live upstreams; the
        environment the agent runs with (every base URL at the replay server)."""
        self._err = tempfile.TemporaryFile()
        # private (0700): the replay server's list of what it tolerated
        self._dir = tempfile.mkdtemp(prefix="looptap-fork-")
        plan = os.path.join(self._dir, "plan.json")
        proxy = recorder_env.get("HTTP_PROXY") or recorder_env.get("http_proxy")
        # (the recorder's CA, in the file Node is given: an HTTPS tool's live call trusts it)
        ca = recorder_env.get("NODE_EXTRA_CA_CERTS")
        self.plan(live_bases(recorder_env), proxy, ca).write(Path(plan))
        own = {k: v for k, v in os.environ.items() if k != KEY_ENV}
        argv = ["-m", "looptap.cassettes.cli", "replay", str(self.source.run), "--fork-plan", plan]
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._err,
            stdin=asyncio.subprocess.DEVNULL,
            env={**own, KEY_ENV: self.edit_key} if self.edits else own,
        )
        assert self.proc.stdout is not None
        want = set(replay_env("http://x"))
        env: dict[str, str] = {}
        while not want <= env.keys():  # (the proxy variables first, when the tools are served)
            line = (await self.proc.stdout.readline()).decode("utf-8", "replace").strip()
            if not line:
                await self.proc.wait()
                raise CassetteError(
                    "the fork's replay server did not start: " + " ".join(self._said()[-5:])
                )
            if (read := read_export(line)) is not None:
                env[read[0]] = read[1]
        # a listener --upstream NAME=URL added goes through the replay server too
        u = urlsplit(env[next(iter(sorted(want)))])
        env.update((var, f"{u.scheme}://{u.netloc}") for var in named_listeners(recorder_env))
        # The replay server's variables: the recorder's proxy variables would send a client past
        # the replay (the replay server's own, when it serves the tools, stand instead).
        return {
            **{
                k: v
                for k, v in recorder_env.items()
                if not k.lower().endswith("_proxy") and k != "NODE_USE_ENV_PROXY"
            },
            **env,
        }

    def _said(self) -> list[str]:
        """What the replay server said on stderr, each line without the ``looptap:`` its own CLI
        put before it: the caller says them with its own (one prefix, not ``looptap: looptap:``)."""
        if self._err is None:
            return []
        self._err.seek(0)
        said: bytes = self._err.read(1 << 20)
        return [_unprefixed(line) for line in said.decode("utf-8", "replace").splitlines()]

    async def stop(self) -> int:
        """Stop the replay server; its exit status (1: a request before the cursor missed, the
        client diverged) with its report in :attr:`report`."""
        if self.proc is None:
            return 0
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGINT)
        rc = await self.proc.wait()
        self.report = self._said()
        if self._err is not None:
            self._err.close()
            self._err = None
        self._keep_sent()
        self._read_tolerated()
        return rc

    def _keep_sent(self) -> None:
        """When the prefix missed, what the agent sent (the replay server wrote it into this fork's
        private directory) moved to a private directory of its own, which outlives the run, and the
        next steps said in :attr:`report`: the rules proposed from it, the other prefix modes."""
        sent = os.path.join(self._dir, "sent.jsonl") if self._dir is not None else None
        if sent is None or not os.path.isfile(sent):
            return
        kept = Path(tempfile.mkdtemp(prefix="looptap-fork-sent-")) / "sent.jsonl"
        try:
            shutil.move(sent, kept)
        except OSError as exc:
            self.report.append(f"what the agent sent could not be kept: {exc.strerror or exc}")
            return
        self.report += sent_lines(
            str(self.source.run),
            kept,
            strict=self.prefix == "strict",
            divergence=self.source.cursor.divergence,
        )

    def _read_tolerated(self) -> None:
        """What the replay server wrote of what it tolerated (its own file, in this fork's private
        directory), into :attr:`tolerated`; the directory removed."""
        if self._dir is None:
            return
        try:
            with open(os.path.join(self._dir, "tolerated.json"), "rb") as f:
                doc = bounds.loads(f.read(64 << 20))
        except (OSError, orjson.JSONDecodeError, ValueError):
            doc = None
        served = os.path.join(self._dir, "served-tools.jsonl")
        if os.path.isfile(served):
            keep = tempfile.mkdtemp(prefix="looptap-fork-served-")
            with contextlib.suppress(OSError):
                self._served = shutil.move(served, os.path.join(keep, "served-tools.jsonl"))
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
        if isinstance(doc, dict):
            starts, failed = doc.get("starts"), doc.get("failed")
            lived, stopped = doc.get("lived"), doc.get("stopped")
            self.tolerated = {
                "tolerated": read_entries(doc.get("tolerated")),
                "starts": starts if isinstance(starts, dict) else {},
                "failed": [str(x) for x in failed if isinstance(x, str)]
                if isinstance(failed, list)
                else [],
                "lived": lived if isinstance(lived, list) else None,
                # stopped at the limit of live requests (cassettes.replay.forking.limit)
                "stopped": stopped if isinstance(stopped, dict) else None,
            }

    def finish(self, path: Path) -> None:
        """Append to the branch cassette at ``path`` (once its recorder has stopped) what the prefix
        tolerated and, for ``@divergence``, where each conversation went live, and whether it
        stopped at its limit of live requests: a ``note`` record
        (:func:`cassettes.reading.fork_notes` reads it), when there is anything to say. First, the
        tools' calls served from the recording once the branch had begun, each where it started
        (:func:`~.served.merge_served`)."""
        if self._served is not None:
            served, self._served = Path(self._served), None
            try:
                merge_served(path, served)
            except CassetteError as exc:
                self.report.append(
                    f"the tools' calls served from the recording are not in the branch: {exc}"
                )
            finally:
                shutil.rmtree(served.parent, ignore_errors=True)
        said = any(
            self.tolerated.get(k) for k in ("tolerated", "starts", "failed", "stopped", "verified")
        )
        if not said and self.tolerated.get("lived") is None:
            return  # an empty lived is said: the agent made no request the fork answered
        record = {"type": "note", "note": NOTE, "prefix": self.prefix, **self.tolerated}
        with CassetteFile(path) as f:  # (what the replay said: redacted as every line is)
            f.append(Redactor().seal(orjson.dumps(record) + b"\n"))


def _unprefixed(line: str) -> str:
    """A line of looptap's own stderr as a message: ``looptap: replaying …`` → ``replaying …``,
    ``looptap replay: no recorded …`` → ``replay: no recorded …``."""
    for prefix in ("looptap: ", "looptap "):
        if line.startswith(prefix):
            return line[len(prefix) :]
    return line


def start_fork(args: Any) -> ForkReplay:
    """For ``looptap run --from``: the fork's replay server, not yet started, with the header of
    its branch cassette (:meth:`ForkReplay.begin` writes it once the caller has put an earlier
    cassette aside). Everything is checked here, and no file touched: raises
    :class:`CassetteError` for a ``--from`` that names no run (or not a regular file) or no turn,
    an ``--edit`` that cannot be read."""
    source = parse_from(args.from_run)
    edits = parse_edits(args.edit, source.cursor.text)  # refused here, before anything starts
    out = str(getattr(args, "output", "") or "")
    branch = Path(out[1:] if out.startswith("+") and len(out) > 1 else out) if out else None
    # the project's rules and the flags, refused here (RuleError) before anything starts
    rules_of_args(args, source.run)
    prefix = getattr(args, "prefix", None) or "strict"
    most = getattr(args, "max_requests", None)
    if most is not None and most < 0:
        raise CassetteError(f"--max-requests wants a count from 0, not {most}")
    placed = locate(source, args.model, edits)
    goes = destinations(
        placed.origins, bases_of(getattr(args, "upstream", None) or [], "--upstream")
    )
    if (refused := goes.refusal()) is not None:
        raise CassetteError(refused)
    meta = branch_meta(
        source, args.model, [e.label for e in edits], branch=branch, prefix=prefix, placed=placed
    )
    return ForkReplay(
        source,
        model=args.model,
        edits=list(args.edit),
        meta=meta,
        volatile=not getattr(args, "no_volatile", False),
        prefix=prefix,
        rules={n: list(getattr(args, n, ()) or ()) for n in RULES},
        placed=placed,
        live_tools=not getattr(args, "tools_offline", False),
        max_requests=most,
        goes=goes,
    )


def sent_lines(run: str, kept: Path, *, strict: bool, divergence: bool) -> list[str]:
    """The next steps after a prefix that missed (``kept``: what the agent sent): the rules
    proposed from it, the other prefix modes; every command built from its words
    (:func:`cassettes.hints.command_line`: ``run`` is any path the user gave)."""
    lines = [
        f"what the agent sent: {kept}; rules that would make it match, if what differs is "
        f"volatile: {command_line(['looptap', 'rules', 'propose', run, str(kept)])}"
    ]
    modes = (
        [
            "--prefix tolerant answers a request that differs only in tool results with its "
            "recorded turn"
        ]
        if strict
        else []
    )
    if not divergence:
        modes.append(
            f"{command_line(['--from', f'{run}@divergence'])} goes live at the first difference "
            "instead of failing"
        )
    if modes:
        lines.append("; ".join(modes) + " (docs/fork.md)")
    return lines
