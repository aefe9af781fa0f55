"""``looptap why DIR --confirm -- CMD`` (issue 68, item 5): the user's fixed agent run K times as a
fork of the recorded run at the verdict's turn, judged by the investigation's own outcome, through
the investigation's own upstream and confdir (kept in its why.json), with nothing sent before a
refusal. The agent is tests/why/why_agent.py on the real openai SDK; the upstream a scripted fake.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import AGENT, WHY, _why, c_call, c_route, record_run, why_env


@pytest.fixture(scope="module")
def c_why(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Path, ScriptedUpstream]]:
    """The C case (the client drops Lyon's result) recorded, and a why of it whose verdict is the
    client at c1 turn 1 (--layer C, 2 samples: both flip), with the fake it ran against (up for
    the module: a confirm reaches it by the why's own --upstream)."""
    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    tmp = tmp_path_factory.mktemp("why-confirm")
    run = record_run(tmp, c_route, "--drop-second", "--expect", "rain")
    with ScriptedUpstream(c_route) as fake:
        rc, out, err = _why(
            tmp,
            run,
            fake,
            "--layer",
            "C",
            "--samples",
            "2",
            "--result",
            f"{c_call(run)}=rain",
            "-o",
            str(tmp / "w"),
            agent=("--drop-second", "--expect", "rain"),
        )
        assert rc == 0 and out.startswith("verdict: the client (C)"), out + err[-3000:]
        assert f"to confirm a fix: looptap why {tmp / 'w'} --confirm -- FIXED_AGENT_COMMAND" in out
        yield tmp, tmp / "w", fake


def _confirm(
    tmp: Path, target: Path | str, *args: str, agent: tuple[str, ...]
) -> tuple[int, str, str]:
    proc = progress.run(
        [*WHY, str(target), "--confirm", *args, "--", sys.executable, str(AGENT), *agent],
        env=why_env(),
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    return proc.returncode, proc.stdout, proc.stderr


@needs_recorder
def test_the_fixed_agent_is_confirmed_and_the_unfixed_one_is_not(
    c_why: tuple[Path, Path, ScriptedUpstream],
) -> None:
    """No --upstream on the confirm: the why's own reaches the fake (a confirm that lost it would
    go to the real API and never reach the fake). The fixed agent (no --drop-second) succeeds in
    3/3 runs; the unfixed one in 0/3. Each sample is live from c1 turn 1 only (turn 0 served)."""
    tmp, w, fake = c_why
    before = len(fake.log)
    rc, out, err = _confirm(tmp, w, "--samples", "3", agent=("--expect", "rain"))
    assert rc == 0, out + err[-3000:]
    sent = fake.log[before:]
    assert len(sent) == 3 and all(len(x.request.tool_results()) == 2 for x in sent), sent
    lines = out.splitlines()
    assert lines[0] == (
        "confirm: the fixed agent succeeds in 3/3 runs (95% CI 0.31–1.00) from c1 turn 1 on (the "
        "recorded prefix served, live from there); the recorded run failed"
    ), out
    samples = [ln for ln in lines if ln.startswith("  sample ")]
    assert len(samples) == 3 and all(
        "before: failed (exited 1 against the recording) → after: succeeded (exited 0)" in ln
        for ln in samples
    ), out
    assert (w / "confirm" / "C-c1-t1-confirm.1.jsonl").is_file()
    kept = orjson.loads((w / "why.json").read_bytes())["confirms"]
    assert [(c["succeeded"], c["samples"]) for c in kept] == [(3, 3)]

    before = len(fake.log)
    rc, out, err = _confirm(
        tmp, w / "why.json", "--samples", "3", "--json", agent=("--drop-second", "--expect", "rain")
    )
    assert len(fake.log) == before + 3
    doc = orjson.loads(out)["confirm"]
    assert rc == 1 and (doc["succeeded"], doc["samples"], doc["directory"]) == (0, 3, "confirm-2")
    assert doc["high"] < 0.75 and all(r["after"] == "exited 1" for r in doc["runs"]), doc

    # an upstream that is down: no sample, never "the fix fails"
    rc, out, err = _confirm(
        tmp,
        w,
        "--samples",
        "1",
        "--upstream",
        "openai=http://127.0.0.1:9",
        agent=("--expect", "rain"),
    )
    assert rc == 1 and out.startswith("confirm: no run of the fixed agent could be judged"), out
    assert "no sample: a request sent live never reached the upstream" in out, out


@needs_recorder
def test_a_confirm_is_refused_before_anything_is_sent(
    c_why: tuple[Path, Path, ScriptedUpstream], tmp_path: Path
) -> None:
    tmp, w, fake = c_why
    before = len(fake.log)
    not_a_why = tmp_path / "nope"
    not_a_why.mkdir()
    undecided = tmp_path / "undecided"
    undecided.mkdir()
    doc = orjson.loads((w / "why.json").read_bytes())
    vague = {**doc["verdict"], "determined": False, "layer_determined": False}
    vague["headline"] = "not determined …"
    (undecided / "why.json").write_bytes(orjson.dumps({**doc, "verdict": vague}))
    older = tmp_path / "older"
    older.mkdir()
    (older / "why.json").write_bytes(orjson.dumps({k: v for k, v in doc.items() if k != "passed"}))
    for target, args, said in (
        (not_a_why, (), "is not the directory of an earlier looptap why"),
        (undecided, (), "the why's verdict names no cause ('not determined …')"),
        (older, (), "the why did not keep the --upstream/--confdir"),
        (w, ("--max-requests", "2"), "over --max-requests 2: nothing sent"),
    ):
        rc, _out, err = _confirm(tmp, target, "--samples", "3", *args, agent=("--expect", "rain"))
        assert rc == 2 and said in err and err.rstrip().endswith("nothing sent"), (said, err)
    assert len(fake.log) == before
    assert not (undecided / "confirm").exists() and not (older / "confirm").exists()


def test_an_upstream_with_credentials_is_not_kept() -> None:
    from looptap.cassettes.why import kept_flags

    flags = ["--upstream", "openai=http://127.0.0.1:9/v1", "--confdir", "/c"]
    assert kept_flags(flags) == flags
    assert kept_flags(["--upstream", "openai=https://u:sk-secret@gw.example/v1"]) is None
