"""A cut answer continued by the fork (``--edit continue=N``, issue 46's C repair of a truncated
turn): the upstream's answer cut at the token cap is continued in the API's own form, and the
client gets ONE answer joining the parts, in the format it asked for (JSON, or the API's event
stream when it streamed), read by the real SDKs; each continuation request is marked as the fork's.

In process: a replay server with a cursor at turn 0 of a one-turn recording, the live upstream a
scripted fake (requests counted there). The joining itself is checked per API on rendered bodies.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from looptap.cassettes.models import FinishReason, NormalisedResponse, Part, Usage
from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.replay.live.edits import EditError, parse_edit
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

CUT = "The weather in Paris is"
REST = " sunny today."
#: Per API family: its path, a request of it, and where its history is (the mark's path).
APIS: dict[str, tuple[str, dict[str, Any], str]] = {
    "chat": (
        "/v1/chat/completions",
        {
            "model": "gpt-4o-mini",
            "max_tokens": 60,
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
        },
        "messages",
    ),
    "responses": (
        "/v1/responses",
        {
            "model": "gpt-4o-mini",
            "max_output_tokens": 60,
            "input": [{"role": "user", "content": "Weather in Paris?"}],
        },
        "input",
    ),
    "anthropic": (
        "/v1/messages",
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 60,
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
        },
        "messages",
    ),
}


def _adapter(family: str) -> Any:
    from looptap.cassettes import providers

    path, body, _ = APIS[family]
    adapter = providers.detect("POST", urlsplit(path), body)
    assert adapter is not None
    return adapter


def _answer(text: str, cut: bool, output_tokens: int) -> NormalisedResponse:
    finish = FinishReason.TRUNCATED_LENGTH if cut else FinishReason.COMPLETE
    return NormalisedResponse(
        id="ans_1",
        model="m",
        parts=[Part(kind="text", text=text)],
        finish_reason=finish,
        usage=Usage(input_tokens=10, output_tokens=output_tokens),
        complete=True,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("family", list(APIS))
def test_the_parts_join_into_one_answer_in_the_format_the_client_asked(
    family: str, stream: bool
) -> None:
    """Each API's cut answer (as it sends it: JSON or its event stream) is read as cut, the
    continuation asks in the API's own form, and the parts join into one answer rendered as the
    client asked; reading that answer back gives the whole text, finished, the usage summed."""
    from looptap.cassettes.replay.live.continuation import (
        Continuation,
        cut_text,
        joined,
        parsed,
        rendered_for,
    )

    adapter = _adapter(family)
    path, request, history = APIS[family]
    client = orjson.dumps({**request, "stream": True} if stream else request)
    ctype = "text/event-stream" if stream else "application/json"
    first = adapter.replay.render_answer(
        _answer(CUT + " ", True, 60), stream, urlsplit(path), orjson.loads(client)
    )
    assert first is not None and first.content_type == ctype
    cut = parsed(
        adapter,
        "POST",
        "http://up" + path,
        client,
        200,
        [("content-type", ctype)],
        list(first.chunks),
    )
    assert cut is not None and cut_text(cut) == CUT + " "
    cont = Continuation(parse_edit("continue=3"), "turn=0", "k" * 43, adapter, client)
    made = cont.request(client, CUT + " ", [("content-type", "application/json")])
    assert made is not None
    body, headers, continues = made
    sent = orjson.loads(body)
    # a prefill: the final assistant message, without its trailing whitespace
    if family == "anthropic":
        assert sent["messages"][-1] == {"role": "assistant", "content": CUT} and continues == CUT
    elif family == "chat":
        assert (
            sent["messages"][-2] == {"role": "assistant", "content": CUT + " "}
            and sent["messages"][-1]["role"] == "user"
        )
    else:
        assert sent["input"][-2]["role"] == "assistant" and sent["input"][-2]["content"][0] == {
            "type": "output_text",
            "text": CUT + " ",
        }
        assert sent["input"][-1]["role"] == "user"
    assert sent[history][: len(request[history])] == request[history] and {
        k: v for k, v in sent.items() if k != history
    } == {k: v for k, v in orjson.loads(client).items() if k != history}
    from looptap.cassettes.wire import EDIT_HEADER, from_header

    marks = from_header(dict(headers)[EDIT_HEADER])
    assert marks == [
        {"edit": "continue", "selector": "turn=0", "path": [history], "before": request[history]}
    ], marks
    # the model goes on after the text it was given
    rest = REST.lstrip() if family != "anthropic" else REST
    more_r = adapter.replay.render_answer(_answer(rest, False, 5), stream, urlsplit(path), sent)
    more = parsed(
        adapter,
        "POST",
        "http://up" + path,
        body,
        200,
        [("content-type", ctype)],
        list(more_r.chunks),
    )
    assert more is not None and cut_text(more) is None
    one = rendered_for(adapter, path, client, joined(cut, [(continues, more)]))
    assert one is not None and one.content_type == ctype and (len(one.chunks) > 1) == stream
    back = parsed(
        adapter,
        "POST",
        "http://up" + path,
        client,
        200,
        [("content-type", ctype)],
        list(one.chunks),
    )
    assert (
        back is not None and back.text == CUT + REST and back.finish_reason == FinishReason.COMPLETE
    ), back
    assert back.usage is not None and back.usage.output_tokens == 65


def test_continue_wants_a_small_number_of_rounds() -> None:
    assert parse_edit("continue=3").value == "3"
    for bad in ("continue=0", "continue=99", "continue=x"):
        with pytest.raises(EditError, match="continue wants"):
            parse_edit(bad)


def _route(req: ScriptedRequest) -> Reply:
    """Cut at the cap unless the request carries the cut text (a continuation): then the rest."""
    if CUT.encode() in orjson.dumps(req.body):
        return Reply.say(REST if req.family == "anthropic" else REST.lstrip())
    return Reply.truncated(CUT + " ")


def _recorded(family: str, body: bytes) -> list[Exchange]:
    path, _, _ = APIS[family]
    answer = _adapter(family).replay.render_answer(
        _answer("recorded", False, 1), False, urlsplit(path), orjson.loads(body)
    )
    return [
        Exchange(
            "POST",
            "https://api.example" + path,
            [("content-type", "application/json")],
            body,
            200,
            "OK",
            [("content-type", "application/json")],
            [(0.0, answer.chunks[0])],
            seq=0,
        )
    ]


def _ask(family: str, url: str, request: dict[str, Any], stream: bool) -> tuple[str, str]:
    """The request through the family's real SDK; the text and finish reason it read."""
    if family == "anthropic":
        from anthropic import Anthropic

        ac = Anthropic(base_url=url, api_key="sk-ant-x", max_retries=0)
        if stream:
            with ac.messages.stream(**request) as s:
                m = s.get_final_message()
        else:
            m = ac.messages.create(**request)
        return "".join(b.text for b in m.content if b.type == "text"), str(m.stop_reason)
    from openai import OpenAI

    oc = OpenAI(base_url=url + "/v1", api_key="sk-x", max_retries=0)
    if family == "chat":
        if stream:
            text, finish = "", ""
            for chunk in oc.chat.completions.create(**request, stream=True):
                for c in chunk.choices:
                    text += c.delta.content or ""
                    finish = c.finish_reason or finish
            return text, finish
        r = oc.chat.completions.create(**request)
        return r.choices[0].message.content or "", r.choices[0].finish_reason
    if stream:
        with oc.responses.stream(**request) as s:
            final = s.get_final_response()
    else:
        final = oc.responses.create(**request)
    return final.output_text, final.status or ""


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("family", list(APIS))
def test_the_fork_continues_a_cut_answer_and_the_client_gets_one(family: str, stream: bool) -> None:
    _, request, history = APIS[family]
    asked = {**request, "stream": True} if stream else request
    with ScriptedUpstream(_route) as live:
        cursor = Cursor(
            parse_cursor("turn=0"),
            live_router({"openai": live.url, "anthropic": live.url}),
            edits=[parse_edit("continue=3")],
            edit_key="k" * 43,
        )
        with ReplayServer(_recorded(family, orjson.dumps(asked)), cursor=cursor) as srv:
            text, finish = _ask(family, srv.url, request, stream)
        assert text == CUT + REST and finish in ("stop", "end_turn", "completed"), (text, finish)
        assert [x.reply is not None and x.reply.cut for x in live.log] == [True, False], [
            x.line() for x in live.log
        ]
        assert CUT.encode() in orjson.dumps(live.log[1].request.body[history])
        served = srv.served[-1]
        assert any(
            "looptap continued it (1 continuation request, --edit continue)" in n
            for n in served.notes
        ), served.notes
        assert cursor.unapplied() == [] and cursor.continued == 1
        assert any(
            "edit continue: 1 answer cut at the token cap "
            "continued by looptap (1 continuation request)" in ln
            for ln in cursor.report_lines()
        )


def test_an_answer_not_cut_is_relayed_as_it_came_and_the_continue_is_no_error() -> None:
    request = APIS["chat"][1]
    with ScriptedUpstream(lambda req: Reply.say("Sunny.")) as live:
        cursor = Cursor(
            parse_cursor("turn=0"),
            live_router({"openai": live.url}),
            edits=[parse_edit("continue=3")],
            edit_key="k" * 43,
        )
        with ReplayServer(_recorded("chat", orjson.dumps(request)), cursor=cursor) as srv:
            text, finish = _ask("chat", srv.url, request, False)
    assert (text, finish) == ("Sunny.", "stop") and len(live.log) == 1
    assert (
        cursor.unapplied() == []
        and "edit continue: no answer sent live was cut at the token cap: nothing continued"
        in cursor.report_lines()[-1]
    )


def test_the_continuations_are_bounded() -> None:
    """An answer cut every time: the first and N continuation requests, then the client gets the
    parts joined, still cut (the API's own finish reason says so)."""
    request = APIS["chat"][1]
    with ScriptedUpstream(lambda req: Reply.truncated("more ")) as live:
        cursor = Cursor(
            parse_cursor("turn=0"),
            live_router({"openai": live.url}),
            edits=[parse_edit("continue=2")],
            edit_key="k" * 43,
        )
        with ReplayServer(_recorded("chat", orjson.dumps(request)), cursor=cursor) as srv:
            text, finish = _ask("chat", srv.url, request, False)
    assert len(live.log) == 3 and (text, finish) == ("more more more ", "length"), (text, finish)


def test_a_continuation_mark_says_the_request_was_looptaps_not_the_clients() -> None:
    """show and the inspector's message pane: a ``continue`` mark's request is looptap's own (the
    client sent none of it), not "client sent → …" as an edit of the client's request reads."""
    from looptap.cassettes.views import CONTINUED, edit_lines
    from looptap.inspector.widgets import client_sent

    marks = [
        {
            "edit": "continue",
            "item": "messages",
            "before": [{"role": "user", "content": "Weather in Paris?"}],
        },
        {"edit": "max_tokens", "item": "max_tokens", "before": 60},
    ]
    lines = edit_lines({"edits": marks})
    assert (
        lines[0].startswith(f"    edited: continue at messages: {CONTINUED} → ")
        and "client sent" not in lines[0]
    )
    assert "client sent → 60" in lines[1]
    pane = client_sent(marks).plain
    assert f"continue: {CONTINUED}" in pane and "max_tokens: the client sent" in pane
