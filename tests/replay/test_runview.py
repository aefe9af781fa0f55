"""``Run``: the assertion helpers tests use on a recorded or replayed run."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.reading import Run
from tests.replay.conftest import CALL, SYSTEM, USER, chat_exchange, chat_response, tool_loop, write


def test_clean_tool_loop() -> None:
    run = Run(tool_loop())
    assert len(run.turns) == 2 and [len(c) for c in run.conversations] == [2]
    assert len(run) == 2
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (100, 20, 120)
    assert run.cost is not None and run.cost > 0 and run.cost_complete
    run.assert_no_findings(layer="C")


def test_a_dropped_tool_result_is_a_c_finding() -> None:
    """The client sent the next turn without the tool result: layer C, named with its turn."""
    bad = [
        tool_loop()[0],
        chat_exchange(
            [SYSTEM, USER, CALL, {"role": "user", "content": "and?"}], chat_response("Hm.")
        ),
    ]
    run = Run(bad)
    c = run.findings("C")
    assert c and all(f.layer == "C" for f in c)
    with pytest.raises(AssertionError) as info:
        run.assert_no_findings(layer="C")
    text = str(info.value)
    assert text.startswith(f"{len(c)} finding(s) in layer C:") and "conversation c1, turn 1" in text
    assert "call_A1" in text
    run.assert_no_findings(layer="E")  # other layers are clean
    with pytest.raises(ValueError, match="layer must be"):
        run.findings("X")


def test_unknown_price_is_unknown_not_zero() -> None:
    ex = tool_loop()
    for e in ex:
        e.request_body = e.request_body.replace(b'"gpt-4o"', b'"no-such-model-x"')
        e.response_chunks = [
            (t, c.replace(b'"gpt-4o-2024-08-06"', b'"no-such-model-x"'))
            for t, c in e.response_chunks
        ]
        e.url = "http://127.0.0.1:9/v1/chat/completions"
    run = Run(ex)
    assert run.cost is None and not run.cost_complete


def test_from_cassette(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", tool_loop())
    assert len(Run.from_cassette(path).turns) == 2
