"""A FIFO put where looptap keeps its own files (issue 53 item 4): a kept analysis' database
and its write-ahead log, the machine key (and a link in the database's place).
``looptap show`` opens none of them unless it is a regular file (``storage.open_regular``;
an ``lstat`` before the database is opened), so it ends and prints the run as it does without
one; before, opening the FIFO waited for a writer forever.

A hang is told by lack of progress (tests/support/progress.py): a process blocked in ``open``
uses no CPU time and does no I/O."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from looptap.cassettes.reading import keep, location
from tests.support import progress
from tests.support.huge import write_huge
from tests.support.recorder import clean_env

#: Round trips of the run, each question with :data:`WORDS` words of prose: over kept.MIN_BYTES,
#: so that a kept analysis is looked for (1.13 MiB, the fixture asserts it; a show 0.6 s of CPU,
#: against 3 s for the 1,600 short round trips of the same size before session 56).
ROUND_TRIPS = 40
WORDS = 5000


def _show(run: Path, env: dict[str, str]) -> str:
    r = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", str(run)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return str(r.stdout)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_huge(tmp_path_factory.mktemp("planted") / "run.jsonl", ROUND_TRIPS, words=WORDS)
    assert path.stat().st_size >= keep.__globals__["MIN_BYTES"]  # (the kept analysis' module)
    return path


@pytest.fixture(scope="module")
def shown(run: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """What ``show`` prints with nothing planted (no cache)."""
    where = tmp_path_factory.mktemp("plain")
    env = clean_env(LOOPTAP_CACHE_DIR=str(where / "cache"))
    out = _show(run, env)
    assert f"{ROUND_TRIPS:,} round trips" in out
    return out


@pytest.mark.parametrize(
    "planted",
    [
        "kept",
        pytest.param(
            "kept-wal",
            marks=pytest.mark.slow(
                reason="a FIFO beside the kept database: the same check before opening ([kept] by "
                "default), two more shows, ~1 s of CPU"
            ),
        ),
        pytest.param(
            "link",
            marks=pytest.mark.slow(
                reason="a link in the database's place: the same lstat before opening ([kept] by "
                "default), ~1 s of CPU"
            ),
        ),
    ],
)
def test_show_ends_and_prints_the_run_past_a_fifo(
    planted: str, run: Path, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    env = clean_env(LOOPTAP_CACHE_DIR=str(cache))
    monkeypatch.setenv("LOOPTAP_CACHE_DIR", str(cache))
    where = location(run)
    assert where is not None
    path = {
        "kept": where,
        "kept-wal": Path(f"{where}-wal"),
        "link": where,
    }[planted]
    if planted == "kept-wal":  # (beside a kept analysis: one kept first)
        assert _show(run, env) == shown
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if planted == "link":  # a link to a database elsewhere is not followed
        os.symlink(tmp_path / "elsewhere.sqlite", path)
    else:
        os.mkfifo(path, 0o600)
    assert _show(run, env) == shown
    assert _show(run, env) == shown  # and again, past whatever the first one kept
    if planted == "link":
        assert not (tmp_path / "elsewhere.sqlite").exists()


_SWAPPED = """
import os, sys
from looptap.cassettes.reading import RunReader
reader = RunReader(sys.argv[1])
while not reader.step().at_end:
    pass
os.unlink(sys.argv[1])
os.mkfifo(sys.argv[1])
try:
    reader.exchange_by_seq(0)
except OSError as exc:
    print(exc)
"""


def test_a_run_swapped_for_a_fifo_while_read_is_an_error_not_a_wait(
    run: Path, tmp_path: Path
) -> None:
    """A viewer reads a round trip again from disk when it is shown: the file it follows, swapped
    for a FIFO meanwhile, is one error (was: the viewer waited for a writer forever)."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(run.read_bytes())
    r = progress.run(
        [sys.executable, "-c", _SWAPPED, str(path)], capture_output=True, text=True, env=clean_env()
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (
        r.stdout.strip() == f"{path}: not a regular file (a device, pipe or socket is never read)"
    )
