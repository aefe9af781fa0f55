"""The MCP C findings on real traffic: a small agent (the anthropic SDK for the model, plain HTTP
for its MCP tool server) recorded by the real ``looptap run``: a conversation (and an MCP session)
clean and one with each client bug the findings name, each asking about another city, in one run
recorded once and read by every case (each conversation judged on its own). The model is
scripted (tests/support/scripted.py), the tool server is tests/support/mcp_server.py
(2025-11-25: a session), both behind looptap's reverse listeners.

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

import uuid
from pathlib import Path

import pytest

from looptap.cassettes.analysis import RunAnalysis
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

MCP = os.environ["MCP_BASE_URL"] + "/mcp"

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

client = anthropic.Anthropic(max_retries=0)
for arg in sys.argv[1:]:  # BUG:CITY, a conversation and an MCP session each
    BUG, CITY = arg.split(":")
    session = {"n": 0}
    rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bug-agent", "version": "1"}})
    rpc("notifications/initialized", notify=True)
    listed = rpc("tools/list")["result"]["tools"]
    tools = [{"name": "mcp__weather__" + t["name"], "description": t["description"], "input_schema": t["inputSchema"]} for t in listed]
    messages = [{"role": "user", "content": f"What is the weather in {CITY}?"}]
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
                results.append({"type": "tool_result", "tool_use_id": c.id, "content": f"sunny, 21 C in {CITY}"})
                continue
            if BUG == "declined":
                results.append({"type": "tool_result", "tool_use_id": c.id, "content": "The user declined this tool call.", "is_error": True})
                continue
            got = rpc("tools/call", {"name": name, "arguments": c.input})["result"]
            text = "".join(p.get("text", "") for p in got["content"])
            if BUG == "hide_error":
                results.append({"type": "tool_result", "tool_use_id": c.id, "content": "done"})
            elif BUG == "alter":
                results.append({"type": "tool_result", "tool_use_id": c.id, "content": f"rainy, 9 C in {CITY}"})
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


#: Each case's city: the server answers ``isError`` for the clean one's and the hiding one's.
CITIES = {"clean": "Parus", "hide_error": "Atlantis", "alter": "Lyon", "skip": "Rome",
          "declined": "Oslo"}  # fmt: skip
ERROR_CITIES = frozenset({"Parus", "Atlantis"})


def route(req: ScriptedRequest) -> Reply:
    if not req.tool_results():
        city = req.user_texts()[0].removeprefix("What is the weather in ").removesuffix("?")
        return Reply.tool("mcp__weather__get_weather", {"city": city}, what="call")
    return Reply.say("Done: " + req.tool_results()[-1], what="answer")


def _ran(bug: str) -> bool:
    return bug not in ("skip", "declined")


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory, confdir: Path
) -> tuple[dict[str, tuple[list[str | None], str]], RunAnalysis]:
    """One ``looptap run`` of the agent, a conversation a case in EXPECTED's order: each case's
    MCP methods and its answer, and the run's analysis."""
    pytest.importorskip("anthropic")
    tmp_path = tmp_path_factory.mktemp("mcp-bugs")
    secret = f"sk-looptap-SENTINEL-{uuid.uuid4().hex}"
    with McpServer("2025-11-25", error_cities=ERROR_CITIES) as mcp, ScriptedUpstream(route) as up:
        cmd = [*python_client(tmp_path, AGENT), *(f"{b}:{CITIES[b]}" for b in EXPECTED)]
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
    assert secret.encode() not in out.read_bytes()
    said = [o["text"] for o in outputs(proc)]
    assert len(said) == len(EXPECTED), said
    per: dict[str, tuple[list[str | None], str]] = {}
    for bug, text in zip(EXPECTED, said, strict=True):
        n = 4 if _ran(bug) else 3  # (each case its own session: initialize ... tools/call)
        per[bug], methods = (methods[:n], text), methods[n:]
    assert methods == [], methods
    a = open_run(out).analysis
    assert len(a.conversations) == len(EXPECTED)
    # (every finding is one conversation's: none of the run's left out of a case)
    assert {f.conversation for f in a.findings} <= {c.id for c in a.conversations}
    return per, a


@pytest.mark.slow(
    reason=(
        "one anthropic-SDK agent and MCP server recorded by looptap run; each MCP client "
        "finding and the link by tool and arguments in process by default: "
        "tests/cassettes/test_mcp_calls.py"
    )
)
@pytest.mark.parametrize("bug", list(EXPECTED))
def test_each_mcp_client_bug_is_found_on_its_turn_and_its_clean_twin_is_not(
    recorded: tuple[dict[str, tuple[list[str | None], str]], RunAnalysis], bug: str
) -> None:
    per, a = recorded
    methods, text = per[bug]
    assert text.startswith("Done: ")
    ran = _ran(bug)
    assert methods == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        *(["tools/call"] if ran else []),
    ], methods
    (conv,) = [c for c in a.conversations if c.title and CITIES[bug] in c.title]
    assert len(conv.turns) == 2
    answer_seq = conv.turns[1]
    links = [link for link in a.mcp_calls.values() if link.model_seq in conv.turns]
    if ran:  # linked by tool and arguments: this agent sends no id to the server
        (link,) = links
        assert (link.linked_by, link.model_seq) == ("name_arguments", conv.turns[0])
    else:
        assert links == []
    findings = [f for f in a.findings if f.conversation == conv.id]
    mine = [
        (f.code, f.severity.value)
        for f in findings
        if f.code.startswith(("C.mcp", "C.tool_result_altered", "C.tool_call_not"))
    ]
    assert mine == EXPECTED[bug], [(f.code, f.message) for f in findings]
    assert all(f.seq == answer_seq for f in findings if f.code in dict(EXPECTED[bug]))
    loud = [
        (f.code, f.seq)
        for f in findings
        if f.severity.value != "info" and f.code not in dict(EXPECTED[bug])
    ]
    assert loud == [], [(f.code, f.message) for f in findings]
