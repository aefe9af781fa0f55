"""A grown file continued (issue 56, docs/kept-analysis.md "A file that grew"): a run cut after k
records is shown (its analysis kept, with the state after its last round trip), the rest is
appended, and the grown file's ``show`` and ``show --json`` print byte for byte what a fresh
analysis of every byte prints, while this process read and analysed only the records appended.

The runs: the corpus' longest conversations imported into one cassette (several providers, MCP
tool calls, a Responses chain), the synthetic long run of bench/huge.py (history deltas), the
synthetic batch of one-turn conversations (parked and spilled), and agents (a group chat, a
handoff, an agent used as a tool) beside twenty tool loops taking turns, one of them failing and
retried (parked conversations going on, a cut right after a tool call, between a failure and
its retry). Cut at several k each, with the analysis' tables spilled to disk past 4 entries.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scenarios import WEATHER, Call, error, openai_chat_assistant, openai_chat_results
from scenarios import openai_chat_turn as turn
from test_agents import _group_chat, adk_handoff, agent_as_tool
from test_threading_tokens import RUNS as TOKEN_RUNS

from looptap.cassettes.analysis import sections, spill
from looptap.cassettes.reading import (
    MAX_CONTINUATION,
    Pieces,
    RunReader,
    compressor,
    decompressor,
    open_run,
    packed,
    show_pairs,
)
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import RecordIndex, read_records
from looptap.cassettes.wire import Exchange
from tests.cassettes.test_tool_http_arguments import orders_run
from tests.support.analysed import Analysed, cli_output, keep_every_run
from tests.support.huge import write_huge

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "pydantic-ai" / "tests"
#: The corpus' longest runs (MCP tool calls in a workflow, a tool search on three providers, a
#: Responses chain by previous_response_id).
CORPUS_RUNS = [
    "cassettes/test_temporal/test_mcptoolset_dynamic_toolset_in_workflow.yaml",
    "cassettes/test_tool_search/test_tool_search_eval[anthropic].yaml",
    "cassettes/test_tool_search/test_tool_search_eval[google].yaml",
    "models/cassettes/test_openai_responses/"
    "test_openai_responses_compact_with_auto_previous_response_id_chain.yaml",
]


def _write(path: Path, exchanges: list[Exchange]) -> Path:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    return path


def _corpus(path: Path) -> Path:
    out: list[Exchange] = []
    for i, name in enumerate(CORPUS_RUNS):
        imported = path.parent / f"imported{i}.jsonl"
        assert cli_output("import", str(CORPUS / name), "-o", str(imported))[0] == 0
        out += read_records(imported).exchanges
    return _write(path, out)


def _loops(convs: int = 20, rounds: int = 3) -> list[Exchange]:
    """``convs`` tool loops taking turns (each parked before its next turn comes: more than
    the analysis keeps active); conversation 3's second request fails and is retried."""
    said = {
        c: [{"role": "system", "content": f"You are agent {c}."},
            {"role": "user", "content": f"What is the weather in city {c}?"}]
        for c in range(convs)
    }  # fmt: skip
    out: list[Exchange] = []
    for r in range(rounds):
        for c in range(convs):
            history = said[c]
            if (c, r) == (3, 1):
                out.append(turn(list(history), tools=[WEATHER], error=error(500, {"error": "x"})))
            if r % 2 == 0:
                call = Call("get_weather", {"city": f"city {c}"})
                out.append(turn(list(history), tool_calls=[call], tools=[WEATHER]))
                history += [openai_chat_assistant(calls=[call]),
                            *openai_chat_results([(call, f"{c + r} C")])]  # fmt: skip
            else:
                out.append(turn(list(history), f"It is {c + r} C in city {c}.", tools=[WEATHER]))
                history += [openai_chat_assistant(f"It is {c + r} C in city {c}."),
                            {"role": "user", "content": f"And tomorrow ({r})?"}]  # fmt: skip
    return out


def _agents(path: Path) -> Path:
    return _write(path, [*_group_chat(), *adk_handoff(), *agent_as_tool(), *_loops()])


RUNS: dict[str, Callable[[Path], Path]] = {
    # the tools' HTTP: an E finding of a call turn weighed again once the tool answered
    "tool_http": lambda p: _write(p, orders_run()),
    "corpus": _corpus,
    "long": lambda p: write_huge(p, 60, "long", turns=12),
    "one_turn": lambda p: write_huge(p, 40, "one_turn"),
    "agents": _agents,
}


def _cuts(lines: list[bytes]) -> list[int]:
    """Where to cut a run of these record lines (k records kept): right after a tool call, right
    after a failed attempt, and evenly spread (the first record, mid-conversation, the last)."""
    n = len(lines)
    special = [
        k + 1
        for k, line in enumerate(lines[:-1])
        if b"tool_calls" in line.split(b'"response"', 1)[-1] or b'"status":500' in line
    ]
    spread = {1, n // 3, n // 2, n - 1}
    return sorted(spread | set(special[:2]) | set(special[-2:]))


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(spill, "KEEP", 4)  # the analysis' tables spilled past 4 entries
    monkeypatch.setattr(Pieces, "PIECE", 2048)  # the state kept in many pieces
    return keep_every_run(tmp_path, monkeypatch)


class Made:
    """Printed views this process made from now on (the others were taken again)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.views = 0
        real = show_pairs.__globals__["roundtrip_json"]  # (show's objects' module)

        def counted(*a: Any) -> Any:
            self.views += 1
            return real(*a)

        monkeypatch.setitem(show_pairs.__globals__, "roundtrip_json", counted)


class Read:
    """Record lines this process parsed from now on (RecordIndex reads every record it reads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines = 0
        real = RecordIndex._line_done

        def counted(index: RecordIndex, *a: Any) -> None:
            self.lines += 1
            real(index, *a)

        monkeypatch.setattr(RecordIndex, "_line_done", counted)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            n,
            marks=pytest.mark.slow(
                reason="four corpus files imported and cut eight times, ~4 s of CPU; the same "
                "continuation over real tool calls and several conversations is [agents]'s and "
                "[tool_http]'s by default"
            ),
        )
        if n == "corpus"
        else n
        for n in RUNS
    ],
)
def test_a_grown_run_is_continued_to_what_a_fresh_analysis_shows(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path
) -> None:
    whole = RUNS[name](tmp_path / "whole.jsonl")
    head, *records = whole.read_bytes().splitlines(keepends=True)
    cuts = _cuts(records)
    assert len(cuts) >= 4
    # Every cut grows to the same bytes at the same path: the fresh analysis of the grown file
    # is read once (the cache emptied before each cut, so each is kept and continued afresh).
    path = tmp_path / "run" / "run.jsonl"
    path.parent.mkdir()
    path.write_bytes(whole.read_bytes())
    shown = {c: cli_output(*c, "--no-cache", str(path)) for c in (("show",), ("show", "--json"))}
    for i, k in enumerate(cuts):
        shutil.rmtree(_cache, ignore_errors=True)
        path.write_bytes(head + b"".join(records[:k]))
        assert cli_output("show", "--json", str(path))[0] == 0  # analysed and kept
        with path.open("ab") as f:  # the recording goes on
            f.write(b"".join(records[k:]))
        counted, read, made = Analysed(monkeypatch), Read(monkeypatch), Made(monkeypatch)
        first = ("show",) if i % 2 else ("show", "--json")  # the grown file's first reader
        grown = cli_output(*first, str(path))
        assert (counted.added, read.lines) == (len(records) - k,) * 2, k  # only what was added
        # the views of what was kept taken again, but where the continued analysis changed them
        assert len(records) - k <= made.views < len(records) or k == 1, (k, made.views)
        other = ("show", "--json") if i % 2 else ("show",)
        then = cli_output(*other, str(path))  # (the kept analysis of the grown file)
        assert counted.added == len(records) - k
        fresh = [shown[first], shown[other]]
        assert grown[0] == 0 and not grown[2], grown[2]
        assert [grown, then] == fresh, k


def test_a_token_two_answers_gave_is_continued_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two answers gave the same token (the threader's ``by_token`` holds ``TWICE``, -1, for it:
    test_threading_tokens.py): a grown file is continued from the kept state, not analysed
    afresh (until session 57 the restore took -1 for a turn it does not hold and refused every
    such state: the bench's synthetic runs, whose conversations each start at toolu_000000)."""
    one, _ = TOKEN_RUNS["gemini"]("SIGNATURE-THE-SAME-EACH-RUN")
    _, two = TOKEN_RUNS["gemini"]("SIGNATURE-THE-SAME-EACH-RUN")
    exchanges = [*one, *two]
    for i, ex in enumerate(exchanges):
        ex.seq = i
    path = _write(tmp_path / "run.jsonl", exchanges)
    head, *records = path.read_bytes().splitlines(keepends=True)
    fresh = cli_output("show", "--json", "--no-cache", str(path))
    path.write_bytes(head + b"".join(records[:3]))  # both answers read: the token is TWICE's
    assert cli_output("show", "--json", str(path))[0] == 0
    with path.open("ab") as f:
        f.write(b"".join(records[3:]))
    counted = Analysed(monkeypatch)
    assert cli_output("show", "--json", str(path)) == fresh
    assert counted.added == len(records) - 3  # continued: only what was appended read


def test_a_run_edited_before_its_end_is_read_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose kept bytes changed (the same size, then grown too) is analysed from its first
    byte, to what a fresh analysis shows."""
    whole = _agents(tmp_path / "whole.jsonl")
    head, *records = whole.read_bytes().splitlines(keepends=True)
    k = len(records) // 2
    path = tmp_path / "run.jsonl"
    path.write_bytes(head + b"".join(records[:k]))
    assert cli_output("show", "--json", str(path))[0] == 0
    edited = records[1].replace(b"Fresh bread", b"Fresh BREAD")
    assert edited != records[1] and len(edited) == len(records[1])
    path.write_bytes(head + records[0] + edited + b"".join(records[2:]))  # edited and grown
    counted = Analysed(monkeypatch)
    grown = cli_output("show", "--json", str(path))
    assert counted.added == len(records)
    assert grown == cli_output("show", "--json", "--no-cache", str(path))


def _kept_state(cache: Path) -> tuple[sqlite3.Connection, list[bytes]]:
    """The kept database and the state's pieces (rows of their own), in order."""
    (db_path,) = cache.glob("*.sqlite")
    db = sqlite3.connect(db_path)
    return db, [p for (p,) in db.execute("SELECT data FROM continuation ORDER BY piece")]


def _joined(pieces: list[bytes]) -> bytes:
    """The state's JSON lines, each piece decompressed on its own (a frame of its own)."""
    return b"".join(decompressor().decompressobj().decompress(p) for p in pieces)


def _listed(data: dict[str, Any]) -> dict[str, Any]:
    """The state :func:`sections` read, its tables read into lists (written back inline)."""
    return {
        k: list(v) if isinstance(v, Iterator) else _listed(v) if isinstance(v, dict) else v
        for k, v in data.items()
    }


def _tampered(data: dict[str, Any], pieces: list[bytes], how: str) -> list[bytes]:
    """The kept state (``data``, kept as ``pieces``) made one a reader must not trust."""
    if how == "garbage":
        return [pieces[0], b"\x28\xb5\x2f\xfdnot a frame", *pieces[2:]]
    if how == "not json":
        return [compressor().compress(b"{not json")]
    if how == "a piece missing":
        return pieces[:1] + pieces[2:]
    if how == "no piece":
        return []
    if how == "other version":
        data["version"] = 99
    elif how == "a turn it does not hold":
        data["latest"][0][1] = 10**6
    elif how == "a foreign class":
        data["convs"][0][4] = {"c": "os.system", "v": {}}
    elif how == "a table of the wrong type":
        data["mcp"]["results"] = {"d": []}
    elif how == "an index of the wrong type":
        data["threads"]["by_response"] = [[1, 2]]
    elif how == "oversized":  # (over the bound only once its pieces are put together)
        return [compressor().compress(b" " * (MAX_CONTINUATION // 2 + 1))] * 2
    kept = packed(data, spill.Spill())
    assert kept is not None
    return [p for _, p in kept.rows()]


@pytest.fixture(scope="module")
def agents_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, tuple[int, bytes, str]]:
    """The agents' run (its bytes) and what a fresh ``show --json`` of it prints: every test of a
    kept state it cannot trust grows its file to these bytes (made and read fresh once)."""
    whole = _agents(tmp_path_factory.mktemp("agents") / "whole.jsonl")
    return whole.read_bytes(), cli_output("show", "--json", "--no-cache", str(whole))


@pytest.mark.parametrize(
    "how",
    ["garbage", "not json", "a piece missing", "no piece", "other version",
     "a turn it does not hold", "a foreign class", "a table of the wrong type",
     "an index of the wrong type", "oversized"],
)  # fmt: skip
def test_a_kept_state_it_cannot_trust_is_read_afresh(
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    _cache: Path,
    agents_run: tuple[bytes, tuple[int, bytes, str]],
) -> None:
    whole, fresh = agents_run
    head, *records = whole.splitlines(keepends=True)
    path = tmp_path / "run.jsonl"
    path.write_bytes(head + b"".join(records[:30]))
    assert cli_output("show", "--json", str(path))[0] == 0
    db, pieces = _kept_state(_cache)
    assert len(pieces) > 2  # (Pieces.PIECE lowered: a state in many pieces, each a frame)
    data = _listed(sections(_joined(pieces)))
    db.execute("DELETE FROM continuation")
    tampered = _tampered(data, pieces, how)
    db.executemany("INSERT INTO continuation VALUES (?, ?)", enumerate(tampered))
    db.commit()
    db.close()
    with path.open("ab") as f:
        f.write(b"".join(records[30:]))
    counted = Analysed(monkeypatch)
    grown = cli_output("show", "--json", str(path))
    assert grown[0] == 0 and not grown[2]  # no traceback, not a word
    assert counted.added == len(records)  # read afresh
    assert grown == fresh


def _followed(path: Path, cache: bool) -> list[tuple[int, list[str]]]:
    """The inspector's read of a run (followed, summarised): each turn's findings, as its turn list
    shows them once the run is finished."""
    run = open_run(path, follow=True, cache=cache)
    try:
        while not run.step().at_end:
            pass
        run.finish()
        return [(seq, [f.code for f in s.findings]) for seq, s in run.summaries.items()]
    finally:
        run.close()


def test_the_inspector_of_a_grown_run_shows_what_a_fresh_analysis_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn list of a grown run followed from its kept analysis: the kept turns summarised,
    then the appended ones read; the end-of-run pass's findings where a fresh read has them (a
    conversation whose last turn called a tool and never went on), gone where it went on."""
    monkeypatch.setitem(RunReader.step.__globals__, "KEPT_STEP", 7)  # (the reader's module)
    whole = _agents(tmp_path / "whole.jsonl")
    head, *records = whole.read_bytes().splitlines(keepends=True)
    path = tmp_path / "run.jsonl"
    path.write_bytes(head + b"".join(records[:69]))  # the last round of tool calls begun
    assert cli_output("show", "--json", str(path))[0] == 0
    with path.open("ab") as f:
        f.write(b"".join(records[69:]))
    counted = Analysed(monkeypatch)
    grown = _followed(path, cache=True)
    assert counted.added == len(records) - 69
    fresh = _followed(path, cache=False)
    assert grown == fresh
    assert any("C.stopped_with_pending_calls" in codes for seq, codes in fresh if seq < 69)


@pytest.mark.parametrize(
    "n",
    [
        40_000,  # (~4 MB of JSON lines, ~2 MB compressed: each over the peak's bound)
        pytest.param(100_000, marks=pytest.mark.slow(reason="10 MB under tracemalloc, ~30 s")),
    ],
)
def test_the_state_is_kept_in_pieces_as_it_is_written_never_held_whole(n: int) -> None:
    """Issues 73 and 106: the state a grown file is continued from is written a line at a time
    into pieces of their own, each checked by the redactor's gate and compressed into a row as it
    fills; memory holds neither its JSON (a 250 MB run's first ``show`` held it whole, 21 MB over
    its peak) nor its compressed bytes (held whole, then decompressed whole by the gate at keeping,
    the first ``show``'s peak at 1 GB), and the rows read back to the same tables."""
    import hashlib
    import tracemalloc

    # n = 100_000: ~10 MB of JSON lines, ~5 MB compressed (digests do not compress much)
    turns = ({"seq": i, "hash": hashlib.sha256(b"%d" % i).hexdigest()} for i in range(n))
    state = {"version": 2, "turns": turns,
             "threads": {"by_response": ([f"resp_{i}", i] for i in range(n))}}  # fmt: skip
    rows = spill.Spill(cache=64)
    tracemalloc.start()
    try:
        kept = packed(state, rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept is not None and kept.size > 90 * n  # (9 MB at 100,000)
    assert peak < 1_500_000, peak  # (a piece, 256 KiB of lines, and its compressed bytes)
    pieces = [p for _, p in kept.rows()]
    assert len(pieces) > 3 * n // 10_000  # (30 at 100,000)
    data = sections(b"".join(decompressor().decompressobj().decompress(p) for p in pieces))
    assert data["version"] == 2
    assert [t["seq"] for t in data["turns"]] == list(range(n))
    assert list(data["threads"]["by_response"])[-1] == [f"resp_{n - 1}", n - 1]
    # what the gate masks is never kept: no state (the grown file is analysed afresh)
    key = "sk-proj-" + hashlib.sha256(b"k").hexdigest()[:48]
    planted = {"version": 2, "turns": iter([{"seq": 0, "said": f"the key is {key}"}])}
    assert packed(planted, rows) is None
