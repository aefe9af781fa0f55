#!/usr/bin/env python3
"""Each folder of ``cassettes/`` one layer (issue 30, item 1): the moves, as a script to re-run.

    python .ci/relayer.py [--dry-run] [--check]

Run from the repository's root, on a clean work tree. It

1. ``git mv``\\ s the modules of :data:`MOVES` (old path → new path), making the new packages of
   :data:`PACKAGES` with their docstrings;
2. rewrites every reference to a moved module in the repository's text files (:data:`TEXT`):
   ``from cassettes.x.y import …``, ``import cassettes.x.y``, ``from cassettes.x import y``,
   dotted strings (monkeypatch / mock targets, lazy exports, entry points, ``python -m``),
   file paths (``cassettes/x/y.py``, and ``x/y.py`` relative to ``cassettes/``) and, in .md and
   .toml files, the short dotted names the docs use (``views.incremental``). By pattern, not by a
   list of files: what others added today is rewritten too;
3. rewrites the layer contract of ``pyproject.toml`` to whole packages (:data:`LAYERS`), the
   docstrings of the packages whose contents changed, and the ``cassettes/`` part of
   ``docs/layout.md`` (:data:`LAYOUT`) to the picture the folders draw;
4. reports what it could not map: a move whose old and new files both exist, or neither; any
   reference to an old module left after the rewrite (an unusual spelling), with its place.
   It exits 1 when there is one, after doing everything else.

Idempotent: a second run finds every module moved, rewrites nothing and reports nothing.
``--dry-run`` says what it would do; ``--check`` runs ``lint-imports`` afterwards.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: (old path, new path) of each module moved, under the repository's root.
MOVES: tuple[tuple[str, str], ...] = (
    # The normalised models are the base every layer above reads (providers build them, parsing
    # fills them, the analysis and the views read them): beside bounds and errors.
    ("cassettes/parsing/models.py", "cassettes/models.py"),
    # A WebSocket session read as turns needs the providers' turn rules: not "uninterpreted wire".
    ("cassettes/wire/websocket.py", "cassettes/recording/_websocket.py"),
    # The mitmproxy-flow reader beside the other readers of files (vcr).
    ("cassettes/interop/mitmflow.py", "cassettes/storage/_mitmflow.py"),
    # Reading a run, in one package: open_run / Run and the large or growing file's reader. (The
    # diff of two runs stays in replay/: it aligns requests with replay's matcher.)
    ("cassettes/interop/run.py", "cassettes/reading/_run.py"),
    ("cassettes/views/incremental.py", "cassettes/reading/_incremental.py"),
    # The MCP server (looptap mcp), its stdio transport and the queries it answers, in one package.
    ("cassettes/interop/mcp.py", "cassettes/mcp/_server.py"),
    ("cassettes/interop/mcpstdio.py", "cassettes/mcp/_stdio.py"),
    ("cassettes/interop/query.py", "cassettes/mcp/_query.py"),
    # The MCP server's fork_diff tool (read-only): its query beside the others.
    ("cassettes/interop/forkquery.py", "cassettes/mcp/_forkquery.py"),
    # The HTML report (export --html, and the pytest plugin's page of a failed test) is a view of
    # a run: its data builder and its page, beside show's text and JSON (replay may import views).
    ("cassettes/interop/report.py", "cassettes/views/_report.py"),
    ("cassettes/interop/htmlpage.py", "cassettes/views/_htmlpage.py"),
    ("cassettes/interop/report_assets", "cassettes/views/report_assets"),
)

#: New packages and their docstrings (also rewritten in existing packages whose contents changed).
PACKAGES: dict[str, str] = {
    "cassettes/wire": "What crossed the wire, uninterpreted: the raw exchange, Content-Encoding "
    "decoding and stream framing (SSE, NDJSON, JSON arrays, AWS event streams).",
    "cassettes/parsing": "Raw bytes to meaning: one exchange parsed through its provider "
    "(``roundtrip``) into the normalised models (:mod:`looptap.cassettes.models`), and parse once "
    "(``sealed``: the writer's parse reused by readers). The adapters themselves live in "
    "``cassettes/providers/``.",
    "cassettes/storage": "Files of round trips: the cassette's record format and migrations "
    "(``codec``), appends and forgiving reads (``store``), the offset index for incremental "
    "reading of large files (``index``), vcrpy cassettes (``vcr``), mitmproxy flow files "
    "(``mitmflow``) and the paths looptap writes (``paths``).",
    "cassettes/recording": "The one recording pipeline (redact, delta-encode, parse, seal, "
    "append), the redactor (``redact``, ``bodies``, ``scrub``, ``names``, ``streams``) and its "
    "secret detector, and WebSocket sessions read as turns (``websocket``).",
    "cassettes/interop": """Interoperability: a run out to other tools, and the commands that move runs in and out.

* :mod:`looptap.cassettes.interop._otel` — OpenTelemetry GenAI spans (OTLP/JSON, OTLP/HTTP protobuf);
* :mod:`looptap.cassettes.interop._har` — HAR 1.2 (browser devtools, mitmweb);
* :mod:`looptap.cassettes.interop._textconv` — a stable line-per-item rendering for ``git diff``;
* :mod:`looptap.cassettes.interop._command` — ``looptap import`` / ``export`` / ``textconv``.

Files read in (vcrpy cassettes, mitmproxy flows) are read by :mod:`looptap.cassettes.storage`.
""",  # noqa: E501
    "cassettes/views": "A run for people and tools: ``show`` text and the ``show --json`` object "
    "(``view``, ``schema``), turn summaries, search, timelines and token growth.",
    "cassettes/reading": "Reading a run: ``open_run`` and :class:`~looptap.cassettes.reading.Run` "
    "(``run``), and the large or growing run read a batch at a time (``incremental``).",
    "cassettes/mcp": "``looptap mcp``: the MCP server (``server``), its stdio transport "
    "(``stdio``) and the queries it answers over a root of runs (``query``), in bounded safe JSON "
    "(``answers``) with recorded parts (``recorded``).",
}

#: The layer contract of cassettes/, top to bottom, in whole packages (and the base modules).
LAYERS: tuple[str, ...] = (
    "cli",
    "demo : verify",
    "interop : mcp",
    "replay",
    "reading",
    "views",
    "analysis : recording",
    "parsing",
    "providers : storage",
    "wire",
    "models : bounds : errors : untrusted : _version : _unsafe_chars",
)

CONTRACT_NAME = (
    "cassettes/ in layers, one folder each: commands, replay, reading, views, analysis and "
    "recording, parsing, providers and storage, the wire, the base"
)

#: docs/layout.md's part on cassettes/ (from its first line to the line before ``- `proxy/```).
LAYOUT = """\
- `cassettes/` — the core; imports neither mitmproxy nor textual. Each folder is one layer and
  imports only from the folders below it (import-linter's contract in `pyproject.toml`, in whole
  packages, checked by `tests/test_boundaries.py`). Top to bottom:
  - `cli` (the `looptap` command); then `demo`, `verify`;
  - `interop/` (export and import: OpenTelemetry, HAR, textconv, the `import`/`export`
    commands) beside `mcp/` (`looptap mcp`: `server`, `stdio`, and the `query` it answers, in bounded safe JSON
    (`answers`) with recorded parts (`recorded`));
  - `replay/` — server, matcher, HTTP/1.1 reader, faults, pytest plugin, recorder helper and its
    ready file, where two runs diverge (`rundiff`);
  - `reading/` — a run: `open_run` and `Run` (`run`), and the large or growing run read a batch at
    a time for the inspector (`incremental`);
  - `views/` — a run for people and tools: `show` text (`view`), the `looptap.roundtrip/1` object
    and its model (`schema`), turn summaries, search, timelines, token growth;
  - `analysis/` (conversations, the E/A/C views and findings, token accounting and prices, MCP
    linking) beside `recording/` (the one recording `pipeline`: Content-Encoding removed → redact →
    delta-encode → parse → seal → file; the `redact`or (headers, URLs, exchanges) on `bodies` (by
    field name, streams too) on `scrub` (by value learned and by pattern), with what names a credential (`names`), a
    stream's events found and rewritten in place (`streams`) and the secret `detector` shared with
    `verify`; WebSocket sessions read as turns, `websocket`);
  - `parsing/` — raw bytes to meaning: `roundtrip` (one exchange through its provider) and
    `sealed` (the writer's parse stored with its record, taken by a reader when this machine's key
    and the parser's source vouch for it);
  - `providers/` (one adapter per API family and the registry, adapters loaded on first use;
    `Provider` is parsing plus four roles in `_facets.py`) beside `storage/` (files of round trips:
    record format and migrations, `codec`; appends and forgiving reads, `store`; the offset `index`;
    vcrpy cassettes, `vcr`; mitmproxy flow files, `mitmflow`; `paths`, every path a user names that
    looptap writes);
  - `wire/` — what crossed the wire, uninterpreted: the raw `exchange`, Content-Encoding
    `decoding`, stream `framing`;
  - the base: the normalised `models`, `bounds`, `errors`, `untrusted`, `_version`.
"""  # noqa: E501

#: Text files whose references are rewritten (by suffix; files without one under .ci/ too).
TEXT = (
    ".py",
    ".pyi",
    ".md",
    ".toml",
    ".txt",
    ".cfg",
    ".ini",
    ".json",
    ".sh",
    ".tcss",
    ".yml",
    ".yaml",
)
#: Never rewritten: recorded data, generated snapshots, vendored code.
SKIP = ("tests/corpus/", "tests/cassettes/corpus", "__snapshots__/", "node_modules/", ".venv")


def _dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _git(*args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], check=check, capture_output=True, text=True).stdout


class Relayer:
    def __init__(self, root: Path, dry: bool) -> None:
        self.root, self.dry = root, dry
        self.unmapped: list[str] = []
        self.did: list[str] = []

    # -- 1. the moves ----------------------------------------------------------------------------
    def move(self) -> None:
        for pkg, doc in PACKAGES.items():
            init = self.root / pkg / "__init__.py"
            if not init.exists() and any(new.startswith(pkg + "/") for _, new in MOVES):
                self._write(init, f'"""{doc}"""\n')
        for old, new in MOVES:
            o, n = self.root / old, self.root / new
            if o.exists() and n.exists():
                self.unmapped.append(
                    f"{old} and {new} both exist: not moved (merge them by hand, then run again)"
                )
            elif o.exists():
                self.did.append(f"git mv {old} {new}")
                if not self.dry:
                    n.parent.mkdir(parents=True, exist_ok=True)
                    _git("mv", old, new)
            elif not n.exists():
                self.unmapped.append(
                    f"{old}: neither it nor {new} exists (renamed by someone else? map it in MOVES)"
                )

    # -- 2. references ---------------------------------------------------------------------------
    def _rules(self) -> list[tuple[re.Pattern[str], str, tuple[str, ...]]]:
        """(pattern, replacement, suffixes it applies to; empty: all)."""
        rules: list[tuple[re.Pattern[str], str, tuple[str, ...]]] = []
        for old, new in MOVES:
            od, nd = _dotted(old), _dotted(new)
            opkg, _, oname = od.rpartition(".")
            npkg, _, nname = nd.rpartition(".")
            alias = "" if oname == nname else f" as {oname}"
            # from cassettes.x import y  (alone on its line: the name stays bound as before)
            rules.append(
                (
                    re.compile(
                        rf"^(\s*)from {re.escape(opkg)} import {re.escape(oname)}(\s*(?:#.*)?)$",
                        re.M,
                    ),
                    rf"\1from {npkg} import {nname}{alias}\2",
                    (".py", ".pyi"),
                )
            )
            # from cassettes.x import y, z  → the moved name on a line of its own
            rules.append(
                (
                    re.compile(
                        rf"^(\s*)from {re.escape(opkg)} import ((?:\w+(?: as \w+)?, "
                        rf")*){re.escape(oname)}((?:, \w+(?: as \w+)?)*)(\s*(?:#.*)?)$",
                        re.M,
                    ),
                    rf"\1from {opkg} import \2\3\4\n\1from {npkg} import {nname}{alias}",
                    (".py", ".pyi"),
                )
            )
            # the dotted name anywhere: imports, strings, entry points, python -m, docs
            rules.append((re.compile(rf"(?<![\w.]){re.escape(od)}(?![\w])"), nd, ()))
            # paths: cassettes/x/y.py, and x/y.py relative to cassettes/ (sealed's sources, docs)
            rel_old, rel_new = old.removeprefix("cassettes/"), new.removeprefix("cassettes/")
            rules.append((re.compile(rf"(?<![\w./-]){re.escape(old)}(?![\w])"), new, ()))
            rules.append(
                (
                    re.compile(rf"(?<![\w./-]){re.escape(old.removesuffix('.py'))}(?![\w./])"),
                    new.removesuffix(".py"),
                    (),
                )
            )
            rules.append((re.compile(rf"(?<![\w./-]){re.escape(rel_old)}(?![\w])"), rel_new, ()))
            # the short dotted names of the docs and of the contract (views.incremental)
            short_old, short_new = od.removeprefix("looptap.cassettes."), nd.removeprefix("looptap.cassettes.")
            rules.append(
                (
                    re.compile(rf"(?<![\w./]){re.escape(short_old)}(?![\w])"),
                    short_new,
                    (".md", ".toml"),
                )
            )
        return rules

    def _files(self) -> list[Path]:
        listed = _git("ls-files", "-co", "--exclude-standard").splitlines()
        out = []
        for name in listed:
            if any(s in name for s in SKIP):
                continue
            p = self.root / name
            if not p.is_file() or p.is_symlink():
                continue
            if name.endswith(TEXT) or (name.startswith(".ci/") and "." not in Path(name).name):
                out.append(p)
        return out

    def rewrite(self) -> None:
        rules = self._rules()
        me = Path(__file__).resolve()
        for p in self._files():
            if p.resolve() == me:
                continue
            try:
                text = p.read_text("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            new = text
            for pat, rep, suffixes in rules:
                if not suffixes or p.name.endswith(suffixes):
                    new = pat.sub(rep, new)
            if new != text:
                self.did.append(f"rewrote {p.relative_to(self.root)}")
                self._write(p, new)

    # -- 3. contract, docstrings, layout ---------------------------------------------------------
    def contract(self) -> None:
        p = self.root / "pyproject.toml"
        text = p.read_text("utf-8")
        m = re.search(
            r'(name = ")[^"\n]*("\ntype = "layers"\s*\ncontainers '
            r'= \["cassettes"\]\s*\nlayers = \[)(.*?)(\n\])',
            text,
            re.S,
        )
        if m is None:
            self.unmapped.append(
                "pyproject.toml: the layers contract of cassettes/ was not found: not rewritten"
            )
            return
        body = "".join(f'\n  "{layer}",' for layer in LAYERS)
        new = (
            text[: m.start()]
            + m.group(1)
            + CONTRACT_NAME
            + m.group(2)
            + body
            + m.group(4)
            + text[m.end() :]
        )
        if new != text:
            self.did.append("rewrote the layer contract in pyproject.toml")
            self._write(p, new)

    def docstrings(self) -> None:
        for pkg, doc in PACKAGES.items():
            init = self.root / pkg / "__init__.py"
            if not init.exists():
                continue
            text = init.read_text("utf-8")
            m = re.match(r'\s*(""".*?""")', text, re.S)
            want = f'"""{doc}"""'
            if m is None:
                new = want + "\n" + text
            else:
                new = text[: m.start(1)] + want + text[m.end(1) :]
            if new != text:
                self.did.append(f"docstring of {pkg}")
                self._write(init, new)

    def layout(self) -> None:
        p = self.root / "docs" / "layout.md"
        if not p.exists():
            return
        text = p.read_text("utf-8")
        start = text.find("- `cassettes/` —")
        end = text.find("\n- `proxy/`", start)
        if start < 0 or end < 0:
            self.unmapped.append("docs/layout.md: the cassettes/ part was not found: not rewritten")
            return
        new = text[:start] + LAYOUT.rstrip("\n") + text[end:]
        if new != text:
            self.did.append("rewrote the cassettes/ part of docs/layout.md")
            self._write(p, new)

    # -- 4. what is left -------------------------------------------------------------------------
    def leftovers(self) -> None:
        olds = [(_dotted(o), o) for o, _ in MOVES]
        pats = [
            re.compile(rf"(?<![\w.]){re.escape(d)}(?![\w])|(?<![\w./-]){re.escape(o)}")
            for d, o in olds
        ]
        me = Path(__file__).resolve()
        for p in self._files():
            if p.resolve() == me or not p.exists():
                continue
            try:
                lines = p.read_text("utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for i, line in enumerate(lines, 1):
                if any(pat.search(line) for pat in pats):
                    self.unmapped.append(
                        f"{p.relative_to(self.root)}:{i}: still names a moved module: "
                        f"{line.strip()[:120]}"
                    )

    def sort_imports(self) -> None:
        """The rewritten Python files' imports sorted again (a moved module sorts elsewhere), by the
        project's ruff (isort rules only); without ruff, say so."""
        files = [
            line.removeprefix("rewrote ")
            for line in self.did
            if line.startswith("rewrote ") and line.endswith((".py", ".pyi"))
        ]
        if not files or self.dry:
            return
        ruff = Path(sys.executable).parent / "ruff"
        cmd = [
            str(ruff) if ruff.exists() else "ruff",
            "check",
            "--fix",
            "--select",
            "I",
            "--quiet",
            *files,
        ]
        try:
            subprocess.run(cmd, check=False, cwd=self.root, capture_output=True)
        except FileNotFoundError:
            self.unmapped.append(
                "ruff not found: run `ruff check --fix --select I` on the rewritten files"
            )

    def _write(self, p: Path, text: str) -> None:
        if not self.dry:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, "utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    ap.add_argument("--check", action="store_true", help="run lint-imports afterwards")
    args = ap.parse_args()
    root = Path(_git("rev-parse", "--show-toplevel").strip())
    r = Relayer(root, args.dry_run)
    import os

    os.chdir(root)
    r.move()
    if not args.dry_run:
        r.rewrite()
        r.contract()
        r.docstrings()
        r.layout()
        r.sort_imports()
        r.leftovers()
    for line in r.did:
        print(line)
    if not r.did:
        print("nothing to do: every module is where the mapping puts it")
    if "rewrote pyproject.toml" in r.did:
        print(
            "note: pyproject.toml's entry points name the moved modules: reinstall (uv pip install "
            "-e .) before running looptap",
            file=sys.stderr,
        )
    for line in r.unmapped:
        print("NOT MAPPED:", line, file=sys.stderr)
    if args.check and not args.dry_run:
        lint = Path(sys.executable).parent / "lint-imports"
        rc = subprocess.run(
            [str(lint) if lint.exists() else "lint-imports"], check=False
        ).returncode
        if rc:
            return rc
    return 1 if r.unmapped else 0


if __name__ == "__main__":
    sys.exit(main())
