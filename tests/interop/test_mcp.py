"""``looptap mcp`` driven by the official MCP Python client: every tool on the demo run, real corpus
recordings and a hostile cassette; answers bounded; paths outside the roots refused."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from looptap.cassettes.mcp import DEFAULT_BYTES, UNTRUSTED_NOTE, build_server
from looptap.cassettes.recording.pipeline import CassetteWriter
from tests.hostile.corpus import hostile_exchanges
from tests.interop.cassette_files import write_cassette
from tests.real_corpus import corpus_files
from tests.support import progress

#: A raw control or invisible format character in an answer: what must never reach a model raw.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _calls(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str]]:
    async def go() -> list[tuple[bool, str]]:
        out = []
        async with Client(server) as c:
            for name, args in calls:
                r = await c.call_tool(name, args)
                out.append((bool(r.is_error), "".join(getattr(p, "text", "") for p in r.content)))
        return out

    return asyncio.run(go())


def _ok(answers: list[tuple[bool, str]], limit: int = DEFAULT_BYTES) -> list[dict[str, Any]]:
    out = []
    for is_error, body in answers:
        assert not is_error, body
        assert not _UNSAFE.search(body), body[:300]
        data = orjson.loads(body)
        # compact size: what the answer holds (the SDK pretty-prints the text)
        size = len(orjson.dumps(data))
        assert size <= limit + 200, f"{size} bytes"
        out.append(data)
    return out


@pytest.fixture
def root(tmp_path: Path, demo_cassette: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    shutil.copy(demo_cassette, d / "demo.jsonl")
    return d


def test_every_tool_on_the_demo_run(root: Path) -> None:
    server = build_server([str(root)])
    listed, summary, fs, e_only = _ok(
        _calls(
            server,
            [
                ("list_runs", {}),
                ("run_summary", {"run": "demo.jsonl"}),
                ("findings", {"run": "demo.jsonl"}),
                ("findings", {"run": "demo.jsonl", "layer": "E"}),
            ],
        )
    )
    assert listed["total"] == 1
    (row,) = listed["recorded"]["runs"]
    assert (row["recorded_run"], row["round_trips"], row["conversations"], row["turns"]) == (
        "demo.jsonl",
        11,
        4,
        11,
    )
    assert row["findings"] == {"E": {"warning": 1}, "C": {"info": 3}}
    assert summary["note"] == UNTRUSTED_NOTE
    assert (
        summary["root_causes"][0]["layer"] == "E"
        and summary["root_causes"][0]["severity"] == "warning"
    )
    assert [c["conversation"] for c in summary["recorded"]["conversations"]] == [
        "c1",
        "c2",
        "c3",
        "c4",
    ]
    assert fs["total"] == 4 and fs["recorded"]["findings"][0]["severity"] == "warning"
    assert {f["layer"] for f in e_only["recorded"]["findings"]} == {"E"}
    bad = e_only["recorded"]["findings"][0]
    seq = bad["seq"]
    (turn, by_conv, whole_msg, grown, hits, same, tail, later) = _ok(
        _calls(
            server,
            [
                ("turn", {"run": "demo.jsonl", "seq": seq}),
                (
                    "turn",
                    {"run": "demo.jsonl", "conversation": bad["conversation"], "turn": bad["turn"]},
                ),
                ("turn", {"run": "demo.jsonl", "seq": seq, "message": 0, "chars": 0}),
                ("growth", {"run": "demo.jsonl", "conversation": "c1"}),
                ("search", {"query": "exchange rate"}),
                ("diff", {"run_a": "demo.jsonl", "run_b": "demo.jsonl"}),
                ("tail", {"run": "demo.jsonl"}),
                ("tail", {"run": "demo.jsonl", "after_seq": 9}),
            ],
        )
    )
    assert turn["seq"] == seq and any(f["code"] == bad["code"] for f in turn["findings"])
    assert turn["recorded"]["E_emitted"]["tool_calls"], "the E finding is on a tool call"
    assert by_conv["seq"] == seq
    assert whole_msg["recorded"]["role"] in ("user", "system")
    assert (
        grown["turns"] == len(grown["growth"]) >= 2
        and grown["growth"][-1]["cumulative_cost_usd"] > 0
    )
    assert hits["hits"] >= 1 and all(h["run"] == "demo.jsonl" for h in hits["recorded"]["hits"])
    assert same["same"] is True and same["divergences"] == 0
    assert [r["seq"] for r in tail["recorded"]["round_trips"]] == list(range(11)) and all(
        r["llm_turn"] for r in tail["recorded"]["round_trips"]
    )
    assert [r["seq"] for r in later["recorded"]["round_trips"]] == [10] and later["last_seq"] == 10


def test_a_diff_names_the_layer_and_turn(root: Path, tmp_path: Path) -> None:
    from looptap.cassettes.storage import read_records

    exs = read_records(root / "demo.jsonl").exchanges
    last = exs[-1]
    body = orjson.loads(b"".join(c for _, c in last.response_chunks))
    body["content"] = [{"type": "text", "text": "Something else entirely."}]
    last.response_chunks = [(0.0, orjson.dumps(body))]
    with CassetteWriter(root / "changed.jsonl") as w:
        for ex in exs:
            w.append(ex)
    (d,) = _ok(
        _calls(
            build_server([str(root)]), [("diff", {"run_a": "demo.jsonl", "run_b": "changed.jsonl"})]
        )
    )
    assert not d["same"] and any(
        x["layer"] == "E" and x["seq_b"] == last.seq for x in d["recorded"]["divergences"]
    )


@pytest.mark.parametrize(
    "name",
    ["/etc/passwd", "../outside.jsonl", "link.jsonl", "notes.txt", "sub", "nope.jsonl", "a\x00b"],
)
def test_paths_outside_the_roots_are_refused(root: Path, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside.jsonl"
    shutil.copy(root / "demo.jsonl", outside)
    (root / "link.jsonl").symlink_to(outside)  # a symlink leading out of the root
    (root / "notes.txt").write_text("x")
    (root / "sub").mkdir()
    server = build_server([str(root)])
    ((is_error, body),) = _calls(server, [("run_summary", {"run": name})])
    assert is_error and "demo" not in body.lower().replace("demo.jsonl", "")
    listed = _ok(_calls(server, [("list_runs", {})]))[0]
    assert [r["recorded_run"] for r in listed["recorded"]["runs"]] == ["demo.jsonl"], (
        "the symlink leading out is not listed"
    )


def test_corpus_runs_answer_within_bounds(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    sources = [p for p in corpus_files() if "agent" in p.name or "tool" in p.name][:12]
    for i, src in enumerate(sources):
        write_cassette(src, d / f"{i:02d}-{src.stem}.jsonl")
    server = build_server([str(d)])
    first = _ok(_calls(server, [("list_runs", {"limit": 100})]))[0]
    assert first["total"] == len(sources)
    names = []
    page = first
    while True:
        names += [r["recorded_run"] for r in page["recorded"]["runs"]]
        if page["next_offset"] is None:
            break
        page = _ok(_calls(server, [("list_runs", {"offset": page["next_offset"], "limit": 100})]))[
            0
        ]
    assert sorted(names) == sorted(p.name for p in d.iterdir())
    calls: list[tuple[str, dict[str, Any]]] = []
    for n in names:
        calls += [
            ("run_summary", {"run": n}),
            ("findings", {"run": n, "limit": 200}),
            ("tail", {"run": n, "limit": 200}),
        ]
    answers = _ok(_calls(server, calls))
    for summary, fs, tail in zip(answers[0::3], answers[1::3], answers[2::3], strict=True):
        assert fs["total"] == sum(
            n for layer in summary["findings"].values() for n in layer.values()
        )
        assert tail["round_trips_so_far"] == summary["round_trips"]
    turns = [
        ("turn", {"run": n, "seq": s["first_seq"]})
        for n, a in zip(names, answers[0::3], strict=True)
        for s in a["recorded"]["conversations"][:2]
    ]
    assert turns
    for t in _ok(_calls(server, turns)):
        assert t["recorded"]["A_said"]["status"] is not None


def test_hostile_recordings_reach_the_agent_as_safe_bounded_data(tmp_path: Path) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    with CassetteWriter(d / "hostile.jsonl") as w:
        for ex in hostile_exchanges():
            w.append(ex)
    server = build_server([str(d)])
    summary, fs = _ok(
        _calls(
            server,
            [
                ("run_summary", {"run": "hostile.jsonl"}),
                ("findings", {"run": "hostile.jsonl", "limit": 200}),
            ],
        )
    )
    seqs = sorted({f["seq"] for f in fs["recorded"]["findings"] if f["seq"] is not None})
    convs = [c["conversation"] for c in summary["recorded"]["conversations"]]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("turn", {"run": "hostile.jsonl", "seq": s, "chars": 5000}) for s in seqs
    ]
    calls += [("growth", {"run": "hostile.jsonl", "conversation": c}) for c in convs]
    calls += [
        ("tail", {"run": "hostile.jsonl", "limit": 200}),
        ("search", {"query": "e"}),
        ("turn", {"run": "hostile.jsonl", "seq": seqs[0], "message": 0, "chars": 0}),
    ]
    answers = _ok(_calls(server, calls), limit=DEFAULT_BYTES)
    assert len(answers) == len(calls)
    text = orjson.dumps(answers).decode()
    assert "\u241b" in text or "\\u001b" in text or "␛" in text, (
        "escapes in the recording are shown visibly"
    )


def test_tail_follows_a_recording_as_it_grows(tmp_path: Path) -> None:
    """Records appended between two calls are read (and only they); a half-written last record
    waits for its newline."""
    d = tmp_path / "runs"
    d.mkdir()
    exchanges = hostile_exchanges("")[:6]
    live = d / "live.jsonl"
    with CassetteWriter(live) as w:
        for ex in exchanges[:3]:
            w.append(ex)
    from looptap.cassettes.mcp.query import Runs, tail

    runs = Runs([d])
    first = tail(runs, "live.jsonl", -1, 20, DEFAULT_BYTES)
    assert [r["seq"] for r in first["recorded"]["round_trips"]] == [0, 1, 2] and not first[
        "still_being_written"
    ]
    with CassetteWriter(live) as w:  # the recorder goes on (appending)
        for ex in exchanges[3:5]:
            w.append(ex)
    full = live.read_bytes()
    with CassetteWriter(live) as w:
        w.append(exchanges[5])
    whole = live.read_bytes()
    live.write_bytes(whole[: len(full) + 20])  # the last record half written
    second = tail(runs, "live.jsonl", first["last_seq"], 20, DEFAULT_BYTES)
    assert [r["seq"] for r in second["recorded"]["round_trips"]] == [3, 4] and second[
        "still_being_written"
    ]
    live.write_bytes(whole)
    third = tail(runs, "live.jsonl", second["last_seq"], 20, DEFAULT_BYTES)
    assert [r["seq"] for r in third["recorded"]["round_trips"]] == [5] and third[
        "round_trips_so_far"
    ] == 6


def test_the_stdio_server_as_a_coding_agent_starts_it(root: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "looptap.cassettes.cli", "mcp", "--root", str(root)],
        env=dict(os.environ),
    )

    async def go() -> tuple[list[str], str]:
        async with Client(params) as c:
            tools = [t.name for t in (await c.list_tools()).tools]
            r = await c.call_tool("run_summary", {"run": "demo.jsonl"})
            return tools, "".join(getattr(p, "text", "") for p in r.content)

    tools, body = asyncio.run(go())
    assert tools == [
        "list_runs",
        "run_summary",
        "findings",
        "turn",
        "search",
        "growth",
        "diff",
        "tail",
        "fork_diff",
        "comparison",
        "why_report",
        "verify_report",
        "web_report",
    ]
    assert orjson.loads(body)["conversations"] == 4


def test_streamable_http_on_loopback(root: Path) -> None:
    import socket
    import subprocess

    from looptap.cassettes.net import free_port

    port = free_port()
    refused = progress.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "mcp",
            "--root",
            str(root),
            "--http",
            f"0.0.0.0:{port}",
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "loopback only" in refused.stderr
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "mcp",
            "--root",
            str(root),
            "--http",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                return False

        progress.until(
            listening, pids=[proc.pid], interval=0.2, what="looptap mcp --http to listen"
        )

        async def go() -> str:
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                r = await c.call_tool("run_summary", {"run": "demo.jsonl"})
                return "".join(getattr(p, "text", "") for p in r.content)

        assert orjson.loads(asyncio.run(go()))["conversations"] == 4
    finally:
        proc.terminate()
        progress.wait(proc)


def test_the_turn_shows_the_tools_http_under_each_call(tmp_path: Path) -> None:
    """Issue 84: a turn's tool calls carry the tools' HTTP calls that served them."""
    from tests.cassettes.test_tool_http import weather_run

    with CassetteWriter(tmp_path / "tools.jsonl") as w:
        for ex in weather_run():
            w.append(ex)
    (turn,) = _ok(_calls(build_server([tmp_path]), [("turn", {"run": "tools.jsonl", "seq": 0})]))
    calls = {c["id"]: c["tool_http"] for c in turn["recorded"]["E_emitted"]["tool_calls"]}
    assert [(h["seq"], h["method"], h["host"], h["status"]) for h in calls["call_P"]] == [
        (2, "GET", "wx.example.com", 200)
    ]
    assert calls["call_P"][0]["path"] == "/v1/now?city=Paris&units=metric"
    assert calls["call_P"][0]["got"] == '{"temp":15}' and calls["call_T"][0]["seq"] == 1
