"""Issue 95 items 3 and 4: what ``looptap why`` suspects, says and spends.

- A suspect only for what the client did not do: a 503 the openai SDK retried itself (and got an
  answer for: looptap's ``C.retry``) is context, never "the retry the client did not make".
- An intervention whose substitute cannot be right (a failed tool call answered with another
  query's answer) says so, and its no-flip settles nothing.
- The headline never places the cause off the wire while a cause on the wire stands untested
  (not run, run with a substitute that cannot be right, combinations of repairs not tried).
- A confirm says first the most it will send, and keeps to it: a fixed agent that sends more
  than the recording is stopped there, never past it.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from looptap.cassettes.why import Intervention, Tally, interventions, verdict
from looptap.cassettes.wire import Exchange
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream
from tests.why.test_why import AGENT, c_route, why_env


def _tally(i: Intervention, flips: int = 0, samples: int = 0) -> Tally:
    return Tally(i, flips=flips, samples=samples)


def test_no_cause_is_placed_off_the_wire_while_one_on_it_stands_untested() -> None:
    """On c86d115d each of these said "the cause is likely off the wire"."""
    e = _tally(Intervention("E", "c1", 1, "re-sampled", "e-resample"), 0, 5)
    c = Intervention("C", "c1", 1, "the dropped result put back", "c-restore-result",
                     missing="give --result CALL=@FILE")  # fmt: skip
    v = verdict([_tally(c), e], 5)
    assert "the cause is likely off the wire" not in v.headline, v.headline
    assert (
        "a cause on the wire stands untested: C c1 turn 1 (the dropped result put back) not run: "
        "give --result CALL=@FILE; so it cannot be placed off the wire" in v.headline
    ), v.headline
    # run with a substitute that cannot be right, and no flip: nothing settled
    t = Intervention("C", "c1", 1, "the tool's call answered", "c-tool-answer",
                     caveat="the answer put in is another query's")  # fmt: skip
    v = verdict([_tally(t, 0, 5), e], 5)
    assert "likely off the wire" not in v.headline and (
        "C c1 turn 1 (the tool's call answered) ran, but the answer put in is another query's"
        in v.headline
    ), v.headline
    # two repairs that may be needed together, their combinations not tried (over the limits)
    a = _tally(Intervention("A", "c1", 1, "cap lifted", "a-cap"), 0, 5)
    v = verdict([a, e], 5, ["1 combination of repairs (causes needed together) not tried"])
    assert "likely off the wire" not in v.headline and "not tried" in v.headline, v.headline
    # everything tested, nothing flipped: said plainly (and a failure the client retried itself
    # named as context)
    r = Intervention("A", "c1", 0, "the API's failure", "a-retried",
                     missing="the client retried it itself")  # fmt: skip
    v = verdict([_tally(r), e, a], 5)
    assert "the cause is likely off the wire" in v.headline, v.headline
    assert "the API's failure at c1 turn 0 is context: the client retried it" in v.headline


def _tool_run(asked: str, got: str) -> tuple[Any, Any]:
    failed = Exchange("GET", "http://tools.test/weather?city=Lyon", status=503, tool=True, seq=3)
    ok = Exchange(
        "GET", f"http://tools.test/weather?city={got}", status=200, tool=True, seq=4,
        response_chunks=[(None, b'{"sky": "clear"}')],
    )  # fmt: skip
    failed.url = f"http://tools.test/weather?city={asked}"
    run = SimpleNamespace(
        by_seq=lambda s: (failed, None) if s == 3 else None, exchanges=[failed, ok]
    )
    f = SimpleNamespace(
        conversation="c1", turn=1, details={"tool_http_seq": 3}, tool_call_id="call_1",
        code="C.tool_http_error_hidden",
    )  # fmt: skip
    return run, f


def test_a_tool_answer_from_another_query_says_it_cannot_be_right() -> None:
    from looptap.cassettes.why._tool_answer import tool_answer

    i = tool_answer(*_tool_run("Lyon", "Tokyo"), [5])
    assert i.missing is None and i.caveat is not None, i
    assert "city='Tokyo', not 'Lyon'" in i.caveat and "an answer to another query" in i.what, i
    assert i.as_json()["caveat"] == i.caveat
    same = tool_answer(*_tool_run("Lyon", "Lyon"), [5])
    assert same.missing is None and same.caveat is None, same


#: The planted decoy: the first request is answered 503 once; the SDK retries it itself.
def _overloaded_once() -> Any:
    lock, said = threading.Lock(), [False]

    def route(req: ScriptedRequest) -> Reply:
        with lock:
            first, said[0] = not said[0], True
        if first:
            return replace(Reply.refuse("The server is overloaded.", status=503), wire="retryable")
        return c_route(req)

    return route


@needs_recorder
def test_a_503_the_sdk_retried_is_context_not_an_a_suspect(tmp_path: Path) -> None:
    """The openai SDK retries a 503 (``C.retry`` in show): on c86d115d it was "the retry the
    client did not make (A.overloaded)", a suspect that re-sent the turn live."""
    from looptap.cassettes.reading import open_run

    if RECORDER[0] == "None":
        pytest.skip("no recorder environment")
    run = tmp_path / "run.jsonl"
    with ScriptedUpstream(_overloaded_once()) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp_path / "conf"),
             "--upstream", f"openai={fake.url}", "--", sys.executable, str(AGENT),
             "--drop-second", "--expect", "rain", "--retries", "2"],
            env=why_env(), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    opened = open_run(run, whole=True)
    codes = {f.code for f in opened.analysis.findings}
    assert {"C.retry", "A.overloaded"} <= codes, codes
    found = interventions(opened, {})
    assert not any(i.kind == "a-retry" for i in found), [i.what for i in found]
    retried = next(i for i in found if i.kind == "a-retried")
    assert (retried.layer, retried.turn, retried.finding) == ("A", 0, "A.overloaded"), retried
    assert retried.missing is not None and retried.missing.startswith(
        "the client retried it itself (1 retry, C.retry): turn 1 sent the same request and was "
        "answered"
    ), retried.missing
    # never re-sampled either: the failed turn has no emission; the C repair is the suspect
    assert not any(i.layer == "E" and i.turn == 0 for i in found), [i.what for i in found]
    assert any(i.kind == "c-restore-result" for i in found)


class _Runner:
    """A confirm's runs without processes: each run's agent wants ``want`` live requests and
    sends what its fork's limit lets it (:class:`~cassettes.why._budget.Purse`), stopped there."""

    def __init__(self, want: int, directory: Path) -> None:
        from looptap.cassettes.why._budget import Purse

        self.want, self.directory, self.purse = want, directory, Purse()
        self.sent: list[int] = []

    def one(self, fork: Intervention, k: int, reserve: int | None = None) -> dict[str, Any]:
        limit = self.purse.open(fork.most_requests if reserve is None else reserve)
        sent = self.want if limit is None else min(self.want, limit)
        self.purse.close(limit, sent)
        self.sent.append(sent)
        out: dict[str, Any] = {"sent": sent, "result": "flipped", "limit": limit}
        if sent < self.want:
            out |= {"result": "invalid", "stopped": True, "why": "stopped at its limit"}
        return out

    def interrupt(self) -> None:
        pass


def test_a_confirm_says_its_at_most_first_and_never_passes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fixed agent that sends 5 requests a run where the recording reaches 2: on c86d115d the
    confirm's first figures said at most 6 for 3 runs and it sent 15."""
    from looptap.cassettes.why._keep import run_all

    fork = Intervention("C", "c1", 1, "your fixed agent", "confirm", seqs=[1, 2])
    runner = _Runner(5, tmp_path)
    kept = run_all(runner, fork, {"layer": "C"}, 3, 1, None, lambda r, x: "ran")  # type: ignore[arg-type]
    err = capsys.readouterr().err
    first = next(ln for ln in err.splitlines() if "at most" in ln)
    assert first == (
        "looptap why: confirm: at most 6 requests sent live in all (every turn the fork may "
        "reach, live, in each of 3 runs): the runs are kept to it; one that would pass it is "
        "stopped there and not judged"
    ), err
    assert sum(runner.sent) <= 6 and kept.sent <= 6, (runner.sent, err)
