"""Every command on every hostile file (tests/hostile/corpus.py), each in its own process: zero
tracebacks, zero raw control bytes on stdout or stderr, zero hangs or crashes, bounded memory.
The default run takes a covering subset (every file once, every command on two to four files,
two inspector cells: :func:`covering`); ``LOOPTAP_SLOW=1`` takes the whole product as well.
``bench/hostile.py`` prints the same matrix with peak RSS and what the user is told per cell.
The looptap commands are forked from a process that has imported looptap once (matrix.Zygote):
each is still a process of its own, without paying the interpreter's start and imports 300 times."""

from __future__ import annotations

import queue
import re
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
#: The inspector cells of the default run (each about 4-10 s of CPU: the driver visits every
#: screen): the file of every hostile family and a deep one. The bad records' and the truncated
#: file's cells run at night; the inspector's own suite opens a truncated file in process
#: (tests/inspector/test_app.py::test_truncated_file_shows_what_it_has_with_a_notice).
INSPECTED_BY_DEFAULT = {"hostile_all_families.jsonl", "deep_args_1000.jsonl"}
#: Files read by another command than their turn's in the default run: ``diff self`` holds two
#: reads of the delta bomb (13.9 s of CPU and about 1 GB, measured; at night), ``textconv`` one
#: whole read and its printing pass (2.6 s, about 460 MB).
DEFAULT_COMMAND = {"delta_bomb.jsonl": "textconv"}
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
#: Generous: the box is shared and noisy; the bombs this guards against took gigabytes. A bound
#: per read of the hostile file: `diff self` holds two reads of it at once (the delta bomb's two
#: measured 1,050-1,083 MB, its one read by `show` 586 MB; which side of 1,024 the pair fell on
#: depended on the environment, not on the tree: session 54).
RSS_CEILING_MB = 1024
#: How many reads of the hostile file a command holds at once (1 when not named).
HOSTILE_READS = {"diff self": 2}


#: Files that are not readable cassettes, and the commands whose words about them are checked
#: (test_every_bad_file_gets_words_not_silence).
TOLD_FILES = (
    "binary.jsonl",
    "empty.jsonl",
    "newer_version.jsonl",
    "yaml_alias_bomb.yaml",
    "yaml_deep_flow.yaml",
)
TOLD_COMMANDS = ("show", "verify", "export --otel", "diff self")
#: Every cell the nightly run takes (LOOPTAP_SLOW=1): every command on every file; the inspector
#: on the files that reach its widgets (every other file gets it in bench/hostile.py).
PRODUCT = [
    (c, f)
    for f in FILES
    for c in COMMANDS
    if (c != "inspect" or f in INSPECTED) and (c, f) not in KNOWN_OPEN
]


def covering() -> list[tuple[str, str]]:
    """The default run's cells, a covering subset of :data:`PRODUCT` (deterministic): every file
    once, with the commands taken in turn (the n-th file, in FILES' order, with the n-th command,
    so every command reads two to four files; :data:`DEFAULT_COMMAND` where it names another);
    the inspector cells of :data:`INSPECTED_BY_DEFAULT`; and each file that is not a readable
    cassette with one of the commands whose words are checked, taken in turn."""
    plain = [c for c in COMMANDS if c != "inspect"]
    cells = [(DEFAULT_COMMAND.get(f, plain[i % len(plain)]), f) for i, f in enumerate(FILES)]
    cells += [(TOLD_COMMANDS[i % len(TOLD_COMMANDS)], f) for i, f in enumerate(TOLD_FILES)]
    cells += [("inspect", f) for f in FILES if f in INSPECTED_BY_DEFAULT]
    return [cell for cell in PRODUCT if cell in set(cells)]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the directory holding every hostile file, the clean run ``diff clean`` compares with)."""
    work = tmp_path_factory.mktemp("hostile")
    shared.copy("hostile-files", build, work / "files")  # (built once a session)
    clean = work / "clean.jsonl"
    with CassetteWriter(clean) as w:
        for ex in hostile_exchanges("")[:6]:
            w.append(ex)
    return work, clean


def run_matrix(work: Path, clean: Path, cells: list[tuple[str, str]]) -> list[Cell]:
    """Each (command, file name) in its own process, two at a time; in ``cells``' order."""
    jobs = [(c, work / "files" / f) for c, f in cells]
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
            cells_run = list(pool.map(cell, jobs))
        finally:
            while not zygotes.empty():
                zygotes.get().close()
    return [c for _, c in sorted(zip(jobs, cells_run, strict=True), key=lambda jc: order[jc[0]])]


@pytest.fixture(scope="module")
def matrix(work: tuple[Path, Path]) -> list[Cell]:
    """The covering subset's cells (the whole product: test_every_command_on_every_hostile_file)."""
    return run_matrix(*work, covering())


def crashed(cells: list[Cell]) -> list[str]:
    return [
        f"{c.command} {c.file}: {', '.join(c.problems)}; told: {c.told}" for c in cells if not c.ok
    ]


def heavy(cells: list[Cell]) -> list[str]:
    return [
        f"{c.command} {c.file}: {c.peak_rss_mb:.0f} MB"
        for c in cells
        if c.peak_rss_mb > RSS_CEILING_MB * HOSTILE_READS.get(c.command, 1)
    ]


def silent(cells: list[Cell]) -> list[tuple[str, str]]:
    """A file that is not a readable cassette is named in a message (error or labelled warning)."""
    return [
        (c.command, c.file)
        for c in cells
        if c.file in TOLD_FILES and c.command in TOLD_COMMANDS and not c.told
    ]


def test_the_default_cells_cover_every_command_and_every_file() -> None:
    cells = covering()
    assert {c for c, _ in cells} == set(COMMANDS) and {f for _, f in cells} == set(FILES)
    assert {f for c, f in cells if c in TOLD_COMMANDS} >= set(TOLD_FILES)
    assert {f for c, f in cells if c == "inspect"} == INSPECTED_BY_DEFAULT < INSPECTED
    assert set(cells) < set(PRODUCT) and len(cells) == len(set(cells))


def test_no_command_crashes_leaks_controls_or_hangs_on_any_hostile_file(matrix: list[Cell]) -> None:
    bad = crashed(matrix)
    assert not bad, "\n".join(bad)


def unsafe_screens(cells: list[Cell], inspected: set[str]) -> None:
    """The inspector cells' own verdict (tests/hostile/drive_inspector.py walks every widget of
    every screen it visited: no raw control rendered, no markup interpreted, no screenshot written):
    no problem on any file it drives, and on the file of every hostile family the hostile strings
    did reach the screen (else the walk would prove nothing)."""
    cells = [c for c in cells if c.command == "inspect"]
    assert {c.file for c in cells} == inspected
    for c in cells:
        assert c.exit == 0 and f"inspect {c.file}: 0 problems;" in "\n".join(c.verdict), (
            c.file,
            c.exit,
            c.verdict,
            c.told,
        )
        clicked = re.search(r"widgets clicked: (\d+)$", c.verdict[-1])  # (each, at least once)
        assert clicked and int(clicked.group(1)) >= 10, c.verdict
    (hostile,) = [c for c in cells if c.file == "hostile_all_families.jsonl"]
    assert "hostile text shown: True" in hostile.verdict[-1], hostile.verdict


def test_the_inspector_finds_nothing_unsafe_on_any_screen(matrix: list[Cell]) -> None:
    """:func:`unsafe_screens` on the default run's inspector cells (every one at night, in
    test_every_command_on_every_hostile_file). This is the check the inspector's own suite made
    in process on the same file (tests/inspector/test_hostile.py), made once here."""
    unsafe_screens(matrix, INSPECTED_BY_DEFAULT)


def test_memory_stays_bounded(matrix: list[Cell]) -> None:
    assert not heavy(matrix), heavy(matrix)


def test_every_bad_file_gets_words_not_silence(matrix: list[Cell]) -> None:
    """A file that is not a readable cassette is named in a message (error or labelled warning)."""
    assert {c.file for c in matrix if c.command in TOLD_COMMANDS} >= set(TOLD_FILES)
    assert not silent(matrix), silent(matrix)


def test_no_markup_action_ran(matrix: list[Cell]) -> None:
    assert not Path(PWNED_DIR).exists()


@pytest.mark.slow(reason="the other 270-odd cells of every command on every hostile file")
def test_every_command_on_every_hostile_file(work: tuple[Path, Path]) -> None:
    """The whole product (every command on every file), the default run's covering cells taken
    again with the rest: every check of the tests above on every cell."""
    cells = run_matrix(*work, PRODUCT)
    assert len(cells) == len(PRODUCT)
    assert not crashed(cells), "\n".join(crashed(cells))
    assert not heavy(cells), heavy(cells)
    assert not silent(cells), silent(cells)
    unsafe_screens(cells, INSPECTED)
    assert not Path(PWNED_DIR).exists()
