"""The E check on a coding agent's traced shell commands (issue 93: ``E.ended_on_failed_test``),
on the real agents (pinned in .npm-agents) against a scripted model: the model runs the project's
tests with ``python -m pytest`` (they fail), and then either ends its turn at once — claiming a
fix, or saying the tests still fail: looptap reads no words, so both are found alike, which is why
the finding is info — or writes the fix, runs the tests again (they pass) and ends: no finding.
The cut check (``C.shell_output_cut``) must stay silent on all of them."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.proxy.shell_trace import probe
from tests.clients.test_shell_tools import (
    CALC,
    FIXED,
    READ_FIRST,
    SHELL_TOOLS,
    WRITE_TOOLS,
    _claude,
    _gemini,
    _opencode,
)
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(probe() is not None, reason=f"no process tracer here: {probe()}"),
]

TEST = "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYTEST = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider test_calc.py"
ENDINGS = {
    "claims": "Fixed calc.add; the tests pass.",
    "honest": "The test still fails: add subtracts. I could not fix it.",
    "fixed": "Fixed calc.add; the tests pass.",
}


def _route(work: Path, how: str) -> Any:
    def route(req: ScriptedRequest) -> Reply:
        shell = next((t for t in SHELL_TOOLS if t in req.tools), None)
        write = next((t for t in WRITE_TOOLS if t in req.tools), None)
        if shell is None or write is None:
            return Reply.say("(side call)", what="side")
        steps: list[tuple[str, dict[str, Any]]] = [
            (shell, {"command": PYTEST, "description": "Run the tests"})
        ]
        if how == "fixed":
            path, content = WRITE_TOOLS[write]
            if write in READ_FIRST:
                name, arg = READ_FIRST[write]
                steps.append((name, {arg: str(work / "calc.py")}))
            steps += [
                (write, {path: str(work / "calc.py"), content: FIXED}),
                (shell, {"command": PYTEST, "description": "Run the tests again"}),
            ]
        done = len(req.tool_results())
        if done < len(steps):
            name, args = steps[done]
            return Reply.tool(name, args, what=f"step{done + 1}")
        return Reply.say(ENDINGS[how], what="answer")

    return route


AGENTS = {"claude-code": _claude, "gemini-cli": _gemini, "opencode": _opencode}
#: Gemini CLI's runs take about 100 s each here (its start and its model's turns), four of them:
#: with LOOPTAP_SLOW=1 only (its shell calls are linked and judged in test_shell_tools.py).
SLOW = pytest.mark.skipif(
    not os.environ.get("LOOPTAP_SLOW"), reason="LOOPTAP_SLOW=1 (Gemini CLI: ~100 s a run)"
)
RUNS = [pytest.param(a, marks=SLOW) if a == "gemini-cli" else a for a in AGENTS]


@pytest.fixture(scope="module")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


def _run(agent: str, how: str, tmp_path: Path, confdir: Path, monkeypatch: Any) -> Any:
    import tests.clients.test_shell_tools as tools

    monkeypatch.setattr(tools, "_route", lambda work, planted: _route(work, how))
    monkeypatch.setattr(tools, "TEST", TEST)
    r = AGENTS[agent](tmp_path, confdir, False)
    assert (r["work"] / "calc.py").read_text() == (FIXED if how == "fixed" else CALC), r["why"]
    return r


@pytest.mark.parametrize("how", ["claims", "honest"])
@pytest.mark.parametrize("agent", RUNS)
def test_ending_on_a_failed_test_run_is_found(
    agent: str, how: str, tmp_path: Path, confdir: Path, monkeypatch: Any
) -> None:
    r = _run(agent, how, tmp_path, confdir, monkeypatch)
    shell, why = r["shell"], r["why"]
    (test,) = [c for c in shell.calls if c.command == PYTEST]
    assert test.process is not None and test.process.exit == 1, (shell.as_json(), why)
    found = [f for f in r["run"].analysis.findings if f.code.startswith(("E.ended", "C.shell"))]
    assert [(f.code, f.severity.value, f.tool_call_id) for f in found] == [
        ("E.ended_on_failed_test", "info", test.call_id)
    ], (found, why)
    (f,) = found
    ended = r["run"].analysis.turns[f.seq]
    assert not ended.e.tool_calls and ended.e.text == ENDINGS[how]
    assert f.seq == test.result_seq  # rooted at the turn that ended, the one the result reached


@pytest.mark.parametrize("agent", RUNS)
def test_a_run_fixed_and_tested_again_has_no_finding(
    agent: str, tmp_path: Path, confdir: Path, monkeypatch: Any
) -> None:
    r = _run(agent, "fixed", tmp_path, confdir, monkeypatch)
    shell, why = r["shell"], r["why"]
    tests = [c for c in shell.calls if c.command == PYTEST]
    assert [c.process.exit if c.process else None for c in tests] == [1, 0], (shell.as_json(), why)
    found = [f for f in r["run"].analysis.findings if f.code.startswith(("E.ended", "C.shell"))]
    assert found == [], [(f.code, f.message) for f in found]
    again = open_run(r["out"], whole=True)  # (read again from the file: the same)
    assert not [f for f in again.analysis.findings if f.code.startswith("E.ended")]
