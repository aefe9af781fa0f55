"""``looptap rules propose``: two recordings of the same scripted agent made on different days
(a date and a weekday in its system prompt, a run id, a session id in the request's metadata, a
fresh uuid in a tool result) get the rules that make them match — and nothing more: a real
change in a tool result stays a divergence, at its turn and path, with the rules applied."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.matching import Matcher, Miss, Recorded, Rules
from looptap.cassettes.matching._ruletable import from_table
from looptap.cassettes.replay.forking.proposal import propose_files
from looptap.cassettes.wire import Exchange
from tests.replay.conftest import REPO, chat_response, write

URL = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {
        "type": "function",
        "function": {"name": "list_files", "parameters": {"type": "object", "properties": {}}},
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    },
]
MONDAY = {
    "date": "2026-11-23",
    "day": "Monday",
    "run": "3fa9c1d2",
    "session": "4f9a1c2b",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
}
TUESDAY = {
    "date": "2026-11-24",
    "day": "Tuesday",
    "run": "b71e05aa",
    "session": "9c0d7e13",
    "uuid": "9b2f64c1-7d3e-4a5b-8c6d-0e1f2a3b4c5d",
}


def agent(day: dict[str, str], lines: int = 3) -> list[Exchange]:
    """What the scripted agent sends and gets on ``day``: list the files, read one, answer."""
    system = {
        "role": "system",
        "content": f"You are a file agent. Today is {day['date']} "
        f"({day['day']}). Trace run-{day['run']}.",
    }
    user = {"role": "user", "content": "How long is the newest file?"}
    call1 = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "list_files", "arguments": "{}"},
            }
        ],
    }
    result1 = {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": f"notes.txt\ntodo.txt\n(listing {day['uuid']})",
    }
    call2 = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"name":"notes.txt"}'},
            }
        ],
    }
    result2 = {"role": "tool", "tool_call_id": "call_2", "content": f"notes.txt has {lines} lines"}
    turns = [
        ([system, user], chat_response(call=("call_1", "list_files", "{}"))),
        (
            [system, user, call1, result1],
            chat_response(call=("call_2", "read_file", '{"name":"notes.txt"}')),
        ),
        ([system, user, call1, result1, call2, result2], chat_response(f"{lines} lines.")),
    ]
    meta = {"metadata": {"session": f"sess_{day['session']}"}}
    return [
        Exchange(
            "POST",
            URL,
            [("content-type", "application/json")],
            orjson.dumps({"model": "gpt-4o", "messages": msgs, "tools": TOOLS, **meta}),
            status=200,
            response_headers=[("content-type", "application/json")],
            response_chunks=[(0.01, resp)],
        )
        for msgs, resp in turns
    ]


def _replayed(
    recorded: list[Exchange], live: list[Exchange], rules: Rules
) -> list[Recorded | Miss]:
    m = Matcher(recorded, rules=rules)
    return [m.match(ex.method, "/v1/chat/completions", [], ex.request_body) for ex in live]


def test_the_proposed_rules_make_two_days_match_and_a_real_change_still_diverges(
    tmp_path: Path,
) -> None:
    a = write(tmp_path / "monday.jsonl", agent(MONDAY))
    b = write(tmp_path / "tuesday.jsonl", agent(TUESDAY))
    proposal, problems = propose_files(str(a), str(b))
    assert problems == []
    assert proposal.matches and proposal.remaining == [] and proposal.pairs == 3
    kinds = {(d.path, d.kind, d.tool, d.verdict) for d in proposal.differences}
    assert ("messages[3].content", "uuid", "list_files", "builtin") in kinds
    assert ("metadata.session", "id", None, "rule") in kinds
    # Minimal and narrow: one path ignored for this API only, two anchored substitutions.
    assert proposal.ignore == ["openai_chat:metadata.session"]
    assert proposal.substitute == [
        r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b=<weekday>",
        r"run\-[0-9a-f]{8}\b=run-<id>",
    ]

    # The printed block, read back as the project would, makes the replay match ...
    table = __import__("tomllib").loads(proposal.toml())["tool"]["looptap"]
    rules = from_table(table, "pasted")
    assert all(isinstance(r, Recorded) for r in _replayed(agent(MONDAY), agent(TUESDAY), rules))
    # ... and nothing more: without them Tuesday misses at turn 0, with them a changed tool result
    # misses at turn 2.
    assert isinstance(_replayed(agent(MONDAY), agent(TUESDAY), Rules())[0], Miss)
    got = _replayed(agent(MONDAY), agent(TUESDAY, lines=4), rules)
    assert [type(r).__name__ for r in got] == ["Recorded", "Recorded", "Miss"]
    miss = got[2]
    assert isinstance(miss, Miss) and [c.where for c in miss.changes] == ["messages[5].content"]


def test_a_real_change_is_listed_as_a_divergence_and_never_proposed(tmp_path: Path) -> None:
    a = write(tmp_path / "monday.jsonl", agent(MONDAY))
    b = write(tmp_path / "tuesday.jsonl", agent(TUESDAY, lines=4))
    proposal, _ = propose_files(str(a), str(b))
    real = [d for d in proposal.differences if d.verdict == "divergence"]
    assert [(d.turn, d.path, d.kind, d.tool) for d in real] == [
        (2, "messages[5].content", "number", "read_file")
    ]
    assert not proposal.matches
    assert proposal.remaining == [("c1", 2, "messages[5].content")]
    assert not any(
        "read_file" in r or "lines" in r for r in [*proposal.ignore, *proposal.substitute]
    )


@pytest.mark.parametrize(("change", "kind"), [
    ("Answer in English.", "free text"),  # an instruction
    ("You are a file agent named Bob.", "free text"),  # a name
])
def test_free_text_the_model_reads_is_never_proposed(
    tmp_path: Path, change: str, kind: str
) -> None:
    other = agent(MONDAY)
    for ex in other:
        body = orjson.loads(ex.request_body)
        body["messages"][0]["content"] += " " + change
        ex.request_body = orjson.dumps(body)
    proposal, _ = propose_files(
        str(write(tmp_path / "a.jsonl", agent(MONDAY))), str(write(tmp_path / "b.jsonl", other))
    )
    assert [(d.path, d.kind, d.verdict) for d in proposal.differences] == [
        ("messages[0].content", kind, "divergence")
    ]
    assert proposal.ignore == [] and proposal.substitute == []
    assert [t for _, t, _ in proposal.remaining] == [0, 1, 2]


def test_the_command_prints_the_block_and_writes_nothing(tmp_path: Path) -> None:
    a = write(tmp_path / "monday.jsonl", agent(MONDAY))
    b = write(tmp_path / "tuesday.jsonl", agent(TUESDAY, lines=4))
    before = sorted(p.name for p in tmp_path.iterdir())
    out = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "rules", "propose", str(a), str(b)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1, out.stderr
    assert "c1 turn 2 messages[5].content: number in the result of tool read_file" in out.stdout
    assert "a real divergence: not proposed" in out.stdout
    assert "still diverging:\n  c1 turn 2 at messages[5].content" in out.stdout
    assert "[tool.looptap]\nignore = ['openai_chat:metadata.session']" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    js = subprocess.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "rules",
            "propose",
            str(a),
            str(write(tmp_path / "t2.jsonl", agent(TUESDAY))),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert js.returncode == 0, js.stderr
    doc = orjson.loads(js.stdout)
    assert doc["matches"] is True and doc["proposed"]["ignore"] == ["openai_chat:metadata.session"]
