"""A request parsed as a delta (only what it appended, the kept history shared with the request it
extends) gives exactly the full parse, for every family, on the histories the concurrency agents
send (tests/support/concurrency.py, every family x variant: clean, dropped and misnamed results, a
call not echoed, shared ids) and on hand-made boundaries where an adapter merges items.

The corpus half of this property is tests/cassettes/analysis/test_incremental.py. A delta parse that
disagrees makes the threading depend on whether a turn's base was still held (more than 16 active
conversations release it): bench/precision.py's one false ``C.dropped_tool_result`` at
openai_responses N=64 no_echo came from that (results grouped in the full parse, apart in the
delta).

The agents are the harness's own code (its child script, run in-process with a fake opener that
answers as its scripted upstream does), so the shapes are the ones the benchmark records."""

from __future__ import annotations

import io
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from looptap.cassettes.wire import Exchange
from tests.support.concurrency import (
    BUG_TURN,
    CHILD,
    FAMILIES,
    SCHEMA,
    VARIANTS,
    count_results,
    family_of,
    upstream_answer,
)

BASES = {
    "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
}


def _agent_exchanges(family: str, variant: str, monkeypatch: pytest.MonkeyPatch) -> list[Exchange]:
    """One buggy agent's requests (with its upstream's answers), as the concurrency harness's
    child sends them, without a process or a socket."""
    for k, v in BASES.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(
        sys, "argv", ["child", family, "1", variant, "0", "1", json.dumps(SCHEMA), str(BUG_TURN)]
    )
    ns: dict[str, Any] = {}
    exec(CHILD.split("rngs = [")[0], ns)  # the definitions: url, first, body, calls, results, agent
    ids = itertools.count()
    out: list[Exchange] = []

    class Opener:
        def open(self, req: Any, timeout: float) -> io.BytesIO:
            body = json.loads(req.data)
            fam = family_of(req.full_url.split("?")[0])
            assert fam == family
            two = req.headers.get("X-bench-two") == "1"
            turn = int(req.headers.get("X-bench-turn", "0"))
            answer = upstream_answer(
                family,
                [f"call_{next(ids):04d}" for _ in range(2 if two else 1)]
                if count_results(family, body) < 4
                else None,
                turn,
            )
            data = json.dumps(answer).encode()
            out.append(
                Exchange(
                    "POST",
                    req.full_url,
                    [("content-type", "application/json")],
                    req.data,
                    status=200,
                    response_headers=[("content-type", "application/json")],
                    response_chunks=[(0.01, data)],
                    ttfb=0.01,
                )
            )
            return io.BytesIO(data)

    ns["OPENER"] = Opener()
    ns["time"] = type("NoSleep", (), {"sleep": staticmethod(lambda s: None)})
    ns["agent"](0, ns["random"].Random(1))
    assert not ns["errors"]
    return out


def _assert_delta_equals_full(exchanges: list[Exchange], tmp: Path, label: str) -> int:
    """Write ``exchanges`` as a cassette (the writer stores each request as a delta of an earlier
    one where it can), read it back, parse every request both ways; returns how many went as
    deltas."""
    path = tmp / f"{label}.jsonl"
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    read = read_records(path).exchanges
    parsed: dict[int, RoundTrip] = {}
    deltas = 0
    for ex in read:
        assert ex.seq is not None
        base = (ex.history_delta or {}).get("base")
        inc = parse_exchange(ex, parsed.get(base) if isinstance(base, int) else None)
        full = parse_exchange(ex)
        parsed[ex.seq] = inc
        deltas += inc.reused is not None
        assert inc.request == full.request, (
            f"{label}#{ex.seq}: the delta parse differs from the full one"
        )
    inc_turns = analyse(read).turns
    full_turns = analyse(read, [parse_exchange(e) for e in read]).turns
    assert [
        (t.conversation, t.c.kept, len(t.c.appended), sorted(f.code for f in t.findings))
        for t in inc_turns.values()
    ] == [
        (t.conversation, t.c.kept, len(t.c.appended), sorted(f.code for f in t.findings))
        for t in full_turns.values()
    ], label
    return deltas


@pytest.mark.parametrize("family", FAMILIES)
def test_the_concurrency_agents_histories_parse_the_same_as_deltas(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deltas = 0
    for variant in VARIANTS:
        exchanges = _agent_exchanges(family, variant, monkeypatch)
        assert len(exchanges) >= 3, variant  # the bug turn is reached
        deltas += _assert_delta_equals_full(exchanges, tmp_path, f"{family}-{variant}")
    assert deltas >= len(VARIANTS) * 2  # the property was exercised, not skipped by full parses


def test_a_result_whose_call_was_not_echoed_stays_its_own_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The no_echo bug turn of the Responses agent: [user, call, result,
    result-of-an-unechoed-call]. Both parses give four messages, the last the one result the request
    appended, and the threading sees it appended (so the missing echo is named, and no result counts
    as dropped)."""
    exchanges = _agent_exchanges("openai_responses", "no_echo", monkeypatch)
    bug = exchanges[BUG_TURN]
    items = json.loads(bug.request_body)["input"]
    assert [i.get("type") for i in items] == [
        None,
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert len(parse_exchange(bug).request.messages) == 4  # type: ignore[union-attr]
    _assert_delta_equals_full(exchanges, tmp_path, "no_echo")
    turns = list(analyse(exchanges).turns.values())
    codes = {f.code for f in turns[BUG_TURN].findings}
    assert "C.assistant_not_echoed" in codes and "C.dropped_tool_result" not in codes, codes
    assert len(turns[BUG_TURN].c.appended) == 1


def _responses(items: list[dict[str, Any]]) -> Exchange:
    body = json.dumps(
        {"model": "gpt-4o-mini", "instructions": "Be brief.", "input": items}
    ).encode()
    answer = json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-4o-mini",
            "output": [
                {
                    "type": "message",
                    "id": "msg_9",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                }
            ],
        }
    ).encode()
    return Exchange(
        "POST",
        "https://api.openai.com/v1/responses",
        [("content-type", "application/json")],
        body,
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.01, answer)],
        ttfb=0.01,
    )


def test_a_history_whose_appended_items_continue_the_last_kept_message(tmp_path: Path) -> None:
    """Consecutive model-side items are one message: a request that appends an assistant item right
    after the assistant message its predecessor ended with continues that message. The delta parse
    (which would start a new one) is not used there; the full parse is. (With two or more appended
    items that merge among themselves the delta parse's count check already refuses.)"""
    user = {"role": "user", "content": "Go on."}
    said = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Part one", "annotations": []}],
    }
    for i, more in enumerate(
        [
            [
                {
                    "type": "reasoning",
                    "id": "rs_2",
                    "summary": [{"type": "summary_text", "text": "continue"}],
                }
            ],
            [
                {
                    "type": "function_call",
                    "id": "fc_2",
                    "call_id": "call_2",
                    "name": "lookup",
                    "arguments": "{}",
                }
            ],
        ]
    ):
        first, second = _responses([user, said]), _responses([user, said, *more])
        assert len(parse_exchange(second).request.messages) == 2  # type: ignore[union-attr]
        assert _assert_delta_equals_full([first, second], tmp_path, f"continued-{i}") == 0
