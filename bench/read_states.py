"""How looptap read every round trip of a set of recorded cassettes (issue 92's must-show).

    python bench/read_states.py [--list] DIR [DIR ...]

Each vcrpy cassette (``*.yaml``/``*.yml``; gRPC ``*.xai.yaml`` recordings left out: not HTTP LLM
traffic) under each DIR is loaded and parsed as ``show`` parses it; prints, per DIR, the files
refused whole, the round trips by read state (``complete``, ``partial``, ``unread``, or not an
LLM call) and what was not read, how often (a message's number left out, so like labels count
together). ``--list`` also names each round trip not read whole (its file, its place in it, what
was not read): how a change's newly partial round trips are found and explained (issue 102).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import load_vcr


def _files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in (".yaml", ".yml") and not p.name.endswith(".xai.yaml") and p.is_file()
    )


def census(
    root: Path, listed: list[str] | None = None
) -> tuple[int, int, Counter[str], Counter[str]]:
    """(files, files refused, round trips by read state, unread labels by count); each round trip
    not read whole appended to ``listed`` when given."""
    states: Counter[str] = Counter()
    said: Counter[str] = Counter()
    files = _files(root)
    refused = 0
    for path in files:
        try:
            exchanges = load_vcr(path)
        except Exception:  # a file looptap refuses (its message is the CLI's to print)
            refused += 1
            continue
        for i, rt in enumerate(parse_all(exchanges)):
            states[rt.read or "not an LLM call"] += 1
            if listed is not None and rt.read in ("partial", "unread"):
                where = path.relative_to(root)
                listed.append(f"{rt.read:8} {where} #{i}: {'; '.join(rt.unread)[:300]}")
            said.update(
                u.split(": ", 1)[-1] if u.startswith(("message ", "part ")) else u
                for u in rt.unread
            )
    return len(files), refused, states, said


def main(argv: list[str]) -> int:
    listed: list[str] | None = [] if "--list" in argv else None
    dirs = [a for a in argv if a != "--list"]
    if not dirs:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for d in dirs:
        n, refused, states, said = census(Path(d), listed)
        print(f"{d}: {n} files, {refused} refused, {sum(states.values())} round trips")
        for k in ("complete", "partial", "unread", "not an LLM call"):
            print(f"  {k:16} {states.get(k, 0):6}")
        for label, count in said.most_common():
            print(f"    {count:5}  {label[:160]}")
        for line in listed or ():
            print(f"  {line}")
        if listed:
            listed.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
