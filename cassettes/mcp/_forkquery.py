"""The MCP answers about a fork and a comparison. ``fork_diff``: where a branch (``looptap run
--from``) differs from the run it was forked from, lined up from the cursor
(:func:`cassettes.replay.forking.rundiff.branch_diff`). ``comparison``: a report ``looptap compare
--report`` saved (teacher-forced samples of a candidate model, by turn and layer). Read-only: they
read files under the roots, never start a run or send a request."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from ..reading import locate, origin_of
from ..replay.forking.rundiff import branch_diff
from ._answers import (
    DEFAULT_CHARS,
    QueryError,
    byte_budget,
    layer_of,
    number,
    page,
    read_json,
    text,
    wrap,
)
from ._parts import tolerated_count, tolerated_lines
from ._runs import Runs

__all__ = ["comparison", "fork_diff"]


def fork_diff(
    runs: Runs, branch: str, run: str | None, layer: str | None, limit: int, max_bytes: int
) -> dict[str, Any]:
    """The divergences of ``branch`` from its origin (named in its header, or ``run``)."""
    layer = layer_of(layer)
    bpath, b = runs.open(branch)
    origin = origin_of(bpath)
    if origin is None:
        raise QueryError(
            "this run is not a branch (its header names no "
            "origin: it was not made by looptap run --from)",
            run=branch,
        )

    def under_roots(p: Path) -> bool:
        return any(p.is_relative_to(r) for r in runs.roots)

    given = runs.resolve(run) if run is not None else None
    located = locate(bpath, origin, given, allowed=under_roots)
    if located.changed is not None:
        raise QueryError(
            "the origin changed since the fork: the prefix cannot be compared",
            run=branch,
            reason=located.changed,
        )
    if located.path is None:
        raise QueryError(
            "the origin this branch names is not under the roots (looked as written, at its "
            "absolute path, relative to and beside the branch)",
            run=branch,
            origin=str(origin.get("run", "")),
        )
    apath, a = runs.open(str(located.path.resolve()))
    lined = branch_diff(a, b, bpath, origin, compare=runs.comparing(apath, a, b))  # as `diff`
    divs, said = lined.divergences, lined.said
    cursor = origin.get("cursor")
    items = [
        {
            "layer": d.layer,
            "conversation_origin": d.conversation_a,
            "conversation_branch": d.conversation_b,
            "turn": d.turn,
            "seq_origin": d.seq_a,
            "seq_branch": d.seq_b,
            "path": text(d.path, 200),
            "recorded_message": text(d.message, DEFAULT_CHARS),
            # the later differences that follow from this one (the fork's change, the model's
            # answer)
            "folded": len(d.folded),
            "folded_first": [
                {
                    "turn": f.turn,
                    "layer": f.layer,
                    "seq_branch": f.seq_b,
                    "recorded_message": text(f.message, 300),
                }
                for f in d.folded[:5]
            ],
        }
        for d in divs
        if layer is None or d.layer == layer
    ]
    shown, nxt = page(items, 0, max(1, min(limit, 200)), byte_budget(max_bytes))
    return wrap(
        {
            "origin": text(str(apath.name), 200),
            "cursor": text(cursor.get("text") if isinstance(cursor, dict) else None, 100),
            "model": text(origin.get("model"), 100),
            "edits": [text(e, 200) for e in origin.get("edits") or [] if isinstance(e, str)][:20],
            "divergences": len(items),
            "tolerated": tolerated_count(divs.tolerated),
            "recorded": {
                "lined_up": [text(s, 300) for s in said[:50]],
                "divergences": shown,
                "tolerated": tolerated_lines(divs.tolerated),
            },
            "more": nxt is not None,
        }
    )


#: A saved comparison larger than this is refused (a report holds K samples of every turn, texts
#: clipped to 2,000 characters: a run of thousands of turns stays far below it).
MAX_REPORT_BYTES = 64 << 20
#: What marks a file as a ``looptap compare --report`` (its ``looptap`` field).
REPORT_KIND = "compare"
_TALLY = ("calls", "json", "schema_checked", "schema_valid", "equal_to_recording", "not_offered")
#: The verdict's figures (``looptap compare``'s verdict line, as numbers).
_VERDICT = (
    "turns",
    "answers",
    "agree",
    "agreement",
    "cost_ratio",
    "latency_ratio",
    "e_differences",
    "schema_violations",
    "a_differences",
    "finish_differences",
    "errors",
    "skipped",
)


def report_path(runs: Runs, name: str) -> Path:
    """The saved comparison ``name`` names: a ``.json`` report under a root, or a run whose report
    was saved beside it (``RUN.compare.json``, what ``--report`` without a file writes)."""
    real = runs.under_roots(
        name,
        "a comparison is named by the path of its report (.json) or of its run, under the roots",
        "report",
    )
    if real is not None:
        if real.is_file() and real.suffix.lower() != ".json":
            beside = real.with_name(real.name + ".compare.json")
            if beside.is_file() and not beside.is_symlink():
                return beside
            raise QueryError(
                "no comparison saved beside this run (looptap "
                "compare RUN --report writes RUN.compare.json)",
                report=name,
            )
        if not real.is_file():
            raise QueryError("this is not a file", report=name)
        return real
    raise QueryError("no file of this name under the roots", report=name)


def comparison(runs: Runs, report: str, offset: int, limit: int, max_bytes: int) -> dict[str, Any]:
    """A saved comparison: its verdict (agreement, cost and latency ratios, E and A differences;
    whether it stopped early, which recorded turns it skipped), then per turn, agreement with the
    recording and with itself, the argument checks (JSON, schema-valid, JSON-equal), what the
    recorded client never handled; paged by turn.
    Every string of the report (it is a file: anything may have edited it) is under ``recorded``."""
    path, doc = _report(runs, report)
    turns = [t for t in doc["turns"] if isinstance(t, dict)]
    items = [_turn(t) for t in turns[max(offset, 0) :]]
    shown, nxt = page(items, 0, max(1, min(limit, 200)), byte_budget(max_bytes))
    tally = _dict(doc.get("arguments"))
    agreements = [a for a in (number(t.get("agreement")) for t in turns) if a is not None]
    verdict = _dict(doc.get("verdict"))  # reports saved before the verdict have none: None
    return wrap(
        {
            "samples": number(doc.get("samples")),
            "turns": len(turns),
            "agreement": round(sum(agreements) / len(agreements), 4) if agreements else None,
            "verdict": {k: number(verdict.get(k)) for k in _VERDICT} if verdict else None,
            "stopped": bool(doc.get("stopped")),
            "arguments": {k: number(tally.get(k)) for k in _TALLY},
            "recorded": {
                "report": text(str(path.name), 200),
                "run": text(doc.get("run"), 300),
                "model": text(doc.get("model"), 100),
                "verdict": text(doc.get("verdict_line"), 800),
                "stopped": text(doc.get("stopped"), 400),
                "skipped": [text(x, 80) for x in _list(doc.get("skipped"), 50)],
                "turns": shown,
            },
            "next_offset": None if nxt is None else max(offset, 0) + nxt,
        }
    )


def _report(runs: Runs, report: str) -> tuple[Path, dict[str, Any]]:
    """The comparison report ``report`` under the roots, read (at most :data:`MAX_REPORT_BYTES`)
    and checked to be one; else :class:`QueryError`."""
    path = report_path(runs, report)
    doc = read_json(path, MAX_REPORT_BYTES, "report", report=report)
    if (
        not isinstance(doc, dict)
        or doc.get("looptap") != REPORT_KIND
        or not isinstance(doc.get("turns"), list)
    ):
        raise QueryError(
            "this file is not a comparison report (looptap compare --report writes them)",
            report=report,
        )
    return path, doc


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any, most: int) -> list[Any]:
    return value[:most] if isinstance(value, list) else []


def _turn(t: dict[str, Any]) -> dict[str, Any]:
    """One turn of a report, every string made safe (the report's texts are the models' words)."""
    args = _dict(t.get("arguments"))
    samples = [s for s in _list(t.get("samples"), 50) if isinstance(s, dict)]
    said = Counter(_said(s) for s in samples)
    violations = Counter(
        f"{_dict(c).get('name')}: {e}"
        for s in samples
        for c in _list(s.get("calls"), 10)
        for e in _list(_dict(c).get("schema_errors"), 10)
    )
    return {
        "seq": number(t.get("seq")),
        "turn": number(t.get("turn")),
        "conversation": text(t.get("conversation"), 40),
        "agreement": number(t.get("agreement")),
        "self_agreement": number(t.get("self_agreement")),
        "arguments": {k: number(args.get(k)) for k in _TALLY},
        "recorded_answer": text(_said(_dict(t.get("recorded"))), 300),
        "answers": [{"n": n, "said": text(k, 300)} for k, n in said.most_common(5)],
        "schema_violations": [
            {"n": n, "violation": text(v, 300)} for v, n in violations.most_common(5)
        ],
        "finish": [text(s.get("finish"), 40) for s in samples[:10]],
        "new_to_client": [text(x, 300) for x in _list(t.get("new_to_client"), 10)],
    }


def _said(s: dict[str, Any]) -> str:
    """A sample as one line: its calls with their arguments, its error, or its text (what the CLI's
    report says)."""
    if s.get("error") is not None:
        return f"error {s.get('status')}: {str(s.get('error'))[:100]}"
    calls = _list(s.get("calls"), 10)
    if calls:
        out = []
        for item in calls:
            c = _dict(item)
            try:
                args = orjson.dumps(c.get("arguments")).decode()[:80]
            except TypeError:
                args = "?"
            out.append(f"{c.get('name')}({args})")
        return ", ".join(out)
    return "refusal" if s.get("refusal") is True else f"text {str(s.get('text') or '')[:60]!r}"
