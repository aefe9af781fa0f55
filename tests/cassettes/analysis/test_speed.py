"""Work the analysis does once per turn, not twice (issue 30's batch speed): counted, never
timed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenarios import Call, Script, Tool

import cassettes.analysis.emission as emission
import cassettes.analysis.message_keys as message_keys
from cassettes.analysis.message_keys import squashed

_SPACES = list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2000\u3000") + list("ab.{}")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(_SPACES), max_size=40) | st.text(max_size=40))
def test_squashed_is_split_and_join(text: str) -> None:
    assert squashed(text) == " ".join(text.split())


def test_squashed_text_is_not_copied() -> None:
    """A text already squashed (an answer's prose, most of a run) comes back as it is: no string
    is made per word."""
    text = "the agent reads the file and then decides which function to call next " * 20
    text = text.strip()
    assert squashed(text) is text
    assert squashed(text + "\n") == text and squashed("a  b") == "a b" and squashed(" a") == "a"
    assert squashed("a\u00a0b") == "a b"  # Unicode spaces: the split path


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_a_tool_result_is_squashed_once_per_turn(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threading squashes a turn's tool results to key them; the repeated-call check, which
    compares results by their squashed text, takes them from the threader's memo."""
    result = "line one\n  line two\twith   spaces\n" * 40
    calls: list[str] = []
    real = message_keys.squashed

    def counting(text: str | None) -> str:
        if text == result:
            calls.append(text)
        return real(text)

    monkeypatch.setattr(message_keys, "squashed", counting)
    monkeypatch.setattr(emission, "squashed", counting, raising=False)  # a check's own squashing
    s = Script(family, tools=[Tool("read_file", {"path": {"type": "string"}})])
    s.user("read it")
    s.reply(None, calls=[Call("read_file", {"path": "a.py"})])
    s.results(result)
    # a repeated call: its results compared
    s.reply(None, calls=[Call("read_file", {"path": "a.py"})])
    s.results(result)
    s.reply("done")
    run = s.analyse()
    assert [f.code for f in run.findings if f.code == "E.repeated_call"] == ["E.repeated_call"]
    # once in the run: the threader's memo keeps a turn's texts for the next turn too (where the
    # same text is history); the check asked the memo, not ``squashed`` again
    assert len(calls) == 1, len(calls)


def test_a_spilled_batch_is_one_transaction() -> None:
    """A table that spills writes its batch in one transaction, not one commit per row (in
    autocommit mode each row was a commit: ten times the time for a batch of 10,000)."""
    from cassettes.analysis.spill import Spill, SpillMap

    spill = Spill()
    table: SpillMap[int, str] = SpillMap(spill, keep=10)
    for i in range(30):
        table[i] = f"value {i}"
    db = spill.db("t1")
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    try:
        table.trim()
    finally:
        db.set_trace_callback(None)
    statements = [s for s in statements if not s.startswith("CREATE TABLE")]
    inserts = [s for s in statements if s.startswith("INSERT")]
    assert len(inserts) == 25  # 30 entries, 10 kept, and half of keep more spilled at once
    assert statements[0] == "BEGIN" and statements[-1] == "COMMIT", statements[:2] + statements[-2:]
    assert [table[i] for i in range(30)] == [f"value {i}" for i in range(30)]  # read back alike
    spill.close()


def test_a_spill_table_get_is_a_lookup_not_a_caught_key_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``get`` answers as ``Mapping.get`` does (entries in memory, entries on disk, missing keys,
    and the entry made recently used), without going through ``__getitem__``'s ``KeyError`` for a
    key it does not hold: the analysis asks a few dozen times per turn, mostly for keys not
    there."""
    from cassettes.analysis.spill import Spill, SpillMap

    spill = Spill()
    table: SpillMap[int, str] = SpillMap(spill, keep=4)
    for i in range(10):
        table[i] = f"value {i}"
    table.trim()  # 0..7 on disk, 8 and 9 in memory
    assert len(list(table.hot_items())) == 2
    raised: list[object] = []
    real = SpillMap.__getitem__

    def getitem(self: SpillMap[int, str], key: int) -> str:
        try:
            return real(self, key)
        except KeyError:
            raised.append(key)
            raise

    monkeypatch.setattr(SpillMap, "__getitem__", getitem)
    assert [table.get(i) for i in (8, 3, 42)] == ["value 8", "value 3", None]
    assert table.get(43, "default") == "default"
    assert not raised, raised
    # each entry read is the most recently used, 3 back from disk
    assert list(table._hot) == [9, 8, 3]
    assert [table.get(i) for i in range(10)] == [f"value {i}" for i in range(10)]
    spill.close()


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_an_answer_is_squashed_once_per_run(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer with tool calls is keyed by the threading (as this turn's answer, then as the
    next request's history) and by the next turn's dropped-result check: one squash in all, the
    others read the threader's memo."""
    answer = "I will read\n the file  first, then decide."
    calls: list[str] = []
    real = message_keys.squashed

    def counting(text: str | None) -> str:
        if text == answer:
            calls.append(text)
        return real(text)

    monkeypatch.setattr(message_keys, "squashed", counting)
    s = Script(family, tools=[Tool("read_file", {"path": {"type": "string"}})])
    s.user("read it")
    s.reply(answer, calls=[Call("read_file", {"path": "a.py"})])
    s.results("contents")
    s.reply("done")
    run = s.analyse()
    assert len(run.turns) == 2 and not [f for f in run.findings if f.layer == "C"]
    assert len(calls) == 1, len(calls)
