"""The inspector's fixture run: two conversations with findings in every layer and streamed turns
whose text arrives in timed pieces (so playback has something to re-stream).

Built from the analysis scenarios (real wire format) and written with the real cassette writer.
Everything is deterministic (explicit ids, fixed chunk offsets), so snapshots are stable.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cassettes" / "analysis"))

from scenarios import WEATHER, Call, Script, Tokens

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange

#: Seconds between the pieces of a re-paced stream.
PACE = 0.08
ANSWER = (
    "It is sunny and 21 degrees in Paris today, with a light breeze from the west and clear skies."
)


def repace(ex: Exchange, pace: float = PACE) -> Exchange:
    """Split a recorded SSE stream's text deltas into word-sized events, one chunk each, ``pace``
    seconds apart (as a real stream arrives)."""
    body = ex.response_body.decode()
    chunks: list[tuple[float | None, bytes]] = []
    t = 0.3  # time to first token
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        data = orjson.loads(lines[-1].removeprefix("data: "))
        delta = data.get("delta") if isinstance(data, dict) else None
        if isinstance(delta, dict) and delta.get("type") == "text_delta":
            words = delta["text"].split(" ")
            for i, w in enumerate(words):
                piece = w + (" " if i < len(words) - 1 else "")
                ev = {**data, "delta": {"type": "text_delta", "text": piece}}
                chunks.append(
                    (
                        round(t, 3),
                        "event: content_block_delta\ndata: "
                        f"{orjson.dumps(ev).decode()}\n\n".encode(),
                    )
                )
                t += pace
        else:
            chunks.append((round(t, 3), (block + "\n\n").encode()))
            t += 0.01
    ex.response_chunks = chunks
    ex.ttfb = 0.25
    ex.duration = round(t, 3)
    return ex


def exchanges() -> list[Exchange]:
    out: list[Exchange] = []
    # c1: a weather agent, streamed; turn 0 calls the tool, turn 1 answers at recorded pace.
    a = Script("anthropic", tools=[WEATHER])
    a.user("What is the weather in Paris?")
    out.append(
        repace(
            a.reply(
                "Let me look that up.",
                calls=[Call("get_weather", {"city": "Paris"}, id="toolu_paris")],
                stream=True,
                usage=Tokens(310, 40),
            )
        )
    )
    a.results('{"temp_c": 21, "sky": "clear"}')
    out.append(repace(a.reply(ANSWER, stream=True, usage=Tokens(380, 30))))
    # c2: a client that drops a tool result (C), a call that breaks the schema (E), a truncation
    # (A).
    b = Script("anthropic", tools=[WEATHER])
    b.user("Compare the weather in Oslo and Rome.")
    out.append(
        b.reply(
            "Checking both cities.",
            calls=[
                Call("get_weather", {"city": "Oslo"}, id="toolu_oslo"),
                Call("get_weather", {"town": "Rome"}, id="toolu_rome"),
            ],
            usage=Tokens(320, 60),
        )
    )
    b.history.extend(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_oslo",
                        "content": '{"temp_c": 4, "sky": "snow"}',
                    }
                ],
            }
        ]
    )
    out.append(
        b.reply(
            "Oslo is snowy at 4 degrees; Rome's report", finish="max_tokens", usage=Tokens(400, 16)
        )
    )
    b.user("Please finish the comparison.")
    out.append(b.reply("Rome could not be checked; Oslo is snowy and cold.", usage=Tokens(440, 20)))
    for i, ex in enumerate(out):
        ex.started = 1_763_700_000.0 + i * 2
    return out


def write(path: Path) -> Path:
    if path.exists():
        path.unlink()
    with CassetteWriter(path, meta={"source": "inspector-fixture"}) as w:
        for ex in exchanges():
            w.append(ex)
    return path
