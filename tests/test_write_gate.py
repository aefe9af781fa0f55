"""Issue 101, item 1: one gate for every byte looptap writes (docs/redaction.md, "One gate").

The product's source is walked for every place that opens a file to write (``open``/``os.fdopen``
in a writing mode, ``os.open`` with a writing flag, ``write_text``/``write_bytes``, a logging
file handler, a temporary file, SQL that stores rows, a child's output sent to a file). Each must
be one of the gate's writers (they take only ``Redacted`` bytes, refused otherwise at run time),
or be listed below with why what it writes is no recording of its own. A new writer fails this
test until it is one or the other; a listed place that is gone fails it too, so the list stays
the code's. And ``Redacted(…)`` is made only in ``cassettes/recording/`` (the redactor)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.source import collector_paused

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cassettes", "proxy", "inspector")

#: The gate: writers whose data is ``Redacted`` (checked by ``sealed`` before a byte is written).
GATE = {
    ("cassettes/storage/_gate.py", "write_sealed"): "the gate: a new file of Redacted bytes",
    ("cassettes/storage/_paths.py", "open_append"): (
        "opens the cassette for CassetteFile, whose append takes only Redacted, and the child's "
        "log, which copy_sealed writes"
    ),
    ("proxy/session.py", "run_child"): (
        "the child's output, when kept (--inspect): the pipe _sealed_log copies with copy_sealed"
    ),
    ("cassettes/why/_branches.py", "Branches._started"): (
        "a branch's or the baseline's log: written only by copy_sealed (the agent's output, "
        "redacted a line at a time)"
    ),
    ("cassettes/storage/_paths.py", "_staged"): (
        "the file of staged, whose Staged.write takes only Redacted (exports, pages, rewritten "
        "branches, why's state, comparisons: sealed again at the writer, recording.seal), and of "
        "write_plain, whose callers are PLAIN"
    ),
    ("cassettes/fleet/_index.py", "_load"): (
        "the fleet index's rows: each line sealed_json made (every string scrubbed), sealed()"
    ),
    ("cassettes/reading/_analysis_cache.py", "keep"): (
        "the kept analysis: kept only when as_sealed finds nothing the redactor would mask"
    ),
    ("cassettes/reading/_database.py", "keep_views"): (
        "the kept analysis's printed views: kept only when as_sealed finds nothing to mask"
    ),
}

#: The callers of the raw writers (``write_plain``, ``_staged``): what they write holds nothing
#: looptap saw on the wire or in a run.
PLAIN = {
    ("cassettes/storage/_paths.py", "staged"): "the gate itself (Staged.write)",
    ("cassettes/storage/_paths.py", "write_plain"): "the raw writer itself",
    ("proxy/launcher.py", "_write_conf"): "a CA bundle (certificates)",
    ("proxy/trust.py", "upstream_bundle"): "a CA bundle of the system's certificates",
    ("cassettes/interop/_command.py", "_add_attribute"): (
        "the user's .gitattributes with looptap's line added"
    ),
}

#: Places that write no recording of their own, and why (what they write was sealed when the
#: cassette was written, or never came from the wire).
NOT_RECORDINGS = {
    ("cassettes/storage/_store.py", "private_open"): (
        "opened for the child's log (copy_sealed writes it), a fork's plan (the user's --edit "
        "texts, for the fork's own replay) and replay's tolerated file (the matcher's view)"
    ),
    ("cassettes/why/_check.py", "run_check"): (
        "the user's check writes to a descriptor its caller names: nowhere, or the fork's "
        "stderr (2), which why's branch log copies through copy_sealed"
    ),
    ("cassettes/analysis/spill.py", "Spill.db"): (
        "the analysis's temporary store (SQLite's temporary database, gone when closed)"
    ),
    ("cassettes/analysis/spill.py", "Spill.write"): "the analysis's temporary store (as above)",
    ("cassettes/fleet/_index.py", "update"): "the fleet index's rules digest (no wire data)",
    ("cassettes/fleet/_index.py", "_restamp"): "the fleet index's stamp (no wire data)",
    ("cassettes/fleet/_index.py", "export_parquet"): "the fleet index's rows (_load sealed them)",
    ("cassettes/fleet/_index.py", "parquet_views"): "views over the fleet's Parquet (no data)",
    ("cassettes/reading/_database.py", "_connect"): "the kept analysis's file, created empty",
    ("cassettes/replay/serving/_tls.py", "ToolTLS._write"): "a CA certificate and key looptap made",
    ("cassettes/views/schema.py", "write_docs"): "the docs' schema page (a maintainer's command)",
    ("cassettes/cli/__init__.py", "_dispatch"): "/dev/null as stdout (nothing is written)",
    ("proxy/launcher.py", "confdir_lock"): "a lock file (empty)",
    ("proxy/session.py", "_child_beside_viewer"): "the child's exit status (a number)",
    ("proxy/shell_trace.py", "Tracer.finish"): "opens the tracer's FIFO to wake its reader",
    ("cassettes/storage/_paths.py", "_mkstemp"): "staged's private file (see staged)",
    ("cassettes/fleet/_index.py", "_tables"): "the fleet index's tables, created empty",
    ("cassettes/replay/forking/fork.py", "ForkReplay.start"): (
        "an unlinked temporary file for the replay's stderr (its messages are redacted)"
    ),
}

_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_STORE_SQL = ("INSERT", "REPLACE", "UPDATE", "COPY", "CREATE TABLE", "CREATE VIEW", "CREATE OR")
_SPAWN = ("Popen", "run", "call", "check_call", "check_output", "create_subprocess_exec")
_TEMP = ("NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile", "mkstemp")
_HANDLERS = ("FileHandler", "RotatingFileHandler", "WatchedFileHandler", "TimedRotatingFileHandler")


def _mode(call: ast.Call) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value
    return call.args[1] if len(call.args) >= 2 else None


def _writes_mode(node: ast.expr | None) -> bool:
    return node is not None and any(
        isinstance(c, ast.Constant) and isinstance(c.value, str) and set(c.value) & set("wax+")
        for c in ast.walk(node)
    )


def _kind(call: ast.Call) -> str | None:
    """What ``call`` opens to write, or ``None``."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    base = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
    if name == "open" and base == "os":
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
        return "os.open to write" if any(w in flags for w in _WRITE_FLAGS) else None
    if name in ("open", "fdopen") and base in ("", "os", "io", "builtins"):
        return f"{name} to write" if _writes_mode(_mode(call)) else None
    if name in ("write_text", "write_bytes"):
        return name
    if name in _HANDLERS:
        return f"logging {name}"
    if name in _TEMP:
        return f"tempfile {name}"
    if name in ("execute", "executemany") and call.args:
        sql = ast.unparse(call.args[0]).lstrip("f'\" ").upper()
        if sql.startswith(_STORE_SQL):
            return "SQL " + sql.split()[0]
    if name in _SPAWN:
        for kw in call.keywords:
            if kw.arg in ("stdout", "stderr"):
                v = ast.unparse(kw.value)
                if not any(t in v for t in ("PIPE", "DEVNULL", "STDOUT", "None", "sys.std")):
                    return f"a child's {kw.arg} to a file"
    return None


def _trees() -> Iterator[tuple[str, ast.Module]]:
    """(path, syntax tree) of every module of the product's source."""
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def _write_sites(rel: str, tree: ast.Module, sites: dict[tuple[str, str], list[str]]) -> None:
    """(file, enclosing function) → what it opens to write, added to ``sites``."""
    stack: list[str] = []

    def visit(node: ast.AST) -> None:
        named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if named:
            stack.append(node.name)  # type: ignore[union-attr]
        if isinstance(node, ast.Call) and (kind := _kind(node)) is not None:
            sites.setdefault((rel, ".".join(stack) or "<module>"), []).append(kind)
        for child in ast.iter_child_nodes(node):
            visit(child)
        if named:
            stack.pop()

    visit(tree)


def _callers(rel: str, tree: ast.Module, names: tuple[str, ...]) -> set[tuple[str, str]]:
    """(file, enclosing function) of every call of a function named one of ``names``."""
    out: set[tuple[str, str]] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            f = node.func if isinstance(node, ast.Call) else None
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in names:
                out.add((rel, fn.name))
    return out


def _redacted_made(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Redacted"
        for node in ast.walk(tree)
    )


@dataclass
class Walked:
    """What the walk of the product's source found, each file parsed once for the three tests."""

    sites: dict[tuple[str, str], list[str]]  #: (file, function) → what it opens to write
    plain_callers: set[tuple[str, str]]  #: the callers of the raw writers
    redacted_makers: list[str]  #: the files that make ``Redacted(…)``


@pytest.fixture(scope="module")
def walked() -> Walked:
    found = Walked({}, set(), [])
    with collector_paused():  # (each tree freed after its walks: only the findings are kept)
        for rel, tree in _trees():
            _write_sites(rel, tree, found.sites)
            found.plain_callers |= _callers(rel, tree, ("write_plain", "_staged"))
            if _redacted_made(tree):
                found.redacted_makers.append(rel)
    return found


def _listed(site: tuple[str, str]) -> bool:
    return site in GATE or site in NOT_RECORDINGS


def test_every_writer_is_the_gate_or_says_why_it_writes_no_recording(walked: Walked) -> None:
    sites = walked.sites
    unlisted = {
        f"{f}: {fn}: {', '.join(k)}" for (f, fn), k in sites.items() if not _listed((f, fn))
    }
    assert not unlisted, (
        "a new place writes a file: write Redacted bytes through cassettes.storage's gate "
        "(write_sealed, copy_sealed, CassetteFile), or list it in NOT_RECORDINGS with why what it "
        "writes is no recording:\n  " + "\n  ".join(sorted(unlisted))
    )
    gone = [s for s in (*GATE, *NOT_RECORDINGS) if s not in sites]
    assert not gone, f"listed but no longer writing (drop them): {gone}"


def test_only_what_holds_nothing_seen_is_written_plain(walked: Walked) -> None:
    """``staged`` (exports, pages, rewritten branches, every file made from a cassette) takes only
    ``Redacted``; the raw writers under it are called only where nothing looptap saw is written
    (a CA bundle, .gitattributes): a new caller fails until it seals, or is listed with why."""
    callers = walked.plain_callers
    assert callers - set(PLAIN) == set(), sorted(callers - set(PLAIN))
    assert set(PLAIN) - callers == set(), sorted(set(PLAIN) - callers)


def test_only_the_redactor_makes_redacted_bytes(walked: Walked) -> None:
    makers = walked.redacted_makers
    assert makers and all(m.startswith("cassettes/recording/") for m in makers), makers


def test_the_walk_finds_each_kind_of_writer() -> None:
    """The walk itself (a test that cannot fail proves nothing): each kind is found in code."""
    code = """
import os, subprocess, sqlite3, tempfile, logging
def a(p): open(p, "w").write("x")
def b(p): p.write_text("x")
def c(p): os.open(p, os.O_WRONLY | os.O_CREAT)
def d(f, p): subprocess.Popen(["x"], stdout=f)
def e(db): db.execute("INSERT INTO t VALUES (?)", (1,))
def f(p): logging.FileHandler(p)
def g(): tempfile.NamedTemporaryFile()
def h(fd, append): os.fdopen(fd, "ab" if append else "wb")
def ok(p): open(p).read(); open(p, "rb"); subprocess.run(["x"], stdout=subprocess.PIPE)
"""
    found = {}
    for fn in ast.parse(code).body:
        if isinstance(fn, ast.FunctionDef):
            found[fn.name] = [
                k for n in ast.walk(fn) if isinstance(n, ast.Call) and (k := _kind(n))
            ]
    assert all(found[x] for x in "abcdefgh"), found
    assert found["ok"] == [], found
