"""Decompression bombs, before and after: peak RSS and seconds of each bomb in each place looptap
decodes, for this tree and (``--before DIR``) another checkout of looptap, side by side.

    python bench/bombs.py [--before DIR] [--encodings gzip br ...] [--cap-gb 4] [--timeout 300]

Each cell is one process under an address-space cap (``--cap-gb``), its peak RSS taken by wait4
through the hostile matrix's launcher: ``show --json`` of a vcrpy file and of a mitmproxy flow
file answered by the bomb, ``verify`` of a cassette that stores it (as the recorder keeps a body
over the budget), and ``looptap replay`` sent it as a request body (the server's VmHWM). A cell
that hits the cap says ``MemoryError``; one past ``--timeout`` says so. Seconds are wall-clock on
whatever machine runs it: compare the columns, not the figures across runs.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile.corpus import (  # noqa: E402
    BOMB_ENCODINGS,
    bomb,
    bomb_exchange,
    bombs_flows,
    bombs_vcr,
    write_cassette,
)
from tests.hostile.matrix import LAUNCH  # noqa: E402


def _cell(tree: Path, argv: list[str], cap: int, timeout: float, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1"}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        os.setsid()

    with tempfile.NamedTemporaryFile("r") as rss:
        t0 = time.monotonic()
        p = subprocess.Popen(
            [sys.executable, "-S", "-c", LAUNCH, rss.name, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            preexec_fn=limit,
        )
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return f"> {timeout:.0f} s"
        seconds = time.monotonic() - t0
        kb = rss.read().strip()
    text = (out + err).decode("utf-8", "replace")
    server = re.search(r"server_hwm_kb (\d+)", text)
    mb = (
        int(server.group(1)) / 1024
        if server
        else (int(kb) / 1024 if kb.isdigit() else float("nan"))
    )
    if "MemoryError" in text:
        return f"MemoryError, {mb:,.0f} MB, {seconds:.1f} s"
    if re.search(r"^answer 5\d\d", text, re.M):
        return f"HTTP 500, {mb:,.0f} MB, {seconds:.1f} s"
    return f"{mb:,.0f} MB, {seconds:.1f} s"


def _replay_argv(cassette: Path, enc: str, body: Path) -> list[str]:
    code = textwrap.dedent(f"""
        import signal, subprocess, sys, urllib.error, urllib.request
        p = subprocess.Popen([sys.executable, "-m", "looptap.cassettes.cli", "replay", {str(cassette)!r}], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        url = None
        for line in p.stdout:
            if line.startswith(b"export OPENAI_BASE_URL="):
                url = line.split(b"=", 1)[1].strip().decode()
                break
        req = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=open({str(body)!r}, "rb").read(),
                                     headers={{"content-type": "application/json", "content-encoding": {enc!r}}})
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                print("answer", r.status)
        except urllib.error.HTTPError as exc:
            print("answer", exc.code, exc.read()[:200])
        print("server_hwm_kb", [l for l in open(f"/proc/{{p.pid}}/status") if l.startswith("VmHWM:")][0].split()[1])
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        sys.stdout.write(err.decode("utf-8", "replace"))
    """)  # noqa: E501
    return [sys.executable, "-c", code]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another looptap checkout to compare with")
    ap.add_argument("--encodings", nargs="+", default=list(BOMB_ENCODINGS))
    ap.add_argument(
        "--places",
        nargs="+",
        default=["vcrpy show", "flows show", "cassette verify", "replay request"],
    )
    ap.add_argument("--cap-gb", type=float, default=4)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    cap = int(args.cap_gb * (1 << 30))
    trees = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    py = [sys.executable, "-m", "looptap.cassettes.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"| bomb (1 GiB of output) | place | {' | '.join(name for name, _ in trees)} |")
        print("|---|---|" + "---|" * len(trees))
        for enc in args.encodings:
            tag = enc.replace(", ", "_")
            vcr, flows, cassette, body = (
                work / f"{tag}.yaml",
                work / f"{tag}.mitm",
                work / f"{tag}.jsonl",
                work / f"{tag}.body",
            )
            bombs_vcr(vcr, (enc,))
            bombs_flows(flows, (enc,))
            # the recorder keeps both bodies compressed
            write_cassette(cassette, [bomb_exchange(enc)])
            body.write_bytes(bomb(enc))
            argvs = {
                "vcrpy show": [*py, "show", "--json", str(vcr)],
                "flows show": [*py, "show", "--json", str(flows)],
                "cassette verify": [*py, "verify", str(cassette)],
                "replay request": _replay_argv(cassette, enc, body),
            }
            for place in args.places:
                cells = [_cell(tree, argvs[place], cap, args.timeout, work) for _, tree in trees]
                print(
                    f"| {enc} ({len(bomb(enc)):,} B) | {place} | {' | '.join(cells)} |", flush=True
                )


if __name__ == "__main__":
    main()
