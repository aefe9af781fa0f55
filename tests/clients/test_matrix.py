"""The client matrix: every client people use, driven through the real ``looptap run`` against a
scripted upstream that answers like the API (docs/clients.md is generated from these runs by
``bench/clients.py``).

For each client of :mod:`clients` two runs:

* **clean**: the client's own tool loop on the task of :mod:`route` (parallel calls, 3–4 turns).
  looptap must find **no warning or error**, thread the right conversations with the right turns,
  and pair every call with its result;
* **bug**: the same run with one client bug injected into the client's own requests
  (tests/clients/inject: a wrapper around httpx or fetch inside the client process, so the bug is
  the client's as far as anyone on the wire can tell). The upstream answers as the API does (a
  400 with the API's text where the API refuses), and looptap must name the bug as the root cause:
  layer C, at the round trip the client broke.

Environments: ``test`` clients run in the suite's own environment; ``frameworks`` in
``.venv-clients`` (``LOOPTAP_CLIENTS_PYTHON``), made by ``.ci/run`` from
tests/clients/requirements.txt; ``agents_py`` in ``.venv-agents`` (``LOOPTAP_AGENTS_PYTHON``), from
tests/clients/requirements-agents.txt; ``crewai`` in ``.venv-crewai`` (``LOOPTAP_CREWAI_PYTHON``),
from tests/clients/requirements-crewai.txt; ``node`` with the packages of ``.npm-clients``
(``LOOPTAP_NPM_CLIENTS``), installed by ``.ci/run`` from tests/clients/package.json. A missing
environment skips its rows, saying how to make it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.analysis import Severity, analyse
from looptap.cassettes.parsing import parse_all
from looptap.cassettes.storage import read_records
from tests.clients.clients import (
    BUG_CAUSES,
    CLIENTS,
    MUTATION_CLIENTS,
    NODE_PRELUDE,
    PY_PRELUDE,
    Client,
    kind_of,
)
from tests.clients.inject.mutate import VARIANTS as MUTATION_VARIANTS
from tests.clients.route import route
from tests.support import progress
from tests.support.recorder import RECORDER, SCRUB, needs_recorder
from tests.support.scripted import ScriptedUpstream

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
INJECT = HERE / "inject"
CLIENTS_PYTHON = Path(
    os.environ.get("LOOPTAP_CLIENTS_PYTHON") or REPO / ".venv-clients" / "bin" / "python"
)
AGENTS_PYTHON = Path(
    os.environ.get("LOOPTAP_AGENTS_PYTHON") or REPO / ".venv-agents" / "bin" / "python"
)
CREWAI_PYTHON = Path(
    os.environ.get("LOOPTAP_CREWAI_PYTHON") or REPO / ".venv-crewai" / "bin" / "python"
)
#: The Python environments other than the suite's: runtime -> (interpreter, its requirements file).
PYTHONS = {
    "frameworks": (CLIENTS_PYTHON, "requirements.txt"),
    "agents_py": (AGENTS_PYTHON, "requirements-agents.txt"),
    "crewai": (CREWAI_PYTHON, "requirements-crewai.txt"),
}
NPM_CLIENTS = Path(os.environ.get("LOOPTAP_NPM_CLIENTS") or REPO / ".npm-clients")
NODE = shutil.which("node")
# a directory: each run's outcome as JSON, for bench/clients.py
REPORT = os.environ.get("LOOPTAP_CLIENTS_REPORT")

pytestmark = [needs_recorder]

_SCRUB = (
    *SCRUB,
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_OPTIONS",
    "PYTHONPATH",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
    "OPENAI_AGENTS_DISABLE_TRACING",
)


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


def _interpreter(c: Client) -> list[str]:
    if c.runtime == "test":
        return [sys.executable]
    if c.runtime in PYTHONS:
        python, requirements = PYTHONS[c.runtime]
        if not python.exists():
            pytest.skip(
                f"no {c.runtime} environment at {python} (bash .ci/run makes it from "
                f"tests/clients/{requirements})"
            )
        return [str(python)]
    if NODE is None:
        pytest.skip("node is not on PATH")
    if not (NPM_CLIENTS / "node_modules" / c.package / "package.json").exists():
        pytest.skip(
            f"{c.package} is not installed in {NPM_CLIENTS} (bash .ci/run's step "
            "'.npm-clients' installs the Node clients there)"
        )
    return [NODE]


def _run(
    c: Client, bug: str | None, tmp_path: Path, confdir: Path, upstream: ScriptedUpstream
) -> tuple[subprocess.CompletedProcess[str], Path]:
    interp = _interpreter(c)
    script = tmp_path / ("client.cjs" if c.runtime == "node" else "client.py")
    script.write_text((NODE_PRELUDE if c.runtime == "node" else PY_PRELUDE) + c.script)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    secret = f"sk-looptap-matrix-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SCRUB}
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        PYTHONUNBUFFERED="1",
        OPENAI_API_KEY=secret,
        ANTHROPIC_API_KEY=secret,
        GEMINI_API_KEY=secret,
        OPENAI_AGENTS_DISABLE_TRACING="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        LANGSMITH_TRACING="false",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
        AGNO_TELEMETRY="false",
        HAYSTACK_TELEMETRY_ENABLED="False",
        OTEL_SDK_DISABLED="true",
        CREWAI_DISABLE_TELEMETRY="true",
        CREWAI_TRACING_ENABLED="false",
    )
    child: list[str] = [
        "env",
        f"MATRIX_STREAM={int(c.stream)}",
        f"MATRIX_KIND={kind_of(c)}",
        f"NPM_CLIENTS={NPM_CLIENTS}",
    ]
    if bug:
        child.append(f"LOOPTAP_MATRIX_BUG={bug}")
        child.append(
            f"NODE_OPTIONS=--import={(INJECT / 'inject.mjs').as_uri()}"
            if c.runtime == "node"
            else f"PYTHONPATH={INJECT}"
        )
    out = tmp_path / "run.jsonl"
    argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(confdir)]
    for name in ("openai", "anthropic", "gemini"):
        argv += ["--upstream", f"{name}={upstream.url}"]
    argv += ["--", *child, *interp, str(script)]
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    # A client that makes no progress is stopped by tests.support.progress, never by a clock.
    proc = progress.run(
        argv, env=env, capture_output=True, text=True, cwd=work, stdin=subprocess.DEVNULL
    )
    assert secret not in out.read_text(errors="replace") if out.exists() else True
    return proc, out


def _explain(proc: subprocess.CompletedProcess[str], up: ScriptedUpstream) -> str:
    log = "\n".join(entry.line() for entry in up.log)
    return (
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- "
        f"stderr\n{proc.stderr[-4000:]}\n--- upstream\n{log}"
    )


def _final(proc: subprocess.CompletedProcess[str]) -> str | None:
    for line in proc.stdout.splitlines():
        if line.startswith('{"final"'):
            value = json.loads(line)["final"]
            return str(value)
    return None


def _findings(path: Path) -> tuple[Any, Any]:
    cas = read_records(path)
    assert not cas.problems, [str(p) for p in cas.problems]
    return cas, analyse(cas.exchanges, parse_all(cas.exchanges))


def _serious(an: Any) -> list[Any]:
    return [f for f in an.findings if f.severity in (Severity.WARNING, Severity.ERROR)]


def _keep(c: Client, variant: str, out: Path) -> None:
    """The run's cassette beside its report (bench/precision.py --matrix judges it again)."""
    if REPORT and out.exists():
        Path(REPORT).mkdir(parents=True, exist_ok=True)
        shutil.copy(out, Path(REPORT) / f"{c.id.replace(' ', '_')}.{variant}.jsonl")


def _report(c: Client, variant: str, stem: str = "", **fields: Any) -> None:
    """The run's outcome beside its cassette (``stem``: the file's variant when it is not
    ``variant``, e.g. one of several bug runs of a client)."""
    if not REPORT:
        return
    d = Path(REPORT)
    d.mkdir(parents=True, exist_ok=True)
    row = {
        "client": c.id,
        "package": c.package,
        "runtime": c.runtime,
        "api": c.api,
        "stream": c.stream,
        "note": c.note,
        "variant": variant,
        **fields,
    }
    (d / f"{c.id.replace(' ', '_')}.{stem or variant}.json").write_text(
        json.dumps(row, indent=1, default=str)
    )


@pytest.mark.parametrize("c", CLIENTS, ids=[c.id for c in CLIENTS])
def test_clean_run_has_no_false_finding(c: Client, tmp_path: Path, confdir: Path) -> None:
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = _run(c, None, tmp_path, confdir, up)
    why = _explain(proc, up)
    assert _final(proc) and "FORECAST" in (_final(proc) or ""), why
    cas, an = _findings(out)
    llm = [conv for conv in an.conversations if conv.turns]
    turns = tuple(sorted(len(conv.turns) for conv in llm))
    kinds = tuple((conv.kind, conv.parent_seq) for conv in llm)
    serious = _serious(an)
    _keep(c, "clean", out)
    kinds_ok = not c.kinds or kinds == c.kinds
    _report(
        c,
        "clean",
        conversations=len(llm),
        turns=turns,
        expected_turns=c.turns,
        kinds=kinds,
        serious=[f"{f.code} (turn {f.turn}): {f.message}" for f in serious],
        ok=not serious and turns == c.turns and kinds_ok,
    )
    assert not serious, [
        f"{f.code} {f.severity} conv={f.conversation} turn={f.turn}: {f.message}" for f in serious
    ]
    assert turns == c.turns, (
        turns,
        [(conv.id, conv.turns, conv.parent_seq) for conv in an.conversations],
        why,
    )
    assert all(e.status == 200 for e in cas.exchanges), why
    assert kinds_ok, (kinds, c.kinds)


#: The bug runs live by default: the first client of each bug and injector (Python's httpx
#: wrapper, Node's fetch wrapper). The others run live nightly; the recording of every client's
#: bug run is judged as below on every run by the core
#: (tests/cassettes/analysis/test_bugs_recorded.py; session 55, h105m).
BUG_LIVE_BY_DEFAULT = {
    next(c.id for c in CLIENTS if c.bug == bug and (c.runtime == "node") == node)
    for bug in BUG_CAUSES
    for node in (False, True)
}


@pytest.mark.parametrize(
    "c",
    [
        c
        if c.id in BUG_LIVE_BY_DEFAULT
        else pytest.param(c, marks=pytest.mark.slow(
            reason="the same injector on another client (2-4 s of CPU); its recording is judged "
            "by tests/cassettes/analysis/test_bugs_recorded.py"
        ))
        for c in CLIENTS
    ],
    ids=[c.id for c in CLIENTS],
)  # fmt: skip
def test_injected_bug_is_named(
    c: Client, tmp_path: Path, confdir: Path, request: pytest.FixtureRequest
) -> None:
    if c.pending:
        request.applymarker(pytest.mark.xfail(reason=c.pending, strict=True))
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = _run(c, c.bug, tmp_path, confdir, up)
    why = _explain(proc, up)
    cas, an = _findings(out)
    marked = [
        ex.seq
        for ex in cas.exchanges
        if any(k.lower() == "x-matrix-injected" for k, _ in ex.request_headers)
    ]
    assert len(marked) == 1, (marked, why)
    seq = marked[0]
    turn = an.turns.get(seq)
    roots = [f for f in _serious(an) if not f.details.get("caused_by")]
    first = min((f.seq for f in roots if f.seq is not None), default=None)
    named = [f for f in roots if f.seq == seq and f.layer == "C" and f.code in BUG_CAUSES[c.bug]]
    _keep(c, "bug", out)
    _report(
        c,
        "bug",
        bug=c.bug,
        seq=seq,
        turn=None if turn is None else turn.index,
        roots=[f"{f.code} (seq {f.seq}, turn {f.turn})" for f in roots],
        named=[f.code for f in named],
        ok=bool(named) and first == seq,
    )
    assert turn is not None, (seq, why)
    assert named, (
        [
            f"{f.code} {f.layer} seq={f.seq} turn={f.turn} caused_by={f.details.get('caused_by')}"
            for f in an.findings
        ],
        why,
    )
    assert first == seq, (
        "an earlier root cause than the injected bug",
        [f"{f.code} seq={f.seq}" for f in roots],
    )


#: The history rewrites a real client bug makes (tests/clients/inject/mutate.py and its twin
#: inject.mjs), each run on an SDK and a framework of each API family: the rewrite is
#: ``C.history_mutated`` at the round trip it was made, whatever its length, and nothing earlier is
#: a root cause.
MUTATIONS = [(c, kind) for c in CLIENTS if c.id in MUTATION_CLIENTS for kind in MUTATION_VARIANTS]
#: Run live by default: each client once, the i-th with the i-th variant (cycling), so every
#: variant and every client (both injectors, all four API families) runs live in every suite run.
#: The other 40 pairs run live with LOOPTAP_SLOW=1; the recordings of all 48 are core fixtures
#: (tests/cassettes/analysis/test_mutations_recorded.py), judged on every run.
LIVE_BY_DEFAULT = {
    (cid, MUTATION_VARIANTS[i % len(MUTATION_VARIANTS)])
    for i, cid in enumerate(c.id for c in CLIENTS if c.id in MUTATION_CLIENTS)
}
_SLOW_ONLY = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("LOOPTAP_SLOW"),
        reason="LOOPTAP_SLOW=1 (each client runs one variant live by default; the recordings of "
        "all 48 are judged in tests/cassettes/analysis/test_mutations_recorded.py)",
    ),
]


@pytest.mark.parametrize(
    ("c", "kind"),
    [
        pytest.param(c, kind, marks=() if (c.id, kind) in LIVE_BY_DEFAULT else _SLOW_ONLY)
        for c, kind in MUTATIONS
    ],
    ids=[f"{c.id}-{kind}" for c, kind in MUTATIONS],
)
def test_history_mutation_is_named(c: Client, kind: str, tmp_path: Path, confdir: Path) -> None:
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = _run(c, kind, tmp_path, confdir, up)
    why = _explain(proc, up)
    assert _final(proc) and "FORECAST" in (_final(proc) or ""), why
    cas, an = _findings(out)
    assert all(e.status == 200 for e in cas.exchanges), why
    marked = [
        ex.seq
        for ex in cas.exchanges
        if any(k.lower() == "x-matrix-injected" for k, _ in ex.request_headers)
    ]
    assert len(marked) == 1, (marked, why)
    seq = marked[0]
    said = [
        f"{f.code} {f.severity} seq={f.seq} turn={f.turn} caused_by={f.details.get('caused_by')}"
        for f in an.findings
    ]
    roots = [f for f in _serious(an) if not f.details.get("caused_by")]
    # the dropped middle drops every message the previous request sent after its opening: the
    # window that keeps the head and the latest round (issue 103), a trim on the wire; the next
    # request puts the dropped ones back, and is the warning (``undoes_trim_seq``)
    window = kind == "mutate_drop_middle"
    named = [
        f
        for f in roots
        if f.code == "C.history_mutated"
        and (f.details.get("undoes_trim_seq") == seq if window else f.seq == seq)
    ]
    trims = [f.seq for f in an.findings if f.code == "C.history_trimmed"]
    _keep(c, f"bug-{kind}", out)
    _report(
        c,
        "bug",
        stem=f"bug-{kind}",
        bug="mutate_history",
        mutation=kind,
        seq=seq,
        roots=[f"{f.code} (seq {f.seq}, turn {f.turn})" for f in roots],
        named=[f.code for f in named],
        ok=bool(named)
        and all(f.code == "C.history_mutated" and (f.seq or 0) >= seq for f in roots)
        and trims == ([seq] if window else []),
    )
    assert named, (said, why)
    assert not [f for f in roots if f.seq is not None and f.seq < seq], said
    # nothing else is a root cause: the next request re-sends the original, which changes the
    # history again (C.history_mutated there is true, bench/precision.py's MATRIX_JUDGED)
    assert not [f for f in roots if f.code != "C.history_mutated"], said
    # a rewrite is not management: nothing says the client trimmed or summarised (but the window)
    assert trims == ([seq] if window else []), said
