"""Redaction never changes a reading (issue 54): a recording that carries a credential reads as
its clean twin does (the same traffic with the credential's name or value made plain): the same
conversations, the same warning-or-worse findings.

Each run is wire-faithful traffic (the streams :func:`tests.support.upstream.synth_stream` writes,
as docs/WIRE.md describes them; tool-call arguments streamed a few characters per event as models
do) written through the recording pipeline (:class:`CassetteWriter`: the recorder's redactor) and
read back as ``looptap show`` reads it. The three defects the issue names:

* a tool call streamed as ``{"password": "radiance"}`` was stored as ``{"password": [REDACTED]}``
  (a detector's match took the quotes), so ``E.arguments_not_json`` blamed the model and the echo
  compared different;
* a value learned from one round trip was masked in later requests but not where it first appeared
  (or the reverse), so a history sent back byte for byte compared different: a conversation split
  in two, ``C.assistant_not_echoed``;
* a Gemini stream of one event (a ``functionCall`` with a short password) was not masked by name,
  while the next request, which sends the call back, was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.recording import REDACTED
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.support.upstream import event_json, synth_stream

SCHEMA = {
    "type": "object",
    "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
}
URLS = {
    "openai_chat": "https://api.openai.com/v1/chat/completions",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"
    ":streamGenerateContent?alt=sse",
}


def _request(family: str, history: list[Any]) -> dict[str, Any]:
    if family == "openai_chat":
        tool = {"type": "function", "function": {"name": "login", "parameters": SCHEMA}}
        return {"model": "gpt-4o", "stream": True, "tools": [tool], "messages": history}
    if family == "anthropic":
        tool = {"name": "login", "input_schema": SCHEMA}
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": 512,
            "stream": True,
            "tools": [tool],
            "messages": history,
        }
    decl = {"functionDeclarations": [{"name": "login", "parameters": SCHEMA}]}
    return {"contents": history, "tools": [decl]}


def _answer(family: str, text: str, args: dict[str, Any] | None) -> dict[str, Any]:
    """A non-streamed answer: ``text``, or a call of ``login`` with ``args``."""
    if family == "openai_chat":
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if args is not None:
            fn = {"name": "login", "arguments": json.dumps(args)}
            msg["tool_calls"] = [{"id": "call_1", "type": "function", "function": fn}]
        finish = "tool_calls" if args is not None else "stop"
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        }
    if family == "anthropic":
        block = (
            {"type": "tool_use", "id": "toolu_1", "name": "login", "input": args}
            if args is not None
            else {"type": "text", "text": text}
        )
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [block],
            "stop_reason": "tool_use" if args is not None else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 9},
        }
    part = {"functionCall": {"name": "login", "args": args}} if args is not None else {"text": text}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 9},
    }


def _echo(family: str, text: str, args: dict[str, Any] | None) -> list[Any]:
    """What the client sends back of :func:`_answer`, and the tool's result."""
    if family == "openai_chat":
        if args is None:
            return [{"role": "assistant", "content": text}]
        fn = {"name": "login", "arguments": json.dumps(args)}
        call = {"id": "call_1", "type": "function", "function": fn}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "logged in"},
        ]
    if family == "anthropic":
        if args is None:
            return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
        use = {"type": "tool_use", "id": "toolu_1", "name": "login", "input": args}
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "logged in"}
        return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    if args is None:
        return [{"role": "model", "parts": [{"text": text}]}]
    back = {"functionResponse": {"name": "login", "response": {"result": "logged in"}}}
    return [
        {"role": "model", "parts": [{"functionCall": {"name": "login", "args": args}}]},
        {"role": "user", "parts": [back]},
    ]


def _user(family: str, text: str) -> dict[str, Any]:
    return (
        {"role": "user", "parts": [{"text": text}]}
        if family == "gemini"
        else {"role": "user", "content": text}
    )


def _exchange(family: str, history: list[Any], answer: dict[str, Any], piece: int) -> Exchange:
    events = synth_stream(family, answer, piece)
    return Exchange(
        "POST",
        URLS[family],
        [("content-type", "application/json"), ("authorization", "Bearer not-a-real-key")],
        orjson.dumps(_request(family, history)),
        200,
        "OK",
        [("content-type", "text/event-stream")],
        [(0.01 * i, e) for i, e in enumerate(events)],
    )


def _login(family: str, prompt: str, args: dict[str, Any], piece: int) -> list[Exchange]:
    """The user asks, the model calls ``login(args)`` (its arguments streamed ``piece`` characters
    per event), the client sends the call back with its result, the model answers."""
    first = [_user(family, prompt)]
    return [
        _exchange(family, first, _answer(family, "", args), piece),
        _exchange(family, first + _echo(family, "", args), _answer(family, "Done.", None), piece),
    ]


def _told(family: str, key: str, name: str) -> list[Exchange]:
    """The model gives a value in prose; the user sends it back under ``name`` (JSON text)."""
    first = [_user(family, "Make me a key.")]
    said = f"Here is your key: {key}"
    second = first + _echo(family, said, None) + [_user(family, json.dumps({name: key}))]
    return [
        _exchange(family, first, _answer(family, said, None), 0),
        _exchange(family, second, _answer(family, "Saved.", None), 0),
    ]


def _read(tmp_path: Path, name: str, exchanges: list[Exchange]) -> tuple[Any, Path]:
    """What ``looptap show`` reads of the run as the recorder stores it: its conversations and its
    warning-or-worse findings."""
    path = tmp_path / f"{name}.jsonl"
    with CassetteWriter(path, meta={"agent": "test"}) as w:
        for ex in exchanges:
            w.append(ex)
    run = open_run(path, whole=True)
    findings = sorted(
        (f.seq, f.code) for f in run.analysis.findings if f.severity.value in ("warning", "error")
    )
    return ([list(c.turns) for c in run.analysis.conversations], findings), path


def _stored_arguments(path: Path) -> list[str]:
    """Each tool call's arguments as the stored stream carries them, its events' pieces joined."""
    from looptap.cassettes.storage import read_records

    first = read_records(path).exchanges[0]
    out: dict[int, str] = {}
    for _, chunk in first.response_chunks:
        ev = event_json(chunk) or {}
        for choice in ev.get("choices") or []:
            for tc in (choice.get("delta") or {}).get("tool_calls") or []:
                piece = (tc.get("function") or {}).get("arguments") or ""
                out[tc["index"]] = out.get(tc["index"], "") + piece
        delta = ev.get("delta") or {}
        if delta.get("type") == "input_json_delta":
            out[ev["index"]] = out.get(ev["index"], "") + delta["partial_json"]
    return list(out.values())


@pytest.mark.parametrize("piece", [1, 3, 5, 8])
@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_streamed_arguments_under_a_credential_name_stay_json(
    family: str, piece: int, tmp_path: Path
) -> None:
    """``{"password": "radiance"}`` streamed ``piece`` characters per event is stored as
    ``{"password": "[REDACTED]"}``: valid JSON, no ``E.arguments_not_json``, the echo echoed."""
    args = {"user": "bob", "password": "radiance"}
    got, path = _read(tmp_path, "secret", _login(family, "Log me in.", args, piece))
    twin, _ = _read(
        tmp_path,
        "twin",
        _login(family, "Log me in.", {"user": "bob", "pasture": "radiance"}, piece),
    )
    stored = _stored_arguments(path)
    assert [json.loads(a) for a in stored] == [{"user": "bob", "password": REDACTED}], stored
    assert b"radiance" not in path.read_bytes()
    assert got == twin == ([[0, 1]], [])


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "gemini"])
def test_a_value_learned_from_an_answer_reads_the_same_where_it_was_said_first(
    family: str, tmp_path: Path
) -> None:
    """The user gives a password in prose and the model's call carries it under ``password``: the
    prompt, sent again in the next request, reads as the one sent first (one conversation)."""
    prompt = "Log in as bob, the password is radiance42."
    args = {"user": "bob", "password": "radiance42"}
    got, _ = _read(tmp_path, "secret", _login(family, prompt, args, 4))
    plain = {"user": "bob", "pasture": "radiance42"}
    twin, _ = _read(
        tmp_path, "twin", _login(family, prompt.replace("password", "pasture"), plain, 4)
    )
    assert got == twin == ([[0, 1]], [])


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "gemini"])
def test_a_value_learned_from_a_later_request_leaves_the_echo_echoed(
    family: str, tmp_path: Path
) -> None:
    """The model says a value in prose; the next request sends it under ``api_key`` too: the
    answer, sent back in that request, still reads as echoed."""
    got, _ = _read(tmp_path, "secret", _told(family, "plumtree42x", "api_key"))
    twin, _ = _read(tmp_path, "twin", _told(family, "plumtree42x", "label"))
    assert got == twin == ([[0, 1]], [])


def test_a_streamed_gemini_function_call_is_masked_as_the_unstreamed_one(tmp_path: Path) -> None:
    """A Gemini stream of one event whose ``functionCall`` carries a short password: masked by name
    as the non-streamed answer and the next request are, so the echo compares equal."""
    args = {"user": "bob", "password": "hunt3r"}
    got, path = _read(tmp_path, "secret", _login("gemini", "Log me in.", args, 0))
    twin, _ = _read(
        tmp_path, "twin", _login("gemini", "Log me in.", {"user": "bob", "pasture": "hunt3r"}, 0)
    )
    assert b"hunt3r" not in path.read_bytes()
    assert got == twin == ([[0, 1]], [])


def test_a_masked_argument_is_not_judged_against_its_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corpus's case (pydantic-ai's test_google_validated_accepts_strict_incompatible_schema):
    ``"password": "Secret1"`` matches the tool's ``pattern``; ``"[REDACTED]"`` does not, and
    ``E.arguments_schema`` blamed the model for what the recorder wrote."""
    monkeypatch.setitem(SCHEMA["properties"]["password"], "pattern", "(?=.*[0-9]).+")
    args = {"user": "bob", "password": "Secret1"}
    got, _ = _read(tmp_path, "secret", _login("openai_chat", "Log me in.", args, 0))
    twin, _ = _read(
        tmp_path,
        "twin",
        _login("openai_chat", "Log me in.", {"user": "bob", "pasture": "Secret1"}, 0),
    )
    assert got == twin == ([[0, 1]], [])
