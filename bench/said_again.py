"""How often a model says the same words again when the same request is sent again: the chance
``looptap why``'s budget gives a re-sampled answer of coming back word for word
(``cassettes.why._suspects._SAID_AGAIN``, docs/why.md "The budget"), measured on real recordings.

The shared corpus holds requests that other projects' test suites sent more than once to the real
APIs, each recorded in a cassette of its own (the same URL and the same body, byte for byte once
its JSON is sorted). Taking the answers of the first two cassettes of each such request (text and
tool calls, as looptap reads them), this fits the per-token chance p for which an answer of n
visible output tokens comes back word for word with chance p^n, by maximum likelihood, with a
bootstrap interval over the requests.

    .venv/bin/python bench/said_again.py [CORPUS]
"""

from __future__ import annotations

import math
import random
import sys
from collections import Counter
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from looptap.cassettes.errors import CassetteError  # noqa: E402
from looptap.cassettes.reading import open_run  # noqa: E402
from tests.support.upstream import CORPUS  # noqa: E402


def answers(path: Path) -> dict[tuple[str, bytes], tuple[str, int]]:
    """Per answered request of one cassette (its URL and sorted JSON body): what the model said
    (its text and tool calls) and its visible output tokens, as recorded."""
    try:
        run = open_run(path, whole=True)
    except (CassetteError, ValueError):  # a file looptap refuses is no pair
        return {}
    out: dict[tuple[str, bytes], tuple[str, int]] = {}
    by_seq = {ex.seq: ex for ex in run.exchanges}
    for seq, t in run.analysis.turns.items():
        ex = by_seq.get(seq)
        if ex is None or t.a.status != 200 or t.tokens.output is None:
            continue
        try:
            body = orjson.loads(ex.request_body)
        except orjson.JSONDecodeError:
            continue
        said = orjson.dumps([t.e.text or "", [[c.name, c.arguments] for c in t.e.tool_calls]])
        key = (ex.url.split("?")[0], orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
        out.setdefault(key, (said.decode(), max(0, t.tokens.output - (t.tokens.reasoning or 0))))
    return out


def fit(pairs: list[tuple[int, bool]]) -> float:
    """The p (to 0.001) that makes ``pairs`` (n tokens, said again?) likeliest under p^n."""

    def loglik(p: float) -> float:
        return sum(n * math.log(p) if same else math.log(max(1e-12, 1 - p**n)) for n, same in pairs)

    return max((x / 1000 for x in range(900, 1000)), key=loglik)


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS
    seen: dict[tuple[str, bytes], list[tuple[str, int]]] = {}
    for path in sorted(root.rglob("*.yaml")):
        for key, answer in answers(path).items():
            seen.setdefault(key, []).append(answer)
    pairs = [(v[0][1], v[0][0] == v[1][0]) for v in seen.values() if len(v) >= 2 and v[0][1]]
    if not pairs:
        raise SystemExit(f"no request recorded twice under {root}")
    hosts = Counter(k[0].split("/")[2] for k, v in seen.items() if len(v) >= 2)
    p = fit(pairs)
    rng = random.Random(68)
    boots = sorted(fit([rng.choice(pairs) for _ in pairs]) for _ in range(200))
    print(f"{len(pairs)} requests recorded twice or more; said again word for word: "
          f"{sum(s for _, s in pairs)} of {len(pairs)}")  # fmt: skip
    for lo, hi in ((0, 10), (11, 20), (21, 50), (51, 200), (201, 10**9)):
        band = [s for n, s in pairs if lo <= n <= hi]
        if band:
            print(f"  {lo}–{hi if hi < 10**9 else '…'} tokens: {sum(band)} of {len(band)}")
    print(f"hosts: {dict(hosts)}")
    print(f"p = {p:.3f} (bootstrap 90%: {boots[10]:.3f}–{boots[189]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
