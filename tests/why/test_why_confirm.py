"""``looptap why DIR --confirm -- CMD`` (issue 68, item 5): the user's fixed agent run K times as a
fork of the recorded run at the verdict's turn, judged by the investigation's own outcome, through
the investigation's own upstream and confdir (kept in its why.json), with nothing sent before a
refusal. The agent is tests/why/why_agent.py, its Chat requests sent by urllib (``--http``, as the
session's investigation's, tests/why/c_case.py); the upstream a scripted fake.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support import progress
from tests.support.recorder import needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.c_case import CInvestigation
from tests.why.test_why import AGENT, HTTP, WHY, c_route, shown, why_env, why_here


@pytest.fixture(scope="module")
def c_why(
    c_investigation: CInvestigation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path, ScriptedUpstream]]:
    """The C case (the client drops Lyon's result) recorded, and a why of it whose verdict is the
    client at c1 turn 1 (--layer C, 3 samples: all flip; alone, 2 of 2 would not show it,
    docs/why.md "Reading the verdict"), with the fake it ran against (up for the session: a
    confirm reaches it by the why's own --upstream): the session's (tests/why/c_case.py), the
    why's directory a copy of the module's own (its confirms are written there)."""
    inv = c_investigation
    rc, out, err = inv.rc, inv.out, inv.err
    assert rc == 0 and out.startswith("verdict: the client (C)"), out + err[-3000:]
    assert f"to confirm a fix: looptap why {inv.why} --confirm -- FIXED_AGENT_COMMAND" in out
    yield inv.tmp, inv.copy(tmp_path_factory.mktemp("why-confirm") / "w"), inv.fake


def _confirm(
    tmp: Path, target: Path | str, *args: str, agent: tuple[str, ...], here: bool = False
) -> tuple[int, str, str]:
    """``looptap why TARGET --confirm ARGS -- why_agent.py AGENT``; ``here``: its ``main`` in this
    process, for a refusal (it starts no run: what it says, not its wiring)."""
    argv = [str(target), "--confirm", *args, "--", sys.executable, str(AGENT), *agent, HTTP]
    proc = (
        why_here(tmp, *argv)
        if here
        else progress.run([*WHY, *argv], env=why_env(), capture_output=True, text=True, cwd=tmp)
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.slow(
    reason=shown(
        "test_why_upstreams.py::test_a_confirm_keeps_the_upstream_the_why_was_given[neither] (a "
        "fixed agent confirmed) and "
        "test_why_untested.py::test_a_confirm_says_its_at_most_first_and_never_passes_it"
    )
)
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
        "recorded prefix served while its requests match it, live from there); the recorded run "
        "failed"
    ), out
    assert lines[3] == (
        "sent live: 3 requests (the budget expected 3; at most 6 if every turn the fork may "
        f"reach went live), through --upstream openai={fake.url} --confdir {tmp / 'conf'}"
    ), out
    samples = [ln for ln in lines if ln.startswith("  sample ")]
    assert len(samples) == 3 and all(
        "before: failed (exited 1 against the recording) → after: succeeded (exited 0)" in ln
        for ln in samples
    ), out
    assert (w / "confirm" / "C-c1-t1-confirm.1.jsonl").is_file()
    kept = orjson.loads((w / "why.json").read_bytes())["confirms"]
    assert [(c["succeeded"], c["samples"]) for c in kept] == [(3, 3)]
    assert (kept[0]["expected_requests"], kept[0]["sent"]) == (3, 3), kept[0]

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
    # given last, kept for the next confirm (put back here for the tests after this one)
    doc = orjson.loads((w / "why.json").read_bytes())
    # (the --confdir not given again: the why's kept, issue 95)
    assert doc["passed"] == [
        "--upstream", "openai=http://127.0.0.1:9", "--confdir", str(tmp / "conf")
    ], doc["passed"]  # fmt: skip
    doc["passed"] = ["--upstream", f"openai={fake.url}", "--confdir", str(tmp / "conf")]
    (w / "why.json").write_bytes(orjson.dumps(doc))


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
    # the first refusal by the command's process, the others by its main in this one (session 56)
    for n, (target, args, said) in enumerate(
        (
            (not_a_why, (), "is not the directory of an earlier looptap why"),
            (undecided, (), "the why's verdict names no cause ('not determined …')"),
            (older, (), "the why did not keep the --upstream/--confdir"),
            (w, ("--max-requests", "2"), "over --max-requests 2: nothing sent"),
        )
    ):
        rc, _out, err = _confirm(
            tmp, target, "--samples", "3", *args, agent=("--expect", "rain"), here=n > 0
        )
        assert rc == 2 and said in err and err.rstrip().endswith("nothing sent"), (said, err)
    assert len(fake.log) == before
    assert not (undecided / "confirm").exists() and not (older / "confirm").exists()


def test_an_upstream_with_credentials_is_not_kept() -> None:
    from looptap.cassettes.why import kept_flags

    flags = ["--upstream", "openai=http://127.0.0.1:9/v1", "--confdir", "/c"]
    assert kept_flags(flags) == flags
    assert kept_flags(["--upstream", "openai=https://u:sk-secret@gw.example/v1"]) is None


@pytest.mark.slow(
    reason=shown(
        "test_why_upstreams.py::test_a_confirm_keeps_the_upstream_the_why_was_given[neither] (a "
        "confirm judged end to end)"
    )
)
@needs_recorder
def test_a_fixed_agent_that_differs_before_the_verdicts_turn_is_judged(
    c_why: tuple[Path, Path, ScriptedUpstream],
) -> None:
    """Issue 82: a fix may show before the verdict's turn (an agent that no longer trims from an
    earlier turn on; here the fixed agent asks its question in other words, at turn 0, before
    the verdict's c1 turn 1). The recorded prefix is served while the fixed agent's requests
    match it, and from the first that differs it goes live: each run is judged on the outcome.
    On fec4f2c2 every run was no sample ("the fork failed: the client diverged before the
    cursor"), exit 1, "no run of the fixed agent could be judged"."""
    tmp, w, fake = c_why
    before = len(fake.log)
    rc, out, err = _confirm(
        tmp, w, "--samples", "2", "--json",
        agent=("--expect", "rain", "--ask", "Weather in Paris and Lyon, please?"),
    )  # fmt: skip
    doc = orjson.loads(out)["confirm"]
    assert rc == 0 and (doc["succeeded"], doc["samples"], doc["invalid"]) == (2, 2, 0), err[-3000:]
    sent = fake.log[before:]
    # live from turn 0 on: both turns of each run sent, the question as the fixed agent asks it
    assert len(sent) == 4 and doc["sent"] == 4, sent
    assert all("please?" in x.request.user_texts()[0] for x in sent), sent
    assert doc["cursor"] == "conversation=c1:turn=1:diverge", doc
    # the estimate: where the fixed agent first differs is known once the first run went live
    # (it sent 2, the budget expected 1 from the verdict's turn): each run is expected to send
    # its 2, and sends 2 (on the branch as merged in f2dce8f8: 2 expected in all for 4 sent; on
    # d22946dd 3, the budget's 1 kept for the first run)
    assert (doc["budget_expected"], doc["expected_requests"]) == (2, 4), doc
    assert doc["asked_again_per_run"] == 0 and doc["error_rate"] is None, doc
    assert (
        "confirm: the first run sent 2 requests live, the budget expected 1 (the fixed agent went "
        "live from where it first differs from the recording): the other 1 run is expected to "
        "send 2" in err
    ), err[-3000:]
    assert [int(r["sent"]) for r in doc["runs"]] == [2, 2], doc["runs"]


@pytest.mark.slow(
    reason=shown(
        "test_a_resume_uses_the_upstream_given_last_and_says_which (the same rule for a resume) "
        "and test_why_upstreams.py's confirm"
    )
)
@needs_recorder
def test_a_confirm_uses_the_upstream_given_last_and_says_which(
    c_why: tuple[Path, Path, ScriptedUpstream],
) -> None:
    """Issue 82: an upstream given to a --confirm replaces the why's in why.json, so the next
    --confirm without one reaches it too (on fec4f2c2 it went back to the first run's, a dead port
    once that upstream moved); each says which it uses."""
    tmp, w, first = c_why
    with ScriptedUpstream(c_route) as moved:
        before = len(first.log)
        rc, _out, err = _confirm(
            tmp, w, "--samples", "1", "--upstream", f"openai={moved.url}",
            agent=("--expect", "rain"),
        )  # fmt: skip
        assert rc == 0 and len(moved.log) == 1 and len(first.log) == before, err[-3000:]
        conf = tmp / "conf"
        assert (
            f"the runs use the --upstream/--confdir given now (--upstream openai={moved.url}) "
            f"and, of the earlier run's, those not given again (--confdir {conf})" in err
        ), err
        rc, _out, err = _confirm(tmp, w, "--samples", "1", agent=("--expect", "rain"))
        assert rc == 0 and len(moved.log) == 2 and len(first.log) == before, err[-3000:]
        assert (
            "the runs use the --upstream/--confdir the earlier run kept in its why.json "
            f"(--upstream openai={moved.url} --confdir {conf})" in err
        ), err
        doc = orjson.loads((w / "why.json").read_bytes())
        assert doc["passed"] == ["--upstream", f"openai={moved.url}", "--confdir", str(conf)], doc
    # the why's own upstream put back for the tests after this one, as the first test puts it
    # back (a confirm given both flags, this one's third before session 52, is
    # test_why_upstreams.py's test_a_confirm_keeps_the_upstream_the_why_was_given[both])
    doc["passed"] = ["--upstream", f"openai={first.url}", "--confdir", str(conf)]
    (w / "why.json").write_bytes(orjson.dumps(doc))


def test_a_resume_uses_the_upstream_given_last_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 82: ``--resume`` without --upstream takes the one why.json kept (on fec4f2c2 the
    branches got none: the real APIs), said; given one, it replaces the kept one of its API there,
    and the kept --confdir stays (issue 95), said."""
    import argparse

    from looptap.cassettes.why._investigation import _last_upstream

    kept = ["--upstream", "openai=http://127.0.0.1:9/v1", "--confdir", "/c"]
    (tmp_path / "why.json").write_bytes(orjson.dumps({"looptap": "why", "passed": kept}))
    args = argparse.Namespace(output=str(tmp_path), upstream=[], confdir=None, resume=True)
    _last_upstream(args)
    assert (args.upstream, args.confdir) == (["openai=http://127.0.0.1:9/v1"], "/c")
    assert (
        "--resume: the branches use the --upstream/--confdir the earlier run kept in its why.json "
        "(--upstream openai=http://127.0.0.1:9/v1 --confdir /c)" in capsys.readouterr().err
    )
    args = argparse.Namespace(
        output=str(tmp_path), upstream=["openai=https://u:sk-secret@gw.example/v1"], confdir=None,
        resume=True,
    )  # fmt: skip
    _last_upstream(args)
    err = capsys.readouterr().err
    assert (
        "given now (--upstream openai=https://…@gw.example/v1) and, of the earlier run's, those "
        "not given again (--confdir /c)" in err
    ), err
    assert (args.upstream, args.confdir) == (["openai=https://u:sk-secret@gw.example/v1"], "/c")
    assert "sk-secret" not in err
