"""A branch is judged on the run as its agent lived it (issue 68 item 1): the served prefix, its
live turns and every recorded turn served after the change, in every conversation, by the reader
that judged the recording. Before, a branch was judged on its own live round trips only: re-sampling
a correct sub-agent (or the first speaker of a group chat) left the parent's failing turns served
from the recording, outside the branch, so the sub-agent's answer stood for the run's and every such
branch was scored a flip, though the agent printed the same failure and exited 1.

Scripted fakes (tests/support/scripted.py) drive the agents of tests/why/why_agent.py (Chat's
requests sent by urllib, ``--http``; Anthropic Messages on its SDK, the version in .venv) through
the real recorder and the real fork.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import HTTP, VARIANT, _why, record_run, shown, via
from tests.why.test_why_agents import dropped

pytestmark = [needs_recorder]

CITIES = {"Paris": "sunny", "Lyon": "rain"}


def route(req: ScriptedRequest) -> Reply:
    """The main agent asks the weather sub-agent about each city in one answer and reports what
    came back; the planner of a group chat names the cities; the weather agent calls the tool for
    the cities it is asked about and answers with what came back."""
    results = req.tool_results()
    if "main agent" in req.system:
        if not results:
            return Reply(
                calls=tuple(
                    Call("ask_weather_agent", {"question": f"What is the weather in {c} today?"})
                    for c in CITIES
                )
            )
        return Reply.say("Report: " + " ".join(results))
    if "planner" in req.system:
        said = req.user_texts()[-1]
        if "weather agent said" not in said:
            return Reply.say("Look up Paris and Lyon, one call each.")
        told = said.split("said: ", 1)[1].split("\n")[0]
        return Reply.say(f"Summary: {told}" + ("" if "Lyon" in told else " Lyon: not known."))
    asked = [c for c in CITIES if c in " ".join(req.user_texts())]
    if not results:
        return Reply(calls=tuple(Call("get_weather", {"city": c}) for c in asked))
    return Reply.say(" ".join(f"{c}: {r}." for c, r in zip(asked, results, strict=False)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    made: dict[tuple[str, ...], Path] = {}

    def recorded(family: str, shape: str) -> Path:
        if RECORDER[0] == "None":
            pytest.skip("no recorder environment")
        if (family, shape) not in made:
            tmp = tmp_path_factory.mktemp(f"lived-{family}-{shape}")
            made[(family, shape)] = record_run(
                tmp, route, "--drop-second", "--expect", "rain", "--family", family,
                "--shape", shape, *via(family),
            )  # fmt: skip
        return made[(family, shape)]

    return recorded


def _es(doc: dict[str, object]) -> list[dict[str, object]]:
    return [i for i in doc["interventions"] if i["layer"] == "E"]  # type: ignore[index,union-attr]


#: The outcomes the parent's failure is judged by: the exit status, its finding, its answer.
OUTCOMES = {
    "exit": (),
    "finding": ("--finding", "C.dropped_tool_result"),
    "answer": ("--answer-not-matches", "rain"),
}


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_a_short_heard_answer_is_expected_said_again_a_long_one_changed "
        "(an answer another hears) and test_why_short_prompt.py (a sub-agent's repair reaching "
        "its parent)"
    )
)
@pytest.mark.parametrize(
    ("family", "outcome"),
    [
        ("chat", "exit"),
        ("chat", "finding"),
        ("chat", "answer"),
        pytest.param("anthropic", "answer", marks=pytest.mark.slow(reason=VARIANT)),
    ],
)
def test_a_correct_sub_agent_re_sampled_is_no_flip_while_the_parent_drops_its_answer(
    family: str, outcome: str, runs: Callable[..., Path], tmp_path: Path
) -> None:
    """The main agent (c1) asks the weather sub-agent twice in one answer; the second sub-agent
    (Lyon) answers right ("Lyon: rain.") and the main agent drops its answer. Re-sampling the
    sub-agent's last turn changes nothing: the main agent's next request is the recorded one,
    served, and it fails as recorded. Before, the branch held only the sub-agent's live turn, so
    its "Lyon: rain." was the run's answer and its findings none: a flip in every sample (the
    verdict "the model (E) at the sub-agent"). Now no E intervention flips and none is named;
    the C repair (the dropped answer put back) flips every sample, its parent turn live."""
    run = runs(family, "sub-agents")
    call, _, _ = dropped(run)
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path, run, fake, *OUTCOMES[outcome], "--samples", "1", "--jobs", "2",
            "--result", f"{call}=Lyon: rain.", "-o", str(tmp_path / "w"), "--json",
            agent=("--drop-second", "--expect", "rain", "--shape", "sub-agents", *via(family)),
            family=family,
        )  # fmt: skip
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    es = _es(doc)
    sub = [i for i in es if i["conversation"] != "c1"]
    assert sub, doc["interventions"]  # the sub-agents' last turns were suspects, and ran
    assert all(i["samples"] == 1 and i["flips"] == 0 for i in es), [
        (i["conversation"], i["turn"], i["flips"], i["samples"]) for i in es
    ]
    v = doc["verdict"]
    assert (v["layer"], v["conversation"], v["turn"], v["flips"]) == ("C", "c1", 1, 1), v


@pytest.mark.slow(
    reason=shown(
        "test_why_repair.py::test_why_puts_the_dropped_answer_back_as_the_c_repair and "
        "c_investigation's C verdict (a dropped result is the client's)"
    )
)
@pytest.mark.parametrize(
    "outcome", ["finding", pytest.param("answer", marks=pytest.mark.slow(reason=VARIANT))]
)
def test_a_group_chat_whose_second_agent_drops_a_result_is_not_the_models(
    outcome: str, runs: Callable[..., Path], tmp_path: Path
) -> None:
    """A group chat: the planner (c1) speaks, the weather agent (c2) drops the result of its
    second call and answers "Paris: sunny.", the planner sums up ("… Lyon: not known."), the
    final answer. Re-sampling the weather agent leaves its answer as it was, so the planner's
    summary is served as recorded and the run fails as it did: no flip. Before, the branch's
    answer was the weather agent's live "Paris: sunny." (no "not known") and its findings those
    of its own turns: the model (E) at c2 was scored a flip."""
    run = runs("chat", "group")
    judged = (
        ("--finding", "C.dropped_tool_result")
        if outcome == "finding"
        else ("--answer-matches", "not known")
    )
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path, run, fake, *judged, "--layer", "E", "--samples", "1", "--jobs", "2",
            "-o", str(tmp_path / "w"), "--json",
            agent=("--drop-second", "--expect", "rain", "--shape", "group", HTTP),
        )  # fmt: skip
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    es = _es(doc)
    assert any(i["conversation"] == "c2" for i in es), es
    assert all(i["samples"] == 1 and i["flips"] == 0 for i in es), [
        (i["conversation"], i["turn"], i["flips"], i["samples"]) for i in es
    ]
    assert doc["verdict"]["flips"] == 0, doc["verdict"]


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_a_short_heard_answer_is_expected_said_again_a_long_one_changed "
        "(the hearers of an answer counted)"
    )
)
def test_a_repair_in_a_group_chat_counts_the_next_speaker_that_hears_its_answer(
    runs: Callable[..., Path], tmp_path: Path
) -> None:
    """The group chat's weather agent (c2) drops Lyon's result; putting it back changes its
    answer, which the planner hears in its next request (c3: "the weather agent said: …"), though
    no call links the two: that request goes live too. The budget counts it: 2 requests a sample,
    2 sent (:func:`tests.why.test_why.budget_kept` checks the estimate within 10% of what was
    sent, and never more sent than the at-most). Before, 1 was estimated, and at most 1, and 2
    were sent (the group chat's 20 → 25 in bench/why_cases.py at K=5)."""
    run = runs("chat", "group")
    call, conversation, _ = dropped(run)
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path, run, fake, "--layer", "C", "--samples", "1", "--result", f"{call}=rain",
            "-o", str(tmp_path / "w"), "--json",
            agent=("--drop-second", "--expect", "rain", "--shape", "group", HTTP),
        )  # fmt: skip
    assert rc == 0, err[-4000:]
    (repair,) = orjson.loads(out)["interventions"]
    assert repair["conversation"] == conversation and repair["flips"] == 1, repair
    assert repair["live_requests_per_sample"] == 2 == repair["at_most_per_sample"], repair
    assert [b["sent"] for b in repair["branches"]] == [2], repair["branches"]


#: An agent that runs only the last loop of the recorded run (as the agent of an imported trace
#: may): it sends the run's last recorded request again, as recorded, and fails.
LAST_LOOP = """
import os, sys, urllib.request
from urllib.parse import urlsplit
from looptap.cassettes.reading import open_run
last = list(open_run(sys.argv[1], whole=True).exchanges)[-1]
base = urlsplit(os.environ["OPENAI_BASE_URL"])
req = urllib.request.Request(
    f"{base.scheme}://{base.netloc}{urlsplit(last.url).path}", data=last.request_body,
    headers={"content-type": "application/json", "authorization": "Bearer sk-test-why"},
)
urllib.request.urlopen(req, timeout=120).read()
sys.exit(1)
"""


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_branches_whose_fork_failed_are_no_sample_and_the_verdict_says_what_is_left"
    )
)
def test_a_branch_at_a_conversation_the_agent_never_re_runs_is_no_sample(
    runs: Callable[..., Path], tmp_path: Path
) -> None:
    """The agent re-runs only the main agent's last turn, never its sub-agents: re-sampling a
    sub-agent sends nothing live (the intervention never happened), so the branch is no sample,
    said so, and no flip rate is counted for it; re-sampling the main agent's last turn sends it
    live and is judged. Before, each sub-agent's branch was judged on the agent's exit: "0/1
    flipped" for an intervention that never happened (issue 68)."""
    from looptap.cassettes.reading import open_run
    from tests.support import progress
    from tests.why.test_why import WHY, why_env

    run = runs("chat", "sub-agents")
    opened = open_run(run, whole=True)
    last = list(opened.exchanges)[-1].seq
    main = next(c for c, seqs in _conversations(opened).items() if last in seqs)
    script = tmp_path / "last_loop.py"
    script.write_text(LAST_LOOP)
    with ScriptedUpstream(route) as fake:
        proc = progress.run(
            [
                *WHY, str(run), "--upstream", f"openai={fake.url}", "--confdir",
                str(tmp_path / "conf"), "--layer", "E", "--samples", "1", "--jobs", "2", "-o",
                str(tmp_path / "w"), "--json", "--", sys.executable, str(script), str(run),
            ],
            env=why_env(), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    es = _es(orjson.loads(proc.stdout))
    never = [i for i in es if i["conversation"] != main]
    assert never, es  # the sub-agents' turns were suspects
    for i in never:
        (b,) = i["branches"]
        assert i["samples"] == 0 and i["flips"] == 0 and b["result"] == "invalid", i
        assert b["why"].startswith("the intervention never happened"), b
    ran = [i for i in es if i["conversation"] == main and i["samples"] == 1]
    assert ran and all(i["flips"] == 0 for i in ran), es


def _conversations(opened: object) -> dict[str, list[int]]:
    """Each conversation's recorded seqs, as why labels them."""
    a = opened.analysis  # type: ignore[attr-defined]
    return {c.id: list(c.turns) for c in a.conversations}
