"""Volatile spans in replay: the matcher, the replay server, ``looptap replay``, a fork's prefix and
the pytest plugin tolerate a date, an id, a temp path, the cwd or a loopback port the same way,
say what they tolerated, can be told not to, and still fail on a real change."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from looptap.cassettes.cli import build_parser
from looptap.cassettes.matching import (
    Matcher,
    Miss,
    Recorded,
    Tolerated,
    VolatileSpans,
    request_key,
)
from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.fork import ForkReplay, parse_from
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.replay.serving.server import ReplayServer
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import (
    USER,
    chat_exchange,
    chat_request,
    chat_response,
    raw_request,
    write,
)
from tests.replay.test_plugin import NOPLUG, _clean_env, expect  # noqa: F401 (_clean_env: autouse here too)

PATH = "/v1/chat/completions"
MONDAY = {
    "role": "system",
    "content": "Answer with the weather tool. Today's date is 2026-11-24. "
    "Working directory: /home/alice/proj",
}
TUESDAY = {
    "role": "system",
    "content": "Answer with the weather tool. Today's date is 2026-11-25. "
    "Working directory: /home/bob/checkout",
}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_A1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ],
}


def result(text: str) -> dict[str, object]:
    return {"role": "tool", "tool_call_id": "call_A1", "content": text}


MONDAY_RESULT = result(
    "sunny, 21 C (request 123e4567-e89b-12d3-a456-426614174000, cache /tmp/tmpk3j_x9qa, took 1.20s)"
)
TUESDAY_RESULT = result(
    "sunny, 21 C (request 9b2f64c1-7d3e-4a5b-8c6d-0e1f2a3b4c5d, cache /tmp/tmpz8w_q2rt, took 0.93s)"
)
#: The recording's cwd is Alice's; this process runs in Bob's checkout.
CONTEXT = VolatileSpans(
    cwd="/home/bob/checkout", home="/home/bob", recorded_cwd=["/home/alice/proj"]
)


def monday() -> list[Exchange]:
    return [
        chat_exchange(
            [MONDAY, USER], chat_response(call=("call_A1", "get_weather", '{"city":"Paris"}'))
        ),
        chat_exchange([MONDAY, USER, CALL, MONDAY_RESULT], chat_response("It is sunny in Paris.")),
    ]


def test_a_run_replayed_the_next_day_elsewhere_matches_and_says_what_it_tolerated() -> None:
    m = Matcher(monday(), volatile=CONTEXT)
    first = m.match("POST", PATH, [], chat_request([TUESDAY, USER]))
    assert isinstance(first, Recorded) and first.index == 0
    assert m.tolerated[0] == [
        Tolerated(("messages", 0, "content"), "date", "2026-11-24", "2026-11-25"),
        Tolerated(("messages", 0, "content"), "cwd", "/home/alice/proj", "/home/bob/checkout"),
    ]
    second = m.match("POST", PATH, [], chat_request([TUESDAY, USER, CALL, TUESDAY_RESULT]))
    assert isinstance(second, Recorded) and second.index == 1
    assert [
        (t.detector, t.recorded, t.live)
        for t in m.tolerated[1]
        if t.path == ("messages", 3, "content")
    ] == [
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "9b2f64c1-7d3e-4a5b-8c6d-0e1f2a3b4c5d"),
        ("tmp", "/tmp/tmpk3j_x9qa", "/tmp/tmpz8w_q2rt"),
        ("duration", "1.20s", "0.93s"),
    ]


def test_turned_off_the_same_requests_miss() -> None:
    m = Matcher(monday(), volatile=False)
    miss = m.match("POST", PATH, [], chat_request([TUESDAY, USER]))
    assert isinstance(miss, Miss)
    assert [c.where for c in miss.changes] == ["messages[0].content"]
    assert m.tolerated == {}


def test_a_real_change_beside_a_tolerated_one_still_misses_with_its_path() -> None:
    """A changed temperature in the tool result is not volatile: the replay fails closed, and the
    diff names the path as it always did (the uuid beside it shown as compared: ``<uuid:1>``)."""
    m = Matcher(monday(), volatile=CONTEXT)
    assert isinstance(m.match("POST", PATH, [], chat_request([TUESDAY, USER])), Recorded)
    changed = result(str(TUESDAY_RESULT["content"]).replace("21 C", "9 C"))
    miss = m.match("POST", PATH, [], chat_request([TUESDAY, USER, CALL, changed]))
    assert isinstance(miss, Miss)
    assert [c.where for c in miss.changes] == ["messages[3].content"]
    assert (
        "sunny, 9 C (request <uuid:1>, cache <tmp:1>, took <duration>)"
        in miss.changes[0].describe()
    )
    assert any(v.layer == "C" for v in miss.verdicts)


def test_placeholder_text_sent_as_such_is_not_a_tolerated_value() -> None:
    """A request that literally says ``<date>`` is not the request that had a date there."""
    literal = {"role": "system", "content": str(MONDAY["content"]).replace("2026-11-24", "<date>")}
    assert isinstance(
        Matcher(monday(), volatile=CONTEXT).match("POST", PATH, [], chat_request([literal, USER])),
        Miss,
    )
    a = request_key("POST", PATH, [], chat_request([literal, USER]), volatile=CONTEXT)
    b = request_key("POST", PATH, [], chat_request([MONDAY, USER]), volatile=CONTEXT)
    assert a.body == b.body and a.digest != b.digest


def test_ids_renamed_consistently_are_tolerated_and_a_swap_is_not() -> None:
    """Numbered by first appearance in the request: another run's uuids that pair the same way
    match; the same two uuids crossed over (a result given to the wrong request) do not."""
    a, b = "123e4567-e89b-12d3-a456-426614174000", "9b2f64c1-7d3e-4a5b-8c6d-0e1f2a3b4c5d"
    c, d = "0f0e0d0c-0b0a-4909-8807-060504030201", "11111111-2222-4333-8444-555555555555"

    def sent(x: str, y: str, z: str) -> bytes:
        return chat_request(
            [
                {"role": "user", "content": f"job {x} then job {y}"},
                {"role": "user", "content": f"result of job {z}: done"},
            ]
        )

    key = request_key("POST", PATH, [], sent(a, b, a), volatile=CONTEXT).digest
    assert request_key("POST", PATH, [], sent(c, d, c), volatile=CONTEXT).digest == key
    assert request_key("POST", PATH, [], sent(c, d, d), volatile=CONTEXT).digest != key


def test_a_dated_version_is_a_version() -> None:
    """MCP's ``protocolVersion: "2025-11-25"`` names what the server speaks: never tolerated."""
    def init(version: str) -> bytes:
        return (
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"'
            f'{version}","capabilities":{{}}}}}}'
        ).encode()

    a = request_key("POST", "/mcp", [], init("2025-06-18"), volatile=CONTEXT)
    assert (
        a.spans == ()
        and a.digest != request_key("POST", "/mcp", [], init("2025-11-25"), volatile=CONTEXT).digest
    )


def test_request_key_without_detectors_is_unchanged() -> None:
    """``looptap diff`` and the other callers of ``request_key`` keep comparing text as sent."""
    key = request_key("POST", PATH, [], chat_request([MONDAY, USER]))
    assert key.spans == () and key.body["messages"][0]["content"] == MONDAY["content"]


def test_the_server_serves_the_recording_and_notes_what_it_tolerated(tmp_path: Path) -> None:
    cas = write(tmp_path / "run.jsonl", monday())
    # (the recording's cwd is Alice's; the default is this process's)
    with ReplayServer(cas, volatile=CONTEXT) as srv:
        status, _, chunks = raw_request(srv.url, "POST", PATH, chat_request([TUESDAY, USER]))
        assert status == 200
        assert b"call_A1" in b"".join(c for _, c in chunks)  # served as recorded: nothing rewritten
        notes = srv.served[0].notes
        lines = srv.report_lines()
    assert notes == [
        "tolerated: date at messages[0].content: recorded '2026-11-24', this request '2026-11-25'",
        "tolerated: cwd at messages[0].content: recorded '/home/alice/proj', this request "
        "'/home/bob/checkout'",
    ]
    assert (
        "1 recorded round trip answered a request that differed only in what was tolerated"
        in "\n".join(lines)
    )


def test_the_server_turned_off_answers_the_miss(tmp_path: Path) -> None:
    shifted = {
        "role": "system",
        "content": str(MONDAY["content"]).replace("2026-11-24", "2026-11-25"),
    }
    cas = write(tmp_path / "run.jsonl", monday())
    with ReplayServer(cas) as srv:
        assert raw_request(srv.url, "POST", PATH, chat_request([shifted, USER]))[0] == 200
    with ReplayServer(cas, volatile=False) as srv:
        assert raw_request(srv.url, "POST", PATH, chat_request([shifted, USER]))[0] != 200
        assert len(srv.misses) == 1


def test_a_forks_prefix_tolerates_them_as_replay_does() -> None:
    """Before the cursor a request that differs only in volatile spans is answered from the
    recording (nothing goes live: the live router has nowhere to send it); off, it is a
    divergence."""
    for volatile, served in ((True, 200), (False, 400)):
        with ReplayServer(
            monday(),
            cursor=Cursor(parse_cursor("turn=1"), live_router({})),
            volatile=CONTEXT if volatile else False,
        ) as srv:
            status, _, _ = raw_request(srv.url, "POST", PATH, chat_request([TUESDAY, USER]))
            assert status == served
            assert (
                srv.served[0].notes[:1]
                == [
                    "tolerated: date at messages[0].content: recorded "
                    "'2026-11-24', this request '2026-11-25'"
                ]
            ) is volatile


def test_a_request_past_the_cursor_is_not_listed_as_tolerated() -> None:
    """At the cursor the request matches its recorded turn only through the date and goes live:
    its recorded answer was not served, so nothing of it is listed as tolerated (the prefix's
    turn 0 is); the branch's note and ``show`` read this list as turns served from the origin."""
    from looptap.cassettes.matching import turn_entries
    from tests.support.scripted import Reply, ScriptedUpstream

    with (
        ScriptedUpstream(lambda req: Reply.say("live")) as up,
        ReplayServer(
            monday(),
            cursor=Cursor(parse_cursor("turn=1"), live_router({"openai": up.url})),
            volatile=CONTEXT,
        ) as srv,
    ):
        for body in (
            chat_request([TUESDAY, USER]),
            chat_request([TUESDAY, USER, CALL, TUESDAY_RESULT]),
        ):
            assert raw_request(srv.url, "POST", PATH, body)[0] == 200
        # turn 0 served, turn 1 live
        assert len(srv.matcher.played()) == 1 and srv.matcher.unplayed() == []  # turn 1: live
        assert [
            (t["turn"], [e["by"] for e in t["tolerated"]]) for t in turn_entries(srv.matcher)
        ] == [(0, ["date", "cwd"])]
        assert (
            "1 recorded round trip answered a request that differed only in what was tolerated"
            in "\n".join(srv.report_lines())
        )


def test_the_commands_have_the_off_switch(tmp_path: Path) -> None:
    assert (
        build_parser("replay").parse_args(["replay", "run.jsonl", "--no-volatile"]).no_volatile
        is True
    )
    assert build_parser("replay").parse_args(["replay", "run.jsonl"]).no_volatile is False
    run = write(tmp_path / "run.jsonl", monday())
    source = parse_from(f"{run}@turn=1")
    assert ForkReplay(source, volatile=False).plan({}).volatile is False
    assert ForkReplay(source).plan({}).volatile is True


pytest_plugins = ["pytester"]

DATED_AGENT = '''
import datetime, uuid
import pytest
from openai import OpenAI

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]

def weather(city):
    return f"sunny, 21 C (request {uuid.uuid4()})"

def agent():
    client = OpenAI(max_retries=0)
    system = {"role": "system", "content": f"Answer with the weather tool. Today's date is {datetime.date.today().isoformat()}."}
    msgs = [system, {"role": "user", "content": "Weather in Paris?"}]
    for _ in range(2):
        m = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
        if not m.tool_calls:
            return m.content
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in m.tool_calls]})
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": weather(c.function.arguments)} for c in m.tool_calls]

@pytest.mark.looptap("cassettes/loop.jsonl"MARK)
def test_loop(looptap):
    assert agent() == "It is sunny in Paris."
'''  # noqa: E501


def _dated(pytester: pytest.Pytester, code: str = DATED_AGENT, mark: str = "") -> None:
    """The agent above, recorded a year ago (another date, another uuid in its tool result)."""
    system = {
        "role": "system",
        "content": "Answer with the weather tool. Today's date is 2025-01-02.",
    }
    recorded = result("sunny, 21 C (request 123e4567-e89b-12d3-a456-426614174000)")
    pytester.makepyfile(test_inner=textwrap.dedent(code.replace("MARK", mark)))
    (pytester.path / "cassettes").mkdir(exist_ok=True)
    write(
        pytester.path / "cassettes" / "loop.jsonl",
        [
            chat_exchange(
                [system, USER], chat_response(call=("call_A1", "get_weather", '{"city":"Paris"}'))
            ),
            chat_exchange([system, USER, CALL, recorded], chat_response("It is sunny in Paris.")),
        ],
    )


def test_pytest_replay_of_a_dated_agent_passes_and_a_real_change_fails(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("openai")
    _dated(pytester)
    pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none").assert_outcomes(passed=1)
    _dated(pytester, DATED_AGENT.replace("sunny, 21 C", "sunny, 22 C"))
    failed = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    failed.assert_outcomes(failed=1)
    expect(failed, "messages[3].content")


@pytest.mark.parametrize(
    ("how", "mark", "ini"),
    [
        ("option", "", ""),
        ("marker", ", volatile=False", ""),
        ("ini", "", "[pytest]\nlooptap_volatile = false\n"),
        ("looptap.toml", "", "volatile = false\n"),
        ("pyproject.toml", "", "[tool.looptap]\nvolatile = false\n"),
    ],
)
def test_pytest_replay_turned_off_fails_on_the_date(
    pytester: pytest.Pytester, how: str, mark: str, ini: str
) -> None:
    pytest.importorskip("openai")
    _dated(pytester, mark=mark)
    if how == "ini":
        pytester.makefile(".ini", pytest=ini)
    elif ini:  # the project's file: beside the cassettes, or its pyproject.toml
        (pytester.path / ("cassettes" if how == "looptap.toml" else "") / how).write_text(ini)
    args = ["--looptap-no-volatile"] if how == "option" else []
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none", *args)
    result.assert_outcomes(failed=1)
    expect(result, "messages[0].content")
