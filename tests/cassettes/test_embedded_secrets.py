"""Credential names inside JSON held in a string (issue 42): docs/redaction.md says these names are
always redacted, in JSON inside JSON strings too; a short value (``{"password": "hunter2"}``,
``"pin": "4711"``) stayed on disk because only values of 8+ characters were learned and scrubbed.
Now the value under such a name is masked whatever its length (the JSON text kept otherwise as it
was), in a tool call's arguments, a tool result's content, streamed arguments, an edit mark's
client value; names that are not credentials (``max_tokens``, ``tokens``, ``{"key": "color"}``)
stay; and ``looptap verify`` reports such a value left in an existing file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import chat_exchange, chat_response, sse_exchange
from tests.support import progress

ARGS = '{"user": "bob", "password": "hunter2", "pin": 4711, "max_tokens": 5, "key": "color"}'
RESULT = '{"ok": true, "pin": "4711", "tokens": 3}'


def _history() -> Exchange:
    call = {"id": "call_1", "type": "function", "function": {"name": "login", "arguments": ARGS}}
    msgs = [
        {"role": "user", "content": "log in"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
    ]
    return chat_exchange(msgs, chat_response("done"))


def _streamed() -> Exchange:
    def event(args: str, first: bool = False) -> bytes:
        tc: dict[str, object] = {"index": 0, "function": {"arguments": args}}
        if first:
            tc.update(id="call_2", type="function", function={"name": "login", "arguments": ""})
        return (
            b"data: "
            + orjson.dumps(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"tool_calls": [tc]}}],
                }
            )
            + b"\n\n"
        )

    pieces = ['{"pass', 'word": "hun', 'ter2", "pi', 'n": 47', '11, "max_tok', 'ens": 7}']
    return sse_exchange([event("", True), *(event(p) for p in pieces), b"data: [DONE]\n\n"])


def _verify(path: Path) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "verify", str(path)],
        capture_output=True,
        text=True,
    )


def test_short_values_under_credential_names_in_json_strings_are_redacted_and_verify_agrees(
    tmp_path: Path,
) -> None:
    from looptap.cassettes.reading import open_run

    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        w.append(_history())
        w.append(_streamed())
    raw = path.read_bytes()
    assert b"hunter2" not in raw and b"4711" not in raw
    recs = [orjson.loads(ln) for ln in raw.splitlines()[1:]]
    args = recs[0]["request"]["body"]["json"]["messages"][1]["tool_calls"][0]["function"][
        "arguments"
    ]
    # the value masked, the JSON text otherwise as the agent wrote it (spaces, order, other fields)
    assert (
        args == '{"user": "bob", "password": "[REDACTED]", "pin": '
        '"[REDACTED]", "max_tokens": 5, "key": "color"}'
    )
    result = recs[0]["request"]["body"]["json"]["messages"][2]["content"]
    assert result == '{"ok": true, "pin": "[REDACTED]", "tokens": 3}'
    streamed = open_run(path, whole=True).roundtrips[1].response
    assert streamed is not None and [tc.arguments for tc in streamed.tool_calls] == [
        {"password": "[REDACTED]", "pin": "[REDACTED]", "max_tokens": 7}
    ]
    proc = _verify(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_reports_a_short_credential_left_in_json_in_a_string(tmp_path: Path) -> None:
    """A file an older looptap wrote (or any tool): the value is reported by field, never
    printed."""
    rec = {
        "type": "exchange",
        "seq": 0,
        "method": "POST",
        "url": "https://api.openai.com/v1/chat/completions",
        "request": {
            "headers": [["content-type", "application/json"]],
            "body": {
                "json": {
                    "messages": [
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "id": "c",
                                    "type": "function",
                                    "function": {
                                        "name": "login",
                                        "arguments": '{"password": "hunter2"}',
                                    },
                                }
                            ],
                        },
                        {
                            "role": "tool",
                            "tool_call_id": "c",
                            "content": '{"pin": "4711", "max_tokens": 12, "key": "color"}',
                        },
                    ]
                }
            },
        },
        "response": None,
    }
    path = tmp_path / "old.jsonl"
    path.write_bytes(
        b'{"type":"header","format":"looptap-cassette","format_version":1}\n'
        + orjson.dumps(rec)
        + b"\n"
    )
    proc = _verify(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    assert "function.arguments" in lines[0] and "'password'" in lines[0] and "7 chars" in lines[0]
    assert "messages[1].content" in lines[1] and "'pin'" in lines[1]
    assert "hunter" not in proc.stdout and "4711" not in proc.stdout and "4711" not in proc.stderr


def test_an_edit_marks_client_value_is_redacted_like_the_request() -> None:
    """The mark's ``before`` (what the client sent, never sent upstream) goes through the same
    redaction as the cassette: a tool result holding ``{"password": "hunter2"}`` is masked there."""
    from looptap.cassettes.recording import Redactor
    from looptap.cassettes.replay.live.edits import parse_edit
    from looptap.cassettes.replay.live.rewrite import apply_edits

    body = orjson.dumps(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_A1", "content": '{"password": "hunter2"}'},
            ],
        }
    )
    _new, marks = apply_edits(
        "POST", "/v1/chat/completions", body, [parse_edit("tool_result[call_A1]=STORM")], "turn=1"
    )
    ex = _history()
    ex.edits = marks
    red = Redactor().exchange(ex)
    assert red.edits is not None and red.edits[0]["before"] == '{"password": "[REDACTED]"}'


def test_the_reader_of_json_in_strings_is_bounded() -> None:
    from looptap.cassettes.recording import EMBEDDED_MAX, credential_values

    big = '{"password": "x", "pad": "' + "a" * EMBEDDED_MAX + '"}'
    assert credential_values(big) == []  # over the bound: not read (the scrub by format still runs)
    cut = '{"password": "hunt'  # a stream's arguments so far
    assert [(n, cut[s:e]) for n, s, e, _ in credential_values(cut)] == [("password", "hunt")]
    # a schema's parameter names
    assert credential_values('{"properties": {"password": {"type": "string"}}}') == []
    assert credential_values('["password", "hunter2"]') == []  # a word, not a name


def test_a_document_is_redacted_as_a_cassette_is() -> None:
    """The public function a report written from recorded or live data goes through
    (Redactor.document): names, JSON in strings, learned values, formats."""
    from looptap.cassettes.recording import Redactor

    key = "sk-proj-" + "Q7w9E2r4T6y8U1i3" * 3
    r = Redactor()
    r.headers([("authorization", f"Bearer {key}")])  # the key the run sent: learned
    doc = {
        "turns": [
            {
                "answer": f"your key is {key}",
                "arguments": '{"password": "hunter2"}',
                "max_tokens": 5,
                "api_key": "abc",
            }
        ]
    }
    out = r.document(doc)
    text = orjson.dumps(out).decode()
    assert (
        key not in text
        and "hunter2" not in text
        and '"api_key":"[REDACTED]"' in text
        and '"max_tokens":5' in text
    )
    assert doc["turns"][0]["api_key"] == "abc"  # a copy
    assert r.document({"plain": 1}) == {"plain": 1}


def test_verify_reports_a_credential_left_under_its_name_in_a_stored_json_body(
    tmp_path: Path,
) -> None:
    rec = {
        "type": "exchange",
        "seq": 0,
        "method": "POST",
        "url": "https://example.test/login",
        "request": {
            "headers": [["content-type", "application/json"]],
            "body": {
                "json": {
                    "user": "bob",
                    "password": "hunter2",
                    "max_tokens": 12,
                    "key": "color",
                    "pin": 0,
                    "secret": "[REDACTED]",
                }
            },
        },
        "response": None,
    }
    path = tmp_path / "other.jsonl"
    path.write_bytes(
        b'{"type":"header","format":"looptap-cassette","format_version":1}\n'
        + orjson.dumps(rec)
        + b"\n"
    )
    proc = _verify(path)
    assert proc.returncode == 1 and proc.stdout.splitlines() == [
        f"{path}:2:request.body.json.password: credential field 'password' (7 chars)"
    ], proc.stdout
