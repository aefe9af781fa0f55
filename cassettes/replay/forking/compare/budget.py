"""What a comparison would send and cost, decided before anything is sent: the recorded turns
planned with their usage, where each goes, the candidate's price on that usage, and the budget
(``--max-requests``, ``--max-cost``) checked (``looptap why`` checks its own the same way)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from .... import providers
from ....analysis import PRICES_VERSION, calc_price, provider_for_url
from ....errors import CassetteError
from ....hints import count
from ....parsing import parse_exchange
from ....views import money
from ....wire import Exchange
from ...live.model import with_model
from ...live.upstreams import bases_of
from .answer import price_usage


class BudgetError(CassetteError):
    """The comparison would exceed ``--max-requests`` or ``--max-cost``: nothing was sent.
    ``lines``: the estimate it was refused on."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = lines or []


@dataclass
class Planned:
    """One recorded turn to send: its exchange and its place."""

    ex: Exchange
    seq: int
    conversation: str | None
    turn: int | None
    #: The recorded turn's cost at the recorded model's own price (the analysis' figure).
    cost: Decimal | None
    #: ``cost`` is an estimated price (a list price by the model's name: ``~``).
    cost_estimated: bool = False
    #: The recorded usage as genai-prices keys: what the candidate is priced on.
    usage: dict[str, int] | None = None
    #: ``usage`` was estimated by looptap (the call reported none), not reported.
    usage_estimated: bool = False
    family: str = "unknown"
    #: The model the recorded request asked for.
    model: str | None = None
    #: What selects a price variant (the recorded service tier).
    price_context: dict[str, str] = field(default_factory=dict)
    #: Why the recording shows this turn failing (``recorded 429``), or ``None``.
    recorded_error: str | None = None
    #: The candidate's price (genai-prices provider id or ``None`` for by name, the model as it
    #: knows it).
    price_ref: tuple[str | None, str] | None = None
    #: The recorded request as it is sent (set by :func:`compare_run`): a request continuing an
    #: answer by its id (the Responses API's ``previous_response_id``) self-contained, since the
    #: candidate never gave that answer; ``None``: the recorded body as it is.
    body: bytes | None = None
    #: Recorded headers already said (on stderr) not to be sent: once per turn, not per sample.
    said: set[str] = field(default_factory=set)
    #: One sample's estimated cost at the candidate's price, and where that price came from (or why
    #: none).
    estimate: Decimal | None = None
    price_note: str = ""


def plan_requests(run: Any) -> list[Planned]:
    """The recorded turns of ``run`` (model calls, in recording order), with their recorded usage
    and whether the recording shows them failing."""
    out: list[Planned] = []
    by_seq = {ex.seq if ex.seq is not None else i: ex for i, ex in enumerate(run.exchanges)}
    for seq, t in sorted(run.analysis.turns.items()):
        ex = by_seq.get(seq)
        if ex is None:
            continue
        rt = parse_exchange(ex)
        adapter = providers.by_family(rt.family)
        p = Planned(
            ex,
            seq,
            t.conversation,
            t.index,
            t.tokens.cost,
            t.tokens.price_estimated,
            family=rt.family,
            model=(rt.request.model if rt.request is not None else None)
            or (rt.response.model if rt.response is not None else None),
            price_context=adapter.profile.price_context(rt.response) if adapter is not None else {},
        )
        p.recorded_error = _recorded_error(ex)
        _recorded_usage(p, t.tokens, rt)
        out.append(p)
    # A failed call has no output to go by: the largest output of the run's answered turns.
    longest = max(
        (
            p.usage.get("output_tokens", 0)
            for p in out
            if p.usage and p.usage.get("output_tokens", 0) >= 0
        ),
        default=0,
    )
    for p in out:
        if p.usage is not None and p.usage.get("output_tokens") == -1:
            p.usage["output_tokens"] = longest
    return out


def _recorded_error(ex: Exchange) -> str | None:
    """Why the recording shows ``ex`` failing (``recorded 429``), or ``None``."""
    if ex.transport_error:
        return "recorded transport error"
    if ex.status is None:
        return "recorded without a response"
    return f"recorded {ex.status}" if ex.status >= 400 else None


def _recorded_usage(p: Planned, tk: Any, rt: Any) -> None:
    """``p``'s recorded usage (``tk``: its turn's tokens, ``rt``: its round trip): as reported,
    as estimated, or for a failed call the input from the request's size (the output an output
    of -1, filled in by :func:`plan_requests`)."""
    if tk.source == "reported":
        p.usage = price_usage(rt.family, rt.response.usage if rt.response is not None else None)
    elif tk.source == "estimated" and tk.input is not None:
        p.usage, p.usage_estimated = (
            {"input_tokens": tk.input, "output_tokens": tk.output or 0},
            True,
        )
    elif tk.segments is not None:
        # a failed call: the input from the request's size; the output below
        sg = tk.segments
        p.usage, p.usage_estimated = (
            {
                "input_tokens": sg.system + sg.tools + sg.user + sg.assistant + sg.tool_results,
                "output_tokens": -1,
            },
            True,
        )


def upstream_bases(items: list[str]) -> dict[str, str]:
    """Where each API's requests go: the vendor's base URL, or ``--upstream NAME=URL`` instead;
    raises ``ValueError`` for an item of another form."""
    vendors = {name: up for name, (up, _v, _s) in providers.REVERSE_UPSTREAMS.items()}
    return vendors | bases_of(items, "--upstream")


def send_list(
    planned: list[Planned], include_errors: bool = False
) -> tuple[list[Planned], list[str]]:
    """(the turns to send, the turns skipped as ``seq 3 (recorded 429)``): a turn the recording
    shows failing is not sent unless ``include_errors``."""
    if include_errors:
        return planned, []
    return [p for p in planned if p.recorded_error is None], [
        f"seq {p.seq} ({p.recorded_error})" for p in planned if p.recorded_error is not None
    ]


def where_sent(
    p: Planned, live: Callable[[str, str, bytes], str | None], model: str | None
) -> tuple[str | None, str | None]:
    """(the URL the turn would be sent to, with the model rewrite applied; what the rewrite
    changed): ``None`` when no upstream serves its API."""
    base = live(p.ex.method, p.ex.url, p.ex.request_body)
    if base is None:
        return None, None
    target, _body, note = rewritten(p.ex, p.ex.request_body, model)
    return base + target, note


def rewritten(ex: Exchange, body: bytes, model: str | None) -> tuple[str, bytes, str | None]:
    """(the recorded request's path and query, ``body``, what changed) with ``model`` asked for
    (:func:`~cassettes.replay.forking.cursor.with_model`)."""
    u = urlsplit(ex.url)
    return with_model(ex.method, u.path + (f"?{u.query}" if u.query else ""), body, model)


def estimate_costs(
    planned: list[Planned],
    live: Callable[[str, str, bytes], str | None],
    model: str | None,
    urls: list[str | None] | None = None,
) -> None:
    """Price each turn for the candidate (``model``, else the model the turn recorded): its own
    price in genai-prices' offline data (the provider the target URL names, else the API family's,
    else the model's name alone), applied to the recorded usage. Sets ``estimate`` and
    ``price_note``. ``urls``: each turn's target (:func:`where_sent`) when the caller has them."""
    for i, p in enumerate(planned):
        url = urls[i] if urls is not None else where_sent(p, live, model)[0]
        p.price_note = _priced(p, model or p.model, url)


def _priced(p: Planned, name: str | None, url: str | None) -> str:
    """Price ``p`` for the model ``name`` sent to ``url`` (:func:`estimate_costs`): sets
    ``price_ref`` and ``estimate``; returns where the price came from, or why there is none."""
    if not name:
        return "no price: the recorded request names no model"
    adapter = providers.by_family(p.family)
    ref = adapter.profile.price_model(name) if adapter is not None else name
    try:
        provider_id: str | None = provider_for_url(url or p.ex.url)
    except LookupError:
        provider_id = adapter.profile.price_provider if adapter is not None else None
    # the provider's own price, else by the name alone
    for pid in dict.fromkeys((provider_id, None)):
        try:
            price_of({"input_tokens": 1}, (pid, ref), p.price_context)
        except LookupError:
            continue
        except (ValueError, ArithmeticError):
            pass
        p.price_ref = (pid, ref)
        break
    if p.price_ref is None:
        at = f" at {provider_id}" if provider_id else ""
        return f"no price: genai-prices {PRICES_VERSION} knows no model {ref!r}{at}"
    if p.usage is None:
        return "no price: the recording has no usage for this turn"
    try:
        p.estimate, where = price_of(p.usage, p.price_ref, p.price_context)
    except (LookupError, ValueError, ArithmeticError) as exc:
        return f"no price: genai-prices {PRICES_VERSION} rejected the usage: {exc}"
    return f"genai-prices {PRICES_VERSION}: {where}" + (
        "" if p.price_ref[0] else ", by the model's name"
    )


def price_of(
    usage: dict[str, int], ref: tuple[str | None, str], context: dict[str, str]
) -> tuple[Decimal, str]:
    """(the price of ``usage`` for the model ``ref`` names, "provider/model"); raises as
    genai-prices does."""
    total, prov, model_id = calc_price(
        usage, ref[1], provider_id=ref[0], price_context=context or None
    )
    return total, f"{prov}/{model_id}"


def check_budget(
    planned: list[Planned],
    samples: int,
    max_requests: int | None,
    max_cost: Decimal | None,
    allow_unknown: bool = False,
    model: str | None = None,
) -> list[str]:
    """What the comparison will cost (lines); raises :class:`BudgetError` when over a limit. The
    estimate is the candidate's price (:func:`estimate_costs`) on the recorded usage, K times;
    a turn the candidate has no price for makes ``--max-cost`` refuse unless ``allow_unknown``."""
    n = len(planned) * samples
    known = [p for p in planned if p.estimate is not None]
    unknown = [p for p in planned if p.estimate is None]
    cost = sum((p.estimate for p in known if p.estimate is not None), Decimal(0)) * samples
    who = model or "the recorded model"
    lines = [
        f"{count(n, 'request')} ({count(len(planned), 'turn')} × {count(samples, 'sample')}); "
        + _estimate_said(known, samples, cost, who)
    ]
    if unknown:
        why = Counter(p.price_note for p in unknown).most_common(1)[0][0]
        lines.append(
            f"the cost of {len(unknown)} of {count(len(planned), 'turn')} is unknown: {why}"
            + (" (the estimate is a lower bound)" if known else "")
        )
    if max_requests is not None and n > max_requests:
        raise BudgetError(
            f"{count(n, 'request')} would be sent, over --max-requests {max_requests}: nothing "
            "sent",
            lines,
        )
    if max_cost is not None:
        if unknown and not allow_unknown:
            raise BudgetError(
                f"the candidate's price is unknown for {count(len(unknown), 'turn')}, so "
                "--max-cost "
                f"{max_cost} cannot be kept: nothing sent (--allow-unknown-price sends anyway; "
                "--max-cost then bounds the turns with a price)",
                lines,
            )
        if cost > max_cost:
            raise BudgetError(
                f"estimated {money(cost)} at {who}'s price, "
                f"over --max-cost {max_cost}: nothing sent",
                lines,
            )
    return lines


def _estimate_said(known: list[Planned], samples: int, cost: Decimal, who: str) -> str:
    """The estimated cost of the turns with a price, as :func:`check_budget` says it: how it was
    priced, and beside what the recording cost for as many."""
    notes = Counter(p.price_note for p in known).most_common(2)
    line = (
        "estimated cost "
        f"{money(cost, any(p.price_ref is not None and p.price_ref[0] is None for p in known))} at "
        f"{who}'s own price on the recorded usage"
    )
    if notes:
        line += f" ({'; '.join(note for note, _ in notes)})"
    if any(p.usage_estimated for p in known):
        line += (
            f" ({count(sum(p.usage_estimated for p in known), 'turn')} on "
            "usage looptap estimated: the call reported none)"
        )
    costed = [p for p in known if p.cost is not None]
    rec = sum((p.cost or Decimal(0) for p in costed), Decimal(0))
    if rec > 0:
        recorded = rec * samples
        ratio = sum((p.estimate or Decimal(0) for p in costed), Decimal(0)) * samples / recorded
        line += (
            f"; the recording cost {money(recorded, any(p.cost_estimated for p in costed))} for "
            f"as many (×{float(ratio):.2f})"
        )
    return line
