"""The E check on a coding agent's traced shell commands (issue 93: ``E.ended_on_failed_test``),
on the real agents (pinned in .npm-agents) against a scripted model: the model runs the project's
tests with ``python -m pytest`` (they fail), and then either ends its turn at once — saying the
tests still fail (info: an honest end), or claiming a fix (``E.ignored_tool_error``, a warning, by
the rule of any tool's error: issue 102) — or writes the fix, runs the tests again (they pass) and
ends: no finding.
The cut check (``C.shell_output_cut``) must stay silent on all of them."""

from __future__ import annotations

import itertools
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.shell import read_processes
from looptap.proxy.shell_trace import probe
from tests.clients.test_agents import gemini_router
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
            return gemini_router(req) or Reply.say("(side call)", what="side")
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
#: Gemini CLI's four runs: nightly (its shell calls are linked and judged in test_shell_tools.py;
#: about 55 s a run at load 25 since its router is answered, 100 s before).
SLOW = pytest.mark.slow(reason="Gemini CLI's runs: its calls are linked in test_shell_tools.py")
RUNS = [pytest.param(a, marks=SLOW) if a == "gemini-cli" else a for a in AGENTS]
#: The endings judged: on Claude Code by default; opencode's (the same Anthropic family, the same
#: judge; its shell calls are linked, its failed result read and its output order judged by default
#: in test_shell_tools.py and below) nightly, about 8 s of CPU a run.
REPEAT = pytest.mark.slow(reason="opencode's endings: Claude Code's show the judge by default")
ENDED = [
    pytest.param(a, marks=REPEAT if a == "opencode" else SLOW) if a != "claude-code" else a
    for a in AGENTS
]


@pytest.fixture(scope="module")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


def _run(agent: str, how: str, tmp_path: Path, confdir: Path, monkeypatch: Any) -> Any:
    import tests.clients.test_shell_tools as tools

    monkeypatch.setattr(tools, "_route", lambda work, planted: _route(work, how))
    monkeypatch.setattr(tools, "TEST", TEST)
    # (the project's pytest without the plugins of the suite's environment: about 10 s less a
    # run under the tracer on a loaded machine; the output and the exit status are pytest's own)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    r = AGENTS[agent](tmp_path, confdir, False)
    assert (r["work"] / "calc.py").read_text() == (FIXED if how == "fixed" else CALC), r["why"]
    return r


@pytest.mark.parametrize("how", ["claims", "honest"])
@pytest.mark.parametrize("agent", ENDED)
def test_ending_on_a_failed_test_run_is_found(
    agent: str, how: str, tmp_path: Path, confdir: Path, monkeypatch: Any
) -> None:
    r = _run(agent, how, tmp_path, confdir, monkeypatch)
    shell, why = r["shell"], r["why"]
    (test,) = [c for c in shell.calls if c.command == PYTEST]
    assert test.process is not None and test.process.exit == 1, (shell.as_json(), why)
    found = [
        f
        for f in r["run"].analysis.findings
        if f.code.startswith(("E.ended", "E.ignored", "C.shell"))
    ]
    # a claim of success is E.ignored_tool_error, by the rule of any tool's error (issue 102)
    said = (
        ("E.ended_on_failed_test", "info")
        if how == "honest"
        else ("E.ignored_tool_error", "warning")
    )
    assert [(f.code, f.severity.value, f.tool_call_id) for f in found] == [(*said, test.call_id)], (
        found,
        why,
    )
    (f,) = found
    ended = r["run"].analysis.turns[f.seq]
    assert not ended.e.tool_calls and ended.e.text == ENDINGS[how]
    assert f.seq == test.result_seq  # rooted at the turn that ended, the one the result reached


@pytest.mark.parametrize("agent", ENDED)
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


# -- C.shell_output_reordered on the real agents --------------------------------------------------

#: Twelve writes on each stream in turn, back to back (one ``write`` each): the order the tracer
#: records, and the order a client that reads the two pipes apart may not keep.
PIECES = [
    f"{name} piece number {i:02} of twelve\n" for i in range(12) for name in ("stdout", "stderr")
]
ORDER_PY = (
    f"import os\nfor k, piece in enumerate({PIECES!r}):\n    os.write(1 + k % 2, piece.encode())\n"
)
INTERLEAVE = f"{shlex.quote(sys.executable)} order.py"


def _interleave_route(work: Path, planted: bool) -> Any:
    (work / "order.py").write_text(ORDER_PY)

    def route(req: ScriptedRequest) -> Reply:
        shell = next((t for t in SHELL_TOOLS if t in req.tools), None)
        if shell is None or not any(t in req.tools for t in WRITE_TOOLS):
            return gemini_router(req) or Reply.say("(side call)", what="side")
        if not req.tool_results():
            args = {"command": INTERLEAVE, "description": "Print in turn"}
            return Reply.tool(shell, args, what="step1")
        return Reply.say("It printed both streams.", what="answer")

    return route


def _sent_order(sent: str) -> list[int] | None:
    """The written indices of :data:`PIECES` in the order ``sent`` holds them (each once), or
    ``None`` when it does not hold each once."""
    if any(sent.count(p.strip()) != 1 for p in PIECES):
        return None
    return sorted(range(len(PIECES)), key=lambda i: sent.find(PIECES[i].strip()))


@pytest.mark.parametrize("agent", RUNS)
def test_output_written_in_turn_is_ordered_and_judged(
    agent: str, tmp_path: Path, confdir: Path, monkeypatch: Any
) -> None:
    """The tracer records the order of the writes (the program's record holds its pieces as
    written); the agent's result is then judged on it where the record can prove what reached the
    agent: opencode (its ``$SHELL -c CMD``; it appends each pipe's chunks as they arrive, so back
    to back writes may come in another order: ``C.shell_output_reordered`` exactly when the
    result's order, found by the test, is another than written and not the streams apart),
    never on Claude Code and Gemini CLI (their wrappers redirect; Claude Code keeps the written
    order, Gemini CLI 0.61.0 reordered these writes too)."""
    import tests.clients.test_shell_tools as tools

    monkeypatch.setattr(tools, "_route", _interleave_route)
    r = AGENTS[agent](tmp_path, confdir, False)
    shell, why = r["shell"], r["why"]
    (call,) = [c for c in shell.calls if c.command == INTERLEAVE]
    assert call.process is not None and call.process.exit == 0, (shell.as_json(), why)
    ran = [
        p
        for p in read_processes(r["out"]).processes
        if "order.py" in " ".join(p.then or p.argv) and not _is_shell(p.then or p.argv)
    ]
    assert [p.pieces() for p in ran] == [[(1 + k % 2, t) for k, t in enumerate(PIECES)]], why
    found = [f for f in r["run"].analysis.findings if f.code == "C.shell_output_reordered"]
    order = _sent_order(call.result or "")
    assert order is not None, (call.result, why)
    streams = [1 + i % 2 for i in order]
    apart = sum(1 for a, b in itertools.pairwise(streams) if a != b) == 1
    if agent != "opencode":  # (Gemini CLI reorders back-to-back writes too: not judged)
        assert found == [], (call.result, found)
        (reason,) = shell.order_not_judged
        assert "redirects" in reason
        return
    if order == sorted(order) or apart:
        assert found == [], (call.result, found)
    else:
        (f,) = found
        assert (f.tool_call_id, f.seq) == (call.call_id, call.result_seq)
        assert f.details["order_sent"] == [i + 1 for i in order]


def _is_shell(argv: tuple[str, ...]) -> bool:
    return argv[0].rsplit("/", 1)[-1] in ("bash", "sh")
