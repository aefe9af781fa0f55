"""The replay matcher's redaction cost, before and after (issue 91): since session 46 the matcher
runs the recorder's redactor on both sides of a comparison. The recorded side is redacted when
the index is built (at load); a run served from its offset index (a large cassette: read again
from disk, its keys not all kept) made a recorded round trip's key anew, redacted again, each
time a request's candidate fell out of the key cache. Now a recorded round trip is redacted again
only when its load-time redaction changed it (a recording made under fewer rules).

The run: a looptap cassette this tree writes (an agent of ``TURNS`` Chat Completions turns, its
history growing, each turn's tool call answered by a tool's HTTP call whose query carries a
key), served from its offset index (``IndexedRecordings``) by each tree's matcher: the index
built, then every recorded request matched again in order (``match`` / ``match_tool``), as a
replay does. Each tree runs in its own interpreter (its ``.looptap-editable`` first on the path),
best of ``REPEAT``.

    .venv/bin/python bench/replay_redaction.py [--base REV] [--turns N]

``--base`` (default 21bc15ea, session 46's merge) is extracted with ``git archive`` into a
temporary directory. Figures: docs/redaction.md ("The matcher's cost").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEAT = 3

CHILD = r"""
import json, sys, time
from looptap.cassettes.matching import Matcher
from looptap.cassettes.matching._indexed import IndexedRecordings
from looptap.cassettes.storage import read_records

path = sys.argv[1]
requests = [(ex.method, ex.url, ex.request_headers, ex.request_body, ex.tool)
            for ex in read_records(path).exchanges]
best = None
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    m = Matcher(IndexedRecordings(path), tools=True)
    built = time.perf_counter() - t0
    served = 0
    for method, url, headers, body, tool in requests:
        if tool:
            got = m.match_tool(method, url, headers, body)
        else:
            target = url.split("://", 1)[1]
            got = m.match(method, target[target.index("/"):], headers, body)
        served += hasattr(got, "exchange")
    total = time.perf_counter() - t0
    if best is None or total < best[1]:
        best = (built, total, served)
print(json.dumps({"built": best[0], "total": best[1], "served": best[2], "n": len(requests)}))
"""


def _cassette(path: Path, turns: int) -> None:
    """An agent's run: ``turns`` turns, each a tool call whose HTTP carries a key in its query."""
    from looptap.cassettes.recording.pipeline import CassetteWriter
    from looptap.cassettes.wire import Exchange

    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in 500 cities?"}]
    with CassetteWriter(path) as w:
        for i in range(turns):
            call = {"id": f"call_{i}", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": f"c{i}"})}}  # fmt: skip  # noqa: E501
            body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
            answer = {"choices": [{"index": 0, "finish_reason": "tool_calls",
                                   "message": {"role": "assistant", "content": None,
                                               "tool_calls": [call]}}]}  # fmt: skip
            ex = Exchange("POST", "https://api.openai.com/v1/chat/completions",
                          [("content-type", "application/json"),
                           ("authorization", "Bearer sk-bench-0123456789abcdef0123")], body,
                          status=200)  # fmt: skip
            ex.response_headers = [("content-type", "application/json")]
            ex.response_chunks = [(None, json.dumps(answer).encode())]
            w.append(ex)
            url = f"http://127.0.0.1:8765/weather?city=c{i}&apikey=wx-9Hq2ZpL9vRk4TtYbN3mC"
            tool = Exchange("GET", url, [], b"", status=200, tool=True)
            tool.response_headers = [("content-type", "application/json")]
            tool.response_chunks = [(None, b'{"temp": 12}')]
            w.append(tool)
            messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": f"call_{i}", "content": '{"temp": 12}'}]  # fmt: skip  # noqa: E501


def _tree(rev: str, where: Path) -> Path:
    """``rev`` extracted into ``where`` with its own ``.looptap-editable``."""
    where.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "cassettes", "proxy",
                              "inspector"], capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    pkg = where / ".looptap-editable" / "looptap"
    pkg.mkdir(parents=True)
    for d in ("cassettes", "proxy", "inspector"):
        (pkg / d).symlink_to(where / d)
    return where


def _run(tree: Path, cassette: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / ".looptap-editable")}
    out = subprocess.run([sys.executable, "-c", CHILD, str(cassette), str(REPEAT)], env=env,
                         capture_output=True, text=True, check=True, cwd=tree)  # fmt: skip
    got: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="21bc15ea")
    ap.add_argument("--turns", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="looptap-bench-redaction-") as tmp:
        cassette = Path(tmp) / "run.jsonl"
        _cassette(cassette, args.turns)
        base = _tree(args.base, Path(tmp) / "base")
        before, after = _run(base, cassette), _run(ROOT, cassette)
        assert before["n"] == after["n"]
    print(f"{args.turns} turns + {args.turns} tool calls, served from the offset index "
          f"({cassette.name}); best of {REPEAT}")  # fmt: skip
    print(f"{'':28} {args.base:>12} {'this tree':>12} {'ratio':>8}")
    for k, label in (("built", "index built (s)"), ("total", "built + every request (s)")):
        print(f"{label:28} {before[k]:12.3f} {after[k]:12.3f} {before[k] / after[k]:7.2f}x")
    print(f"{'served':28} {before['served']:>12.0f} {after['served']:>12.0f} of {after['n']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
