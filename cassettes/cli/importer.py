"""``looptap import``: vcrpy and LangChain cassettes, mitmproxy files, and traces or trajectories,
as new cassettes (a directory's tree mirrored under ``-o``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..commands import EXIT_ERROR, EXIT_OK, err
from ..errors import CassetteError
from ..hints import count
from ..interop import import_runs, runs_in, sniff
from ..parsing import parse_exchange
from ..reading import open_run
from ..recording.pipeline import CassetteWriter
from ..storage import Target, UnsafePath, check_target, staged

__all__ = ["cmd_import"]

#: What ``import`` picks up in a directory (a file named on the command line is read whatever its
#: name).
_IMPORT_SUFFIXES = (".yaml", ".yml", ".mitm", ".flow", ".flows")
#: …and gzipped YAML (LangChain's cassettes: ``NAME.yaml.gz``).
_GZIP_SUFFIXES = (".yaml.gz", ".yml.gz")
#: …and traces or trajectories (docs/interop.md), when their content says they are such.
_TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".pb", ".otlp")


def _trace_kind(path: Path) -> str | None:
    """What trace format ``path`` holds (``cassettes.interop._traces.sniff``), ``None`` for none."""
    try:
        with path.open("rb") as f:
            return sniff(f.read(1 << 16))
    except OSError:
        return None


def _trace_runs(files: list[tuple[Path, Path]]) -> tuple[dict[Path, tuple[str, int]], int]:
    """Each trace file's format and how many runs it holds (read through once: a damaged file is
    refused here, before anything is written), and how many failed."""
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
            err(f"error: {exc}")
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
                    or q.name.lower().endswith(_GZIP_SUFFIXES)
                    or (q.suffix.lower() in _TRACE_SUFFIXES and _trace_kind(q) is not None)
                )
            )
        else:
            files.append((p, Path(p.name)))
    return files


def _jsonl(path: Path) -> Path:
    """``path`` named as a cassette: ``.jsonl`` for its suffix, both of ``NAME.yaml.gz``'s."""
    if path.name.lower().endswith(_GZIP_SUFFIXES):
        path = path.with_suffix("")
    return path.with_suffix(".jsonl")


def _import_dest(
    src: Path, rel: Path, out: Path | None, many: bool, written: set[Path], quiet: bool
) -> Path:
    """Where one input goes. Never lose a file: a destination written earlier in this run is
    never replaced (two inputs that map to one name, ``a.yaml`` and ``a.yml``, get distinct
    names)."""
    if not many:  # without -o: the input's name, in the current directory (never beside the input)
        return out or Path(_jsonl(src).name)
    dest = (out or Path(".")) / _jsonl(rel)
    if dest in written:
        dest = dest.with_name(rel.name + ".jsonl")
    n = 2
    while dest in written:
        dest = dest.with_name(f"{rel.name}.{n}.jsonl")
        n += 1
    if dest.name != _jsonl(rel).name and not quiet:
        print(f"note: {src} → {dest} (another input already maps to {_jsonl(rel)})")
    return dest


def _import_one(src: Path, target: Target) -> str:
    """Import one vcrpy, LangChain or mitmproxy file into a new cassette at the checked
    ``target``, written under a private name beside it and put in place whole
    (storage/_paths.py); the summary line."""
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
            rt = parse_exchange(w.append(ex))
            fams[rt.family] = fams.get(rt.family, 0) + 1
            errors += bool(rt.analysis_errors)
    llm = sum(n for f, n in fams.items() if f != "none")
    fam_text = ", ".join(f"{f} {n}" for f, n in sorted(fams.items()) if f != "none") or "none"
    flagged = f", {errors} with analysis errors" if errors else ""

    return (
        f"{src} → {dest}: {count(len(run.exchanges), 'round trip')}, {llm} LLM "
        f"({fam_text}){flagged}{extra}"
    )


def _file_id(path: Path) -> tuple[int, int] | None:
    """The device and inode ``path`` names (a link followed), ``None`` when there is no such
    file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def cmd_import(args: argparse.Namespace) -> int:
    inputs = [Path(p) for p in args.inputs]
    files = _import_plan(inputs)
    if not files:
        err("error: no input files")
        return EXIT_ERROR
    runs, failures = _trace_runs(files)
    files = _split_runs([f for f in files if f[0] in runs or not _trace_kind(f[0])], runs)
    if failures and not files:
        return EXIT_ERROR
    out = Path(args.output) if args.output else None
    many = len(files) > 1 or any(p.is_dir() for p in inputs)  # a directory's -o is a directory
    if many and out is not None and out.exists() and not out.is_dir():
        err(f"error: several inputs need -o to be a directory, and {out} is a file")
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
            err(f"error: {exc}")
            failures += 1
    if failures and len(planned) < len(files):
        return EXIT_ERROR
    for src, targets in _grouped(planned):
        try:
            if src in runs:
                logs = tuple(Path(p) for p in args.logs or ())
                lines = import_runs(src, runs[src][0], targets, logs)
            else:
                lines = [_import_one(src, targets[0])]
        except CassetteError as exc:
            err(f"error: {exc}")
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
