"""One way to say a place in a request body (cassettes.jsonpath): what looptap prints (a diff's
path, a proposed rule, an edit mark's item) reads back as the rule syntax users write, and the
one walk is bounded and sees what its caller changed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looptap.cassettes.jsonpath import ANY_INDEX, ANY_KEY, format_path, parse_path, put, walk
from looptap.cassettes.matching import json_diff, parse_ignore
from looptap.cassettes.project import RuleError
from looptap.cassettes.replay.live.edits import parse_edit
from looptap.cassettes.wire import client_body, from_header, item_of, mark, target_of, to_header

_KEYS = st.text(max_size=30)
_PATHS = st.lists(st.one_of(_KEYS, st.integers(0, 10**6)), min_size=1, max_size=8).filter(
    lambda p: isinstance(p[0], str)
)


@given(_PATHS)
def test_every_printed_path_reads_back(path: list[str | int]) -> None:
    assert parse_path(format_path(path)) == tuple(path)


def test_wildcards_and_odd_keys() -> None:
    assert parse_path("$.messages[*].content.*") == ("messages", ANY_INDEX, "content", ANY_KEY)
    assert format_path(("messages", ANY_INDEX, "a b", 0)) == 'messages[*]["a b"][0]'
    assert format_path(()) == "(body)" and format_path((), "") == ""
    with pytest.raises(RuleError, match="cannot read it at character 2"):
        parse_path("a..b")


def test_a_diff_path_is_an_ignore_rule_that_matches_it() -> None:
    a = {"metadata": {"run id": "1"}, "messages": [{"content": "x"}]}
    b = {"metadata": {"run id": "2"}, "messages": [{"content": "x"}]}
    (change,) = json_diff(a, b)
    assert parse_ignore(change.where).path == change.path == ("metadata", "run id")


@pytest.mark.parametrize(
    ("path", "item"),
    [
        (["messages", 3, "content"], "messages[3]"),
        (["system"], "system"),
        (["generationConfig", "maxOutputTokens"], "generationConfig.maxOutputTokens"),
        (["a b", 0, "content"], '["a b"][0]'),
        (["contents", 1, "parts"], "contents[1]"),
    ],
)
def test_an_edit_marks_item_is_said_in_the_rule_syntax(path: list[str | int], item: str) -> None:
    m = mark("tool_result[c1]", "turn=1", path, "before")
    assert item_of(m) == item
    assert parse_path(item) == tuple(path[:2])


def test_put_copies_along_the_path_and_refuses_a_missing_one() -> None:
    doc = {"messages": [{"content": "new"}, {"content": "kept"}]}
    out = put(doc, ["messages", 0, "content"], "old")
    assert out == {"messages": [{"content": "old"}, {"content": "kept"}]}
    assert doc["messages"][0]["content"] == "new" and out["messages"][1] is doc["messages"][1]
    assert put(doc, ["messages", 5, "content"], "x") is None
    assert put(doc, ["messages", -1], "x") is None
    marks = [mark("system", None, ["messages", 9], "x")]
    assert client_body(doc, marks) is None


def test_walk_in_document_order_sees_what_the_caller_wrote() -> None:
    doc = {"a": [1, {"b": "x"}], "c": "x"}
    seen = []
    for value, path, holder, key in walk(doc):
        seen.append(path)
        if value == "x" and holder is not None:
            holder[key] = {"d": 2}  # walked as replaced
    assert seen == [
        (),
        ("a",),
        ("a", 0),
        ("a", 1),
        ("a", 1, "b"),
        ("a", 1, "b", "d"),
        ("c",),
        ("c", "d"),
    ]


def test_walk_is_bounded_without_recursion() -> None:
    doc: object = "leaf"
    for _ in range(50_000):  # far past the interpreter's recursion limit
        doc = [doc]
    depths = [len(p) for _, p, _, _ in walk(doc, 64)]
    assert max(depths) == 64 and len(depths) == 65
    assert [p for _, p, _, _ in walk({"b64": "x", "t": 1}, leaf=lambda v: "b64" in v)] == [()]


@pytest.mark.parametrize(
    "label",
    ["tool_result[c1]", "tool_schema[get_weather]", "restore_answer[c2]", "user[3]", "system"],
)
def test_every_edit_target_fork_takes_is_a_mark_the_recorder_keeps(label: str) -> None:
    """``--edit`` and the marks read one target grammar: a ``tool_schema[NAME]`` edit's marks
    were refused by the recorder ("could not be read; dropped") and by a cassette's reader."""
    value = {"tool_schema": '{"type": "object"}', "restore_answer": '[{"role": "assistant"}]'}
    edit = parse_edit(f"{label}=" + value.get(label.partition("[")[0], "x"))
    assert edit.label == label
    m = mark(edit.label, None, ["tools", 0, "parameters"], {"type": "object"})
    assert from_header(to_header([m])) == [m]
    assert target_of(label) == (edit.kind, edit.key)
    assert target_of("tool_schema[]") is None and target_of("user[x]") is None
