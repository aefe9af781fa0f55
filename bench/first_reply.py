"""What taking the working tree costs an agent's first reply (docs/shell-file-tools.md, "The
start"): an agent (the standard library's ``urllib``) sends one chat request as soon as it starts
and prints how long its reply took, under ``looptap run`` with ``--no-shell-trace`` (plain) and
the default, by the code of ``--base`` (before) and of this checkout (after), ``--n`` rounds
interleaved, in bench/tree_start.py's ``files`` (30,000 files) and ``venv`` (a 1.2 GB virtual
environment beside a small project) trees. The scripted upstream on 127.0.0.1 answers at once:
no model latency hides the turn's scan (the worst case).

    .venv/bin/python bench/first_reply.py --n 5 --base eac80643 [--trees DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

from bench.tree_start import base_code, make  # noqa: E402
from tests.support.scripted import Reply, ScriptedUpstream  # noqa: E402

AGENT = """
import json, os, time, urllib.request
body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                             {"content-type": "application/json", "authorization": "Bearer sk-b"})
t = time.perf_counter()
urllib.request.urlopen(req, timeout=600).read()
print("REPLY", time.perf_counter() - t)
"""


def _run(code: Path, tree: Path, out: Path, agent: Path, url: str, plain: bool) -> float:
    python = ROOT / ".venv-proxy" / "bin" / "python"
    argv = [str(python), "-c", "from looptap.cassettes.cli import main; main()", "run", "-o"]
    argv += [str(out), "--upstream", f"openai={url}", *(["--no-shell-trace"] if plain else [])]
    argv += ["--", sys.executable, str(agent)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(code), "HOME": str(out.parent)}
    proc = subprocess.run(argv, cwd=tree, env=env, check=True, capture_output=True, text=True)
    return float(next(x for x in proc.stdout.splitlines() if x.startswith("REPLY")).split()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--base", default="eac80643", help="the code before (a commit)")
    ap.add_argument("--trees", type=Path, help="bench/tree_start.py --make's trees (else made)")
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="first-reply-") as tmp,
        ScriptedUpstream(lambda _req: Reply.say("Hi.")) as up,
    ):
        work = Path(tmp)
        trees = args.trees or work / "trees"
        if args.trees is None:
            make(trees)
        agent = work / "agent.py"
        agent.write_text(AGENT)
        codes = {"before": base_code(work / "base", args.base), "after": ROOT / ".looptap-editable"}
        got: dict[tuple[str, str, str], list[float]] = {}
        for i in range(args.n):
            for tree in ("files", "venv"):
                for name, code in codes.items():
                    for plain in (True, False) if i % 2 == 0 else (False, True):
                        mode = "plain" if plain else "default"
                        out = work / f"{tree}-{name}-{mode}.jsonl"
                        secs = _run(code, trees / tree, out, agent, up.url, plain)
                        got.setdefault((tree, name, mode), []).append(secs)
                        print(tree, name, mode, i, f"{secs:.3f}", flush=True)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        print("| tree | code | first reply, plain (s, median) | default | default - plain |")
        print("|---|---|---|---|---|")
        for tree in ("files", "venv"):
            for name in codes:
                p = statistics.median(got[(tree, name, "plain")])
                d = statistics.median(got[(tree, name, "default")])
                print(f"| {tree} | {name} | {p:.3f} | {d:.3f} | {d - p:+.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
