"""The output paths of ``looptap export`` (``--har``, ``--otel``), ``looptap import -o`` and
``looptap textconv --install`` (issue 28 item 4; docs/reliability.md, "Paths looptap writes"):
checked before anything is read or written, never written through a link, a device, a FIFO or a
directory; an existing file replaced only with ``--force``; written whole under a private name
and put in place.

Only the command line is used, so these run against an older looptap too and show what it did.
Devices: ``/dev/null`` (checked unchanged after every test) and a private character device made
with ``mknod`` when this user may."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from importlib.resources import as_file, files
from pathlib import Path

import pytest

from tests.support import progress, shared
from tests.support.analysed import cli_run

REPO = Path(__file__).resolve().parents[2]
DEV_NULL = Path("/dev/null")
PRECIOUS = "precious: not looptap's\n"


@pytest.fixture(autouse=True)
def _dev_null_untouched() -> object:
    def ident() -> tuple[int, int, int, int]:
        st = os.lstat(DEV_NULL)
        return st.st_ino, st.st_rdev, st.st_mode, st.st_uid

    before = ident()
    yield
    assert ident() == before, "/dev/null was replaced, removed or changed"


@pytest.fixture
def vcr_yaml(tmp_path: Path) -> Path:
    with as_file(files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as src:
        dest = tmp_path / "in" / "loop.yaml"
        dest.parent.mkdir()
        shutil.copy(src, dest)
        return dest


@pytest.fixture
def cassette(tmp_path: Path, vcr_yaml: Path) -> Path:
    """The bundled recording imported by the command line once a session (tests/support/shared.py:
    a second's process a test), copied here."""

    def make(where: Path) -> None:
        where.mkdir(exist_ok=True)
        proc = _looptap(
            where, "import", str(vcr_yaml), "-o", str(where / "run.jsonl"), process=True
        )
        assert proc.returncode == 0, proc.stderr

    shared.copy("output-paths-run", make, tmp_path)
    return tmp_path / "run.jsonl"


def _looptap(cwd: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``looptap ARGS`` in ``cwd``: through ``main`` in this process (the same status, stdout and
    stderr), or (``process``, for a FIFO: an open that blocks is a hang, found by lack of progress;
    and for the session's one import) a process of this checkout's looptap."""
    if not process:
        return cli_run(*args, cwd=cwd)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode != 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error" in lines[0], proc.stderr
    for w in words:
        assert w in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def _special(tmp_path: Path, which: str) -> Path:
    if which == "dev_null":
        return DEV_NULL
    if which == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        return path
    if which == "directory":
        path = tmp_path / "dir"
        path.mkdir()
        (path / "keep").write_text(PRECIOUS)
        return path
    path = tmp_path / "null-device"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pytest.skip("this user cannot make a device node")
    return path


def _ident(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return st.st_ino, st.st_mode, st.st_rdev, st.st_size


SPECIALS = ["dev_null", "private_device", "fifo", "directory"]
WORDS = {
    "dev_null": "is a character device",
    "private_device": "is a character device",
    "fifo": "is a FIFO",
    "directory": "is a directory",
}


# -- export --har / --otel -----------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--har", "--otel"])
def test_export_refuses_an_existing_file_unless_forced(
    tmp_path: Path, cassette: Path, flag: str
) -> None:
    out = tmp_path / "notes.txt"
    out.write_text(PRECIOUS)
    _refused(
        _looptap(tmp_path, "export", str(cassette), flag, str(out)),
        f"the export {out} exists (--force replaces it",
        "--force",
    )
    assert out.read_text() == PRECIOUS  # was overwritten
    proc = _looptap(tmp_path, "export", str(cassette), flag, str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() != PRECIOUS and stat.S_IMODE(out.stat().st_mode) == 0o600
    # no temporary left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "notes.txt", "run.jsonl"]


@pytest.mark.parametrize("which", SPECIALS)
def test_export_never_writes_to_a_device_fifo_or_directory(
    tmp_path: Path, cassette: Path, which: str
) -> None:
    path = _special(tmp_path, which)
    before = _ident(path)
    # a writer would not wait
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK) if which == "fifo" else -1
    try:
        for force in ([], ["--force"]):
            _refused(
                _looptap(
                    tmp_path,
                    "export",
                    str(cassette),
                    "--har",
                    str(path),
                    *force,
                    process=which == "fifo",
                ),
                WORDS[which],
            )
    finally:
        if reader >= 0:
            assert os.read(reader, 1 << 16) == b""
            os.close(reader)
    assert _ident(path) == before  # a device was narrowed to 0600 (fchmod), a FIFO written into


def test_export_never_writes_through_a_link(tmp_path: Path, cassette: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    link = tmp_path / "out.har"
    link.symlink_to(victim)
    for force in ([], ["--force"]):
        _refused(
            _looptap(tmp_path, "export", str(cassette), "--har", str(link), *force),
            "is a symbolic link",
        )
    assert victim.read_text() == PRECIOUS and link.is_symlink()  # was truncated and overwritten


def test_export_never_replaces_the_run_it_reads(tmp_path: Path, cassette: Path) -> None:
    before = cassette.read_bytes()
    _refused(
        _looptap(tmp_path, "export", str(cassette), "--har", str(cassette), "--force"),
        "is the run it exports",
    )
    assert cassette.read_bytes() == before


# -- import -o -----------------------------------------------------------------------------------


def test_import_never_writes_through_a_link(tmp_path: Path, vcr_yaml: Path) -> None:
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    for force in ([], ["--force"]):
        _refused(
            _looptap(tmp_path, "import", str(vcr_yaml), "-o", str(link), *force),
            "is a symbolic link",
        )
    # was created where it points
    assert not (tmp_path / "elsewhere.jsonl").exists() and link.is_symlink()


@pytest.mark.parametrize("which", SPECIALS)
def test_import_never_replaces_a_device_fifo_or_directory(
    tmp_path: Path, vcr_yaml: Path, which: str
) -> None:
    path = _special(tmp_path, which)
    before = _ident(path)
    args = ("import", str(vcr_yaml), "-o", str(path), "--force")
    _refused(_looptap(tmp_path, *args, process=which == "fifo"), WORDS[which])
    assert _ident(path) == before  # --force used to unlink whatever was there


def test_import_refuses_an_existing_file_unless_forced(tmp_path: Path, vcr_yaml: Path) -> None:
    """Already so before (the clean twin); --force now replaces it whole, under a private name."""
    out = tmp_path / "out.jsonl"
    out.write_text(PRECIOUS)
    _refused(_looptap(tmp_path, "import", str(vcr_yaml), "-o", str(out)), "--force")
    assert out.read_text() == PRECIOUS
    proc = _looptap(tmp_path, "import", str(vcr_yaml), "-o", str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith('{"type":"header"') and sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["in", "out.jsonl"]


# -- textconv --install --------------------------------------------------------------------------


def _repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    progress.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_textconv_install_never_writes_through_a_linked_gitattributes(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    (repo / ".gitattributes").symlink_to(victim)
    _refused(_looptap(repo, "textconv", "--install"), "is a symbolic link")
    assert victim.read_text() == PRECIOUS  # the attribute line was appended to it
    assert (repo / ".gitattributes").is_symlink()
    config = progress.run(
        ["git", "-C", str(repo), "config", "diff.looptap.textconv"], capture_output=True, text=True
    )
    assert config.stdout == ""  # refused before git's config was touched


def test_textconv_install_refuses_a_gitattributes_directory(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".gitattributes").mkdir()
    _refused(_looptap(repo, "textconv", "--install"), "is a directory")


def test_textconv_install_extends_an_existing_gitattributes(tmp_path: Path) -> None:
    """The clean twin: the repository's own attributes are kept, the line added once, the mode
    kept."""
    repo = _repo(tmp_path)
    attrs = repo / ".gitattributes"
    attrs.write_text("*.png binary")  # no final newline
    attrs.chmod(0o640)
    for _ in range(2):
        proc = _looptap(repo, "textconv", "--install")
        assert proc.returncode == 0, proc.stderr
    assert attrs.read_text() == "*.png binary\n*.jsonl diff=looptap\n"
    assert stat.S_IMODE(attrs.stat().st_mode) == 0o640
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gitattributes"]


# -- demo -o -------------------------------------------------------------------------------------


def test_demo_replaces_only_an_earlier_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looptap.cassettes.cli.demo import cmd_demo

    notes = tmp_path / "notes.txt"
    notes.write_text(PRECIOUS)
    # the bundled recording, no recorder
    env = {k: v for k, v in os.environ.items() if k != "LOOPTAP_PROXY_PYTHON"}
    env["PYTHONPATH"] = str(REPO)

    def demo(out: Path) -> subprocess.CompletedProcess[str]:
        return progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "demo", "-o", str(out)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
        )

    proc = demo(notes)
    assert (
        proc.returncode == 2
        and f"the demo's cassette {notes} already exists and is not looptap's"
        in proc.stdout + proc.stderr
    )
    assert notes.read_text() == PRECIOUS  # was deleted and replaced by the demo's cassette
    out = tmp_path / "demo.jsonl"
    # the clean twin, in this process (the refusal above is the process path): an earlier demo
    # is replaced
    monkeypatch.setattr("looptap.cassettes.cli.demo.found_recorder", lambda: None)
    monkeypatch.delenv("LOOPTAP_PROXY_PYTHON", raising=False)
    for _ in range(2):
        said: list[str] = []
        rc = cmd_demo(argparse.Namespace(output=str(out)), said.append)
        assert rc == 0, said
    assert out.read_text().count('"type":"header"') == 1
