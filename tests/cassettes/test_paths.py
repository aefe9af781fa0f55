"""Paths looptap writes or removes (cassettes/storage/_paths.py, docs/reliability.md "Paths looptap
writes"), in-process: what is refused before anything is written, that nothing is written through
a link planted at a temporary name, and that only the file looptap created is ever removed.

The device used is ``/dev/null`` (checked unchanged: same inode, still a character device) and a
FIFO made here; a device node is never replaced, written through or removed."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from looptap.cassettes.errors import CassetteIOError
from looptap.cassettes.recording import seal
from looptap.cassettes.replay.testing.ready import (
    SCHEMA,
    VERSION,
    Ready,
    check_ready_path,
    remove_ready,
    write_ready,
)
from looptap.cassettes.storage import (
    CassetteFile,
    FileId,
    Target,
    UnsafePath,
    check_target,
    is_cassette,
    open_append,
    private_open,
    remove_if_same,
    staged,
    write_new,
    write_plain,
)

DEV_NULL = Path("/dev/null")


def _dev_null() -> tuple[int, int, int, int]:
    st = os.lstat(DEV_NULL)
    return st.st_dev, st.st_ino, st.st_rdev, stat.S_IFMT(st.st_mode)


@pytest.fixture(autouse=True)
def _dev_null_untouched() -> object:
    before = _dev_null()
    yield
    after = _dev_null()
    assert after == before and stat.S_ISCHR(after[3]), "/dev/null was replaced or changed"


def _ready() -> Ready:
    return Ready(
        schema=SCHEMA, version=VERSION, looptap="test", pid=os.getpid(), cassette="/x.jsonl", listen_host="127.0.0.1",  # noqa: E501
        listeners=[], proxy_url="http://127.0.0.1:1", ca_cert="/ca.pem", env={},
    )  # fmt: skip


def _specials(tmp_path: Path) -> dict[str, Path]:
    """A name of each kind looptap must never write to, replace or remove."""
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "link").symlink_to(victim)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere.txt")
    return {
        "directory": tmp_path / "dir",
        "fifo": tmp_path / "fifo",
        "device": DEV_NULL,
        "link": tmp_path / "link",
        "dangling link": tmp_path / "dangling",
    }


def _snapshot(p: Path) -> tuple[int, int, int]:
    st = os.lstat(p)
    return st.st_ino, st.st_mode, st.st_size


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "link", "dangling link"])
def test_special_files_are_refused_whatever_force_says(tmp_path: Path, kind: str) -> None:
    path = _specials(tmp_path)[kind]
    before = _snapshot(path)
    for force in (False, True):
        with pytest.raises(
            UnsafePath, match=r"is a (directory|FIFO|character device|symbolic link)"
        ):
            check_target(path, "the export", force=force, owned=lambda _p: True)
    assert _snapshot(path) == before
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert not (tmp_path / "nowhere.txt").exists()


def test_an_existing_file_is_refused_unless_looptaps_or_forced(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("mine\n")
    with pytest.raises(UnsafePath, match=r"exists \(--force replaces it\)"):
        check_target(path, "the export", hint="--force replaces it")
    with pytest.raises(
        UnsafePath, match=r"already exists and is not looptap's: refused \(--force replaces it\)"
    ):
        check_target(path, "the cassette", owned=lambda _p: False, hint="--force replaces it")
    assert check_target(path, "x", force=True).replaces == FileId.of(os.lstat(path))
    assert check_target(path, "x", owned=lambda _p: True).replaces is not None
    empty = tmp_path / "reserved"  # mktemp reserves a name this way: nothing in it to lose
    empty.touch()
    assert check_target(empty, "x").replaces is not None
    assert check_target(tmp_path / "free", "x") == Target(tmp_path / "free")


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "link", "dangling link"])
def test_appending_opens_only_a_regular_file_without_following_a_link(
    tmp_path: Path, kind: str
) -> None:
    path = _specials(tmp_path)[kind]
    before = _snapshot(path)
    with pytest.raises(UnsafePath):  # and never blocks on the FIFO
        open_append(path, "the cassette")
    with pytest.raises(UnsafePath):
        CassetteFile(path)
    with pytest.raises(UnsafePath):
        private_open(path, append=True)
    with pytest.raises(UnsafePath):
        private_open(path)
    assert _snapshot(path) == before
    assert (tmp_path / "victim.txt").read_text() == "precious\n" and not (
        tmp_path / "nowhere.txt"
    ).exists()


def test_the_temporary_name_is_private_and_unpredictable(tmp_path: Path) -> None:
    names = set()
    for _ in range(20):
        with staged(Target(tmp_path / "out.json")) as s:
            names.add(s.path.name)
            # the writer's pid and start time (so a killed writer's file can be reclaimed), then
            # mkstemp's random part: unpredictable, created O_EXCL
            assert s.path.parent == tmp_path and re.fullmatch(
                rf"\.out\.json\.{os.getpid()}-\d+-[a-z0-9_]{{8}}\.tmp", s.path.name
            ), s.path.name
            assert stat.S_IMODE(os.stat(s.path).st_mode) == 0o600
        (tmp_path / "out.json").unlink()
    assert len(names) == 20  # mkstemp: a fresh random name each time, created O_EXCL


def test_a_name_taken_meanwhile_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ready.json"
    target = check_target(path, "the ready file")
    path.write_text("someone else's\n")  # between the check and the write
    with pytest.raises(UnsafePath, match="appeared while looptap was writing it"):
        write_plain(target, b"{}")
    assert path.read_text() == "someone else's\n" and sorted(os.listdir(tmp_path)) == ["ready.json"]
    old = tmp_path / "old.jsonl"
    old.write_text("old\n")
    target = check_target(old, "x", force=True)
    swapped = tmp_path / "swap"
    swapped.write_text("swapped in\n")
    os.replace(swapped, old)  # another file took the checked one's name
    with pytest.raises(UnsafePath, match="replaced by another file"):
        write_plain(target, b"new")
    assert old.read_text() == "swapped in\n" and sorted(os.listdir(tmp_path)) == [
        "old.jsonl",
        "ready.json",
    ]


def test_only_the_file_looptap_created_is_removed(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    created = write_ready(ready, _ready())
    replacement = tmp_path / "theirs"
    replacement.write_text("theirs\n")
    os.replace(replacement, ready)  # someone replaced it between the write and the stop
    assert not remove_ready(ready, created)
    assert ready.read_text() == "theirs\n"
    ready.unlink()
    created = write_ready(ready, _ready())
    assert remove_ready(ready, created) and not ready.exists()
    # never a device, even "the same"
    assert not remove_if_same(DEV_NULL, FileId.of(os.lstat(DEV_NULL)))


def test_the_ready_file_path_is_checked_before_the_recorder_starts(tmp_path: Path) -> None:
    specials = _specials(tmp_path)
    for path in specials.values():
        with pytest.raises(UnsafePath):
            check_ready_path(path)
    other = tmp_path / "notes.txt"
    other.write_text("not a ready file\n")
    with pytest.raises(UnsafePath, match=r"not looptap.s.*not a ready file a recorder left"):
        check_ready_path(other)
    cassette = tmp_path / "run.jsonl"
    with pytest.raises(UnsafePath, match="is the cassette"):
        check_ready_path(cassette, cassette=cassette)
    with pytest.raises(UnsafePath, match="is the cassette"):
        check_ready_path(tmp_path / "sub" / ".." / "run.jsonl", cassette=cassette)
    left = tmp_path / "left.json"
    left.write_text(
        json.dumps({"schema": SCHEMA, "version": VERSION, "pid": 1, "listeners": [], "env": {}})
    )
    # a recorder's leftover: replaced
    assert check_ready_path(left).replaces == FileId.of(os.lstat(left))


def test_a_cassette_is_recognised_by_its_header_only(tmp_path: Path) -> None:
    cas = tmp_path / "run.jsonl"
    with CassetteFile(cas):
        pass
    assert is_cassette(cas)
    text = tmp_path / "notes.jsonl"
    text.write_text('{"format": "something"}\n')
    assert (
        not is_cassette(text)
        and not is_cassette(tmp_path / "missing")
        and not is_cassette(DEV_NULL)
    )
    link = tmp_path / "link.jsonl"
    link.symlink_to(cas)
    assert not is_cassette(link)  # a link is not looptap's file, whatever it points to
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not is_cassette(fifo)  # and opening it does not block


def test_staged_and_write_new_take_only_what_the_redactor_passed(tmp_path: Path) -> None:
    """Issue 101 (session 50): exports, pages, rewritten branches are written only as
    ``Redacted`` (sealed again at the writer); plain bytes are refused before anything is put in
    place."""
    with pytest.raises(TypeError, match="Redacted"), staged(Target(tmp_path / "a.har")) as s:
        s.write(b"plain")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Redacted"):
        write_new(Target(tmp_path / "b.json"), b"{}")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
    write_new(Target(tmp_path / "c.json"), seal(b'{"password": "hunter2-Kx91"}'))
    assert (tmp_path / "c.json").read_bytes() == b'{"password": "[REDACTED]"}'


def test_staged_cleans_up_on_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), staged(Target(tmp_path / "out.har")) as s:
        s.write(seal(b"half"))
        raise RuntimeError("export failed")
    assert os.listdir(tmp_path) == []  # no partial file, no temporary
    with pytest.raises(CassetteIOError, match="cannot write in"):
        with staged(Target(tmp_path / "no" / "dir" / "out.har")):
            pass


def test_a_place_that_takes_no_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """check_target tries the directory (issue 42): /proc, a missing directory, a path under a file
    are refused whoever runs the tests (root ignores modes), and the try leaves nothing behind."""
    from looptap.cassettes.storage import UnsafePath, check_target

    (tmp_path / "file.txt").write_bytes(b"x")
    for path, why in (
        (Path("/proc/looptap-place.json"), "no file can be created in /proc"),
        (tmp_path / "missing" / "x.json", "does not exist"),
        (tmp_path / "file.txt" / "x.json", "Not a directory"),
    ):
        with pytest.raises(UnsafePath, match=why):
            check_target(path, "the report")
    # the writer makes it
    assert (
        check_target(tmp_path / "missing" / "x.json", "the import's output", parents=True).replaces
        is None
    )
    assert check_target(tmp_path / "new.json", "the report").replaces is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]  # the tries left nothing


def test_inputs_are_read_only_from_regular_files_without_blocking(tmp_path: Path) -> None:
    """A FIFO, a directory or a device named as an input is one line, never a block (issue 42)."""
    from looptap.cassettes.storage import check_input, read_input

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, kind in (
        (fifo, "a FIFO"),
        (tmp_path, "a directory"),
        (Path("/dev/zero"), "a character device"),
    ):
        with pytest.raises(
            CassetteIOError,
            match=f"is {kind}: looptap reads runs and edit files only from regular files",
        ):
            read_input(path, "the edit file", 100)
        with pytest.raises(CassetteIOError, match=f"is {kind}"):
            check_input(path, "--from")
    (tmp_path / "ok.txt").write_bytes(b"hello")
    assert read_input(tmp_path / "ok.txt", "the edit file", 3) == b"hel"


def test_describe_names_each_kind_of_file_and_same_path_compares_files(tmp_path: Path) -> None:
    """:func:`describe` words each kind of file as messages say it; :func:`same_path` is the same
    inode when both names exist, else the same absolute name (with the directory's links
    resolved)."""
    import socket

    from looptap.cassettes.storage import describe, same_path

    (tmp_path / "file").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    os.link(tmp_path / "file", tmp_path / "hard")
    os.mkfifo(tmp_path / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    kinds = {name: describe(os.lstat(tmp_path / name)) for name in ("file", "link", "pipe", "sock")}
    sock.close()
    assert kinds == {
        "file": "a regular file",
        "link": "a symbolic link",
        "pipe": "a FIFO",
        "sock": "a socket",
    }
    assert describe(os.stat(tmp_path)) == "a directory"
    assert describe(os.stat(DEV_NULL)) == "a character device"
    assert same_path(tmp_path / "file", tmp_path / "hard")
    assert same_path(tmp_path / "link", tmp_path / "file")
    assert not same_path(tmp_path / "file", tmp_path / "pipe")
    (tmp_path / "d").mkdir()
    (tmp_path / "dl").symlink_to(tmp_path / "d")
    assert same_path(tmp_path / "dl" / "missing", tmp_path / "d" / "missing")
    assert not same_path(tmp_path / "d" / "missing", tmp_path / "d" / "other")
