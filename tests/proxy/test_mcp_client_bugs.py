"""The MCP C findings on real traffic: a small agent (the anthropic SDK for the model, plain HTTP
for its MCP tool server) recorded by the real ``looptap run``, once clean and once with each client
bug the findings name. The model is scripted (tests/support/scripted.py), the tool server is
tests/support/mcp_server.py (2025-11-25: a session), both behind looptap's reverse listeners.

The agent sends no tool-use id to the server (not every client does, unlike Claude Code), so each
``tools/call`` is linked to the model's call by tool name and arguments.

* ``clean``: the server's result is sent back as it came → no finding;
* ``hide_error``: the server answers ``isError`` and the agent sends back "done" →
  C.mcp_error_hidden;
* ``alter``: the agent sends back another text than the server's → C.tool_result_altered (info);
* ``skip``: the agent never calls the server and makes a result up → C.tool_call_not_executed;
* ``declined``: the agent does not call the server and says so with ``is_error`` → no finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from looptap.cassettes.reading import open_run
from tests.proxy.test_e2e_frameworks import explain, looptap_run, python_client
from tests.support.harness import outputs
from tests.support.mcp_server import McpServer
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

pytestmark = [needs_recorder]

AGENT = """
import urllib.request
import anthropic

BUG = sys.argv[1]
MCP = os.environ["MCP_BASE_URL"] + "/mcp"
session = {"n": 0}

def rpc(method, params=None, notify=False):
    session["n"] += 0 if notify else 1
    body = {"jsonrpc": "2.0", "method": method, **({} if notify else {"id": session["n"]}), **({"params": params} if params else {})}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    if "sid" in session:
        headers["mcp-session-id"] = session["sid"]
    req = urllib.request.Request(MCP, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        if r.headers.get("mcp-session-id"):
            session["sid"] = r.headers["mcp-session-id"]
        raw = r.read().decode()
    if notify:
        return None
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        raw = [ln[5:].strip() for ln in raw.splitlines() if ln.startswith("data:")][-1]
    return json.loads(raw)

rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bug-agent", "version": "1"}})
rpc("notifications/initialized", notify=True)
listed = rpc("tools/list")["result"]["tools"]
tools = [{"name": "mcp__weather__" + t["name"], "description": t["description"], "input_schema": t["inputSchema"]} for t in listed]

client = anthropic.Anthropic(max_retries=0)
messages = [{"role": "user", "content": "What is the weather in Parus?"}]
while True:
    resp = client.messages.create(model="claude-sonnet-4-5", max_tokens=512, tools=tools, messages=messages)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in resp.content]})
    calls = [b for b in resp.content if b.type == "tool_use"]
    if not calls:
        out(text=resp.content[0].text)
        break
    results = []
    for c in calls:
        name = c.name.removeprefix("mcp__weather__")
        if BUG == "skip":
            results.append({"type": "tool_result", "tool_use_id": c.id, "content": "sunny, 21 C in Parus"})
            continue
        if BUG == "declined":
            results.append({"type": "tool_result", "tool_use_id": c.id, "content": "The user declined this tool call.", "is_error": True})
            continue
        got = rpc("tools/call", {"name": name, "arguments": c.input})["result"]
        text = "".join(p.get("text", "") for p in got["content"])
        if BUG == "hide_error":
            results.append({"type": "tool_result", "tool_use_id": c.id, "content": "done"})
        elif BUG == "alter":
            results.append({"type": "tool_result", "tool_use_id": c.id, "content": "rainy, 9 C in Parus"})
        else:
            results.append({"type": "tool_result", "tool_use_id": c.id, "content": text, **({"is_error": True} if got.get("isError") else {})})
    messages.append({"role": "user", "content": results})
"""  # noqa: E501

EXPECTED = {
    "clean": [],
    "hide_error": [("C.mcp_error_hidden", "warning")],
    "alter": [("C.tool_result_altered", "info")],
    "skip": [("C.tool_call_not_executed", "warning")],
    "declined": [],
}


def route(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        return Reply.tool("mcp__weather__get_weather", {"city": "Parus"}, what="call")
    return Reply.say("Done: " + req.tool_results()[-1], what="answer")


@pytest.mark.parametrize("bug", list(EXPECTED))
def test_each_mcp_client_bug_is_found_on_its_turn_and_its_clean_twin_is_not(
    tmp_path: Path, confdir: Path, secret: str, bug: str
) -> None:
    pytest.importorskip("anthropic")
    with (
        McpServer(
            "2025-11-25", error_city="Parus" if bug in ("hide_error", "clean") else None
        ) as mcp,
        ScriptedUpstream(route) as up,
    ):
        cmd = [*python_client(tmp_path, AGENT), bug]
        proc, out = looptap_run(
            tmp_path,
            confdir,
            secret,
            cmd,
            extra=("--upstream", f"anthropic={up.url}", "--upstream", f"mcp={mcp.url}"),
            env={"ANTHROPIC_API_KEY": secret},
        )
        methods = mcp.rpc_methods()
    assert proc.returncode == 0, explain(proc)
    assert outputs(proc)[-1]["text"].startswith("Done: ")
    ran = bug not in ("skip", "declined")
    assert methods == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        *(["tools/call"] if ran else []),
    ], methods
    run = open_run(out)
    a = run.analysis
    assert len(a.conversations) == 1 and len(a.conversations[0].turns) == 2
    answer_seq = a.conversations[0].turns[1]
    if ran:  # linked by tool and arguments: this agent sends no id to the server
        (link,) = a.mcp_calls.values()
        assert (link.linked_by, link.model_seq) == ("name_arguments", a.conversations[0].turns[0])
    mine = [
        (f.code, f.severity.value)
        for f in a.findings
        if f.code.startswith(("C.mcp", "C.tool_result_altered", "C.tool_call_not"))
    ]
    assert mine == EXPECTED[bug], [(f.code, f.message) for f in a.findings]
    assert all(f.seq == answer_seq for f in a.findings if f.code in dict(EXPECTED[bug]))
    loud = [
        (f.code, f.seq)
        for f in a.findings
        if f.severity.value != "info" and f.code not in dict(EXPECTED[bug])
    ]
    assert loud == [], [(f.code, f.message) for f in a.findings]
    assert secret.encode() not in out.read_bytes()
