"""One recipe records tests from any project (issue 43 item 2): docs/testing.md's recipe, followed
as written by a toy project in a temporary directory outside the checkout.

The project is ``TMP/project`` with docs/testing.md's example as ``tests/test_weather_agent.py``;
looptap is "checked out beside it at ``../looptap``": ``TMP/looptap/.venv-proxy`` links to the
suite's recorder environment, so the recipe's relative ``LOOPTAP_PROXY_PYTHON`` resolves there, and
only there. The recipe's lines run one by one in one bash, in the project, with the test
environment's ``pytest`` on ``PATH``:

- ``python -m pip install -e '../looptap[html]'`` is not run: the test environment has looptap
  installed (checked: pytest finds the plugin);
- the recording line against the real API is not run (nothing here may reach it): its sibling
  with ``--looptap-upstream openai=http://127.0.0.1:8000`` is, with that URL replaced by the
  loopback fake upstream's;
- everything else runs as written, the replay (``CI=1``) after the fake has stopped.

Also: a ``LOOPTAP_PROXY_PYTHON`` that names no file is said as missing, in one line, with the path
it was taken as (relative to where pytest runs, ``~`` expanded).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, clean_env, needs_recorder
from tests.support.upstream import FakeUpstream

REPO = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
pytest_plugins = ["pytester"]


def _recipe() -> list[str]:
    """The command lines of docs/testing.md's recording recipe (the block that sets
    ``LOOPTAP_PROXY_PYTHON``), comments dropped."""
    page = (REPO / "docs" / "testing.md").read_text()
    block = next(b for b in _BLOCK.findall(page) if "LOOPTAP_PROXY_PYTHON" in b)
    lines = [
        ln.split("   #")[0].split("  #")[0].strip()
        for ln in block.replace("\\\n", " ").splitlines()
    ]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _example() -> str:
    page = (REPO / "docs" / "testing.md").read_text()
    start = page.index("```python\n") + len("```python\n")
    return page[start:page.index("```", start)]


def test_docs_recipe_is_the_same_in_testing_and_recorder() -> None:
    """One recipe: docs/recorder.md gives the same block as docs/testing.md (fails on main:
    three)."""
    blocks = {}
    for name in ("testing.md", "recorder.md"):
        page = (REPO / "docs" / name).read_text()
        blocks[name] = [b for b in _BLOCK.findall(page) if "LOOPTAP_PROXY_PYTHON" in b]
    assert len(blocks["testing.md"]) == 1 and blocks["recorder.md"] == blocks["testing.md"], blocks
    assert "--looptap-upstream" in blocks["testing.md"][0]


def _bash(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return progress.run(
        ["bash", "-o", "pipefail", "-c", line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


@needs_recorder
@pytest.mark.slow(
    reason=(
        "the plugin recording through the recorder in a project of its own (about 6 s of "
        "CPU): the docs' recipe is checked by "
        "test_docs_recipe_is_the_same_in_testing_and_recorder, and the plugin records and "
        "replays through the recorder in test_plugin.py"
    )
)
def test_a_project_outside_the_checkout_records_and_replays_as_the_docs_say(tmp_path: Path) -> None:
    """Fails on main: the recipe there (``.venv-proxy/bin/python``) only resolved inside looptap's
    checkout, and a relative path was not taken from where pytest runs."""
    assert not tmp_path.resolve().is_relative_to(REPO.resolve())
    assert PROXY_PYTHON is not None
    looptap = tmp_path / "looptap"
    looptap.mkdir()
    (looptap / ".venv-proxy").symlink_to(PROXY_PYTHON.parent.parent)
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_weather_agent.py").write_text(_example())
    lines = _recipe()
    assert any(ln.startswith("export LOOPTAP_PROXY_PYTHON=../") for ln in lines), lines
    # The test environment's pytest (with looptap installed: the recipe's pip line), this
    # checkout's code, no variable of this machine steering the recorder or the SDK.
    env = clean_env(scrub=("LOOPTAP_PROXY_PYTHON", "CI", "PYTEST_ADDOPTS"))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    script: list[str] = []
    cassette = project / "tests" / "cassettes" / "test_weather_agent" / "test_weather.jsonl"
    with FakeUpstream(delay=0.001, default_scenario="tool_loop:1") as up:
        for line in lines:
            if "pip install" in line:
                continue  # the test environment is what it installs
            if "--looptap-record-mode=once" in line and "--looptap-upstream" not in line:
                continue  # the real API: never reached from here
            if "--looptap-upstream" in line:
                line = line.replace("http://127.0.0.1:8000", up.url)
                assert up.url in line, line
                record = " && ".join(
                    [*script, line + " -p no:cacheprovider -p no:textual-snapshot"]
                )
                r = _bash(record, project, env)
                assert r.returncode == 0, f"{line}\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
                assert "recorded 2 round trips into" in r.stdout, r.stdout[-4000:]
                continue
            if line.startswith("CI=1 pytest"):
                replay_line = line
                continue
            script.append(line)
        served = up.llm_served()
    assert len(served) == 2 and cassette.exists(), (served, cassette)
    # Offline: the fake is gone; the cassette answers.
    r = _bash(
        " && ".join([*script, replay_line + " -p no:cacheprovider -p no:textual-snapshot"]),
        project,
        env,
    )
    assert r.returncode == 0, f"{replay_line}\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
    assert "1 passed" in r.stdout and "played 2 of 2 recorded round trips" in r.stdout, r.stdout[
        -3000:
    ]


_INNER = "import pytest\n@pytest.mark.looptap\ndef test_x(looptap):\n    pass\n"


def _missing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> pytest.RunResult:
    """The inner project's pytest, in this process (the plugin's words are what is checked):
    pytester's directory is the project, ``LOOPTAP_PROXY_PYTHON`` set to ``value``."""
    pytester.makepyfile(test_inner=_INNER)
    for name in ("CI", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", value)
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "--looptap-record-mode=once"
    )


def test_a_missing_recorder_python_is_said_as_missing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on main: "recording needs the looptap recorder … create it with `python3 -m venv …`"
    for a path that is only wrong, with a chained exception."""
    project = pytester.path
    r = _missing(pytester, monkeypatch, "../looptap/.venv-proxy/bin/python")
    wanted = (
        "looptap: cannot record "
        f"{project / 'cassettes' / 'test_inner' / 'test_x.jsonl'} (mode once): "
        "LOOPTAP_PROXY_PYTHON=../looptap/.venv-proxy/bin/python: no such file "
        f"({project.parent / 'looptap/.venv-proxy/bin/python'}, relative to where pytest runs)"
    )
    out = r.stdout.str()
    assert r.ret == 1, out
    assert out.count("LOOPTAP_PROXY_PYTHON=") == 1 and wanted in out, out
    assert (
        "python3 -m venv" not in out and "During handling" not in out and "Traceback" not in out
    ), out


def test_a_recorder_python_under_home_is_expanded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    r = _missing(pytester, monkeypatch, "~/.looptap-proxy/bin/python")
    assert (
        "LOOPTAP_PROXY_PYTHON=~/.looptap-proxy/bin/python: no such file "
        f"({home}/.looptap-proxy/bin/python)" in r.stdout.str()
    ), r.stdout.str()
