"""Claude Code (npm) against a scripted upstream, recorded by the real ``looptap run``:

* it debugs a recorded run through ``looptap mcp`` (issue 19): the scripted model calls looptap's
  tools, reads their answers, and answers "why did the run fail?" from them; looptap records the
  tool calls and results;
* its sub-agent and side calls (issue 14): the client matrix's Claude Code row
  (tests/clients/test_agents.py) runs them, with what is written below about its wire.

The scripted model (tests/support/scripted.py) decides from each request's content, so the real
client runs its real loop: MCP start-up, permission checks, tool results, sub-agent prompts.

What Claude Code 2.1.328 sends in ``-p`` mode (logged from its requests; every request is
``POST /v1/messages?beta=true``, streamed, under a system prompt that opens with the
``x-anthropic-billing-header: cc_version=2.1.328.<hash>; cc_entrypoint=sdk-cli;`` line and "You are
a Claude agent, built on Anthropic's Claude Agent SDK."):

* the main loop: then "You are an agent working with the user toward their goals…", the built-in
  tools (MCP tools are deferred behind ``ToolSearch`` unless ``ENABLE_TOOL_SEARCH=false``),
  thinking enabled, ``max_tokens`` 32000;
* a sub-agent (Agent tool): ``cc_is_subagent=true;`` in the billing line, then "You are an agent for
  Claude Code, Anthropic's official CLI for Claude…", its own tool set, its prompt as the last text
  of its first user message. It runs in the background: the Agent call's result is "Async agent
  launched successfully…", the main loop answers that turn, and a later main-loop request carries
  the sub-agent's result in a ``<task-notification>`` (2.1.197 ran it in the foreground, and made
  three requests where 2.1.328 makes four). Tool results may end with a ``<system-reminder>``;
* side calls: none with the plain ``-p`` command (with or without
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``). Two environment switches 2.1.328 reads (an SDK
  host's; names found in its binary) turn on two kinds:

  - ``CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES=1``: when a main-loop turn's tools complete, a request
    whose system prompt goes on "Write a short summary label describing what these tool calls
    accomplished…", no tools, thinking disabled, and no history: one user message quoting the
    calls' names, JSON inputs (``{"description":…,"prompt":…}`` for the Agent call) and outputs;
  - ``CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES=1``: 30 s into a background sub-agent's run (then every
    30 s while it runs and has made progress), a fork of the sub-agent's request: its system
    prompt, tools and history, with "Describe your most recent action in 3-5 words…" appended to
    the last message (the one holding the tool results), without the answer whose call is running.

The side calls of the interactive mode (session titles, prompt suggestions, compaction, memory
extraction) were not seen in these ``-p`` runs.
"""

from __future__ import annotations

import json
import sys
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from tests.interop.cassette_files import write_cassette
from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, explain, looptap_run, need, run_env
from tests.support.harness import outputs
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream, claude_code_side_call

pytestmark = [needs_recorder]

MODEL = "claude-sonnet-4-5"


def _claude(
    tmp_path: Path,
    secret: str,
    up: ScriptedUpstream,
    confdir: Path,
    prompt: str,
    *args: str,
    env: dict[str, str] | None = None,
) -> tuple[Any, Path]:
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    # Claude Code connects MCP servers in the background by default, so on a loaded machine its
    # first request can leave before the server's tools are there: wait for them (up to 60 s).
    env = run_env(
        tmp_path,
        ANTHROPIC_API_KEY=secret,
        MCP_CONNECTION_NONBLOCKING="false",
        MCP_CONNECT_TIMEOUT_MS="60000",
        **CLAUDE_OFFLINE,
        **(env or {}),
    )
    cmd = [
        str(claude),
        "-p",
        prompt,
        "--model",
        MODEL,
        "--output-format",
        "json",
        "--no-session-persistence",
        *args,
    ]
    return looptap_run(tmp_path, confdir, cmd, env, upstream=up)  # type: ignore[arg-type]


def _last_result(req: ScriptedRequest) -> Any:
    """The JSON of the latest tool result (an MCP tool answers JSON text; 2.1.328 may append a
    ``<system-reminder>`` after it in the same result)."""
    results = req.tool_results()
    return json.JSONDecoder().raw_decode(results[-1].lstrip())[0] if results else None


# ---------------------------------------------------------------------------------------------
# looptap mcp, used by Claude Code to explain a failed run


def test_claude_code_explains_a_failed_run_through_looptap_mcp(
    tmp_path: Path, confdir: Path, secret: str
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with as_file(files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as src:
        # the bundled demo: its E finding is the cause
        write_cassette(Path(src), runs / "agent-run.jsonl")
    truth = open_run(runs / "agent-run.jsonl").analysis
    worst = sorted(
        truth.findings,
        key=lambda f: ({"error": 0, "warning": 1}.get(f.severity.value, 2), f.seq or 0),
    )[0]
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "looptap": {
                        "type": "stdio",
                        "command": sys.executable,
                        "args": ["-m", "looptap.cassettes.cli", "mcp", "--root", str(runs)],
                    }
                }
            }
        )
    )

    def route(req: ScriptedRequest) -> Reply:
        if claude_code_side_call(req):
            return Reply.say("(side call)", what="side")
        if not any(t.startswith("mcp__looptap__") for t in req.tools):
            return Reply.say("(looptap's MCP tools were not offered)", what="main:no-tools")
        done = len(req.tool_results())
        if done == 0:
            return Reply.tool(
                "mcp__looptap__run_summary", {"run": "agent-run.jsonl"}, what="main:summary"
            )
        if done == 1:  # the model reads looptap's answer and asks for the root cause's turn
            root = _last_result(req)["root_causes"][0]
            return Reply.tool(
                "mcp__looptap__turn",
                {"run": "agent-run.jsonl", "seq": root["seq"]},
                what="main:turn",
            )
        turn = _last_result(req)
        f = turn["findings"][0]
        calls = turn["recorded"]["E_emitted"]["tool_calls"]
        named = f" ({calls[0]['name']})" if calls else ""
        return Reply.say(
            f"The run went wrong at #{turn['seq']} ({turn['conversation']}/turn {turn['turn']}), "
            f"layer {f['layer']}: {f['code']}{named}.",
            what="main:answer",
        )

    with ScriptedUpstream(route) as up:
        proc, out = _claude(
            tmp_path, secret, up, confdir, "Why did the run agent-run.jsonl go wrong?",
            "--mcp-config", str(config), "--strict-mcp-config", "--allowedTools", "mcp__looptap",
            # the MCP tools offered up front, not behind ToolSearch
            env={"ENABLE_TOOL_SEARCH": "false"},
        )
        log = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain(proc) + "\n--- scripted\n" + log
    answer = outputs(proc)[-1]["result"]
    conv = worst.conversation
    assert answer.startswith(
        f"The run went wrong at #{worst.seq} ({conv}/turn "
        f"{worst.turn}), layer {worst.layer}: {worst.code}"
    ), answer
    # looptap recorded Claude Code's calls of its own tools, and their answers
    run = open_run(out)
    calls = [
        c.name for rt in run.roundtrips if rt.response is not None for c in rt.response.tool_calls
    ]
    assert calls == ["mcp__looptap__run_summary", "mcp__looptap__turn"], log
    last = list(run.roundtrips)[-1]
    assert last.request is not None and last.response is not None
    results = [
        p.tool_result for m in last.request.messages for p in m.parts if p.tool_result is not None
    ]
    assert (
        len(results) == 2
        and "root_causes" in (results[0].content or "")
        and worst.code in (results[1].content or "")
    )
    assert last.response.text == answer
    assert not [f for f in run.analysis.findings if f.severity.value in ("error", "warning")], [
        f.code for f in run.analysis.findings
    ]
    assert secret.encode() not in out.read_bytes()


# The Task sub-agent threaded under the turn that spawned it, and each of Claude Code's side calls
# in its own conversation (issue 14's must-show), are checked by the client matrix's Claude Code row
# (tests/clients/test_agents.py), one run with a remote MCP server too.


# ---------------------------------------------------------------------------------------------
# An openai-agents handoff: the second agent takes over the same conversation


HANDOFF_CLIENT = """
import asyncio, json, os, sys
from agents import Agent, Runner, function_tool, set_tracing_disabled

set_tracing_disabled(True)
base = os.environ.get("OPENAI_BASE_URL", "")
if not base.startswith("http://127.0.0.1:"):
    sys.exit(f"OPENAI_BASE_URL is not the recorder's listener: {base!r}")

@function_tool
def lookup_invoice(invoice: str) -> str:
    \"\"\"The state of an invoice.\"\"\"
    return f"invoice {invoice}: paid on 2026-11-02"

billing = Agent(name="billing", instructions="You handle billing questions. Look invoices up.", tools=[lookup_invoice], model="gpt-4o")
triage = Agent(name="triage", instructions="You route the user to the right specialist.", handoffs=[billing], model="gpt-4o")

async def main():
    result = await Runner.run(triage, "Is my invoice 42 paid?")
    print(json.dumps({"final": result.final_output, "agent": result.last_agent.name}), flush=True)
asyncio.run(main())
"""  # noqa: E501


def test_openai_agents_handoff_continues_the_conversation(
    tmp_path: Path, confdir: Path, secret: str
) -> None:
    pytest.importorskip("agents")
    from tests.proxy.test_e2e_frameworks import explain as explain_py
    from tests.proxy.test_e2e_frameworks import looptap_run as run_py
    from tests.proxy.test_e2e_frameworks import python_client

    def route(req: ScriptedRequest) -> Reply:
        if "transfer_to_billing" in req.tools:
            return Reply.tool("transfer_to_billing", {}, what="triage:handoff")
        if not any("invoice 42: paid" in r for r in req.tool_results()):
            return Reply.tool("lookup_invoice", {"invoice": "42"}, what="billing:lookup")
        return Reply.say("Invoice 42 was paid on 2026-11-02.", what="billing:answer")

    with ScriptedUpstream(route) as up:
        cmd = python_client(tmp_path, HANDOFF_CLIENT)
        proc, out = run_py(
            tmp_path,
            confdir,
            secret,
            cmd,
            extra=("--upstream", f"openai={up.url}"),
            env={"OPENAI_AGENTS_DISABLE_TRACING": "1"},
        )
        log = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain_py(proc) + "\n--- scripted\n" + log
    assert outputs(proc)[-1] == {
        "final": "Invoice 42 was paid on 2026-11-02.",
        "agent": "billing",
    }, log
    assert [x.reply.what for x in up.log if x.reply] == [
        "triage:handoff",
        "billing:lookup",
        "billing:answer",
    ], log
    run = open_run(out)
    a = run.analysis
    convs = [(c.id, c.turns, c.branch, c.parent_seq) for c in a.conversations]
    # The billing agent's requests carry the whole history (the user's question, the transfer call
    # and its output) under its own instructions: one conversation that changed hands, not three.
    assert len(a.conversations) == 1 and len(a.conversations[0].turns) == 3, convs
    turns = [a.turns[s] for s in a.conversations[0].turns]
    assert [t.c.link for t in turns] == ["start", "extends", "extends"], [t.c.link for t in turns]
    assert not [f for f in a.findings if f.severity.value in ("error", "warning")], [
        (f.code, f.message) for f in a.findings
    ]
