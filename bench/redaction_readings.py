"""Does redaction change a reading? Each corpus cassette read as it is (``load_vcr``: the wire's
text), as ``looptap show FILE.yaml`` reads it (redacted as it is read) and as ``looptap import``
stores it (through the recorder's writer, then read back): every file whose conversations or
warning-or-worse findings differ, listed, and the totals (issue 54: redaction must never change a
reading).

    .venv/bin/python bench/redaction_readings.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from real_corpus import corpus_files, rel  # noqa: E402

from looptap.cassettes.reading import Run, cassette_of, open_run  # noqa: E402
from looptap.cassettes.storage import load_vcr  # noqa: E402


def reading(run: Run) -> dict[str, Any]:
    """A run's conversations (each its round trips' seqs) and warning-or-worse findings."""
    serious = [f for f in run.analysis.findings if f.severity.value in ("warning", "error")]
    return {
        "conversations": sorted(sorted(c.turns) for c in run.analysis.conversations),
        "findings": sorted([f.seq, f.code] for f in serious),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, help="save both readings of every file")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    changed = conversations = 0
    findings = {"plain": 0, "shown": 0, "imported": 0}
    for path in corpus_files():
        try:
            plain = reading(Run.of(load_vcr(path)))
            shown = reading(open_run(path, whole=True))
            with cassette_of(path) as imported:
                stored = reading(open_run(imported, whole=True))
        except Exception as exc:  # a file the reader refuses is the corpus test's business
            print(f"{rel(path)}: not read ({type(exc).__name__})")
            continue
        out[rel(path)] = got = {"plain": plain, "shown": shown, "imported": stored}
        conversations += len(plain["conversations"])
        for way, read in got.items():
            findings[way] += len(read["findings"])
            for key in ("conversations", "findings"):
                if read[key] != plain[key]:
                    print(f"{rel(path)} {way} {key}: {read[key]}, plain {plain[key]}")
        changed += shown != plain or stored != plain
    print(
        f"{len(out)} files, {conversations} conversations; warning-or-worse findings: "
        + ", ".join(f"{n} {way}" for way, n in findings.items())
        + f"; {changed} files read differently"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
