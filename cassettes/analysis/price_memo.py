"""genai-prices' answers for the models a user's runs name, kept so that pricing a turn does not
load its whole price table.

genai-prices' bundled prices are a 1.6 MB Python module (``genai_prices.data``: every model of 47
providers) and its types build pydantic validators at import: together about a sixth of a small
``looptap show``. A run names a handful of models. So the first time a model (or a host, a usage
shape, a price variant) is priced, the library answers (:mod:`cassettes.analysis.pricing`) and
this module writes down what the answer was made of, as plain values; later calls, in this process
or the next, compute the same figure from those values without importing genai-prices:

* the providers' API URL patterns, in the library's order (a host is its provider as
  ``DataSnapshot.find_provider`` finds it: the first pattern that ``re.match``-es the URL);
* for each (provider id, model name) asked: the provider and model found, or the library's
  ``LookupError`` message;
* for each model found: the constraints of its conditional prices and of its price variants
  (a start date, a time of day), chosen among as ``ModelInfo.get_prices`` chooses;
* for each price so chosen: the priced units with their prices (decimal strings, tiers), the
  order in which contained units are subtracted, the keys read (:class:`pricing._Plan`);
* for each usage key a turn did not report: the value genai-prices infers for it, per set of
  reported keys.

The figure is then the same arithmetic as :func:`pricing._total` (``calc_unit_price``: price ×
count / per, the tier chosen by the total input). Anything not written down yet, or outside the
fast path (Groq's Whisper, a negative leaf, a usage value that is not a plain integer), goes to the
library, which answers and fills the memo.

The memo is a file in looptap's per-user state directory (that of :mod:`cassettes.parsing.sealed`),
readable and writable by its owner only, written atomically, and signed with that machine's key
over its contents and the identity of the installed price table (genai-prices' version and its
data file's size and modification time). It is used only when the signature checks out, the file
belongs to this user and no one else may write it, the identity matches and every value has its
expected shape; otherwise it is ignored (and rewritten on the next fill): a bad memo costs the
library's time, never a wrong or missing price. ``tests/cassettes/analysis/test_price_memo.py``
compares both ways for every model of every provider.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import sys
import threading
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from cassettes.analysis.price_data import PRICES_VERSION, data_file, get_snapshot
from cassettes.analysis.price_memo_shape import MAX
from cassettes.analysis.price_memo_shape import empty as _empty
from cassettes.analysis.price_memo_shape import sound as _sound
from cassettes.parsing import sealed
from cassettes.storage.store import open_regular

__all__ = [
    "FILE_NAME",
    "MAX",
    "PRICES_VERSION",
    "PriceMemo",
    "calc_price",
    "known_model",
    "process_memo",
    "provider_for_url",
    "save",
    "signature",
    "table_identity",
]

_FORMAT = 1
#: The memo's file, in looptap's per-user state directory.
FILE_NAME = "genai-prices-memo.json"

_MISSING: Any = object()


def table_identity() -> list[Any] | None:
    """Which price table is loaded (the library's version; a digest of its data file's bytes and
    their length), ``None`` when that file cannot be found: what the memo on disk is signed with,
    and part of the kept analysis' digest (:mod:`cassettes.reading.kept`). By content, not by path
    and time: the same table installed in the recorder's environment and in the reader's is one
    table, so an analysis kept by a reader in one is taken by a reader in the other."""
    path = data_file()
    if path is None:
        return None
    try:
        st = path.stat()
        digest = _file_digest(str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        return None
    return [_FORMAT, PRICES_VERSION, *digest]


@functools.lru_cache(maxsize=4)
def _file_digest(path: str, size: int, mtime_ns: int) -> tuple[str, int]:
    """The digest and length of the price table's data file, by its path, size and time (hashed
    once a process while the file stays as it was)."""
    data = Path(path).read_bytes()
    return hashlib.blake2b(data, digest_size=16).hexdigest(), len(data)


def _path_and_key() -> tuple[Path, bytes] | None:
    key = sealed.machine_key(create=True)
    if key is None:
        return None
    try:
        return sealed.state_dir() / FILE_NAME, key
    except RuntimeError:  # no home directory
        return None


def signature(key: bytes, identity: list[Any], body: bytes) -> str:
    """The memo file's first line: the machine key's HMAC over the price table's identity and the
    body."""
    return hmac.new(key, orjson.dumps(identity) + b"\0" + body, hashlib.sha256).hexdigest()


def _owned(path: Path, fd: int) -> bool:
    """The file and its directory belong to this user and no one else may write them."""
    st = os.fstat(fd)
    try:
        dst = path.parent.stat()
    except OSError:
        return False
    uid = os.getuid()
    return st.st_uid == uid and dst.st_uid == uid and not (st.st_mode | dst.st_mode) & 0o022


def _load() -> dict[str, Any]:
    """The memo on disk when it is sound, else an empty one."""
    identity = table_identity()
    where = _path_and_key()
    if identity is None or where is None:
        return _empty()
    path, key = where
    try:  # (a FIFO or a device put in its place is refused, never waited on)
        with open_regular(path, follow=False) as f:
            if not _owned(path, f.fileno()):
                return _empty()
            raw = f.read(1 << 24)
    except OSError:
        return _empty()
    mac, _, body = raw.partition(b"\n")
    if not hmac.compare_digest(mac, signature(key, identity, body).encode()):
        return _empty()
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _empty()
    return doc if _sound(doc) else _empty()


def save(doc: dict[str, Any]) -> None:
    """Write ``doc`` as the memo's file, signed (nothing when there is no state directory or price
    table)."""
    identity = table_identity()
    where = _path_and_key()
    if identity is None or where is None:
        return
    path, key = where
    body = orjson.dumps(doc)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}")
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
        )
        with os.fdopen(fd, "wb") as f:
            f.write(signature(key, identity, body).encode() + b"\n" + body)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


class PriceMemo:
    """The memo as this process holds it: read from its file on first use, grown by :meth:`fill`
    (and saved when that changed it). Its lock is held around every read and fill."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._doc: dict[str, Any] | None = None

    def doc(self) -> dict[str, Any]:
        if self._doc is None:
            self._doc = _load()
        return self._doc

    def forget(self) -> None:
        """Drop what this process holds: the next read comes from the file."""
        with self.lock:
            self._doc = None

    def fill(self, what: Any, *args: Any) -> None:
        """``what(entries, *args)`` writes entries (in the memo's shape) for one answer of the
        library; they join the memo when they are sound, and the memo is saved when that changed
        it. An answer of a shape the memo does not know is not written down (the library keeps
        answering it)."""
        with self.lock:
            doc = self.doc()
            new = _empty()
            try:
                from cassettes.analysis.pricing import usage_keys

                new["known"] = doc["known"] if doc["known"] is not None else sorted(usage_keys())
                what(new, *args)
            except (
                ImportError,
                TypeError,
                ValueError,
                AttributeError,
                KeyError,
                LookupError,
                StopIteration,
                ArithmeticError,
            ):
                return  # genai-prices' internals moved, or a shape the memo does not know
            if not _sound(new):
                return
            if any(
                len(doc[t]) + len(new[t]) > MAX for t in ("lookup", "models", "plans", "inferred")
            ):
                doc = self._doc = _empty()  # a memo that outgrew its use starts again
            changed = False
            for name in ("known", "providers"):
                if new[name] is not None and new[name] != doc[name]:
                    doc[name], changed = new[name], True
            for name in ("lookup", "models", "plans", "inferred"):
                for k, v in new[name].items():
                    if doc[name].get(k, _MISSING) != v:
                        doc[name][k], changed = v, True
            if changed:
                save(doc)


@functools.cache
def process_memo() -> PriceMemo:
    """The memo of this process. One for the process, not one per analysis: it holds only what the
    installed price table answers, the same for every analysis, and its file is shared with the
    next process anyway (tests give a process a fresh one with :meth:`PriceMemo.forget`)."""
    return PriceMemo()


# --- computing from the memo -------------------------------------------------------------------


def _utc_timetz(value: time) -> time:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return datetime.combine(date(1970, 1, 1), value).astimezone(UTC).timetz()


def _active(c: list[str] | None, ts: datetime) -> bool:
    """genai-prices' ``StartDateConstraint.active`` / ``TimeOfDateConstraint.active``."""
    if c is None:
        return True
    if c[0] == "date":
        if ts.tzinfo is not None:
            ts = ts.astimezone(UTC)
        return ts.date() >= date.fromisoformat(c[1])
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    now = ts.astimezone(UTC).timetz()
    start, end = _utc_timetz(time.fromisoformat(c[1])), _utc_timetz(time.fromisoformat(c[2]))
    if end < start:
        return now >= start or now < end
    return start <= now < end


def _selection(model: dict[str, Any], ts: datetime, context: dict[str, Any] | None) -> str:
    """Which of the model's prices ``ModelInfo.get_prices`` returns: the conditional price (its
    index, -1 for a model with one price) and the variants laid over it, in their order."""
    cond = model["cond"]
    chosen = -1
    if cond is not None:
        chosen = 0
        for i in range(len(cond) - 1, -1, -1):
            if _active(cond[i], ts):
                chosen = i
                break
    if not context:
        return str(chosen)
    applied = [
        str(i)
        for i, (constraint, when) in enumerate(model["variants"])
        if _active(constraint, ts) and all(context.get(k) == v for k, v in when.items())
    ]
    return f"{chosen}:{','.join(applied)}"


def _unit_price(price: Any, count: int, total_input: int, per: int) -> Decimal:
    """genai-prices' ``calc_unit_price`` for a plain integer count."""
    if isinstance(price, dict):
        applicable = Decimal(price["base"])
        for start, tier_price in reversed(price["tiers"]):
            if total_input > start:
                applicable = Decimal(tier_price)
                break
        return applicable * Decimal(count) / per
    return Decimal(price) * Decimal(count) / per


def _custom_snapshot() -> bool:
    """Someone in this process set genai-prices' snapshot (its updater): the memo is not its
    data."""
    snap = sys.modules.get("genai_prices.data_snapshot")
    return snap is not None and getattr(snap, "_custom_snapshot", None) is not None


def _lookup_key(model_ref: str, provider_id: str | None) -> str:
    return f"{provider_id or ''}\0{model_ref}"


def _from_memo(
    usage: dict[str, int],
    model_ref: str,
    provider_id: str | None,
    when: datetime | None,
    price_context: dict[str, Any] | None,
) -> tuple[Decimal, str, str] | None:
    doc = process_memo().doc()
    known = doc["known"]
    if known is None or not all(type(v) is int and v >= 0 and k in known for k, v in usage.items()):
        return None
    key = _lookup_key(model_ref, provider_id)
    if key not in doc["lookup"]:
        return None
    hit = doc["lookup"][key]
    if isinstance(hit, str):
        raise LookupError(hit)  # the library's own words
    prov, model_id, own, model_key = hit
    model = doc["models"].get(model_key)
    if model is None or (prov == "groq" and model_id.startswith("whisper-")):
        return None
    ts = when or datetime.now(tz=UTC)
    context = price_context if own else None  # a context applies only to the provider's own models
    plan = doc["plans"].get(f"{model_key}|{_selection(model, ts, context)}", _MISSING)
    if plan is _MISSING or plan is None:
        return None
    try:
        return _total(doc, plan, usage, prov, model_id)
    except (KeyError, TypeError, ValueError, ArithmeticError):
        # a memo the shape checks let through: the library decides
        return None


def _total(
    doc: dict[str, Any], plan: dict[str, Any], usage: dict[str, int], prov: str, model_id: str
) -> tuple[Decimal, str, str] | None:
    """:func:`pricing._total` on a plan from the memo."""
    values = dict(usage)
    positive: str | None = None
    for k in plan["needed"]:
        if k not in values:
            if positive is None:
                positive = ",".join(sorted(k2 for k2, v in usage.items() if v > 0))
            inferred = doc["inferred"].get(f"{k}|{positive}", _MISSING)
            if inferred is _MISSING or inferred is None:
                return None
            values[k] = inferred
    counts: dict[str, int] = {"requests": 1}
    for k, contained in plan["leaves"]:
        leaf = values[k] - sum(counts[d] for d in contained)
        if leaf < 0:
            return None  # the library rejects it with its own error
        counts[k] = leaf
    total_input = values["input_tokens"] if plan["tiered"] else 0
    total = Decimal(0)
    for usage_key, per, price in plan["resolved"]:
        total += _unit_price(price, counts[usage_key], total_input, per)
    return total, prov, model_id


# --- filling the memo from the library ---------------------------------------------------------


def _constraint(c: Any) -> list[str] | None:
    from genai_prices.types import StartDateConstraint, TimeOfDateConstraint

    if c is None:
        return None
    if type(c) is StartDateConstraint and type(c.start_date) is date:
        return ["date", c.start_date.isoformat()]
    if type(c) is TimeOfDateConstraint and all(
        type(t) is time and (t.tzinfo is None or t.tzinfo is UTC)
        for t in (c.start_time, c.end_time)
    ):
        return ["tod", c.start_time.isoformat(), c.end_time.isoformat()]
    raise TypeError(f"a constraint the memo does not know: {c!r}")


def _price_spec(p: Any) -> Any:
    from genai_prices.types import TieredPrices

    if type(p) is Decimal:
        return str(p)
    if (
        type(p) is TieredPrices
        and type(p.base) is Decimal
        and all(type(t.start) is int and type(t.price) is Decimal for t in p.tiers)
    ):
        return {"base": str(p.base), "tiers": [[t.start, str(t.price)] for t in p.tiers]}
    raise TypeError(f"a price the memo does not know: {p!r}")


def _record_lookup(
    doc: dict[str, Any], model_ref: str, provider_id: str | None
) -> tuple[Any, str, bool] | None:
    """The library's (model, memo key of the model, whether it is the provider's own) for this
    lookup, written down; ``None`` (and written down) when it finds none."""
    from genai_prices.types import ModelPrice

    snapshot = get_snapshot()
    key = _lookup_key(model_ref, provider_id)
    try:
        provider, model = snapshot.find_provider_model(model_ref, None, provider_id, None)
    except LookupError as exc:
        doc["lookup"][key] = str(exc)
        return None
    owner = next(
        (i, j)
        for i, p in enumerate(snapshot.providers)
        for j, m in enumerate(p.models)
        if m is model
    )
    model_key = f"{owner[0]}/{owner[1]}"
    own = any(model is m for m in provider.models)
    prices = model.prices
    cond = None if isinstance(prices, ModelPrice) else [_constraint(c.constraint) for c in prices]
    variants = [[_constraint(v.constraint), dict(v.when)] for v in model.price_variants or ()]
    doc["models"][model_key] = {"cond": cond, "variants": variants}
    doc["lookup"][key] = [provider.id, model.id, own, model_key]
    return model, model_key, own


def _record(
    doc: dict[str, Any],
    usage: dict[str, int],
    model_ref: str,
    provider_id: str | None,
    when: datetime | None,
    price_context: dict[str, Any] | None,
) -> None:
    """Write down what the library's answer to this call was made of."""
    from cassettes.analysis import pricing

    found = _record_lookup(doc, model_ref, provider_id)
    if found is None:
        return
    model, model_key, own = found
    ts = when or datetime.now(tz=UTC)
    context = price_context if own else None
    plan = pricing._plan(model.get_prices(ts, context))
    doc["plans"][f"{model_key}|{_selection(doc['models'][model_key], ts, context)}"] = (
        None
        if plan is None
        else {
            "resolved": [[unit.usage_key, unit.per, _price_spec(p)] for unit, p in plan.resolved],
            "leaves": [[k, list(contained)] for k, contained in plan.leaves],
            "needed": sorted(plan.needed),
            "tiered": plan.tiered,
        }
    )
    if plan is not None:
        positive = frozenset(k for k, v in usage.items() if v > 0)
        for k in plan.needed:
            if k not in usage:
                doc["inferred"][f"{k}|{','.join(sorted(positive))}"] = pricing._inferred(
                    k, positive
                )


def _record_providers(doc: dict[str, Any]) -> None:
    doc["providers"] = [[p.id, p.api_pattern] for p in get_snapshot().providers]


# --- what the analysis asks ---------------------------------------------------------------------


def calc_price(
    usage: dict[str, int],
    model_ref: str,
    *,
    provider_id: str | None = None,
    when: datetime | None = None,
    price_context: dict[str, Any] | None = None,
) -> tuple[Decimal, str, str]:
    """:func:`cassettes.analysis.pricing.calc_price`, from the memo when it holds the answer."""
    if not _custom_snapshot():
        with process_memo().lock:
            hit = _from_memo(usage, model_ref, provider_id, when, price_context)
        if hit is not None:
            return hit
    from cassettes.analysis import pricing

    try:
        result = pricing.calc_price(
            usage, model_ref, provider_id=provider_id, when=when, price_context=price_context
        )
    except LookupError:
        if not _custom_snapshot():
            # no such model: asked again, the memo says so
            process_memo().fill(_record_lookup, model_ref, provider_id)
        raise
    if not _custom_snapshot() and pricing._FAST and pricing._plain(usage):
        process_memo().fill(_record, usage, model_ref, provider_id, when, price_context)
    return result


def provider_for_url(url: str) -> str:
    """The id of the provider whose API ``url`` is (``DataSnapshot.find_provider(None, None,
    url)``); ``LookupError`` when none."""
    memo = process_memo()
    with memo.lock:
        providers = memo.doc()["providers"]
    if providers is None or _custom_snapshot():
        snapshot = get_snapshot()
        if not _custom_snapshot():
            process_memo().fill(_record_providers)
        return str(snapshot.find_provider(None, None, url).id)
    for pid, pattern in providers:
        if re.match(pattern, url):
            return str(pid)
    raise LookupError(f"Unable to find provider provider_api_url={url!r}")


def known_model(name: str) -> str | None:
    """``provider/model`` as genai-prices files ``name`` when looked up without a provider, or
    ``None``."""
    key = _lookup_key(name, None)
    if not _custom_snapshot():
        memo = process_memo()
        with memo.lock:
            doc = memo.doc()
            if key in doc["lookup"]:
                hit = doc["lookup"][key]
                return None if isinstance(hit, str) else f"{hit[0]}/{hit[1]}"

    try:
        provider, model = get_snapshot().find_provider_model(name, None, None, None)
    except (LookupError, ValueError):
        found = None
    else:
        found = f"{provider.id}/{model.id}"
    if not _custom_snapshot():
        process_memo().fill(_record_lookup, name, None)
    return found
