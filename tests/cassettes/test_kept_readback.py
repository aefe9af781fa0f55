"""What a reader of a kept analysis holds (issue 106): the second read and the inspector read
only what they show. A run read back from its kept analysis holds a bounded number of objects per
turn (counted as the allocator's blocks alive, not bytes, not time), and the shell tracer's
records are read from the places the reader's index noted, never by mapping or scanning the whole
cassette (which made every reader's memory grow by the file's size)."""

from __future__ import annotations

import gc
import mmap
import sys
import types
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.reading import _analysis_cache, open_run, show_objects
from looptap.cassettes.reading._stores import TurnStore
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.shell import _link
from looptap.cassettes.wire import Exchange
from tests.cassettes.shell_fixture import Cmd, shell_run
from tests.support.analysed import Analysed, cli_output, keep_every_run

#: Objects (allocator blocks) a read-back run may hold per turn and per conversation of the run,
#: beyond what it holds for a small one: a turn is a few (its seq in its conversation's list, its
#: findings), a conversation a few more (its row, read into memory); what the analysis needed
#: while it read (histories, rendered texts, threading indexes, full turns, the file) is not kept.
#: Measured on the two shapes below: about 2.6 a turn and 9.4 a conversation.
PER_TURN, PER_CONVERSATION = 4, 16
#: Objects the kept rows hold per turn and per conversation as they are taken (before the reader
#: stands on them): a flagged turn's findings (every seventh turn here: its seq, its position,
#: its JSON), a conversation's JSON; the turns' places go straight into arrays. Issue 106: read
#: as a list of row tuples they were a tuple and up to four integers a turn, the peak of a 1 GB
#: run's second read. Measured on 40 and 160 turns: 64 blocks more (423 as a list of rows).
TAKEN_PER_TURN, TAKEN_PER_CONVERSATION = 1, 2
URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return keep_every_run(tmp_path, monkeypatch)


def _traced(path: Path, n: int) -> Path:
    """A coding agent's traced run of ``n`` shell commands (``n + 1`` turns)."""
    steps: list[Any] = [
        Cmd(f"pytest -q -k case{k}", exit=k % 2, stdout=f"{k % 2} failed\n") for k in range(n)
    ]
    return shell_run(path, steps, "Done.")


def _no_mapping(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ``mmap.mmap`` of the process, recorded (a reader that maps the cassette holds its
    pages: its peak memory grows by the file's size)."""
    mapped: list[Any] = []
    real = mmap.mmap

    def spy(*args: Any, **kwargs: Any) -> Any:
        mapped.append(args[:2])
        return real(*args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", spy)
    return mapped


def test_the_tracers_records_are_read_where_the_index_found_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _traced(tmp_path / "run.jsonl", 6)
    lines = path.read_bytes().splitlines()
    procs = [raw for raw in lines if raw.startswith((b'{"type":"process"', b'{"type":"note"'))]
    assert len(procs) == 7  # (six processes, the tracer's note)
    mapped = _no_mapping(monkeypatch)
    scanned: list[Path] = []
    whole = getattr(_link, "_lines", None)
    monkeypatch.setattr(
        _link, "_lines", lambda f: scanned.append(f.name) or whole(f), raising=False
    )
    counted = Analysed(monkeypatch)
    outs = []
    for _ in range(2):  # the first analyses and keeps; the second takes the kept analysis
        rc, out, err = cli_output("show", "--json", str(path))
        assert rc in (0, 1), err
        outs.append(out)
    assert counted.added == len(lines) - 1 - len(procs)  # the second read analysed nothing
    assert mapped == [], "the cassette was mapped whole"
    assert scanned == [], "the cassette was scanned whole"
    monkeypatch.setenv("LOOPTAP_NO_CACHE", "1")
    fresh = cli_output("show", "--json", str(path))[1]
    assert outs[0] == outs[1] == fresh
    shells = [
        tc["shell"]["line"]
        for raw in fresh.splitlines()
        for tc in (orjson.loads(raw).get("tool_calls") or [])
        if "shell" in tc
    ]
    assert len(shells) == 6
    monkeypatch.delenv("LOOPTAP_NO_CACHE")
    run = open_run(path)  # (the kept analysis)
    try:
        found = [path.read_bytes()[at : at + n] for at, n in run._reader.index.shell]
        assert found == procs  # (every tracer line, nothing else)
        assert run.shell.processes == 6 and run.shell.linked == 6
    finally:
        run.close()
    assert mapped == [] and scanned == []


def test_a_run_read_whole_reads_the_tracers_lines_a_line_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an index (a run read whole, a caller with a path): the file in blocks for the mark,
    then its lines one at a time; the same processes as the index' places give."""
    path = _traced(tmp_path / "run.jsonl", 3)
    mapped = _no_mapping(monkeypatch)
    scanned = _link.read_processes(path)
    assert len(scanned.processes) == 3
    assert mapped == [], "the cassette was mapped whole"
    run = open_run(path)
    try:
        placed = _link.read_processes(path, run._reader.index.shell)
    finally:
        run.close()
    assert [p.argv for p in scanned.processes] == [p.argv for p in placed.processes]
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"".join(raw for raw in path.read_bytes().splitlines(keepends=True)
                               if not raw.startswith(b'{"type":"process"')))  # fmt: skip
    assert _link.read_processes(plain).processes == []
    assert mapped == []


def _held(path: Path) -> tuple[int, int, int]:
    """Blocks a run read back from its kept analysis holds once ``show --json``'s objects have
    passed (its analysis, its shell commands and its views taken), its turns, its
    conversations."""
    gc.collect()
    before = sys.getallocatedblocks()
    run = open_run(path)
    try:
        for _ in show_objects(run, path):
            pass
        turns, convs = len(run._reader.places), len(run.analysis.conversations)
        _ = run.shell
        gc.collect()
        return sys.getallocatedblocks() - before, turns, convs
    finally:
        run.close()


@pytest.mark.parametrize("shape", ["talk", "questions"])
def test_a_kept_analysis_read_back_holds_a_bounded_number_of_objects_per_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """Two runs of one shape, 4x apart: what a reader of the kept analysis holds grows by at most
    :data:`PER_TURN` blocks a turn and :data:`PER_CONVERSATION` a conversation between them."""
    # (the first _held warms: imports, caches filled once a process)
    sizes = _read_back(tmp_path, monkeypatch, shape, (40, 160), lambda p: (_held(p), _held(p))[1])
    _within(sizes, PER_TURN, PER_CONVERSATION)


def _read_back(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
    ns: tuple[int, int],
    count: Any,
) -> list[tuple[int, int, int]]:
    """``count`` (what it counts, turns, conversations) of two runs of ``shape`` of ``ns`` turns,
    each read back from its kept analysis (the first read analyses and keeps)."""
    sizes = []
    for n in ns:
        path = tmp_path / f"{shape}-{n}.jsonl"
        _talk(path, n, 4 if shape == "talk" else 1)
        open_run(path).close()
        counted = Analysed(monkeypatch)
        sizes.append(count(path))
        assert counted.added == 0  # the kept analysis was taken
    return sizes


def _within(sizes: list[tuple[int, int, int]], per_turn: int, per_conversation: int) -> None:
    """The second run's count is the first's plus at most ``per_turn`` a turn and
    ``per_conversation`` a conversation more."""
    (small, few, convs), (big, many, more) = sizes
    bound = per_turn * (many - few) + per_conversation * (more - convs)
    assert big - small <= bound, (small, few, convs, big, many, more)


#: Objects a read-back run reaches from its :class:`~cassettes.reading.Run` (the reader's own
#: containers and what they hold: its state, arrays, rows, findings, caches) per turn and per
#: conversation beyond a small run's: a conversation's row (a model: its fields, its turns' seqs)
#: and the flagged turns' findings; a turn's place is in arrays. Counted by walking the
#: references, not by the allocator. Measured about 4.2 a turn and 7.3 a conversation (the same
#: on f29135f5, whose growth was a mapping, no object): one more object a turn kept anywhere the
#: run reaches (a dict of seqs) fails both shapes.
REACHED_PER_TURN, REACHED_PER_CONVERSATION = 5, 7
#: The walk stops at what the process shares with every run (modules, classes, code).
_SHARED = (types.ModuleType, type, types.CodeType, types.BuiltinFunctionType)


def _reached(root: object) -> int:
    """Distinct objects reachable from ``root`` by their references (a function by its closure
    and defaults, not its module's globals), :data:`_SHARED` left out."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, _SHARED):
            continue
        seen.add(id(o))
        if isinstance(o, types.FunctionType):
            todo += [c.cell_contents for c in o.__closure__ or () if c.cell_contents is not c]
            todo += [*(o.__defaults__ or ()), *(o.__kwdefaults__ or {}).values()]
        else:
            todo += gc.get_referents(o)
    return len(seen)


@pytest.mark.parametrize("shape", ["talk", "questions"])
def test_a_kept_analysis_read_back_reaches_a_bounded_number_of_objects_per_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """Two runs of one shape, 4x apart, read back from their kept analyses and printed
    (``show --json``'s objects): the objects the run reaches grow by at most
    :data:`REACHED_PER_TURN` a turn and :data:`REACHED_PER_CONVERSATION` a conversation."""

    def count(path: Path) -> tuple[int, int, int]:
        run = open_run(path)
        try:
            for _ in show_objects(run, path):
                pass
            _ = run.shell
            return _reached(run), len(run._reader.places), len(run.analysis.conversations)
        finally:
            run.close()

    sizes = _read_back(tmp_path, monkeypatch, shape, (100, 400), count)
    _within(sizes, REACHED_PER_TURN, REACHED_PER_CONVERSATION)


def test_the_kept_rows_are_taken_in_a_bounded_number_of_objects_per_turn(
    tmp_path: Path,
) -> None:
    """The kept rows as :func:`~cassettes.reading._analysis_cache.take` reads them (the largest
    a read-back holds at once, before the reader keeps what it needs): two runs 4x apart grow by
    at most :data:`TAKEN_PER_TURN` blocks a turn and :data:`TAKEN_PER_CONVERSATION` a
    conversation."""
    sizes = []
    for n in (40, 160):
        path = tmp_path / f"taken-{n}.jsonl"
        _talk(path, n, 4)
        open_run(path).close()  # (the first read: analyses, keeps)
        for _ in range(2):  # (the first: warm, imports and caches filled once a process)
            store = TurnStore()
            gc.collect()
            before = sys.getallocatedblocks()
            found = _analysis_cache.take(path, store)
            held = sys.getallocatedblocks() - before
            assert found is not None  # (it checked out)
            turns, convs = len(found.offsets), len(found.conversations)
            del found
            store.close()
        sizes.append((held, turns, convs))
    (small, few, convs), (big, many, more) = sizes
    bound = TAKEN_PER_TURN * (many - few) + TAKEN_PER_CONVERSATION * (more - convs)
    assert big - small <= bound, (small, few, convs, big, many, more)


def _talk(path: Path, n: int, each: int) -> None:
    """``n`` turns: conversations of ``each`` questions, every seventh answer an error."""
    with CassetteWriter(path) as w:
        for i in range(n):
            c, k = divmod(i, each)
            said: list[dict[str, str]] = [{"role": "user", "content": f"topic {c}"}]
            for j in range(k):
                said += [{"role": "assistant", "content": f"answer {c}.{j}"},
                         {"role": "user", "content": f"and then {j}"}]  # fmt: skip
            answer = {"id": f"c{i}", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {c}.{k}"}, "finish_reason": "stop"}],  # noqa: E501
                      "usage": {"prompt_tokens": 5 + 4 * k, "completion_tokens": 3, "total_tokens": 8 + 4 * k}}  # fmt: skip  # noqa: E501
            status = 500 if i % 7 == 3 else 200
            w.append(Exchange("POST", URL, [("content-type", "application/json")], orjson.dumps({"model": "gpt-4o", "messages": said}), status=status,  # noqa: E501
                              response_headers=[("content-type", "application/json")], response_chunks=[(0.01, orjson.dumps(answer))], ttfb=0.01))  # fmt: skip  # noqa: E501
