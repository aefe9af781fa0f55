"""Stream framing and content decoding, chunk by chunk."""

from __future__ import annotations

import gzip
import zlib

import brotli
import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from looptap.cassettes.wire import decode_chunks, frame, parse_sse

SSE = (
    b'event: a\ndata: {"x":1}\n\n: keep-alive comment\ndata: '
    b'{"x":2}\ndata: {"y":3}\n\ndata: [DONE]\n\n'
)


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_sse_any_line_ending_and_comments(eol: bytes) -> None:
    body = SSE.replace(b"\n", eol)
    f = frame([(0.0, body)], "text/event-stream")
    assert f.kind == "sse"
    assert [(e.event, e.data) for e in f.events] == [
        ("a", '{"x":1}'),
        (None, '{"x":2}\n{"y":3}'),
        (None, "[DONE]"),
    ]
    assert f.tail == ""


@given(
    st.lists(st.integers(min_value=1, max_value=len(SSE) - 1), max_size=8, unique=True),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
@settings(max_examples=200, deadline=None)
def test_sse_is_the_same_however_the_bytes_are_split(cuts: list[int], eol: bytes) -> None:
    body = SSE.replace(b"\n", eol)
    cuts = sorted(c for c in cuts if c < len(body))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    whole = parse_sse([(0.0, body)])
    split = parse_sse([(float(i), p) for i, p in enumerate(pieces)])
    assert [(e.event, e.data) for e in split.events] == [(e.event, e.data) for e in whole.events]


def test_sse_event_offsets_are_the_chunk_that_completed_them() -> None:
    f = parse_sse([(0.1, b'data: {"a"'), (0.2, b":1}\n"), (0.3, b"\n"), (0.4, b"data: [DONE]\n\n")])
    assert [(e.data, e.offset) for e in f.events] == [('{"a":1}', 0.3), ("[DONE]", 0.4)]


def test_sse_multibyte_char_split_across_chunks() -> None:
    data = 'data: {"t":"héllo ☃"}\n\n'.encode()
    i = data.index("☃".encode()) + 1
    f = parse_sse([(0.0, data[:i]), (0.1, data[i:])])
    assert orjson.loads(f.events[0].data) == {"t": "héllo ☃"} and not f.notes


def test_sse_cut_mid_event_keeps_data_lines_and_tail() -> None:
    f = parse_sse([(0.0, b'data: {"a":1}\n\ndata: {"b":2}\ndata: {"c"')])
    # Complete data lines of the unterminated event are dispatched; the cut line is kept as tail.
    assert [e.data for e in f.events] == ['{"a":1}', '{"b":2}']
    assert f.tail == 'data: {"c"'


def test_ndjson_and_cut_last_line() -> None:
    f = frame([(0.0, b'{"a":1}\n{"b":2}\n{"c":'), (0.5, b"")], "application/x-ndjson")
    assert (
        f.kind == "ndjson"
        and [e.data for e in f.events] == ['{"a":1}', '{"b":2}']
        and f.tail == '{"c":'
    )


def test_json_array_stream_incremental_and_cut() -> None:
    f = frame(
        [(0.1, b'[{"a":1}'), (0.2, b',\r\n{"b":[1,2]}'), (0.3, b',\r\n{"c":')], "application/json"
    )
    assert f.kind == "json_array"
    assert [(e.data, e.offset) for e in f.events] == [('{"a":1}', 0.1), ('{"b":[1,2]}', 0.2)]
    assert f.tail == '{"c":'
    whole = frame([(None, b'[{"a":1},{"b":2}]')], "application/json")
    assert whole.kind == "json_array" and len(whole.events) == 2


def test_sniffing_beats_content_type() -> None:
    assert frame([(0, b'data: {"a":1}\n\n')], "application/json").kind == "sse"
    assert frame([(0, b'{"a":1}')], "text/event-stream").kind == "json"
    assert frame([(0, b"<html>oops</html>")], "application/json").kind == "text"
    assert frame([(0, b"\x00\xff\xfe")], None).kind == "binary"
    assert frame([], None).kind == "empty"


def _split(data: bytes, n: int) -> list[tuple[float | None, bytes]]:
    return [(i * 0.01, data[i : i + n]) for i in range(0, len(data), n)]


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("br", brotli.compress),
        ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send
    ],
)
def test_incremental_decoding_keeps_chunks(encoding: str, compress: object) -> None:
    plain = SSE * 50
    packed = compress(plain)  # type: ignore[operator]
    res = decode_chunks(_split(packed, 37), encoding)
    assert res.decoded_from == encoding and not res.notes
    assert b"".join(c for _, c in res.chunks) == plain
    assert [t for t, _ in res.chunks] == [t for t, _ in _split(packed, 37)]


def test_stacked_encodings() -> None:
    plain = b'{"a":1}' * 100
    res = decode_chunks([(0.0, brotli.compress(gzip.compress(plain)))], "gzip, br")
    assert b"".join(c for _, c in res.chunks) == plain


def test_lying_headers_keep_bytes_and_say_so() -> None:
    plain = [(0.0, b'{"a":1}')]
    res = decode_chunks(plain, "gzip")
    assert res.chunks == plain and res.decoded_from is None and "not gzip" in res.notes[0]
    res = decode_chunks([(0.0, gzip.compress(b'{"a":1}'))], None)
    assert (
        b"".join(c for _, c in res.chunks) == b'{"a":1}'
        and "without a Content-Encoding" in res.notes[0]
    )
    corrupt = gzip.compress(b'{"a":1}' * 100)
    corrupt = corrupt[:20] + b"\x00" * 10 + corrupt[30:]
    res = decode_chunks([(0.0, corrupt)], "gzip")
    assert res.chunks == [(0.0, corrupt)] and "could not be decoded" in res.notes[0]
    res = decode_chunks([(0.0, b"abc")], "compress")
    assert res.chunks == [(0.0, b"abc")] and "unknown Content-Encoding" in res.notes[0]


def test_the_recording_pipeline_decodes_what_an_entry_point_marks_encoded(tmp_path: object) -> None:
    """Every entry point hands the pipeline what it captured: sides marked content-encoded are
    decoded there, once (decode_exchange is idempotent), and unmarked ones are left alone."""
    from pathlib import Path

    from looptap.cassettes.recording.pipeline import CassetteWriter
    from looptap.cassettes.storage import read_records
    from looptap.cassettes.wire import Exchange, decode_exchange

    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    answer = SSE
    packed = gzip.compress(answer, mtime=0)
    req_packed = gzip.compress(body, mtime=0)

    def captured(encoded: bool) -> Exchange:
        return Exchange(
            "POST",
            "https://api.openai.com/v1/chat/completions",
            [("content-type", "application/json"), ("content-encoding", "gzip")],
            req_packed,
            200,
            "OK",
            [("content-type", "text/event-stream"), ("content-encoding", "gzip")],
            [(0.01, packed[:20]), (0.02, packed[20:])],
            request_encoded=encoded,
            response_encoded=encoded,
        )

    ex = captured(True)
    decode_exchange(ex)
    assert (ex.request_body, b"".join(c for _, c in ex.response_chunks), ex.decoded_from) == (
        body,
        answer,
        "gzip",
    )
    assert not ex.request_encoded and not ex.response_encoded
    notes = list(ex.notes)
    decode_exchange(ex)  # again: nothing to do, nothing noted
    assert (ex.request_body, b"".join(c for _, c in ex.response_chunks), ex.notes) == (
        body,
        answer,
        notes,
    )

    path = Path(str(tmp_path)) / "run.jsonl"
    with CassetteWriter(path) as w:
        w.append(captured(True))  # as the proxy hands it over
        # as an importer that already decoded hands it over (here: bytes that happen to be gzip)
        w.append(captured(False))
    first, second = read_records(path).exchanges
    assert first.request_body == body and b"".join(c for _, c in first.response_chunks) == answer
    assert first.decoded_from == "gzip"
    assert second.request_body == req_packed and second.decoded_from is None


def test_an_lf_stream_and_its_crlf_twin_frame_alike() -> None:
    """An LF-only stream is split at C speed, one with a CR by the CR/CRLF/LF pattern (issue 73):
    the same events either way, however the stream is cut into chunks."""
    events = [f'{{"type":"delta","n":{k},"text":"w{k} "}}' for k in range(40)]
    body = "".join(f"event: delta\ndata: {e}\n\n" for e in events).encode()
    for size in (1, 2, 7, 64, len(body)):
        chunks = [(0.1, body[i : i + size]) for i in range(0, len(body), size)]
        lf = parse_sse(chunks)
        assert [e.data for e in lf.events] == events and lf.tail == ""
        assert {e.event for e in lf.events} == {"delta"}
        for eol in (b"\r\n", b"\r"):
            twin = parse_sse([(t, c.replace(b"\n", eol)) for t, c in chunks])
            assert [(e.data, e.event) for e in twin.events] == [
                (e.data, e.event) for e in lf.events
            ]


#: Events and lines of every kind the reader knows, each a whole event or a piece of one: the usual
#: ``event:``/``data:`` events (read by one match each) between comments, ids, ``error:`` lines,
#: multi-line data, non-SSE lines, fields without a space or a colon, invalid UTF-8 and a cut end.
_SSE_MIX = [
    b'event: message_start\ndata: {"type":"message_start"}\n\n',
    b'data: {"a":1}\n\n',
    b"event:x\ndata:y\n\n",
    b"event: \ndata: \n\n",
    b"data:  two spaces\n\n",
    b"data\n\n",
    b": keep-alive\n",
    b"id: 7\n",
    b"retry: 10\n",
    b"\n",
    b'error: {"message":"boom"}\n\n',
    b"event: e\ndata: d\ndata: e\n\n",
    b'{"error":"not sse"}\n\n',
    b"event: lonely\n\n",
    b"data: caf\xc3\xa9 \xe2\x98\x83\n\n",
    b"data: bad \xff byte\n\n",
    b"data: [DONE]\n\n",
]


@pytest.mark.parametrize(
    "tail", [b"", b"data: cut", b'data: {"x":1}\n', b"event: e\n", b"\xe2\x98"]
)
def test_sse_whole_events_read_as_their_lines_are(tail: bytes) -> None:
    """A stream whose chunks are whole events (read by one match each) gives the events, offsets,
    tail and notes the same bytes give fed one byte at a time (every line read by the line
    reader), each byte carrying its chunk's offset."""
    chunks: list[tuple[float | None, bytes]] = []
    for k in range(3 * len(_SSE_MIX)):
        piece = b"".join(_SSE_MIX[(k * j) % len(_SSE_MIX)] for j in range(1 + k % 3))
        chunks.append((None if k % 7 == 3 else k / 10, piece))
    chunks.append((9.0, tail))
    whole = parse_sse(chunks)
    by_byte = parse_sse([(t, c[i : i + 1]) for t, c in chunks for i in range(len(c))])
    assert [(e.data, e.event, e.offset) for e in whole.events] == [
        (e.data, e.event, e.offset) for e in by_byte.events
    ]
    assert (whole.tail, whole.notes) == (by_byte.tail, by_byte.notes)
    assert len(whole.events) > 3 * len(_SSE_MIX)


def test_sse_crlf_stream_split_at_every_byte() -> None:
    """A CRLF (and a CR) stream, cut in two at every byte, reads as it does whole: the fast path
    reads LF-only text, and a CR at a chunk's end may be the first half of a CRLF."""
    lf = b"".join(_SSE_MIX)
    for eol in (b"\r\n", b"\r"):
        body = lf.replace(b"\n", eol)
        whole = parse_sse([(0.5, body)])
        assert whole.events and not whole.tail
        for i in range(len(body) + 1):
            split = parse_sse([(0.5, body[:i]), (0.5, body[i:])])
            assert [(e.data, e.event) for e in split.events] == [
                (e.data, e.event) for e in whole.events
            ], (eol, i)
            assert split.tail == whole.tail


def test_sse_usual_events_are_not_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of whole ``event:``/``data:`` events never reach the line reader (the per-line
    Python work the match saves); a comment between them does, and the events after it are matched
    again."""
    from looptap.cassettes.wire import _framing

    lines: list[str] = []
    line = _framing._SSEParser._line
    monkeypatch.setattr(
        _framing._SSEParser, "_line", lambda self, s, t: (lines.append(s), line(self, s, t))
    )
    chunks = [(k / 10, f'event: delta\ndata: {{"n":{k}}}\n\n'.encode()) for k in range(50)]
    chunks.insert(25, (2.45, b": ping\n"))
    f = parse_sse(chunks)
    assert [e.data for e in f.events] == [f'{{"n":{k}}}' for k in range(50)]
    assert [e.offset for e in f.events] == [k / 10 for k in range(50)]
    assert lines == [": ping"]
