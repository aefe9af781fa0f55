"""``show --json``, ``show`` and ``textconv`` of real inputs, this tree against another commit, byte for byte.

    python bench/same_output.py [--against REF] [--corpus DIR] [--exports] [--env K=V] [FILE.jsonl ...]

Every vcrpy cassette under ``--corpus`` (default ``tests/corpus``) is imported once, by REF's
looptap, into a temporary directory; the FILEs given (e.g. bench/inspector.py's synthetic run,
tests/support/huge.py's one-turn run) are added as they are. Then each tree (this one, and REF
checked out in a temporary ``git worktree``) runs ``looptap show --json`` and ``looptap show`` on
every input (and ``looptap textconv``, the line-per-item text that lists the findings), in one
process per tree (``cassettes.cli.main``, stdout and stderr captured), and the
outputs are compared byte for byte, exit codes included. Each tree has a cache directory of its
own, empty at the start: on a tree that keeps a run's analysis (docs/kept-analysis.md), ``show
--json`` of an input of 1 MiB or more analyses it and keeps the analysis, and ``show`` and
``textconv`` take it, so what is compared is the kept analysis' output against REF's. Prints the number of inputs compared and
each one that differs; exits 1 on any difference. A speed change must leave this at 0.

``--exports`` adds, per input, ``export --otel -``, ``export --har`` and ``export --html`` (the
file each writes is part of its output) and ``diff`` and ``diff --json`` of the input with the
next one in the list: a restructuring that must change no output compares these too (about
twice as long).

``--env KEY=VALUE`` (repeatable) is set for this tree's child only (e.g. ``--env
LOOPTAP_SPILL_KEEP=1``: every table of the analysis spilled, to compare with REF's output).
"""  # noqa: E501

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "LOOPTAP", "PYTHONPATH"))}

#: The per-tree child: ``show --json``, ``show`` and ``textconv`` of each input, one block per
#: command; with ``--exports``, also ``export --otel``, ``--har`` and ``--html`` (the file written
#: is the output) and ``diff`` / ``diff --json`` of each input with the next.
_CHILD = """
import contextlib, io, os, sys, tempfile
try:
    from looptap.cassettes.cli import main
except ImportError:  # a tree from before the one import package (issue 72)
    from cassettes.cli import main
out_path, files = sys.argv[1], [l for l in open(sys.argv[2]).read().splitlines() if l]
exports = sys.argv[3:] == ["exports"]
scratch = tempfile.mkdtemp()
har, html = os.path.join(scratch, "run.har"), os.path.join(scratch, "run.html")
with open(out_path, "wb") as out:
    for i, f in enumerate(files):
        commands = [["show", "--json", f], ["show", f], ["textconv", f]]
        if exports:
            commands += [["export", "--otel", "-", f], ["export", "--har", har, "-q", f], ["export", "--html", f, "-o", html, "-q"]]
            if i + 1 < len(files):
                commands += [["diff", f, files[i + 1]], ["diff", "--json", f, files[i + 1]]]
        for argv in commands:
            buf = io.BytesIO()
            text = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
            err = io.StringIO()
            old, sys.stdout = sys.stdout, text
            try:
                with contextlib.redirect_stderr(err):
                    try:
                        rc = main(argv)
                    except SystemExit as exc:
                        rc = exc.code
            finally:
                text.flush()
                sys.stdout = old
            head = f"=== {' '.join(argv).replace(scratch, 'OUT')} rc={rc}\\n".encode()
            body = buf.getvalue() + b"\\n--- stderr\\n" + err.getvalue().replace(scratch, "OUT").encode("utf-8", "replace")
            for written in (har, html):
                if written in argv and os.path.exists(written):
                    with open(written, "rb") as fh:
                        body += b"\\n--- " + os.path.basename(written).encode() + b"\\n" + fh.read()
                    os.unlink(written)
            out.write(head + str(len(body)).encode() + b"\\n" + body + b"\\n")
"""  # noqa: E501


def _blocks(path: Path) -> dict[str, bytes]:
    data, out, at = path.read_bytes(), {}, 0
    while at < len(data):
        end = data.index(b"\n", at)
        head = data[at:end].decode()
        nl = data.index(b"\n", end + 1)
        size = int(data[end + 1 : nl])
        out[head] = data[nl + 1 : nl + 1 + size]
        at = nl + 1 + size + 1
    return out


def _path(tree: Path) -> str:
    """The tree's packages first on the path (bench/perf.py's ``_path``: for a tree from before
    the one import package, behind a ``looptap`` that cannot be imported, else the environment's
    editable install answers the child's ``import looptap…`` and both columns run this tree)."""
    spec = importlib.util.spec_from_file_location("perf", ROOT / "bench" / "perf.py")
    assert spec is not None and spec.loader is not None
    perf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(perf)
    path: str = perf._path(tree)
    return path


def _run(
    tree: Path, files: Path, out: Path, exports: bool, env: dict[str, str] | None = None
) -> dict[str, bytes]:
    # kept analyses (docs/kept-analysis.md), each tree its own, empty at first
    cache = out.with_suffix(".cache")
    extra = ["exports"] if exports else []
    subprocess.run([sys.executable, "-c", _CHILD, str(out), str(files), *extra], check=True, cwd=tree,  # noqa: E501
                   env={**ENV, **(env or {}), "PYTHONPATH": _path(tree), "LOOPTAP_CACHE_DIR": str(cache)})  # fmt: skip  # noqa: E501
    return _blocks(out)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--against", default="63aa822", metavar="REF")
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus")
    ap.add_argument(
        "--exports",
        action="store_true",
        help="also export --otel/--har/--html and diff (each input with the next)",
    )
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in this tree's environment only (e.g. LOOPTAP_SPILL_KEEP=1); repeatable",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep both trees' outputs (new.txt, old.txt) and the list of what differs in DIR",
    )
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    env = dict(e.split("=", 1) for e in args.env)
    with tempfile.TemporaryDirectory(prefix="looptap-same-") as tmp:
        work = Path(tmp)
        old = work / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old), args.against],
            check=True,
        )
        try:
            imported = work / "corpus"
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys\ntry:\n    from looptap.cassettes.cli import main\n"
                    "except ImportError:\n    from cassettes.cli import main\nsys.exit(main())",
                    "import",
                    str(args.corpus),
                    "-o",
                    f"{imported}/",
                ],
                cwd=old,
                env={**ENV, "PYTHONPATH": _path(old)},
                capture_output=True,
                check=False,
            )
            inputs = sorted(str(p) for p in imported.rglob("*.jsonl")) + [
                str(f.resolve()) for f in args.files
            ]
            listing = work / "files.txt"
            listing.write_text("\n".join(inputs) + "\n")
            new_out, old_out = (
                _run(ROOT, listing, work / "new.txt", args.exports, env),
                _run(old, listing, work / "old.txt", args.exports),
            )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False
            )
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for name in ("new.txt", "old.txt", "files.txt"):
                    shutil.copyfile(work / name, args.keep / name)
    differ = sorted(k for k in new_out.keys() | old_out.keys() if new_out.get(k) != old_out.get(k))
    if args.keep:
        (args.keep / "differ.txt").write_text("".join(k + "\n" for k in differ))
    digest = hashlib.sha256(b"".join(new_out[k] for k in sorted(new_out))).hexdigest()[:16]
    print(
        f"{len(inputs)} inputs ({len(inputs) - len(args.files)} imported from {args.corpus}), "
        f"{len(new_out)} outputs each; {len(differ)} differ from {args.against} (outputs' sha256 "
        f"{digest})"
    )
    by_command = Counter(" ".join(k.split()[1:3]).split(" /")[0] for k in differ)
    for command, n in sorted(by_command.items()):
        print(f"  {n:6} {command}")
    for k in differ[:50]:
        print(f"  differs: {k}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
