"""Where a ``why``, its ``--resume``, its ``--confirm`` and a fork (``looptap run --from``) send
their live requests (issue 95 item 1): decided once from the recorded run and what the user gave,
never wider. The run is recorded against a scripted fake (tests/support/scripted.py); every
vendor host a listener falls back to when no ``--upstream`` names it is a *sentinel*: the
recorder's own mechanism for a built-in listener's upstream (the base-URL variable the user set,
``OPENAI_BASE_URL`` …, followed: proxy/config.py ``_follow``) points every API at a loopback socket
that records each connection, and every combination of ``--upstream`` / ``--confdir`` / both /
neither must leave it with nothing heard. The agent is tests/why/why_agent.py, its Chat requests
sent by urllib (``--http``): where they go is the recorder's doing, not the client's.
By default each command runs given the flags that name no upstream (``--confdir`` alone, neither)
and, the why and the confirm, both; the rest (:data:`NAMED`) with ``LOOPTAP_SLOW=1``.

Item 2 too: a ``--resume`` runs again the branches that got no sample because the upstream was
not reached, and says so.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.c_case import CInvestigation, Sentinel
from tests.why.test_why import AGENT, HTTP, WHY, shown

#: The flags each command is given: the fake named, the confdir alone, both, neither.
STATES = ("upstream", "confdir", "both", "neither")
#: Why a state of a command runs at night only: the fake named (``--upstream``, with or without
#: ``--confdir``) is where every other test of tests/why sends that command (test_why.py's whys and
#: resumes, test_why_confirm.py's confirm given an upstream, test_why_turns.py's and
#: test_why_agents.py's forks given both); what this module shows by default is the flags that
#: name no upstream (``--confdir`` alone, neither), where the run's own is kept or lost.
NAMED = "the upstream named on the command line: every other why, resume, confirm and fork test"


#: Why ``--confdir`` alone runs at night only (session 55, its CPU): the upstream is decided from
#: the run and the flags given, and ``--confdir`` names none, as neither does (the decision in
#: process: test_where_live_requests_go_is_decided_from_the_run_and_the_flags_given; each command
#: given neither end to end by default).
CONFDIR = "--confdir alone decides as neither does: each command given neither shows it"
#: Why the why given neither runs at night only (session 55, its CPU): its branches are forks, and
#: the fork and the confirm given neither show end to end where they go; the why's decision is
#: test_where_live_requests_go_is_decided_from_the_run_and_the_flags_given, in process.
WHY_NEITHER = "the fork and the confirm given neither, and the decision in process, show it"


def states(*default: str, neither: str = CONFDIR) -> list[object]:
    """:data:`STATES` as a test's parameters, those not in ``default`` for the nightly run only
    (``neither``: the reason when that state is not one of them)."""
    why_not = {"confdir": CONFDIR, "neither": neither}
    return [
        s if s in default else pytest.param(s, marks=pytest.mark.slow(reason=why_not.get(s, NAMED)))
        for s in STATES
    ]


@dataclass
class World:
    tmp: Path
    run: Path
    call: str
    fake: ScriptedUpstream
    sentinel: Sentinel
    #: A why of the run whose verdict is determined (K=3), what each --confirm answers.
    decided: Path
    env: dict[str, str] = field(default_factory=dict)
    #: The whys of :func:`_made`: {state: (status, stderr, requests the fake heard)}.
    made: dict[str, tuple[int, str, int]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def world(
    c_investigation: CInvestigation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """The session's C case (tests/why/c_case.py: recorded against the fake, which stays up; its
    commands' every vendor base URL at the sentinel), the why of it a copy of the module's own
    (each --confirm writes there)."""
    inv = c_investigation
    assert inv.rc == 0 and inv.out.startswith("verdict: the client (C)"), inv.out + inv.err[-3000:]
    decided = inv.copy(tmp_path_factory.mktemp("why-upstreams") / "decided")
    yield World(inv.tmp, inv.run, inv.call, inv.fake, inv.sentinel, decided, inv.env)


def _flags(w: World, state: str) -> list[str]:
    up = ["--upstream", f"openai={w.fake.url}"]
    conf = ["--confdir", str(w.tmp / "conf")]
    return {"upstream": up, "confdir": conf, "both": up + conf, "neither": []}[state]


def _why(
    w: World, state: str, out: Path, *extra: str, samples: int = 1, flags: list[str] | None = None
) -> tuple[int, str, str]:
    proc = progress.run(
        [*WHY, str(w.run), *(_flags(w, state) if flags is None else flags), "--layer", "C",
         "--samples", str(samples), "--result", f"{w.call}=rain", "-o", str(out), *extra, "--",
         sys.executable, str(AGENT), "--drop-second", "--expect", "rain", HTTP],
        env=w.env, capture_output=True, text=True, cwd=w.tmp,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


def _heard(w: World, before: tuple[int, int], what: str, err: str) -> int:
    """The requests the fake heard since ``before`` (:func:`_now`); the sentinel must have heard
    nothing since."""
    got = w.sentinel.heard[before[1] :]
    assert got == [], f"{what}: a vendor's API was reached: {got}\n" + err
    return len(w.fake.log) - before[0]


def _now(w: World) -> tuple[int, int]:
    return len(w.fake.log), len(w.sentinel.heard)


def _made(w: World, state: str) -> tuple[int, str, int]:
    """The why of the run given ``state``'s flags (K=1, into ``why-STATE``), made once a module
    by the first test to ask: test_a_why_goes_where_the_run_went reads it, and every resume test
    copies the ``both`` one (the command each of them ran on its own before session 52). Its
    status, its stderr, and the requests the fake heard while it ran (the sentinel none)."""
    if state not in w.made:
        before = _now(w)
        rc, _out, err = _why(w, state, w.tmp / f"why-{state}")
        w.made[state] = (rc, err, _heard(w, before, f"why {state}", err))
    return w.made[state]


def _results(directory: Path) -> list[dict[str, object]]:
    doc = orjson.loads((directory / "why.json").read_bytes())
    return [r for v in doc["branches"].values() for r in v.values()]


@needs_recorder
@pytest.mark.parametrize("state", states(neither=WHY_NEITHER))
def test_a_why_goes_where_the_run_went(world: World, state: str) -> None:
    """A why of a run recorded against a fake: its branch reaches the fake, whatever flags
    (``--confdir`` alone and none included: the run's own upstream, never the vendor's)."""
    rc, err, heard = _made(world, state)
    assert rc in (0, 1), err[-3000:]
    assert heard >= 1
    assert [r["result"] for r in _results(world.tmp / f"why-{state}")] == ["flipped"], err[-3000:]
    if state in ("confdir", "neither"):
        assert (
            f"looptap why: openai: live requests go to {world.fake.url}, where the recorded run "
            "sent them (--upstream openai=URL sends them elsewhere)" in err
        ), err


@pytest.mark.slow(
    reason=shown(
        "test_why.py::test_the_c_repair_runs_as_ordinary_branches_and_a_resume_keeps_them (a "
        "resume) and test_where_live_requests_go_is_decided_from_the_run_and_the_flags_given"
    )
)
@needs_recorder
@pytest.mark.parametrize("state", states("neither"))
def test_a_resume_keeps_the_upstream_it_was_given(world: World, state: str) -> None:
    """A resume of a why given the fake (its branch lost: run again): ``--confdir`` alone keeps
    the saved upstream (on c86d115d it dropped it and the branch went to the vendor's API)."""
    rc, err, _ = _made(world, "both")  # (the same why for every state)
    assert rc in (0, 1), err[-3000:]
    out = world.tmp / f"resume-{state}"
    shutil.copytree(world.tmp / "why-both", out)
    doc = orjson.loads((out / "why.json").read_bytes())
    doc["branches"] = {}
    doc.pop("verdict", None)
    for branch in out.glob("*.jsonl*"):
        branch.unlink()
    (out / "why.json").write_bytes(orjson.dumps(doc))
    before = _now(world)
    rc, _out, err = _why(world, state, out, "--resume")
    assert rc in (0, 1), err[-3000:]
    assert _heard(world, before, f"--resume {state}", err) >= 1
    assert [r["result"] for r in _results(out)] == ["flipped"], err[-3000:]
    if state == "confdir":
        assert (
            "--resume: the branches use the --upstream/--confdir given now (--confdir "
            f"{world.tmp / 'conf'}) and, of the earlier run's, those not given again (--upstream "
            f"openai={world.fake.url})" in err
        ), err


@needs_recorder
@pytest.mark.parametrize("state", states("neither"))
def test_a_confirm_keeps_the_upstream_the_why_was_given(world: World, state: str) -> None:
    """A confirm of the why: ``--confdir`` alone keeps the why's upstream (on c86d115d it dropped
    it: the runs went to the vendor's API)."""
    before = _now(world)
    proc = progress.run(
        [*WHY, str(world.decided), "--confirm", *_flags(world, state), "--samples", "1", "--",
         sys.executable, str(AGENT), "--expect", "rain", HTTP],
        env=world.env, capture_output=True, text=True, cwd=world.tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert _heard(world, before, f"--confirm {state}", proc.stderr) >= 1
    assert proc.stdout.startswith("confirm: the fixed agent succeeds in 1/1 run"), proc.stdout


@needs_recorder
@pytest.mark.parametrize("state", states("neither"))
def test_a_fork_goes_where_the_run_went(world: World, state: str) -> None:
    """``looptap run --from`` of the run, the fixed agent live from c1 turn 1: it reaches the
    fake with or without ``--upstream`` (on c86d115d, without it, the vendor's API)."""
    before = _now(world)
    proc = progress.run(
        [*RECORDER, "run", "--from", f"{world.run}@conversation=c1:turn=1", *_flags(world, state),
         "-o", str(world.tmp / f"fork-{state}.jsonl"), "--", sys.executable, str(AGENT),
         "--expect", "rain", HTTP],
        env=world.env, capture_output=True, text=True, cwd=world.tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert _heard(world, before, f"run --from {state}", proc.stderr) >= 1


@pytest.mark.slow(
    reason=shown(
        "test_why.py::test_the_c_repair_runs_as_ordinary_branches_and_a_resume_keeps_them (a "
        "resume) and test_where_live_requests_go_is_decided_from_the_run_and_the_flags_given"
    )
)
@needs_recorder
def test_a_resume_runs_again_the_branches_the_upstream_never_answered(world: World) -> None:
    """Item 2: a why whose upstream is down gets no sample; a resume with one that is up runs
    that branch again, and says why (on c86d115d: "1 branch kept from the earlier run, 0 to
    run", nothing sent)."""
    out = world.tmp / "down"
    down = ["--upstream", "openai=http://127.0.0.1:9"]
    rc, _o, err = _why(world, "", out, flags=down)
    assert [r["result"] for r in _results(out)] == ["invalid"], err[-3000:]
    before = _now(world)
    rc, _o, err = _why(world, "upstream", out, "--resume")
    assert rc in (0, 1), err[-3000:]
    assert (
        "--resume: 0 branches kept from the earlier run, 1 to run (1 of them again: it got no "
        "sample for a reason of the environment, not of the change: a request sent live never "
        "reached the upstream" in err
    ), err
    assert _heard(world, before, "--resume after a down upstream", err) >= 1
    assert [r["result"] for r in _results(out)] == ["flipped"], err[-3000:]


def test_where_live_requests_go_is_decided_from_the_run_and_the_flags_given() -> None:
    """The decision itself (cassettes/replay/live/upstreams.py): an API the run reached at its
    vendor is left to the recorder; one reached elsewhere is pinned there unless given; one
    reached at two places is refused unless given."""
    from looptap.cassettes.replay.live.upstreams import destinations, recorded_origins

    def pair(url: str, family: str) -> tuple[object, object]:
        return SimpleNamespace(url=url, tool=False), SimpleNamespace(family=family)

    origins = recorded_origins(
        [
            pair("http://127.0.0.1:8001/v1/chat/completions", "openai_chat"),
            pair("https://api.anthropic.com/v1/messages", "anthropic"),
            pair("http://[::1]:9/v1beta/models/g:generateContent", "gemini"),
            (
                SimpleNamespace(url="http://127.0.0.1:7/x", tool=True),
                SimpleNamespace(family="none"),
            ),
        ]
    )
    assert origins == {
        "openai": {"http://127.0.0.1:8001"},
        "anthropic": {"https://api.anthropic.com"},
        "gemini": {"http://[::1]:9"},
    }, origins
    goes = destinations(origins, {})
    assert goes.pinned == {"openai": "http://127.0.0.1:8001", "gemini": "http://[::1]:9"}
    assert goes.bases["anthropic"] == "https://api.anthropic.com" and goes.refusal() is None
    named = destinations(origins, {"openai": "https://api.openai.com"})
    assert "openai" not in named.pinned and named.bases["openai"] == "https://api.openai.com"
    two = destinations({"openai": {"http://127.0.0.1:1", "https://api.openai.com"}}, {})
    assert two.refusal() is not None and "give --upstream openai=URL" in str(two.refusal())
    assert destinations({"openai": {"a", "b"}}, {"openai": "http://a"}).refusal() is None
