"""One rule for root causes (issue 27 item 4): a finding that follows from another is folded under
it (info, ``details.caused_by`` and ``caused_by_seq``), on every path that shows findings: the
analysis, ``show`` text and JSON, ``looptap mcp``'s answers and the pytest helper."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenarios import WEATHER, AgentScript, Call, Script, assistant_of, results_of

from looptap.cassettes.analysis import Finding, RunAnalysis, Severity
from looptap.cassettes.analysis.dispatch import ordered_findings
from looptap.cassettes.views import analysis_lines

ANTHROPIC_PAIRING = (
    "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)


def _dropped_then_rejected(drop: bool) -> RunAnalysis:
    """Two parallel calls; the next request carries one result (``drop``) or both, and the API
    answers it with a pairing 400 (the clean twin: the API's 400 though the client did nothing
    wrong)."""
    s = AgentScript("anthropic", system="You are a weather agent.")
    s.user("Weather in Paris and Rome?")
    paris, rome = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})
    s.reply(calls=[paris, rome])
    if drop:
        s.results_for((paris, "sunny"))
    else:
        s.results("sunny", "rain")
    s.fail(
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": ANTHROPIC_PAIRING.format(id=rome.id),
            },
        },
    )
    return s.analyse()


def test_a_pairing_error_beside_a_dropped_result_is_folded_under_it() -> None:
    run = _dropped_then_rejected(drop=True)
    by_code = {f.code: f for f in run.findings if f.seq == 1}
    assert by_code["C.dropped_tool_result"].severity is Severity.ERROR
    pairing = by_code["C.pairing_error"]
    assert pairing.severity is Severity.INFO
    assert (pairing.details["caused_by"], pairing.details["caused_by_seq"]) == (
        "C.dropped_tool_result",
        1,
    )
    assert [f.code for f in ordered_findings(run.findings) if f.seq == 1][:2] == [
        "C.dropped_tool_result",
        "C.pairing_error",
    ]


def test_a_pairing_error_with_no_cause_on_its_turn_stays_an_error() -> None:
    run = _dropped_then_rejected(drop=False)
    pairing = next(f for f in run.findings if f.code == "C.pairing_error")
    assert pairing.severity is Severity.ERROR and "caused_by" not in pairing.details


@pytest.mark.parametrize("family", ["openai_chat", "anthropic"])
def test_a_pairing_error_after_a_dropped_answer_is_folded_under_it(family: str) -> None:
    """Issue 71 item 8: the answer that made the calls is left out of the history, its results
    sent anyway, and the API answers 400: the dropped answer is the root cause (it carries the
    error), the 400 folded under it, and show says so."""
    s = Script(family)
    s.user("Weather in Paris?")
    paris = Call("get_weather", {"city": "Paris"})
    s.reply(calls=[paris], echo=False)
    s.results("sunny")
    message = (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
        "with 'tool_calls'."
        if family == "openai_chat"
        else f"messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
        f"{paris.id}. Each `tool_result` block must have a corresponding `tool_use` block in the "
        "previous message."
    )
    s.fail(400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    run = s.analyse()
    dropped, pairing = (f for f in ordered_findings(run.findings) if f.seq == 1)
    assert (dropped.code, dropped.severity, dropped.related_turn) == (
        "C.assistant_not_echoed",
        Severity.ERROR,
        0,
    )
    assert (pairing.code, pairing.severity, pairing.details["caused_by"]) == (
        "C.pairing_error",
        Severity.INFO,
        "C.assistant_not_echoed",
    )
    text = "\n".join(analysis_lines(run))
    assert "(caused by C.assistant_not_echoed on #1)" in text
    assert text.index("C.assistant_not_echoed") < text.index("C.pairing_error")


def _schema_then_error(bad_arguments: bool) -> RunAnalysis:
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"town": "Paris"} if bad_arguments else {"city": "Paris"})])
    s.results("Error: get_weather() missing 1 required argument: 'city'")
    s.reply("I could not get the weather.")
    return s.analyse()


def test_a_tool_error_after_a_call_against_the_schema_is_folded_under_it() -> None:
    run = _schema_then_error(bad_arguments=True)
    (schema,) = [f for f in run.findings if f.code == "E.arguments_schema"]
    (error,) = [f for f in run.findings if f.code == "C.tool_result_error"]
    assert (error.details["caused_by"], error.details["caused_by_seq"]) == (
        "E.arguments_schema",
        schema.seq,
    )
    assert error.severity is Severity.INFO
    order = [f.code for f in ordered_findings(run.findings)]
    assert order.index("C.tool_result_error") == order.index("E.arguments_schema") + 1
    # show: the consequence names its cause
    text = "\n".join(analysis_lines(run))
    assert f"(caused by E.arguments_schema on #{schema.seq})" in text
    # the twin: a tool that failed on its own is its own root cause
    run = _schema_then_error(bad_arguments=False)
    (error,) = [f for f in run.findings if f.code == "C.tool_result_error"]
    assert "caused_by" not in error.details


def test_mcp_and_the_pytest_helper_read_the_same_fold(tmp_path: Path) -> None:
    from looptap.cassettes.mcp.query import Runs, run_summary
    from looptap.cassettes.reading import open_run
    from looptap.cassettes.recording.pipeline import CassetteWriter

    s = Script("openai_chat", tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"town": "Paris"})])
    s.results("Error: get_weather() missing 1 required argument: 'city'")
    s.reply("I could not get the weather.")
    path = tmp_path / "run.jsonl"
    with CassetteWriter(path) as w:
        for ex in s.exchanges:
            w.append(ex)
    run = open_run(path)
    with pytest.raises(AssertionError) as info:
        run.assert_no_findings(min_severity="info")
    assert "C.tool_result_error" in str(info.value) and "(caused by E.arguments_schema)" in str(
        info.value
    )
    run.assert_no_findings(layer="C")  # the consequence has no severity of its own
    summary = run_summary(Runs([tmp_path]), "run.jsonl", 6000)
    roots = [f["code"] for f in summary["root_causes"]]
    assert "E.arguments_schema" in roots and "C.tool_result_error" not in roots, roots


def _late_result(echo_answer: bool, family: str) -> RunAnalysis:
    """Turn 1's request lacks the result of turn 0's call (a dropped result); turn 2's carries it,
    inserted before turn 1's answer (the client sent it late), then turn 1's answer and its result
    (``echo_answer``), or the late result and the new result without turn 1's answer (the twin)."""
    s = Script(family)
    s.user("Weather in Paris, then Tokyo?")
    paris, tokyo = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Tokyo"})
    s.reply(calls=[paris])
    s.reply(calls=[tokyo], echo=False)  # the request carries no result for paris
    s.history.extend(results_of(family, [(paris, "sunny")]))
    if echo_answer:
        s.history.extend(assistant_of(family, None, [tokyo]))
    s.history.extend(results_of(family, [(tokyo, "rain")]))
    s.reply("Paris is sunny, Tokyo rainy.")
    return s.analyse()


@pytest.mark.parametrize("family", ["anthropic", "openai_chat"])
def test_a_result_sent_late_is_not_an_answer_left_unechoed(family: str) -> None:
    """Claude Code's bug run of the client matrix: the result dropped on turn 1 comes back on turn
    2, before turn 1's answer. The drop is the finding; turn 1's answer was echoed."""
    run = _late_result(True, family)
    serious = [(f.code, f.turn) for f in run.findings if f.severity is not Severity.INFO]
    assert serious == [("C.dropped_tool_result", 1)], serious


@pytest.mark.parametrize("family", ["anthropic", "openai_chat"])
def test_a_late_result_does_not_hide_an_answer_left_unechoed(family: str) -> None:
    run = _late_result(False, family)
    assert ("C.assistant_not_echoed", 2) in [
        (f.code, f.turn) for f in run.findings if f.severity is Severity.WARNING
    ]


def _rewrite(node: object, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in every string of a history item, in place."""
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else []
    )
    for k, v in list(items):
        if isinstance(v, str):
            node[k] = v.replace(old, new)  # type: ignore[index]
        else:
            _rewrite(v, old, new)


def _rewritten_then_restored(family: str, drop_last: bool) -> RunAnalysis:
    """The client matrix's mutate_history: turn 2's request rewrites turn 0's results (a client bug,
    C.history_mutated) and turn 3's re-sends them as they were (the history changed again). Each
    turn otherwise echoes the answer and sends its result (``drop_last``: turn 3 lacks its
    result)."""
    s = Script(family)
    s.user("Weather in Paris, Tokyo and Berlin?")
    paris, tokyo, berlin, again = (
        Call("get_weather", {"city": c}) for c in ("Paris", "Tokyo", "Berlin", "Berlin")
    )
    s.reply(calls=[paris, tokyo])
    s.results("WEATHER sunny", "WEATHER rain")
    s.reply(calls=[berlin])
    s.results("WEATHER cloudy")
    first = next(m for m in s.history if "WEATHER sunny" in str(m))
    _rewrite(first, "WEATHER", "MUTATED")
    s.reply(calls=[again])
    _rewrite(first, "MUTATED", "WEATHER")
    if not drop_last:
        s.results("WEATHER cloudy")
    s.reply("Paris sunny, Tokyo rain, Berlin cloudy.")
    return s.analyse()


@pytest.mark.parametrize("family", ["anthropic", "gemini", "openai_chat"])
def test_results_re_sent_in_a_rewritten_history_are_not_new_results(family: str) -> None:
    """The results of earlier turns re-sent in a rewritten history answered their calls long ago:
    only the history change is reported (was also C.tool_results_split on Anthropic, and
    C.orphan_tool_result on Gemini, which pairs by name)."""
    run = _rewritten_then_restored(family, drop_last=False)
    serious = sorted({(f.code, f.turn) for f in run.findings if f.severity is not Severity.INFO})
    # turn 3 re-sends the history turn 2 changed: the change undone, folded under it (session 48)
    assert serious == [("C.history_mutated", 2)], serious
    again = [f for f in run.findings if f.code == "C.history_mutated" and f.turn == 3]
    assert [f.details.get("caused_by") for f in again] == ["C.history_mutated"]


@pytest.mark.parametrize("family", ["anthropic", "gemini", "openai_chat"])
def test_a_result_dropped_in_a_rewritten_history_is_still_found(family: str) -> None:
    run = _rewritten_then_restored(family, drop_last=True)
    assert ("C.dropped_tool_result", 3) in {
        (f.code, f.turn) for f in run.findings if f.severity is not Severity.INFO
    }


def _ordered_by_definition(fs: list[Finding]) -> list[Finding]:
    """The order as ``ordered_findings`` was first written (quadratic): the reference."""
    rank = {"error": 0, "warning": 1, "info": 2}
    roots = sorted(
        (f for f in fs if not f.details.get("caused_by")),
        key=lambda f: (rank[f.severity.value], f.seq or 0),
    )
    out, placed = [], set()
    for r in roots:
        out.append(r)
        placed.add(id(r))
        for f in fs:
            d = f.details
            if id(f) in placed or not d.get("caused_by"):
                continue
            if (
                d["caused_by"] == r.code
                and f.conversation == r.conversation
                and d.get("caused_by_seq", r.seq) == r.seq
            ):
                out.append(f)
                placed.add(id(f))
    return out + [f for f in fs if id(f) not in placed]


_CODES = ("C.dropped_tool_result", "E.repeated_call", "C.pairing_error", "A.http_error")


@st.composite
def _findings(draw: st.DrawFn) -> list[Finding]:
    out = []
    for _ in range(draw(st.integers(0, 30))):
        details: dict[str, object] = {}
        if draw(st.booleans()):
            details["caused_by"] = draw(st.sampled_from(_CODES))
            if draw(st.booleans()):
                details["caused_by_seq"] = draw(st.integers(0, 5))
        out.append(
            Finding(
                code=draw(st.sampled_from(_CODES)),
                layer="C",
                severity=draw(st.sampled_from(list(Severity))),
                message="m",
                conversation=draw(st.sampled_from(["c1", "c2"])),
                seq=draw(st.one_of(st.none(), st.integers(0, 5))),
                details=details,
            )
        )
    return out


@given(_findings())
def test_the_order_is_the_definitions_in_n_log_n(fs: list[Finding]) -> None:
    """The analysis orders every run's findings (a million included), so the order is computed
    by grouping, not by a scan of every finding per root cause; it is the same order."""
    assert [id(f) for f in ordered_findings(fs)] == [id(f) for f in _ordered_by_definition(fs)]
    assert ordered_findings(ordered_findings(fs)) == ordered_findings(fs)  # stable: ordered once
