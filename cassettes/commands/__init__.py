"""The commands of ``looptap``, each declared once: its name, help, handler (``"module:function"``,
imported only when the command runs: :mod:`cassettes.commands._registry`) and arguments, each keyed
by its flags and metavar as ``--help`` writes them (:data:`Args`).
The order is the order ``looptap --help`` lists them in. A command of a package that may live in
another environment (the recorder beside mitmproxy, the inspector beside Textual) is declared here
too: its handler's module is imported only where it runs. The recorder's commands are declared in
:mod:`~cassettes.commands._recording`, the fleet index's in :mod:`~cassettes.commands._fleet`,
``why``'s in :mod:`~cassettes.commands._why`. This package is the façade of them all (its names
pinned by tests/test_commands.py).
"""

from __future__ import annotations

import argparse

from ._fleet import FLEET, INDEX, QUERY
from ._recording import RECORD, RUN
from ._registry import (
    EXIT_ERROR,
    EXIT_NOT_JUDGED,
    EXIT_OK,
    Arg,
    Args,
    Command,
    Extend,
    Handler,
    add_args,
    add_command,
    err,
    flag,
    loading,
    many,
)
from ._why import WHY, WHY_OPTIONS

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_NOT_JUDGED",
    "EXIT_OK",
    "WHY_OPTIONS",
    "Arg",
    "Args",
    "Command",
    "Handler",
    "add_args",
    "add_command",
    "declared",
    "err",
    "flag",
    "loading",
    "many",
]

#: ``--no-volatile`` of ``looptap diff`` and ``looptap replay``.
_NO_VOLATILE = flag(
    "compare the requests' text as sent: no date, clock, duration, id, temp path, cwd, home or "
    "loopback port tolerated (docs/testing.md)"
)


COMMANDS = (
    Command(
        "show",
        "print a run: one summary per round trip (or --json, one object per line)",
        {
            "file": (
                "a looptap cassette, a vcrpy cassette or a mitmproxy flow file (told apart by "
                "content)"
            ),
            "--json": flag("one JSON object per round trip (schema looptap.roundtrip/1)"),
            "--conversation ID": "only this conversation's round trips and findings (c1, c2, …)",
            "--turn N": Arg("only turn N (0-based) of each conversation shown", type=int),
            "--layer": Arg(
                "only round trips with a finding of this layer, and those findings",
                choices=("E", "A", "C"),
            ),
            "--severity": Arg(
                "only round trips with a finding at least this severe, and those findings",
                choices=("error", "warning", "info"),
            ),
            "--no-cache": flag(
                "analyse the run afresh and keep nothing (as LOOPTAP_NO_CACHE=1; "
                "docs/kept-analysis.md)"
            ),
        },
        run="looptap.cassettes.cli.show:cmd_show",
        loading=True,
    ),
    Command(
        "import",
        "import vcrpy and LangChain cassettes, mitmproxy flows, OTLP traces and chat "
        "trajectories as looptap cassettes",
        {
            "inputs": Arg(
                "files in any of those formats, whatever their names, or directories of them "
                "(there: *.yaml, *.yml, *.yaml.gz, *.mitm, *.flow, *.flows, and *.json, *.jsonl, "
                "*.ndjson, *.pb, *.otlp that hold a trace or trajectory)",
                nargs="+",
            ),
            "-o --output": (
                "output cassette (one input; default: the input's name as .jsonl in the current "
                "directory) or directory (several inputs or a directory; default: the current "
                "directory)"
            ),
            "-f --force": flag("replace existing output files"),
            "-q --quiet": flag("print nothing on success"),
            "--logs": many(
                "an OTLP logs file (OTLP/JSON or protobuf ExportLogsServiceRequest) whose event "
                "records are joined to the trace's spans by trace and span id (repeatable; records "
                "in the trace file itself are read without it)",
                metavar="FILE",
            ),
        },
        run="looptap.cassettes.cli.importer:cmd_import",
        description=(
            "Import other tools' recordings as looptap cassettes, each told by its content: "
            "vcrpy / pytest-recording cassettes (YAML, or vcrpy's JSON); LangChain's cassettes "
            "(its partner packages' tests/cassettes/*.yaml.gz, gzipped YAML or not); mitmproxy "
            "flow files (mitmdump -w, mitmweb's Save); OTLP traces (OTLP/JSON lines or protobuf: "
            "OpenTelemetry GenAI conventions, OpenInference); chat trajectories (a JSON list of "
            "OpenAI or Anthropic messages, or JSON Lines of them). Secrets are redacted as when "
            "recording (docs/interop.md)."
        ),
    ),
    Command(
        "demo",
        "record the bundled example agent through the proxy (offline) and show the run",
        {
            "-o --output": Arg("where to write the demo cassette", default="looptap-demo.jsonl"),
        },
        run="looptap.cassettes.cli.demo:cmd_demo",
        loading=True,
    ),
    Command(
        "compare",
        "send a run's recorded requests to a candidate model (teacher-forced, K samples) and "
        "compare by layer",
        {
            "file": "the recorded run",
            "--model": "the candidate model (default: the recorded one)",
            "--upstream NAME=URL": many("where requests of that API go (default: the real API)"),
            "--samples K": Arg(
                "answers per recorded turn (agreement rates with K > 1)",
                type=int,
                default=1,
            ),
            "--max-requests N": Arg(
                "refuse (before sending) when more requests would be sent",
                type=int,
            ),
            "--max-cost USD": (
                "refuse (before sending) when the estimated cost (the candidate's own price on the "
                "recorded usage) is higher"
            ),
            "--allow-unknown-price": flag(
                "send under --max-cost although the candidate has no known price (the limit then "
                "bounds the priced turns only)"
            ),
            "--include-errors": flag(
                "also send the turns the recording shows failing (a 429, a 500, a transport "
                "error): skipped by default"
            ),
            "--dry-run": flag("list what would be sent; send nothing"),
            "--header 'NAME: VALUE'": many(
                "a request header to send (credentials: a cassette holds none)"
            ),
            "--json": flag("the comparison as JSON"),
            "--report FILE.json": Arg(
                "also save the comparison as JSON (default file: RUN.compare.json beside the "
                "run), for looptap mcp's comparison tool",
                nargs="?",
                const="",
            ),
        },
        run="looptap.cassettes.replay.comparison:cmd_compare",
    ),
    Command(
        "diff",
        "where two runs of an agent diverge, by conversation, turn and layer (exit 1 if they do)",
        {
            "a": "the first run (a looptap cassette, a vcrpy cassette or a mitmproxy flow file)",
            "b": "the second run (the same formats)",
            "--json": flag("the divergences as JSON"),
            "--no-volatile": _NO_VOLATILE,
        },
        Extend("looptap.cassettes.project:add_rule_flags", what="the requests"),
        run="looptap.cassettes.replay.comparison:cmd_diff",
    ),
    Command(
        "export",
        "export a run as OpenTelemetry GenAI spans (OTLP JSON file or OTLP/HTTP endpoint), HAR "
        "1.2 or a web page",
        {
            "file": (
                "a looptap cassette, a vcrpy cassette or a mitmproxy flow file (told apart by "
                "content); with --parquet, a directory of runs, or a fleet index (a .duckdb file "
                "looptap index made) to export as it is"
            ),
            "more DIR": Arg("with --parquet: more directories", nargs="*"),
            "--parquet OUTDIR": (
                "index the runs under the directories (looptap index), or take the index given, "
                "and write its tables as Parquet partitioned by day under OUTDIR (docs/fleet.md; "
                "the fleet extra)"
            ),
            "--otel OUT.json": (
                "write OTLP/JSON (one ExportTraceServiceRequest per line, the OTLP file format) to "
                "this file ('-' = stdout)"
            ),
            "--otel-endpoint URL": (
                "POST the spans to this OTLP/HTTP endpoint (/v1/traces is appended unless present)"
            ),
            "--otel-protocol": Arg(
                "OTLP/HTTP body encoding (default protobuf)",
                choices=("protobuf", "json"),
                default="protobuf",
            ),
            "--otel-header NAME=VALUE": Arg(
                "extra HTTP header for the endpoint (repeatable), e.g. authorization",
                action="append",
            ),
            "--project": (
                "Phoenix project to file the spans under (resource attribute "
                "openinference.project.name)"
            ),
            "--no-content": flag(
                "leave out message contents, system instructions and tool definitions"
            ),
            "--har OUT.har": "write HAR 1.2 to this file ('-' = stdout)",
            "--html": flag(
                "write the run as one self-contained web page (turns, messages, findings, growth "
                "chart; needs the html extra) to -o, else to RUN.html in the current directory"
            ),
            "-o --output OUT.html": (
                "where --html writes the page ('-' = stdout; default: the run's name as NAME.html "
                "in the current directory)"
            ),
            "--force": flag(
                "replace an existing --otel/--har/--html file (a link, a directory or a device is "
                "always refused)"
            ),
            "-q --quiet": flag("print nothing on success"),
        },
        run="looptap.cassettes.interop:cmd_export",
        description=(
            "Export a run (a looptap cassette, a vcrpy cassette or a mitmproxy flow file) for "
            "other tools: OpenTelemetry GenAI spans (one trace per conversation, one span per "
            "round trip) for Phoenix, Langfuse or any OTLP collector, HAR 1.2 for browser devtools "
            "and mitmweb, and one self-contained web page to share (looptap export --html RUN -o "
            "run.html)."
        ),
    ),
    FLEET,
    INDEX,
    Command(
        "inspect",
        "step through a run in a terminal UI: turns, E/A/C layers, findings, token-cost growth, "
        "playback",
        {
            "file": (
                "a looptap cassette (or a vcrpy cassette or mitmproxy flow file, imported on the "
                "fly)"
            ),
            "--live": flag(
                "follow a recording still being written, or not yet created: new turns appear as "
                "they complete (a file a recorder has open is followed without it)"
            ),
            "--child-status FILE": Arg(
                "with --live: the file the recorder writes the recorded command's exit status "
                "into (looptap run --inspect passes it); once it appears the run is shown as "
                "ended",
                default=None,
            ),
        },
        run="looptap.inspector.cli:cmd_inspect",
        description=(
            "Open a run in the inspector (a looptap cassette; a vcrpy cassette or a mitmproxy flow "
            "file is imported on the fly). Press ? inside it for the key bindings."
        ),
    ),
    Command(
        "mcp",
        "serve recorded runs to a coding agent over MCP (read-only)",
        {
            "--root DIR": Arg(
                "a directory of runs (repeatable; default: the current one)",
                action="append",
            ),
            "--http HOST:PORT": "serve streamable HTTP on this loopback address instead of stdio",
        },
        run="looptap.cassettes.mcp:cmd_mcp",
        description=(
            "A read-only MCP server over the runs under --root: list runs, summaries, findings "
            "(root causes first), turns with E/A/C, search, token growth, diffs and a live tail. "
            "stdio by default (what Claude Code, Codex and Cursor start); --http serves streamable "
            "HTTP on loopback."
        ),
    ),
    QUERY,
    RECORD,
    Command(
        "replay",
        "serve a cassette as a fake upstream; prints the environment to export",
        {
            "file": (
                "the run to replay: a looptap cassette, a vcrpy cassette or a mitmproxy flow file"
            ),
            "--port": Arg("port on 127.0.0.1 (default: a free one)", type=int, default=0),
            "--host": Arg(argparse.SUPPRESS, default="127.0.0.1"),
            "--pace": Arg(
                "stream pace: recorded, instant (default) or xN (N times faster than recorded)",
                default="instant",
            ),
            "--strict": flag(
                "requests must come in recorded order, with the same API version headers; exit 1 "
                "if any round trip was left unplayed"
            ),
            "--no-volatile": _NO_VOLATILE,
        },
        Extend("looptap.cassettes.project:add_rule_flags"),
        {
            "--fault SELECTOR:KIND": many(
                "inject a fault in the API's own format (repeatable), e.g. 'turn=1:overloaded*2', "
                "'p=0.2:rate_limit', 'seq=4:stream_cut=3', '*:slow_first_byte=5'; kinds: "
                "rate_limit, overloaded, server_error, context_length, reset, slow_first_byte, "
                "stall, stream_cut, error_event (docs/faults.md)"
            ),
            "--fault-seed": Arg(
                "seed of the p= selectors (the same seed, the same faults)",
                type=int,
                default=0,
            ),
            "--idle-timeout SECONDS": Arg(
                "close a connection idle this long between requests or WebSocket frames (default "
                "120; 0: never)",
                type=float,
            ),
            "--read-timeout SECONDS": Arg(
                "a request head must arrive, and a body may pause, at most this long (default 30; "
                "0: no limit)",
                type=float,
            ),
            "--cursor SELECTOR": (
                "fork: from this recorded turn on (turn=2, seq=7, conversation=c2:turn=1; "
                "divergence: each conversation from its first request that differs) requests go to "
                "--live upstreams (docs/fork.md)"
            ),
            "--live NAME=URL": many(
                "with --cursor: where requests of that API go past the cursor (NAME as --upstream "
                "names an API, e.g. NAME=http://127.0.0.1:8001; repeatable)"
            ),
            "--model": "with --cursor: the model of every request sent live",
            "--prefix": Arg(
                "with --cursor: strict (default): a request before the cursor must match its "
                "recorded turn (volatile spans tolerated); tolerant: one that differs only in "
                "tool results is answered with its recorded turn, in position, the difference "
                "listed (docs/fork.md)",
                choices=("strict", "tolerant"),
                default="strict",
            ),
            "--live-tools": flag(
                "a tool's HTTP call the recording does not answer goes to its live host "
                "(default: it fails closed, as a model call does; a fork's go live)"
            ),
            "--fork-plan FILE": argparse.SUPPRESS,
            "--edit TARGET=@FILE": many(
                "with --cursor: rewrite tool_result[CALL_ID], system or user[N] in every request "
                "sent live (repeatable; docs/fork.md)"
            ),
        },
        run="looptap.cassettes.replay.command:cmd_replay",
    ),
    Command(
        "rules",
        "matching rules: propose them from two recordings of the same agent (docs/testing.md); "
        "an agent's rules: check them, learn them (docs/rules.md)",
        subparsers={"dest": "rules_command", "metavar": "{propose,check,learn}", "required": True},
        subcommands=(
            Command(
                "propose",
                "the rules that would make B's requests match A's (two runs of the same agent, "
                "e.g. on two days): printed, never written",
                {
                    "a": (
                        "the first run (a looptap cassette, a vcrpy cassette or a mitmproxy flow "
                        "file): the recording"
                    ),
                    "b": "the second run of the same agent (the same formats)",
                    "--json": flag(
                        "the differences, the proposed rules and what still differs, as JSON"
                    ),
                },
                run="looptap.cassettes.replay.comparison:cmd_rules_propose",
            ),
            Command(
                "check",
                "a dry run of an agent's rules file: what each rule finds in each run, at which "
                "turn (exit 1 when a rule is broken)",
                {
                    "rules FILE": "the agent's rules (docs/rules.md), in force or not",
                    "runs RUN": Arg("runs to check (the formats of looptap show)", nargs="+"),
                    "--json": flag("one JSON object per broken rule"),
                },
                run="looptap.cassettes.cli.agent_rules:cmd_rules_check",
            ),
            Command(
                "learn",
                "propose the agent's rules that hold in every passing run, each with the runs "
                "that support it, written for review (never put in force)",
                {
                    "runs RUN": Arg("passing runs (each conversation is one trace)", nargs="+"),
                    "-o --output FILE": Arg("the rules file to write", required=True),
                    "--force": flag("replace an existing file"),
                    "--min-support N": Arg(
                        "propose only rules exercised in at least N traces (default 5)",
                        type=int,
                        default=5,
                    ),
                },
                run="looptap.cassettes.cli.agent_rules:cmd_rules_learn",
            ),
        ),
    ),
    RUN,
    Command(
        "textconv",
        "print a cassette as stable line-per-item text (a git diff driver)",
        {
            "file": Arg(
                "a looptap cassette, a vcrpy cassette or a mitmproxy flow file (with --install: "
                "the repository, default .)",
                nargs="?",
            ),
            "--raw-ids": flag("print tool-call and response ids as recorded, not as <id:N>"),
            "--install": flag(
                "register the driver in the git repository here (.gitattributes and git config)"
            ),
        },
        run="looptap.cassettes.interop:cmd_textconv",
        description=(
            "Print a cassette one item per line (turns, appended messages, response parts, usage, "
            "findings; no timestamps; tool-call ids as <id:N>) so `git diff` shows what changed. "
            "Register it in a repository with: looptap textconv --install"
        ),
    ),
    Command(
        "verify",
        "scan cassettes for leaked secrets (known key formats, configured patterns); exit 1 on a "
        "find",
        {
            "files FILE": Arg(
                "cassettes to scan (any text file works), or directories: their *.jsonl, *.yaml, "
                "*.yml, *.har and *.json files, hidden directories skipped",
                nargs="+",
            ),
            "--pattern REGEX": many("also report matches of this regular expression (repeatable)"),
            "--config": Arg(
                "TOML file with 'patterns = [...]' (default: [tool.looptap.verify] in "
                "./pyproject.toml)",
                default=None,
            ),
            "-q --quiet": flag("print only the finds"),
        },
        run="looptap.cassettes.verify:cmd_verify",
    ),
    WHY,
)


def declared(name: str) -> Command:
    """The declaration of the command ``name`` (a ``KeyError`` for none)."""
    for c in COMMANDS:
        if c.name == name:
            return c
    raise KeyError(name)
