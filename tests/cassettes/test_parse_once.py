"""Parse once, from the recorder to the screen: each body is parsed by a reader's analysis alone
(the recorder's writer stores no parse, so it makes none), and what prints or shows a round trip
afterwards (``show``'s printing pass, a viewer's selection or jump) takes the analysis' parse:
nothing is parsed again. Counted on corpus runs by wrapping the two functions that parse a body."""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import pytest
from real_corpus import corpus_files

import looptap.cassettes.parsing as parsing
from looptap.cassettes.reading import CHECKPOINT, ParseStore, Run, TurnStore, open_run
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import load_vcr
from looptap.cassettes.wire import Exchange


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
    opened = parses.messages
    parses.clear()
    # Every turn selected in recording order (the inspector's selection): no response parsed
    # again, and the requests' messages are parsed no more than the opening parsed them.
    for seq in generations:
        _, rt = run.by_seq(seq)
        assert rt.request is not None and rt.response is not None
    assert not parses.responses, f"responses parsed again on selection: {sorted(parses.responses)}"
    assert parses.messages <= opened, (parses.messages, opened)
    run.close()
    # A command's pass over the run once analysed (open_run, as show and the exports read it):
    # no response parsed again.
    every = open_run(path)
    parses.clear()
    assert sum(1 for _ in every.pairs) == len(exchanges)
    assert not parses.responses, (
        f"responses parsed again by a pass over the run: {sorted(parses.responses)}"
    )


def _fresh(path: Path) -> dict[int, dict[str, Any]]:
    """Every round trip of the cassette at ``path`` parsed afresh, in full, by seq."""
    from looptap.cassettes.storage import read_records

    return {
        rt.seq: rt.model_dump()
        for rt in parsing.parse_all(read_records(path).exchanges)
        if rt.seq is not None
    }


@pytest.mark.parametrize("shape", ["corpus", "long chains"])
def test_show_and_a_jump_to_a_turn_take_the_analysis_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, shape: str
) -> None:
    """``looptap show`` reads a run twice (to analyse it, then to print it a round trip at a time)
    and the inspector jumps to any turn: both take the parse the analysis made, restored from the
    reader's store, so no request and no response is parsed a second time, and what they get is
    what a full parse gives. "long chains": conversations of 40 turns each extending the one
    before (deeper than a checkpoint), interleaved, with a small cache of bases, so restoring goes
    back through stored bases."""
    path = tmp_path / "run.jsonl"
    if shape == "corpus":
        _record(path, _multi_turn())
    else:
        from support.huge import write_huge

        write_huge(path, 160, "long", turns=40)
        lines = path.read_bytes().splitlines(keepends=True)
        # four conversations of 40, interleaved round trip by round trip
        quarter = (len(lines) - 1) // 4
        body = [lines[1 + c * quarter + k] for k in range(quarter) for c in range(4)]
        path.write_bytes(lines[0] + b"".join(body))
        monkeypatch.setitem(ParseStore.__init__.__globals__, "SHOWN", 2)  # (the stores' module)
    fresh = _fresh(path)
    parses = Parses(request)
    # show: one pass analyses (each body parsed once there), the printing pass parses nothing.
    every = open_run(path)
    assert set(parses.requests.values()) == {1} and len(parses.requests) >= len(fresh) // 2
    parses.clear()
    printed = {rt.seq: rt.model_dump() for _, rt in every.pairs}
    assert not parses.requests, f"requests parsed again to print: {sorted(parses.requests)}"
    assert not parses.responses, f"responses parsed again to print: {sorted(parses.responses)}"
    assert printed == fresh
    # The inspector: every turn reached by a jump (last first), none parsed again.
    run = _opened(path)
    parses.clear()
    seqs = sorted(run.summaries, reverse=True)
    assert len(seqs) > 20
    for seq in seqs:
        _, rt = run.by_seq(seq)
        assert rt.model_dump() == fresh[seq], seq
    assert not parses.requests and not parses.responses, (
        sorted(parses.requests),
        sorted(parses.responses),
    )
    run.close()


def _same_tree(a: Any, b: Any, where: str = "rt") -> None:
    """``a`` and ``b`` are the same tree: the same types all the way down, and models with the same
    fields, fields set, extra and private attributes (what pydantic's ``==`` does not compare)."""
    from enum import Enum

    from pydantic import BaseModel

    assert type(a) is type(b), where
    if isinstance(a, BaseModel):
        # (read back, every field is set: nothing reads which fields of a parse were)
        assert b.__pydantic_fields_set__ <= a.__pydantic_fields_set__, where
        assert a.__pydantic_extra__ == b.__pydantic_extra__, where
        assert a.__pydantic_private__ == b.__pydantic_private__, where
        assert a.__dict__.keys() == b.__dict__.keys(), where
        for k in a.__dict__:
            _same_tree(a.__dict__[k], b.__dict__[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_tree(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same_tree(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, Enum):
        assert a is b, where
    else:
        assert a == b or (a != a and b != b), where  # (NaN)


def test_the_store_of_parses_gives_back_the_tree_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each parse the analysis keeps comes back from the store as the tree the analysis made (types,
    enum members, fields set and private attributes included), and keeping it builds no per-model
    state dict (``BaseModel.__getstate__``: most of the store's cost, a seventh of a batch read's
    CPU)."""
    import pickle

    from pydantic import BaseModel

    path = tmp_path / "run.jsonl"
    _record(path, _multi_turn())
    kept: list[tuple[int, bytes]] = []
    real_put = ParseStore.put

    def put(self: ParseStore, pos: int, rt: parsing.RoundTrip, base_pos: int | None) -> None:
        states = Counter[str]()
        real_state = BaseModel.__getstate__

        def counted(model: BaseModel) -> dict[Any, Any]:
            states["called"] += 1
            return real_state(model)

        # what a stock pickle of the same parse gives back: the reference
        packed = rt.model_copy(
            update={"request": rt.request.model_copy() if rt.request is not None else None}
        )
        monkeypatch.setattr(BaseModel, "__getstate__", counted)
        try:
            real_put(self, pos, rt, base_pos)
        finally:
            monkeypatch.setattr(BaseModel, "__getstate__", real_state)
        assert not states, (
            f"BaseModel.__getstate__ called {states['called']} times to keep one parse"
        )
        kept.append((pos, pickle.dumps(packed, pickle.HIGHEST_PROTOCOL)))

    monkeypatch.setattr(ParseStore, "put", put)
    run = _opened(path)
    reader = run._reader
    assert len(kept) > 20
    for pos, reference in kept:
        got = reader.parses.get(pos)
        assert got is not None
        base_seq, keep, rt = got
        want = pickle.loads(reference)
        want.forget_history_base()
        if base_seq is not None:
            assert want.request is not None
            want.request.messages = want.request.messages[keep:]
        _same_tree(rt, want)
    run.close()


def test_a_long_conversation_keeps_its_history_whole_rarely_and_restores_every_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain of requests that each extend the previous one is stored as deltas: links against
    their base, checkpoints against the previous checkpoint, and whole message lists only every
    ``CHECKPOINT``-th checkpoint (every 16th link kept its history whole before: most of what a
    long conversation pickled). Every turn still restores to the messages a full parse of its
    request gives, reading at most ``2 * CHECKPOINT - 1`` records, with no restored base to start
    from."""
    from support.huge import write_huge

    # two conversations: one past a whole list's spacing (256 turns: 2 whole), then one short
    # (1 whole); two of 300 each until session 55, twice the CPU (the check is per conversation)
    turns, short = 300, 20
    path = write_huge(tmp_path / "long.jsonl", turns + short, "long", turns=turns)
    wholes: list[int] = []
    real_put = ParseStore.put

    def put(self: ParseStore, pos: int, rt: parsing.RoundTrip, base_pos: int | None) -> None:
        real_put(self, pos, rt, base_pos)
        got = self.get(pos)
        if got is not None and got[0] is None:
            wholes.append(pos)

    monkeypatch.setattr(ParseStore, "put", put)
    run = _opened(path)
    reader = run._reader
    assert reader is not None
    step = CHECKPOINT**2
    assert len(wholes) == -(-turns // step) + -(-short // step), wholes  # (38 before)
    reads = Counter[int]()
    real_get = ParseStore.get

    def get(self: ParseStore, pos: int) -> Any:
        reads[pos] += 1
        return real_get(self, pos)

    monkeypatch.setattr(ParseStore, "get", get)
    for pos, ex in enumerate(open_run(path).exchanges):
        reader.parses._shown.clear()
        reads.clear()
        got = reader.parse_at(pos)
        assert got is not None and got.request is not None
        assert sum(reads.values()) <= 2 * CHECKPOINT - 1, (pos, sum(reads.values()))
        full = parsing.parse_exchange(ex)
        assert full.request is not None
        assert [m.model_dump() for m in got.request.messages] == [
            m.model_dump() for m in full.request.messages
        ], pos
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
    from looptap.cassettes.cli import main

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
    from looptap.cassettes.analysis import spill
    from looptap.cassettes.cli import main
    from looptap.cassettes.views import GrowthRows, analysis_lines

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
    from looptap.cassettes.mcp.query import Runs, run_summary

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


def test_the_store_of_parses_holds_plain_rows_not_pickles(tmp_path: Path) -> None:
    """Each kept parse is a plain row (a JSON head line, then the parse's JSON), never a pickle:
    a cache holds plain rows (issue 72 item 4). Each row reads as JSON and validates to the parse
    the store gives back."""
    path = tmp_path / "run.jsonl"
    _record(path, _multi_turn())
    run = _opened(path)
    parses = run._reader.parses
    where = parses._where
    rows = 0
    for pos in range(len(where) // 3):
        if where[3 * pos] < 0:
            continue
        row = parses._store.get_data(where[3 * pos], where[3 * pos + 1], where[3 * pos + 2])
        assert not row.startswith(b"\x80"), f"row {pos} is a pickle"
        head, _, body = row.partition(b"\n")
        assert isinstance(orjson.loads(head), list)
        rt = parsing.RoundTrip.model_validate_json(body)
        got = parses.get(pos)
        assert got is not None and rt.model_dump() == got[2].model_dump()
        rows += 1
    assert rows > 20
    run.close()


def test_a_list_a_parser_appended_to_comes_back_from_the_store() -> None:
    """A parse's list filled after its model was made (``analysis_errors``: "request body is not
    valid JSON …") is not among the fields pydantic counts as set; the store keeps it all the same
    (it was lost for a Bedrock recording of pydantic-ai's with a raw request body)."""
    rt = parsing.RoundTrip(family="bedrock", method="POST", url="https://x/model/m/converse")
    rt.analysis_errors.append("request body is not valid JSON; kept raw, not parsed")
    rt.notes.append("a note")
    assert "analysis_errors" not in rt.model_fields_set
    store = ParseStore()
    store.put(0, rt, None)
    got = store.restore(0, lambda seq: None)
    assert got is not None
    assert got.analysis_errors == rt.analysis_errors and got.notes == rt.notes
    assert got.model_dump() == rt.model_dump()
    store.close()
