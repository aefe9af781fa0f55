"""Issue 68 item 6, the budget of an E re-sample whose answer another conversation hears: the main
agent asks a weather sub-agent and reports its answer (tests/why/why_agent.py ``--shape
sub-agent``, its Chat requests sent by urllib, ``--http``: the budget is why's, not the client's;
the real recorder and fork, a scripted upstream). In the recording the
sub-agent says Lyon is sunny (the run fails: no "rain"); re-sampling its last turn changes its
answer when the live model says rain, and the parent's next request, which carries that answer
as the tool's result, goes live too (2 requests a sample); when the live model says the same
words again, the parent's request matches the recording and is served (1). The budget says both:
``live_requests_per_sample`` 2, ``as_recorded_per_sample`` 1, each checked against what the
branches sent (:func:`tests.why.test_why.budget_kept`). Before, an E re-sample was estimated as
answering as recorded only: 1 estimated, 2 sent (Claude Code's sub-agent in bench/why_cases.py:
35 estimated, 39 sent).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import HTTP, _why, record_run, shown
from tests.why.test_why_agents import route as weather

pytestmark = [needs_recorder]

AGENT = ("--expect", "rain", "--shape", "sub-agent", HTTP)
WRONG, RIGHT = "Paris: sunny; Lyon: sunny too, I guess.", "Paris: sunny; Lyon: rain."


def said(answer: str):  # type: ignore[no-untyped-def]
    """The model of test_why_agents, its weather sub-agent's answer ``answer`` whatever its
    tools returned."""

    def route(req: ScriptedRequest) -> Reply:
        if "main agent" in req.system or not req.tool_results():
            return weather(req)
        return Reply.say(answer)

    return route


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_a_short_heard_answer_is_expected_said_again_a_long_one_changed "
        "and test_an_answer_after_thinking_is_expected_said_again_less_often"
    )
)
def test_a_re_sampled_sub_agent_answer_its_parent_hears_is_counted_live(tmp_path: Path) -> None:
    run = record_run(tmp_path, said(WRONG), *AGENT)
    sent = {}
    for answer, budget in ((RIGHT, "changed"), (WRONG, "estimate")):
        out_dir = tmp_path / ("w-" + budget)
        with ScriptedUpstream(said(answer)) as fake:
            rc, out, err = _why(
                tmp_path, run, fake, "--layer", "E", "--samples", "1", "-o", str(out_dir),
                "--json", agent=AGENT, budget=budget,
            )  # fmt: skip
        assert rc == 0, err[-4000:]
        doc = orjson.loads(out)
        (sub,) = [i for i in doc["interventions"] if i["conversation"] == "c2"]
        # its own turn, and the parent's that hears its answer; served when it is said again
        assert (sub["live_requests_per_sample"], sub.get("as_recorded_per_sample")) == (2, 1), sub
        assert sub["at_most_per_sample"] >= 2, sub
        sent[budget] = ([b["sent"] for b in sub["branches"]], sub["flips"])
        if budget == "changed":
            assert "between 3 and 4 requests: 3 if each re-sampled answer that another" in err, err
    assert sent == {"changed": ([2], 1), "estimate": ([1], 0)}, sent
