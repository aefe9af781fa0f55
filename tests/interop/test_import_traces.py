"""``looptap import`` of production traces (issue 57): OTLP GenAI / OpenInference spans and chat
trajectories rebuilt as round trips, marked as reconstructed, and bad input refused in one line
with nothing written."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.cli import main
from looptap.cassettes.replay.forking.fork import ForkReplay, parse_from
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.interop.cassette_files import CORPUS, REPO, write_cassette
from tests.replay.conftest import RECORDED, why_agent_in_process
from tests.replay.test_fork import AGENT as FORK_AGENT
from tests.replay.test_fork import new_model_route, origin_route
from tests.support import progress
from tests.support.recorder import RECORDER, SCRUB, clean_env, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import AGENT as WHY_AGENT
from tests.why.test_why import c_route, why_env
from tests.why.test_why_agents import route

TRACED = Path(__file__).with_name("traced_agent.py")
pytest_plugins = ["pytester"]

CHAT_TOOLS = CORPUS / "test_openai" / "test_openai_tool_output.yaml"
RESPONSES_TOOLS = (
    CORPUS / "test_openai_responses" / "test_openai_conversation_id_tool_call_continuation.yaml"
)
GEMINI_TOOLS = CORPUS / "test_google" / "test_google_instructions_only_with_tool_calls.yaml"


def show_json(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["show", "--json", str(path)]) == 0
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def essentials(v: dict[str, Any]) -> dict[str, Any]:
    """What an import must keep of a round trip: its place, its calls, usage and findings."""
    return {
        "conversation": v["conversation"],
        "turn": v["turn"],
        "kind": v["conversation_kind"],
        "parent": v["conversation_parent_seq"],
        "calls": [(c["id"], c["name"], c["arguments"]) for c in v["tool_calls"]],
        "usage": (v["usage"] or {}).get("input"),
        "output": (v["usage"] or {}).get("output"),
        "findings": sorted(f["code"] for f in v["findings"]),
    }


def round_trip(src: Path, tmp_path: Path, *extra: str) -> Path:
    otel, back = tmp_path / "run.otel.json", tmp_path / "back.jsonl"
    assert main(["export", "-q", str(src), "--otel", str(otel), *extra]) == 0
    assert main(["import", "-q", str(otel), "-o", str(back)]) == 0
    return back


def test_export_then_import_keeps_conversations_turns_calls_usage_and_findings(
    demo_cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    back = round_trip(demo_cassette, tmp_path)
    before, after = show_json(demo_cassette, capsys), show_json(back, capsys)
    assert [essentials(v) for v in after] == [essentials(v) for v in before]
    assert len({v["conversation"] for v in after}) == 4 and any(v["findings"] for v in after)
    mark = after[0]["reconstructed"]
    assert mark["v"] == 1 and mark["source"] == "an OTel GenAI trace"
    assert {"messages", "output", "usage", "finish_reason", "response.id"} <= set(mark["from"])
    assert {"framing", "status"} <= set(mark["inferred"])


@pytest.mark.parametrize(
    "src", [CHAT_TOOLS, RESPONSES_TOOLS, GEMINI_TOOLS], ids=lambda p: p.parent.name
)
def test_other_families_come_back_with_the_same_conversations_and_calls(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_cassette(src, tmp_path / "run.jsonl")
    back = round_trip(run, tmp_path)

    def shape(v: dict[str, Any]) -> Any:
        e = {**essentials(v), "family": v["family"]}
        # (a call the API gave no id gets one, marked inferred)
        calls = [(name, args) for _id, name, args in e["calls"]]
        return (
            e["family"],
            e["conversation"],
            e["turn"],
            e["kind"],
            e["parent"],
            calls,
            e["usage"],
            e["findings"],
        )

    before = [shape(v) for v in show_json(run, capsys) if v["family"] != "none"]
    assert [shape(v) for v in show_json(back, capsys)] == before


def test_a_trace_without_content_imports_as_metadata_and_says_what_it_cannot_do(
    demo_cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    otel, back = tmp_path / "run.otel.json", tmp_path / "back.jsonl"
    assert main(["export", "-q", str(demo_cassette), "--otel", str(otel), "--no-content"]) == 0
    capsys.readouterr()
    assert main(["import", str(otel), "-o", str(back)]) == 0
    assert "no message content in the trace" in capsys.readouterr().out
    views = show_json(back, capsys)
    assert [v["usage"]["input"] for v in views] == [
        v["usage"]["input"] for v in show_json(demo_cassette, capsys)
    ]
    # what the trace did not keep is said in the read state, and nothing is judged on it: a
    # tool_use finish with no call in the (unknown) answer raises no A.tool_calls_without_calls
    for v in views:
        assert v["read"] == "partial", v["read"]
        assert {"messages: not kept by the trace", "answer: not kept by the trace"} <= set(
            v["unread"]
        )
    assert not [
        f for v in views for f in v["findings"] if f["code"] == "A.tool_calls_without_calls"
    ]


def test_spans_out_of_order_and_a_missing_parent(
    demo_cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    otel = tmp_path / "run.otel.json"
    assert main(["export", "-q", str(demo_cassette), "--otel", str(otel)]) == 0
    req = orjson.loads(otel.read_bytes())
    spans = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.reverse()  # as a batching exporter may write them
    roots = {s["spanId"] for s in spans if not s.get("parentSpanId")}
    spans[:] = [s for s in spans if s["spanId"] not in roots]  # every parent gone
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_bytes(orjson.dumps(req) + b"\n")
    back = tmp_path / "back.jsonl"
    assert main(["import", "-q", str(shuffled), "-o", str(back)]) == 0
    after = show_json(back, capsys)
    assert [essentials(v) for v in after] == [
        essentials(v) for v in show_json(demo_cassette, capsys)
    ]
    assert all(any("parent" in n and "not in the file" in n for n in v["notes"]) for v in after)


def test_an_openai_trajectory_is_rebuilt_with_ids_and_finish_reasons_marked_inferred(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traj = tmp_path / "traj.json"
    traj.write_bytes(
        orjson.dumps(
            {
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"function": {"name": "weather", "arguments": {"city": "Paris"}}}
                    ]},
                    {"role": "tool", "content": "sunny"},
                    {"role": "assistant", "content": "Sunny."},
                ],
            }
        )
    )  # fmt: skip
    out = tmp_path / "run.jsonl"
    assert main(["import", "-q", str(traj), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    assert [(v["conversation"], v["turn"]) for v in views] == [("c1", 0), ("c1", 1)]
    assert views[0]["tool_calls"][0]["arguments"] == {"city": "Paris"}
    assert views[0]["finish_reason"]["raw"] == "tool_calls"
    mark = views[0]["reconstructed"]
    assert {"finish_reason", "tool_call.id", "response.id", "tools"} <= set(mark["inferred"])
    assert {"messages", "output", "model"} <= set(mark["from"])
    # no tools were in the trajectory: that none were offered is looptap's inference, said so
    (f,) = [f for f in views[0]["findings"] if f["code"] == "E.tool_not_offered"]
    assert f["details"]["inferred"] == "tools"
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "reconstructed from a trajectory" in text
    assert "2 findings above rest on what an imported trace did not give" in text
    assert "A.usage_missing ×1, E.tool_not_offered ×1" in text


def test_jsonl_of_anthropic_trajectories_gives_one_cassette_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def traj(q: str) -> dict[str, Any]:
        return {
            "system": "Be brief.",
            "traj": [
                {"role": "user", "content": q},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "look", "input": {"q": q}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
                {"role": "assistant", "content": "Done."},
            ],
        }  # fmt: skip

    src = tmp_path / "runs.jsonl"
    src.write_bytes(b"".join(orjson.dumps(traj(q)) + b"\n" for q in ("a", "b", "c")))
    out = tmp_path / "out"
    assert main(["import", "-q", str(src), "-o", str(out)]) == 0
    made = sorted(p.name for p in out.iterdir())
    assert made == ["runs-1.jsonl", "runs-2.jsonl", "runs-3.jsonl"]
    views = show_json(out / "runs-2.jsonl", capsys)
    assert [v["family"] for v in views] == ["anthropic", "anthropic"]
    assert views[0]["tool_calls"][0]["arguments"] == {"q": "b"}
    assert views[1]["finish_reason"]["raw"] == "end_turn"


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["import", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line_and_writes_nothing(
    demo_cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    otel = tmp_path / "run.otel.json"
    assert main(["export", "-q", str(demo_cassette), "--otel", str(otel)]) == 0
    keep = tmp_path / "keep.jsonl"
    keep.write_text("mine\n")
    cases: dict[str, bytes] = {
        "truncated": otel.read_bytes()[: otel.stat().st_size // 2],
        "deep": orjson.dumps(
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "x": _deep()}]
        ),
        "no-assistant": orjson.dumps([{"role": "user", "content": "x"}]),
        "no-role": orjson.dumps({"messages": [{"content": "x"}]}),
    }
    said = {}
    for name, data in cases.items():
        src = tmp_path / f"{name}.json"
        src.write_bytes(data)
        said[name] = _refused([str(src), "-o", str(keep), "--force"], capsys)
        assert keep.read_text() == "mine\n"  # the file named is never destroyed
    assert "cut short" in said["truncated"] or "not JSON" in said["truncated"]
    assert "deeper than" in said["deep"]
    assert "without an assistant message" in said["no-assistant"]
    assert "has no role" in said["no-role"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".keep")]  # no staged file


def _deep() -> Any:
    v: Any = "bottom"
    for _ in range(200):
        v = [v]
    return v


@pytest.mark.parametrize(
    "head", [b'[{"role": "user", "content": "', b'{"resourceSpans": ['], ids=["trajectory", "otlp"]
)
def test_a_gigabyte_file_is_refused_without_being_read_whole(
    head: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.write(head)
        f.truncate(1 << 30)  # sparse: a gigabyte on the file system, nothing on the disk
    err = _refused([str(big), "-o", str(tmp_path / "out.jsonl")], capsys)
    assert "MiB" in err
    assert not (tmp_path / "out.jsonl").exists()
    assert os.path.getsize(big) == 1 << 30


INSTRUMENTATIONS = ["openai-v2", "openinference"]


def _imports_as_recorded(
    instrumentation: str, run: Path, trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace (OTLP/JSON at ``trace``, the same spans in protobuf beside it as ``.pb``) of the
    run recorded at ``run``, imported, has the recording's conversations, kinds, parents, turns,
    tool calls and usage."""
    recorded = [essentials(v) for v in show_json(run, capsys)]
    assert [r["kind"] for r in recorded] == ["main", "agent_tool", "agent_tool", "main"]
    # the recording itself, through export --otel and back: all of it, kinds and findings too
    assert [essentials(v) for v in show_json(round_trip(run, tmp_path), capsys)] == recorded
    for src in (trace, trace.with_suffix(".pb")):  # OTLP/JSON, and the same spans in protobuf
        back = tmp_path / f"{src.suffix[1:]}.jsonl"
        assert main(["import", "-q", str(src), "-o", str(back)]) == 0
        views = show_json(back, capsys)
        got = [essentials(v) for v in views]
        if instrumentation == "openai-v2":
            # it records no tool definitions: that the sub-agent was a tool of the main agent
            # cannot be told, only that it is a sub-agent of #0
            assert [g["kind"] for g in got] == ["main", "sub_agent", "sub_agent", "main"]
            got = [{**g, "kind": r["kind"]} for g, r in zip(got, recorded, strict=True)]
        assert [{**g, "findings": []} for g in got] == [{**r, "findings": []} for r in recorded]
        # a tool the model called that the trace does not list is no evidence of a bug
        for f in (f for v in views for f in v["findings"]):
            assert f["details"].get("inferred") == "tools", f


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_real_instrumentations_trace_imports_as_the_recording_of_the_same_run_as_kept(
    instrumentation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test below on what it made once (tests/interop/traces/sub-agent-KIND.*: the
    instrumentation's trace, OTLP/JSON and protobuf, and looptap's recording of the same run;
    the traces' README says which versions)."""
    kept = Path(__file__).with_name("traces") / f"sub-agent-{instrumentation}.otlp.json"
    run = kept.with_name(f"sub-agent-{instrumentation}.run.jsonl")
    _imports_as_recorded(instrumentation, run, kept, tmp_path, capsys)  # (and .otlp.pb beside it)


@needs_recorder
@pytest.mark.slow(
    reason="a looptap run of an agent traced by each instrumentation (about 2.5 s of CPU each): "
    "the same checks on what they made once, by default: "
    "test_a_real_instrumentations_trace_imports_as_the_recording_of_the_same_run_as_kept"
)
@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_real_instrumentations_trace_imports_as_the_recording_of_the_same_run(
    instrumentation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The why tests' agent (the real openai SDK; a main agent whose tool asks a sub-agent) run
    once under ``looptap run`` and traced by a real instrumentation: the trace, imported, has the
    recording's conversations, kinds, parents, turns, tool calls and usage."""
    pytest.importorskip("opentelemetry.sdk")
    trace = tmp_path / "trace.json"
    env = why_env()
    env.update(
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        PYTHONPATH=str(REPO),
    )
    with ScriptedUpstream(route) as fake:
        agent = [sys.executable, str(TRACED), instrumentation, str(trace)]
        proc = progress.run(
            [*RECORDER, "run", "-o", str(tmp_path / "run.jsonl"), "--confdir",
             str(tmp_path / "conf"), "--upstream", f"openai={fake.url}", "--", *agent,
             "--family", "chat", "--shape", "sub-agent"],
            env=env, capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    _imports_as_recorded(instrumentation, tmp_path / "run.jsonl", trace, tmp_path, capsys)


@needs_recorder
@pytest.mark.slow(
    reason="four agents recorded and forked (about 8 s of CPU); a fork of an imported trace "
    "by default: test_a_fork_of_an_imported_responses_trace_in_process"
)
def test_a_fork_of_an_imported_trace_serves_the_prefix_and_goes_live_at_turn_2(
    tmp_path: Path,
) -> None:
    """The fork tests' four agents (openai and anthropic, streamed and not; 3 turns each) recorded,
    exported as OTLP and imported: ``run --from imported@turn=2`` with the same agents sends only
    the turn-2 requests live (4), the 8 of the prefix served from the trace's answers."""
    env = clean_env(OPENAI_API_KEY="sk-test-fork", ANTHROPIC_API_KEY="sk-ant-test-fork")

    def looptap_run(url: str, *args: str) -> Any:
        up = ["--upstream", f"openai={url}", "--upstream", f"anthropic={url}"]
        argv = [*RECORDER, "run", *args, "--confdir", str(tmp_path / "conf"), *up, "--"]
        return progress.run(
            [*argv, sys.executable, str(FORK_AGENT)],
            env=env, capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip

    with ScriptedUpstream(origin_route, validate=True) as fake:
        proc = looptap_run(fake.url, "-o", str(tmp_path / "run.jsonl"))
    assert proc.returncode == 0 and len(fake.log) == 12, proc.stderr[-3000:]
    trace, imported = tmp_path / "trace.json", tmp_path / "imported.jsonl"
    assert main(["export", "-q", str(tmp_path / "run.jsonl"), "--otel", str(trace)]) == 0
    assert main(["import", "-q", str(trace), "-o", str(imported)]) == 0
    with ScriptedUpstream(new_model_route, validate=True) as fake2:
        proc = looptap_run(
            fake2.url, "--from", f"{imported}@turn=2", "-o", str(tmp_path / "b.jsonl")
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # only the turn-2 requests (each with its two tool results) reached an upstream
    assert len(fake2.log) == 4, [x.line() for x in fake2.log]
    assert all(len(x.request.tool_results()) == 2 for x in fake2.log)
    assert {x.request.stream for x in fake2.log} == {True, False}
    assert proc.stdout.count("NEW MODEL") == 4, proc.stdout


def test_the_pytest_plugin_replays_an_imported_trajectory_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/testing.md's example test, its cassette imported from a trajectory (no recording
    ever made): the plugin serves it offline (``CI=1``: nothing may be recorded) and it passes.
    The inner pytest runs in this process (the plugin from its entry point all the same; a pytest
    process loading it so: tests/replay/test_plugin_unrewritten.py)."""
    page = (REPO / "docs" / "testing.md").read_text()
    start = page.index("```python\n") + len("```python\n")
    tmp_path = pytester.path
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_weather_agent.py").write_text(page[start : page.index("```", start)])
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}  # fmt: skip
    traj = tmp_path / "traj.json"
    traj.write_bytes(
        orjson.dumps(
            {
                "model": "gpt-4o-mini",
                "tools": [{"type": "function", "function": {
                    "name": "get_weather", "description": "The weather in a city right now.",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"]}}}],
                "messages": [
                    {"role": "system", "content": "Answer with the weather tool."},
                    {"role": "user", "content": "What is the weather in Paris?"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C in Paris"},
                    {"role": "assistant", "content": "It is sunny in Paris."},
                ],
            }
        )
    )  # fmt: skip
    cassette = project / "tests" / "cassettes" / "test_weather_agent" / "test_weather.jsonl"
    assert main(["import", "-q", str(traj), "-o", str(cassette)]) == 0
    for var in SCRUB:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-imported")
    monkeypatch.chdir(project)
    result = pytester.runpytest_inprocess(
        "-q", "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "tests"
    )
    out = "\n".join(result.outlines)
    assert result.ret == 0 and "1 passed" in out, out[-4000:]


def _moved(otel: Path, tmp_path: Path, how: str) -> Path:
    """Our export with its messages moved where other instrumentations put them: on the
    ``gen_ai.client.inference.operation.details`` event, or as the older per-message events."""
    req = orjson.loads(otel.read_bytes())
    for span in req["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        keys = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
        moved = [a for a in span["attributes"] if a["key"] in keys]
        span["attributes"] = [a for a in span["attributes"] if a["key"] not in keys]
        if not moved:
            continue
        if how == "details":
            event = {"name": "gen_ai.client.inference.operation.details", "attributes": moved}
            span["events"] = [*span.get("events", []), event]
            continue
        value = {a["key"]: orjson.loads(a["value"]["stringValue"]) for a in moved}
        span["events"] = [*span.get("events", []), *_old_events(value)]
    out = tmp_path / f"{how}.json"
    out.write_bytes(orjson.dumps(req) + b"\n")
    return out


def _old_events(value: dict[str, Any]) -> list[dict[str, Any]]:
    """semconv ≤ 1.36: one event a message, its content and tool calls as attributes."""

    def attr(k: str, v: Any) -> dict[str, Any]:
        return {
            "key": k,
            "value": {"stringValue": v if isinstance(v, str) else orjson.dumps(v).decode()},
        }

    def calls(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"id": p["id"], "type": "function", "function": {
            "name": p["name"], "arguments": orjson.dumps(p["arguments"]).decode()}}
            for p in parts if p["type"] == "tool_call"]  # fmt: skip

    events = []
    for m in value.get("gen_ai.input.messages", []):
        parts = m["parts"]
        text = "".join(p.get("content", "") for p in parts if p["type"] == "text")
        for r in (p for p in parts if p["type"] == "tool_call_response"):
            said = [attr("id", r["id"]), attr("content", r["response"])]
            events.append({"name": "gen_ai.tool.message", "attributes": said})
        if m["role"] == "user" and not text:
            continue
        said = [attr("content", text)] if text else []
        if calls(parts):
            said.append(attr("tool_calls", calls(parts)))
        events.append({"name": f"gen_ai.{m['role']}.message", "attributes": said})
    for m in value.get("gen_ai.output.messages", []):
        body = {"content": "".join(p.get("content", "") for p in m["parts"] if p["type"] == "text"),
                "tool_calls": calls(m["parts"])}  # fmt: skip
        events.append({"name": "gen_ai.choice", "attributes": [
            attr("message", body), attr("finish_reason", m["finish_reason"])]})  # fmt: skip
    return events


@pytest.mark.parametrize("how", ["details", "events"])
def test_messages_on_the_details_event_or_as_per_message_events(
    how: str, demo_cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    otel = tmp_path / "run.otel.json"
    assert main(["export", "-q", str(demo_cassette), "--otel", str(otel)]) == 0
    back = tmp_path / "back.jsonl"
    assert main(["import", "-q", str(_moved(otel, tmp_path, how)), "-o", str(back)]) == 0
    got = [essentials(v) for v in show_json(back, capsys)]
    want = [essentials(v) for v in show_json(demo_cassette, capsys)]
    if how == "events":  # a gen_ai.tool.message event has no is_error: C.tool_result_error goes
        got, want = ([{**e, "findings": []} for e in x] for x in (got, want))
    assert got == want


@needs_recorder
@pytest.mark.slow(
    reason="a recording and a fork through the real recorder (about 4 s of CPU): the same fork "
    "of the same agent's recording in the process by "
    "test_a_fork_of_an_imported_responses_trace_in_process"
)
def test_a_fork_of_an_imported_responses_trace(tmp_path: Path) -> None:
    """The why tests' agent on OpenAI Responses (two parallel calls, then the answer): the imported
    trace's items carry the ids the rebuilt answers were rendered with, so ``--from
    imported@turn=1`` serves turn 0 and sends turn 1 live (fails without link_items: the SDK
    echoes the function_call items with their ids, the rebuilt request had none)."""

    def looptap_run(url: str, *args: str) -> Any:
        agent = [sys.executable, str(WHY_AGENT), "--family", "responses"]
        up = ["--upstream", f"openai={url}"]
        argv = [*RECORDER, "run", *args, "--confdir", str(tmp_path / "conf"), *up, "--", *agent]
        return progress.run(argv, env=why_env(), capture_output=True, text=True, cwd=tmp_path)

    with ScriptedUpstream(c_route) as fake:
        proc = looptap_run(fake.url, "-o", str(tmp_path / "run.jsonl"))
    assert proc.returncode == 0 and len(fake.log) == 2, proc.stderr[-3000:]
    back = round_trip(tmp_path / "run.jsonl", tmp_path)
    with ScriptedUpstream(c_route) as fake2:
        proc = looptap_run(fake2.url, "--from", f"{back}@turn=1", "-o", str(tmp_path / "b.jsonl"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(fake2.log) == 1 and fake2.log[0].request.tool_results() == ["sunny", "rain"]


def test_a_fork_of_an_imported_responses_trace_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above in this process: the run the real recorder made of the same agent
    (tests/replay/recorded/responses_two_calls.run.jsonl), exported and imported, forked at turn 1
    with the fork's own plan, replay server and cursor, the agent's ``main`` on the real openai
    SDK: turn 0 served from the imported trace, turn 1 sent live with both results (fails
    without link_items: the SDK echoes the function_call items with their ids)."""
    back = round_trip(RECORDED / "responses_two_calls.run.jsonl", tmp_path)
    with ScriptedUpstream(c_route) as fake:
        cursor = ForkReplay(parse_from(f"{back}@turn=1")).plan({"openai": fake.url}).router(None)
        with ReplayServer(back, cursor=cursor) as srv:
            rc = why_agent_in_process(monkeypatch, srv.url, "--family", "responses")
    assert rc == 0, srv.report_lines() + cursor.report_lines()
    assert len(fake.log) == 1 and fake.log[0].request.tool_results() == ["sunny", "rain"]


def test_a_finding_on_an_inferred_finish_reason_is_a_note_not_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The analysis itself (so show, --json, the totals, why, exports, the inspector and the
    fleet alike) does not take a field looptap inferred as evidence; the clean twin is the same
    run as recorded, where the finish reason came off the wire."""
    from looptap.cassettes.reading import open_run
    from looptap.cassettes.recording.pipeline import CassetteWriter
    from tests.inspector import fixture_run

    recorded, imported = tmp_path / "recorded.jsonl", tmp_path / "imported.jsonl"
    fixture_run.write(recorded)
    with CassetteWriter(imported, meta={"source": "otlp"}) as w:
        for ex in fixture_run.exchanges():  # as an import rebuilds them: all but the finish given
            given = ["messages", "model", "output", "tools", "usage", "framing", "status"]
            ex.reconstructed = {"v": 1, "source": "a trace", "from": given,
                                "inferred": ["finish_reason"]}  # fmt: skip
            w.append(ex)

    def cut(path: Path) -> dict[str, Any]:
        (f,) = [f for v in show_json(path, capsys) for f in v["findings"]
                if f["code"] == "A.truncated_length"]  # fmt: skip
        return f

    assert cut(recorded)["severity"] == "warning"
    assert "inferred" not in cut(recorded)["details"]
    f = cut(imported)
    assert f["severity"] == "info" and f["details"]["inferred"] == "finish_reason"
    assert f["message"].startswith("not evidence: rests on the finish_reason looptap inferred")
    # the totals every reader takes: the warnings that rest on the cut are gone from the import
    warned = {
        p.name: sorted(f.code for f in open_run(p).analysis.findings if f.severity != "info")
        for p in (recorded, imported)
    }
    assert "A.truncated_length" in warned["recorded.jsonl"]
    assert set(warned["imported.jsonl"]) == set(warned["recorded.jsonl"]) - {
        "A.truncated_length",
        "C.truncated_treated_as_complete",
    }


def _span(sid: str, parent: str | None, t: int, **attrs: Any) -> dict[str, Any]:
    """One OTLP/JSON span (its JSON-valued attributes as the semconv has them: strings)."""
    kv = [
        {"key": k.replace("__", "."), "value": {"stringValue": v if isinstance(v, str) else
                                                orjson.dumps(v).decode()}}
        for k, v in attrs.items()
    ]  # fmt: skip
    return {
        "traceId": "ab" * 16, "spanId": sid * 8, "parentSpanId": parent * 8 if parent else "",
        "name": attrs.get("gen_ai__operation__name", "chat"), "attributes": kv,
        "startTimeUnixNano": str(1_763_700_000_000_000_000 + t * 10**9),
        "endTimeUnixNano": str(1_763_700_000_000_000_000 + t * 10**9 + 5 * 10**8),
    }  # fmt: skip


def _llm(sid: str, agent: str, t: int, new: list[Any], out: list[Any], why: str) -> dict[str, Any]:
    return _span(
        sid, agent, t, gen_ai__operation__name="chat", gen_ai__provider__name="openai",
        gen_ai__request__model="gpt-4o-mini", gen_ai__input__messages=new,
        gen_ai__output__messages=[{"role": "assistant", "parts": out, "finish_reason": why}],
    )  # fmt: skip


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": text}]}


def _tool_call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": cid, "name": name, "arguments": args}


def test_agent_spans_thread_a_trace_whose_llm_spans_keep_only_new_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A main agent calls a tool that runs a sub-agent (an agent as a tool: the call hands it its
    question); each LLM span keeps only the messages its call added: the agent spans say which
    calls are one conversation, the analysis finds the rest (kinds, parents) in the rebuilt
    histories as for a recorded run. Without the agent spans' histories the later calls, which
    open on tool results, are new conversations."""
    text = {"type": "text", "content": ""}
    spans = [
        _span("a", None, 0, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="main"),
        _llm("1", "a", 1, [_user("Weather in Paris, and a poem about it?")], [
            _tool_call("call_w", "get_weather", {"city": "Paris"}),
            _tool_call("call_p", "ask_poet", {"request": "Write a poem: sun in Paris"}),
        ], "tool_call"),
        _span("t", "a", 2, gen_ai__operation__name="execute_tool", gen_ai__tool__name="ask_poet"),
        _span("s", "t", 2, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="poet"),
        _llm("2", "s", 3, [_user("Write a poem: sun in Paris")],
             [_tool_call("call_r", "rhyme", {"word": "sun"})], "tool_call"),
        _llm("3", "s", 4, [_result("call_r", "fun, run")],
             [{**text, "content": "Sun on the Seine, fun to run."}], "stop"),
        _llm("4", "a", 5, [_result("call_w", "sunny"), _result("call_p", "Sun on the Seine.")],
             [{**text, "content": "Sunny, and: Sun on the Seine."}], "stop"),
    ]  # fmt: skip
    otel, out = tmp_path / "delta.otel.json", tmp_path / "run.jsonl"
    otel.write_bytes(
        orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans[::-1]}]}]}) + b"\n"
    )
    assert main(["import", "-q", str(otel), "-o", str(out)]) == 0
    views = show_json(out, capsys)
    placed = [(v["conversation"], v["turn"], v["conversation_kind"]) for v in views]
    assert placed == [("c1", 0, "main"), ("c2", 0, "sub_agent"), ("c2", 1, "sub_agent"),
                      ("c1", 1, "main")]  # fmt: skip
    assert views[1]["conversation_parent_seq"] == 0
    assert "history" in views[3]["reconstructed"]["inferred"]
    assert "history" not in views[0]["reconstructed"]["inferred"]
    assert not [f for v in views for f in v["findings"] if f["severity"] != "info"]
