"""Issue 71 item 8: the most common client bug, the answer that made tool calls dropped from the
history and its results sent anyway, answered by the API's pairing 400. ``why`` proposes the C
repair (the recorded answer put back before the results, in the API's own shape), and that
repair turns the client's request into the one a correct client sends."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.replay.live.edits import EditError, parse_edit
from looptap.cassettes.replay.live.rewrite import apply_edits
from looptap.cassettes.why import interventions
from tests.cassettes.analysis.scenarios import Call, Script, edit_request
from tests.replay.conftest import write

#: The API's own pairing texts (docs/WIRE.md).
_PAIRING = {
    "openai_chat": {
        "error": {
            "message": "Invalid parameter: messages with role 'tool' must be a response to a "
            "preceeding message with 'tool_calls'.",
            "type": "invalid_request_error",
            "param": "messages.[1].role",
            "code": None,
        }
    },
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` "
            "blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block "
            "in the previous message.",
        },
    },
}


def _run(family: str, echo: bool, calls: list[Call]) -> Script:
    s = Script(family)
    s.user("Weather in Paris and Rome?")
    s.reply("Let me look.", calls=calls, echo=echo)
    s.results("sunny", "rain")
    if echo:
        s.reply("Sunny in Paris, rain in Rome.")
    else:
        body = orjson.loads(orjson.dumps(_PAIRING[family]).replace(b"{id}", calls[0].id.encode()))
        s.fail(400, body)
    return s


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_why_puts_the_dropped_answer_back_as_the_c_repair(family: str, tmp_path: Path) -> None:
    calls = [Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})]
    bad, good = _run(family, False, calls), _run(family, True, calls)
    found = interventions(open_run(write(tmp_path / "run.jsonl", bad.exchanges), whole=True))
    c = [i for i in found if i.layer == "C"]
    # one repair, for the dropped answer; the 400 is its consequence, not a suspect of its own
    assert [(i.kind, i.finding, i.turn) for i in c] == [
        ("c-restore-answer", "C.assistant_not_echoed", 1)
    ], [i.as_json() for i in c]
    (repair,) = c
    assert repair.missing is None and repair.cursor == "conversation=c1:turn=1"
    # the repair makes the client's request the one a correct client sends
    sent = bad.exchanges[1]
    body, marks = apply_edits(
        "POST", sent.url, sent.request_body, [parse_edit(e) for e in repair.edits]
    )
    key = "messages"
    assert orjson.loads(body)[key] == orjson.loads(good.exchanges[1].request_body)[key]
    assert [m["edit"] for m in marks] == [f"restore_answer[{calls[0].id}]"]
    # a request that already carries the answer is left as it is
    again = apply_edits("POST", sent.url, body, [parse_edit(e) for e in repair.edits])
    assert again[1] == []


def test_an_answer_changed_not_dropped_gets_no_answer_put_back(tmp_path: Path) -> None:
    """The client kept the answer's calls but changed their arguments: putting the answer back
    would send it twice, so no such repair is proposed (the finding stays listed without one)."""
    calls = [Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})]
    s = _run("openai_chat", True, calls)

    def reworded(body: dict[str, object]) -> None:
        call = body["messages"][1]["tool_calls"][0]  # type: ignore[index]
        call["function"]["arguments"] = '{"city": "Lyon"}'

    edit_request(s.exchanges[1], reworded)
    found = interventions(open_run(write(tmp_path / "run.jsonl", s.exchanges), whole=True))
    c = [(i.kind, i.finding) for i in found if i.layer == "C"]
    assert c == [("c-none", "C.assistant_not_echoed")], c


def test_a_restore_answer_edit_wants_a_list_of_items() -> None:
    for bad in ("restore_answer[c1]=nope", "restore_answer[c1]=[]", "restore_answer[c1]=[1]"):
        with pytest.raises(EditError):
            parse_edit(bad)


# -- issue 82: a history the client trimmed, summarised or compacted ----------------------------

_TRIM_SHAPES = ("head_cut", "tail_kept", "summary_head", "side_call_summary", "instruction_dropped")


def _context_case(shape: str, family: str) -> object:
    import sys

    here = str(Path(__file__).resolve().parents[1] / "cassettes" / "analysis")
    if here not in sys.path:
        sys.path.insert(0, here)
    from context_cases import SHAPES  # the threading tests' scripted shapes (issue 82)

    return SHAPES[shape](family)


@pytest.mark.parametrize("family", ["openai_chat", "openai_responses", "anthropic", "gemini"])
@pytest.mark.parametrize("shape", _TRIM_SHAPES)
def test_a_trimmed_history_is_a_c_suspect_whose_repair_puts_it_back(
    shape: str, family: str, tmp_path: Path
) -> None:
    """Each shape of context management (tests/cassettes/analysis/context_cases.py) in each API's
    own wire format: the managed turn is a C suspect (``C.history_trimmed``, info, and
    ``C.user_instruction_dropped``: one repair), whose edit (``restore_history``) makes the
    managed request carry every history item its conversation sent before, where it stood, and
    every item the client sent, in its order. On fec4f2c2 no such suspect existed (the trim was
    info, and most shapes were read as a new conversation)."""
    from looptap.cassettes import bounds
    from looptap.cassettes.replay.live.rewrite import history_items

    case = _context_case(shape, family)
    exchanges = case.script.exchanges  # type: ignore[attr-defined]
    run = open_run(write(tmp_path / "run.jsonl", exchanges), whole=True)
    (trim_seq,) = {seq for code, seq in case.expected if code == "C.history_trimmed"}  # type: ignore[attr-defined]
    turn = run.analysis.turns[trim_seq]
    found = [i for i in interventions(run) if i.kind == "c-restore-history"]
    assert [(i.layer, i.conversation, i.turn) for i in found] == [
        ("C", turn.conversation, turn.index)
    ], [i.as_json() for i in found]
    (repair,) = found
    assert repair.missing is None and repair.edits[0].startswith(f"restore_history[{turn.index}]=")
    if any(code == "C.user_instruction_dropped" for code, _ in case.expected):  # type: ignore[attr-defined]
        assert repair.finding == "C.user_instruction_dropped" and "the user's" in repair.what

    def history(ex: object, body: bytes | None = None) -> list[bytes]:
        raw = ex.request_body if body is None else body  # type: ignore[attr-defined]
        got = history_items(ex.method, ex.url, bounds.loads_or_none(raw))  # type: ignore[attr-defined]
        assert got is not None
        return [orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in got[1]]

    managed = exchanges[trim_seq]
    body, marks = apply_edits(
        "POST", managed.url, managed.request_body, [parse_edit(e) for e in repair.edits]
    )
    assert [m["edit"] for m in marks] == [f"restore_history[{turn.index}]"]
    restored = history(managed, body)
    sent = history(managed)
    # every item the client sent stays, in its order
    assert [x for x in restored if x in sent] == sent
    # every item its conversation sent before is back, in the order it had
    mine = next(c for c in run.analysis.conversations if c.id == turn.conversation).turns
    before = [x for s in mine if s < trim_seq for x in history(exchanges[s])]
    kept_order = [x for x in restored if x in before]
    assert set(before) <= set(restored) and kept_order == list(dict.fromkeys(kept_order))
    # applied again (the next request sent live), nothing more is put back
    assert apply_edits("POST", managed.url, body, [parse_edit(e) for e in repair.edits])[1] == []


def test_a_restore_history_edit_wants_a_list_of_items() -> None:
    for bad in ("restore_history[2]=nope", "restore_history[2]=[]", "restore_history[2]=[1]"):
        with pytest.raises(EditError):
            parse_edit(bad)
