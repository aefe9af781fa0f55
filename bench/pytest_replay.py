"""Replayed tests against vcrpy: N pytest tests replayed by looptap's plugin and by vcrpy through
pytest-recording, the same agent in the same environment, one run (issue 48, item 2).

    .venv/bin/python bench/pytest_replay.py                     # N = 30 and 300, once each
    .venv/bin/python bench/pytest_replay.py -n 30 300 --repeat 2
    .venv/bin/python bench/pytest_replay.py --keep DIR          # record into DIR once; later runs (N no larger) replay from it

Each test is an openai-SDK agent doing a 2-turn tool loop (a client made per call, as
bench/pytest_record.py's). Both suites are recorded once against a loopback fake upstream
(``tests/support/upstream.py``): looptap's with ``--looptap-record-mode=all`` (the recorder from
``LOOPTAP_PROXY_PYTHON``), vcrpy's with ``--record-mode=all``; then each suite of N tests is
replayed with ``--looptap-record-mode=none`` / ``--record-mode=none``, the kinds alternating,
nothing listening at the recorded URL. Wall time is the whole ``pytest`` process; CPU is its user
+ system time (with its children: looptap's replay server is a thread of it). The per-test cost is
the difference between the largest and the smallest N divided by the difference in tests, which
leaves out pytest's start-up and collection.

The suites run in their own environment, ``.venv-bench-replay`` (made with uv on first use:
openai, pytest, vcrpy, pytest-recording and this checkout's core, editable), so that
pytest-recording is never a plugin of the project's own test runs. Absolute seconds depend on the
machine (these are shared, noisy 2-core boxes): compare the columns of one run, and the CPU rows
before the wall ones.
"""  # noqa: E501

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.pytest_record import AGENT  # noqa: E402
from tests.support.upstream import FakeUpstream  # noqa: E402

ENV = REPO / ".venv-bench-replay"
#: What the bench environment holds besides this checkout's core (openai 2: httpx, which every
#: vcrpy release patches).
PACKAGES = ["openai>=2,<3", "pytest>=8", "vcrpy>=7", "pytest-recording>=0.13"]

SUITE = AGENT + '''
@pytest.mark.parametrize("n", range(COUNT))
@MARK
def test_agent(FIXTURE, n):
    assert agent(f"city {n}")
'''

#: Per kind: the marker, the fixture, the plugins left out, the record-mode option.
KINDS = {
    "looptap": ("pytest.mark.looptap", "looptap", ["-p", "no:recording"], "--looptap-record-mode"),
    "vcrpy": ("pytest.mark.vcr", "vcr", ["-p", "no:looptap"], "--record-mode"),
}


def _uv() -> list[str]:
    """uv as .ci/run finds it: on PATH, else the bootstrap or test environment's own."""
    if shutil.which("uv"):
        return ["uv"]
    for venv in (".venv-bootstrap", ".venv"):
        py = REPO / venv / "bin" / "python"
        if (
            py.exists()
            and subprocess.run([str(py), "-m", "uv", "--version"], capture_output=True).returncode
            == 0
        ):
            return [str(py), "-m", "uv"]
    raise SystemExit(
        "uv is needed to make the bench environment (.ci/run makes .venv-bootstrap with it)"
    )


def environment() -> str:
    python = ENV / "bin" / "python"
    if not python.exists():
        uv = _uv()
        subprocess.run([*uv, "venv", "--quiet", "--python", sys.executable, str(ENV)], check=True)
        subprocess.run(
            [
                *uv,
                "pip",
                "install",
                "--quiet",
                "--compile-bytecode",
                "--python",
                str(python),
                *PACKAGES,
                "-e",
                str(REPO),
            ],
            check=True,
        )
    return str(python)


def write(project: Path, kind: str, count: int) -> None:
    mark, fixture, _, _ = KINDS[kind]
    (project / "test_suite.py").write_text(
        SUITE.replace("COUNT", str(count)).replace("MARK", mark).replace("FIXTURE", fixture)
    )


def run(
    python: str,
    project: Path,
    kind: str,
    mode: str,
    env_extra: dict[str, str],
    more: tuple[str, ...] = (),
) -> tuple[float, float]:
    """Wall and CPU seconds of one pytest session of the suite in ``project``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith(("_PROXY", "_BASE_URL")) and k != "CI"
    }
    env.update(OPENAI_API_KEY="sk-bench", **env_extra)
    _, _, plugins, option = KINDS[kind]
    args = [
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        *plugins,
        f"{option}={mode}",
        *more,
        "test_suite.py",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} ({mode}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def record(python: str, root: Path, count: int) -> str:
    """Both suites recorded (``count`` tests each) into ``root``, once: the URL vcrpy's cassettes
    name."""
    saved = root / "url.txt"
    if saved.exists():
        return saved.read_text()
    proxy_python = os.environ.get("LOOPTAP_PROXY_PYTHON") or str(
        REPO / ".venv-proxy" / "bin" / "python"
    )
    if not Path(proxy_python).exists():
        raise SystemExit(
            f"the recorder's environment is missing: {proxy_python} (set LOOPTAP_PROXY_PYTHON)"
        )
    with FakeUpstream(delay=0.002, default_scenario="tool_loop:1") as up:
        for kind in KINDS:
            project = root / kind
            project.mkdir(parents=True, exist_ok=True)
            write(project, kind, count)
            if kind == "looptap":
                wall, _ = run(
                    python,
                    project,
                    kind,
                    "all",
                    {"LOOPTAP_PROXY_PYTHON": proxy_python},
                    ("--looptap-upstream", f"openai={up.url}"),
                )
            else:
                wall, _ = run(python, project, kind, "all", {"OPENAI_BASE_URL": f"{up.url}/v1"})
            print(
                f"recorded {count} tests with {kind} in {wall:.1f} s", file=sys.stderr, flush=True
            )
        saved.write_text(up.url)
        return up.url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "-n",
        type=int,
        nargs="+",
        default=[30, 300],
        metavar="N",
        help="suite sizes (default 30 300)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="replays of each size and kind (medians)")
    ap.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="record into DIR and keep it (a later run replays from it)",
    )
    ap.add_argument(
        "--python",
        help="the suites' interpreter (default: .venv-bench-replay's, made on first use)",
    )
    args = ap.parse_args()
    python = args.python or environment()
    top = max(args.n)
    walls: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    load0 = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="looptap-bench-")
        if args.keep is None
        else contextlib.nullcontext(str(args.keep)) as tmp
    ):
        root = Path(tmp)
        url = record(python, root, top)
        for _ in range(args.repeat):
            for n in args.n:
                for kind in KINDS:
                    project = root / kind
                    write(project, kind, n)
                    wall, cpu = run(
                        python,
                        project,
                        kind,
                        "none",
                        {"OPENAI_BASE_URL": f"{url}/v1"} if kind == "vcrpy" else {},
                    )
                    walls.setdefault((kind, n), []).append(wall)
                    cpus.setdefault((kind, n), []).append(cpu)
                    print(
                        f"replayed {n} tests with {kind}: {wall:.2f} s, CPU {cpu:.2f} s (load "
                        f"{os.getloadavg()[0]:.1f})",
                        file=sys.stderr,
                        flush=True,
                    )
    load1 = os.getloadavg()
    med = {k: (statistics.median(walls[k]), statistics.median(cpus[k])) for k in walls}
    print(
        f"N replayed tests (openai-SDK agent, 2-turn tool loop), medians of {args.repeat}; load "
        f"average {load0[0]:.1f} -> {load1[0]:.1f}:"
    )
    print(
        "| N | looptap wall | vcrpy wall | looptap CPU | vcrpy CPU | looptap / vcrpy (wall; CPU) |"
    )
    print("|---:|---:|---:|---:|---:|---|")
    for n in args.n:
        (aw, ac), (bw, bc) = med[("looptap", n)], med[("vcrpy", n)]
        print(
            f"| {n} | {aw:.2f} s | {bw:.2f} s | {ac:.2f} s | "
            f"{bc:.2f} s | {aw / bw:.2f}×; {ac / bc:.2f}× |"
        )
    if len(args.n) >= 2:
        lo, hi = min(args.n), max(args.n)
        per = {
            k: tuple((med[(k, hi)][i] - med[(k, lo)][i]) / (hi - lo) * 1000 for i in (0, 1))
            for k in KINDS
        }
        (aw, ac), (bw, bc) = per["looptap"], per["vcrpy"]
        print(
            f"| per test (N={hi} − N={lo}) | {aw:.1f} ms | {bw:.1f} ms | {ac:.1f} ms | {bc:.1f} ms "
            f"| {aw / bw:.2f}×; {ac / bc:.2f}× (goal ≤ 1) |"
        )


if __name__ == "__main__":
    main()
