"""Which runs the fleet files when, and which it counts as failing (issue 85, item 4; docs/fleet.md,
"What counts"), checked against ``looptap show --json`` of each run over 27 runs of 3 agents, one a
day over four weeks:

- a run is filed under when its first round trip started; an imported one too (``export --otel``
  of a run, then ``looptap import``: its header is made when it is imported, its round trips keep
  when they ran), so ``--since`` counts it in the week it ran;
- a failing run is one with an error finding, or whose last round trip is an API error nothing
  recovered (an agent that exited after a 529: the 529 alone is an ``A.overloaded`` warning),
  and not one that retried the 529 and got its answer."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange
from tests.fleet.test_fleet import looptap
from tests.support.analysed import cli_output

duckdb = pytest.importorskip("duckdb")
DAY = 86400.0
AGENTS = ("planner", "coder", "triage")
#: How each run ends: its answer, a 529 it gave up on, a 529 it retried past.
ENDINGS = ("answered", "gave_up", "recovered")
#: (27, prime to the 7 of the spread below: each run on a day of its own, 0.5 to 26.5 days ago,
#: every agent in the last week; 54 before session 56 put two on each day)
RUNS = 27
_JSON = [("content-type", "application/json")]


def _cli(*argv: str) -> bytes:
    """A looptap command run in this process (a process each would take most of the test's
    time); its stdout."""
    rc, out, err = cli_output(*argv)
    assert rc == 0, err
    return out


def _exchange(seq: int, started: float, messages: list[dict[str, Any]], status: int) -> Exchange:
    body = {"model": "gpt-4o-mini", "messages": messages}
    if status == 200:
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{seq}", "object": "chat.completion", "created": int(started),
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"Answer {seq}."}}],
            "usage": {"prompt_tokens": 20 + seq, "completion_tokens": 5, "total_tokens": 25 + seq},
        }  # fmt: skip
    else:
        answer = {"error": {"type": "overloaded_error", "message": "Overloaded"}}
    return Exchange(
        method="POST", url="https://api.openai.com/v1/chat/completions", request_headers=_JSON,
        request_body=orjson.dumps(body), status=status,
        reason="OK" if status == 200 else "Overloaded",
        response_headers=_JSON, response_chunks=[(None, orjson.dumps(answer))], started=started,
        ttfb=0.2, duration=0.3,
    )  # fmt: skip


def _write(path: Path, agent: str, start: float, ending: str) -> None:
    """A run of a conversation of three turns, ending as ``ending`` says."""
    statuses = {"answered": [200, 200, 200], "gave_up": [200, 200, 529],
                "recovered": [200, 529, 200]}[ending]  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task of {agent}?"}]
    with CassetteWriter(path, meta={"agent": agent}) as w:
        for seq, status in enumerate(statuses):
            w.append(_exchange(seq, start + 2 * seq, list(messages), status))
            if status == 200:
                messages += [
                    {"role": "assistant", "content": f"Answer {seq}."},
                    {"role": "user", "content": f"And step {seq + 1}?"},
                ]


def _show(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in _cli("show", "--json", str(path)).splitlines()]


def _failing(objs: list[dict[str, Any]]) -> bool:
    """An error finding, or a last round trip that is an API error (``show --json``'s words)."""
    last = objs[-1]
    errored = (last["status"] or 0) >= 400 or last["error"] is not None
    return errored or any(f["severity"] == "error" for v in objs for f in v["findings"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("filing")
    now = time.time()
    made = root / "made"
    made.mkdir()
    expected: dict[str, Any] = {}
    for i in range(RUNS):
        agent, ending = AGENTS[i % 3], ENDINGS[(i // 3) % 3]
        start = now - (0.5 + (i * 7) % 27) * DAY  # spread over four weeks
        d = root / "runs" / agent
        d.mkdir(parents=True, exist_ok=True)
        if i % 2:  # recorded
            path = d / f"r{i}.jsonl"
            _write(path, agent, start, ending)
        else:  # its trace exported, then imported: the header is made now
            src = made / f"r{i}.jsonl"
            _write(src, agent, start, ending)
            otel = made / f"r{i}.otel.json"
            _cli("export", str(src), "--otel", str(otel))
            path = d / f"i{i}.jsonl"
            _cli("import", str(otel), "-o", str(path), "-q")
        objs = _show(path)
        first = datetime.fromisoformat(objs[0]["started"].replace("Z", "+00:00"))
        expected[str(path.resolve())] = {
            "agent": agent,
            "recorded": first.replace(tzinfo=None),
            "failing": _failing(objs),
            "turns": sum(1 for v in objs if v["conversation"]),
            "imported": not i % 2,
            "ending": ending,
        }
    db = root / "fleet.duckdb"
    r = looptap("index", str(root / "runs"), "-o", str(db))
    assert r.returncode == 0, r.stderr
    return db, expected


def _ask(db: Path, *question: str) -> list[dict[str, Any]]:
    r = looptap("fleet", *question, "--fleet", str(db), "--json")
    assert r.returncode == 0, r.stderr
    return [orjson.loads(line) for line in r.stdout.splitlines()]


def test_runs_are_filed_by_their_first_round_trip_and_failing_as_show_json_says(
    fleet: tuple[Path, dict[str, Any]],
) -> None:
    db, expected = fleet
    assert len(expected) == RUNS and len({e["agent"] for e in expected.values()}) == 3
    # what the runs are: an imported run of each ending, each agent named by its trace
    assert {(e["imported"], e["ending"]) for e in expected.values()} == {
        (imp, end) for imp in (True, False) for end in ENDINGS
    }
    con = duckdb.connect(str(db), read_only=True)
    rows = {
        run: (agent, recorded, ended_on, turns)
        for run, agent, recorded, ended_on, turns in con.execute(
            "SELECT r.run, r.agent, r.recorded, r.ended_on,"
            " (SELECT count(*) FROM turns t WHERE t.run = r.run) FROM runs r"
        ).fetchall()
    }
    con.close()
    assert set(rows) == set(expected)
    differ: Counter[str] = Counter()
    for run, e in expected.items():
        agent, recorded, ended_on, turns = rows[run]
        differ["agent"] += agent != e["agent"]
        differ["recorded"] += abs((recorded - e["recorded"]).total_seconds()) > 0.001
        differ["turns"] += turns != e["turns"]
        differ["ended_on"] += (ended_on is not None) != (e["ending"] == "gave_up")
    # every run that gave up on its 529 is failing; none that answered or recovered is
    assert {e["ending"] for e in expected.values() if e["failing"]} == {"gave_up"}
    # the weeks: runs and failing runs of each, and --since over them
    weekly = {r["week"]: r for r in _ask(db, "weekly")}
    by_week: dict[str, list[dict[str, Any]]] = {}
    for e in expected.values():
        monday = (e["recorded"] - timedelta(days=e["recorded"].weekday())).date().isoformat()
        by_week.setdefault(monday, []).append(e)
    for week, runs in by_week.items():
        got = weekly.get(week, {"runs": 0, "failing_runs": 0})
        differ["weekly runs"] += got["runs"] != len(runs)
        differ["weekly failing_runs"] += got["failing_runs"] != sum(e["failing"] for e in runs)
    since = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=7)
    cost = {r["agent"]: r for r in _ask(db, "cost", "--by", "agent", "--since", "7d")}
    for agent in AGENTS:
        mine = [e for e in expected.values() if e["agent"] == agent and e["recorded"] >= since]
        assert mine, agent
        got = cost.get(agent, {"runs": 0, "turns": 0})
        differ["runs since 7d"] += got["runs"] != len(mine)
        differ["turns since 7d"] += got["turns"] != sum(e["turns"] for e in mine)
    assert sum(differ.values()) == 0, dict(differ)
