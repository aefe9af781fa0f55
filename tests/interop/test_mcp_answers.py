"""``looptap mcp``'s answers root-cause first (issue 32 item 5): the top root cause is never
clipped (the word that matters is what gets cut), other parts give way first; a clipped text ends
on a whole word; the diff carries the two values the CLI's diff shows."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.mcp import encode, text
from looptap.cassettes.mcp.query import Runs, diff, run_summary
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.storage import read_records
from tests.support import progress

WHOLE = "missing required property 'symbol'."


@pytest.fixture
def root(tmp_path: Path, demo_cassette: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    shutil.copy(demo_cassette, d / "demo.jsonl")
    return d


@pytest.mark.parametrize("max_bytes", [6000, 1500, 1000])
def test_the_top_root_cause_is_whole_and_other_parts_give_way(root: Path, max_bytes: int) -> None:
    body = encode(run_summary(Runs([root]), "demo.jsonl", max_bytes), max_bytes)
    assert len(body.encode()) <= max_bytes
    top = orjson.loads(body)["root_causes"][0]
    assert top["code"] == "E.arguments_schema" and top["seq"] == 4 and top["conversation"] == "c2"
    assert top["recorded"]["message"].endswith(WHOLE), top
    # folded under it
    assert "C.tool_result_error" not in [f["code"] for f in orjson.loads(body)["root_causes"]]


def test_a_clipped_text_ends_on_a_whole_word() -> None:
    said = text("the client dropped the result of get_weather " * 20, 103)
    kept = said.split("…[clipped")[0]
    assert len(kept) <= 103 and kept.endswith(
        ("the", "client", "dropped", "result", "of", "get_weather")
    ), kept
    # one long word: cut where it must be
    assert text("x" * 300, 100).startswith("x" * 100 + "…[clipped: 300")


def test_the_diff_carries_both_values(root: Path) -> None:
    exs = read_records(root / "demo.jsonl").exchanges
    last = exs[-1]
    body = orjson.loads(b"".join(c for _, c in last.response_chunks))
    body["content"] = [{"type": "text", "text": "Something else entirely."}]
    last.response_chunks = [(0.0, orjson.dumps(body))]
    with CassetteWriter(root / "changed.jsonl") as w:
        for ex in exs:
            w.append(ex)
    diverged = diff(Runs([root]), "demo.jsonl", "changed.jsonl", None, 20, 6000)
    answer = orjson.loads(encode(diverged, 6000))
    (e,) = [d for d in answer["recorded"]["divergences"] if d["layer"] == "E"]
    assert any(
        'B "Something else entirely."' in c and " A " in f" {c}" for c in e["recorded_changes"]
    ), e


def test_a_diff_of_runs_on_different_apis_is_one_divergence(root: Path, tmp_path: Path) -> None:
    from real_corpus import CORPUS

    from looptap.cassettes.cli import main

    src = CORPUS / "pydantic-ai/tests/cassettes/test_settings/test_stop_settings[openai].yaml"
    assert main(["import", "-q", str(src), "-o", str(root / "openai.jsonl")]) == 0
    diverged = diff(Runs([root]), "demo.jsonl", "openai.jsonl", None, 20, 6000)
    answer = orjson.loads(encode(diverged, 6000))
    (only,) = answer["recorded"]["divergences"]
    assert only["recorded_message"].startswith(
        "the runs use different APIs (anthropic POST /v1/messages against openai_chat"
    )


_READ = """
import os, sys
from pathlib import Path
from looptap.cassettes.mcp import QueryError, read_json
path = Path(sys.argv[1])
if sys.argv[2] == "fifo":
    os.mkfifo(path)
else:
    path.write_bytes(b'{"a": "' + b"x" * 100 + b'"}')
try:
    print("read", read_json(path, 64, "why.json", why="w"))
except QueryError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize(
    ("kind", "said"),
    [("fifo", "refused: this why.json cannot be read"), ("big", "refused: this why.json is over")],
)
def test_a_saved_file_read_for_an_answer_never_blocks_and_stays_in_its_bound(
    tmp_path: Path, kind: str, said: str
) -> None:
    """A why's state or a saved comparison is checked to be a regular file when it is found, then
    read: a FIFO put at its name since (someone else's process may write under the roots) is
    refused, not waited on until a writer comes; more than the bound is never read."""
    out = progress.run(
        [sys.executable, "-c", _READ, str(tmp_path / "why.json"), kind],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith(said), out
