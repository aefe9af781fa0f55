"""Every run's agent (issue 69, item 5; docs/fleet.md): the name given (``looptap run --agent``,
``looptap record --agent``, ``$LOOPTAP_AGENT``), else the trace's ``service.name``, else the
program of the command recorded, else the directory, with the source in ``agent_source``.

The runs are made by other people's software: the why tests' agent (the real openai SDK) under
the real recorder (mitmproxy, .venv-proxy), traced by opentelemetry-instrumentation-openai-v2
with the OpenTelemetry SDK's own resource (``OTEL_SERVICE_NAME``), and corpus cassettes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from real_corpus import CORPUS

from looptap.cassettes.fleet import agent_of, program
from looptap.cassettes.recording import agent_name, run_about
from tests.fleet.test_fleet import looptap, looptap_process
from tests.support import progress
from tests.support.recorder import RECORDER, needs_recorder
from tests.support.scripted import ScriptedUpstream
from tests.why.test_why import AGENT as WHY_AGENT
from tests.why.test_why import why_env
from tests.why.test_why_agents import route

duckdb = pytest.importorskip("duckdb")
REPO = Path(__file__).resolve().parents[2]
TRACED = REPO / "tests" / "interop" / "traced_agent.py"
VCR = CORPUS / "llm-anthropic/tests/cassettes/test_anthropic/test_tools.yaml"


def header(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        meta = orjson.loads(f.readline())["meta"]
    assert isinstance(meta, dict)
    return meta


@needs_recorder
@pytest.mark.slow(
    reason=(
        "four recorder runs, one per source of the agent's name (about 9 s of CPU): the "
        "sources' order runs in the process in "
        "test_the_sources_in_order_and_an_untrusted_header, and a recording naming its agent "
        "in test_looptap_record_keeps_the_agent_given"
    )
)
def test_each_run_gets_an_agent_and_the_index_says_from_where(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    runs = tmp_path / "runs"
    env = why_env()
    env.update(
        OTEL_SERVICE_NAME="checkout-bot",  # the OpenTelemetry SDK's resource: service.name
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        PYTHONPATH=str(REPO),
    )
    trace = tmp_path / "trace.json"
    agent = ["--family", "chat", "--shape", "sub-agent"]

    def record(out: Path, *opts: str, argv: list[str], **more: str) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        proc = progress.run(
            [*RECORDER, "run", "-o", str(out), "--confdir", str(tmp_path / "conf"),
             "--upstream", f"openai={fake.url}", *opts, "--", *argv, *agent],
            env={**env, **more}, capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]

    with ScriptedUpstream(route) as fake:
        # --agent; the command traced by the real instrumentation (its trace is imported below)
        record(
            runs / "ci" / "given.jsonl",
            "--agent", "planner",
            argv=[sys.executable, str(TRACED), "openai-v2", str(trace)],
        )  # fmt: skip
        # $LOOPTAP_AGENT
        record(
            runs / "ci" / "env.jsonl", argv=[sys.executable, str(WHY_AGENT)], LOOPTAP_AGENT="triage"
        )
        # no name: the program run (through env, a variable holding a secret the redactor masks)
        record(
            runs / "ci" / "command.jsonl",
            "--redact-pattern", "xyz-secret-[0-9]+",
            argv=["env", "LOOPTAP_TEST_TOKEN=xyz-secret-42", sys.executable, str(WHY_AGENT)],
        )  # fmt: skip
        # a fork of the $LOOPTAP_AGENT run, named: its branch's header (written by the fork)
        record(
            runs / "forks" / "branch.jsonl",
            "--from", f"{runs / 'ci' / 'env.jsonl'}@turn=1", "--agent", "forker",
            argv=[sys.executable, str(WHY_AGENT)],
        )  # fmt: skip
    branch = header(runs / "forks" / "branch.jsonl")
    assert branch["agent"] == "forker" and branch["origin"]["turn"] == 1
    # only the words up to the program: an argument after it may be a key no pattern knows
    assert branch["command"] == [sys.executable, str(WHY_AGENT)]
    given, command = header(runs / "ci" / "given.jsonl"), header(runs / "ci" / "command.jsonl")
    assert given["agent"] == "planner" and given["command"][1:] == [str(TRACED)]
    assert header(runs / "ci" / "env.jsonl")["agent"] == "triage"
    assert "agent" not in command and command["command"][0] == "env"
    assert "xyz-secret-42" not in (runs / "ci" / "command.jsonl").read_text()
    # the trace of the first run, imported: its service.name
    r = looptap("import", "-q", str(trace), "-o", str(runs / "imports" / "traced.jsonl"))
    assert r.returncode == 0, r.stderr
    assert header(runs / "imports" / "traced.jsonl")["service"] == "checkout-bot"
    # a vcrpy cassette says nothing: its directory names it
    (runs / "support-team").mkdir()
    shutil.copy(VCR, runs / "support-team" / "tools.yaml")

    r = looptap("index", str(runs), "-o", str(tmp_path / "fleet.duckdb"))
    assert r.returncode == 0, r.stderr
    r = looptap(
        "query", "--fleet", str(tmp_path / "fleet.duckdb"), "--json",
        "SELECT regexp_extract(run, '[^/]+/[^/]+$') AS run, agent, agent_source, command "
        "FROM runs ORDER BY run",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = {x["run"]: x for x in map(orjson.loads, r.stdout.splitlines())}
    got = {k: (v["agent"], v["agent_source"]) for k, v in rows.items()}
    assert got == {
        "ci/command.jsonl": ("why_agent", "command"),
        "ci/env.jsonl": ("triage", "given"),
        "ci/given.jsonl": ("planner", "given"),
        "forks/branch.jsonl": ("forker", "given"),
        "imports/traced.jsonl": ("checkout-bot", "service"),
        "support-team/tools.yaml": ("support-team", "directory"),
    }
    assert rows["ci/command.jsonl"]["command"].startswith("env 'LOOPTAP_TEST_TOKEN=[REDACTED]' ")
    assert "xyz-secret" not in rows["ci/command.jsonl"]["command"]
    # the named question groups by it
    r = looptap_process(
        "fleet", "cost", "--by", "agent", "--fleet", str(tmp_path / "fleet.duckdb"), "--json"
    )
    assert r.returncode == 0, r.stderr
    assert {x["agent"] for x in map(orjson.loads, r.stdout.splitlines())} == {
        a for a, _ in got.values()
    }


@needs_recorder
def test_a_bad_agent_name_is_one_line_and_nothing_runs(tmp_path: Path) -> None:
    for opts, extra in (
        (["--agent", "two\nlines"], {}),
        (["--agent", "x" * 101], {}),
        ([], {"LOOPTAP_AGENT": "tab\there"}),
    ):
        proc = progress.run(
            [*RECORDER, "run", "-o", str(tmp_path / "run.jsonl"), *opts, "--", "true"],
            env={**os.environ, **extra}, capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "printable characters" in proc.stderr
        assert not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "agent.py", "--fast"], "agent"),
        (["/usr/bin/python3.12", "-u", "src/support_bot.py"], "support_bot"),
        (["python", "-m", "billing.agent"], "billing.agent"),
        (["uv", "run", "--no-sync", "tsx", "src/triage.ts"], "triage"),
        (["npx", "tsx", "agents/planner.mts"], "planner"),
        (["env", "A=1", "node", "dist/coder.js"], "coder"),
        (["claude", "-p", "fix the tests"], "claude"),
        (["python", "-c", "print(1)"], "python"),
        ("pytest tests/evals -k 'slow and not flaky'", "pytest"),
        ([], None),
        ([1, 2], None),
        (None, None),
    ],
)
def test_the_program_of_a_command(argv: Any, name: str | None) -> None:
    assert program(argv) == name


def test_the_sources_in_order_and_an_untrusted_header() -> None:
    where = Path("/runs/nightly/run.jsonl")
    meta = {"agent": "planner", "service": "svc", "command": ["python", "bot.py"]}
    assert agent_of(meta, where) == ("planner", "given")
    assert agent_of({**meta, "agent": "\x1b[31mred"}, where) == ("svc", "service")
    assert agent_of({**meta, "agent": None, "service": 7}, where) == ("bot", "command")
    assert agent_of({"agent": "", "command": "x" * 0}, where) == ("nightly", "directory")
    assert agent_of({"agent": "y" * 101}, where) == ("nightly", "directory")
    with pytest.raises(ValueError, match="LOOPTAP_AGENT wants a name"):
        agent_name(None, {"LOOPTAP_AGENT": "a\x00b"})
    assert agent_name(None, {"LOOPTAP_AGENT": "  "}) is None
    assert agent_name(" coder ", {"LOOPTAP_AGENT": "other"}) == "coder"
    masked = run_about("a", ["tool", "--key", "sk-123"], lambda s: s.replace("sk-123", "[R]"))
    assert masked == {"agent": "a", "command": ["tool"]}  # the arguments after the program: none
    masked = run_about(None, ["env", "K=sk-123", "python", "-m", "bot", "x"], lambda s: s[:4])
    assert masked == {"command": ["env", "K=sk", "pyth", "-m", "bot"]}


@needs_recorder
def test_looptap_record_keeps_the_agent_given(tmp_path: Path) -> None:
    """``looptap record --agent``: the header names it from the start (the cassette is opened,
    its header written, before the recorder says it is ready)."""
    import signal

    ready = tmp_path / "ready.json"
    out = tmp_path / "rec" / "run.jsonl"
    out.parent.mkdir()
    proc = subprocess.Popen(
        [*RECORDER, "record", "-o", str(out), "--confdir", str(tmp_path / "conf"),
         "--agent", "reviewer", "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "LOOPTAP_AGENT": "not-this-one"},
    )  # fmt: skip
    try:
        progress.until(lambda: ready.exists() or proc.poll() is not None, what="the ready file")
    finally:
        proc.send_signal(signal.SIGINT)
        progress.wait(proc)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    meta = header(out)
    assert meta["agent"] == "reviewer" and "command" not in meta
    assert agent_of(meta, out) == ("reviewer", "given")
