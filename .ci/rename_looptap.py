#!/usr/bin/env python3
"""One import package, ``looptap`` (issue 72, item 6): the rewrite, as a script to re-run.

    python .ci/rename_looptap.py [--dry-run] [ROOT]

The repository keeps its folders (``cassettes/``, ``proxy/``, ``inspector/``); the wheel installs
them as ``looptap.cassettes``, ``looptap.proxy`` and ``looptap.inspector`` (pyproject.toml's wheel
``sources``). This script rewrites every reference to the three packages in a tree to the names
they are installed under, so that it can be run again on any branch made before the rename:

- Python import statements: ``from cassettes.x import y`` → ``from looptap.cassettes.x import
  y``, ``import proxy.addon as addon`` → ``import looptap.proxy.addon as addon``, a bare ``import
  cassettes`` → ``from looptap import cassettes``;
- dotted module names anywhere else in a text file (strings: monkeypatch and mock targets, ``-m
  cassettes.cli`` command lines, ``"module:function"`` handlers, module-name prefixes such as
  ``'cassettes.'``; comments, docstrings, the docs, pyproject.toml's entry points, mypy overrides
  and import-linter contracts): a name is rewritten when it starts with one of the three packages
  followed by one of its real modules or subpackages (read from the tree), so ``proxy.start()`` on
  a variable, "vcrpy cassettes." and the folder paths (``cassettes/reading/_run.py``) are left;
- then, inside the three packages, their own imports made relative (``from ..models import
  Message``): see :func:`relative`;
- pyproject.toml's lists of the three top-level names (import-linter's ``root_packages``, mypy's
  ``packages``, the forbidden contracts' bare ``"proxy"`` and ``"inspector"``).

Idempotent: a name already under ``looptap.`` is never rewritten again. Files it does not read:
binaries, the virtual environments, ``.git``, the corpus, recorded cassettes (``*.jsonl``,
``*.yaml`` under tests' data) and this script. What it cannot decide it lists at the end (an
``import cassettes.x`` without ``as``), and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import ast
import functools
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

PACKAGES = ("cassettes", "proxy", "inspector")
PREFIX = "looptap"
#: Text files read (by suffix), and the extensionless ones by name.
SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".sh", ".tcss", ".json", ".j2", ".html"}
NAMES = {"run", "Makefile"}
#: Folders never walked (generated, installed or recorded data).
SKIP_DIRS = {
    ".git", ".venv", ".venv-proxy", ".venv-bootstrap", ".venv-clients", ".venv-agents",
    ".venv-crewai", ".venv-traces", ".npm-agents", "node_modules", "__pycache__", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".hypothesis", "build", "dist", ".looptap-editable",
    "__snapshots__", "snapshots",
}  # fmt: skip
SELF = Path(__file__).resolve()
#: Files a program loads by their path, outside any package (``mitmdump -s proxy/addon.py``,
#: docs/recorder.md): their imports stay absolute, as a relative one fails there.
BY_PATH = {"proxy/addon.py"}
#: Files that name both layouts on purpose (a bench that runs a tree from before the rename; the
#: page that explains the two names): left as they are.
BOTH = {"bench/kept.py", "bench/same_output.py", "docs/layout.md"}


def modules_of(root: Path) -> dict[str, set[str]]:
    """Each package's first-level children that are modules or subpackages (``cassettes`` →
    {``reading``, ``cli``, ``_version`` …}): the names after which a dotted word is the package."""
    out: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        here = root / pkg
        children = {p.stem for p in here.glob("*.py") if p.stem != "__init__"}
        children |= {p.name for p in here.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
        out[pkg] = children
    return out


def dotted_pattern(children: dict[str, set[str]]) -> re.Pattern[str]:
    """``cassettes.reading…``, ``proxy.addon…``: a package name not preceded by a word, a dot, a
    slash or a dash, followed by a dot and one of its real children (a whole word); or the
    package name and a dot closing a string (``'cassettes.'``, a prefix of module names)."""
    alternatives = []
    for pkg, kids in children.items():
        names = "|".join(sorted(map(re.escape, kids), key=len, reverse=True))
        alternatives.append(rf"{pkg}(?=\.(?:{names})\b)")
        alternatives.append(rf"{pkg}(?=\.['\"])")
    return re.compile(rf"(?<![\w./\-]){'(?:' + '|'.join(alternatives) + ')'}")


IMPORT = re.compile(
    rf"^(?P<indent>[ \t]*)(?P<kw>from|import)[ \t]+(?P<pkg>{'|'.join(PACKAGES)})(?P<rest>\b.*)$",
    re.M,
)


FROM_IMPORT = re.compile(rf"(?<![\w.])(from )({'|'.join(PACKAGES)}) import\b")


SEVERAL = re.compile(rf"(?<![\w.])(import )({'|'.join(PACKAGES)})(?=, )")
#: A call taking a top-level module's name: ``files("cassettes")``, ``startswith(("cassettes",``.
NAMED = re.compile(
    rf"\b(files|startswith|import_module|find_spec)\((\(?)(['\"])({'|'.join(PACKAGES)})\3"
)

#: What no rule reaches, as it reads after the rules: (file, text, replacement), each applied
#: where the text is found (so a second run, or a branch without the line, changes nothing).
#: Tests that name the three packages as module roots, and a mypy argument.
HAND: tuple[tuple[str, str, str], ...] = (
    (
        "tests/test_boundaries.py",
        "n.split('.')[0] in",
        "n.removeprefix('looptap.').split('.')[0] in",
    ),
    (
        "tests/test_boundaries.py",
        'a.name.split(".")[0]',
        'a.name.removeprefix("looptap.").split(".")[0]',
    ),
    (
        "tests/test_boundaries.py",
        'node.module.split(".")[0]',
        'node.module.removeprefix("looptap.").split(".")[0]',
    ),
    (
        "tests/test_boundaries.py",
        '"import sys, pkgutil, importlib, cassettes\\n"',
        '"import sys, pkgutil, importlib, looptap.cassettes as cassettes\\n"',
    ),
    (
        "tests/test_boundaries.py",
        'assert sorted(ours) == [\n        "cassettes",\n',
        'assert sorted(ours) == [\n        "looptap.cassettes",\n',
    ),
    (
        "tests/test_boundaries.py",
        '"import sys, cassettes; print(',
        '"import sys, looptap.cassettes; print(',
    ),
    (
        "tests/test_boundaries.py",
        "\"['cassettes', 'looptap.cassettes.lazy']\"",
        "\"['looptap.cassettes', 'looptap.cassettes.lazy']\"",
    ),
    (
        "tests/net/test_net_api.py",
        "\"['cassettes', 'looptap.cassettes.lazy',",
        "\"['looptap.cassettes', 'looptap.cassettes.lazy',",
    ),
    (
        "tests/test_startup_imports.py",
        '("proxy", "inspector", "looptap.cassettes.replay"',
        '("looptap.proxy", "looptap.inspector", "looptap.cassettes.replay"',
    ),
    ("tests/test_quality.py", '"-p", "proxy"]', '"-p", "looptap.proxy"]'),
)


def rewrite_imports(text: str, problems: list[str], where: str) -> str:
    """Import statements of the three packages, at any indentation (function-local too)."""

    def one(m: re.Match[str]) -> str:
        indent, kw, pkg, rest = m["indent"], m["kw"], m["pkg"], m["rest"]
        if kw == "from":
            if rest.startswith((" import", "\timport", ".")):
                return f"{indent}from {PREFIX}.{pkg}{rest}"
            return m[0]
        # import X / import X.Y as Z / import X as Z
        if rest.strip() == "" or rest.lstrip().startswith("#"):
            return f"{indent}from {PREFIX} import {pkg}{rest}"
        if re.match(r"^(\.[\w.]+)?\s+as\s+\w+", rest):
            return f"{indent}import {PREFIX}.{pkg}{rest}"
        if rest.startswith(","):
            problems.append(f"{where}: {m[0].strip()} (several modules in one import)")
        # `import cassettes.cli`: the dotted rule rewrites it and its uses alike
        return m[0]

    return IMPORT.sub(one, text)


def rewrite_pyproject(text: str) -> str:
    """The lists of the three top-level names: import-linter's roots, mypy's packages, and the
    forbidden contracts' modules (a bare package name, which no dotted rule reaches)."""
    bare = "|".join(PACKAGES)
    quoted = re.compile(rf'"({bare})"')

    def names(m: re.Match[str]) -> str:
        return m[1] + quoted.sub(rf'"{PREFIX}.\1"', m[2])

    text = re.sub(
        r"^((?:root_packages|packages|source_modules|forbidden_modules)\s*=\s*)(\[[^\]]*\])",
        names,
        text,
        flags=re.M,
    )
    text = re.sub(rf'^(containers\s*=\s*\[)"({bare})"', rf'\1"{PREFIX}.\2"', text, flags=re.M)
    # mypy's overrides: module = ["proxy.*"]
    text = re.sub(rf'"({bare})\.\*"', rf'"{PREFIX}.\1.*"', text)
    return text


def prose(text: str) -> list[tuple[int, int]]:
    """The offsets of a Python file's comments and docstrings (a string that is a statement of
    its own): prose, whose dotted names stay as they are written (names relative to ``looptap``,
    as the docs' short names are; rewriting them would lengthen 300 lines past the cap)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans: list[tuple[int, int]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return spans
    fresh = True  # at the start of a logical line
    for i, tok in enumerate(tokens):
        at = (starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1])
        if tok.type == tokenize.COMMENT:
            spans.append(at)
        elif tok.type == tokenize.STRING and fresh:
            nxt = next((t for t in tokens[i + 1 :] if t.type != tokenize.COMMENT), None)
            if nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                spans.append(at)
        if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL):
            fresh = True
        elif tok.type != tokenize.COMMENT:
            fresh = False
    return spans


def rewrite(path: Path, text: str, pattern: re.Pattern[str], problems: list[str]) -> str:
    new = text
    if path.suffix == ".py":
        new = rewrite_imports(new, problems, str(path))
        kept = prose(new)

        def dotted(m: re.Match[str]) -> str:
            inside = any(a <= m.start() < b for a, b in kept)
            return m[0] if inside else f"{PREFIX}.{m[0]}"

        new = pattern.sub(dotted, new)
    else:
        new = pattern.sub(lambda m: f"{PREFIX}.{m[0]}", new)
    # an import statement inside a string or a line of prose: "from cassettes import x"
    new = FROM_IMPORT.sub(rf"\1{PREFIX}.\2 import", new)
    # several modules in one import, in a string of code: "import cassettes, sys"
    new = SEVERAL.sub(rf"\1{PREFIX}.\2", new)
    if path.suffix == ".py":
        new = NAMED.sub(rf"\1(\2\3{PREFIX}.\4\3", new)
    if path.name == "pyproject.toml":
        new = rewrite_pyproject(new)
    return new


def relative(path: Path, root: Path, text: str, problems: list[str]) -> str:
    """Inside the three packages, their own imports made relative (``from ..models import
    Message``), as httpx writes them: the code names no install prefix, and a reader or a tool
    that follows imports by path finds every route. Read with ``ast``, so an import statement
    inside a string (an agent script a test runs) is left as it is written."""
    rel = path.relative_to(root)
    if rel.parts[0] not in PACKAGES or path.suffix != ".py" or rel.as_posix() in BY_PATH:
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        problems.append(f"{rel}: not parsed; its imports are left absolute")
        return text
    here = [PREFIX, *rel.with_suffix("").parts]
    package = here if here[-1] == "__init__" else here[:-1]
    package = [p for p in package if p != "__init__"]

    def dots(target: list[str]) -> str:
        k = 0
        while k < min(len(package), len(target)) and package[k] == target[k]:
            k += 1
        return "." * (len(package) - k + 1) + ".".join(target[k:])

    lines = text.splitlines(keepends=True)
    for node in ast.walk(tree):
        row = node.lineno - 1 if isinstance(node, (ast.Import, ast.ImportFrom)) else None
        if row is None:
            continue
        line = lines[row]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == PREFIX or node.module.startswith(f"{PREFIX}."):
                new = re.sub(
                    rf"\bfrom\s+{re.escape(node.module)}\s+import\b",
                    f"from {dots(node.module.split('.'))} import",
                    line,
                    count=1,
                )
                lines[row] = new
        elif isinstance(node, ast.Import) and node.lineno == node.end_lineno:
            (alias,) = node.names if len(node.names) == 1 else (None,)
            if alias is None or not alias.name.startswith(f"{PREFIX}."):
                continue
            if alias.asname is None:
                problems.append(f"{rel}:{node.lineno}: import {alias.name} without `as`")
                continue
            parent, _, last = alias.name.rpartition(".")
            indent = line[: len(line) - len(line.lstrip())]
            tail = "\n" if line.endswith("\n") else ""
            lines[row] = (
                f"{indent}from {dots(parent.split('.'))} import {last} as {alias.asname}{tail}"
            )
    return "".join(lines)


def files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part in SKIP_DIRS for part in rel.parts[:-1]) or p.is_symlink() or not p.is_file():
            continue
        if p.resolve() == SELF or rel.as_posix() in BOTH:
            continue
        if p.suffix in SUFFIXES or (p.suffix == "" and p.name in NAMES):
            out.append(p)
    return out


def tidy(ruff: str, root: Path, paths: list[str]) -> list[str]:
    """The rewritten Python files' imports sorted again (``looptap`` is first-party:
    [tool.ruff.lint.isort]) and each line the prefix took past the cap formatted again, that line
    alone (``ruff format --range``: the rest of a file keeps its form). A line still too long
    (a long string the formatter does not cut) is marked ``# noqa: E501``; they are listed."""
    run = functools.partial(subprocess.run, cwd=root, capture_output=True, text=True, check=False)
    run([ruff, "check", "--quiet", "--select", "I", "--fix", *paths])
    e501 = ["check", "--select", "E501", "--output-format", "json", "--exit-zero"]
    long = run([ruff, *e501, *paths])
    for hit in sorted(json.loads(long.stdout or "[]"), key=lambda h: -h["location"]["row"]):
        row = hit["location"]["row"]
        run([ruff, "format", "--quiet", "--range", f"{row}:{row}", hit["filename"]])
    run([ruff, "check", "--quiet", "--select", "I", "--fix", *paths])
    left = run([ruff, *e501, *paths])
    hits: dict[str, set[int]] = {}
    for h in json.loads(left.stdout or "[]"):
        hits.setdefault(h["filename"], set()).add(h["location"]["row"])
    said = []
    for name, rows in hits.items():
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for row in sorted({statement_end(text, r) for r in rows}, reverse=True):
            line = lines[row - 1].rstrip("\n")
            if "noqa" not in line:
                lines[row - 1] = f"{line}  # noqa: E501\n"
            said.append(f"{path.relative_to(root)}:{row}: a long string, marked `# noqa: E501`")
        path.write_text("".join(lines), encoding="utf-8")
    return said


def statement_end(text: str, row: int) -> int:
    """The line where the string or statement that covers line ``row`` ends: a ``noqa`` comment
    goes there (a comment inside a triple-quoted string would change the string)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.start[0] <= row <= tok.end[0]:
                return tok.end[0]
    except (tokenize.TokenError, SyntaxError):
        pass
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "root", nargs="?", default=str(SELF.parents[1]), help="the tree (default: this checkout)"
    )
    ap.add_argument("--dry-run", action="store_true", help="say which files would change")
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    pattern = dotted_pattern(modules_of(root))
    problems: list[str] = []
    changed = 0
    rewritten: list[str] = []
    for path in files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        new = relative(path, root, rewrite(path, text, pattern, problems), problems)
        rel = path.relative_to(root).as_posix()
        for where, old, hand in HAND:
            if where == rel:
                new = new.replace(old, hand)
        if new != text:
            changed += 1
            print(f"{'would rewrite' if args.dry_run else 'rewrote'} {path.relative_to(root)}")
            if not args.dry_run:
                path.write_text(new, encoding="utf-8")
                if path.suffix == ".py":
                    rewritten.append(str(path))
    print(f"{changed} files {'to rewrite' if args.dry_run else 'rewritten'}", file=sys.stderr)
    if rewritten and not args.dry_run:
        # the imports sorted again: `looptap` is first-party ([tool.ruff.lint.isort])
        ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
        if ruff is None:
            problems.append("ruff not found: run `ruff check --select I --fix` on the files above")
        else:
            for line in tidy(ruff, root, rewritten):
                print(line, file=sys.stderr)
    for p in problems:
        print(f"left: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
