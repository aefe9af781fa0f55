"""``cassettes.analysis.price_memo``: what genai-prices answered, written down, gives the same
figures without genai-prices; a memo that is not sound is never used.

The equivalence runs every case of ``test_pricing`` (every model of every provider, on usages,
timestamps, price contexts and tier edges that select each price) twice: once through the library,
which fills the memo, and once from the memo after a round trip through its file format, with the
library forbidden. The figures, providers, models and errors must be the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_pricing import NOW, USAGES, _cases, _ours

from cassettes.analysis import price_memo, price_memo_shape, pricing


@pytest.fixture
def memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh state directory, and an empty memo in this process (forgotten again after the
    test)."""
    state = tmp_path / "state"
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(state))
    price_memo.process_memo().forget()
    yield state / price_memo.FILE_NAME
    price_memo.process_memo().forget()


def _call(
    usage: dict[str, int], model_ref: str, provider_id: str | None, when: datetime, ctx: Any
) -> Any:
    try:
        return price_memo.calc_price(
            usage, model_ref, provider_id=provider_id, when=when, price_context=ctx
        )
    except Exception as exc:  # the error itself is what must match
        return type(exc), str(exc)


def _library_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = pricing.calc_price

    def counting(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(pricing, "calc_price", counting)
    return calls


def test_the_memo_gives_the_library_figures_for_every_model(
    memo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every model at once (a user's memo holds what their runs name)
    monkeypatch.setattr(price_memo, "MAX", 1 << 20)
    save = price_memo.save
    # the file round trip is done once, below
    monkeypatch.setattr(price_memo, "save", lambda doc: None)
    cases = _cases() + [
        (ref, None, NOW, None, u)
        for ref in ("gpt-4o", "claude-3-5-haiku-latest", "no-such-model-xyz")
        for u in USAGES
    ]
    # pricing.calc_price: the library's figures (test_pricing)
    want = [_ours(u, ref, pid, when, ctx) for ref, pid, when, ctx, u in cases]
    calls = _library_calls(monkeypatch)
    # the library fills the memo as it goes
    first = [_call(u, ref, pid, when, ctx) for ref, pid, when, ctx, u in cases]
    assert calls and len(calls) < len(cases)
    # the memo as its file holds it
    doc = orjson.loads(orjson.dumps(price_memo.process_memo().doc()))
    assert price_memo_shape.sound(doc)
    save(doc)
    price_memo.process_memo().forget()  # the next process: from the file
    assert price_memo.process_memo().doc() == doc
    calls.clear()
    second = [_call(u, ref, pid, when, ctx) for ref, pid, when, ctx, u in cases]
    for got in (first, second):
        differ = [
            (c, a, b)
            for c, a, b in zip(cases, want, got, strict=True)
            if a != b or str(a[0]) != str(b[0])
        ]
        assert not differ, f"{len(differ)} of {len(cases)} differ, e.g. {differ[:3]}"
    assert sum(isinstance(r[0], Decimal) for r in want) > len(cases) * 0.8
    # from the memo, the library is asked only for what it rejects (its own error) or prices its own
    # way
    rejected = sum(not isinstance(r[0], Decimal) and r[0] is not LookupError for r in want)
    assert len(calls) <= rejected + len(cases) * 0.01, (len(calls), rejected, len(cases))


def test_a_host_and_a_model_name_from_the_memo(memo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    urls = [
        "https://api.anthropic.com/v1/messages",
        "https://api.openai.com/v1/chat/completions",
        "https://generativelanguage.googleapis.com/v1beta/models/x",
        "http://127.0.0.1:8000/v1/chat",
        "https://api.mistral.ai/v1/x",
    ]
    names = ["gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929", "my-router", "gemini-2.5-pro"]

    def answers() -> list[Any]:
        out: list[Any] = []
        for url in urls:
            try:
                out.append(price_memo.provider_for_url(url))
            except LookupError:
                out.append(LookupError)
        return out + [price_memo.known_model(n) for n in names]

    from cassettes.analysis.price_data import get_snapshot

    want: list[Any] = []
    for url in urls:
        try:
            want.append(get_snapshot().find_provider(None, None, url).id)
        except LookupError:
            want.append(LookupError)
    for n in names:
        try:
            p, m = get_snapshot().find_provider_model(n, None, None, None)
            want.append(f"{p.id}/{m.id}")
        except LookupError:
            want.append(None)
    assert answers() == want
    assert memo.is_file()
    price_memo.process_memo().forget()  # the next process: from the file
    monkeypatch.setattr("cassettes.analysis.price_data.get_snapshot", _forbidden)
    monkeypatch.setattr(price_memo, "get_snapshot", _forbidden)
    assert answers() == want


def _forbidden(*a: Any, **k: Any) -> Any:
    raise AssertionError("the library was asked")


def _fill(memo: Path) -> tuple[Decimal, str, str]:
    got = price_memo.calc_price(
        {"input_tokens": 1000, "output_tokens": 100}, "gpt-4o", provider_id="openai", when=NOW
    )
    assert memo.is_file()
    return got


def _signed(memo: Path, doc: Any) -> None:
    """``doc`` written as the memo, with a valid signature: only the shape checks can refuse it."""
    from cassettes.parsing import sealed

    key = sealed.machine_key(create=True)
    assert key is not None and price_memo.table_identity() is not None
    body = orjson.dumps(doc)
    memo.write_bytes(
        price_memo.signature(key, price_memo.table_identity() or [], body).encode() + b"\n" + body
    )


def _tamper_price(memo: Path) -> None:
    doc = orjson.loads(memo.read_bytes().partition(b"\n")[2])
    for plan in doc["plans"].values():
        plan["resolved"][0][2] = "0.0001"
    memo.write_bytes(memo.read_bytes().partition(b"\n")[0] + b"\n" + orjson.dumps(doc))


def _bad_shape(memo: Path) -> None:
    doc = orjson.loads(memo.read_bytes().partition(b"\n")[2])
    for plan in doc["plans"].values():
        plan["resolved"][0][2] = "one dollar"
    _signed(memo, doc)


def _unknown_leaf(memo: Path) -> None:
    doc = orjson.loads(memo.read_bytes().partition(b"\n")[2])
    for plan in doc["plans"].values():
        # reads a count not computed yet
        plan["leaves"].insert(0, ["output_tokens", ["input_tokens"]])
    _signed(memo, doc)


def _world_writable(memo: Path) -> None:
    _tamper_price(memo)
    os.chmod(memo, 0o666)
    _signed_keep_mode(memo)


def _signed_keep_mode(memo: Path) -> None:
    doc = orjson.loads(memo.read_bytes().partition(b"\n")[2])
    _signed(memo, doc)  # signed, with the tampered price: refused for its mode alone


def _other_release(memo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tamper_price(memo)
    _signed_keep_mode(memo)
    monkeypatch.setattr(price_memo, "PRICES_VERSION", "0.0.0")  # the installed table changed since


@pytest.mark.parametrize(
    "spoil",
    [
        "truncated",
        "not json",
        "tampered price",
        "bad shape",
        "unknown leaf",
        "world-writable",
        "other release",
        "a directory",
    ],
)
def test_a_memo_that_is_not_sound_is_not_used(
    memo: Path, monkeypatch: pytest.MonkeyPatch, spoil: str
) -> None:
    want = _fill(memo)
    if spoil == "truncated":
        memo.write_bytes(memo.read_bytes()[:-40])
    elif spoil == "not json":
        _signed_raw = memo.read_bytes().partition(b"\n")[0]
        memo.write_bytes(_signed_raw + b"\n{]")
    elif spoil == "tampered price":
        _tamper_price(memo)
    elif spoil == "bad shape":
        _bad_shape(memo)
    elif spoil == "unknown leaf":
        _unknown_leaf(memo)
    elif spoil == "world-writable":
        _world_writable(memo)
    elif spoil == "other release":
        _other_release(memo, monkeypatch)
    else:
        memo.unlink()
        memo.mkdir()
    price_memo.process_memo().forget()
    calls = _library_calls(monkeypatch)
    got = price_memo.calc_price(
        {"input_tokens": 1000, "output_tokens": 100}, "gpt-4o", provider_id="openai", when=NOW
    )
    assert got == want and calls == [1]  # the library answered


def test_a_sound_memo_is_used(memo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The twin of the above: the same memo, unspoiled, answers without the library."""
    want = _fill(memo)
    assert memo.stat().st_mode & 0o777 == 0o600
    price_memo.process_memo().forget()
    calls = _library_calls(monkeypatch)
    got = price_memo.calc_price(
        {"input_tokens": 1000, "output_tokens": 100}, "gpt-4o", provider_id="openai", when=NOW
    )
    assert got == want and calls == []
    # another day, another usage shape: a plan or an inferred key not written down yet goes to the
    # library
    price_memo.calc_price(
        {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 10},
        "gpt-4o",
        provider_id="openai",
        when=datetime(2026, 11, 24, tzinfo=UTC),
    )
    assert calls == [1]


def test_the_same_table_installed_elsewhere_is_the_same_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The price table is known by its bytes, not by where it is installed nor when: the recorder's
    environment and the reader's hold one table, so an analysis kept by one is the one the other
    takes (docs/kept-analysis.md). Another table is another table."""
    from cassettes.analysis import price_data

    real = price_data.data_file()
    assert real is not None
    here = price_memo.table_identity()
    copy = tmp_path / "elsewhere" / "genai_prices" / "data.py"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(real.read_bytes())
    os.utime(copy, ns=(1, 1))
    monkeypatch.setattr(price_memo, "data_file", lambda: copy)
    assert price_memo.table_identity() == here
    copy.write_bytes(real.read_bytes().replace(b"0.", b"1.", 1))
    assert price_memo.table_identity() != here
