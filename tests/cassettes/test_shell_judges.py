"""The checks on traced shell commands (issue 93, items 2 and 3; cassettes/shell/_judge.py), on
cassettes written with the records ``looptap run --shell-trace`` writes (tests/cassettes/
shell_fixture.py): ``C.shell_output_cut`` by verbatim comparison only, judged only where the
record of the output can hold nothing but what reached the agent; ``E.ended_on_failed_test`` by
the evidence (a test runner's exit, the result the model got, the answer that ended the turn),
never by the answer's words. The real agents: tests/clients/test_shell_judges.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.shell._judge import runs_tests
from tests.cassettes.shell_fixture import Cmd, shell_run

LONG = "".join(f"line {i:03}: ok\n" for i in range(100))  # 1,400 characters, no control
PYTEST = "python -m pytest -q"
PY = ["python3", "-m", "pytest", "-q"]


def _found(tmp_path: Path, steps: list[Any], answer: str = "Done.") -> list[Any]:
    run = open_run(shell_run(tmp_path / "run.jsonl", steps, answer), whole=True)
    return [
        f
        for f in run.analysis.findings
        if f.code
        in (
            "C.shell_output_cut",
            "E.ended_on_failed_test",
            "C.shell_failure_hidden",
            "C.shell_output_reordered",
        )
    ]


def _codes(found: list[Any]) -> list[tuple[str, int | None]]:
    return [(f.code, f.seq) for f in found]


# -- C.shell_output_cut --------------------------------------------------------------------------


def test_a_result_holding_the_start_of_the_output_is_cut(tmp_path: Path) -> None:
    found = _found(
        tmp_path, [Cmd("ls -l", stdout=LONG, result=LONG[:300] + "\n(output truncated)")]
    )
    (f,) = found
    assert (f.code, f.severity.value, f.seq, f.tool_call_id) == (
        "C.shell_output_cut",
        "info",
        1,
        "call_0",
    )
    assert f.details == {
        "stream": "stdout",
        "kept_start": 300,
        "kept_end": 0,
        "printed": 1300,
        "pid": 1010,
    }


def test_a_result_holding_the_end_of_the_output_is_cut(tmp_path: Path) -> None:
    (f,) = _found(tmp_path, [Cmd("ls -l", stdout=LONG, result="[cut]\n" + LONG[-200:])])
    assert (f.details["kept_start"], f.details["kept_end"]) == (0, 200)


def test_a_result_holding_both_ends_is_cut_in_the_middle(tmp_path: Path) -> None:
    (f,) = _found(tmp_path, [Cmd("ls -l", stdout=LONG, result=LONG[:300] + "\n…\n" + LONG[900:])])
    assert (f.details["kept_start"], f.details["kept_end"]) == (300, 400)
    assert "the first 300 and the last 400" in f.message


@pytest.mark.parametrize(
    "result",
    [
        LONG,  # all of it
        LONG + "\n[exit code 0]",  # all of it, and the client's word
        "".join(reversed(LONG.splitlines(keepends=True))),  # all of it, another order: not a cut
        LONG[:1300],  # 93%: too little left out
        "done",  # none of it: not a cut of it
        LONG[:300] + LONG[1290:] + LONG[300:1290],  # all of it, reordered
    ],
)
def test_what_is_not_a_verbatim_cut_is_not_said(tmp_path: Path, result: str) -> None:
    assert _found(tmp_path, [Cmd("ls -l", stdout=LONG, result=result)]) == []


@pytest.mark.parametrize(
    ("cmd", "why"),
    [
        # Claude Code's wrapper: `pwd -P >| FILE` after the command writes on the shell's stdout
        # into a file, which the tracer counts as the command's stdout
        (Cmd("ls -l 2>/dev/null", stdout=LONG, result=LONG[:300]), "redirects"),
        (Cmd("ls -l | head -5", stdout=LONG, result=LONG[:300]), "redirects"),
        (Cmd("echo $(ls -l)", stdout=LONG, result=LONG[:300]), "redirects"),
        # a program that starts others (pytest's subprocesses, a runner's workers)
        (
            Cmd(
                "make",
                stdout=LONG,
                result=LONG[:300],
                then=["make"],
                children=[(["cc", "-c", "x.c"], "")],
            ),
            "starts",
        ),
        # longer than the tracer keeps: only its start is known
        (Cmd("ls -l", stdout=LONG, stdout_bytes=90000, result=LONG[:300]), "longer"),
        # a colour escape, which a client may strip
        (Cmd("ls -l", stdout="\x1b[32m" + LONG, result=LONG[:300]), "control"),
    ],
)
def test_what_the_record_cannot_prove_is_counted_not_judged(
    tmp_path: Path, cmd: Cmd, why: str
) -> None:
    path = shell_run(tmp_path / "run.jsonl", [cmd])
    run = open_run(path, whole=True)
    assert not [f for f in run.analysis.findings if f.code == "C.shell_output_cut"]
    ((reason, n),) = run.shell.not_judged.items()
    assert why in reason and n == 1
    assert run.shell.as_json()["cut_not_judged"] == {reason: 1}


def test_a_command_that_execs_its_program_is_judged(tmp_path: Path) -> None:
    """``bash -c "ls -l"`` runs ``ls`` in the same process (the record's ``then``): one program,
    nothing between it and the agent's pipe."""
    path = shell_run(tmp_path / "run.jsonl", [Cmd("ls -l", stdout=LONG, result=LONG[:300])])
    lines = path.read_bytes().replace(b'"files":[]}', b'"files":[],"then":["ls","-l"]}', 1)
    path.write_bytes(lines)
    run = open_run(path, whole=True)
    assert [f.code for f in run.analysis.findings if f.code.startswith("C.shell")] == [
        "C.shell_output_cut"
    ]


# -- E.ended_on_failed_test ----------------------------------------------------------------------


def _failing() -> Cmd:
    return Cmd(
        PYTEST,
        exit=1,
        stdout="F\n1 failed in 0.01s\n",
        children=[(PY, "F\n1 failed in 0.01s\n", 1)],
    )


@pytest.mark.parametrize("answer", ["The tests still fail; I give up.", "Done."])
def test_ending_the_turn_right_after_a_failed_test_run_is_found(
    tmp_path: Path, answer: str
) -> None:
    """An answer that claims no success ends as an honest report does (hence info)."""
    (f,) = _found(tmp_path, [Cmd("cat calc.py", stdout="x"), _failing()], answer)
    assert (f.code, f.severity.value, f.seq, f.turn, f.tool_call_id) == (
        "E.ended_on_failed_test", "info", 2, 2, "call_1",
    )  # fmt: skip
    assert f.details == {"exit": 1, "signal": None, "command_seq": 1}


@pytest.mark.parametrize("answer", ["Fixed; all tests pass.", "All tests pass.", "All green!"])
def test_a_claim_of_success_after_a_failed_test_run_ignores_the_error(
    tmp_path: Path, answer: str
) -> None:
    """Issue 102 item 6: the claim is ``E.ignored_tool_error``, by the rule of any tool's error
    (the result said the failure, the answer claims a success and owns no failure)."""
    found = _found(tmp_path, [Cmd("cat calc.py", stdout="x"), _failing()], answer)
    found += [
        f
        for f in open_run(tmp_path / "run.jsonl", whole=True).analysis.findings
        if f.code == "E.ignored_tool_error"
    ]
    (f,) = found
    assert (f.code, f.severity.value, f.seq, f.turn, f.tool_call_id) == (
        "E.ignored_tool_error", "warning", 2, 2, "call_1",
    )  # fmt: skip
    assert f.details["exit"] == 1 and f.details["claim"]


def test_a_stated_non_zero_exit_then_a_claim_is_found_without_the_tracer(tmp_path: Path) -> None:
    """The result says the exit status (``[exit code 3]``): the wire alone tells the model it
    failed, so the claim after it is judged by the analysis, once (the tracer's check adds none)."""
    cmd = Cmd(PYTEST, exit=3, stdout="", result="[exit code 3]", children=[(PY, "", 3)])
    _found(tmp_path, [cmd], "All tests pass.")
    found = [
        f
        for f in open_run(tmp_path / "run.jsonl", whole=True).analysis.findings
        if f.code.startswith("E.")
    ]
    assert [(f.code, f.severity.value, f.seq, f.details.get("exit")) for f in found] == [
        ("E.ignored_tool_error", "warning", 1, 3)
    ]


def test_a_fix_tested_again_is_not_found(tmp_path: Path) -> None:
    passed = Cmd(PYTEST, exit=0, stdout="1 passed\n", children=[(PY, "1 passed\n")])
    steps = [_failing(), ("write", {"path": "/w/calc.py", "content": "x"}, "written"), passed]
    assert _found(tmp_path, steps) == []


def test_a_failed_test_run_then_more_work_is_not_found(tmp_path: Path) -> None:
    """The turn that ended did not follow the failing run: the model went on (an edit) first."""
    steps = [_failing(), ("write", {"path": "/w/calc.py", "content": "x"}, "written")]
    assert _found(tmp_path, steps) == []


def test_a_hidden_failure_is_cs_finding_not_es(tmp_path: Path) -> None:
    """The client told the model the failing run passed: the model was not told, so it is
    ``C.shell_failure_hidden`` (on the same round trip), and no E finding."""
    found = _found(tmp_path, [Cmd(PYTEST, exit=1, stdout="", result="ok", children=[(PY, "", 1)])])
    assert _codes(found) == [("C.shell_failure_hidden", 1)]


def test_a_failed_command_that_is_no_test_run_is_not_found(tmp_path: Path) -> None:
    """``grep`` exits 1 when nothing matches: not a test run, not judged."""
    assert (
        _found(tmp_path, [Cmd("grep TODO calc.py", exit=1, stdout="", result="[exit code 1]")])
        == []
    )


def test_the_test_runner_may_be_below_the_shell(tmp_path: Path) -> None:
    """``cd tests && pytest``: the shell runs pytest as its child; pytest's own exit counts."""
    cmd = Cmd(
        "cd tests && pytest -q",
        exit=1,
        stdout="1 failed\n",
        children=[(["pytest", "-q"], "1 failed\n", 1)],
    )
    path = shell_run(tmp_path / "run.jsonl", [cmd])
    run = open_run(path, whole=True)
    assert [f.code for f in run.analysis.findings if f.code.startswith("E.ended")] == [
        "E.ended_on_failed_test"
    ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pytest", "-q"], True),
        (["/usr/bin/python3.12", "-m", "pytest"], True),
        (["python", "-u", "-m", "unittest", "discover"], True),
        (["go", "test", "./..."], True),
        (["npm", "test"], True),
        (["npm", "run", "test"], True),
        (["make", "-j4", "check"], True),
        (["cargo", "test"], True),
        (["python", "test_calc.py"], False),  # a script: not known to be a test run
        (["python", "-c", "import pytest"], False),
        (["npm", "install"], False),
        (["grep", "test", "x"], False),
        (["make"], False),
        ([], False),
    ],
)
def test_test_runners_are_known_by_their_argv(argv: list[str], expected: bool) -> None:
    assert runs_tests(argv) is expected


# -- C.shell_output_reordered --------------------------------------------------------------------

#: Three writes on each stream in turn (what tests/clients/test_shell_judges.py's script does).
OUTS = [f"stdout piece number {i} of three\n" for i in range(3)]
ERRS = [f"stderr piece number {i} of three\n" for i in range(3)]
WRITTEN = [OUTS[0], ERRS[0], OUTS[1], ERRS[1], OUTS[2], ERRS[2]]


def _interleaved(result: str, command: str = "python3 order.py", **kw: Any) -> Cmd:
    order = [
        [1 + k % 2, len("".join((OUTS if k % 2 == 0 else ERRS)[: k // 2 + 1]))] for k in range(6)
    ]
    kw.setdefault("order", order)
    return Cmd(command, stdout="".join(OUTS), stderr="".join(ERRS), result=result, **kw)


def test_output_the_client_reordered_is_said_as_info(tmp_path: Path) -> None:
    # opencode 1.18.33's shape (tests/clients/test_shell_judges.py): it appends each pipe's
    # chunks as they arrive, and back-to-back writes arrive in another order than written
    sent = OUTS[0] + ERRS[0] + OUTS[1] + OUTS[2] + ERRS[1] + ERRS[2]
    (f,) = _found(tmp_path, [_interleaved(sent)])
    assert (f.code, f.severity.value, f.seq, f.tool_call_id) == (
        "C.shell_output_reordered",
        "info",
        1,
        "call_0",
    )
    assert f.details["order_sent"] == [1, 2, 3, 5, 4, 6]
    assert f.details["written"] == ["stdout", "stderr"] * 3
    assert "its piece 4 is the stdout piece written 5th" in f.message


@pytest.mark.parametrize(
    "sent",
    [
        "".join(WRITTEN),  # as written (Claude Code, Gemini CLI: one descriptor for both)
        "".join(WRITTEN) + "\n[exit code 0]",
        "Output:\n" + "\n".join(WRITTEN),  # as written, something between the pieces
    ],
)
def test_output_in_the_written_order_is_not_said(tmp_path: Path, sent: str) -> None:
    path = shell_run(tmp_path / "run.jsonl", [_interleaved(sent)])
    run = open_run(path, whole=True)
    assert _found(tmp_path, [_interleaved(sent)]) == []
    assert run.shell.as_json()["order_not_judged"] == {}


@pytest.mark.parametrize(
    ("cmd", "why"),
    [
        # each stream whole, one after the other (Codex 0.169's "Output:", a client's labelled
        # "Stdout:"/"Stderr:" fields): the streams kept apart, which is no order of the writes
        (_interleaved("".join(OUTS) + "".join(ERRS)), "apart"),
        (_interleaved("Stdout:\n" + "".join(OUTS) + "Stderr:\n" + "".join(ERRS)), "apart"),
        (_interleaved("".join(ERRS) + "".join(OUTS)), "apart"),
        # what the record cannot prove: a redirection, a cut order, longer than kept, a control
        (_interleaved("x" + "".join(reversed(WRITTEN)), "python3 order.py 2>&1"), "redirects"),
        (_interleaved("".join(reversed(WRITTEN)), order_cut=True), "not wholly"),
        (_interleaved("".join(reversed(WRITTEN)), stdout_bytes=9000), "longer"),
        # a piece the result does not hold once (cut, or said twice)
        (_interleaved(ERRS[0] + OUTS[0]), "not once"),
        (_interleaved("".join(reversed(WRITTEN)) + OUTS[1]), "not once"),
    ],
)
def test_what_the_order_record_cannot_prove_is_counted_not_judged(
    tmp_path: Path, cmd: Cmd, why: str
) -> None:
    run = open_run(shell_run(tmp_path / "run.jsonl", [cmd]), whole=True)
    assert not [f for f in run.analysis.findings if f.code == "C.shell_output_reordered"]
    ((reason, n),) = run.shell.as_json()["order_not_judged"].items()
    assert why in reason and n == 1


@pytest.mark.parametrize(
    "order",
    [
        [[1, 10], [2, 5], [1, 5]],  # an end going back
        [[3, 10]],  # no such stream
        [[True, 10]],
        [[1, 10**6]],  # past the kept text
        "1,2",
    ],
)
def test_an_order_not_of_the_tracers_form_is_not_read(order: Any) -> None:
    from looptap.cassettes.shell._records import process

    rec = {"pid": 1, "argv": ["sh"], "started": 1.0, "stdout": "a" * 40, "stderr": "b" * 40}
    p = process({**rec, "order": order})
    assert p is not None and p.order == () and p.order_cut and p.pieces() is None
    ok = process({**rec, "order": [[1, 20], [2, 40], [1, 40]]})
    assert ok is not None
    assert ok.pieces() == [(1, "a" * 20), (2, "b" * 40), (1, "a" * 20)]
