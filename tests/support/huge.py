"""Huge runs for measuring memory: a cassette of ``n`` round trips written fast, without the
pipeline.

Two shapes (``bench/huge.py`` measures both; tests use small sizes):

* ``one_turn``: ``n`` one-turn Chat Completions conversations, each asking its own question (the
  shape of a batch job or an evaluation sweep through the proxy);
* ``long``: ``n`` round trips in conversations of ``turns`` turns each, every request stored as a
  history delta against the previous one, as the recorder writes them.

Records are what the recorder writes, less the optional ``derived`` and ``parsed`` blocks (a
reader recomputes both), so every reader parses each response: the slow path, and the one whose
memory matters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

__all__ = ["SHAPES", "write_huge"]

SHAPES = ("one_turn", "long")

_HEADER = (
    b'{"type":"header","format":"looptap-cassette","format_version":1,"writer":"looptap '
    b'0.1.0","created":"2026-01-01T00:00:00.000Z","meta":{}}\n'
)
#: The prose ``words`` draws from (no secret's shape: the recorder's gate reads it as text).
_WORDS = ("the", "report", "on", "quarterly", "sales", "figures", "for", "each", "region", "and")
_URL = "https://api.openai.com/v1/chat/completions"
_HEADERS = [["content-type", "application/json"]]


def _response(seq: int, model: str) -> bytes:
    body = {
        "id": f"chatcmpl-{seq}",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"Answer {seq}."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
    return orjson.dumps(
        {"status": 200, "reason": "OK", "headers": _HEADERS, "body": {"json": body, "t": 0.1}}
    )


def _record(seq: int, body: dict[str, object], run: _Run) -> bytes:
    ttfb, duration = run.timing(seq) if run.timing else (0.4, 0.5)
    rec = {
        "type": "exchange",
        "seq": seq,
        "started": run.start + seq,
        "method": "POST",
        "url": _URL,
        "request": {"headers": _HEADERS, "body": body},
        "response": orjson.Fragment(_response(seq, run.served)),
        "timing": {"ttfb": ttfb, "duration": duration},
    }
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)


@dataclass(frozen=True)
class _Run:
    start: float
    model: str
    served: str
    timing: Callable[[int], tuple[float, float]] | None


def write_huge(
    path: Path,
    n: int,
    shape: str = "one_turn",
    turns: int = 1000,
    *,
    start: float = 1767225600.0,
    model: str = "gpt-4o-mini",
    meta: dict[str, object] | None = None,
    timing: Callable[[int], tuple[float, float]] | None = None,
    words: int = 0,
) -> Path:
    """Write a cassette of ``n`` round trips of ``shape`` (see the module docstring) at ``path``;
    its header made and its first round trip started at ``start`` (epoch seconds), one a second
    after; ``model``
    asked for (served as ``gpt-4o-mini-2024-07-18`` when it is the default, else as asked);
    ``meta``: the header's; ``timing``: seq → (ttfb, duration) seconds (default 0.4, 0.5);
    ``words``: that many words of prose after each conversation's first question (a file of a
    given size in fewer round trips: a reader's work grows with the round trips, far less with
    their bytes)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, not {shape!r}")
    served = "gpt-4o-mini-2024-07-18" if model == "gpt-4o-mini" else model
    run = _Run(start, model, served, timing)
    prose = "".join(f" {_WORDS[i % len(_WORDS)]}" for i in range(words))
    created = datetime.fromtimestamp(start, UTC).isoformat(timespec="milliseconds")
    header = _HEADER.replace(b"2026-01-01T00:00:00.000Z", created.replace("+00:00", "Z").encode())
    if meta is not None:
        header = header.replace(b'"meta":{}', b'"meta":' + orjson.dumps(meta))
    with path.open("wb") as fh:
        fh.write(header)
        buf: list[bytes] = []
        for seq in range(n):
            if shape == "one_turn" or seq % turns == 0:
                conv = seq if shape == "one_turn" else seq // turns
                body: dict[str, object] = {
                    "json": {
                        "model": model,
                        "messages": [
                            {"role": "user", "content": f"Question {conv} of the sweep?{prose}"}
                        ],
                    }
                }
            else:
                keep = 2 * (seq % turns) - 1
                append = [
                    {"role": "assistant", "content": f"Answer {seq - 1}."},
                    {"role": "user", "content": f"And then, step {seq}?"},
                ]
                body = {
                    "delta": {
                        "base": seq - 1,
                        "key": "messages",
                        "keep": keep,
                        "append": append,
                        "order": ["model", "messages"],
                        "inherit": ["model"],
                        "set": {},
                    }
                }
            buf.append(_record(seq, body, run))
            if len(buf) >= 4096:
                fh.write(b"".join(buf))
                buf.clear()
        fh.write(b"".join(buf))
    return path
