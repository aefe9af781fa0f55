"""A turn's price from genai-prices' bundled price data, without the network updater its package
imports.

``import genai_prices`` runs the package's ``__init__``, which imports ``update_prices`` and with it
httpx and asyncio (about 50 modules, a third of a second of a ``looptap show`` here) for a
background updater looptap never starts: prices come from the data the library ships. So the
package is registered here as a module of its own path whose ``__init__`` has not run yet, and
its submodules (``data_snapshot``, ``types``, ``data`` …) import from it as usual. Its first
attribute that is not a submodule already imported (any other code in the process asking for
one) runs the real ``__init__`` in that same module object, so whoever asks gets the whole
package. Where genai-prices was imported already, nothing is done.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from datetime import UTC, date, datetime, time
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..lazy import init_on_first_use

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot

__all__ = [
    "PRICES_VERSION",
    "calc_price",
    "calc_price_clockless",
    "get_snapshot",
    "known_model",
    "provider_for_url",
    "table_identity",
]


def _register() -> None:
    """``genai_prices`` in ``sys.modules`` with its ``__init__`` deferred to its first attribute."""
    if not init_on_first_use("genai_prices"):
        import genai_prices  # noqa: F401 - not a plain package directory: import it as it is


def data_file() -> Path | None:
    """genai-prices' bundled price table (``genai_prices/data.py``), or ``None`` when it is not a
    plain file."""
    spec = importlib.util.find_spec("genai_prices")
    if spec is None or spec.submodule_search_locations is None:
        return None
    for d in spec.submodule_search_locations:
        path = Path(d) / "data.py"
        if path.is_file():
            return path
    return None


def get_snapshot() -> DataSnapshot:
    """genai-prices' price data (``genai_prices.data_snapshot.get_snapshot()``), imported on first
    use."""
    from genai_prices.data_snapshot import get_snapshot as snapshot

    return snapshot()


def table_identity() -> list[Any] | None:
    """Which price table is installed (the library's version; a digest of its data file's bytes
    and their length), ``None`` when that file cannot be found: part of the kept analysis' digest
    (:mod:`cassettes.reading._analysis_cache`). By content, not by path and time: the same table
    installed in the recorder's environment and in the reader's is one table."""
    path = data_file()
    if path is None:
        return None
    try:
        st = path.stat()
        digest = _file_digest(str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        return None
    return [PRICES_VERSION, *digest]


@functools.lru_cache(maxsize=4)
def _file_digest(path: str, size: int, mtime_ns: int) -> tuple[str, int]:
    """The digest and length of the price table's data file, by its path, size and time (hashed
    once a process while the file stays as it was)."""
    data = Path(path).read_bytes()
    return hashlib.blake2b(data, digest_size=16).hexdigest(), len(data)


#: The usage keys a price is kept for (what the providers' ``price_usage`` give): a key genai-prices
#: does not know warns at each call, so a usage with one always goes to the library.
_PLAIN_KEYS = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cache_write_5m_tokens",
        "cache_write_1h_tokens",
        "output_reasoning_tokens",
    }
)
#: Prices computed, by value: (provider, model, price context, usage) → (total, provider id,
#: model id). A big run prices the same model and counts again and again (a retried call, a
#: template an agent repeats); genai-prices takes ~0.4 ms a call. Cleared when full.
_PRICED: dict[tuple[Any, ...], tuple[Decimal, str, str]] = {}
_PRICED_MAX = 4096
_PRICED_FROM: list[Any] = [None]  # the snapshot _PRICED's provider and model objects belong to


def calc_price(
    usage: dict[str, int],
    model_ref: str,
    *,
    provider_id: str | None = None,
    when: datetime | None = None,
    price_context: dict[str, Any] | None = None,
) -> tuple[Decimal, str, str]:
    """(total price in USD, provider id, model id) of one call: ``genai_prices.calc_price`` (which
    is ``DataSnapshot.calc`` on the bundled data). Raises ``LookupError`` for an unknown model or
    provider and ``ValueError`` / ``ArithmeticError`` for usage genai-prices rejects.

    A model whose price does not change with time is priced once per (price context, usage): the
    same values give the same price (the kept value is the library's own result)."""
    from genai_prices.types import Usage

    snap = get_snapshot()
    # the lookup DataSnapshot.calc starts with (its errors are the caller's); kept by genai-prices
    provider, model = snap.find_provider_model(model_ref, None, provider_id, None)
    key = _priced_key(usage, provider, model, price_context)
    if _PRICED_FROM[0] is not snap:
        _PRICED.clear()
        _PRICED_FROM[0] = snap
    if key is not None and (hit := _PRICED.get(key)) is not None:
        return hit
    calc = snap.calc(Usage(**usage), model_ref, provider_id, None, when, price_context or None)
    result = calc.total_price, calc.provider.id, calc.model.id
    if key is not None:
        if len(_PRICED) >= _PRICED_MAX:
            _PRICED.clear()
        _PRICED[key] = result
    return result


def calc_price_clockless(
    usage: dict[str, int],
    model_ref: str,
    *,
    provider_id: str | None = None,
    price_context: dict[str, Any] | None = None,
) -> tuple[Decimal, str, str, bool]:
    """:func:`calc_price` of a call made at a time nobody knows (a recording without its clock),
    the same whenever it is asked: as of the newest date the model's prices name (its latest
    listed price), at the hour of that day whose rate is the highest (an hourly discount, such as
    DeepSeek's off-peak one, is never assumed). genai-prices would take the current time, and
    the same file would cost differently by the hour it is viewed. The last item: whether the hour
    changed the price (the figure is then the day's highest of several)."""
    _, model = get_snapshot().find_provider_model(model_ref, None, provider_id, None)
    priced = [
        calc_price(
            usage, model_ref, provider_id=provider_id, when=when, price_context=price_context
        )
        for when in _clockless_instants(model)
    ]
    total, prov, model_id = max(priced, key=lambda p: p[0])
    return total, prov, model_id, len({p[0] for p in priced}) > 1


def _clockless_instants(model: Any) -> list[datetime]:
    """The instants a clockless call is priced at: on the newest date, not after today, that the
    model's prices and price variants start (a fixed day when none does; a price listed from a
    later date never applied to a call already recorded), midnight UTC and each hour one of its
    hourly prices starts or ends."""
    from genai_prices.types import StartDateConstraint, TimeOfDateConstraint

    prices = model.prices if isinstance(model.prices, list) else []
    rules = [c.constraint for c in [*prices, *(model.price_variants or ())]]
    today = datetime.now(UTC).date()
    starts = [c.start_date for c in rules if isinstance(c, StartDateConstraint)]
    day = max((d for d in starts if d <= today), default=_DAY)
    hours = {time(0)}
    for c in rules:
        if isinstance(c, TimeOfDateConstraint):
            for t in (c.start_time, c.end_time):  # as UTC hours (a naive one is UTC)
                at = datetime.combine(_DAY, t)
                hours.add(at.astimezone(UTC).time() if t.tzinfo is not None else t)
    return [datetime.combine(day, h, tzinfo=UTC) for h in sorted(hours)]


#: The day a clockless call of a model with no dated price is priced on (any day prices it alike).
_DAY = date(2000, 1, 1)


def _priced_key(
    usage: dict[str, int], provider: Any, model: Any, context: dict[str, Any] | None
) -> tuple[Any, ...] | None:
    """What a price depends on, as plain values, or ``None`` when it may depend on more: the time
    (a model with dated or timed prices, or dated price variants and a price context), or a usage
    genai-prices reads its own way (a float, a bool, a key it does not know)."""
    from genai_prices.types import ModelPrice

    if not isinstance(model.prices, ModelPrice) or (
        context and any(v.constraint is not None for v in model.price_variants or ())
    ):
        return None  # (genai-prices reads the variants only for a call with a price context)
    if any(type(v) is not int or k not in _PLAIN_KEYS for k, v in usage.items()):
        return None
    try:
        ctx = tuple(sorted(context.items())) if context else ()
        hash(ctx)
    except TypeError:
        return None
    return id(provider), id(model), ctx, tuple(usage.items())


def provider_for_url(url: str) -> str:
    """The id of the provider whose API ``url`` is (``DataSnapshot.find_provider(None, None,
    url)``); ``LookupError`` when none."""
    return str(get_snapshot().find_provider(None, None, url).id)


def known_model(name: str) -> str | None:
    """The model genai-prices files ``name`` under, looked up without a provider
    (``gpt-4o-2024-08-06`` → ``openai/gpt-4o``), or ``None`` for a name that is no published model:
    an alias, a deployment, a router."""
    try:
        provider, model = get_snapshot().find_provider_model(name, None, None, None)
    except (LookupError, ValueError):
        return None
    return f"{provider.id}/{model.id}"


_register()
PRICES_VERSION = version("genai-prices")
