"""A confirm keeps to its estimate (``looptap why DIR --confirm``; cassettes/why/_keep.py,
docs/why.md "Confirming a fix"): once the first run ended it says the estimate for
all K runs, the runs together never send more than ``floor(1.1 × estimate)`` (``--max-requests``
when lower), a run stopped at its share is not judged, and runs are added while the runs sent
under 90% of it. Here the runs are scripted agents: each wants to send a drawn count (a fixed agent
that asks the model again while its answer is wrong, the model wrong with a seeded chance), and a
run sends what its share allows, as ``looptap run --from … --max-requests`` does
(tests/replay/test_fork_limit.py shows the fork side); the branch files, which the estimate reads
(the first run's requests asked again), are written by the real cassette writer. End to end on the
real SDKs: tests/why/test_why_confirm.py and bench/why_cases.py.

On 6efc1f46 nothing kept a confirm to its estimate (cassettes/why/_keep.py did not exist): a flaky
model's 12 runs sent 21 for 16 expected."""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.why._budget import Purse
from looptap.cassettes.why._intervention import Intervention
from looptap.cassettes.why._keep import run_all
from looptap.cassettes.why._outcome import Outcome
from tests.cassettes.analysis.scenarios import Script

#: An E verdict whose 3 re-samples all flipped: the model wrong in 1 of the 4 answers seen.
VERDICT = {"layer": "E", "flips": 3, "samples": 3}


def _fork() -> Intervention:
    return Intervention(
        "E", "c1", 1, "your fixed agent", "confirm", seqs=[1], reach=[0, 1], diverge=True
    )


@dataclass
class Agents:
    """Scripted runs of a fixed agent: run ``k`` wants ``wants(k)`` requests (1 where the fix
    shows, the rest asked again word for word), sends what its share of the purse allows and is
    stopped past it (the fork's note, read by Branches as ``stopped``)."""

    directory: Path
    wants: Any
    outcome: Outcome = field(default_factory=lambda: Outcome("exit", "0"))
    purse: Purse = field(default_factory=Purse)
    running: int = 0
    most_running: int = 0
    shares: list[int | None] = field(default_factory=list)
    #: Each request of a run says more than the one before (a run's turns, never asked again).
    distinct: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def one(self, i: Intervention, k: int, reserve: int | None = None) -> dict[str, Any]:
        given = self.purse.open(i.most_requests if reserve is None else reserve)
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            self.shares.append(given)
        want = int(self.wants(k))
        sent = want if given is None else min(want, given)
        name = f"run.{k}.jsonl"
        s = Script("openai_chat")
        s.user("Weather in Paris and Lyon?")
        for _ in range(sent):
            # asked again: the same request (unless distinct: the answer goes on in the next)
            s.reply("Paris: sunny; Lyon: rain.", echo=self.distinct)
        with CassetteWriter(self.directory / name, meta={"source": "test"}) as w:
            for ex in s.exchanges:
                w.append(ex)
        self.purse.close(given, sent)
        with self._lock:
            self.running -= 1
        result: dict[str, Any] = {"branch": name, "sent": sent, "status": 0, "limit": given}
        if given is not None and want > given:
            return {**result, "stopped": True, "result": "invalid", "why": "stopped at its limit"}
        return {**result, "result": "flipped"}

    def interrupt(self) -> None:
        pass


def _asks(p: float, seed: int, most: int = 3) -> Any:
    """A fixed agent that asks until the answer is right (at most ``most`` times), the model wrong
    with chance ``p``: the requests of run k, drawn once per run (seeded)."""
    drawn: dict[int, int] = {}
    lock = threading.Lock()

    def wants(k: int) -> int:
        with lock:
            if k not in drawn:
                rng = random.Random(seed * 1000 + k)
                n = 1
                while n < most and rng.random() < p:
                    n += 1
                drawn[k] = n
            return drawn[k]

    return wants


def _after(runner: Any, result: dict[str, Any]) -> str:
    """What a run did, as the report says it (cassettes/why/_confirm.py's for ``--outcome
    exit``)."""
    return f"exited {result['status']}" if result["result"] == "flipped" else "no sample"


def _confirm(tmp: Path, wants: Any, samples: int, jobs: int, limit: int | None = None) -> Any:
    agents = Agents(tmp, wants)
    kept = run_all(agents, _fork(), VERDICT, samples, jobs, limit, _after)  # type: ignore[arg-type]
    return agents, kept


def test_a_deterministic_fixed_agent_runs_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One request a run, never asked again: the estimate is exact (K), every run runs (--jobs
    at a time), none stopped, none added."""
    agents, kept = _confirm(tmp_path, lambda k: 1, 5, 2)
    assert [r["sent"] for r in kept.results] == [1] * 5 and kept.estimate.total == 5
    assert (kept.limit, kept.stopped, kept.added, kept.not_started) == (5, 0, 0, 0)
    assert agents.most_running <= 2 and all(r["result"] == "flipped" for r in kept.results)
    err = capsys.readouterr().err
    assert "the runs are kept to 5 in all (at most 110% of it)" in err, err
    assert " added" not in err and "was stopped" not in err


@pytest.mark.parametrize("jobs", [1, 2, 3])
@pytest.mark.parametrize(("samples", "p"), [(3, 0.4), (12, 0.4), (3, 0.3), (12, 0.3)])
def test_a_fixed_agent_that_asks_again_is_kept_within_10_percent_of_its_estimate(
    tmp_path: Path, samples: int, p: float, jobs: int
) -> None:
    """The flaky (wrong 40%) and relay (30%) cases' fixed agents, 40 seeded draws each: what all
    runs send is within 10% of the estimate said before the other runs started; a run stopped at
    its share is never judged; at no time more runs in flight than --jobs."""
    ratios = []
    for seed in range(40):
        d = tmp_path / f"{seed}"
        d.mkdir()
        agents, kept = _confirm(d, _asks(p, seed), samples, jobs)
        sent = sum(r["sent"] for r in kept.results)
        est = kept.estimate.total
        assert sent <= kept.limit == math.floor(1.1 * est), (seed, sent, kept.limit)
        assert 0.9 * est <= sent, (seed, sent, est, [r["sent"] for r in kept.results])
        assert all(r["result"] == "invalid" for r in kept.results if r.get("stopped"))
        assert agents.most_running <= jobs and kept.added <= samples
        ratios.append(sent / est)
    assert max(ratios) <= 1.1 and min(ratios) >= 0.9


def test_the_estimate_is_the_first_runs_and_runs_are_added_under_90_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first run asked again (2 sent): each other run is expected to send 1 + 1/3 (the
    model wrong in 1 of 4 answers the why saw): 2 + 2 × 4/3 = 4.67 for K = 3, kept to 5. The
    others send 1 each (4 in all, under 90% of it): a run is added (5 in all), said."""
    _agents, kept = _confirm(tmp_path, lambda k: 2 if k == 1 else 1, 3, 2)
    assert round(kept.estimate.total, 2) == 4.67 and kept.limit == 5
    assert [r["sent"] for r in kept.results] == [2, 1, 1, 1] and kept.added == 1
    assert kept.results[-1]["added"] is True and kept.stopped == 0
    err = capsys.readouterr().err
    assert "the estimate for 3 runs, in live requests: 4.7 (" in err, err
    assert "confirm: the runs sent 4, under 90% of the estimate (4.7): run 4 added" in err, err


def test_a_run_that_would_pass_the_limit_is_stopped_and_no_later_run_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first run did not ask again (estimate K = 3, kept to 3); run 2 asks three times: it is
    given what is left less run 3's least (1), stopped at it; run 3 then runs alone, given what is
    left; nothing past 3 is sent."""
    _agents, kept = _confirm(tmp_path, lambda k: 3 if k == 2 else 1, 3, 2)
    sent = [r["sent"] for r in kept.results]
    assert sum(sent) <= 3 and kept.stopped == 1, kept.results
    stopped = next(r for r in kept.results if r.get("stopped"))
    assert stopped["result"] == "invalid"
    err = capsys.readouterr().err
    assert "the runs are kept to 3 in all" in err


def test_a_lower_max_requests_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--max-requests 3 for K = 5 of a deterministic agent (5 expected): the first run may send
    3, the others are kept to 3 in all: 2 of them run, 2 are not run, said."""
    _agents, kept = _confirm(tmp_path, lambda k: 1, 5, 2, limit=3)
    assert kept.limit == 3 and [r["sent"] for r in kept.results] == [1, 1, 1]
    assert kept.not_started == 2 and kept.stopped == 0 and kept.added == 0
    err = capsys.readouterr().err
    assert "the runs are kept to 3 in all (--max-requests 3)" in err, err
    assert "2 runs of the other 4 would pass 3: not run" in err, err


def test_a_fixed_agent_past_the_recordings_end_runs_every_run_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 103: a refusal's verdict (C at c1 turn 0, the last turn recorded: the agent failed on
    the API's 400), so the recording shows a run may reach 1 request; the fixed agent sends 3 (the
    refused request answered now, then the turns it goes on with). On f29135f5 the at-most (5 for
    K = 5) counted the refused request alone, and after the first run "4 runs of the other 4 would
    pass 5: not run". Now the at-most covers the later turns the first run showed, said, and every
    run asked for is run and judged; --max-requests still wins."""
    fork = Intervention("C", "c1", 0, "your fixed agent", "confirm", seqs=[0], reach=[0],
                        diverge=True)  # fmt: skip
    fork.past_end = True  # as the confirm's fork of such a run says (test_why_lost_repairs.py)
    agents = Agents(tmp_path, lambda k: 3, distinct=True)
    kept = run_all(agents, fork, {"layer": "C"}, 5, 2, None, _after)  # type: ignore[arg-type]
    assert [r["sent"] for r in kept.results] == [3] * 5, kept.results
    assert all(r["result"] == "flipped" for r in kept.results)
    assert (kept.limit, kept.stopped, kept.not_started, kept.estimate.total) == (15, 0, 0, 15)
    err = capsys.readouterr().err
    assert "confirm: at most 5 requests sent live in all" in err, err
    assert "past the refused request the recording holds nothing" in err, err
    assert "the at-most for 5 runs is now 15, 3 a run as the first sent" in err, err
    assert "would pass 5" not in err and "not run" not in err, err
    d = tmp_path / "limited"
    d.mkdir()
    agents = Agents(d, lambda k: 3, distinct=True)
    kept = run_all(agents, fork, {"layer": "C"}, 5, 2, 6, _after)  # type: ignore[arg-type]
    assert sum(r["sent"] for r in kept.results) <= 6 and kept.not_started == 3


def test_the_purse_never_gives_past_its_total_and_keeps_each_runs_least() -> None:
    """``looptap why --max-requests`` at run time (and a confirm's limit): each branch starts with
    what is left less what the runs in flight hold and the least of each run still to start;
    what a run did not send comes back."""
    purse = Purse(10)
    purse.plan([2, 2, 2])
    a = purse.open(2)  # 10, less the two others' 2 each
    b = purse.open(2)  # what a holds is held
    assert (a, b) == (6, 2)
    purse.close(a, 3)  # a sent 3 of its 6: the rest comes back
    c = purse.open(2)
    assert c == 10 - 3 - 2 and purse.left() == 0
    purse.close(b, 2)
    purse.close(c, 5)
    assert purse.spent == 10 and purse.held == 0
    assert Purse().open(3) is None  # no limit: a branch is started without one


def test_a_branch_is_started_with_its_share_as_its_forks_limit(tmp_path: Path) -> None:
    from looptap.cassettes.why._branches import Branches

    runner = Branches(tmp_path / "run.jsonl", ["agent"], Outcome("exit", "0"), tmp_path)
    argv = runner.command(_fork(), 1, 4)
    assert argv[argv.index("--max-requests") + 1] == "4"
    assert "--max-requests" not in runner.command(_fork(), 1)


def test_why_in_place_reaches_every_branch(tmp_path: Path) -> None:
    """``looptap why --in-place``: each branch's ``run --from`` gets it (where a fork cannot be
    isolated it is refused without: proxy/isolation.py), before the agent's ``--``."""
    from looptap.cassettes.why._branches import Branches

    runner = Branches(tmp_path / "run.jsonl", ["agent"], Outcome("exit", "0"), tmp_path)
    assert "--in-place" not in runner.command(_fork(), 1)
    runner.in_place = True
    argv = runner.command(_fork(), 1)
    assert "--in-place" in argv[: argv.index("--")]


def test_a_check_goes_to_each_branchs_fork_and_is_read_from_its_note(tmp_path: Path) -> None:
    """``why --check``: each branch's fork runs the check in the branch's own tree (``--verify …
    --verify-one`` with ``--check-timeout``) and keeps it on its note, which is what the branch is
    judged on (on cdf5bc6d the check ran in why's working directory, never on the branch's tree);
    a branch whose check did not run or could not start is said so, never judged."""
    from looptap.cassettes.why._branches import Branches

    runner = Branches(tmp_path / "run.jsonl", ["agent"], Outcome("check", "make test"), tmp_path)
    runner.check_seconds = 7.5
    argv = runner.command(_fork(), 1)
    at = argv.index("--verify")
    assert argv[at : at + 5] == ["--verify", "make test", "--verify-timeout", "7.5", "--verify-one"]
    assert at < argv.index("--")
    assert "--verify" not in Branches(tmp_path / "r", ["a"], Outcome("exit"), tmp_path).command(
        _fork(), 1
    )
    branch = tmp_path / "b.jsonl"
    for verified, got in (
        ({"exit": 0, "timed_out": False}, 0),
        ({"exit": 2, "timed_out": False}, 2),
        ({"exit": None, "timed_out": True, "seconds": 7.5}, 124),
        (
            {"exit": None, "timed_out": False, "error": "no /bin/sh"},
            "the check could not start: no /bin/sh",
        ),
        (
            {"exit": "0", "timed_out": False},
            "the check could not start: no status on the fork note",
        ),
        (None, "the check did not run (the fork ended before it)"),
    ):
        note = {"type": "note", "note": "fork", "verified": verified}
        branch.write_bytes(b'{"type":"header"}\n' + orjson.dumps(note) + b"\n")
        assert runner.checked(branch) == got, verified
    assert (
        runner.checked(tmp_path / "none.jsonl")
        == "the check did not run (the fork ended before it)"
    )


def test_a_branchs_sent_counts_the_model_requests_as_the_forks_limit_does(tmp_path: Path) -> None:
    """A tool's HTTP call the fork's recorder wrote beside the model's round trips is the tool's:
    neither the fork's limit nor a branch's ``sent`` counts it (on 6efc1f46 ``sent`` did)."""
    from looptap.cassettes.why._branches import _sent
    from looptap.cassettes.wire import Exchange

    s = Script("openai_chat")
    s.user("Weather in Paris?")
    s.reply("sunny", echo=False)
    tool = Exchange("GET", "http://127.0.0.1:9/weather?city=Paris", [], b"", status=200, tool=True)
    tool.response_chunks = [(0.0, b'{"city": "Paris", "weather": "sunny"}')]
    with CassetteWriter(tmp_path / "b.jsonl", meta={"source": "test"}) as w:
        for ex in [*s.exchanges, tool]:
            w.append(ex)
    assert _sent(tmp_path / "b.jsonl") == {"sent": 1}
