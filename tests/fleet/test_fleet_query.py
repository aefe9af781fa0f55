"""``looptap query`` only reads (issue 69, item 5): DuckDB's ``enable_external_access`` is off and
the configuration locked on every reading connection (the index file, a Parquet export), and the
SQL given must be a query; each attempt to read or write a file, attach, install or load is
refused in one line, nothing written. ``--csv`` defuses cells a spreadsheet would run as formulas
(OWASP's CSV injection guidance); empty SQL is one line."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from real_corpus import CORPUS

from tests.fleet.test_fleet import looptap, looptap_process

duckdb = pytest.importorskip("duckdb")
RUN = CORPUS / "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml"


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An index of one real run, and its Parquet export."""
    tmp = tmp_path_factory.mktemp("query")
    runs = tmp / "runs"
    runs.mkdir()
    shutil.copy(RUN, runs / "run.yaml")
    r = looptap_process("export", "--parquet", str(tmp / "pq"), str(runs), cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp / ".looptap" / "fleet.duckdb", tmp / "pq"


def _refused(fleet: Path, sql: str, says: str) -> None:
    r = looptap("query", "--fleet", str(fleet), sql)
    assert r.returncode == 2, (sql, r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert says in r.stderr, r.stderr


@pytest.mark.parametrize("which", ["index", "parquet"])
def test_query_cannot_read_or_write_files_attach_install_or_load(
    fleets: tuple[Path, Path], tmp_path: Path, which: str
) -> None:
    fleet = fleets[0] if which == "index" else fleets[1]
    secret = tmp_path / "secret.txt"
    secret.write_text("a,b\nsk-not-for-you,1\n")
    out = tmp_path / "written.csv"
    # reading a file from inside a query: DuckDB's own lock refuses it
    off = "file system operations are disabled"
    for sql, says in (
        (f"SELECT * FROM read_text('{secret}')", off),
        (f"SELECT * FROM read_csv('{secret}')", off),
        (f"SELECT * FROM read_blob('{secret}')", off),
        ("SELECT * FROM glob('/etc/*')", off),
        (f"SELECT * FROM '{secret}'", "does not exist"),  # no file scan without file access
    ):
        _refused(fleet, sql, says)
    # statements that write, attach, install, load or change a setting: refused as they are
    for sql, word in (
        (f"COPY runs TO '{out}'", "COPY"),
        (f"COPY (SELECT 1) TO '{out}' (FORMAT CSV)", "COPY"),
        (f"EXPORT DATABASE '{tmp_path / 'exp'}'", "EXPORT"),
        (f"ATTACH '{tmp_path / 'other.duckdb'}' AS other", "ATTACH"),
        ("INSTALL httpfs", "INSTALL"),
        ("LOAD httpfs", "LOAD"),
        ("SET enable_external_access = true", "SET"),
        ("RESET lock_configuration", "RESET"),
        ("SELECT 1; COPY runs TO 'x.csv'", "COPY"),
    ):
        _refused(fleet, sql, f"{word} is refused")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]
    r = looptap("query", "--fleet", str(fleet), "--json", "SELECT count(*) AS n FROM runs")
    assert r.returncode == 0 and r.stdout == '{"n":1}\n', r.stderr


@pytest.mark.parametrize("which", ["index", "parquet"])
def test_the_lock_holds_without_the_statement_check(fleets: tuple[Path, Path], which: str) -> None:
    """The connection the commands read through is locked by DuckDB itself: what the statement
    check would refuse first is refused by DuckDB too, and no setting can be changed back."""
    from looptap.cassettes.fleet import open_fleet

    con = open_fleet(str(fleets[0] if which == "index" else fleets[1]))
    try:
        assert con.execute("SELECT current_setting('enable_external_access')").fetchone() == (
            False,
        )
        for sql in (
            "COPY runs TO '/tmp/looptap-never-written.csv'",
            "ATTACH '/tmp/looptap-never-attached.duckdb' AS x",
            "INSTALL httpfs",
            "LOAD httpfs",
            "SET enable_external_access = true",
            "SET lock_configuration = false",
            "SELECT * FROM read_text('/etc/hostname')",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(sql)
    finally:
        con.close()
    assert not Path("/tmp/looptap-never-written.csv").exists()


@pytest.mark.parametrize("sql", ["", "   ", " ; ", "-- nothing here\n"])
def test_empty_sql_is_one_line(fleets: tuple[Path, Path], sql: str) -> None:
    _refused(fleets[0], sql, "no SQL given")


def test_a_bad_query_is_one_line(fleets: tuple[Path, Path]) -> None:
    _refused(fleets[0], "SELEC 1", "the query failed: Parser Error")
    _refused(fleets[0], "SELECT nope FROM runs", "the query failed: Binder Error")


def test_csv_defuses_formula_cells(fleets: tuple[Path, Path]) -> None:
    """Text beginning ``= + - @``, a tab or a carriage return is written with a ``'`` first;
    numbers (a negative one too), and other text, as they are; the CSV still parses."""
    sql = (
        "SELECT '=HYPERLINK(\"http://x\",\"y\")' AS a, '+1' AS b, '-2+3' AS c, '@SUM(A1)' AS d, "
        "chr(9) || '=1' AS e, chr(13) || '=1' AS f, -5 AS g, -0.5 AS h, 'gpt-4o' AS i, "
        "'a=b' AS j, NULL AS k"
    )
    r = looptap_process("query", "--fleet", str(fleets[0]), "--csv", sql)
    assert r.returncode == 0, r.stderr
    header, row = list(csv.reader(io.StringIO(r.stdout)))
    assert header == list("abcdefghijk")
    assert row == [
        "'=HYPERLINK(\"http://x\",\"y\")", "'+1", "'-2+3", "'@SUM(A1)", "'\t=1",
        "'␍=1",  # (the CLI's output guard shows a carriage return as ␍)
        "-5", "-0.5", "gpt-4o", "a=b", "",
    ]  # fmt: skip
