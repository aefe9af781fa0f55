"""``looptap verify`` finds 23 vendors' key formats in the six forms a key takes in a cassette.

Each key is written, unredacted (the record is encoded directly, as a careless tool or an old
looptap would), into a cassette: as plain text in a message, inside JSON held in a JSON string
(tool-call arguments: escaped quotes around it), ``\\u``-escaped in a stream's event, split across
a stream's events (1–9 characters each), base64 in a ``data:`` URL, and URL-encoded (every
character ``%XX``) in the URL. ``verify`` must report every (vendor, form) and exit 1; the clean
twin (the same records without the keys) exits 0.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import dumps_record, exchange_to_record
from looptap.cassettes.verify import scan_file
from looptap.cassettes.wire import Exchange
from tests.support.secret_streams import chat_sse, pieces, spoken, vendor_keys

FORMS = ("plain", "json-escaped", "u-escaped", "split", "data-url", "url-encoded")
KEYS = vendor_keys()


def _exchange(form: str, text: str) -> Exchange:
    url = "https://api.openai.com/v1/chat/completions"
    content = "nothing to see"
    args = json.dumps({"city": "Paris"})
    chunks = [(0.01 * i, e) for i, e in enumerate(chat_sse(pieces("It is sunny in Paris.")))]
    if form == "plain":
        content = f"my key is {text}."
    elif form == "json-escaped":
        args = json.dumps({"config": {"key": text}})  # JSON inside a JSON string: stored as \"…\"
    elif form == "u-escaped":
        escaped = "".join(f"\\u{ord(c):04x}" for c in text)
        chunks = [
            (
                0.01,
                b'data: {"choices":[{"index":0,"delta":{"content":"'
                + escaped.encode()
                + b'"}}]}\n\n',
            ),
            (0.02, b"data: [DONE]\n\n"),
        ]
    elif form == "split":
        chunks = [(0.01 * i, e) for i, e in enumerate(chat_sse(pieces(f"your key: {text} ok")))]
    elif form == "data-url":
        content = "see data:text/plain;base64," + base64.b64encode(f"key: {text}".encode()).decode()
    elif form == "url-encoded":
        url += "?note=" + "".join(f"%{b:02X}" for b in text.encode())
    body = {
        "model": "gpt-4o",
        "stream": True,
        "messages": [
            {"role": "user", "content": content},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
                ],
            },
        ],
    }
    return Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        json.dumps(body).encode(),
        200,
        "OK",
        [("content-type", "text/event-stream")],
        chunks,
        started=1_700_000_000.0,
    )


def _cassette(path: Path, with_keys: bool) -> dict[int, tuple[str, str]]:
    """One record per (vendor, form) after a clean first record; returns line → (vendor, form)."""
    with CassetteWriter(path) as w:
        w.append(_exchange("plain", "hello"))
    where: dict[int, tuple[str, str]] = {}
    line = 3  # the header, the clean record
    with path.open("ab") as f:
        for vendor, key in KEYS.items():
            for form in FORMS:
                text = spoken(vendor, key) if with_keys else "no key here"
                f.write(dumps_record(exchange_to_record(_exchange(form, text), line)))
                where[line] = (vendor, form)
                line += 1
    return where


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, tuple[str, str]]]:
    path = tmp_path_factory.mktemp("verify") / "leaky.jsonl"
    return path, _cassette(path, with_keys=True)


def test_every_format_in_every_form_is_found(
    leaky: tuple[Path, dict[int, tuple[str, str]]],
) -> None:
    path, where = leaky
    assert len(KEYS) >= 20
    finds = scan_file(path)
    found = {where[f.line] for f in finds if f.line in where}
    missing = sorted(set(where.values()) - found)
    assert not missing, f"{len(missing)} of {len(where)} not found: {missing}"
    # Reported masked, never whole.
    report = "\n".join(str(f) for f in finds)
    assert not [v for v, k in KEYS.items() if k in report]


def test_a_split_key_is_reported_as_found_in_the_reassembled_stream(
    leaky: tuple[Path, dict[int, tuple[str, str]]],
) -> None:
    path, where = leaky
    split = {n for n, (_, form) in where.items() if form == "split"}
    fields = {f.field for f in scan_file(path) if f.line in split}
    assert fields == {"response.body (reassembled)"}, fields


def test_the_clean_twin_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "clean.jsonl"
    _cassette(path, with_keys=False)
    assert scan_file(path) == []


def test_a_key_split_across_websocket_session_messages_is_found(tmp_path: Path) -> None:
    """A session kept as its messages (``text/x-looptap-websocket``, one stored piece): its JSON
    messages are reassembled like a stream's events."""
    from looptap.cassettes.recording.websocket import WsSession

    key = KEYS["gitlab"]
    session = WsSession("wss://example.com/v1/socket", [], started=1_700_000_000.0)
    exchanges = []
    for i, piece in enumerate(pieces(f"the key is {key} ok")):
        exchanges += session.message(
            False, json.dumps({"type": "delta", "delta": piece}), 1_700_000_000.0 + i
        )
    exchanges += session.end(1000)
    assert [ex.response_header("content-type") for ex in exchanges] == ["text/x-looptap-websocket"]
    path = tmp_path / "ws.jsonl"
    with CassetteWriter(path) as w:
        w.append(_exchange("plain", "hello"))
    with path.open("ab") as f:
        f.write(dumps_record(exchange_to_record(exchanges[0], 2)))
    finds = scan_file(path)
    assert [(f.line, f.field) for f in finds] == [(3, "response.body (reassembled)")], finds
