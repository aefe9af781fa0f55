"""The MCP answer about a finished ``looptap run --from … --verify`` (docs/fork.md, "Which model
would have fixed it"): per model, k of K branches verified with the 95% interval, the cost and the
requests sent, the failed branches and where they first differed, beside the recorded run's own
end state; read from the ``verify.json`` of its output directory. Read-only: it reads the file
under the roots, never runs a branch or sends a request (a coding agent is given the command)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._answers import QueryError, byte_budget, number, page, read_json, text, wrap
from ._runs import Runs

__all__ = ["verify_report"]

#: The report's file in the output directory.
REPORT = "verify.json"
#: A verify.json larger than this is refused (it lists rows and branch names, not contents).
MAX_REPORT_BYTES = 16 << 20
_NUMBERS = ("verified", "judged", "samples", "low", "high", "sent")


def _report_path(runs: Runs, name: str) -> Path:
    how = "a verify is named by its output directory (looptap run --verify -o DIR), under the roots"
    return runs.output_file(name, REPORT, how, "verify", "looptap run --verify")


def _row(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("differed")
    differed: dict[str, Any] | None = d if isinstance(d, dict) else None
    return {
        "model": text(r.get("model"), 120),
        "name": text(r.get("name"), 160),
        **{k: number(r.get(k)) for k in _NUMBERS},
        "cost_usd": text(r.get("cost"), 40),
        "edits": [text(e, 200) for e in (r.get("edits") or [])[:10]],
        "branches": [
            {
                "branch": text(b.get("branch"), 200),
                "result": text(b.get("result"), 20),
                "why": text(b.get("why"), 300),
            }
            for b in (r.get("branches") or [])[:50]
            if isinstance(b, dict)
        ],
        "failed_first_differed": None
        if differed is None
        else {
            "conversation": text(differed.get("conversation"), 40),
            "turn": number(differed.get("turn")),
        },
    }


def verify_report(
    runs: Runs, verify: str, offset: int, limit: int, max_bytes: int
) -> dict[str, Any]:
    """A finished verify: the baseline and the rows, paged; every string of the file under
    ``recorded``."""
    doc = read_json(_report_path(runs, verify), MAX_REPORT_BYTES, REPORT, verify=verify)
    if not isinstance(doc, dict) or doc.get("looptap") != "verify":
        raise QueryError("this file is not the report of a looptap run --verify", verify=verify)
    rows = [r for r in doc.get("rows") or [] if isinstance(r, dict)]
    items = [_row(r) for r in rows[max(offset, 0) :]]
    shown, nxt = page(items, 0, max(1, min(limit, 200)), byte_budget(max_bytes))
    b = doc.get("baseline")
    base: dict[str, Any] = b if isinstance(b, dict) else {}
    return wrap(
        {
            "samples": number(doc.get("samples")),
            "at_most": number(doc.get("at_most")),
            "sent": number(doc.get("sent")),
            "models": len(rows),
            "recorded": {
                "run": text(doc.get("run"), 300),
                "cursor": text(doc.get("cursor"), 200),
                "command": text(doc.get("command"), 300),
                "baseline": {
                    "result": text(base.get("result"), 20),
                    "exit": number(base.get("exit")),
                    "why": text(base.get("why"), 300),
                },
                "rows": shown,
            },
            "next_offset": None if nxt is None else max(offset, 0) + nxt,
        }
    )
