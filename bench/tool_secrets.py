"""The secrets benchmark over tool traffic (issue 91, item 1): the sentinels of
bench/tool_secret_cases.py, planted in an agent's tools' HTTP calls and their APIs' answers, through
the real ``looptap run`` (an openai SDK agent whose tools call a loopback tool server with
``requests``; the model a scripted server). Then every file looptap writes of that run — the
cassette, ``export --har``, ``--otel``, ``--html``, ``show``, ``show --json``, ``textconv``, the
kept analysis (its SQLite file, zstd blocks decompressed), the fleet index (``looptap index``, every
table read back) and ``fleet page``, a fork's branch and folder (``looptap run --from``, tools
served), ``looptap replay``'s stderr with a miss — is searched for every telling piece
(8 characters; 12 of hex, 15 of digits) of every
sentinel: **0 expected**. The agent prints every tool answer on its stdout (``agent: …`` lines):
passed to the terminal as its own under ``run`` and a fork (those lines are not looptap's, left
out of the terminal's text searched), kept by ``why`` in its branches' logs (searched, with every
other file). ``looptap verify`` must flag a cassette with one sentinel of each class
put back, and the agent run again against ``looptap replay`` must have every tool call served.

    .venv/bin/python bench/tool_secrets.py [--keep DIR]

``BENCH_PYTHONPATH`` (e.g. another checkout's ``.looptap-editable:DIR``) runs every looptap
command of the bench with that tree's code instead (its figures before a change).

Needs the recorder's environment (.venv-proxy) and the clients' (.venv-clients: openai,
requests), as tests/proxy does. tests/reliability/test_tool_secrets.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# appended, never first: imported by a test, bench/mcp.py must not shadow the mcp package
sys.path += [p for p in (str(ROOT), str(ROOT / "bench")) if p not in sys.path]

from tool_secret_cases import SENT, Case, cases  # noqa: E402

from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env  # noqa: E402
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream  # noqa: E402
from tests.support.secret_streams import telling  # noqa: E402
from tests.support.tool_http import LoopbackServer, start_replay, stop_replay  # noqa: E402

CLIENTS_PYTHON = Path(
    os.environ.get("LOOPTAP_CLIENTS_PYTHON") or ROOT / ".venv-clients" / "bin" / "python"
)
if not CLIENTS_PYTHON.exists():  # a worktree's: the main checkout's shared environment
    CLIENTS_PYTHON = Path("/work/main/.venv-clients/bin/python")
#: Tool calls per model turn: the cases in two turns of tools, then the answer (a fork from turn 1
#: has turn 0's calls served; ``why`` re-samples the two later turns). 20 a turn made eight turns
#: and six ``why`` branches (session 54: the set-up 81 s of the matrix's slowest).
BATCH = 64

AGENT = r"""
import json, os, sys
import requests
from openai import OpenAI

CASES = json.load(open(os.environ["CASES"]))
TOOLS = os.environ["TOOL_URL"]
session = requests.Session()

def call_api(case):
    c = CASES[case]
    r = session.request(c["method"], TOOLS + c["path"], headers=c["headers"],
                        data=c["body"].encode() if c["body"] else None,
                        auth=tuple(c["auth"]) if c["auth"] else None, allow_redirects=False)
    where = r.headers.get("location", "")
    return f"{r.status_code} {where} {r.text[:3000]}"

client = OpenAI()
tools = [{"type": "function", "function": {"name": "call_api", "parameters": {
    "type": "object", "properties": {"case": {"type": "integer"}}}}}]
messages = [{"role": "user", "content": "Call every API case, then say done."}]
for _ in range(40):
    out = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
    msg = out.choices[0].message
    if not msg.tool_calls:
        print("answer:", msg.content)
        break
    messages.append(msg.model_dump(exclude_none=True))
    for tc in msg.tool_calls:  # one after another: the same order on every run
        said = call_api(json.loads(tc.function.arguments)["case"])
        print("agent: the tool said", json.dumps(said), flush=True)  # (secrets on stdout)
        if os.environ.get("ONE_CALL"):  # (the replay miss: its first call is all it needs)
            sys.exit(0)
        messages.append({"role": "tool", "tool_call_id": tc.id, "content": said})
"""


class ToolServer(LoopbackServer):
    """Every case's API on 127.0.0.1: a request to a case's path answered as the case says
    (the tests' server, tests/support/tool_http.py, with this bench's answers)."""

    def __init__(self, all_cases: list[Case]) -> None:
        by_path = {c.path.split("?")[0]: c for c in all_cases}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                outer.seen.append(self.path)
                c = by_path.get(self.path.split("?")[0])
                status = c.status if c else 404
                body = (c.resp_body if c else '{"error": "no such case"}').encode()
                self.send_response(status)
                headers = {"Content-Type": "application/json", **(c.resp_headers if c else {})}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _any

        super().__init__(Handler)


def route(n: int) -> Any:
    """The scripted model: ``BATCH`` calls of ``call_api`` a turn, cases in order, then done."""

    def answer(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done >= n:
            return Reply.say("done")
        return Reply(
            calls=tuple(Call("call_api", {"case": i}) for i in range(done, min(n, done + BATCH)))
        )

    return answer


def _pieces(secret: str) -> set[str]:
    """The telling pieces of ``secret`` (:func:`tests.support.secret_streams.telling`) that are of
    its random part (a digit or a capital in them: ``_secret_`` of Stripe's ``pi_…_secret_…`` is
    in every AWS credentials file)."""
    return {p for p in telling(secret) if any(c.isdigit() or c.isupper() for c in p)}


#: What the agent prints of its tools' answers (every sentinel, on its stdout): its own output,
#: passed to the terminal, not looptap's; what looptap keeps of it (``why``'s logs) is searched.
AGENT_SAYS = "agent: "


def _looptap_lines(stdout: str) -> str:
    """``stdout`` of a command that runs the agent in the terminal, without the agent's lines."""
    return "".join(ln for ln in stdout.splitlines(True) if not ln.startswith(AGENT_SAYS))


def _piece_index(size: int) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The pieces of every sentinel (8, 12 or 15 characters), each with the sentinels it is of,
    and the sentinels shorter than 8 (their own piece); made again when :data:`SENT` grew
    (``size``: it only grows, a sentinel is never changed)."""
    if _INDEX and _INDEX[0] == size:
        return _INDEX[1], _INDEX[2]
    index: dict[str, set[str]] = {}
    short: dict[str, str] = {}
    for name, sec in SENT.items():
        for piece in _pieces(sec):
            if len(piece) >= 8:
                index.setdefault(piece, set()).add(name)
            else:
                short[name] = piece
    _INDEX[:] = [size, index, short]
    return index, short


_INDEX: list[Any] = []


def leaks(text: str) -> list[str]:
    """The sentinels of which some piece is in ``text``: the text's every run of each piece's
    length looked up among the pieces (a search per piece took 6 s of CPU over one run's
    outputs)."""
    index, short = _piece_index(len(SENT))
    found = {name for name, piece in short.items() if piece in text}
    for n in {len(p) for p in index}:
        grams = {text[i : i + n] for i in range(len(text) - n + 1)}
        found.update(*(index[g] for g in grams & index.keys()))
    return sorted(found)


def _looptap(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RECORDER, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=900
    )


def _sqlite_text(path: Path) -> str:
    """Every value of every table of a SQLite file, zstd blocks decompressed."""
    import zstandard

    out: list[str] = []
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        for t in tables:
            for row in con.execute(f'select * from "{t}"'):
                for v in row:
                    if isinstance(v, bytes):
                        try:
                            v = zstandard.ZstdDecompressor().decompress(v, max_output_size=1 << 28)
                        except zstandard.ZstdError:
                            pass
                        out.append(v.decode("utf-8", "replace"))
                    else:
                        out.append(str(v))
    finally:
        con.close()
    return "\n".join(out)


def _duckdb_text(path: Path) -> str:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [
            r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()
        ]
        return "\n".join(str(con.execute(f'select * from "{t}"').fetchall()) for t in tables)
    finally:
        con.close()


def exported(run: Path, work: Path, env: dict[str, str], *more: tuple[str, str]) -> dict[str, str]:
    """What looptap writes of ``run`` (HAR, OTel, HTML files, then what show, show --json,
    textconv and each ``(command, name)`` of ``more`` print), by name: what a leak is searched
    in (bench/shell_secrets.py's too)."""
    ex = work / "exports"
    ex.mkdir()
    har, otel, html = ex / "run.har", ex / "otel.json", ex / "run.html"
    out: dict[str, str] = {}
    for args, name in (
        (["export", "-q", "--har", str(har), "--otel", str(otel), str(run)], "export"),
        (["export", "-q", "--html", str(run), "-o", str(html)], "export --html"),
        (["show", str(run)], "show"),
        (["show", "--json", str(run)], "show --json"),
        (["textconv", str(run)], "textconv"),
        *(([cmd, str(run)], name) for cmd, name in more),
    ):
        p = _looptap(*args, env=env, cwd=work)
        out[f"{name} (stdout, stderr)"] = p.stdout + p.stderr
    return out


def _replay(
    run: Path, env: dict[str, str], cwd: Path
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    return start_replay(run, env=env, cwd=cwd)


def _stop(proc: subprocess.Popen[str]) -> str:
    return stop_replay(proc)


def run_bench(work: Path) -> dict[str, Any]:
    """Record, write every file, search them; the report (see the module's docstring)."""
    all_cases = cases()
    (work / "cases.json").write_text(json.dumps([c.as_json(i) for i, c in enumerate(all_cases)]))
    cache = work / "cache"
    base = clean_env(
        LOOPTAP_CACHE_DIR=str(cache), LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON),
        CASES=str(work / "cases.json"), OPENAI_API_KEY="sk-bench-tools",
    )  # fmt: skip
    if os.environ.get("BENCH_PYTHONPATH"):  # another tree's looptap (a base to compare with)
        base["PYTHONPATH"] = os.environ["BENCH_PYTHONPATH"]
    agent = work / "agent.py"
    agent.write_text(AGENT)
    run = work / "runs" / "run.jsonl"
    run.parent.mkdir()
    outputs: dict[str, str] = {}
    with ScriptedUpstream(route(len(all_cases))) as fake, ToolServer(all_cases) as tools:
        env = {**base, "TOOL_URL": tools.url}
        rec = _looptap("run", "-o", str(run), "--confdir", str(work / "conf"), "--upstream",
                       f"openai={fake.url}", "--tool-http-loopback", "--", str(CLIENTS_PYTHON),
                       str(agent), env=env, cwd=work)  # fmt: skip
        outputs["looptap run (stdout, stderr)"] = _looptap_lines(rec.stdout) + rec.stderr
        agent_said = rec.stdout.count(AGENT_SAYS)
        if rec.returncode != 0 or "answer: done" not in rec.stdout:
            raise RuntimeError(rec.stdout + rec.stderr[-4000:])
        seen = len(tools.seen)
        # a fork from turn 1: the tools served from the run, the model live
        branch = work / "fork" / "branch.jsonl"
        branch.parent.mkdir()
        fork = _looptap("run", "--from", f"{run}@turn=1", "-o", str(branch), "--confdir",
                        str(work / "conf2"), "--upstream", f"openai={fake.url}", "--",
                        str(CLIENTS_PYTHON), str(agent), env=env, cwd=work)  # fmt: skip
        outputs["fork (stdout, stderr)"] = _looptap_lines(fork.stdout) + fork.stderr
        # why: every intervention a fork of the run, its branches under why/
        why = _looptap("why", str(run), "--answer-matches", "done", "--samples", "1", "--jobs",
                       "1", "-o", str(work / "why"), "--confdir", str(work / "conf3"),
                       "--upstream", f"openai={fake.url}", "--", str(CLIENTS_PYTHON), str(agent),
                       env=env, cwd=work)  # fmt: skip
        outputs["why (stdout, stderr)"] = why.stdout + why.stderr
    outputs["cassette"] = run.read_text("utf-8", "replace")
    for folder in (branch.parent, work / "why"):
        for f in sorted(folder.rglob("*")) if folder.exists() else []:
            if f.is_file():
                outputs[f"{folder.name} folder: {f.relative_to(folder)}"] = f.read_text(
                    "utf-8", "replace"
                )
    outputs |= exported(run, work, base, ("verify", "verify (its report)"))
    ex = work / "exports"  # (exported's folder: the fleet's files go beside its exports)
    # the fleet (DuckDB: the fleet extra, in the tests' environment) and the kept analysis (kept
    # for a run of 1 MiB or more: this one is smaller, so the floor is lowered for the bench)
    kept = (
        "import runpy, sys; import looptap.cassettes.reading._analysis_cache as k; "
        "k.MIN_BYTES = 0; sys.argv = ['looptap', *sys.argv[1:]]; "
        "runpy.run_module('looptap.cassettes.cli', run_name='__main__')"
    )
    for args, name in (
        (["index", str(run.parent), "-o", str(ex / "fleet.duckdb")], "index"),
        (
            ["fleet", "page", "--fleet", str(ex / "fleet.duckdb"), "-o", str(ex / "fleet.html")],
            "fleet page",
        ),
        (["fleet", "findings", "--fleet", str(ex / "fleet.duckdb")], "fleet findings"),
        (["show", str(run)], "show (keeps its analysis)"),
    ):
        p = subprocess.run([sys.executable, "-c", kept, *args], capture_output=True, text=True,
                           env=base, cwd=work, timeout=900)  # fmt: skip
        outputs[f"{name} (stdout, stderr)"] = p.stdout + p.stderr
    for f in sorted(ex.rglob("*")):
        if f.is_file():
            outputs[f"file {f.relative_to(ex)}"] = (
                _duckdb_text(f) if f.suffix == ".duckdb" else f.read_text("utf-8", "replace")
            )
    for f in sorted(cache.rglob("*.sqlite")) if cache.exists() else []:
        outputs[f"kept analysis {f.name}"] = _sqlite_text(f)
    # every file looptap wrote, as verify reads them (DuckDB: the tests' environment has it)
    every = [str(p) for p in (run.parent, branch.parent, work / "why", ex, cache) if p.exists()]
    every_verified = subprocess.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "verify", *every],
        capture_output=True, text=True, env=base, cwd=work, timeout=900,
    )  # fmt: skip
    outputs["verify every file (stdout, stderr)"] = every_verified.stdout + every_verified.stderr
    # replay: the agent again, every model and tool call answered from the run
    replay, renv = _replay(run, base, work)
    try:
        again = subprocess.run(
            [str(CLIENTS_PYTHON), str(agent)], capture_output=True, text=True, timeout=900,
            env={**base, **renv, "TOOL_URL": tools.url}, cwd=work,
        )  # fmt: skip
    finally:
        err = _stop(replay)
    outputs["replay (stderr)"] = err
    served = _served(err)
    # a replay miss: the first case's call with its city changed, its credential sent again
    replay, renv = _replay(run, base, work)
    try:
        miss_agent = AGENT.replace(
            'TOOLS + c["path"]', 'TOOLS + c["path"].replace("Paris", "Lyon")'
        )
        (work / "miss_agent.py").write_text(miss_agent)
        subprocess.run(
            [str(CLIENTS_PYTHON), str(work / "miss_agent.py")], capture_output=True, text=True,
            timeout=900, env={**base, **renv, "TOOL_URL": tools.url, "ONE_CALL": "1"}, cwd=work,
        )  # fmt: skip
    finally:
        miss_err = _stop(replay)
    outputs["replay miss (stderr)"] = miss_err
    planted = _planted(run, all_cases, work, base)
    saved = work / "outputs"
    saved.mkdir(exist_ok=True)
    for n, (where, text) in enumerate(outputs.items()):
        (saved / f"{n:02d}.txt").write_text(f"{where}\n{text}")
    table = {where: leaks(text) for where, text in outputs.items()}
    return {
        "sentinels": len(SENT),
        "cases": len(all_cases),
        "tool_calls_seen": seen,
        "agent_said": agent_said,
        # the agent's lines in why's branch logs (the path the agent's stdout reaches disk by)
        "why_log_lines": sum(
            f.read_text("utf-8", "replace").count(AGENT_SAYS) for f in (work / "why").rglob("*.log")
        ),
        "classes": sorted({c.cls for c in all_cases}),
        "apis": sorted({c.api for c in all_cases}),
        "leaks": table,
        "on_disk": sorted({n for v in table.values() for n in v}),
        "verify_clean": planted.pop(RUN_CLEAN),
        "verify_every_file_clean": every_verified.returncode == 0,
        "verify_files": every_verified.stderr.count(": clean"),
        "served": served,
        "replayed_agent_ok": again.returncode == 0 and "answer: done" in again.stdout,
        "miss_said": "miss" in miss_err.lower() or "unmatched" in miss_err.lower(),
        "fork_ok": fork.returncode == 0,
        "verify_planted": planted,
    }


def _served(err: str) -> tuple[int, int] | None:
    m = re.search(r"served (\d+) of (\d+) tool HTTP calls", err)
    return (int(m.group(1)), int(m.group(2))) if m else None


RUN_CLEAN = "(the run itself is clean)"


def _planted(run: Path, all_cases: list[Case], work: Path, env: dict[str, str]) -> dict[str, bool]:
    """For each class: the cassette with the first case of that class's sentinels put back where
    the redaction masked them (the case's tool exchange written again from the case, unredacted);
    whether ``looptap verify`` flags it. One ``verify`` reads them all, the run too: its verdict
    per file (``FILE: N secret(s) found`` or ``FILE: clean``), by class, and under
    :data:`RUN_CLEAN` whether the run is clean."""
    import base64

    lines = run.read_bytes().splitlines()
    tool_lines = [i for i, ln in enumerate(lines) if b'"tool":true' in ln or b'"tool": true' in ln]
    files: dict[str, str] = {}
    for i, c in enumerate(all_cases):
        if c.cls in files.values() or i >= len(tool_lines):
            continue
        rec = json.loads(lines[tool_lines[i]])
        rec["url"] = "http://127.0.0.1:1" + c.path
        hdrs = [[k, v] for k, v in c.headers.items()]
        if c.auth:
            hdrs.append(
                ["authorization", "Basic " + base64.b64encode(":".join(c.auth).encode()).decode()]
            )
        rec["request"]["headers"] = hdrs
        rec["request"]["body"] = {"text": c.body} if c.body else None
        resp = rec.get("response") or {}
        resp["headers"] = [[k, v] for k, v in c.resp_headers.items()]
        resp["body"] = {"text": c.resp_body}
        rec["response"] = resp
        planted = work / f"planted-{len(files) + 1}.jsonl"
        planted.write_bytes(lines[0] + b"\n" + json.dumps(rec).encode() + b"\n")
        files[planted.name] = c.cls
    ran = str(run.relative_to(work))
    flagged = verdicts([ran, *files], env, work)
    return {cls: flagged[name] for name, cls in files.items()} | {RUN_CLEAN: not flagged[ran]}


def verdicts(files: list[str], env: dict[str, str], cwd: Path) -> dict[str, bool]:
    """Whether ``looptap verify`` flags each of ``files`` (names relative to ``cwd``, without
    spaces), all read by one ``verify``: its verdict per file (``FILE: N secret(s) found`` or
    ``FILE: clean``)."""
    p = _looptap("verify", *files, env=env, cwd=cwd)
    said = dict(re.findall(r"^looptap: (\S+): (clean|\d+ secrets? found)$", p.stderr, re.M))
    if p.returncode not in (0, 1) or set(said) != set(files):
        raise RuntimeError(f"verify said (exit status {p.returncode}):\n{p.stderr[-4000:]}")
    return {name: said[name] != "clean" for name in files}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = ap.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run_bench(args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            report = run_bench(Path(tmp))
    print(f"{report['sentinels']} sentinels in {report['cases']} tool calls "
          f"({report['tool_calls_seen']} reached the tool server), classes: "
          f"{', '.join(report['classes'])}")  # fmt: skip
    print(f"APIs: {'; '.join(report['apis'])}")
    for where, found in report["leaks"].items():
        print(f"  {where:<40} {len(found)}  {', '.join(found)}")
    print(
        f"on disk: {len(report['on_disk'])}; verify calls the run clean: {report['verify_clean']}"
    )
    print(f"verify flags a planted cassette of each class: {report['verify_planted']}")
    print(f"the agent printed {report['agent_said']} tool answers on its stdout; why's logs kept "
          f"{report['why_log_lines']} of its lines (searched above)")  # fmt: skip
    print(f"replay: served {report['served']} tool calls (served, total); agent replayed: "
          f"{report['replayed_agent_ok']}; fork ok: {report['fork_ok']}")  # fmt: skip
    return 0 if not report["on_disk"] else 1


if __name__ == "__main__":
    sys.exit(main())
