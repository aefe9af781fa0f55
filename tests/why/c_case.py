"""The C case's investigation, made once a session and read by the three modules that each made it
on their own (issue 105 item 2): tests/why/test_why.py's look at a real investigation,
test_why_confirm.py's confirms and test_why_upstreams.py's destinations. The client drops Lyon's
result (``--drop-second --expect rain``), recorded against a scripted fake that stays up for the
session (the recorded run's own upstream, and the why's ``--upstream``); then ``why --layer C
--samples 3`` with the result put back (a verdict of the client at c1 turn 1: 3 of 3 flip, alone 2
of 2 would not show it, docs/why.md "Reading the verdict"). Its commands run with every vendor's
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
from tests.support.recorder import RECORDER
from tests.support.scripted import Logged, ScriptedUpstream
from tests.why.test_why import AGENT, WHY, c_call, why_env

__all__ = ["AGENT_ARGS", "CInvestigation", "Sentinel", "investigate"]

#: The agent's flags: it drops the second result and fails unless the answer says "rain".
AGENT_ARGS = ("--drop-second", "--expect", "rain")


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

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.why, dest)
        return dest

    def flags(self) -> list[str]:
        """The why's own flags (``--upstream`` at the fake, ``--confdir``; a ``--resume`` repeats
        them)."""
        return ["--upstream", f"openai={self.fake.url}", "--confdir", str(self.tmp / "conf")]


def investigate(tmp: Path, fake: ScriptedUpstream, sentinel: Sentinel) -> CInvestigation:
    """Record the C case against ``fake`` into ``tmp`` and run the why of it (K=3)."""
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
    proc = progress.run(
        [*WHY, str(run), *inv.flags(), "--layer", "C", "--samples", "3", "--result",
         f"{inv.call}=rain", "-o", str(inv.why), "--", sys.executable, str(AGENT), *AGENT_ARGS,
         "--family", "chat"],
        env=env, capture_output=True, text=True, cwd=tmp,
    )  # fmt: skip
    inv.rc, inv.out, inv.err, inv.sent = (
        proc.returncode,
        proc.stdout,
        proc.stderr,
        fake.log[before:],
    )
    assert sentinel.heard == [], f"the why reached a vendor's API: {sentinel.heard}\n" + inv.err
    return inv
