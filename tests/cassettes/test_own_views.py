"""``looptap show``'s printing pass without reading every round trip again (issue 106): a run read
to be printed (``open_run(path, views=True)``) keeps each round trip's own part of its printed
view as the analysis parses it, and the pass takes it from there: no record is read again, no
parse restored, and every view is the one the pass made before, byte for byte (an MCP server's
calls, a tool's HTTP, a fork's edit marks, an imported trace's, corpus recordings); a part JSON
cannot give back exactly is made again from the record, as before."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import corpus_files

from looptap.cassettes.reading import ParseStore, _show_objects, open_run, show_objects
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import RecordSource, load_vcr
from looptap.cassettes.wire import Exchange
from tests.cassettes.test_mcp_calls import run_exchanges
from tests.cassettes.test_tool_http import weather_run
from tests.support.analysed import cli_output

TRACE = Path(__file__).parents[1] / "interop" / "traces" / "langfuse.otlp.json"
#: Corpus recordings of several families (the first few of each).
FAMILIES = ("llm-anthropic/**/*.yaml", *(f"pydantic-ai/**/test_{f}/*.yaml"
            for f in ("openai_responses", "google", "bedrock", "cohere", "mistral")))  # fmt: skip


class Reads:
    """Records read again from disk and parses restored from the reader's store, from now on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.records = self.parses = 0
        record, parse = RecordSource.exchange_at, ParseStore.restore

        def exchange_at(source: RecordSource, *a: Any, **kw: Any) -> Any:
            self.records += 1
            return record(source, *a, **kw)

        def restore(store: ParseStore, *a: Any, **kw: Any) -> Any:
            self.parses += 1
            return parse(store, *a, **kw)

        monkeypatch.setattr(RecordSource, "exchange_at", exchange_at)
        monkeypatch.setattr(ParseStore, "restore", restore)


def _written(path: Path, exchanges: list[Exchange]) -> Path:
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(dataclasses.replace(ex))
    return path


def _edited() -> list[Exchange]:
    """A tool's HTTP calls between model calls, the last model call made by a fork's edit."""
    exchanges = weather_run()
    exchanges[-1].edits = [
        {"edit": "tool_result[c2]", "selector": "turn=1", "path": ["messages", 3, "content"],
         "before": '{"temp":22}'},
    ]  # fmt: skip
    return exchanges


def _corpus() -> list[Exchange]:
    """Round trips of a few corpus recordings of each of :data:`FAMILIES`."""
    files = [p for pattern in FAMILIES for p in corpus_files(pattern)[:3]]
    assert len(files) == 3 * len(FAMILIES)
    return [ex for p in files for ex in load_vcr(p)]


def _imported(path: Path) -> Path:
    """An OpenTelemetry trace imported (each round trip rebuilt from it, and marked so)."""
    assert cli_output("import", str(TRACE), "-o", str(path))[0] == 0
    return path


RUNS: dict[str, Callable[[Path], Path]] = {
    "mcp": lambda d: _written(d / "run.jsonl", run_exchanges()),
    "tool http, a fork's edit": lambda d: _written(d / "run.jsonl", _edited()),
    "imported trace": lambda d: _imported(d / "run.jsonl"),
    "corpus": lambda d: _written(d / "run.jsonl", _corpus()),
}


def _printed(path: Path, views: bool) -> bytes:
    """``show --json``'s objects of a first ``show`` (no kept analysis), in bytes."""
    run = open_run(path, cache=False, views=views)
    try:
        return b"".join(
            orjson.dumps(v, option=orjson.OPT_APPEND_NEWLINE) for v in show_objects(run, path)
        )
    finally:
        run.close()


@pytest.mark.parametrize("name", list(RUNS))
def test_the_printing_pass_takes_the_parts_and_reads_no_record_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = RUNS[name](tmp_path)
    before = _printed(path, views=False)  # the pass as it was: every record read again
    reads = Reads(monkeypatch)
    after = _printed(path, views=True)
    assert (reads.records, reads.parses) == (0, 0)
    assert after == before
    n = before.count(b"\n")
    assert n >= 4
    _printed(path, views=False)  # (the counts count: the pass without parts reads each record)
    assert reads.records == n and reads.parses == n


def test_a_part_json_cannot_give_back_exactly_is_made_from_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = RUNS["mcp"](tmp_path)
    made = _show_objects.roundtrip_json

    def with_a_tuple(*a: Any) -> Any:  # (JSON gives a list back)
        return {**made(*a), "notes": ("a", "tuple")}

    monkeypatch.setattr(_show_objects, "roundtrip_json", with_a_tuple)
    before = _printed(path, views=False)
    reads = Reads(monkeypatch)
    assert _printed(path, views=True) == before
    assert reads.records == before.count(b"\n") > 0
