"""A pytest test recorded once passes its replay the next day; a real change still fails (issue 44,
must-show 2).

The inner project's agent (the real openai SDK) puts ``datetime.now()`` in its system prompt and
its tool returns a fresh ``uuid4()`` beside the size of a file. It is recorded once through the
plugin (``--looptap-record-mode=once``, the real recorder, a scripted loopback model), then
replayed offline (``CI=1``) in a pytest process whose clock libfaketime moved a day on
(tests.support.clock): the date and the uuid differ from the recording, are tolerated, and the test
passes. The same replay after the file grew (the tool's result says another size) fails, the diff
naming the turn and the path.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from looptap.cassettes.reading import open_run
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.clock import moved, needs_faketime
from tests.support.recorder import PROXY_PYTHON, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

REPO = Path(__file__).resolve().parents[2]
pytestmark = [needs_recorder, needs_faketime]

AGENT = '''
import datetime, json, os, uuid
from pathlib import Path

import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "file_size", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def file_size(path):
    return f"{os.path.getsize(path)} bytes (scan {uuid.uuid4()})"


def agent():
    client = OpenAI(max_retries=0)
    system = {"role": "system", "content": f"You measure files. Now: {datetime.datetime.now().isoformat()}."}
    Path("prompt.txt").write_text(system["content"])
    msgs = [system, {"role": "user", "content": "How big is data.txt?"}]
    for _ in range(3):
        m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
        if not m.tool_calls:
            return m.content
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": file_size(json.loads(c.function.arguments)["path"])} for c in m.tool_calls]


@pytest.mark.looptap
def test_measures(looptap):
    assert agent().startswith("data.txt holds ")


@pytest.mark.looptap("cassettes/test_agent/test_measures.jsonl")
def test_measures_after_the_file_grew(looptap):
    """The same recording, a real change in the tool's result (one byte more)."""
    data = Path("data.txt")
    before = data.read_text()
    data.write_text(before + "x")
    try:
        agent()
    finally:
        data.write_text(before)
'''  # noqa: E501


def route(req: ScriptedRequest) -> Reply:
    results = req.tool_results()
    if not results:
        return Reply.tool("file_size", {"path": "data.txt"})
    return Reply.say(f"data.txt holds {results[-1].split(' (')[0]}.")


def _pytest(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/test_agent.py",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:textual-snapshot",
        *args,
    ]
    return progress.run(
        argv, cwd=project, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


@pytest.mark.slow(
    reason=(
        "the pytest plugin recording through the recorder under faketime (about 9 s of CPU): "
        "the next day's replay runs through the plugin in test_volatile_replay.py's "
        "test_pytest_replay_of_a_dated_agent_passes_and_a_real_change_fails"
    )
)
def test_a_dated_agent_recorded_once_replays_the_next_day_and_a_real_change_fails(
    tmp_path: Path,
) -> None:
    pytest.importorskip("openai")
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_agent.py").write_text(AGENT)
    (project / "data.txt").write_text("x" * 120)
    env = clean_env(
        scrub=("CI", "PYTEST_ADDOPTS", "LOOPTAP_PROXY_PYTHON"),
        OPENAI_API_KEY="sk-test-next-day",
        LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON),
    )
    cassette = project / "tests" / "cassettes" / "test_agent" / "test_measures.jsonl"
    with ScriptedUpstream(route) as up:
        rec = _pytest(
            project,
            "-k",
            "not grew",
            "--looptap-record-mode=once",
            "--looptap-upstream",
            f"openai={up.url}",
            env=env,
        )
        served = len(up.log)
    assert rec.returncode == 0 and "recorded 2 round trips into" in rec.stdout, (
        rec.stdout[-4000:] + rec.stderr[-2000:]
    )
    assert served == 2 and cassette.exists()
    recorded_prompt = (project / "prompt.txt").read_text()
    header = open_run(cassette).header
    # the plugin's recording says where it ran
    assert header is not None and header["meta"]["cwd"] == str(project)

    # The next day (libfaketime in the pytest process only), offline: the date and the uuid differ,
    # tolerated, the first test passes; in the second the file grew, a real change: it fails with
    # the diff.
    replay = _pytest(project, env={**env, "CI": "1", **moved("+1d")})
    out = replay.stdout + replay.stderr
    assert replay.returncode == 1 and "1 failed, 1 passed" in replay.stdout, out[-4000:]
    assert "FAILED tests/test_agent.py::test_measures_after_the_file_grew" in replay.stdout, out[
        -4000:
    ]
    assert "replay miss at conversation c1, turn 1 (seq 1)" in out, out[-4000:]
    assert "messages[3].content" in out and "121 bytes" in out, out[-4000:]
    # The failed test keeps what it sent, as a cassette beside its web page: the evidence the rule
    # proposal reads against the recording (issue 44 item 5, "or a failed replay"). Proposed from
    # that pair: the date and the scan's uuid are the built-in detectors' (nothing to add), the size
    # is a real divergence, never proposed.
    kept = re.search(
        r"looptap: what this test sent: (\S+\.jsonl); rules that would make it match", out
    )
    assert kept is not None, out[-4000:]
    assert f"looptap rules propose {cassette} {kept.group(1)}" in out, out[-4000:]
    # (in this process: what it says; tests/replay/test_rules_propose.py runs the command)
    proposed = cli_run("rules", "propose", str(cassette), kept.group(1))
    assert proposed.returncode == 1, proposed.stdout + proposed.stderr  # a real divergence remains
    assert (
        "a real divergence: not proposed" in proposed.stdout
        and "in the result of tool file_size" in proposed.stdout
    ), proposed.stdout
    assert "still diverging:\n  c1 turn 1 at messages[3].content" in proposed.stdout, (
        proposed.stdout
    )
    assert "sk-test-next-day" not in Path(kept.group(1)).read_text()
    replayed_prompt = (project / "prompt.txt").read_text()
    when = [
        dt.datetime.fromisoformat(re.search(r"Now: (\S+)\.$", p).group(1))
        for p in (recorded_prompt, replayed_prompt)
    ]  # type: ignore[union-attr]
    assert dt.timedelta(hours=23) < when[1] - when[0] < dt.timedelta(hours=25), (
        recorded_prompt,
        replayed_prompt,
    )
    recorded_result = json.dumps(list(open_run(cassette, whole=True).exchanges)[1].request_json())
    assert re.search(r"120 bytes \(scan [0-9a-f-]{36}\)", recorded_result)
