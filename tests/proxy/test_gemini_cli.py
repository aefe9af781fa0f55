"""Gemini CLI (``@google/gemini-cli`` 0.61.0, the real npm package of .npm-agents) under
``looptap run`` (issue 45, "Clients"): with ``GOOGLE_GEMINI_BASE_URL`` set and no auth type in its
settings it picks its gateway auth, which ``gemini -p`` refuses ("Invalid auth method selected.")
having sent nothing. looptap says why, and the fix, in one line before the command starts; with the
fix in the user's settings the line is not said and the run is recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.providers import GEMINI_CLI_AUTH, start_advice
from looptap.cassettes.storage import read_records
from tests.proxy.test_e2e_node_agents import explain, looptap_run, need, run_env
from tests.support.recorder import needs_recorder
from tests.support.scripted import Reply, ScriptedRequest, ScriptedUpstream

ANSWER = "PARIS IS SUNNY"


def route(req: ScriptedRequest) -> Reply:
    """Its model router asks a small model for a JSON complexity score first; then the main turn."""
    if "complexity_score" in json.dumps(req.body.get("generationConfig") or {}):
        return Reply.say(
            json.dumps({"complexity_reasoning": "a simple question", "complexity_score": 5}),
            what="router",
        )
    return Reply.say(ANSWER, what="main")


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


def _run(tmp_path: Path, confdir: Path, settings: dict | None) -> tuple:
    gemini = need("@google/gemini-cli", bin_name="gemini")
    env = run_env(
        tmp_path, GEMINI_API_KEY="AIza-looptap-test-key", GEMINI_CLI_TRUST_WORKSPACE="true"
    )
    if settings is not None:
        (tmp_path / "home" / ".gemini").mkdir(parents=True, exist_ok=True)
        (tmp_path / "home" / ".gemini" / "settings.json").write_text(json.dumps(settings))
    with ScriptedUpstream(route) as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            [str(gemini), "-p", "What is the weather in Paris?"],
            env,
            upstream=up,
        )  # type: ignore[arg-type]
        sent = list(up.log)
    return proc, out, sent


@needs_recorder
def test_the_gateway_auth_refusal_is_said_before_the_command_starts(
    tmp_path: Path, confdir: Path
) -> None:
    proc, _, sent = _run(tmp_path, confdir, None)
    lines = proc.stderr.splitlines()
    said = [i for i, line in enumerate(lines) if line == f"looptap: {GEMINI_CLI_AUTH}"]
    refused = [
        i
        for i, line in enumerate(lines)
        if "Invalid auth method selected" in line and not line.startswith("looptap:")
    ]
    # said first, then the CLI's own words
    assert said and refused and said[0] < refused[0], explain(proc)
    assert sent == [], [e.line() for e in sent]


@needs_recorder
def test_with_the_auth_type_chosen_the_run_is_recorded_and_nothing_is_said(
    tmp_path: Path, confdir: Path
) -> None:
    proc, out, sent = _run(
        tmp_path, confdir, {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    )
    assert proc.returncode == 0 and ANSWER in proc.stdout, explain(proc)
    assert GEMINI_CLI_AUTH not in proc.stderr
    assert any(e.request.family == "gemini" for e in sent)
    cas = read_records(out)
    an = analyse(cas.exchanges)
    # the router's call and the answer
    model = [ex for ex in cas.exchanges if not ex.tool]  # (the tools' HTTP is not a model call)
    assert sum(len(c.turns) for c in an.conversations) == len(model) >= 2
    assert not [f for f in an.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in an.findings
    ]


def test_the_advice_is_only_for_the_gemini_cli_without_a_chosen_auth(tmp_path: Path) -> None:
    cli = tmp_path / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
    cli.parent.mkdir(parents=True)
    cli.write_text("")
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").symlink_to(cli)
    cli.chmod(0o755)
    home = tmp_path / "home"
    env = {
        "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
        "HOME": str(home),
        "PATH": str(bin_dir),
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "none.json"),
    }
    work = tmp_path / "work"
    work.mkdir()
    # found on PATH, through the .bin link
    assert start_advice(["gemini", "-p", "hi"], env, work) == [GEMINI_CLI_AUTH]
    assert start_advice(["npx", "@google/gemini-cli", "-p", "hi"], env, work) == [GEMINI_CLI_AUTH]
    assert start_advice(["python", "agent.py"], env, work) == []  # another command
    # no base URL exported
    assert start_advice(["gemini", "-p", "hi"], {**env, "GOOGLE_GEMINI_BASE_URL": ""}, work) == []
    # another auth asked for
    assert (
        start_advice(["gemini", "-p", "hi"], {**env, "GOOGLE_GENAI_USE_VERTEXAI": "true"}, work)
        == []
    )
    # an auth type chosen in any settings file the CLI reads: user, workspace (comments allowed),
    # system
    chosen = '{\n  // mine\n  "security": {"auth": {"selectedType": "gemini-api-key"}}\n}'
    for path in (
        home / ".gemini" / "settings.json",
        work / ".gemini" / "settings.json",
        tmp_path / "system.json",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(chosen)
        assert (
            start_advice(
                ["gemini"],
                {**env, "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "system.json")},
                work,
            )
            == []
        ), path
        path.unlink()
    # a settings file that is a FIFO is never read (no hang), and does not count
    import os

    os.mkfifo(home / ".gemini" / "settings.json")
    assert start_advice(["gemini"], env, work) == [GEMINI_CLI_AUTH]
