"""Every command on every hostile file (tests/hostile/corpus.py), each in its own process: zero
tracebacks, zero raw control bytes on stdout or stderr, zero hangs or crashes, bounded memory.
``bench/hostile.py`` prints the same matrix with peak RSS and what the user is told per cell.
The looptap commands are forked from a process that has imported looptap once (matrix.Zygote):
each is still a process of its own, without paying the interpreter's start and imports 300 times."""

from __future__ import annotations

import queue
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.hostile.corpus import FILES, PWNED_DIR, build, hostile_exchanges
from tests.hostile.matrix import COMMANDS, Cell, Zygote, run_cell, warm_argvs
from tests.support import shared

INSPECTED = {
    "hostile_all_families.jsonl",
    "deep_args_1000.jsonl",
    "bad_records.jsonl",
    "truncated.jsonl",
}
#: Known open (issue 13 notes): on the 3,000-delta bomb, `replay` does not start within the timeout
#: and the inspector's reader peaks near 2 GB. bench/hostile.py still runs and reports them.
KNOWN_OPEN: set[tuple[str, str]] = set()
#: Files whose cells take longest (scheduled first).
SLOW_FILES = {
    "delta_bomb.jsonl",
    "bomb_stacked.jsonl",
    "bomb_br.yaml",
    "bomb_zstd.mitm",
    "wrong_types.jsonl",
}
#: Generous: the box is shared and noisy; the bombs this guards against took gigabytes.
RSS_CEILING_MB = 1024


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Cell]]:
    work = tmp_path_factory.mktemp("hostile")
    shared.copy("hostile-files", build, work / "files")  # (built once a session)
    files = {name: work / "files" / name for name in FILES}
    clean = work / "clean.jsonl"
    with CassetteWriter(clean) as w:
        for ex in hostile_exchanges("")[:6]:
            w.append(ex)
    # The inspector is driven (every turn, tab and key, a click on every widget) on the files that
    # reach its widgets; every other file gets it in bench/hostile.py (the suite stays fast on 2
    # cores).
    jobs = [
        (c, f) for f in files.values() for c in COMMANDS
        if (c != "inspect" or f.name in INSPECTED) and (c, f.name) not in KNOWN_OPEN
    ]
    # The heaviest cells first, so the two threads end together rather than one finishing alone.
    order = {job: i for i, job in enumerate(jobs)}
    jobs.sort(key=lambda job: (job[0] != "inspect", job[1].name not in SLOW_FILES))
    with ThreadPoolExecutor(2) as pool:
        zygotes: queue.Queue[Zygote] = queue.Queue()
        first = Zygote(warm_argvs(work, clean))
        zygotes.put(first)
        zygotes.put(Zygote([], modules=first.modules))

        def cell(job: tuple[str, Path]) -> Cell:
            z = zygotes.get()
            try:
                return run_cell(
                    job[0], job[1], work, clean, cpu=600 if job[0] == "inspect" else 240, zygote=z
                )
            finally:
                zygotes.put(z)

        try:
            # A cell hangs when it makes no progress (CPU time, I/O) for STALL seconds, or spends
            # more CPU time than its budget (a runaway loop): the inspector cells drive every screen
            # of a real app (about 50 s of CPU each), the others need a few. CPU seconds do not grow
            # with the machine's load, so a slow cell beside the rest of the suite is never called a
            # hang.
            cells = list(pool.map(cell, jobs))
        finally:
            while not zygotes.empty():
                zygotes.get().close()
    yield [c for _, c in sorted(zip(jobs, cells, strict=True), key=lambda jc: order[jc[0]])]


def test_no_command_crashes_leaks_controls_or_hangs_on_any_hostile_file(matrix: list[Cell]) -> None:
    bad = [
        f"{c.command} {c.file}: {', '.join(c.problems)}; told: {c.told}" for c in matrix if not c.ok
    ]
    assert not bad, "\n".join(bad)


def test_the_inspector_finds_nothing_unsafe_on_any_screen(matrix: list[Cell]) -> None:
    """The inspector cells' own verdict (tests/hostile/drive_inspector.py walks every widget of
    every screen it visited: no raw control rendered, no markup interpreted, no screenshot written):
    no problem on any file it drives, and on the file of every hostile family the hostile strings
    did reach the screen (else the walk would prove nothing). This is the check the inspector's own
    suite made in process on the same file (tests/inspector/test_hostile.py), made once here."""
    inspected = [c for c in matrix if c.command == "inspect"]
    assert {c.file for c in inspected} == INSPECTED
    for c in inspected:
        assert c.exit == 0 and f"inspect {c.file}: 0 problems;" in "\n".join(c.verdict), (
            c.file,
            c.exit,
            c.verdict,
            c.told,
        )
        clicked = re.search(r"widgets clicked: (\d+)$", c.verdict[-1])  # (each, at least once)
        assert clicked and int(clicked.group(1)) >= 10, c.verdict
    (hostile,) = [c for c in inspected if c.file == "hostile_all_families.jsonl"]
    assert "hostile text shown: True" in hostile.verdict[-1], hostile.verdict


def test_memory_stays_bounded(matrix: list[Cell]) -> None:
    heavy = [
        f"{c.command} {c.file}: {c.peak_rss_mb:.0f} MB"
        for c in matrix
        if c.peak_rss_mb > RSS_CEILING_MB
    ]
    assert not heavy, heavy


def test_every_bad_file_gets_words_not_silence(matrix: list[Cell]) -> None:
    """A file that is not a readable cassette is named in a message (error or labelled warning)."""
    for c in matrix:
        if c.file in (
            "binary.jsonl",
            "empty.jsonl",
            "newer_version.jsonl",
            "yaml_alias_bomb.yaml",
            "yaml_deep_flow.yaml",
        ) and c.command in ("show", "verify", "export --otel", "diff self"):
            assert c.told, (c.command, c.file)


def test_no_markup_action_ran(matrix: list[Cell]) -> None:
    assert not Path(PWNED_DIR).exists()
