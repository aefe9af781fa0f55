"""``looptap demo``: record a real agent run through the proxy, offline, then show it.

The agent is ``cassettes/examples/tool_search_agent.py`` (standard library only, a tool loop with
tool search, deferred tools and argument validation). Its model is the loopback replay server
serving the answers Claude gave in the bundled recording (``examples/tool_loop_anthropic.yaml``),
so the run needs no network and no API key. The recorder (``looptap run``) sits in between as it
would in front of the real API, and the cassette it writes is shown with its findings.

The recorder needs mitmproxy (its own environment, see docs/recorder.md). Without it the demo says
so and shows the bundled recording imported instead, so the command is useful either way.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CassetteError
from ..hints import INVOKED_AS, command_line, count, found_recorder, looptap_argv, looptap_command
from ..reading import open_run
from ..recording.pipeline import CassetteWriter
from ..replay.serving.server import ReplayServer
from ..storage import (
    UnsafePath,
    check_target,
    is_cassette,
    load_vcr,
    remove_if_same,
    staged,
)
from ..views import estimated_why, money, root_cause_lines

if TYPE_CHECKING:
    from ..storage import Target

__all__ = ["cmd_demo"]

#: The bundled recording and the agent that reproduces its requests.
RECORDING = "examples/tool_loop_anthropic.yaml"
AGENT = "examples/tool_search_agent.py"
#: The listener the agent's SDK variable points at (``looptap run`` sets ANTHROPIC_BASE_URL for it).
LISTENER = "anthropic"


def recorder_python() -> str | None:
    """An interpreter that can run the recorder: this one if mitmproxy is importable here, else
    ``$LOOPTAP_PROXY_PYTHON``, else the one set-up made (the checkout's ``.venv-proxy``), else
    None."""
    if importlib.util.find_spec("mitmproxy") is not None:
        return sys.executable
    other = os.environ.get("LOOPTAP_PROXY_PYTHON")
    if other and Path(other).exists():
        return other
    return found_recorder()


def cmd_demo(args: argparse.Namespace, say: Callable[[str], None] = print) -> int:
    """Record the bundled example agent through the proxy, offline, into ``-o`` and show the run
    (the README's first command); without the recorder installed, show the bundled recording. The
    exit status of the two."""
    dest = Path(args.output)
    try:
        # An earlier demo (a cassette) is replaced; any other file, a link, a directory or a
        # device at -o is refused before anything runs (storage/_paths.py).
        target = check_target(
            dest, "the demo's cassette", owned=is_cassette, hint="give -o a new path"
        )
    except UnsafePath as exc:
        say(f"looptap demo: error: {exc}")
        return 2
    recording = files("looptap.cassettes").joinpath(RECORDING)
    agent = files("looptap.cassettes").joinpath(AGENT)
    python = recorder_python()
    with as_file(recording) as rec_path, as_file(agent) as agent_path:
        exchanges = load_vcr(rec_path)
        if python is None:
            say(
                "looptap demo: the recorder (mitmproxy) is not installed in this environment, so "
                "this shows the bundled recording instead of recording it live. The README's first "
                "command installs the recorder."
            )
            return _import_and_show(rec_path, target, say)
        remove_if_same(dest, target.replaces)
        with (
            ReplayServer(exchanges) as upstream,
            tempfile.TemporaryDirectory(prefix="looptap-demo-") as conf,
        ):
            cmd = [
                python, "-m", "looptap.cassettes.cli", "run", "-o", str(dest),
                "--upstream", f"{LISTENER}={upstream.url}", "--confdir", conf,
                "--", sys.executable, str(agent_path),
            ]  # fmt: skip
            say(
                "looptap demo: the bundled example agent asks Claude 4 questions, answered offline "
                "by a\nloopback server replaying a real recording, through the recorder into "
                f"{dest}"
            )
            env = {
                **os.environ,
                "ANTHROPIC_API_KEY": "sk-ant-api03-looptap-demo-key-never-written-to-disk",
                INVOKED_AS: looptap_command(),  # its "details:" line as the user runs looptap
            }
            sys.stdout.flush()
            # the agent's answers and the recorder's lines are the run: `show` has them
            done = subprocess.run(
                cmd, env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            rc = done.returncode
            misses = upstream.misses
        if misses:
            say(f"looptap demo: the agent sent {len(misses)} request(s) the recording never had:")
            for m in misses[:3]:
                say(f"  {m.headline}")
        if rc != 0 or not dest.exists():
            said = done.stdout.decode("utf-8", "replace").splitlines()[-12:]
            say("\n".join(f"  {ln[:200]}" for ln in said))
            say(f"looptap demo: the recorded run failed (exit status {rc})")
            return rc or 2
    # the file itself, not the editable install's link to it (.looptap-editable/looptap/…)
    agent_file = Path(agent_path).resolve()
    live = [*_looptap(python), "run", "-o", "run.jsonl", "--", "python3", str(agent_file)]
    return first_screen(dest, say, live=live, recorder=_looptap(python))


def _looptap(python: str) -> list[str]:
    """How the user runs the recorder: as they run looptap when this is the recorder's
    environment, else by the recorder's interpreter (``LOOPTAP_PROXY_PYTHON``)."""

    return looptap_argv() if python == sys.executable else [python, "-m", "looptap.cassettes.cli"]


#: The widest line of the demo's first screen (a recorded message is cut to it).
WIDTH = 100


def first_screen(
    dest: Path,
    say: Callable[[str], None],
    *,
    live: list[str] | None = None,
    recorder: list[str] | None = None,
) -> int:
    """The demo's first screen: a short summary of the run, its root cause (and what it caused),
    the next commands, ``show`` first (the whole run, one command away); no line wider than
    :data:`WIDTH` but a path the user gave. The exit status (2: the run cannot be read)."""
    try:
        run = open_run(dest)
        analysis = run.analysis
    except CassetteError as exc:
        say(f"looptap demo: error: {exc}")
        return 2
    turns = analysis.turns.values()
    priced = [t.tokens for t in turns if t.tokens.cost is not None]
    why = 0
    for k in priced:
        why |= estimated_why(k)
    total = sum((k.cost for k in priced if k.cost is not None), Decimal(0))
    cost = money(total, bool(why)) if priced else "unknown"
    tokens_in = sum(t.tokens.input or 0 for t in turns)
    tokens_out = sum(t.tokens.output or 0 for t in turns)
    say(
        f"\nrecorded {count(len(run), 'round trip')}: "
        f"{count(len(analysis.conversations), 'conversation')}, "
        f"{count(len(analysis.turns), 'turn')}; tokens in {tokens_in:,}, out {tokens_out:,}; "
        f"cost {cost}"
    )
    by: dict[str, Counter[str]] = {layer: Counter() for layer in "EAC"}
    for f in analysis.findings:
        by[f.layer][f.severity.value] += 1
    said = [
        f"{layer} " + (", ".join(f"{c[sev]} {sev}" for sev in _SEVERITIES if c[sev]) or "none")
        for layer, c in by.items()
    ]
    say("findings: " + " · ".join(said))
    for line in root_cause_lines(analysis.findings, WIDTH):
        say(line)
    if live is not None:
        say("\nwith your ANTHROPIC_API_KEY this records the example agent live:")
        line, head, agent = command_line(live), command_line(live[:-1]), command_line(live[-1:])
        # a long path on a line of its own, continued as the shell reads it
        say(f"  {line}" if len(line) + 2 <= WIDTH else f"  {head} \\\n    {agent}")
    return next_steps(0, dest, say, recorder)


#: Severities in the order the findings line says them.
_SEVERITIES = ("error", "warning", "info")


def next_steps(
    rc: int, dest: Path, say: Callable[[str], None], recorder: list[str] | None = None
) -> int:
    """What to try next: the whole run (``show``), turn by turn (``inspect``), your own agent
    (``recorder``: how to run the recorder, when it is not this looptap)."""

    me = looptap_argv()  # as the user runs looptap, so the lines run as printed
    show, inspect = (command_line([*me, verb, str(dest)]) for verb in ("show", "inspect"))
    own = command_line([*(recorder or me), "run", "-o", "run.jsonl", "--"])
    say(f"\nnext: {show}   (every round trip, the findings, the token growth)")
    say(f"      {inspect}   (turn by turn in the terminal; ? for the keys)")
    say(f"      {own} python your_agent.py   (record your own agent)")
    return rc


def _import_and_show(src: Path, target: Target, say: Callable[[str], None]) -> int:
    dest = target.path
    with (
        staged(target) as s,
        CassetteWriter(s.path, meta={"source": "vcr", "imported_from": src.name}) as w,
    ):
        for ex in load_vcr(src):
            w.append(ex)
    say(f"{src.name} → {dest}")
    return first_screen(dest, say)
