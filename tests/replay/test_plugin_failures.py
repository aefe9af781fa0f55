"""What a failing replay test prints: the two-failure example of issue 32 (a changed tool result,
and an agent whose SDK call raised on the miss), each failure at most ~30 lines that say once what
diverged (turn, path, layer, recorded vs got), with none of the SDK's frames; opt-in strictness
for unplayed turns (marker and ini); injected faults in the terminal summary.

``python -m tests.replay.test_plugin_failures`` prints the example's output and its line counts
(the figure quoted in docs/testing.md).
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from tests.replay.conftest import tool_loop, write
from tests.replay.test_plugin import NOPLUG, SDK_LOOP, _clean_env, expect

__all__ = ["_clean_env"]

pytest_plugins = ["pytester"]

#: Two tests that fail where the agent diverged: the tool's result changed (turn 1), the user's
#: question changed (turn 0).
TWO_FAILURES = SDK_LOOP.replace('RESULT = "sunny, 21 C"', 'RESULT = "rainy, 9 C"') + '''

@pytest.mark.looptap("cassettes/loop.jsonl")
def test_question_changed(looptap):
    client = OpenAI(max_retries=0)
    client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": "Weather in Rome?"}], tools=TOOLS)
'''  # noqa: E501

#: The most a failure's section may take (its ``___ test ___`` header to the next).
MOST_LINES = 30


def sections(out: str) -> dict[str, list[str]]:
    """The FAILURES section's per-test parts: name → lines."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        m = re.match(r"^_{3,} (\S+) _{3,}$", line)
        if m:
            current = parts.setdefault(m.group(1), [])
            continue
        if re.match(r"^={3,} ", line):
            current = None
            continue
        if current is not None:
            current.append(line)
    return parts


def _inner(pytester: pytest.Pytester, code: str) -> None:
    pytester.makepyfile(test_inner=textwrap.dedent(code))
    (pytester.path / "cassettes").mkdir(exist_ok=True)
    write(pytester.path / "cassettes" / "loop.jsonl", tool_loop())


def test_two_failures_are_short_and_say_the_divergence_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    _inner(pytester, TWO_FAILURES)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    parts = sections(out)
    assert set(parts) == {"test_loop", "test_question_changed"}, parts.keys()
    for name, lines in parts.items():
        text = "\n".join(lines)
        assert len(lines) <= MOST_LINES, f"{name}: {len(lines)} lines\n{text}"
        # no SDK frames
        assert "site-packages" not in text and "openai/_base_client.py" not in text, text
        assert text.count("closest recorded turn") == 1, text  # the explanation once
    loop = "\n".join(parts["test_loop"])
    assert (
        "conversation c1, turn 1 (seq 1)" in loop and "messages[3].content" in loop and "C:" in loop
    )
    assert 'recorded "sunny, 21 C", got "rainy, 9 C"' in loop
    assert "agent()" in loop  # the test's own line that made the call is still shown
    q = "\n".join(parts["test_question_changed"])
    assert "turn 0 (seq 0)" in q and "messages[1]" in q


UNPLAYED = (
    SDK_LOOP.replace('assert agent() == "It is sunny in Paris."', "agent(turns=1)")
    .replace("assert len(run.turns) == 2 and", "assert")
    .replace("    assert run.total_tokens == 120\n", "")
)


@pytest.mark.parametrize("how", ["marker", "ini"])
def test_unplayed_turns_fail_when_asked_by_marker_or_ini(
    pytester: pytest.Pytester, how: str
) -> None:
    pytest.importorskip("openai")
    code = UNPLAYED
    if how == "marker":
        code = code.replace(
            '@pytest.mark.looptap("cassettes/loop.jsonl")',
            '@pytest.mark.looptap("cassettes/loop.jsonl", fail_unplayed=True)',
        )
    else:
        pytester.makeini("[pytest]\nlooptap_fail_unplayed = true\n")
    _inner(pytester, code)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(failed=1)
    expect(
        result,
        "1 recorded round trip of *loop.jsonl was not played (*fail_unplayed):",
        "conversation c1, turn 1 (seq 1): POST /v1/chat/completions",
    )


def test_unplayed_turns_pass_by_default_and_a_marker_can_opt_out(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    pytester.makeini("[pytest]\nlooptap_fail_unplayed = true\n")
    _inner(
        pytester,
        UNPLAYED.replace(
            '@pytest.mark.looptap("cassettes/loop.jsonl")',
            '@pytest.mark.looptap("cassettes/loop.jsonl", fail_unplayed=False)',
        ),
    )
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(passed=1)


FAULTS = SDK_LOOP + '''

@pytest.mark.looptap("cassettes/loop.jsonl", fault="turn=0:truncate")
def test_truncated(looptap):
    try:
        agent()
    except Exception:
        pass
'''


def test_faults_in_the_summary_and_a_truncated_answer_counts_as_played(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("openai")
    _inner(pytester, FAULTS)
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    # the agent sends the cut arguments back: a miss at turn 1
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    line = next(ln for ln in out.splitlines() if "test_truncated: replay" in ln)
    assert "played 1 of 2" in line, line  # turn 0 was answered (cut), not "played 0 of 2"
    assert "test_truncated:   unplayed: conversation c1, turn 0" not in out, out
    assert (
        "test_truncated:   faults injected: 1" in out
        and "test_truncated:     request 1: turn=0:truncate at conversation c1, turn 0 (seq 0)"
        in out
    ), out


def main() -> int:  # pragma: no cover - the figure for docs/testing.md
    """Run the two-failure example in a temporary directory and print its output's line counts."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="looptap-two-failures-") as d:
        root = Path(d)
        (root / "test_inner.py").write_text(textwrap.dedent(TWO_FAILURES))
        (root / "cassettes").mkdir()
        write(root / "cassettes" / "loop.jsonl", tool_loop())
        env = {
            k: v
            for k, v in __import__("os").environ.items()
            if not k.endswith(("_BASE_URL", "_API_KEY")) and k != "CI"
        }
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *NOPLUG,
                "--looptap-record-mode=none",
                "test_inner.py",
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    print(out)
    parts = sections(out)
    print(
        f"whole output: {len(out.splitlines())} lines; per failure: "
        + ", ".join(f"{k} {len(v)}" for k, v in parts.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
