"""The analysis' spilled tables hold plain rows (JSON), never pickles (issue 72 item 4: a cache is
plain rows); what is read back is the value written, its types included, and a value JSON cannot
hold stays in memory instead of failing the analysis."""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.analysis import Finding, Severity, spill

ROOT = Path(__file__).resolve().parents[3]


@dataclass(eq=False)
class Memory:
    """A value of the kind the analysis spills: a dataclass of plain values and models."""

    id: str
    count: int = 0
    state: dict[str, object] = field(default_factory=dict)
    final: list[Finding] | None = None


@dataclass(slots=True)
class Slotted:
    ids: frozenset[str]
    parts: list[tuple[int, int]] | None


CLASSES: dict[str, type] = {c.__qualname__: c for c in (Memory, Slotted, Finding)}


def _rows(table: spill.SpillMap[int, object]) -> list[bytes]:
    s = table._spill
    db = s.db(table._table)
    return [v for (v,) in db.execute(f"SELECT v FROM {table._table}")]


def test_spilled_entries_are_plain_rows_read_back_as_written() -> None:
    finding = Finding(code="E.repeated_call", layer="E", severity=Severity.INFO, message="again")
    values: list[object] = [
        (3, 4),
        {"a": {1, 2}, 7: frozenset({"x"}), "d": Decimal("0.125")},
        OrderedDict([("k", [1, (2, "t")])]),
        Memory(id="c1", count=3, state={"E.results_by_id": {"id": 5}}, final=[finding]),
        Slotted(ids=frozenset({"call_1"}), parts=[(1, 2)]),
    ]
    s = spill.Spill(CLASSES)
    table: spill.SpillMap[int, object] = spill.SpillMap(s, keep=1)
    for k, v in enumerate(values):
        table[k] = v
        table.trim()
    table[len(values)] = "last"
    table.trim()
    assert s.used
    rows = _rows(table)
    assert len(rows) >= len(values) - 1
    for row in rows:
        assert not row.startswith(b"\x80"), "a pickle"
        orjson.loads(row)  # JSON
    for k, want in enumerate(values):
        got = table.peek(k)
        assert type(got) is type(want)
        if isinstance(want, Memory):
            assert isinstance(got, Memory)
            assert (got.id, got.count, got.state, got.final) == (
                want.id,
                want.count,
                want.state,
                want.final,
            )
            assert got.final is not None and got.final[0].severity is Severity.INFO
        elif isinstance(want, Slotted):
            assert isinstance(got, Slotted)
            assert (got.ids, got.parts) == (want.ids, want.parts)
        else:
            assert got == want
    assert [k for k, _ in table.entries()] == list(range(len(values) + 1))
    s.close()


def test_a_value_json_cannot_hold_stays_in_memory() -> None:
    """A value of a class the spill was not told of, or text with a lone surrogate, is kept in
    memory (as a pickle would have kept anything): the analysis goes on, nothing is lost."""

    class Unknown:
        pass

    s = spill.Spill()
    table: spill.SpillMap[int, object] = spill.SpillMap(s, keep=1)
    odd = [Unknown(), "\ud800 lone", "fine"]
    for k, v in enumerate(odd):
        table[k] = v
        table.trim()
    for k in range(10):
        table[100 + k] = k
        table.trim()
    assert table.peek(0) is odd[0] and table.peek(1) == odd[1]
    assert dict(table.hot_items()).keys() >= {0, 1}
    assert len(table) == len(odd) + 10
    s.close()


def test_no_module_of_the_core_pickles() -> None:
    """Nothing under cassettes/ pickles: its caches and spills are plain rows."""
    found = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "cassettes").rglob("*.py")
        if re.search(r"^\s*(import pickle|from pickle import|import cPickle)", p.read_text(), re.M)
    ]
    assert not found, found


def test_a_full_disk_under_the_spill_is_said_as_an_os_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite says a full disk as ``sqlite3.OperationalError``, which no command catches (a
    traceback); the store says it as an ``OSError``, which every command says in one line."""
    import sqlite3

    store = spill.Spill()
    table = store.table()
    db = store.db(table)

    class Full:
        def __getattr__(self, name: str) -> object:
            return getattr(db, name)

        def executemany(self, *a: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "db", lambda t: Full())
    with pytest.raises(OSError, match="disk is full"):
        store.write(table, [(1, b"x")])
    monkeypatch.undo()
    store.write(table, [(1, b"x")])  # the rolled-back batch left the store usable
    assert store.value(table, 1) == b"x"
    store.close()


def test_a_table_s_bloom_filter_grows_with_the_keys_it_spilled() -> None:
    """The filter that keeps lookups of keys never spilled off the disk is sized by the keys on
    disk (it was 2 MB, all of it resident, for any table that spilled one key): a few hundred
    keys take 8 KB. Made larger as the table spills more, it still finds every key on disk, of
    both kinds, and a key taken back and spilled again."""
    s = spill.Spill()
    table: spill.SpillMap[int, int] = spill.SpillMap(s, keep=8)
    names: spill.SpillMap[str, int] = spill.SpillMap(s, keep=8)
    for k in range(300):
        table[k], names[f"conversation-{k}"] = k, k
        table.trim()
        names.trim()
    assert 0 < len(table._bloom or b"") <= 8 * 1024
    assert table[5] == 5 and 5 in dict(table.hot_items())  # taken back from disk
    for k in range(300, 20_000):
        table[k] = k
        table.trim()
    assert 16 * len(_rows(table)) <= 8 * len(table._bloom or b"") <= 2**24
    assert all(table.peek(k) == k for k in range(0, 20_000, 7))
    assert all(names.peek(f"conversation-{k}") == k for k in range(300))
    assert 20_000 not in table and len(table) == 20_000
    s.close()
