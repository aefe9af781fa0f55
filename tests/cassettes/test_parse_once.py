"""Parse once, from the recorder to the screen: each response body is parsed by the recorder's writer
alone (readers take its sealed parse), each request by a reader alone (the writer stores nothing of
its request parse, so it makes none), and a viewer going through a run's turns parses each
appended message once. Counted on corpus runs by wrapping the two functions that parse a body."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _corpus import corpus_files

from cassettes.parsing import roundtrip
from cassettes.reading.run import Run, open_run
from cassettes.recording.pipeline import CassetteWriter
from cassettes.storage.vcr import load_vcr
from cassettes.wire.exchange import Exchange


@pytest.fixture(autouse=True)
def _own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(tmp_path / "state"))


def _multi_turn(n: int = 12) -> list[Exchange]:
    """Round trips of the first ``n`` corpus recordings with three round trips or more (their
    later requests extend the earlier ones: history deltas)."""
    out: list[Exchange] = []
    files = 0
    for p in corpus_files("llm-anthropic/**/*.yaml") + corpus_files("pydantic-ai/**/test_openai*/*.yaml"):
        got = load_vcr(p)
        if len(got) >= 3:
            out.extend(got)
            files += 1
        if files >= n:
            break
    assert files == n
    return out


class Parses:
    """Which round trips had their request and their response parsed (by seq), and how many
    request messages were parsed (all of them, or only those appended to a base)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.requests: Counter[int] = Counter()
        self.responses: Counter[int] = Counter()
        self.messages = 0
        real_request, real_response = roundtrip._parse_request, roundtrip._parse_response_side

        def request(rt: roundtrip.RoundTrip, *args: Any) -> None:
            real_request(rt, *args)
            assert rt.seq is not None
            self.requests[rt.seq] += 1
            n = len(rt.request.messages) if rt.request is not None else 0
            self.messages += n - rt.reused[1] if rt.reused is not None else n

        def response(rt: roundtrip.RoundTrip, *args: Any) -> None:
            assert rt.seq is not None
            self.responses[rt.seq] += 1
            real_response(rt, *args)

        monkeypatch.setattr(roundtrip, "_parse_request", request)
        monkeypatch.setattr(roundtrip, "_parse_response_side", response)

    def clear(self) -> None:
        self.requests.clear()
        self.responses.clear()
        self.messages = 0


def _record(path: Path, exchanges: list[Exchange], **options: Any) -> None:
    with CassetteWriter(path, meta={"source": "looptap proxy"}, **options) as w:
        for ex in exchanges:
            w.append(dataclasses.replace(ex))


def _opened(path: Path) -> Run:
    run = open_run(path, follow=True)
    while not run.step().at_end:
        pass
    run.finish()
    return run


def test_each_body_is_parsed_once_from_the_recorder_to_the_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exchanges = _multi_turn()
    parses = Parses(monkeypatch)
    path = tmp_path / "run.jsonl"
    # The recorder (proxy/writer.py builds its writer so): every response parsed once, no request.
    _record(path, exchanges, requests=False)
    answered = set(parses.responses)
    assert len(answered) > 30 and set(parses.responses.values()) == {1}
    assert not parses.requests
    parses.clear()
    # The inspector opening the run: every request parsed once, no stored response again.
    run = _opened(path)
    generations = sorted(run.summaries)
    assert len(generations) > 20
    assert not parses.responses, f"stored responses parsed again: {sorted(parses.responses)}"
    assert set(parses.requests) >= set(generations) and set(parses.requests.values()) == {1}
    opened = parses.messages
    parses.clear()
    # Every turn selected in recording order (the inspector's selection): the responses are the
    # writer's, and the requests' messages are parsed no more than the opening parsed them.
    for seq in generations:
        _, rt = run.by_seq(seq)
        assert rt.request is not None and rt.response is not None
    assert not parses.responses, f"stored responses parsed again on selection: {sorted(parses.responses)}"
    assert parses.messages <= opened, (parses.messages, opened)
    run.close()
    # A command's pass over the run (open_run, as show and the exports read it): no stored
    # response parsed again either.
    parses.clear()
    every = open_run(path)
    assert sum(1 for _ in zip(every.roundtrips, every.exchanges, strict=True)) == len(exchanges)
    assert not parses.responses, f"stored responses parsed again by open_run: {sorted(parses.responses)}"


def test_the_recorder_writes_the_same_records_without_parsing_requests(tmp_path: Path) -> None:
    """What the recorder stores does not depend on the request parse it no longer makes: the same
    round trips written with and without it give the same records (sealed parses included)."""
    exchanges = _multi_turn()
    with_requests, without = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _record(with_requests, exchanges)
    _record(without, exchanges, requests=False)
    a, b = with_requests.read_bytes().splitlines()[1:], without.read_bytes().splitlines()[1:]
    assert len(a) == len(exchanges) and b"parsed" in a[-1]
    assert a == b


def test_a_cassette_without_sealed_parses_is_parsed_from_its_raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An older cassette (or another machine's): no block a reader may take, so the raw is parsed,
    once per opening, and reads as the same turns."""
    exchanges = _multi_turn(4)
    path = tmp_path / "run.jsonl"
    _record(path, exchanges, requests=False)
    trusted = _opened(path)
    turns = {s: trusted.full_turn(s).model_dump() for s in trusted.summaries}
    monkeypatch.setenv("LOOPTAP_STATE_DIR", str(tmp_path / "elsewhere"))
    parses = Parses(monkeypatch)
    run = _opened(path)
    assert set(parses.responses.values()) == {1} and len(parses.responses) >= len(run.summaries)
    assert {s: run.full_turn(s).model_dump() for s in run.summaries} == turns
    run.close()
    trusted.close()
