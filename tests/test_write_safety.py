"""Nothing a user named is destroyed, nothing is paid for before a refusal (issue 42, heading 1).

The write-safety matrix: every command that writes a path a user names (``run -o``, a fork's
``-o``, the outputs of ``--repeat``, ``--ready-file``, ``compare --report``, ``export``,
``import``) × every hazard a name may hold (the command's own input, an existing file, a symbolic
link, a FIFO, a device, a directory, a place no file can be created in). Each cell runs the real
``looptap`` as a subprocess (the core's commands through ``main`` in the test's process, but for
their input and FIFO cells) with a fake upstream it would send to, and checks that the command was
refused as docs/reliability.md ("Paths looptap writes") says (one line, exit status 2), that every
file that existed before is as it was (kind, inode, mode, content, a link's target, a device's
number: a snapshot of the cell's directory), that nothing new appeared, and that the fake
received no request.

Then the defects one by one: a fork over its own run, a refused fork that removed ``-o``, a fork
replacing a cassette without saying so, ``compare --report`` over the run / through a link /
unwritable / unredacted / 0644, inputs that are not regular files, ``--repeat`` stopping at the
first failed branch and comparing files an earlier run left. Hangs are detected by lack of
progress (tests.support.progress), never by a timed assertion.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from tests.replay.conftest import tool_loop, write
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, SCRUB, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

#: ``looptap`` of the test environment (the commands that need no recorder).
CORE = [sys.executable, "-m", "looptap.cassettes.cli"]

#: An agent that sends the recorded run's two requests (the fork serves the first from the
#: recording with ``turn=1``, the second goes live) and notes each start in ``argv[1]``; with
#: ``argv[2] == "fail-first"`` its first start exits 1 after its requests.
AGENT_SRC = """
import json, os, sys, urllib.request
from pathlib import Path
log = Path(sys.argv[1])
with log.open("a") as f:
    f.write("ran\\n")
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
for body in json.loads(Path(sys.argv[2]).read_text()):
    req = urllib.request.Request(base + "/chat/completions", data=body.encode(), method="POST",
                                 headers={"content-type": "application/json", "authorization": "Bearer sk-test-write-safety"})
    urllib.request.urlopen(req).read()
sys.exit(1 if sys.argv[3:] == ["fail-first"] and log.read_text().count("ran") == 1 else 0)
"""  # noqa: E501


def _route(req: ScriptedRequest) -> Reply:
    return Reply.say(f"LIVE ({req.model}): sunny.")


@pytest.fixture(scope="module")
def fake() -> Iterator[ScriptedUpstream]:
    """The upstream every command of this module would send to: requests counted in ``log``."""
    with ScriptedUpstream(_route) as up:
        yield up


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Outside every cell's directory: the agent, its request bodies, the recorder's confdir, a
    vcrpy cassette to import."""
    d = tmp_path_factory.mktemp("kit")
    (d / "agent.py").write_text(AGENT_SRC)
    (d / "bodies.json").write_bytes(orjson.dumps([ex.request_body.decode() for ex in tool_loop()]))
    return {"agent": d / "agent.py", "bodies": d / "bodies.json", "confdir": d / "conf", "dir": d}


def _origin(where: Path, name: str = "run.jsonl") -> Path:
    """A recorded run of two turns (a tool call, then the answer)."""
    return write(where / name, tool_loop())


VCR = """interactions:
- request:
    body: '{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
    headers:
      Content-Type: [application/json]
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {string: '{"id": "c1", "object": "chat.completion", "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]}'}
    headers:
      Content-Type: [application/json]
    status: {code: 200, message: OK}
version: 1
"""  # noqa: E501


# -- the matrix ------------------------------------------------------------------------------------

#: The hazards a path may hold.
HAZARDS = ("input", "existing", "symlink", "fifo", "device", "directory", "unwritable")


def _device(path: Path) -> Path:
    """A private character device (the numbers of /dev/null) at ``path`` when this user may make
    one; else /dev/null itself (which a user who cannot make devices cannot replace either). A
    private node keeps the machine's /dev/null safe when the matrix runs against old code."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        return path
    except (PermissionError, AttributeError):
        return Path("/dev/null")


def _hazard(kind: str, d: Path, name: str, inp: Path) -> Path:
    """The path ``name`` in ``d`` made into hazard ``kind`` (``input``: ``inp`` itself)."""
    p = d / name
    if kind == "input":
        return inp
    if kind == "existing":
        p.write_bytes(b"my only copy of something\n")
    elif kind == "symlink":
        (d / "victim.txt").write_bytes(b"the file the link points at\n")
        p.symlink_to("victim.txt")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "device":
        return _device(p)
    elif kind == "directory":
        p.mkdir()
        (p / "inside.txt").write_bytes(b"kept\n")
    elif kind == "unwritable":
        # No file can be created in /proc, whoever runs the tests (root ignores modes: a 0500
        # directory would not do).
        return Path("/proc") / name
    return p


def _snapshot(d: Path) -> dict[str, tuple[object, ...]]:
    """Everything under ``d`` and what it is: kind, inode, mode, and the content of a file, the
    target of a link, the number of a device."""
    out: dict[str, tuple[object, ...]] = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = Path(root) / name
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            what: object = None
            if stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(p.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                what = st.st_rdev
            out[str(p.relative_to(d))] = (kind, st.st_ino, st.st_mode, st.st_nlink, what)
    return out


def _dev_null() -> tuple[int, int, int]:
    st = os.lstat("/dev/null")
    return st.st_ino, st.st_mode, st.st_rdev


def _run_cmd(kit: dict[str, Path], fake_url: str, ran: Path) -> list[str]:
    """The rest of a ``run`` command line: the agent, noting each start in ``ran``."""
    return [
        "--confdir",
        str(kit["confdir"]),
        "--upstream",
        f"openai={fake_url}",
        "--",
        sys.executable,
        str(kit["agent"]),
        str(ran),
        str(kit["bodies"]),
    ]


def _cell(command: str, kind: str, d: Path, kit: dict[str, Path], fake_url: str) -> list[str]:
    """The command line of one cell, its hazard made in ``d`` (the agent's notes beside it)."""
    run = _origin(d)
    ran = d.with_name("ran.log")
    if command == "run":  # plain run has no input: its "input" cell is the ready file it writes
        out = _hazard(kind, d, "out.jsonl", run)
        if kind == "input":
            return [
                *RECORDER,
                "run",
                "-o",
                str(d / "new.jsonl"),
                "--ready-file",
                str(d / "new.jsonl"),
                *_run_cmd(kit, fake_url, ran),
            ]
        return [*RECORDER, "run", "-o", str(out), *_run_cmd(kit, fake_url, ran)]
    if command == "fork":
        out = _hazard(kind, d, "out.jsonl", run)
        return [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=0",
            "-o",
            str(out),
            *_run_cmd(kit, fake_url, ran),
        ]
    # the hazard is at the second output: every output is checked before the first branch
    if command == "repeat":
        out = _hazard(kind, d, "run.2.jsonl" if kind == "input" else "out.2.jsonl", run)
        if kind == "input":
            out = _origin(d, "run.2.jsonl")
            return [
                *RECORDER,
                "run",
                "--from",
                f"{out}@turn=0",
                "--repeat",
                "2",
                "-o",
                str(d / "run.jsonl"),
                *_run_cmd(kit, fake_url, ran),
            ]
        # /dev/null (no private device could be made): nothing to derive
        if out.name != "out.2.jsonl":
            pytest.skip(
                "no private device node can be made here, and /dev/null cannot be the second output"
            )
        return [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=0",
            "--repeat",
            "2",
            "-o",
            str(out.with_name("out.jsonl")),
            *_run_cmd(kit, fake_url, ran),
        ]
    if command == "ready-file":
        ready = _hazard(kind, d, "ready.json", run)
        return [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=0",
            "-o",
            str(d / "new.jsonl"),
            "--ready-file",
            str(ready),
            *_run_cmd(kit, fake_url, ran),
        ]
    if command == "compare":
        report = _hazard(kind, d, "report.json", run)
        return [
            *CORE,
            "compare",
            str(run),
            "--upstream",
            f"openai={fake_url}",
            "--model",
            "cand-1",
            "--report",
            str(report),
        ]
    if command == "export":
        out = _hazard(kind, d, "run.har", run)
        return [*CORE, "export", "--har", str(out), str(run)]
    if command == "import":
        src = d / "session.yaml"
        src.write_text(VCR)
        out = _hazard(kind, d, "session.jsonl", src)
        return [*CORE, "import", str(src), "-o", str(out)]
    raise AssertionError(command)


def _named(command: str, kind: str) -> str:
    """The file a cell's one line must name: the output refused, or the input it would have been."""
    if kind == "input":
        return {"run": "new.jsonl", "repeat": "run.2.jsonl", "import": "session.yaml"}.get(
            command, "run.jsonl"
        )
    if command == "repeat":  # in /proc the first output is refused already
        return "out.1.jsonl" if kind == "unwritable" else "out.2.jsonl"
    return {
        "run": "out.jsonl",
        "fork": "out.jsonl",
        "ready-file": "ready.json",
        "compare": "report.json",
        "export": "run.har",
        "import": "session.jsonl",
    }[command]


COMMANDS = ("run", "fork", "repeat", "ready-file", "compare", "export", "import")
NEEDS_RECORDER = ("run", "fork", "repeat", "ready-file")
#: The core's cells run through ``main`` in the test's process (the same return code, stderr and
#: files checked), but for the command line's own wiring (the ``input`` cell, a process) and a
#: FIFO (a process: an open that blocks is a hang, found by lack of progress).
AS_PROCESS = ("input", "fifo")


def _command(argv: list[str], d: Path, monkeypatch: pytest.MonkeyPatch, in_process: bool) -> Any:
    """``argv`` run as ``looptap`` in ``d``, in :func:`clean_env`'s environment: a process, or
    (``in_process``) a core command through ``main`` in this process."""
    if not in_process or argv[: len(CORE)] != CORE:
        env = clean_env(OPENAI_API_KEY="sk-test-write-safety")
        return progress.run(argv, env=env, capture_output=True, text=True, cwd=d)
    for k in SCRUB:
        monkeypatch.delenv(k, raising=False)
    return cli_run(*argv[len(CORE) :], cwd=d, OPENAI_API_KEY="sk-test-write-safety")


#: The recorder's cells of the default run: each recorder command's own input, and the FIFO, the
#: device and the directory once, the commands taken in turn (a ``looptap run`` start each, about
#: 0.7 s of CPU). The other 21 run at night; each hazard's refusal is the same check for every
#: output (``check_target``), shown by default on every hazard by the core's cells, by these, and
#: through ``looptap run`` (:data:`RECORDER_ELSEWHERE`).
RECORDER_BY_DEFAULT = {(c, "input") for c in NEEDS_RECORDER} | {
    ("repeat", "fifo"),
    ("ready-file", "device"),
    ("run", "directory"),
}

#: The recorder's cells whose hazard a default test of the recorder refuses through its own
#: command line (session 56: by default until then).
RECORDER_ELSEWHERE = {
    ("run", "existing"): "tests/proxy/test_recorder_paths.py::"
    "test_an_existing_file_that_is_not_a_cassette_is_not_replaced (run's -o)",
    ("fork", "symlink"): "tests/proxy/test_recorder_paths.py::"
    "test_a_link_is_never_the_ready_file (a link refused through run)",
    ("fork", "unwritable"): "tests/reliability/test_proxy_storage.py::"
    "test_unwritable_output_is_one_clear_line (record's -o)",
}


def _matrix_cells() -> list[Any]:
    def marks(command: str, kind: str) -> list[Any]:
        if command not in NEEDS_RECORDER or (command, kind) in RECORDER_BY_DEFAULT:
            return []
        elsewhere = RECORDER_ELSEWHERE.get((command, kind))
        return [
            pytest.mark.slow(
                reason=f"a recorder start refused on a hazard {elsewhere} and the core cell of the "
                "same hazard show by default"
                if elsewhere
                else "a recorder start refused on a hazard another recorder cell and every core "
                "cell show by default"
            )
        ]

    return [
        pytest.param(command, kind, marks=marks(command, kind))
        for command in COMMANDS
        for kind in HAZARDS
    ]


@pytest.mark.parametrize(("command", "kind"), _matrix_cells())
def test_write_safety_matrix(
    command: str,
    kind: str,
    tmp_path: Path,
    kit: dict[str, Path],
    fake: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One cell: refused with one line and exit status 2, before any request; nothing that
    existed is changed, nothing new is made (docs/reliability.md, "Paths looptap writes")."""
    if command in NEEDS_RECORDER and RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    d = tmp_path / "cell"
    d.mkdir()
    argv = _cell(command, kind, d, kit, fake.url)
    before, null, sent = _snapshot(d), _dev_null(), len(fake.log)
    proc = _command(argv, d, monkeypatch, in_process=kind not in AS_PROCESS)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert len(err) == 1 and err[0].startswith("looptap: error: "), proc.stderr[-2000:]
    # the line names the path refused
    assert _named(command, kind) in err[0] or "/dev/null" in err[0], err[0]
    assert "Traceback" not in proc.stderr
    assert len(fake.log) == sent, [x.line() for x in fake.log[sent:]]  # nothing paid for
    assert _snapshot(d) == before  # nothing destroyed, changed or made
    assert _dev_null() == null
    assert not (tmp_path / "ran.log").exists()  # the agent never started


# -- a fork never writes over its run ------------------------------------------------------------


def _looptap(argv: list[str], cwd: Path) -> Any:
    return progress.run(
        argv,
        env=clean_env(OPENAI_API_KEY="sk-test-write-safety"),
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def _at_night(value: str, reason: str) -> Any:
    """``value`` as a parameter of the nightly run (a recorder start each, about 0.7 s of CPU)."""
    return pytest.param(value, marks=pytest.mark.slow(reason=reason))


_SAME_FILE = (
    "a recorder start refused on another name of the same file; the names compared in process "
    "(tests/cassettes/test_paths.py, same_path), the refusal by [same] and [append]"
)


@needs_recorder
@pytest.mark.parametrize(
    "form",
    [
        "same",
        "append",
        _at_night("dot-slash-vs-absolute", _SAME_FILE),
        _at_night("hard-link", _SAME_FILE),
    ],
)
def test_a_fork_never_writes_over_the_run_it_forks(
    form: str, tmp_path: Path, kit: dict[str, Path], fake: ScriptedUpstream
) -> None:
    """``run --from run.jsonl@turn=1 -o run.jsonl`` destroyed the recording (also ``-o +run.jsonl``,
    ``./x`` against ``$PWD/x``, a hard link): refused with one line, before anything starts."""
    run = _origin(tmp_path)
    given, out = {
        "same": ("run.jsonl", "run.jsonl"),
        "append": ("run.jsonl", "+run.jsonl"),
        "dot-slash-vs-absolute": ("./run.jsonl", str(tmp_path / "run.jsonl")),
        "hard-link": ("run.jsonl", "twin.jsonl"),
    }[form]
    if form == "hard-link":
        os.link(run, tmp_path / "twin.jsonl")
    before, sent = _snapshot(tmp_path), len(fake.log)
    proc = _looptap(
        [
            *RECORDER,
            "run",
            "--from",
            f"{given}@turn=1",
            "-o",
            out,
            *_run_cmd(kit, fake.url, tmp_path.with_name(tmp_path.name + "-ran.log")),
        ],
        tmp_path,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "is the run --from forks" in proc.stderr, proc.stderr
    assert _snapshot(tmp_path) == before and len(fake.log) == sent


@needs_recorder
@pytest.mark.parametrize("refusal", ["turn=99", "missing-edit-file"])
def test_a_refused_fork_leaves_the_existing_output_alone(
    refusal: str, tmp_path: Path, kit: dict[str, Path], fake: ScriptedUpstream
) -> None:
    """A fork refused for its cursor or an ``--edit`` file deleted the existing ``-o`` first."""
    run = _origin(tmp_path)
    # an earlier cassette: what a successful fork would replace
    earlier = _origin(tmp_path, "branch.jsonl")
    cursor, extra = (
        ("turn=99", [])
        if refusal == "turn=99"
        else ("turn=1", ["--edit", "tool_result[call_A1]=@missing.txt"])
    )
    before, sent = _snapshot(tmp_path), len(fake.log)
    proc = _looptap(
        [
            *RECORDER,
            "run",
            "--from",
            f"{run}@{cursor}",
            *extra,
            "-o",
            str(earlier),
            *_run_cmd(kit, fake.url, tmp_path.with_name(tmp_path.name + "-ran.log")),
        ],
        tmp_path,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert _snapshot(tmp_path) == before and len(fake.log) == sent


@needs_recorder
def test_a_fork_replaces_an_earlier_cassette_saying_so_as_run_does(
    tmp_path: Path, kit: dict[str, Path], fake: ScriptedUpstream
) -> None:
    """A fork that succeeds replaced an existing cassette without the line plain ``run`` prints."""
    run = _origin(tmp_path)
    earlier = _origin(tmp_path, "branch.jsonl")
    size = earlier.stat().st_size
    sent = len(fake.log)
    proc = _looptap(
        [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=1",
            "-o",
            str(earlier),
            *_run_cmd(kit, fake.url, tmp_path.with_name(tmp_path.name + "-ran.log")),
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"replacing the earlier recording in {earlier} ({size:,} bytes)" in proc.stderr, (
        proc.stderr
    )
    assert "appends to it instead" not in proc.stderr  # a fork never appends
    assert len(fake.log) == sent + 1  # turn 1 went live; turn 0 came from the recording
    from looptap.cassettes.reading import origin_of

    o = origin_of(earlier)
    assert o is not None and o["run"] == str(run)


# -- inputs that are not regular files -----------------------------------------------------------


_OTHER_KIND = (
    "a recorder start refused on another kind of file; every kind refused in process "
    "(tests/cassettes/test_paths.py, check_input), the refusal by [fifo] and [edit-fifo]"
)


@needs_recorder
@pytest.mark.parametrize(
    "what",
    ["fifo", _at_night("directory", _OTHER_KIND), _at_night("dev-zero", _OTHER_KIND), "edit-fifo"],
)
def test_inputs_that_are_not_regular_files_get_one_line(
    what: str, tmp_path: Path, kit: dict[str, Path], fake: ScriptedUpstream
) -> None:
    """``--from FIFO|DIR|/dev/zero`` said "no such run"; ``--edit …=@FIFO`` blocked for ever."""
    run = _origin(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    source, extra, kind = {
        "fifo": (f"{fifo}@turn=1", [], "a FIFO"),
        "directory": (f"{tmp_path / 'dir'}@turn=1", [], "a directory"),
        "dev-zero": ("/dev/zero@turn=1", [], "a character device"),
        "edit-fifo": (f"{run}@turn=1", ["--edit", "tool_result[call_A1]=@pipe"], "a FIFO"),
    }[what]
    before, sent = _snapshot(tmp_path), len(fake.log)
    proc = _looptap(
        [
            *RECORDER,
            "run",
            "--from",
            source,
            *extra,
            "-o",
            "branch.jsonl",
            *_run_cmd(kit, fake.url, tmp_path.with_name(tmp_path.name + "-ran.log")),
        ],
        tmp_path,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert f"is {kind}: looptap reads runs and edit files only from regular files" in proc.stderr, (
        proc.stderr
    )
    assert _snapshot(tmp_path) == before and len(fake.log) == sent


# -- compare --report ----------------------------------------------------------------------------


def _echo_key(req: ScriptedRequest) -> Reply:
    """A candidate that echoes the credential it was sent (a proxy's debug mode, a leaky model)."""
    key = req.headers.get("authorization", "")
    return Reply.say(f"you sent me {key}")


def test_compare_report_checked_before_anything_is_sent(
    tmp_path: Path, fake: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compare --report`` overwrote the run itself, wrote through a planted link, and with an
    unwritable path sent (and paid for) every request, then exited 2 with nothing printed. Each
    through ``main`` in this process (compare's command line as a process: the matrix's cells)."""
    run = _origin(tmp_path)
    (tmp_path / "victim.txt").write_bytes(b"precious\n")
    (tmp_path / "planted.json").symlink_to("victim.txt")
    (tmp_path / "file.txt").write_bytes(b"a file, not a directory\n")
    for report in (
        str(run),
        "planted.json",
        "victim.txt",
        "/proc/looptap-report.json",
        "file.txt/report.json",
    ):
        before, sent = _snapshot(tmp_path), len(fake.log)
        proc = _command(
            [*CORE, "compare", str(run), "--upstream", f"openai={fake.url}", "--report", report],
            tmp_path,
            monkeypatch,
            in_process=True,
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stdout == "", (
            report,
            proc.stdout,
            proc.stderr,
        )
        assert len(fake.log) == sent, report  # refused before the first request
        assert _snapshot(tmp_path) == before, report


def test_compare_report_is_redacted_private_and_replaces_only_an_earlier_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report kept the candidate's answer unredacted (an echoed key) and was written 0644;
    a later comparison replaces an earlier one (said), nothing else. Through ``main`` in this
    process (compare's command line as a process: the matrix's cells)."""
    run = _origin(tmp_path)
    # A gateway's token of no known format: only what --header sent teaches the redactor it.
    key = "gw7Hq2LmX9pR4tZ8vK1nB6wsafety"
    report = tmp_path / "run.jsonl.compare.json"
    with ScriptedUpstream(_echo_key) as candidate:
        argv = [
            *CORE,
            "compare",
            str(run),
            "--upstream",
            f"openai={candidate.url}",
            "--header",
            f"authorization: Bearer {key}",
            "--report",
        ]
        first = _command(argv, tmp_path, monkeypatch, in_process=True)
        assert first.returncode == 0, first.stderr
        assert len(candidate.log) == 2 and key in candidate.log[0].request.headers.get(
            "authorization", ""
        )
        data = report.read_bytes()
        assert key not in data.decode() and key[:20] not in data.decode(), data[:2000]
        assert b"you sent me Bearer" in data  # the answer is there, the key in it redacted
        assert stat.S_IMODE(report.stat().st_mode) == 0o600
        assert orjson.loads(data)["looptap"] == "compare"
        second = _command(argv, tmp_path, monkeypatch, in_process=True)
        assert second.returncode == 0 and "earlier comparison there replaced" in second.stderr, (
            second.stderr
        )
        assert stat.S_IMODE(report.stat().st_mode) == 0o600 and key not in report.read_text()


def test_the_mcp_comparison_tool_serves_the_report_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The MCP ``comparison`` tool served the report's answers as stored: a candidate that echoed
    the user's key put it in what an MCP client reads. It reads the redacted report now."""
    from looptap.cassettes.mcp.query import Runs, comparison

    # without "Bearer ", which the MCP text cleaner masks on its own
    def echo_bare_key(req: ScriptedRequest) -> Reply:
        return Reply.say(
            "your key is " + req.headers.get("authorization", "").removeprefix("Bearer ")
        )

    _origin(tmp_path)
    # of no known format: only what --header sent teaches the redactor it
    key = "gw3Kp8QzL5mW2xR7tN4vB9mcpsafety"
    with ScriptedUpstream(echo_bare_key) as candidate:
        assert (
            main(
                [
                    "compare",
                    str(tmp_path / "run.jsonl"),
                    "--upstream",
                    f"openai={candidate.url}",
                    "--header",
                    f"authorization: Bearer {key}",
                    "--report",
                ]
            )
            == 0
        )
        assert key in candidate.log[0].request.headers.get("authorization", "")
    capsys.readouterr()
    served = orjson.dumps(comparison(Runs([tmp_path]), "run.jsonl", 0, 20, 6000)).decode()
    # the candidate's answer is served, the key in it redacted
    assert "your key is [REDACTED]" in served, served[:2000]
    assert key not in served and key[:20] not in served, served[:2000]


# -- --repeat ------------------------------------------------------------------------------------


@needs_recorder
def test_repeat_runs_every_branch_and_compares_only_what_it_wrote(
    tmp_path: Path, kit: dict[str, Path], fake: ScriptedUpstream
) -> None:
    """After the first failing branch no further branch ran while "run i of K" was still printed,
    and an OUT.i.jsonl an earlier run left was counted as the model's variance."""
    from looptap.cassettes.matching import Matcher
    from looptap.cassettes.reading import open_run
    from looptap.cassettes.recording.pipeline import CassetteWriter
    from looptap.cassettes.replay.forking.cursor import Cursor
    from looptap.cassettes.replay.forking.fork import origin_meta, parse_from
    from tests.replay.conftest import CALL, RESULT, SYSTEM, USER, chat_exchange, chat_response

    run = _origin(tmp_path)
    # An earlier run's second branch, whose turn 1 called a tool: not an answer of this run.
    source = parse_from(f"{run}@turn=1")
    cursor = Cursor(source.cursor, lambda *_: None)
    cursor.bind(Matcher(list(open_run(run, whole=True).exchanges)))
    meta = {"source": "looptap run --from", "origin": origin_meta(source, None, cursor.starts)}
    with CassetteWriter(tmp_path / "branch.2.jsonl", meta=meta) as w:
        w.append(
            chat_exchange(
                [SYSTEM, USER, CALL, RESULT],
                chat_response(call=("call_Z9", "get_weather", '{"city":"Oslo"}')),
            )
        )
    ran = tmp_path / "ran.log"
    sent = len(fake.log)
    proc = _looptap(
        [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=1",
            "--repeat",
            "2",
            "-o",
            "branch.jsonl",
            "--confdir",
            str(kit["confdir"]),
            "--upstream",
            f"openai={fake.url}",
            "--",
            sys.executable,
            str(kit["agent"]),
            str(ran),
            str(kit["bodies"]),
            "fail-first",
        ],
        tmp_path,
    )
    err = proc.stderr
    # the second branch ran although the first failed
    assert ran.read_text().count("ran") == 2, err[-3000:]
    assert len(fake.log) == sent + 2  # turn 1 of each branch, live
    assert proc.returncode == 1, err[-3000:]
    assert "1 of 2 runs failed, left out of the comparison: run 1 (exit status 1)" in err, err[
        -3000:
    ]
    assert "turn 1: 1 branch," in err and "Oslo" not in (tmp_path / "branch.2.jsonl").read_text(), (
        err[-3000:]
    )


# -- import: every output checked before any is written ------------------------------------------


def test_import_writes_nothing_when_one_output_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import a.yaml b.yaml -o out/`` wrote out/a.jsonl, then refused out/b.jsonl: a refusal
    that had already touched the directory. Now every output is checked first; and an output
    that is one of the inputs is refused even with ``--force``. Through ``main`` in this process
    (import's command line as a process: the matrix's cells)."""
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text(VCR)
    out = tmp_path / "out"
    out.mkdir()
    (out / "b.jsonl").write_bytes(b"my notes\n")
    before = _snapshot(tmp_path)
    proc = _command([*CORE, "import", "a.yaml", "b.yaml", "-o", "out"], tmp_path, monkeypatch, True)
    assert (
        proc.returncode == 2
        and proc.stderr.count("\n") == 1
        and "out/b.jsonl exists" in proc.stderr
    ), proc.stderr
    assert _snapshot(tmp_path) == before  # out/a.jsonl not written
    proc = _command(
        [*CORE, "import", "a.yaml", "-o", "a.yaml", "--force"], tmp_path, monkeypatch, True
    )
    assert proc.returncode == 2 and "is a file it imports" in proc.stderr, proc.stderr
    assert _snapshot(tmp_path) == before
