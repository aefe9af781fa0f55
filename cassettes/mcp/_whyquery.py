"""The MCP answer about a finished ``looptap why`` (docs/why.md): its verdict and every
intervention's flips, samples and Wilson interval, read from the ``why.json`` of its output
directory. Read-only: it reads the file under the roots, never runs a branch or sends a request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..why import STATE, wilson
from ._answers import QueryError, byte_budget, number, page, read_json, text, wrap
from ._runs import Runs

__all__ = ["why_report"]

#: A why.json larger than this is refused (it lists interventions and branch names, not contents).
MAX_STATE_BYTES = 16 << 20
_NUMBERS = ("flips", "samples", "low", "high")


def _state_path(runs: Runs, name: str) -> Path:
    """The ``why.json`` ``name`` names: the output directory of a ``why`` under a root, or the
    file."""
    how = "a why is named by its output directory (looptap why -o DIR), under the roots"
    return runs.output_file(name, STATE, how, "why", "looptap why")


def _so_far(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """An interrupted why (no report yet): each intervention it listed with the branches that
    finished, counted as the verdict counts them (flipped, failed; the rest no sample)."""
    listed = doc.get("interventions")
    done = doc.get("branches")
    done = done if isinstance(done, dict) else {}
    out = []
    for i in listed if isinstance(listed, list) else []:
        if not isinstance(i, dict):
            continue
        mine = done.get(i.get("key")) if isinstance(i.get("key"), str) else None
        results = [
            b for b in (mine.values() if isinstance(mine, dict) else []) if isinstance(b, dict)
        ]
        flips = sum(b.get("result") == "flipped" for b in results)
        samples = flips + sum(b.get("result") == "failed" for b in results)
        low, high = wilson(flips, samples)
        out.append(
            {
                **i,
                "flips": flips,
                "samples": samples,
                "invalid": len(results) - samples,
                "low": round(low, 4),
                "high": round(high, 4),
                "branches": results,
            }
        )
    return out


def _read_state(runs: Runs, why: str) -> dict[str, Any]:
    """The state file of the why ``why``, as JSON: within :data:`MAX_STATE_BYTES`, a why's."""
    doc = read_json(_state_path(runs, why), MAX_STATE_BYTES, "why.json", why=why)
    if not isinstance(doc, dict) or doc.get("looptap") != "why":
        raise QueryError("this file is not the state of a looptap why", why=why)
    return doc


def _intervention(i: dict[str, Any]) -> dict[str, Any]:
    """One intervention of the report as the answer shows it (every string as recorded, cut)."""
    return {
        "layer": text(i.get("layer"), 2),
        "conversation": text(i.get("conversation"), 40),
        "turn": number(i.get("turn")),
        **{k: number(i.get(k)) for k in _NUMBERS},
        "invalid": number(i.get("invalid")),
        "runnable": i.get("runnable") is True,
        "what": text(i.get("what"), 300),
        "missing": text(i.get("missing"), 400),
        "edits": [text(e, 200) for e in (i.get("edits") or [])[:10]],
        "branches": [
            text(b.get("branch"), 200)
            for b in (i.get("branches") or [])[:50]
            if isinstance(b, dict)
        ],
    }


def why_report(runs: Runs, why: str, offset: int, limit: int, max_bytes: int) -> dict[str, Any]:
    """A finished (or interrupted) why: the verdict's figures, then the interventions ranked, paged;
    every string of the file (anything may have edited it) under ``recorded``."""
    doc = _read_state(runs, why)
    verdict = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else None
    report = (
        [i for i in doc.get("report") or [] if isinstance(i, dict)]
        if isinstance(doc.get("report"), list)
        else []
    )
    if verdict is None and not report:
        report = _so_far(doc)
    items = [_intervention(i) for i in report[max(offset, 0) :]]
    shown, nxt = page(items, 0, max(1, min(limit, 200)), byte_budget(max_bytes))
    return wrap(
        {
            "finished": verdict is not None,
            "samples": number(doc.get("samples")),
            "interventions": len(report),
            "verdict": None
            if verdict is None
            else {
                "determined": verdict.get("determined") is True,
                "turn": number(verdict.get("turn")),
                **{k: number(verdict.get(k)) for k in _NUMBERS},
            },
            "recorded": {
                "run": text(doc.get("run"), 300),
                "outcome": text(str(doc.get("outcome")), 300),
                "layer": text(verdict.get("layer"), 2) if verdict else None,
                "conversation": text(verdict.get("conversation"), 40) if verdict else None,
                "headline": text(verdict.get("headline"), 800) if verdict else None,
                "interventions": shown,
            },
            "next_offset": None if nxt is None else max(offset, 0) + nxt,
        }
    )
