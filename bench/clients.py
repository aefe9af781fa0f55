"""The client matrix as a table: which clients looptap has been checked against, at which versions,
and what it said of a clean run and of an injected client bug.

    python bench/clients.py [--from DIR | --reports DIR] [--write]

Runs tests/clients (the real ``looptap run`` around each client, tests/clients/test_matrix.py) with
``LOOPTAP_CLIENTS_REPORT`` set, then renders what each run reported; ``--from DIR`` renders the
reports of an earlier run instead; ``--reports DIR`` keeps this run's reports and recordings there
(bench/precision.py --matrix DIR judges them). ``--write`` writes docs/clients.md. Versions are read
from the environments the clients ran in (the suite's, ``.venv-clients``, ``.venv-agents``,
``.venv-crewai``, ``.npm-clients``, ``.npm-agents``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.clients.clients import AGENTS, CLIENTS, MUTATION_CLIENTS, Client  # noqa: E402
from tests.clients.inject.mutate import VARIANTS as MUTATION_VARIANTS  # noqa: E402
from tests.clients.test_matrix import NPM_CLIENTS, PYTHONS  # noqa: E402


def _version(c: Client) -> str:
    if c.runtime in ("node", "agent"):
        root = (
            NPM_CLIENTS
            if c.runtime == "node"
            else Path(os.environ.get("LOOPTAP_NPM_AGENTS") or REPO / ".npm-agents")
        )
        try:
            return str(
                json.loads((root / "node_modules" / c.package / "package.json").read_text())[
                    "version"
                ]
            )
        except (OSError, ValueError, KeyError):
            return "not installed"
    py = sys.executable if c.runtime == "test" else str(PYTHONS[c.runtime][0])
    proc = subprocess.run(
        [py, "-c", f"import importlib.metadata as m; print(m.version({c.package!r}))"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or "not installed"


def _kinds(c: Client, reports: Path) -> str:
    """The clean run's conversations as threading labels them: each one's turns and kind (``main``
    for a conversation of its own, else its branch: ``sub_agent``, ``side_call``), from the run's
    recording kept beside its report."""
    from looptap.cassettes.analysis import analyse
    from looptap.cassettes.parsing import parse_all
    from looptap.cassettes.storage import read_records

    rec = reports / f"{c.id.replace(' ', '_')}.clean.jsonl"
    if not rec.exists():
        return "-"
    cas = read_records(rec)
    an = analyse(cas.exchanges, parse_all(cas.exchanges))
    kinds = sorted(
        (c.branch or ("main" if c.parent_seq is None else "child"), len(c.turns))
        for c in an.conversations
        if c.turns
    )
    return ", ".join(f"{kind} {turns}" for kind, turns in kinds)


def _row(c: Client, reports: Path) -> str:
    def load(variant: str) -> dict[str, object] | None:
        f = reports / f"{c.id.replace(' ', '_')}.{variant}.json"
        return json.loads(f.read_text()) if f.exists() else None

    clean, bug = load("clean"), load("bug")
    if clean is None:
        clean_cell = "not run (skipped)"
    else:
        serious = clean.get("serious") or []
        turns = clean.get("turns")
        clean_cell = (
            "**0 warnings or errors**"
            if not serious
            else f"{len(serious)}: " + "; ".join(map(str, serious))[:300]
        )
        clean_cell += (
            f"; {clean.get('conversations')} conv., turns "
            f"{tuple(turns) if isinstance(turns, list) else turns}"
        )
        clean_cell = ("ok · " if clean.get("ok") else "**FAIL** · ") + clean_cell
    if bug is None:
        bug_cell = "not run (skipped)"
    else:
        named = bug.get("named") or []
        roots = bug.get("roots") or []
        verdict = (
            "ok · "
            if bug.get("ok")
            else f"pending ({c.pending}) · "
            if c.pending
            else "**FAIL** · "
        )
        bug_cell = (
            verdict
            + f"`{c.bug}` at turn {bug.get('turn')}: "
            + (
                ", ".join(f"`{n}`" for n in named)
                if named
                else "not named; roots: " + "; ".join(map(str, roots))[:200]
            )
        )
    stream = "streamed" if c.stream else "not streamed"
    note = f" ({c.note})" if c.note else ""
    return (
        f"| {c.id}{note} | {c.package} {_version(c)} | {c.api} ({stream}) | {_kinds(c, reports)} | "
        f"{clean_cell} | {bug_cell} |"
    )


def _mutations(reports: Path) -> list[str]:
    """The history rewrites' table (tests/clients/test_matrix.py, test_history_mutation_is_named):
    each variant on an SDK and a framework of each API family, and what looptap named where."""
    cells: list[str] = []
    for cid in MUTATION_CLIENTS:
        row = [cid]
        for kind in MUTATION_VARIANTS:
            f = reports / f"{cid.replace(' ', '_')}.bug-{kind}.json"
            rep = json.loads(f.read_text()) if f.exists() else None
            row.append(
                "not run"
                if rep is None
                else "ok · `C.history_mutated`"
                if rep.get("ok")
                else "**FAIL** · roots: " + "; ".join(map(str, rep.get("roots") or []))[:120]
            )
        cells.append("| " + " | ".join(row) + " |")
    return [
        "## History rewrites",
        "",
        "Each rewrite a client bug makes of what it sent before (tests/clients/inject/mutate.py), "
        "on the first request that",
        "re-sends it: `mutate_history` longer, `mutate_shorter` cut short with no marker, "
        "`mutate_equal` replaced by text as",
        "long, `mutate_reorder` two call groups swapped, `mutate_argument` a call's arguments "
        "edited, `mutate_drop_middle` a call",
        "group dropped from between the user's message and the next group. **ok**: "
        "`C.history_mutated` is the root cause at",
        "the round trip the injector marked, no other root cause, nothing earlier, no "
        "`C.history_trimmed`.",
        "",
        "| client | " + " | ".join(f"`{k}`" for k in MUTATION_VARIANTS) + " |",
        "|---|" + "---|" * len(MUTATION_VARIANTS),
        *cells,
        "",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="render the reports in DIR instead of running the matrix",
    )
    ap.add_argument("--reports", type=Path, help="keep this run's reports and recordings in DIR")
    ap.add_argument("--write", action="store_true", help="write docs/clients.md")
    a = ap.parse_args()
    reports = a.source
    if reports is None:
        reports = a.reports or Path(tempfile.mkdtemp(prefix="looptap-clients-"))
        reports.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "LOOPTAP_CLIENTS_REPORT": str(reports)}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-n",
                "2",
                "-p",
                "no:cacheprovider",
                "--durations=30",
                "tests/clients",
            ],
            cwd=REPO,
            env=env,
        )
    rows = [_row(c, reports) for c in (*CLIENTS, *AGENTS)]
    ok = sum(1 for r in rows if r.count("ok · ") == 2)
    text = "\n".join(
        [
            "# Clients looptap is checked against",
            "",
            "Generated by `python bench/clients.py --write` from the client matrix "
            "(tests/clients/test_matrix.py),",
            f"{datetime.date.today().isoformat()}. Each client runs its own tool loop (parallel "
            "calls, 3–4 turns) through the",
            "real `looptap run` against a scripted upstream that "
            "answers like the API, including its 400s for",
            "mis-paired tool results. **Clean**: what looptap "
            "found at warning or worse (must be none), the",
            "conversations and their turns. **Kinds**: how threading "
            "labels each conversation of the clean run",
            "(`main`: one of its own; `sub_agent`, `side_call`, `handoff`, `agent_tool`, "
            "`group_chat`, `sibling`: a branch under a",
            "parent turn, docs/threading.md; `child`: under a parent turn, without a kind yet). "
            "**Injected bug**: one client bug injected inside the client process",
            "(an httpx or fetch wrapper: `drop_result` drops a tool "
            "result, `wrong_id` sends one under an id no call",
            "has, `mutate_history` rewrites an earlier tool output), "
            "and the root cause looptap names at the round",
            "trip that carries it (layer C).",
            "",
            f"{ok} of {len(rows)} rows pass both.",
            "",
            "| client | package | API | kinds (clean run: each conversation's kind and turns) | "
            "clean run | injected bug |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "## Wire habits of these clients, and how looptap reads them",
            "",
            "| client | habit | looptap's reading |",
            "|---|---|---|",
            "| openai-python (`model_dump(exclude_none=True)`) | the echoed assistant message has "
            "no `content` key where the API sent `null` | the same message: null and absent are "
            "equal to the API |",
            "| llama-index `ReActAgent` | the loop is text: `Thought` / `Action` / `Action Input`, "
            "the observation as a user message; the echo re-serialises the Action Input as a "
            "Python repr (`{'city': 'Paris'}`) | an echo with the same words is echoed; an "
            "`Action:` answer is a step, not a final answer |",
            "| ReAct agents generally | the model writes a made-up `Observation:`; the client cuts "
            "it and writes the real one into the echo | the echo is compared up to the observation "
            "|",
            "| smolagents `ToolCallingAgent` | the model's tool calls are echoed as text (`Calling "
            "tools: [{'id': …}]`) and results sent as `Observation:` user text; the run ends with "
            "a `final_answer` call that is never answered | no call is pending for the API: info "
            "`C.tool_calls_as_text`, no dropped result; the unanswered final-output call is info "
            "(`C.stopped_with_pending_calls`) |",
            "| openai-agents | a handoff is a `transfer_to_…` call answered by the SDK; an agent "
            "used as a tool runs its own loop | the handoff continues the conversation; the "
            "sub-agent is its own conversation under the turn that called it |",
            "| Vercel AI SDK (Responses) | with `store` on (its default) it may refer back to the "
            "model's items with `item_reference` | a reference to an item of the previous response "
            "counts as the item echoed |",
            "| Google ADK | async runs send with aiohttp (google-genai's async transport); a "
            "handoff is `transfer_to_agent` answered by the runner, after which the sub-agent sees "
            "the coordinator's turns re-rendered as `For context:` user text under its own system "
            "prompt; an `AgentTool` runs the sub-agent's own loop | the handoff's sub-agent is a "
            "conversation of its own, `handoff` under the coordinator's transferring turn (the "
            "transfer call is not left pending); the agent used as a tool is `agent_tool` under "
            "the turn that called it |",
            "| AutoGen AgentChat (`RoundRobinGroupChat`) | the next agent receives the previous "
            "agent's answer as a user message, under its own system prompt and no tools (the tool "
            "steps left out) | each agent is a conversation of its own: the reviewer is "
            "`group_chat` under the turn whose answer it heard |",
            "| DSPy `ReAct` | no API tools: each step re-renders the whole trajectory (`[[ ## "
            "observation_0 ## ]]` …) into one user message | the steps are followed by their "
            "fields as one loop (one turn per step; docs/threading.md, 'Re-rendered "
            "trajectories'), the extract call under its own signature a conversation of its own; "
            "an observation rewritten between steps is `C.history_mutated` naming the field |",
            "| Gemini CLI 0.61 | a model-router call (a JSON complexity score) before each prompt; "
            "the model's calls carry no ids, the CLI invents them (`<tool>_<time>_<n>`) for its "
            "echo and results; with `GOOGLE_GEMINI_BASE_URL` set it needs "
            '`security.auth.selectedType: "gemini-api-key"` in its settings | the router call is a '
            "conversation of one turn; results pair through the echoed ids, each result answering "
            "one call (a lost one is `C.dropped_tool_result`) |",
            "| Mastra | a model string (`openai/gpt-4o`) goes through its own bundled "
            "`@ai-sdk/openai` (Responses) | as the AI SDK's Responses rows |",
            "| Claude Code (`-p`) | a sub-agent runs in the background: the Agent call's result "
            "says it was launched, its answer comes later in a `<task-notification>`; with an SDK "
            "host's switches it asks tool-use summaries and a running sub-agent's progress summary "
            "| the sub-agent is its own conversation under the turn that spawned it, each side "
            "call its own under the turn it was made over |",
            "| Codex (default settings) | Responses over a WebSocket, turns chained by "
            "`previous_response_id`, tools in an `additional_tools` item of namespaces; a "
            "`spawn_agent` sub-agent's task arrives as an `agent_message` | namespaced tools are "
            "offered tools; the sub-agent is linked to the spawning turn |",
            "| opencode 1.18 (`opencode run`) | a native executable (its Bun build) on the AI "
            "SDK's providers: Anthropic posts `$ANTHROPIC_BASE_URL/messages` (base without `/v1`), "
            "OpenAI goes through Responses (`store: false`, the whole history re-sent); a title "
            "generator's call (a small model, no tools) beside the first turn; MCP tools offered "
            "as `<server>_<tool>` (`weather_get_weather`); its config takes `{env:MCP_BASE_URL}` | "
            "the Anthropic listener puts `/v1` back; the title call is a conversation of one turn; "
            "each MCP `tools/call` is linked to the model's call it ran by tool and arguments (no "
            "id is sent to the server), the `weather_` prefix then known as the server's |",
            "",
            "The coding agents (tests/clients/test_agents.py) are native executables (Claude "
            "Code's and opencode's Bun builds,",
            "Codex's Rust binary) that no `--require`/`--import` hook reaches: their bug is "
            "injected by a relay in the agent's",
            "own process tree, between the agent and looptap's listener "
            "(tests/clients/inject/relay.py; over Codex's",
            "WebSocket, message by message). Codex's clean run uses its default settings in a "
            "network namespace where",
            "api.openai.com is the scripted model; its bug run points the default provider's "
            "`openai_base_url` at the relay.",
            "",
            *_mutations(reports),
        ]
    )
    print(text)
    if a.write:
        (REPO / "docs" / "clients.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
