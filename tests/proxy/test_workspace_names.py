"""The start listed by names only (proxy/workspace.py, cassettes/shell/_ctime.py,
docs/shell-file-tools.md "The start"): each file's start ``stat`` is its first, taken later by
the read or a turn's scan, and is the start's only when its inode's change time (ctime, which no
user can set) is older than the start; a change in between is never taken as the start, even one
that keeps the size and sets the mtime back; a chmod whose file was not read is said, never made
a content change; a folder moved in is not the start's; on a filesystem whose ctime is not
trusted the start takes each file's ``stat`` as before."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.recording import Redactor
from looptap.cassettes.shell import CTIME_KEPT, NAMED, filesystem
from looptap.proxy import workspace
from looptap.proxy.workspace import CHANGED, INODE, Workspace


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree(tmp_path: Path) -> Path:
    if filesystem(str(tmp_path)) not in CTIME_KEPT:
        pytest.skip(f"the temp folder's filesystem ({filesystem(str(tmp_path))}) keeps no ctime")
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    for name in ("a", "b", "c"):
        (root / f"{name}.txt").write_bytes(f"{name} at the start\n".encode())
    (root / "src" / "x.py").write_bytes(b"x = 1\n")
    return root


def _rewritten(path: Path) -> bytes:
    """``path``'s contents replaced in place by as many bytes (upper case), its mtime set back as
    it was (a change no size or mtime shows: only its ctime moves); the new contents."""
    was = path.stat()
    data = path.read_bytes().upper()
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
    return data


def _workspace(root: Path, keep: Path) -> tuple[Workspace, list[dict[str, Any]]]:
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), keep, recs.append, Redactor().seal)
    ws.start()
    return ws, recs


def _changes(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["path"]: c for r in recs if r.get("type") == "files" for c in r.get("changes") or []}


def test_a_change_before_the_first_stat_is_never_taken_as_the_start(tmp_path: Path) -> None:
    """Listed by name, then changed in place (same size, mtime set back) before anything took
    its stat: the read (``a.txt``) and a turn's scan (``b.txt``) each find its ctime after the
    start, so neither is taken as the start (``unread``, the digest not made up); the files left
    alone are read as their start; a file written just before the start is not taken as changed."""
    root = _tree(tmp_path)
    ws, recs = _workspace(root, tmp_path / "kept")
    assert ws.names and set(ws.first.files.values()) == {NAMED}, ws.first.files
    _rewritten(root / "a.txt")
    ws.read()
    (start,) = [r for r in recs if r.get("start")]
    assert start["unread"] == 1 and start["digest"] is None, start
    (root / "b.txt").write_bytes(b"b, by the agent\n")  # (read already: a change from it)
    ws2, recs2 = _workspace(root, tmp_path / "kept2")
    c_now = _rewritten(root / "c.txt")  # (the scan takes its first stat)
    ws2.scan()
    got = _changes(recs2)
    assert set(got) == {"c.txt"}, got
    assert got["c.txt"]["before"] == "unread" and got["c.txt"]["unread"] == INODE, got
    assert got["c.txt"]["after"] == _sha(c_now), got
    ws.scan(last=True)
    got = _changes(recs)
    assert got["a.txt"]["before"] == "unread" and got["a.txt"]["unread"] == INODE, got
    assert got["b.txt"]["before"] == _sha(b"b at the start\n"), got
    assert got["b.txt"]["after"] == _sha(b"b, by the agent\n"), got
    assert "src/x.py" not in got, got


def test_a_chmod_is_never_made_a_content_change(tmp_path: Path) -> None:
    """A chmod moves only the inode's ctime. Read first: its contents are the start's, nothing
    recorded. Not read first: its start is not known, so the change says so (``unread``: its
    inode changed, whether its contents did is not known), never a ``before`` made up."""
    root = _tree(tmp_path)
    ws, recs = _workspace(root, tmp_path / "kept")
    ws.read()
    os.chmod(root / "a.txt", 0o600)
    ws.scan()
    assert _changes(recs) == {}, recs
    ws2, recs2 = _workspace(root, tmp_path / "kept2")
    os.chmod(root / "b.txt", 0o600)
    ws2.scan()
    (change,) = _changes(recs2).values()
    assert change["path"] == "b.txt" and change["before"] == "unread", change
    assert change["unread"] == INODE and change["after"] == _sha(b"b at the start\n"), change
    ws2.scan(last=True)  # (said once: its stat is known now)
    assert recs2[-1]["changes"] == [], recs2[-1]


def test_a_folder_moved_in_is_not_the_starts(tmp_path: Path) -> None:
    """The agent moves a folder made before the start (its files' ctimes older than the start)
    over one the start listed by name: its files are not the start's (their folder is another
    inode), to the read and to a turn's scan; the same when its file is chmod'ed there too (its
    ctime then after the start, its mtime before it: the folder says more than the inode, and
    the read and the scan say it alike)."""
    root = _tree(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.py").write_bytes(b"x = 2\n")  # (same size, made before the start)
    for reader, chmod in [(r, c) for r in ("read", "scan") for c in (False, True)]:
        ws, recs = _workspace(root, tmp_path / f"{reader}-{chmod}")
        os.rename(root / "src", tmp_path / f"old-{reader}")
        os.rename(outside, root / "src")
        if chmod:
            (root / "src" / "x.py").chmod(0o600)
        if reader == "read":
            ws.read()
        ws.scan(last=True)
        change = _changes(recs)["src/x.py"]
        assert change["before"] == "unread" and change["unread"] == CHANGED, change
        os.rename(root / "src", outside)
        os.rename(tmp_path / f"old-{reader}", root / "src")


MOUNTINFO = r"""22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /srv/nfs rw,relatime shared:7 - nfs4 host:/export rw,vers=4.2
31 30 0:41 / /srv/nfs/scratch rw shared:8 - tmpfs tmpfs rw
32 22 0:42 / /home/u/My\040Drive rw,nosuid shared:9 - fuse.rclone drive: rw
33 22 0:43 / /data rw - ext3 /dev/sdb1 rw
34 22 0:44 / /data rw - xfs /dev/sdc1 rw
35 22 0:45 / /mnt/9 rw - 9p share rw
36 22 0:46 malformed line
"""


@pytest.mark.parametrize(
    ("root", "kind", "trusted"),
    [
        ("/work/project", "ext4", True),
        ("/srv/nfs/project", "nfs4", False),
        ("/srv/nfs", "nfs4", False),
        ("/srv/nfs/scratch/p", "tmpfs", True),  # (the longest mount point holding it)
        ("/srv/nfsother", "ext4", True),  # (a prefix of the name is no mount point holding it)
        ("/home/u/My Drive/p", "fuse.rclone", False),  # (the point's octal escape read)
        ("/data/p", "xfs", True),  # (the last mounted on the same point)
        ("/mnt/9/p", "9p", False),
    ],
)
def test_which_filesystem_holds_the_tree(root: str, kind: str, trusted: bool) -> None:
    """The fallback's decision, on a mountinfo text (network and FUSE mounts cannot be made
    here): the root's filesystem is the longest mount point holding it, and only a local one
    that keeps ctime is trusted; one not told (no mount holds it, no text) is not."""
    got = filesystem(root, MOUNTINFO)
    assert got == kind and (got in CTIME_KEPT) is trusted
    assert filesystem("/x", "36 22 0:46 malformed line\n") is None


def test_where_ctime_is_not_trusted_each_file_is_stat_at_the_start(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The fallback walk on a local tree taken for a network one: each file's stat at the start
    (said in the start line), and the start is as before: a change before the read is
    ``unread``; a chmod alone, not seen (size, mtime and inode unchanged)."""
    root = _tree(tmp_path)
    monkeypatch.setattr(workspace, "filesystem", lambda _root: "nfs4")
    recs: list[dict[str, Any]] = []
    ws = Workspace(str(root), tmp_path / "kept", recs.append, Redactor().seal)
    line = ws.start()
    assert "each file's stat taken at the start (filesystem nfs4" in line, line
    assert not ws.names and NAMED not in ws.first.files.values()
    (root / "a.txt").write_bytes(b"a, by the agent: longer\n")
    os.chmod(root / "b.txt", 0o600)
    ws.read()
    ws.scan(last=True)
    got = _changes(recs)
    assert set(got) == {"a.txt"} and got["a.txt"]["unread"] == CHANGED, got
