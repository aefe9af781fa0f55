"""Each message keyed once per message object (:class:`MessageKeys`, the threader's memo shared
with the C layer and the checks): the same keys as made afresh, never a key of a message changed
since (the analysis resolves referenced items in place), and no more held than two requests'."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from scenarios import edit_request, openai_responses_turn

from looptap.cassettes.analysis import RunAnalyser, analyse
from looptap.cassettes.analysis import _message_keys as mk
from looptap.cassettes.analysis._items import ItemReferences
from looptap.cassettes.models import Message, NormalisedResponse, Part, ToolCall, ToolResult
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def _messages() -> list[Message]:
    return [
        Message(role="system", parts=[Part(kind="text", text="Be  brief.")]),
        Message(role="user", parts=[Part(kind="text", text="Weather in\nParis?")]),
        Message(
            role="assistant",
            parts=[
                Part(kind="reasoning", text="think"),
                Part(kind="text", text="Let me look."),
                Part(kind="tool_call", tool_call=ToolCall(id="c1", name="w", arguments={"c": 1})),
            ],
        ),
        Message(
            role="user",
            parts=[Part(kind="tool_result", tool_result=ToolResult(call_id="c1", content="s  u"))],
        ),
    ]


def test_the_memo_keys_as_afresh_once_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = _messages()
    afresh = [(mk._message_keys(m), mk._part_keys(m.parts)) for m in messages]
    made: list[Message] = []
    keyed = mk._keyed
    monkeypatch.setattr(mk, "_keyed", lambda m: made.append(m) or keyed(m))
    memo = mk.MessageKeys()
    for _ in range(2):
        for m, (keys, parts) in zip(messages, afresh, strict=True):
            assert memo.keys(m) == keys
            assert memo.key(m) == keys[0]
            assert memo.parts(m) == parts
    assert made == messages  # each made once
    # an equal message that is another object is keyed of its own
    twin = messages[1].model_copy(deep=True)
    assert memo.keys(twin) == memo.keys(messages[1])
    assert made[-1] is twin


def test_an_answer_is_one_message_and_the_system_key_the_same() -> None:
    memo = mk.MessageKeys()
    resp = NormalisedResponse(parts=[Part(kind="text", text="Sunny."), Part(kind="reasoning")])
    answer = memo.answer(resp)
    assert answer is memo.answer(resp) and answer == mk.response_message(resp)
    blank = NormalisedResponse(parts=[Part(kind="text", text=" \n\u00a0"), Part(kind="reasoning")])
    assert memo.answer(blank) is None and mk.response_message(blank) is None
    system = [Part(kind="text", text="You  are\nhelpful."), Part(kind="other")]
    afresh = mk.stable(orjson.dumps(mk._part_keys(system), option=orjson.OPT_NON_STR_KEYS))
    again = [p.model_copy() for p in system]
    assert memo.system(system) == memo.system(again) == afresh
    other = [Part(kind="text", text="You are terse.")]
    assert memo.system(other) != afresh


def test_a_message_changed_in_place_is_keyed_again() -> None:
    """The one change the analysis makes to a message (a referenced item resolved in place, by
    :meth:`ItemReferences.resolve`) is said to the memo, which then keys it afresh; not said, the
    memo would keep the key of the message as it was (what the analyser must never let happen)."""
    memo = mk.MessageKeys()
    ref = Message(
        role="assistant", parts=[Part(kind="other", provider_details={"item_reference": "m1"})]
    )
    before = memo.keys(ref)
    refs = ItemReferences()
    refs.remember(
        NormalisedResponse(
            parts=[Part(kind="text", text="It is sunny.", provider_details={"id": "m1"})]
        )
    )
    changed = refs.resolve([Message(role="user", parts=[Part(kind="text", text="Hi")]), ref])
    assert changed == [ref]
    assert memo.keys(ref) == before != mk._message_keys(ref)  # (stale: not said yet)
    memo.forget(changed)
    assert memo.keys(ref) == mk._message_keys(ref) != before


def _resolved_later(tmp_path: Path) -> Path:
    """A Responses loop written as a cassette (history deltas: each request parsed on the one it
    extends, sharing its messages), whose first request refers to an item only its own answer
    produces: that message, keyed on the first turn, is resolved in place on the second."""
    first = openai_responses_turn([_user("Weather in Paris?")], "It is sunny in Paris.")
    msg = orjson.loads(first.response_body)["output"][0]
    ref = {"type": "item_reference", "id": msg["id"]}
    edit_request(first, lambda body: body["input"].extend([ref, _user("In Celsius.")]))
    hist = [_user("Weather in Paris?"), ref, _user("In Celsius."), msg, _user("And tomorrow?")]
    second = openai_responses_turn(hist, "Rain tomorrow.")
    third_hist = [*hist, orjson.loads(second.response_body)["output"][0], _user("Thanks.")]
    third = openai_responses_turn(third_hist, "You are welcome.")
    out = tmp_path / "run.jsonl"
    with CassetteWriter(out) as w:
        for ex in (first, second, third):
            w.append(ex)
    return out


def test_the_analyser_never_keeps_a_key_across_a_change(tmp_path: Path) -> None:
    """After each round trip, every message the memo holds has the keys made afresh of it as it
    is now, and the memo holds at most the messages (and answers) of two requests."""
    run = _resolved_later(tmp_path)
    exchanges = read_records(run).exchanges
    analyser = RunAnalyser()
    parsed: list[tuple[Any, list[Message]]] = []
    analyser.on_parse = lambda rt: parsed.append((rt.reused, list(rt.request.messages)))
    held, kinds = [], []
    for ex in exchanges:
        analyser.add(ex)
        memo = analyser.state.threader.keys
        for table in (memo._now, memo._before):
            for m, keyed in table.values():
                assert keyed == mk._keyed(m)
        held.append(len(memo))
        kinds.append(parsed[0][1][1].parts[0].kind)
    # the second request shares the first one's messages, the reference among them, resolved in
    # place when the second is read
    assert parsed[1][0] is not None and parsed[1][1][1] is parsed[0][1][1]
    assert kinds == ["other", "text", "text"]
    assert max(held) <= 2 * (len(parsed[-1][1]) + 1)
    # the same analysis as with every key made afresh each time it is asked
    remembered = orjson.dumps(analyse(read_records(run).exchanges).model_dump(mode="json"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mk.MessageKeys, "keyed", lambda self, m: mk._keyed(m))
        mp.setattr(mk.MessageKeys, "answer", lambda self, r: mk.response_message(r))
        afresh = orjson.dumps(analyse(read_records(run).exchanges).model_dump(mode="json"))
    assert remembered == afresh


def test_a_text_unspaced_as_split_reads_it() -> None:
    """An ASCII text's whitespace deleted as bytes is what ``str.split`` leaves of it; every
    ASCII character, each alone and among words, and texts that are not ASCII."""
    rnd = random.Random(57)
    alphabet = [chr(c) for c in range(128)] + ["\u00a0", "\u2003", "\u3000", "\u0085", "é", "字"]
    texts = [c for c in alphabet] + [f"a{c}b {c}{c}c" for c in alphabet]
    texts += ["".join(rnd.choices(alphabet, k=rnd.randint(0, 40))) for _ in range(500)]
    for t in texts:
        assert mk._unspaced(t) == "".join(t.split()), repr(t)
