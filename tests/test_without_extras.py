"""Every command from an install without looptap's extras (issue 83, item 4): the docs/testing.md
recipe installs looptap into the user's own project without ``proxy``, ``inspector``, ``mcp`` or
``fleet``. Each command there works, or says in one line how to get what it needs, or, when the
recorder's environment has it (the README makes that one with ``proxy,inspector,mcp,html``),
runs there, as ``run`` does. ``looptap inspect`` ended in a ``ModuleNotFoundError: No module
named 'textual'`` traceback; ``looptap mcp`` refused although the recorder's environment had the
mcp package.

Each case runs ``main`` in a child whose optional packages are blocked (``sys.modules[name] =
None``: imports fail, ``find_spec`` finds nothing), as in that environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from looptap.cassettes.commands import COMMANDS
from tests.support import progress

#: What the extras bring and the core never needs.
OPTIONAL = ("textual", "textual_plotext", "mitmproxy", "mcp", "duckdb", "jinja2", "opentelemetry")

#: The child: the optional packages blocked, then ``main`` for each command line in argv[1]
#: (a JSON list), its exit status and stderr written to argv[2]. ``NO_RECORDER`` set: no
#: recorder's environment is found either (as in a project without the looptap checkout's).
CHILD = f"""
import contextlib, io, json, os, sys, traceback
for name in {OPTIONAL!r}:
    sys.modules[name] = None
from looptap.cassettes import hints
from looptap.cassettes.cli import demo, main
if os.environ.get("NO_RECORDER"):
    hints.found_recorder = demo.found_recorder = lambda: None
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        except BaseException:
            rc = "raised"
            traceback.print_exc(file=err)
    out.append([argv, rc, err.getvalue()])
open(sys.argv[2], "w").write(json.dumps(out))
"""


def _child(tmp: Path, argvs: list[list[str]], **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LOOPTAP_")}
    return progress.run(
        [sys.executable, "-c", CHILD, json.dumps(argvs), str(tmp / "said.json")],
        cwd=tmp,
        env={**base, "NO_COLOR": "1", **env},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run to give the commands: the bundled example recording, imported."""
    from importlib.resources import as_file, files

    from looptap.cassettes.cli import main

    tmp = tmp_path_factory.mktemp("run")
    with as_file(files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as y:
        assert main(["import", str(y), "-o", str(tmp / "run.jsonl"), "-q"]) == 0
    return tmp / "run.jsonl"


def _lines(run: Path, tmp: Path) -> dict[str, list[str]]:
    """A command line for every command ``looptap --help`` lists, each reaching what it needs
    beyond the core where it needs anything."""
    r, d = str(run), str(run.parent)
    yaml = str(Path(__file__).resolve().parents[1] / "cassettes/examples/tool_loop_anthropic.yaml")
    return {
        "show": ["show", r],
        "import": ["import", yaml, "-o", str(tmp / "imported.jsonl"), "-q"],
        "demo": ["demo", "-o", str(tmp / "demo.jsonl")],
        "compare": ["compare", r, "--model", "m", "--dry-run"],
        "diff": ["diff", r, r],
        "export": ["export", r, "--html", "-o", str(tmp / "run.html")],
        "fleet": ["fleet", "findings", "--fleet", str(tmp / "fleet.duckdb")],
        "index": ["index", d, "-o", str(tmp / "fleet.duckdb")],
        "inspect": ["inspect", r],
        "mcp": ["mcp", "--root", d],
        "query": ["query", "select 1", "--fleet", str(tmp / "fleet.duckdb")],
        "record": ["record", "-o", str(tmp / "recorded.jsonl")],
        "replay": ["replay", str(tmp / "no-such-run.jsonl")],
        "rules": ["rules", "learn", r, "-o", str(tmp / "rules.toml")],
        "run": ["run", "-o", str(tmp / "ran.jsonl"), "--", "true"],
        "textconv": ["textconv", r],
        "verify": ["verify", r],
        "why": ["why", r],
    }


def test_every_command_works_or_says_in_one_line_what_it_needs(run: Path, tmp_path: Path) -> None:
    lines = _lines(run, tmp_path)
    assert set(lines) == {c.name for c in COMMANDS}, "a command of --help is not tried here"
    done = _child(tmp_path, list(lines.values()), NO_RECORDER="1")
    assert done.returncode == 0, done.stderr[-3000:]
    for argv, rc, err in json.loads((tmp_path / "said.json").read_text()):
        assert rc != "raised" and "Traceback" not in err, (argv, err[-2000:])
        said = err.strip().splitlines()
        if rc not in (0, 1):  # refused: one line, saying what to run
            assert len(said) == 1 and said[0].startswith("looptap"), (argv, err)
    by = {a[0]: (rc, err) for a, rc, err in json.loads((tmp_path / "said.json").read_text())}
    # what the extras bring is named with the command that installs it into this environment
    for command, what in (
        ("inspect", "the inspector extra"),
        ("mcp", "the mcp package"),
        ("index", "the fleet extra"),
        ("query", "the fleet extra"),
        ("export", "the html extra"),
        ("record", "create it with"),
        ("run", "create it with"),
    ):
        rc, err = by[command]
        assert rc == 2 and what in err and "pip install" in err, (command, err)
    assert by["show"][0] == by["textconv"][0] == by["verify"][0] == 0, by
    assert by["demo"][0] == 0 and (tmp_path / "demo.jsonl").exists(), by["demo"]  # the bundled one


@pytest.mark.parametrize("command", ["inspect", "mcp", "run", "record"])
def test_what_the_recorders_environment_has_runs_there(
    command: str, run: Path, tmp_path: Path
) -> None:
    """Handed to the recorder's interpreter (here a stand-in that says how it was started) with
    the words the user typed, marked as handed over, as ``run`` does."""
    fake = tmp_path / "python"
    fake.write_text(
        '#!/bin/sh\nprintf \'%s\\n\' "$LOOPTAP_HANDED_OFF" "$@" > "$(dirname "$0")/argv"\n'
    )
    fake.chmod(0o755)
    argv = _lines(run, tmp_path)[command]
    done = _child(tmp_path, [argv], LOOPTAP_PROXY_PYTHON=str(fake))
    assert done.returncode == 0, done.stderr[-3000:]  # the stand-in's status: exec'd
    said = (tmp_path / "argv").read_text().splitlines()
    assert said == ["1", "-m", "looptap.cassettes.cli", *argv], said
    assert not (tmp_path / "said.json").exists()  # the child was replaced before it wrote
