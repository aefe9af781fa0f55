"""The cost of ``looptap run``'s working tree at the start in a git work tree
(docs/shell-file-tools.md, "The start in a git work tree"): ``looptap run -- true`` in a clone of
this repository (plus a copy of the recorder's environment as ``.venv-proxy``, which
``.gitignore`` ignores), with
``--no-shell-trace`` (plain) and the default, by the code of ``--base`` (before) and of this
checkout (after), ``--n`` rounds interleaved; wall and CPU (``RUSAGE_CHILDREN``) of each run.

    .venv/bin/python bench/tree_git_start.py --n 3 --base 20d0006a
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(python: Path, code: Path, tree: Path, out: Path, plain: bool) -> tuple[float, float]:
    argv = [str(python), "-c", "from looptap.cassettes.cli import main; main()", "run", "-o"]
    argv += [str(out), *(["--no-shell-trace"] if plain else []), "--", "true"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, cwd=tree, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(code),
                                        "HOME": str(tree.parent)},
                   check=True, capture_output=True)  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--base", default="20d0006a", help="the code before (a commit)")
    ap.add_argument("--tree", default="HEAD", help="the commit the measured tree is a checkout of")
    args = ap.parse_args()
    python = ROOT / ".venv-proxy" / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="tree-git-start-") as tmp:
        work = Path(tmp)
        tree = work / "tree"
        subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(tree)], check=True)
        subprocess.run(
            ["git", "-C", str(tree), "checkout", "-q", "--detach", args.tree], check=True
        )
        shutil.copytree(ROOT / ".venv-proxy", tree / ".venv-proxy", symlinks=True)
        base = work / "base" / "looptap"
        base.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.base, "cassettes", "inspector", "proxy"],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        codes = {"before": base.parent, "after": ROOT / ".looptap-editable"}
        got: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for i in range(args.n):
            for name, code in codes.items():
                for plain in (True, False):
                    out = work / f"{name}-{plain}-{i}.jsonl"
                    mode = "plain" if plain else "default"
                    got.setdefault((name, mode), []).append(_run(python, code, tree, out, plain))
                    text = out.read_text()
                    assert ('"start":true' in text) != plain, (name, mode)  # (the tree taken)
                    if not plain and i == 0:
                        kept = Path(f"{out}.files")
                        blobs = list(kept.iterdir()) if kept.is_dir() else []
                        size = sum(b.stat().st_size for b in blobs)
                        print(f"{name}: kept {len(blobs)} files, {size} bytes; by git: "
                              f"{'digest_of' in text}")  # fmt: skip
        print(f"{'':8} {'':8} {'wall (s), mean':>16} {'CPU (s), mean':>16}  each (wall/CPU)")
        for (name, mode), runs in got.items():
            wall = statistics.mean(w for w, _ in runs)
            cpu = statistics.mean(c for _, c in runs)
            each = ", ".join(f"{w:.2f}/{c:.2f}" for w, c in runs)
            print(f"{name:8} {mode:8} {wall:16.2f} {cpu:16.2f}  {each}")
        for name in codes:
            (pw, pc), (dw, dc) = (
                (statistics.mean(w for w, _ in got[(name, m)]),
                 statistics.mean(c for _, c in got[(name, m)]))
                for m in ("plain", "default")
            )  # fmt: skip
            print(f"{name}: default / plain {dw / pw:.2f}x wall, {dc / pc:.2f}x CPU")


if __name__ == "__main__":
    sys.exit(main())
