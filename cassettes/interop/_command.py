"""``looptap export`` and ``looptap textconv``: their handlers (declared in
:mod:`cassettes.commands`). Errors become one line on stderr and a non-zero exit, in
``cassettes.cli.main``."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import orjson

from ..errors import CassetteError, CassetteFormatError, problem_lines
from ..fleet import export_parquet
from ..hints import UnprintableCommand, count, shell_command
from ..reading import open_run
from ..recording import Redactor, Sealing
from ..storage import UnsafePath, check_target, same_path, staged, write_plain
from ..untrusted import SafeBinaryStream
from ..views import reading_line
from ._har import har_chunks
from ._otel import iter_requests
from ._otlp import send, traces_url
from ._textconv import render

__all__ = ["cmd_export", "cmd_textconv"]


class ExportUsageError(CassetteError, ValueError):
    """The export command line asks for something it cannot do."""


def _export_target(path: str, args: argparse.Namespace, unnamed: bool = False) -> Any:
    """Where an export goes, checked before anything is read (storage/_paths.py): ``None`` for
    stdout; the input itself, a link, a directory, a device, a FIFO or a socket is refused, and an
    existing file unless ``--force`` (an empty one of this user is taken)."""
    if path == "-":
        return None
    if same_path(path, args.file):
        raise UnsafePath(f"the export {path} is the run it exports: give it a path of its own")
    hint = (
        "-o names another; --force replaces it"  # a name looptap chose (--html without -o)
        if unnamed
        else "--force replaces it; '-' writes to stdout"
    )
    return check_target(path, "the export", force=args.force, hint=hint)


def _write_chunks(target: Any, chunks: Iterable[bytes]) -> None:
    """Write an export to ``target`` (``None``: stdout) a piece at a time (a large export is never
    held whole): 0600 like the cassette, under a private name beside it and put in place whole
    when done (storage/_paths.py); C1, bidi and zero-width characters in strings escaped (the same
    JSON value) for terminals; each piece sealed again (a cassette from an older looptap, or
    edited by hand, may hold what its redaction missed)."""
    with nullcontext() if target is None else staged(target) as s:
        out = SafeBinaryStream(Sealing(sys.stdout.buffer if s is None else s))
        for chunk in chunks:
            out.write(chunk)
        out.flush()


def _header(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        name, sep, value = v.partition("=")
        if not sep or not name.strip():
            raise ExportUsageError(f"--otel-header wants NAME=VALUE, got {v!r}")
        out[name.strip()] = value.strip()
    return out


def _html_output(args: argparse.Namespace) -> str | None:
    """Where ``--html`` writes (``None``: no page asked for): ``-o``, else the run's name as
    ``NAME.html`` in the current directory (as ``import`` names its cassette: never beside the
    input), which, not named by the user, is never replaced (``--force`` does)."""
    if not (getattr(args, "html", False) or getattr(args, "output", None)):
        return None
    if not args.html:
        raise ExportUsageError("-o names the --html page: looptap export --html RUN -o run.html")
    output: str = args.output or Path(args.file).with_suffix(".html").name
    return output


def _distinct_outputs(outputs: list[tuple[str, str]]) -> None:
    """Refuse two outputs (``(flag, path)``) that name one file."""
    for i, (flag_a, a) in enumerate(outputs):
        for flag_b, b in outputs[i + 1 :]:
            if same_path(a, b):
                raise UnsafePath(f"{flag_a} and {flag_b} both name {b}: give each its own path")


def _otel_requests(run: Any, args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The run's OTLP export requests, a thousand round trips at a time."""
    return iter_requests(run, content=not args.no_content, project=args.project)


def _spans(req: dict[str, Any]) -> int:
    return sum(len(ss["spans"]) for rs in req["resourceSpans"] for ss in rs["scopeSpans"])


def _export_otel_file(run: Any, args: argparse.Namespace, target: Any) -> str:
    """``--otel``: one request per line, the OTLP file format (what the Collector's otlpjsonfile
    receiver reads); what was written, for the summary line."""
    n = 0

    def lines() -> Iterator[bytes]:
        nonlocal n
        for req in _otel_requests(run, args):
            n += _spans(req)
            yield orjson.dumps(req, option=orjson.OPT_APPEND_NEWLINE)

    _write_chunks(target, lines())
    return f"{count(n, 'span')} → {args.otel}"


def _export_otel_endpoint(run: Any, args: argparse.Namespace, headers: dict[str, str]) -> str:
    """``--otel-endpoint``: the requests POSTed; what was sent, for the summary line."""
    n = posts = status = 0
    for req in _otel_requests(run, args):
        n += _spans(req)
        status, sent = send(req, args.otel_endpoint, protocol=args.otel_protocol, headers=headers)
        posts += sent
    in_posts = f", {count(posts, 'request')}" if posts > 1 else ""
    # The endpoint may carry credentials (user:password@, ?api_key=…): never printed.
    shown = Redactor().url(traces_url(args.otel_endpoint))
    return f"{count(n, 'span')} → {shown} (HTTP {status}{in_posts})"


def cmd_export(args: argparse.Namespace) -> int:
    if args.parquet:
        return export_parquet([args.file, *args.more], Path(args.parquet), args.quiet)
    if args.more:
        raise ExportUsageError("one run at a time (several directories only with --parquet)")
    html = _html_output(args)
    if not (args.otel or args.otel_endpoint or args.har or html):
        raise ExportUsageError(
            "nothing to export: give --otel FILE, --otel-endpoint "
            "URL, --har FILE and/or --html [-o FILE]"
        )
    headers = _header(args.otel_header)
    _distinct_outputs(
        [
            (flag, v)
            for flag, v in (("--otel", args.otel), ("--har", args.har), ("--html", html))
            if v and v != "-"
        ]
    )
    otel_target = _export_target(args.otel, args) if args.otel else None
    har_target = _export_target(args.har, args) if args.har else None
    html_target = _export_target(html, args, unnamed=not args.output) if html else None

    with reading_line(Path(args.file).name) as progress:
        run = open_run(args.file, progress=progress)

    for p in problem_lines(run.problems):
        print(f"looptap: warning: {args.file}: {p}", file=sys.stderr)
    said: list[str] = []
    if args.otel:
        said.append(_export_otel_file(run, args, otel_target))
    if args.otel_endpoint:
        said.append(_export_otel_endpoint(run, args, headers))
    if args.har:
        _write_chunks(har_target, har_chunks(run))
        said.append(f"{count(len(run.exchanges), 'HAR entry', 'HAR entries')} → {args.har}")
    if html:
        said.append(write_html_report(run, html_target, html))
    if not args.quiet:
        for s in said:
            print(f"{args.file}: {s}", file=sys.stderr)
    return 0


def write_html_report(run: Any, target: Any, shown: str) -> str:
    """Write ``run`` as one self-contained web page (``looptap export --html``) to ``target``
    (``None``: stdout); what was written, for the summary line."""
    # the html extra's seam: jinja2 and the report load only for a page (the other exports and
    # every other command never need them)
    from ..views.htmlpage import render_html
    from ..views.report import report_data

    data = report_data(run)
    page = render_html(data).encode()
    _write_chunks(target, [page])
    turns = count(data["totals"]["turns"], "turn")
    return f"{turns} as a web page ({len(page) / 1024:,.0f} KB) → {shown}"


class _Refused(Exception):
    """What ``looptap textconv`` cannot do: one line, exit 2."""


def cmd_textconv(args: argparse.Namespace) -> int:
    try:
        if args.install:
            return _install_textconv(Path(args.file or "."))
        if not args.file:
            raise _Refused("give a cassette (or --install in a git repository)")
    except _Refused as exc:
        print(f"looptap textconv: error: {exc}", file=sys.stderr)
        return 2

    path = Path(args.file)
    try:
        with reading_line(path.name) as progress:
            run = open_run(path, progress=progress)
    except CassetteFormatError:
        # git runs the driver on every file the attribute matches; a JSONL file that is not a
        # cassette is shown as it is, so `git diff` keeps working on it.
        sys.stdout.buffer.write(path.read_bytes())
        return 0
    out = sys.stdout
    for line in render(run, raw_ids=args.raw_ids):
        out.write(line + "\n")
    out.flush()
    return 0


def _install_textconv(repo: Path) -> int:
    """Register the driver in the git repository at ``repo``: the attribute for ``*.jsonl`` and
    ``diff.looptap.textconv`` pointing at this interpreter (absolute), so it works whichever
    environment looptap is installed in and whatever is on git's PATH."""
    try:
        top = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _Refused(f"cannot run git: {exc}") from None
    if top.returncode != 0:
        raise _Refused(f"{repo} is not inside a git repository")
    root = Path(top.stdout.strip())

    attrs = root / ".gitattributes"
    try:
        # An existing .gitattributes is the repository's: extended, never replaced or followed.
        target = check_target(attrs, "the attributes file", owned=lambda _p: True)
    except UnsafePath as exc:
        raise _Refused(str(exc)) from None
    try:  # git runs it through sh: this interpreter's path as one word, or refused
        command = shell_command([sys.executable, "-m", "looptap.cassettes.cli", "textconv"])
    except UnprintableCommand as exc:
        raise _Refused(str(exc)) from None
    done = subprocess.run(
        ["git", "-C", str(root), "config", "diff.looptap.textconv", command],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        raise _Refused(f"git config failed: {done.stderr.strip()}")
    line = "*.jsonl diff=looptap"
    try:
        if _add_attribute(target, line):
            print(f"looptap: added '{line}' to {attrs}")
    except (UnsafePath, CassetteError) as exc:
        raise _Refused(str(exc)) from None
    print(f"looptap: git diff now shows cassettes through: {command}")
    print("looptap: (git diff --no-textconv shows the raw JSON lines)")
    return 0


def _add_attribute(target: Any, line: str) -> bool:
    """Add ``line`` to the checked ``.gitattributes`` unless it is there: the file is rewritten
    whole under a private name beside it and renamed into place (its mode kept), so a crash never
    leaves half of it, and a link put at its name is never followed (storage/_paths.py). Whether
    the line was added."""
    path = target.path
    old = b""
    mode = 0o644
    if target.replaces is not None:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            old = f.read(16 << 20)  # an attributes file is small; a huge one is kept whole below
            if f.read(1):
                raise CassetteError(
                    f"{path} is over 16 MiB: looptap does not rewrite it; add '{line}' yourself"
                )
    if line in (h.strip() for h in old.decode("utf-8", "replace").splitlines()):
        return False
    sep = b"\n" if old and not old.endswith(b"\n") else b""
    write_plain(target, old + sep + line.encode() + b"\n", mode=mode)  # (the user's own file)
    return True
