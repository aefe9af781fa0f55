"""``cassettes.analysis._price_data.calc_price`` (without the package's ``__init__``) gives what
``genai_prices.calc_price`` gives, for every model of every provider in the bundled snapshot: the
same total, provider and model, or the same error (type and message).

Every model is tried on a grid of usages; a model with conditional prices, price variants or tiers
also on the timestamps, contexts and tier edges that select them (about 39,000 cases, 5 s).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import ModelPrice, TieredPrices

from looptap.cassettes.analysis import PRICES_VERSION, calc_price

NOW = datetime(2026, 11, 23, 15, 0, tzinfo=UTC)

USAGES: list[dict[str, int]] = [
    {"input_tokens": 1200, "output_tokens": 300},
    {"input_tokens": 0, "output_tokens": 0},
    {},
    {"output_tokens": 17},
    {"input_tokens": 5000, "output_tokens": 40, "cache_read_tokens": 4000},
    {
        "input_tokens": 5000,
        "output_tokens": 40,
        "cache_read_tokens": 3000,
        "cache_write_tokens": 1500,
    },
    {
        "input_tokens": 9000,
        "output_tokens": 900,
        "cache_write_5m_tokens": 800,
        "cache_write_1h_tokens": 600,
        "cache_write_tokens": 1400,
    },
    # more cached than input: rejected
    {"input_tokens": 100, "output_tokens": 10, "cache_read_tokens": 101},
    {"cache_read_tokens": 50, "output_tokens": 5},  # a part without the whole it belongs to
    {
        "input_tokens": 800,
        "input_audio_tokens": 300,
        "output_tokens": 200,
        "output_audio_tokens": 120,
    },
    {"input_tokens": 2000, "output_tokens": 1500, "output_reasoning_tokens": 1200},
    # reasoning > output
    {"input_tokens": 2000, "output_tokens": 1500, "output_reasoning_tokens": 1600},
    # past most tiers
    {"input_tokens": 300_000, "output_tokens": 2000, "cache_read_tokens": 100_000},
    {"input_tokens": 10, "output_tokens": 1, "web_searches": 2, "input_image_tokens": 4},
]


def _timestamps(model: Any) -> list[datetime]:
    out = [NOW]
    if isinstance(model.prices, ModelPrice):
        return out
    for cond in model.prices:
        c = cond.constraint
        if c is None:
            continue
        if hasattr(c, "start_date"):
            start = datetime.combine(c.start_date, time(0), tzinfo=UTC)
            out += [start - timedelta(seconds=1), start]
        else:
            for t in (c.start_time, c.end_time):
                at = datetime.combine(NOW.date(), t.replace(tzinfo=t.tzinfo or UTC))
                out += [at - timedelta(seconds=1), at]
    return out


def _contexts(model: Any) -> list[dict[str, str] | None]:
    out: list[dict[str, str] | None] = [None]
    for variant in model.price_variants or ():
        out.append(dict(variant.when))
    if model.price_variants:
        out.append({"service_tier": "default"})
    return out


def _tier_usages(model: Any) -> list[dict[str, int]]:
    prices = (
        [model.prices] if isinstance(model.prices, ModelPrice) else [c.prices for c in model.prices]
    )
    starts = {
        t.start
        for p in prices
        for v in p.__dict__.values()
        if isinstance(v, TieredPrices)
        for t in v.tiers
    }
    out = []
    for s in sorted(starts):
        for n in (s, s + 1):
            out.append({"input_tokens": n, "output_tokens": 100})
            out.append({"input_tokens": n, "output_tokens": 100, "cache_read_tokens": n // 2})
    return out


def _library(
    usage: dict[str, int], model_ref: str, provider_id: str | None, when: datetime, ctx: Any
) -> Any:
    try:
        calc = genai_prices.calc_price(
            genai_prices.Usage(**usage),
            model_ref=model_ref,
            provider_id=provider_id,
            genai_request_timestamp=when,
            price_context=ctx or None,
        )
    except Exception as exc:  # the error itself is what must match
        return type(exc), str(exc)
    return calc.total_price, calc.provider.id, calc.model.id


def _ours(
    usage: dict[str, int], model_ref: str, provider_id: str | None, when: datetime, ctx: Any
) -> Any:
    try:
        return calc_price(usage, model_ref, provider_id=provider_id, when=when, price_context=ctx)
    except Exception as exc:
        return type(exc), str(exc)


Case = tuple[str, str | None, datetime, Any, dict[str, int]]


def _cases() -> list[Case]:
    cases: list[Case] = []
    for provider in get_snapshot().providers:
        for model in provider.models:
            usages = USAGES + _tier_usages(model)
            for when in _timestamps(model):
                for ctx in _contexts(model):
                    cases += [(model.id, provider.id, when, ctx, u) for u in usages]
    return cases


@pytest.mark.slow(
    reason="every model, time and context of genai-prices' snapshot, over 20,000 cases, ~6 s of "
    "CPU; the same comparison by name, on unusual usage and on prices that change with time is "
    "the default run's (this module's other tests)"
)
def test_same_as_genai_prices_for_every_model() -> None:
    cases = _cases()
    assert len(cases) > 20_000
    mismatches = []
    priced = 0
    for model_ref, provider_id, when, ctx, usage in cases:
        want = _library(usage, model_ref, provider_id, when, ctx)
        got = _ours(usage, model_ref, provider_id, when, ctx)
        if got != want:
            mismatches.append((provider_id, model_ref, when.isoformat(), ctx, usage, want, got))
        priced += isinstance(got[0], Decimal)
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ, e.g. {mismatches[:3]}"
    assert priced > len(cases) * 0.8  # most cases are priced, not errors


def test_without_provider_by_model_name_alone() -> None:
    """The estimated path (a host genai-prices does not know) looks the model up by name."""
    for ref in ("gpt-4o", "claude-3-5-haiku-latest", "gemini-2.5-pro", "no-such-model-xyz"):
        for usage in USAGES[:7]:
            assert _ours(usage, ref, None, NOW, None) == _library(usage, ref, None, NOW, None)


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 10, "output_tokens": True},  # bool: genai-prices rejects it
        {"input_tokens": 10.5, "output_tokens": 2},  # a float: genai-prices converts its own way
        {"input_tokens": -1, "output_tokens": 2},
        # a key it does not know: a warning
        {"input_tokens": 10, "output_tokens": 2, "bogus_tokens": 3},
    ],
)
def test_unusual_usage_goes_to_the_library(usage: dict[str, Any]) -> None:
    with pytest.warns(UserWarning) if "bogus_tokens" in usage else _nothing():
        got = _ours(usage, "gpt-4o", "openai", NOW, None)
    with pytest.warns(UserWarning) if "bogus_tokens" in usage else _nothing():
        want = _library(usage, "gpt-4o", "openai", NOW, None)
    assert got == want


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts genai-prices' own price computations (``ModelPrice.calc_price``)."""
    calls = [0]
    real = ModelPrice.calc_price

    def counted(self: ModelPrice, usage: Any) -> Any:
        calls[0] += 1
        return real(self, usage)

    monkeypatch.setattr(ModelPrice, "calc_price", counted)
    return calls


def test_a_price_is_computed_once_per_model_and_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    """A big run prices the same model and counts again and again: genai-prices computes it once
    (issue 73), and every later call gives the library's own result."""
    calls = _counting(monkeypatch)
    usage = {"input_tokens": 73_001, "output_tokens": 420, "cache_read_tokens": 1200}
    first = calc_price(usage, "claude-sonnet-4-5", provider_id="anthropic", when=NOW)
    for k in range(5):
        later = NOW + timedelta(days=k)
        assert (
            calc_price(dict(usage), "claude-sonnet-4-5", provider_id="anthropic", when=later)
            == first
        )
    assert calls[0] == 1
    # other counts, another model, a bool for an int: each its own price
    calc_price({**usage, "output_tokens": 421}, "claude-sonnet-4-5", provider_id="anthropic")
    calc_price(usage, "claude-3-5-haiku-latest", provider_id="anthropic")
    assert calls[0] == 3
    assert first == _library(usage, "claude-sonnet-4-5", "anthropic", NOW, None)
    one = {"input_tokens": 10, "output_tokens": 1}
    assert _ours(one, "gpt-4o", "openai", NOW, None) == _library(one, "gpt-4o", "openai", NOW, None)
    flag = {"input_tokens": 10, "output_tokens": True}
    assert _ours(flag, "gpt-4o", "openai", NOW, None) == _library(
        flag, "gpt-4o", "openai", NOW, None
    )


def test_a_price_that_changes_with_time_is_computed_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model with dated or timed prices (deepseek's off-peak hours) is priced at each call's
    time, never taken from another call's."""
    timed = [
        (p.id, m)
        for p in get_snapshot().providers
        for m in p.models
        if not isinstance(m.prices, ModelPrice)
        and any(c.constraint is not None and hasattr(c.constraint, "start_time") for c in m.prices)
    ]
    assert timed, "genai-prices has no model with timed prices any more"
    provider_id, model = timed[0]
    usage = {"input_tokens": 100_000, "output_tokens": 5_000}
    whens = [datetime.combine(NOW.date(), time(h, 0), tzinfo=UTC) for h in range(0, 24, 3)]
    calls = _counting(monkeypatch)
    got = [_ours(usage, model.id, provider_id, w, None) for w in whens]
    assert calls[0] == len(whens)
    assert got == [_library(usage, model.id, provider_id, w, None) for w in whens]
    assert len({g[0] for g in got}) > 1  # the time of day chose the price


def _library_at(usage: dict[str, int], model: str, provider_id: str, when: datetime) -> Decimal:
    return Decimal(_library(usage, model, provider_id, when, None)[0])


def _clock(now: datetime) -> type[datetime]:
    """``datetime`` whose ``now`` is ``now``."""

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return now if tz is None else now.astimezone(tz)

    return Clock


def test_a_call_without_a_clock_is_priced_alike_at_any_hour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call made at a time nobody knows is priced on the newest day its model's prices name, at
    that day's highest hourly rate: DeepSeek Chat's peak rate (00:30–16:30 UTC), never its
    off-peak discount; Gemini 3.6 Flash's introductory price until 2027-01-01 (a price listed from
    a later date never applied to a call already recorded; fails on 519861c1, which took it), its
    newest from that day on; the hour said only where it changed the price."""
    from looptap.cassettes.analysis import _price_data
    from looptap.cassettes.analysis._price_data import calc_price_clockless

    usage = {"input_tokens": 100_000, "output_tokens": 5_000}
    total, prov, model, hourly = calc_price_clockless(
        usage, "deepseek-chat", provider_id="deepseek"
    )
    peak = _library_at(usage, "deepseek-chat", "deepseek", datetime(2026, 11, 23, 12, tzinfo=UTC))
    off = _library_at(usage, "deepseek-chat", "deepseek", datetime(2026, 11, 23, 20, tzinfo=UTC))
    assert (total, prov, model, hourly) == (peak, "deepseek", "deepseek-chat", True)
    assert off < peak
    newest = datetime(2027, 1, 1, tzinfo=UTC)
    for today, priced_at in ((datetime(2026, 11, 27, 9, tzinfo=UTC), newest - timedelta(days=1)),
                             (newest + timedelta(hours=9), newest)):  # fmt: skip
        monkeypatch.setattr(_price_data, "datetime", _clock(today))
        total, prov, model, hourly = calc_price_clockless(usage, "gemini-3.6-flash")
        assert total == _library_at(usage, "gemini-3.6-flash", prov, priced_at)
        assert not hourly
    intro = _library_at(usage, "gemini-3.6-flash", prov, newest - timedelta(days=1))
    assert intro != _library_at(usage, "gemini-3.6-flash", prov, newest)
    assert calc_price_clockless(usage, "gpt-4o", provider_id="openai") == (
        *calc_price(usage, "gpt-4o", provider_id="openai", when=NOW),
        False,
    )


def test_a_recording_without_a_clock_costs_the_same_whenever_it_is_viewed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real DeepSeek recording (pydantic-ai's deepseek-v4-flash cassette: no timestamps, no
    Date header) analysed with the system clock at 02:00 UTC (the model's peak hours) and at
    12:00 UTC (off-peak, half the price): the same costs, the peak rate's, and the price source
    says why. Fails on 59f08458: it was priced at the hour it was viewed."""
    import genai_prices.data_snapshot
    from real_corpus import CORPUS, load

    from looptap.cassettes.analysis import analyse

    path = CORPUS / (
        "pydantic-ai/tests/models/cassettes/test_deepseek_responses/"
        "test_deepseek_responses[text_multi_turn].yaml"
    )

    def viewed_at(hour: int) -> list[tuple[Any, ...]]:
        clock = _clock(datetime(2026, 11, 23, hour, tzinfo=UTC))
        monkeypatch.setattr(genai_prices.data_snapshot, "datetime", clock)
        turns = analyse(load(path)).turns.values()
        return [(t.tokens.cost, t.tokens.price_source) for t in turns]

    peak, off_peak = viewed_at(2), viewed_at(12)
    assert peak == off_peak
    assert len(peak) == 2 and all(cost for cost, _ in peak)
    assert all(
        src == f"genai-prices {PRICES_VERSION}: deepseek/deepseek-v4-flash (the recording has no "
        "time: the model's highest hourly rate)"
        for _, src in peak
    ), peak
