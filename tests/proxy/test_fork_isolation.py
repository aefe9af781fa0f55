"""A fork never changes what the user owns (issue 100, item 4; proxy/isolation.py, docs/fork.md): a
run recorded with ``--shell-trace`` whose commands wrote outside the working tree (through
``$HOME``, an absolute path, a symlink in the tree leading out), forked three ways: where the
mount namespace is refused (an ``unshare`` on ``PATH`` that fails, as a kernel without user
namespaces makes it) the fork is refused before anything is sent and changes nothing; with
``--in-place`` it runs and says first what it may change; isolated, it lists the commands that
wrote outside, its agent's ``HOME`` and temp folder are the user's seen through scratch layers
(overlays), and its own writes outside the tree are on the branch's record. The
agent is tests/support/bash_agent.py on a scripted model; the tracer is the real strace, the mount
the real util-linux ``unshare``."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.shell import read_processes
from looptap.proxy.shell_trace import probe
from tests.proxy.test_e2e_node_agents import REPO, explain, looptap_run, run_env
from tests.support import bash_agent, progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream, bash_steps

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare (util-linux) here"),
]


#: A client of a Unix socket (its first answer printed): the agent's ssh-agent, X11, tmux.
ASK = (
    "import socket, sys; c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); "
    "print(c.recv(9))"
)


def _commands(elsewhere: Path, probe: str, sock: Path) -> list[str]:
    return [
        f'echo "$HOME" > where.txt; echo home > "$HOME/outside-home.txt"; '
        f'echo tmp > "${{TMPDIR:-/tmp}}/{probe}"; python3 -c "{ASK}" {sock} > sock.txt',
        f"echo abs > {elsewhere}/outside-abs.txt",
        "echo link > out/escape.txt",
    ]


def digests(*roots: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def record_bash(tmp: Path, agent: Path, env: dict[str, str], commands: list[str]) -> Path:
    """The bash agent's run of ``commands`` (a scripted model asks for each), recorded with its
    tree by ``looptap run --shell-trace`` in ``tmp/work``: the cassette."""
    with ScriptedUpstream(bash_steps(commands), validate=True) as up:
        proc, out = looptap_run(
            tmp, tmp / "conf", [sys.executable, str(agent)], env, upstream=up,  # type: ignore[arg-type]
            extra=("--shell-trace",),
        )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The recording (once for the module), its outside writes then undone."""
    tmp = tmp_path_factory.mktemp("isolation")
    agent = tmp / "agent.py"
    agent.write_text(Path(bash_agent.__file__).read_text())
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    work = tmp / "work"
    work.mkdir()
    (work / "kept.txt").write_text("the user's\n")
    (work / "out").symlink_to(elsewhere)
    env = run_env(tmp, ANTHROPIC_API_KEY="sk-ant-isolation")
    env.pop("LOOPTAP_SHELL_TRACE", None)
    env.pop("LOOPTAP_IN_PLACE", None)  # (its forks: isolated, as a user's)
    probe = f"looptap-isolation-{uuid.uuid4().hex}.txt"  # (in the temp folder: one per run)
    temp = Path(tempfile.gettempdir()) / probe
    # a Unix socket in the temp folder, answering each client (up for the module's forks)
    sock = Path(tempfile.gettempdir()) / f"{probe}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    server.listen(8)

    def answer() -> None:
        while True:
            try:
                c, _ = server.accept()
            except OSError:
                return
            c.sendall(b"pong")
            c.close()

    threading.Thread(target=answer, daemon=True).start()
    commands = _commands(elsewhere, probe, sock)
    out = record_bash(tmp, agent, env, commands)
    home = Path(env["HOME"])
    assert (home / "outside-home.txt").exists() and (elsewhere / "escape.txt").exists()
    assert (work / "sock.txt").read_text() == "b'pong'\n"
    for f in [home / "outside-home.txt", *elsewhere.iterdir(), work / "where.txt", temp]:
        f.unlink()
    yield {
        "tmp": tmp, "out": out, "agent": agent, "env": {**env, "PYTHONPATH": str(REPO)},
        "work": work, "home": home, "elsewhere": elsewhere, "commands": commands, "temp": temp,
    }  # fmt: skip
    server.close()
    sock.unlink()


def _fork(r: dict[str, Any], name: str, *extra: str, path: str | None = None) -> Any:
    env = dict(r["env"])
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    branch = r["tmp"] / f"{name}.jsonl"
    with ScriptedUpstream(bash_steps(r["commands"]), validate=True) as up:
        argv = [
            *RECORDER, "run", "-o", str(branch), "--confdir", str(r["tmp"] / "conf"),
            "--upstream", f"anthropic={up.url}", "--from", f"{r['out']}@turn=2",
            "--shell-trace", *extra, "--", sys.executable, str(r["agent"]),
        ]  # fmt: skip
        proc = progress.run(
            argv, env=env, capture_output=True, text=True, cwd=r["work"],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        sent = len(up.log)
    return proc, branch, sent


def refusing_unshare(tmp: Path) -> str:
    """A ``bin`` folder whose ``unshare`` fails as a kernel refusing user namespaces makes it."""
    bin_ = tmp / "no-userns-bin"
    bin_.mkdir(exist_ok=True)
    fake = bin_ / "unshare"
    fake.write_text(
        "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    return str(bin_)


def _listed(stderr: str, r: dict[str, Any]) -> None:
    """The recorded commands that wrote outside the tree, listed with why."""
    (head,) = [x for x in stderr.splitlines() if "commands wrote outside the working tree" in x]
    assert head.startswith("looptap: 3 of the recording's commands"), stderr
    assert f"wrote {r['home']}/outside-home.txt (outside the tree)" in stderr, stderr
    assert f"wrote {r['elsewhere']}/outside-abs.txt (outside the tree)" in stderr, stderr
    assert f"wrote {r['work']}/out/escape.txt (through a symlink leading out)" in stderr, stderr


def test_a_fork_whose_mount_is_refused_is_refused_and_sends_nothing(
    recorded: dict[str, Any],
) -> None:
    r = recorded
    before = digests(r["work"], r["home"], r["elsewhere"])
    proc, branch, sent = _fork(r, "refused", path=refusing_unshare(r["tmp"]))
    why = explain(proc)
    assert proc.returncode == 2, why
    assert "the fork is refused: its agent cannot be isolated from your files" in proc.stderr, why
    assert "the mount namespace was refused: unshare: unshare failed" in proc.stderr, why
    assert "--in-place runs it in your working tree anyway" in proc.stderr, why
    assert sent == 0 and not branch.exists(), why
    assert digests(r["work"], r["home"], r["elsewhere"]) == before


def test_in_place_says_what_it_may_change_then_runs(recorded: dict[str, Any]) -> None:
    r = recorded
    proc, branch, sent = _fork(r, "in-place", "--in-place", path=refusing_unshare(r["tmp"]))
    why = explain(proc)
    assert proc.returncode == 0 and sent > 0 and branch.exists(), why
    (said,) = [x for x in proc.stderr.splitlines() if "--in-place: the fork runs the agent" in x]
    assert (
        str(r["work"]) in said and "the recording changed 2 files here: sock.txt, where.txt" in said
    ), why
    _listed(proc.stderr, r)
    # in place its HOME and temp folder are the user's (said): the writes there reached them
    assert "with your HOME and temp folder, not in scratch ones" in said, why
    assert (r["work"] / "where.txt").read_text().strip() == str(r["home"]), why
    assert (r["home"] / "outside-home.txt").exists() and r["temp"].exists(), why
    for f in [*r["elsewhere"].iterdir(), r["work"] / "where.txt", r["home"] / "outside-home.txt"]:
        f.unlink()
    r["temp"].unlink()


def test_an_isolated_fork_lists_scratches_and_records_outside_writes(
    recorded: dict[str, Any],
) -> None:
    r = recorded
    before = digests(r["work"], r["home"])
    proc, branch, sent = _fork(r, "isolated", "--keep-tree")
    why = explain(proc)
    assert proc.returncode == 0 and sent > 0, why
    _listed(proc.stderr, r)
    (said,) = [x for x in proc.stderr.splitlines() if "writes stay in the fork's scratch" in x]
    assert f"its HOME {r['home']} through a scratch layer" in said, why
    assert f"its temp folder {Path(tempfile.gettempdir()).resolve()} through a scratch" in said, why
    # the user's tree, HOME and temp folder untouched: the writes went to the scratch layers
    assert digests(r["work"], r["home"]) == before
    assert not (r["home"] / "outside-home.txt").exists() and not r["temp"].exists()
    (line,) = [x for x in proc.stderr.splitlines() if "scratch copy of the working tree" in x]
    folder = Path(line.split(": ", 2)[2].split(" (")[0]).parent
    # (a HOME inside the temp folder, as here, is seen through the temp folder's layer)
    tmp = Path(tempfile.gettempdir()).resolve()
    layer = "tmp" if r["home"].resolve().is_relative_to(tmp) else "home"
    assert f"its HOME {r['home']} through a scratch layer ({folder / layer})" in said, why
    home = (
        folder / layer / r["home"].resolve().relative_to(tmp) if layer == "tmp" else folder / layer
    )
    assert (home / "outside-home.txt").read_text() == "home\n", why
    assert (folder / "tmp" / r["temp"].name).read_text() == "tmp\n", why
    # the agent saw its HOME at the user's path (its settings there read), as it printed it, and
    # reached the Unix socket in the layered temp folder (mounted back over the layer)
    shell = open_run(branch, whole=True).shell
    (asked,) = [c for t in shell.tree for c in t["changes"] if c["path"] == "sock.txt"]
    assert (Path(f"{branch}.files") / asked["after"]).read_text() == "b'pong'\n", why
    (where,) = [c for t in shell.tree for c in t["changes"] if c["path"] == "where.txt"]
    assert (Path(f"{branch}.files") / where["after"]).read_text().strip() == str(r["home"])
    # the writes outside the tree, on the branch's record (where the tracer saw them)
    written = {path for p in read_processes(branch).processes for op, path in p.files}
    assert f"{r['home']}/outside-home.txt" in written, written
    assert f"{r['elsewhere']}/outside-abs.txt" in written, written
    shutil.rmtree(folder)
