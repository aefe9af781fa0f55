"""The fleet index's commands: ``looptap fleet`` (its everyday questions), ``looptap index`` and
``looptap query``, and the options the questions and ``query`` share."""

from __future__ import annotations

from cassettes.commands._registry import Arg, Command, Exclusive, flag

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

FLEET = Command(
    "fleet",
    "everyday questions of the fleet index (docs/fleet.md)",
    run="cassettes.fleet:cmd_fleet",
    subparsers={"dest": "question", "metavar": "QUESTION", "required": True},
    subcommands=(
        Command(
            "findings",
            "findings by code: how many, in how many runs, when",
            {
                "--since REF|DATE": "runs recorded since a date or a git ref",
                "--new": flag("only codes no run before --since had"),
            },
            *_FLEET_OUTPUT,
        ),
        Command(
            "cost",
            "cost and tokens by model, agent or day",
            {
                "--by": Arg(choices=("model", "agent", "day"), default="model"),
            },
            *_FLEET_OUTPUT,
        ),
        Command(
            "failing-turns",
            "runs grouped by their first root-cause error and the turn's request shape",
            *_FLEET_OUTPUT,
        ),
        Command(
            "page",
            "the questions above as one web page (the html extra)",
            {
                "-o --output": Arg("default fleet.html", default="fleet.html"),
                "--force": flag("replace an existing page"),
                "--fleet FLEET": "as for the questions",
            },
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
    run="cassettes.fleet:cmd_index",
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
    run="cassettes.fleet:cmd_query",
)
