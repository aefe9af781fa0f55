"""Issue 48: the recorder's writer keeps the analysis of the run it records (proxy/keeper.py,
docs/kept-analysis.md): after a recording of at least ``kept.MIN_BYTES`` the first ``looptap show``
takes that analysis, analyses nothing, and prints what a fresh analysis prints, byte for byte; a
recorder killed with its writer leaves nothing a reader takes. Real recorder (mitmproxy, in its own
environment, and the keeper under it), real sockets, a loopback upstream serving recorded
answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cassettes.reading import kept
from cassettes.storage.store import read_records
from tests.support import progress
from tests.support.analysed import Analysed, cli_output
from tests.support.recorder import RECORDER, clean_env, keepers, needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = needs_recorder

# An agent of N conversations of three turns each (one streamed, one answered 500 in the third
# conversation), each opening with a long system prompt of its own: 40 make about 1.3 MB.
CLIENT = textwrap.dedent(
    """
    import json, os, sys, time, urllib.error, urllib.request
    base = os.environ["OPENAI_BASE_URL"]

    def post(body, scenario):
        req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "authorization": "Bearer sk-keeper-test",
                                              "x-fake-upstream": scenario})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            return exc.read()

    for c in range(int(sys.argv[1])):
        msgs = [{"role": "system", "content": f"conversation {c}: " + " ".join(f"w{c}-{k}" for k in range(4000))}]
        for t in range(3):
            msgs.append({"role": "user", "content": f"question {t} of conversation {c}"})
            post({"model": "gpt-4o-mini", "messages": msgs, "stream": t == 1}, "server_error" if (c, t) == (2, 2) else "text")
            msgs.append({"role": "assistant", "content": f"answer {t}"})
    print("sent", flush=True)
    parent = os.getppid()
    while len(sys.argv) > 2 and os.getppid() == parent:  # then wait for the recorder to be killed
        time.sleep(0.1)
    """  # noqa: E501
)






@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache of the test's own, for the recorder (its keeper) and for the shows in this
    process."""
    monkeypatch.setenv("LOOPTAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOPTAP_NO_CACHE", raising=False)
    yield tmp_path / "cache"


def _fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bytes, str]]:
    with monkeypatch.context() as m:
        m.setenv("LOOPTAP_NO_CACHE", "1")
        return [cli_output("show", str(path)), cli_output("show", "--json", str(path))]


def _record(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    """``looptap run`` of the 40-conversation agent into ``path``, against a loopback upstream;
    the recorder's output, once it has exited cleanly."""
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    with FakeUpstream(delay=0.001) as up:
        proc = progress.run(
            [*RECORDER, "run", "-o", str(path), "--upstream", f"openai={up.url}", "--confdir", str(tmp_path / "conf"),  # noqa: E501
             "--", sys.executable, str(client), "40"],
            capture_output=True, text=True, env=clean_env(),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_first_show_after_a_recording_takes_the_analysis_the_writer_kept(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    _record(tmp_path, path)
    assert path.stat().st_size >= kept.MIN_BYTES
    where = kept.location(path)
    assert where is not None
    # The keeper finishes on its own after the recorder has exited (it is still reading, or
    # keeping).
    progress.until(lambda: not keepers(path), what="the keeper, keeping the analysis")
    assert where.exists(), "no analysis was kept by the recorder"
    assert where.with_suffix(".views").exists()  # and show's printed views of it
    counted = Analysed(monkeypatch)
    taken = [cli_output("show", str(path)), cli_output("show", "--json", str(path))]
    assert counted.added == 0  # the first show analysed nothing: it took the writer's analysis
    fresh = _fresh(path, monkeypatch)
    assert counted.added == 2 * 120  # (a fresh analysis reads every round trip)
    assert taken == fresh
    assert b"A.http_error" in fresh[0][1] and fresh[0][0] == 0


def test_a_recorder_killed_with_its_writer_leaves_nothing_a_reader_takes(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    path = tmp_path / "run.jsonl"
    with FakeUpstream(delay=0.001) as up:
        proc = subprocess.Popen(
            [*RECORDER, "run", "-o", str(path), "--upstream", f"openai={up.url}", "--confdir", str(tmp_path / "conf"),  # noqa: E501
             "--", sys.executable, str(client), "40", "wait"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=clean_env(), start_new_session=True,  # noqa: E501
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            for line in progress.lines(proc, proc.stdout, what="the agent's requests"):
                if line.strip() == "sent":
                    break
            found = progress.until(
                lambda: keepers(path), pids=[proc.pid], what="the writer to start its keeper"
            )
            # the recorder, its writer and the agent: not the keeper
            os.killpg(proc.pid, signal.SIGKILL)
            progress.wait(proc)
            # The keeper sees its writer gone without a word, and ends keeping nothing.
            progress.until(lambda: not keepers(path), pids=found, what="the keeper to end")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    where = kept.location(path)
    assert where is not None and not where.exists()
    records = len(read_records(path).exchanges)  # (the writer's backlog, if any, went with it)
    assert records > 40
    counted = Analysed(monkeypatch)
    first = [cli_output("show", str(path)), cli_output("show", "--json", str(path))]
    assert counted.added == records  # analysed afresh (and kept by this first reader)
    assert first == _fresh(path, monkeypatch)


def test_the_run_summary_and_a_show_right_after_it_wait_for_the_keeper_and_take_its_analysis(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No waiting for the keeper here: `looptap run`'s closing summary reads the run as `show`
    # does, so it waits for the keeper finishing it (cassettes/reading/keeping.py) and takes its
    # analysis; by the time `run` has exited the analysis is kept, and a `show` takes it.
    path = tmp_path / "run.jsonl"
    proc = _record(tmp_path, path)
    where = kept.location(path)
    assert where is not None and where.exists(), "the summary did not wait for the keeper"
    counted = Analysed(monkeypatch)
    taken = [cli_output("show", str(path)), cli_output("show", "--json", str(path))]
    assert counted.added == 0
    assert taken == _fresh(path, monkeypatch)
    said = proc.stderr
    assert f"120 round trips in {path}: 40 conversations, 120 turns" in said
    assert "findings (warnings and errors) by layer: E 0, A 1, C 80" in said  # as `show` counts
