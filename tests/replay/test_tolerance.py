"""The tolerant prefix's rule (issue 44, item 3): a request that differs from its recorded turn only
in what the client's tools returned is that turn, in position; anything else the model reads
differently is not (cassettes/matching/_tolerated.py, Matcher.in_position)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from looptap.cassettes.matching import (
    Matcher,
    Recorded,
    json_diff,
    request_key,
    tool_result_changes,
)
from looptap.cassettes.wire import Exchange

CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
RESPONSES = "https://api.openai.com/v1/responses"


def _chat(
    result: str, system: str = "List files.", user: str = "Which files?", call_id: str = "call_A1"
) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "ls", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ],
    }


def _anthropic(
    result: Any,
    is_error: bool | None = None,
    extra_text: str | None = None,
    use_id: str = "toolu_1",
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": result}
    if is_error is not None:
        block["is_error"] = is_error
    content = [block] + ([{"type": "text", "text": extra_text}] if extra_text is not None else [])
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Which files?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}],
            },
            {"role": "user", "content": content},
        ],
    }


def _responses(output: str) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": output}],
    }


def _tolerated(url: str, a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]] | None:
    ka, kb = (request_key("POST", url, [], orjson.dumps(x)) for x in (a, b))
    found = tool_result_changes(ka, kb, json_diff(ka.body, kb.body))
    return (
        None if found is None else [(".".join(map(str, t.path)), t.recorded, t.live) for t in found]
    )


def test_a_changed_tool_result_is_tolerated_in_each_api() -> None:
    assert _tolerated(CHAT, _chat("a.md\nb.md"), _chat("a.md\nb.md\nc.md")) == [
        ("messages.3.content", "a.md\nb.md", "a.md\nb.md\nc.md")
    ]
    assert _tolerated(MESSAGES, _anthropic("a.md"), _anthropic("a.md c.md")) == [
        ("messages.2.content.0.content", "a.md", "a.md c.md")
    ]
    blocks = [{"type": "text", "text": "a.md"}, {"type": "text", "text": "b.md"}]
    assert _tolerated(
        MESSAGES, _anthropic(blocks), _anthropic([blocks[0], {"type": "text", "text": "z.md"}])
    ) == [("messages.2.content.0.content.1.text", "b.md", "z.md")]
    assert _tolerated(RESPONSES, _responses("3 files"), _responses("4 files")) == [
        ("input.0.output", "3 files", "4 files")
    ]


@pytest.mark.parametrize(
    ("url", "recorded", "live"),
    [
        # the system prompt too
        (CHAT, _chat("a.md"), _chat("b.md", system="List all files.")),
        (CHAT, _chat("a.md"), _chat("a.md", user="Delete the files.")),  # a user instruction
        # which call the result answers
        (CHAT, _chat("a.md"), _chat("a.md", call_id="call_Z9")),
        # the error flag
        (MESSAGES, _anthropic("a.md", is_error=False), _anthropic("a.md", is_error=True)),
        # text beside a result
        (MESSAGES, _anthropic("a.md", extra_text="ok"), _anthropic("a.md", extra_text="rm -rf")),
        # a part added
        (
            MESSAGES,
            _anthropic([{"type": "text", "text": "a"}]),
            _anthropic([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        ),
    ],
)
def test_anything_else_the_model_reads_is_not_tolerated(
    url: str, recorded: dict[str, Any], live: dict[str, Any]
) -> None:
    assert _tolerated(url, recorded, live) is None


def _ex(body: dict[str, Any], answer: str) -> Exchange:
    resp = orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
        }
    )
    return Exchange(
        "POST",
        CHAT,
        [("content-type", "application/json")],
        orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.0, resp)],
    )


def test_in_position_is_the_next_turn_of_the_conversation_the_request_continues() -> None:
    """Two conversations recorded interleaved (concurrent agents): a request with a changed result
    is answered by the next unplayed turn of its own conversation, never by another's."""
    one = [
        {"role": "system", "content": "List files."},
        {"role": "user", "content": "Agent one: which files?"},
    ]
    two = [
        {"role": "system", "content": "List files."},
        {"role": "user", "content": "Agent two: which files?"},
    ]

    def turn1(head: list[dict[str, Any]], result: str) -> dict[str, Any]:
        return {"model": "gpt-4o", "messages": [*head, *_chat(result)["messages"][2:]]}

    m = Matcher(
        [
            _ex({"model": "gpt-4o", "messages": one}, "x"),
            _ex({"model": "gpt-4o", "messages": two}, "y"),
            _ex(turn1(one, "a.md"), "one done"),
            _ex(turn1(two, "a.md"), "two done"),
        ]
    )
    for msgs in (one, two):
        assert isinstance(
            m.match(
                "POST",
                "/v1/chat/completions",
                [],
                orjson.dumps({"model": "gpt-4o", "messages": msgs}),
            ),
            Recorded,
        )
    body = orjson.dumps(turn1(two, "a.md\nc.md"))
    miss = m.match("POST", "/v1/chat/completions", [], body)
    assert not isinstance(miss, Recorded)
    # agent two's turn is not allowed (past a cursor)
    assert (
        m.in_position("POST", "/v1/chat/completions", [], body, lambda r: r.index != 3, miss)
        is None
    )
    rec = m.in_position("POST", "/v1/chat/completions", [], body, lambda r: True, miss)
    assert rec is not None and rec.index == 3 and rec.plays == 1 and miss not in m.misses
    assert [(t.detector, t.recorded, t.live) for t in m.tolerated[3]] == [
        ("tool_result", "a.md", "a.md\nc.md")
    ]
    changed = orjson.dumps(
        turn1([one[0], {"role": "user", "content": "Agent one: delete them."}], "a.md\nc.md")
    )
    # a changed instruction: no turn in position
    assert m.in_position("POST", "/v1/chat/completions", [], changed, lambda r: True) is None


def _resp_ex(body: dict[str, Any], rid: str, output: list[dict[str, Any]]) -> Exchange:
    resp = orjson.dumps(
        {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": "gpt-4o",
            "output": output,
        }
    )
    return Exchange(
        "POST",
        RESPONSES,
        [("content-type", "application/json")],
        orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.0, resp)],
    )


def test_an_answer_served_in_position_stands_for_what_the_client_sent_when_a_live_request_continues_it() -> (  # noqa: E501
    None
):
    """Responses chains: the turn past the cursor continues an answer served in position; sent
    self-contained, its history holds the tool output the client sent, not the recorded one."""
    from looptap.cassettes.net import Request
    from looptap.cassettes.replay.forking.cursor import Cursor
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.replay.serving.plan import Forward, Planner, Play

    def call(cid: str) -> dict[str, Any]:
        return {"type": "function_call", "call_id": cid, "name": "ls", "arguments": "{}"}

    def out(cid: str, text: str, prev: str) -> dict[str, Any]:
        return {
            "model": "gpt-4o",
            "previous_response_id": prev,
            "input": [{"type": "function_call_output", "call_id": cid, "output": text}],
        }

    first = {"model": "gpt-4o", "input": [{"role": "user", "content": "Which files?"}]}
    m = Matcher(
        [
            _resp_ex(first, "resp_1", [call("call_1")]),
            _resp_ex(out("call_1", "3 files", "resp_1"), "resp_2", [call("call_2")]),
            _resp_ex(
                out("call_2", "3 files", "resp_2"),
                "resp_3",
                [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "done"}],
                    }
                ],
            ),
        ]
    )
    cursor = Cursor(parse_cursor("turn=2"), lambda *_: "http://127.0.0.1:9", prefix="tolerant")
    cursor.bind(m)
    plan = Planner(m, cursor=cursor)
    assert isinstance(plan.plan(Request("POST", "/v1/responses", [], orjson.dumps(first))), Play)
    served = plan.plan(
        Request("POST", "/v1/responses", [], orjson.dumps(out("call_1", "4 files", "resp_1")))
    )
    assert (
        isinstance(served, Play)
        and served.rec.index == 1
        and "served in position" in (served.note or "")
    )
    live = plan.plan(
        Request("POST", "/v1/responses", [], orjson.dumps(out("call_2", "4 files", "resp_2")))
    )
    assert isinstance(live, Forward)
    sent = orjson.loads(live.body)
    assert "previous_response_id" not in sent
    assert [i.get("output") for i in sent["input"] if i.get("type") == "function_call_output"] == [
        "4 files",
        "4 files",
    ]


def test_a_tolerated_value_is_redacted_and_cut_around_the_difference() -> None:
    """What is on the record is wire text: a key in a changed listing never reaches a report line
    or the branch, and a long value is kept around where the two differ."""
    from looptap.cassettes.matching import Tolerated, entries_of, report_lines

    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    found = entries_of(
        [
            Tolerated(
                ("messages", 3, "content"),
                "tool_result",
                "x" * 5000 + "a.md",
                "x" * 5000 + f"a.md\n.env: {key}",
            )
        ]
    )
    assert key not in orjson.dumps(found).decode() and "[REDACTED]" in found[0]["live"]
    assert len(found[0]["recorded"]) < 2500 and found[0]["recorded"].startswith("…")
    line = report_lines([{"conversation": "c1", "turn": 1, "seq": 1, "tolerated": found}])[0]
    assert (
        line.startswith("  tolerated at c1/turn 1 (seq 1): messages[3].content: recorded ")
        and "(by tool_result)" in line
        and key not in line
    )


def test_divergence_is_a_cursor_of_its_own_and_refuses_what_needs_a_turn() -> None:
    from looptap.cassettes.replay.forking.cursor import Cursor
    from looptap.cassettes.replay.forking.placement import CursorError, parse_cursor
    from looptap.cassettes.replay.live.edits import parse_edit

    spec = parse_cursor("divergence")
    assert (
        spec.divergence
        and spec.as_json()["divergence"] is True
        and not parse_cursor("turn=1").divergence
    )
    recording = [_ex(_chat("a.md"), "done")]
    with pytest.raises(CursorError, match="--edit needs a cursor at a turn"):
        Cursor(spec, lambda *_: None, edits=[parse_edit("system=be brief")]).bind(
            Matcher(recording)
        )
    with pytest.raises(CursorError, match="--model claude-sonnet-4-5: anthropic's model"):
        Cursor(spec, lambda *_: None, model="claude-sonnet-4-5").bind(Matcher(recording))
    # nothing placed until a conversation diverges
    Cursor(spec, lambda *_: None, model="gpt-4o-mini").bind(Matcher(recording))


def test_a_prefix_mode_without_a_fork_is_refused(tmp_path: Any) -> None:
    import sys

    from tests.replay.conftest import tool_loop, write
    from tests.support import progress

    run = write(tmp_path / "run.jsonl", tool_loop())
    for argv, said in (
        (
            ["run", "--prefix", "tolerant", "-o", str(tmp_path / "b.jsonl"), "--", "true"],
            "--prefix goes with --from RUN@SELECTOR",
        ),
        (["replay", str(run), "--prefix", "tolerant"], "--prefix go with --cursor"),
    ):
        proc = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", *argv], capture_output=True, text=True
        )
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert not (tmp_path / "b.jsonl").exists()
