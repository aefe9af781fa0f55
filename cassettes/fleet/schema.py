"""The fleet's tables: their columns, DuckDB types and meanings, named once here.

The index (:mod:`cassettes.fleet._index`) creates them from this, the Parquet export writes them,
docs/fleet.md's table is generated from it (``python -m cassettes.fleet.schema``) and a test pins
it. Every figure in them is taken from a run's ``show --json`` objects (:func:`cassettes.cli.
show_objects`): nothing is computed a second time. ``run`` (the file's absolute path) joins the
tables; ``day`` (the run's recording day, UTC) partitions the Parquet export.
"""

from __future__ import annotations

__all__ = ["TABLES", "doc_table"]

#: table → its columns as (name, DuckDB type, meaning), in order.
TABLES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "runs": (
        ("run", "VARCHAR", "the run's file, absolute path (joins the tables)"),
        ("day", "DATE", "the day it was recorded (UTC): the Parquet partition"),
        ("recorded", "TIMESTAMP", "when its first round trip started (else the file's mtime), UTC"),
        ("size", "BIGINT", "the file's size in bytes when indexed"),
        ("mtime_ns", "BIGINT", "the file's modification time when indexed"),
        ("ctime_ns", "BIGINT", "the file's status change time when indexed (any write changes it)"),
        ("inode", "UBIGINT", "the file's inode when indexed"),
        ("device", "UBIGINT", "the file's device when indexed"),
        ("digest", "VARCHAR", "sha256 of the file's size, first and last 64 KiB (change check)"),
        ("format", "VARCHAR", "`looptap`, `vcr` or `mitmproxy`; null when unreadable"),
        ("command", "VARCHAR", "the command `looptap run` ran, up to its program (`meta.command`)"),
        ("client", "VARCHAR", "the first request's User-Agent (clipped to 120 characters)"),
        (
            "agent",
            "VARCHAR",
            "the agent: the name given, else the trace's service, else the program run, else "
            "the run's directory",
        ),
        (
            "agent_source",
            "VARCHAR",
            "where `agent` came from: `given` (`--agent`, `$LOOPTAP_AGENT`), `service` (the "
            "trace's `service.name`), `command` (the program `looptap run` ran) or `directory`",
        ),
        ("branch_origin", "VARCHAR", "for a fork's branch: the origin run as its header names it"),
        ("round_trips", "INTEGER", "round trips in the run"),
        ("problems", "INTEGER", "reading problems (damaged records, cut tail)"),
        (
            "ended_on",
            "VARCHAR",
            "the API error its last round trip ended on (`HTTP 529`, `error event in the stream`, "
            "`transport error`): nothing after it recovered; null when it did not end on one",
        ),
        (
            "error",
            "VARCHAR",
            "why the run could not be read (its other columns but `agent` then null)",
        ),
    ),
    "conversations": (
        ("run", "VARCHAR", "the run"),
        ("day", "DATE", "the run's day"),
        ("conversation", "VARCHAR", "`c1`, `c2` … as `show`"),
        ("kind", "VARCHAR", "`main`, `side_call`, `sub_agent`, `agent_tool`, `handoff` …"),
        ("parent_seq", "INTEGER", "seq of the turn it came from (null for a main one)"),
        ("turns", "INTEGER", "its turns"),
        ("first_seq", "INTEGER", "seq of its first turn"),
    ),
    "turns": (
        ("run", "VARCHAR", "the run"),
        ("day", "DATE", "the run's day"),
        ("seq", "INTEGER", "the round trip's seq"),
        ("conversation", "VARCHAR", "its conversation"),
        ("turn", "INTEGER", "position in the conversation, from 0"),
        ("family", "VARCHAR", "API family (`openai_chat`, `anthropic` …)"),
        ("host", "VARCHAR", "the request's host"),
        ("model_requested", "VARCHAR", "the model asked for"),
        ("model_served", "VARCHAR", "the model the API says served it"),
        ("status", "INTEGER", "HTTP status"),
        ("finish", "VARCHAR", "normalised finish reason (`complete`, `tool_call` …)"),
        ("finish_raw", "VARCHAR", "finish reason as sent"),
        ("complete", "BOOLEAN", "the response's terminal marker was seen"),
        ("read", "VARCHAR", "how looptap read it: `complete`, `partial` or `unread` (show --json)"),
        ("layers", "VARCHAR", "the layers with a finding on this turn, as `EAC` letters"),
        ("worst", "VARCHAR", "its most severe finding's severity (null: none)"),
        ("input_tokens", "BIGINT", "all input tokens (`tokens.input`)"),
        ("output_tokens", "BIGINT", "output tokens (`tokens.output`)"),
        ("cache_read_tokens", "BIGINT", "`tokens.cache_read`"),
        ("cache_write_tokens", "BIGINT", "`tokens.cache_write`"),
        ("reasoning_tokens", "BIGINT", "`tokens.reasoning`"),
        ("token_source", "VARCHAR", "`reported`, `estimated` or `missing`"),
        ("cost", "DECIMAL(18,9)", "USD (`tokens.cost`); null = unknown, never 0"),
        ("cost_estimated", "BOOLEAN", "the price is an estimate (`tokens.price_estimated`)"),
        ("cumulative_cost", "DECIMAL(18,9)", "USD of the conversation up to this turn"),
        ("cumulative_estimated", "BOOLEAN", "`cumulative_cost` holds an estimated price"),
        ("ttfb", "DOUBLE", "seconds to the response headers"),
        ("ttft", "DOUBLE", "seconds to the first stream event"),
        ("duration", "DOUBLE", "seconds to the end of the response (latency)"),
        ("messages", "INTEGER", "messages in the request"),
        ("tools_offered", "INTEGER", "tools offered in the request"),
        ("tool_calls", "INTEGER", "tool calls the model emitted"),
    ),
    "findings": (
        ("run", "VARCHAR", "the run"),
        ("day", "DATE", "the run's day"),
        ("code", "VARCHAR", "stable code, `<layer>.<name>`"),
        ("layer", "VARCHAR", "`E`, `A` or `C`"),
        ("severity", "VARCHAR", "`info`, `warning` or `error`"),
        ("seq", "INTEGER", "the round trip it is on"),
        ("conversation", "VARCHAR", "its conversation"),
        ("turn", "INTEGER", "its turn"),
        ("position", "INTEGER", "its place in its turn's list, root cause first, from 0"),
        ("caused_by", "VARCHAR", "the code of the finding it is a consequence of"),
        ("message", "VARCHAR", "the message (recorded text: shown cleaned)"),
    ),
    "tool_calls": (
        ("run", "VARCHAR", "the run"),
        ("day", "DATE", "the run's day"),
        ("seq", "INTEGER", "the round trip whose answer made the call"),
        ("position", "INTEGER", "its place in the answer, from 0"),
        ("id", "VARCHAR", "the call's id"),
        ("name", "VARCHAR", "the tool called"),
        ("ran_by", "VARCHAR", "`client` or `server`"),
        ("arguments_bytes", "INTEGER", "size of the arguments as sent"),
        ("arguments_error", "VARCHAR", "why the arguments are not valid JSON (null: they are)"),
        (
            "shell_command",
            "VARCHAR",
            "the shell command it carried, when `looptap run --shell-trace` linked a process to "
            "it (recorded text: shown cleaned)",
        ),
        (
            "shell_exit",
            "INTEGER",
            "that process's exit status (null: a signal ended it, or its end was not seen)",
        ),
        ("shell_signal", "VARCHAR", "the signal that ended it (`SIGKILL` …)"),
        (
            "shell_stdout",
            "VARCHAR",
            "the start of what it printed on stdout (one line, at most 200 characters, cleaned)",
        ),
        ("shell_stderr", "VARCHAR", "the start of what it printed on stderr (the same)"),
        (
            "shell_written",
            "VARCHAR[]",
            "the files it and its children wrote (absolute paths, the first 20)",
        ),
        ("shell_removed", "VARCHAR[]", "the files they removed (the same)"),
    ),
}


def doc_table() -> str:
    """docs/fleet.md's schema section, generated from :data:`TABLES`."""
    out: list[str] = []
    for table, columns in TABLES.items():
        out += [f"### `{table}`", "", "| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{n}` | {t} | {m} |" for n, t, m in columns]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(doc_table())
