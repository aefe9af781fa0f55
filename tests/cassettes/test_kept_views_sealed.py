"""The redactor's gate over a kept analysis's printed views (docs/redaction.md, "One gate";
issue 106 made the gate cheaper, never narrower). A real recording (pydantic-ai's OpenAI
tool-output cassette, in the corpus), written as a looptap whose redaction did nothing, its
requests sent through a gateway whose URL path carries a key (``/k/<key>/v1/chat/completions``).
The turns the analysis keeps hold no URL; the views show each round trip's path: they are the one
part of the kept analysis that holds the key. The first ``show`` keeps the analysis, refuses its
views (and its printed lines), and no piece of the key is in the kept file; the second takes the
analysis and prints the same. With the views' gate skipped (``_database.keep_views`` writing its
blocks as they are) this test fails."""

from __future__ import annotations

import dataclasses
import sqlite3
import sys
from pathlib import Path

import pytest
from real_corpus import CORPUS, load

from looptap.cassettes.recording import Redactor
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.support.analysed import Analysed, cli_output, keep_every_run

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # (last: bench/mcp.py)
from tool_secrets import _sqlite_text  # (every table's values, its blocks decompressed)

RUN = CORPUS / "pydantic-ai/tests/models/cassettes/test_openai/test_openai_tool_output.yaml"
KEY = "sk-proj-Q7vK2mX9pL4rT8wN3bZ6cY1dF5gH0jS2aE7uI4oP9kM3nB6vC8xZ1qW5"


class _Older(Redactor):
    """A looptap whose redaction knew none of it (a cassette written before, or by hand)."""

    def exchange(self, ex: Exchange) -> Exchange:
        return ex


def _pieces(secret: str) -> set[str]:
    return {secret[i : i + 8] for i in range(len(secret) - 7)}


def test_views_that_show_what_the_turns_do_not_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "old.jsonl"
    gateway = f"https://api.openai.com/k/{KEY}/v1/"
    with CassetteWriter(run, redactor=_Older()) as w:
        for ex in load(RUN):
            w.append(
                dataclasses.replace(ex, url=ex.url.replace("https://api.openai.com/v1/", gateway))
            )
    assert KEY in run.read_text()  # (planted: the test can fail)
    cache = keep_every_run(tmp_path, monkeypatch)
    rc, out, err = cli_output("show", str(run))
    assert rc in (0, 1), err
    (kept,) = cache.glob("*.sqlite")
    db = sqlite3.connect(kept)
    try:
        assert db.execute("SELECT views_done, texts_done FROM run").fetchone() == (None, None)
        assert db.execute("SELECT count(*) FROM turn_blocks").fetchone()[0] > 0  # (kept)
    finally:
        db.close()
    data = _sqlite_text(kept)
    assert not any(p in data for p in _pieces(KEY))
    analysed = Analysed(monkeypatch)
    assert cli_output("show", str(run))[:2] == (rc, out)  # (the views made afresh: the same)
    assert analysed.added == 0  # (the analysis taken)
