"""How often a model says the same words again when the same request is sent again: the chances
``looptap why``'s budget gives a re-sampled answer of coming back word for word
(``cassettes.why._suspects._SAID_AGAIN`` and ``_SAID_AGAIN_THINKING``, docs/why.md "The budget"),
measured on real recordings.

The shared corpus holds requests that other projects' test suites sent more than once to the real
APIs, each recorded in a cassette of its own (the same URL and the same body, byte for byte once
its JSON is sorted). Of each such request, the first two answers that are two answers (another
response id, or another body where the API gives none: a cassette copied into another test's
holds the same answer twice, which says nothing of a second sample) are compared (text and tool
calls, as looptap reads them). This fits the per-token chance p for which an answer of n visible
output tokens comes back word for word with chance p^n, by maximum likelihood, with a bootstrap
interval over the requests: over all of them, then by whether the model thought first (its
request asked it to, ``providers.asks_to_think``, or its answer carries reasoning), by family, and
by the sampling parameters the request set; with the likelihood ratio of the thinking split.

    .venv/bin/python bench/said_again.py [CORPUS]
"""

from __future__ import annotations

import math
import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from looptap.cassettes import providers  # noqa: E402
from looptap.cassettes.errors import CassetteError  # noqa: E402
from looptap.cassettes.parsing import parse_exchange  # noqa: E402
from looptap.cassettes.reading import open_run  # noqa: E402
from looptap.cassettes.why._suspects import thought  # noqa: E402
from tests.support.upstream import CORPUS  # noqa: E402

#: The sampling parameters a request may set (``providers.REQUEST_FIELDS``' names).
SAMPLING = ("temperature", "top_p", "top_k", "seed")


class Answer(NamedTuple):
    said: str  # its text and tool calls
    tokens: int  # visible output tokens, as recorded
    copy: str  # what tells one answer from another: its response id, else its body
    thought: bool  # the model thought first (asked to, or reasoning in the answer)
    family: str
    sampling: str  # the sampling parameters the request set, or "none set"


def answers(path: Path) -> dict[tuple[str, bytes], Answer]:
    """Per answered request of one cassette (its URL and sorted JSON body): its answer."""
    try:
        run = open_run(path, whole=True)
    except (CassetteError, ValueError):  # a file looptap refuses is no pair
        return {}
    out: dict[tuple[str, bytes], Answer] = {}
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
        rid = parse_exchange(ex).response.id
        set_ = {n: providers.request_field(t.c.params, n) for n in SAMPLING}
        sampling = ", ".join(f"{n} {v[1]}" for n, v in set_.items() if v) or "none set"
        out.setdefault(key, Answer(
            said.decode(), max(0, t.tokens.output - (t.tokens.reasoning or 0)),
            rid or bytes(ex.response_body or b"").decode(errors="replace"), thought(t), t.family,
            sampling,
        ))  # fmt: skip
    return out


def fit(pairs: list[tuple[int, bool]]) -> float:
    """The p (to 0.001) that makes ``pairs`` (n tokens, said again?) likeliest under p^n."""
    return max((x / 1000 for x in range(900, 1000)), key=lambda p: loglik(pairs, p))


def loglik(pairs: list[tuple[int, bool]], p: float) -> float:
    return sum(n * math.log(p) if same else math.log(max(1e-12, 1 - p**n)) for n, same in pairs)


def said(name: str, pairs: list[tuple[int, bool]]) -> str:
    p = fit(pairs)
    rng = random.Random(68)
    boots = sorted(fit([rng.choice(pairs) for _ in pairs]) for _ in range(200))
    return (
        f"{name}: {sum(s for _, s in pairs)} of {len(pairs)} said again; p = {p:.3f} (bootstrap "
        f"90%: {boots[10]:.3f}–{boots[189]:.3f}); a 15-token answer: {p**15:.2f}"
    )


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS
    seen: dict[tuple[str, bytes], list[Answer]] = {}
    for path in sorted(root.rglob("*.yaml")):
        for key, answer in answers(path).items():
            seen.setdefault(key, []).append(answer)
    rows: list[tuple[Answer, bool]] = []
    copies = 0
    for v in seen.values():
        two = [a for i, a in enumerate(v) if all(a.copy != b.copy for b in v[:i])][:2]
        copies += len(v) >= 2 and v[0].copy == v[1].copy
        if len(two) == 2 and two[0].tokens:
            rows.append((two[0], two[0].said == two[1].said))
    if not rows:
        raise SystemExit(f"no request answered twice under {root}")
    print(f"{len(rows)} requests answered twice or more; {copies} more recorded twice with one "
          "answer (the same response id or body: a copy, left out)")  # fmt: skip
    pairs = [(a.tokens, s) for a, s in rows]
    print(said("all", pairs))
    for lo, hi in ((0, 10), (11, 20), (21, 50), (51, 200), (201, 10**9)):
        band = [s for n, s in pairs if lo <= n <= hi]
        if band:
            print(f"  {lo}–{hi if hi < 10**9 else '…'} tokens: {sum(band)} of {len(band)}")
    by: list[tuple[str, Callable[[Answer], Any]]] = [
        ("thought first", lambda a: a.thought),
        ("family", lambda a: a.family),
        ("sampling", lambda a: a.sampling),
    ]
    for label, key in by:
        groups: dict[Any, list[tuple[int, bool]]] = {}
        for a, s in rows:
            groups.setdefault(key(a), []).append((a.tokens, s))
        print(f"by {label}:")
        for k, g in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print("  " + said(str(k), g))
    split = [[(a.tokens, s) for a, s in rows if a.thought is t] for t in (True, False)]
    ratio = 2 * (sum(loglik(g, fit(g)) for g in split) - loglik(pairs, fit(pairs)))
    print(f"thought first or not: likelihood ratio {ratio:.1f} (1 degree of freedom: 3.8 is p = "
          "0.05, 10.8 is p = 0.001)")  # fmt: skip
    print(f"families: {dict(Counter(a.family for a, _ in rows))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
