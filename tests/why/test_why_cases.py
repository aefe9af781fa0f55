"""Fast regression tests for the planted-cause cases of bench/why_cases.py that ``looptap why`` got
wrong (issue 68's must-show table, docs/why.md "Planted causes, measured"): one per case class,
recorded by the real recorder from the bench's own agent and scripted model, judged with the fewest
branches that show it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from bench.why_case_list import CASES_AGENT, recover
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import WHY, why_env

pytestmark = [needs_recorder]


def test_a_refusal_the_client_recovered_from_is_not_the_verdict(tmp_path: Path) -> None:
    """The client's first request offers a tool whose schema the API refuses (OpenAI's 400); it
    asks again without that tool (200: recovered, a changed retry), then its weather tool reads
    Lyon's weather wrong, off the wire: the answer lacks "rain", exit 1. The refusal did not decide
    the run: no cause is determined, and nothing says more samples cannot change a refusal (on
    9dbacc33: "C at c1 turn 0", determined, the refused request). The retry that took the tool
    out is threaded as another conversation (its tools differ: another agent's request), so
    no ``C.retry`` links it: the same messages sent again and answered say it recovered."""
    agent = [sys.executable, str(CASES_AGENT), "recover"]
    run = tmp_path / "run.jsonl"
    conf = ["--confdir", str(tmp_path / "conf")]
    with ScriptedUpstream(recover(True)) as fake:
        rec = progress.run(
            [*RECORDER, "run", "-o", str(run), *conf, "--upstream", f"openai={fake.url}", "--",
             *agent],
            env=why_env(), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert rec.returncode == 1 and [x.status for x in fake.log] == [400, 200, 200], rec.stderr
    with ScriptedUpstream(recover(False)) as fake:
        proc = progress.run(
            [*WHY, str(run), "--upstream", f"openai={fake.url}", *conf, "--layer", "C",
             "--samples", "1", "-o", str(tmp_path / "w"), "--json", "--", *agent],
            env=why_env(), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    v = orjson.loads(proc.stdout)["verdict"]
    assert not v["determined"] and not v["layer_determined"], v["headline"]
    assert "more samples cannot change it" not in v["headline"], v["headline"]
