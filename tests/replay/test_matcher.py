"""Matching: JSON-semantic, volatile values normalised, misses explained by turn, path and layer."""

from __future__ import annotations

import copy

import orjson
import pytest

from looptap.cassettes.errors import CassetteError, ReplayMiss
from looptap.cassettes.jsonpath import format_path
from looptap.cassettes.matching import Matcher, Miss, Recorded, json_diff, request_key
from tests.replay.conftest import (
    CALL,
    RESULT,
    SYSTEM,
    USER,
    chat_exchange,
    chat_request,
    chat_response,
    tool_loop,
)

PATH = "/v1/chat/completions"


def body(messages: list[dict[str, object]], **extra: object) -> bytes:
    return chat_request(messages, **extra)


def test_json_diff_paths_and_kinds() -> None:
    a = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "n": 1,
        "gone": True,
    }
    b = {
        "n": 1,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "ho"}]}, {"role": "x"}],
        "new": 2,
    }
    got = {(c.where, c.kind) for c in json_diff(a, b)}
    assert got == {
        ("messages[0].content[0].text", "changed"),
        ("messages[1]", "added"),
        ("gone", "removed"),
        ("new", "added"),
    }
    assert json_diff({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}) == []  # key order never matters
    assert [c.where for c in json_diff([1, 2], [2, 1])] == ["[0]", "[1]"]  # list order does
    assert json_diff({"x": 1}, {"x": 1.0}) == [] and json_diff({"x": True}, {"x": 1}) != []
    assert format_path(("weird key", 0, "a-b")) == '["weird key"][0].a-b'


def test_key_order_ignored_message_order_kept() -> None:
    rec = tool_loop()
    m = Matcher(rec)
    shuffled = orjson.dumps(
        {
            "tools": orjson.loads(rec[0].request_body)["tools"],
            "messages": [SYSTEM, USER],
            "model": "gpt-4o",
        }
    )
    assert isinstance(m.match("POST", PATH, [], shuffled), Recorded)
    swapped = body([USER, SYSTEM])
    miss = Matcher(rec).match("POST", PATH, [], swapped)
    assert isinstance(miss, Miss)
    assert "messages[0].role" in [c.where for c in miss.changes]


def test_tool_call_ids_are_remapped_consistently() -> None:
    """Another run's ids pair the same way: a match. Ids that pair differently: a miss."""
    rec = tool_loop()
    m = Matcher(rec)
    assert isinstance(m.match("POST", PATH, [], body([SYSTEM, USER])), Recorded)
    call = copy.deepcopy(CALL)
    call["tool_calls"][0]["id"] = "call_ZZ9"  # type: ignore[index]
    result = {**RESULT, "tool_call_id": "call_ZZ9"}
    hit = m.match(
        "POST",
        PATH,
        [("x-stainless-retry-count", "0"), ("user-agent", "other/2")],
        body([SYSTEM, USER, call, result]),
    )
    assert isinstance(hit, Recorded) and hit.index == 1
    m.label()
    assert (hit.conversation, hit.turn) == ("c1", 1)
    # The result answers a call id that is not the call's: the pairing differs.
    bad = {**RESULT, "tool_call_id": "call_OTHER"}
    miss = Matcher(rec).match("POST", PATH, [], body([SYSTEM, USER, call, bad]))
    miss2 = Matcher(rec[1:]).match("POST", PATH, [], body([SYSTEM, USER, call, bad]))
    assert isinstance(miss, Miss) and isinstance(miss2, Miss)
    assert any(c.where == "messages[3].tool_call_id" for c in miss2.changes)


def test_timestamps_and_multipart_boundaries_are_normalised() -> None:
    from looptap.cassettes.wire import Exchange

    a = request_key(
        "POST", PATH, [], body([SYSTEM, USER], metadata={"sent": "2026-11-22T01:02:03.456Z"})
    )
    b = request_key(
        "POST", PATH, [], body([SYSTEM, USER], metadata={"sent": "2027-01-01T00:00:00+02:00"})
    )
    assert a.digest == b.digest
    form = b"--XyZ\r\nContent-Disposition: form-data; name=file\r\n\r\ndata\r\n--XyZ--\r\n"
    ex = Exchange(
        "POST",
        "https://api.openai.com/v1/files",
        [("content-type", "multipart/form-data; boundary=XyZ")],
        form,
        status=200,
        response_chunks=[(None, b'{"id":"file-1"}')],
    )
    m = Matcher([ex])
    live = form.replace(b"XyZ", b"b0undary42")
    assert isinstance(
        m.match(
            "POST",
            "/v1/files",
            [("Content-Type", "multipart/form-data; boundary=b0undary42")],
            live,
        ),
        Recorded,
    )


def test_miss_names_turn_path_and_layer_for_a_changed_tool_result() -> None:
    rec = tool_loop()
    m = Matcher(rec)
    assert isinstance(m.match("POST", PATH, [], body([SYSTEM, USER])), Recorded)
    changed = {**RESULT, "content": "rainy, 9 C"}
    miss = m.match("POST", PATH, [], body([SYSTEM, USER, CALL, changed]))
    assert isinstance(miss, Miss)
    assert miss.closest is not None and (miss.closest.conversation, miss.closest.turn) == ("c1", 1)
    assert [str(v) for v in miss.verdicts] == [
        "C: the tool result for call_A1 changed (messages[3].content)"
    ]
    assert (
        miss.headline == "conversation c1, turn 1 (seq 1): C: the tool result for call_A1 changed "
        "(messages[3].content)"
    )
    text = str(miss)
    assert 'messages[3].content: recorded "sunny, 21 C", got "rainy, 9 C"' in text
    assert m.misses == [miss]
    err = ReplayMiss(str(miss))  # (what the pytest plugin raises for a miss)
    assert isinstance(err, LookupError) and isinstance(err, CassetteError)


@pytest.mark.parametrize(
    ("messages", "extra", "verdict"),
    [
        pytest.param(
            [{**SYSTEM, "content": "Be brief."}, USER],
            {},
            "C: the system prompt changed (messages[0].content)",
            id="system",
        ),
        pytest.param(
            [SYSTEM, {**USER, "content": "Weather in Rome?"}],
            {},
            "C: the user input at messages[1] changed (messages[1].content)",
            id="user",
        ),
        pytest.param(
            [SYSTEM, USER],
            {"temperature": 0.2},
            "C: request parameter temperature changed (temperature: recorded null, got 0.2)",
            id="param",
        ),
        pytest.param(
            [SYSTEM, USER],
            {"model": "gpt-4o-mini"},
            'C: the model requested changed: recorded "gpt-4o", got "gpt-4o-mini"',
            id="model",
        ),
        pytest.param(
            [SYSTEM, USER], {"tools": []}, "C: the tools offered changed (tools[0])", id="tools"
        ),
    ],
)
def test_other_dispatch_changes_are_layer_c(
    messages: list[dict[str, object]], extra: dict[str, object], verdict: str
) -> None:
    m = Matcher(tool_loop())
    miss = m.match("POST", PATH, [], body(messages, **extra))
    assert isinstance(miss, Miss)
    assert miss.closest is not None and miss.closest.turn == 0
    assert str(miss.verdicts[0]) == verdict, [str(v) for v in miss.verdicts]


def test_assistant_echo_rewritten_is_named() -> None:
    m = Matcher(tool_loop())
    m.match("POST", PATH, [], body([SYSTEM, USER]))
    call = copy.deepcopy(CALL)
    call["tool_calls"][0]["function"]["arguments"] = '{"city":"Lyon"}'  # type: ignore[index]
    miss = m.match("POST", PATH, [], body([SYSTEM, USER, call, RESULT]))
    assert isinstance(miss, Miss)
    assert str(miss.verdicts[0]).startswith(
        "C: the assistant turn at messages[2] was not sent back as recorded"
    )


def test_exhausted_cassette_and_a_turn_the_recording_never_had() -> None:
    rec = tool_loop()
    m = Matcher(rec)
    m.match("POST", PATH, [], body([SYSTEM, USER]))
    m.match("POST", PATH, [], body([SYSTEM, USER, CALL, RESULT]))
    more = body(
        [
            SYSTEM,
            USER,
            CALL,
            RESULT,
            {"role": "assistant", "content": "It is sunny in Paris."},
            {"role": "user", "content": "And Lyon?"},
        ]
    )
    miss = m.match("POST", PATH, [], more)
    assert isinstance(miss, Miss)
    assert "exhausted (all 2 recorded round trips were played)" in miss.reason
    assert miss.closest is not None and miss.closest.turn == 1
    assert str(miss.verdicts[0]) == (
        "C: the agent sent a turn the recording never had: 2 more history items than recorded, "
        "starting with an assistant message at messages[4]"
    )
    # The same request again after it was played: a repeat, said so.
    again = Matcher(rec)
    again.match("POST", PATH, [], body([SYSTEM, USER]))
    rep = again.match("POST", PATH, [], body([SYSTEM, USER]))
    assert isinstance(rep, Miss) and "already played" in str(rep.verdicts[0])


def test_strict_requires_recorded_order_and_version_headers() -> None:
    rec = tool_loop()
    loose = Matcher(rec)
    # out of order: fine
    assert isinstance(loose.match("POST", PATH, [], body([SYSTEM, USER, CALL, RESULT])), Recorded)
    strict = Matcher(rec, strict=True)
    miss = strict.match("POST", PATH, [], body([SYSTEM, USER, CALL, RESULT]))
    assert (
        isinstance(miss, Miss)
        and "strict" in miss.reason
        and miss.closest is not None
        and miss.closest.turn == 0
    )
    assert isinstance(strict.match("POST", PATH, [], body([SYSTEM, USER])), Recorded)


def test_path_and_non_json_bodies() -> None:
    m = Matcher(tool_loop())
    miss = m.match("POST", "/v1/responses", [], body([SYSTEM, USER]))
    assert isinstance(miss, Miss)
    assert (
        str(miss.verdicts[0])
        == "C: the agent called POST /v1/responses; the recorded turn is POST /v1/chat/completions"
    )
    junk = m.match("POST", PATH, [], b"\xff\xfe not json")
    assert isinstance(junk, Miss) and junk.verdicts
    empty = Matcher([]).match("GET", "/", [], b"")
    assert isinstance(empty, Miss) and empty.reason == "the cassette holds no round trips"


def test_a_client_at_another_base_path_is_read_under_the_recorded_one() -> None:
    """Codex signed in with ChatGPT records /backend-api/codex/responses; replayed through
    openai_base_url it asks /v1/responses. An unrecorded path is read under a recorded base that
    ends the same way, learned from the first exact match and kept; a recorded path means itself."""
    from looptap.cassettes.wire import Exchange

    rec = tool_loop()
    for ex in rec:
        ex.url = "https://chatgpt.com/backend-api/codex/chat/completions"
    rec.append(
        Exchange(
            "GET",
            "https://chatgpt.com/backend-api/codex/models?client_version=1",
            [],
            b"",
            404,
            [],
            [(0.0, b"{}")],
        )
    )
    m = Matcher(rec)
    # no recorded body is this: nothing learned
    other = m.match("POST", "/v1/chat/completions", [], body([USER]))
    assert isinstance(other, Miss) and other.target == "/v1/chat/completions" and m.bases == {}
    hit = m.match("POST", "/v1/chat/completions", [], body([SYSTEM, USER]))
    assert isinstance(hit, Recorded) and hit.index == 0 and m.bases == {"/v1": "/backend-api/codex"}
    # by the learned base
    assert isinstance(m.match("GET", "/v1/models?client_version=1", [], b""), Recorded)
    miss = m.match("POST", "/v1/chat/completions", [], body([SYSTEM, USER, CALL]))
    assert (
        isinstance(miss, Miss)
        and miss.target == "/v1/chat/completions"
        and "as /backend-api/codex/chat/completions" in miss.reason
    )
    assert (
        miss.closest is not None
        and miss.closest.index == 1
        and not any(v.path == "(url)" for v in miss.verdicts)
    )
    assert isinstance(
        m.match("POST", "/v1/chat/completions", [], body([SYSTEM, USER, CALL, RESULT])), Recorded
    )
    # a recorded path is never read under another base, nor a path whose last segment differs
    lone = chat_exchange([USER], chat_response("hi"))
    lone.url = "https://api.example.com/other/v1/chat/completions"
    assert isinstance(Matcher([*tool_loop(), lone]).match("POST", PATH, [], body([USER])), Miss)
    assert isinstance(
        Matcher(tool_loop()).match("POST", "/v1/responses", [], body([SYSTEM, USER])), Miss
    )


def test_strict_compares_the_headers_an_adapter_names() -> None:
    """An API version header changes what the API does: strict replay compares it; telemetry
    headers are never compared."""
    from looptap.cassettes.wire import Exchange

    req = orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "Hi"}],
        }
    )
    ex = Exchange(
        "POST",
        "https://api.anthropic.com/v1/messages",
        [("anthropic-version", "2023-06-01"), ("x-stainless-lang", "python")],
        req,
        status=200,
        response_chunks=[(None, b'{"type":"message","content":[]}')],
    )
    loose = Matcher([ex])
    assert isinstance(
        loose.match("POST", "/v1/messages", [("anthropic-version", "2099-01-01")], req), Recorded
    )
    strict = Matcher([ex], strict=True)
    miss = strict.match(
        "POST",
        "/v1/messages",
        [("anthropic-version", "2099-01-01"), ("x-stainless-lang", "js")],
        req,
    )
    assert (
        isinstance(miss, Miss)
        and miss.reason == "strict: headers differ from the next recorded turn (anthropic-version)"
    )
    assert isinstance(
        strict.match(
            "POST",
            "/v1/messages",
            [("Anthropic-Version", "2023-06-01"), ("x-stainless-lang", "js")],
            req,
        ),
        Recorded,
    )


def test_anthropic_metadata_is_not_compared_at_the_top_level_only() -> None:
    """Claude Code sends a new session id in metadata.user_id every run: replay must not miss on
    it; a tool parameter named ``metadata`` is still compared."""

    def req(user_id: str, prop: str) -> bytes:
        tool = {
            "name": "save",
            "input_schema": {"type": "object", "properties": {"metadata": {"type": prop}}},
        }
        return orjson.dumps(
            {
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "metadata": {"user_id": user_id},
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [tool],
            }
        )

    def key(b: bytes) -> object:
        return request_key(
            "POST",
            "https://api.anthropic.com/v1/messages",
            [("content-type", "application/json")],
            b,
        ).body

    assert key(req('{"session_id":"a"}', "object")) == key(req('{"session_id":"b"}', "object"))
    assert key(req('{"session_id":"a"}', "object")) != key(req('{"session_id":"a"}', "string"))
