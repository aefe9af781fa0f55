"""Issue 92: a stream event its family's reader could not read (a payload that is not JSON, an
event of a type it does not know) is said in the round trip's read state (``partial``, with what
was not read), never skipped silently; no finding rests on the answer it may have held. Both
tests fail on c86d115d and on 21bc15ea."""

from __future__ import annotations

import orjson
from test_compat_stream_ends import HELLO, USAGE, _chunk, _codes, _data, _exchange, _read

from looptap.cassettes.parsing import parse_exchange


def test_an_event_not_json_mid_stream_makes_the_answer_partial() -> None:
    """A payload that is not JSON in the middle of a stream was skipped silently; it is now said
    in the read state, and no finding rests on the answer it may have held."""
    body = b"".join(
        [
            *HELLO,
            b"data: {not json\n\n",
            _data(_chunk({}, "length", usage=USAGE)),
            b"data: [DONE]\n\n",
        ]
    )
    rt = _read(body)
    assert rt.read == "partial"
    assert "answer: stream: 1 event not JSON, not read" in rt.unread
    codes = _codes(body)
    assert "A.truncated_length" not in codes  # rests on the finish: withheld, said
    # Clean twin: every event read, the same finish is judged.
    twin = b"".join([*HELLO, _data(_chunk({}, "length", usage=USAGE)), b"data: [DONE]\n\n"])
    assert _read(twin).read == "complete" and "A.truncated_length" in _codes(twin)


def test_an_event_of_an_unknown_type_makes_the_answer_partial() -> None:
    """Anthropic's Messages stream: an event type its reader does not know is said by name."""
    events = [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1",
          "type": "message", "role": "assistant", "model": "claude-x", "content": [],
          "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
          "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
          "delta": {"type": "text_delta", "text": "Hi"}}),
        ("future_event", {"type": "future_event", "index": 0}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
          "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    body = b"".join(b"event: " + n.encode() + b"\n" + _data(d) for n, d in events)
    ex = _exchange(body, "https://api.anthropic.com/v1/messages")
    ex.request_body = orjson.dumps(
        {
            "model": "claude-x",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    rt = parse_exchange(ex)
    assert rt.response is not None and rt.response.text == "Hi"
    assert rt.read == "partial"
    assert "answer: stream: events of a type looptap does not read (future_event)" in rt.unread


def test_a_stream_with_an_event_not_read_is_not_judged_cut() -> None:
    """A finish chunk came, no ``[DONE]``, and an event in the middle was not JSON: whether the
    stream ended whole rests on what was not read, so it is not judged (was: an
    ``A.stream_truncated`` error, the event taken for a cut). A stream with every event read and
    no finish is still cut."""
    body = b"".join([*HELLO, b"data: {not json\n\n", _data(_chunk({}, "stop", usage=USAGE))])
    assert _read(body).read == "partial"
    assert "A.stream_truncated" not in _codes(body)
    assert "A.stream_truncated" in _codes(b"".join(HELLO))
