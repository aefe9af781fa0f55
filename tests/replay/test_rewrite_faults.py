"""Rewriting faults (``looptap replay --fault truncate|content_filter|refusal|bad_arguments|
unoffered_tool|schema_arguments``) through the official SDKs, streamed and not, on real recorded
tool-calling answers: what each SDK hands its caller is what the real API's answer would give (the
finish reason, the cut or broken arguments, the refusal), the served run's findings name the fault
as injected, and the next attempt gets the recorded answer."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.analysis import analyse, schema_errors
from looptap.cassettes.replay.serving.faults import REFUSAL_TEXT
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.rewrite_support import Seen, cassette_for, is_json, replay, sdk_call

# the SDKs' notes on old model names
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FAMILIES = ["openai_chat", "openai_responses", "anthropic", "gemini"]
SDK = {
    "openai_chat": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google.genai",
}
#: family → the finish the caller sees for (truncate, content_filter, refusal); None: not injected.
FINISH = {
    "openai_chat": ("length", "content_filter", "stop"),
    "openai_responses": ("incomplete:max_output_tokens", "incomplete:content_filter", "completed"),
    "anthropic": ("max_tokens", None, "refusal"),
    "gemini": ("MAX_TOKENS", "SAFETY", None),
}
#: The finding each fault gives the served turn (labelled as injected).
FINDING = {
    "truncate": "A.truncated_length",
    "content_filter": "A.filtered",
    "refusal": "E.refusal",
    "bad_arguments": "E.arguments_not_json",
    "unoffered_tool": "E.tool_not_offered",
    "schema_arguments": "E.arguments_schema",
}


@pytest.fixture(scope="module")
def cassettes(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, bool], tuple[Path, str, dict[str, Any]]]:
    for mod in set(SDK.values()):
        pytest.importorskip(mod)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    tmp = tmp_path_factory.mktemp("rewrite")
    return {(f, s): cassette_for(tmp, f, s) for f in FAMILIES for s in (False, True)}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fault", list(FINDING))
def test_sdk_sees_the_rewritten_answer(
    cassettes: Any, family: str, stream: bool, fault: str
) -> None:
    cas, tool, schema = cassettes[(family, stream)]
    clean = sdk_call_recorded(cas, family, stream, tool, schema)
    out, srv, plan = replay(cas, f"request=1:{fault}", family, stream, tool, schema)
    objects = family in ("anthropic", "gemini")  # arguments travel as an object, not text
    cannot = (
        (fault == "content_filter" and family == "anthropic")
        or (fault == "refusal" and family == "gemini")
        or (
            fault == "bad_arguments"
            and (family == "gemini" or (family == "anthropic" and not stream))
        )
    )
    if cannot:  # the API has no way to say it: the recorded answer is served, and the log says why
        assert isinstance(out, Seen) and out == clean
        assert (
            plan.fired == []
            and len(plan.skipped) == 1
            and plan.skipped[0][3].startswith("this API")
        )
        assert any("not injected" in n for n in srv.served[0].notes)
        return
    assert plan.fired and not plan.skipped
    # the SDK's stream helper parses the arguments itself
    if fault == "bad_arguments" and family == "anthropic":
        assert isinstance(out, ValueError) and "Unable to parse tool parameter JSON" in str(out)
    else:
        assert isinstance(out, Seen), repr(out)
        name, args = clean.calls[0]
        if fault == "truncate":
            assert out.finish == FINISH[family][0]
            cut = out.calls[-1][1]
            if objects:
                # what a partial parse keeps
                assert isinstance(cut, dict) and len(cut) == max(0, len(args) - 1)
            else:
                assert not is_json(cut) and args.startswith(cut) and len(cut) < len(args)
        elif fault == "content_filter":
            assert out.finish == FINISH[family][1] and out.calls == []
        elif fault == "refusal":
            assert out.finish == FINISH[family][2] and out.calls == [] and out.text == ""
            if family != "anthropic":  # a refusal stop reason comes without text there
                assert out.refusal == REFUSAL_TEXT
        elif fault == "bad_arguments":
            assert not is_json(out.calls[0][1]) and out.calls[0][0] == name
        elif fault == "unoffered_tool":
            assert out.calls[0][0] == f"{name}_v2" and out.calls[0][1] == args
        else:
            got = out.calls[0][1]
            assert schema_errors(got if objects else __import__("json").loads(got), schema), got
    # looptap's analysis of the served run: the fault's own finding, labelled as injected
    findings = [f for f in analyse(list(srv.served)).findings if f.code == FINDING[fault]]
    assert findings and all(f.message.startswith("[injected by looptap: ") for f in findings), [
        f.message for f in analyse(list(srv.served)).findings
    ]
    # the fault cleared: the same request now gets the recorded answer
    with ReplayServer(cas, faults=plan) as again:
        assert sdk_call(family, stream, again.url, tool, schema) == clean


_CLEAN: dict[tuple[Path, bool], Seen] = {}


def sdk_call_recorded(
    cas: Path, family: str, stream: bool, tool: str, schema: dict[str, Any]
) -> Seen:
    """What the SDK gives for the recorded answer itself."""
    if (cas, stream) not in _CLEAN:
        out, _, _ = replay(cas, "request=99:reset", family, stream, tool, schema)
        assert isinstance(out, Seen), repr(out)
        _CLEAN[(cas, stream)] = out
    return _CLEAN[(cas, stream)]


def test_rewriting_fault_specs() -> None:
    from looptap.cassettes.replay.serving.faults import FaultSpecError, parse_fault

    assert parse_fault("turn=1:truncate=0.25").arg == 0.25
    assert parse_fault("tool=get_weather:schema_arguments*2").times == 2
    with pytest.raises(FaultSpecError, match="fraction kept"):
        parse_fault("truncate=1")
    with pytest.raises(FaultSpecError, match="refusal takes no value"):
        parse_fault("refusal=3")


#: What the caller gets from a cut stream and from an error event inside a 200 stream, per SDK
#: (exception class name, or the Seen.finish the SDK hands over without raising).
STREAM_FAULTS = {
    "openai_chat": ("APIConnectionError", "APIError"),
    "openai_responses": ("APIConnectionError", "error event (server_error)"),
    # anthropic lets the HTTP client's own error out
    "anthropic": ("RemoteProtocolError", "APIStatusError"),
    "gemini": ("RemoteProtocolError", "ServerError"),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_stream_faults_on_real_recorded_streams(cassettes: Any, family: str) -> None:
    import time

    cas, tool, schema = cassettes[(family, True)]
    clean = sdk_call_recorded(cas, family, True, tool, schema)
    cut, event = STREAM_FAULTS[family]
    out, srv, _ = replay(cas, "request=1:stream_cut=2", family, True, tool, schema)
    assert type(out).__name__ == cut or (
        cut == "APIConnectionError" and "incomplete" in str(out).lower()
    ), repr(out)
    assert "looptap fault: stream cut after" in (srv.served[0].transport_error or "")
    codes = {f.code for f in analyse(list(srv.served)).findings}
    assert {"A.stream_truncated", "A.transport_error"} <= codes, codes
    out, srv, _ = replay(cas, "request=1:error_event", family, True, tool, schema)
    assert (type(out).__name__ if isinstance(out, BaseException) else out.finish) == event, repr(
        out
    )
    assert "A.error_in_200" in {f.code for f in analyse(list(srv.served)).findings}
    t0 = time.monotonic()
    out, srv, _ = replay(cas, "request=1:stall=0.3", family, True, tool, schema)
    assert out == clean and time.monotonic() - t0 >= 0.3
