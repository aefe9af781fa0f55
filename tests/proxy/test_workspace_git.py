"""The working tree of a coding agent taken in a git work tree (proxy/workspace.py,
cassettes/shell/_tree.py): what git already holds (tracked files git finds clean) is named by its
blob id and not read at the start; its start contents come from git at its first change; ignored
files are seen by size; the user's repository is never written. On real git repositories (the
``git`` on PATH), with the scripted bash agent of tests/proxy/test_shell_trace.py."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.recording import Redactor
from looptap.cassettes.shell import BY_BLOB, scratch_tree
from looptap.cassettes.shell._tree import digest, walk
from looptap.proxy.shell_trace import probe
from looptap.proxy.workspace import Workspace
from tests.support.recorder import needs_recorder

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git here")

SECRET = "sk-ant-api03-" + "W" * 80 + "AA"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def _repo(root: Path) -> None:
    """A repository with each kind of file: tracked clean, tracked dirty (in the work tree, and
    staged), untracked, ignored (a build output), a key committed by mistake, a nested folder."""
    root.mkdir()
    _git(root, "init", "-q")
    files = {
        ".gitignore": "build/\n*.log\n",
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": (
            "import sys\nfrom calc import add\nok = add(2, 3) == 5\n"
            "print('1 passed' if ok else '1 failed')\nsys.exit(0 if ok else 1)\n"
        ),
        "notes.md": "notes\n",
        "staged.md": "staged\n",
        "keep.txt": "keep\n",
        "pkg/deep/mod.py": "X = 1\n",
        ".env": f"ANTHROPIC_API_KEY={SECRET}\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "start")
    (root / "notes.md").write_text("notes, edited by the user\n")  # dirty
    (root / "staged.md").write_text("staged, edited\n")
    _git(root, "add", "staged.md")  # dirty: staged
    (root / "scratch.txt").write_text("untracked\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"\0object one")
    (root / "run.log").write_text("log\n")


def _tree(root: Path) -> dict[str, str]:
    """Every file's sha256 under ``root``, ``.git`` left out."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def _dotgit(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file of the repository's store: size, mtime and sha256 (the index, objects, refs)."""
    return {
        str(p.relative_to(root)): (
            p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()
        )
        for p in sorted((root / ".git").rglob("*"))
        if p.is_file()
    }  # fmt: skip


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def test_the_start_reads_only_what_git_does_not_hold(tmp_path: Path) -> None:
    """Clean tracked files are named by their blob id and not read at the start (nothing of them
    kept); dirty and untracked files hashed and kept as before; ignored files by size. At a scan
    the first change of a clean file has its true start sha256 as ``before``, its start contents
    kept (a key committed by mistake withheld); the repository never written."""
    root = tmp_path / "repo"
    _repo(root)
    status = _git(root, "status", "--porcelain=v2")  # (it may refresh the index: before)
    start_tree, store = _tree(root), _dotgit(root)
    recs: list[dict[str, Any]] = []
    keep = tmp_path / "kept"
    ws = Workspace(str(root), keep, recs.append, Redactor().seal)
    ws.start()
    ws.read()
    (first,) = recs
    assert first["digest_of"] == BY_BLOB and first["files"] == len(start_tree)
    assert sorted(ws.in_git) == [".env", ".gitignore", "calc.py", "keep.txt", "pkg/deep/mod.py",
                                 "test_calc.py"]  # fmt: skip
    assert sorted(ws.unread) == ["build/out.o", "run.log"]
    # read: the dirty and untracked files only (no clean file read, no ignored one), held until
    # they change: nothing written yet
    assert sorted(ws.held) == ["notes.md", "scratch.txt", "staged.md"] and not keep.exists()
    assert digest(str(root), BY_BLOB)[0] == first["digest"]
    # the agent: a clean file changed, a dirty one changed, a clean one removed, an untracked
    # one removed, a file created, the ignored output rebuilt, the committed key rotated, a clean
    # file touched with its own contents
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "notes.md").write_text("notes, by the agent\n")
    (root / "keep.txt").unlink()
    (root / "scratch.txt").unlink()
    (root / "made.txt").write_text("made\n")
    (root / "build" / "out.o").write_bytes(b"\0object two")
    (root / ".env").write_text(f"ANTHROPIC_API_KEY={SECRET}X\n")
    os.utime(root / "pkg" / "deep" / "mod.py", ns=(1, 1))
    ws.scan()
    changes = {c["path"]: c for c in recs[-1]["changes"]}
    assert sorted(changes) == [".env", "build/out.o", "calc.py", "keep.txt", "made.txt",
                               "notes.md", "scratch.txt"]  # fmt: skip
    for rel in ("calc.py", "notes.md", "keep.txt", "scratch.txt", ".env"):
        assert changes[rel]["before"] == start_tree[rel], rel
    assert changes["made.txt"]["before"] is None
    assert (
        changes["build/out.o"]["before"] == "unread"
        and "ignored" in changes["build/out.o"]["unread"]
    )
    assert changes["keep.txt"]["after"] is None and changes["scratch.txt"]["after"] is None
    # a clean file's start contents kept at its change (from git), the key never
    for rel in ("calc.py", "keep.txt"):
        was = b"def add(a, b):\n    return a - b\n" if rel == "calc.py" else b"keep\n"
        assert (keep / start_tree[rel]).read_bytes() == was
    # the changed ones' start kept at their change (held until then), the unchanged one's never
    assert (keep / start_tree["notes.md"]).exists() and (keep / start_tree["scratch.txt"]).exists()
    assert not (keep / start_tree["staged.md"]).exists() and sorted(ws.held) == ["staged.md"]
    assert not any(SECRET.encode() in p.read_bytes() for p in keep.iterdir())
    assert changes[".env"].get("unkept", "").startswith("withheld")
    # the repository: not one byte or mtime of its store changed, its status as before but for
    # the agent's edits
    assert _dotgit(root) == store
    for rel in ("calc.py", "notes.md", ".env"):
        (root / rel).write_bytes(b"")
    (root / "keep.txt").write_text("keep\n")
    (root / "scratch.txt").write_text("untracked\n")
    (root / "made.txt").unlink()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "notes.md").write_text("notes, edited by the user\n")
    (root / ".env").write_text(f"ANTHROPIC_API_KEY={SECRET}\n")
    assert _git(root, "status", "--porcelain=v2") == status


def test_the_digest_is_the_same_whatever_git_says_of_a_file(tmp_path: Path) -> None:
    """The same contents give the same digest when a file's git state differs (committed,
    staged, untracked); different contents a different one; the old digest (each file's sha256)
    is the same function as before; without git a git digest is not compared (``None``)."""
    root = tmp_path / "repo"
    _repo(root)
    d0 = digest(str(root), BY_BLOB)[0]
    _git(root, "add", "-A", ".")  # notes.md, scratch.txt staged; ignored ones stay ignored
    assert digest(str(root), BY_BLOB)[0] == d0
    _git(root, "commit", "-qm", "more")
    assert digest(str(root), BY_BLOB)[0] == d0
    _git(root, "rm", "-q", "--cached", "calc.py")  # now untracked: read, same blob id
    assert digest(str(root), BY_BLOB)[0] == d0
    (root / "calc.py").write_text("changed\n")
    assert digest(str(root), BY_BLOB)[0] != d0
    plain = tmp_path / "plain"
    shutil.copytree(root, plain, ignore=shutil.ignore_patterns(".git"))
    assert digest(str(plain), BY_BLOB)[0] is None  # not a git tree: not compared
    # the old way (a recording made before: its digest of each file's path and sha256)
    tree = _tree(plain)
    old = hashlib.sha256()
    for rel in walk(str(plain)).files:
        old.update(f"{rel}\0{tree[rel]}\n".encode())
    assert digest(str(plain))[0] == old.hexdigest()


def test_outside_git_the_tree_is_taken_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git missing (not on PATH): every file hashed, the digest of sha256s, no ``digest_of``;
    nothing written until a file changes (held), every file's start kept with ``copy``
    (``--copy-tree``) but a key's."""
    root = tmp_path / "repo"
    _repo(root)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    ws.read()
    assert "digest_of" not in recs[0] and not ws.in_git
    assert recs[0]["digest"] == digest(str(root))[0]
    assert not (tmp_path / "kept").exists() and sorted(ws.held) == sorted(_tree(root))
    ws = Workspace(str(root), tmp_path / "all", recs.append, Redactor().seal, copy=True)
    ws.start()
    ws.read()
    assert {p.name for p in (tmp_path / "all").iterdir()} == {
        sha for rel, sha in _tree(root).items() if rel != ".env"
    }


STEPS = [
    ("bash", {"command": "python3 test_calc.py"}),
    ("write", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}),
    ("bash", {"command": "echo more >> notes.md; echo made > made.txt; rm scratch.txt keep.txt"}),
    ("bash", {"command": "printf 'object two' > build/out.o; python3 test_calc.py"}),
]


@needs_recorder
@pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}")
def test_a_coding_agent_in_a_git_tree_recorded_and_forked_at_each_turn(tmp_path: Path) -> None:
    """The scripted bash agent in a git repository (a clean file fixed by its own file tool, a
    dirty one appended to, files created and removed, a build output rebuilt): each change's
    ``before`` is the true sha256 of the file at the start; the tree a fork rebuilds at each
    turn equal to the tree the agent had then (hashes; the ignored output left as in the
    user's tree, said); the repository's store untouched; a fork from a tree equal to the
    start but with other git states (staged, committed) not told it differs."""
    from looptap.cassettes.shell import read_processes
    from tests.proxy.test_e2e_node_agents import explain, looptap_run, run_env
    from tests.proxy.test_shell_trace import AGENT
    from tests.support import progress
    from tests.support.recorder import RECORDER
    from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

    work = tmp_path / "work"
    _repo(work)
    start, store = _tree(work), _dotgit(work)
    seen: list[dict[str, str]] = []  # the tree as each request was sent

    def route(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done == len(seen):
            seen.append(_tree(work))
        if done < len(STEPS):
            return Reply.tool(*STEPS[done], what=f"step{done}")
        return Reply.say("fixed: the test passes", what="answer")

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = run_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-gitfork")
    env.pop("LOOPTAP_SHELL_TRACE", None)  # (the suite's opt-out: tests/conftest.py)
    env.pop("LOOPTAP_IN_PLACE", None)  # (its forks: isolated, as a user's)
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = looptap_run(
            tmp_path, tmp_path / "conf", [sys.executable, str(agent)], env, upstream=up,  # type: ignore[arg-type]
        )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    assert _dotgit(work) == store  # (the agent runs no git; the recorder only reads)
    found = read_processes(out)
    assert found.start is not None and found.start["digest_of"] == BY_BLOB
    assert found.start["in_git"] == 6 and found.start["unread"] == 2
    befores = {c.path: c.before for fc in found.changes for c in reversed(fc.changes)}
    for rel in ("calc.py", "notes.md", "scratch.txt", "keep.txt"):
        assert befores[rel] == start[rel], rel
    assert befores["made.txt"] is None
    (out_o,) = [c for fc in found.changes for c in fc.changes if c.path == "build/out.o"]
    assert out_o.before is None and out_o.unread and "ignored by git" in out_o.unread
    # a fork at each turn: the tree as the agent had it then (the build output aside)
    seqs = [ex.seq for ex in open_run(out, whole=True).exchanges]
    assert len(seqs) == len(seen) == len(STEPS) + 1
    for i, seq in enumerate(seqs):
        dest = tmp_path / f"scratch{i}"
        made = scratch_tree(out, open_run(out, whole=True).shell, work, dest, upto_seq=seq)
        assert made is not None
        got, want = _tree(dest), dict(seen[i])
        if i < 4:  # (ignored: its start not read, left as in the user's tree, and said)
            assert got.pop("build/out.o") == _tree(work)["build/out.o"]
            want.pop("build/out.o")
            assert any(s.startswith("build/out.o: ignored by git") for s in made.said), made.said
        assert got == want, i
    # the user's tree put back as at the start, with other git states: not told it differs
    (work / "made.txt").unlink()
    for rel, text in {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "notes.md": "notes, edited by the user\n",
        "scratch.txt": "untracked\n",
        "keep.txt": "keep\n",
    }.items():
        (work / rel).write_text(text)
    (work / "build" / "out.o").write_bytes(b"\0object one")
    assert _tree(work) == start
    _git(work, "add", "notes.md", "scratch.txt")
    branch = tmp_path / "branch.jsonl"
    with ScriptedUpstream(route, validate=True) as up:
        argv = [
            *RECORDER, "run", "-o", str(branch), "--confdir", str(tmp_path / "conf"),
            "--upstream", f"anthropic={up.url}", "--from", f"{out}@turn=2",
            "--", sys.executable, str(agent),
        ]  # fmt: skip
        env = {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        fork = progress.run(argv, env=env, capture_output=True, text=True, cwd=work)
    assert fork.returncode == 0, explain(fork)
    assert "differs from the recording's start" not in fork.stderr, fork.stderr
    assert "scratch copy of the working tree" in fork.stderr, fork.stderr
    # and one that does differ is told so
    (work / "keep.txt").write_text("keep, changed\n")
    made = scratch_tree(out, open_run(out, whole=True).shell, work, tmp_path / "scratch-differs")
    assert made is not None
    assert any("differs" in s for s in made.said), made.said


def test_a_file_git_converts_on_checkout_is_read(tmp_path: Path) -> None:
    """A file whose bytes are not its blob's (``ident`` expands ``$Id$`` on checkout) is read as
    outside git, its start sha256 that of its bytes; with ``core.autocrlf`` set the tree is
    taken without git (any text file may be converted)."""
    root = tmp_path / "repo"
    _repo(root)
    (root / ".gitattributes").write_text("conv.c ident\n")
    (root / "conv.c").write_text("/* $Id$ */\n")
    _git(root, "add", ".gitattributes", "conv.c")
    _git(root, "commit", "-qm", "ident")
    (root / "conv.c").unlink()
    _git(root, "checkout", "--", "conv.c")  # (written as a checkout writes it: $Id: … $)
    assert (root / "conv.c").read_text() != "/* $Id$ */\n"
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    ws.read()
    assert recs[0]["digest_of"] == BY_BLOB and "conv.c" not in ws.in_git and "calc.py" in ws.in_git
    assert ws.seen["conv.c"][3] == _sha((root / "conv.c").read_bytes())
    assert digest(str(root), BY_BLOB)[0] == recs[0]["digest"]
    _git(root, "config", "core.autocrlf", "true")
    recs.clear()
    again = Workspace(str(root), tmp_path / "kept2", recs.append, Redactor().seal)
    again.start()
    again.read()
    assert "digest_of" not in recs[0]


def test_odd_names_a_nested_repository_and_a_submodule(tmp_path: Path) -> None:
    """Names with a newline, a space and a byte not UTF-8 held by git; a nested repository's
    files and a submodule's read as outside git (git does not list them one by one); each first
    change's ``before`` the true sha256."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    names = [b"new\nline.txt", b"sp ace.txt", b"bad\xff.txt"]
    for name in names:
        (root / os.fsdecode(name)).write_bytes(b"held " + name)
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "odd")
    inner = root / "inner" / "sub"
    inner.mkdir(parents=True)
    _git(inner, "init", "-q")
    (inner / "s.txt").write_text("nested\n")
    _git(inner, "add", ".")
    _git(inner, "commit", "-qm", "s")
    _git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "mod")
    _git(root, "commit", "-qm", "mod")
    store = _dotgit(root)
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    ws.read()
    assert sorted(ws.in_git) == sorted([".gitmodules", *map(os.fsdecode, names)])
    assert ws.seen["inner/sub/s.txt"][3] == _sha("nested\n")
    assert ws.seen["mod/s.txt"][3] == _sha("nested\n")
    assert digest(str(root), BY_BLOB)[0] == recs[0]["digest"]
    for name in names:
        with open(root / os.fsdecode(name), "ab") as f:
            f.write(b" changed")
    ws.scan()
    got = {c["path"]: c["before"] for c in recs[-1]["changes"]}
    assert got == {os.fsdecode(n): _sha(b"held " + n) for n in names}
    assert _dotgit(root) == store


def test_a_tree_an_outer_repository_ignores_is_taken_without_git(tmp_path: Path) -> None:
    """The agent's directory inside a repository that ignores it whole (a home directory's
    repository with ``*`` in its ``.gitignore``): its files are not taken as ignored build
    outputs (none would be kept) but read as outside git."""
    outer = tmp_path / "home"
    outer.mkdir()
    _git(outer, "init", "-q")
    (outer / ".gitignore").write_text("*\n!.gitignore\n")
    root = outer / "project"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    ws.start()
    ws.read()
    assert "digest_of" not in recs[0] and not ws.unread
    assert ws.seen["main.py"][3] == _sha("print('hi')\n") and "main.py" in ws.held
