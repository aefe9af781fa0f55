"""The tools' HTTP in the core (issue 84, items 1 and 2): a round trip the recorder marked ``tool``
is kept as such in the cassette (``"tool": true``, an optional field of format version 1), never
read as a model call whatever its body looks like, and linked to the model's tool call it served:
by the arguments its URL, query or body carries, or as the only call awaiting; equal candidates
are left unlinked with their number; a call whose result was sent back is no longer awaited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.analysis import analyse
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import RECORDER_MADE, Exchange
from tests.support.analysed import cli_run

CHAT = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("get_weather", "place_order")
]


def chat(messages: list[Any], calls: list[tuple[str, str, dict[str, Any]]], text: str = "") -> Exchange:  # noqa: E501
    """A Chat Completions round trip whose answer makes ``calls`` ((id, name, arguments))."""
    msg: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": orjson.dumps(a).decode()}}  # noqa: E501
            for i, n, a in calls
        ]
    resp = {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}],  # noqa: E501
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }  # fmt: skip
    return Exchange(
        "POST", CHAT, [("content-type", "application/json")],
        orjson.dumps({"model": "gpt-4o", "messages": messages, "tools": TOOLS}),
        status=200, response_headers=[("content-type", "application/json")],
        response_chunks=[(0.1, orjson.dumps(resp))],
    )  # fmt: skip


def tool(method: str, url: str, status: int | None, got: bytes, sent: bytes = b"", error: str | None = None) -> Exchange:  # noqa: E501
    ex = Exchange(
        method, url, [("content-type", "application/json")], sent, status=status,
        response_headers=[("content-type", "application/json")] if status else [],
        response_chunks=[(0.02, got)] if got else [], tool=True, duration=0.02,
    )  # fmt: skip
    ex.transport_error = error
    return ex


def echoed(calls: list[tuple[str, str, dict[str, Any]]], results: list[str]) -> list[Any]:
    asked = {"role": "user", "content": "Weather in Paris and Tokyo?"}
    made = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": orjson.dumps(a).decode()}} for i, n, a in calls],  # noqa: E501
    }  # fmt: skip
    return [asked, made, *({"role": "tool", "tool_call_id": i, "content": r} for (i, _, _), r in zip(calls, results, strict=True))]  # noqa: E501


PARALLEL = [("call_P", "get_weather", {"city": "Paris"}), ("call_T", "get_weather", {"city": "Tokyo"})]  # noqa: E501


def weather_run(results: tuple[str, str] = ('{"temp":15}', '{"temp":22}')) -> list[Exchange]:
    """Two parallel calls; the tool's HTTP of each (Tokyo's first); the results sent back; then
    an HTTP call nobody awaits."""
    first = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]
    return [
        chat(first, PARALLEL),
        tool("GET", "https://wx.example.com/v1/now?city=Tokyo&units=metric", 200, b'{"temp":22}'),
        tool("GET", "https://wx.example.com/v1/now?city=Paris&units=metric", 200, b'{"temp":15}'),
        chat(echoed(PARALLEL, list(results)), [], "Paris 15 C, Tokyo 22 C."),
        tool("POST", "https://telemetry.example.com/v1/events", 204, b"", b'{"event":"done"}'),
    ]


def _written(tmp_path: Path, exchanges: list[Exchange]) -> Path:
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    return path


def test_the_mark_is_kept_and_old_files_read_as_before(tmp_path: Path) -> None:
    path = _written(tmp_path, weather_run())
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]
    assert [r.get("tool") for r in records] == [None, True, True, None, True]
    assert [ex.tool for ex in read_records(path).exchanges] == [False, True, True, False, True]
    # a record without the field (every file before it) is not a tool's
    old = tmp_path / "old.jsonl"
    lines = path.read_bytes().splitlines()
    old.write_bytes(b"\n".join([lines[0], *(line.replace(b',"tool":true', b"") for line in lines[1:])]) + b"\n")  # noqa: E501
    assert [ex.tool for ex in read_records(old).exchanges] == [False] * 5


def test_parallel_calls_are_linked_by_their_arguments(tmp_path: Path) -> None:
    run = open_run(_written(tmp_path, weather_run()), whole=True)
    assert sorted(run.analysis.turns) == [0, 3]  # the tools' HTTP is never a turn
    calls = run.analysis.mcp_calls
    assert set(calls) == {1, 2, 4} and all(c.via == "http" for c in calls.values())
    tokyo, paris, telemetry = calls[1], calls[2], calls[4]
    assert (tokyo.call_id, tokyo.linked_by, tokyo.tool, tokyo.model_seq, tokyo.turn) == (
        "call_T", "arguments", "get_weather", 0, 0,
    )  # fmt: skip
    assert (paris.call_id, paris.linked_by) == ("call_P", "arguments")
    assert paris.http is not None and paris.http.host == "wx.example.com"
    assert paris.http.path == "/v1/now?city=Paris&units=metric" and paris.http.got == '{"temp":15}'
    # sent after the results went back: no call was awaiting
    assert (telemetry.call_id, telemetry.candidates) == (None, 0)


def test_equal_candidates_are_left_unlinked(tmp_path: Path) -> None:
    same = [("call_1", "get_weather", {"city": "Oslo"}), ("call_2", "get_weather", {"city": "Oslo"})]  # noqa: E501
    first = [{"role": "user", "content": "Oslo twice"}]
    exchanges = [
        chat(first, same),
        tool("GET", "https://wx.example.com/v1/now?city=Oslo", 200, b"{}"),
        # nothing of either call's arguments: two awaiting calls fit equally as well
        tool("GET", "https://wx.example.com/v1/status", 200, b"{}"),
    ]
    calls = analyse(exchanges).mcp_calls
    assert [(c.call_id, c.candidates) for c in calls.values()] == [(None, 2), (None, 2)]


def test_the_only_call_awaiting_takes_a_call_without_its_arguments(tmp_path: Path) -> None:
    one = [("call_1", "place_order", {"item": "umbrella", "quantity": 2})]
    first = [{"role": "user", "content": "Order"}]
    exchanges = [
        chat(first, one),
        tool("GET", "https://shop.example.com/v1/session", 200, b'{"s":1}'),  # none of its args
        tool("POST", "https://shop.example.com/v1/orders", 201, b'{"id":"o-1"}', b'{"sku":"UMBRELLA","n":2}'),  # noqa: E501
    ]
    calls = analyse(exchanges).mcp_calls
    assert [(c.call_id, c.linked_by) for c in calls.values()] == [
        ("call_1", "awaiting"), ("call_1", "arguments"),
    ]  # fmt: skip


def test_a_tool_body_that_looks_like_a_model_call_is_not_a_turn(tmp_path: Path) -> None:
    """A tool that itself calls a model API on a host the recorder did not know: a tool's call."""
    first = [{"role": "user", "content": "Summarise the page"}]
    one = [("call_1", "summarise", {"url": "https://example.com/a"})]
    inner = chat([{"role": "user", "content": "summarise https://example.com/a"}], [], "A page.")
    inner.url, inner.tool = "https://llm.internal.example/v1/chat/completions", True
    run = analyse([chat(first, one), inner])
    assert sorted(run.turns) == [0] and run.mcp_calls[1].call_id == "call_1"


def test_the_html_page_puts_them_under_their_calls(tmp_path: Path) -> None:
    from looptap.cassettes.views.report import report_data

    data = report_data(open_run(_written(tmp_path, weather_run()), whole=True))
    calls = {c["id"]: c for c in data["detail"]["0"]["layers"]["E"]["calls"]}
    (paris,) = calls["call_P"]["http"]
    assert (paris["seq"], paris["method"], paris["host"], paris["status"]) == (
        2, "GET", "wx.example.com", 200,
    )  # fmt: skip
    assert paris["path"] == "/v1/now?city=Paris&units=metric" and paris["got"] == '{"temp":15}'
    assert [h["seq"] for h in calls["call_T"]["http"]] == [1]


def _run_with_paris(paris: list[Exchange], sent_paris: str) -> list[Exchange]:
    """weather_run with Paris's tool HTTP replaced by ``paris`` and its result by ``sent_paris``."""
    first = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]
    return [
        chat(first, PARALLEL),
        tool("GET", "https://wx.example.com/v1/now?city=Tokyo&units=metric", 200, b'{"temp":22}'),
        *paris,
        chat(echoed(PARALLEL, [sent_paris, '{"temp":22}']), [], "Paris 15 C, Tokyo 22 C."),
    ]


def _paris(status: int | None, got: bytes = b"", error: str | None = None) -> Exchange:
    return tool("GET", "https://wx.example.com/v1/now?city=Paris&units=metric", status, got, error=error)  # noqa: E501


def _hidden(exchanges: list[Exchange]) -> list[Any]:
    return [f for f in analyse(exchanges).findings if f.code == "C.tool_http_error_hidden"]


def test_a_failure_the_result_hides_is_named_at_c_on_the_turn_that_sent_it() -> None:
    failed = _paris(503, b'{"error":"upstream overloaded"}')
    (f,) = _hidden(_run_with_paris([failed], '{"temp":15}'))
    assert (f.layer, f.severity.value, f.seq) == ("C", "warning", 3)
    assert f.tool_call_id == "call_P" and f.details["tool_http_seq"] == 2
    assert "#2 answered 503" in f.message and "“{\"temp\":15}”, with no error flag" in f.message
    (empty,) = _hidden(_run_with_paris([_paris(None, error="Connection refused")], ""))
    assert "ended without an answer (Connection refused)" in empty.message
    assert "nothing (an empty result)" in empty.message
    (other,) = _hidden(_run_with_paris([_paris(404, b"no such page")], "cloudy"))
    assert "#2 answered 404" in other.message


def test_a_failure_the_result_says_is_not_a_finding() -> None:
    body = b'{"error":{"message":"City service closed for maintenance"}}'
    for paris, sent in (
        ([_paris(503, body)], "Weather service error: 503"),  # the status, a failure word
        ([_paris(503, body)], "city service closed for maintenance"),  # the error's own text
        ([_paris(503, b"x"), _paris(200, b'{"temp":15}')], '{"temp":15}'),  # retried, got it
        ([_paris(200, b'{"temp":15}')], '{"temp":15}'),  # a clean call
    ):
        assert _hidden(_run_with_paris(paris, sent)) == [], (paris, sent)
    assert analyse(weather_run()).findings == []  # the clean run: no finding at all


def test_a_failure_the_recorder_made_is_never_a_c_finding() -> None:
    """The recorder's own TLS handshake with the tool's server failed (proxy/trust.py): the agent
    never had that failure, so its empty result hides nothing (issue 91)."""
    ours = _paris(None, error="Certificate verify failed: unable to get local issuer certificate")
    ours.notes.append(f"{RECORDER_MADE}: its TLS handshake with the server failed (…)")
    assert ours.recorder_made
    assert _hidden(_run_with_paris([ours], "")) == []
    theirs = _paris(None, error="Certificate verify failed: unable to get local issuer certificate")
    assert not theirs.recorder_made and len(_hidden(_run_with_paris([theirs], ""))) == 1


def _codes(exchanges: list[Exchange], code: str) -> list[Any]:
    return [f for f in analyse(exchanges).findings if f.code == code]


#: A forecast of 600-odd bytes, as a weather API answers.
_LONG = orjson.dumps({"city": "Paris", "hours": [{"h": h, "temp": 10 + h % 7, "sky": "clear"} for h in range(24)]})  # noqa: E501


def test_a_result_cut_from_the_longer_answer_the_tool_got_is_said() -> None:
    cut = _LONG[:200].decode()
    (f,) = _codes(_run_with_paris([_paris(200, _LONG)], cut), "C.tool_result_cut")
    assert (f.layer, f.severity.value, f.seq, f.tool_call_id) == ("C", "info", 3, "call_P")
    assert f.details["kept_bytes"] == 200 and f.details["got_bytes"] == len(_LONG)
    assert f"the first 200 of the {len(_LONG):,} bytes the tool's HTTP call #2 got" in f.message
    for sent in (
        _LONG.decode(),  # the whole answer
        _LONG.decode().replace(",", ", "),  # the whole, re-spaced
        _LONG[: len(_LONG) - 40].decode(),  # all but its last 40 bytes
        cut + " … (truncated)",  # the cut said
        '{"temp":15}',  # another value (not a cut of it)
        "Sunny, 15 degrees in Paris all day long, no rain expected this week at all.",
    ):
        assert _codes(_run_with_paris([_paris(200, _LONG)], sent), "C.tool_result_cut") == [], sent
    # a failed call is C.tool_http_error_hidden's, never a cut
    assert _codes(_run_with_paris([_paris(503, _LONG)], cut), "C.tool_result_cut") == []


def _three_calls(third: list[Exchange]) -> list[Exchange]:
    """get_weather called three times, one call per turn; Paris's and Tokyo's tool calls their
    API; the third (Oslo) gets ``third`` as its tool HTTP calls, and a result."""
    calls = [
        (f"call_{i}", "get_weather", {"city": city})
        for i, city in enumerate(("Paris", "Tokyo", "Oslo"), start=1)
    ]
    asked = [{"role": "user", "content": "Weather in Paris, then Tokyo, then Oslo?"}]
    history: list[Any] = list(asked)
    out: list[Exchange] = []
    for i, (cid, name, args) in enumerate(calls):
        out.append(chat(list(history), [(cid, name, args)]))
        city = args["city"]
        out.extend(third if i == 2 else [tool("GET", f"https://wx.example.com/v1/now?city={city}", 200, b'{"temp":15}')])  # noqa: E501
        history += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": orjson.dumps(args).decode()}}]},  # noqa: E501
            {"role": "tool", "tool_call_id": cid, "content": '{"temp":15}'},
        ]
    out.append(chat(history, [], "15 C everywhere."))
    return out


def test_a_result_without_the_http_the_tool_made_on_its_earlier_calls_is_said() -> None:
    (f,) = _codes(_three_calls([]), "C.tool_http_missing")
    assert (f.layer, f.severity.value, f.tool_call_id) == ("C", "info", "call_3")
    assert f.details["earlier_calls"] == 2 and "made none, and a result came back" in f.message
    status = tool("GET", "https://wx.example.com/v1/status", 200, b"{}")  # nothing of Oslo in it
    oslo = tool("GET", "https://wx.example.com/v1/now?city=Oslo", 200, b'{"temp":15}')
    for third in ([oslo], [status]):  # made (linked), or some call while it awaited
        assert _codes(_three_calls(third), "C.tool_http_missing") == [], third
    assert _codes(weather_run(), "C.tool_http_missing") == []


def test_show_counts_the_tools_calls_apart_from_the_agents_own(tmp_path: Path) -> None:
    """``show``'s first line counts the model round trips, the tools' HTTP calls (and how many
    are linked), and apart from them the calls made while no tool call awaited its result (the
    agent's own: telemetry after the results went back), said so under the call too."""
    path = _written(tmp_path, weather_run())
    shown = cli_run("show", str(path))  # (what show says: in process)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert (
        "5 round trips, 2 to LLM APIs (openai_chat 2), 2 tool HTTP calls (2 linked), "
        "1 HTTP call of the agent's own (no tool call awaiting)\n"
    ) in out, out[:400]
    assert "the agent's own call, not a tool's (not linked)" in out


def _at(ex: Exchange, started: float) -> Exchange:
    ex.started = started
    return ex


def test_a_slow_call_that_outlives_its_turn_is_linked_by_when_it_started() -> None:
    """Issue 91: the tool's HTTP call started while the model's call awaited its result, and was
    written after the next request (the client gave up on it and went on): it is that call's, not
    the agent's own. On c86d115d it was judged by when it was written: unlinked."""
    first = [{"role": "user", "content": "Weather in Paris?"}]
    paris = [("call_P", "get_weather", {"city": "Paris"})]
    slow = _at(tool("GET", "https://wx.example.com/v1/now?city=Paris", 200, b'{"temp":15}'), 11.0)
    run = analyse([
        _at(chat(first, paris), 10.0),
        _at(chat(echoed(paris, ["timed out"]), [], "No answer in time."), 12.0),
        slow,  # (written at 13.5, after the next request)
        _at(tool("GET", "https://telemetry.example.com/v1/ping", 204, b""), 14.0),
    ])  # fmt: skip
    linked, own = run.mcp_calls[2], run.mcp_calls[3]
    assert (linked.call_id, linked.linked_by, linked.model_seq) == ("call_P", "arguments", 0)
    assert own.call_id is None and not own.candidates  # started after the wait ended: the agent's
    before = _at(tool("GET", "https://wx.example.com/v1/now?city=Paris", 200, b"{}"), 9.0)
    early = analyse([_at(chat(first, paris), 10.0), before])
    assert early.mcp_calls[1].call_id is None  # started before the call was made: not its


def test_equal_call_ids_in_concurrent_conversations_never_cross() -> None:
    """Two conversations at once number their calls alike (``call_1_0`` in both): Paris's tool
    answered 200 and its result says so; Tokyo's answered 503 and its result hides it. Only
    Tokyo's turn is named. On c86d115d the second call took the first's place: Paris's honest
    result was blamed for Tokyo's 503, and Tokyo's hidden failure was not named."""
    a_first = [{"role": "user", "content": "Weather in Paris, please?"}]
    b_first = [{"role": "user", "content": "And what about the weather in Tokyo today?"}]
    a_call = [("call_1_0", "get_weather", {"city": "Paris"})]
    b_call = [("call_1_0", "get_weather", {"city": "Tokyo"})]
    found = _hidden([
        chat(a_first, a_call),
        chat(b_first, b_call),
        tool("GET", "https://wx.example.com/v1/now?city=Paris", 200, b'{"temp":15}'),
        tool("GET", "https://wx.example.com/v1/now?city=Tokyo", 503, b'{"error":"overloaded"}'),
        chat([*a_first, *echoed(a_call, ['{"temp":15}'])[1:]], [], "Paris 15 C."),
        chat([*b_first, *echoed(b_call, ["{}"])[1:]], [], "Tokyo: nothing known."),
    ])  # fmt: skip
    assert [(f.seq, f.tool_call_id) for f in found] == [(5, "call_1_0")]


def test_the_agents_own_fetch_while_an_mcp_call_awaits_is_not_linked_to_it() -> None:
    """Issue 91 (opencode 1.18.33, seen on a real run): the agent fetches from npm for itself
    while the model's ``weather_get_weather`` call, which it runs over MCP on stdio, awaits its
    result. Nothing on the wire shows that call runs over HTTP at all (no tool HTTP call carried
    its arguments, none of its tool's earlier calls had one): the fetch is the agent's own, not
    linked. A call that does run over HTTP keeps an argument-less call linked (the session GET
    before the order's POST: test_the_only_call_awaiting_takes_a_call_without_its_arguments),
    and so does a later call of a tool seen over HTTP before. On c86d115d the fetch was linked to
    ``weather_get_weather`` by ``awaiting``."""
    first = [{"role": "user", "content": "Weather in Paris?"}]
    mcp = [("call_W", "weather_get_weather", {"city": "Paris"})]
    npm = tool("GET", "https://registry.npmjs.org/typescript", 200, b'{"name":"typescript"}')
    run = analyse([chat(first, mcp), npm, chat(echoed(mcp, ['{"temp":15}']), [], "15 C.")])
    (own,) = run.mcp_calls.values()
    assert (own.call_id, own.linked_by, own.tool, own.model_seq) == (None, None, None, None)
    # a tool seen over HTTP before: its later call takes an argument-less request while it awaits
    wx = [("call_A", "get_weather", {"city": "Paris"})]
    again = [("call_B", "get_weather", {"city": "Lyon"})]
    seen = analyse([
        chat(first, wx),
        tool("GET", "https://wx.example.com/v1/now?city=Paris", 200, b'{"temp":15}'),
        chat(echoed(wx, ['{"temp":15}']), again),
        tool("GET", "https://wx.example.com/v1/session", 200, b'{"s":1}'),
        chat([*echoed(wx, ['{"temp":15}']), *echoed(again, ["{}"])[1:]], [], "Done."),
    ])  # fmt: skip
    assert [(c.call_id, c.linked_by) for c in seen.mcp_calls.values()] == [
        ("call_A", "arguments"), ("call_B", "awaiting"),
    ]  # fmt: skip


def test_a_turn_ends_the_calls_of_its_conversation_in_their_order_past_the_limit() -> None:
    """The calls a turn stops awaiting are found by its conversation (an index beside the table
    of calls awaiting): the same calls, in the same order, as reading every call awaiting, once
    the oldest were dropped past 10,000 calls too, and after the index is made again from the
    table (a continued analysis keeps the table only)."""
    import random
    from types import SimpleNamespace as Ns

    from looptap.cassettes.analysis._tool_http import ToolHttpLinker

    linker, rng = ToolHttpLinker(), random.Random(55)

    def turn(conv: str, seq: int, ids: list[str]) -> list[str]:
        calls = [Ns(id=i, name="get_weather", kind="function", arguments={"city": i}) for i in ids]
        ended = linker.model_turn(Ns(seq=seq, conversation=conv, index=0), Ns(tool_calls=calls))  # type: ignore[arg-type]
        return [k for k, _ in ended]

    for seq in range(2_100):  # 10,500 calls made, none answered: the oldest 500 dropped
        turn(f"c{seq}", seq, [f"call_{seq}_{k}" for k in range(5)])
    assert len(linker.awaiting) == 10_000
    for seq in range(2_100, 2_400):
        conv = f"c{rng.randrange(2_100)}"
        if seq == 2_250:
            linker.reindex()
        awaited = [k for k, a in linker.awaiting.items() if a.conversation == conv]
        made = [f"call_{seq}_{k}" for k in range(rng.randrange(4))] + ["call_0_1"]
        assert turn(conv, seq, made) == awaited
    assert sum(map(len, linker._waiting.values())) == len(linker.awaiting)
