"""The fleet (docs/fleet.md): ``looptap index`` on real corpus runs, its numbers against ``show
--json``'s, the Parquet export read back by pyarrow's dataset API and by DuckDB, the documented
schema, incremental updates, bad input, and the named questions."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS

from looptap.cassettes.fleet import TABLES, doc_table
from tests.support import progress
from tests.support.analysed import cli_run as looptap

duckdb = pytest.importorskip("duckdb")
REPO = Path(__file__).resolve().parents[2]
#: Real runs with findings of every layer and severity, an unpriced model, tool calls.
RUNS = [
    "pydantic-ai/tests/models/cassettes/test_openrouter/test_openrouter_errors_raised.yaml",
    "pydantic-ai/tests/models/cassettes/test_multimodal_tool_returns/"
    "test_multimodal_tool_return_matrix[tool_return_content-url-image-google_vertex].yaml",
    "pydantic-ai/tests/models/cassettes/test_openai_responses/"
    "test_openai_responses_thinking_with_modified_history.yaml",
    "pydantic-ai/tests/cassettes/test_tool_search/test_tool_search_eval[anthropic].yaml",
    "pydantic-ai/tests/models/cassettes/test_groq/"
    "test_tool_use_failed_error_streaming_with_text.yaml",
    "pydantic-ai/tests/providers/cassettes/test_gateway/test_gateway_provider_with_groq.yaml",
    "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml",
]
#: Two of them imported as looptap cassettes (the fleet reads both formats).
IMPORTED = RUNS[:2]


def looptap_process(
    *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``looptap ARGS`` as a process (``python -m looptap.cassettes.cli``): each command's wiring
    is shown so once (the index and the export here, a query in test_fleet_query.py, the fleet
    questions in test_fleet_agent.py)."""
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
    )


def _fleet(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    for i, rel in enumerate(RUNS):
        src = CORPUS / rel
        if rel in IMPORTED:
            r = looptap("import", str(src), "-o", str(runs / f"run{i}.jsonl"), "-q")
            assert r.returncode == 0, r.stderr
        else:
            shutil.copy(src, runs / f"run{i}.yaml")
    return runs


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The runs and their index (made by the command line)."""
    tmp = tmp_path_factory.mktemp("fleet")
    runs = _fleet(tmp)
    r = looptap_process("index", str(runs), "-o", str(tmp / "fleet.duckdb"), "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert f"indexed {len(RUNS)} runs" in r.stderr
    return runs, tmp / "fleet.duckdb"


def _query(db: Path, sql: str) -> list[dict[str, Any]]:
    r = looptap("query", "--fleet", str(db), "--json", sql)
    assert r.returncode == 0, r.stderr
    return [orjson.loads(line) for line in r.stdout.splitlines()]


def _show(path: Path) -> list[dict[str, Any]]:
    r = looptap("show", "--json", str(path))
    assert r.returncode == 0, r.stderr
    return [orjson.loads(line) for line in r.stdout.splitlines()]


def test_fleet_numbers_are_show_json_numbers(indexed: tuple[Path, Path]) -> None:
    """Findings per code, cost and turns of each run, from the index, equal those of ``show
    --json`` on the same file."""
    runs, db = indexed
    codes = {
        (r["run"], r["code"]): r["n"]
        for r in _query(db, "SELECT run, code, count(*) AS n FROM findings GROUP BY ALL")
    }
    per_run = {
        r["run"]: r
        for r in _query(
            db,
            "SELECT run, count(*) AS turns, sum(cost) AS cost, sum(input_tokens) AS input "
            "FROM turns GROUP BY run",
        )
    }
    checked = Counter[str]()
    for path in sorted(runs.iterdir()):
        objs = _show(path)
        turns = [v for v in objs if v["conversation"] is not None]
        run = str(path.resolve())
        shown = Counter(f["code"] for v in turns for f in v["findings"])
        assert {c: n for (r, c), n in codes.items() if r == run} == dict(shown), path.name
        costs = [Decimal(v["tokens"]["cost"]) for v in turns if v["tokens"]["cost"] is not None]
        row = per_run.get(run, {"turns": 0, "cost": None, "input": None})
        assert row["turns"] == len(turns)
        assert (Decimal(row["cost"]) if row["cost"] is not None else None) == (
            sum(costs, Decimal(0)) if costs else None
        )
        inputs = [v["tokens"]["input"] for v in turns if v["tokens"]["input"] is not None]
        assert row["input"] == (sum(inputs) if inputs else None)
        checked.update(shown)
    # the sample is what it claims: findings of each layer and an unpriced turn among them
    assert {c[0] for c in checked} == {"E", "A", "C"}
    assert _query(db, "SELECT count(*) AS n FROM turns WHERE cost IS NULL")[0]["n"] > 0


def _rows(con: Any, sql: str) -> list[tuple[Any, ...]]:
    return sorted(con.execute(sql).fetchall(), key=repr)


def test_parquet_reads_back_as_the_index(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    """``export --parquet`` partitions by day; pyarrow's dataset API and DuckDB read the same rows
    as the index holds, and ``looptap query`` reads the export as it reads the index."""
    import pyarrow.dataset as ds

    runs, db = indexed
    out = tmp_path / "pq"
    r = looptap("export", "--parquet", str(out), str(runs), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (runs.parent / ".looptap" / "fleet.duckdb").is_file()  # the default: beside runs/
    assert list((out / "turns").glob("day=*/*.parquet"))
    index = duckdb.connect(str(db), read_only=True)
    reader = duckdb.connect()
    for table, columns in TABLES.items():
        names = [n for n, _, _ in columns if n != "day"]
        cols = ", ".join(f'"{n}"' for n in names)
        want = _rows(index, f"SELECT {cols}, CAST(day AS VARCHAR) FROM {table}")
        assert want, table
        glob = str(out / table / "**" / "*.parquet")
        got = sorted(
            reader.execute(
                f"SELECT {cols}, CAST(day AS VARCHAR) FROM read_parquet(?, hive_partitioning=true)",
                [glob],
            ).fetchall(),
            key=repr,
        )
        assert got == want, table
        data = ds.dataset(out / table, format="parquet", partitioning="hive").to_table()
        assert set(data.column_names) == {n for n, _, _ in columns}
        arrow = data.to_pydict()
        rows = [(*(arrow[n][i] for n in names), str(arrow["day"][i])) for i in range(data.num_rows)]
        assert sorted(rows, key=repr) == want, table
    index.close()  # (DuckDB opens a file once a process: the query's locked connection next)
    counts = _query(out, "SELECT count(*) AS n FROM findings")
    assert counts == _query(db, "SELECT count(*) AS n FROM findings")


def test_schema_is_the_documented_one(indexed: tuple[Path, Path]) -> None:
    """docs/fleet.md's tables are generated from TABLES, and the index's columns are TABLES'."""
    _, db = indexed
    assert doc_table() in (REPO / "docs" / "fleet.md").read_text()
    con = duckdb.connect(str(db), read_only=True)
    for table, columns in TABLES.items():
        got = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]
        assert got == [(n, t) for n, t, _ in columns], table
    # pinned: a column renamed, dropped or moved is a change to the documented schema
    assert [n for n, _, _ in TABLES["findings"]] == [
        "run", "day", "code", "layer", "severity", "seq", "conversation", "turn", "position",
        "caused_by", "message",
    ]  # fmt: skip
    assert list(TABLES) == ["runs", "conversations", "turns", "findings", "tool_calls"]


def test_mcp_list_runs_reads_the_index_and_gives_the_same_answer(
    indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an index beside the root, ``list_runs`` takes each up-to-date run's figures from it
    (no run is opened) and answers exactly as when it reads the runs; a run changed since the
    index is read."""
    from looptap.cassettes.mcp.query import Runs, list_runs

    runs, _ = indexed
    shutil.rmtree(runs.parent / ".looptap", ignore_errors=True)
    read = list_runs(Runs([runs]), 0, 100, 6000)
    r = looptap("index", str(runs))
    assert r.returncode == 0, r.stderr
    assert (runs.parent / ".looptap" / "fleet.duckdb").is_file()
    opened: list[str] = []
    real_open = Runs.open

    def counted(self: Runs, name: str) -> Any:
        opened.append(name)
        return real_open(self, name)

    monkeypatch.setattr(Runs, "open", counted)
    assert list_runs(Runs([runs]), 0, 100, 6000) == read
    assert opened == []
    changed = sorted(runs.glob("*.yaml"))[0]
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    list_runs(Runs([runs]), 0, 100, 6000)
    assert opened == [str(changed)]
