"""The pytest plugin's cassette paths when it records (issue 28 item 4; docs/reliability.md, "Paths
looptap writes"): a marker's path that holds something other than a cassette (a file of the
user's, a directory, a link) is refused when the test is set up, before anything is recorded, and
stays as it was; a cassette (or nothing) is written whole under a private name and put in place.

Run through the real recorder and a loopback fake upstream, so that an older plugin, which
recorded and then moved the recording over whatever was at the path, fails here."""

from __future__ import annotations

import os

import pytest

from tests.replay.test_plugin import _PROXY, HAVE_RECORDER, NOPLUG, REPO
from tests.support.upstream import FakeUpstream

pytest_plugins = ["pytester"]

PRECIOUS = "precious: not looptap's\n"

INNER = '''
import pytest
from openai import OpenAI

def ask():
    r = OpenAI(max_retries=0).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    return r.choices[0].message

@pytest.mark.looptap("notes.txt")
def test_into_a_file_of_mine(looptap):
    assert ask()

@pytest.mark.looptap("runs")
def test_into_a_directory(looptap):
    assert ask()

@pytest.mark.looptap("link.jsonl")
def test_into_a_link(looptap):
    assert ask()

@pytest.mark.looptap("fresh.jsonl")
def test_into_a_new_cassette(looptap):
    assert ask()
'''  # noqa: E501


@pytest.mark.skipif(
    not HAVE_RECORDER, reason=f"recorder environment missing ({_PROXY}); set LOOPTAP_PROXY_PYTHON"
)
def test_recording_never_replaces_what_is_not_a_cassette(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    from looptap.cassettes.storage import read_records

    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", _PROXY)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-recording")
    for k in ("OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(test_inner=INNER)
    notes = pytester.path / "notes.txt"
    notes.write_text(PRECIOUS)
    runs = pytester.path / "runs"
    runs.mkdir()
    victim = pytester.path / "victim.txt"
    victim.write_text(PRECIOUS)
    (pytester.path / "link.jsonl").symlink_to(victim)
    with FakeUpstream(delay=0.002) as up:
        result = pytester.runpytest_inprocess(
            *NOPLUG, "--looptap-record-mode=all", "--looptap-upstream", f"openai={up.url}"
        )
    out = result.stdout.str()
    result.assert_outcomes(passed=1, errors=3)  # refused at set-up, before anything is recorded
    assert f"the test's cassette {notes} already exists and is not looptap's" in out
    assert f"the test's cassette {runs} is a directory" in out
    assert "link.jsonl is a symbolic link" in out
    assert notes.read_text() == PRECIOUS  # was replaced by the recording
    assert os.listdir(runs) == []  # the recording was moved into it
    assert victim.read_text() == PRECIOUS and (pytester.path / "link.jsonl").is_symlink()
    fresh = pytester.path / "fresh.jsonl"
    assert len(read_records(fresh).exchanges) == 1  # the clean twin: recorded
    assert not [p.name for p in pytester.path.iterdir() if p.name.endswith(".tmp")]
