"""One turn's price from genai-prices, the same figure as ``genai_prices.calc_price``, at a sixth of
its cost.

``genai_prices.calc_price`` (0.2.x) spends about 0.4 ms on every call, most of it re-deriving what
does not change from one turn to the next: which of the model's prices apply and whether they
cover each other (resolved and validated again on every call), and which missing usage keys
count as 0 (inferred again for every key on every call). Pricing was about a sixth of the time
to read a large run. :func:`calc_price` finds the provider, the model and its price exactly as
genai-prices does (its own public lookups), keeps the two things above per price (keyed by
the identities of a price's values, the snapshot's own objects, kept alive here), and
computes the usage-dependent part with genai-prices' own functions:

* the priced counts are genai-prices' ``compute_leaf_values`` with its order and containment
  worked out once per price (cached tokens subtracted from the input they are part of); a
  negative count is handed to that function, which rejects it with its own error;
* a usage key the turn did not report takes the value genai-prices infers for it, asked of
  genai-prices once per (key, set of reported keys), since the inference depends on nothing
  else; where it would refuse (a descendant reported without its ancestor), the call falls
  back to genai-prices itself, which raises its own error;
* each price is applied with its ``calc_unit_price`` (tiers chosen by the total input, as there).

Anything outside that path goes to ``genai_prices.calc_price`` unchanged: usage values that are
not plain non-negative integers or keys genai-prices does not know, Groq's Whisper models (billed
by a minimum duration), a price it rejects, or a genai-prices whose names moved (the imports
below fail, or a release other than 0.2.x, which the package pins). Only the library's public
names are used.
``tests/cassettes/analysis/test_pricing.py`` compares the two for every model of every provider in
the bundled snapshot on usages that cover cache reads and writes, audio, reasoning, tiers, zeros and
rejected ones.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from cassettes.analysis.price_data import PRICES_VERSION, get_snapshot, library

__all__ = ["PRICES_VERSION", "calc_price", "usage_keys"]

try:  # the library's public names the fast path reuses; any move sends every call to the library
    from genai_prices.decompose import compute_leaf_values, is_descendant_or_self
    from genai_prices.types import ModelPrice, TieredPrices, Usage, calc_unit_price

    _FAST = PRICES_VERSION.startswith("0.2.")
except ImportError:  # pragma: no cover - another genai-prices
    _FAST = False


@functools.cache
def _registry() -> Any:
    """genai-prices' unit registry, built from its bundled unit data as the library builds its own
    (``UnitRegistry(unit_data)``, both public names)."""
    from genai_prices.data_units import unit_data
    from genai_prices.units import UnitRegistry

    return UnitRegistry(unit_data)


@functools.cache
def usage_keys() -> frozenset[str]:
    """The usage keys genai-prices reads: every unit of its registry but ``requests``."""
    return frozenset(k for k in _registry().units if k != "requests")


class _Plan:
    """What one model price needs on every call, worked out once."""

    __slots__ = ("keys", "leaves", "needed", "price", "resolved", "tiered", "units")

    def __init__(self, price: Any) -> None:
        registry = _registry()
        # the price's set values, each with its unit (KeyError for a key genai-prices does not
        # price: it warns and decides); then the library's own checks, which raise as calc_price
        # would, run once through its public ModelPrice.calc_price
        resolved = tuple(
            (registry.unit_for_price_key(k), v)
            for k, v in vars(price).items()
            if not k.startswith("_") and v is not None
        )
        price.calc_price(Usage())
        self.price = price  # kept alive with its values: the cache is keyed by their identities
        self.resolved = resolved
        self.units = {unit.usage_key: unit for unit, _ in resolved if unit.usage_key != "requests"}
        self.keys = set(self.units)
        self.tiered = any(isinstance(p, TieredPrices) for _, p in resolved)
        #: The usage keys read: the priced ones, and the total input that picks a tier.
        self.needed = self.keys | {"input_tokens"} if self.tiered else set(self.keys)
        # compute_leaf_values' order and descendants, which depend on the priced units only:
        # most specific first, each leaf its count less the leaves of the units it contains.
        ordered = sorted(
            self.units.values(), key=lambda unit: (-len(unit.dimensions), unit.usage_key)
        )
        self.leaves = [
            (
                unit.usage_key,
                [d.usage_key for d in ordered if d is not unit and is_descendant_or_self(unit, d)],
            )
            for unit in ordered
        ]


# Keyed by the identities of the price's values: ``ModelInfo.get_prices`` returns a fresh shallow
# copy whenever a price context is given, but its values are the snapshot's own objects, and the
# plan keeps them alive, so an identity in a key is never reused while the key is cached.
_PLANS: dict[tuple[Any, ...], _Plan | None] = {}
# (usage key, the reported keys with a positive value) → the value genai-prices infers for the
# key when it is missing (0), or None where it refuses to infer one.
_INFERRED: dict[tuple[str, frozenset[str]], int | None] = {}
_CACHE_MAX = 4096
_MISSING: Any = object()


def _plan(price: Any) -> _Plan | None:
    if type(price) is not ModelPrice:
        return None
    key = tuple((k, id(v)) for k, v in price.__dict__.items())
    # one lookup: another thread may clear it in between
    hit: _Plan | None = _PLANS.get(key, _MISSING)
    if hit is not _MISSING:
        return hit
    plan: _Plan | None
    try:
        plan = _Plan(price)
    except (ValueError, KeyError, TypeError, ArithmeticError):
        plan = None  # the library raises its own error for it
    if len(_PLANS) >= _CACHE_MAX:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _inferred(key: str, positive: frozenset[str]) -> int | None:
    hit: int | None = _INFERRED.get((key, positive), _MISSING)
    if hit is not _MISSING:
        return hit
    probe = Usage(**dict.fromkeys(positive, 1))
    value: int | None
    try:
        got = getattr(probe, key)
    except ValueError:
        got = None
    value = 0 if type(got) is int and got == 0 else None  # anything but 0 is left to the library
    if len(_INFERRED) >= _CACHE_MAX:
        _INFERRED.clear()
    _INFERRED[(key, positive)] = value
    return value


def _total(plan: _Plan, usage: dict[str, int]) -> Decimal | None:
    """The price of ``usage`` under ``plan``, or None to ask the library."""
    values = dict(usage)
    positive: frozenset[str] | None = None
    for key in plan.needed:
        if key not in values:
            if positive is None:
                positive = frozenset(k for k, v in usage.items() if v > 0)
            inferred = _inferred(key, positive)
            if inferred is None:
                return None
            values[key] = inferred
    counts: dict[str, int] = {"requests": 1}
    for key, contained in plan.leaves:
        leaf = values[key] - sum(counts[d] for d in contained)
        if leaf < 0:  # genai-prices rejects it: its own function raises its own message
            compute_leaf_values(plan.keys, SimpleNamespace(**values), plan.units)
            return None
        counts[key] = leaf
    total_input = values["input_tokens"] if plan.tiered else 0
    total = Decimal(0)
    for unit, price in plan.resolved:
        total += calc_unit_price(price, counts[unit.usage_key], total_input, unit.per)
    return total


def calc_price(
    usage: dict[str, int],
    model_ref: str,
    *,
    provider_id: str | None = None,
    when: datetime | None = None,
    price_context: dict[str, Any] | None = None,
) -> tuple[Decimal, str, str]:
    """(total price in USD, provider id, model id) of one call, as ``genai_prices.calc_price``
    computes them. Raises ``LookupError`` for an unknown model or provider and ``ValueError`` /
    ``ArithmeticError`` for usage genai-prices rejects, as it does."""
    fast = _FAST and _plain(usage)
    if fast:
        snapshot = get_snapshot()
        provider, model = snapshot.find_provider_model(model_ref, None, provider_id, None)
        if provider.id == "groq" and model.id.startswith("whisper-"):
            fast = False  # billed by a minimum duration: the library's own rule
        else:
            ts = when or datetime.now(tz=UTC)
            # as ModelInfo.calc_price: a context applies only to the provider's own models
            if price_context and not any(model is m for m in provider.models):
                price = model.get_prices(ts)
            else:
                price = model.get_prices(ts, price_context)
            plan = _plan(price)
            try:
                total = _total(plan, usage) if plan is not None else None
            except (TypeError, AttributeError, KeyError):
                # internals that moved: the library decides
                total = None
            if total is not None:
                return total, provider.id, model.id
    genai_prices = library()
    calc = genai_prices.calc_price(
        genai_prices.Usage(**usage),
        model_ref=model_ref,
        provider_id=provider_id,
        genai_request_timestamp=when,
        price_context=price_context or None,
    )
    return calc.total_price, calc.provider.id, calc.model.id


def _plain(usage: dict[str, int]) -> bool:
    """Usage the fast path takes: known keys, plain non-negative integers (no bool, float or
    Decimal, which genai-prices validates and converts its own way)."""
    known = usage_keys()
    return all(type(v) is int and v >= 0 and k in known for k, v in usage.items())
