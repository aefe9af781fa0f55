"""The MCP answer about a fork (``fork_diff``): where a branch (``looptap run --from``) differs
from the run it was forked from, lined up from the cursor (:func:`cassettes.replay.rundiff.diff_fork`).
Read-only: it reads the two cassettes, never starts a run or sends a request."""

from __future__ import annotations

from typing import Any

from cassettes.mcp.query import (
    DEFAULT_BYTES,
    DEFAULT_CHARS,
    QueryError,
    Runs,
    _budget,
    _layer,
    _wrap,
    page,
    text,
)

__all__ = ["fork_diff"]


def fork_diff(runs: Runs, branch: str, run: str | None = None, layer: str | None = None, limit: int = 20, max_bytes: int = DEFAULT_BYTES) -> dict[str, Any]:
    """The divergences of ``branch`` from its origin (named in its header, or ``run``)."""
    from cassettes.replay.fork import origin_of
    from cassettes.replay.rundiff import diff_fork

    layer = _layer(layer)
    bpath, b = runs.open(branch)
    origin = origin_of(bpath)
    if origin is None:
        raise QueryError("this run is not a branch (its header names no origin: it was not made by looptap run --from)", run=branch)
    apath, a = runs.open(run if run is not None else str(origin.get("run", "")))
    divs, said = diff_fork(a.analysis, b.analysis, a.exchange_by_seq, b.exchange_by_seq, origin)
    cursor = origin.get("cursor")
    items = [
        {"layer": d.layer, "conversation_origin": d.conversation_a, "conversation_branch": d.conversation_b, "turn": d.turn,
         "seq_origin": d.seq_a, "seq_branch": d.seq_b, "path": text(d.path, 200), "recorded_message": text(d.message, DEFAULT_CHARS)}
        for d in divs
        if layer is None or d.layer == layer
    ]
    shown, nxt = page(items, 0, max(1, min(limit, 200)), _budget(max_bytes))
    return _wrap({
        "origin": text(str(apath.name), 200),
        "cursor": text(cursor.get("text") if isinstance(cursor, dict) else None, 100),
        "model": text(origin.get("model"), 100),
        "edits": [text(e, 200) for e in origin.get("edits") or [] if isinstance(e, str)][:20],
        "divergences": len(items),
        "recorded": {"lined_up": [text(s, 300) for s in said[:50]], "divergences": shown},
        "more": nxt is not None,
    })
