"""Property-based fuzzing (hypothesis) of the stream parsers, the cassette reader and the VCR
importer, seeded from real recordings in the corpus.

Seeds are real bodies and streams of every family the corpus has (OpenAI chat and Responses,
Anthropic, Gemini SSE and JSON-array streams, Bedrock event-stream) plus an Ollama NDJSON stream
built to WIRE.md (the corpus has no native Ollama traffic), mutated the way the wire and
the disk damage them: re-chunked at arbitrary points, truncated, bytes flipped, pieces spliced in
or dropped. Properties:

* framing: the events of a stream do not depend on where the chunks were cut, damaged or not;
  ``frame`` never raises;
* decoding: a compressed body re-chunked anywhere decodes to the original bytes; a damaged one
  never raises and, when it cannot be decoded, is kept byte for byte;
* reassembly: a re-chunked or truncated stream parses without internal errors, and a re-chunked
  one to the same response as the original;
* cassette reader: damaged files raise only ``CassetteFormatError`` (a damaged header) and
  otherwise return what they can, with problems; a file cut at any byte keeps every whole line;
* VCR importer: damaged YAML raises only ``ImportFormatError``; what it returns parses.

Budget: ``LOOPTAP_FUZZ_EXAMPLES`` examples per property (default 40, a few hundred in all, well
under a minute); ``LOOPTAP_SLOW=1`` raises the default to 2000.
"""

from __future__ import annotations

import io
import itertools
import os
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import brotli
import orjson
import pytest
import yaml
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_corpus import CORPUS

from looptap.cassettes.errors import CassetteFormatError, ImportFormatError
from looptap.cassettes.parsing import parse_all, parse_exchange
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import load_vcr, read_records, read_vcr
from looptap.cassettes.wire import Exchange, decode_chunks, frame

SLOW = os.environ.get("LOOPTAP_SLOW") == "1"
EXAMPLES = int(os.environ.get("LOOPTAP_FUZZ_EXAMPLES") or (2000 if SLOW else 40))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)

#: Streamed recordings (``path#index``), two to four per family, picked at random (seeded) from the
#: corpus among bodies under 30 KB.
STREAMS = [
    "pydantic-ai/tests/cassettes/test_tool_search/"
    "test_anthropic_native_tool_search_streaming.yaml#0",
    "llm-anthropic/tests/cassettes/test_anthropic/test_fixed_version_tool_chain_regression.yaml#1",
    "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml#0",  # gzip on the wire
    "pydantic-ai/tests/models/cassettes/test_anthropic/"
    "test_anthropic_text_parts_ahead_of_built_in_tool_call.yaml#2",
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_streaming_error.yaml#0",
    "pydantic-ai/tests/models/bedrock/cassettes/test_native_output/"
    "test_bedrock_native_output_stream.yaml#0",
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_model_iter_stream.yaml#1",
    "pydantic-ai/tests/models/cassettes/test_stream_close/"
    "test_cancel_recorded_provider_stream[google].yaml#0",
    "pydantic-ai/tests/models/google/cassettes/test_structured_output/"
    "test_native_output_with_function_tools_stream.yaml#1",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_model_iter_stream.yaml#1",
    "pydantic-ai/tests/models/cassettes/test_openrouter/test_openrouter_stream_error.yaml#0",
    "pydantic-ai/tests/cassettes/test_dbos/test_dbos_agent_iter_in_workflow.yaml#0",
    "pydantic-ai/tests/cassettes/test_temporal/test_complex_agent_run.yaml#1",
    "pydantic-ai/tests/cassettes/test_tool_search/test_openai_client_tool_search_streaming.yaml#1",
    "pydantic-ai/tests/models/cassettes/test_openai_responses/test_openai_responses_stream.yaml#0",
    "pydantic-ai/tests/models/cassettes/test_openai_responses/"
    "test_openai_include_raw_annotations_streaming.yaml#0",
]
#: Non-streamed bodies, two per family.
BODIES = [
    "pydantic-ai/tests/models/cassettes/test_anthropic/test_anthropic_mcp_servers.yaml#1",
    "pydantic-ai/tests/models/anthropic/cassettes/test_output/"
    "test_mixed_tools_basemodel_output.yaml#0",
    "pydantic-ai/tests/models/bedrock/cassettes/test_strict_tool_calls/"
    "test_bedrock_strict_tool_supported_model.yaml#0",
    "pydantic-ai/tests/models/cassettes/test_bedrock/"
    "test_bedrock_model_usage_limit_not_exceeded.yaml#1",
    "pydantic-ai/tests/models/cassettes/test_google/"
    "test_google_instructions_only_with_tool_calls.yaml#3",
    "pydantic-ai/tests/cassettes/test_temporal/test_durability_agent_with_model_retry.yaml#0",
    "pydantic-ai/tests/models/cassettes/test_openai/test_openai_web_search_tool.yaml#0",
    "pydantic-ai/tests/models/cassettes/test_openai_responses/"
    "test_openai_responses_model_builtin_tools_web_search.yaml#0",
]
#: Whole YAML files for the importer (small ones, several shapes: string, parsed and gzip bodies).
VCR_FILES = [
    "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml",
    "llm-anthropic/tests/cassettes/test_anthropic/test_prompt.yaml",
    "pydantic-ai/tests/models/cassettes/test_openai/test_text_response.yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_model_iter_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_streaming_error.yaml",
]


def _load(ref: str) -> Exchange:
    path, _, idx = ref.rpartition("#")
    return load_vcr(CORPUS / path)[int(idx)]


@cache
def stream_seeds() -> list[Exchange]:
    seeds = [_load(r) for r in STREAMS]
    # Gemini's streamGenerateContent without alt=sse: the same events as one JSON array.
    for ex in list(seeds):
        if ":streamGenerateContent" in ex.url:
            events = [e.data for e in frame(ex.response_chunks).events]
            arr = ("[" + ",\r\n".join(events) + "]").encode()
            seeds.append(
                Exchange(
                    method=ex.method,
                    url=ex.url.replace("alt=sse", ""),
                    request_headers=ex.request_headers,
                    request_body=ex.request_body,
                    status=ex.status,
                    response_headers=[("content-type", "application/json")],
                    response_chunks=[(0.0, arr)],
                )
            )
    seeds.append(_ollama_stream())
    return seeds


def _ollama_stream() -> Exchange:
    """Ollama's native /api/chat stream (NDJSON; the corpus has no native Ollama traffic), in the
    shape WIRE.md documents: thinking and text deltas, a tool call, the final ``done`` line."""
    t0 = "2026-08-21T10:00:00.000000Z"

    def delta(**msg: Any) -> dict[str, Any]:
        return {
            "model": "qwen3:8b",
            "created_at": t0,
            "message": {"role": "assistant", "content": "", **msg},
            "done": False,
        }

    lines = [
        delta(thinking="The user wants "),
        delta(thinking="the weather."),
        delta(content="Let me "),
        delta(content="check. "),
        delta(
            tool_calls=[
                {
                    "id": "call_1",
                    "function": {
                        "index": 0,
                        "name": "get_weather",
                        "arguments": {"city": "Toronto"},
                    },
                }
            ]
        ),
        {
            "model": "qwen3:8b",
            "created_at": t0,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 4883583458,
            "prompt_eval_count": 26,
            "eval_count": 12,
        },
    ]
    body = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    request = {
        "model": "qwen3:8b",
        "messages": [{"role": "user", "content": "Weather in Toronto?"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
    }
    return Exchange(
        method="POST",
        url="http://localhost:11434/api/chat",
        request_body=orjson.dumps(request),
        status=200,
        response_headers=[("content-type", "application/x-ndjson")],
        response_chunks=[(0.05 * i, ln) for i, ln in enumerate(body.splitlines(keepends=True))],
    )


@cache
def body_seeds() -> list[bytes]:
    return [_load(r).response_body for r in BODIES + STREAMS]


def _with_chunks(ex: Exchange, chunks: list[tuple[float | None, bytes]]) -> Exchange:
    return Exchange(
        method=ex.method,
        url=ex.url,
        request_headers=list(ex.request_headers),
        request_body=ex.request_body,
        status=ex.status,
        response_headers=list(ex.response_headers),
        response_chunks=chunks,
    )


# ---------------------------------------------------------------------------------------------
# Strategies: re-chunking and damage


@st.composite
def cuts(draw: Any, data: bytes, min_pieces: int = 1) -> list[tuple[float | None, bytes]]:
    """``data`` cut at arbitrary points (single bytes, event boundaries, anywhere)."""
    n = len(data)
    if n < 2:
        return [(0.0, data)]
    points = sorted(
        set(draw(st.lists(st.integers(1, n - 1), min_size=min_pieces - 1, max_size=min(40, n - 1))))
    )
    bounds = [0, *points, n]
    return [(i * 0.01, data[a:b]) for i, (a, b) in enumerate(itertools.pairwise(bounds)) if b > a]


@st.composite
def damaged(draw: Any, data: bytes) -> bytes:
    """``data`` after one to three of: truncation, byte flips, a dropped range, a spliced-in copy of
    another range, junk bytes, a duplicated range."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not out:
            break
        n = len(out)
        op = draw(st.sampled_from(["truncate", "flip", "drop", "splice", "junk", "dup"]))
        i = draw(st.integers(0, n - 1))
        j = draw(st.integers(i, min(n, i + 200)))
        if op == "truncate":
            del out[i:]
        elif op == "flip":
            out[i] ^= draw(st.integers(1, 255))
        elif op == "drop":
            del out[i:j]
        elif op == "splice":
            k = draw(st.integers(0, n))
            out[k:k] = out[i:j]
        elif op == "junk":
            out[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:
            out[j:j] = out[i:j]
    return bytes(out)


def _events(
    chunks: list[tuple[float | None, bytes]], ctype: str | None
) -> tuple[str, list[tuple[str, str | None]], str]:
    f = frame(chunks, ctype)
    return f.kind, [(e.data, e.event) for e in f.events], f.tail


# ---------------------------------------------------------------------------------------------
# Framing


@FUZZ
@given(data=st.data(), seed=st.sampled_from(range(len(STREAMS) + 4)), damage=st.booleans())
def test_framing_does_not_depend_on_chunk_boundaries(data: Any, seed: int, damage: bool) -> None:
    ex = stream_seeds()[seed % len(stream_seeds())]
    body = ex.response_body
    if damage:
        body = data.draw(damaged(body))
    ctype = ex.response_header("content-type")
    a = data.draw(cuts(body, 2))
    b = data.draw(cuts(body, 2))
    if len(a) < 2 or len(b) < 2:
        return
    assert _events(a, ctype) == _events(b, ctype)


@FUZZ
@given(body=st.binary(max_size=2000), data=st.data())
def test_framing_of_random_bytes_never_raises(body: bytes, data: Any) -> None:
    prefix = data.draw(
        st.sampled_from([b"", b"data: ", b"[", b"{", b"event: x\n", b"\x00\x00\x00\x10"])
    )
    f = frame(
        data.draw(cuts(prefix + body)),
        data.draw(st.sampled_from([None, "text/event-stream", "application/x-ndjson"])),
    )
    assert f.kind in (
        "empty",
        "json",
        "sse",
        "ndjson",
        "json_array",
        "aws_eventstream",
        "text",
        "binary",
    )


# ---------------------------------------------------------------------------------------------
# Content-Encoding


def _compress(enc: str, pieces: list[bytes]) -> list[bytes]:
    """``pieces`` compressed as one stream, flushed after each piece (as a streaming server
    does)."""
    if enc == "br":
        c = brotli.Compressor()
        out = [c.process(p) + c.flush() for p in pieces]
        out[-1] += c.finish()
        return out
    if enc == "zstd":
        z = zstandard.ZstdCompressor().compressobj()
        out = [z.compress(p) + z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for p in pieces]
        out[-1] += z.flush()
        return out
    wbits = {
        "gzip": 16 + zlib.MAX_WBITS,
        "deflate": zlib.MAX_WBITS,
        "deflate-raw": -zlib.MAX_WBITS,
    }[enc]
    zc = zlib.compressobj(6, zlib.DEFLATED, wbits)
    out = [zc.compress(p) + zc.flush(zlib.Z_SYNC_FLUSH) for p in pieces]
    out[-1] += zc.flush()
    return out


ENCODINGS = ["gzip", "deflate", "deflate-raw", "br", "zstd"]


@FUZZ
@given(data=st.data(), seed=st.integers(0, 10_000), enc=st.sampled_from(ENCODINGS))
def test_compressed_body_rechunked_anywhere_decodes_to_the_original(
    data: Any, seed: int, enc: str
) -> None:
    body = body_seeds()[seed % len(body_seeds())]
    pieces = [c for _, c in data.draw(cuts(body))]
    wire = b"".join(_compress(enc, pieces))
    chunks = data.draw(cuts(wire))
    header = "deflate" if enc == "deflate-raw" else enc
    res = decode_chunks(chunks, header)
    assert res.decoded_from == header, res.notes
    assert b"".join(c for _, c in res.chunks) == body
    assert len(res.chunks) == len(chunks) and not res.notes


@FUZZ
@given(
    data=st.data(),
    seed=st.integers(0, 10_000),
    enc=st.sampled_from(ENCODINGS),
    claim=st.sampled_from([None, "gzip", "br", "zstd", "deflate", "gzip, br", "identity", "bogus"]),
)
def test_damaged_compressed_body_is_never_lost(
    data: Any, seed: int, enc: str, claim: str | None
) -> None:
    body = body_seeds()[seed % len(body_seeds())]
    wire = data.draw(damaged(b"".join(_compress(enc, [body]))))
    chunks = data.draw(cuts(wire))
    res = decode_chunks(chunks, claim)
    out = b"".join(c for _, c in res.chunks)
    if res.decoded_from is None:
        assert out == wire, "a body that could not be decoded must be kept as received"
        assert [t for t, _ in res.chunks] == [t for t, _ in chunks]
    elif wire:
        assert res.notes or out, "decoded to nothing without saying so"


# ---------------------------------------------------------------------------------------------
# Provider reassembly


def _view(ex: Exchange) -> dict[str, Any]:
    rt = parse_exchange(ex)
    assert not [e for e in rt.analysis_errors if e.startswith("internal error")], rt.analysis_errors
    resp = rt.response.model_dump(mode="json") if rt.response is not None else None
    return {
        "family": rt.family,
        "framing": rt.framing,
        "response": resp,
        "errors": rt.analysis_errors,
    }


@FUZZ
@given(data=st.data(), seed=st.sampled_from(range(len(STREAMS) + 4)))
def test_reassembly_of_a_rechunked_stream_equals_the_original(data: Any, seed: int) -> None:
    ex = stream_seeds()[seed % len(stream_seeds())]
    original = _view(ex)
    body = ex.response_body
    again = _view(_with_chunks(ex, data.draw(cuts(body, 2))))
    assert again == original


@FUZZ
@given(data=st.data(), seed=st.sampled_from(range(len(STREAMS) + 4)), damage=st.booleans())
def test_reassembly_of_a_cut_or_damaged_stream_never_fails_internally(
    data: Any, seed: int, damage: bool
) -> None:
    ex = stream_seeds()[seed % len(stream_seeds())]
    body = ex.response_body
    body = data.draw(damaged(body)) if damage else body[: data.draw(st.integers(0, len(body)))]
    view = _view(_with_chunks(ex, data.draw(cuts(body))))
    if (
        not damage
        and ex.status == 200
        and view["response"] is not None
        and len(body) < len(ex.response_body)
    ):
        # A cut stream is never passed off as complete (the terminal event is near the end; a cut
        # after it leaves a whole response). Error bodies are complete answers either way.
        tail_intact = ex.response_body.rstrip()[-16:] in body
        assert view["response"]["complete"] is not True or tail_intact, view["response"]


# ---------------------------------------------------------------------------------------------
# The cassette reader


class SeedCassette(tuple[bytes, int]):
    """(file bytes, records); a short repr keeps hypothesis' failure reports readable."""

    def __repr__(self) -> str:
        return f"<seed cassette: {len(self[0])} bytes, {self[1]} records>"


@cache
def cassette_bytes(tmp: str) -> tuple[bytes, int]:
    """A real cassette: seeds of every family plus a three-turn conversation (delta encoded)."""
    path = Path(tmp) / "seed.jsonl"
    with CassetteWriter(path) as w:
        for ex in stream_seeds()[:8]:
            w.append(ex)
        conv = _load(
            "pydantic-ai/tests/cassettes/test_dbos/test_dbos_agent_iter_in_workflow.yaml#0"
        )
        body = conv.request_json()
        for i in range(3):
            body = {
                **body,
                "messages": [*body["messages"], {"role": "user", "content": f"turn {i}"}],
            }
            w.append(
                Exchange(
                    method="POST",
                    url=conv.url,
                    request_headers=conv.request_headers,
                    request_body=orjson.dumps(body),
                    status=200,
                    response_headers=conv.response_headers,
                    response_chunks=conv.response_chunks,
                )
            )
    data = path.read_bytes()
    return SeedCassette((data, data.count(b"\n") - 1))


@pytest.fixture(scope="module")
def seed_cassette(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int]:
    return cassette_bytes(str(tmp_path_factory.mktemp("fuzz-cassette")))


def _digest(ex: Exchange) -> bytes:
    chunks = [[t, c.hex()] for t, c in ex.response_chunks]
    return orjson.dumps(
        [ex.seq, ex.method, ex.url, ex.request_json(), ex.status, chunks],
        option=orjson.OPT_SORT_KEYS,
    )


@FUZZ
@given(data=st.data())
def test_damaged_cassette_loads_what_it_can(
    data: Any, seed_cassette: tuple[bytes, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    original, _ = seed_cassette
    bad = data.draw(damaged(original))
    path = tmp_path_factory.mktemp("damaged") / "c.jsonl"
    path.write_bytes(bad)
    lines = original.split(b"\n")
    header_intact = bad.split(b"\n", 1)[0] == lines[0]
    try:
        cas = read_records(path)
    except CassetteFormatError:
        assert not header_intact, "an intact header must never make the whole file unreadable"
        return
    parse_all(cas.exchanges)  # the derived view of whatever loaded, without raising
    if not header_intact:
        return
    # Every record line that survived byte for byte and stands on its own (stored in full, not as
    # a history delta whose base may be damaged) loads, and loads as it was written.
    path.write_bytes(original)
    originals = {ex.seq: _digest(ex) for ex in read_records(path).exchanges}
    loaded = {_digest(ex) for ex in cas.exchanges}
    bad_lines = set(bad.split(b"\n")[1:-1]) | (
        {bad.rsplit(b"\n", 1)[-1]} if bad.endswith(b"\n") else set()
    )
    for line in lines[1:]:
        if line and line in bad_lines and b'"delta"' not in line:
            seq = orjson.loads(line)["seq"]
            assert originals[seq] in loaded, f"intact record seq {seq} lost"


@FUZZ
@given(cut=st.integers(0, 10**9))
def test_cassette_cut_at_any_byte_keeps_every_whole_line(
    cut: int, seed_cassette: tuple[bytes, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    original, _ = seed_cassette
    cut = cut % (len(original) + 1)
    header_end = original.index(b"\n") + 1
    path = tmp_path_factory.mktemp("cut") / "c.jsonl"
    path.write_bytes(original[:cut])
    # the header cut before its closing brace (without its newline it is whole)
    if cut < header_end - 1:
        with pytest.raises(CassetteFormatError):
            read_records(path)
        return
    cas = read_records(path)
    # cut just before a newline: the last line's JSON is whole, and it is read (not torn)
    whole_last = cut < len(original) and original[cut : cut + 1] == b"\n"
    whole = max(0, original[:cut].count(b"\n") - 1) + (whole_last and cut >= header_end)
    assert len(cas.exchanges) == whole
    assert [p.kind for p in cas.problems] == (
        [] if cut == len(original) or original[cut - 1 : cut] == b"\n" or whole_last else ["torn"]
    )


# ---------------------------------------------------------------------------------------------
# The VCR importer


@cache
def vcr_seeds() -> list[bytes]:
    return [(CORPUS / p).read_bytes() for p in VCR_FILES]


def _mutate_tree(data: Any, node: Any) -> Any:
    """One structural change to a parsed YAML document: a value replaced by another type."""
    if isinstance(node, dict) and node:
        key = data.draw(st.sampled_from(sorted(node, key=str)))
        if data.draw(st.booleans()):
            node = dict(node)
            node[key] = _mutate_tree(data, node[key])
            return node
        node = dict(node)
        node[key] = data.draw(
            st.sampled_from(
                [None, 0, -1, "", "x", [], {}, [[1, 2]], {"string": None}, b"\xff\xfe", 10**30, 1.5]
            )
        )
        return node
    if isinstance(node, list) and node:
        i = data.draw(st.integers(0, len(node) - 1))
        node = list(node)
        node[i] = _mutate_tree(data, node[i])
        return node
    return data.draw(st.sampled_from([None, 7, "junk", [], {}]))


def _import_and_parse(raw: bytes) -> None:
    try:
        exchanges = list(read_vcr(raw))
    except ImportFormatError:
        return
    for ex in exchanges:
        rt = parse_exchange(ex)
        assert not [e for e in rt.analysis_errors if e.startswith("internal error")], (
            rt.analysis_errors
        )


@FUZZ
@given(data=st.data(), seed=st.integers(0, 10_000))
def test_damaged_vcr_yaml_bytes_import_or_fail_clearly(data: Any, seed: int) -> None:
    raw = vcr_seeds()[seed % len(vcr_seeds())]
    _import_and_parse(data.draw(damaged(raw)))


@FUZZ
@given(data=st.data(), seed=st.integers(0, 10_000))
def test_structurally_damaged_vcr_import_or_fail_clearly(data: Any, seed: int) -> None:
    doc = yaml.load(
        vcr_seeds()[seed % len(vcr_seeds())], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    )
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate_tree(data, doc)
    buf = io.StringIO()
    yaml.safe_dump(doc, buf)
    _import_and_parse(buf.getvalue().encode())


# ---------------------------------------------------------------------------------------------
# Regressions found by the fuzzer (each one a minimal case of a failure it reported)


@pytest.mark.parametrize("enc", ["gzip", "deflate", "zstd"])
def test_regression_compressed_stream_whose_first_read_is_one_byte(enc: str) -> None:
    """Found by test_compressed_body_rechunked_anywhere_decodes_to_the_original: the encoding was
    sniffed from the first chunk only, so a gzip stream whose first socket read was the single byte
    ``1f`` was "not gzip" and kept compressed; deflate chose raw vs zlib from one byte."""
    body = b'data: {"x": 1}\n\n' * 20
    wire = b"".join(_compress(enc, [body]))
    chunks = [(0.0, wire[:1]), (0.1, wire[1:2]), (0.2, wire[2:])]
    res = decode_chunks(chunks, enc)
    assert res.decoded_from == enc and not res.notes
    assert b"".join(c for _, c in res.chunks) == body
    unlabelled = decode_chunks(chunks, None) if enc in ("gzip", "zstd") else None
    if unlabelled is not None:  # sniffed without a header, across the first chunks too
        assert b"".join(c for _, c in unlabelled.chunks) == body


def test_regression_one_byte_deflate_body_is_kept() -> None:
    res = decode_chunks([(0.0, b"\x78")], "deflate")
    assert res.decoded_from is None and b"".join(c for _, c in res.chunks) == b"\x78"


def test_regression_aws_eventstream_bad_prelude_keeps_the_whole_rest() -> None:
    """Found by test_framing_does_not_depend_on_chunk_boundaries (Bedrock stream, damaged): after a
    corrupt prelude the "rest of the stream kept raw" was only what was buffered so far; the chunks
    not yet read were dropped, so how many bytes survived depended on where the reads fell."""
    import struct

    def aws_frame(payload: bytes) -> bytes:
        prelude = struct.pack(">II", 16 + len(payload), 0)
        prelude += struct.pack(">I", zlib.crc32(prelude))
        return prelude + payload + struct.pack(">I", zlib.crc32(prelude + payload))

    data = (
        aws_frame(b'{"a":1}') + b"\x00\x00\x8e\x00garbage-garbage-garbage" + aws_frame(b'{"b":2}')
    )
    whole = frame([(0.0, data)], "application/vnd.amazon.eventstream")
    for cut in range(1, len(data)):
        split = frame([(0.0, data[:cut]), (0.1, data[cut:])], "application/vnd.amazon.eventstream")
        assert [e.data for e in split.events] == [e.data for e in whole.events] == ['{"a":1}']
        assert split.tail == whole.tail == data[23:].hex(), cut


@pytest.mark.parametrize(
    "body",
    [
        "parsed_body: !!binary /58=",
        "parsed_body: {data: !!binary /58=}",
        "parsed_body: {1: one, 2: two}",
        "body: {1: one, nested: {blob: !!binary aGk=}}",
    ],
)
def test_regression_vcr_parsed_body_that_orjson_does_not_take(body: str) -> None:
    """Found by test_structurally_damaged_vcr_import_or_fail_clearly: a ``parsed_body`` holding
    ``!!binary`` (or integer keys) made the importer raise a bare ``TypeError`` from orjson, a
    traceback out of ``looptap import`` instead of an imported body or a clear error."""
    doc = f"""
interactions:
- request:
    method: POST
    uri: https://api.openai.com/v1/chat/completions
    body: '{{"model": "m", "messages": []}}'
    headers: {{}}
  response:
    status: {{code: 200, message: OK}}
    headers: {{}}
    {body}
"""
    (ex,) = list(read_vcr(doc.encode()))
    assert ex.response_body
    parse_exchange(ex)
