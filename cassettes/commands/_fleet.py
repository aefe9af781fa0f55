"""The fleet index's commands: ``looptap fleet`` (its everyday questions), ``looptap index`` and
``looptap query``, and the options the questions and ``query`` share."""

from __future__ import annotations

from ._registry import Arg, Command, Exclusive, flag

__all__ = ["FLEET", "INDEX", "QUERY"]

#: ``--fleet`` and the output format of ``looptap query`` and the fleet's questions.
_FLEET_OUTPUT = (
    {
        "--fleet FLEET": (
            "the index (default .looptap/fleet.duckdb) or a directory written by looptap export "
            "--parquet"
        ),
    },
    Exclusive(
        {
            "--json": Arg(
                "one object per row",
                dest="format",
                action="store_const",
                const="json",
                default="table",
            ),
            "--csv": Arg("CSV", dest="format", action="store_const", const="csv"),
        },
    ),
)

#: The time window every question takes (docs/fleet.md).
_WINDOW = {
    "--since WHEN": (
        "runs recorded from then on: a date (2026-11-25), an ISO time, a time ago (7d, 12h, 2w), "
        "today, yesterday or a git ref (its commit time)"
    ),
    "--until WHEN": "runs recorded before then (as --since)",
}

FLEET = Command(
    "fleet",
    "everyday questions of the fleet index (docs/fleet.md)",
    run="looptap.cassettes.fleet:cmd_fleet",
    subparsers={"dest": "question", "metavar": "QUESTION", "required": True},
    subcommands=(
        Command(
            "findings",
            "findings by code: how many, in how many runs, when",
            _WINDOW,
            {"--new": flag("only codes no run before --since had")},
            *_FLEET_OUTPUT,
        ),
        Command(
            "cost",
            "cost and tokens by model, agent, day or week",
            {"--by": Arg(choices=("model", "agent", "day", "week"), default="model")},
            _WINDOW,
            *_FLEET_OUTPUT,
        ),
        Command(
            "failing-turns",
            "runs grouped by their first root-cause error and the turn's request shape",
            _WINDOW,
            *_FLEET_OUTPUT,
        ),
        Command(
            "weekly",
            "per week: runs, turns, cost, findings and errors, and the change from the week before",
            _WINDOW,
            *_FLEET_OUTPUT,
        ),
        Command(
            "grew",
            "what grew from the period before to this one (default: the last 7 days against the "
            "7 before): findings by code, or cost and findings by agent or model",
            {"--by": Arg(choices=("code", "agent", "model"), default="code")},
            _WINDOW,
            *_FLEET_OUTPUT,
        ),
        Command(
            "latency",
            "latency percentiles (p50, p95) by model or agent",
            {"--by": Arg(choices=("model", "agent"), default="model")},
            _WINDOW,
            *_FLEET_OUTPUT,
        ),
        Command(
            "page",
            "the questions above as one web page, each run linked to its HTML report (the html "
            "extra)",
            {
                "-o --output": Arg("default fleet.html", default="fleet.html"),
                "--force": flag("replace an existing page"),
                "--fleet FLEET": "as for the questions",
                "--no-reports": flag(
                    "do not write the runs' reports beside the page (the runs are then not linked)"
                ),
            },
            _WINDOW,
        ),
    ),
)


INDEX = Command(
    "index",
    "index every run under directories into a DuckDB file (the fleet extra)",
    {
        "dirs DIR": Arg("directories holding runs", nargs="+"),
        "-o --output FLEET": (
            "the index file (default .looptap/fleet.duckdb beside the first DIR)"
        ),
        "--jobs N": Arg("read runs in N processes (default 1)", type=int, default=1),
    },
    run="looptap.cassettes.fleet:cmd_index",
    description=(
        "Build or update the fleet index: runs, conversations, turns, findings and tool calls "
        "of every run under the directories (docs/fleet.md). An unchanged run is not read "
        "again; a changed one is updated; a removed one leaves."
    ),
)


QUERY = Command(
    "query",
    "run SQL over the fleet index (tables runs, conversations, turns, findings, tool_calls)",
    {
        "sql SQL": "a DuckDB SQL query",
    },
    *_FLEET_OUTPUT,
    run="looptap.cassettes.fleet:cmd_query",
)
