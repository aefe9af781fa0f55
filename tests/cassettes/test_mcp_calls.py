"""MCP tool servers beside the model calls: recognised by protocol on any host, read (tools/list,
tools/call with JSON or SSE replies, JSON-RPC errors), never taken for model turns, and each
tools/call shown with the model's call it ran (the tool-use id the client sends in ``_meta``)."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson

from looptap.cassettes.analysis import analyse
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.support.analysed import cli_run

REPO = Path(__file__).resolve().parents[2]
MCP_URL = "https://mcp.example.com/mcp"


def _anthropic(messages: list, content: list, stop: str) -> Exchange:
    req = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "messages": messages,
        "tools": [
            {
                "name": "mcp__weather__get_weather",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
    }
    resp = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }
    return Exchange(
        "POST",
        "https://api.anthropic.com/v1/messages",
        [("content-type", "application/json")],
        orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.1, orjson.dumps(resp))],
    )


def _mcp(body: dict, reply: dict | None, sse: bool = True, session: str = "s1") -> Exchange:
    headers = [
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", session),
    ]
    if reply is None:
        return Exchange(
            "POST",
            MCP_URL,
            headers,
            orjson.dumps(body),
            status=202,
            response_headers=[],
            response_chunks=[],
        )
    data = orjson.dumps(reply)
    chunks = [(0.05, b"event: message\ndata: " + data + b"\n\n")] if sse else [(0.05, data)]
    ctype = "text/event-stream" if sse else "application/json"
    return Exchange(
        "POST",
        MCP_URL,
        headers,
        orjson.dumps(body),
        status=200,
        response_headers=[("content-type", ctype)],
        response_chunks=chunks,
    )


def run_exchanges(
    bad_result: bool = False,
    server_error: str | None = None,
    sent: dict | None = None,
    *,
    meta: bool = True,
    run: bool = True,
) -> list[Exchange]:
    """initialize, tools/list, a model turn calling the MCP tool, the tools/call (with the model's
    tool-use id in _meta), the next model turn with the result. ``server_error``: the server's
    result is an error with that text; ``sent``: the tool_result block the client sends back;
    ``meta``: the client sends the model's id in _meta; ``run``: the tools/call is made at all."""
    user = {"role": "user", "content": "Weather in Paris?"}
    call = {
        "type": "tool_use",
        "id": "toolu_01P",
        "name": "mcp__weather__get_weather",
        "input": {"city": "Paris"},
    }
    result_text = server_error or "sunny, 21 C"
    block = sent or {
        "type": "tool_result",
        "tool_use_id": "toolu_01P",
        "content": "rainy" if bad_result else result_text,
    }
    exs = [
        _mcp(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.328"},
                },
            },
            {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "weather", "version": "1"},
                },
            },
            sse=False,
        ),
        _mcp({"jsonrpc": "2.0", "method": "notifications/initialized"}, None),
        _mcp(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"tools": [{"name": "get_weather", "inputSchema": {"type": "object"}}]},
            },
        ),
        _anthropic([user], [call], "tool_use"),
        _mcp(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                    **({"_meta": {"claudecode/toolUseId": "toolu_01P"}} if meta else {}),
                },
            },
            {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {
                    "content": [{"type": "text", "text": result_text}],
                    "isError": server_error is not None,
                },
            },
        ),
        _anthropic(
            [user, {"role": "assistant", "content": [call]}, {"role": "user", "content": [block]}],
            [{"type": "text", "text": "It is sunny in Paris."}],
            "end_turn",
        ),
    ]
    return exs if run else exs[:4] + exs[5:]


def test_mcp_calls_are_read_and_never_turns() -> None:
    exs = run_exchanges()
    for i, ex in enumerate(exs):
        ex.seq = i
    run = analyse(exs)
    assert [c.turns for c in run.conversations] == [[3, 5]]
    assert not [f for f in run.findings if f.severity.value != "info"], [
        (f.code, f.seq) for f in run.findings
    ]


def _c(exs: list[Exchange]) -> list[tuple[str, str, int]]:
    for i, ex in enumerate(exs):
        ex.seq = i
    return [
        (f.code, f.severity.value, f.seq)
        for f in analyse(exs).findings
        if f.code.startswith(("C.mcp", "C.tool_result_altered", "C.tool_call_not_executed"))
    ]


def test_the_result_sent_back_is_checked_against_what_the_server_returned() -> None:
    assert _c(run_exchanges()) == []  # sent as returned
    assert _c(run_exchanges(bad_result=True)) == [("C.tool_result_altered", "info", 5)]
    wrapped = {
        "type": "tool_result",
        "tool_use_id": "toolu_01P",
        "content": [{"type": "text", "text": "Result: sunny, 21 C"}],
    }
    assert _c(run_exchanges(sent=wrapped)) == []  # wrapped is not altered
    cut = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "sunny, 21 C"[:6]}
    # too short to call a cut
    assert _c(run_exchanges(sent=cut)) == [("C.tool_result_altered", "info", 5)]


def test_an_mcp_error_sent_back_as_a_success_is_found() -> None:
    err = "City not found: Parus"
    hidden = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "done"}
    assert _c(run_exchanges(server_error=err, sent=hidden)) == [
        ("C.mcp_error_hidden", "warning", 5)
    ]
    flagged = {
        "type": "tool_result",
        "tool_use_id": "toolu_01P",
        "content": "done",
        "is_error": True,
    }
    assert _c(run_exchanges(server_error=err, sent=flagged)) == []
    told = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": f"Error: {err}"}
    assert _c(run_exchanges(server_error=err, sent=told)) == []


def test_show_names_the_models_call_each_tools_call_ran(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in run_exchanges():
            w.append(ex)
    out = cli_run("show", str(path), cwd=REPO)  # (what show says: in process)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "6 round trips, 2 to LLM APIs (anthropic 2), 4 to MCP tool servers" in text, text
    assert "#2  mcp tools/list  200" in text and "tools: get_weather" in text
    assert "#4  mcp tools/call  200" in text and 'tool: get_weather({"city":"Paris"})' in text
    assert (
        "runs the model's call id=toolu_01P from #3 c1/turn 0" in text
        and "result: sunny, 21 C" in text
    )
    js = cli_run("show", "--json", str(path), cwd=REPO)  # (what show says: in process)
    views = [orjson.loads(line) for line in js.stdout.splitlines() if line.startswith("{")]
    mcp = [v["mcp"] for v in views if v["family"] == "mcp"]
    assert [m["method"] for m in mcp] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ]
    assert (
        mcp[3]["tool_use_id"] == "toolu_01P"
        and mcp[3]["result"] == "sunny, 21 C"
        and mcp[3]["is_error"] is False
    )


def test_a_json_rpc_error_is_shown() -> None:
    from looptap.cassettes.parsing import parse_exchange
    from looptap.cassettes.views import summary_lines
    from looptap.cassettes.views.schema import roundtrip_json

    ex = _mcp(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "nope", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "Unknown tool: nope"}},
        sse=False,
    )
    ex.seq = 0
    v = roundtrip_json(parse_exchange(ex), ex)
    assert (
        v["family"] == "mcp"
        and v["operation"] == "mcp tools/call"
        and v["mcp"]["error"] == {"code": -32602, "message": "Unknown tool: nope"}
    )
    lines = list(summary_lines([v]))
    assert any("JSON-RPC error -32602: Unknown tool: nope" in ln for ln in lines), lines


def test_a_call_without_the_models_id_is_linked_by_tool_and_arguments() -> None:
    exs = run_exchanges(meta=False)
    for i, ex in enumerate(exs):
        ex.seq = i
    link = analyse(exs).mcp_calls[4]
    assert (link.call_id, link.linked_by, link.model_seq, link.conversation, link.turn) == (
        "toolu_01P",
        "name_arguments",
        3,
        "c1",
        0,
    )
    # the checks read the linked result as they read one linked by id
    err = "City not found: Parus"
    hidden = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "done"}
    assert _c(run_exchanges(server_error=err, sent=hidden, meta=False)) == [
        ("C.mcp_error_hidden", "warning", 5)
    ]
    assert _c(run_exchanges(bad_result=True, meta=False)) == [("C.tool_result_altered", "info", 5)]
    # other arguments than the model asked for: not that call
    other = run_exchanges(meta=False)
    other[4] = _mcp(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_weather", "arguments": {"city": "Rome"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"content": [{"type": "text", "text": "sunny, 21 C"}]},
        },
    )
    for i, ex in enumerate(other):
        ex.seq = i
    assert analyse(other).mcp_calls[4].call_id is None


def _twin_agents() -> list[Exchange]:
    """Two agents started together (other questions), each calling get_weather(Paris) under its own
    id; the client sends no id to the server, so each tools/call fits both awaiting calls."""
    exs = run_exchanges(meta=False)
    a_user = {"role": "user", "content": "Weather in Paris?"}
    b_user = {"role": "user", "content": "Should I take an umbrella in Paris?"}
    call_a = {
        "type": "tool_use",
        "id": "toolu_01P",
        "name": "mcp__weather__get_weather",
        "input": {"city": "Paris"},
    }
    call_b = {
        "type": "tool_use",
        "id": "toolu_02Q",
        "name": "mcp__weather__get_weather",
        "input": {"city": "Paris"},
    }
    run_call = exs[4]

    def back(user: dict, call: dict, text: str) -> Exchange:
        res = {"type": "tool_result", "tool_use_id": call["id"], "content": "sunny, 21 C"}
        return _anthropic(
            [user, {"role": "assistant", "content": [call]}, {"role": "user", "content": [res]}],
            [{"type": "text", "text": text}],
            "end_turn",
        )

    return [
        *exs[:3],
        _anthropic([a_user], [call_a], "tool_use"),
        _anthropic([b_user], [call_b], "tool_use"),
        run_call,
        copy.deepcopy(run_call),
        back(a_user, call_a, "Sunny."),
        back(b_user, call_b, "No umbrella."),
    ]


def test_two_equal_awaiting_calls_are_not_guessed() -> None:
    exs = _twin_agents()
    for i, ex in enumerate(exs):
        ex.seq = i
    run = analyse(exs)
    assert len(run.conversations) == 2
    assert [(c.call_id, c.candidates) for c in run.mcp_calls.values()] == [(None, 2), (None, 2)]
    assert not [f for f in run.findings if f.severity.value != "info"], [
        (f.code, f.seq) for f in run.findings
    ]


def test_a_result_for_a_call_no_server_ran_is_found() -> None:
    made_up = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "sunny, 21 C"}
    assert _c(run_exchanges(sent=made_up, run=False)) == [
        ("C.tool_call_not_executed", "warning", 4)
    ]
    assert _c(run_exchanges(sent=made_up, meta=False, run=False)) == [
        ("C.tool_call_not_executed", "warning", 4)
    ]
    # clean twins: the call ran (linked by id, or only by tool and arguments), or the client said it
    # did not run
    assert _c(run_exchanges(sent=made_up)) == []
    assert _c(run_exchanges(sent=made_up, meta=False)) == []
    declined = {
        "type": "tool_result",
        "tool_use_id": "toolu_01P",
        "content": "The user denied this tool call.",
        "is_error": True,
    }
    assert _c(run_exchanges(sent=declined, run=False)) == []
    # a tool no recorded MCP server listed (the client's own): nothing to say
    local = run_exchanges(sent=made_up, run=False)
    local[2] = _mcp(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"tools": [{"name": "get_time", "inputSchema": {"type": "object"}}]},
        },
    )
    assert _c(local) == []
    # the twin agents' calls both ran (unlinked): not "never run"
    assert _c(_twin_agents()) == []


def test_show_says_how_a_call_was_linked(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in run_exchanges(meta=False):
            w.append(ex)
    out = cli_run("show", str(path), cwd=REPO)  # (what show says: in process)
    assert (
        "runs the model's call id=toolu_01P from #3 c1/turn 0 (by tool and arguments)" in out.stdout
    ), out.stdout
    assert (
        '    tool call: mcp__weather__get_weather({"city":"Paris"}) id=toolu_01P\n      ran by an '
        "MCP tool server at #4 (get_weather)" in out.stdout
    )
    js = cli_run("show", "--json", str(path), cwd=REPO)  # (what show says: in process)
    views = [orjson.loads(line) for line in js.stdout.splitlines() if line.startswith("{")]
    linked = [
        v["mcp"].get("linked")
        for v in views
        if v["family"] == "mcp" and v["mcp"]["method"] == "tools/call"
    ]
    assert linked == [
        {
            "call_id": "toolu_01P",
            "by": "name_arguments",
            "model_seq": 3,
            "conversation": "c1",
            "turn": 0,
            "candidates": 0,
        }
    ]
    assert views[3]["tool_calls"][0]["mcp"] == {
        "seq": 4,
        "tool": "get_weather",
        "by": "name_arguments",
    }
    assert "mcp" not in views[5]["tool_calls"] if views[5]["tool_calls"] else True


def test_a_server_tool_is_found_behind_any_client_prefix() -> None:
    from looptap.cassettes.analysis import McpLinker

    linker = McpLinker()
    linker.side_call(0, {"method": "tools/list", "tools": ["get_weather", "get__time", "time"]})
    assert linker.server_tool("get_weather") == "get_weather"
    assert linker.server_tool("mcp__weather__get_weather") == "get_weather"
    assert linker.server_tool("weather__get_weather") == "get_weather"
    assert linker.server_tool("mcp__clock__get__time") == "get__time"  # the longest listed name
    assert linker.server_tool("mcp__weather__forecast") is None
    assert linker.server_tool("weather__") is None
    assert linker.server_tool(None) is None


def test_a_call_written_before_the_answer_that_made_it_is_still_linked() -> None:
    """Claude Code runs a tool as soon as its call has streamed: the tools/call can end, and be
    written, before the model's answer does (the CI run of stop 49 recorded exactly that). The
    link is the same whichever was written first, by id or by tool and arguments."""
    for meta in (True, False):
        exs = run_exchanges(meta=meta)
        for i, ex in enumerate(exs):
            ex.seq = i
        # seq order kept (3: the model's call, 4: the tools/call), file order swapped
        exs[3], exs[4] = exs[4], exs[3]
        run = analyse(exs)
        link = run.mcp_calls[4]
        by = "id" if meta else "name_arguments"
        assert (link.call_id, link.linked_by, link.model_seq, link.conversation, link.turn) == (
            "toolu_01P",
            by,
            3,
            "c1",
            0,
        ), meta
        assert not [f for f in run.findings if f.code.startswith("C.tool_call_not_executed")], meta
        # the result sent back is still checked against what the server returned
        bad = run_exchanges(bad_result=True, meta=meta)
        for i, ex in enumerate(bad):
            ex.seq = i
        bad[3], bad[4] = bad[4], bad[3]
        assert [
            (f.code, f.seq) for f in analyse(bad).findings if f.code == "C.tool_result_altered"
        ] == [("C.tool_result_altered", 5)], meta


def _renamed(exs: list[Exchange], names: dict[bytes, bytes]) -> list[Exchange]:
    """The same run with tool names changed on the wire (longest first)."""
    for ex in exs:
        for old, new in names.items():
            ex.request_body = ex.request_body.replace(old, new)
            ex.response_chunks = [(t, data.replace(old, new)) for t, data in ex.response_chunks]
    return exs


# opencode 1.18: <server>_<tool>, no id sent to the server
OPENCODE = {b"mcp__weather__get_weather": b"weather_get_weather"}


def test_a_server_tool_behind_a_one_underscore_prefix_is_linked_when_a_call_runs_it() -> None:
    exs = _renamed(run_exchanges(meta=False), OPENCODE)
    for i, ex in enumerate(exs):
        ex.seq = i
    link = analyse(exs).mcp_calls[4]
    assert (link.call_id, link.linked_by, link.model_seq, link.conversation, link.turn) == (
        "toolu_01P",
        "name_arguments",
        3,
        "c1",
        0,
    )
    # and the result sent back is checked against what the server returned
    hidden = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "done"}
    assert _c(
        _renamed(
            run_exchanges(server_error="City not found: Parus", sent=hidden, meta=False), OPENCODE
        )
    ) == [("C.mcp_error_hidden", "warning", 5)]
    assert _c(_renamed(run_exchanges(bad_result=True, meta=False), OPENCODE)) == [
        ("C.tool_result_altered", "info", 5)
    ]
    assert _c(_renamed(run_exchanges(meta=False), OPENCODE)) == []


def test_a_one_underscore_prefix_is_a_servers_only_once_a_call_of_it_ran() -> None:
    made_up = {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "sunny, 21 C"}
    # the client's own read_file beside a server that lists "file": no tools/call, nothing said
    local = _renamed(
        run_exchanges(sent=made_up, meta=False, run=False),
        {b"mcp__weather__get_weather": b"read_file", b"get_weather": b"file"},
    )
    assert _c(local) == []
    # the same shape as opencode's call, never run: no call of that prefix ran yet, so it cannot be
    # told from a tool of the client's
    assert _c(_renamed(run_exchanges(sent=made_up, meta=False, run=False), OPENCODE)) == []
    # once a call of the prefix ran, a later call of it that no tools/call ran is said
    exs = _renamed(run_exchanges(meta=False), OPENCODE)
    user = {"role": "user", "content": "Weather in Paris?"}
    first = {
        "type": "tool_use",
        "id": "toolu_01P",
        "name": "weather_get_weather",
        "input": {"city": "Paris"},
    }
    second = {
        "type": "tool_use",
        "id": "toolu_02T",
        "name": "weather_get_weather",
        "input": {"city": "Tokyo"},
    }
    history = [
        user,
        {"role": "assistant", "content": [first]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01P", "content": "sunny, 21 C"}
            ],
        },
    ]
    exs[5] = _anthropic(history, [second], "tool_use")
    exs.append(
        _anthropic(
            [
                *history,
                {"role": "assistant", "content": [second]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_02T", "content": "rainy"}
                    ],
                },
            ],
            [{"type": "text", "text": "Sunny in Paris, rainy in Tokyo."}],
            "end_turn",
        )
    )
    assert _c(exs) == [("C.tool_call_not_executed", "warning", 6)]
