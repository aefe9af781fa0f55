"""Edit marks come only from the fork's own process (issue 42, "Recorded data never becomes
protocol"): a client that sends ``x-looptap-edit`` itself through a plain ``looptap run`` gets no
marks in the cassette and no EDITED line in ``show``, and the upstream never sees the header; the
fork's replay server gets the per-run key in its environment (not its command line), and the
agent never gets it. No digest of an unredacted value is stored in a mark.

One test starts the real recorder (a plain ``looptap run``); the fork's own path (a key given,
marks accepted) is covered by tests/replay/test_fork_edits.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import sys
from pathlib import Path

import orjson

from tests.replay.conftest import tool_loop, write
from tests.replay.test_fork import _env, _upstreams
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

#: An agent that sends edit marks itself: once the header alone, once with a seal under a key it
#: guessed (the empty one), once with a seal of the right shape (64 hex digits).
FORGER = r"""
import json, os, sys, urllib.request
value, seal = sys.argv[1], sys.argv[2]
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
for extra in ({"x-looptap-edit": value}, {"x-looptap-edit": value, "x-looptap-edit-auth": seal}, {"x-looptap-edit": value, "x-looptap-edit-auth": "0" * 64}):
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
                                 headers={"content-type": "application/json", "authorization": "Bearer sk-test-fork", **extra})
    with urllib.request.urlopen(req) as resp:
        json.loads(resp.read())
"""  # noqa: E501


def _say(req: ScriptedRequest) -> Reply:
    return Reply.say("hello back")


@needs_recorder
def test_a_client_cannot_forge_edit_marks_through_a_plain_run(tmp_path: Path) -> None:
    # made by hand, as a client would (the shape older looptaps accepted, digests included)
    forged = [
        {
            "edit": "tool_result[call_1]",
            "selector": "turn=1",
            "path": ["messages", 0, "content"],
            "before": "FORGED ORIGINAL",
            "before_sha256": "0" * 64,
            "after_sha256": "1" * 64,
        }
    ]
    value = base64.urlsafe_b64encode(orjson.dumps(forged)).decode("ascii")
    seal = hmac.new(b"", value.encode(), hashlib.sha256).hexdigest()
    run = tmp_path / "run.jsonl"
    with ScriptedUpstream(_say) as fake:
        proc = progress.run(
            [
                *RECORDER,
                "run",
                "-o",
                str(run),
                "--confdir",
                str(tmp_path / "conf"),
                *_upstreams(fake.url),
                "--",
                sys.executable,
                "-c",
                FORGER,
                value,
                seal,
            ],
            env=_env(),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
    records = [orjson.loads(ln) for ln in run.read_bytes().splitlines()[1:]]
    assert len(records) == 3
    for rec in records:
        assert "edits" not in rec, rec.get("edits")
        assert any(
            "edit marks that this run's fork did not make" in n for n in rec.get("notes", [])
        ), rec.get("notes")
        assert not any(k.lower().startswith("x-looptap") for k, _ in rec["request"]["headers"])
    assert b"FORGED ORIGINAL" not in run.read_bytes()
    show = cli_run("show", str(run))  # (in this process: what it says)
    assert show.returncode == 0, show.stderr
    assert "EDITED" not in show.stdout and "client sent" not in show.stdout, show.stdout
    assert len(fake.log) == 3
    for x in fake.log:  # the upstream never sees a marker, sealed or not
        assert not any(k.lower().startswith("x-looptap") for k in x.request.headers), (
            x.request.headers
        )


def test_the_forks_replay_server_gets_the_key_in_its_environment_and_the_agent_never_does(
    tmp_path: Path,
) -> None:
    from looptap.cassettes.replay.forking.fork import ForkReplay, ForkSource
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.wire import KEY_ENV

    run = write(tmp_path / "run.jsonl", tool_loop())
    fork = ForkReplay(ForkSource(run, parse_cursor("turn=1")), edits=["tool_result[call_A1]=STORM"])
    other = ForkReplay(
        ForkSource(run, parse_cursor("turn=1")), edits=["tool_result[call_A1]=STORM"]
    )
    assert len(fork.edit_key) >= 40 and fork.edit_key != other.edit_key  # random, per run
    assert fork.edit_key not in repr(fork)

    async def go() -> tuple[dict[str, str], bytes, bytes]:
        agent_env = await fork.start(
            {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
        )
        assert fork.proc is not None
        try:
            environ = Path(f"/proc/{fork.proc.pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{fork.proc.pid}/cmdline").read_bytes()
            args = cmdline.split(b"\0")
            plan = Path(args[args.index(b"--fork-plan") + 1].decode()).read_bytes()
            assert b"STORM" in plan and fork.edit_key.encode() not in plan  # the key: no file
        finally:
            await fork.stop()
        return agent_env, environ, cmdline

    agent_env, environ, cmdline = asyncio.run(go())
    # the replay server's own environment
    assert f"{KEY_ENV}={fork.edit_key}".encode() in environ.split(b"\0")
    # never on its command line
    assert fork.edit_key.encode() not in cmdline and b"--fork-plan" in cmdline
    # the agent's: never
    assert KEY_ENV not in agent_env and fork.edit_key not in orjson.dumps(agent_env).decode()
    assert fork.edit_key not in os.environ.get(KEY_ENV, "")


def test_a_plan_with_edits_without_the_key_is_refused(tmp_path: Path) -> None:
    from looptap.cassettes.replay.forking.fork import ForkReplay, ForkSource
    from looptap.cassettes.replay.forking.placement import parse_cursor
    from looptap.cassettes.wire import KEY_ENV

    run = write(tmp_path / "run.jsonl", tool_loop())
    fork = ForkReplay(ForkSource(run, parse_cursor("turn=1")), edits=["tool_result[call_A1]=STORM"])
    fork.plan({"openai": "http://127.0.0.1:9"}).write(tmp_path / "plan.json")
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    proc = progress.run(
        [
            sys.executable,
            "-m",
            "looptap.cassettes.cli",
            "replay",
            str(run),
            "--fork-plan",
            str(tmp_path / "plan.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert (
        proc.returncode == 2
        and KEY_ENV in proc.stderr
        and len(proc.stderr.strip().splitlines()) == 1
    ), proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_mark_stores_no_digest_a_word_list_can_reverse() -> None:
    """Beside a redacted password, a plain sha256 of the client's value let a five-word list
    recover it: the stored mark holds no digest of the value, redacted or not."""
    from looptap.cassettes.recording import Redactor
    from looptap.cassettes.replay.live.edits import parse_edit
    from looptap.cassettes.replay.live.rewrite import apply_edits
    from looptap.cassettes.storage import exchange_to_record

    original = '{"password": "hunter2"}'
    body = orjson.dumps(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_A1", "content": original},
            ],
        }
    )
    _new, marks = apply_edits(
        "POST", "/v1/chat/completions", body, [parse_edit("tool_result[call_A1]=STORM")], "turn=1"
    )
    ex = tool_loop()[1]
    ex.edits = marks
    rec = orjson.dumps(exchange_to_record(Redactor().exchange(ex), 1)).decode()
    words = ["letmein", "hunter2", "password1", "qwerty", "dragon"]
    for w in words:
        for form in (
            orjson.dumps(f'{{"password": "{w}"}}', option=orjson.OPT_SORT_KEYS),
            f'{{"password": "{w}"}}'.encode(),
            w.encode(),
        ):
            assert hashlib.sha256(form).hexdigest() not in rec
    assert "sha256" not in rec and "hunter2" not in rec
    # the mark kept, its value redacted
    assert (
        '"edits":[{"edit":"tool_result[call_A1]"' in rec
        and '{\\"password\\": \\"[REDACTED]\\"}' in rec
    )
