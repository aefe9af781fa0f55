"""The E findings that judge a call's arguments, weighed against what the tool answered (issue 84,
item 3): ``E.invented_argument`` and ``E.placeholder_argument`` of a call the tool's own HTTP served
(linked by its arguments). A value the tool holds — a 2xx answer that carries it as data and says
nothing is missing — was no invention: no finding. A value the tool said it does not know (404,
410, an answer that says not found and names it) confirms the finding, which says so. Anything
else leaves the finding as it was without the tools' HTTP. Each negative case beside the positive
one; the same on the streaming reader (turns not kept) and the batch analysis (kept), and for a
call still awaiting when the run ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.analysis import Finding, analyse
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.cassettes.test_tool_http import tool

CHAT = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {
        p: {"type": "string"}}}}}
    for n, p in (("get_order", "order_id"), ("read_file", "path"), ("find_user", "email"))
]  # fmt: skip
ASKED = {"role": "user", "content": "Where is my most recent order?"}


def chat(messages: list[Any], call: tuple[str, str, dict[str, Any]] | None) -> Exchange:
    msg: dict[str, Any] = {"role": "assistant", "content": None if call else "Done."}
    if call:
        i, n, a = call
        msg["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": orjson.dumps(a).decode()},
            }
        ]
    resp = {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if call else "stop"}],  # noqa: E501
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }  # fmt: skip
    return Exchange(
        "POST", CHAT, [("content-type", "application/json")],
        orjson.dumps({"model": "gpt-4o", "messages": messages, "tools": TOOLS}),
        status=200, response_headers=[("content-type", "application/json")],
        response_chunks=[(0.1, orjson.dumps(resp))],
    )  # fmt: skip


def run_of(
    call: tuple[str, str, dict[str, Any]],
    http: list[Exchange],
    result: str,
    *,
    ends: bool = True,
    asked: dict[str, str] = ASKED,
) -> list[Exchange]:
    """The model's call, the tool's HTTP for it, then (``ends``) the result sent back."""
    i, n, a = call
    made = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": orjson.dumps(a).decode()},
            }
        ],
    }
    back = [asked, made, {"role": "tool", "tool_call_id": i, "content": result}]
    return [chat([asked], call), *http, *([chat(back, None)] if ends else [])]


def orders_run() -> list[Exchange]:
    """Three conversations: an invented id the tool does not know (404), one it holds (200), and
    one whose call is still awaiting its result when the run ends (its tool said 404)."""
    held = b'{"order_id": "A1001", "status": "shipped"}'
    return [
        *run_of(ORDER, [tool("GET", URL, 404, b'{"error": "not found"}')], "not found"),
        *run_of(
            ("call_A", "get_order", {"order_id": "A1001"}),
            [tool("GET", "https://shop.example.com/api/orders/A1001", 200, held)],
            held.decode(),
            asked={"role": "user", "content": "And my other order?"},
        ),
        *run_of(
            ("call_B", "get_order", {"order_id": "B2002"}),
            [tool("GET", "https://shop.example.com/api/orders/B2002", 404, b"")],
            "",
            ends=False,
            asked={"role": "user", "content": "And the third?"},
        ),
    ]


def both(tmp_path: Path, exchanges: list[Exchange]) -> list[Finding]:
    """The findings warning or worse, by the batch analysis and the streaming reader (equal)."""
    path = tmp_path / f"run{len(list(tmp_path.iterdir()))}.jsonl"
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    batch = [f for f in analyse(exchanges).findings if f.severity != "info"]
    streamed = [f for f in open_run(path, whole=True).analysis.findings if f.severity != "info"]
    assert [(f.code, f.seq, f.message) for f in batch] == [
        (f.code, f.seq, f.message) for f in streamed
    ]
    return streamed


ORDER = ("call_1", "get_order", {"order_id": "W7731"})
URL = "https://shop.example.com/api/orders/W7731"


@pytest.mark.parametrize("ends", [True, False])
def test_an_identifier_the_tool_holds_is_no_invention(tmp_path: Path, ends: bool) -> None:
    got = b'{"order_id": "W7731", "status": "shipped", "items": 2}'
    found = both(tmp_path, run_of(ORDER, [tool("GET", URL, 200, got)], got.decode(), ends=ends))
    assert found == []


def test_twin_without_the_tools_http_the_identifier_is_invented(tmp_path: Path) -> None:
    (f,) = both(tmp_path, run_of(ORDER, [], '{"order_id": "W7731", "status": "shipped"}'))
    assert (f.code, f.seq, f.details["value"]) == ("E.invented_argument", 0, "W7731")
    assert "tool_answer" not in f.details


@pytest.mark.parametrize("ends", [True, False])
@pytest.mark.parametrize(
    ("status", "got"),
    [
        (404, b'{"error": "Not Found"}'),
        (200, b'{"error": "order W7731 not found"}'),  # an API that answers errors with 200
        (200, b'{"order_id": "W7731", "found": false}'),
        (422, b'{"detail": [{"loc": ["path", "order_id"], "msg": "invalid order id"}]}'),
    ],
)
def test_an_identifier_the_tool_does_not_know_is_confirmed(
    tmp_path: Path, status: int, got: bytes, ends: bool
) -> None:
    exchanges = run_of(ORDER, [tool("GET", URL, status, got)], got.decode(), ends=ends)
    (f,) = both(tmp_path, exchanges)
    assert (f.code, f.seq, f.severity) == ("E.invented_argument", 0, "warning")
    assert f.details["tool_answer"] == "rejected" and f.details["tool_http_seq"] == 1
    assert f.details["tool_status"] == status
    assert f"The tool's HTTP call #1 for this call answered {status}" in f.message


@pytest.mark.parametrize(
    ("status", "got", "why"),
    [
        (200, b'{"query": "W7731", "results": []}', "only the request echoed"),
        (200, b'{"order_id": "W7731", "status": "unknown"}', "a fault word, not a denial"),
        (200, b'{"order_id": "W7731", "ok": false}', "something failed, not said what"),
        (200, b'{"results": []}', "not carried"),
        (401, b'{"error": "invalid api key for W7731"}', "about the credentials"),
        (503, b'{"error": "order W7731: backend unavailable"}', "a server failure"),
        (400, b'{"error": "bad request"}', "says nothing of the value"),
    ],
)
def test_an_answer_that_says_neither_leaves_the_finding_as_it_was(
    tmp_path: Path, status: int, got: bytes, why: str
) -> None:
    (f,) = both(tmp_path, run_of(ORDER, [tool("GET", URL, status, got)], got.decode()))
    assert f.code == "E.invented_argument" and "tool_answer" not in f.details, why


def test_an_identifier_not_sent_is_not_weighed(tmp_path: Path) -> None:
    """The tool asked for something else (its HTTP linked as the only call awaiting): its answer
    carries the value, but it was not asked about it."""
    got = b'{"orders": [{"order_id": "W7731"}]}'
    http = [tool("GET", "https://shop.example.com/api/orders?latest=1", 200, got)]
    (f,) = both(tmp_path, run_of(ORDER, http, got.decode()))
    assert f.code == "E.invented_argument" and "tool_answer" not in f.details


def test_one_call_found_it_another_did_not_leaves_it(tmp_path: Path) -> None:
    http = [
        tool("GET", URL, 404, b'{"error": "not found"}'),
        tool("GET", "https://shop.example.com/api/archive/W7731", 200, b'{"order_id": "W7731"}'),
    ]
    (f,) = both(tmp_path, run_of(ORDER, http, '"W7731 archived"'))
    assert f.code == "E.invented_argument" and "tool_answer" not in f.details


def test_a_placeholder_the_tool_rejected_is_confirmed(tmp_path: Path) -> None:
    call = ("call_2", "read_file", {"path": "/path/to/report.csv"})
    url = "https://files.example.net/v1/read?path=/path/to/report.csv"
    (f,) = both(tmp_path, run_of(call, [tool("GET", url, 404, b"no such file")], "no such file"))
    assert (f.code, f.details["tool_answer"], f.details["tool_status"]) == (
        "E.placeholder_argument", "rejected", 404,
    )  # fmt: skip


def test_a_placeholder_looking_value_the_tool_holds_is_a_value(tmp_path: Path) -> None:
    call = ("call_3", "find_user", {"email": "your_email@corp.test"})
    got = b'{"users": [{"email": "your_email@corp.test", "id": 7}]}'
    http = [tool("GET", "https://crm.corp.test/users?email=your_email@corp.test", 200, got)]
    assert both(tmp_path, run_of(call, http, got.decode())) == []
    # twin: its answer holds another user
    other = b'{"users": [{"email": "ann@corp.test", "id": 8}]}'
    http = [tool("GET", "https://crm.corp.test/users?email=your_email@corp.test", 200, other)]
    (f,) = both(tmp_path, run_of(call, http, other.decode()))
    assert f.code == "E.placeholder_argument" and "tool_answer" not in f.details


def test_three_conversations_each_weighed_on_its_own(tmp_path: Path) -> None:
    found = both(tmp_path, orders_run())
    assert [(f.code, f.details["value"], f.details.get("tool_answer")) for f in found] == [
        ("E.invented_argument", "W7731", "rejected"),
        ("E.invented_argument", "B2002", "rejected"),
    ]
