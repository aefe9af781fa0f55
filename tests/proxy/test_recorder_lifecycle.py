"""The recorder's life cycle as a user meets it: a busy port is one clear line; stopping closes
every port; a storage failure is loud (stderr, non-zero exit) while the agent's traffic flows on
and what was already written stays whole."""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

from looptap.cassettes.storage import read_records  # noqa: E402
from tests.support import progress  # noqa: E402
from tests.support.upstream import FakeUpstream  # noqa: E402

PROXY_PYTHON = Path(os.environ.get("LOOPTAP_PROXY_PYTHON") or REPO / ".venv-proxy/bin/python")
RECORDER = [str(PROXY_PYTHON), "-m", "looptap.cassettes.cli"]

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits"),
    pytest.mark.skipif(
        not PROXY_PYTHON.exists(), reason=f"recorder environment missing: {PROXY_PYTHON}"
    ),
]

_SCRUB = (
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "OPENAI_BASE_URL", "OPENAI_API_BASE",
    "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _SCRUB and k.lower() not in {s.lower() for s in _SCRUB}
    }
    env.update(extra)
    return env


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_busy_port_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = progress.run(
            [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--port", str(port), "--confdir", str(tmp_path / "conf")],  # noqa: E501
            capture_output=True, text=True, env=_env(),
        )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"looptap: error: cannot listen on 127.0.0.1:{port}: address already in use"
    ], proc.stderr
    assert proc.stdout == ""  # no export lines for a proxy that is not running


def test_stop_closes_every_port(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--confdir", str(tmp_path / "conf")],  # noqa: E501
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    ports: set[int] = set()
    for line in progress.lines(proc, proc.stdout, what="the recorder's export lines"):
        ports |= {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", line)}
        if line.startswith("export NODE_EXTRA_CA_CERTS"):
            break
    assert len(ports) >= 4, ports  # openai, anthropic, gemini, forward
    assert not any(_bindable(p) for p in ports)
    proc.send_signal(signal.SIGINT)
    rc = progress.wait(proc)
    err = proc.stderr.read()
    assert rc == 0, err
    # The process is gone, so its sockets are too; this checks that nothing it started (the writer
    # process, a helper) inherited a listening socket and keeps the port.
    assert [p for p in ports if not _bindable(p)] == [], err


def test_stopping_while_a_client_holds_its_connection_prints_no_traceback(tmp_path: Path) -> None:
    """A keep-alive client (every SDK) still connected when the recorder stops: mitmproxy's
    connection task is cancelled, which asyncio used to print as 'Exception in callback …
    CancelledError' with a traceback on the user's terminal."""
    with FakeUpstream(delay=0.0) as up:
        proc = subprocess.Popen(
            [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--confdir", str(tmp_path / "conf"), "--upstream", f"openai={up.url}"],  # noqa: E501
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        base = ""
        for line in progress.lines(proc, proc.stdout, what="the recorder's export lines"):
            if line.startswith("export OPENAI_BASE_URL="):
                base = line.split("=", 1)[1].strip().strip("'\"")
                break
        port = int(re.findall(r":(\d+)", base)[0])
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
        with socket.create_connection(("127.0.0.1", port), timeout=progress.STALL) as held:
            held.sendall(
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                f"\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
            )
            answer = _whole_response(held)
            assert answer.startswith(b"HTTP/1.1 200")  # answered whole, and kept open
            proc.send_signal(signal.SIGINT)
            rc = progress.wait(proc)
        err = proc.stderr.read()
    assert rc == 0, err
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert "1 round trip recorded" in err, err


def _whole_response(sock: socket.socket) -> bytes:
    """One HTTP/1.1 response read to its last byte (its Content-Length): a first ``recv`` may hold
    only the head, and a stop before the body's last byte rightly records nothing."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    sized = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    assert sized is not None, head
    length = int(sized.group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, body
        body += chunk
    return head + b"\r\n\r\n" + body


CLIENT = textwrap.dedent(
    """
    import json, os, sys, urllib.request
    base = os.environ["OPENAI_BASE_URL"]
    key = sys.argv[2]
    ok = 0
    for i in range(int(sys.argv[1])):
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"request {i} " + "x" * 6000}]}
        req = urllib.request.Request(base + f"/chat/completions?key={key}", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "authorization": f"Bearer {key}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            ok += bool(json.load(resp)["choices"])
    print(json.dumps({"ok": ok}))
    """  # noqa: E501
)


@pytest.mark.slow(
    reason=(
        "a full disk mid-run, loud, whole records kept: "
        "test_proxy_storage.py::test_disk_full_mid_run_is_loud_and_keeps_what_was_written "
        "by default"
    )
)
def test_storage_failure_is_loud_and_harmless(tmp_path: Path) -> None:
    """The cassette hits a file size limit mid-run (as a full disk would): every request still gets
    its answer, the failure is on stderr, looptap exits non-zero, and the cassette holds whole
    records only; the key the requests carried (query and header) is printed nowhere."""
    key = "ltfszQ" + secrets.token_hex(16)
    limit = 48_000
    small_ca = tmp_path / "empty-ca.pem"
    small_ca.write_text("")  # keep the CA bundle looptap writes under the limit too
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    out = tmp_path / "run.jsonl"
    n = 20

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with FakeUpstream(delay=0.001) as up:
        proc = progress.run(
            [*RECORDER, "run", "-o", str(out), "--upstream", f"openai={up.url}", "--confdir", str(tmp_path / "conf"),  # noqa: E501
             "--", sys.executable, str(client), str(n), key],
            capture_output=True, text=True, env=_env(SSL_CERT_FILE=str(small_ca)), preexec_fn=limit_file_size,  # noqa: E501
        )  # fmt: skip
        served = len(up.llm_served())
    assert served == n
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"ok": n}, proc.stdout + proc.stderr
    assert proc.returncode == 3, proc.stderr
    assert "STORAGE ERROR" in proc.stderr and "could NOT be stored" in proc.stderr
    assert "Traceback" not in proc.stderr
    for i in range(len(key) - 7):
        assert key[i : i + 8] not in proc.stderr + proc.stdout, (
            "a piece of the key reached the terminal"
        )
    cas = read_records(out)
    assert not cas.problems, cas.problems  # the failed record was taken back: whole records only
    stored = len(cas.exchanges)
    assert 0 < stored < n
    assert out.stat().st_size <= limit
    m = re.search(r"([\d,]+) round trips? could NOT be stored", proc.stderr)
    assert m and int(m.group(1).replace(",", "")) == n - stored, proc.stderr
    for i, ex in enumerate(cas.exchanges):
        assert ex.request_json()["messages"][0]["content"].startswith(f"request {i} ")


@pytest.mark.slow(
    reason=(
        "the cassette replaced (said) or appended to: test_recorder_paths.py::"
        "test_an_existing_cassette_is_replaced_or_appended_to_as_documented by default"
    )
)
def test_recording_again_replaces_and_plus_appends(tmp_path: Path) -> None:
    """``-o FILE`` records afresh (saying it replaced the earlier run), ``-o +FILE`` appends (as
    mitmproxy's ``-w +FILE``); either way the summary describes this run, not the file's history."""
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    out = tmp_path / "run.jsonl"

    def record(target: str, n: int) -> subprocess.CompletedProcess[str]:
        with FakeUpstream(delay=0.001) as up:
            return progress.run(
                [*RECORDER, "run", "-o", target, "--upstream", f"openai={up.url}", "--confdir", str(tmp_path / "conf"),  # noqa: E501
                 "--", sys.executable, str(client), str(n), "k"],
                capture_output=True, text=True, env=_env(),
            )  # fmt: skip

    first = record(str(out), 3)
    assert first.returncode == 0, first.stderr
    assert f"3 round trips in {out}: 1 conversation" not in first.stderr  # three separate requests
    assert f"3 round trips in {out}" in first.stderr and "replacing" not in first.stderr
    again = record(str(out), 2)
    assert again.returncode == 0, again.stderr
    assert (
        f"replacing the earlier recording in {out}" in again.stderr
        and f"-o +{out} appends" in again.stderr
    )
    assert f"2 round trips in {out}" in again.stderr
    assert len(read_records(out).exchanges) == 2
    more = record(f"+{out}", 1)
    assert more.returncode == 0, more.stderr
    assert f"1 round trip appended in {out}" in more.stderr and "replacing" not in more.stderr
    cas = read_records(out)
    assert len(cas.exchanges) == 3 and not cas.problems


@pytest.mark.slow(
    reason=(
        "a named port kept and reported: "
        "test_listener_ports.py::test_a_port_the_user_named_is_never_changed by default"
    )
)
def test_the_named_port_is_the_one_reported_when_a_later_one_is_taken_too(tmp_path: Path) -> None:
    # --port P gives P, P+1, P+2 (the reverse listeners) and P+3 (the forward proxy): with P and
    # P+3 both taken, the start names P, the first in listener order.
    with socket.socket() as taken, socket.socket() as later:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        try:
            later.bind(("127.0.0.1", port + 3))
        except OSError:
            pytest.skip(f"port {port + 3} is in use already")
        taken.listen()
        later.listen()
        proc = progress.run(
            [*RECORDER, "record", "-o", str(tmp_path / "run.jsonl"), "--port", str(port), "--confdir", str(tmp_path / "conf")],  # noqa: E501
            capture_output=True, text=True, env=_env(),
        )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"looptap: error: cannot listen on 127.0.0.1:{port}: address already in use"
    ], proc.stderr
    assert proc.stdout == ""
