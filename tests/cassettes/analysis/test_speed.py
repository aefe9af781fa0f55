"""Work the analysis does once per turn, not twice (issue 30's batch speed): counted, never
timed."""

from __future__ import annotations

import pytest


def test_a_spilled_batch_is_one_transaction() -> None:
    """A table that spills writes its batch in one transaction, not one commit per row (in
    autocommit mode each row was a commit: ten times the time for a batch of 10,000)."""
    from looptap.cassettes.analysis.spill import Spill, SpillMap

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
    from looptap.cassettes.analysis.spill import Spill, SpillMap

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


def test_a_long_result_is_a_block_page_as_before() -> None:
    """C.tool_result_blocked reads every tool result: a short one is short as it is, a long one
    without a tag is squashed without the markup pattern (issue 73); what is a block page stays
    one, what is not stays not."""
    from looptap.cassettes.analysis.dispatch import blocked_page

    page = "<html><body><h1>Sorry, you have been blocked</h1>" + "<p>ray id</p>" * 200
    texts = [
        "Just a moment... Enable JavaScript and cookies to continue",
        "   Just a moment...   ",
        "word " * 290 + "are you a robot?",  # 1,466 characters
        "word  " * 250 + "are you a robot?",  # long, but short once squashed
        "word " * 400 + "are you a robot?",  # too long
        page,  # short once its tags are out
        page.replace("<p>ray id</p>", "<p>" + "x" * 20 + "</p>"),  # long without its tags too
        "<script>" + "x" * 5000 + "</script> verify you are human",
        # long, with whitespace str.split reads as such (ASCII separators, a no-break space)
        "word\x1c\x1f\x0b " * 250 + "are you a robot?",
        "word\u00a0\u2003 " * 250 + "are you a robot?",
        "wörd " * 400 + "are you a robot?",  # too long (not ASCII: its head read)
    ]
    got = [blocked_page(t) for t in texts]
    assert got == [
        "Just a moment...",
        "Just a moment...",
        "are you a robot",
        "are you a robot",
        None,
        "Sorry, you have been blocked",
        None,
        "verify you are human",
        "are you a robot",
        "are you a robot",
        None,
    ]
