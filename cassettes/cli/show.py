"""``looptap show``: a run printed, one summary per round trip (or one
JSON object per line), then its analysis. The registry imports this module under
:func:`cassettes.cli.loading` (the collector paused, then frozen): the run's reader, the analysis,
the views and every provider adapter load here, at the top.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from .. import providers
from ..commands import EXIT_NOT_JUDGED, EXIT_OK, err
from ..errors import problem_lines
from ..hints import count
from ..reading import branch_line, branch_origin, fork_notes, open_run, show_pairs
from ..shell import shell_lines
from ..untrusted import clean_line
from ..views import (
    GrowthRows,
    analysis_lines,
    reading_line,
    roundtrip_json,  # noqa: F401 - show_pairs' (loaded here)
    summary_lines,
)
from .showfilter import show_filter

__all__ = ["cmd_show"]

providers.FAMILIES  # noqa: B018 - the adapters, which the first round trip would load


def cmd_show(args: argparse.Namespace) -> int:
    path = Path(args.file)
    with reading_line(path.name) as progress:
        cache = not getattr(args, "no_cache", False)
        run = open_run(path, progress=progress, cache=cache, views=True)  # (show_pairs' parts)
    for p in problem_lines(run.problems):
        err(f"warning: {path}: {p}")
    keep = show_filter(args, run.analysis)

    # Each turn is restored once, by show_pairs(); the growth tables printed after take its row
    # from there.
    growth = None if args.json else GrowthRows()

    # those kept with a kept analysis, else made (and kept)
    inferred: dict[str, int] = {}  # findings resting on what an import inferred, by code

    def views() -> Iterator[dict[str, Any]]:
        for v, row in run.printed(lambda: show_pairs(run, path)):
            if row is not None and growth is not None:
                growth.put(v["seq"], row)
            for f in v["findings"] if v.get("reconstructed") else []:
                if f.get("details", {}).get("inferred"):
                    inferred[f["code"]] = inferred.get(f["code"], 0) + 1
            yield v

    shown = 0

    def kept() -> Iterator[dict[str, Any]]:  # the filters: a predicate on what is printed
        nonlocal shown
        for v in views():
            if keep is None or keep.roundtrip(v):
                shown += 1
                yield v

    if args.json:
        out = sys.stdout.buffer
        for v in kept():
            out.write(orjson.dumps(v, option=orjson.OPT_APPEND_NEWLINE))
        if run.shell.traced:  # the traced shell commands: one line of their own, last
            line = {"schema": "looptap.shell/1", **run.shell.as_json()}
            out.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        out.flush()
    else:
        assert growth is not None
        title = str(path)

        origin = branch_origin(run.header, path)
        # a fork's branch says so first (its turns keep the origin's numbers)
        if origin is not None:
            title += "\n" + clean_line(branch_line(origin))
            title += "".join("\n" + clean_line(line) for line in _prefix_lines(path, origin))
        _print_lines([title])

        def text() -> Iterator[str]:  # every line after the title
            try:
                yield from summary_lines(
                    kept(),
                    run.problems,
                    total=len(run.exchanges),
                    families=run.families,
                    tool_http=tool_http_counts(run.analysis.mcp_calls.values()),
                )
                yield from analysis_lines(
                    keep.analysis(run.analysis) if keep is not None else run.analysis, growth
                )
                yield from shell_lines(run.shell)
            finally:
                growth.close()
            if inferred:
                said = ", ".join(f"{code} ×{n}" for code, n in sorted(inferred.items()))
                yield ""
                yield (
                    f"{count(sum(inferred.values()), 'finding')} above rest on what an imported "
                    "trace did not give (looptap inferred it when it rebuilt the round trip; not "
                    f"evidence): {said}"
                )
            if keep is not None:
                yield ""
                yield f"filtered ({keep.said}): {count(shown, 'round trip')} of {len(run.exchanges):,} shown"  # noqa: E501

        # unfiltered, the text kept with a kept analysis (views are not rendered again)
        _print_lines(text() if keep is not None else run.printed(text, "texts"))
    failures = run.analysis.errors
    if failures:  # the run was read; part of it could not be judged (looptap's bug)
        err(
            f"looptap: {count(len(failures), 'analysis step')} failed on {path} (looptap's bug, "
            f"not the run's): {clean_line(failures[0])[:200]}; the round trips concerned carry a "
            f"*.not_judged note (exit status {EXIT_NOT_JUDGED})"
        )
        return EXIT_NOT_JUDGED
    return EXIT_OK


def _prefix_lines(path: Path, origin: dict[str, Any]) -> list[str]:
    """``show``'s lines for what a branch's prefix tolerated (recorded text: the caller cleans
    them)."""
    # only a fork's branch has a prefix: a plain run's show loads no matching rules
    from ..matching import report_lines

    notes = fork_notes(path)["tolerated"]
    if not notes:
        return []
    mode = origin.get("prefix") if isinstance(origin.get("prefix"), str) else "strict"
    return [
        f"tolerated in the prefix (--prefix {mode}), each turn served from the origin in position:",
        *report_lines(notes),
    ]


def _print_lines(lines: Iterable[str]) -> None:
    """Print each line, a few hundred at a time: one write of many lines through the guarded
    stdout costs a fraction of one write per line (the same bytes)."""
    out = sys.stdout
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= 256:
            out.write("\n".join(chunk) + "\n")
            chunk = []
    if chunk:
        out.write("\n".join(chunk) + "\n")


def tool_http_counts(calls: Iterable[Any]) -> tuple[int, int, int]:
    """The tools' HTTP calls of a run (``McpCall`` with ``via == "http"``): recorded, linked to the
    model's call they served, and made while no call awaited its result (the agent's own: not
    linked, no candidate)."""
    recorded = linked = own = 0
    for c in calls:
        if c.via != "http":
            continue
        recorded += 1
        if c.call_id is not None:
            linked += 1
        elif not c.candidates:
            own += 1
    return recorded, linked, own
