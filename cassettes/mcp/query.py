"""Read-only questions about recorded runs, answered in bounded JSON: what ``looptap mcp`` serves
to a coding agent (and what any other program may call). Each answer is a function of the tool's
name taking the :class:`~cassettes.mcp._runs.Runs` it reads and every argument of the tool
(:mod:`cassettes.mcp._server` declares the tools: their arguments, defaults and descriptions).

Every answer is a plain dict, at most about ``max_bytes`` of JSON (default :data:`DEFAULT_BYTES`):
lists are paged (``offset``/``limit``; ``next_offset`` says where the rest starts), long texts are
clipped with their full length and the call that reads them whole. The most useful part comes
first: root causes before their consequences, errors before warnings.

Recorded text is untrusted (a prompt injection may sit in any model output, tool result or error
body) and this time it goes into a *model*. So every recorded string is returned as data inside
the ``recorded`` part of an answer, never in the answer's own words, with terminal controls and
invisible characters made visible and secrets redacted once more; answers carry
:data:`UNTRUSTED_NOTE`. Files are only read under the roots given at start (after resolving
symlinks); anything else is refused with :class:`QueryError`.

The fence and the byte budget are :mod:`cassettes.mcp._answers`; the answer parts about recorded
things (findings, messages, a turn's layers) are :mod:`cassettes.mcp._parts`; the runs under the
roots are :mod:`cassettes.mcp._runs`; this module answers the questions (a turn, a fork, a
comparison and a why are answered by :mod:`cassettes.mcp._turnquery`,
:mod:`cassettes.mcp._forkquery` and :mod:`cassettes.mcp._whyquery`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from decimal import Decimal
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..analysis.dispatch import is_consequence
from ..fleet import overviews, runs_mentioning
from ..hints import command_line, install_command
from ..reading import Run
from ..replay.comparison import different_apis
from ..replay.forking.rundiff import diff_analysed
from ..untrusted import clean
from ..views import growth_bars, money, split_json
from ..views.search import search_turns
from ._answers import (
    DEFAULT_CHARS,
    UNTRUSTED_NOTE,
    QueryError,
    byte_budget,
    json_size,
    layer_of,
    page,
    text,
    wrap,
)
from ._forkquery import comparison, fork_diff
from ._parts import (
    conversation_row,
    finding_part,
    tolerated_count,
    tolerated_lines,
)
from ._runs import Runs
from ._turnquery import turn
from ._verifyquery import verify_report
from ._whyquery import why_report

__all__ = [
    "Runs",
    "comparison",
    "diff",
    "export_command",
    "findings",
    "fork_diff",
    "growth",
    "list_runs",
    "run_summary",
    "search",
    "tail",
    "turn",
    "verify_report",
    "web_report",
    "why_report",
]

_SEV = {"error": 0, "warning": 1, "info": 2}


def _overview(
    runs: Runs,
    path: Path,
    run: Run,
    ends: Iterable[tuple[bool, Decimal | None, bool]] | None = None,
) -> dict[str, Any]:
    """The run in a few figures. ``ends``: each conversation's last turn, whether found and
    its cumulative cost, when the caller has read them (else each is read here)."""
    a = run.analysis
    by: dict[str, dict[str, int]] = {}
    for f in a.findings:
        by.setdefault(f.layer, {}).setdefault(f.severity.value, 0)
        by[f.layer][f.severity.value] += 1
    cost = 0.0
    priced = True
    if ends is None:
        lasts = (a.turns.get(c.turns[-1]) if c.turns else None for c in a.conversations)
        ends = (
            (
                t is not None,
                t.tokens.cumulative_cost if t is not None else None,
                t is not None and t.tokens.cumulative_estimated,
            )
            for t in lasts
        )
    estimated = False
    for found, cumulative, guessed in ends:
        if not found or cumulative is None:
            priced = priced and not found
            continue
        cost += float(cumulative)
        estimated = estimated or guessed
    return {
        "recorded_run": text(runs.label(path), 300),
        "bytes": path.stat().st_size,
        "round_trips": len(run.exchanges),
        "conversations": len(a.conversations),
        "turns": len(a.turns),
        "findings": by,
        "cost_usd": round(cost, 6) if priced else None,
        "cost_estimated": estimated if priced else None,
        "problems": len(run.problems),
    }


def list_runs(runs: Runs, offset: int, limit: int, max_bytes: int) -> dict[str, Any]:
    files = runs.files()
    chosen = files[max(offset, 0) : max(offset, 0) + max(1, min(limit, 100))]
    rows: list[dict[str, Any]] = []
    indexed = overviews(runs.roots, chosen)  # the fleet index's, where it is up to date
    for p in chosen:
        hit = indexed.get(p)
        if hit is not None:
            rows.append(
                {"recorded_run": text(runs.label(p), 300), "bytes": p.stat().st_size, **hit}
            )
            continue
        try:
            rows.append(_overview(runs, *runs.open(str(p))))
        except QueryError as exc:
            rows.append(
                {
                    "recorded_run": text(runs.label(p), 300),
                    "unreadable": str(exc),
                    "recorded_reason": exc.recorded.get("reason"),
                }
            )
        except Exception as exc:  # one run a reader cannot cope with never hides the others
            rows.append(
                {
                    "recorded_run": text(runs.label(p), 300),
                    "unreadable": f"looptap failed on this run ({type(exc).__name__})",
                    "recorded_reason": text(str(exc), 300),
                }
            )
    shown, _ = page(rows, 0, len(rows), byte_budget(max_bytes) - 300)
    after = max(offset, 0) + len(shown)
    return wrap(
        {
            "total": len(files),
            "next_offset": after if after < len(files) else None,
            "recorded": {"runs": shown},
        }
    )


def run_summary(runs: Runs, run: str, max_bytes: int) -> dict[str, Any]:
    path, r = runs.open(run)
    a = r.analysis
    # (each turn is read once: the overview takes the last ones from the rows)
    ends: list[tuple[bool, Decimal | None, bool]] = []
    convs = [conversation_row(c, a, ends) for c in a.conversations]
    # The root causes are the answer: their messages get room (the top one whole up to 1,000
    # characters), and the conversations are paged into what is left, before any text is cut.
    found = [f for f in a.findings if not is_consequence(f)][:8]
    roots = [finding_part(f, 1000 if i == 0 else 400) for i, f in enumerate(found)]
    out = _overview(runs, path, r, ends)
    while len(roots) > 1 and json_size(out) + json_size(roots) > byte_budget(max_bytes) - 300:
        roots.pop()  # the least severe root causes go before the top one is cut
    budget = byte_budget(max_bytes) - json_size(out) - json_size(roots)
    shown, nxt = page(convs, 0, 200, budget) if budget > 200 else ([], 0 if convs else None)
    out.update(
        {
            "more_conversations": None
            if nxt is None
            else f"{len(convs) - nxt} more: call findings or growth with a conversation id",
            "root_causes": roots,
            "recorded": {
                "families": {text(k, 40): v for k, v in r.families.items()},
                "conversations": shown,
                "problems": [text(p, 200) for p in r.problems[:5]],
                "analysis_errors": [text(e, 200) for e in a.errors[:5]],
            },
        }
    )
    return wrap(out)


def findings(
    runs: Runs,
    run: str,
    layer: str | None,
    severity: str | None,
    code: str | None,
    conversation: str | None,
    offset: int,
    limit: int,
    max_bytes: int,
) -> dict[str, Any]:
    layer = layer_of(layer)
    least = _SEV.get((severity or "info").lower()) if isinstance(severity or "info", str) else None
    if least is None:
        raise QueryError(
            "severity is error, warning or info (the least severity shown)",
            severity=str(severity),
        )
    _, r = runs.open(run)
    fs = [
        f
        for f in r.analysis.findings
        if (layer is None or f.layer == layer)
        and _SEV.get(f.severity.value, 3) <= least
        and (code is None or f.code == code)
        and (conversation is None or f.conversation == conversation)
    ]
    items = [finding_part(f, DEFAULT_CHARS) for f in fs]
    shown, nxt = page(items, offset, max(1, min(limit, 200)), byte_budget(max_bytes))
    return wrap({"total": len(items), "next_offset": nxt, "recorded": {"findings": shown}})


def search(runs: Runs, query: str, run: str | None, limit: int, max_bytes: int) -> dict[str, Any]:
    if not isinstance(query, str) or not query.strip():
        raise QueryError("search wants a non-empty query")
    # the fleet index's runs that mention it first (any age), then the newest
    first = runs_mentioning(runs.roots, query) if run is None else []
    names = [run] if run else list(dict.fromkeys(map(str, [*first, *runs.files()[:50]])))
    hits: list[dict[str, Any]] = []
    for name in names:
        try:
            path, r = runs.open(name)
        except QueryError:
            continue
        turns = (r.analysis.turns[s] for s in r.analysis.turns)
        for h in search_turns(turns, query, limit=limit):
            hits.append(
                {
                    "run": runs.label(path),
                    "seq": h.seq,
                    "conversation": h.conversation,
                    "turn": h.turn,
                    "where": h.where,
                    "snippet": text(h.snippet, 160),
                }
            )
            if len(hits) >= limit:
                break
        if len(hits) >= limit:
            break
    shown, nxt = page(hits, 0, limit, byte_budget(max_bytes))
    return wrap(
        {
            "hits": len(shown),
            "more": nxt is not None or len(hits) >= limit,
            "recorded": {"hits": shown},
        }
    )


def growth(
    runs: Runs,
    run: str,
    conversation: str,
    offset: int,
    limit: int,
    max_bytes: int,
) -> dict[str, Any]:
    _, r = runs.open(run)
    conv = next((c for c in r.analysis.conversations if c.id == conversation), None)
    if conv is None:
        raise QueryError(
            "no conversation of this id in this run (run_summary lists them)",
            conversation=conversation,
        )
    rows = []
    for s in conv.turns:
        t = r.analysis.turns.get(s)
        if t is None:
            continue
        k = t.tokens
        # the split every view shows (show, the inspector, HTML, OTel)
        (bar,) = growth_bars([t])
        rows.append(
            {
                "turn": t.index,
                "seq": s,
                "input": k.input,
                "cache_read": k.cache_read,
                "cache_write": k.cache_write,
                "output": k.output,
                "split": split_json(bar),
                "cost_usd": float(k.cost) if k.cost is not None else None,
                "cost_estimated": k.price_estimated,
                "cost": money(k.cost, k.price_estimated),
                "cumulative_cost_usd": float(k.cumulative_cost)
                if k.cumulative_cost is not None
                else None,
                "cumulative_estimated": k.cumulative_estimated,
                "cumulative_cost": money(k.cumulative_cost, k.cumulative_estimated),
                "source": k.source,
            }
        )
    shown, nxt = page(rows, offset, max(1, min(limit, 500)), byte_budget(max_bytes))
    return wrap({"conversation": conv.id, "turns": len(rows), "next_offset": nxt, "growth": shown})


def diff(
    runs: Runs,
    run_a: str,
    run_b: str,
    layer: str | None,
    limit: int,
    max_bytes: int,
) -> dict[str, Any]:
    layer = layer_of(layer)
    (apath, a), (_, b) = runs.open(run_a), runs.open(run_b)

    unrelated = different_apis(a, b)  # the CLI's rule: runs on different APIs, one divergence
    divs = (
        [unrelated]
        if unrelated is not None
        else diff_analysed(
            a.analysis,
            b.analysis,
            a.exchange_by_seq,
            b.exchange_by_seq,
            compare=runs.comparing(apath, a, b),
        )
    )
    items = [
        {
            "layer": d.layer,
            "conversation_a": d.conversation_a,
            "conversation_b": d.conversation_b,
            "turn": d.turn,
            "seq_a": d.seq_a,
            "seq_b": d.seq_b,
            "path": text(d.path, 200),
            "recorded_message": text(d.message, DEFAULT_CHARS),
            # what the CLI's diff shows under it: each run's value (ids as each run sent them)
            "recorded_changes": [text(line, 300) for line in d.change_lines(3)],
        }
        for d in divs
        if layer is None or d.layer == layer
    ]
    shown, nxt = page(items, 0, max(1, min(limit, 200)), byte_budget(max_bytes))
    tol = getattr(divs, "tolerated", [])
    return wrap(
        {
            "divergences": len(items),
            "same": not divs,
            "tolerated": tolerated_count(tol),
            "recorded": {"divergences": shown, "tolerated": tolerated_lines(tol)},
            "more": nxt is not None,
        }
    )


def tail(runs: Runs, run: str, after_seq: int, limit: int, max_bytes: int) -> dict[str, Any]:
    """Round trips recorded after ``after_seq``. A recording in progress is followed as it
    grows: the server keeps reading the file where it stopped (only the new records are read
    and analysed), so call again with the ``last_seq`` of the previous answer."""
    inc = runs.follow(run)
    items: list[dict[str, Any]] = []
    seqs = inc.seqs
    for pos in range(len(seqs)):
        seq = seqs[pos]
        if seq <= after_seq:
            continue
        t = inc.summaries.get(seq)
        item: dict[str, Any] = {"seq": seq, "llm_turn": t is not None}
        if t is not None:
            item.update(
                {
                    "conversation": t.conversation,
                    "turn": t.index,
                    "family": text(t.family, 40),
                    "status": t.status,
                    "finish": text(t.finish, 60),
                    "tool_calls": t.tool_calls,
                    "findings": [f"{f.severity.value} {f.layer} {f.code}" for f in t.findings],
                }
            )
        items.append(item)
        if len(items) >= limit:
            break
    shown, _ = page(items, 0, max(1, min(limit, 500)), byte_budget(max_bytes) - 400)
    last = shown[-1]["seq"] if shown else after_seq
    return wrap(
        {
            "after_seq": after_seq,
            "last_seq": last,
            "round_trips_so_far": len(seqs),
            "still_being_written": inc.still_written,
            "findings_at_the_end": "findings of the run's end (e.g. a call never answered) "
            "appear once the recording is finished: see findings",
            "recorded": {"round_trips": shown},
        }
    )


def web_report(runs: Runs, run: str, max_bytes: int) -> dict[str, Any]:
    """The ``web_report`` answer for the run ``run`` names: the ``looptap export --html`` command
    (with this interpreter, so it runs whatever is on PATH) and the page beside the run, if any
    (a few hundred bytes: ``max_bytes`` never cuts it)."""
    del max_bytes
    path = runs.resolve(run)
    page = path.with_name(path.name + ".html")
    command = export_command(path, page)
    exists = page.is_file() and not page.is_symlink()
    # The command runs with this interpreter: the extra is missing only if Jinja2 is not here.
    missing = (
        ""
        if _importable("jinja2")
        else f" (first install the html extra it needs, missing here: {install_command('html')})"
    )
    return {
        "note": UNTRUSTED_NOTE,
        "how": f"run recorded.command in a shell to write the page{missing}; "
        "it opens in any browser without a server"
        + (
            "; recorded.page is there already (add --force to the command to write it again)"
            if exists
            else ""
        ),
        # The run's file name is the recording's: inside the fence, made safe.
        "recorded": {"command": command, "page": clean(str(page)) if exists else None},
    }


def export_command(path: Path, page: Path) -> str:
    """The command that writes the web page ``page`` of the run at ``path`` (with this
    interpreter), built from its words: a run's file name is the recording's, any text."""
    cmd = [sys.executable, "-m", "looptap.cassettes.cli", "export", "--html", str(path)]
    return command_line([*cmd, "-o", str(page)])


def _importable(module: str) -> bool:
    """Whether ``module`` can be imported here (found without importing it; a module blocked in
    ``sys.modules`` with ``None`` counts as missing)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False
