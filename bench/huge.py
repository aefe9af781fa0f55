"""Peak memory and time of the commands that go through a whole run, on huge synthetic runs.

    python bench/huge.py [--sizes 10000 100000 1000000] [--shapes one_turn long] [--only show,verify]
                         [--dir /tmp/looptap-huge] [--tree PATH] [--as-mb 2048] [--write]

``--tree`` runs the commands of another checkout (e.g. a worktree of main, for a before/after
table); ``--as-mb`` runs each command under an address-space limit (``prlimit --as``).

Runs (tests/support/huge.py): ``one_turn`` is N one-turn Chat Completions conversations (a batch job
through the proxy); ``long`` is N round trips in conversations of 1,000 turns, requests stored as
history deltas. Each command runs in its own process; its peak RSS is the kernel's high-water mark
(``VmHWM`` in ``/proc/<pid>/status``, sampled while it runs, and ``ru_maxrss`` from ``wait4`` at
the end: the larger). ``mcp list_runs`` starts ``looptap mcp`` over a directory holding the run and
asks it over stdio; ``replay`` starts the server, sends one request and stops it. ``--write``
writes the table into docs/huge-runs.md. Times come from a shared 2-core machine: read them as
rough; the memory figures are what the table is for.

Sizes and commands may be measured by separate processes at once (the 1M rows take hours of CPU
each): run each without ``--write``, its output to a file, and write their rows into the doc once
with ``--merge FILE...`` (the doc's table is then those rows only). ``SIGUSR1`` to a bench process stops the command it is measuring: the
row says ``stopped``, with the peak RSS sampled so far and the CPU seconds it had used (a
partial figure, never a finished one).
"""  # noqa: E501

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.huge import SHAPES, write_huge  # noqa: E402

LOOPTAP = [sys.executable, "-m", "looptap.cassettes.cli"]
TREE = ROOT  # whose commands are measured (--tree)
COMMANDS = (
    "show",
    "show --json",
    "textconv",
    "export --har",
    "export --otel",
    "diff",
    "verify",
    "mcp list_runs",
    "replay",
)
DOC = ROOT / "docs" / "huge-runs.md"
TURNS = 1000  # turns per conversation in the "long" shape


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


#: Set by SIGUSR1: stop the command being measured and report how far it got.
_STOP = threading.Event()
_CHILD: list[subprocess.Popen[bytes]] = []


def _on_usr1(signum: int, frame: object) -> None:
    _STOP.set()
    for p in _CHILD:
        if p.returncode is None:
            p.kill()


class _Sampler(threading.Thread):
    """Reads the child's VmHWM every 50 ms until told to stop (the last reading before exit)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.peak_kb = max(self.peak_kb, _hwm_kb(self.pid))


_CPU = [0.0]  # CPU seconds the last command measured used (from wait4)


def _wait(p: subprocess.Popen[bytes], sampler: _Sampler, timeout: float) -> tuple[int, float, bool]:
    """(exit code, peak RSS MB, killed for taking longer than ``timeout``)."""
    killed = False
    timer = threading.Timer(timeout, lambda: p.kill())
    timer.start()
    _CHILD.append(p)
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        killed = not timer.is_alive()
        timer.cancel()
        sampler.done.set()
        _CHILD.remove(p)
    p.returncode = os.waitstatus_to_exitcode(status)
    _CPU[0] = usage.ru_utime + usage.ru_stime
    return p.returncode, max(sampler.peak_kb, usage.ru_maxrss) / 1024, killed


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(TREE), "NO_COLOR": "1", "COLUMNS": "160"}


def _err_text(err: IO[bytes]) -> str:
    err.seek(0)
    return err.read(64 * 1024).decode("utf-8", "replace")


def _plain(argv: list[str], timeout: float) -> tuple[int, float, bool, str]:
    with open(os.devnull, "wb") as null, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=null, stderr=err, env=_env())
        sampler = _Sampler(p.pid)
        sampler.start()
        code, rss, killed = _wait(p, sampler, timeout)
        return code, rss, killed, _err_text(err)


def _mcp(root: Path, timeout: float) -> tuple[int, float, bool, str]:
    """``looptap mcp --root ROOT`` asked ``list_runs`` over stdio (newline-delimited JSON-RPC)."""
    import orjson

    errf = tempfile.TemporaryFile()
    p = subprocess.Popen(
        [*LOOPTAP, "mcp", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errf,
        env=_env(),
    )
    sampler = _Sampler(p.pid)
    sampler.start()
    _CHILD.append(p)
    assert p.stdin is not None and p.stdout is not None
    answer = b""

    def talk() -> None:
        nonlocal answer
        assert p.stdin is not None and p.stdout is not None
        msgs = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "list_runs", "arguments": {}},
            },
        ]
        for m in msgs:
            p.stdin.write(orjson.dumps(m) + b"\n")
            p.stdin.flush()
        for line in p.stdout:
            if b'"id":2' in line.replace(b" ", b""):
                answer = line
                break
        p.stdin.close()

    t = threading.Thread(target=talk, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        p.kill()
    _CHILD.remove(p)
    code, rss, killed = _wait(p, sampler, 30)
    err = _err_text(errf)
    ok = b"round_trips" in answer and b"isError\":true" not in answer.replace(b" ", b"")
    return (
        (code if ok else 1),
        rss,
        killed or t.is_alive(),
        err if ok else (answer.decode("utf-8", "replace")[:300] or err),
    )


def _replay(file: Path, timeout: float) -> tuple[int, float, bool, str]:
    """``looptap replay FILE``: start it, send the first recorded request, stop it with SIGINT."""
    errf = tempfile.TemporaryFile()
    p = subprocess.Popen(
        [*LOOPTAP, "replay", str(file)], stdout=subprocess.PIPE, stderr=errf, env=_env()
    )
    sampler = _Sampler(p.pid)
    sampler.start()
    _CHILD.append(p)
    result: list[str] = []

    def talk() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith(b"export OPENAI_BASE_URL="):
                url = line.split(b"=", 1)[1].strip().decode()
                body = (
                    b'{"model":"gpt-4o-mini","messages":[{"role":"user",'
                    b'"content":"Question 0 of the sweep?"}]}'
                )
                req = urllib.request.Request(
                    url.rstrip("/") + "/chat/completions",
                    data=body,
                    headers={"content-type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        result.append(f"{r.status}")
                except Exception as exc:
                    result.append(f"request failed: {type(exc).__name__}: {exc}")
                p.send_signal(signal.SIGINT)
                break
        for _ in p.stdout:
            pass

    t = threading.Thread(target=talk, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        p.kill()
    _CHILD.remove(p)
    code, rss, killed = _wait(p, sampler, 60)
    err = _err_text(errf)
    ok = result[:1] == ["200"]
    return (
        (0 if ok else (code or 1)),
        rss,
        killed or t.is_alive(),
        "" if ok else (result[0] if result else err),
    )


def measure(
    command: str, file: Path, root: Path, timeout: float
) -> tuple[int, float, float, bool, str]:
    """(exit, peak RSS MB, seconds, killed, first line of stderr) of one command on one file."""
    t0 = time.monotonic()
    if command == "mcp list_runs":
        code, rss, killed, err = _mcp(root, timeout)
    elif command == "replay":
        code, rss, killed, err = _replay(file, timeout)
    else:
        out = file.with_name(f"{file.stem}.export.out")
        argv = {
            "show": ["show", str(file)],
            "show --json": ["show", "--json", str(file)],
            "textconv": ["textconv", str(file)],
            "export --har": ["export", "-q", "--har", str(out), str(file)],
            "export --otel": ["export", "-q", "--otel", str(out), str(file)],
            "diff": ["diff", str(file), str(file)],
            "verify": ["verify", str(file)],
        }[command]
        # (exports refuse a device such as /dev/null, and an existing file)
        out.unlink(missing_ok=True)
        code, rss, killed, err = _plain([*LOOPTAP, *argv], timeout)
        out.unlink(missing_ok=True)
    secs = time.monotonic() - t0
    line = next(
        (x.strip() for x in err.splitlines() if x.strip() and not x.startswith("looptap: warning")),
        "",
    )
    return code, rss, secs, killed, line


def _file(work: Path, shape: str, n: int) -> tuple[Path, Path]:
    """The run (made once, kept in ``work``) and a directory holding only it (for ``looptap
    mcp``)."""
    path = work / f"{shape}-{n}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".part")
        write_huge(tmp, n, shape, TURNS)
        tmp.rename(path)
    root = work / f"root-{shape}-{n}"
    root.mkdir(exist_ok=True)
    link = root / path.name
    if not link.exists():
        os.link(path, link)
    return path, root


def _key(row: str) -> tuple[int, int, int] | None:
    """(shape, size, command) of a table row, to merge rows measured in separate runs."""
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if len(cells) < 4 or cells[0] not in ("one-turn", "long"):
        return None
    try:
        n = int(cells[1].replace(",", ""))
        command = COMMANDS.index(cells[3].strip("`"))
    except ValueError:
        return None
    return (0 if cells[0] == "one-turn" else 1, n, command)


_HEAD = (
    "| run | round trips | MB | command | exit | peak RSS MB | seconds | said |",
    "|---|---:|---:|---|---:|---:|---:|---|",
)


def _write_doc(rows: list[str], args: argparse.Namespace, fresh: bool = False) -> None:
    """Write the table into the doc, keeping the rows of earlier runs this one did not measure
    (the 1M rows take hours: each size can be measured in a run of its own); ``fresh``: only
    ``rows`` (``--merge``: the rows of one tree, measured by concurrent runs)."""
    merged: dict[tuple[int, int, int], str] = {}
    if DOC.exists() and not fresh:
        for line in DOC.read_text().splitlines():
            k = _key(line)
            if k is not None:
                merged[k] = line
    for line in rows:
        k = _key(line)
        if k is not None:
            merged[k] = line
    head = (
        "# Huge runs: peak memory of the commands that read a whole run\n\n"
        "Written by `python bench/huge.py --write` (rows of several runs merged: each size may be "
        f"measured on its own, `--sizes N`); last on {datetime.date.today()} "
        f"({platform.machine()}, {os.cpu_count()} cores, shared by other jobs: times are rough, "
        "3-5x what an idle machine gives).\n\nRuns from `tests/support/huge.py`: *one-turn* is N "
        "one-turn Chat Completions conversations; *long* is N round trips in conversations of "
        f"{TURNS:,} turns (history deltas). Records carry no stored parse, so every reader parses "
        "every response. Peak RSS is the process's VmHWM / ru_maxrss; `mcp list_runs` is the MCP "
        "server answering one `list_runs`, `replay` the server started, asked once and stopped. "
        "How the commands bound their memory is in [reading.md](reading.md#huge-runs).\n\n"
    )
    body = [*rows[:2], *(merged[k] for k in sorted(merged))]
    tail = ""
    if DOC.exists():
        text = DOC.read_text()
        at = text.find("\n## ")
        tail = text[at:] if at >= 0 else ""
    DOC.write_text(head + "\n".join(body) + "\n" + tail)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    ap.add_argument("--only", help="comma-separated commands (default: all)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/looptap-huge"))
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument(
        "--write", action="store_true", help=f"write the table to {DOC.relative_to(ROOT)}"
    )
    ap.add_argument("--tree", type=Path, help="measure the commands of this checkout instead")
    ap.add_argument(
        "--as-mb", type=int, help="address-space limit per command, in MB (prlimit --as)"
    )
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="write the rows printed by other runs (their output "
        "files) into the doc as its table, and stop",
    )
    args = ap.parse_args()
    if args.merge:
        rows = [
            line
            for f in args.merge
            for line in f.read_text().splitlines()
            if _key(line) is not None
        ]
        _write_doc([*_HEAD, *rows], args, fresh=True)
        print(f"merged {len(rows)} rows into {DOC.relative_to(ROOT)}")
        return 0
    signal.signal(signal.SIGUSR1, _on_usr1)
    global TREE, LOOPTAP
    if args.tree:
        TREE = args.tree.resolve()
    if args.as_mb:
        LOOPTAP = ["prlimit", f"--as={args.as_mb * 1024 * 1024}", *LOOPTAP]
    commands = [c.strip() for c in args.only.split(",")] if args.only else list(COMMANDS)
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        ap.error(f"unknown command(s) {unknown}; known: {', '.join(COMMANDS)}")
    args.dir.mkdir(parents=True, exist_ok=True)
    rows = list(_HEAD)
    print("\n".join(rows), flush=True)
    for shape in args.shapes:
        for n in args.sizes:
            file, root = _file(args.dir, shape, n)
            mb = file.stat().st_size / 1e6
            for command in commands:
                code, rss, secs, killed, said = measure(command, file, root, args.timeout)
                said = re.sub(r"\s+", " ", said)[:80].replace("|", "\\|")
                label = "one-turn" if shape == "one_turn" else "long"
                exit_: object = "killed" if killed else code
                if _STOP.is_set():  # a partial figure: the peak so far, and how much CPU it had had
                    exit_, said = (
                        "stopped",
                        f"stopped after {_CPU[0]:,.0f} s of CPU: peak RSS so far",
                    )
                rows.append(
                    f"| {label} | {n:,} | {mb:.0f} | `{command}` | {exit_} | {rss:.0f} | "
                    f"{secs:.1f} | {said} |"
                )
                print(rows[-1], flush=True)
                if args.write:  # after each row: a long run stopped half-way keeps what it measured
                    _write_doc(rows, args)
                if _STOP.is_set():
                    return 0
    if args.write:
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
