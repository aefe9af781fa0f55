"""The processes of an investigation: each branch, an ordinary ``looptap run --from RUN@CURSOR
[--edit …] [--model M] -o DIR/KEY.K.jsonl -- CMD`` started in the recorder's environment (the
interpreter ``LOOPTAP_PROXY_PYTHON`` names, found as the pytest plugin finds it), so every branch
is a branch cassette ``show``, ``diff`` and the inspector read, and nothing of the fork is
re-implemented here; and the baseline, the command run once against the whole recording, one more
such fork that sends nothing (:meth:`Branches.baseline`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CassetteError
from ..hints import count
from ..reading import fork_notes, open_run
from ..storage import copy_sealed, open_regular, write_sealed
from ..untrusted import clean_line
from ._budget import Purse
from ._check import end_state, run_check
from ._intervention import Intervention
from ._outcome import Judged, Outcome, judged_from, lived_run

__all__ = ["BASELINE", "Branches", "WhyRunError", "environmental", "passed_flags", "where_sent"]

#: The longest ``--edit`` passed on the command line; a longer one goes by a file.
_INLINE_EDIT = 16 << 10
#: The check's own time limit in seconds (``why --check-timeout``, ``run --verify-timeout``).
CHECK_SECONDS = 600.0
#: What ``looptap run --from`` says when the fork itself failed (the command's status is then not
#: the outcome).
_FORK_FAILED = ("the fork failed (above)", "could NOT be stored", "looptap: error:")


class WhyRunError(CassetteError):
    """A process of the investigation could not be run as it must (no recorder, a diverging
    command)."""


def passed_flags(args: Any) -> list[str]:
    """``looptap run``'s flags every branch gets (``--upstream``, ``--confdir``, made absolute):
    what reaches the investigation's upstream again (a confirmation's forks get the same)."""
    return [x for u in args.upstream for x in ("--upstream", u)] + (
        ["--confdir", str(Path(args.confdir).expanduser().resolve())] if args.confdir else []
    )


def where_sent(run: Any, upstreams: list[str]) -> dict[str, str]:
    """Where each API's live requests go (name → base URL), decided once from the run and the
    ``--upstream`` items the branches get, as every branch's fork decides it
    (:func:`~cassettes.replay.live.upstreams.destinations`): an API the run reached elsewhere
    than at its vendor goes there unless given, never to the vendor's API; said on stderr.
    Raises :class:`CassetteError` when the run reached one API at two places and none is given,
    ``ValueError`` for an item that is not ``NAME=URL``."""
    from ..replay.live.upstreams import bases_of, destinations, recorded_origins

    goes = destinations(recorded_origins(run.pairs), bases_of(upstreams, "--upstream"))
    if (refused := goes.refusal()) is not None:
        raise CassetteError(refused)
    for line in goes.lines():
        print(clean_line(f"looptap why: {line}"), file=sys.stderr, flush=True)
    return goes.bases


def _redactor() -> Any:
    """The redactor of what the branches write: the project's (its ``pyproject.toml``), or the
    built-in rules alone when that table cannot be read (said by ``looptap run`` itself)."""
    from ..recording import Redactor

    try:
        return Redactor.configured()
    except ValueError:
        return Redactor()


#: proxy/isolation.py's environment form of ``--in-place`` (the core cannot import the proxy).
IN_PLACE_VAR = "LOOPTAP_IN_PLACE"


def _scrubbed(drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This environment without proxy variables (they would send the agent past the replay) and
    without ``drop``."""
    return {
        k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k not in drop
    }


#: The baseline's branch in the why's directory (its log beside it: ``….log``).
BASELINE = "baseline.jsonl"


def _recorded_check(run: Path, command: str, seconds: float, cwd: Path | None) -> int:
    """The check's status for the recorded run: on its end state, the working tree as the
    recording left it, in a scratch copy (:func:`~cassettes.why._check.end_state`), since each
    branch is judged in its own copy too; for a run recorded without its tree, here, after the
    command ran against the recording in place, where its branches run too. 124 past
    ``seconds``."""
    got = end_state(run, command, seconds, root=cwd)
    if got.get("tree") is False:
        got = run_check(command, cwd or Path.cwd(), dict(os.environ), seconds)
    if got.get("error") or got.get("result") == "not judged":
        raise WhyRunError(
            "the check cannot be run on the recorded run: "
            + str(got.get("why") or f"it could not start: {got['error']}")
        )
    return 124 if got["timed_out"] else int(got["exit"])


@dataclass
class Branches:
    """How every branch of one investigation is run."""

    run: Path
    argv: list[str]
    outcome: Outcome
    directory: Path
    #: ``looptap run``'s options passed to every branch (``--upstream``, ``--confdir``).
    passed: list[str] = field(default_factory=list)
    python: str = ""
    cwd: Path | None = None
    #: ``--in-place``: each branch runs in the user's working tree (where a fork cannot be
    #: isolated, proxy/isolation.py); else in a scratch copy, or refused.
    in_place: bool = False
    #: Whether ``LOOPTAP_IN_PLACE=1`` (proxy/isolation.py's environment form of ``--in-place``)
    #: reaches the branches: for ``why``, as for every fork the user starts; not for ``run
    #: --verify``, whose branches run at once and each need a tree of their own.
    env_in_place: bool = True
    #: The check's own time limit in seconds: past it the branch's check is stopped (status 124).
    check_seconds: float = CHECK_SECONDS
    #: What the branches may send live in all (``--max-requests``, a confirm's limit): each branch
    #: is started with its share (``looptap run --from … --max-requests``).
    purse: Purse = field(default_factory=Purse)
    #: The branches' processes now running, each the leader of a process group of its own.
    running: set[subprocess.Popen[bytes]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _opened: Any = None
    #: What the branches' output and edits pass before they reach a file (the project's
    #: ``[tool.looptap.redact]`` too).
    redactor: Any = field(default_factory=lambda: _redactor())

    def path(self, i: Intervention, k: int) -> Path:
        return self.directory / f"{i.key}.{k}.jsonl"

    def command(self, i: Intervention, k: int, limit: int | None = None) -> list[str]:
        """The ``looptap run --from`` of sample ``k`` of ``i`` (sending at most ``limit`` live)."""
        argv = [self.python, "-m", "looptap.cassettes.cli", "run"]
        argv += ["--from", f"{self.run}@{i.cursor}"]
        if limit is not None:
            argv += ["--max-requests", str(limit)]
        for n, e in enumerate(i.edits):
            argv += ["--edit", self._edit_arg(i, n, e)]
        if i.model is not None:
            argv += ["--model", i.model]
        if self.in_place:
            argv.append("--in-place")
        if self.outcome.kind == "check":  # run by the fork, in the branch's tree, after its agent
            argv += ["--verify", self.outcome.value, "--verify-timeout", str(self.check_seconds)]
            argv.append("--verify-one")
        return [*argv, *self.passed, "-o", str(self.path(i, k)), "--", *self.argv]

    def _edit_arg(self, i: Intervention, n: int, edit: str) -> str:
        """``edit`` as given to ``looptap run --edit``: a long one (a history put back) from a file
        beside the branches (``TARGET=@FILE``), written once; a command line has a limit. So is
        a text from the recording that starts with ``@`` (:attr:`Intervention.literal`), which
        the fork would read as a file's name."""
        target, _, value = edit.partition("=")
        if len(edit) <= _INLINE_EDIT and not (edit in i.literal and value.startswith("@")):
            return edit
        path = self.directory / f"{i.key}.edit{n}.txt"
        with self._lock:
            if not path.exists():
                write_sealed(path, self.redactor.seal(value.encode("utf-8", "surrogatepass")))
        return f"{target}=@{path.resolve()}"

    def plan(self, items: list[tuple[Intervention, int]]) -> None:
        """The branches about to run: each reserves its at-most in :attr:`purse`."""
        self.purse.plan(i.most_requests for i, _ in items)

    def one(self, i: Intervention, k: int, reserve: int | None = None) -> dict[str, Any]:
        """Run sample ``k`` of ``i``, sending what :attr:`purse` gives it (planned with
        ``reserve``; ``None``: ``i``'s at-most); its result for the state file: the branch file and
        ``result``: ``flipped``, ``failed`` or ``invalid`` (with ``why``)."""
        limit = self.purse.open(i.most_requests if reserve is None else reserve)
        result: dict[str, Any] = {}
        try:
            result = self._one(i, k, limit)
        finally:
            self.purse.close(limit, int(result.get("sent") or 0))
        return result if limit is None else {**result, "limit": limit}

    def baseline(self) -> Judged:
        """The command run once against the whole recording, as one more fork: ``looptap run --from
        RUN@divergence --max-requests 0 --tools-offline`` (every request the recording has, the
        tools' HTTP calls too, served from it; one it lacks goes nowhere), isolated as every branch
        is (a scratch copy of the recorded tree, scratch ``HOME`` and temp layers; refused where
        that cannot be made, unless ``--in-place``), into :data:`BASELINE`; judged on its exit
        status, and a check on the recorded end state (:func:`_recorded_check`). Raises
        :class:`WhyRunError` when the fork could not run it (refused, failed), and when a request of
        the command matched no recorded round trip: the command does not reproduce the recorded run,
        so no fork of it can be trusted."""
        out = self.directory / BASELINE
        argv = [self.python, "-m", "looptap.cassettes.cli", "run", "--from"]
        argv += [f"{self.run}@divergence", "--max-requests", "0", "--tools-offline"]
        argv += ["--in-place"] * self.in_place + [*self.passed, "-o", str(out), "--", *self.argv]
        rc, said = self._started(argv, out)
        notes = fork_notes(out) if out.exists() else None
        if notes is not None and (notes["failed"] or notes["stopped"]):
            stopped = notes["stopped"] or {}
            missed = notes["failed"][:1] or [
                f"{count(stopped['refused'], 'request')} not served, the first: {stopped['first']}"
            ]
            raise WhyRunError(
                "the command does not reproduce the recorded run: against the recording (nothing "
                "sent) it made a request the recording does not have, so no fork of it can be "
                f"trusted: {missed[0]}"
            )
        failed = _fork_failed(out, said)
        if failed is not None or notes is None or rc == 127:
            why = failed or (said[-1] if said else f"looptap run exited {rc}")
            raise WhyRunError(
                "the command could not be run against the recording (nothing sent): "
                f"{why.removeprefix('looptap: ').removeprefix('error: ')}"
            )
        judged = Judged(exit=rc)
        if self.outcome.kind == "check":
            judged.check = _recorded_check(
                self.run, self.outcome.value, self.check_seconds, self.cwd
            )
        return judged

    def _started(self, argv: list[str], out: Path) -> tuple[int, list[str]]:
        """Run ``argv`` (a ``looptap run --from``, writing ``out``): its status, and the last lines
        of its output, kept in ``out``'s log as the redactor passes them."""
        log = out.with_name(out.name + ".log")
        with open(log, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            # A session of its own: a Ctrl-C reaches the branch only through interrupt(), after this
            # investigation knows it is stopping (the branch's status is then no outcome). Its
            # output (the agent's) reaches the log as the redactor passes it, a line at a time.
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=_scrubbed(drop=() if self.env_in_place else (IN_PLACE_VAR,)),
                start_new_session=True,
            )
            assert proc.stdout is not None
            copy = threading.Thread(
                target=copy_sealed, args=(proc.stdout, f, self.redactor.seal), daemon=True
            )
            copy.start()
            with self._lock:
                self.running.add(proc)
            try:
                rc = proc.wait()
            finally:
                copy.join()
                proc.stdout.close()
                with self._lock:
                    self.running.discard(proc)
        return rc, _tail(log)

    def _one(self, i: Intervention, k: int, limit: int | None) -> dict[str, Any]:
        out = self.path(i, k)
        log = out.with_name(out.name + ".log")
        rc, said = self._started(self.command(i, k, limit), out)
        base = {"branch": out.name, "log": log.name, "status": rc, **_sent(out)}
        if out.exists() and fork_notes(out)["stopped"] is not None:
            base["stopped"] = True  # at its limit of live requests: no sample (_stopped)
        broken = (
            _stopped(out) or _fork_failed(out, said) or _unreached(out) or _never_live(out, base, i)
        )
        if rc == 127 or broken is not None or not out.exists():
            why = broken or (said[-1] if said else f"looptap run exited {rc}")
            # no sample because of where it ran, not of what it tried: --resume runs it again
            place = {"environment": True} if _ENVIRONMENT.search(why) else {}
            return {**base, "result": "invalid", "why": why, **place}
        judged = Judged(exit=rc)
        if self.outcome.kind == "check":
            checked = self.checked(out)
            if isinstance(checked, str):
                return {**base, "result": "invalid", "why": checked}
            judged.check = checked
        elif not self.outcome.needs_run:
            try:
                lived = lived_run(self._origin(), out)
            except CassetteError as exc:
                return {**base, "result": "invalid", "why": f"the branch cannot be read: {exc}"}
            if lived is None:
                return {
                    **base,
                    "result": "invalid",
                    "why": "the run the agent lived is not known: the fork noted no order of "
                    "what it served and sent",
                }
            judged = judged_from(lived)
        failed = self.outcome.failed(judged)
        if failed is None:
            return {
                **base,
                "result": "invalid",
                "why": "the outcome cannot be told: the branch gave no final answer (no turn of "
                f"it answered with text; the command exited {rc})",
            }
        return {**base, "result": "failed" if failed else "flipped"}

    def checked(self, branch: Path) -> int | str:
        """The ``check`` outcome's status for ``branch``: the check its fork ran in the branch's own
        tree once the agent ended (``looptap run --from … --verify``: the isolated scratch copy,
        or the working tree ``--in-place`` or when the run holds no tree), kept on its note; 124
        past its time limit. Why there is none, when the check did not run."""
        note = fork_notes(branch)["verified"] if branch.exists() else None
        if note is None:
            return "the check did not run (the fork ended before it)"
        if note["timed_out"]:
            return 124
        if note["exit"] is None:
            return f"the check could not start: {note['error'] or 'no status on the fork note'}"
        return int(note["exit"])

    def _origin(self) -> Any:
        """The recorded run, opened once (what each branch's served round trips are)."""
        with self._lock:
            if self._opened is None:
                self._opened = open_run(self.run, whole=True)
            return self._opened

    def interrupt(self) -> None:
        """Pass a Ctrl-C on to every branch running (its recorder stops, its agent gets it)."""
        import contextlib

        with self._lock:
            for proc in self.running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT)


def _sent(branch: Path) -> dict[str, int]:
    """``{"sent": N}``: the requests the branch sent live to the model (its round trips, a cut
    answer's continuations included; not a tool's HTTP call recorded beside them, which ends
    ``,"tool":true}``), what the budget estimated and the fork's limit counts
    (:mod:`cassettes.replay.forking.limit`); ``{}`` when it cannot be read."""
    try:  # a regular file only: never blocks on a FIFO, never reads a device
        with open_regular(branch) as f:
            return {
                "sent": sum(
                    1
                    for line in f
                    if line.startswith(b'{"type":"exchange"')
                    and not line.rstrip().endswith(b',"tool":true}')
                )
            }
    except OSError:
        return {}


def _stopped(branch: Path) -> str | None:
    """Why ``branch`` is no sample when its fork stopped at its limit of live requests (a request
    of the agent was not sent: what it did after says nothing of the change), else ``None``."""
    stopped = fork_notes(branch)["stopped"] if branch.exists() else None
    if stopped is None:
        return None
    return (
        f"stopped at its limit of {count(stopped['limit'] or 0, 'live request')}: "
        f"{count(stopped['refused'], 'request')} of the agent's not sent, so its run says nothing "
        "of the change (not judged)"
    )


def _never_live(branch: Path, base: dict[str, Any], i: Intervention) -> str | None:
    """Why ``branch`` is no sample when it sent nothing live: the agent never made the request at
    the cursor (it re-ran only some of the recorded conversations: an imported trace whose agent
    runs only its last loop, a sub-agent not started again), so the intervention never happened
    and whatever the agent did says nothing of it; else ``None``."""
    if not branch.exists() or base.get("sent") != 0:
        return None
    lived = fork_notes(branch)["lived"]
    served = f" ({count(len(lived), 'request')} served from the recording)" if lived else ""
    return (
        f"the intervention never happened: the agent never sent {i.conversation} turn "
        f"{i.turn}, nothing went live{served}"
    )


def _fork_failed(branch: Path, said: list[str]) -> str | None:
    """Why the fork of ``branch`` failed (the note it appended: a request before the cursor that
    matched no recorded turn, an edit never applied; else the fork's own words in its log), or
    ``None``. Whatever the command's status was then, it is not the outcome's."""

    failed = fork_notes(branch)["failed"] if branch.exists() else []
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"the fork failed: {failed[0]}{more}"
    return next((ln for ln in said if any(m in ln for m in _FORK_FAILED)), None)


#: A live request's transport error that says the upstream was never reached (nothing answered:
#: the run says nothing of the change, whatever the agent did then).
_UNREACHED = re.compile(
    r"Connect call failed|Connection refused|Name or service not known|getaddrinfo|"
    r"No route to host|nodename nor servname"
)


#: The ``why`` of a branch that got no sample for a reason of the environment it ran in (the
#: upstream not reached, none serving its API), not of what it tried: :func:`environmental`.
_ENVIRONMENT = re.compile(
    r"^a request sent live never reached the upstream|no live upstream serves this API"
)


def environmental(result: dict[str, Any] | None) -> bool:
    """Whether a kept branch got no sample for a reason of the environment (an upstream down,
    refused, not resolved, none serving its API): what ``--resume`` runs again. Read from the
    result's ``why`` too, so a branch an older looptap kept is known."""
    if not isinstance(result, dict) or result.get("result") != "invalid":
        return False
    return bool(result.get("environment")) or bool(_ENVIRONMENT.search(str(result.get("why"))))


def _unreached(branch: Path) -> str | None:
    """Why ``branch`` is no sample when a request it sent live never reached the upstream (a
    connection refused, a name not resolved: the ``--upstream`` is down or wrong), else
    ``None``."""
    if not branch.exists():
        return None
    try:
        exchanges = list(open_run(branch, whole=True).exchanges)
    except CassetteError:
        return None
    for ex in exchanges:
        err = ex.transport_error or ""
        if _UNREACHED.search(err):
            return f"a request sent live never reached the upstream ({clean_line(err)[:200]})"
    return None


def _tail(log: Path) -> list[str]:

    with open(log, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - (1 << 16)))
        text = f.read().decode("utf-8", "replace")
    return [clean_line(ln) for ln in text.splitlines() if ln.strip()]
