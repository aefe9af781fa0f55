"""Private names (``_name``) of this tree reached from outside the module or the package that owns them.

    python bench/private_imports.py [--list] [--scope code|all]

Walks the AST of every tracked ``.py`` file (``git ls-files``) and counts each use of a private
name of this tree's own modules: ``from X import _name``, ``import X._mod``, ``from X._mod import
name`` and ``alias._name`` where ``alias`` is bound to one of our modules by an import, and
the string forms ``setattr(alias, "_name", …)`` (``monkeypatch.setattr``, ``getattr``,
``patch.object`` …) and ``patch("our.module._name")``. A bare import is resolved as Python
would find it through the directories the tests and bench scripts put on ``sys.path``
(pyproject's pytest ``pythonpath``: ``from test_bedrock import _frame`` is
``tests.cassettes.providers.test_bedrock._frame``). A name is private when it starts with an
underscore and is not a dunder (``__all__``) nor ``_`` alone. Each use is counted against the
module ``M`` that holds the private name (``cassettes.providers._values`` for ``_result_in``,
``cassettes.providers`` for its submodule ``_base``; a directory without ``__init__.py``, such as
tests/, is a package too):

- **across modules**: the importing module is not ``M``; split into functions, classes or
  constants (what issue 47 counted, by its own means, as 84 at its start; 96 here at fb1ad46) and
  imports of a private module (``from cassettes.providers._base import Provider``);
- **across packages**: the importing module is not inside the package that owns ``M`` (``M``
  itself when it is a package, else its parent). A subpackage is inside its parent: the
  family packages under ``cassettes/providers/`` may use ``cassettes.providers._base``; a module
  of ``cassettes/analysis/`` may not, nor may a test.

``--scope code`` (the default) counts the shipped packages (cassettes, proxy, inspector);
``--scope all`` adds tests/ and bench/. ``--list`` prints each crossing as ``file:line  name``.
Imports of another library's private names are not counted here (issue 47, item 6), nor
imports written inside a string of code that a script runs (bench/parse_once.py's child).
"""  # noqa: E501

from __future__ import annotations

import argparse
import ast
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("cassettes", "proxy", "inspector")


def _is_private(part: str) -> bool:
    dunder = part.startswith("__") and part.endswith("__")
    return part.startswith("_") and part != "_" and not dunder


def _module_name(path: Path) -> tuple[str, bool]:
    """(dotted module name, whether it is a package's ``__init__``)."""
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _resolve(importer: str, is_pkg: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


class _Tree:
    def __init__(self, files: list[Path]) -> None:
        self.modules: dict[str, bool] = {}
        for f in files:
            name, pkg = _module_name(f)
            self.modules[name] = pkg
        self.tops = {m.split(".")[0] for m in self.modules}
        #: every dotted name under which a module lies (``tests.support`` for ``tests.support.x``)
        self.holders = {
            m.rsplit(".", i)[0] for m in self.modules for i in range(1, m.count(".") + 1)
        }
        config = tomllib.loads((ROOT / "pyproject.toml").read_text())
        on_path = config["tool"]["pytest"]["ini_options"].get("pythonpath", [])
        self.path = [p.strip("/").replace("/", ".") for p in on_path if p.strip("./")]

    def absolute(self, dotted: str) -> str:
        """``dotted`` imported by a bare name through a directory on the test path (else as is)."""
        if not dotted or dotted.split(".")[0] in self.tops:
            return dotted
        for d in self.path:
            found = f"{d}.{dotted}"
            if found in self.modules or found in self.holders:
                return found
        return dotted

    def is_ours(self, dotted: str) -> bool:
        return dotted.split(".")[0] in self.tops

    def owner_package(self, holder: str) -> str:
        """The package a private name held by module ``holder`` belongs to (a directory without
        ``__init__.py`` is not in ``modules`` and is a package)."""
        if self.modules.get(holder, holder not in self.modules):
            return holder
        return holder.rpartition(".")[0]


def _uses(tree: _Tree, importer: str, is_pkg: bool, src: str) -> Iterator[tuple[int, str, str]]:
    """(line, dotted private name, module holding it) for every private name of ours used."""
    node = ast.parse(src)
    aliases: dict[str, str] = {}  # local name -> our module it is bound to
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            for a in n.names:
                name = tree.absolute(a.name)
                if not tree.is_ours(name):
                    continue
                parts = name.split(".")
                for i, p in enumerate(parts):
                    if _is_private(p) and i > 0:
                        yield n.lineno, name, ".".join(parts[:i])
                if a.asname:
                    aliases[a.asname] = name
                elif name == a.name:
                    aliases[parts[0]] = parts[0]
                else:  # ``import fixture_run`` found through the test path binds ``fixture_run``
                    first = a.name.split(".")[0]
                    aliases[first] = name[: len(name) - len(a.name)] + first
        elif isinstance(n, ast.ImportFrom):
            mod = tree.absolute(_resolve(importer, is_pkg, n.module, n.level))
            if not tree.is_ours(mod):
                continue
            parts = mod.split(".")
            for i, p in enumerate(parts):
                if _is_private(p) and i > 0:
                    yield n.lineno, mod, ".".join(parts[:i])
            for a in n.names:
                if _is_private(a.name):
                    yield n.lineno, f"{mod}.{a.name}", mod
                full = f"{mod}.{a.name}"
                if full in tree.modules:
                    aliases[a.asname or a.name] = full
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and _is_private(n.attr):
            chain: list[str] = [n.attr]
            v: ast.expr = n.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if not isinstance(v, ast.Name) or v.id not in aliases:
                continue
            dotted = ".".join([aliases[v.id], *reversed(chain[1:])])
            if dotted in tree.modules:  # alias(.submodule)*._name: a private name of that module
                yield n.lineno, f"{dotted}.{n.attr}", dotted
        elif isinstance(n, ast.Call) and n.args:
            yield from _named_in_a_call(tree, aliases, n)


def _named_in_a_call(
    tree: _Tree, aliases: dict[str, str], n: ast.Call
) -> Iterator[tuple[int, str, str]]:
    """``setattr(alias, "_name", …)`` and its kin (``monkeypatch.setattr``, ``patch.object``,
    ``getattr``), and ``patch("our.module._name")``: a private name reached by its string."""
    first = n.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        holder, _, name = first.value.rpartition(".")
        if holder in tree.modules and _is_private(name):
            yield n.lineno, first.value, holder
        return
    attr = n.args[1].value if len(n.args) > 1 and isinstance(n.args[1], ast.Constant) else None
    if not isinstance(attr, str) or not _is_private(attr):
        return
    chain: list[str] = []
    v: ast.expr = first
    while isinstance(v, ast.Attribute):
        chain.append(v.attr)
        v = v.value
    if isinstance(v, ast.Name) and v.id in aliases:
        dotted = ".".join([aliases[v.id], *reversed(chain)])
        if dotted in tree.modules:
            yield n.lineno, f"{dotted}.{attr}", dotted


def crossings(scope: str) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]]:
    """(file, line, name) of each private name used across modules, and across packages."""
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    files = [Path(f) for f in listed.stdout.split() if f.split("/")[0] in (*CODE, "tests", "bench")]
    tree = _Tree(files)
    roots = CODE if scope == "code" else (*CODE, "tests", "bench")
    modules: list[tuple[str, int, str]] = []
    packages: list[tuple[str, int, str]] = []
    for f in files:
        if f.parts[0] not in roots:
            continue
        importer, is_pkg = _module_name(f)
        seen: set[tuple[int, str]] = set()
        for line, name, holder in _uses(tree, importer, is_pkg, (ROOT / f).read_text()):
            if (line, name) in seen or holder == importer:
                continue
            seen.add((line, name))
            modules.append((str(f), line, name))
            owner = tree.owner_package(holder)
            if importer != owner and not importer.startswith(owner + "."):
                packages.append((str(f), line, name))
    return modules, packages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print each crossing")
    ap.add_argument("--scope", choices=("code", "all"), default="code")
    args = ap.parse_args()
    modules, packages = crossings(args.scope)
    if args.list:
        for title, rows in (("across modules", modules), ("across packages", packages)):
            print(f"# {title}")
            for f, line, name in sorted(rows):
                print(f"{f}:{line}  {name}")
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    ours = _Tree([Path(f) for f in listed.stdout.split()]).modules
    submodules = sum(1 for _, _, name in modules if name in ours)
    print(
        f"private names used across modules: {len(modules)} ({len(modules) - submodules} "
        f"functions, classes or constants; {submodules} imports of a private module)"
    )
    print(f"private names used across packages: {len(packages)}")


if __name__ == "__main__":
    main()
