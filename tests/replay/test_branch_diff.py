"""Issue 42, "what the fork changed is the fork's": ``looptap diff RUN BRANCH`` labels the model
the fork asked for (``--model``: the body's ``model``, a Gemini path's ``/models/NAME:``) and the
items its edits rewrote as the fork's, not as the client's C; the differences of the branch's later
requests that follow from one change fold under it. Files written with the header a fork writes
(``fork.origin_meta``); tests/replay/test_fork.py and test_fork_edits.py check real forks."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.replay.forking.fork import ForkSource, origin_meta
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.wire import Exchange, mark
from tests.inspector.fork_fixture import (
    EDITED,
    ORIGINAL,
    answer_body,
    chat_exchange,
    origin,
    tool_call,
    tool_result,
)

SYSTEM = {"role": "system", "content": "Use the weather tool."}
USER = {"role": "user", "content": "Weather in Paris, then somewhere warm?"}


def _write(
    folder: Path,
    exs_a: list[Exchange],
    exs_b: list[Exchange],
    cursor: str,
    model: str | None,
    edits: list[str],
    turn: int,
) -> tuple[Path, Path]:
    run, branch = folder / "run.jsonl", folder / "branch.jsonl"
    with CassetteWriter(run) as w:
        for ex in exs_a:
            w.append(ex)
    meta = origin_meta(
        ForkSource(run, parse_cursor(cursor)), model, {"c1": turn}, edits, {"c1": turn}, branch
    )
    with CassetteWriter(branch, meta={"source": "looptap run --from", "origin": meta}) as w:
        for ex in exs_b:
            w.append(ex)
    return run, branch


def _diff(run: Path, branch: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, dict]:
    rc = main(["diff", str(run), str(branch)])
    out = capsys.readouterr().out
    assert main(["diff", str(run), str(branch), "--json"]) == rc
    return rc, out, orjson.loads(capsys.readouterr().out)


def test_the_model_the_fork_asked_for_is_the_forks_not_the_clients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h1 = [SYSTEM, USER, tool_call("call_A1", "Paris"), tool_result("call_A1", ORIGINAL)]
    h2 = [*h1, tool_call("call_A2", "Lyon"), tool_result("call_A2", "sunny, 19 C in Lyon")]
    same = [
        chat_exchange(h1, answer_body(None, ("call_A2", "Lyon")), "gpt-4o-mini"),
        chat_exchange(h2, answer_body("Sunny in Paris and Lyon."), "gpt-4o-mini"),
    ]
    run, branch = _write(tmp_path, origin(), same, "turn=1", "gpt-4o-mini", [], 1)
    rc, out, doc = _diff(run, branch, capsys)
    assert "turn 1 (seq 1 ↔ 0): fork: model gpt-4o → gpt-4o-mini (asked with --model)" in out, out
    assert "the model requested changed" not in out and " C: " not in out, out
    # turn 2's, folded
    assert [d["layer"] for d in doc["divergences"]] == ["fork"] and len(
        doc["divergences"][0]["folded"]
    ) == 1
    assert rc == 0  # the new model did what the old one did: nothing but the fork's own change


GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/{}:generateContent"


def _gemini(model: str, text: str) -> Exchange:
    body = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]})
    answer = orjson.dumps(
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {
                "promptTokenCount": 5,
                "candidatesTokenCount": 3,
                "totalTokenCount": 8,
            },
            "modelVersion": model,
        }
    )
    return Exchange(
        "POST",
        GEMINI.format(model),
        [("content-type", "application/json")],
        body,
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, answer)],
        ttfb=0.01,
        started=1763768400.0,
    )


def test_on_gemini_the_model_in_the_path_is_the_forks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, branch = _write(
        tmp_path,
        [_gemini("gemini-2.0-flash", "Sunny.")],
        [_gemini("gemini-2.5-pro", "Sunny, 21 C.")],
        "conversation=c1",
        "gemini-2.5-pro",
        [],
        0,
    )
    rc, out, doc = _diff(run, branch, capsys)
    assert (
        "fork: model gemini-2.0-flash → gemini-2.5-pro (asked with --model, in the path)" in out
    ), out
    assert "the agent called" not in out and " C: " not in out, out
    assert [d["layer"] for d in doc["divergences"]] == ["fork", "E"] and rc == 1


def test_the_differences_that_follow_from_an_edit_fold_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h1 = [SYSTEM, USER, tool_call("call_A1", "Paris"), tool_result("call_A1", EDITED)]
    h2 = [*h1, tool_call("call_B1", "Nice"), tool_result("call_B1", "sunny, 24 C in Nice")]
    branch = [
        chat_exchange(h1, answer_body(None, ("call_B1", "Nice"))),
        chat_exchange(h2, answer_body("Go to Nice: the storm grounds Paris.")),
    ]
    for ex in branch:
        ex.edits = [mark("tool_result[call_A1]", "turn=1", ["messages", 3, "content"], ORIGINAL)]
    run, path = _write(tmp_path, origin(), branch, "turn=1", None, ["tool_result[call_A1]"], 1)
    rc, out, doc = _diff(run, path, capsys)
    assert rc == 1
    top = [(d["turn"], d["layer"]) for d in doc["divergences"]]
    # the edit, and what the model did at each turn
    assert top == [(1, "fork"), (1, "E"), (2, "E")], top
    folded = doc["divergences"][0]["folded"]
    # the edit again, Nice's call and result
    assert [(f["turn"], f["layer"]) for f in folded] == [(2, "fork"), (2, "C"), (2, "C")]
    # no C line of its own
    assert " C: " not in "\n".join(ln for ln in out.splitlines() if ln.startswith("  turn ")), out
    assert "then 3 differences of B's requests that follow from it (not the client's own):" in out
    assert (
        "turn 1 (seq 1 ↔ 0): fork: edited tool_result[call_A1] at messages[3] (asked with --edit)"
        in out
    )


# -- a divergence shows where the values differ, and names the call whose result differs ----------

PROMPT = "You are a careful travel agent. " * 8  # 256 characters the two requests share


def test_a_divergence_shows_a_window_around_the_first_differing_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from looptap.cassettes.matching import Matcher, Miss, json_diff

    rec, got = (
        PROMPT + "Current mood of the user: calm and patient.",
        PROMPT + "Current mood of the user: angry and hurried.",
    )
    (change,) = json_diff({"system": rec}, {"system": got})
    line = change.describe()
    assert "calm" in line and "angry" in line, line  # the part that differs, on both sides
    assert line.count("…") >= 2 and len(line) < 240, line
    # a replay miss (the fork's prefix, pytest, replay): the kept change shows the same window
    exs = [chat_exchange([{"role": "system", "content": rec}, USER], answer_body("Hello."))]
    miss = Matcher(exs).match(
        "POST",
        "/v1/chat/completions",
        [],
        orjson.dumps(
            {
                "model": "gpt-4o",
                "messages": [{"role": "system", "content": got}, USER],
                "tools": orjson.loads(exs[0].request_body)["tools"],
            }
        ),
    )
    assert isinstance(miss, Miss)
    text = str(miss)
    assert "calm" in text and "angry" in text, text
    # diff of two runs
    run_a, run_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, system in ((run_a, rec), (run_b, got)):
        with CassetteWriter(path) as w:
            w.append(
                chat_exchange([{"role": "system", "content": system}, USER], answer_body("Hello."))
            )
    assert main(["diff", str(run_a), str(run_b)]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("messages[0].content:"))
    assert "calm" in line and "angry" in line, out


ANTHROPIC = "https://api.anthropic.com/v1/messages"


def _anthropic(messages: list[dict[str, object]]) -> Exchange:
    body = orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": messages})
    answer = orjson.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Done."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 40, "output_tokens": 3},
        }
    )
    return Exchange(
        "POST",
        ANTHROPIC,
        [("content-type", "application/json")],
        body,
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, answer)],
        ttfb=0.01,
        started=1763768400.0,
    )


def _parallel(paris: str, lyon: str) -> list[dict[str, object]]:
    return [
        {"role": "user", "content": "Weather in Paris and Lyon?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_PARIS",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_LYON",
                    "name": "get_weather",
                    "input": {"city": "Lyon"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_PARIS", "content": paris},
                {"type": "tool_result", "tool_use_id": "toolu_LYON", "content": lyon},
            ],
        },
    ]


def test_parallel_anthropic_results_name_the_call_whose_result_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from looptap.cassettes.matching import Matcher, Miss

    recorded = _anthropic(_parallel("sunny, 21 C", "sunny, 19 C"))
    miss = Matcher([recorded]).match(
        "POST",
        "/v1/messages",
        [("anthropic-version", "2023-06-01")],
        _anthropic(_parallel("sunny, 21 C", "STORM")).request_body,
    )
    assert isinstance(miss, Miss)
    assert [str(v) for v in miss.verdicts] == [
        "C: the tool result for toolu_LYON changed (messages[2].content[1].content)"
    ], miss.verdicts
    run_a, run_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, ex in ((run_a, recorded), (run_b, _anthropic(_parallel("sunny, 21 C", "STORM")))):
        with CassetteWriter(path) as w:
            w.append(ex)
    assert main(["diff", str(run_a), str(run_b)]) == 1
    out = capsys.readouterr().out
    assert "C: the tool result for toolu_LYON changed" in out and "toolu_PARIS" not in out, out
