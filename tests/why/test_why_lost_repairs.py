"""Issue 103 item 4: ``why``'s lost repairs, on scripted recordings (the real recorder and SDKs:
bench/why_cases.py, tests/why/test_why.py's cases; a confirm's runs: test_why_keep.py).

- A dropped result's text is put back whenever the recording holds it, found by the call's id in
  any request of the run (an earlier turn's: a group chat's next speaker given the history
  without it), never only from ``--result``.
- A repair its fork would refuse (the client dropped the call with its result: no request holds a
  call to answer) is not run, not estimated, and said in the fork's own words.
- An answer that used every output token its request allowed is an A suspect (the cap lifted)
  whatever the finish reason the API gave (``stop``, ``end_turn``, ``tool_calls``).

Each fails on f29135f5 (its why read none of these)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.reading import open_run
from looptap.cassettes.replay.live.edits import parse_edit
from looptap.cassettes.replay.live.rewrite import apply_edits
from looptap.cassettes.why import interventions
from looptap.cassettes.why._outcome import Outcome
from tests.cassettes.analysis.scenarios import AgentScript, Call, Script, Tokens
from tests.replay.conftest import write
from tests.why.test_why import why_here

CALLS = (("Paris", "sunny"), ("Lyon", "rain"))


def _group(tmp: Path, keep: str, lyon: str = "rain") -> tuple[Path, list[Call], Any]:
    """The weather agent looks both cities up and answers; the planner, next to speak, is given
    its history with ``keep`` results (``one``: Paris's; ``none``) and sums it up."""
    w = AgentScript("openai_chat", system="You are the weather agent.")
    w.user("Weather in Paris and Lyon?")
    calls = [Call("get_weather", {"city": c}) for c, _ in CALLS]
    w.reply(None, calls=calls)
    w.results("sunny", lyon)
    w.reply(f"Paris: sunny; Lyon: {lyon}.")
    p = AgentScript("openai_chat", system="You are the planner. Sum up what the others said.")
    kept = {calls[0].id} if keep == "one" else set()
    p.history = [h for h in w.history if h.get("role") != "tool" or h["tool_call_id"] in kept]
    p.user("Sum it up.")
    last = p.reply("Paris: sunny; Lyon: unknown.")
    exchanges = [*w.exchanges, *p.exchanges]
    for n, ex in enumerate(exchanges):
        ex.seq = n
    return write(tmp / "run.jsonl", exchanges), calls, last


def _c(run: Path, **kw: Any) -> list[Any]:
    return [i for i in interventions(open_run(run, whole=True), **kw) if i.layer == "C"]


def test_a_dropped_result_the_recording_sent_earlier_is_put_back_as_sent(tmp_path: Path) -> None:
    """On f29135f5: "the text of the dropped result is not in the recording" (it is, in c1 turn
    1's request) and "the call's arguments are not in the recording" (turn 0's answer made it):
    the repair was not run."""
    run, calls, last = _group(tmp_path, "one")
    (repair,) = _c(run)
    lyon = calls[1].id
    assert (repair.kind, repair.turn, repair.missing) == ("c-restore-result", 2, None), repair
    assert repair.edits == [f"restore_result[{lyon}]=rain"]
    assert 'get_weather({"city":"Lyon"})' in repair.what
    assert "its text as the client sent it in c1 turn 1's request" in repair.what
    # the planner's request made the one that carries Lyon's result, where it stood
    body, marks = apply_edits("POST", last.url, last.request_body, [parse_edit(repair.edits[0])])
    tools = [m for m in orjson.loads(body)["messages"] if m.get("role") == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        (calls[0].id, "sunny"),
        (lyon, "rain"),
    ]
    assert [m["edit"] for m in marks] == [f"restore_result[{lyon}]"]
    # --result still wins over the recording
    (given,) = _c(run, results={lyon: "snow"})
    assert given.edits == [f"restore_result[{lyon}]=snow"] and given.missing is None


def test_a_result_sent_with_two_texts_is_the_users_to_choose(tmp_path: Path) -> None:
    """The recording sent Lyon's result with two texts (the client sent it twice, the second
    changed): which one to put back is not the wire's to say; not run, said with where each was
    sent."""
    run, calls, _ = _group(tmp_path, "one")
    exchanges = list(open_run(run, whole=True).exchanges)
    body = orjson.loads(exchanges[1].request_body)
    body["messages"].append({"role": "tool", "tool_call_id": calls[1].id, "content": "drizzle"})
    exchanges[1].request_body = orjson.dumps(body)
    exchanges[1].forget_request_json()
    found = _c(write(tmp_path / "two.jsonl", exchanges))
    (repair,) = [i for i in found if i.kind == "c-restore-result"]
    assert repair.edits == [] and repair.missing is not None
    assert "the recording sent 2 different results for call" in repair.missing, repair.missing


def test_a_recorded_text_that_starts_with_an_at_sign_goes_by_a_file(tmp_path: Path) -> None:
    """A result taken from the recording is a text, never a file's name: ``@/etc/passwd`` sent by
    a tool is put back as those characters, passed to the fork by a file of why's own."""
    from looptap.cassettes.why._branches import Branches

    run, calls, _ = _group(tmp_path, "one", lyon="@/etc/passwd")
    (repair,) = _c(run)
    assert repair.edits == [f"restore_result[{calls[1].id}]=@/etc/passwd"] and not repair.missing
    runner = Branches(run, ["agent"], Outcome("exit", "0"), tmp_path)
    argv = runner.command(repair, 1)
    target, _, value = argv[argv.index("--edit") + 1].partition("=@")
    assert target == f"restore_result[{calls[1].id}]"
    assert Path(value).parent == tmp_path and Path(value).read_text() == "@/etc/passwd"


def _why_json(run: Path, *flags: str) -> dict[str, Any]:
    """``looptap why RUN --dry-run --json`` by its main in this process (a dry run starts nothing;
    the command's process: test_why.py's dry run)."""
    proc = why_here(
        run.parent, str(run), "--dry-run", "--json", "--samples", "2", *flags, "--", "true"
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = orjson.loads(proc.stdout)
    return doc


def test_a_repair_that_cannot_apply_is_not_estimated_and_is_said(tmp_path: Path) -> None:
    """The client dropped Lyon's call from the answer it sent back, and its result: no request at
    or past the cursor holds a call to put a result back for. On f29135f5 the repair was run (each
    branch refused by its fork, "no recorded request at or past the cursor carries it") and
    counted in the estimate; now it is listed, not run, in the fork's words, and not counted."""
    s = Script("openai_chat")
    s.user("Weather in Paris and Lyon?")
    calls = [Call("get_weather", {"city": c}) for c, _ in CALLS]
    s.reply(None, calls=calls, echo=False)
    s.history += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": calls[0].id, "type": "function",
             "function": {"name": "get_weather", "arguments": calls[0].text()}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"},
    ]  # fmt: skip
    s.reply("Paris: sunny.")
    run = write(tmp_path / "run.jsonl", s.exchanges)
    lyon = calls[1].id
    doc = _why_json(run, "--result", f"{lyon}=rain")
    (repair,) = [i for i in doc["interventions"] if i["kind"] == "c-restore-result"]
    assert repair["runnable"] is False, repair
    assert repair["missing"].startswith("the fork cannot apply it: --edit restore_result["), repair
    assert (
        "no recorded request at or past the cursor conversation=c1:turn=1 carries it"
        in (repair["missing"])
    )
    runnable = [i for i in doc["interventions"] if i["runnable"]]
    said = doc["budget"][0]
    assert f"of {len(runnable)} interventions × 2 samples" in said, said
    assert all(i["kind"] == "e-resample" for i in runnable), runnable


@pytest.mark.parametrize(
    ("family", "finish", "code"),
    [
        ("openai_chat", "stop", "A.stop_at_cap"),
        ("anthropic", "end_turn", "A.stop_at_cap"),
        ("openai_chat", "tool_calls", None),
    ],
)
def test_an_answer_at_its_cap_is_an_a_suspect_whatever_its_stop_reason(
    tmp_path: Path, family: str, finish: str, code: str | None
) -> None:
    """60 output tokens reported for a cap of 60: the cap lifted (60 → 4156) is tried, whatever
    the finish reason says. On f29135f5 only a finish reason of the cap's own (``length``,
    ``max_tokens``) made an A suspect: no A repair here."""
    s = Script(family)
    s.user("Weather in Paris and Lyon?")
    s.reply(None, calls=[Call("get_weather", {"city": c}) for c, _ in CALLS])
    s.results("sunny", "rain")
    s.reply("Paris: sunny; Lyon:", finish=finish, usage=Tokens(output=60), max_tokens=60)
    run = open_run(write(tmp_path / "run.jsonl", s.exchanges), whole=True)
    a = [i for i in interventions(run) if i.layer == "A"]
    assert [(i.kind, i.turn, i.finding, i.edits, i.missing) for i in a] == [
        ("a-cap", 1, code, ["max_tokens=4156"], None)
    ], [i.as_json() for i in a]
    assert "(60 → 4156)" in a[0].what
    if code is None:
        assert f"the answer used all 60 output tokens the request allowed (finish reason " \
               f"{finish!r})" in a[0].what  # fmt: skip
    # one token under the cap: no suspect of the cap's
    s.exchanges.pop()
    s.reply("Paris: sunny; Lyon: rain.", finish=finish, usage=Tokens(output=59), max_tokens=60)
    run = open_run(write(tmp_path / "under.jsonl", s.exchanges), whole=True)
    assert not [i for i in interventions(run) if i.layer == "A"]


def test_a_confirm_at_a_refused_request_that_ended_its_conversation_goes_past_the_recording(
    tmp_path: Path,
) -> None:
    """The fork of a confirm whose verdict is a request the API refused, the agent's last: what a
    run sends past it is not in the recording (test_why_keep.py's past-the-recording test runs it);
    a refusal the conversation went on from, or an answered turn, is within the recording."""
    from looptap.cassettes.why._confirm import _fork

    refused = {"type": "error", "error": {"type": "invalid_request_error",
               "message": "tools.0.custom.input_schema: JSON schema is invalid"}}  # fmt: skip
    s = Script("anthropic")
    s.user("Weather in Paris and Lyon?")
    s.reply(None, calls=[Call("get_weather", {"city": c}) for c, _ in CALLS])
    s.results("sunny", "rain")
    s.fail(400, refused)
    run = open_run(write(tmp_path / "run.jsonl", s.exchanges), whole=True)
    fork = _fork(run, "C", "c1", 1)
    assert fork.past_end and fork.most_requests == 2, fork
    assert not _fork(run, "C", "c1", 0).past_end
    s.reply("Paris: sunny; Lyon: rain.")  # the client went on after the refusal
    run = open_run(write(tmp_path / "on.jsonl", s.exchanges), whole=True)
    assert not _fork(run, "C", "c1", 1).past_end


def silent_cut(req: Any) -> Any:
    """Paris looked up; then the answer, cut at the request's cap of 60 while the API says it
    stopped by itself (``end_turn``, ``stop``) and reports exactly 60 output tokens; whole under a
    cap of 100 or more (bench/why_cases.py's ``cap-silent``)."""
    from tests.support.scripted import Reply
    from tests.why.test_why import CUT

    if not req.tool_results():
        return Reply.tool("get_weather", {"city": "Paris"})
    cap = req.body.get("max_tokens") or 0
    if cap >= 100:
        return Reply.say(f"{CUT} sunny today.")
    return Reply(text=CUT, usage_out=cap)


@pytest.fixture(scope="module")
def silent_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The silent cut recorded once for the module by the real recorder and the anthropic SDK
    (tests/why/why_agent.py): 60 output tokens for a cap of 60 with ``stop_reason: end_turn``;
    the agent fails (no "sunny")."""
    from tests.support.recorder import RECORDER
    from tests.why.test_why import record_run

    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    tmp = tmp_path_factory.mktemp("why-silent-cut")
    return record_run(tmp, silent_cut, "--expect", "sunny", "--family", "anthropic")


def test_a_silent_cut_recorded_from_the_anthropic_sdk_is_an_a_suspect(silent_run: Path) -> None:
    """``why`` tries the cap lifted (the case the issue names: on f29135f5 no A repair, and the
    agent succeeds with a larger cap: bench/why_cases.py ``cap-silent`` runs the branches and the
    confirm)."""
    doc = _why_json(silent_run)
    (cap,) = [i for i in doc["interventions"] if i["layer"] == "A"]
    assert (cap["kind"], cap["turn"], cap["finding"], cap["edits"], cap["runnable"]) == (
        "a-cap", 1, "A.stop_at_cap", ["max_tokens=4156"], True
    ), cap  # fmt: skip


def test_the_cap_lifted_flips_the_silent_cut_the_apis_layer(
    silent_run: Path, tmp_path: Path
) -> None:
    """The default run's ``why`` whose verdict is the API's (A), end to end on Anthropic: one
    branch of the cap lifted (``max_tokens=4156``) from c1 turn 1, the whole answer. The outcome is
    the finding (``--finding A.stop_at_cap``: read from the recording, no baseline run; a branch
    judged on its own round trips), so the one process run is the branch's (session 55: the K=10
    A cases of test_why.py, and test_why.py's finding outcome, run at night)."""
    from tests.support.scripted import ScriptedUpstream
    from tests.why.test_why import _why

    (tmp_path / "conf").symlink_to(silent_run.parent / "conf")
    with ScriptedUpstream(silent_cut) as fake:
        rc, out, err = _why(
            tmp_path, silent_run, fake, "--finding", "A.stop_at_cap", "--layer", "A",
            "--samples", "1", "-o", str(tmp_path / "w"), "--json", agent=("--expect", "sunny"),
            family="anthropic",
        )  # fmt: skip
    assert rc == 0, err[-3000:]
    assert err.splitlines()[0] == (
        "looptap why: the recorded run fails by the outcome (the run has a finding "
        "A.stop_at_cap): read from the recording"
    ), err
    assert [x.request.body.get("max_tokens") for x in fake.log] == [4156], [
        x.line() for x in fake.log
    ]
    v = orjson.loads(out)["verdict"]
    assert (v["layer"], v["turn"], v["flips"], v["samples"], v["intervention"]) == (
        "A", 1, 1, 1, "A-c1-t1-a-cap"
    ), v  # fmt: skip
