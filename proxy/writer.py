"""The recorder's writer process: takes captured exchanges from a queue and appends them to the
cassette (redaction, parsing, encoding, disk I/O), so none of that shares the proxy's GIL.

A module of its own, importing no mitmproxy: the process starts fast, and it is importable by name
when the addon is loaded as a script (``mitmdump -s proxy/addon.py``).
"""

from __future__ import annotations

import queue
import sys
from pathlib import Path
from typing import Any

from cassettes.decoding import decode_exchange
from cassettes.errors import CassetteError
from cassettes.store import CassetteWriter

__all__ = ["writer_main"]


def writer_main(path: str, fsync: bool, inbox: Any, outbox: Any, parent: int | None = None) -> None:
    """The writer process: redaction, parsing, encoding and disk I/O away from the proxy's GIL."""
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the proxy decides when to stop
    # Niced: on a 2-core machine an un-niced writer competes with the proxy and raised its added
    # latency from about +0.4 to +1.5 ms p50 (bench/proxy.py, run side by side). The cost: under
    # heavy CPU contention the writer falls behind (seconds at load average 8-16, measured by
    # tests/reliability/test_proxy_crash.py), and a SIGKILL of the recorder loses that backlog;
    # a normal stop (Ctrl-C, SIGTERM, the child exiting) always drains it.
    try:
        os.nice(10)
    except OSError:
        pass
    try:
        writer = CassetteWriter(Path(path), meta={"source": "looptap proxy"}, fsync=fsync)
    except (CassetteError, OSError) as exc:
        outbox.put(("storage_error", f"cannot open {path}: {exc}"))
        return
    if parent is None:
        parent = os.getppid()
    outbox.put(("ready", None))
    with writer:
        while True:
            try:
                item = inbox.get(timeout=0.5)
            except queue.Empty:
                # The proxy was killed (SIGKILL gives it no time to say stop): this process holds
                # the queue's write end too, so it would wait for ever. Everything the proxy had
                # handed over has been read and written by now.
                if os.getppid() != parent:
                    break
                continue
            except (EOFError, OSError):  # the proxy died: everything received is on disk
                break
            if item is None:
                break
            try:
                decode_exchange(item)
                writer.append(item)
                outbox.put(("ok", None))
            except CassetteError as exc:
                print(f"looptap: STORAGE ERROR, round trip not recorded: {exc}", file=sys.stderr, flush=True)
                outbox.put(("storage_error", str(exc)))
            except Exception as exc:
                msg = f"could not record {item.method} {item.url}: {type(exc).__name__}: {exc}"
                print(f"looptap: {msg}", file=sys.stderr, flush=True)
                outbox.put(("failed", msg))
