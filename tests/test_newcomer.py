"""A newcomer's first hour, part three (issue 71): set-up puts ``looptap`` and nothing else on
``PATH``; the ``looptap`` of the user's own project hands ``run`` to the recorder's environment
(or says, in one line that fits, the exact command that creates it; never to create one that
exists); recording from pytest finds the recorder without ``LOOPTAP_PROXY_PYTHON``."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.recorder import clean_env

ROOT = Path(__file__).resolve().parents[1]
_SETUP_BLOCK = re.compile(r"```sh\n# 1\. .*?\n(.*?)\n", re.S)
_INSTALL_STEP = re.compile(r"^(python3? -m venv|\S*pip install|\S*uv pip install)\b")
#: Where the README's first command made the recorder (in CI and in a helper's checkout).
_CHECKOUT_RECORDER = ROOT / ".venv-proxy" / "bin" / "python"


def _command_one() -> str:
    found = _SETUP_BLOCK.search((ROOT / "README.md").read_text())
    assert found, "README.md has no set-up block starting '# 1. '"
    return found.group(1)


def _executables(d: Path) -> set[str]:
    return {p.name for p in d.iterdir() if p.is_file() and os.access(p, os.X_OK) and not p.is_dir()}


def test_set_up_puts_looptap_and_nothing_else_on_path(tmp_path: Path) -> None:
    """Item 1: command 1 appended ``.venv-proxy/bin`` to ``PATH``; where the system has no
    ``python`` (Debian 12) that made the recorder's Python the user's ``python``, and ``looptap run
    -- python my_agent.py`` failed with "No module named 'openai'". Command 1's own steps (the
    installs stood in for by the files they leave) are run as printed; every directory they add to
    ``PATH`` holds ``looptap`` alone, and it runs."""
    checkout = tmp_path / "looptap"
    bin_ = checkout / ".venv-proxy" / "bin"
    bin_.mkdir(parents=True)
    for name in ("python", "python3", "pip", "uv", "looptap", "mitmdump"):
        exe = bin_ / name
        exe.write_text(f"#!/bin/sh\necho {name} from .venv-proxy\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    steps = [s.strip() for s in _command_one().split("&&")]
    assert steps[-1] == "looptap demo", steps
    kept = [s for s in steps[:-1] if not _INSTALL_STEP.match(s)]
    assert any(s.startswith("export PATH=") for s in kept), steps
    script = " && ".join([*kept, 'printf "%s\\n" "$PATH"', "looptap"])
    r = progress.run(
        ["bash", "-c", script],
        cwd=checkout,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    path_line, said = r.stdout.splitlines()[:2]
    added = [Path(p) for p in path_line.split(os.pathsep) if p not in ("/usr/bin", "/bin")]
    assert added and path_line.startswith("/usr/bin:/bin:"), path_line  # after the user's own
    for d in added:
        assert _executables(d) == {"looptap"}, (d, sorted(_executables(d)))
    assert said == "looptap from .venv-proxy", r.stdout


_ONE_ROUND_TRIP = (
    "import os, urllib.request as u\n"
    "try: u.urlopen(u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
    "data=b'{}', headers={'content-type': 'application/json'}))\n"
    "except Exception as e: print('agent:', e)\n"
    "print('agent env:', sorted(k for k in os.environ if k.startswith('LOOPTAP_')))\n"
)


@pytest.mark.skipif(not _CHECKOUT_RECORDER.exists(), reason="no .venv-proxy in this checkout")
def test_the_projects_looptap_hands_run_to_the_recorder(tmp_path: Path) -> None:
    """Item 2: the project's ``looptap`` (no mitmproxy) stopped with an error whose useful part
    was cut off at 500 characters. Now it runs the same command with the checkout's recorder,
    without ``LOOPTAP_PROXY_PYTHON``; the agent gets none of the hand-over's variables, and the
    summary's ``details:`` line is how the user ran looptap."""
    import importlib.util

    assert importlib.util.find_spec("mitmproxy") is None, "this test needs an SDK-side environment"
    env = clean_env(scrub=("LOOPTAP_PROXY_PYTHON",))
    # the looptap of an environment without mitmproxy (this one: the user's project's)
    r = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "run", "-o", "run.jsonl",
         "--confdir", str(tmp_path / "conf"), "--upstream", "openai=http://127.0.0.1:9",
         "--", sys.executable, "-c", _ONE_ROUND_TRIP],
        cwd=tmp_path, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "looptap: 1 round trip in run.jsonl" in r.stderr, r.stderr
    assert "agent env:" in r.stdout and "HANDED" not in r.stdout, r.stdout
    assert "INVOKED" not in r.stdout, r.stdout
    details = next(ln for ln in r.stderr.splitlines() if "details:" in ln)
    assert (
        details == f"looptap: details: {sys.executable} -m looptap.cassettes.cli show run.jsonl"
    ), details


def test_no_recorder_says_the_exact_command_in_one_line_that_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Item 2: when no recorder is found the one line names the whole command that creates it
    (under the message cap, so nothing is cut) and that it is found from then on; when the
    recorder's environment is found but lacks mitmproxy, it says to repair that one, never to
    create it."""
    from looptap.cassettes import hints
    from looptap.proxy import cli, messages

    monkeypatch.delenv("LOOPTAP_PROXY_PYTHON", raising=False)
    monkeypatch.delenv(hints.HANDED_OFF, raising=False)
    monkeypatch.setattr(hints, "found_recorder", lambda: None)
    said = cli.hand_off(cli.argparse.Namespace(cli_argv=["run", "--", "python", "a.py"]))
    command, _ = hints.recorder_install_command()
    assert said.endswith(f"create it with `{command}`, then run this again"), said
    assert len("looptap: " + said) <= messages.MAX_CHARS, len(said)
    checkout = hints.looptap_checkout()
    if checkout is not None:  # by the checkout's path, once: it runs from any directory
        assert command.startswith(f"(cd {checkout} && python3 -m venv .venv-proxy && "), command
    # the recorder named is this very environment (no mitmproxy): repaired, not made anew
    monkeypatch.setenv("LOOPTAP_PROXY_PYTHON", sys.executable)
    said = cli.hand_off(cli.argparse.Namespace(cli_argv=["run"]))
    repair = f"error: the recorder's environment {sys.prefix} has no mitmproxy; "
    assert said.startswith(repair), said
    assert "python3 -m venv" not in said and "pip install" in said, said


@pytest.mark.skipif(not _CHECKOUT_RECORDER.exists(), reason="no .venv-proxy in this checkout")
def test_pytest_recording_finds_the_checkouts_recorder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 2: recording from pytest without ``LOOPTAP_PROXY_PYTHON`` said to create the recorder
    environment that the README's first command had made; it is found."""
    from looptap.cassettes.replay.testing.recorder import recorder_python

    monkeypatch.delenv("LOOPTAP_PROXY_PYTHON", raising=False)
    assert recorder_python() == str(_CHECKOUT_RECORDER)


def test_the_readme_says_command_two_for_what_it_is() -> None:
    """Items 4, 5: command 2 read as part of set-up; nothing said it is optional, what it installs,
    how to run a part of it, how to remove it; npm behind a TLS-inspecting proxy hung silently
    (only uv's ``SSL_CERT_FILE`` was named). The removal line names every directory ``.ci/run``
    makes by default, and none that command 1 made."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "NODE_EXTRA_CA_CERTS=" in readme and "SSL_CERT_FILE=" in readme
    assert re.search(r"# 2\. Optional, only to run looptap's own test suite", readme), readme[:2000]
    assert 'suite core "$@"' in ci and 'suite matrix "$@"' in ci  # a part of it, both phases
    assert "bash .ci/run tests/" in readme
    made = set(re.findall(r"\$\{LOOPTAP_\w+:-(\.[\w-]+)\}", ci))
    assert {".venv", ".venv-clients", ".npm-agents"} <= made, made
    removal = re.search(r"`rm -rf ([^`]+)` removes it", readme)
    assert removal, "the README says how to remove what command 2 installs"
    assert set(removal.group(1).split()) == made - {".venv-proxy"}, (removal.group(1), made)
    assert re.search(r"about \d+ minutes", readme) and re.search(r"\d(\.\d)? GB", readme)


def test_replay_prints_a_key_line_a_keyless_openai_sdk_works_with(tmp_path: Path) -> None:
    """Item 7: ``looptap replay`` printed base-URL lines only: the openai SDK (the test
    environment's, ``openai`` from PyPI) without ``OPENAI_API_KEY`` failed with "Missing
    credentials" though docs/testing.md says any agent can use it. Its export lines, evaluated as
    printed by a shell with no key, are all the SDK needs: the recorded answer comes back."""
    import orjson
    from real_corpus import CORPUS

    from looptap.cassettes.cli import main
    from looptap.cassettes.reading import open_run

    src = CORPUS / "pydantic-ai/tests/cassettes/test_settings/test_stop_settings[openai].yaml"
    run = tmp_path / "run.jsonl"
    assert main(["import", "-q", str(src), "-o", str(run)]) == 0
    recorded = open_run(run, whole=True).exchanges[0]
    (tmp_path / "body.json").write_bytes(orjson.dumps(recorded.request_json()))
    agent = (
        "import json, openai\n"
        "body = json.load(open('body.json'))\n"
        "reply = openai.OpenAI(max_retries=0).chat.completions.create(**body)\n"
        "print('answer:', reply.choices[0].message.content)\n"
    )
    (tmp_path / "agent.py").write_text(agent)
    env = clean_env(scrub=("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"))
    server = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", str(run), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    try:
        assert server.stdout is not None and server.stderr is not None
        # the "replaying …" line on stderr comes once every export line was flushed to stdout
        said = server.stderr.readline()
        assert "replaying" in said, said
        os.set_blocking(server.stdout.fileno(), False)
        exports = [ln.strip() for ln in server.stdout.read().splitlines()]
        assert exports and all(ln.startswith("export ") for ln in exports), exports
        assert "export OPENAI_API_KEY=looptap-replay-placeholder-key" in exports, exports
        assert sum("GOOGLE_API_KEY" in ln or "GEMINI_API_KEY" in ln for ln in exports) == 1
        r = progress.run(
            ["bash", "-c", "\n".join([*exports, f"{sys.executable} agent.py"])],
            cwd=tmp_path, env=env, capture_output=True, text=True,
        )  # fmt: skip
    finally:
        server.send_signal(2)
        progress.communicate(server)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("answer: "), r.stdout
