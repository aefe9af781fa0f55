"""The C case's investigation, made once a session and read by the three modules that each made it
on their own (issue 105 item 2): tests/why/test_why.py's look at a real investigation,
test_why_confirm.py's confirms and test_why_upstreams.py's destinations. The client drops Lyon's
result (``--drop-second --expect rain``), recorded against a scripted fake that stays up for the
session (the recorded run's own upstream, and the why's ``--upstream``); then ``why --layer C
--samples 3`` with the result put back (a verdict of the client at c1 turn 1: 3 of 3 flip, alone 2
of 2 would not show it, docs/why.md "Reading the verdict"), ``--jobs 2``, its fake's route a
:class:`Meeting` (the branches' concurrency, test_why.py's). Its commands run with every vendor's
base URL at a :class:`Sentinel` (``OPENAI_BASE_URL`` …), which must hear nothing. A test that
writes beside the investigation works on a copy (:meth:`CInvestigation.copy`); the fake being
this process's, every test that reads it runs on one worker (``c_investigation`` is in
tests/support/scheduling.py's ``GROUPED_SESSION_FIXTURES``)."""

from __future__ import annotations

import shutil
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.support import progress
from tests.support.progress import CEILING
from tests.support.recorder import RECORDER
from tests.support.scripted import Logged, Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import AGENT, HTTP, WHY, c_call, c_route, why_env

__all__ = ["AGENT_ARGS", "CInvestigation", "Meeting", "Sentinel", "investigate"]

#: The agent's flags: it drops the second result and fails unless the answer says "rain"; its
#: client is urllib (test_why.py's ``HTTP``: what the session's readers show is where why sends and
#: what it keeps, not the SDK).
AGENT_ARGS = ("--drop-second", "--expect", "rain", HTTP)


class Sentinel:
    """A loopback socket that stands in for every vendor's API: it accepts and records each
    connection (and closes it, so nothing waits on it)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.heard: list[str] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self.heard.append(f"{peer[0]}:{peer[1]}")
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


class Meeting:
    """:func:`~tests.why.test_why.c_route`, and while :attr:`armed` (the investigation's why) the
    requests at the fake counted: the first two wait for each other (a barrier: broken, an error
    reply, if the second never comes while the first waits), and the most at once is kept."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.meet = threading.Barrier(2)
        self.armed = False
        self.now = self.most = self.seen = 0

    def __call__(self, req: ScriptedRequest) -> Reply:
        with self.lock:
            counted, first_two = self.armed, self.seen < 2
            if counted:
                self.now += 1
                self.most = max(self.most, self.now)
                self.seen += 1
        try:
            if counted and first_two:
                self.meet.wait(CEILING)
            return c_route(req)
        finally:
            if counted:
                with self.lock:
                    self.now -= 1


@dataclass
class CInvestigation:
    #: Its directory: the run, the confdir (``conf``), the commands' ``HOME`` (``home``).
    tmp: Path
    run: Path
    #: The id of the dropped call (the ``--result`` given).
    call: str
    fake: ScriptedUpstream
    sentinel: Sentinel
    #: why_env() with ``HOME`` and every vendor's base URL at the sentinel.
    env: dict[str, str]
    #: The why's directory (``-o``): never written; a test that writes takes :meth:`copy`.
    why: Path
    rc: int
    out: str
    err: str
    #: What the fake heard from the why (its 3 branches).
    sent: list[Logged]
    #: The most requests at the fake at once while the why ran (:class:`Meeting`).
    most: int = 0

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.why, dest)
        return dest

    def flags(self) -> list[str]:
        """The why's own flags (``--upstream`` at the fake, ``--confdir``; a ``--resume`` repeats
        them)."""
        return ["--upstream", f"openai={self.fake.url}", "--confdir", str(self.tmp / "conf")]


def investigate(
    tmp: Path, fake: ScriptedUpstream, meeting: Meeting, sentinel: Sentinel
) -> CInvestigation:
    """Record the C case against ``fake`` (whose route is ``meeting``) into ``tmp`` and run the
    why of it (K=3, ``--jobs 2``)."""
    (tmp / "home").mkdir()
    env = why_env()
    env["HOME"] = str(tmp / "home")  # the confdir-less runs' ~/.mitmproxy
    run = tmp / "run.jsonl"
    rec = progress.run(
        [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp / "conf"),
         "--upstream", f"openai={fake.url}", "--", sys.executable, str(AGENT), *AGENT_ARGS],
        env=env, capture_output=True, text=True, cwd=tmp,
    )  # fmt: skip
    assert rec.returncode == 1, rec.stderr[-3000:]
    # from here on, every listener no --upstream names goes to the sentinel
    env.update(
        OPENAI_BASE_URL=f"{sentinel.url}/v1",
        ANTHROPIC_BASE_URL=sentinel.url,
        GOOGLE_GEMINI_BASE_URL=sentinel.url,
    )
    inv = CInvestigation(tmp, run, c_call(run), fake, sentinel, env, tmp / "w", 0, "", "", [])
    before = len(fake.log)
    meeting.armed = True
    try:
        proc = progress.run(
            [*WHY, str(run), *inv.flags(), "--layer", "C", "--samples", "3", "--jobs", "2",
             "--result", f"{inv.call}=rain", "-o", str(inv.why), "--", sys.executable, str(AGENT),
             *AGENT_ARGS, "--family", "chat"],
            env=env, capture_output=True, text=True, cwd=tmp,
        )  # fmt: skip
    finally:
        meeting.armed = False
    inv.rc, inv.out, inv.err, inv.sent, inv.most = (
        proc.returncode,
        proc.stdout,
        proc.stderr,
        fake.log[before:],
        meeting.most,
    )
    assert sentinel.heard == [], f"the why reached a vendor's API: {sentinel.heard}\n" + inv.err
    return inv
