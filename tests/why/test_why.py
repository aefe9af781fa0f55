"""``looptap why`` (issue 46) against scripted fakes whose behaviour is known, each driving a real
SDK tool loop (tests/why/why_agent.py: openai Chat, openai Responses, Anthropic Messages) through
the real fork (``looptap run --from``).

Requests are counted at the fakes: a refusal, the budget guard and ``--dry-run`` send none; the
baseline (the command against the whole recording) sends none either. Waits are by progress.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import orjson
import pytest

from tests.support import progress
from tests.support.analysed import cli_output
from tests.support.progress import CEILING
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream

if TYPE_CHECKING:
    from tests.why.c_case import CInvestigation

AGENT = Path(__file__).with_name("why_agent.py")
#: The agent's flag for a Chat client on the standard library's ``urllib``, not the openai SDK
#: (why_agent.py ``--http``: the same bodies, without the SDK's ~0.7 s of CPU a run): for the tests
#: about what why concludes from its branches, whose client is not what they show. The recording
#: and every command run against it take it alike (a branch sends what the recording's client sent).
HTTP = "--http"


def via(family: str) -> tuple[str, ...]:
    """The agent's client flags for ``family`` in the tests that take :data:`HTTP`: Chat's
    requests by urllib, the other families' by their SDK."""
    return (HTTP,) if family == "chat" else ()


#: The must-show claims with K=10 (30 branches a case: minutes on a loaded machine): LOOPTAP_SLOW=1.
SLOW = pytest.mark.slow(reason="K=10 per intervention (30 branches a case)")
WHY = [sys.executable, "-m", "looptap.cassettes.cli", "why"]
#: The agent's API families (why_agent.py --family): the must-show cases run on each.
FAMILIES = ["chat", "responses", "anthropic"]


#: Why a parameter set runs at night only: a repeat of a default case on another API family or
#: outcome, whose path through why the default case shows (the edits' and the refusals' shapes of
#: every family are tests/why/test_why_core.py's and test_why_repair.py's, in process); each one
#: listed in docs/suite.md.
VARIANT = "a repeat of a default case on another family or outcome"


def shown(by: str) -> str:
    """The reason of a ``why`` end to end that runs at night only (session 55, its CPU): its logic
    is shown by default by ``by`` (in process, or another end-to-end test); docs/suite.md lists
    each."""
    return f"its logic is shown by default by {by}"


def families(*default: str, of: Sequence[str] = FAMILIES) -> list[Any]:
    """``of`` as a test's parameters, those not in ``default`` for the nightly run only."""
    return [
        f if f in default else pytest.param(f, marks=pytest.mark.slow(reason=VARIANT)) for f in of
    ]


def why_env() -> dict[str, str]:
    from tests.support.recorder import PROXY_PYTHON

    return clean_env(
        OPENAI_API_KEY="sk-test-why",
        ANTHROPIC_API_KEY="sk-ant-test-why",
        LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON),
    )


def c_route(req: ScriptedRequest) -> Reply:
    """Both cities in one answer; the right answer only when both results came back."""
    results = req.tool_results()
    if not results:
        return Reply(
            calls=(Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Lyon"}))
        )
    return Reply.say(
        "Paris: sunny; Lyon: rain."
        if any("rain" in r for r in results)
        else "Paris: sunny; Lyon: sunny too, I guess."
    )


class ERoute:
    """The wrong tool (``get_time``) with probability 0.7 at the first turn, drawn from a seeded
    generator per first-turn request (the n-th such request always draws the same), so the
    distribution is known and a test's counts do not depend on which branch came first."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def __call__(self, req: ScriptedRequest) -> Reply:
        results = req.tool_results()
        if not results:
            with self.lock:
                wrong = self.rng.random() < 0.7
            return Reply.tool("get_time" if wrong else "get_weather", {"city": "Paris"})
        return Reply.say("Sunny in Paris." if "sunny" in results[0] else f"It is {results[0]}.")


#: The answer the cap cuts (its first words).
CUT = "The weather in Paris is"


def a_route(req: ScriptedRequest) -> Reply:
    """The answer is longer than the agent's cap of 60 tokens: cut there, unless the cap is lifted
    or the request asks for the rest of the cut answer (it carries it: a continuation)."""
    if not req.tool_results():
        return Reply.tool("get_weather", {"city": "Paris"})
    # Chat and Anthropic / Responses
    cap = req.body.get("max_tokens") or req.body.get("max_output_tokens") or 0
    if cap >= 100:
        return Reply.say(f"{CUT} sunny today.")
    return (
        Reply.say(" sunny today.")
        if CUT.encode() in orjson.dumps(req.body)
        else Reply.truncated(CUT)
    )


def record_run(
    tmp: Path, route: Callable[[ScriptedRequest], Reply], *agent_args: str, status: int = 1
) -> Path:
    run = tmp / "run.jsonl"
    with ScriptedUpstream(route) as fake:
        proc = progress.run(
            [
                *RECORDER,
                "run",
                "-o",
                str(run),
                "--confdir",
                str(tmp / "conf"),
                "--upstream",
                f"openai={fake.url}",
                "--upstream",
                f"anthropic={fake.url}",
                "--",
                sys.executable,
                str(AGENT),
                *agent_args,
            ],
            env=why_env(),
            capture_output=True,
            text=True,
            cwd=tmp,
        )
    assert proc.returncode == status, proc.stdout + proc.stderr[-3000:]
    return run


def _why(
    tmp: Path,
    run: Path,
    fake: ScriptedUpstream | None,
    *args: str,
    agent: tuple[str, ...] = (),
    family: str = "chat",
    budget: str = "estimate",
    here: bool = False,
) -> tuple[int, str, str]:
    """``looptap why RUN ARGS -- why_agent.py AGENT`` against ``fake``; with ``--json``, the
    requests its branches sent are checked against the budget (:func:`budget_kept`). ``here``:
    the command's ``main`` in this process (its environment and directory the process's would
    be), for a dry run or a refusal, which start no branch: what the command says, not its
    wiring (the same command's process: the dry run ``[responses]`` and every why that runs)."""
    up = (
        ["--upstream", f"{'anthropic' if family == 'anthropic' else 'openai'}={fake.url}"]
        if fake is not None
        else []
    )
    argv = [
        str(run),
        *up,
        "--confdir",
        str(tmp / "conf"),
        *args,
        "--",
        sys.executable,
        str(AGENT),
        *agent,
        "--family",
        family,
    ]
    if here:
        proc = why_here(tmp, *argv)
    else:
        proc = progress.run([*WHY, *argv], env=why_env(), capture_output=True, text=True, cwd=tmp)
    if "--json" in args and proc.returncode in (0, 1) and proc.stdout.startswith("{"):
        budget_kept(orjson.loads(proc.stdout), budget)
    return proc.returncode, proc.stdout, proc.stderr


def why_here(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``looptap why ARGV`` by its ``main`` in this process, in ``tmp`` with :func:`why_env` as its
    whole environment (as its process would have them): for a dry run or a refusal, which start
    no branch."""
    with mock.patch.dict(os.environ, why_env(), clear=True), contextlib.chdir(tmp):
        rc, out, err = cli_output("why", *argv)
    return subprocess.CompletedProcess(["why", *argv], rc, out.decode(), err)


def budget_kept(doc: dict[str, Any], budget: str = "estimate") -> tuple[int, int, int]:
    """(estimated, at most, sent) live requests of a why's branches (each intervention's
    ``live_requests_per_sample`` and ``at_most_per_sample`` times its branches that noted what
    they sent, against their ``sent``): never more sent than the at-most the limits are kept
    against, and with ``budget="estimate"`` (a scripted model that answers a re-sample as it
    answered the recording) the estimate for answers that come back as recorded
    (``as_recorded_per_sample``) within 10% of what was sent (issue 68 item 6);
    ``budget="changed"`` (a model whose re-sampled answers heard elsewhere all change) the
    estimate itself. ``budget="bound"``: a model that answers a re-sample otherwise sends more
    than the estimate (its held turns go live), up to the at-most. The budget's headline (each
    heard answer said again with its ``said_again_chance``) is within 10% whenever the re-sampled
    answers came back as recorded."""
    est = same = most = sent = head = 0
    for i in doc.get("interventions") or []:
        noted = [b for b in i.get("branches") or [] if "sent" in b]
        live, again = i["live_requests_per_sample"], i["as_recorded_per_sample"]
        changed = round(len(noted) * (1 - i["said_again_chance"])) if again < live else len(noted)
        head += live * changed + again * (len(noted) - changed)
        est += live * len(noted)
        same += again * len(noted)
        most += i["at_most_per_sample"] * len(noted)
        sent += sum(b["sent"] for b in noted)
    if log := os.environ.get("LOOPTAP_WHY_BUDGET_LOG"):
        with open(log, "a") as f:
            f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?')}\t{est}\t{most}\t{sent}\n")
    assert sent <= most, (est, most, sent)
    if budget in ("estimate", "changed"):
        said = same if budget == "estimate" else est
        assert abs(said - sent) <= 0.1 * sent, (said, est, most, sent)
    if budget == "estimate" and sent >= 10:
        assert abs(head - sent) <= 0.1 * sent, (head, same, est, most, sent)
    return est, most, sent


@pytest.fixture(scope="module")
def c_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The C case's failing run of an API family, recorded once for the module (Chat's requests
    sent by urllib, :data:`HTTP`: every test that reads it is about why; the openai SDK's Chat
    requests are the cut answer's and the refusal's, Responses' and Anthropic's their SDKs')."""
    made: dict[str, Path] = {}

    def recorded(family: str) -> Path:
        if RECORDER[0] == "None":
            pytest.skip("no recorder environment")
        if family not in made:
            made[family] = record_run(
                tmp_path_factory.mktemp(f"why-c-{family}"),
                c_route,
                "--drop-second",
                "--expect",
                "rain",
                "--family",
                family,
                *via(family),
            )
        return made[family]

    return recorded


@pytest.fixture(scope="module")
def c_run(c_runs: Callable[[str], Path]) -> Iterator[Path]:
    yield c_runs("chat")


def c_call(run: Path) -> str:
    from looptap.cassettes.reading import open_run

    f = next(
        f for f in open_run(run, whole=True).analysis.findings if f.code == "C.dropped_tool_result"
    )
    assert f.tool_call_id
    return str(f.tool_call_id)


@needs_recorder
@pytest.mark.parametrize("family", families("responses"))
def test_dry_run_and_the_budget_guard_send_nothing(
    family: str, c_runs: Callable[[str], Path], tmp_path: Path
) -> None:
    c_run = c_runs(family)
    call = c_call(c_run)
    (tmp_path / "lyon.txt").write_text("rain")
    with ScriptedUpstream(c_route) as fake:
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--dry-run",
            "--samples",
            "10",
            "--result",
            f"{call}=@lyon.txt",
            "-o",
            str(tmp_path / "w"),
            agent=("--drop-second", "--expect", "rain", *via(family)),
            family=family,
        )
        assert rc == 0, err
        lines = out.splitlines()
        assert any(
            ln.startswith("would fork at conversation=c1:turn=1 [--edit 'restore_result[")
            and ": C: the dropped result of call" in ln
            and ln.endswith("10 live requests (1 × 10 samples)")
            for ln in lines
        ), out
        assert any(
            "E: the model's emission re-sampled" in ln
            and "conversation=c1:turn=0" in ln
            # held: turn 1 served while its request matches, live at most
            and ln.endswith("10 live requests (1 × 10 samples); at most 20")
            for ln in lines
        ), out
        assert not (tmp_path / "w").exists()
        # (the command's process above; what it says to the rest, in this process)
        rc, out, err = _why(
            tmp_path, c_run, fake, "--dry-run", "--json", "--samples", "3", family=family, here=True
        )
        doc = orjson.loads(out)
        c = next(i for i in doc["interventions"] if i["layer"] == "C")
        assert rc == 0 and c["runnable"] is False and f"--result {call}=@FILE" in c["missing"], doc
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--samples",
            "10",
            "--max-requests",
            "20",
            "-o",
            str(tmp_path / "w"),
            agent=("--drop-second", "--expect", "rain", *via(family)),
            family=family,
            here=True,
        )
        assert rc == 2 and "over --max-requests 20: nothing sent" in err, err
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--samples",
            "2",
            "--max-cost",
            "0.000001",
            "-o",
            str(tmp_path / "w"),
            agent=("--drop-second", "--expect", "rain", *via(family)),
            family=family,
            here=True,
        )
        assert rc == 2 and "over --max-cost 0.000001: nothing sent" in err, err
        assert fake.log == [] and not (tmp_path / "w").exists()


@needs_recorder
def test_another_model_is_re_sampled_too_and_priced_at_its_own_price(
    c_run: Path, tmp_path: Path
) -> None:
    """--model M: each E turn re-sampled on M as well, the budget priced at M's own price for those
    branches (gpt-4o costs about 16× gpt-4o-mini): a --max-cost the recorded model's 40 requests fit
    under refuses the 30 more on gpt-4o, before anything is sent."""
    with ScriptedUpstream(c_route) as fake:
        args = ("--samples", "10", "--result", f"{c_call(c_run)}=rain", "--max-cost", "0.01")
        rc, out, err = _why(tmp_path, c_run, fake, "--dry-run", *args, here=True)
        assert (
            rc == 0
            and "30 requests expected (3 a sample of 3 interventions × 10 samples)" in out
            and "openai/gpt-4o-mini" in out
            # the held re-sample of turn 0 may take turn 1 live too: the limits count that
            and "at most 40 requests if re-sampled answers differ" in out
        ), out + err
        rc, out, err = _why(
            tmp_path, c_run, fake, "--dry-run", "--model", "gpt-4o", *args, here=True
        )
        assert (
            rc == 2
            and "over --max-cost 0.01: nothing sent" in err
            and re.search(r"openai/gpt-4o(?!-mini)", err)
        ), err
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--dry-run",
            "--json",
            "--model",
            "gpt-4o",
            "--samples",
            "10",
            here=True,
        )
        models = sorted(
            (i["turn"], i["model"] or "")
            for i in orjson.loads(out)["interventions"]
            if i["layer"] == "E"
        )
        assert rc == 0 and models == [(0, ""), (0, "gpt-4o"), (1, ""), (1, "gpt-4o")], models
        assert fake.log == []


@needs_recorder
def test_branches_run_in_parallel_up_to_jobs(c_investigation: CInvestigation) -> None:
    """--jobs 2: the first two branches' live requests are at the fake at the same time (each waits
    for the other), and never more than two at once. The session's investigation
    (tests/why/c_case.py: ``--jobs 2``, its fake's route a ``Meeting`` while the why ran)."""
    inv = c_investigation
    assert inv.rc == 0 and "flipped 3/3" in inv.out.splitlines()[0], inv.out + inv.err[-3000:]
    assert len(inv.sent) == 3 and inv.most == 2, (inv.most, [x.line() for x in inv.sent])


@pytest.mark.slow(
    reason=shown(
        "test_why_lost_repairs.py::test_the_cap_lifted_flips_the_silent_cut_the_apis_layer (a "
        "finding outcome judged on a branch's own round trips) and "
        "test_why_from_a_pytest_test_on_a_recorded_cassette (a run that does not fail refused)"
    )
)
@needs_recorder
def test_a_finding_outcome_is_judged_on_each_branchs_own_round_trips(
    c_run: Path, tmp_path: Path
) -> None:
    """--finding CODE: the recording has it (no baseline run: nothing of the command's is needed);
    a branch fails when the run its agent lived (the prefix served, its live round trips from the
    cursor on) has it: the repaired request, as sent, has no dropped result."""
    with ScriptedUpstream(c_route) as fake:
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--finding",
            "C.dropped_tool_result",
            "--layer",
            "C",
            "--samples",
            "1",
            "--result",
            f"{c_call(c_run)}=rain",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--drop-second", "--expect", "rain", HTTP),
        )
        assert rc == 0, err[-3000:]
        assert len(fake.log) == 1  # the branch's one live request; no baseline
    assert (
        err.splitlines()[0]
        == "looptap why: the recorded run fails by the outcome (the run has a finding "
        "C.dropped_tool_result): read from the recording"
    ), err
    v = orjson.loads(out)["verdict"]
    assert (v["layer"], v["turn"], v["flips"], v["samples"]) == ("C", 1, 1, 1), v
    rc, _out, err = _why(
        tmp_path,
        c_run,
        None,
        "--finding",
        "A.truncated_length",
        "-o",
        str(tmp_path / "w2"),
        agent=("--drop-second", HTTP),
    )
    assert (
        rc == 2 and "does not fail by the outcome (the run has a finding A.truncated_length)" in err
    ), err


@pytest.mark.slow(
    reason=shown(
        "test_why_from_a_pytest_test_on_a_recorded_cassette (the command's code refuses a run that "
        "does not fail) and test_why_confirm.py::test_a_confirm_is_refused_before_anything_is_sent"
    )
)
@needs_recorder
@pytest.mark.parametrize("family", families("chat"))
def test_a_run_that_does_not_fail_is_refused_in_one_line_with_no_request(
    family: str, tmp_path: Path
) -> None:
    # a correct client: the right answer
    run = record_run(tmp_path, c_route, "--expect", "rain", "--family", family, status=0)
    with ScriptedUpstream(c_route) as fake:
        rc, _out, err = _why(
            tmp_path,
            run,
            fake,
            "-o",
            str(tmp_path / "w"),
            agent=("--expect", "rain"),
            family=family,
        )
        assert rc == 2 and fake.log == [], err
        assert err.splitlines() == [
            "looptap why: the recorded run does not fail by the outcome (the command exits with a "
            "status other than 0): nothing to explain, nothing sent"
        ], err
        rc, _out, err = _why(
            tmp_path,
            run,
            fake,
            "--answer-matches",
            "sunny too",
            "-o",
            str(tmp_path / "w2"),
            agent=("--expect", "rain"),
            family=family,
        )
        assert (
            rc == 2
            and fake.log == []
            and err.splitlines()
            == [
                "looptap why: the recorded run does not fail by the outcome (the final answer "
                "matches 'sunny too'): nothing to explain, nothing sent"
            ]
        ), err
        assert not (tmp_path / "w").exists()
        assert not (tmp_path / "w2").exists()


@needs_recorder
def test_the_c_repair_runs_as_ordinary_branches_and_a_resume_keeps_them(
    c_investigation: CInvestigation, tmp_path: Path
) -> None:
    """The default suite's look at a real investigation: the C repair only, K=3 (alone, it has
    only the recorded run to be compared with: 3 of 3 is shown, 2 of 2 is not, docs/why.md). The
    session's investigation (tests/why/c_case.py), its resume on a copy of it."""
    inv = c_investigation
    rc, out, err, sent = inv.rc, inv.out, inv.err, inv.sent
    assert rc == 0, err[-4000:]
    # the result put back in each live request
    assert len(sent) == 3 and all(len(x.request.tool_results()) == 2 for x in sent)
    assert out.splitlines()[0].startswith(
        "verdict: the client (C): C at c1 turn 1 (the dropped result of call"
    ), out
    # "sufficient" only with the repaired call's exact arguments shown (issue 68 item 6)
    assert """(get_weather({"city": "Lyon"})) put back): flipped 3/3""" in out, out
    assert err.splitlines()[0] == (
        "looptap why: the recorded run fails by the outcome (the command exits with a status "
        "other than 0): against the recording (nothing sent) the command exited 1"
    ), err
    assert "flipped 3/3 (95% CI 0.31–1.00)" in out.splitlines()[0], out
    # an earlier why of the same run: refused without --resume; with it, nothing is run again
    w = inv.copy(tmp_path / "w")
    again = (
        "--layer", "C", "--samples", "3", "--result", f"{inv.call}=rain", "-o", str(w),
    )  # fmt: skip
    before = len(inv.fake.log)
    rc, _out, err = _why(
        inv.tmp, inv.run, inv.fake, *again, agent=("--drop-second", "--expect", "rain", HTTP)
    )
    assert rc == 2 and "--resume continues it" in err, err
    rc, out2, err = _why(
        inv.tmp, inv.run, inv.fake, *again, "--resume",
        agent=("--drop-second", "--expect", "rain", HTTP),
    )  # fmt: skip
    assert (
        rc == 0
        and "3 branches kept from the earlier run, 0 to run" in err
        and out2 == out.replace(str(inv.why), str(w))  # (the copy's own directory named)
    ), err
    assert len(inv.fake.log) == before
    # the branches, and beside them the baseline (the command against the whole recording)
    branches = sorted(p.name for p in w.glob("*.jsonl") if p.name != "baseline.jsonl")
    assert len(branches) == 3 and (w / "baseline.jsonl").is_file()
    show = progress.run(
        [*RECORDER, "show", str(w / branches[0])],
        capture_output=True,
        text=True,
        env=why_env(),
    )
    assert (
        show.returncode == 0
        and f"branch of {inv.run} at conversation=c1:turn=1" in show.stdout
        and "EDITED" in show.stdout
    ), show.stdout


@pytest.mark.slow(
    reason=shown(
        "test_the_c_repair_runs_as_ordinary_branches_and_a_resume_keeps_them (a resume keeps "
        "the finished branches)"
    )
)
@needs_recorder
def test_a_ctrl_c_keeps_the_finished_branches_and_not_the_one_it_ended(
    c_run: Path, tmp_path: Path
) -> None:
    """A Ctrl-C (to why's process group, as a terminal sends it) stops the branch running then too:
    its status is the interrupt's, no sample of the outcome. Kept: the finished branches only;
    --resume runs the rest, the interrupted one again."""
    call = c_call(c_run)
    held, release = threading.Event(), threading.Event()
    live = iter(range(1 << 30))

    def route(req: ScriptedRequest) -> Reply:
        if next(live) == 1:  # the second branch's request: held until the Ctrl-C has come
            held.set()
            release.wait(CEILING)
        return c_route(req)

    cmd = [
        *WHY,
        str(c_run),
        "--confdir",
        str(tmp_path / "conf"),
        "--layer",
        "C",
        "--samples",
        "3",
        "--jobs",
        "1",
        "--result",
        f"{call}=rain",
        "-o",
        str(tmp_path / "w"),
    ]
    agent = ["--", sys.executable, str(AGENT), "--drop-second", "--expect", "rain", HTTP]
    with ScriptedUpstream(route) as fake:
        up = ["--upstream", f"openai={fake.url}"]
        proc = subprocess.Popen(
            [*cmd, *up, *agent],
            env=why_env(),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            progress.until(held.is_set, pids=[proc.pid], what="the second branch's request")
            # what Ctrl-C in a terminal does: the whole foreground group
            os.killpg(proc.pid, signal.SIGINT)
            _out, err = progress.communicate(proc)
        finally:
            release.set()
        assert proc.returncode == 130, err[-3000:]
        state = orjson.loads((tmp_path / "w" / "why.json").read_bytes())
        kept = state["branches"][f"C-c1-t1-c-restore-result-{call}"]
        assert list(kept) == ["1"] and kept["1"]["result"] == "flipped", kept
        assert "sample 2/3: interrupted, not kept" in err, err[-3000:]
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--layer",
            "C",
            "--samples",
            "3",
            "--jobs",
            "1",
            "--result",
            f"{call}=rain",
            "-o",
            str(tmp_path / "w"),
            "--resume",
            agent=("--drop-second", "--expect", "rain", HTTP),
        )
    assert rc == 0 and "--resume: 1 branch kept from the earlier run, 2 to run" in err, err[-3000:]
    # the budget said is what is left (issue 55), not the full 3 branches' requests
    assert (
        "looptap why: 2 requests left to send (2 of 3 branches left to run; 1 kept from the "
        "earlier run); estimated cost" in err
    ), err[-3000:]
    assert "flipped 3/3 (95% CI 0.31–1.00)" in out.splitlines()[0], out


@needs_recorder
@SLOW
@pytest.mark.parametrize("family", FAMILIES)
def test_c_cause_the_dropped_result_put_back_flips_it_and_re_sampling_does_not(
    family: str, c_runs: Callable[[str], Path], tmp_path: Path
) -> None:
    c_run = c_runs(family)  # (the module's recording: the same command, recorded once)
    call = c_call(c_run)
    (tmp_path / "lyon.txt").write_text("rain")
    with ScriptedUpstream(c_route) as fake:
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--samples",
            "10",
            "--jobs",
            "2",
            "--result",
            f"{call}=@lyon.txt",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--drop-second", "--expect", "rain", *via(family)),
            family=family,
        )
    assert rc == 0, err[-4000:]
    # the result put back, in the API's own shape, in each C branch's live request (E branches drop
    # it again)
    assert sum(len(x.request.tool_results()) == 2 for x in fake.log) == 10, [
        x.line() for x in fake.log
    ]
    doc = orjson.loads(out)
    v = doc["verdict"]
    assert (v["layer"], v["conversation"], v["turn"], v["determined"]) == ("C", "c1", 1, True), doc[
        "verdict"
    ]
    assert v["flips"] >= 9 and v["samples"] == 10 and v["low"] > 0.5, v
    es = [i for i in doc["interventions"] if i["layer"] == "E"]
    assert es and all(i["samples"] == 10 and i["flips"] <= 1 for i in es), es
    c = next(i for i in doc["interventions"] if i["layer"] == "C")
    branch = tmp_path / "w" / c["branches"][0]["branch"]
    from looptap.cassettes.reading import open_run, origin_in

    # an ordinary branch cassette, its origin named
    origin = origin_in(open_run(branch, whole=True).header)
    assert (
        origin is not None
        and origin["edits"] == [f"restore_result[{call}]"]
        and origin["cursor"]["text"] == "conversation=c1:turn=1"
    ), origin
    state = orjson.loads((tmp_path / "w" / "why.json").read_bytes())
    assert state["verdict"] == v and state["recorded"]["failed"] is True


@needs_recorder
@SLOW
@pytest.mark.parametrize("family", FAMILIES)
def test_e_cause_re_sampling_the_wrong_tool_flips_at_about_its_rate_and_no_c_repair_applies(
    family: str, tmp_path: Path
) -> None:
    # seed 1: the first draw is the wrong tool
    run = record_run(tmp_path, ERoute(seed=1), "--expect", "Sunny", "--family", family)
    # seed 4: 3 of the first 10 draws are the right tool
    with ScriptedUpstream(ERoute(seed=4)) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--answer-not-matches",
            "Sunny",
            "--samples",
            "10",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--expect", "Sunny"),
            family=family,
        )
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    # the client is correct: nothing to repair
    assert not [i for i in doc["interventions"] if i["layer"] == "C"], doc["interventions"]
    e0 = next(i for i in doc["interventions"] if i["layer"] == "E" and i["turn"] == 0)
    assert (e0["flips"], e0["samples"]) == (3, 10) and e0["low"] <= 0.3 <= e0["high"], e0
    e1 = next(i for i in doc["interventions"] if i["layer"] == "E" and i["turn"] == 1)
    assert e1["flips"] == 0 and e1["samples"] == 10, e1
    v = doc["verdict"]
    assert (v["layer"], v["conversation"], v["turn"], v["flips"], v["samples"]) == (
        "E",
        "c1",
        0,
        3,
        10,
    ), v


@needs_recorder
@SLOW
@pytest.mark.parametrize("family", FAMILIES)
def test_a_cause_lifting_the_cap_flips_it_and_continuing_the_cut_answer_flips_it_too(
    family: str, a_runs: Callable[[str], Path], tmp_path: Path
) -> None:
    run = a_runs(family)  # (the module's recording: the same command, recorded once)
    with ScriptedUpstream(a_route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--samples",
            "5",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--expect", "sunny"),
            family=family,
        )
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    a = next(i for i in doc["interventions"] if i["layer"] == "A")
    assert (
        a["turn"] == 1
        and a["edits"] == ["max_tokens=4156"]
        and (a["flips"], a["samples"]) == (5, 5)
    ), a
    # the field the API calls it
    cap = "max_output_tokens" if family == "responses" else "max_tokens"
    lifted = [x for x in fake.log if x.request.body.get(cap) == 4156]
    assert len(lifted) == 5 and all(x.reply and not x.reply.cut for x in lifted), [
        x.line() for x in fake.log
    ]
    # the C repair: each C branch's cut answer continued once, in the API's own form (the cut text
    # in the history it sends)
    continued = [x for x in fake.log if CUT.encode() in orjson.dumps(x.request.body)]
    assert len(continued) == 5 and all(
        x.request.body.get(cap) == 60 and x.reply and not x.reply.cut for x in continued
    ), [x.line() for x in fake.log]
    c = next(i for i in doc["interventions"] if i["layer"] == "C")
    assert (
        c["kind"] == "c-continue"
        and c["runnable"] is True
        and c["edits"] == ["continue=3"]
        and c["turn"] == 1
    ), c
    assert (c["flips"], c["samples"]) == (5, 5) and c["low"] > 0.46, c
    assert all(i["flips"] == 0 for i in doc["interventions"] if i["layer"] == "E"), doc[
        "interventions"
    ]
    v = doc["verdict"]
    # two sufficient fixes: no K separates them, so the report names both (not "not determined … try
    # K=20")
    assert (v["layer"], v["conversation"], v["turn"], v["determined"], v["either"]) == (
        "A",
        "c1",
        1,
        True,
        True,
    ), v
    assert v["tied"] == [c["key"]] and "try K=" not in v["headline"], v
    assert v["headline"].startswith(
        "either change flips it at c1 turn 1: A (the request re-sent live with the token cap "
        "lifted (60 → 4156)) 5/5 (95% CI 0.46–1.00) and C (the truncated answer not treated as "
        "complete: the rest asked for (continued by looptap)) 5/5 (95% CI 0.46–1.00)"
    ), v
    # the branch says the answer at turn 1 was continued by looptap: the continuation request marked
    # as the fork's edit, no C finding on the client
    from looptap.cassettes.reading import open_run

    branch = open_run(tmp_path / "w" / c["branches"][0]["branch"], whole=True)
    marked = [ex for ex in branch.exchanges if ex.edits]
    assert len(marked) == 1 and [m["edit"] for m in marked[0].edits or []] == ["continue"], [
        ex.edits for ex in branch.exchanges
    ]
    assert not [f.code for f in branch.analysis.findings if f.layer == "C"], [
        f.code for f in branch.analysis.findings
    ]


@pytest.fixture(scope="module")
def a_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The A case's failing run of an API family (the answer cut at the cap), recorded once for the
    module."""
    made: dict[str, Path] = {}

    def recorded(family: str) -> Path:
        if RECORDER[0] == "None":
            pytest.skip("no recorder environment")
        if family not in made:
            made[family] = record_run(
                tmp_path_factory.mktemp(f"why-a-{family}"),
                a_route,
                "--expect",
                "sunny",
                "--family",
                family,
            )
        return made[family]

    return recorded


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_a_cut_answer_is_not_expected_continued_when_its_cap_is_lifted_too"
        " and test_dry_run_and_the_budget_guard_send_nothing"
    )
)
@needs_recorder
@pytest.mark.parametrize("family", families("chat", "responses"))
def test_the_continuations_of_a_cut_answer_are_counted_before_anything_is_sent(
    family: str, a_runs: Callable[[str], Path], tmp_path: Path
) -> None:
    """The C repair of a truncated turn may send up to 3 continuation requests per sample: --dry-run
    lists them, and --max-requests / --max-cost count them (the A, E and C branches: (1 + 2 + 1 +
    1 + 3) × 5 = 40 requests), nothing sent."""
    run = a_runs(family)
    with ScriptedUpstream(a_route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--dry-run",
            "--samples",
            "5",
            agent=("--expect", "sunny"),
            family=family,
        )
        assert rc == 0, err
        assert any(
            ln.startswith(
                "would fork at conversation=c1:turn=1 [--edit continue=3]: C: the truncated answer "
                "not treated as complete"
            )
            and ln.endswith("10 live requests (1 + 1 continuation × 5 samples); at most 20")
            for ln in out.splitlines()
        ), out
        assert "25 requests expected (5 a sample of 4 interventions × 5 samples)" in out, out
        assert "at most 40 requests if re-sampled answers differ" in out, out
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--dry-run",
            "--json",
            "--samples",
            "5",
            agent=("--expect", "sunny"),
            family=family,
        )
        c = next(i for i in orjson.loads(out)["interventions"] if i["layer"] == "C")
        # one continuation expected; the turn and its 3 continuations at most
        assert (
            c["kind"],
            c["runnable"],
            c["live_requests_per_sample"],
            c["at_most_per_sample"],
            c["edits"],
        ) == ("c-continue", True, 2, 4, ["continue=3"]), c
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--samples",
            "5",
            "--max-requests",
            "39",
            "-o",
            str(tmp_path / "w"),
            agent=("--expect", "sunny"),
            family=family,
        )
        assert (
            rc == 2 and "40 requests would be sent, over --max-requests 39: nothing sent" in err
        ), err
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--samples",
            "5",
            "--layer",
            "C",
            "--max-cost",
            "0.000001",
            "-o",
            str(tmp_path / "w"),
            agent=("--expect", "sunny"),
            family=family,
        )
        assert (
            rc == 2
            and "over --max-cost 0.000001: nothing sent" in err
            and "at most 20 requests (4 a sample of 1 intervention × 5 samples)" in err
        ), err
        assert fake.log == [] and not (tmp_path / "w").exists()


@pytest.mark.slow(
    reason=shown(
        "tests/replay/test_fork_continue.py (the fork continues a cut answer) and the C verdict "
        "of c_investigation"
    )
)
@needs_recorder
def test_the_c_repair_of_a_truncated_turn_continues_the_cut_answer_and_flips_it(
    a_runs: Callable[[str], Path], tmp_path: Path
) -> None:
    """The default suite's look at the C repair of a truncated turn: one branch, the cut answer
    continued by the fork (one continuation request, the cut text in it), the agent handed one
    answer and passing."""
    run = a_runs("chat")
    with ScriptedUpstream(a_route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--layer",
            "C",
            "--samples",
            "1",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--expect", "sunny"),
        )
    assert rc == 0, err[-4000:]
    assert [x.reply is not None and x.reply.cut for x in fake.log] == [True, False], [
        x.line() for x in fake.log
    ]
    assert CUT.encode() in orjson.dumps(fake.log[1].request.body["messages"])
    v = orjson.loads(out)["verdict"]
    assert (v["layer"], v["turn"], v["flips"], v["samples"], v["intervention"]) == (
        "C",
        1,
        1,
        1,
        "C-c1-t1-c-continue",
    ), v


@needs_recorder
def test_why_from_a_pytest_test_on_a_recorded_cassette(
    c_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper a test calls (cassettes.why.why): the command's code, the verdict returned."""
    from looptap.cassettes.why import Refused, why

    for k, v in why_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    call = c_call(c_run)
    agent = [sys.executable, str(AGENT), "--drop-second", "--expect", "rain", HTTP]
    with ScriptedUpstream(c_route) as fake:
        with pytest.raises(Refused, match="does not fail by the outcome"):
            why(
                c_run,
                agent,
                output=tmp_path / "no",
                answer_matches="Lyon: rain",
                upstream={"openai": fake.url},
            )
        plan = why(c_run, agent, dry_run=True, samples=3)
        assert (
            plan.status == 0
            and plan.verdict == {}
            and any(i["layer"] == "C" and not i["runnable"] for i in plan.doc["interventions"])
        )
        assert fake.log == []
        result = why(
            c_run,
            agent,
            output=tmp_path / "w",
            samples=1,
            layers=["C"],
            results={call: "rain"},
            upstream={"openai": fake.url},
            confdir=c_run.parent / "conf",
        )
    assert result.status == 0 and len(fake.log) == 1
    assert (
        result.verdict["layer"],
        result.verdict["turn"],
        result.verdict["flips"],
        result.verdict["samples"],
    ) == ("C", 1, 1, 1), result.verdict


@pytest.mark.slow(
    reason=shown(
        "test_why_lost_repairs.py::test_the_cap_lifted_flips_the_silent_cut_the_apis_layer "
        "(another outcome judged on each branch) and "
        "test_why_core.py::test_outcomes_parse_and_judge"
    )
)
@needs_recorder
def test_a_check_judges_the_recording_by_running_it_and_each_branch_after_it(
    c_run: Path, tmp_path: Path
) -> None:
    """--check: the recorded outcome from the command run against the whole recording (nothing
    sent), then the check after each branch."""
    call = c_call(c_run)
    with ScriptedUpstream(c_route) as fake:
        rc, out, err = _why(
            tmp_path,
            c_run,
            fake,
            "--check",
            "grep -q rain answer.txt",
            "--layer",
            "C",
            "--samples",
            "1",
            "--result",
            f"{call}=rain",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--drop-second", "--expect", "rain", "--answer-file", "answer.txt", HTTP),
        )
    assert rc == 0, err[-3000:]
    assert len(fake.log) == 1  # the baseline sent nothing; the one branch sent its one live request
    state = orjson.loads((tmp_path / "w" / "why.json").read_bytes())
    assert state["recorded"] == {"failed": True, "exit": 1, "check": 1} and state["outcome"] == {
        "kind": "check",
        "value": "grep -q rain answer.txt",
    }
    assert err.splitlines()[0] == (
        "looptap why: the recorded run fails by the outcome (the check 'grep -q rain answer.txt' "
        "exits with a status other than 0): "
        # said first
        "after the command against the recording (nothing sent) the check exited 1"
    ), err
    assert orjson.loads(out)["recorded"] == state["recorded"]
    v = orjson.loads(out)["verdict"]
    assert (v["layer"], v["flips"], v["samples"]) == ("C", 1, 1), v
    assert "rain" in (tmp_path / "answer.txt").read_text()
