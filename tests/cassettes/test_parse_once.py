"""Parse once, from the recorder to the reader: each body is parsed by a reader's analysis alone
(the recorder's writer stores no parse, so it makes none); what prints a round trip afterwards
(``show``'s printing pass) parses each request on the one it extends, as the analysis did, and a
viewer's selection or jump parses that round trip. Counted on corpus runs by watching the two
functions that parse a body."""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from real_corpus import corpus_files

import cassettes.parsing as parsing
from cassettes.reading import Run, TurnStore, open_run
from cassettes.recording import CassetteWriter
from cassettes.storage import load_vcr
from cassettes.wire import Exchange


def _multi_turn(n: int = 12) -> list[Exchange]:
    """Round trips of the first ``n`` corpus recordings with three round trips or more (their
    later requests extend the earlier ones: history deltas)."""
    out: list[Exchange] = []
    files = 0
    for p in corpus_files("llm-anthropic/**/*.yaml") + corpus_files(
        "pydantic-ai/**/test_openai*/*.yaml"
    ):
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
    request messages were parsed (all of them, or only those appended to a base). The two
    functions that parse a body are watched by a profile hook from here on, not replaced."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.requests: Counter[int] = Counter()
        self.responses: Counter[int] = Counter()
        self.messages = 0
        request_side = parsing.parse_request_side.__code__
        response_side = parsing.parse_response_side.__code__

        def watch(frame: FrameType, event: str, _arg: object) -> None:
            if event == "call" and frame.f_code is response_side:
                rt = frame.f_locals["rt"]
                assert rt.seq is not None
                self.responses[rt.seq] += 1
            elif event == "return" and frame.f_code is request_side:
                rt = frame.f_locals["rt"]
                if rt.request is None:  # it raised: nothing was parsed
                    return
                assert rt.seq is not None
                self.requests[rt.seq] += 1
                n = len(rt.request.messages)
                self.messages += n - rt.reused[1] if rt.reused is not None else n

        request.addfinalizer(lambda: sys.setprofile(None))
        sys.setprofile(watch)

    def clear(self) -> None:
        self.requests.clear()
        self.responses.clear()
        self.messages = 0


def _record(path: Path, exchanges: list[Exchange]) -> None:
    with CassetteWriter(path, meta={"source": "looptap proxy"}) as w:
        for ex in exchanges:
            w.append(dataclasses.replace(ex))


def _opened(path: Path) -> Run:
    run = open_run(path, follow=True)
    while not run.step().at_end:
        pass
    run.finish()
    return run


def test_each_body_is_parsed_once_from_the_recorder_to_the_screen(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    exchanges = _multi_turn()
    # Polls read as the model call that delivered their calls send no request to parse.
    polled = {
        i
        for i, ex in enumerate(exchanges)
        if parsing.parse_exchange(dataclasses.replace(ex)).polled
    }
    parses = Parses(request)
    path = tmp_path / "run.jsonl"
    # The recorder (proxy/writer.py builds its writer so): nothing parsed.
    _record(path, exchanges)
    assert not parses.requests and not parses.responses
    # The inspector opening the run: every request and every response parsed once.
    run = _opened(path)
    generations = sorted(run.summaries)
    assert len(generations) > 20
    assert len(parses.responses) > 30 and set(parses.responses.values()) == {1}
    assert set(parses.requests) >= set(generations) - polled and set(parses.requests.values()) == {
        1
    }
    run.close()


def _fresh(path: Path) -> dict[int, dict[str, Any]]:
    """Every round trip of the cassette at ``path`` parsed afresh, in full, by seq."""
    from cassettes.storage import read_records

    return {
        rt.seq: rt.model_dump()
        for rt in parsing.parse_all(read_records(path).exchanges)
        if rt.seq is not None
    }


@pytest.mark.parametrize("shape", ["corpus", "long chains"])
def test_show_and_a_jump_to_a_turn_give_what_a_full_parse_gives(
    tmp_path: Path, request: pytest.FixtureRequest, shape: str
) -> None:
    """``looptap show`` reads a run twice (to analyse it, then to print it a round trip at a
    time): the printing pass parses each request on the one it extends, as the analysis did (no
    more messages than the analysis parsed), and what it and a viewer's jump to any turn get is
    what a full parse gives. "long chains": sixteen conversations of 10 turns each extending the
    one before, interleaved round trip by round trip (a base is 16 round trips back)."""
    path = tmp_path / "run.jsonl"
    if shape == "corpus":
        _record(path, _multi_turn())
    else:
        from support.huge import write_huge

        write_huge(path, 160, "long", turns=10)
        lines = path.read_bytes().splitlines(keepends=True)
        body = [lines[1 + c * 10 + k] for k in range(10) for c in range(16)]
        path.write_bytes(lines[0] + b"".join(body))
    fresh = _fresh(path)
    parses = Parses(request)
    # show: one pass analyses (each body parsed once there), the printing pass parses again
    every = open_run(path)
    assert set(parses.requests.values()) == {1} and len(parses.requests) >= len(fresh) // 2
    analysed = parses.messages
    parses.clear()
    printed = {rt.seq: rt.model_dump() for _, rt in every.pairs}
    assert parses.messages <= analysed, (parses.messages, analysed)
    assert printed == fresh
    # The inspector: every turn reached by a jump (last first)
    run = _opened(path)
    seqs = sorted(run.summaries, reverse=True)
    assert len(seqs) > 20
    for seq in seqs:
        _, rt = run.by_seq(seq)
        assert rt.model_dump() == fresh[seq], seq
    run.close()


def _interleaved_run(path: Path, conversations: int = 3, turns: int = 8) -> Path:
    """``conversations`` of ``turns`` turns each (history deltas), interleaved round trip by round
    trip; the second one sent to a host looptap does not know (its costs estimated: the growth
    table's ``~`` and its note)."""
    from support.huge import write_huge

    write_huge(path, conversations * turns, "long", turns=turns)
    lines = path.read_bytes().splitlines(keepends=True)
    body = [lines[1 + c * turns + k] for k in range(turns) for c in range(conversations)]
    body = [
        b.replace(b"api.openai.com", b"llm.example.test") if i % conversations == 1 else b
        for i, b in enumerate(body)
    ]
    path.write_bytes(lines[0] + b"".join(body))
    return path


def _count_restores(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """Turns restored from a reader's store of full turns, by seq (its read function wrapped)."""
    restores: Counter[int] = Counter()
    real = TurnStore.get

    def get(self: TurnStore, block: int, offset: int, length: int) -> Any:
        turn = real(self, block, offset, length)
        restores[turn.seq] += 1
        return turn

    monkeypatch.setattr(TurnStore, "get", get)
    return restores


@pytest.mark.parametrize(
    "argv",
    [["show"], ["show", "--json"], ["textconv"], ["show", "--turn", "1"], ["show", "--conversation", "c2"], ["show", "--severity", "info"],  # noqa: E501
     ["export", "--html", "-o", "{out}"], ["export", "--otel", "{out}"]],
    ids=lambda argv: " ".join(argv).replace(" -o {out}", "").replace(" {out}", ""),
)  # fmt: skip
def test_a_command_restores_each_turn_at_most_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """``show`` restored every turn from the reader's store three times (to print it, for its row
    of the growth table, and again for the table's note on estimated costs): its printing pass
    restores each turn once and notes the turn's row for the tables printed after it. The HTML
    page restored each turn again for its growth chart: its bars are made in its one pass. The
    OTLP export restored each conversation's turns again for its root span's totals: they are
    noted as its round-trip spans read the turns."""
    from cassettes.cli import main

    path = _interleaved_run(tmp_path / "run.jsonl")
    out_file = tmp_path / "run.html"
    restores = _count_restores(monkeypatch)
    assert main([*(a.replace("{out}", str(out_file)) for a in argv), str(path)]) == 0
    out = capsys.readouterr().out if argv[0] != "export" else out_file.read_text()
    assert out
    assert restores and max(restores.values()) == 1, sorted(restores.items())
    if argv == ["show"]:
        assert set(restores) == set(range(24)) and "token growth, conversation c3" in out


def test_the_growth_tables_rows_noted_by_the_printing_pass_are_the_turns_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tables ``show`` prints from the rows its printing pass noted, most of them spilled to
    disk (a table of 3 kept in memory), are the tables made from the turns themselves."""
    from cassettes.analysis import spill
    from cassettes.cli import main
    from cassettes.views import GrowthRows, analysis_lines

    path = _interleaved_run(tmp_path / "run.jsonl")
    expected = "\n".join(analysis_lines(open_run(path, whole=True).analysis)) + "\n"
    assert (
        expected.count("(~: estimated cost") == 1
        and expected.count("token growth, conversation") == 3
    )
    spilled: list[bool] = []
    real_close = GrowthRows.close

    def close(self: GrowthRows) -> None:
        spilled.append(self._spill.used)
        real_close(self)

    monkeypatch.setattr(GrowthRows, "close", close)
    monkeypatch.setattr(spill, "KEEP", 3)
    restores = _count_restores(monkeypatch)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert spilled == [True] and set(restores.values()) == {1}
    assert out.endswith(expected), out[-3000:]


def test_the_mcp_run_summary_reads_each_turn_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_summary`` read each conversation's last turn three times (for its row, again for the
    row's findings, again for the run's cost): once now, its cost the same."""
    from cassettes.mcp import Runs, run_summary

    _interleaved_run(tmp_path / "run.jsonl")
    runs = Runs([tmp_path])
    runs.open("run.jsonl")  # (opened and analysed before counting)
    restores = _count_restores(monkeypatch)
    got = run_summary(runs, "run.jsonl", 6000)
    assert set(restores) == set(range(24)) and set(restores.values()) == {1}, sorted(
        restores.items()
    )
    whole = open_run(tmp_path / "run.jsonl", whole=True).analysis
    lasts = [whole.turns[c.turns[-1]].tokens.cumulative_cost for c in whole.conversations]
    assert None not in lasts and got["cost_usd"] == round(
        sum(float(x) for x in lasts if x is not None), 6
    )
    assert len(got["recorded"]["conversations"]) == 3
