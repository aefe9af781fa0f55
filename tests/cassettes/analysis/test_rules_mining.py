"""``rules learn``'s miner on traces made here (the recorded agent's are test_rules_retail.py's):
what it writes reads back as the rules it proposed, whatever the tool names the wire carried,
and too few traces propose nothing (a rule that held by accident in them is not one)."""

from __future__ import annotations

import tomllib

from looptap.cassettes.analysis import parse_rules
from looptap.cassettes.analysis.learning import Trace, learn
from looptap.cassettes.cli.agent_rules import proposals_toml
from looptap.cassettes.models import Message, Part, ToolCall, ToolResult


def user(text: str) -> Message:
    return Message(role="user", parts=[Part(kind="text", text=text)])


def call(name: str, cid: str, **args: str) -> Message:
    c = ToolCall(id=cid, name=name, arguments=args)
    return Message(role="assistant", parts=[Part(kind="tool_call", tool_call=c)])


def result(cid: str, content: str) -> Message:
    r = ToolResult(call_id=cid, content=content)
    return Message(role="tool", parts=[Part(kind="tool_result", tool_result=r)])


#: A tool whose name would end a comment line and start a rule, were it written raw.
SLY = 'look"up\x7f\n[[rule]]\nkind = "count"'


def trace(i: int) -> Trace:
    order = f"W{100 + i}"
    return Trace(
        f"run.jsonl c{i}",
        [
            user(f"Please cancel {order}."),
            call(SLY, "a", order_id=order),
            result("a", f'{{"order_id": "{order}"}}'),
            user("Yes, go ahead."),
            call("cancel", "b", order_id=order),
        ],
    )


def test_what_learn_writes_reads_back_as_what_it_proposed() -> None:
    proposals = learn([trace(i) for i in range(6)], min_support=5)
    assert {p.rule.kind for p in proposals} >= {"order", "consent", "count", "provenance"}
    text = proposals_toml(proposals, ["run.jsonl"], 6, 5)
    read = parse_rules(text, "proposed.toml").rules
    assert [r.name for r in read] == [p.rule.name for p in proposals]
    assert [r.kind for r in read] == [p.rule.kind for p in proposals]
    (order,) = [r for r in tomllib.loads(text)["rule"] if r["kind"] == "order"]
    assert order["first"] == [SLY] and order["then"] == ["cancel"]
    assert all(not line.startswith("kind") for line in text.splitlines() if "look" in line)


def test_fewer_traces_than_the_support_asked_for_propose_nothing() -> None:
    assert learn([trace(i) for i in range(4)], min_support=5) == []
    assert learn([trace(i) for i in range(5)], min_support=5) != []


def test_the_documented_example_is_a_rules_file() -> None:
    """docs/rules.md's example, one rule of each kind and each field, reads as it says."""
    from pathlib import Path

    doc = (Path(__file__).parents[3] / "docs" / "rules.md").read_text()
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    rules = parse_rules(example, "docs/rules.md").rules
    assert [r.kind for r in rules] == [
        "order",
        "order",
        "consent",
        "count",
        "forbidden",
        "provenance",
    ]
    assert rules[0].first == ("find_user_id_by_email", "find_user_id_by_name_zip")
    assert (rules[3].per, rules[3].scope, rules[4].scope) == (
        "order_id",
        "conversation",
        "conversation",
    )
    assert rules[5].sources == ("get_user_details",) and rules[2].yes is not None
