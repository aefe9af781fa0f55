"""Replayed tests against vcrpy: N pytest tests replayed by looptap's plugin and by vcrpy through
pytest-recording, the same agent in the same environment, one run (issue 48, item 2; issue 56).

    .venv/bin/python bench/pytest_replay.py                     # N = 30, 5 repeats
    .venv/bin/python bench/pytest_replay.py -n 30 300 --repeat 2  # and the marginal test
    .venv/bin/python bench/pytest_replay.py --before da26642    # this tree's plugin beside REV's
    .venv/bin/python bench/pytest_replay.py --keep DIR          # record into DIR once; later runs (N no larger) replay from it

Each test is an openai-SDK agent doing a 2-turn tool loop (a client made per call, as
bench/pytest_record.py's). Both suites are recorded once against a loopback fake upstream
(``tests/support/upstream.py``): looptap's with ``--looptap-record-mode=all`` (the recorder from
``LOOPTAP_PROXY_PYTHON``), vcrpy's with ``--record-mode=all``; then each suite of N tests is
replayed with ``--looptap-record-mode=none`` / ``--record-mode=none``, the kinds alternating,
nothing listening at the recorded URL. With ``--before REV`` a third kind replays looptap's suite
with REV's code (``git archive``), in turn with the others.

Two figures per session: the **whole process** (wall time of ``pytest``, start-up and collection
included; CPU is its user + system time with its children's) and the **session minus
collection** (from pytest's ``pytest_collection_finish`` to its ``pytest_sessionfinish``, wall and
the process's CPU time, measured by a ``conftest.py`` the bench writes into both projects). With
two sizes, the per-test cost is the difference between the largest and the smallest N divided by
the difference in tests. Last, ``pytest --co`` of a plain project (no looptap test) with the
plugin loaded and with ``-p no:looptap``: what the plugin costs every pytest session of its users.

The suites run in their own environment, ``.venv-bench-replay`` (made with uv on first use:
openai, pytest, vcrpy, pytest-recording and this checkout's core, editable), so that
pytest-recording is never a plugin of the project's own test runs. Absolute seconds depend on the
machine (these are shared, noisy 2-core boxes; the load average is printed with each run):
compare the columns of one run, and the CPU columns before the wall ones.
"""  # noqa: E501

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
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

SUITE = (
    AGENT
    + """
@pytest.mark.parametrize("n", range(COUNT))
@MARK
def test_agent(FIXTURE, n):
    assert agent(f"city {n}")
"""
)

#: Written into each project: the session's clock from the end of collection to its finish.
CLOCK = """
import os, time
import pytest

_START = []

def pytest_collection_finish(session):
    _START[:] = [time.perf_counter(), time.process_time()]

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    with open(os.environ["BENCH_CLOCK"], "w") as f:
        f.write(f"{time.perf_counter() - _START[0]} {time.process_time() - _START[1]}")
"""

#: A plain project: tests that use no looptap (for ``pytest --co`` with and without the plugin).
PLAIN = """
import pytest

@pytest.mark.parametrize("n", range(30))
def test_plain(n):
    assert n >= 0
"""

#: Per kind: the marker, the fixture, the plugins left out, the record-mode option.
KINDS = {
    "looptap": ("pytest.mark.looptap", "looptap", ["-p", "no:recording"], "--looptap-record-mode"),
    "vcrpy": ("pytest.mark.vcr", "vcr", ["-p", "no:looptap"], "--record-mode"),
}

#: (wall, CPU) of the whole process and of the session minus collection.
Times = tuple[float, float, float, float]


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
    (project / "conftest.py").write_text(CLOCK)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith(("_PROXY", "_BASE_URL")) and k != "CI"
    }
    env.update(OPENAI_API_KEY="sk-bench", **extra)
    return env


def _timed(args: list[str], cwd: Path, env: dict[str, str], what: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, children included) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def run(
    python: str,
    project: Path,
    kind: str,
    mode: str,
    env_extra: dict[str, str],
    more: tuple[str, ...] = (),
) -> Times:
    """Whole-process wall and CPU seconds of one pytest session of the suite in ``project``, then
    those of the session minus collection."""
    _, _, plugins, option = KINDS[kind]
    clock = project / "clock.txt"
    clock.unlink(missing_ok=True)
    args = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *plugins]
    args += [f"{option}={mode}", *more, "test_suite.py"]
    env = _env({"BENCH_CLOCK": str(clock), **env_extra})
    wall, cpu = _timed(args, project, env, f"{kind} ({mode})")
    session_wall, session_cpu = (float(x) for x in clock.read_text().split())
    return wall, cpu, session_wall, session_cpu


def collect_only(python: str, project: Path, tree: Path | None) -> tuple[float, float]:
    """``pytest --co`` of the plain project, with the plugin of ``tree`` loaded (``None``: none)."""
    args = [python, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider", "-p", "no:recording"]
    args += [] if tree is not None else ["-p", "no:looptap"]
    env = _env({"PYTHONPATH": str(tree or REPO)})
    return _timed(args, project, env, "pytest --co")


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
                env = {"LOOPTAP_PROXY_PYTHON": proxy_python, "PYTHONPATH": str(REPO)}
                more = ("--looptap-upstream", f"openai={up.url}")
            else:
                env, more = {"OPENAI_BASE_URL": f"{up.url}/v1"}, ()
            wall = run(python, project, kind, "all", env, more)[0]
            print(
                f"recorded {count} tests with {kind} in {wall:.1f} s", file=sys.stderr, flush=True
            )
        saved.write_text(up.url)
        return up.url


def tree_of(rev: str, into: Path) -> Path:
    """The files of commit ``rev``, written under ``into`` (for ``PYTHONPATH``)."""
    data = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "cassettes"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def _ratio_row(label: str, mine: tuple[float, float], theirs: tuple[float, float]) -> str:
    (aw, ac), (bw, bc) = mine, theirs
    return f"| {label} | {aw:.2f} s | {bw:.2f} s | {ac:.2f} s | {bc:.2f} s | {aw / bw:.2f}× | {ac / bc:.2f}× |"  # noqa: E501


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "-n", type=int, nargs="+", default=[30], metavar="N", help="suite sizes (default 30)"
    )
    ap.add_argument("--repeat", type=int, default=5, help="replays of each size and kind (medians)")
    ap.add_argument("--before", metavar="REV", help="also replay looptap's suite with REV's code")
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
    times: dict[tuple[str, int], list[Times]] = {}
    load0 = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="looptap-bench-")
        if args.keep is None
        else contextlib.nullcontext(str(args.keep)) as tmp,
        tempfile.TemporaryDirectory(prefix="looptap-before-") as old,
    ):
        root = Path(tmp)
        url = record(python, root, top)
        trees = {"looptap": REPO}
        if args.before:
            trees[f"looptap {args.before}"] = tree_of(args.before, Path(old))
        plain = root / "plain"
        plain.mkdir(exist_ok=True)
        (plain / "test_plain.py").write_text(PLAIN)
        for _ in range(args.repeat):
            for n in args.n:
                for name in [*trees, "vcrpy"]:
                    kind = "vcrpy" if name == "vcrpy" else "looptap"
                    project = root / kind
                    write(project, kind, n)
                    extra = (
                        {"OPENAI_BASE_URL": f"{url}/v1", "PYTHONPATH": str(REPO)}
                        if kind == "vcrpy"
                        else {"PYTHONPATH": str(trees[name])}
                    )
                    t = run(python, project, kind, "none", extra)
                    times.setdefault((name, n), []).append(t)
                    print(
                        f"replayed {n} tests with {name}: {t[0]:.2f} s, CPU {t[1]:.2f} s; "
                        f"minus collection {t[2]:.2f} s, CPU {t[3]:.2f} s "
                        f"(load {os.getloadavg()[0]:.1f})",
                        file=sys.stderr,
                        flush=True,
                    )
            for name, tree in [*trees.items(), ("-p no:looptap", None)]:
                t = collect_only(python, plain, tree)
                times.setdefault((f"--co {name}", 0), []).append((*t, 0.0, 0.0))
    load1 = os.getloadavg()
    med = {k: tuple(statistics.median(t[i] for t in v) for i in range(4)) for k, v in times.items()}
    names = [n for n in dict.fromkeys(k for k, _ in times) if not n.startswith("--co")]
    print(
        f"N replayed tests (openai-SDK agent, 2-turn tool loop), medians of {args.repeat} "
        f"(kinds interleaved); load average (1 min) {load0[0]:.1f} -> {load1[0]:.1f}; "
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE') or 'unset'}:\n"
    )
    print(
        "| N, what | looptap wall | vcrpy wall | looptap CPU | vcrpy CPU | wall ratio | CPU ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in args.n:
        for name in names[:-1]:
            tag = "" if name == "looptap" else f" ({name.split()[1]})"
            mine, theirs = med[(name, n)], med[("vcrpy", n)]
            print(_ratio_row(f"{n}{tag}, whole process", mine[:2], theirs[:2]))
            print(_ratio_row(f"{n}{tag}, session minus collection", mine[2:], theirs[2:]))
    if len(args.n) >= 2:
        lo, hi = min(args.n), max(args.n)
        for name in names[:-1]:
            per = {
                k: tuple((med[(k, hi)][i] - med[(k, lo)][i]) / (hi - lo) * 1000 for i in (0, 1))
                for k in (name, "vcrpy")
            }
            (aw, ac), (bw, bc) = per[name], per["vcrpy"]
            print(
                f"| per test{'' if name == 'looptap' else ' (' + name.split()[1] + ')'} "
                f"(N={hi} − N={lo}) | {aw:.1f} ms | {bw:.1f} ms | {ac:.1f} ms | {bc:.1f} ms "
                f"| {aw / bw:.2f}× | {ac / bc:.2f}× |"
            )
    off = med[("--co -p no:looptap", 0)]
    print(
        f"\n`pytest --co` of a plain project (30 tests, no looptap), medians of {args.repeat}: "
        f"without the plugin (`-p no:looptap`) {off[0]:.3f} s wall, {off[1]:.3f} s CPU"
    )
    for name in names[:-1]:
        on = med[(f"--co {name}", 0)]
        print(
            f"- with the plugin of {'this tree' if name == 'looptap' else name.split()[1]}: "
            f"{on[0]:.3f} s wall, {on[1]:.3f} s CPU: {(on[0] - off[0]) * 1000:+.0f} ms wall, "
            f"{(on[1] - off[1]) * 1000:+.0f} ms CPU"
        )


if __name__ == "__main__":
    main()
