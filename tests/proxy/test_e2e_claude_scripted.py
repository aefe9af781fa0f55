"""Claude Code (npm) against a scripted upstream, recorded by the real ``looptap run``:

* it debugs a recorded run through ``looptap mcp`` (issue 19): the scripted model calls looptap's
  tools, reads their answers, and answers "why did the run fail?" from them; looptap records the
  tool calls and results;
* it delegates to a sub-agent with its Agent (Task) tool (issue 14): looptap threads the sub-agent's
  calls as their own conversation under the turn that spawned it, and the main loop continues;
* with its side calls switched on, each side call is its own conversation too, under the turn it
  was made over (issue 14's must-show), and no warning-or-worse finding is raised.

The scripted model (tests/support/scripted.py) decides from each request's content, so the real
client runs its real loop: MCP start-up, permission checks, tool results, sub-agent prompts.

What Claude Code 2.1.328 sends in ``-p`` mode (logged from its requests; every request is
``POST /v1/messages?beta=true``, streamed, under a system prompt that opens with the
``x-anthropic-billing-header: cc_version=2.1.328.<hash>; cc_entrypoint=sdk-cli;`` line and "You are a
Claude agent, built on Anthropic's Claude Agent SDK."):

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
import shlex
import sys
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import pytest

from cassettes.interop.run import open_run
from tests.interop.helpers import write_cassette
from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, explain, looptap_run, need, run_env
from tests.support.harness import outputs
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream, claude_code_side_call

pytestmark = [needs_recorder]

MODEL = "claude-sonnet-4-5"


def _claude(
    tmp_path: Path, secret: str, up: ScriptedUpstream, confdir: Path, prompt: str, *args: str, env: dict[str, str] | None = None
) -> tuple[Any, Path]:
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    # Claude Code connects MCP servers in the background by default, so on a loaded machine its
    # first request can leave before the server's tools are there: wait for them (up to 60 s).
    env = run_env(tmp_path, ANTHROPIC_API_KEY=secret, MCP_CONNECTION_NONBLOCKING="false", MCP_CONNECT_TIMEOUT_MS="60000", **CLAUDE_OFFLINE, **(env or {}))
    cmd = [str(claude), "-p", prompt, "--model", MODEL, "--output-format", "json", "--no-session-persistence", *args]
    return looptap_run(tmp_path, confdir, cmd, env, upstream=up)  # type: ignore[arg-type]


def _last_result(req: ScriptedRequest) -> Any:
    """The JSON of the latest tool result (an MCP tool answers JSON text; 2.1.328 may append a
    ``<system-reminder>`` after it in the same result)."""
    results = req.tool_results()
    return json.JSONDecoder().raw_decode(results[-1].lstrip())[0] if results else None


# ---------------------------------------------------------------------------------------------
# looptap mcp, used by Claude Code to explain a failed run


def test_claude_code_explains_a_failed_run_through_looptap_mcp(tmp_path: Path, confdir: Path, secret: str) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with as_file(files("cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as src:
        write_cassette(Path(src), runs / "agent-run.jsonl")  # the bundled demo: its E finding is the cause
    truth = open_run(runs / "agent-run.jsonl").analysis
    worst = sorted(truth.findings, key=lambda f: ({"error": 0, "warning": 1}.get(f.severity.value, 2), f.seq or 0))[0]
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"looptap": {"type": "stdio", "command": sys.executable, "args": ["-m", "cassettes.cli", "mcp", "--root", str(runs)]}}}))

    def route(req: ScriptedRequest) -> Reply:
        if claude_code_side_call(req):
            return Reply.say("(side call)", what="side")
        if not any(t.startswith("mcp__looptap__") for t in req.tools):
            return Reply.say("(looptap's MCP tools were not offered)", what="main:no-tools")
        done = len(req.tool_results())
        if done == 0:
            return Reply.tool("mcp__looptap__run_summary", {"run": "agent-run.jsonl"}, what="main:summary")
        if done == 1:  # the model reads looptap's answer and asks for the root cause's turn
            root = _last_result(req)["root_causes"][0]
            return Reply.tool("mcp__looptap__turn", {"run": "agent-run.jsonl", "seq": root["seq"]}, what="main:turn")
        turn = _last_result(req)
        f = turn["findings"][0]
        calls = turn["recorded"]["E_emitted"]["tool_calls"]
        named = f" ({calls[0]['name']})" if calls else ""
        return Reply.say(
            f"The run went wrong at #{turn['seq']} ({turn['conversation']}/turn {turn['turn']}), layer {f['layer']}: "
            f"{f['code']}{named}.",
            what="main:answer",
        )

    with ScriptedUpstream(route) as up:
        proc, out = _claude(
            tmp_path, secret, up, confdir, "Why did the run agent-run.jsonl go wrong?",
            "--mcp-config", str(config), "--strict-mcp-config", "--allowedTools", "mcp__looptap",
            env={"ENABLE_TOOL_SEARCH": "false"},  # the MCP tools offered up front, not behind ToolSearch
        )
        log = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain(proc) + "\n--- scripted\n" + log
    answer = outputs(proc)[-1]["result"]
    conv = worst.conversation
    assert answer.startswith(f"The run went wrong at #{worst.seq} ({conv}/turn {worst.turn}), layer {worst.layer}: {worst.code}"), answer
    # looptap recorded Claude Code's calls of its own tools, and their answers
    run = open_run(out)
    calls = [c.name for rt in run.roundtrips if rt.response is not None for c in rt.response.tool_calls]
    assert calls == ["mcp__looptap__run_summary", "mcp__looptap__turn"], log
    last = list(run.roundtrips)[-1]
    assert last.request is not None and last.response is not None
    results = [p.tool_result for m in last.request.messages for p in m.parts if p.tool_result is not None]
    assert len(results) == 2 and "root_causes" in (results[0].content or "") and worst.code in (results[1].content or "")
    assert last.response.text == answer
    assert not [f for f in run.analysis.findings if f.severity.value in ("error", "warning")], [f.code for f in run.analysis.findings]
    assert secret.encode() not in out.read_bytes()


# ---------------------------------------------------------------------------------------------
# A Task sub-agent, threaded under the turn that spawned it, and Claude Code's side calls

TASK = "Count the vowels in the word looptap and report the number."
ANSWER = "The sub-agent counted 3 vowels."
#: What the scripted model answers each side call (the label it asks for).
SIDE_REPLY = {"tool_use_summary": "Launched vowel counter", "agent_summary": "Counting vowels in looptap", "helper": "(side call)"}


def _sub_agent_route(sub_steps: list[dict[str, Any]]) -> Any:
    """The main loop spawns a sub-agent with the Agent tool, says it waits, and answers once the
    sub-agent's result arrives (2.1.328 runs it in the background and notifies the main loop); the
    sub-agent runs ``sub_steps`` (Bash calls' arguments) one per turn, then answers; each side call
    gets its label."""

    def route(req: ScriptedRequest) -> Reply:
        side = claude_code_side_call(req)
        if side:
            return Reply.say(SIDE_REPLY[side], what=f"side:{side}")
        done = len(req.tool_results())
        if "cc_is_subagent=true" in req.system:  # the sub-agent's own loop (it could spawn too)
            if done < len(sub_steps):
                return Reply.tool("Bash", sub_steps[done], what=f"sub:step{done + 1}")
            return Reply.say("There are 3 vowels in looptap.", what="sub")
        if not done:
            return Reply.tool("Agent", {"description": "Count vowels", "prompt": TASK, "subagent_type": "general-purpose"}, what="main:spawn")
        if "<task-notification>" not in req.last_user_text() or "There are 3 vowels" not in req.last_user_text():
            return Reply.say("Waiting for the sub-agent.", what="main:wait")
        return Reply.say(ANSWER, what="main:answer")

    return route


def _labelled(run: Any, up: ScriptedUpstream) -> dict[int, str]:
    """Each recorded round trip's seq → what the route took its request for (by response id)."""
    what = {x.response_id: x.reply.what for x in up.log if x.reply is not None and x.response_id}
    out = {}
    for ex, rt in zip(run.exchanges, run.roundtrips, strict=True):
        if rt.response is not None and rt.response.id in what:
            out[int(ex.seq)] = what[rt.response.id]
    return out


def test_claude_code_sub_agent_is_threaded_under_its_parent(tmp_path: Path, confdir: Path, secret: str) -> None:
    with ScriptedUpstream(_sub_agent_route([])) as up:
        proc, out = _claude(tmp_path, secret, up, confdir, "Use a sub-agent to count the vowels in looptap.", "--allowedTools", "Agent")
        log = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain(proc) + "\n--- scripted\n" + log
    assert outputs(proc)[-1]["result"] == ANSWER, log
    whats = [x.reply.what for x in up.log if x.reply is not None]
    assert whats.count("main:spawn") == 1 and whats.count("sub") >= 1 and whats.count("main:answer") == 1, log
    assert not [w for w in whats if w.startswith("side:")], log  # plain `claude -p` makes no side calls
    run = open_run(out)
    a = run.analysis

    def seq_of(pred: Any) -> int:
        (seq,) = [ex.seq for ex, rt in zip(run.exchanges, run.roundtrips, strict=True) if rt.request is not None and pred(rt)]
        return int(seq)  # type: ignore[arg-type]

    def users(rt: Any) -> str:
        return " ".join(p.text or "" for m in rt.request.messages if m.role == "user" for p in m.parts)

    spawn = seq_of(lambda rt: rt.response is not None and [c.name for c in rt.response.tool_calls] == ["Agent"])
    answer = seq_of(lambda rt: rt.response is not None and rt.response.text == ANSWER)
    sub_first = min(
        ex.seq for ex, rt in zip(run.exchanges, run.roundtrips, strict=True)
        if rt.request is not None and TASK in users(rt) and rt.response is not None and rt.response.text.startswith("There are 3")
    )
    convs = [(c.id, c.turns, c.branch, c.parent_seq) for c in a.conversations]
    main = next(c for c in a.conversations if spawn in c.turns)
    sub = next(c for c in a.conversations if sub_first in c.turns)
    assert main is not sub, convs
    assert main.turns[-1] == answer and spawn in main.turns, convs
    assert sub.parent_seq == spawn and sub.branch == "sub_agent", convs
    assert not [f for f in a.findings if f.severity.value in ("error", "warning")], [(f.code, f.message) for f in a.findings]


def test_claude_code_sub_agent_and_side_calls_each_in_their_own_conversation(
    tmp_path: Path, confdir: Path, secret: str
) -> None:
    """Issue 14's must-show: the main loop one conversation, the Task sub-agent its own, linked to
    the turn that spawned it, and each side call its own, linked to the turn it was made over: the
    tool-use summary to the turn whose calls it quotes, the sub-agent's progress summary to the
    sub-agent turn whose Bash call was running. No warning-or-worse finding.

    The progress summary comes 30 s into the sub-agent's run: the sub-agent's second Bash call
    waits (up to 120 s) until the scripted upstream has received it."""
    flag = tmp_path / "summary-received"
    wait = f"import os, time\nfor _ in range(1200):\n    if os.path.exists({str(flag)!r}): break\n    time.sleep(0.1)"
    steps = [
        {"command": "echo looptap", "description": "Print the word"},
        {"command": f"{shlex.quote(sys.executable)} -c {shlex.quote(wait)}", "description": "Wait for the progress summary", "timeout": 180000},
    ]
    inner = _sub_agent_route(steps)

    def route(req: ScriptedRequest) -> Reply:
        reply = inner(req)
        if reply.what == "side:agent_summary":
            flag.touch()
        return reply

    sdk = {"CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES": "1", "CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES": "1"}
    with ScriptedUpstream(route) as up:
        proc, out = _claude(tmp_path, secret, up, confdir, "Use a sub-agent to count the vowels in looptap.", "--allowedTools", "Agent,Bash", env=sdk)
        log = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain(proc) + "\n--- scripted\n" + log
    assert outputs(proc)[-1]["result"] == ANSWER, log
    run = open_run(out)
    a = run.analysis
    what = _labelled(run, up)
    assert sorted(what.values()) == sorted(x.reply.what for x in up.log if x.reply is not None), (what, log)
    seqs = {w: sorted(s for s, v in what.items() if v == w) for w in set(what.values())}
    assert [len(seqs.get(w, [])) for w in ("main:spawn", "main:answer", "sub:step1", "sub:step2", "sub")] == [1, 1, 1, 1, 1], log
    sides = [s for s, v in what.items() if v.startswith("side:")]
    assert seqs.get("side:tool_use_summary") and seqs.get("side:agent_summary") and len(sides) == len(seqs["side:tool_use_summary"]) + len(seqs["side:agent_summary"]), log

    convs = [(c.id, c.turns, c.branch, c.parent_seq, [what.get(t) for t in c.turns]) for c in a.conversations]
    conv_of = {t: c for c in a.conversations for t in c.turns}
    (spawn,) = seqs["main:spawn"]
    main = conv_of[spawn]
    assert main.turns == sorted(s for s, v in what.items() if v.startswith("main:")) and main.parent_seq is None, convs
    sub = conv_of[seqs["sub"][0]]
    assert sub.turns == sorted(s for s, v in what.items() if v.startswith("sub")), convs
    assert (sub.branch, sub.parent_seq) == ("sub_agent", spawn), convs
    (running,) = seqs["sub:step2"]  # the sub-agent turn whose call was running when it was summarised
    for s in sides:
        side = conv_of[s]
        parent = spawn if what[s] == "side:tool_use_summary" else running
        assert side.turns == [s] and (side.branch, side.parent_seq) == ("side_call", parent), (s, what[s], convs)
    assert len(a.conversations) == 2 + len(sides), convs
    assert not [f for f in a.findings if f.severity.value in ("error", "warning")], [(f.code, f.seq, f.message) for f in a.findings]
    assert secret.encode() not in out.read_bytes()


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
"""


def test_openai_agents_handoff_continues_the_conversation(tmp_path: Path, confdir: Path, secret: str) -> None:
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
        proc, out = run_py(tmp_path, confdir, secret, cmd, extra=("--upstream", f"openai={up.url}"), env={"OPENAI_AGENTS_DISABLE_TRACING": "1"})
        log = "\n".join(x.line() for x in up.log)
    assert proc.returncode == 0, explain_py(proc) + "\n--- scripted\n" + log
    assert outputs(proc)[-1] == {"final": "Invoice 42 was paid on 2026-11-02.", "agent": "billing"}, log
    assert [x.reply.what for x in up.log if x.reply] == ["triage:handoff", "billing:lookup", "billing:answer"], log
    run = open_run(out)
    a = run.analysis
    convs = [(c.id, c.turns, c.branch, c.parent_seq) for c in a.conversations]
    # The billing agent's requests carry the whole history (the user's question, the transfer call
    # and its output) under its own instructions: one conversation that changed hands, not three.
    assert len(a.conversations) == 1 and len(a.conversations[0].turns) == 3, convs
    turns = [a.turns[s] for s in a.conversations[0].turns]
    assert [t.c.link for t in turns] == ["start", "extends", "extends"], [t.c.link for t in turns]
    assert not [f for f in a.findings if f.severity.value in ("error", "warning")], [(f.code, f.message) for f in a.findings]
