"""What-if edits of a fork (issue 31): a tool result edited at turn 1 reaches every later request
the upstream receives, the marker that carries the client's original to the recorder never does,
and the branch keeps the client's own request (the edit marks on its raw side) and shows the edit
in ``show`` (text and ``--json``).

Two agents of fork_agent.py (openai Chat, not streamed; anthropic Messages, streamed), recorded
once per module against the origin fake and forked once at turn 1 onto a second fake. Requests are
counted at the fakes; waits are by progress (tests.support.progress), never timed.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.replay.test_fork import AGENT, _env, _upstreams, new_model_route, origin_route
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream

AGENTS = ("openai", "anthropic-stream")
EDITED = "STORM WARNING: no flights from Paris"


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The origin (two agents, three turns each) and its fork at turn 1 with each agent's first
    tool result edited; the fakes' logs and the branch."""
    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    from looptap.cassettes.reading import open_run

    tmp = tmp_path_factory.mktemp("edits")
    confdir, run, branch = tmp / "conf", tmp / "run.jsonl", tmp / "branch.jsonl"
    with ScriptedUpstream(origin_route, validate=True) as fake1:
        proc = progress.run(
            [
                *RECORDER,
                "run",
                "-o",
                str(run),
                "--confdir",
                str(confdir),
                *_upstreams(fake1.url),
                "--",
                sys.executable,
                str(AGENT),
                *AGENTS,
            ],
            env=_env(),
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        recorded = len(fake1.log)
        origin = open_run(run, whole=True)
        # the first tool call of each conversation: the result the fork edits
        calls = [
            tc.id
            for rt in origin.roundtrips
            if rt.response is not None
            for tc in rt.response.tool_calls
            if tc.arguments == {"city": "Paris"}
        ]
        assert len(calls) == 2 and all(calls), calls
        (tmp / "storm.txt").write_text(EDITED)
        edits = [a for c in calls for a in ("--edit", f"turn=1:tool_result[{c}]=@storm.txt")]
        fake2 = ScriptedUpstream(new_model_route, validate=True)
        # the new model's call ids are not the recording's (a fresh fake numbers from 0 again)
        fake2._ids = itertools.count(900)
        with fake2:
            proc = _fork(run, edits, branch, confdir, fake2.url)
        yield {
            "proc": proc,
            "run": run,
            "branch": branch,
            "fake1": fake1,
            "recorded": recorded,
            "fake2": fake2,
            "calls": calls,
            "origin": origin,
        }


def _fork(run: Path, edits: list[str], branch: Path, confdir: Path, url: str) -> Any:
    """``looptap run --from RUN@turn=1`` with ``edits`` (``@file`` values beside ``branch``), both
    agents, onto the fake at ``url``."""
    return progress.run(
        [
            *RECORDER,
            "run",
            "--from",
            f"{run}@turn=1",
            *edits,
            "-o",
            str(branch),
            "--confdir",
            str(confdir),
            *_upstreams(url),
            "--",
            sys.executable,
            str(AGENT),
            *AGENTS,
        ],
        env=_env(),
        capture_output=True,
        text=True,
        cwd=branch.parent,
    )


def _client_sent(ex: Any) -> Any:
    from looptap.cassettes.wire import client_body

    return client_body(ex.request_json(), ex.edits)


@needs_recorder
@pytest.mark.slow(
    reason=(
        "the module's fork through the recorder (about 8 s of CPU): an edit reaching every "
        "live request runs in the process in test_fork.py's "
        "test_an_edit_reaches_every_request_sent_live_and_not_the_clients_log, and the marks "
        "in this module's in-process tests"
    )
)
def test_every_request_the_upstream_receives_carries_the_edit_and_no_marker(
    forked: dict[str, Any],
) -> None:
    proc = forked["proc"]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert len(forked["fake1"].log) == forked["recorded"]  # the prefix reached no upstream
    live = forked["fake2"].log
    assert len(live) == 4  # two conversations, turns 1 and 2
    for x in live:
        assert x.request.tool_results()[0] == EDITED, x.line()
        # the marker stayed in the recorder
        assert not any(k.startswith("x-looptap") for k in x.request.headers), x.request.headers
        assert b"sunny, 21 C in Paris" not in orjson.dumps(x.request.body)
    # turn 2: the Nice result, untouched after the edited one
    assert sum(len(x.request.tool_results()) == 2 for x in live) == 2
    assert all(
        x.request.tool_results()[1] == "sunny, 21 C in Nice"
        for x in live
        if len(x.request.tool_results()) == 2
    )


@needs_recorder
@pytest.mark.slow(
    reason=(
        "reads the module's fork through the recorder: the client's body given back from the "
        "marks is shown in the process by "
        "test_marks_round_trip_through_the_header_and_give_the_client_body_back"
    )
)
def test_the_branch_keeps_the_clients_own_requests_beside_what_the_upstream_received(
    forked: dict[str, Any],
) -> None:
    from looptap.cassettes.reading import open_run, origin_of

    branch = open_run(forked["branch"], whole=True)
    assert len(branch.exchanges) == 4
    origin_by_label = {}
    for ex in forked["origin"].exchanges:
        body = ex.request_json()
        if b"sunny, 21 C in Paris" in orjson.dumps(body) and b"Lyon" not in orjson.dumps(body):
            origin_by_label[_label(body)] = body  # the origin's turn 1: what the client sends again
    for ex in branch.exchanges:
        sent = ex.request_json()
        assert ex.edits, ex.notes
        assert {m["edit"] for m in ex.edits} <= {
            f"tool_result[{c}]" for c in forked["calls"]
        } and all(m["selector"] == "turn=1" for m in ex.edits)
        assert EDITED.encode() in orjson.dumps(sent)  # what was sent: the edit
        assert all(k.lower() != "x-looptap-edit" for k, _ in ex.request_headers)
        mine = _client_sent(ex)  # the client's own request, rebuilt from the raw side
        assert (
            mine is not None
            and EDITED.encode() not in orjson.dumps(mine)
            and b"sunny, 21 C in Paris" in orjson.dumps(mine)
        )
        # turn 1: the client sent exactly what the origin recorded
        if b"Nice" not in orjson.dumps(sent):
            assert mine == origin_by_label[_label(sent)]
    o = origin_of(forked["branch"])
    assert o is not None and sorted(o["edits"]) == sorted(
        f"tool_result[{c}]" for c in forked["calls"]
    )
    raw = forked["branch"].read_bytes()
    # in the record, not as a header
    assert b'"edits":[{"edit":"tool_result[' in raw and b"x-looptap-edit" not in raw


@needs_recorder
@pytest.mark.slow(
    reason=(
        "reads the module's fork through the recorder: the marks' storing and reading run in "
        "the process in test_the_marks_are_redacted_and_stored_and_a_malformed_one_is_dropped"
    )
)
def test_show_marks_the_edited_turns_and_items(forked: dict[str, Any]) -> None:
    text = cli_run("show", str(forked["branch"]))
    assert text.returncode == 0, text.stderr
    heads = [ln for ln in text.stdout.splitlines() if ln.startswith("#")]
    assert len(heads) == 4 and all("EDITED" in ln for ln in heads), text.stdout
    edited = [ln for ln in text.stdout.splitlines() if ln.strip().startswith("edited:")]
    assert len(edited) == 4 and all(
        "turn=1" in ln and "client sent" in ln and "sunny, 21 C in Paris" in ln for ln in edited
    ), text.stdout
    js = cli_run("show", "--json", str(forked["branch"]))
    views = [orjson.loads(ln) for ln in js.stdout.splitlines() if '"looptap.roundtrip/1"' in ln]
    assert len(views) == 4
    for v in views:
        (m,) = v["edits"]
        assert (
            m["edit"].startswith("tool_result[")
            and m["item"].startswith("messages[")
            and m["before"] == "sunny, 21 C in Paris"
        )
        assert not any("sha256" in k for k in m), m  # no digest of a value is kept
    plain = cli_run("show", "--json", str(forked["run"]))
    # a plain run: no key
    assert all(
        "edits" not in orjson.loads(ln)
        for ln in plain.stdout.splitlines()
        if '"looptap.roundtrip/1"' in ln
    )


def _label(body: Any) -> str:
    text = orjson.dumps(body).decode()
    return next(a for a in sorted(AGENTS, key=len, reverse=True) if f"[{a}]" in text)


@needs_recorder
@pytest.mark.slow(
    reason=(
        "reads the module's fork through the recorder: the marks' storing and reading run in "
        "the process in test_the_marks_are_redacted_and_stored_and_a_malformed_one_is_dropped"
    )
)
def test_diff_marks_the_edited_requests(forked: dict[str, Any]) -> None:
    diff = cli_run("diff", str(forked["run"]), str(forked["branch"]))
    assert diff.returncode == 1, diff.stderr
    marked = [
        ln
        for ln in diff.stdout.splitlines()
        if "fork: edited tool_result[" in ln and "(asked with --edit)" in ln
    ]
    # the fork's edit, not the client's C
    assert len(marked) >= 4 and all(" at messages[" in ln for ln in marked), diff.stdout
    js = cli_run("diff", "--json", str(forked["run"]), str(forked["branch"]))
    divs = orjson.loads(js.stdout)["divergences"]
    every = divs + [f for d in divs for f in d.get("folded", [])]
    assert sum(bool(d["edited_b"]) for d in every) == 4 and all(
        d["layer"] == "fork" and d["message"].startswith("edited ") for d in every if d["edited_b"]
    )
    # each agent's turn 1; its turn 2's repeat is folded under it (issue 42)
    assert sum(bool(d["edited_b"]) for d in divs) == 2


# -- the marks themselves: read as untrusted, the client's request given back --------------------


def test_marks_round_trip_through_the_header_and_give_the_client_body_back() -> None:
    from looptap.cassettes.replay.live.edits import edited_headers, parse_edit
    from looptap.cassettes.replay.live.rewrite import apply_edits
    from looptap.cassettes.wire import (
        EDIT_AUTH_HEADER,
        EDIT_HEADER,
        authentic,
        client_body,
        from_header,
        new_key,
        seal,
        to_header,
    )

    body = orjson.dumps(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ],
        }
    )
    new, marks = apply_edits(
        "POST", "/v1/chat/completions", body, [parse_edit("tool_result[call_1]=STORM")], "turn=1"
    )
    assert (
        orjson.loads(new)["messages"][1]["content"] == "STORM"
        and marks[0]["path"] == ["messages", 1, "content"]
        and marks[0]["before"] == "sunny"
    )
    key = new_key()
    hdrs = edited_headers(
        [("X-Looptap-Edit", "forged"), ("X-Looptap-Edit-Auth", "forged"), ("a", "b")], marks, key
    )
    # a marker the client sent never passes
    assert [k for k, _ in hdrs] == ["a", EDIT_HEADER, EDIT_AUTH_HEADER]
    # no key: no marker at all
    assert edited_headers([("a", "b"), ("x-looptap-edit", "forged")], marks, None) == [("a", "b")]
    value, auth = hdrs[1][1], hdrs[2][1]
    assert (
        authentic(value, auth, key)
        and not authentic(value, auth, new_key())
        and not authentic(value, auth, None)
    )
    assert not authentic(value, seal(value + "x", key), key) and not authentic(value, "", key)
    back = from_header(value)
    assert back == marks and client_body(orjson.loads(new), back) == orjson.loads(body)
    assert orjson.loads(new)["messages"][1]["content"] == "STORM"  # given back on a copy
    for bad in (
        "",
        "!!!",
        "e30",
        to_header([{**marks[0], "edit": "rm -rf"}]),
        to_header([{**marks[0], "path": []}]),
        to_header([{k: v for k, v in marks[0].items() if k != "before"}]),
    ):
        assert from_header(bad) is None, bad
    old = from_header(
        to_header([{**marks[0], "before_sha256": "0" * 64, "after_sha256": "1" * 64}])
    )
    assert old == marks  # an older file's digests are read past and dropped
    assert client_body({"messages": []}, marks) is None  # a path not in the body


def test_a_mark_too_large_for_the_header_travels_without_its_value() -> None:
    from looptap.cassettes.wire import MAX_HEADER, client_body, from_header, mark, to_header

    m = mark("system", "turn=0", ["system"], "x" * MAX_HEADER)
    (back,) = from_header(to_header([m])) or [None]
    assert (
        back is not None
        and back["before_omitted"]
        and "before" not in back
        and not any("sha256" in k for k in back)
    )
    assert client_body({"system": "short"}, [back]) is None


def test_the_marks_are_redacted_and_stored_and_a_malformed_one_is_dropped(tmp_path: Path) -> None:
    from looptap.cassettes.recording import Redactor
    from looptap.cassettes.storage import exchange_to_record, record_to_exchange
    from looptap.cassettes.wire import mark
    from tests.replay.conftest import tool_loop

    ex = tool_loop()[1]
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 4
    ex.edits = [mark("tool_result[call_A1]", "turn=1", ["messages", 3, "content"], f"key {secret}")]
    red = Redactor().exchange(ex)
    assert (
        red.edits is not None
        and secret not in orjson.dumps(red.edits).decode()
        and ex.edits[0]["before"] == f"key {secret}"
    )
    rec = exchange_to_record(red, 1)
    assert record_to_exchange(orjson.loads(orjson.dumps(rec))).edits == red.edits
    rec["edits"] = [{"edit": "system", "path": "nope"}]
    back = record_to_exchange(rec)
    assert back.edits is None and any("edit marks are malformed" in n for n in back.notes)


def test_replaying_a_branch_serves_the_agent_that_sends_its_own_tool_result(tmp_path: Path) -> None:
    """The agent replayed against a branch sends what it always sent (its tool's own result), not
    the edit: the branch's marks give that request back, so replay matches it."""
    from openai import OpenAI

    from looptap.cassettes.reading import open_run
    from looptap.cassettes.replay.serving.server import ReplayServer
    from looptap.cassettes.wire import mark
    from tests.replay.conftest import (
        CALL,
        RESULT,
        SYSTEM,
        USER,
        chat_exchange,
        chat_response,
        write,
    )

    storm = {**RESULT, "content": "STORM"}
    ex = chat_exchange([SYSTEM, USER, CALL, storm], chat_response("Stay home: a storm."))
    ex.edits = [
        mark("tool_result[call_A1]", "turn=1", ["messages", 3, "content"], RESULT["content"])
    ]
    branch = write(tmp_path / "branch.jsonl", [ex])
    with ReplayServer(list(open_run(branch, whole=True).exchanges)) as srv:
        client = OpenAI(base_url=srv.url + "/v1", api_key="sk-x", max_retries=0)
        r = client.chat.completions.create(
            model="gpt-4o",
            messages=[SYSTEM, USER, CALL, RESULT],
            tools=orjson.loads(ex.request_body)["tools"],
        )  # type: ignore[list-item]
    assert r.choices[0].message.content == "Stay home: a storm." and not srv.misses


@needs_recorder
@pytest.mark.slow(
    reason=(
        "a second fork through the recorder (about 5 s of CPU): an edit's marks run in the "
        "process in this module and test_edit_values.py"
    )
)
def test_a_tool_schema_edit_is_marked_in_the_branch(forked: dict[str, Any], tmp_path: Path) -> None:
    """The recorder keeps the marks of every target ``--edit`` takes: a ``tool_schema[NAME]``
    edit's were refused as unreadable ('edits: the request's edit marks could not be read;
    dropped'), so the branch could not give the client's own schema back."""
    from looptap.cassettes.reading import open_run

    schema = {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}}}
    (tmp_path / "schema.json").write_text(orjson.dumps(schema).decode())
    branch = tmp_path / "schema-branch.jsonl"
    fake = ScriptedUpstream(new_model_route, validate=True)
    fake._ids = itertools.count(900)
    with fake:
        proc = _fork(
            forked["run"],
            ["--edit", "turn=1:tool_schema[get_weather]=@schema.json"],
            branch,
            tmp_path / "conf",
            fake.url,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    exchanges = open_run(branch, whole=True).exchanges
    assert exchanges and all(
        orjson.dumps(schema) in orjson.dumps(ex.request_json()) for ex in exchanges
    )
    for ex in exchanges:
        assert not [n for n in ex.notes if n.startswith("edits:")], ex.notes
        assert {m["edit"] for m in ex.edits} == {"tool_schema[get_weather]"}, ex.edits
        mine = _client_sent(ex)  # the client's own schema back
        assert mine is not None and orjson.dumps(schema) not in orjson.dumps(mine)
