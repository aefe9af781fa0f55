"""False masks on real traffic: what one tree's redaction masks in the corpus that another's does
not, string by string, each classed (an id, a hash, a signature, base64 data, anything else).

    .venv/bin/python bench/false_masks.py --dump OUT.jsonl          # this tree's redaction
    PYTHONPATH=OTHER/.looptap-editable:OTHER .venv/bin/python bench/false_masks.py --dump BASE.jsonl
    .venv/bin/python bench/false_masks.py --compare BASE.jsonl OUT.jsonl

Every exchange of every vcrpy cassette under ``LOOPTAP_CORPUS`` (default ``tests/corpus``) is
redacted as ``looptap import`` does (one ``Redactor`` per cassette, in order) and written as its
record. ``--compare`` walks the two records of each exchange side by side and prints every string
that differs (its place, the two texts around the change) and the count by class: the corpus
holds no live credential, so every string masked by one tree only is a false mask of that tree's
unless the printed text shows a credential (a test key in a cassette is one).
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
    args = ap.parse_args()
    if args.dump:
        dump(args.dump)
        return 0
    if args.compare:
        return compare(*args.compare)
    ap.error("--dump OUT or --compare BASE NOW")
    return 2


if __name__ == "__main__":
    sys.exit(main())
