"""What a replayed test's report says: the failure a replay miss caused, said once
(:func:`failure_text`), the sections a failed or tolerant replay adds (its run as a web page, a
fork's live turns, what was tolerated: :func:`add_sections`) and the replay's lines for the
terminal summary (:func:`summary_lines`). Loaded by the first test that uses looptap.
"""

from __future__ import annotations

import linecache
import os
import re
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from ...hints import command_line, count
from ...matching import report_lines, turn_entries
from ...recording import seal
from ...storage import check_target, staged
from ...untrusted import clean_line
from ..serving.faults import STATUS_KINDS, parse_fault
from ._keys import MISS, REPORTS_DIR

if TYPE_CHECKING:
    from ...reading import Run
    from ..serving.faults import FaultPlan
    from ..serving.server import ReplayServer

__all__ = ["add_sections", "failure_text", "propose_line", "summary_lines"]


class LooptapSession(Protocol):
    """What the report reads of a test's looptap session (:class:`._session.LooptapSession`:
    named here, not imported, so that the session and its report import one way)."""

    path: Path
    server: ReplayServer | None
    faults: FaultPlan | None

    @property
    def run(self) -> Run: ...


def add_sections(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    report: pytest.TestReport,
    session: LooptapSession,
) -> None:
    """A test failed by a replay miss is reported by :func:`failure_text` (the plugin raised it
    so): what diverged, once, and where the test made the request, without the SDK's frames. A
    replayed test that failed (by a miss or otherwise) gets a web page of its run; the failure
    says where."""
    miss = item.stash.get(MISS, None)
    if call.when == "call" and report.failed and call.excinfo and call.excinfo.value is miss:
        # pytest's longrepr protocol: toterminal, reprcrash
        report.longrepr = _Explained(f"ReplayMiss: {miss}", str(item.path), item.location[1] or 0)  # type: ignore[assignment]
    if (
        report.when == "call"
        and report.failed
        and session is not None
        and session.server is not None
    ):
        report.sections.append(("looptap", _write_html_report(item, session)))
        from ..forking.cursor import Cursor

        cursor = session.server.router
        if isinstance(cursor, Cursor):  # a forked test: which turns went live, on which model
            report.sections.append(
                ("looptap fork", "\n".join(clean_line(ln) for ln in cursor.report_lines()))
            )
    if (
        report.when == "call"
        and session is not None
        and session.server is not None
        and session.server.matcher.tolerated
    ):
        report.sections.append(("looptap tolerated", _tolerated_text(session.server.matcher)))


def _tolerated_text(matcher: Any) -> str:
    """Every difference the replay tolerated, by recorded turn, with what tolerated it (a volatile
    span's detector, a rule, a changed tool result in a fork's tolerant prefix): in the test's
    report (shown with a failure, and with ``-rP`` for a test that passed)."""
    lines = report_lines(turn_entries(matcher), "")
    head = (
        f"{count(len(matcher.tolerated), 'recorded round trip')} answered a request that differed "
        "only in what was tolerated:"
    )
    return "\n".join(clean_line(ln) for ln in [head, *lines])


class _Crash:
    """What pytest's short summary reads of a failure (``reprcrash``)."""

    def __init__(self, message: str, path: str, lineno: int) -> None:
        self.message, self.path, self.lineno = message, path, lineno


class _Explained:
    """A failure's report as plain lines (pytest's ``longrepr`` protocol)."""

    def __init__(self, text: str, path: str, lineno: int) -> None:
        self.text = text
        self.reprcrash = _Crash(text.splitlines()[0], path, lineno)

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line, red=line.startswith("ReplayMiss"))

    def __str__(self) -> str:
        return self.text


#: Frames of these trees are never shown in a failure: the SDKs', pytest's and looptap's own.
_HIDDEN = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")


_MOST_FRAMES = 6


def _test_frames(exc: BaseException | None, root: Path) -> list[str]:
    """The test's own frames that led to ``exc`` (under pytest's root, outside every installed
    package and looptap), two lines each, the innermost last; at most :data:`_MOST_FRAMES`."""
    if exc is None:
        return []
    package = str(Path(__file__).resolve().parents[1])
    out: list[str] = []
    for fs in traceback.extract_tb(exc.__traceback__):
        path = fs.filename
        if (
            any(h in path for h in _HIDDEN)
            or path.startswith(package)
            or not path.startswith(str(root))
        ):
            continue
        code = (fs.line or linecache.getline(path, fs.lineno or 0)).strip()
        out.append(f"  {os.path.relpath(path, root)}:{fs.lineno}: in {fs.name}")
        if code:
            out.append(f"      {code[:160]}")
    return out[-2 * _MOST_FRAMES :]


def failure_text(session: LooptapSession, cause: BaseException | None, root: Path) -> str | None:
    """The failure message of a test that a replay miss failed, said once: the first miss (where:
    conversation, turn and seq; the layer's verdict; the JSON paths, recorded vs got), the other
    misses in a line each, where the test made the request and what the agent got instead
    (``cause``; ``None``: it swallowed the error). ``None`` when nothing missed."""
    if session.server is None or not session.server.misses:
        return None
    misses = session.server.misses
    first = misses[0]
    lines = [f"replay miss at {first.headline}", f"cassette: {session.path}"]
    body = first.lines()
    lines.append("  " + body[0].removeprefix("looptap replay: "))
    verdicts = {f"  {v}" for v in first.verdicts[:1]}
    lines += [f"  {ln}" for ln in body[1:] if ln not in verdicts]
    if len(misses) > 1:
        lines.append(
            f"and {len(misses) - 1} more unanswered request{'s' if len(misses) > 2 else ''}:"
        )
        lines += [f"  {m.headline}" for m in misses[1:4]]
        if len(misses) > 4:
            lines.append(f"  … and {len(misses) - 4} more (the terminal summary lists them)")
    frames = _test_frames(cause, root)
    if frames:
        lines.append("where the test made the request:")
        lines += frames
    if cause is None:
        lines.append(
            "the agent caught the error looptap's replay answered with; the test failed on the miss"
        )
    elif not isinstance(cause, AssertionError):
        first_line = str(cause).splitlines()[0] if str(cause) else ""
        said, ours, _ = first_line.partition("looptap replay:")
        said = clean_line(
            f"{type(cause).__module__}.{type(cause).__qualname__}: {said.rstrip(' -:')}"
        )[:200]
        lines.append(
            f"the agent got: {said}"
            + (" (looptap's answer to the unmatched request)" if ours else "")
        )
    return "\n".join(lines)


def summary_lines(session: LooptapSession) -> list[str]:
    """The replay server's report for the terminal summary, a request answered by an injected
    fault that still carries the recorded answer (cut, slowed, rewritten) counted as played, and
    the faults injected, each with the recorded turn it hit."""
    server = session.server
    assert server is not None
    lines = server.report_lines()
    fired = session.faults.fired if session.faults is not None else []
    if not fired:
        return lines

    by_seq = {r.seq: r for r in server.matcher.recorded}
    played = server.matcher.played()  # the count the server's first line says
    seqs = {r.seq for r in played}
    # answered by the fault: played, not unplayed
    faulted = {
        seq
        for _n, seq, text in fired
        if seq is not None
        and seq not in seqs
        and parse_fault(text).kind not in (*STATUS_KINDS, "reset")
    }
    said, now = len(played), len(seqs | faulted)
    lines[0] = lines[0].replace(f"played {said:,} of", f"played {now:,} of", 1)
    unplayed = tuple(f"  unplayed: {by_seq[seq].label}:" for seq in faulted if seq in by_seq)
    lines = [ln for ln in lines if not ln.startswith(unplayed)]
    lines.append(f"  faults injected: {len(fired)}")
    for n, seq, text in fired[:20]:
        where = by_seq[seq].label if seq in by_seq else f"seq {seq}"
        lines.append(f"    request {n}: {text} at {where}")
    if len(fired) > 20:
        lines.append(f"    … and {len(fired) - 20} more")
    return lines


def _reports_folder(config: pytest.Config) -> Path:
    """Where the session's web reports go: pytest's cache directory, or without the cache (``-p
    no:cacheprovider``) one temporary directory for the whole session, made at its first report."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("looptap-reports"))
    folder = config.stash.get(REPORTS_DIR, None)
    if folder is None or not folder.is_dir():
        folder = config.stash[REPORTS_DIR] = Path(tempfile.mkdtemp(prefix="looptap-reports-"))
    return folder


def _write_html_report(item: pytest.Item, session: LooptapSession) -> str:
    """A failed replayed test's run as a web page (``looptap export --html``), under pytest's cache
    directory (``.pytest_cache/d/looptap-reports/``): the line the failure shows. Never fails the
    test itself: a page that cannot be written says why instead."""
    try:
        from ...views.htmlpage import HtmlExtraMissing, render_html
        from ...views.report import report_data

        run = session.run
        run.name = f"{item.nodeid} ({session.path.name})"  # the page's title
        try:
            page = render_html(report_data(run))
        except HtmlExtraMissing as exc:
            return f"looptap: no web page of this run: {exc}"
        folder = _reports_folder(item.config)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[-150:] or "test"

        path = folder / f"{name}.html"
        with staged(check_target(path, "the test's web report", force=True)) as s:
            s.write(seal(page.encode()))
        line = (
            f"looptap: the run as a web page: {path}  ({len(run.exchanges)} "
            "round trips; open it in a browser)"
        )
    except Exception as exc:  # a report is a help, never a second failure
        return f"looptap: could not write a web page of this run: {type(exc).__name__}: {exc}"
    return line + _write_failed_run(session, folder / f"{name}.jsonl")


def _write_failed_run(session: LooptapSession, path: Path) -> str:
    """What the agent sent in a failed replayed test (with the answers it got, misses included),
    as a cassette beside its web page, redacted as every cassette is: the evidence
    ``looptap rules propose`` reads against the recorded cassette. Never fails the test."""
    if session.server is None or not session.server.misses:
        return ""
    try:
        session.server.keep_sent(path)
        return f"\nlooptap: what this test sent: {path}; {propose_line(session.path, path)}"
    except Exception as exc:  # a help, never a second failure
        return f"\nlooptap: could not keep what this test sent: {type(exc).__name__}: {exc}"


def propose_line(cassette: Path, sent: Path) -> str:
    """The command that proposes rules from what a failed test sent (``sent``) against its
    recorded ``cassette`` (any path the test's marker gave), built from its words."""
    return "rules that would make it match, if what differs is volatile: " + command_line(
        ["looptap", "rules", "propose", str(cassette), str(sent)]
    )
