"""The shipped packages' surface, as issue 56 tabulates it, for the tree this script runs in.

    python bench/surface.py [--list]

Counts the tracked ``.py`` files (``git ls-files``) of cassettes/, proxy/ and inspector/:

- lines per top-level package, and files over 500 lines;
- the largest class: its lines and its members (the functions and assignments of its body);
- functions over cyclomatic complexity 15, counted as radon counts it (radon is not installed);
- exported names: the ``__all__`` (else the public module-level names) of each package's
  ``__init__``, and the same over every module that is not private (``_name``);
- function-local imports (``import`` in a function body, ``TYPE_CHECKING`` blocks aside): all, and
  those of the project's own modules;
- import cycles between own modules, through module-level imports (a function-local import is
  made when it runs, after both modules exist): the groups of modules that import each other;
- library-private names: another library's ``_name`` imported (``from lib._mod import x``,
  ``from lib.mod import _x``) or read through a module bound by an import (``lib._x``), a dotted
  string naming one (``"pydantic.plugin._loader"``), an entry of ``sys.modules`` replaced, and
  mitmproxy's ``proxyserver.connections`` (public by its name, documented nowhere).

``--list`` prints each file, class, function, import and name behind the figures.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cassettes", "proxy", "inspector")
LONG_FILE = 500
CC = 15
_DOTTED_PRIVATE = re.compile(r"^[a-z]\w*(\.\w+)*\._[a-z]\w*(\.\w+)*$")


def files() -> list[Path]:
    """The shipped packages' tracked ``.py`` files."""
    out = subprocess.run(
        ["git", "ls-files", "--", *(f"{p}/*.py" for p in PACKAGES)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return [ROOT / f for f in out if (ROOT / f).is_file()]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__") and part != "_"


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node with whether it lies in a function body; ``TYPE_CHECKING`` blocks skipped."""
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            continue
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        yield child, inner
        yield from _walk(child, inner)


def _imported(module: str, node: ast.Import | ast.ImportFrom, package: bool = False) -> list[str]:
    """The absolute dotted names an import statement reaches (without the install prefix
    ``looptap.``); ``package``: ``module`` is a package's ``__init__`` (its ``.`` is itself)."""
    if isinstance(node, ast.Import):
        return [a.name.removeprefix("looptap.") for a in node.names]
    base = (node.module or "").removeprefix("looptap.")
    if node.level:
        parts = module.split(".") + ([""] if package else [])
        up = parts[: len(parts) - node.level + 1]
        base = ".".join([*up[:-1], base] if base else up[:-1])
    return [base]


class Surface:
    def __init__(self, files: list[Path]) -> None:
        self.files = files
        self.trees = {f: ast.parse(f.read_text(), str(f)) for f in files}
        self.modules = {_module(f): f for f in files}
        self.lines = {f: len(f.read_text().splitlines()) for f in files}

    def own(self, dotted: str) -> bool:
        return dotted.removeprefix("looptap.").split(".")[0] in PACKAGES

    def classes(self) -> list[tuple[int, int, str]]:
        out = []
        for f, tree in self.trees.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    members = sum(
                        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign))
                        or isinstance(n, ast.AnnAssign)
                        for n in node.body
                    )
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    out.append((size, members, f"{_module(f)}.{node.name}"))
        return sorted(out, reverse=True)

    def complex_functions(self) -> list[str]:
        out = []
        for f, tree in self.trees.items():
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    cc = _complexity(node)
                    if cc > CC:
                        out.append(f"{f.relative_to(ROOT)}:{node.lineno}  {node.name} ({cc})")
        return sorted(out)

    def exported(self, packages_only: bool) -> int:
        total = 0
        for f, tree in self.trees.items():
            if packages_only and f.name != "__init__.py":
                continue
            if any(_private(p) for p in _module(f).split(".")):
                continue  # a private module exports nothing
            names: list[str] | None = None
            public = set()
            for node in tree.body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                    value = node.value if isinstance(node, ast.Assign) else None
                    if isinstance(value, (ast.List, ast.Tuple)):
                        names = [ast.literal_eval(e) for e in value.elts]
                for t in targets:
                    if isinstance(t, ast.Name) and not t.id.startswith("_"):
                        public.add(t.id)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if not node.name.startswith("_"):
                        public.add(node.name)
            total += len(names) if names is not None else len(public)
        return total

    def local_imports(self) -> tuple[list[str], list[str]]:
        every, own = [], []
        for f, tree in self.trees.items():
            for node, in_function in _walk(tree):
                if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
                    where = f"{f.relative_to(ROOT)}:{node.lineno}"
                    every.append(where)
                    relative = isinstance(node, ast.ImportFrom) and node.level > 0
                    if relative or any(self.own(d) for d in _imported(_module(f), node)):
                        own.append(where)
        return every, own

    def cycles(self) -> list[list[str]]:
        graph: dict[str, set[str]] = {m: set() for m in self.modules}
        for f, tree in self.trees.items():
            me = _module(f)
            for node, in_function in _walk(tree):
                if in_function or not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for dotted in _imported(me, node, f.name == "__init__.py"):
                    names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
                    subs = [f"{dotted}.{n}" for n in names if f"{dotted}.{n}" in self.modules]
                    # `from . import sub`: the submodule; the package only for a name it defines
                    whole = len(subs) < len(names) or not names
                    for target in [*([dotted] if whole else []), *subs]:
                        if target in self.modules and target != me:
                            graph[me].add(target)
        return [sorted(c) for c in _components(graph) if len(c) > 1]

    def library_private(self) -> list[str]:
        out = []
        for f, tree in self.trees.items():
            where = str(f.relative_to(ROOT))
            bound: set[str] = set()  # names bound to another library's module
            for node, _ in _walk(tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        if not self.own(a.name):
                            bound.add(a.asname or a.name.split(".")[0])
                            if any(_private(p) for p in a.name.split(".")[1:]):
                                out.append(f"{where}:{node.lineno}  import {a.name}")
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    if self.own(node.module) or node.module == "__future__":
                        continue
                    for a in node.names:
                        if any(_private(p) for p in [*node.module.split(".")[1:], a.name]):
                            out.append(f"{where}:{node.lineno}  from {node.module} import {a.name}")
                elif isinstance(node, ast.Attribute) and _private(node.attr):
                    if isinstance(node.value, ast.Name) and node.value.id in bound:
                        out.append(f"{where}:{node.lineno}  {node.value.id}.{node.attr}")
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if _DOTTED_PRIVATE.match(node.value) and not self.own(node.value):
                        out.append(f"{where}:{node.lineno}  {node.value!r}")
                elif isinstance(node, ast.Assign) and any(
                    ast.unparse(t).startswith("sys.modules[") for t in node.targets
                ):
                    out.append(f"{where}:{node.lineno}  sys.modules[...] replaced")
            for m in re.finditer(r"proxyserver\.connections\b", f.read_text()):
                line = f.read_text().count("\n", 0, m.start()) + 1
                out.append(f"{where}:{line}  proxyserver.connections")
        return out


def _complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Cyclomatic complexity as radon counts it: 1, plus each ``if``, conditional expression,
    loop (and its ``else``), ``except`` (and a ``try``'s ``else``), ``assert``, ``case``, each
    ``and``/``or`` operand past the first, and each ``for`` and ``if`` of a comprehension. A nested
    function or class counts on its own."""
    cc = 1
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.If, ast.IfExp, ast.Assert, ast.match_case)):
            cc += 1
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            cc += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try):
            cc += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            cc += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            cc += 1 + len(node.ifs)
        todo.extend(ast.iter_child_nodes(node))
    return cc


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print what is behind each figure")
    args = ap.parse_args()
    s = Surface(files())
    per = {p: sum(n for f, n in s.lines.items() if f.relative_to(ROOT).parts[0] == p)
           for p in PACKAGES}  # fmt: skip
    long_files = sorted((n, str(f.relative_to(ROOT))) for f, n in s.lines.items() if n > LONG_FILE)
    classes = s.classes()
    complex_ = s.complex_functions()
    every, own = s.local_imports()
    cycles = s.cycles()
    private = s.library_private()
    size, members, name = classes[0] if classes else (0, 0, "-")
    rows = [
        *((f"lines in {p}/", f"{n:,}") for p, n in per.items()),
        ("lines in all three", f"{sum(per.values()):,}"),
        (f"files over {LONG_FILE} lines", str(len(long_files))),
        ("largest class", f"{size} lines, {members} members ({name})"),
        (f"functions over CC {CC}", str(len(complex_))),
        ("exported names (packages' __init__)", str(s.exported(packages_only=True))),
        ("exported names (every module)", str(s.exported(packages_only=False))),
        ("function-local imports (all / own)", f"{len(every)} / {len(own)}"),
        ("import cycles (own, module level)", str(len(cycles))),
        ("library-private names", str(len(private))),
    ]
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    if args.list:
        say = functools.partial(print, sep="\n")  # one item a line
        say(f"\n# files over {LONG_FILE} lines", *(f"{n:6}  {f}" for n, f in long_files))
        say("\n# largest classes", *(f"{a:6} {b:4}  {c}" for a, b, c in classes[:10]))
        say(f"\n# functions over CC {CC}", *complex_)
        say("\n# function-local imports of own modules", *own)
        say("\n# import cycles", *(" <-> ".join(c) for c in cycles))
        say("\n# library-private names", *private)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
