"""A group of tool results answering one turn's calls matches whatever order the client appended it
in (cassettes/providers/_result_groups.py): LlamaIndex's ``FunctionAgent`` appends an answer's
parallel results in the order they complete. Per API family, each order-free match beside the
real differences that still miss: a result for the same call with another content, a missing or
an extra result, results of two turns swapped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from looptap.cassettes.jsonpath import format_path
from looptap.cassettes.matching import Matcher, Miss, Recorded, Tolerated, request_key
from looptap.cassettes.matching._ruletable import from_flags
from looptap.cassettes.wire import Exchange

#: A turn's calls, in the order the model made them: (call id, city).
Calls = list[tuple[str, str]]
#: A turn's results, in the order the client appended them: (call id, what the tool returned).
Results = list[tuple[str, str]]
Body = Callable[[list[Calls], list[Results]], dict[str, Any]]

ASK = "Weather in Paris, Tokyo and Oslo?"


def chat(calls: list[Calls], results: list[Results]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    for turn, done in zip(calls, results, strict=True):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function",
             "function": {"name": "get_weather", "arguments": orjson.dumps({"city": c}).decode()}}
            for i, c in turn
        ]})  # fmt: skip
        msgs += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in done]
    return {"model": "gpt-4o", "messages": msgs}


def responses(calls: list[Calls], results: list[Results]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    for turn, done in zip(calls, results, strict=True):
        items += [
            {"type": "function_call", "call_id": i, "name": "get_weather",
             "arguments": orjson.dumps({"city": c}).decode()}
            for i, c in turn
        ]  # fmt: skip
        items += [{"type": "function_call_output", "call_id": i, "output": r} for i, r in done]
    return {"model": "gpt-5", "input": items}


def anthropic(calls: list[Calls], results: list[Results]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    for turn, done in zip(calls, results, strict=True):
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            *({"type": "tool_use", "id": i, "name": "get_weather", "input": {"city": c}}
              for i, c in turn),
        ]})  # fmt: skip
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": r} for i, r in done
        ]})  # fmt: skip
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": msgs}


def gemini(calls: list[Calls], results: list[Results]) -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": ASK}]}]
    for turn, done in zip(calls, results, strict=True):
        contents.append({"role": "model", "parts": [
            {"functionCall": {"id": i, "name": "get_weather", "args": {"city": c}}}
            for i, c in turn
        ]})  # fmt: skip
        contents.append({"role": "user", "parts": [
            {"functionResponse": {"id": i, "name": "get_weather", "response": {"output": r}}}
            for i, r in done
        ]})  # fmt: skip
    return {"contents": contents}


def bedrock(calls: list[Calls], results: list[Results]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"text": ASK}]}]
    for turn, done in zip(calls, results, strict=True):
        msgs.append({"role": "assistant", "content": [
            {"toolUse": {"toolUseId": i, "name": "get_weather", "input": {"city": c}}}
            for i, c in turn
        ]})  # fmt: skip
        msgs.append({"role": "user", "content": [
            {"toolResult": {"toolUseId": i, "content": [{"text": r}], "status": "success"}}
            for i, r in done
        ]})  # fmt: skip
    return {"messages": msgs, "inferenceConfig": {"maxTokens": 512}}


#: family → (its URL, how it lays out a loop's history).
FAMILIES: dict[str, tuple[str, Body]] = {
    "openai_chat": ("https://api.openai.com/v1/chat/completions", chat),
    "openai_responses": ("https://api.openai.com/v1/responses", responses),
    "anthropic": ("https://api.anthropic.com/v1/messages", anthropic),
    "gemini": (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        gemini,
    ),
    "bedrock": (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
        bedrock,
    ),
}

PARIS, TOKYO, OSLO, LIMA = ("c1", "Paris"), ("c2", "Tokyo"), ("c3", "Oslo"), ("c4", "Lima")
A, B = ("c1", "Paris: 15 C"), ("c2", "Tokyo: 15 C")
C, D = ("c3", "Oslo: 14 C"), ("c4", "Lima: 14 C")


def exchange(url: str, body: dict[str, Any]) -> Exchange:
    return Exchange(
        "POST", url, [("content-type", "application/json")], orjson.dumps(body), status=200,
        response_headers=[("content-type", "application/json")], response_chunks=[(0.0, b"{}")],
    )  # fmt: skip


def replayed(
    url: str, recorded: dict[str, Any], live: dict[str, Any], **kw: Any
) -> tuple[Recorded | Miss, list[Tolerated]]:
    m = Matcher([exchange(url, recorded)], **kw)
    target = "/" + url.split("://", 1)[1].split("/", 1)[1]
    got = m.match("POST", target, [("content-type", "application/json")], orjson.dumps(live))
    return got, m.tolerated.get(0, [])


@pytest.fixture(params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> tuple[str, Body]:
    return FAMILIES[request.param]


def test_the_family_is_the_one_meant(family: tuple[str, Body]) -> None:
    url, body = family
    key = request_key("POST", url, [], orjson.dumps(body([[PARIS]], [[A]])))
    assert key.adapter is not None
    assert FAMILIES[key.adapter.family][1] is body


def test_a_turns_results_in_another_order_match(family: tuple[str, Body]) -> None:
    """Recorded Tokyo's result first (it completed first); replayed, Paris's: the same request."""
    url, body = family
    got, tol = replayed(url, body([[PARIS, TOKYO]], [[B, A]]), body([[PARIS, TOKYO]], [[A, B]]))
    assert isinstance(got, Recorded), got
    assert tol == []  # not a tolerated difference: the same results, paired with the same calls
    # three results, every order
    rec = body([[PARIS, TOKYO, OSLO]], [[C, A, B]])
    for order in ([A, B, C], [B, C, A], [C, B, A], [A, C, B]):
        assert isinstance(replayed(url, rec, body([[PARIS, TOKYO, OSLO]], [order]))[0], Recorded)


def test_a_result_for_the_same_call_with_another_content_still_misses(
    family: tuple[str, Body],
) -> None:
    url, body = family
    rec = body([[PARIS, TOKYO]], [[B, A]])
    got, _ = replayed(url, rec, body([[PARIS, TOKYO]], [[A, ("c2", "Tokyo: 31 C")]]))
    assert isinstance(got, Miss)
    assert any("Tokyo: 31 C" in str(c.actual) for c in got.changes), got.changes
    # the contents given to the other calls: Paris's answer for Tokyo's call, and back
    swapped = body([[PARIS, TOKYO]], [[("c1", B[1]), ("c2", A[1])]])
    assert isinstance(replayed(url, rec, swapped)[0], Miss)


def test_a_missing_or_an_extra_result_still_misses(family: tuple[str, Body]) -> None:
    url, body = family
    rec = body([[PARIS, TOKYO]], [[B, A]])
    assert isinstance(replayed(url, rec, body([[PARIS, TOKYO]], [[A]]))[0], Miss)
    assert isinstance(replayed(url, rec, body([[PARIS, TOKYO]], [[B]]))[0], Miss)
    assert isinstance(replayed(url, rec, body([[PARIS, TOKYO]], [[A, B, C]]))[0], Miss)
    assert isinstance(replayed(url, rec, body([[PARIS, TOKYO]], [[A, B, B]]))[0], Miss)


def test_two_turns_groups_each_in_any_order_but_not_swapped_across(
    family: tuple[str, Body],
) -> None:
    url, body = family
    calls = [[PARIS, TOKYO], [OSLO, LIMA]]
    rec = body(calls, [[B, A], [C, D]])
    assert isinstance(replayed(url, rec, body(calls, [[A, B], [D, C]]))[0], Recorded)
    # a result moved to the other turn's group: another request, whatever the order
    for moved in ([[A, C], [B, D]], [[C, A], [D, B]], [[A, D], [C, B]]):
        assert isinstance(replayed(url, rec, body(calls, moved))[0], Miss), moved


def test_another_runs_ids_pairing_the_same_way_match_in_any_order(
    family: tuple[str, Body],
) -> None:
    """A fork's live turn or another run: the model gave other ids. Remapped consistently (the
    calls number them), the results match in any order; paired otherwise, they miss."""
    url, body = family
    rec = body([[PARIS, TOKYO]], [[B, A]])
    other = [[("x9", "Paris"), ("x7", "Tokyo")]]
    hit = body(other, [[("x9", A[1]), ("x7", B[1])]])
    assert isinstance(replayed(url, rec, hit)[0], Recorded)
    crossed = body(other, [[("x9", B[1]), ("x7", A[1])]])
    assert isinstance(replayed(url, rec, crossed)[0], Miss)


def test_tolerated_spans_follow_the_result_they_are_in(family: tuple[str, Body]) -> None:
    """A date inside a reordered result: tolerated at that result's place, compared as the
    result's, not as its neighbour's."""
    url, body = family
    rec = body([[PARIS, TOKYO]], [[("c2", "Tokyo on 2026-11-24"), ("c1", "Paris: rain")]])
    live = body([[PARIS, TOKYO]], [[("c1", "Paris: rain"), ("c2", "Tokyo on 2026-11-25")]])
    got, tol = replayed(url, rec, live)
    assert isinstance(got, Recorded), got
    assert [(t.detector, t.recorded, t.live) for t in tol] == [("date", "2026-11-24", "2026-11-25")]
    moved = body([[PARIS, TOKYO]], [[("c1", "Paris on 2026-11-25"), ("c2", "Tokyo: rain")]])
    assert isinstance(replayed(url, rec, moved)[0], Miss)


def test_a_volatile_tools_rule_sees_each_result_once_reordered(family: tuple[str, Body]) -> None:
    """``volatile_tools`` still writes the tool's results out, each tolerated as itself (its
    place follows the group's order)."""
    url, body = family
    rules = from_flags(volatile_tools=["get_weather"])
    rec = body([[PARIS, TOKYO]], [[("c2", "Tokyo: 12 C"), ("c1", "Paris: 15 C")]])
    live = body([[PARIS, TOKYO]], [[("c1", "Paris: 16 C"), ("c2", "Tokyo: 13 C")]])
    got, tol = replayed(url, rec, live, rules=rules)
    assert isinstance(got, Recorded), got
    pairs = sorted((t.recorded, t.live) for t in tol)  # (Bedrock's result: its content blocks)
    assert len(pairs) == 2 and all(
        a in was and b in now
        for (was, now), (a, b) in zip(
            pairs, [("Paris: 15 C", "Paris: 16 C"), ("Tokyo: 12 C", "Tokyo: 13 C")], strict=True
        )
    ), pairs


def test_the_body_as_sent_is_not_changed_and_a_diff_names_the_result() -> None:
    url, body = FAMILIES["openai_chat"]
    live = body([[PARIS, TOKYO]], [[B, A]])
    sent = orjson.dumps(live)
    key = request_key("POST", url, [], sent)
    assert orjson.dumps(live) == sent  # the caller's body untouched
    assert [m.get("tool_call_id") for m in key.raw["messages"][2:]] == ["c1", "c2"]
    got, _ = replayed(url, body([[PARIS, TOKYO]], [[A, B]]), body([[PARIS, TOKYO]], [[
        ("c2", "Tokyo: 31 C"), A]]))  # fmt: skip
    assert isinstance(got, Miss)
    # the changed result is named by its call, at its place in the calls' order
    assert [format_path(c.path) for c in got.changes] == ["messages[3].content"]
    assert any("c2" in str(v) for v in got.verdicts), got.verdicts


# -- what stays compared in order --------------------------------------------------------------


def test_gemini_results_without_ids_pair_by_name_and_two_of_one_name_keep_their_order() -> None:
    url, _ = FAMILIES["gemini"]

    def body(calls: list[str], done: list[tuple[str, str]]) -> dict[str, Any]:
        return {"contents": [
            {"role": "user", "parts": [{"text": ASK}]},
            {"role": "model", "parts": [{"functionCall": {"name": n, "args": {}}} for n in calls]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": n, "response": {"output": r}}} for n, r in done
            ]},
        ]}  # fmt: skip

    # distinct names: the API pairs by name, so the order is free
    rec = body(["get_weather", "get_time"], [("get_time", "09:00"), ("get_weather", "rain")])
    live = body(["get_weather", "get_time"], [("get_weather", "rain"), ("get_time", "09:00")])
    assert isinstance(replayed(url, rec, live)[0], Recorded)
    # two calls of one name and no ids: paired by position, so the order is what pairs them
    rec = body(["get_weather"] * 2, [("get_weather", "Paris: rain"), ("get_weather", "Oslo: sun")])
    live = body(["get_weather"] * 2, [("get_weather", "Oslo: sun"), ("get_weather", "Paris: rain")])
    assert isinstance(replayed(url, rec, live)[0], Miss)


def test_responses_outputs_continuing_a_kept_answer_are_order_free_by_call_id() -> None:
    """``previous_response_id`` with only the outputs: the calls are not in the body; the group
    is compared by call id."""
    url, _ = FAMILIES["openai_responses"]

    def body(done: list[tuple[str, str]]) -> dict[str, Any]:
        return {"model": "gpt-5", "previous_response_id": "resp_1", "input": [
            {"type": "function_call_output", "call_id": i, "output": r} for i, r in done
        ]}  # fmt: skip

    assert isinstance(replayed(url, body([B, A]), body([A, B]))[0], Recorded)
    assert isinstance(replayed(url, body([B, A]), body([("c1", B[1]), ("c2", A[1])]))[0], Miss)
    assert isinstance(replayed(url, body([B, A]), body([A]))[0], Miss)


def test_chat_results_that_name_no_call_keep_their_order() -> None:
    url, _ = FAMILIES["openai_chat"]
    base = chat([[PARIS, TOKYO]], [[A, B]])

    def without_ids(order: list[str]) -> dict[str, Any]:
        return {**base, "messages": [
            *base["messages"][:2], *({"role": "tool", "content": r} for r in order)
        ]}  # fmt: skip

    rec = without_ids([A[1], B[1]])
    assert isinstance(replayed(url, rec, without_ids([A[1], B[1]]))[0], Recorded)
    assert isinstance(replayed(url, rec, without_ids([B[1], A[1]]))[0], Miss)


def test_parallel_tool_http_calls_are_served_by_what_they_ask_in_any_order() -> None:
    """The tools' side of the same agent: its Paris and Tokyo requests, recorded Tokyo first,
    asked Paris first, each get their own recorded answer (by method, host, path and query,
    never by position). So it was before too: the order of the results in the model's next
    request, not the tools' HTTP, made LlamaIndex's replay miss, and ``volatile_tools``
    stood in for an order-free comparison of the results."""
    tool = "http://127.0.0.1:40511"

    def weather(city: str) -> Exchange:
        body = orjson.dumps({"city": city, "temp_c": 10 + len(city), "sky": "clear"})
        ex = Exchange(
            "GET", f"{tool}/weather?city={city}", [("accept", "*/*")], b"", status=200,
            response_headers=[("content-type", "application/json")], response_chunks=[(0.0, body)],
        )  # fmt: skip
        ex.tool = True
        return ex

    url, body = FAMILIES["openai_chat"]
    first = exchange(url, body([], []))
    m = Matcher([first, weather("Tokyo"), weather("Paris")], tools=True)
    for city in ("Paris", "Tokyo"):
        got = m.match_tool("GET", f"{tool}/weather?city={city}", [], b"")
        assert isinstance(got, Recorded), got
        assert orjson.loads(got.exchange.response_body)["city"] == city
    assert isinstance(m.match_tool("GET", f"{tool}/weather?city=Paris", [], b""), Miss)


def test_a_cache_breakpoint_on_the_last_result_moves_with_it() -> None:
    """Claude Code-like clients mark the last block of the message for caching: in another order
    the mark sits on another result, a difference to the cache; the rule that ignores the mark
    tolerates it."""
    url, body = FAMILIES["anthropic"]

    def marked(done: Results) -> dict[str, Any]:
        b = body([[PARIS, TOKYO]], [done])
        b["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        return b

    rec, live = marked([B, A]), marked([A, B])
    assert isinstance(replayed(url, rec, live)[0], Miss)
    rules = from_flags(["anthropic:messages[*].content[*].cache_control"])
    assert isinstance(replayed(url, rec, live, rules=rules)[0], Recorded)
