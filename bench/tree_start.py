"""What ``looptap run``'s working tree costs at the start (docs/shell-file-tools.md, "The start"):
``looptap run -- true`` (no model traffic: the run is its start and its end) with
``--no-shell-trace`` (plain) and the default, by the code of ``--base`` (before) and of this
checkout (after), ``--n`` rounds interleaved, in four trees:

- ``empty``: an empty folder;
- ``venv``: a small project beside a virtual environment of over 1 GB named ``env`` (CPython's
  ``venv``, this checkout's two environments' packages hard-linked into it, and 320 MiB of data);
- ``files``: 30,000 distinct text files of 0.5-4 KiB, 100 a folder (past the walk's bound);
- ``git``: a clone of this repository, with a copy of the recorder's environment as
  ``.venv-proxy`` (ignored by ``.gitignore``).

Wall and CPU (``RUSAGE_CHILDREN``: the recorder, the tracer, the command) of each run, and what
was kept beside the cassette (removed before each run, so no run finds the last one's).

    .venv/bin/python bench/tree_start.py --n 3 --base f29135f5
    .venv/bin/python bench/tree_start.py --make /tmp/trees     # the trees only (to time them
                                                              # with another tool)
    .venv/bin/python bench/tree_start.py --trees /tmp/trees --base '' --n 9   # those trees,
                                                              # this checkout only

Each round runs plain and default back to back (their order alternating), so the ratio is also
taken pair by pair: its median is printed beside the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

from bench.shell_tree import make_tree  # noqa: E402

TREES = ("empty", "venv", "files", "git")


def _linked(src: Path, dest: Path) -> None:
    """``src`` copied to ``dest`` as hard links (the same bytes, no disk), or copied."""
    try:
        subprocess.run(["cp", "-al", str(src), str(dest)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        shutil.copytree(src, dest, symlinks=True)


def make(where: Path) -> dict[str, Path]:
    """The four trees under ``where``."""
    trees = {name: where / name for name in TREES}
    trees["empty"].mkdir(parents=True)
    venv = trees["venv"]
    venv.mkdir()
    (venv / "main.py").write_text("print('hello')\n")
    (venv / "README.md").write_text("a project\n")
    env = venv / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next((env / "lib").glob("python3*")) / "site-packages"
    for name in (".venv", ".venv-proxy"):
        for src in (ROOT / name / "lib").glob("python3*/site-packages"):
            _linked(src, site / name.strip("."))
    with open(site / "weights.bin", "wb") as f:
        for _ in range(320):
            f.write(os.urandom(1 << 20))
    make_tree(trees["files"], 30000)
    git = trees["git"]
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(git)], check=True)
    _linked(ROOT / ".venv-proxy", git / ".venv-proxy")
    return trees


def base_code(where: Path, rev: str) -> Path:
    """The product's code at ``rev`` (its three packages), as ``where/looptap``: ``where`` goes
    on ``PYTHONPATH``."""
    base = where / "looptap"
    base.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "cassettes", "inspector", "proxy"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    return where


def _run(code: Path, tree: Path, out: Path, plain: bool) -> tuple[float, float]:
    shutil.rmtree(f"{out}.files", ignore_errors=True)
    python = ROOT / ".venv-proxy" / "bin" / "python"
    argv = [str(python), "-c", "from looptap.cassettes.cli import main; main()", "run", "-o"]
    argv += [str(out), *(["--no-shell-trace"] if plain else []), "--", "true"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(code), "HOME": str(out.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, cwd=tree, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _kept(out: Path) -> str:
    kept = Path(f"{out}.files")
    blobs = list(kept.iterdir()) if kept.is_dir() else []
    return f"{len(blobs):,} files, {sum(b.stat().st_size for b in blobs) / 1e6:.1f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--base", default="f29135f5", help="the code before (a commit; '': none)")
    ap.add_argument("--make", type=Path, help="only make the trees there, and say where")
    ap.add_argument("--trees", type=Path, help="the trees --make made there (not made again)")
    args = ap.parse_args()
    if args.make is not None:
        for name, path in make(args.make).items():
            print(name, path)
        return 0
    with tempfile.TemporaryDirectory(prefix="tree-start-") as tmp:
        work = Path(tmp)
        trees = {t: args.trees / t for t in TREES} if args.trees else make(work / "trees")
        codes = {"after": ROOT / ".looptap-editable"}
        if args.base:
            codes = {"before": base_code(work / "base", args.base), **codes}
        got: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        kept: dict[tuple[str, str], str] = {}
        for i in range(args.n):
            for tree, path in trees.items():
                for name, code in codes.items():
                    for plain in (True, False) if i % 2 == 0 else (False, True):
                        mode = "plain" if plain else "default"
                        out = work / f"{tree}-{name}-{mode}.jsonl"
                        got.setdefault((tree, name, mode), []).append(_run(code, path, out, plain))
                        if not plain:
                            kept[(tree, name)] = _kept(out)
                        print(tree, name, mode, i, got[(tree, name, mode)][-1], flush=True)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        print(
            "| tree | code | plain: wall / CPU (s), median | default | default / plain "
            "| the same, median of the pairs' | kept |"
        )
        print("|---|---|---|---|---|---|---|")
        for tree in trees:
            for name in codes:
                p, d = got[(tree, name, "plain")], got[(tree, name, "default")]
                pw, pc = (statistics.median(x) for x in zip(*p, strict=True))
                dw, dc = (statistics.median(x) for x in zip(*d, strict=True))
                rw = statistics.median(b[0] / a[0] for a, b in zip(p, d, strict=True))
                rc = statistics.median(b[1] / a[1] for a, b in zip(p, d, strict=True))
                print(
                    f"| {tree} | {name} | {pw:.2f} / {pc:.2f} | {dw:.2f} / {dc:.2f} | "
                    f"{dw / pw:.2f}x / {dc / pc:.2f}x | {rw:.2f}x / {rc:.2f}x "
                    f"| {kept[(tree, name)]} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
