"""Recorders that start at once on one ``--confdir`` (two ``looptap run``, a recorder per xdist
worker; all on ``~/.mitmproxy`` by default) each start, with one CA that every client bundle holds.

Found as a flaky test: ``test_proxy_crash``'s two concurrent runs share a fresh confdir, and one
``looptap run`` now and then exited at start-up ("looptap-ca-bundle.pem appeared while looptap was
writing it": the other run had placed it first), so the test's kill found no process. Here the
race is forced: 8 processes, forked once the recorder's modules are loaded, released together
(one pipe closed) into the confdir step of a recorder's start (``prepare_confdir``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, clean_env, needs_recorder

pytestmark = needs_recorder

RACERS = 8

SCRIPT = r"""
import hashlib, json, os, sys
from pathlib import Path
from looptap.proxy.launcher import check_confdir, prepare_confdir
from mitmproxy.certs import CertStore

confdir, n = Path(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # blocks until the parent closes the pipe: all start at once
        out = {"i": i}
        try:
            check_confdir(confdir)
            bundle, node = prepare_confdir(confdir, 1024)
            # What mitmproxy then loads (TlsConfig: CertStore.from_store) and what clients trust.
            store = CertStore.from_store(confdir, "mitmproxy", 1024)
            pem = store.default_ca.to_pem().decode().strip()
            out.update(ca=hashlib.sha256(pem.encode()).hexdigest()[:16],
                       bundle=pem in bundle.read_text(), node=pem in node.read_text())
        except BaseException as exc:
            out["error"] = repr(exc)[:300]
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        os._exit(0)
    kids.append(pid)
os.close(r)
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
"""


def test_recorders_starting_at_once_share_one_ca(tmp_path: Path) -> None:
    confdir = tmp_path / "conf"
    proc = progress.run(
        [str(PROXY_PYTHON), "-c", SCRIPT, str(confdir), str(RACERS)],
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == RACERS, proc.stdout + proc.stderr
    errors = [r for r in results if "error" in r]
    assert errors == [], f"{len(errors)} of {RACERS} recorders could not start: {errors}"
    assert len({r["ca"] for r in results}) == 1, f"the recorders use different CAs: {results}"
    assert all(r["bundle"] and r["node"] for r in results), (
        f"a client bundle lacks the CA its recorder uses: {results}"
    )
