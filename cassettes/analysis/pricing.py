"""The price of one turn: which provider and model it is priced as, and where the price came from.

From ``genai-prices`` (offline data shipped with the library, :mod:`cassettes.analysis._price_data`;
never a hand-typed table): the provider is found from the request URL when genai-prices knows the
host; otherwise the adapter's :attr:`~cassettes.providers.Profile.price_provider` (the vendor its
wire format implies), else (OpenAI-format hosts have none) the model's list price by its name. A
price at a host genai-prices does not know is an estimate whatever the family (a gateway or a
proxy may charge otherwise). The model is the served one, or the requested one when nothing was
served or the two name the same model (``models/gemini-2.5-pro`` vs ``gemini-2.5-pro``). An
unknown model or provider gives no price, never 0, and the reason why.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from urllib.parse import urlsplit

from .. import providers
from ._context import TurnContext
from ._price_data import PRICES_VERSION, calc_price, calc_price_clockless, provider_for_url

__all__ = ["price"]


def _when(ctx: TurnContext) -> datetime | None:
    """When the call was made (prices change over time): the recording's clock, or the Date
    header; ``None`` when it has neither (priced the same whenever it is viewed:
    :func:`~._price_data.calc_price_clockless`)."""
    if ctx.ex.started is not None:
        try:
            return datetime.fromtimestamp(ctx.ex.started, tz=UTC)
        except (OverflowError, OSError, ValueError):
            pass
    date = ctx.ex.response_header("date")
    if date:
        from email.utils import parsedate_to_datetime  # a recording without its clock only

        try:
            when = parsedate_to_datetime(date)
        except (TypeError, ValueError, IndexError):
            return None
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return None


#: Said of a price chosen among a model's hourly rates because the call's time is not known.
_HOURLY = " (the recording has no time: the model's highest hourly rate)"


def _same_model(a: str, b: str) -> bool:
    a, b = a.lower(), b.lower()
    return a in b or b in a


def _price_models(ctx: TurnContext, adapter: providers.Provider | None) -> list[str]:
    """The model names to price a turn by, as genai-prices knows them: the served one, then the
    requested one; only the served one when another model answered."""
    req, resp = ctx.rt.request, ctx.rt.response
    served = resp.model if resp is not None else None
    requested = req.model if req is not None else None
    if adapter is not None:
        served = adapter.profile.price_model(served) if served else served
        requested = adapter.profile.price_model(requested) if requested else requested
    if served and requested and not _same_model(served, requested):
        return [served]  # another model answered: its price, or none
    return [m for m in (served, requested) if m]


def price(ctx: TurnContext, usage: dict[str, int]) -> tuple[Decimal | None, str]:
    """(cost, price_source) for one turn; ``None`` cost with the reason when no price is known."""
    adapter = providers.by_family(ctx.rt.family)
    models = _price_models(ctx, adapter)
    if not models:
        return None, "no price: the model is not known (neither requested nor served)"
    host = urlsplit(ctx.rt.url).netloc or ctx.rt.url
    how = ""
    try:
        provider_id: str | None = provider_for_url(ctx.rt.url)
    except LookupError:
        provider_id = adapter.profile.price_provider if adapter is not None else None
        # the wire format names the vendor, not who charges: a gateway or proxy may charge
        # otherwise, so this is the list price, estimated, as for a host of no known family;
        # with no vendor either (an OpenAI-compatible server at a host genai-prices does not
        # know: a local upstream, a gateway), the model's list price by its name alone
        if provider_id is not None:
            how = (
                f" (host {host} not known to genai-prices; priced "
                f"as {provider_id}, from the API family; a gateway or proxy may charge otherwise)"
            )
    context = (
        adapter.profile.price_context(ctx.rt.response)
        if adapter is not None and provider_id is not None
        else {}
    )
    when = _when(ctx)
    for model in models:
        hourly = False
        try:
            if when is None:  # the same price whenever the recording is viewed
                total, prov, model_id, hourly = calc_price_clockless(
                    usage, model, provider_id=provider_id, price_context=context or None
                )
            else:
                total, prov, model_id = calc_price(
                    usage, model, provider_id=provider_id, when=when, price_context=context or None
                )
        except LookupError:
            continue
        except (ValueError, ArithmeticError) as exc:  # usage genai-prices rejects (cache > input …)
            return None, f"no price: genai-prices {PRICES_VERSION} rejected the usage: {exc}"
        at = _HOURLY if hourly else ""
        if provider_id is None:
            return total, (
                f"estimated: genai-prices {PRICES_VERSION} list price of {prov}/{model_id}, by the "
                f"model's name (host {host} is not a provider it knows; a local or proxied server "
                f"may charge otherwise){at}"
            )
        return (
            total,
            f"{'estimated: ' if how else ''}genai-prices {PRICES_VERSION}: "
            f"{prov}/{model_id}{how}{at}",
        )
    if provider_id is None:
        return None, (
            f"no price: genai-prices {PRICES_VERSION} does not "
            f"know the host {host} nor the model {models[0]!r}"
        )
    return (
        None,
        f"no price: genai-prices {PRICES_VERSION} does "
        f"not know model {models[0]!r} at {provider_id}",
    )
