"""User patterns (cassettes/patterns.py, RE2): matching time over texts of 1, 2 and 4 MiB for the
shapes a backtracking engine explodes on, and the ratio of each doubling (linear: about 2).

    python bench/patterns.py [-n RUNS]

Each shape is applied as a substitution rule (``rules.substitute``, what replay, diff and a fork
do with ``--substitute``), as a redaction pattern (``Redactor.scrub``, what the recorder's
writer does with ``--redact-pattern``) and as the ``yes`` of a consent rule in an agent's rules
file (docs/rules.md: read from the working directory, so from any checkout). Figures are this
process's CPU time (not wall-clock: the machine is shared), the best of ``RUNS`` runs; Python's own
``re`` on the first shape is shown for 18 to 24 characters (its time quadruples every two).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from looptap.cassettes.analysis import parse_rules
from looptap.cassettes.matching import parse_substitution
from looptap.cassettes.matching._rules import substitute
from looptap.cassettes.recording import Redactor

#: (pattern, unit, tail): the text is ``unit`` repeated to the size, then ``tail``.
SHAPES = [
    ("(a|a)*b", "a", "b"),
    ("(a|a)*b", "a", "c"),
    ("(a+)+$", "a", "!"),
    (r"(\w+\s?)+$", "ab ", "!"),
    ("^(a|aa)+$", "a", ""),
    ("(x+x+)+y", "x", ""),
    ("(?:a|ab)*c*(x.*)+", "ab", "x!"),
    (r"([a-z0-9]+[-.]?)+@", "ab-", ""),
    ("^(.|.)*Z", "a", "!"),  # a rules file's yes = '^(.|.)*Z' (issue 70)
]
SIZES = (1 << 20, 2 << 20, 4 << 20)


def _best(f: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.process_time()
        f()
        times.append(time.process_time() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=5)
    args = ap.parse_args()
    head = "".join(f"{s >> 20:>8} MiB" for s in SIZES)
    print(f"{'pattern':24} {'as':10}{head}   ratio 2x  ratio 4x/2x")
    worst = 0.0
    for pattern, unit, tail in SHAPES:
        rule = parse_substitution(pattern + "=<x>")
        redactor = Redactor.configured(patterns=[pattern])
        texts = [unit * (size // len(unit)) + tail for size in SIZES]
        consent = f"[[rule]]\nkind = 'consent'\ntools = ['x']\nyes = '{pattern}'\n"  # literal
        yes = parse_rules(consent, "bench").rules[0].yes
        assert yes is not None
        uses: dict[str, Callable[[str], object]] = {
            "substitute": lambda t, rule=rule: substitute([rule], t, ()),
            "redact": redactor.scrub,
            "rules yes": yes.search,
        }
        for name, use in uses.items():
            times = [_best(lambda t=t, use=use: use(t), args.runs) for t in texts]
            ratios = [times[1] / times[0], times[2] / times[1]]
            worst = max(worst, *ratios)
            cells = "".join(f"{t * 1000:>10.1f} ms" for t in times)
            print(f"{pattern:24} {name:10}{cells}   {ratios[0]:8.2f}  {ratios[1]:11.2f}")
    print(f"worst ratio for twice the text: {worst:.2f}")
    print("Python's re, (a|a)*b over n characters of 'a' (no b):")
    for n in (18, 20, 22, 24):
        t = _best(lambda n=n: re.search("(a|a)*b", "a" * n), 1)
        print(f"  n={n}: {t * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
