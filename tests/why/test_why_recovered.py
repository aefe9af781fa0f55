"""Issue 68 item 2: a refusal is a cause only when the failure follows from it. A 400 the client
recovered from (it re-sent the same history with the schema mended and was answered: looptap's
``C.retry``) is context, not the verdict; when nothing looptap can change flips the failure (here
a bug in the tool's own code, which no request shows), the verdict says so plainly and never
"more samples cannot change it". The refusals that did decide the run (the API's 400 left
unanswered) are still named: tests/why/test_why_agents.py (openai Chat, Anthropic) and
test_why_core.py (Gemini's text). The real openai SDK, the real recorder and fork, a scripted
upstream (tests/support/scripted.py).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.recorder import needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import _why, record_run, shown
from tests.why.test_why_agents import route

AGENT = ("--bad-schema", "--recover", "--tool-bug", "--expect", "rain")


@pytest.mark.slow(
    reason=shown(
        "test_why_cases.py::test_a_refusal_the_client_recovered_from_is_not_the_verdict (the "
        "same recovered refusal, not determined)"
    )
)
@needs_recorder
def test_a_refusal_the_client_recovered_from_is_context_and_the_cause_is_said_off_the_wire(
    tmp_path: Path,
) -> None:
    run = record_run(tmp_path, route, *AGENT, "--family", "chat")
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path, run, fake, "--samples", "2", "-o", str(tmp_path / "w"), "--json", agent=AGENT
        )
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    v = doc["verdict"]
    head = v["headline"]
    # not the refusal's verdict, and not determined: nothing a fork changes flips a tool's bug
    assert (v["determined"], v["by"], v["layer"]) == (False, "flips", None), v
    assert "more samples cannot change it" not in head, head
    assert head.startswith("not determined: nothing looptap can change flipped the outcome"), head
    assert "the cause is likely off the wire (the tools' code, the environment" in head, head
    # the refusal is named as context, with how the client recovered
    assert (
        "the API's refusal at c1 turn 1 is context, not a cause: the client recovered (turn 2 "
        "re-sent it with the tools changed and was answered)" in head
    ), head
    refused = [i for i in doc["interventions"] if i["kind"] in ("c-refused", "c-recovered")]
    assert [(i["kind"], i["turn"], i["runnable"], i["fix"]) for i in refused] == [
        ("c-recovered", 1, False, None)
    ], refused
    assert "Invalid schema for function 'get_forecast'" in (refused[0]["evidence"] or "")
    ran = [i for i in doc["interventions"] if i["runnable"]]
    assert ran and all((i["flips"], i["samples"]) == (0, 2) for i in ran), ran
    # what ran was the model re-sampled (nothing the refusal calls for: it was answered after)
    assert {i["layer"] for i in ran} == {"E"}, ran
    # the live requests were never refused: the mended schema went out
    assert fake.log and all(x.status == 200 for x in fake.log), [x.line() for x in fake.log]


#: Real refusals that decided their run (recorded by pydantic-ai against the real APIs; the run
#: ends on the 4xx): (corpus file, the refused turn, a phrase of the API's own message).
DECIDED = [
    (
        "pydantic-ai/tests/models/cassettes/test_multimodal_tool_returns/"
        "test_multimodal_tool_return_matrix[direct-url-image-google_vertex].yaml",
        2,
        "Cannot fetch content from the provided URL.",
    ),
    (
        "pydantic-ai/tests/cassettes/test_model_name_suggestions/"
        "test_model_name_suggestion[google].yaml",
        0,
        "models/gemini-3.6-flahs is not found for API version v1beta",
    ),
    (
        "pydantic-ai/tests/models/cassettes/test_anthropic/"
        "test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml",
        0,
        "This model does not support effort level 'xhigh'.",
    ),
]


@pytest.mark.parametrize(
    ("name", "turn", "said"), DECIDED, ids=["gemini-vertex-400", "gemini-404", "anthropic-400"]
)
def test_a_refusal_that_decided_the_run_is_still_named(name: str, turn: int, said: str) -> None:
    """Gemini's (Vertex 400, AI Studio 404) and Anthropic's 400 on real traffic, with no retry
    after them: the refusal is the client's request, named by the verdict when nothing that ran
    flipped the outcome (the other side of the recovered case above)."""
    from looptap.cassettes.reading import open_run
    from looptap.cassettes.why import Tally, interventions, verdict
    from tests.real_corpus import CORPUS

    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus file missing: {name}")
    found = interventions(open_run(path, whole=True))
    refused = [i for i in found if i.kind in ("c-refused", "c-recovered")]
    assert [(i.kind, i.turn) for i in refused] == [("c-refused", turn)], refused
    assert refused[0].evidence and said in refused[0].evidence, refused[0].evidence
    ran = [Tally(i, 0, 3) for i in found if i.missing is None]
    v = verdict([Tally(refused[0]), *ran], 3)
    assert v.determined and v.refused and v.best is not None, v.headline
    assert v.best.intervention is refused[0], v.headline
    assert "more samples cannot change it" in v.headline and "off the wire" not in v.headline
