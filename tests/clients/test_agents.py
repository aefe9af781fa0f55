"""The coding agents as rows of the client matrix: Claude Code, Codex, Gemini CLI and opencode, each
run once per mode (a module-scoped run shared by the tests that judge it), through the real
``looptap run`` against scripted models.

* **Claude Code, clean**: one ``claude -p`` run with a remote MCP tool server (through looptap's
  ``--upstream mcp=`` listener), a background sub-agent (its Agent tool) that runs two Bash calls,
  and both kinds of side call an SDK host switches on (tool-use summaries; the sub-agent's progress
  summary, which comes 30 s into the sub-agent's run: its second Bash call waits until the scripted
  model has received it). looptap must find no warning or error, thread the main loop, the
  sub-agent (under the turn that spawned it) and each side call (under the turn it was made over),
  and link the MCP ``tools/call`` to the model's call;
* **Codex, clean**: Codex 0.169 on its default settings (the built-in provider, Responses over a
  WebSocket to wss://api.openai.com through ``HTTPS_PROXY``, in a network namespace where that
  host is ours: tests/proxy/codex_default_ns.py), the model calling ``spawn_agent`` then
  ``wait_agent`` then answering: the sub-agent linked to the spawning turn, no warning or error;
* **opencode, clean**: ``opencode run`` on Anthropic and on OpenAI Responses, a remote MCP weather
  tool in its config, nothing else configured: its providers (the AI SDK's) read the base URLs
  ``looptap run`` exports. Its title generator's call is a conversation of one turn beside the
  main loop's three; no warning or error;
* **bug runs**: the agents are native executables (Claude Code's and opencode's Bun builds, Codex's
  Rust binary), which neither ``--require``/``--import`` nor ``PYTHONPATH`` reaches, so the bug is
  injected by a relay in the agent's own process tree (tests/clients/inject/relay.py) between the
  agent and looptap's listener: looptap records what an agent with that bug sends. Claude Code drops
  a tool result (the scripted model answers the API's 400); Codex, on its default provider pointed
  at the relay (``openai_base_url``), sends the ``spawn_agent`` result under a wrong id over its
  WebSocket; opencode sends a result under a wrong id (Anthropic) or drops one (Responses), and
  the scripted model answers the API's 400. looptap must name the bug (layer C) at the round trip
  that carries it, first.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from tests.clients.clients import AGENTS, BUG_CAUSES, Client
from tests.clients.test_matrix import INJECT, _keep, _report
from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, explain, looptap_run, need, run_env
from tests.support.harness import outputs
from tests.support.recorder import needs_recorder
from tests.support.scripted import (
    Call,
    Reply,
    ScriptedRequest,
    ScriptedUpstream,
    claude_code_side_call,
)

pytestmark = [needs_recorder]

CLAUDE, CODEX, GEMINI_CLI, *OPENCODE = AGENTS
#: Each agent's bug run: nightly (2-10 s of CPU each); its recording is judged as here on every run
#: by the core (tests/cassettes/analysis/test_bugs_recorded.py), each agent's clean run stays live
#: by default, and the injector runs live by default in test_matrix.py (session 55, h105m).
AGENT_BUG_NIGHTLY = pytest.mark.slow(
    reason="the agent's second run (its clean run is live by default); the recording of its bug "
    "run is judged by tests/cassettes/analysis/test_bugs_recorded.py"
)
MODEL = "claude-sonnet-4-5"
MCP_TOOL = "mcp__weather__get_weather"
TASK = "Count the vowels in the word looptap and report the number."
ANSWER = "Paris is sunny, 21 C, and the sub-agent counted 3 vowels."
SIDE_REPLY = {
    "tool_use_summary": "Looked up the weather",
    "agent_summary": "Counting vowels in looptap",
    "helper": "(side call)",
}


def _claude_route(flag: Path) -> Any:
    """The main loop calls the MCP weather tool, then spawns a sub-agent, says it waits, and answers
    once the sub-agent's result arrives; the sub-agent runs two Bash calls (the second waits for
    ``flag``, touched when the progress summary arrives), then answers."""
    steps = [
        {"command": "echo looptap", "description": "Print the word"},
        {"command": f"{shlex.quote(sys.executable)} -c {shlex.quote(_WAIT.format(flag=str(flag)))}",
         "description": "Wait for the progress summary", "timeout": 180000},
    ]

    def route(req: ScriptedRequest) -> Reply:
        side = claude_code_side_call(req)
        if side:
            if side == "agent_summary":
                flag.touch()
            return Reply.say(SIDE_REPLY[side], what=f"side:{side}")
        done = len(req.tool_results())
        if "cc_is_subagent=true" in req.system:
            if done < len(steps):
                return Reply.tool("Bash", steps[done], what=f"sub:step{done + 1}")
            return Reply.say("There are 3 vowels in looptap.", what="sub")
        if done == 0:
            return Reply.tool(MCP_TOOL, {"city": "Paris"}, what="main:mcp")
        if done == 1:
            return Reply.tool(
                "Agent",
                {"description": "Count vowels", "prompt": TASK, "subagent_type": "general-purpose"},
                what="main:spawn",
            )
        if (
            "<task-notification>" not in req.last_user_text()
            or "There are 3 vowels" not in req.last_user_text()
        ):
            return Reply.say("Waiting for the sub-agent.", what="main:wait")
        return Reply.say(ANSWER, what="main:answer")

    return route


_WAIT = (
    "import os, time\nfor _ in range(1200):\n    if os.path.exists({flag!r}): "
    "break\n    time.sleep(0.1)"
)


def claude_run(tmp_path: Path, confdir: Path, bug: str | None) -> dict[str, Any]:
    from tests.support.mcp_server import McpServer

    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    secret = f"sk-ant-matrix-{tmp_path.name}"
    script = tmp_path / "claude.sh"
    relay = f'"{sys.executable}" "{INJECT / "relay.py"}" -- ' if bug else ""
    script.write_text(
        "#!/bin/sh\nset -e\n"
        'printf \'{"mcpServers": {"weather": {"type": "http", "url": "%s/mcp"}}}\' '
        f'"$MCP_BASE_URL" > "{tmp_path}/mcp.json"\nexec {relay}"{claude}" -p "What is the weather '
        f'in Paris? Then use a sub-agent to count the vowels in looptap." --model {MODEL} '
        f'--output-format json --no-session-persistence --mcp-config "{tmp_path}/mcp.json" '
        '--strict-mcp-config '
        "--allowedTools mcp__weather,Agent,Bash\n"
    )
    script.chmod(0o755)
    env = run_env(
        tmp_path,
        ANTHROPIC_API_KEY=secret,
        MCP_CONNECTION_NONBLOCKING="false",
        MCP_CONNECT_TIMEOUT_MS="60000",
        ENABLE_TOOL_SEARCH="false",
        CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES="1",
        CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES="1",
        **CLAUDE_OFFLINE,
    )
    if bug:
        env["LOOPTAP_MATRIX_BUG"] = bug
    with (
        McpServer("2025-11-25") as mcp,
        ScriptedUpstream(_claude_route(tmp_path / "summary-received"), validate=True) as up,
    ):
        proc, out = looptap_run(tmp_path, confdir, [str(script)], env, upstream=up,  # type: ignore[arg-type]
                                extra=("--upstream", f"mcp={mcp.url}"))
        log = "\n".join(x.line() for x in up.log)
        what = {
            x.response_id: x.reply.what for x in up.log if x.reply is not None and x.response_id
        }
    assert out.exists(), explain(proc) + "\n--- scripted\n" + log
    assert secret.encode() not in out.read_bytes()
    return {
        "proc": proc,
        "out": out,
        "log": log,
        "what": what,
        "why": explain(proc) + "\n--- scripted\n" + log,
    }


def gemini_router(req: ScriptedRequest) -> Reply | None:
    """The answer to Gemini CLI's model router (its small model asked for a JSON complexity score),
    or ``None`` for another call. Answered in words, the router's call fails to parse and Gemini CLI
    (0.61.0) asks again, backing off: about 70 s of waiting a run."""
    if "complexity_score" not in json.dumps(req.body.get("generationConfig") or {}):
        return None
    said = {"complexity_reasoning": "a simple lookup", "complexity_score": 5}
    return Reply.say(json.dumps(said), what="router")


def _weather_route(req: ScriptedRequest) -> Reply:
    """Gemini CLI and opencode: the main loop calls the MCP weather tool (whatever prefix the agent
    gives its name) for Paris and Tokyo at once, then Berlin, then answers; a call offered no such
    tool (opencode's title generator) is a side call. Gemini CLI's model router asks a small model
    for a JSON complexity score."""
    if (routed := gemini_router(req)) is not None:
        return routed
    tool = next((t for t in req.tools if t.endswith("get_weather")), None)
    done = len(req.tool_results())
    if tool is None:
        return Reply.say("(side call)", what="side")
    if done == 0:
        return Reply(
            calls=(Call(tool, {"city": "Paris"}), Call(tool, {"city": "Tokyo"})),
            what="main:parallel",
        )
    if done < 3:
        return Reply.tool(tool, {"city": "Berlin"}, what="main:one")
    return Reply.say(WEATHER_ANSWER, what="main:answer")


WEATHER_ANSWER = "FORECAST: Paris sunny, Tokyo rainy, Berlin cloudy."


def _gemini_cli(tmp_path: Path, confdir: Path, bug: str | None) -> dict[str, Any]:
    """``gemini -p`` with the weather MCP server in its settings (trusted: headless runs ask no
    one) and the auth type its headless mode needs beside a base URL (docs/recorder.md)."""
    from tests.support.mcp_server import McpServer

    gemini = need("@google/gemini-cli", bin_name="gemini")
    env = run_env(
        tmp_path, GEMINI_API_KEY=f"AIza-matrix-{tmp_path.name}", GEMINI_CLI_TRUST_WORKSPACE="true"
    )
    if bug:
        env.update(
            LOOPTAP_MATRIX_BUG=bug, NODE_OPTIONS=f"--import={(INJECT / 'inject.mjs').as_uri()}"
        )
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "gemini.sh"
    # the MCP server through looptap's listener (MCP_BASE_URL), as Claude Code's above
    script.write_text(
        "#!/bin/sh\nset -e\n"
        'printf \'{"security": {"auth": {"selectedType": "gemini-api-key"}}, '
        '"mcpServers": {"weather": {"httpUrl": "%s/mcp", "trust": true}}}\' "$MCP_BASE_URL" > '
        f'"{settings}"\n'
        f'exec "{gemini}" -p "What is the weather in Paris, Tokyo and Berlin?"\n'
    )
    script.chmod(0o755)
    with McpServer("2025-06-18") as mcp, ScriptedUpstream(_weather_route, validate=True) as up:
        proc, out = looptap_run(tmp_path, confdir, [str(script)], env, upstream=up,  # type: ignore[arg-type]
                                extra=("--upstream", f"mcp={mcp.url}"))
        log = "\n".join(x.line() for x in up.log)
        what = [x.reply.what for x in up.log if x.reply is not None]
    assert out.exists(), explain(proc) + "\n--- scripted\n" + log
    return {"proc": proc, "out": out, "what": what, "why": explain(proc) + "\n--- scripted\n" + log}


@pytest.fixture(scope="module")
def gemini_clean(tmp_path_factory: pytest.TempPathFactory, confdir: Path) -> dict[str, Any]:
    return _gemini_cli(tmp_path_factory.mktemp("gemini-clean"), confdir, None)


@pytest.fixture(scope="module")
def gemini_bug(tmp_path_factory: pytest.TempPathFactory, confdir: Path) -> dict[str, Any]:
    return _gemini_cli(tmp_path_factory.mktemp("gemini-bug"), confdir, GEMINI_CLI.bug)


def test_gemini_cli_clean_run(gemini_clean: dict[str, Any]) -> None:
    proc, out, what, why = (
        gemini_clean["proc"],
        gemini_clean["out"],
        gemini_clean["what"],
        gemini_clean["why"],
    )
    assert proc.returncode == 0 and WEATHER_ANSWER in proc.stdout, why
    a = open_run(out, whole=True).analysis
    llm = [c for c in a.conversations if c.turns]
    serious = _serious(a)
    turns = tuple(sorted(len(c.turns) for c in llm))
    # the main loop's turns, and each other call (the router's) a conversation of one turn
    expected = tuple(
        sorted(
            [
                sum(w.startswith("main:") for w in what),
                *[1] * sum(not w.startswith("main:") for w in what),
            ]
        )
    )
    _keep(GEMINI_CLI, "clean", out)
    _report(
        GEMINI_CLI,
        "clean",
        conversations=len(llm),
        turns=turns,
        expected_turns=expected,
        serious=[f"{f.code} (turn {f.turn}): {f.message}" for f in serious],
        ok=not serious and turns == expected,
    )
    assert what.count("main:parallel") == 1 and what.count("main:answer") == 1, why
    assert not serious, [(f.code, f.seq, f.message) for f in serious]
    assert turns == expected, ([(c.id, c.turns, c.branch, c.parent_seq) for c in llm], what)


@AGENT_BUG_NIGHTLY
def test_gemini_cli_injected_bug_is_named(gemini_bug: dict[str, Any]) -> None:
    _named(
        GEMINI_CLI,
        gemini_bug["out"],
        gemini_bug["why"],
        lambda ex: any(k.lower() == "x-matrix-injected" for k, _ in ex.request_headers),
    )


#: Nothing but looptap's listeners asked: no update check, and the models catalogue from the
#: snapshot the binary carries (models.dev not fetched). 1.18.33 asked no other host without them
#: either, run here; the switches keep a later version from trying.
OPENCODE_OFFLINE = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    # opencode 1.18 installs @opencode-ai/plugin into its config folder in the background, from
    # the npm registry (about 70 requests): offline, npm fails at once (ENOTCACHED) and opencode
    # goes on ("background dependency install failed"); tests never reach the internet
    "npm_config_offline": "true",
}
OPENCODE_MODEL = {"anthropic": "anthropic/claude-sonnet-4-5", "openai_responses": "openai/gpt-4o"}


def _opencode(c: Client, tmp_path: Path, confdir: Path, bug: str | None) -> dict[str, Any]:
    """``opencode run`` on the row's provider, the weather MCP server in its global config at
    looptap's MCP listener (``{env:MCP_BASE_URL}``, opencode's own substitution). No provider is
    configured: the AI SDK's providers read ``ANTHROPIC_BASE_URL`` (without ``/v1``: the listener
    puts it back) and ``OPENAI_BASE_URL`` as ``looptap run`` exports them. The bug goes through the
    relay, which points those two variables at itself."""
    from tests.support.mcp_server import McpServer

    opencode = need("opencode-ai", bin_name="opencode", node=False)
    secret = f"sk-matrix-{tmp_path.name}"
    env = run_env(tmp_path, ANTHROPIC_API_KEY=secret, OPENAI_API_KEY=secret, **OPENCODE_OFFLINE)
    config = tmp_path / "home" / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps({"mcp": {"weather": {"type": "remote", "url": "{env:MCP_BASE_URL}/mcp"}}})
    )
    cmd = [
        str(opencode),
        "run",
        "-m",
        OPENCODE_MODEL[c.api],
        "What is the weather in Paris, Tokyo and Berlin?",
    ]
    if bug:
        env["LOOPTAP_MATRIX_BUG"] = bug
        cmd = [sys.executable, str(INJECT / "relay.py"), "--", *cmd]
    with McpServer("2025-11-25") as mcp, ScriptedUpstream(_weather_route, validate=True) as up:
        proc, out = looptap_run(tmp_path, confdir, cmd, env, upstream=up,  # type: ignore[arg-type]
                                extra=("--upstream", f"mcp={mcp.url}"))
        log = "\n".join(x.line() for x in up.log)
        what = [x.reply.what for x in up.log if x.reply is not None]
        mcp_calls = [e.rpc_method for e in mcp.log].count("tools/call")
    why = explain(proc) + "\n--- scripted\n" + log
    assert out.exists(), why
    assert secret.encode() not in out.read_bytes()
    return {"proc": proc, "out": out, "what": what, "mcp_calls": mcp_calls, "why": why}


@pytest.mark.parametrize("c", OPENCODE, ids=[c.id for c in OPENCODE])
def test_opencode_clean_run(c: Client, tmp_path: Path, confdir: Path) -> None:
    r = _opencode(c, tmp_path, confdir, None)
    proc, out, what, why = r["proc"], r["out"], r["what"], r["why"]
    assert proc.returncode == 0 and WEATHER_ANSWER in proc.stdout, why
    run = open_run(out, whole=True)
    a = run.analysis
    llm = [conv for conv in a.conversations if conv.turns]
    serious = _serious(a)
    turns = tuple(sorted(len(conv.turns) for conv in llm))
    _keep(c, "clean", out)
    _report(
        c,
        "clean",
        conversations=len(llm),
        turns=turns,
        expected_turns=c.turns,
        serious=[f"{f.code} (turn {f.turn}): {f.message}" for f in serious],
        ok=not serious and turns == c.turns and proc.returncode == 0,
    )
    # the title generator's call, the loop's three turns, each city's tool run on the MCP server
    assert (
        sorted(what) == ["main:answer", "main:one", "main:parallel", "side"] and r["mcp_calls"] == 3
    ), why
    assert not serious, [(f.code, f.seq, f.message) for f in serious]
    assert turns == c.turns, (
        [(conv.id, conv.turns, conv.kind, conv.parent_seq) for conv in llm],
        what,
    )
    # the model and MCP round trips (the tools' HTTP, recorded by default, is not one)
    assert all(e.status in (200, 202, 405) for e in run.exchanges if not e.tool), why
    # each tools/call linked to the model's call it ran (opencode names it weather_get_weather: no
    # id sent, by tool and arguments)
    (main,) = [conv for conv in llm if len(conv.turns) == 3]
    # (opencode's own fetches of the npm registry, were they made, would be tool HTTP listed beside
    # the MCP calls; npm is offline here: OPENCODE_OFFLINE)
    ran = sorted(
        (link.model_seq or -1, link.linked_by) for link in a.mcp_calls.values() if link.via == "mcp"
    )
    # 405: the MCP server's GET stream, which it does not offer
    assert ran == [
        (main.turns[0], "name_arguments"),
        (main.turns[0], "name_arguments"),
        (main.turns[1], "name_arguments"),
    ], ran


@AGENT_BUG_NIGHTLY
@pytest.mark.parametrize("c", OPENCODE, ids=[c.id for c in OPENCODE])
def test_opencode_injected_bug_is_named(c: Client, tmp_path: Path, confdir: Path) -> None:
    r = _opencode(c, tmp_path, confdir, c.bug)
    _named(
        c,
        r["out"],
        r["why"],
        lambda ex: any(k.lower() == "x-matrix-injected" for k, _ in ex.request_headers),
    )


def _codex_bug(tmp_path: Path, confdir: Path, bug: str) -> dict[str, Any]:
    """Codex's default provider (WebSocket transport) with its base URL at the relay, which sends on
    to looptap's OpenAI listener, which sends on to a scripted Responses-over-WebSocket model."""
    pytest.importorskip("websockets")
    from tests.support.ws_upstream import WsResponsesUpstream, spawn_script

    codex = need("@openai/codex", bin_name="codex")
    secret = f"sk-matrix-{tmp_path.name}"
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    wrapper = tmp_path / "codex.sh"
    wrapper.write_text(
        "#!/bin/sh\nset -e\n"
        # the relay has pointed OPENAI_BASE_URL at itself; Codex reads the base URL from its config
        # only
        'printf \'openai_base_url = "%s"\\n\\n[analytics]\\nenabled = '
        'false\\n\\n[features]\\nplugins = false\\n\' "$OPENAI_BASE_URL" > '
        f'"$CODEX_HOME/config.toml"\nexec "{codex}" "$@"\n'
    )
    wrapper.chmod(0o755)
    env = run_env(
        tmp_path, CODEX_HOME=str(codex_home), OPENAI_API_KEY=secret, LOOPTAP_MATRIX_BUG=bug
    )
    cmd = [
        sys.executable,
        str(INJECT / "relay.py"),
        "--",
        str(wrapper),
        "exec",
        "--skip-git-repo-check",
        "What is the weather in Paris?",
    ]
    with WsResponsesUpstream(answer=spawn_script()) as up:
        proc, out = looptap_run(
            tmp_path, confdir, cmd, env, extra=("--upstream", f"openai={up.url}")
        )
        received = [m.get("type") for m in up.received]
    assert out.exists(), explain(proc)
    assert secret.encode() not in out.read_bytes()
    return {"proc": proc, "out": out, "why": explain(proc) + f"\n--- upstream received {received}"}


@pytest.fixture(scope="module")
def claude_clean(tmp_path_factory: pytest.TempPathFactory, confdir: Path) -> dict[str, Any]:
    return claude_run(tmp_path_factory.mktemp("claude-clean"), confdir, None)


@pytest.fixture(scope="module")
def claude_bug(tmp_path_factory: pytest.TempPathFactory, confdir: Path) -> dict[str, Any]:
    return claude_run(tmp_path_factory.mktemp("claude-bug"), confdir, CLAUDE.bug)


@pytest.fixture(scope="module")
def codex_clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.proxy.test_codex_websocket import in_namespace

    tmp = tmp_path_factory.mktemp("codex-clean")
    r = in_namespace(tmp, f"sk-matrix-{tmp.name}", "spawn")
    return {
        "r": r,
        "out": tmp / "run.jsonl",
        "why": json.dumps({k: v for k, v in r.items() if "std" in k}, indent=1),
    }


@pytest.fixture(scope="module")
def codex_bug(tmp_path_factory: pytest.TempPathFactory, confdir: Path) -> dict[str, Any]:
    return _codex_bug(tmp_path_factory.mktemp("codex-bug"), confdir, CODEX.bug)


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


def _serious(a: Any) -> list[Any]:
    return [f for f in a.findings if f.severity.value in ("warning", "error")]


def test_claude_code_clean_run(claude_clean: dict[str, Any]) -> None:
    proc, out, what_by_id, why = (
        claude_clean["proc"],
        claude_clean["out"],
        claude_clean["what"],
        claude_clean["why"],
    )
    run = open_run(out, whole=True)
    a = run.analysis
    llm = [c for c in a.conversations if c.turns]
    serious = _serious(a)
    turns = tuple(sorted(len(c.turns) for c in llm))
    # The right conversations, from the scripted model's own log: main loop, sub-agent, one per side
    # call.
    what = {int(ex.seq): what_by_id[rt.response.id] for ex, rt in run.pairs  # type: ignore[arg-type]
            if rt.response is not None and rt.response.id in what_by_id}
    main_seqs = sorted(s for s, w in what.items() if w.startswith("main:"))
    sub_seqs = sorted(s for s, w in what.items() if w.startswith("sub"))
    sides = sorted(s for s, w in what.items() if w.startswith("side:"))
    expected = tuple(sorted([len(main_seqs), len(sub_seqs), *[1] * len(sides)]))
    _keep(CLAUDE, "clean", out)
    _report(
        CLAUDE,
        "clean",
        conversations=len(llm),
        turns=turns,
        expected_turns=expected,
        serious=[f"{f.code} (turn {f.turn}): {f.message}" for f in serious],
        ok=not serious and turns == expected and proc.returncode == 0,
    )
    assert proc.returncode == 0 and outputs(proc)[-1]["result"] == ANSWER, why
    assert not serious, [(f.code, f.seq, f.message) for f in serious]
    assert {w.split(":")[1] for w in what.values() if w.startswith("side:")} >= {
        "tool_use_summary",
        "agent_summary",
    }, why
    assert (
        sorted(what.values()).count("main:spawn") == 1
        and "main:mcp" in what.values()
        and "sub:step2" in what.values()
    ), why
    conv_of = {t: c for c in a.conversations for t in c.turns}
    convs = [
        (c.id, c.turns, c.branch, c.parent_seq, [what.get(t) for t in c.turns])
        for c in a.conversations
    ]
    (spawn,) = [s for s, w in what.items() if w == "main:spawn"]
    (mcp_turn,) = [s for s, w in what.items() if w == "main:mcp"]
    rts = {int(ex.seq): rt for ex, rt in run.pairs}  # type: ignore[arg-type]
    main = conv_of[spawn]
    assert main.turns == main_seqs and main.parent_seq is None, convs
    sub = conv_of[sub_seqs[0]]
    assert sub.turns == sub_seqs and (sub.branch, sub.parent_seq) == ("sub_agent", spawn), convs
    (running,) = [s for s, w in what.items() if w == "sub:step2"]
    for s in sides:
        side = conv_of[s]
        assert side.turns == [s] and side.branch == "side_call", (s, what[s], convs)
        if what[s] == "side:agent_summary":
            assert side.parent_seq == running, (s, convs)
        else:
            # a tool-use summary hangs under the turn whose calls it quotes: the MCP call's or the
            # spawn's
            quoted = " ".join(p.text or "" for m in rts[s].request.messages for p in m.parts)  # type: ignore[union-attr]
            parent = spawn if "Count vowels" in quoted else mcp_turn
            assert side.parent_seq == parent, (s, quoted[:300], convs)
    assert turns == expected, convs
    # every call paired: the MCP tools/call ran the model's call, every call has its result
    (mcp_seq,) = [ex.seq for ex, rt in run.pairs if rt.operation == "mcp tools/call"]
    link = a.mcp_calls[mcp_seq]
    assert (link.linked_by, link.model_seq, link.result) == (
        "id",
        mcp_turn,
        "sunny, 21 C in Paris",
    ), link
    assert not [
        f
        for f in a.findings
        if f.code
        in ("C.dropped_tool_result", "C.orphan_tool_result", "C.stopped_with_pending_calls")
    ]


@AGENT_BUG_NIGHTLY
def test_claude_code_injected_bug_is_named(claude_bug: dict[str, Any]) -> None:
    _named(
        CLAUDE,
        claude_bug["out"],
        claude_bug["why"],
        lambda ex: any(k.lower() == "x-matrix-injected" for k, _ in ex.request_headers),
    )


def test_codex_clean_run(codex_clean: dict[str, Any]) -> None:
    r, out, why = codex_clean["r"], codex_clean["out"], codex_clean["why"]
    assert r["record_rc"] == 0 and "It is sunny in Paris." in r["record_stdout"], why
    run = open_run(out, whole=True)
    a = run.analysis
    rts = {rt.seq: rt for rt in run.roundtrips}
    llm = [c for c in a.conversations if c.turns]
    serious = _serious(a)
    turns = tuple(sorted(len(c.turns) for c in llm))
    _keep(CODEX, "clean", out)
    _report(
        CODEX,
        "clean",
        conversations=len(llm),
        turns=turns,
        expected_turns=CODEX.turns,
        serious=[f"{f.code} (turn {f.turn}): {f.message}" for f in serious],
        ok=not serious and turns == CODEX.turns,
    )
    assert all(
        ex.url == "https://api.openai.com/v1/responses"
        and any(n.startswith("websocket ") for n in ex.notes)
        for ex in run.exchanges
        if not ex.tool
    )
    main = next(c for c in llm if c.parent_seq is None)
    names = [
        [c.name for c in rts[s].response.tool_calls]
        for s in main.turns
        if rts[s].response is not None
    ]  # type: ignore[union-attr]
    assert names == [["spawn_agent"], ["wait_agent"], []], names
    (sub,) = [c for c in llm if c is not main]
    assert (sub.branch, sub.parent_seq) == ("sub_agent", main.turns[0]), llm
    assert not serious, [(f.code, f.seq, f.message) for f in serious]
    assert turns == CODEX.turns, llm


@AGENT_BUG_NIGHTLY
def test_codex_injected_bug_is_named(codex_bug: dict[str, Any]) -> None:
    def marked(ex: Any) -> bool:
        body = ex.request_json()
        return isinstance(body, dict) and "x-matrix-injected" in (body.get("metadata") or {})

    _named(CODEX, codex_bug["out"], codex_bug["why"], marked)


def _named(c: Client, out: Path, why: str, is_marked: Any) -> None:
    run = open_run(out, whole=True)
    a = run.analysis
    seqs = [int(ex.seq) for ex in run.exchanges if is_marked(ex)]  # type: ignore[arg-type]
    assert len(seqs) == 1, (seqs, why)
    seq = seqs[0]
    turn = a.turns.get(seq)
    roots = [f for f in _serious(a) if not f.details.get("caused_by")]
    first = min((f.seq for f in roots if f.seq is not None), default=None)
    named = [f for f in roots if f.seq == seq and f.layer == "C" and f.code in BUG_CAUSES[c.bug]]
    _keep(c, "bug", out)
    _report(
        c,
        "bug",
        bug=c.bug,
        seq=seq,
        turn=None if turn is None else turn.index,
        roots=[f"{f.code} (seq {f.seq}, turn {f.turn})" for f in roots],
        named=[f.code for f in named],
        ok=bool(named) and first == seq,
    )
    assert turn is not None, (seq, why)
    assert named, (
        [
            f"{f.code} {f.layer} seq={f.seq} turn={f.turn} caused_by={f.details.get('caused_by')}"
            for f in a.findings
        ],
        why,
    )
    assert first == seq, (
        "an earlier root cause than the injected bug",
        [f"{f.code} seq={f.seq}" for f in roots],
    )
