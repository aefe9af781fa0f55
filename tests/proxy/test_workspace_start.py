"""The working tree's start (proxy/workspace.py, docs/shell-file-tools.md): the agent starts once
the tree is walked (``stat`` only), what is not the user's work is left out by what it holds and
said in one line, nothing is copied that the agent did not change, and past the walk's bound no
change is made up and no removal lost."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from looptap.cassettes.recording import Redactor
from looptap.proxy.workspace import Workspace
from tests.proxy.test_e2e_node_agents import REPO, explain, run_env
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder

#: The first line of a CACHEDIR.TAG (https://bford.info/cachedir/).
TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# a cache\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _venv(path: Path) -> None:
    """A virtual environment made by CPython's own ``venv`` (its ``pyvenv.cfg``), with files."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = path / "lib" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    for i in range(40):
        (site / f"m{i}.py").write_text(f"x = {i}\n")


def _files(records: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start = next(r for r in records if r.get("type") == "files" and r.get("start"))
    changes = [c for r in records if r.get("type") == "files" for c in r.get("changes") or []]
    return start, changes


@needs_recorder
def test_a_big_tree_with_venvs_is_walked_not_copied_and_told_truly(tmp_path: Path) -> None:
    """30,000 files past the 20,000-file bound, three virtual environments (``env``,
    ``tools/py``: not named venv), a ``node_modules``, a cache marked by ``CACHEDIR.TAG``, a
    folder named ``venv`` that is the user's own, and the cassette written inside the tree. The
    agent removes a file the walk reached, changes two, creates one, writes inside a venv: the
    record holds exactly those four changes (no file taken as created because a slot was freed,
    the removal kept), the start's line says what was left out and the cut once, and beside the
    cassette only the changed files' contents are kept (the cassette never in its own record)."""
    work = tmp_path / "work"
    for d in range(30):
        sub = work / "src" / f"d{d:02}"
        sub.mkdir(parents=True)
        for i in range(1000):
            (sub / f"f{i:04}.txt").write_bytes(b"%d/%d\n" % (d, i))
    for name in ("env", ".venv", "lib/py"):
        _venv(work / name)
    (work / "venv").mkdir()  # (the user's own folder of that name: no pyvenv.cfg)
    (work / "venv" / "main.py").write_text("print('mine')\n")
    (work / "node_modules" / "left-pad").mkdir(parents=True)
    (work / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    (work / "build-cache").mkdir()
    (work / "build-cache" / "CACHEDIR.TAG").write_text(TAG)
    (work / "build-cache" / "obj.bin").write_bytes(b"\0" * 64)
    (work / "README.md").write_text("readme\n")
    (work / "notes.md").write_text("notes\n")
    out = work / "run.jsonl"
    agent = (
        "rm notes.md; echo more >> README.md; echo made > made.txt; "
        "echo mine >> venv/main.py; echo x > env/lib/site-packages/pkg/new.py"
    )
    env = run_env(tmp_path, PYTHONPATH=str(REPO))
    env.pop("LOOPTAP_SHELL_TRACE", None)  # (the suite's opt-out: the default level here)
    argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp_path / "conf")]
    proc = progress.run(
        [*argv, "--", "sh", "-c", agent],
        env=env,
        capture_output=True,
        text=True,
        cwd=work,
        stdin=subprocess.DEVNULL,
    )
    why = explain(proc)
    assert proc.returncode == 0, why
    said = [line for line in proc.stderr.splitlines() if "the working tree:" in line]
    assert len(said) == 1, why
    line = said[0]
    assert "3 virtual environments (" in line and "lib/py" in line and "env" in line, line
    assert "1 node_modules folder (node_modules)" in line and "cache" in line, line
    assert "run.jsonl" in line and "past 20,000 files" in line, line
    assert proc.stderr.count("past 20,000") == 1 and "passed 20,000" not in proc.stderr, why
    records = [json.loads(x) for x in out.read_text().splitlines()]
    start, changes = _files(records)
    assert start["cut"] is True and start["files"] == 20000, start
    assert sorted(start["skipped"]["virtual environment"]) == [".venv", "env", "lib/py"], start
    assert start["own"] == ["run.jsonl", "run.jsonl.files", "run.jsonl.log"], start
    got = {c["path"]: (c["before"], c["after"]) for c in changes}
    assert sorted(got) == ["README.md", "made.txt", "notes.md", "venv/main.py"], changes
    assert got["notes.md"][1] is None and got["made.txt"][0] is None, changes
    assert got["README.md"][1] == _sha(b"readme\nmore\n"), changes
    # kept: only what the changed files held (at most their start and their change)
    allowed = {
        _sha(b"notes\n"),
        _sha(b"readme\n"),
        _sha(b"readme\nmore\n"),
        _sha(b"made\n"),
        _sha(b"print('mine')\n"),
        _sha(b"print('mine')\nmine\n"),
    }
    kept = {p.name for p in Path(f"{out}.files").iterdir()}
    assert _sha(b"readme\nmore\n") in kept and kept <= allowed, kept


def test_past_the_bound_nothing_made_up_nothing_lost(tmp_path: Path) -> None:
    """A walk bounded at 10 files over 15: a file the start reached, removed, is a removal; one it
    did not reach, removed or touched, is nothing; a file created in a folder the start did not
    list to its end is not taken as created, one in a new folder is; a venv the agent makes is
    left out; the cut is on each record."""
    root = tmp_path / "tree"
    for d in ("a", "b", "c"):
        (root / d).mkdir(parents=True)
        for i in range(5):
            (root / d / f"{i}.txt").write_text(f"{d}{i}\n")
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.limit = 10
    assert "past 10 files" in ws.start()
    ws.read()
    reached = sorted(ws.seen)
    assert len(reached) == 10 and recs[0]["cut"] is True
    every = sorted(str(p.relative_to(root)) for p in root.rglob("*.txt"))
    missed = [rel for rel in every if rel not in reached]
    partial = os.path.dirname(reached[-1]) if len(reached) % 5 else None
    (root / reached[0]).unlink()  # reached: a removal
    (root / missed[0]).unlink()  # not reached: not judged
    os.utime(root / missed[1], ns=(1, 1))
    (root / "new").mkdir()
    (root / "new" / "made.txt").write_text("made\n")
    if partial is not None:
        (root / partial / "late.txt").write_text("late\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv2")], check=True)
    ws.scan()
    got = {c["path"]: (c["before"], c["after"]) for c in recs[-1]["changes"]}
    assert got == {
        reached[0]: (_sha(f"{reached[0][0]}{reached[0][2]}\n".encode()), None),
        "new/made.txt": (None, _sha(b"made\n")),
    }, got
    assert recs[-1]["cut"] is True


def test_a_file_changed_before_its_start_was_read_is_said_unread(tmp_path: Path) -> None:
    """The walk is the start; a file that changed after it and before the read is not taken as
    the start (``unread``, the reason said), and the digest is not made up (``None``)."""
    from looptap.proxy.workspace import CHANGED

    root = tmp_path / "tree"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    (root / "a.txt").write_text("a, by the agent\n")
    ws.read()
    assert recs[0]["digest"] is None and recs[0]["unread"] == 1
    ws.scan()
    (change,) = recs[-1]["changes"]
    assert change["path"] == "a.txt" and change["before"] == "unread"
    assert change["unread"] == CHANGED


@needs_recorder
def test_copy_tree_keeps_every_files_start(tmp_path: Path) -> None:
    """``--copy-tree``: every file's start contents beside the cassette, even in a run that ends
    at once (the default keeps none of a file the agent did not change); a key's never."""
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    files = {"a.txt": b"a\n", "pkg/b.py": b"b = 1\n", ".env": b"OPENAI_API_KEY=sk-" + b"k" * 48}
    for rel, data in files.items():
        (work / rel).write_bytes(data)
    env = run_env(tmp_path, PYTHONPATH=str(REPO))
    env.pop("LOOPTAP_SHELL_TRACE", None)
    for flag, out in (("--copy-tree", tmp_path / "all.jsonl"), (None, tmp_path / "none.jsonl")):
        argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp_path / "conf")]
        proc = progress.run(
            [*argv, *([flag] if flag else []), "--", "true"],
            env=env,
            capture_output=True,
            text=True,
            cwd=work,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, explain(proc)
    kept = {p.name for p in Path(f"{tmp_path / 'all.jsonl'}.files").iterdir()}
    assert kept == {_sha(files["a.txt"]), _sha(files["pkg/b.py"])}, kept
    assert not Path(f"{tmp_path / 'none.jsonl'}.files").exists()


def test_a_turns_scan_never_waits_for_the_starts_read(tmp_path: Path, monkeypatch: Any) -> None:
    """The start's read is held inside one file's read (``c.txt``) while the agent changes a file
    already read, one not yet read, removes one not yet read and creates one: the turn's scan ends
    while the read is still held (a reply waits for its turn's walk, never for the read), the
    file read is a change from its start, the ones not yet read say ``unread`` (never read later
    as their start), and the start's record, written when the read ends, says so (no digest)."""
    import threading

    from looptap.proxy import workspace
    from looptap.proxy.workspace import CHANGED

    root = tmp_path / "tree"
    root.mkdir()
    for name in "abcde":
        (root / f"{name}.txt").write_text(f"{name}\n")
    held, scanned, order = threading.Event(), threading.Event(), []
    plain = workspace.read_bytes

    def read_bytes(path: str, size: int) -> bytes | None:
        if path.endswith("c.txt"):
            held.set()
            scanned.wait(120)  # (only a scan stuck behind the read waits it out: then it fails)
            order.append("read resumed")
        return plain(path, size)

    monkeypatch.setattr(workspace, "read_bytes", read_bytes)
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    reading = threading.Thread(target=ws.read)
    reading.start()
    assert held.wait(120), "the read never reached c.txt"
    (root / "b.txt").write_text("b, by the agent\n")  # read already
    (root / "d.txt").write_text("d, by the agent\n")  # not read yet
    (root / "e.txt").unlink()  # not read yet
    (root / "f.txt").write_text("f\n")
    ws.scan()
    order.append("scanned")
    scanned.set()
    reading.join()
    assert order == ["scanned", "read resumed"], order
    got = {c["path"]: c for c in recs[0]["changes"]}
    assert got["b.txt"]["before"] == _sha(b"b\n"), got
    assert got["b.txt"]["after"] == _sha(b"b, by the agent\n"), got
    for rel in ("d.txt", "e.txt"):
        assert got[rel]["before"] == "unread" and got[rel]["unread"] == CHANGED, got
    assert got["e.txt"]["after"] is None and got["f.txt"]["before"] is None, got
    (start,) = [r for r in recs if r.get("start")]
    assert start["digest"] is None and start["unread"] == 2, start
    ws.scan(last=True)  # (the files read and left alone: no change; d is read never)
    assert recs[-1]["changes"] == [] and "d.txt" not in ws.held, recs[-1]
