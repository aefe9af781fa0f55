"""History delta encoding of request bodies: :class:`HistoryEncoder` (the writer's) and
:class:`HistoryDecoder` (a reader's).

Every turn of an agent re-sends the whole history, so storing requests verbatim grows with the
square of the run's length. A request body whose history array (the
adapter's ``history_key``: ``messages``, ``input``, ``contents``) begins with the history of an
earlier request is stored as ``{"base": seq, "keep": k, "append": [...]}``: the first ``k`` items of
that earlier request's history plus what was appended. ``keep`` shorter than the base history means
the client rewrote or trimmed it (``"rewritten": true``). Other top-level keys equal to the base's
(tools, system prompt, …) are stored as ``"inherit"``. No base found → the body is stored in full.
"""

from __future__ import annotations

from array import array
from typing import Any

import orjson

from ..errors import CassetteFormatError
from ..hints import count

__all__ = ["HistoryDecoder", "HistoryEncoder"]


def _item_hash(item: Any) -> int:
    # Key order is ignored; 64-bit so it fits an array('q').
    return hash(orjson.dumps(item, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))


class HistoryEncoder:
    """Writer-side state: which earlier request each new request's history extends.

    Candidates are found by rolling prefix hash (one pass over the new request's history) and
    then verified item by item against the stored per-item hashes, so a hash collision can never
    produce a wrong delta. Memory: eight bytes per history item stored, not the items themselves.
    """

    def __init__(self) -> None:
        self._full: dict[int, int] = {}  # rolling hash of a full history → seq
        self._by_first: dict[int, int] = {}  # first item hash → latest seq starting with it
        self._hashes: dict[int, array[int]] = {}  # seq → item hashes of its history
        self._others: dict[int, dict[str, int]] = {}  # seq → {top-level key: value hash}
        self._keys: dict[int, str] = {}  # seq → history key

    def _common(self, seq: int, items: array[int]) -> int:
        prev = self._hashes[seq]
        n = min(len(prev), len(items))
        k = 0
        while k < n and prev[k] == items[k]:
            k += 1
        return k

    def encode(self, seq: int, body: dict[str, Any], history_key: str | None) -> dict[str, Any]:
        """The stored form of ``body``: ``{"json": body}``, or ``{"delta": ...}`` when its history
        extends (or rewrites the tail of) an earlier request's."""
        history = body.get(history_key) if history_key else None
        if not isinstance(history, list) or not history:
            return {"json": body}
        items = array("q", (_item_hash(i) for i in history))
        full, base, rewritten = self._base(items, history_key)
        others = {key: _item_hash(v) for key, v in body.items() if key != history_key}
        self._full[full] = seq
        self._by_first[items[0]] = seq
        self._hashes[seq] = items
        self._others[seq] = others
        self._keys[seq] = history_key or ""
        if base is None:
            return {"json": body}
        return {"delta": self._delta(body, history, history_key, base, rewritten, others)}

    def _base(
        self, items: array[int], history_key: str | None
    ) -> tuple[int, tuple[int, int] | None, bool]:
        """(the rolling hash of the whole history, (base seq, items kept) or ``None``, whether the
        base's tail was rewritten): the latest earlier history this one extends whole, else the
        latest one it shares its first items with."""
        h = 0
        best: int | None = None
        for ih in items:
            h = hash((h, ih))
            hit = self._full.get(h)
            if hit is not None and self._keys.get(hit) == history_key:
                best = hit
        if best is not None:
            k = self._common(best, items)
            if k == len(self._hashes[best]):
                return h, (best, k), False
        cand = self._by_first.get(items[0])
        if cand is not None and self._keys.get(cand) == history_key:
            k = self._common(cand, items)
            if k > 0:
                return h, (cand, k), k < len(self._hashes[cand])
        return h, None, False

    def _delta(
        self,
        body: dict[str, Any],
        history: list[Any],
        history_key: str | None,
        base: tuple[int, int],
        rewritten: bool,
        others: dict[str, int],
    ) -> dict[str, Any]:
        base_seq, keep = base
        base_others = self._others.get(base_seq, {})
        inherit = [key for key, hv in others.items() if base_others.get(key) == hv]
        delta: dict[str, Any] = {
            "base": base_seq,
            "key": history_key,
            "keep": keep,
            "append": history[keep:],
            "order": list(body),
            "inherit": inherit,
            "set": {key: v for key, v in body.items() if key != history_key and key not in inherit},
        }
        if rewritten:
            delta["rewritten"] = True
        return delta


class HistoryDecoder:
    """Reader-side state: rebuilds delta-encoded request bodies (sharing list items, not
    copying)."""

    #: Most history items one delta may rebuild (what analysis keeps whole: bounds.MAX_LIST).
    MAX_ITEMS = 100_000
    #: Most items all deltas of one reader may rebuild: a 4.5 MB file of 3,000 deltas each keeping
    #: 2 million items asked for 6 billion (7.8 GB, then MemoryError) before this bound.
    MAX_TOTAL_ITEMS = 100_000_000

    def __init__(self) -> None:
        self._bodies: dict[int, dict[str, Any]] = {}
        self._rebuilt = 0

    def remember(self, seq: int, body: Any) -> None:
        if isinstance(body, dict):
            self._bodies[seq] = body

    def decode(self, form: dict[str, Any]) -> dict[str, Any]:
        d = form["delta"]
        base = self._bodies.get(d["base"])
        if base is None:
            raise CassetteFormatError(
                f"history delta refers to round trip {d['base']}, which is missing or unreadable"
            )
        key = d["key"]
        keep, append = d["keep"], d["append"]
        if (
            not isinstance(keep, int)
            or isinstance(keep, bool)
            or keep < 0
            or not isinstance(append, list)
        ):
            raise CassetteFormatError("history delta with a malformed keep or append")
        items = keep + len(append)
        if items > self.MAX_ITEMS:
            raise CassetteFormatError(
                f"history delta rebuilds {items:,} items (more than "
                f"{self.MAX_ITEMS:,}); skipped as a delta bomb"
            )
        if self._rebuilt + items > self.MAX_TOTAL_ITEMS:
            raise CassetteFormatError(
                f"history deltas of this file rebuild more than {self.MAX_TOTAL_ITEMS:,} items in "
                "all; skipped as a delta bomb"
            )
        self._rebuilt += items
        history = base.get(key)
        if not isinstance(history, list) or len(history) < d["keep"]:
            raise CassetteFormatError(
                f"history delta keeps {count(d['keep'], 'item')} of round trip {d['base']}, which "
                "has fewer"
            )
        values: dict[str, Any] = dict(d.get("set") or {})
        for k in d.get("inherit") or []:
            if k not in base:
                raise CassetteFormatError(
                    f"history delta inherits {k!r} from round trip {d['base']}, which lacks it"
                )
            values[k] = base[k]
        values[key] = history[: d["keep"]] + list(d["append"])
        order = d.get("order") or list(values)
        return {k: values[k] for k in order if k in values}
