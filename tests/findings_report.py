"""Run the layer analysis over every conversation of the corpus; print findings by code.

    python tests/findings_report.py [CODE ...]   # with codes: list every occurrence of them

The precision figures of the closing notes come from this script.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from real_corpus import corpus_files, rel

from looptap.cassettes.analysis import analyse
from looptap.cassettes.storage import load_vcr


def main() -> None:
    show = set(sys.argv[1:])
    by_code: Counter[tuple[str, str, str]] = Counter()
    convs = multi = turns = 0
    errors: list[str] = []
    listed: list[str] = []
    for path in corpus_files():
        exchanges = load_vcr(path)
        for i, ex in enumerate(exchanges):
            ex.seq = i
        ra = analyse(exchanges)
        errors.extend(f"{rel(path)}: {e}" for e in ra.errors)
        convs += len(ra.conversations)
        multi += sum(1 for c in ra.conversations if len(c.turns) > 1)
        turns += len(ra.turns)
        for f in ra.findings:
            by_code[(f.layer, f.code, f.severity.value)] += 1
            if f.code in show:
                listed.append(
                    f"  {f.code} {rel(path)}#{f.seq} ({f.conversation}/turn {f.turn}): {f.message}"
                )
    print(
        f"{turns} turns in {convs} conversations ({multi} with "
        f"more than one turn); {len(errors)} check errors"
    )
    for layer in ("E", "A", "C"):
        print(f"\n{layer}:")
        for (lay, code, sev), n in sorted(by_code.items()):
            if lay == layer:
                print(f"  {code:34} {sev:8} {n:5}")
    for e in errors:
        print("check error:", e)
    if listed:
        print()
        print("\n".join(listed))


if __name__ == "__main__":
    main()
