"""Claude Code (npm) with a remote MCP tool server over streamable HTTP, recorded by the real
``looptap run``, then replayed offline from the cassette: the model from the recording *and* the
MCP server from the recording (issue 18).

The tool server (tests/support/mcp_server.py) speaks either spec revision: 2025-11-25 (stateful:
``initialize``, ``mcp-session-id``, ``notifications/initialized``, ``tools/list``, ``tools/call``)
or 2026-07-28 (stateless ``server/discover`` with the ``mcp-method`` header). Claude Code reaches it
through a reverse listener of looptap's (``--upstream mcp=URL``; the command finds it in
``MCP_BASE_URL``), and the scripted model (tests/support/scripted.py) calls its tool. Each
``tools/call`` carries ``_meta["claudecode/toolUseId"]``: looptap links it to the model's
``tool_use`` in ``show``, ``show --json`` and the inspector.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.reading import open_run
from tests.proxy.test_e2e_node_agents import (
    CLAUDE_OFFLINE,
    REPO,
    explain,
    looptap_run,
    need,
    run_env,
)
from tests.support import progress
from tests.support.harness import outputs
from tests.support.mcp_server import McpServer
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

MODEL = "claude-sonnet-4-5"
TOOL = "mcp__weather__get_weather"
PROMPT = "What is the weather in Paris? Use the weather tool."


def route(req: ScriptedRequest) -> Reply:
    """Claude Code 2.1.328 defers MCP tools: the model first loads the tool with ToolSearch
    (``select:NAME``), then calls it, then answers from its result."""
    if TOOL not in req.tools and "ToolSearch" not in req.tools:
        return Reply.say("(side call)", what="side")
    results = req.tool_results()
    if any("21 C" in r for r in results):
        return Reply.say(
            "The weather tool says: " + results[-1].split("<")[0].strip(), what="main:answer"
        )
    if TOOL in req.tools:
        return Reply.tool(TOOL, {"city": "Paris"}, what="main:call")
    return Reply.tool(
        "ToolSearch", {"query": "select:" + TOOL, "max_results": 1}, what="main:search"
    )


def _claude_cmd(tmp_path: Path, claude: Path, url_expr: str) -> list[str]:
    """Claude Code with the MCP server at ``url_expr`` (a shell word: the config is written when
    the command starts, so it can name the listener looptap run made)."""
    script = tmp_path / "claude-mcp.sh"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        'printf \'{"mcpServers": {"weather": {"type": "http", "url": "%s/mcp"}}}\' '
        f'"{url_expr}" > "{tmp_path}/mcp.json"\nexec "{claude}" -p "{PROMPT}" --model {MODEL} '
        f'--output-format json --no-session-persistence --mcp-config "{tmp_path}/mcp.json" '
        "--strict-mcp-config --allowedTools mcp__weather\n"
    )
    script.chmod(0o755)
    return [str(script)]


def _env(tmp_path: Path, secret: str) -> dict[str, str]:
    return run_env(
        tmp_path,
        ANTHROPIC_API_KEY=secret,
        MCP_CONNECTION_NONBLOCKING="false",
        MCP_CONNECT_TIMEOUT_MS="60000",
        **CLAUDE_OFFLINE,
    )


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_claude_code_with_a_remote_mcp_server_recorded_linked_and_replayed(
    tmp_path: Path, confdir: Path, secret: str, revision: str
) -> None:
    claude = need("@anthropic-ai/claude-code", bin_name="claude", node=False)
    with McpServer(revision) as mcp, ScriptedUpstream(route) as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            _claude_cmd(tmp_path, claude, "$MCP_BASE_URL"),
            _env(tmp_path, secret),
            upstream=up,
            extra=("--upstream", f"mcp={mcp.url}"),
        )  # type: ignore[arg-type]
        log = "\n".join(x.line() for x in up.log)
        mcp_log = [
            (
                x.http_method,
                x.rpc_method,
                x.status,
                x.headers.get("mcp-method"),
                x.headers.get("mcp-protocol-version"),
            )
            for x in mcp.log
        ]
    assert proc.returncode == 0, explain(proc) + "\n--- scripted\n" + log + f"\n--- mcp\n{mcp_log}"
    answer = "The weather tool says: sunny, 21 C in Paris"
    assert outputs(proc)[-1]["result"] == answer, log
    first = (
        ["server/discover", "tools/list"]
        if revision == "2026-07-28"
        else ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    )
    assert [m for _, m, *_ in mcp_log if m] == [*first, "tools/call"], mcp_log
    if revision == "2026-07-28":  # stateless: the method in a header, no session
        assert all(h == m for _, m, _, h, _ in mcp_log), mcp_log

    run = open_run(out)
    rts = list(run.pairs)
    assert [rt.operation for _, rt in rts if rt.family == "mcp" and rt.operation != "mcp"] == [
        f"mcp {m}" for m in [*first, "tools/call"]
    ]
    ((call_seq, call_id),) = [
        (ex.seq, c.id)
        for ex, rt in rts
        if rt.response is not None
        for c in rt.response.tool_calls
        if c.name == TOOL
    ]
    (mcp_seq,) = [ex.seq for ex, rt in rts if rt.operation == "mcp tools/call"]
    a = run.analysis
    link = a.mcp_calls[mcp_seq]
    assert (link.call_id, link.linked_by, link.model_seq, link.tool, link.result) == (
        call_id,
        "id",
        call_seq,
        "get_weather",
        "sunny, 21 C in Paris",
    )
    main = next(c for c in a.conversations if call_seq in c.turns)
    assert len(main.turns) == 3, [(c.id, c.turns) for c in a.conversations]
    turn = main.turns.index(call_seq)
    assert not [f for f in a.findings if f.severity.value != "info"], [
        (f.code, f.message) for f in a.findings
    ]
    assert secret.encode() not in out.read_bytes()

    # show, show --json and the inspector name the model's call each tools/call ran
    show = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert (
        f"runs the model's call id={call_id} from #{call_seq} {main.id}/turn {turn}" in show.stdout
    ), show.stdout
    js = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    views = {v["seq"]: v for v in map(orjson.loads, js.stdout.splitlines())}
    assert views[mcp_seq]["mcp"]["linked"] == {
        "call_id": call_id,
        "by": "id",
        "model_seq": call_seq,
        "conversation": main.id,
        "turn": turn,
        "candidates": 0,
    }
    assert views[mcp_seq]["mcp"]["tool_use_id"] == call_id
    assert f"⇄ MCP server #{mcp_seq} ran get_weather → sunny, 21 C in Paris" in _inspector_pane(
        out, call_seq
    )

    # Offline: the model *and* the MCP server answered from the cassette; nothing else listens.
    from looptap.cassettes.replay.serving.server import ReplayServer

    with ReplayServer(out) as srv:
        env = {**_env(tmp_path, secret), "ANTHROPIC_BASE_URL": srv.url}
        again = progress.run(
            _claude_cmd(tmp_path, claude, srv.url),
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path / "work",
            stdin=subprocess.DEVNULL,
        )
        misses = ["\n".join(m.lines()) for m in srv.misses]
        served = [(ex.method, ex.url.rsplit("/", 1)[-1], ex.status) for ex in srv.served]
    assert again.returncode == 0 and json.loads(again.stdout)["result"] == answer, (
        again.stdout[-2000:],
        again.stderr[-3000:],
        misses,
    )
    assert misses == [], misses
    assert sum(1 for _, last, _ in served if last == "mcp") >= len(first) + 1, served


def _inspector_pane(path: Path, seq: int) -> str:
    """The inspector's E pane on turn ``seq`` (Textual Pilot, headless)."""
    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import TurnList
    from tests.inspector.helpers import loaded, pane_text

    async def look() -> str:
        app = build_app(path)
        async with app.run_test(size=(160, 45)) as pilot:
            await loaded(pilot)
            for _ in range(20):
                if app.query_one(TurnList).selected_seq == seq:
                    break
                await pilot.press("down")
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            return pane_text(app, "#pane-e")

    return asyncio.run(look())
