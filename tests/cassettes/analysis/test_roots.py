"""One rule for root causes (issue 27 item 4): a finding that follows from another is folded under
it (info, ``details.caused_by`` and ``caused_by_seq``), on every path that shows findings: the
analysis, ``show`` text and JSON, ``looptap mcp``'s answers and the pytest helper."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenarios import WEATHER, AgentScript, Call, Script

from cassettes.analysis.dispatch import ordered_findings
from cassettes.analysis.model import RunAnalysis, Severity
from cassettes.views.view import analysis_lines

ANTHROPIC_PAIRING = ("messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. "
                     "Each `tool_use` block must have a corresponding `tool_result` block in the next message.")


def _dropped_then_rejected(drop: bool) -> RunAnalysis:
    """Two parallel calls; the next request carries one result (``drop``) or both, and the API
    answers it with a pairing 400 (the clean twin: the API's 400 though the client did nothing wrong)."""
    s = AgentScript("anthropic", system="You are a weather agent.")
    s.user("Weather in Paris and Rome?")
    paris, rome = Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Rome"})
    s.reply(calls=[paris, rome])
    if drop:
        s.results_for((paris, "sunny"))
    else:
        s.results("sunny", "rain")
    s.fail(400, {"type": "error", "error": {"type": "invalid_request_error", "message": ANTHROPIC_PAIRING.format(id=rome.id)}})
    return s.analyse()


def test_a_pairing_error_beside_a_dropped_result_is_folded_under_it() -> None:
    run = _dropped_then_rejected(drop=True)
    by_code = {f.code: f for f in run.findings if f.seq == 1}
    assert by_code["C.dropped_tool_result"].severity is Severity.ERROR
    pairing = by_code["C.pairing_error"]
    assert pairing.severity is Severity.INFO
    assert (pairing.details["caused_by"], pairing.details["caused_by_seq"]) == ("C.dropped_tool_result", 1)
    assert [f.code for f in ordered_findings(run.findings) if f.seq == 1][:2] == ["C.dropped_tool_result", "C.pairing_error"]


def test_a_pairing_error_with_no_cause_on_its_turn_stays_an_error() -> None:
    run = _dropped_then_rejected(drop=False)
    pairing = next(f for f in run.findings if f.code == "C.pairing_error")
    assert pairing.severity is Severity.ERROR and "caused_by" not in pairing.details


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
    assert (error.details["caused_by"], error.details["caused_by_seq"]) == ("E.arguments_schema", schema.seq)
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
    from cassettes.interop.query import Runs
    from cassettes.interop.run import open_run
    from cassettes.recording.pipeline import CassetteWriter

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
    assert "C.tool_result_error" in str(info.value) and "(caused by E.arguments_schema)" in str(info.value)
    run.assert_no_findings(layer="C")  # the consequence has no severity of its own
    summary = Runs([tmp_path]).summary("run.jsonl")
    roots = [f["code"] for f in summary["root_causes"]]
    assert "E.arguments_schema" in roots and "C.tool_result_error" not in roots, roots
