"""A question merged into the last message and answered in text (issue 90; docs/threading.md
"Context management", the question asked over the history in place).

The real client: langchain-anthropic 1.7.7's ``_merge_messages`` (``ChatAnthropic``) merges runs
of human messages into one user message of text blocks. An app whose history lost the model's
answer (it did not save the ``AIMessage``) and then adds the user's next question sends the
latest request again, the answer left out, the question appended to the last message's parts:
Claude Code's ``/compact`` shape. The bodies below are what ``ChatAnthropic._get_request_payload``
built from ``[System, Human(q1)]``, ``[System, Human(q1), Human(q2)]`` and then the history with
the answer saved (``…, AIMessage(a2), Human(q3)``): the next request carries the merged
question's text answer as the assistant message right after it, in the conversation's line.

That later request is the evidence that the merged question was the conversation going on
(one conversation, the first answer not echoed: ``C.assistant_not_echoed`` at #1); a summariser
asked so (``/compact``) has its answer carried as a summary in place of the history instead, a
side call (tests/cassettes/analysis/test_side_calls.py, test_context_management.py). Read with
hindsight (session 48): #1's turn moves into #0's conversation when #2 comes, its C layer and
tokens read again against #0, the side call's record gone, in the analysis kept whole and in
``show``/``show --json`` of a file grown and continued. On 20d0006a #1 was a new conversation
and #2 went on from it, nothing said (the three readings were strict xfails)."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
from scenarios import (
    anthropic_turn,
    conv_of,
    gemini_turn,
    run_of,
    serious,
    set_request_body,
    threads,
)

from looptap.cassettes.analysis import spill
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.support.analysed import cli_output, keep_every_run

SYSTEM = "You are a helpful travel assistant."
Q1 = "What is the capital of Portugal?"
A1 = "The capital of Portugal is Lisbon."
Q2 = "And what is its population?"
A2 = "Lisbon has about 545,000 inhabitants in the city proper."
Q3 = "Thanks. Which museums should I see there?"
A3 = "The Gulbenkian Museum and the National Tile Museum."


def _turn(messages: list[dict[str, object]], answer: str) -> Exchange:
    ex = anthropic_turn(messages, answer)
    body = orjson.loads(ex.request_body)
    ex.request_body = orjson.dumps({**body, "system": SYSTEM})
    return ex


def _litellm(family: str, body: dict[str, object], answer: str) -> Exchange:
    """A turn whose request is LiteLLM 1.106.2's body as its provider transformation built it."""
    if family == "anthropic":
        ex = anthropic_turn(body["messages"], answer)  # type: ignore[arg-type]
    else:
        ex = gemini_turn(body["contents"], answer)  # type: ignore[arg-type]
    return set_request_body(ex, orjson.dumps(body))


def _text(family: str, text: str) -> dict[str, object]:
    return {"type": "text", "text": text} if family == "anthropic" else {"text": text}


def _message(family: str, role: str, *texts: str) -> dict[str, object]:
    parts = [_text(family, t) for t in texts]
    if family == "anthropic":
        return {"role": role, "content": parts}
    return {"role": "model" if role == "assistant" else role, "parts": parts}


def _litellm_body(family: str, messages: list[dict[str, object]]) -> dict[str, object]:
    """What LiteLLM 1.106.2 sends for ``[system, *messages]``: ``AnthropicConfig.transform_request``
    (every content a list of text blocks, the system prompt one too) and Gemini's
    ``_transform_request_body`` (``system_instruction``; roles ``user``/``model``): consecutive
    user messages merged into one, their texts its blocks (``prompt_templates/factory.py``)."""
    if family == "anthropic":
        return {
            "model": "claude-sonnet-4-5",
            "messages": messages,
            "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM}],
        }
    return {"contents": messages, "system_instruction": {"parts": [{"text": SYSTEM}]}}


def _litellm_run(family: str) -> list[Exchange]:
    """``completion(messages=[system, user(q1)])``, then the app's history without the answer
    plus the next question (``[system, user(q1), user(q2)]``: merged), then with the answer
    saved (``…, assistant(a2), user(q3)``); bodies as LiteLLM 1.106.2 built them (read with
    ``/work/main/.venv-clients``' litellm, no request sent)."""
    merged: dict[str, object] = _message(family, "user", Q1, Q2)
    return [
        _litellm(family, _litellm_body(family, [_message(family, "user", Q1)]), A1),
        _litellm(family, _litellm_body(family, [merged]), A2),
        _litellm(
            family,
            _litellm_body(
                family, [merged, _message(family, "assistant", A2), _message(family, "user", Q3)]
            ),
            A3,
        ),
    ]


def _langchain_anthropic_run() -> list[Exchange]:
    blocks = [{"type": "text", "text": Q1}, {"type": "text", "text": Q2}]
    merged = {"role": "user", "content": blocks}
    return [
        _turn([{"role": "user", "content": Q1}], A1),
        _turn([merged], A2),  # the answer A1 lost, Q2 merged into the last message
        _turn([merged, {"role": "assistant", "content": A2}, {"role": "user", "content": Q3}], A3),
    ]


def test_a_merged_question_answered_in_text_is_the_conversation_going_on() -> None:
    run = run_of(_langchain_anthropic_run())
    assert threads(run) == [[0, 1, 2]]
    assert ("C.assistant_not_echoed", 1) in serious(run)


def test_before_the_proof_it_reads_as_a_side_call_and_says_nothing_false() -> None:
    """Until the next request carries its answer, #1 is a side call asked in place over #0
    (a summariser's shape): no warning."""
    run = run_of(_langchain_anthropic_run()[:2])
    assert threads(run) == [[0], [1]]
    side = conv_of(run, 1)
    assert (side.branch, side.parent_seq) == ("side_call", 0)
    assert serious(run) == []


def test_the_moved_turn_is_read_against_the_turn_it_followed() -> None:
    """#1 is the conversation's turn 1 after #0: the one message it sent changed (Q2 appended
    to Q1's blocks, kept as they were), #0's answer not echoed; #2 goes on from #1."""
    run = run_of(_langchain_anthropic_run())
    (conv,) = run.conversations
    assert (conv.id, conv.branch) == ("c1", None)
    one, two = run.turns[1], run.turns[2]
    assert (one.conversation, one.index, one.previous_seq) == ("c1", 1, 0)
    assert (two.conversation, two.index, two.previous_seq) == ("c1", 2, 1)
    assert one.c.echoed_assistant is False and one.c.kept == 1
    (f,) = [f for f in run.findings if f.code == "C.assistant_not_echoed"]
    assert (f.conversation, f.turn, f.related_turn) == ("c1", 1, 0)
    assert not [f for f in run.findings if f.code == "C.history_mutated"]
    costs = [run.turns[k].tokens.cost for k in range(3)]
    assert run.turns[2].tokens.cumulative_cost == sum(c for c in costs if c is not None)


@pytest.mark.parametrize("family", ["anthropic", "gemini"])
def test_later_in_a_conversation_the_merged_question_is_its_next_turn(family: str) -> None:
    """The merge after an answer the app saved (a registered prefix finds the request: the
    history's last message alone changed): #2 asks Q2 merged into Q1's message, A1 dropped;
    #3 carries A2 after it. One conversation; #2 against #1."""
    q0, a0 = "Hello, I am planning a trip.", "Happy to help with your trip."
    head = [_message(family, "user", q0), _message(family, "assistant", a0)]
    merged = _message(family, "user", Q1, Q2)
    bodies = [
        ([_message(family, "user", q0)], a0),
        ([*head, _message(family, "user", Q1)], A1),
        ([*head, merged], A2),
        ([*head, merged, _message(family, "assistant", A2), _message(family, "user", Q3)], A3),
    ]
    run = run_of([_litellm(family, _litellm_body(family, m), a) for m, a in bodies])
    assert threads(run) == [[0, 1, 2, 3]]
    assert serious(run) == [("C.assistant_not_echoed", 2)]
    assert (run.turns[2].index, run.turns[2].previous_seq) == (2, 1)


def _chat_merging_every_question(rounds: int) -> list[Exchange]:
    """Each round the app asks a question, loses the answer, merges a follow-up into the
    question's message (a side call asked in place), and keeps the follow-up's answer: the
    next round's question carries it (the proof)."""
    history: list[dict[str, object]] = []
    out = []
    for k in range(rounds):
        q, follow = f"Question {k}: which city?", f"And its river {k}?"
        out.append(_turn([*history, {"role": "user", "content": q}], f"Answer {k}."))
        merged = {
            "role": "user",
            "content": [{"type": "text", "text": q}, _text("anthropic", follow)],
        }
        out.append(_turn([*history, merged], f"River {k}."))
        history = [*history, merged, {"role": "assistant", "content": f"River {k}."}]
    return out


def test_a_chat_merging_every_question_is_one_conversation() -> None:
    """Every proved merge joins the chat (the later ones found by their registered histories,
    renamed when their turn joined); the last, never proved, stays a side call."""
    exchanges = _chat_merging_every_question(3)
    run = run_of(exchanges)
    assert threads(run) == [[0, 1, 2, 3, 4], [5]]
    assert serious(run) == [("C.assistant_not_echoed", 1), ("C.assistant_not_echoed", 3)]
    # the proving request sent again, and another question after a joined turn: no traceback,
    # read in the chat
    again = run_of([*exchanges[:3], copy.deepcopy(exchanges[2])])
    assert threads(again) == [[0, 1, 2, 3]]
    branch = _turn(
        [
            *orjson.loads(exchanges[2].request_body)["messages"][:-1],
            {"role": "user", "content": "Other?"},
        ],
        "Other.",
    )
    forked = run_of([*exchanges[:3], branch])
    assert threads(forked) == [[0, 1, 2, 3]]  # (its last question edited: as in any chat)


def test_another_system_prompt_after_it_proves_nothing() -> None:
    """The next request carries #1's answer under another system prompt: not the same agent
    going on; #1 stays a side call."""
    exchanges = _langchain_anthropic_run()
    body = orjson.loads(exchanges[2].request_body)
    exchanges[2] = set_request_body(
        exchanges[2], orjson.dumps({**body, "system": "You grade travel answers."})
    )
    run = run_of(exchanges)
    assert sorted(threads(run)) == [[0], [1, 2]]


def test_the_parent_going_on_first_keeps_the_reading() -> None:
    """#0's conversation went on (its answer echoed, another question) before #1's answer came
    back: #1 stays a side call (the move is made only while its parent is the latest)."""
    first, merged, after = _langchain_anthropic_run()
    on = _turn(
        [
            {"role": "user", "content": Q1},
            {"role": "assistant", "content": A1},
            {"role": "user", "content": "And Spain's?"},
        ],
        "Madrid.",
    )
    run = run_of([first, merged, on, after])
    assert sorted(threads(run)) == [[0, 2], [1, 3]]
    assert serious(run) == []


@pytest.mark.parametrize("family", ["anthropic", "gemini"])
def test_litellm_merged_question_answered_in_text_is_the_conversation_going_on(
    family: str,
) -> None:
    run = run_of(_litellm_run(family))
    assert threads(run) == [[0, 1, 2]]
    assert ("C.assistant_not_echoed", 1) in serious(run)


@pytest.mark.parametrize("family", ["anthropic", "gemini"])
def test_litellm_before_the_proof_it_reads_as_a_side_call(family: str) -> None:
    """LiteLLM's shape (every content a list of blocks; Gemini's ``parts``) reads as
    langchain-anthropic's does: #1 a side call of #0 until #2 carries its answer."""
    run = run_of(_litellm_run(family)[:2])
    assert threads(run) == [[0], [1]]
    assert serious(run) == []


# --- every view: show, show --json, a kept analysis, a grown file continued -----------------------


@pytest.fixture
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return keep_every_run(tmp_path, monkeypatch)


@pytest.mark.usefixtures("_cache")
@pytest.mark.parametrize("spilled", [False, True], ids=["in_memory", "spilled"])
@pytest.mark.parametrize("cuts", [[1], [2], [1, 2]])
def test_a_grown_file_continued_reads_as_the_whole_file(
    cuts: list[int], spilled: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shown (its analysis kept) after #0, after #1 (the side call, not yet proved), then
    grown: ``show --json`` and ``show`` print what a fresh read of every byte prints, one
    conversation, the side call's record gone, the dropped answer said at #1 (also with every
    table of the analysis spilled past 1 entry)."""
    if spilled:
        monkeypatch.setattr(spill, "KEEP", 1)
    whole = tmp_path / "whole.jsonl"
    with CassetteWriter(whole) as w:
        for i, ex in enumerate(_langchain_anthropic_run()):
            ex.seq = i
            w.append(ex)
    head, *records = whole.read_bytes().splitlines(keepends=True)
    path = tmp_path / "grown.jsonl"
    path.write_bytes(head)
    done = 0
    for k in [*cuts, len(records)]:
        with path.open("ab") as f:
            f.write(b"".join(records[done:k]))
        done = k
        rc, out, err = cli_output("show", "--json", str(path))
        assert rc == 0 and not err, err
    rc, fresh, err = cli_output("show", "--json", "--no-cache", str(path))
    assert out == fresh
    assert cli_output("show", str(path))[1] == cli_output("show", "--no-cache", str(path))[1]
    rows = [orjson.loads(line) for line in fresh.splitlines()]
    assert [(r["conversation"], r["turn"], r["previous_seq"]) for r in rows] == [
        ("c1", 0, None),
        ("c1", 1, 0),
        ("c1", 2, 1),
    ]
    assert {r["conversation_kind"] for r in rows} == {"main"}
    assert [[f["code"] for f in r["findings"]] for r in rows] == [
        [],
        ["C.assistant_not_echoed"],
        [],
    ]
    # #1's cost is in the conversation's running total (it was its side call's)
    costs = [Decimal(r["tokens"]["cost"]) for r in rows]
    assert [Decimal(r["tokens"]["cumulative_cost"]) for r in rows] == [
        sum(costs[: k + 1]) for k in range(3)
    ]
