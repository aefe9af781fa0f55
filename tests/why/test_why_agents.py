"""``looptap why`` where agents are built today (issue 55): a bug inside a sub-agent, a bug after a
handoff, a request the API refuses, and branches whose fork failed. Scripted fakes of the
project's own (tests/support/scripted.py) drive the agents of tests/why/why_agent.py (``--shape``:
Anthropic Messages on its SDK; Chat's requests sent by urllib, ``--http``, where the test is about
why, on the openai SDK for the refused schema) through the real recorder and the real fork.

The default suite runs small K (one intervention layer where that is the claim); the must-show
figures at K=10 run with LOOPTAP_SLOW=1.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import AGENT as AGENT_PY
from tests.why.test_why import (
    HTTP,
    SLOW,
    _why,
    families,
    record_run,
    shown,
    via,
    why_env,
)

pytestmark = [needs_recorder]

#: The weather tool's answers (what tells them from a sub-agent's answer or a handoff's result).
WEATHER = ("sunny", "rain", "cloudy")
#: The families the must-show cases run on.
FAMILIES = ["chat", "anthropic"]


def refused_schema(req: ScriptedRequest) -> Reply | None:
    """The API's 400 for a tool schema it cannot read (``properties`` an array), in its own words:
    OpenAI's ``Invalid schema for function '…': … is not of type 'object'.`` with its ``param``
    and ``code`` (as quoted in evalstate/fast-agent#143 and FoundationAgents/OpenManus#1162),
    Anthropic's ``tools.N.custom.input_schema: JSON schema is invalid…`` (anthropics/claude-code
    #63673, #9605); ``None`` when every schema is fine."""
    for i, name in enumerate(req.tools):
        schema = req.tool_schema(name) or {}
        if isinstance(schema.get("properties"), list):
            if req.family == "anthropic":
                return Reply.refuse(
                    f"tools.{i}.custom.input_schema: JSON schema is invalid. It must match JSON "
                    "Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more "
                    "about tool use at https://docs.claude.com/en/docs/tool-use."
                )
            return Reply.refuse(
                f"Invalid schema for function '{name}': {schema['properties']} is not of type "
                "'object'.",
                param=f"tools[{i}].function.parameters",
                code="invalid_function_parameters",
            )
    return None


def route(req: ScriptedRequest) -> Reply:
    """The main agent asks the weather agent and reports its answer; the triage agent hands over
    to it; the weather agent calls the tool for both cities in one answer and answers right only
    when both results came back."""
    refused = refused_schema(req)
    if refused is not None:
        return refused
    results = req.tool_results()
    if "main agent" in req.system:
        if not results:
            return Reply.tool("ask_weather_agent", {"question": "Weather in Paris and Lyon?"})
        return Reply.say(f"Report: {results[-1]}")
    if "triage" in req.system:
        return Reply.tool("transfer_to_weather_agent", {})
    weather = [r for r in results if r in WEATHER]
    if not weather:
        return Reply(
            calls=(Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Lyon"}))
        )
    return Reply.say(
        "Paris: sunny; Lyon: rain."
        if "rain" in weather
        else "Paris: sunny; Lyon: sunny too, I guess."
    )


AGENT = ("--drop-second", "--expect", "rain")
#: The agent whose Chat requests are sent by urllib (test_why.py's ``HTTP``), for the tests about
#: where why puts a change and what it counts, whose client is not what they show; the refused
#: schema runs on the SDKs (their errors on the API's 400).
LINKED = (*AGENT, HTTP)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """A failing run of a family and shape, recorded once for the module."""
    made: dict[tuple[str, ...], Path] = {}

    def recorded(family: str, shape: str, *extra: str) -> Path:
        if RECORDER[0] == "None":
            pytest.skip("no recorder environment")
        key = (family, shape, *extra)
        if key not in made:
            tmp = tmp_path_factory.mktemp(f"why-{family}-{shape}")
            made[key] = record_run(tmp, route, *extra, "--family", family, "--shape", shape)
        return made[key]

    return recorded


def dropped(run: Path) -> tuple[str, str, int]:
    """The call whose result the client dropped, and where (conversation, turn)."""
    from looptap.cassettes.reading import open_run

    f = next(
        f for f in open_run(run, whole=True).analysis.findings if f.code == "C.dropped_tool_result"
    )
    assert f.tool_call_id and f.conversation and f.turn is not None
    return str(f.tool_call_id), f.conversation, f.turn


def _lines(directory: Path, pattern: str) -> list[str]:
    return [
        ln
        for log in sorted(directory.glob("*.log"))
        for ln in log.read_text().splitlines()
        if re.search(pattern, ln)
    ]


# ---------------------------------------------------------------------------------------------
# a bug inside a sub-agent


@pytest.mark.slow(
    reason=shown(
        "test_why_short_prompt.py::"
        "test_a_sub_agent_asked_hi_is_linked_by_its_call_and_its_repair_reaches_the_parent "
        "(the sub-agent's repair reaching its parent)"
    )
)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_bug_inside_a_sub_agent_is_found_by_its_repair_reaching_the_parent(
    family: str, runs: Callable[..., Path], tmp_path: Path
) -> None:
    """The sub-agent (c2) drops a tool result; the C repair there changes its answer, which comes
    back to the main agent (c1) as a tool result: c1 goes live from that request (its first turn
    still served) and the branch passes. Before: c1 stayed replayed, the fork failed closed, and
    the branch was scored a failed sample (0/2, "try K=8"). ``--result`` from a file with a
    trailing newline puts back the text without it; no ``-o``: a new directory beside the run.
    K=3: the repair runs alone, against the recorded run only (3 of 3 is shown, 2 of 2 is not)."""
    run = runs(family, "sub-agent", *AGENT, *via(family))
    call, conversation, turn = dropped(run)
    assert (conversation, turn) == ("c2", 1)
    (tmp_path / "lyon.txt").write_text("rain\n")
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--layer",
            "C",
            "--samples",
            "3",
            "--result",
            f"{call}=@{tmp_path / 'lyon.txt'}",
            "--json",
            agent=(*AGENT, *via(family), "--shape", "sub-agent"),
            family=family,
        )
    assert rc == 0, err[-4000:]
    v = orjson.loads(out)["verdict"]
    assert (v["layer"], v["conversation"], v["turn"], v["flips"], v["samples"]) == (
        "C",
        "c2",
        1,
        3,
        3,
    ), v
    # the one intervention that ran: the headline does not claim the others were tried
    assert v["headline"].endswith("no other intervention ran"), v["headline"]
    # each branch: the sub-agent's repaired turn (the result put back, without the file's
    # newline), then the main agent's turn that received its answer, both live
    sub = [x for x in fake.log if "main agent" not in x.request.system]
    main = [x for x in fake.log if "main agent" in x.request.system]
    assert [x.request.tool_results()[-1] for x in sub] == ["rain"] * 3, [x.line() for x in fake.log]
    assert [x.request.tool_results()[-1] for x in main] == ["Paris: sunny; Lyon: rain."] * 3
    directory = run.with_name("run.why")
    assert f"the branches go to {directory} (a new directory beside the run" in err, err
    reached = _lines(directory, r"c1 went live from turn 1: the change past the cursor")
    assert len(reached) == 3 and "(c2 turn 1) reached it (C: the tool result for" in reached[0], (
        reached
    )


@SLOW
@pytest.mark.parametrize("family", FAMILIES)
def test_must_show_the_repair_inside_the_sub_agent_flips_at_least_9_of_10(
    family: str, runs: Callable[..., Path], tmp_path: Path
) -> None:
    run = runs(family, "sub-agent", *AGENT)
    call, _, _ = dropped(run)
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--samples",
            "10",
            "--result",
            f"{call}=rain",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=(*AGENT, "--shape", "sub-agent"),
            family=family,
        )
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    v = doc["verdict"]
    print(family, v["headline"])
    assert (v["layer"], v["conversation"], v["turn"], v["determined"]) == ("C", "c2", 1, True), v
    assert v["flips"] >= 9 and v["samples"] == 10, v
    assert all(i["flips"] == 0 for i in doc["interventions"] if i["layer"] == "E"), doc


# ---------------------------------------------------------------------------------------------
# a handoff, the bug after it


@pytest.mark.slow(
    reason=shown(
        "tests/cassettes/analysis/test_conversations.py (a handoff threaded) and "
        "test_why_core.py::test_interventions_from_a_runs_findings_and_turns (the repair at the "
        "finding's turn)"
    )
)
@pytest.mark.parametrize("family", families("chat", of=FAMILIES))
def test_a_bug_after_a_handoff_is_the_clients_at_the_weather_agents_turn(
    family: str, runs: Callable[..., Path], tmp_path: Path
) -> None:
    run = runs(family, "handoff", *AGENT, *via(family))
    call, conversation, turn = dropped(run)
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--samples",
            "1",
            "--result",
            f"{call}=rain",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=(*AGENT, *via(family), "--shape", "handoff"),
            family=family,
        )
    assert rc == 0, err[-4000:]
    doc = orjson.loads(out)
    v = doc["verdict"]
    assert (v["layer"], v["conversation"], v["turn"], v["flips"], v["samples"]) == (
        "C",
        conversation,
        turn,
        1,
        1,
    ), v
    # the repaired turn is the weather agent's, after the hand-over
    repaired = [x for x in fake.log if len(x.request.tool_results()) == 3]
    assert repaired and all("triage" not in x.request.system for x in repaired), [
        x.line() for x in fake.log
    ]
    es = [i for i in doc["interventions"] if i["layer"] == "E"]
    assert es and all(i["flips"] == 0 and i["samples"] == 1 for i in es), es


# ---------------------------------------------------------------------------------------------
# a request the API refuses


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_a_refused_request_decides_when_nothing_that_ran_flipped_it and "
        "test_why_recovered.py::test_a_refusal_that_decided_the_run_is_still_named (real "
        "refusals)"
    )
)
@pytest.mark.parametrize("family", families("chat", of=FAMILIES))
def test_a_refused_schema_is_the_clients_request_with_the_apis_message_and_no_more_samples(
    family: str, runs: Callable[..., Path], tmp_path: Path
) -> None:
    """The client offers a tool whose schema the API refuses (HTTP 400) from its second request
    on. The suspect is the client's request (C), with the API's message as evidence and the fork
    edit that tests a fix; no retry is listed (the same request is refused again), the one
    re-sample that runs cannot flip it, and no "try K=…" is advised. Running the fix said
    passes."""
    run = runs(family, "plain", "--bad-schema", "--expect", "rain")
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
            fake,
            "--samples",
            "2",
            "-o",
            str(tmp_path / "w"),
            "--json",
            agent=("--bad-schema", "--expect", "rain"),
            family=family,
        )
        assert rc == 0, err[-4000:]
        doc = orjson.loads(out)
        v = doc["verdict"]
        # the E re-sample of turn 0 holds turn 1: answered as recorded, its request matched and
        # the recorded 400 was served; no live request was refused
        assert fake.log and all(x.status != 400 for x in fake.log), [x.line() for x in fake.log]
        said = (
            "custom.input_schema: JSON schema is invalid"
            if family == "anthropic"
            else "Invalid schema for function 'get_forecast': ['city'] is not of type 'object'."
        )
        assert (v["layer"], v["conversation"], v["turn"], v["by"], v["determined"]) == (
            "C",
            "c1",
            1,
            "refusal",
            True,
        ), v
        assert said in v["evidence"] and v["evidence"] in v["headline"], v
        assert v["fix"] == "--edit 'tool_schema[get_forecast]=@SCHEMA.json'", v
        assert "try K=" not in v["headline"] and "more samples cannot change it" in v["headline"]
        assert not [i for i in doc["interventions"] if i["layer"] == "A"], doc["interventions"]
        e0 = next(i for i in doc["interventions"] if i["layer"] == "E")
        assert (e0["turn"], e0["flips"], e0["samples"]) == (0, 0, 2), e0
        # the fork the verdict names, run with a schema the API reads: the run passes
        (tmp_path / "schema.json").write_text(
            '{"type": "object", "properties": {"city": {"type": "string"}}}\n'
        )
        fixed = progress.run(
            [
                *RECORDER,
                "run",
                "--from",
                f"{run}@conversation=c1:turn=1",
                "--edit",
                f"tool_schema[get_forecast]=@{tmp_path / 'schema.json'}",
                "--upstream",
                f"{'anthropic' if family == 'anthropic' else 'openai'}={fake.url}",
                "--confdir",
                str(tmp_path / "conf"),
                "-o",
                str(tmp_path / "fixed.jsonl"),
                "--",
                sys.executable,
                str(AGENT_PY),
                "--bad-schema",
                "--expect",
                "rain",
                "--family",
                family,
            ],
            env=why_env(),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert fixed.returncode == 0, fixed.stderr[-3000:]
        assert fake.log[-1].status == 200


# ---------------------------------------------------------------------------------------------
# branches whose fork failed


@pytest.mark.slow(
    reason=shown(
        "test_why_core.py::test_branches_whose_fork_failed_are_no_sample_and_the_verdict_says_what_is_left"
    )
)
def test_a_branch_whose_fork_failed_is_no_sample_and_the_verdict_says_how_many_are_left(
    runs: Callable[..., Path], tmp_path: Path
) -> None:
    """The agent's second run asks another question (the client diverges before the cursor): its
    fork fails closed, and that branch is listed with the reason, never counted as a failed
    sample; the verdict rests on the two samples left."""
    run = runs("chat", "plain", *LINKED)
    call, _, _ = dropped(run)
    with ScriptedUpstream(route) as fake:
        rc, out, err = _why(
            tmp_path,
            run,
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
            agent=(*LINKED, "--vary", str(tmp_path / "runs.txt")),
        )
    assert rc == 0, err[-4000:]
    head = out.splitlines()[0]
    assert (
        "flipped 2/2" in head
        and (
            "[2 samples left: 1 of 3 branches is no sample: the fork failed: the client diverged "
            "before the cursor at conversation c1, turn 0"
        )
        in head
    ), out
    state = orjson.loads((tmp_path / "w" / "why.json").read_bytes())
    results = [r["result"] for r in state["branches"][f"C-c1-t1-c-restore-result-{call}"].values()]
    assert sorted(results) == ["flipped", "flipped", "invalid"], state["branches"]
    assert len(fake.log) == 2  # the diverging branch sent nothing


@pytest.mark.slow(
    reason=shown(
        "tests/replay/test_fork_options.py::test_an_edit_that_meets_an_item_the_client_rewrote_says_so"
    )
)
def test_an_edit_note_never_says_the_client_rewrote_a_result_it_never_sent(
    tmp_path: Path,
) -> None:
    """The dropped result put back at turn 1 is carried again by turn 2's request, whose list
    of results is longer: the fork must not say the client "rewrote the item" (it never sent
    it)."""

    def three_turns(req: ScriptedRequest) -> Reply:
        results = req.tool_results()
        if not results:
            return route(req)
        if not any(r.startswith("12:00") for r in results):
            return Reply.tool("get_time", {"city": "Paris"})
        return route(req)

    run = record_run(tmp_path, three_turns, *LINKED)
    call, _, turn = dropped(run)
    with ScriptedUpstream(three_turns) as fake:
        rc, _out, err = _why(
            tmp_path,
            run,
            fake,
            "--layer",
            "C",
            "--samples",
            "1",
            "--result",
            f"{call}=rain",
            "-o",
            str(tmp_path / "w"),
            agent=LINKED,
        )
    assert rc == 0 and turn == 1, err[-4000:]
    assert len([x for x in fake.log if call.encode() in orjson.dumps(x.request.body)]) == 2
    assert _lines(tmp_path / "w", r"edit restore_result") and not _lines(
        tmp_path / "w", "rewrote"
    ), _lines(tmp_path / "w", "edit")
