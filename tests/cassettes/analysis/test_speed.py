"""Work the analysis does once per turn, not twice (issue 30's batch speed): counted, never
timed."""

from __future__ import annotations

from typing import Any

import pytest


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


def test_a_text_is_squashed_once_while_it_is_read_again() -> None:
    """The threader and the checks read the same text several times a turn (an answer when it is
    threaded and again when the next request echoes it, a tool result by the threader and by the
    repeat check): its squashed and unspaced forms are made once and handed out again, for texts
    up to a bound and a bounded number of them (issue 73)."""
    from cassettes.analysis import _message_keys as mk

    answer = "I read  the file.\n\n  Next I call\trun_tests " * 40
    first = mk.squashed(answer)
    assert first == " ".join(answer.split())
    assert mk.squashed(answer[:-1] + " ") is first  # an equal text: the same result, not made again
    assert mk._unspaced(answer) is mk._unspaced(str(answer))
    assert mk._unspaced(answer) == "".join(answer.split())
    assert mk.squashed("") == "" and mk.squashed(None) == "" and mk._unspaced("  ") == ""
    for i in range(3 * mk._MEMO_SIZE):
        assert mk.squashed(f" text  {i} ") == f"text {i}"
    assert len(mk._SQUASHED) <= mk._MEMO_SIZE
    huge = "word  " * (mk._MEMO_LONGEST // 4)
    assert mk.squashed(huge) == " ".join(huge.split())
    assert huge not in mk._SQUASHED  # a text past the bound is squashed each time, not kept


class _Counted:
    """A compiled pattern whose ``search``/``sub`` calls are counted."""

    def __init__(self, pattern: Any) -> None:
        self.pattern, self.calls = pattern, 0

    def search(self, *a: Any) -> Any:
        self.calls += 1
        return self.pattern.search(*a)

    def sub(self, *a: Any) -> Any:
        self.calls += 1
        return self.pattern.sub(*a)


_LOOP_TEXTS = [
    "I read the file and then decided to call run_tests next.",
    "I'm stuck in a loop: the same test keeps failing.",
    "WE ARE GOING AROUND IN CIRCLES here.",
    "we're going round in circleſ",  # a long s: the pattern's case folding takes it for s
    "İ am in an infinite loop",
    "ı'm in a loop",
    '{"is_in_loop": true}',
    '{"is_in_loop": {"reason": "x", "answer": true}}',
    "The loop in main() iterates over circles.",
    "",
]


def test_an_answer_that_names_no_loop_is_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """C.loop_reported_not_stopped reads every answer: the pattern (each branch tried at every
    word) runs only on an answer that says ``loop`` or ``…rcle…``, and finds what it found before
    (issue 73)."""
    from cassettes.analysis import _provenance as prov

    want = [prov.LOOPING.search(t) is not None for t in _LOOP_TEXTS]
    assert want == [False, True, True, True, True, True, True, True, False, False]
    counted = _Counted(prov.LOOPING)
    monkeypatch.setattr(prov, "LOOPING", counted)
    assert [prov._says_looping(t) for t in _LOOP_TEXTS] == want
    assert counted.calls == len(_LOOP_TEXTS) - 2  # not the first, not the empty one


def test_a_long_result_without_markup_is_measured_without_the_markup_pattern(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """C.tool_result_blocked reads every tool result: a short one is short as it is, one without
    a tag is not run through the markup pattern; what is a block page stays one (issue 73)."""
    from cassettes.analysis.dispatch import _blocked as blocked

    page = "<html><body><h1>Sorry, you have been blocked</h1>" + "<p>ray id</p>" * 200
    texts = [
        "Just a moment... Enable JavaScript and cookies to continue",
        "   Just a moment...   ",
        "word " * 290 + "are you a robot?",  # 1,466 characters
        "word  " * 250 + "are you a robot?",  # long, but short once squashed
        "word " * 400 + "are you a robot?",  # too long
        page,
        page.replace("<p>ray id</p>", "<p>" + "x" * 20 + "</p>"),
        "<script>" + "x" * 5000 + "</script> verify you are human",
    ]
    want = [blocked.blocked_page(t) for t in texts]
    assert want[:4] == [
        "Just a moment...",
        "Just a moment...",
        "are you a robot",
        "are you a robot",
    ]
    assert want[4] is None and want[5] == "Sorry, you have been blocked" and want[7] is not None
    counted = _Counted(blocked._MARKUP)
    monkeypatch.setattr(blocked, "_MARKUP", counted)
    assert [blocked.blocked_page(t) for t in texts] == want
    assert counted.calls == 3  # the three long pages with tags
