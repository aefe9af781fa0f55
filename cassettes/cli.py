"""The ``looptap`` command.

Core subcommands live here (``import``, ``show``). Subcommands of the other packages (``run`` and
``record`` from ``proxy``, ``inspect`` from ``inspector``) register themselves through the
``looptap.commands`` entry-point group, so this core never imports them.

Errors are converted here, at the boundary: one clear line on stderr and a non-zero exit, never a
traceback for bad input.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cassettes import interrupts
from cassettes.errors import CassetteError, problem_lines

interrupts.watch()  # first: a Ctrl-C swallowed by any later import is still honoured

# orjson's module init assumes its own imports succeed: a Ctrl-C landing inside it (the first
# ~0.1 s of every command) is a segmentation fault, not a KeyboardInterrupt (ijl/orjson#310).
# SIGINT is held for the import and arrives right after it, as an ordinary KeyboardInterrupt.
_HELD = (
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if hasattr(signal, "pthread_sigmask")
    else None
)
try:
    import orjson
finally:
    if _HELD is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _HELD)

if TYPE_CHECKING:
    from cassettes.storage.paths import Target

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 2


def _err(msg: str) -> None:
    print(f"looptap: {msg}", file=sys.stderr)




def cmd_show(args: argparse.Namespace) -> int:
    with loading():
        from cassettes import providers
        from cassettes.reading.run import open_run
        from cassettes.views import roundtrip_object  # noqa: F401 - show_pairs' (loaded here)
        from cassettes.views.view import analysis_lines, summary_lines

        providers.FAMILIES  # noqa: B018 - the adapters, which the first round trip would load

    from cassettes.views.progress import reading_line

    path = Path(args.file)
    with reading_line(path.name) as progress:
        run = open_run(path, progress=progress, cache=not getattr(args, "no_cache", False))
    for p in problem_lines(run.problems):
        _err(f"warning: {path}: {p}")
    keep = _show_filter(args, run.analysis)
    from cassettes.reading.shown import show_pairs
    from cassettes.views.view import GrowthRows

    # Each turn is restored once, by show_pairs(); the growth tables printed after take its row
    # from there.
    growth = None if args.json else GrowthRows()

    # those kept with a kept analysis, else made (and kept)
    inferred: dict[str, int] = {}  # findings resting on what an import inferred, by code

    def views() -> Iterator[dict[str, Any]]:
        for v, row in run.printed(lambda: show_pairs(run, path)):
            if row is not None and growth is not None:
                growth.put(v["seq"], row)
            for f in v["findings"] if v.get("reconstructed") else []:
                if f.get("details", {}).get("inferred"):
                    inferred[f["code"]] = inferred.get(f["code"], 0) + 1
            yield v

    shown = 0

    def kept() -> Iterator[dict[str, Any]]:  # the filters: a predicate on what is printed
        nonlocal shown
        for v in views():
            if keep is None or keep.roundtrip(v):
                shown += 1
                yield v

    if args.json:
        out = sys.stdout.buffer
        for v in kept():
            out.write(orjson.dumps(v, option=orjson.OPT_APPEND_NEWLINE))
        out.flush()
    else:
        assert growth is not None
        title = str(path)
        from cassettes.reading.branch import branch_line, branch_origin

        origin = branch_origin(run.header, path)
        # a fork's branch says so first (its turns keep the origin's numbers)
        if origin is not None:
            from cassettes.untrusted import clean_line

            title += "\n" + clean_line(branch_line(origin))
            title += "".join("\n" + clean_line(line) for line in _prefix_lines(path, origin))
        _print_lines(
            summary_lines(
                kept(), run.problems, title=title, total=len(run.exchanges), families=run.families
            )
        )
        _print_lines(
            analysis_lines(
                keep.analysis(run.analysis) if keep is not None else run.analysis, growth
            )
        )
        growth.close()
        if inferred:
            from cassettes.hints import count

            said = ", ".join(f"{code} ×{n}" for code, n in sorted(inferred.items()))
            print(
                f"\n{count(sum(inferred.values()), 'finding')} above rest on what an imported "
                "trace did not give (looptap inferred it when it rebuilt the round trip; not "
                f"evidence): {said}"
            )
        if keep is not None:
            from cassettes.hints import count

            print(
                f"\nfiltered ({keep.said}): {count(shown, 'round trip')} "
                f"of {len(run.exchanges):,} shown"
            )
    return EXIT_OK



def _prefix_lines(path: Path, origin: dict[str, Any]) -> list[str]:
    """``show``'s lines for what a branch's prefix tolerated (recorded text: the caller cleans
    them)."""
    from cassettes.matching import report_lines
    from cassettes.reading.branch import fork_notes

    notes = fork_notes(path)["tolerated"]
    if not notes:
        return []
    mode = origin.get("prefix") if isinstance(origin.get("prefix"), str) else "strict"
    return [
        f"tolerated in the prefix (--prefix {mode}), each turn served from the origin in position:",
        *report_lines(notes),
    ]


def _print_lines(lines: Iterable[str]) -> None:
    """Print each line, a few hundred at a time: one write of many lines through the guarded
    stdout costs a fraction of one write per line (the same bytes)."""
    out = sys.stdout
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= 256:
            out.write("\n".join(chunk) + "\n")
            chunk = []
    if chunk:
        out.write("\n".join(chunk) + "\n")


_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


class ShowFilter:
    """``show --conversation/--turn/--layer/--severity``: which round trips and findings print.
    A round trip is kept when it is in the conversation and turn asked for and, with a layer or
    severity, has a finding of that layer at least that severe."""

    def __init__(
        self, conversation: str | None, turn: int | None, layer: str | None, severity: str | None
    ) -> None:
        self.conversation, self.turn, self.layer = conversation, turn, layer
        self.least = _SEVERITY_RANK[severity] if severity else None
        self.said = ", ".join(
            f"{k} {v}"
            for k, v in (
                ("conversation", conversation),
                ("turn", turn),
                ("layer", layer),
                ("severity", severity and f">= {severity}"),
            )
            if v is not None
        )

    def _finding(self, f: dict[str, Any]) -> bool:
        return (self.layer is None or f.get("layer") == self.layer) and (
            self.least is None or _SEVERITY_RANK.get(str(f.get("severity")), 0) >= self.least
        )

    def _place(self, conversation: Any, turn: Any) -> bool:
        return (self.conversation is None or conversation == self.conversation) and (
            self.turn is None or turn == self.turn
        )

    def roundtrip(self, v: dict[str, Any]) -> bool:
        if not self._place(v.get("conversation"), v.get("turn")):
            return False
        if self.layer is None and self.least is None:
            return True
        return any(self._finding(f) for f in v.get("findings") or [])

    def analysis(self, analysis: Any) -> Any:
        """The analysis with only the findings and conversations asked for (a shallow copy)."""
        findings = [
            f
            for f in analysis.findings
            if self._place(f.conversation, f.turn)
            and self._finding({"layer": f.layer, "severity": f.severity.value})
        ]
        with_findings = {f.conversation for f in findings}
        convs = _Kept(
            analysis.conversations,
            lambda c: (
                (self.conversation is None or c.id == self.conversation)
                and ((self.layer is None and self.least is None) or c.id in with_findings)
            ),
        )
        return analysis.model_copy(update={"findings": findings, "conversations": convs})


class _Kept(Sequence[Any]):
    """The conversations a filter keeps, read from the run's on each pass (never held: ``--turn 0``
    of a million conversations keeps them all)."""

    def __init__(self, items: Sequence[Any], keep: Callable[[Any], bool]) -> None:
        self._items, self._keep = items, keep
        self._len: int | None = None

    def __iter__(self) -> Iterator[Any]:
        return (c for c in self._items if self._keep(c))

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(1 for _ in self)
        return self._len

    def __getitem__(self, i: Any) -> Any:
        return list(self)[i]


def _show_filter(args: argparse.Namespace, analysis: Any) -> ShowFilter | None:
    """The filter ``show`` was asked for, ``None`` for none; a :class:`CassetteError` when it
    names a conversation the run does not have."""
    conversation, turn = getattr(args, "conversation", None), getattr(args, "turn", None)
    layer, severity = getattr(args, "layer", None), getattr(args, "severity", None)
    if conversation is None and turn is None and layer is None and severity is None:
        return None
    if conversation is not None and not any(c.id == conversation for c in analysis.conversations):
        from cassettes.untrusted import clean_line

        # (not every id: a run may have millions)
        ids = [c.id for c, _ in zip(analysis.conversations, range(21), strict=False)]
        n = len(analysis.conversations)
        listed = ", ".join(ids[:20]) + (f", … ({n} in all)" if n > 20 else "")
        raise CassetteError(
            f"--conversation {clean_line(conversation)[:80]}: no such conversation in this run (it "
            f"has {listed or 'none'})"
        )
    return ShowFilter(conversation, turn, layer, severity)


#: What ``import`` picks up in a directory (a file named on the command line is read whatever its
#: name).
_IMPORT_SUFFIXES = (".yaml", ".yml", ".mitm", ".flow", ".flows")
#: …and traces or trajectories (docs/interop.md), when their content says they are such.
_TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".pb", ".otlp")


def _trace_kind(path: Path) -> str | None:
    """What trace format ``path`` holds (``cassettes.interop.traces.sniff``), ``None`` for none."""
    from cassettes.interop.traces import sniff

    try:
        with path.open("rb") as f:
            return sniff(f.read(1 << 16))
    except OSError:
        return None


def _trace_runs(files: list[tuple[Path, Path]]) -> tuple[dict[Path, tuple[str, int]], int]:
    """Each trace file's format and how many runs it holds (read through once: a damaged file is
    refused here, before anything is written), and how many failed."""
    from cassettes.interop.traces import runs_in

    runs: dict[Path, tuple[str, int]] = {}
    failures = 0
    for src, _rel in files:
        kind = _trace_kind(src) if src.is_file() else None
        if kind is None:
            continue
        if kind != "trajectory":  # a trace is one run (read whole before a byte is written)
            runs[src] = (kind, 1)
            continue
        try:
            runs[src] = (kind, sum(1 for _ in runs_in(src, kind)))
        except CassetteError as exc:
            _err(f"error: {exc}")
            failures += 1
    return runs, failures


def _split_runs(
    files: list[tuple[Path, Path]], runs: dict[Path, tuple[str, int]]
) -> list[tuple[Path, Path]]:
    """A file of several trajectories gives one cassette each: ``NAME-1``, ``NAME-2`` …"""
    out: list[tuple[Path, Path]] = []
    for src, rel in files:
        n = runs.get(src, ("", 1))[1]
        if n == 1:
            out.append((src, rel))
        else:
            out.extend((src, rel.with_name(f"{rel.stem}-{k}{rel.suffix}")) for k in range(1, n + 1))
    return out


def _import_plan(inputs: list[Path]) -> list[tuple[Path, Path]]:
    """(source file, where it goes under -o): a directory's tree is mirrored (its files keep
    their relative paths), so files with the same base name in different folders never collide;
    with several inputs each directory is mirrored under its own name."""
    files: list[tuple[Path, Path]] = []
    for p in inputs:
        if p.is_dir():
            base = Path(p.resolve().name) if len(inputs) > 1 else Path()
            files.extend(
                (q, base / q.relative_to(p))
                for q in sorted(p.rglob("*"))
                if q.is_file()
                and (
                    q.suffix.lower() in _IMPORT_SUFFIXES
                    or (q.suffix.lower() in _TRACE_SUFFIXES and _trace_kind(q) is not None)
                )
            )
        else:
            files.append((p, Path(p.name)))
    return files


def _import_dest(
    src: Path, rel: Path, out: Path | None, many: bool, written: set[Path], quiet: bool
) -> Path:
    """Where one input goes. Never lose a file: a destination written earlier in this run is
    never replaced (two inputs that map to one name, ``a.yaml`` and ``a.yml``, get distinct
    names)."""
    if not many:  # without -o: the input's name, in the current directory (never beside the input)
        return out or Path(src.with_suffix(".jsonl").name)
    dest = (out or Path(".")) / rel.with_suffix(".jsonl")
    if dest in written:
        dest = dest.with_name(rel.name + ".jsonl")
    n = 2
    while dest in written:
        dest = dest.with_name(f"{rel.name}.{n}.jsonl")
        n += 1
    if dest.name != rel.with_suffix(".jsonl").name and not quiet:
        print(f"note: {src} → {dest} (another input already maps to {rel.with_suffix('.jsonl')})")
    return dest


def _import_one(src: Path, target: Target) -> str:
    """Import one vcrpy or mitmproxy file into a new cassette at the checked ``target``, written
    under a private name beside it and put in place whole (storage/paths.py); the summary line."""
    from cassettes.reading.run import open_run
    from cassettes.recording.pipeline import CassetteWriter
    from cassettes.storage.paths import staged

    dest = target.path
    run = open_run(src, formats=("vcr", "mitmproxy"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    fams: dict[str, int] = {}
    errors = 0
    skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(run.skipped.items()))
    extra = f", skipped non-HTTP flows: {skipped}" if skipped else ""
    with (
        staged(target) as s,
        CassetteWriter(s.path, meta={"source": run.kind, "imported_from": src.name}) as w,
    ):
        for ex in run.exchanges:
            rt = w.append(ex)
            fams[rt.family] = fams.get(rt.family, 0) + 1
            errors += bool(rt.analysis_errors)
    llm = sum(n for f, n in fams.items() if f != "none")
    fam_text = ", ".join(f"{f} {n}" for f, n in sorted(fams.items()) if f != "none") or "none"
    flagged = f", {errors} with analysis errors" if errors else ""
    from cassettes.hints import count

    return (
        f"{src} → {dest}: {count(len(run.exchanges), 'round trip')}, {llm} LLM "
        f"({fam_text}){flagged}{extra}"
    )


def _file_id(path: Path) -> tuple[int, int] | None:
    """The device and inode ``path`` names (a link followed), ``None`` when there is no such
    file."""
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def cmd_import(args: argparse.Namespace) -> int:
    from cassettes.storage.paths import UnsafePath, check_target

    inputs = [Path(p) for p in args.inputs]
    files = _import_plan(inputs)
    if not files:
        _err("error: no input files")
        return EXIT_ERROR
    runs, failures = _trace_runs(files)
    files = _split_runs([f for f in files if f[0] in runs or not _trace_kind(f[0])], runs)
    if failures and not files:
        return EXIT_ERROR
    out = Path(args.output) if args.output else None
    many = len(files) > 1 or any(p.is_dir() for p in inputs)  # a directory's -o is a directory
    if many and out is not None and out.exists() and not out.is_dir():
        _err(f"error: several inputs need -o to be a directory, and {out} is a file")
        return EXIT_ERROR
    written: set[Path] = set()  # --force replaces only files that existed before the run
    planned: list[tuple[Path, Target]] = []
    sources = {_file_id(src) for src, _rel in files} - {None}
    for src, rel in files:  # every output checked before any is written: a refusal writes nothing
        dest = _import_dest(src, rel, out, many, written, args.quiet)
        written.add(dest)
        try:
            # The input itself, a link, a directory or a device is refused; an existing file unless
            # --force.
            if _file_id(dest) in sources:
                raise UnsafePath(
                    f"the import's output {dest} is a file it imports: give -o a path of its own"
                )
            planned.append(
                (
                    src,
                    check_target(
                        dest,
                        "the import's output",
                        force=args.force,
                        hint="use --force to replace it",
                        parents=True,
                    ),
                )
            )
        except UnsafePath as exc:
            _err(f"error: {exc}")
            failures += 1
    if failures and len(planned) < len(files):
        return EXIT_ERROR
    for src, targets in _grouped(planned):
        try:
            if src in runs:
                from cassettes.interop.traces import import_runs

                lines = import_runs(src, runs[src][0], targets)
            else:
                lines = [_import_one(src, targets[0])]
        except CassetteError as exc:
            _err(f"error: {exc}")
            failures += 1
            continue
        for line in lines if not args.quiet else []:
            print(line)
    return EXIT_ERROR if failures else EXIT_OK


def _grouped(planned: list[tuple[Path, Target]]) -> list[tuple[Path, list[Target]]]:
    """The targets of each input, in order (a file of several trajectories has one each)."""
    out: dict[Path, list[Target]] = {}
    for src, target in planned:
        out.setdefault(src, []).append(target)
    return list(out.items())


def cmd_demo(args: argparse.Namespace) -> int:
    """Record the bundled example agent through the proxy, offline, and show the run (the
    README's first command); without the recorder installed, show the bundled recording."""
    from cassettes.demo import run_demo

    return run_demo(
        Path(args.output), lambda path: cmd_show(argparse.Namespace(file=str(path), json=False))
    )


def _unavailable(name: str, exc: ImportError) -> Callable[[argparse.Namespace], int]:
    def run(_args: argparse.Namespace) -> int:
        _err(f"error: '{name}' is unavailable in this environment: {exc}")
        return EXIT_ERROR

    return run


#: The subcommands this module defines itself: a command line naming one loads no plugin.
_CORE_COMMANDS = ("show", "import", "demo")
#: The ``looptap.commands`` entry points (pyproject.toml) that the core itself provides: a command
#: line naming one of them registers it directly (``importlib.metadata`` and the scan of every
#: installed package's entry points cost more than the command's own start-up). The commands of
#: the recorder and the inspector, which may live in another environment, are found as entry points.
#: tests/test_startup_imports.py checks this table against pyproject.toml.
OWN_COMMANDS = {
    "replay": "cassettes.replay.cli:register_replay",
    "diff": "cassettes.replay.cli:register_diff",
    "compare": "cassettes.replay.cli:register_compare",
    "rules": "cassettes.replay.cli:register_rules",
    "export": "cassettes.interop.cli:register_export",
    "textconv": "cassettes.interop.cli:register_textconv",
    "mcp": "cassettes.mcp.server:register_mcp",
    "verify": "cassettes.verify:register_verify",
    "why": "cassettes.why.cli:register_why",
    "index": "cassettes.fleet.cli:register_index",
    "query": "cassettes.fleet.cli:register_query",
    "fleet": "cassettes.fleet.cli:register_fleet",
}


def _plugins(sub: Any, command: str | None = None) -> None:
    """Subcommands contributed by other packages through the ``looptap.commands`` entry points:
    only ``command``'s when one by that name is installed (a command line runs one command; the
    others' modules need not load), else all of them (help, or a name to complain about)."""
    own = OWN_COMMANDS.get(command or "")
    if own is not None:  # the core's own: no need to read every installed package's metadata
        from importlib import import_module

        module, _, name = own.partition(":")
        getattr(import_module(module), name)(sub)
        return
    from importlib.metadata import entry_points

    eps = list(entry_points(group="looptap.commands"))
    named = [ep for ep in eps if ep.name == command]
    for ep in named or eps:
        try:
            register = ep.load()
        except ImportError as exc:
            # The package is installed in another environment (e.g. the recorder beside mitmproxy).
            p = sub.add_parser(ep.name, help=f"(unavailable here: {exc})")
            p.set_defaults(func=_unavailable(ep.name, exc))
            continue
        register(sub)


class _Version(argparse.Action):
    """``--version``: the installed version, read when asked (``importlib.metadata`` is not
    loaded by every command)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from cassettes._version import __version__

        parser.exit(message=f"looptap {__version__}\n")


def subcommand_of(argv: Sequence[str] | None) -> str | None:
    """The subcommand a command line names: its first argument that is not an option (the
    top-level options, ``-h`` and ``--version``, take no value)."""
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if not a.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``looptap`` parser; with ``command``, only that subcommand's plugin is loaded (all of
    them when it names none)."""
    parser = argparse.ArgumentParser(
        prog="looptap",
        description="Record, inspect and replay LLM agent traffic; label what the model (E), the "
        "API (A) and the client (C) did.",
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser(
        "show", help="print a run: one summary per round trip (or --json, one object per line)"
    )
    p.add_argument(
        "file",
        help="a looptap cassette, a vcrpy cassette or a mitmproxy "
        "flow file (told apart by content)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per round trip (schema looptap.roundtrip/1)",
    )
    p.add_argument(
        "--conversation",
        metavar="ID",
        help="only this conversation's round trips and findings (c1, c2, …)",
    )
    p.add_argument(
        "--turn", type=int, metavar="N", help="only turn N (0-based) of each conversation shown"
    )
    p.add_argument(
        "--layer",
        choices=("E", "A", "C"),
        help="only round trips with a finding of this layer, and those findings",
    )
    p.add_argument(
        "--severity",
        choices=("error", "warning", "info"),
        help="only round trips with a finding at least this severe, and those findings",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="analyse the run afresh and keep nothing (as LOOPTAP_NO_CACHE=1; "
        "docs/kept-analysis.md)",
    )
    p.set_defaults(func=cmd_show)
    p = sub.add_parser(
        "import", help="import vcrpy / pytest-recording YAML cassettes and mitmproxy flow files"
    )
    p.add_argument(
        "inputs",
        nargs="+",
        help="vcrpy cassettes or mitmproxy flow files (mitmdump -w), or directories of them "
        "(*.yaml, *.yml, *.mitm, *.flow, *.flows)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="output cassette (one input; default: the input's name as .jsonl in the current "
        "directory) or directory (several inputs or a directory; default: the current directory)",
    )
    p.add_argument("-f", "--force", action="store_true", help="replace existing output files")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser(
        "demo", help="record the bundled example agent through the proxy (offline) and show the run"
    )
    p.add_argument(
        "-o", "--output", default="looptap-demo.jsonl", help="where to write the demo cassette"
    )
    p.set_defaults(func=cmd_demo)
    if command not in _CORE_COMMANDS:
        _plugins(sub, command)
    return parser


#: The cyclic garbage collector's thresholds for a looptap process. Reading a run allocates
#: millions of small containers, most of them kept to the end (summaries, hashes, the analysis):
#: with CPython's defaults (700, 10, 10) the collector walks them thousands of times, 7-8 % of
#: reading a large run (bench/inspector.py). Only the first generation's threshold is raised: older
#: generations at 50 held a hostile delta bomb's garbage longer (1.1 GB against 0.8 GB peak) for
#: 2 % more speed. A process may set its own collector, so the command line does; library
#: functions never touch it.
GC_THRESHOLDS = (10_000, 10, 10)


def tune_gc() -> None:
    """Collect less often, as :data:`GC_THRESHOLDS` says (what ``looptap`` does at start), and
    not at the interpreter's exit: there the collector walked every object the command left (the
    modules, pydantic's validators, the run), a fifth of a small ``show``'s CPU time, to free
    memory the process gives back by ending. ``gc.freeze`` runs from ``atexit``, so only when the
    process ends (a test calling :func:`main` keeps its collector until then); the exit handlers
    still run, and files are closed by their ``with`` blocks, not by the collector."""
    import atexit
    import gc

    gc.set_threshold(*GC_THRESHOLDS)
    atexit.unregister(gc.freeze)  # once, however often main() runs in one process
    atexit.register(gc.freeze)


@contextmanager
def loading() -> Iterator[None]:
    """A command's imports, with the cyclic collector paused, then frozen (``gc.freeze``) the
    first time in a process. Importing builds a great many containers (classes, functions,
    pydantic's validators) that are never garbage: the collector walked each of them at least
    once, about 1 % of a small ``show``'s work, and every full collection of a long command walked
    them again; frozen, they are left out of every later collection. A process that runs
    :func:`main` again (the tests) freezes nothing more, so what its earlier work left stays
    collectable. As :func:`tune_gc`: for the command line, never for library callers."""
    import gc

    from cassettes.pydantic_plugins import discover_lazily

    enabled = gc.isenabled()
    gc.disable()
    try:
        # pydantic's plugins found without importlib.metadata when none is declared
        discover_lazily()
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
        if enabled:
            gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(subcommand_of(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_ERROR
    tune_gc()
    from cassettes.untrusted import guard_stdio

    # One output boundary: every line any command prints (its own, a plugin's, an error's) passes
    # through the sanitiser, so recorded text can never drive the terminal (cassettes/untrusted.py).
    with guard_stdio():
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except CassetteError as exc:
        _err(f"error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        # Whatever a budget did not foresee: one line, not a traceback (the memory is free again).
        _err("error: out of memory (the input is too large for the memory this process may use)")
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (``looptap show … | head``): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not complain.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        _err(f"error: {exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
