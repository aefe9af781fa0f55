"""Large uploads through the real recorder: its peak memory for 1, 65 and 200 MiB request bodies.

    LOOPTAP_PROXY_PYTHON=.venv-proxy/bin/python python bench/upload.py [--sizes 1,65,200]

Each size, through a reverse listener (``Content-Length``) and through the forward proxy
(chunked), with a fresh recorder (``looptap record``, tests/support/recorder.py) in front of the
tests' loopback upstream: whether the agent got the upstream's answer, whether the upstream got
every byte, and the peak resident memory (``VmHWM``) of the proxy process and of its writer process
over their resident memory at start, once the round trip is in the cassette. The recorder keeps
at most ``proxy.capture.MAX_REQUEST`` of a request; a longer body is streamed to the upstream, so
the figures should not grow with the size. ``--shapes``: one long message, or 1 KiB messages (the
recorder then keeps a full 32 MiB: the writer's worst case).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.recorder import RecorderProcess
from tests.support.reliability import Target, wait_recorded
from tests.support.upstream import FakeUpstream

MIB = 1 << 20


def _chunked(body: bytes) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + MIB]), body[i : i + MIB])
        for i in range(0, len(body), MIB)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


def one(size: int, mode: str, where: Path, shape: str) -> str:
    if shape == "one":  # one long message: the kept bytes end where it starts
        messages = [{"role": "user", "content": "y" * size}]
    else:  # 1 KiB messages: the recorder keeps 32 MiB of them (the writer's worst case)
        messages = [{"role": "user", "content": "y" * 1000}] * (size // 1024)
    data = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    headers = [("content-type", "application/json")]
    if mode == "forward":
        headers.append(("transfer-encoding", "chunked"))
    with (
        FakeUpstream(delay=0.0) as up,
        RecorderProcess(
            where / "run.jsonl", where / "conf", up.url, "--record-host", "127.0.0.1"
        ) as rec,
    ):
        idle = rec.stats()
        resp = Target(mode, up, rec).request(
            "/v1/chat/completions?m=upload",
            headers,
            _chunked(data) if mode == "forward" else data,
            timeout=600,
        )
        (served,) = up.wait_served(1)
        wait_recorded(rec.out, "upload")  # (the writer's peak: once it wrote the round trip)
        whole = served.request_sha256 == hashlib.sha256(data).hexdigest()
        peak = {k: v.peak_rss - idle[k].rss for k, v in rec.stats().items() if v and idle.get(k)}
        rec.stop()
    proxy, writer = (peak.get(k, 0) / MIB for k in ("proxy", "writer"))
    return (
        f"{size // MIB:>5} MiB  {shape:4} {mode:8} answer {resp.status}, upstream got it whole: "
        f"{whole!s:5}  proxy +{proxy:.0f} MiB, writer +{writer:.0f} MiB"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,65,200", help="MiB, comma-separated")
    ap.add_argument("--shapes", default="one,many", help="one long message, or 1 KiB ones")
    args = ap.parse_args()
    for shape in args.shapes.split(","):
        for mib in (int(s) for s in args.sizes.split(",")):
            for mode in ("reverse", "forward"):
                with tempfile.TemporaryDirectory() as tmp:
                    print(one(mib * MIB, mode, Path(tmp), shape), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
