"""Start-up: what each entry point costs before it does any work, side by side with bare Python.

    python bench/startup.py [-n RUNS] [--write] [--against REF]

Each target and its yardstick (``python -c pass`` of the same interpreter, or the same pytest
session without looptap's plugin) run in turn, with bytecode compiled first as an install has it,, A
B A B …, and the figures are medians of the pairs: the time over the yardstick and the ratio. The
machine's speed drifts less within a pair than across a run. ``--write`` writes docs/startup.md.
Targets:

* ``looptap --help`` (goal: at most 0.15 s over bare Python);
* ``looptap show`` on the demo cassette (the bundled example, imported once);
* ``import looptap.cassettes.replay.testing.plugin`` over ``import pytest``, and a pytest session
  that does not use the plugin, with and without it (goal: the plugin adds at most 50 ms);
* ``looptap run -o X -- true`` in the recorder's environment (``.venv-proxy``), when it exists.

``--against REF`` (a commit, e.g. ``HEAD~1`` or ``main``) adds the commands a user waits on run
from this tree and from REF's (a temporary ``git worktree``; each tree's packages first on
``PYTHONPATH`` and its own module path: ``looptap.cassettes``, or ``cassettes`` for a tree from
before the one import package), interleaved in one run: ``looptap --help``, the pytest plugin's
import, ``looptap show`` of the demo run and of its first two
round trips, ``looptap replay`` of those until its export lines (goal for both: at most 0.3 s over
bare Python), ``looptap run -- true`` (the recorder's start-up and stop), the same from the SDK's
environment (the hand-off to the recorder's) and ``looptap run --from`` those two round trips
``-- true`` (what each branch of a ``looptap why`` starts and stops: the recorder, its writer, the
fork's replay server), and the two with an agent (``agent.py``: it sends the two round trips'
requests again, to a loopback upstream on a thread of the bench that answers them as recorded):
a recorded run and a fork's branch from turn 1 of one. With ``--write`` that
table goes into docs/startup.md too. Children run without ``PYTHONDONTWRITEBYTECODE``, on bytecode
compiled first for both trees and the environments.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


#: The CPU seconds (user + system) of the last command :func:`_wall` or :func:`_until_export` ran,
#: its descendants included: on a loaded machine the wall time waits for a core, the CPU time
#: much less so, and on a quiet one the two agree.
_CPU = [0.0]


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _wall(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    c0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    took = time.perf_counter() - t0
    _CPU[0] = _children_cpu() - c0
    # show exits 1 when the run has findings; pytest 5 = no tests
    if proc.returncode not in (0, 1, 5):
        raise SystemExit(
            f"{' '.join(cmd)} exited {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-500:]}"
        )
    return took


def _pairs(
    a: list[str], b: list[str], runs: int, env: dict[str, str], cwd: Path
) -> tuple[float, float, float, float]:
    """(median A, median B, median A−B, median A/B) over ``runs`` interleaved pairs, after one
    warm-up each."""
    _wall(a, env, cwd)
    _wall(b, env, cwd)
    xs, ys = [], []
    for _ in range(runs):
        xs.append(_wall(a, env, cwd))
        ys.append(_wall(b, env, cwd))
    return (
        statistics.median(xs),
        statistics.median(ys),
        statistics.median(x - y for x, y in zip(xs, ys, strict=True)),
        statistics.median(x / y for x, y in zip(xs, ys, strict=True)),
    )


def _until_export(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds until ``looptap replay`` prints its export lines (then it is stopped)."""
    import signal

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if b"export " in line:
            break
    took = time.perf_counter() - t0
    with open(f"/proc/{proc.pid}/stat") as f:  # its CPU up to here (not its report after the stop)
        fields = f.read().rsplit(")", 1)[1].split()
    _CPU[0] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return took


def _package(tree: Path) -> str:
    """The tree's core package as imported: ``looptap.cassettes``, or ``cassettes`` for a tree from
    before the one import package (issue 72)."""
    return "looptap.cassettes" if (tree / ".looptap-editable").is_dir() else "cassettes"


def _tree(tree: Path, interp: str) -> list[str]:
    """``interp`` with the tree's packages first on the path, ahead of the environment's own
    editable install: its ``.looptap-editable``, or the root of a tree from before the one import
    package. One directory for each tree: every import (the standard library's, pytest's) looks
    in each directory ahead of its own, so a tree given both paths paid for one more; alike, the
    two trees' ``import pytest`` counts 555,983k and 556,661k instructions (callgrind), with both
    paths 560,504k and 557,043k."""
    editable = tree / ".looptap-editable"
    return ["env", f"PYTHONPATH={editable if editable.is_dir() else tree}", interp]


#: The agent of the recorded rows: it sends a run's requests again (``requests.json``: URL path,
#: body), one after the other, to ``$ANTHROPIC_BASE_URL`` (the demo run's API), as a client would.
AGENT = """import json, os, sys, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
for path, body in json.load(open(sys.argv[1])):
    req = urllib.request.Request(base + path, data=body.encode(), headers={
        "content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"})
    with urllib.request.urlopen(req) as resp:
        resp.read()
"""


def _upstream(run: Path, work: Path) -> tuple[Any, str]:
    """A loopback upstream that answers each of ``run``'s requests with its recorded answer (the
    last one for any other), on a thread of this process (its CPU is not the command's), and the
    agent's ``requests.json``. Returns the server (``shutdown()`` it) and its URL."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    from looptap.cassettes.reading import open_run

    answers: dict[bytes, tuple[int, bytes]] = {}
    sent = []
    for x in open_run(str(run)).exchanges:
        url = urlsplit(x.url)
        sent.append((url.path + (f"?{url.query}" if url.query else ""), x.request_body.decode()))
        answers[x.request_body] = (x.status or 200, x.response_body)
    (work / "requests.json").write_text(json.dumps(sent))
    (work / "agent.py").write_text(AGENT)
    last = answers[x.request_body]

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            status, data = answers.get(body, last)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _against(
    ref: str, py: str, proxy_py: Path, runs: int, env: dict[str, str], work: Path, demo: Path
) -> list[str]:
    """Rows: each command from this tree and from ``ref``'s, A B A B …, medians of the pairs."""
    old = work / "against"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old), ref], check=True
    )
    for interp in {py, str(proxy_py)}:  # its bytecode too, as an install has it
        if Path(interp).exists():
            subprocess.run(
                [interp, "-m", "compileall", "-q", "-j", "0", str(old)], capture_output=True
            )
    two = work / "two.jsonl"  # the demo's first two round trips
    two.write_bytes(b"".join(demo.read_bytes().splitlines(keepends=True)[:3]))
    try:
        walls, cpus = [], []
        for _ in range(max(5, runs)):
            walls.append(_wall([py, "-c", "pass"], env, work))
            cpus.append(_CPU[0])
        bare, bare_cpu = statistics.median(walls), statistics.median(cpus)
        lines = [
            f"Bare `python -c pass`: {bare:.3f} s wall, {bare_cpu:.3f} s CPU (medians). The CPU "
            "columns are user + system seconds of the command's processes (for replay, up to its "
            "export lines): on a loaded machine the wall time waits for a core and the CPU time "
            "much less; on a quiet one they agree.",
            "",
            f"| command | this tree (median s) | {ref} (median s) | difference | ratio | this tree "
            f"over bare Python | CPU: this tree | CPU: {ref} | CPU: this tree over bare "
            "| CPU ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]

        def on(tree: Path, interp: str, *argv: str) -> list[str]:
            return [*_tree(tree, interp), "-m", f"{_package(tree)}.cli", *argv]

        def row(
            name: str,
            a: list[str],
            b: list[str],
            wall: Any = _wall,
            n: int = runs,
            environ: dict[str, str] | None = None,
        ) -> None:
            xs, ys, cx, cy = [], [], [], []
            e = environ or env
            wall(a, e, work)
            wall(b, e, work)
            for _ in range(n):
                xs.append(wall(a, e, work))
                cx.append(_CPU[0])
                ys.append(wall(b, e, work))
                cy.append(_CPU[0])
            ma, mb, ca, cb = (
                statistics.median(xs),
                statistics.median(ys),
                statistics.median(cx),
                statistics.median(cy),
            )
            lines.append(
                f"| {name} | {ma:.3f} | {mb:.3f} | {(ma - mb) * 1000:+.0f} ms | "
                f"{statistics.median(x / y for x, y in zip(xs, ys, strict=True)):.2f}× | "
                f"{(ma - bare) * 1000:+.0f} ms | {ca:.3f} | {cb:.3f} | "
                f"{(ca - bare_cpu) * 1000:+.0f} ms | "
                f"{statistics.median(x / y for x, y in zip(cx, cy, strict=True)):.2f}× |"
            )

        row("`looptap --help`", on(ROOT, py, "--help"), on(old, py, "--help"))
        row(
            "the pytest plugin's import (`import pytest` and the plugin)",
            [*_tree(ROOT, py), "-c", f"import pytest, {_package(ROOT)}.replay.testing.plugin"],
            [*_tree(old, py), "-c", f"import pytest, {_package(old)}.replay.testing.plugin"],
        )
        row(
            "`looptap show` (demo run, 11 round trips)",
            on(ROOT, py, "show", str(demo)),
            on(old, py, "show", str(demo)),
        )
        row(
            "`looptap show` (2 round trips; goal ≤ 0.3 s over bare)",
            on(ROOT, py, "show", str(two)),
            on(old, py, "show", str(two)),
        )
        row(
            "`looptap replay` (2 round trips) until its export lines (goal ≤ 0.3 s over bare)",
            on(ROOT, py, "replay", str(two)),
            on(old, py, "replay", str(two)),
            wall=_until_export,
        )
        if proxy_py.exists():
            conf = str(work / "conf")
            row(
                "`looptap run -o X -- true` (recorder env)",
                on(
                    ROOT,
                    str(proxy_py),
                    "run",
                    "-o",
                    str(work / "a.jsonl"),
                    "--force",
                    "--confdir",
                    conf,
                    "--",
                    "true",
                ),
                on(
                    old,
                    str(proxy_py),
                    "run",
                    "-o",
                    str(work / "b.jsonl"),
                    "--force",
                    "--confdir",
                    conf,
                    "--",
                    "true",
                ),
                n=max(5, runs // 3),
            )
            fork = ["run", "--from", f"{two}@turn=1", "--in-place", "--force", "--confdir", conf]
            row(
                "`looptap run --from RUN@turn=1 -o X -- true` (recorder env: a `why` branch's "
                "start-up and stop)",
                on(ROOT, str(proxy_py), *fork, "-o", str(work / "a.jsonl"), "--", "true"),
                on(old, str(proxy_py), *fork, "-o", str(work / "b.jsonl"), "--", "true"),
                n=max(5, runs // 3),
            )
            # the two kinds of process a `why` runs most: a recorded agent, a branch of a fork
            server, up = _upstream(two, work)
            agent = ["--", py, "-I", str(work / "agent.py"), str(work / "requests.json")]
            rec = ["run", "--force", "--confdir", conf, "--upstream", f"anthropic={up}"]
            subprocess.run(
                on(ROOT, str(proxy_py), *rec, "-o", str(work / "rec.jsonl"), *agent),
                env=env, cwd=work, check=True, capture_output=True,
            )  # fmt: skip
            branch = [*rec, "--from", f"{work / 'rec.jsonl'}@turn=1", "--in-place"]
            for name, argv in (
                (
                    "`looptap run -o X -- python agent.py` (recorder env; the agent sends the 2 "
                    "round trips to a loopback upstream)",
                    rec,
                ),
                (
                    "`looptap run --from REC@turn=1 -o Y -- python agent.py` (recorder env: the "
                    "first round trip served by the fork, the second sent live to the loopback)",
                    branch,
                ),
            ):
                row(
                    name,
                    on(ROOT, str(proxy_py), *argv, "-o", str(work / "a.jsonl"), *agent),
                    on(old, str(proxy_py), *argv, "-o", str(work / "b.jsonl"), *agent),
                    n=runs,
                )
            server.shutdown()
            handed = {**env, "LOOPTAP_PROXY_PYTHON": str(proxy_py)}
            row(
                "`looptap run -o X -- true` from the SDK env (handed to the recorder env)",
                on(ROOT, py, "run", "-o", str(work / "a.jsonl"), "--force", "--confdir", conf,
                   "--", "true"),
                on(old, py, "run", "-o", str(work / "b.jsonl"), "--force", "--confdir", conf,
                   "--", "true"),
                n=max(5, runs // 3),
                environ=handed,
            )  # fmt: skip
        return lines
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False
        )


#: The heading of docs/startup.md's prose (what keeps the start-up short): ``--write`` replaces
#: the figures above it and keeps it as it is.
HOW = "\n## What keeps it short\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--runs", type=int, default=15)
    ap.add_argument("--write", action="store_true", help="write docs/startup.md")
    ap.add_argument(
        "--against", metavar="REF", help="also run the commands from REF's tree, side by side"
    )
    ap.add_argument("--only-against", action="store_true", help="with --against: only those rows")
    args = ap.parse_args()
    venv = Path(sys.prefix)
    py = str(venv / "bin" / "python") if (venv / "bin" / "python").exists() else sys.executable
    looptap = [py, "-m", "looptap.cassettes.cli"]
    entry = venv / "bin" / "looptap"
    if entry.exists():
        looptap = [str(entry)]
    bare = [py, "-c", "pass"]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST", "LOOPTAP", "PYTHONDONTWRITEBYTECODE"))
    }
    rows: list[tuple[str, str, tuple[float, float, float, float], str]] = []
    # Users' installs carry bytecode (pip compiles at install); a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every module in every process and measure that instead.
    for interp in {
        py,
        os.environ.get("LOOPTAP_PROXY_PYTHON") or str(ROOT / ".venv-proxy" / "bin" / "python"),
    }:
        if Path(interp).exists():
            subprocess.run(
                [
                    interp,
                    "-m",
                    "compileall",
                    "-q",
                    "-j",
                    "0",
                    str(Path(interp).parents[1] / "lib"),
                    str(ROOT / "cassettes"),
                    str(ROOT / "proxy"),
                    str(ROOT / "inspector"),
                ],
                capture_output=True,
            )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # looptap's per-user state (the parse-once key) of its own, filled by the warm-up runs
        (work / "state").mkdir(mode=0o700)
        env["LOOPTAP_STATE_DIR"] = str(work / "state")
        demo = work / "demo.jsonl"
        subprocess.run(
            [
                *looptap,
                "import",
                str(ROOT / "cassettes" / "examples" / "tool_loop_anthropic.yaml"),
                "-o",
                str(demo),
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=work,
        )
        (work / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        against: list[str] = []
        if args.against:
            proxy_py = Path(
                os.environ.get("LOOPTAP_PROXY_PYTHON") or ROOT / ".venv-proxy" / "bin" / "python"
            )
            load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
            against = [
                f"## Side by side with `{args.against}`",
                "",
                f"Load average (1/5/15 min) at the start: {load}. Each command from this tree and "
                f"from `{args.against}`'s, in turn, in one run; medians.",
                "",
                *_against(args.against, py, proxy_py, args.runs, env, work, demo),
            ]
            print("\n".join(against))
            if args.only_against:
                return 0
        pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_nothing.py"]
        rows.append(
            (
                "`looptap --help`",
                "`python -c pass`",
                _pairs([*looptap, "--help"], bare, args.runs, env, work),
                "≤ 0.15 s over",
            )
        )
        rows.append(
            (
                "`looptap show demo.jsonl`",
                "`python -c pass`",
                _pairs([*looptap, "show", str(demo)], bare, args.runs, env, work),
                "",
            )
        )
        rows.append(
            (
                "`import pytest, looptap.cassettes.replay.testing.plugin`",
                "`import pytest`",
                _pairs(
                    [py, "-c", "import pytest, looptap.cassettes.replay.testing.plugin"],
                    [py, "-c", "import pytest"],
                    args.runs,
                    env,
                    work,
                ),
                "",
            )
        )
        rows.append(
            (
                "pytest session, plugin loaded, unused",
                "the same with `-p no:looptap`",
                _pairs(pytest, [*pytest, "-p", "no:looptap"], args.runs, env, work),
                "≤ 50 ms over",
            )
        )
        proxy_py = Path(
            os.environ.get("LOOPTAP_PROXY_PYTHON") or ROOT / ".venv-proxy" / "bin" / "python"
        )
        if proxy_py.exists():
            run = [
                str(proxy_py),
                "-m",
                "looptap.cassettes.cli",
                "run",
                "-o",
                str(work / "run.jsonl"),
                "--confdir",
                str(work / "conf"),
                "--",
                "true",
            ]
            rows.append(
                (
                    "`looptap run -o X -- true` (recorder env)",
                    "`python -c pass` (recorder env)",
                    _pairs(
                        run,
                        [str(proxy_py), "-c", "pass"],
                        max(5, args.runs // 3),
                        {**env, "PYTHONPATH": str(ROOT)},
                        work,
                    ),
                    "",
                )
            )
    lines = [
        "| target | yardstick | target (median s) | yardstick "
        "(median s) | over the yardstick | ratio | goal |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for target, base, (a, b, diff, ratio), goal in rows:
        lines.append(
            f"| {target} | {base} | {a:.3f} | {b:.3f} | {diff * 1000:+.0f} "
            f"ms | {ratio:.1f}× | {goal} |"
        )
    print("\n".join(lines))
    if args.write:
        head = (
            "# Start-up\n\n"
            f"Generated by `python bench/startup.py --write` on {datetime.date.today()} "
            f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}), "
            f"{args.runs} interleaved pairs per row (the recorder row fewer): medians of the "
            "pairs. A shared machine: compare the ratios and the time over the yardstick, not the "
            "absolute seconds.\n\n"
        )
        doc = ROOT / "docs" / "startup.md"
        prose = doc.read_text()
        doc.write_text(
            head
            + "\n".join(lines)
            + "\n"
            + "".join(f"\n{x}" for x in against)
            + ("\n" if against else "")
            + prose[prose.index(HOW) :]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
