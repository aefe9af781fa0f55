"""The suite's two phases (``bash .ci/run``, docs/suite.md): the **core** (every test that needs no
client framework, agent binary or browser: the test and recorder environments only) runs first
and says its result; then ``.ci/run`` installs the **matrix** (the environments below) and runs
the rest.

Which phase a test module belongs to is read from its source and from the test-suite modules it
imports (``tests.…``, transitively): a module that names one of :data:`RESOURCES` (the path
``.ci/run`` makes, or the variable that points at it) needs the matrix. Naming it in a docstring
is enough: a module moved to the matrix by a word still runs, only later; a module that needs a
resource and names none is what the guard catches: in the core phase every variable of
:data:`RESOURCES` points at a path that does not exist (:data:`ABSENT`), and a core test that
skips or fails saying so is an error naming the resource (``tests/conftest.py``).

``LOOPTAP_PHASE`` (``core`` or ``matrix``) selects; unset, every test runs, as before.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

PHASE = "LOOPTAP_PHASE"
ROOT = Path(__file__).resolve().parents[2]

#: What the matrix phase installs: a name, the pattern that names it in a test module's source
#: (its default path or its variable), and the variable ``.ci/run`` exports for it.
RESOURCES: dict[str, tuple[re.Pattern[str], str]] = {
    name: (re.compile(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])|{var}"), var)
    for name, var in (
        (".venv-clients", "LOOPTAP_CLIENTS_PYTHON"),
        (".venv-agents", "LOOPTAP_AGENTS_PYTHON"),
        (".venv-crewai", "LOOPTAP_CREWAI_PYTHON"),
        (".venv-traces", "LOOPTAP_TRACES_PYTHON"),
        (".venv-strands", "LOOPTAP_STRANDS_PYTHON"),
        (".venv-adk", "LOOPTAP_ADK_PYTHON"),
        (".venv-adk1", "LOOPTAP_ADK1_PYTHON"),
        (".npm-agents", "LOOPTAP_NPM_AGENTS"),
        (".npm-clients", "LOOPTAP_NPM_CLIENTS"),
        ("chromium", "LOOPTAP_CHROMIUM"),
    )
}
#: Where the core phase points every variable of :data:`RESOURCES`: nothing is there.
ABSENT = "/nonexistent/looptap-core-phase"

_IMPORT = re.compile(r"^\s*(?:from|import)\s+(tests(?:\.\w+)+)", re.M)
_RELATIVE = re.compile(r"^\s*from\s+(\.+)(\w+(?:\.\w+)*)?\s+import\s+([\w, ()]+)", re.M)


def phase() -> str | None:
    said = os.environ.get(PHASE, "")
    return said if said in ("core", "matrix") else None


def _module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _imports(path: Path, text: str) -> list[Path]:
    found = [f for d in _IMPORT.findall(text) if (f := _module_file(d)) is not None]
    for dots, mod, names in _RELATIVE.findall(text):
        pkg = path.parent
        for _ in range(len(dots) - 1):
            pkg = pkg.parent
        base = pkg.joinpath(*mod.split(".")) if mod else pkg
        for name in [""] + [n.strip(" ()") for n in names.split(",")]:
            cand = base / name if name else base
            for p in (cand.with_suffix(".py"), cand / "__init__.py"):
                if p.is_file():
                    found.append(p)
    return found


@cache
def _names(path: Path) -> tuple[frozenset[str], tuple[Path, ...]]:
    """What the module at ``path`` names of :data:`RESOURCES` itself, and the test-suite modules
    it imports: read once per file, however many modules import it. A pattern is searched only
    where its words are in the text (case-folded, as the pattern matches): a case-insensitive
    pattern with a look-behind has no literal prefix for the regex engine to skip ahead on, and
    searching the ten of them through every file took most of a collection's 26 s of phases."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset(), ()
    low = text.casefold()
    named = frozenset(
        name
        for name, (pat, var) in RESOURCES.items()
        if (name in low or var.casefold() in low) and pat.search(text)
    )
    return named, tuple(_imports(path, text))


@cache
def needs(path: Path) -> frozenset[str]:
    """The resources of :data:`RESOURCES` that the module at ``path`` names, it or a test-suite
    module it imports (transitively)."""
    seen: set[Path] = set()
    todo = [path.resolve()]
    out: set[str] = set()
    while todo:
        p = todo.pop()
        if p in seen or ROOT / "tests" not in p.parents:
            continue
        seen.add(p)
        named, imported = _names(p)
        out.update(named)
        todo.extend(imported)
    return frozenset(out)


def in_phase(path: Path, which: str) -> bool:
    """Whether the test module at ``path`` runs in phase ``which``."""
    return bool(needs(path)) == (which == "matrix")


def absent_env() -> dict[str, str]:
    """The core phase's variables: every resource at a path that does not exist."""
    return {var: f"{ABSENT}/{name}" for name, (_, var) in RESOURCES.items()}


def needed_in(text: str) -> list[str]:
    """The resources a core test's skip or failure names (the guard's evidence)."""
    named = [name for name, (pat, _) in RESOURCES.items() if pat.search(text)]
    named += [n for n in RESOURCES if f"{ABSENT}/{n}" in text and n not in named]
    return named
