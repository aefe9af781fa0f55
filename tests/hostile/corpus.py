"""The hostile corpus: files an attacker could hand to looptap, generated at test time.

Two kinds:

- **Hostile content in valid recordings**: real recorded runs from the corpus (every family,
  streamed and not, errors included) with every string a reader sees — text, reasoning, tool names,
  arguments, results, error messages and types, ids, model names, finish reasons, header values,
  conversation labels, URLs — extended by :data:`HOSTILE`: terminal escapes (OSC 52 clipboard
  write, screen clear, cursor moves, C1 CSI, BEL, CR), bidi overrides, zero-width characters and
  Rich/Textual markup and action strings.
- **Hostile structure**: deep nesting (100 / 255 / 256 / 1,000 / 100,000 levels) in bodies,
  tool-call arguments and record fields; YAML alias bombs and deep YAML; a delta bomb; wrong types
  in every record field; binary and truncated files; and, on request, a million tiny records.

``python -m tests.hostile.corpus DIR`` writes them all to DIR.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import header_record
from looptap.cassettes.wire import Exchange
from tests.support.tnetstring import tnet

ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\x1b[1A\x1b[31mRED\x9b32m\r\u202eevil\u200b\x08"
#: Where an interpreted screenshot action would write (tests check that it never appears).
PWNED_DIR = "/tmp/looptap-pwned"
MARKUP = (
    f"[@click=app.quit]Q[/][@click=app.screenshot('pwned.svg','{PWNED_DIR}')]S[/][type=x][/"
    "][link=file:///etc/passwd]L[/link][bold]"
)
#: What every shown string is extended with.
HOSTILE = ESCAPES + MARKUP
#: Characters that must never reach a terminal from looptap (the ESC/BEL/BS/C1/bidi above; a lone
#: 0x9b byte, decoded with surrogateescape, is ``\udc9b``).
RAW_CONTROLS = ("\x1b", "\x07", "\x08", "\x9b", "\udc9b", "\u202e", "\u200b")

# Keys whose values steer parsing; extending them would only make the body unreadable.
_KEEP = {
    "type",
    "role",
    "object",
    "event",
    "content_type",
    "mimeType",
    "media_type",
    "encoding_format",
}
_HEADER_KEEP = {"content-type", "content-encoding", "transfer-encoding", "content-length"}


def _poison(value: Any, hostile: str, depth: int = 0) -> Any:
    if depth > 64:
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in _KEEP and isinstance(v, str):
                out[k] = v
            elif k in ("arguments", "partial_json") and isinstance(v, str):
                out[k] = _poison_json_text(v, hostile)
            else:
                out[k] = _poison(v, hostile, depth + 1)
        return out
    if isinstance(value, list):
        return [_poison(v, hostile, depth + 1) for v in value]
    if isinstance(value, str):
        return value + hostile
    return value


def _poison_json_text(text: str, hostile: str) -> str:
    try:
        return orjson.dumps(_poison(orjson.loads(text), hostile)).decode()
    except orjson.JSONDecodeError:
        return text + hostile


def _poison_body(data: bytes, hostile: str) -> bytes:
    if not data:
        return data
    try:
        return orjson.dumps(_poison(orjson.loads(data), hostile))
    except orjson.JSONDecodeError:
        pass
    # SSE: poison the JSON of every data line.
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            try:
                lines[i] = b"data: " + orjson.dumps(_poison(orjson.loads(payload), hostile))
            except orjson.JSONDecodeError:
                pass
    return b"\n".join(lines)


def poison_exchange(ex: Exchange, hostile: str = HOSTILE) -> Exchange:
    req_headers = [
        (k, v if k.lower() in _HEADER_KEEP else v + hostile) for k, v in ex.request_headers
    ]
    req_headers.append(("x-looptap-conversation", "label" + hostile))
    resp_headers = [
        (k, v if k.lower() in _HEADER_KEEP else v + hostile) for k, v in ex.response_headers
    ]
    resp_headers.append(("x-request-id", "req" + hostile))
    sep = "&" if "?" in ex.url else "?"
    return replace(
        ex,
        url=ex.url + sep + "q=" + hostile,
        request_headers=req_headers,
        request_body=_poison_body(ex.request_body, hostile),
        reason=(ex.reason or "") + hostile,
        response_headers=resp_headers,
        response_chunks=[(t, _poison_body(c, hostile)) for t, c in ex.response_chunks],
        transport_error=None if ex.transport_error is None else ex.transport_error + hostile,
    )


#: Real recordings (under tests/corpus) covering every family, streamed and not, with errors.
SOURCES = (
    "llm-anthropic/tests/cassettes/test_anthropic/test_async_prompt.yaml",
    "pydantic-ai/tests/cassettes/test_model_name_suggestions/"
    "test_model_name_suggestion[anthropic].yaml",
    "pydantic-ai/tests/cassettes/test_settings/test_stop_settings[bedrock].yaml",
    "pydantic-ai/tests/cassettes/test_settings/test_stop_settings[google].yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_model_file_search_tool_stream.yaml",
    "pydantic-ai/tests/cassettes/test_cache_prefix_stability/"
    "test_openai_tool_call_roundtrip_wire_stable[ag_ui].yaml",
    "pydantic-ai/tests/cassettes/test_model_name_suggestions/"
    "test_model_name_suggestion[openai-chat].yaml",
    "pydantic-ai/tests/cassettes/test_dbos/test_complex_agent_run_in_workflow.yaml",
    "pydantic-ai/tests/cassettes/test_native_tool_search_vcr/test_openai_native_tool_search.yaml",
    "pydantic-ai/tests/models/cassettes/test_bedrock_mantle/test_reused_tool_call_ids[stream].yaml",
    "pydantic-ai/tests/cassettes/test_model_name_suggestions/"
    "test_model_name_suggestion[openai-responses].yaml",
)
CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def hostile_exchanges(hostile: str = HOSTILE) -> list[Exchange]:
    from looptap.cassettes.storage import load_vcr

    out: list[Exchange] = []
    for rel in SOURCES:
        path = CORPUS / rel
        if path.exists():
            out.extend(poison_exchange(ex, hostile) for ex in load_vcr(path))
    return out


def write_cassette(path: Path, exchanges: list[Exchange]) -> None:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)


def _chat(
    body: dict[str, Any] | bytes, response: dict[str, Any] | bytes, status: int = 200
) -> Exchange:
    req = body if isinstance(body, bytes) else orjson.dumps(body)
    resp = response if isinstance(response, bytes) else orjson.dumps(response)
    return Exchange(
        "POST",
        "https://api.openai.com/v1/chat/completions",
        [("content-type", "application/json")],
        req,
        status,
        "OK",
        [("content-type", "application/json")],
        [(0.01, resp)],
        started=1_700_000_000.0,
    )


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def _deep_args(depth: int) -> Exchange:
    args = _nested(depth).decode()
    req = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
    }
    resp = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": args},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return _chat(req, resp)


def _deep_body(depth: int) -> Exchange:
    inner = _nested(depth)
    req = (
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"go"}],"metadata":' + inner + b"}"
    )
    resp = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
    }
    return _chat(req, resp)


def _raw_lines(path: Path, records: list[bytes]) -> None:
    head = orjson.dumps(header_record({}, created="2026-01-01T00:00:00Z"))
    path.write_bytes(b"\n".join([head, *records]) + b"\n")


def _good_record_line() -> bytes:
    """One well-formed round-trip record line, taken from a cassette the real writer made."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "one.jsonl"
        write_cassette(
            p,
            [
                _chat(
                    {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": "gpt-4o",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "ok"},
                            }
                        ],
                    },
                )
            ],
        )
        return p.read_bytes().splitlines()[1]


_BAD_VALUES: tuple[Any, ...] = (
    1e21,
    float("nan"),
    float("inf"),
    "yesterday",
    -1,
    None,
    [],
    {},
    True,
    "http://[::1",
    10**30,
    "x" * 10,
)


def _wrong_types(path: Path) -> None:
    """One good record, then the same record with each field given each wrong value, then a good
    one."""
    good = orjson.loads(_good_record_line())
    lines = [orjson.dumps(good)]
    seq = 1

    def fields(rec: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        out = []
        for k, v in rec.items():
            out.append((*prefix, k))
            if isinstance(v, dict) and len(prefix) < 2:
                out.extend(fields(v, (*prefix, k)))
        return out

    for where in fields(good):
        if where == ("type",):
            continue
        for bad in _BAD_VALUES:
            rec = orjson.loads(orjson.dumps(good))
            node = rec
            for k in where[:-1]:
                node = node[k]
            node[where[-1]] = bad
            if where != ("seq",):
                rec["seq"] = seq
            seq += 1
            lines.append(json.dumps(rec).encode())  # stdlib json: writes the huge ints
    last = orjson.loads(orjson.dumps(good))
    last["seq"] = seq
    lines.append(orjson.dumps(last))
    _raw_lines(path, lines)


def _nan_and_url(path: Path) -> None:
    good = _good_record_line()
    recs = [
        good,
        good.replace(b'"status":200', b'"status":1e21').replace(b'"seq":0', b'"seq":1'),
        good.replace(b'"seq":0', b'"seq":2').replace(b'"started":', b'"started":"yesterday","_x":'),
        good.replace(b'"seq":0', b'"seq":3').replace(b"https://api.openai.com", b"http://[::1"),
        good.replace(b'"seq":0', b'"seq":4').replace(b'"status":200', b'"status":NaN'),
        b'{"type":"exchange","seq":5}',
        b"[1,2,3]",
        b'"just a string"',
        good.replace(b'"seq":0', b'"seq":9'),
    ]
    _raw_lines(path, recs)


def delta_bomb(path: Path, records: int = 3_000, keep: int = 2_000_000) -> None:
    """A first request whose history holds ``keep`` tiny items, then ``records`` deltas that each
    keep all of them: 4 MB on disk, billions of items if every delta were rebuilt."""
    good = orjson.loads(_good_record_line())
    first = orjson.loads(orjson.dumps(good))
    first["request"]["body"] = {"json": {"model": "gpt-4o", "messages": [0] * keep}}
    lines = [orjson.dumps(first)]
    for i in range(1, records + 1):
        rec = orjson.loads(orjson.dumps(good))
        rec["seq"] = i
        rec["request"]["body"] = {
            "delta": {
                "base": i - 1,
                "key": "messages",
                "keep": keep + i - 1,
                "append": [0],
                "order": ["model", "messages"],
                "inherit": ["model"],
                "set": {},
            }
        }
        lines.append(orjson.dumps(rec))
    _raw_lines(path, lines)


def _record_field_deep(path: Path, depth: int) -> None:
    good = orjson.loads(_good_record_line())
    line = orjson.dumps(good).replace(b'"meta":', b'"deep":' + _nested(depth) + b',"meta":', 1)
    if b'"deep"' not in line:
        line = line[:-1] + b',"deep":' + _nested(depth) + b"}"
    _raw_lines(path, [line, orjson.dumps({**good, "seq": 1})])


def _jsonl_deep(path: Path, depth: int) -> None:
    path.write_bytes(b"[" * depth + b"]" * depth + b"\n")


def _yaml_bomb(path: Path) -> None:
    """Billion laughs inside a real-looking interaction: the body, once written out as JSON,
    would hold 9**10 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghij":
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
        prev = name
    lines += [
        "interactions:",
        "- request: {method: POST, uri: 'https://api.openai.com/v1/chat/completions', headers: {}, "
        "body: {string: 'x'}}",
        "  response: {status: {code: 200, message: OK}, headers: {}, body: {string: 'x'}}",
        "  parsed_body: *j",
        "- request: {method: POST, uri: 'https://api.openai.com/v1/"
        "chat/completions', headers: {}, parsed_body: *j}",
        "  response: {status: {code: 200, message: OK}, headers: {}, parsed_body: *j}",
    ]
    path.write_text("\n".join(lines) + "\n")


def _yaml_deep(path: Path, depth: int) -> None:
    path.write_text("interactions: " + "[" * depth + "]" * depth + "\n")


def _yaml_deep_block(path: Path, depth: int) -> None:
    out = ["interactions:"]
    for i in range(depth):
        out.append("  " * (i + 1) + "- ")
    path.write_text("\n".join(out) + "x\n")


def _vcr_hostile(path: Path) -> None:
    import yaml

    interactions = []
    for ex in hostile_exchanges()[:6]:
        interactions.append(
            {
                "request": {
                    "method": ex.method,
                    "uri": ex.url,
                    "body": ex.request_body.decode("utf-8", "replace"),
                    "headers": {k: [v] for k, v in ex.request_headers},
                },
                "response": {
                    "status": {"code": ex.status, "message": ex.reason},
                    "headers": {k: [v] for k, v in ex.response_headers},
                    "body": {
                        "string": b"".join(c for _, c in ex.response_chunks).decode(
                            "utf-8", "replace"
                        )
                    },
                },
            }
        )
    path.write_text(
        yaml.safe_dump({"interactions": interactions, "version": 1}, allow_unicode=True)
    )


# -- decompression bombs and deep parameters (issue 29) ---------------------------------------

#: What every bomb decompresses to: sixteen times looptap's decompression budget.
BOMB_SIZE = 1 << 30
#: The encodings a bomb is built in; the last is stacked (gzip applied first, then br).
BOMB_ENCODINGS = ("gzip", "deflate", "br", "zstd", "gzip, br")
_BLOCK = 16 << 20


@functools.cache
def bomb(encoding: str, size: int = BOMB_SIZE) -> bytes:
    """A few KB to a MB that decompress to ``size`` zero bytes in ``encoding`` (a valid stream:
    gzip as concatenated members, zstd as concatenated frames, deflate as repeated full-flush
    blocks with the right Adler-32, brotli streamed)."""
    import zlib

    blocks = max(1, size // _BLOCK)
    zeros = bytes(_BLOCK)
    if encoding == "gzip":
        return gzip.compress(zeros, 9, mtime=0) * blocks
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(zeros) * blocks
    if encoding == "deflate":
        c = zlib.compressobj(9, zlib.DEFLATED, 15)
        first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
        again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
        adler = ((blocks * _BLOCK) % 65521) << 16 | 1  # Adler-32 of n zero bytes
        return first + again * (blocks - 1) + b"\x03\x00" + adler.to_bytes(4, "big")
    if encoding == "br":
        import brotli

        comp = brotli.Compressor(quality=5, lgwin=24)
        return b"".join([comp.process(zeros) for _ in range(blocks)] + [comp.finish()])
    if encoding == "gzip, br":
        import brotli

        return bytes(brotli.compress(bomb("gzip", size), quality=5))
    raise ValueError(encoding)


def bomb_exchange(encoding: str) -> Exchange:
    """A chat call whose request and response bodies are both ``encoding`` bombs, as the recorder
    hands them on (still encoded)."""
    return Exchange(
        "POST",
        "https://api.openai.com/v1/chat/completions",
        [("content-type", "application/json"), ("content-encoding", encoding)],
        bomb(encoding),
        200,
        "OK",
        [("content-type", "application/json"), ("content-encoding", encoding)],
        [(0.01, bomb(encoding))],
        started=1_700_000_000.0,
        request_encoded=True,
        response_encoded=True,
    )


def _bombs_cassette(path: Path) -> None:
    """Every bomb through the recorder's pipeline: what it keeps (the bodies as received,
    labelled)."""
    write_cassette(path, [bomb_exchange(enc) for enc in BOMB_ENCODINGS])


def bombs_vcr(path: Path, encodings: tuple[str, ...] = BOMB_ENCODINGS) -> None:
    """A vcrpy cassette answered by one bomb per encoding (its requests are plain: the request side
    decodes through the same code, shown by the cassette and the replay server)."""
    import yaml

    interactions = [{
        "request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
                    "body": '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}',
                    "headers": {"content-type": ["application/json"]}},
        "response": {"status": {"code": 200, "message": "OK"}, "body": {"string": bomb(enc)},
                     "headers": {"content-type": ["application/json"], "content-encoding": [enc]}},
    } for enc in encodings]
    path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}))



def bomb_flow(encoding: str, index: int = 0) -> bytes:
    """One mitmproxy flow (format 20) answered by an ``encoding`` bomb."""
    req = {
        "http_version": b"HTTP/1.1",
        "headers": [[b"content-type", b"application/json"]],
        "content": b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}',
        "trailers": None,
        "timestamp_start": 1700000000.0,
        "timestamp_end": 1700000000.01,
        "host": "api.openai.com",
        "port": 443,
        "method": b"POST",
        "scheme": b"https",
        "authority": b"",
        "path": b"/v1/chat/completions",
    }
    resp = {
        "http_version": b"HTTP/1.1",
        "headers": [
            [b"content-type", b"application/json"],
            [b"content-encoding", encoding.encode()],
        ],
        "content": bomb(encoding),
        "trailers": None,
        "timestamp_start": 1700000000.5,
        "timestamp_end": 1700000001.25,
        "status_code": 200,
        "reason": b"OK",
    }
    return tnet(
        {
            "version": 20,
            "type": "http",
            "id": f"f{index}",
            "error": None,
            "client_conn": {},
            "server_conn": {},
            "intercepted": False,
            "is_replay": None,
            "marked": "",
            "metadata": {},
            "comment": "",
            "timestamp_created": 1700000000.0,
            "request": req,
            "response": resp,
            "websocket": None,
            "backup": None,
        }
    )


def bombs_flows(path: Path, encodings: tuple[str, ...] = BOMB_ENCODINGS) -> None:
    path.write_bytes(b"".join(bomb_flow(enc, i) for i, enc in enumerate(encodings)))


def _deep_param_body(depth: int) -> bytes:
    """A chat request whose ``response_format`` parameter nests ``depth`` levels (valid JSON)."""
    return (
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"go"}],"response_format":'
        + _nested(depth)
        + b"}"
    )


_OK = {
    "id": "x",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def _deep_param_recorded(path: Path, depth: int) -> None:
    """The deep parameter recorded live: what the recorder keeps."""
    write_cassette(path, [_chat(_deep_param_body(depth), _OK)])


def _deep_param_stored_json(path: Path, depth: int) -> None:
    """The deep parameter stored as parsed JSON in the record, without the writer's stored parse
    (a record nests at most 254 levels, so ``depth`` up to about 245): about 1 KB."""
    good = orjson.loads(_good_record_line())
    good["request"]["body"] = {"json": orjson.loads(_deep_param_body(depth))}
    good["response"]["body"] = {"json": _OK}
    good.pop("parsed", None)
    good.pop("derived", None)
    _raw_lines(path, [orjson.dumps(good)])


def million_tiny(path: Path, n: int = 1_000_000) -> None:
    """``n`` tiny but valid round-trip records (a header, then a POST with no body and no
    answer)."""
    with path.open("wb") as fh:
        fh.write(orjson.dumps(header_record({}, created="2026-01-01T00:00:00Z")) + b"\n")
        for i in range(n):
            fh.write(
                b'{"type":"exchange","seq":%d,"method":"POST","url":"https://api.openai.com/v1/'
                b'chat/completions","request":{"headers":[],"body":null},"response":null}\n' % i
            )


#: name → writer. Kept small enough that the whole matrix runs in the default suite.
FILES: dict[str, Callable[[Path], None]] = {
    "hostile_all_families.jsonl": lambda p: write_cassette(p, hostile_exchanges()),
    "hostile.yaml": _vcr_hostile,
    "deep_args_100.jsonl": lambda p: write_cassette(p, [_deep_args(100)]),
    "deep_args_255.jsonl": lambda p: write_cassette(p, [_deep_args(255)]),
    "deep_args_256.jsonl": lambda p: write_cassette(p, [_deep_args(256)]),
    "deep_args_1000.jsonl": lambda p: write_cassette(p, [_deep_args(1000)]),
    "deep_args_100000.jsonl": lambda p: write_cassette(p, [_deep_args(100_000)]),
    "deep_body_300.jsonl": lambda p: write_cassette(p, [_deep_body(300)]),
    "deep_body_100000.jsonl": lambda p: write_cassette(p, [_deep_body(100_000)]),
    "deep_record_field_1000.jsonl": lambda p: _record_field_deep(p, 1000),
    "deep_record_field_100000.jsonl": lambda p: _record_field_deep(p, 100_000),
    "deep_line_100000.jsonl": lambda p: _jsonl_deep(p, 100_000),
    "yaml_alias_bomb.yaml": _yaml_bomb,
    "yaml_deep_flow.yaml": lambda p: _yaml_deep(p, 50_000),
    "yaml_deep_block.yaml": lambda p: _yaml_deep_block(p, 1_000),
    # Twice the most one delta may rebuild (storage's HistoryDecoder.MAX_ITEMS, 100,000): every
    # delta is a bomb (600 million items if all were rebuilt, six times MAX_TOTAL_ITEMS), and
    # `verify` takes 3 s of CPU on it, where the 2-million-item default took 19 s.
    "delta_bomb.jsonl": functools.partial(delta_bomb, keep=200_000),
    "wrong_types.jsonl": _wrong_types,
    "bad_records.jsonl": _nan_and_url,
    "binary.jsonl": lambda p: p.write_bytes(os.urandom(4096)),
    "truncated.jsonl": lambda p: (
        write_cassette(p, hostile_exchanges()[:3]),
        p.write_bytes(p.read_bytes()[:-777]),
    ),
    "truncated_utf8.jsonl": lambda p: (
        write_cassette(p, hostile_exchanges()[:2]),
        p.write_bytes(p.read_bytes().rstrip(b"\n") + b'\n{"type":"exchange","x":"\xe2\x80'),
    ),
    "empty.jsonl": lambda p: p.write_bytes(b""),
    "header_only.jsonl": lambda p: _raw_lines(p, []),
    "newer_version.jsonl": lambda p: p.write_bytes(
        orjson.dumps({**header_record({}), "format_version": 99}) + b"\n"
    ),
    "deep_param_200.jsonl": lambda p: _deep_param_stored_json(p, 200),
    "deep_param_240.jsonl": lambda p: _deep_param_stored_json(p, 240),
    "deep_param_200_recorded.jsonl": lambda p: _deep_param_recorded(p, 200),
    "deep_param_10000_recorded.jsonl": lambda p: _deep_param_recorded(p, 10_000),
    "bomb_stacked.jsonl": lambda p: write_cassette(p, [bomb_exchange("gzip, br")]),
    "bomb_br.yaml": lambda p: bombs_vcr(p, ("br",)),
    "bomb_zstd.mitm": lambda p: bombs_flows(p, ("zstd",)),
}
#: Built only when named (tests/hostile/test_bombs.py): every bomb in each format.
#: Reading one costs seconds of CPU per bomb (each is decoded to the budget and redacted, like any
#: other tool's file), too much for every command of the matrix.
NAMED_ONLY: dict[str, Callable[[Path], None]] = {
    "bombs.jsonl": _bombs_cassette,
    "bombs.yaml": bombs_vcr,
    "bombs.mitm": bombs_flows,
}


def build(
    directory: Path, names: list[str] | None = None, *, million: bool = False
) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for name, write in {**FILES, **NAMED_ONLY}.items():
        if (names and name not in names) or (not names and name in NAMED_ONLY):
            continue
        path = directory / name
        write(path)
        out[name] = path
    if million:
        path = directory / "million_tiny.jsonl"
        million_tiny(path)
        out[path.name] = path
    return out


if __name__ == "__main__":
    for name, p in build(Path(sys.argv[1]), million="--million" in sys.argv).items():
        print(f"{p.stat().st_size:>12,}  {name}")
