"""``looptap run``'s closing summary of the run it recorded: round trips, conversations and
turns, findings by layer, tokens and cost, and the command that shows the details."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..cassettes.analysis import analyse
from ..cassettes.hints import command_line, count, looptap_argv
from ..cassettes.reading import open_run
from ..cassettes.views import estimated_note, estimated_why, money

__all__ = ["EXIT_NOT_JUDGED", "Summary", "details_line", "summary_lines", "unseen_how"]

#: ``looptap run``'s status when every round trip was recorded and the command succeeded, but the
#: summary's analysis failed on part of the run (looptap's bug; ``show`` exits the same).
EXIT_NOT_JUDGED = 4


class Summary(list[str]):
    """The summary's lines; ``not_judged``: an analysis step failed on part of the run (said in
    a line of its own)."""

    not_judged = False


def unseen_how(config: Any) -> str:
    """Why a run's tools' HTTP may go unseen, and how to see it (said when tool calls ran and none
    was seen)."""
    if not config.tool_http:
        return "the tools' HTTP was not recorded (--no-tool-http): run without it to see it"
    where = (
        "a tool server on this machine (--no-tool-http-loopback left 127.0.0.1 and localhost "
        "direct: run without it), "
        if not config.tool_http_loopback
        else ""
    )
    return (
        f"not recorded: {where}a client that ignores HTTPS_PROXY and HTTP_PROXY (aiohttp without "
        "ClientSession(trust_env=True), an HTTP client given a proxy or transport of its own: "
        "give it the proxy), and tools that are not HTTP (a shell command, a file, a database "
        "driver's own protocol); docs/recorder.md, \"The tools' HTTP\""
    )


def summary_lines(path: Path, before: int = 0, unseen: str = "") -> Summary:
    """``looptap run``'s closing summary of the run it recorded into ``path`` (of the round trips
    after the first ``before``, when it appended to an earlier recording). ``unseen``: what to say
    when tool calls ran and no tool HTTP was seen (:func:`unseen_how`)."""
    out = Summary()
    try:
        if before:  # appended to an earlier recording: this run's round trips only, on their own
            recorded = open_run(path, whole=True, formats=("looptap",))
            exchanges = len(recorded.exchanges) - before
            run = analyse(list(recorded.exchanges)[before:])
            out += _summary(path, before, exchanges, run, unseen)
        else:
            # Read as `show` reads it: analysed as a stream and kept (docs/kept-analysis.md), never
            # the whole run in memory.
            streamed = open_run(path, formats=("looptap",))
            try:
                exchanges = len(streamed.exchanges)
                run = streamed.analysis
                out += _summary(path, before, exchanges, run, unseen)
            finally:
                streamed.close()
    except Exception as exc:
        out.not_judged = True
        out[:] = [f"could not read {path} for the summary: {type(exc).__name__}: {exc}"]
        return out
    if run.errors:
        out.not_judged = True
        out.insert(
            -1,
            f"{count(len(run.errors), 'analysis step')} failed on part of the run (looptap's "
            f"bug, not the run's): {run.errors[0][:200]}; those round trips carry a "
            f"*.not_judged note (exit status {EXIT_NOT_JUDGED})",
        )
    return out


def _results(turn: Any, by_mcp: set[str]) -> int:
    """The results of client tool calls (not an MCP server's) a turn's request sent back."""
    return sum(
        1
        for m in turn.c.appended
        for p in m.parts
        if p.tool_result is not None and p.tool_result.call_id not in by_mcp
    )


def _summary(path: Path, before: int, exchanges: int, run: Any, unseen: str = "") -> list[str]:
    by_layer = Counter(f.layer for f in run.findings if f.severity.value != "info")
    # one pass over the turns (a streamed run restores each from its store as it is read)
    # (``N tool calls ran with no tool HTTP seen``: results of client tool calls sent back, and
    # not one tool HTTP call recorded)
    ask = bool(unseen) and not any(c.via == "http" for c in run.mcp_calls.values())
    by_mcp = {c.call_id for c in run.mcp_calls.values() if c.call_id} if ask else set()
    tokens, ran = [], 0
    for t in run.turns.values():
        tokens.append(t.tokens)
        ran += _results(t, by_mcp) if ask else 0
    priced = [t for t in tokens if t.cost is not None]
    cost = "unknown"
    if priced:
        why = 0
        for t in priced:
            why |= estimated_why(t)
        notes = ([] if len(priced) == len(tokens) else ["some prices unknown"]) + (
            [estimated_note(why).removeprefix("~: ")] if why else []
        )  # one pair of parentheses, whatever is said in it
        cost = money(sum((t.cost for t in priced), Decimal(0)), bool(why)) + (
            f" ({'; '.join(notes)})" if notes else ""
        )
    return [
        f"{count(exchanges, 'round trip')}{' appended' if before else ''} in {path}: "
        f"{count(len(run.conversations), 'conversation')}, {count(len(run.turns), 'turn')}",
        f"findings (warnings and errors) by layer: E {by_layer['E']}, "
        f"A {by_layer['A']}, C {by_layer['C']}",
        f"tokens in {sum(t.input or 0 for t in tokens)}, out {sum(t.output or 0 for t in tokens)}; "
        f"cost {cost}",
        *([f"{count(ran, 'tool call')} ran with no tool HTTP seen: {unseen}"] if ran else []),
        details_line(path),
    ]


def details_line(path: Path) -> str:
    """The last line of the summary: the command that shows the run, as the user runs looptap."""
    return f"details: {command_line([*looptap_argv(), 'show', str(path)])}"
