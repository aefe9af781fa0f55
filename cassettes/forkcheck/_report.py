"""The ``--verify`` report as text: the recorded run's end state, then one line per model
(``MODEL: k/K verified [95% interval lo–hi], $cost, N requests``), its failed branches and where
they first differed from each other."""

from __future__ import annotations

from typing import Any

from ..hints import count
from ..untrusted import clean_line

__all__ = ["lines", "page"]


def _row(r: dict[str, Any]) -> list[str]:
    cost = f"${float(r['cost']):.4f}" if r["cost"] is not None else "cost unknown"
    unjudged = r["samples"] - r["judged"]
    head = (
        f"{r['name']}: {r['verified']}/{r['judged']} verified "
        f"[95% interval {r['low']:.2f}–{r['high']:.2f}], {cost}, {count(r['sent'], 'request')}"
        + (f" ({unjudged} of {r['samples']} not judged)" if unjudged else "")
    )
    out = [head]
    for b in r["branches"]:
        if b["result"] != "verified":
            out.append(
                f"  {b['branch']}: {b['result']}" + (f" ({b['why']})" if b.get("why") else "")
            )
    d = r.get("differed")
    if d and d.get("error"):
        out.append(f"  the failed branches could not be compared: {d['error']}")
    elif d and d.get("turn") is not None:
        out.append(
            f"  the failed branches first differed from each other at {d['conversation']} turn "
            f"{d['turn']}"
        )
    elif d:
        out.append("  the failed branches answered alike at every turn past the cursor")
    return out


def lines(doc: dict[str, Any]) -> list[str]:
    b = doc["baseline"]
    out = [
        f"verify: {doc['command']!r} in each branch's tree, forked at {doc['cursor']}",
        f"recorded run (its end state): {b['result']}"
        + (f" ({b['why']})" if b.get("why") else f" (exit status {b.get('exit')})"),
    ]
    for r in doc["rows"]:
        out += _row(r)
    out.append(
        f"{count(doc['sent'], 'request')} sent live in all (at most {doc['at_most']} said before); "
        f"branches in {doc['output']}"
    )
    return [clean_line(x) for x in out]


def page(doc: dict[str, Any]) -> str:
    """The report as one static page (``DIR/verify.html``): the fleet page's plain tables
    (autoescaped, no script, its style allowed by its hash only), each branch linked to its
    cassette beside it. Raises ``HtmlExtraMissing`` without Jinja2."""
    from ..views.htmlpage import render_fleet_html  # the html extra's seam (jinja2)

    b = doc["baseline"]
    rows: list[list[Any]] = [
        [
            "recorded run (its end state)",
            b["result"],
            "",
            "",
            "",
            b.get("why") or f"exit status {b.get('exit')}",
        ],
    ]
    branches: list[list[Any]] = []
    for r in doc["rows"]:
        cost = f"${float(r['cost']):.4f}" if r["cost"] is not None else "unknown"
        d = r.get("differed") or {}
        where = (
            f"first differed at {d['conversation']} turn {d['turn']}"
            if d.get("turn") is not None
            else "answered alike"
            if d and not d.get("error")
            else ""
        )
        rows.append(
            [
                r["name"],
                f"{r['verified']}/{r['judged']} verified",
                f"{r['low']:.2f}–{r['high']:.2f}",
                cost,
                str(r["sent"]),
                where,
            ]
        )
        for x in r["branches"]:
            branches.append(
                [r["name"], (x["branch"], x["branch"]), x["result"], x.get("why") or ""]
            )
    clean = [[c if isinstance(c, tuple) else clean_line(str(c)) for c in row] for row in rows]
    links = [
        [(clean_line(c[0]), c[1]) if isinstance(c, tuple) else clean_line(str(c)) for c in row]
        for row in branches
    ]
    return render_fleet_html(
        clean_line(
            f"{doc['command']} in each branch's tree, forked at {doc['cursor']}; "
            f"{count(doc['sent'], 'request')} sent (at most {doc['at_most']})"
        ),
        [
            (
                "models",
                ["model", "verified", "95% interval", "cost", "requests", "failed branches"],
                clean,
            ),
            ("branches", ["model", "branch", "result", "why"], links),
        ],
        heading="run --verify",
    )
