"""``looptap index`` over time and on bad input: an unchanged run is not read again, a changed
or grown one is, a removed one leaves; a damaged, foreign, empty, still-written or refused file is
indexed as far as it reads or skipped with one line, never a stopped index. And the named
questions, and the fleet commands without DuckDB."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS

from looptap.cassettes.hints import install_command, looptap_checkout
from tests.fleet.test_fleet import looptap
from tests.support import progress

duckdb = pytest.importorskip("duckdb")
A = CORPUS / "pydantic-ai/tests/models/cassettes/test_openrouter/test_openrouter_errors_raised.yaml"
B = CORPUS / "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml"
C = (
    CORPUS / "pydantic-ai/tests/models/cassettes/test_groq/"
    "test_tool_use_failed_error_streaming_with_text.yaml"
)


def _index(runs: Path, db: Path, **env: str) -> str:
    r = looptap("index", str(runs), "-o", str(db), **env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return r.stderr


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sorted(con.execute(sql).fetchall(), key=repr)
    finally:
        con.close()


def _cassette(src: Path, out: Path) -> Path:
    r = looptap("import", str(src), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    return out


def test_an_unchanged_run_is_not_read_again_a_changed_one_is_a_removed_one_leaves(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    a = _cassette(A, runs / "a.jsonl")
    b = shutil.copy(B, runs / "b.yaml")
    c = shutil.copy(C, runs / "c.yaml")
    db = tmp_path / "fleet.duckdb"
    assert "indexed 3 runs" in _index(runs, db)
    before = _rows(db, "SELECT run, size, digest FROM runs")
    said = _index(runs, db)
    assert "indexed 0 runs (0 round trips), 3 unchanged, 0 removed" in said
    assert _rows(db, "SELECT run, size, digest FROM runs") == before
    # a grown run (a recording appended to: here, b's bytes become c's), a removed one
    Path(b).write_bytes(Path(C).read_bytes())
    Path(c).unlink()
    said = _index(runs, db)
    assert "indexed 1 run " in said and "2 unchanged" not in said and "1 removed" in said
    assert "1 unchanged" in said
    assert _rows(db, "SELECT DISTINCT run FROM turns") == sorted(
        [(str(a.resolve()),), (str(Path(b).resolve()),)], key=repr
    )
    # b's rows are now those of c's content: the codes of C's findings, none of B's
    codes = {
        r[0] for r in _rows(db, f"SELECT code FROM findings WHERE run = '{Path(b).resolve()}'")
    }
    assert "A.error_in_200" in codes
    # same size and mtime, other bytes: the digest tells
    st = a.stat()
    data = bytearray(a.read_bytes())
    data[-2:-1] = b" " if data[-2:-1] != b" " else b"\t"
    a.write_bytes(bytes(data))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "indexed 1 run " in _index(runs, db)


def test_bad_input_is_indexed_or_skipped_with_a_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    good = _cassette(A, runs / "good.jsonl")
    whole = good.read_bytes()
    # a run cut in the middle of a record (a recording killed, or still being written)
    (runs / "cut.jsonl").write_bytes(whole[: len(whole) * 2 // 3])
    (runs / "notes.jsonl").write_text("not a cassette\n")
    (runs / "empty.yaml").write_bytes(b"")
    (runs / "config.yaml").write_text("a: [1, 2\n")  # YAML, not vcrpy
    (runs / "bytes.jsonl").write_bytes(os.urandom(5000))
    db = tmp_path / "fleet.duckdb"
    said = _index(runs, db)
    lines = [line for line in said.splitlines() if line.startswith("looptap: skipped ")]
    skipped = {line.split()[2].rstrip(":").rsplit("/", 1)[-1] for line in lines}
    assert skipped == {"notes.jsonl", "empty.yaml", "config.yaml", "bytes.jsonl"}
    assert all(len(line) < 500 for line in lines)
    # every file has its row; the cut run is indexed as far as it reads, its problems counted
    rows = {
        Path(r[0]).name: r[1:]
        for r in _rows(db, "SELECT run, round_trips, problems, error FROM runs")
    }
    assert set(rows) == {p.name for p in runs.iterdir()}
    assert rows["good.jsonl"][2] is None and rows["good.jsonl"][0] > 0
    assert rows["cut.jsonl"][2] is None and 0 < rows["cut.jsonl"][0] <= rows["good.jsonl"][0]
    assert rows["cut.jsonl"][1] > 0
    assert rows["notes.jsonl"][2]
    # skipped files are not tried again until they change
    assert "indexed 0 runs" in _index(runs, db)
    # the run that was being written is finished: read again, whole
    (runs / "cut.jsonl").write_bytes(whole)
    assert "indexed 1 run " in _index(runs, db)
    got = _rows(db, "SELECT round_trips, problems FROM runs WHERE run LIKE '%cut.jsonl'")
    assert got == [(rows["good.jsonl"][0], 0)]
    # an export to a file, an index that is not DuckDB's: one line each, nothing overwritten
    for args in (
        ["export", "--parquet", str(good), str(runs)],
        ["index", str(runs), "-o", str(good)],
        ["query", "--fleet", str(good), "SELECT 1"],
    ):
        r = looptap(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert good.read_bytes() == whole
    # an OUTDIR whose table directory is not an earlier export's: refused, nothing replaced
    out = tmp_path / "out"
    (out / "turns").mkdir(parents=True)
    mine = out / "turns" / "notes.txt"
    mine.write_text("the user's own")
    r = looptap("export", "--parquet", str(out), str(runs))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "not a looptap Parquet export" in r.stderr
    assert mine.read_text() == "the user's own" and not (out / "runs").exists()


def test_a_run_too_large_for_the_memory_budget_is_skipped_with_a_line(tmp_path: Path) -> None:
    """A 1 GB run stands here as a run the reader refuses for its size: the memory budget is
    made smaller than the run instead of the run larger than the budget."""
    runs = tmp_path / "runs"
    runs.mkdir()
    _cassette(A, runs / "big.jsonl")
    shutil.copy(B, runs / "small.yaml")  # (a vcrpy cassette is read whole: bounded by its loader)
    db = tmp_path / "fleet.duckdb"
    said = _index(runs, db, LOOPTAP_MEMORY_BUDGET_MB="1")
    lines = [line for line in said.splitlines() if line.startswith("looptap: skipped ")]
    assert len(lines) == 1 and "big.jsonl: analysing this run needs more than the memory" in said
    assert "indexed 2 runs" in said and "1 skipped" in said
    # its row says so, and the next index does not try it again until it changes (as at 1 GiB,
    # below)
    size = (runs / "big.jsonl").stat().st_size
    assert _rows(db, "SELECT size, error IS NOT NULL FROM runs WHERE run LIKE '%big.jsonl'") == [
        (size, True)
    ]
    assert "indexed 0 runs" in _index(runs, db, LOOPTAP_MEMORY_BUDGET_MB="1")


def _at(path: Path, day: str) -> None:
    t = datetime.fromisoformat(day).timestamp()
    os.utime(path, (t, t))


def test_named_questions(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, src, day in (("old.yaml", A, "2026-01-01"), ("new.yaml", A, "2026-02-01")):
        _at(Path(shutil.copy(src, runs / name)), day)
    _at(Path(shutil.copy(C, runs / "other.yaml")), "2026-02-02")
    db = tmp_path / "fleet.duckdb"
    _index(runs, db)

    def ask(*args: str) -> list[dict[str, Any]]:
        r = looptap("fleet", *args, "--fleet", str(db), "--json")
        assert r.returncode == 0, r.stderr
        return [orjson.loads(line) for line in r.stdout.splitlines()]

    every = {r["code"]: r for r in ask("findings")}
    assert every["A.rate_limited"]["runs"] == 2
    since = {r["code"] for r in ask("findings", "--since", "2026-01-15")}
    new = {r["code"] for r in ask("findings", "--since", "2026-01-15", "--new")}
    assert new and new < since and "A.rate_limited" in since - new
    assert new == {
        r[0] for r in _rows(db, "SELECT code FROM findings WHERE run LIKE '%other.yaml'")
    }
    days = ask("cost", "--by", "day")
    assert [d["day"] for d in days] == sorted(d["day"] for d in days) or len(days) == 3
    assert {d["day"] for d in days} == {"2026-01-01", "2026-02-01", "2026-02-02"}
    total = _rows(db, "SELECT sum(cost) FROM turns")[0][0]
    by_model = ask("cost")
    assert sum(float(m["cost_usd"] or 0) for m in by_model) == pytest.approx(float(total))
    failing = ask("failing-turns")
    assert failing and all(f["root_cause"] for f in failing)
    assert sum(f["runs"] for f in failing) == len(
        _rows(
            db, "SELECT DISTINCT run FROM findings WHERE severity = 'error' AND caused_by IS NULL"
        )
    )
    r = looptap("fleet", "findings", "--new", "--fleet", str(db))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--since" in r.stderr


def test_query_output_never_drives_the_terminal(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(B, runs / "b.yaml")
    db = tmp_path / "fleet.duckdb"
    _index(runs, db)
    r = looptap("query", "--fleet", str(db), "SELECT chr(27) || ']0;owned' || chr(7) AS x, 1 AS n")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "owned" in r.stdout
    r = looptap("query", "--fleet", str(db), "SELECT nonsense FROM nowhere")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    r = looptap("query", "--fleet", str(tmp_path / "none.duckdb"), "SELECT 1")
    assert r.returncode == 2 and "looptap index" in r.stderr


_NO_DUCKDB = (
    "import sys; sys.modules['duckdb'] = None\n"  # an import of it raises ImportError
    "from looptap.cassettes.cli import main; sys.exit(main(sys.argv[1:]))\n"
)


def test_without_duckdb_the_commands_say_how_to_install_it(tmp_path: Path) -> None:
    for args in (["index", str(tmp_path)], ["query", "SELECT 1"], ["fleet", "cost"]):
        r = progress.run(
            [sys.executable, "-c", _NO_DUCKDB, *args], capture_output=True, text=True, cwd=tmp_path
        )
        assert r.returncode == 2, r.stderr
        # issue 71 item 3: was "pip install 'looptap[fleet]'", and looptap is on no package index:
        # the extra from this checkout, into this environment, as it runs when typed
        assert r.stderr == (
            "looptap: error: the fleet commands need DuckDB (the fleet extra): "
            f"{install_command('fleet')}\n"
        ), r.stderr
        assert f"--python {sys.executable} " in r.stderr and "'looptap[fleet]'" not in r.stderr
        checkout = looptap_checkout()
        assert checkout is None or f"-e '{checkout}[fleet]'" in r.stderr, r.stderr


def test_the_core_and_the_pytest_plugin_never_import_duckdb(tmp_path: Path) -> None:
    run = shutil.copy(B, tmp_path / "b.yaml")
    code = (
        "import sys, os\n"
        "import looptap.cassettes, looptap.cassettes.replay.testing.plugin, looptap.cassettes.fleet\n"  # noqa: E501
        "from looptap.cassettes.cli import main\n"
        f"main(['show', '--json', {str(run)!r}])\n"
        "os.write(2, str('duckdb' in sys.modules).encode())\n"
    )
    r = progress.run(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert r.returncode == 0 and r.stderr.endswith("False"), r.stderr


def test_mcp_search_reaches_an_old_run_through_the_index(tmp_path: Path) -> None:
    """The MCP search reads the 50 newest runs; with an index, the runs whose findings mention the
    query are read first, whatever their age."""
    from looptap.cassettes.mcp.query import Runs, search

    runs = tmp_path / "runs"
    runs.mkdir()
    _at(Path(shutil.copy(C, runs / "old.yaml")), "2026-01-01")
    for i in range(50):
        _at(Path(shutil.copy(B, runs / f"new{i:02}.yaml")), "2026-02-01")

    def hits() -> set[str]:
        answer = search(Runs([runs]), "tool_use_failed", None, 5, 6000)
        return {h["run"] for h in answer["recorded"]["hits"]}

    assert hits() == set()
    r = looptap("index", str(runs))
    assert r.returncode == 0, r.stderr
    assert hits() == {"old.yaml"}


def test_fleet_page(tmp_path: Path) -> None:
    """``looptap fleet page``: the named questions as one page, with no script, its recorded text
    escaped; an existing page is replaced only with --force."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(C, runs / "c<b>.yaml")
    db = tmp_path / "fleet.duckdb"
    _index(runs, db)
    page = tmp_path / "fleet.html"
    r = looptap("fleet", "page", "--fleet", str(db), "-o", str(page))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert "A.error_in_200" in html and "Failing turns" in html and "1 run (0 unreadable)" in html
    assert "<script" not in html and "default-src &#39;none&#39;" in html
    assert "c&lt;b&gt;.yaml" in html and "<b>" not in html  # recorded names, escaped
    r = looptap("fleet", "page", "--fleet", str(db), "-o", str(page))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and page.read_text() == html


def test_the_index_reports_its_progress_run_by_run(tmp_path: Path) -> None:
    """The progress callback (the command's progress line, views/_progress.py) is told after each
    run: bytes read grow to the total to read, round trips to those indexed."""
    from looptap.cassettes.fleet import connect, update

    runs = tmp_path / "runs"
    runs.mkdir()
    for i, src in enumerate((A, B, C)):
        shutil.copy(src, runs / f"r{i}.yaml")
    seen: list[tuple[int, int, int]] = []
    con = connect(tmp_path / "fleet.duckdb")
    done = update(con, [runs], progress=lambda *a: seen.append(a))
    con.close()
    assert len(seen) == 3
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)
    assert seen[-1][0] == seen[-1][1] == sum(p.stat().st_size for p in runs.iterdir())
    assert seen[-1][2] == done.round_trips > 0


def test_since_takes_a_date_or_a_git_ref(monkeypatch: pytest.MonkeyPatch) -> None:
    from looptap.cassettes.errors import CassetteError
    from looptap.cassettes.fleet import since_time

    assert since_time("2026-11-25") == datetime(2026, 11, 25)
    assert since_time("2026-11-25T10:00:00+02:00") == datetime(2026, 11, 25, 8)  # as UTC
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    head = subprocess.run(
        ["git", "log", "-1", "--format=%ct", "HEAD"], capture_output=True, text=True, check=True
    ).stdout
    assert since_time("HEAD") == datetime.fromtimestamp(int(head), UTC).replace(tzinfo=None)
    with pytest.raises(CassetteError, match=r"a date .* or a git ref"):
        since_time("no-such-ref-anywhere")


def test_an_unchanged_run_is_not_opened_and_a_touched_one_is_hashed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As git's index: a run whose ``stat`` (size, mtime, ctime, inode, device) is the indexed
    one is not opened; a touched one (another mtime, same bytes) is hashed, not read, and its new
    ``stat`` kept, so the index after that opens nothing either."""
    from looptap.cassettes.fleet import connect, stamp_of, update

    runs = tmp_path / "runs"
    runs.mkdir()
    for i, src in enumerate((A, B, C)):
        shutil.copy(src, runs / f"r{i}.yaml")
    con = connect(tmp_path / "fleet.duckdb")
    assert update(con, [runs]).read == 3
    hashed: list[Path] = []
    real = stamp_of

    def counted(path: Path) -> Any:
        hashed.append(path)
        return real(path)

    monkeypatch.setitem(update.__globals__, "stamp_of", counted)  # the stamp_of update calls
    done = update(con, [runs])
    assert (done.read, done.unchanged, hashed) == (0, 3, [])
    touched = runs / "r1.yaml"
    st = touched.stat()
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    done = update(con, [runs])
    assert (done.read, done.unchanged, hashed) == (0, 3, [touched])
    done = update(con, [runs])
    assert (done.read, done.unchanged, hashed) == (0, 3, [touched])
    con.close()


def test_a_run_written_while_indexing_is_indexed_as_far_as_read_then_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording goes on while the index reads it: a writer thread appends round trips with
    the recorder's CassetteWriter all along, and the run is opened only once the writer has
    appended after the stamp was taken. The index goes on, the run's rows are those read, its
    stamp the one before reading; the next index reads it again, whole."""
    import threading

    import looptap.cassettes.reading as reading
    from looptap.cassettes.fleet import connect, stamp_of, update
    from looptap.cassettes.recording.pipeline import CassetteWriter

    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(B, runs / "other.yaml")
    exchanges = reading.open_run(B).exchanges
    live = runs / "live.jsonl"
    writer = CassetteWriter(live)
    for ex in exchanges:
        writer.append(ex)
    written = [len(exchanges)]
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set() and written[0] < 100:
            writer.append(exchanges[written[0] % len(exchanges)])
            written[0] += 1

    real_open = reading.open_run

    def opening(path: Path, **kw: Any) -> Any:
        if Path(path).name == "live.jsonl":
            at = written[0]
            thread.start()
            progress.until(lambda: written[0] > at, what="the writer's next round trip")
        return real_open(path, **kw)

    # the index reads runs by the open_run of the rows module (where stamp_of is)
    monkeypatch.setitem(stamp_of.__globals__, "open_run", opening)
    thread = threading.Thread(target=write)
    stamped = live.stat().st_size
    con = connect(tmp_path / "fleet.duckdb")
    said: list[str] = []
    try:
        done = update(con, [runs], say=said.append)
    finally:
        stop.set()
        thread.join()
        writer.close()
    monkeypatch.setitem(stamp_of.__globals__, "open_run", real_open)
    assert (done.read, done.skipped, said) == (2, 0, [])
    row = "SELECT size, round_trips, error FROM runs WHERE run LIKE '%live.jsonl'"
    size, trips, error = con.execute(row).fetchone()
    assert error is None and size == stamped < live.stat().st_size
    assert len(exchanges) < trips <= written[0]
    done = update(con, [runs])
    assert (done.read, done.unchanged) == (1, 1)
    assert con.execute(row).fetchone() == (live.stat().st_size, written[0], None)
    assert update(con, [runs]).read == 0
    con.close()


def test_worker_processes_give_the_rows_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--jobs``: the pool is used only with enough runs for each worker (RUNS_PER_WORKER);
    made 1 here, two workers read three runs into the rows one process makes."""
    from looptap.cassettes.fleet import TABLES, connect, update

    runs = tmp_path / "runs"
    runs.mkdir()
    for i, src in enumerate((A, B, C)):
        shutil.copy(src, runs / f"r{i}.yaml")

    def tables(db: str, jobs: int) -> dict[str, list[tuple[Any, ...]]]:
        con = connect(tmp_path / db)
        assert update(con, [runs], jobs=jobs).read == 3
        got = {t: sorted(con.execute(f"FROM {t}").fetchall(), key=repr) for t in TABLES}
        con.close()
        return got

    alone = tables("alone.duckdb", 1)
    monkeypatch.setitem(update.__globals__, "RUNS_PER_WORKER", 1)  # the one update reads
    assert tables("pooled.duckdb", 2) == alone and alone["turns"]


def test_a_1_gb_run_is_skipped_with_a_line_under_the_memory_budget(tmp_path: Path) -> None:
    """A 1 GiB run that takes no disk: real records, then a hole (a sparse file) the reader sees
    as one unfinished 1 GiB line. Under a 300 MB budget its reader stops with one line; the index
    goes on and indexes the other run, and does not try the big one again until it changes."""
    runs = tmp_path / "runs"
    runs.mkdir()
    big = _cassette(A, runs / "big.jsonl")
    os.truncate(big, 2**30)
    if big.stat().st_blocks * 512 > 2**20:
        pytest.skip("this file system does not keep sparse files")
    shutil.copy(B, runs / "small.yaml")
    db = tmp_path / "fleet.duckdb"
    said = _index(runs, db, LOOPTAP_MEMORY_BUDGET_MB="300")
    lines = [line for line in said.splitlines() if line.startswith("looptap: skipped ")]
    assert len(lines) == 1 and "big.jsonl: analysing this run needs more than" in lines[0]
    assert "indexed 2 runs" in said and "1 skipped" in said
    assert _rows(db, "SELECT size, error IS NOT NULL FROM runs WHERE run LIKE '%big.jsonl'") == [
        (2**30, True)
    ]
    assert "indexed 0 runs" in _index(runs, db, LOOPTAP_MEMORY_BUDGET_MB="300")
