"""``looptap verify`` scans every file looptap writes of a run (issue 91, item 1), not only the
cassette: a directory's web pages (``export --html``, ``fleet page``) and logs (a why branch's
``.jsonl.log``), and the databases — a kept analysis (SQLite, its turns in zstd blocks) and the
fleet index (DuckDB) — read table by table, a block as what it decompresses to. A planted key in
each is flagged; the same files without it are clean."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from looptap.cassettes.verify import scan_file

KEY = "ghp_" + "Zq81nA0pQ3rS5tU7vW9xYb2Cd4Ef6Gh8Ij0K"
PASSWORD_LINE = "aws_secret_access_key = Zq81nA0pQ3rS5tU7vW9xYb2Cd4Ef6Gh8"


def _sqlite(path: Path, text: str) -> Path:
    con = sqlite3.connect(path)
    con.execute("create table turn_blocks (n integer, data blob)")
    con.execute("insert into turn_blocks values (1, ?)", (zstandard.compress(text.encode()),))
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("secret", [KEY, PASSWORD_LINE])
def test_a_kept_analysis_block_is_read_decompressed(tmp_path: Path, secret: str) -> None:
    leaky = _sqlite(tmp_path / "a.sqlite", f'{{"turn": 1, "text": "{secret}"}}')
    clean = _sqlite(tmp_path / "b.sqlite", '{"turn": 1, "text": "[REDACTED]"}')
    assert scan_file(leaky) and not scan_file(clean)


def test_a_fleet_index_is_read_table_by_table(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "fleet.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table findings (message varchar)")
    con.execute("insert into findings values (?)", [f"the tool got {KEY}"])
    con.close()
    assert scan_file(path)


def test_a_directory_s_pages_and_logs_are_scanned(tmp_path: Path) -> None:
    (tmp_path / "run.html").write_text(f"<pre>{KEY}</pre>")
    (tmp_path / "branch.jsonl.log").write_text(f"{PASSWORD_LINE}\n")
    out = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "verify", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "run.html" in out.stdout and "branch.jsonl.log" in out.stdout
    assert KEY[8:] not in out.stdout + out.stderr
