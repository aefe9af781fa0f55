"""``looptap mcp``'s read-only ``why_report`` (issue 46): a finished why read from its output
directory, its strings made safe, nothing outside the roots read."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from looptap.cassettes.mcp import QueryError
from looptap.cassettes.mcp.query import Runs, why_report
from looptap.cassettes.why import Intervention, Tally, verdict


def _why_dir(root: Path, finished: bool = True) -> Path:
    d = root / "why-run"
    d.mkdir()
    c = Tally(
        Intervention(
            "C",
            "c1",
            1,
            "the dropped result of call \x1b[31mcall_1 put back",
            "c-restore-result",
            edits=["restore_result[call_1]=@x"],
        ),
        flips=10,
        samples=10,
        branches=[{"branch": "C-c1-t1-c-restore-result.1.jsonl", "result": "flipped"}],
    )
    e = Tally(Intervention("E", "c1", 0, "re-sampled", "e-resample"), flips=1, samples=10)
    doc: dict[str, object] = {
        "looptap": "why",
        "run": "run.jsonl",
        "sha256": "0" * 64,
        "samples": 10,
        "outcome": {"kind": "exit", "value": ""},
    }
    if finished:
        v = verdict([c, e], 10).as_json()
        doc |= {"verdict": v["verdict"], "report": v["interventions"]}
    else:  # as an interrupted why leaves it: what it planned, the branches that finished
        doc |= {
            "interventions": [c.intervention.as_json(), e.intervention.as_json()],
            "branches": {
                c.intervention.key: {
                    "1": {"branch": f"{c.intervention.key}.1.jsonl", "result": "flipped"},
                    "2": {"branch": f"{c.intervention.key}.2.jsonl", "result": "flipped"},
                },
                e.intervention.key: {
                    "1": {
                        "branch": f"{e.intervention.key}.1.jsonl",
                        "result": "invalid",
                        "why": "x",
                    }
                },
            },
        }
    (d / "why.json").write_bytes(orjson.dumps(doc))
    return d


def test_why_report_reads_the_verdict_and_the_interventions_ranked(tmp_path: Path) -> None:
    _why_dir(tmp_path)
    answer = why_report(Runs([str(tmp_path)]), "why-run", 0, 20, 6000)
    assert answer["finished"] is True and answer["interventions"] == 2
    assert answer["verdict"] == {
        "determined": True,
        "turn": 1,
        "flips": 10,
        "samples": 10,
        "low": 0.6555,
        "high": 1.0,
    }
    rec = answer["recorded"]
    assert (
        rec["layer"] == "C"
        and rec["conversation"] == "c1"
        and rec["headline"].startswith("the client (C)")
    )
    first = rec["interventions"][0]
    assert (first["layer"], first["flips"], first["samples"], first["branches"]) == (
        "C",
        10,
        10,
        ["C-c1-t1-c-restore-result.1.jsonl"],
    )
    # a string of the file never reaches a terminal raw
    assert "\x1b" not in orjson.dumps(answer).decode()
    state = str(tmp_path / "why-run" / "why.json")
    assert why_report(Runs([str(tmp_path)]), state, 0, 20, 6000)["interventions"] == 2


def test_an_interrupted_why_has_no_verdict_and_other_files_are_refused(tmp_path: Path) -> None:
    _why_dir(tmp_path, finished=False)
    answer = why_report(Runs([str(tmp_path)]), "why-run", 0, 20, 6000)
    assert (
        answer["finished"] is False and answer["verdict"] is None and answer["interventions"] == 2
    )
    c, e = answer["recorded"]["interventions"]  # what finished, counted as the verdict counts
    assert (c["layer"], c["flips"], c["samples"], c["invalid"], c["low"], c["high"]) == (
        "C",
        2,
        2,
        0,
        0.1979,
        1.0,
    ), c
    assert c["branches"] == ["C-c1-t1-c-restore-result.1.jsonl", "C-c1-t1-c-restore-result.2.jsonl"]
    assert (e["layer"], e["flips"], e["samples"], e["invalid"]) == ("E", 0, 0, 1), e
    (tmp_path / "other").mkdir()
    with pytest.raises(QueryError, match=r"no why\.json here"):
        why_report(Runs([str(tmp_path)]), "other", 0, 20, 6000)
    inside = tmp_path / "in"
    inside.mkdir()
    with pytest.raises(QueryError, match="outside the directories"):
        why_report(Runs([str(inside)]), str(tmp_path / "why-run"), 0, 20, 6000)
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "why.json").write_text('{"looptap": "compare"}')
    with pytest.raises(QueryError, match="not the state of a looptap why"):
        why_report(Runs([str(tmp_path)]), "fake", 0, 20, 6000)
