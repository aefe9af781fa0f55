"""The recorder's ready file (``--ready-file``): written once listening, atomically and 0600, with
the environment the export lines give and no secret; removed when the recorder stops; and what the
shipped :class:`cassettes.replay.testing.recorder.RecorderProcess` waits for, with a clear error
when the recorder exits first."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from looptap.cassettes.errors import CassetteError, CassetteFormatError
from looptap.cassettes.replay.testing.ready import SCHEMA, VERSION, bare_url, read_ready
from looptap.cassettes.replay.testing.recorder import RecorderProcess
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder
from tests.support.upstream import FakeUpstream
from tests.support.wire import http_request

pytestmark = needs_recorder


def _wait_ready(path: Path, proc: subprocess.Popen[str]) -> dict[str, object]:
    """The ready file once the recorder wrote it (hung only if the recorder stops progressing)."""

    def ready() -> dict[str, object] | None:
        found = read_ready(path)
        if found is not None and found["pid"] == proc.pid:  # not one an earlier recorder left
            return dict(found)
        assert proc.poll() is None, "the recorder exited before it was ready"
        return None

    return progress.until(ready, pids=[proc.pid], what="the recorder's ready file")


def test_ready_file_says_what_the_export_lines_say(tmp_path: Path) -> None:
    ready_file = tmp_path / "state" / "ready.json"
    ready_file.parent.mkdir()
    # Left by an earlier recorder (killed, so it could not remove it): replaced, never this one's.
    ready_file.write_text(
        json.dumps({"schema": SCHEMA, "version": VERSION, "pid": 1, "listeners": [], "env": {}})
    )
    proc = subprocess.Popen(
        [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--confdir", str(tmp_path / "conf"),  # noqa: E501
         "--upstream", "vllm=http://127.0.0.1:9/", "--ready-file", str(ready_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), start_new_session=True,  # noqa: E501
    )  # fmt: skip
    try:
        ready = _wait_ready(ready_file, proc)
        assert stat.S_IMODE(ready_file.stat().st_mode) == 0o600
        # no temporary file left
        assert [p.name for p in ready_file.parent.iterdir()] == ["ready.json"]
        assert ready["schema"] == SCHEMA and ready["version"] == VERSION
        assert ready["pid"] == proc.pid
        assert ready["cassette"] == str((tmp_path / "run.jsonl").resolve())
        assert ready["ca_cert"] == str(tmp_path / "conf" / "mitmproxy-ca-cert.pem")
        assert Path(str(ready["ca_cert"])).is_file()
        listeners = {lst["name"]: lst for lst in ready["listeners"]}  # type: ignore[attr-defined]
        assert set(listeners) == {"openai", "anthropic", "gemini", "vllm", "forward"}
        assert listeners["vllm"]["upstream"] == "http://127.0.0.1:9"
        assert (
            listeners["forward"]["mode"] == "forward"
            and ready["proxy_url"] == listeners["forward"]["url"]
        )
        assert listeners["openai"]["url"] == f"http://127.0.0.1:{listeners['openai']['port']}/v1"
        for lst in listeners.values():  # each port listens
            socket.create_connection(("127.0.0.1", lst["port"]), timeout=5).close()
    finally:
        proc.send_signal(signal.SIGINT)
        progress.wait(proc)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in out.splitlines()
        if line.startswith("export ")
    )
    assert ready["env"] == exports  # the same names and values, in the same order
    assert list(ready["env"]) == list(exports)  # type: ignore[call-overload]
    assert not ready_file.exists()  # the recorder stopped listening: the file is gone


def test_run_writes_the_ready_file_before_the_command_starts(tmp_path: Path) -> None:
    ready_file = tmp_path / "ready.json"
    seen = tmp_path / "seen.json"
    probe = f"import shutil; shutil.copy({str(ready_file)!r}, {str(seen)!r})"
    proc = progress.run(
        [*RECORDER, "run", "-o", str(tmp_path / "run.jsonl"), "--confdir", str(tmp_path / "conf"),
         "--ready-file", str(ready_file), "--", str(PROXY_PYTHON), "-c", probe],
        capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ready = json.loads(seen.read_text())
    assert ready["schema"] == SCHEMA and ready["env"]["OPENAI_BASE_URL"].startswith(
        "http://127.0.0.1:"
    )
    assert not ready_file.exists()


def test_an_upstream_mitmproxy_cannot_use_stops_the_start(tmp_path: Path) -> None:
    """Before, mitmproxy refused the listener specs (logged, not raised) and the recorder said it
    was recording while nothing listened; the key in the URL is not repeated."""
    proc = progress.run(
        [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--confdir", str(tmp_path / "conf"),  # noqa: E501
         "--upstream", "vllm=https://alice:pw-Q7xLm2@models.example.com:8443/"
         "v1?api_key=QQ9f3ltA8b7",
         "--ready-file", str(tmp_path / "ready.json")],
        capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert (
        "--upstream vllm: https://models.example.com:8443/v1 is not an upstream mitmproxy takes"
        in proc.stderr
    ), proc.stderr
    assert (
        "Traceback" not in proc.stderr
        and "pw-Q7xLm2" not in proc.stderr
        and "QQ9f3lt" not in proc.stderr
    )
    assert proc.stdout == "" and not (tmp_path / "ready.json").exists()


def test_bare_url_keeps_no_secret() -> None:
    assert (
        bare_url("https://alice:pw@models.example.com:8443/v1?api_key=k#f")
        == "https://models.example.com:8443/v1"
    )
    assert bare_url("http://[::1]:8000") == "http://[::1]:8000"


@pytest.mark.slow(
    reason=(
        "a place that takes no file refused before anything starts: "
        "tests/cassettes/test_paths.py; run's refusals through the CLI: "
        "test_recorder_paths.py"
    )
)
def test_unwritable_ready_file_stops_the_start(tmp_path: Path) -> None:
    proc = progress.run(
        [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--confdir", str(tmp_path / "conf"),  # noqa: E501
         "--ready-file", str(tmp_path / "no" / "such" / "dir" / "ready.json")],
        capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert (
        "the ready file" in proc.stderr
        and "cannot be written" in proc.stderr
        and "Traceback" not in proc.stderr
    ), proc.stderr
    assert proc.stdout == ""  # no export lines for a recorder that did not start


def test_shipped_recorder_process_reads_the_ready_file(tmp_path: Path) -> None:
    with FakeUpstream(delay=0.0) as up:
        rec = RecorderProcess(
            tmp_path / "run.jsonl",
            upstreams={"openai": up.url},
            confdir=tmp_path / "conf",
            python=PROXY_PYTHON,
            env=clean_env(),
        )
        try:
            env = rec.start()
            assert rec.ready is not None and rec.ready["pid"] == rec.pid
            assert env == rec.ready["env"] and "export OPENAI_BASE_URL=" in rec.log
            port = int(env["OPENAI_BASE_URL"].rsplit(":", 1)[1].split("/")[0])
            resp = http_request(
                "127.0.0.1",
                port,
                "POST",
                "/v1/chat/completions",
                [("content-type", "application/json")],
                b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}',
            )
            assert resp.complete and resp.status == 200
            assert rec.flush() == 1
        finally:
            assert rec.stop() == 0, rec.log
    assert not rec.running and rec.proc is None


def test_shipped_recorder_process_says_why_the_recorder_exited(tmp_path: Path) -> None:
    rec = RecorderProcess(
        tmp_path / "run.jsonl",
        confdir=tmp_path / "conf",
        python=PROXY_PYTHON,
        env=clean_env(),
        args=["--fault", "nonsense"],
    )
    with pytest.raises(
        CassetteError, match=r"the recorder exited with 1 before it was ready: .*nonsense"
    ):
        rec.start()
    assert rec.proc is None


def test_shipped_recorder_process_times_out_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A "recorder" that says something and never becomes ready, and ignores SIGINT (as any child
    # of a process that ignores it does, an xdist worker for one): it is killed after a short grace.
    # Its start-up limit (1 s) passes only once it has said its line (a clock that moves then: on
    # a busy machine the shell alone may take a second); it sleeps for a day, so a start that
    # waited for it instead of killing it would stop progressing (Hung), not pass late.
    import threading
    from types import SimpleNamespace

    pid_file = tmp_path / "fake.pid"
    fake = tmp_path / "python"
    fake.write_text(
        f"#!/bin/sh\ntrap '' INT\necho $$ > {pid_file}\necho "
        "'looptap: still thinking' >&2\nexec sleep 86400\n"
    )
    fake.chmod(0o755)
    rec = RecorderProcess(tmp_path / "run.jsonl", python=fake, env=clean_env())
    now = [0.0]

    def monotonic() -> float:
        # Still until the line is said, then a day per reading: the limit passes at the first
        # look after the line whether the start computed its deadline before or after it (on a
        # busy machine the drain thread may read the line before the deadline is taken).
        if "still thinking" in rec.log:
            now[0] += 86400.0
        return now[0]

    # the clock of the module RecorderProcess is defined in (the testing package's own)
    monkeypatch.setitem(
        RecorderProcess.start.__globals__, "time", SimpleNamespace(monotonic=monotonic)
    )
    raised: list[BaseException] = []

    def start() -> None:
        try:
            rec.start(timeout=1)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    pid = int(
        progress.until(
            lambda: pid_file.exists() and pid_file.read_text().strip(),
            what="the fake recorder's pid",
        )
    )
    progress.until(
        lambda: not thread.is_alive(), pids=[pid], what="the not-ready recorder's SIGKILL"
    )
    assert len(raised) == 1 and isinstance(raised[0], CassetteError), raised
    assert re.search(
        r"made no progress for 1 s and did not start \(no ready file\): looptap: still thinking",
        str(raised[0]),
    ), raised[0]
    assert rec.proc is None
    assert not Path(f"/proc/{pid}").exists(), "the fake recorder is still there"


def test_a_recorder_that_did_not_start_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever stops a start (an interpreter that cannot be run, a Ctrl-C while waiting for the
    ready file), no process and no temporary directory of it is left (the directory used to stay
    when the interpreter could not be started)."""
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    missing = RecorderProcess(
        tmp_path / "run.jsonl", python=tmp_path / "no-such-python", env=clean_env()
    )
    with pytest.raises(OSError):
        missing.start()
    assert missing.proc is None and list(tmp.iterdir()) == []

    pid_file = tmp_path / "fake.pid"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 86400\n")
    fake.chmod(0o755)
    waiting = RecorderProcess(tmp_path / "run.jsonl", python=fake, env=clean_env())

    def interrupted(path: Path) -> None:
        if pid_file.exists() and pid_file.read_text().strip():
            raise KeyboardInterrupt
        return None

    monkeypatch.setitem(RecorderProcess.start.__globals__, "read_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        waiting.start()
    pid = int(pid_file.read_text())
    assert waiting.proc is None and list(tmp.iterdir()) == []
    assert not Path(f"/proc/{pid}").exists(), "the interrupted recorder is still there"


def test_a_foreign_file_is_not_a_ready_file(tmp_path: Path) -> None:
    path = tmp_path / "ready.json"
    assert read_ready(path) is None
    path.write_text('{"schema": "something.else"}')
    with pytest.raises(CassetteFormatError, match="not a recorder ready file"):
        read_ready(path)
    path.write_text(json.dumps({"schema": SCHEMA, "version": VERSION + 1}))
    with pytest.raises(CassetteFormatError, match="version"):
        read_ready(path)


def test_a_fifo_at_the_ready_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO put where a recorder will write its ready file (the recorder refuses to start): a
    reader waiting for the file gets one line, never waits for a writer (was: forever)."""
    path = tmp_path / "ready.json"
    os.mkfifo(path)
    read = (
        "import sys\nfrom looptap.cassettes.errors import CassetteFormatError\n"
        "from looptap.cassettes.replay.testing.ready import read_ready\n"
        "try:\n    read_ready(sys.argv[1])\nexcept CassetteFormatError as exc:\n    print(exc)\n"
    )  # (in a process of its own: one that waits must not hang the suite)
    r = progress.run([sys.executable, "-c", read, path], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "ready file" in r.stdout and "not a regular file" in r.stdout, r.stdout
