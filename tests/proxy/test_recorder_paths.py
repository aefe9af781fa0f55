"""The recorder's paths (issue 28 item 4): ``--ready-file``, ``-o`` (and ``-o +FILE``) and
``--confdir`` are checked before anything is recorded; what exists and is not looptap's is refused
with one line and exit status 2; nothing is written through a link; the ready file is removed at
stop only while it is still the file the recorder wrote. docs/reliability.md, "Paths looptap
writes", lists each path with these tests.

Only the command line is used here, so the same tests run against an older looptap and show what
it did (each fails there). Devices: ``/dev/null`` (checked unchanged after every test) and a
private character device made with ``mknod`` when this user may (root in a container)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder

pytestmark = needs_recorder

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


def _run(tmp_path: Path, *args: str, child: str = "pass") -> subprocess.CompletedProcess[str]:
    """``looptap run ARGS -- python -c CHILD`` (the child exits by itself: no signal needed)."""
    return progress.run(
        [*RECORDER, "run", "--confdir", str(tmp_path / "conf"), *args, "--", str(PROXY_PYTHON), "-c", child],  # noqa: E501
        capture_output=True, text=True, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once for the module's tests by the real ``looptap run``: ``conf`` (the CA, the
    confdir's files), ``run.jsonl`` (a cassette of a command that sent nothing) and
    ``one.jsonl`` (a cassette of one round trip, :data:`_ONE_ROUND_TRIP`). A test copies what it
    starts from (:func:`_start_from`) instead of recording it again."""
    where = tmp_path_factory.mktemp("made")
    first = _run(where, "-o", "run.jsonl")
    assert first.returncode == 0, first.stderr
    one = _run(where, "-o", "one.jsonl", "--upstream", "openai=http://127.0.0.1:9",
               child=_ONE_ROUND_TRIP)  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert (where / "one.jsonl").read_bytes().count(b"\n") >= 2  # a header and a round trip
    return where


def _start_from(made: Path, tmp_path: Path, *cassettes: tuple[str, Path]) -> None:
    """The module's confdir (its CA made) copied to ``tmp_path/conf``, and each (name, path) of
    ``made``'s cassettes copied to that path."""
    shutil.copytree(made / "conf", tmp_path / "conf")
    for name, path in cassettes:
        shutil.copyfile(made / name, path)


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit status 2, one line naming the reason, no traceback, and no export line (the recorder
    never started)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("looptap: error: "), proc.stderr
    for w in words:
        assert w in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def _nightly(why: str) -> pytest.MarkDecorator:
    """The nightly run's (docs/suite.md, session 55): each kind of path is refused in process by
    tests/cassettes/test_paths.py (the same ``check_target``/``check_ready_path``), and through the
    real ``looptap run`` here by default once a path (the ready file, the cassette, the confdir)."""
    return pytest.mark.slow(reason=f"{why} by default; every kind in process: test_paths.py")


#: Another device or a FIFO: the same refusal as ``/dev/null``'s.
_NIGHTLY_DEVICES = [
    pytest.param(which, marks=_nightly("the same refusal as /dev/null's"))
    for which in ("private_device", "fifo")
]


def _device(tmp_path: Path, which: str) -> Path:
    if which == "dev_null":
        return DEV_NULL
    if which == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        return path
    path = tmp_path / "null-device"
    try:
        # another /dev/null, of this test's own
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pytest.skip("this user cannot make a device node")
    return path


def _ident(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_ino, st.st_mode, st.st_rdev


# -- the ready file -----------------------------------------------------------------------------


def test_an_existing_file_is_never_the_ready_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(PRECIOUS)
    proc = _run(tmp_path, "-o", "run.jsonl", "--ready-file", str(notes))
    _refused(proc, f"the ready file {notes} already exists and is not looptap's")
    assert notes.read_text() == PRECIOUS  # was overwritten, then deleted at stop
    assert not (tmp_path / "run.jsonl").exists()  # refused before recording started


@_nightly("the ready file named as the cassette refused; run's one-line refusals here")
def test_the_cassette_is_never_the_ready_file(tmp_path: Path, made: Path) -> None:
    proc = _run(tmp_path, "-o", "same.jsonl", "--ready-file", "same.jsonl")
    _refused(proc, "the ready file same.jsonl is the cassette")  # was: no recording left at all
    assert not (tmp_path / "same.jsonl").exists()
    # An existing cassette (recorded by looptap run: the module's) named twice: kept as it was.
    shutil.rmtree(tmp_path / "conf", ignore_errors=True)
    _start_from(made, tmp_path, ("run.jsonl", tmp_path / "same.jsonl"))
    before = (tmp_path / "same.jsonl").read_bytes()
    proc = _run(tmp_path, "-o", "+same.jsonl", "--ready-file", str(tmp_path / "same.jsonl"))
    _refused(proc, "is the cassette")
    assert (tmp_path / "same.jsonl").read_bytes() == before


@pytest.mark.parametrize("which", ["dev_null", *_NIGHTLY_DEVICES])
def test_a_device_or_fifo_is_never_the_ready_file(tmp_path: Path, which: str) -> None:
    path = _device(tmp_path, which)
    before = _ident(path)
    proc = _run(tmp_path, "-o", "run.jsonl", "--ready-file", str(path))
    _refused(
        proc, f"the ready file {path} is a {'FIFO' if which == 'fifo' else 'character device'}"
    )
    assert _ident(path) == before  # was replaced by a regular file, then deleted at stop
    assert not (tmp_path / "run.jsonl").exists()


@_nightly("a directory refused; the ready file's refusals through run here")
def test_a_directory_is_never_the_ready_file(tmp_path: Path) -> None:
    d = tmp_path / "state"
    d.mkdir()
    (d / "keep").write_text(PRECIOUS)
    proc = _run(tmp_path, "-o", "run.jsonl", "--ready-file", str(d))
    _refused(proc, f"the ready file {d} is a directory")
    assert (d / "keep").read_text() == PRECIOUS and os.listdir(d) == ["keep"]
    assert not (tmp_path / "run.jsonl").exists()  # was: the cassette created, then "cannot write"


def test_a_link_is_never_the_ready_file(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    link = tmp_path / "ready.json"
    link.symlink_to(victim)
    proc = _run(tmp_path, "-o", "run.jsonl", "--ready-file", str(link))
    _refused(proc, "is a symbolic link")
    assert link.is_symlink() and victim.read_text() == PRECIOUS


def test_a_ready_file_replaced_by_someone_else_is_not_removed(tmp_path: Path, made: Path) -> None:
    """The command replaces the ready file while the recorder runs; at stop the recorder removes
    only the file it wrote (same device and inode), so the replacement stays."""
    _start_from(made, tmp_path)
    ready = tmp_path / "ready.json"
    child = (
        "import os, pathlib; p = pathlib.Path(os.environ['READY']); assert "
        "p.read_text().startswith('{'); t = p.with_name('theirs.tmp'); t.write_text('theirs\\n'); "
        "os.replace(t, p)"
    )
    proc = progress.run(
        [*RECORDER, "run", "--confdir", str(tmp_path / "conf"), "-o", "run.jsonl", "--ready-file", str(ready),  # noqa: E501
         "--", str(PROXY_PYTHON), "-c", child],
        capture_output=True, text=True, env=clean_env(READY=str(ready)), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert ready.read_text() == "theirs\n"  # was deleted at stop
    # The clean twin: left alone, the ready file is the recorder's and is removed at stop.
    ready.unlink()
    proc = _run(
        tmp_path,
        "-o",
        "run2.jsonl",
        "--ready-file",
        str(ready),
        child=f"assert open({str(ready)!r}).read().startswith('{{')",
    )
    assert proc.returncode == 0, proc.stderr
    assert not ready.exists()


# -- the cassette (-o) --------------------------------------------------------------------------


def test_an_existing_file_that_is_not_a_cassette_is_not_replaced(
    tmp_path: Path, made: Path
) -> None:
    _start_from(made, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text(PRECIOUS)
    proc = _run(tmp_path, "-o", str(notes))
    _refused(
        proc, f"the cassette {notes} already exists and is not looptap's", "--force replaces it"
    )
    assert notes.read_text() == PRECIOUS  # was deleted and replaced by the recording
    proc = _run(tmp_path, "-o", f"+{notes}")  # nor appended to
    _refused(proc, "-o +FILE appends only to a looptap cassette")
    assert notes.read_text() == PRECIOUS
    proc = _run(tmp_path, "-o", str(notes), "--force")  # kept: the command recorded nothing
    assert proc.returncode == 0 and notes.read_text() == PRECIOUS, proc.stderr
    proc = _run(tmp_path, "-o", str(notes), "--force", "--upstream", "openai=http://127.0.0.1:9",
                child=_ONE_ROUND_TRIP)  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # said so: replaced, once a round trip was recorded
    assert notes.read_text().startswith('{"type":"header","format":"looptap-cassette"')


def test_an_existing_cassette_is_replaced_or_appended_to_as_documented(
    tmp_path: Path, made: Path
) -> None:
    """The clean twin: a looptap cassette (the module's, recorded by looptap run) named again is
    replaced (said on stderr), or appended to with ``+``; the behaviour documented before, kept."""
    _start_from(made, tmp_path, ("run.jsonl", tmp_path / "run.jsonl"))
    header = (tmp_path / "run.jsonl").read_bytes()
    again = _run(tmp_path, "-o", "run.jsonl")
    assert (
        again.returncode == 0 and "replacing the earlier recording in run.jsonl" in again.stderr
    ), again.stderr
    appended = _run(tmp_path, "-o", "+run.jsonl")
    assert appended.returncode == 0, appended.stderr
    assert (tmp_path / "run.jsonl").read_bytes().count(b'"type":"header"') == 1 and header


#: A child that sends one request through the recorder to an upstream that is not there (port 9):
#: one round trip recorded (the recorder's 502), no server needed.
_ONE_ROUND_TRIP = (
    "import os, urllib.request as u\n"
    "try: u.urlopen(u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
    "data=b'{\"model\":\"m\",\"messages\":[]}', headers={'content-type': 'application/json'}))\n"
    "except Exception as e: print(e)\n"
)


def test_a_command_that_records_nothing_never_costs_the_earlier_recording(
    tmp_path: Path, made: Path
) -> None:
    """Issue 71 item 1: ``looptap run -o run.jsonl -- python my_agent.py`` whose agent fails
    before its first round trip (``No module named 'openai'``) left an empty cassette where a good
    one was. The earlier file is set aside, put back byte for byte when nothing was recorded (said
    on stderr, no summary of an empty run), and replaced once a round trip is."""
    _start_from(made, tmp_path, ("one.jsonl", tmp_path / "run.jsonl"))  # recorded by looptap run
    good = (tmp_path / "run.jsonl").read_bytes()
    assert good.count(b"\n") >= 2, good  # a header and a round trip
    failed = _run(tmp_path, "-o", "run.jsonl", child="raise SystemExit(\"No module named 'x'\")")
    assert failed.returncode == 1, failed.stderr
    assert (tmp_path / "run.jsonl").read_bytes() == good, failed.stderr
    assert "the command recorded nothing: run.jsonl keeps the earlier recording" in failed.stderr
    assert "0 round trips" not in failed.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "conf") == ["run.jsonl"]
    again = _run(tmp_path, "-o", "run.jsonl", "--upstream", "openai=http://127.0.0.1:9",
                 child=_ONE_ROUND_TRIP)  # fmt: skip
    assert again.returncode == 0 and "1 round trip in run.jsonl" in again.stderr, again.stderr
    assert (tmp_path / "run.jsonl").read_bytes() != good
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "conf") == ["run.jsonl"]


@pytest.mark.parametrize("which", ["dev_null", *_NIGHTLY_DEVICES])
def test_a_device_or_fifo_is_never_the_cassette(tmp_path: Path, which: str) -> None:
    path = _device(tmp_path, which)
    before = _ident(path)
    # A reader on the FIFO, so a writer opening it does not wait (the recording would go into it).
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK) if which == "fifo" else -1
    try:
        for out in (str(path), f"+{path}"):
            proc = _run(tmp_path, "-o", out)
            _refused(
                proc,
                f"the cassette {path} is a {'FIFO' if which == 'fifo' else 'character device'}",
            )
    finally:
        if reader >= 0:
            assert os.read(reader, 1 << 16) == b""  # nothing was written into it
            os.close(reader)
    assert _ident(path) == before  # was: the recording written into the device, lost, exit 0


@_nightly("a directory refused; the cassette's refusals through run here")
def test_a_directory_is_never_the_cassette(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    proc = _run(tmp_path, "-o", str(d))
    _refused(proc, f"the cassette {d} is a directory")  # was: a traceback
    assert os.listdir(d) == []


@_nightly("a link refused; a link as the ready file through run here")
def test_a_link_is_never_the_cassette(tmp_path: Path, made: Path) -> None:
    dangling = tmp_path / "run.jsonl"
    dangling.symlink_to(tmp_path / "elsewhere.jsonl")
    proc = _run(tmp_path, "-o", str(dangling))
    _refused(proc, "is a symbolic link")
    assert not (tmp_path / "elsewhere.jsonl").exists()  # was: created where the link points
    victim = tmp_path / "victim.jsonl"
    shutil.copyfile(made / "run.jsonl", victim)  # a cassette recorded by looptap run
    before = victim.read_bytes()
    dangling.unlink()
    dangling.symlink_to(victim)
    for out in (str(dangling), f"+{dangling}"):
        _refused(_run(tmp_path, "-o", out), "is a symbolic link")
    assert victim.read_bytes() == before and dangling.is_symlink()


# -- --confdir ----------------------------------------------------------------------------------


def test_a_link_planted_in_the_confdir_is_not_followed(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    (conf / "looptap-ca-bundle.pem").symlink_to(victim)
    proc = _run(tmp_path, "-o", "run.jsonl")
    _refused(proc, "looptap-ca-bundle.pem is a symbolic link")
    assert victim.read_text() == PRECIOUS  # was overwritten with the CA bundle
    assert not (tmp_path / "run.jsonl").exists()


def test_a_confdir_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "conf").write_text(PRECIOUS)
    proc = _run(tmp_path, "-o", "run.jsonl")
    _refused(proc, "--confdir", "is a regular file, not a directory")  # was: a traceback
    assert (tmp_path / "conf").read_text() == PRECIOUS and not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize(
    "name",
    [
        "mitmproxy-ca.pem",
        *(
            pytest.param(name, marks=_nightly("the same check of the confdir's files: ca.pem's"))
            for name in ("mitmproxy-ca-cert.pem", "mitmproxy-dhparam.pem")
        ),
    ],
)
def test_a_fifo_planted_in_the_confdir_is_refused_not_waited_on(
    tmp_path: Path, name: str, made: Path
) -> None:
    """mitmproxy reads its CA and DH files at start, looptap the CA certificate: a FIFO at one
    of them is refused in one line (was: the start waited for a writer forever)."""
    _start_from(made, tmp_path)  # the CA made by looptap run
    (tmp_path / "conf" / name).unlink()
    os.mkfifo(tmp_path / "conf" / name)
    proc = _run(tmp_path, "-o", "run.jsonl")
    _refused(proc, name, "not a regular file")
    assert not (tmp_path / "run.jsonl").exists()
