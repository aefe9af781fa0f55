"""Tracing never changes what the agent can do (issue 100, item 3; docs/shell-file-tools.md): under
the default ``looptap run`` (no flag, no ``LOOPTAP_SHELL_TRACE``) the agent's own ``strace`` and
``gdb`` (the real ones, Debian's) trace their children, and a setuid program run as a non-root user
keeps its privilege, exactly as without looptap; the working tree is still recorded per turn, and
the run says once that its processes were not traced and why. One run of a shell script, compared
with the same script run plainly."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.proxy.test_e2e_node_agents import explain, looptap_run, run_env
from tests.support.recorder import needs_recorder

pytestmark = [needs_recorder, pytest.mark.skipif(os.name != "posix", reason="POSIX only")]

#: Each check prints ``NAME=RESULT``; the same lines without looptap and under it.
SCRIPT = """
strace -f -o /dev/null true >/dev/null 2>&1; echo "strace=$?"
if gdb -q -batch -ex run --args /bin/true 2>&1 | grep -q 'exited normally'; then
  echo gdb=ran; else echo gdb=refused; fi
if [ -n "$SUID" ]; then
  echo "setuid=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$SUID" -u)"; fi
echo made > made.txt
"""


@pytest.fixture
def setuid_id() -> Iterator[str]:
    """A setuid-root copy of ``id`` in a folder ``nobody`` can reach (``""``: not root here, no
    setuid binary can be made; the check is then left out, said by the skip of its own test)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        yield ""
        return
    where = tempfile.mkdtemp(prefix="looptap-suid-")
    os.chmod(where, 0o755)
    exe = os.path.join(where, "suid-id")
    shutil.copy(shutil.which("id") or "/usr/bin/id", exe)
    os.chmod(exe, 0o755 | stat.S_ISUID)
    try:
        yield exe
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _lines(text: str) -> dict[str, str]:
    return dict(x.split("=", 1) for x in text.splitlines() if "=" in x and " " not in x)


@pytest.mark.skipif(shutil.which("strace") is None, reason="no strace here (.ci/run installs it)")
@pytest.mark.skipif(shutil.which("gdb") is None, reason="no gdb here (.ci/run installs it)")
def test_the_agents_own_strace_gdb_and_setuid_work_as_untraced(
    tmp_path: Path, setuid_id: str
) -> None:
    script = tmp_path / "checks.sh"
    script.write_text(SCRIPT)
    env = run_env(tmp_path, SUID=setuid_id)
    env.pop("LOOPTAP_SHELL_TRACE", None)  # the default (tests/conftest.py sets off)
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = subprocess.run(
        ["/bin/sh", str(script)], env=env, cwd=plain_dir, capture_output=True, text=True
    )
    want = _lines(plain.stdout)
    assert want["strace"] == "0" and want["gdb"] == "ran", plain.stdout + plain.stderr
    if setuid_id:
        assert want["setuid"] == "0", plain.stdout  # the privilege, as nobody, without looptap
    proc, out = looptap_run(tmp_path, tmp_path / "conf", ["/bin/sh", str(script)], env)
    why = explain(proc)
    assert proc.returncode == 0, why
    assert _lines(proc.stdout) == want, why
    # said once, with why; nothing of the processes recorded, the working tree recorded
    said = [x for x in proc.stderr.splitlines() if "shell commands not traced" in x]
    assert len(said) == 1 and "takes ptrace" in said[0] and "--shell-trace" in said[0], why
    data = out.read_text()
    assert '"type":"process"' not in data.replace(" ", ""), why
    assert '"made.txt"' in data, why  # the tree's change at the run's end
