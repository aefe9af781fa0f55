"""False masks on real traffic: what one tree's redaction masks in the corpus that another's does
not, string by string, each classed (an id, a hash, a signature, base64 data, anything else).

    .venv/bin/python bench/false_masks.py --dump OUT.jsonl          # this tree's redaction
    PYTHONPATH=OTHER/.looptap-editable:OTHER .venv/bin/python bench/false_masks.py --dump BASE.jsonl
    .venv/bin/python bench/false_masks.py --compare BASE.jsonl OUT.jsonl
    .venv/bin/python bench/false_masks.py --time [--vs OTHER/.looptap-editable:OTHER ...]

Every exchange of every vcrpy cassette under ``LOOPTAP_CORPUS`` (default ``tests/corpus``) is
redacted as ``looptap import`` does (one ``Redactor`` per cassette, in order) and written as its
record. ``--compare`` walks the two records of each exchange side by side and prints every string
that differs (its place, the two texts around the change) and the count by class: the corpus
holds no live credential, so every string masked by one tree only is a false mask of that tree's
unless the printed text shows a credential (a test key in a cassette is one).

``--time``: the redaction's CPU seconds over the same exchanges (loaded first, not timed), best
of 3; with ``--vs PYTHONPATH`` (repeatable) the other trees' too, run in turn with this one's
(A B A B A B, each a process of its own), and the ratios.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path += [str(ROOT), str(ROOT / "tests")]

_ID = re.compile(r"^(chatcmpl|msg|call|toolu|resp|req|run|file|asst|thread|rs|fc|ws|batch|gen)[-_]")
_HASH = re.compile(r"^(?:sha\d*[:=-])?[0-9a-fA-F]{16,}$|^[0-9a-f]{8}-[0-9a-f]{4}-")
_B64 = re.compile(r"^(?:data:[\w/+.-]+;base64,)?[A-Za-z0-9+/=_-]{64,}$")


def dump(out: Path) -> None:
    from real_corpus import corpus_files, load, rel

    from looptap.cassettes.recording import Redactor
    from looptap.cassettes.storage import exchange_to_record

    with out.open("w") as f:
        for path in corpus_files():
            try:
                exchanges = load(path)
            except Exception as exc:  # a cassette the loader refuses: said, not judged
                f.write(json.dumps({"file": rel(path), "error": str(exc)[:200]}) + "\n")
                continue
            redactor = Redactor()
            for n, ex in enumerate(exchanges):
                rec = exchange_to_record(redactor.exchange(ex), n)
                f.write(json.dumps({"file": rel(path), "n": n, "rec": rec}, default=str) + "\n")


def cpu() -> tuple[int, float]:
    """The exchanges of the corpus and the CPU seconds of redacting them (as :func:`dump` does)."""
    import time

    from real_corpus import corpus_files, load

    from looptap.cassettes.recording import Redactor

    runs = []
    for path in corpus_files():
        try:
            runs.append(load(path))
        except Exception:
            continue
    start = time.process_time()
    for exchanges in runs:
        redactor = Redactor()
        for ex in exchanges:
            redactor.exchange(ex)
    return sum(len(r) for r in runs), time.process_time() - start


def paired(vs: list[str], rounds: int = 3) -> int:
    """Best of ``rounds`` of :func:`cpu`, each in a process of its own, this tree and each of
    ``vs`` (PYTHONPATHs) in turn."""
    import os
    import subprocess

    trees = {"this tree": os.environ.get("PYTHONPATH", ""), **{p: p for p in vs}}
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, path in trees.items():
            env = {**os.environ, "PYTHONPATH": path}
            out = subprocess.run([sys.executable, __file__, "--cpu"], env=env, check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            n, secs = out.split()[-2:]
            best[name] = min(best.get(name, float("inf")), float(secs))
    for name, secs in best.items():
        print(f"{name}: {secs:.2f} s of CPU redacting {n} exchanges (best of {rounds})")
    for p in vs:
        print(f"this tree / {p}: {best['this tree'] / best[p]:.2f}x")
    return 0


def _strings(a: Any, b: Any, where: str = "") -> Iterator[tuple[str, str, str]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            yield from _strings(a.get(k), b.get(k), f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _strings(x, y, f"{where}[{i}]")
    elif a != b:
        yield where, json.dumps(a)[:100000], json.dumps(b)[:100000]


def _changed(before: str, after: str) -> str:
    """What ``after`` masked of ``before``: the text between their common ends."""
    i = 0
    while i < min(len(before), len(after)) and before[i] == after[i]:
        i += 1
    j = 0
    while j < min(len(before), len(after)) - i and before[-1 - j] == after[-1 - j]:
        j += 1
    return before[i : len(before) - j]


def klass(value: str, where: str) -> str:
    low = where.lower()
    if "signature" in low or "encrypted" in low:
        return "signature"
    if _ID.match(value):
        return "id"
    if _HASH.match(value):
        return "hash"
    if _B64.match(value):
        return "base64 data"
    return "other"


def compare(base: Path, now: Path) -> int:
    by_class: Counter[str] = Counter()
    strings = 0
    exchanges = 0
    with base.open() as fa, now.open() as fb:
        for la, lb in zip(fa, fb, strict=True):
            a, b = json.loads(la), json.loads(lb)
            if "rec" not in a or "rec" not in b:
                continue
            exchanges += 1
            for where, x, y in _strings(a["rec"], b["rec"]):
                strings += 1
                gone = _changed(x, y)
                c = klass(gone.strip('"'), where)
                by_class[c] += 1
                print(
                    f"{a['file']}#{a['n']}{where}: [{c}] {gone[:120]!r} -> {_changed(y, x)[:60]!r}"
                )
    print(f"\n{exchanges} exchanges compared; {strings} strings differ: {dict(by_class)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--vs", action="append", default=[],
                    help="another PYTHONPATH (.looptap-editable:DIR); repeatable")  # fmt: skip
    ap.add_argument("--cpu", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cpu:
        n, secs = cpu()
        print(f"{n} {secs:.3f}")
        return 0
    if args.time:
        return paired(args.vs)
    if args.dump:
        dump(args.dump)
        return 0
    if args.compare:
        return compare(*args.compare)
    ap.error("--dump OUT or --compare BASE NOW")
    return 2


if __name__ == "__main__":
    sys.exit(main())
