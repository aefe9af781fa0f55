"""The checks on a run's traced shell commands besides ``C.shell_failure_hidden`` (docs/
shell-file-tools.md, "The findings"), each judged on what the records prove, never on words:

- ``C.shell_output_cut`` (info): the result the model got holds a verbatim start (or end) of what
  the command printed on a stream, and not the rest of it. Judged only where the tracer's record of
  the stream can be only what reached the agent (:func:`_transparent`); what the tracer could not
  attribute is counted (:attr:`Judged.undetermined`), never judged.
- ``E.ended_on_failed_test`` (info): the model ended its turn (a complete answer, no call) in the
  round trip whose request carried the result of a test run (a test runner among the command's
  programs, by its argv) that exited non-zero, and that result told the model of the failure.
  Rooted at the turn that ended. A run the model fixed and ran again ends on a passing test run; a
  failure the client hid is C's finding (``C.shell_failure_hidden``), not this one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..analysis import STATED_EXIT, Finding, claimed_success, codes
from ..hints import count
from ._records import Process, RunView, ShellCall

__all__ = ["Judged", "hidden", "judge", "runs_tests", "short"]

#: What a result uses to say a command failed (lower case; a stem matches longer words).
_FAILURE = re.compile(
    r"error|fail|exit(?:ed)? (?:code|status|with)|exit ?code|returned? (?:code )?-?\d|"
    r"non-?zero|killed|signal|sig[a-z]{2,5}\b|abort|traceback|exception|denied|not found|"
    r"no such|cannot|can't|could not|unable|timed? ?out|interrupted|segmentation|core dumped"
)

#: Characters a kept start (or end) must have to be judged; how much must be left out.
_KEPT, _LEFT = 16, 64
#: Shells: a ``-c`` script of theirs is read for what could send output elsewhere.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish"})
#: What, in a shell's script, may send a program's output somewhere else than the shell's own
#: stdout and stderr (a redirection, a pipe, a capture, a sourced or evaluated script).
_ELSEWHERE = re.compile(r"[<>|`]|\$\(|(?:^|[\s;&(])(?:source|\.|eval|exec|coproc)(?=\s)")
#: A program's output text the record may hold otherwise than the client shows it: controls
#: (a colour escape a client strips, a carriage return it folds).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Test runners, by the program's name (argv[0]'s last part) and, for launchers, the words that
#: make them run tests (``python -m pytest``, ``go test``, ``npm test`` …).
_RUNNERS = frozenset({
    "pytest", "py.test", "tox", "nox", "nosetests", "jest", "vitest", "mocha", "ava", "karma",
    "rspec", "phpunit", "ctest", "bats", "behave", "trial", "cargo-nextest",
})  # fmt: skip
_LAUNCHED = {
    "python": ({"-m"}, {"pytest", "unittest", "nose2", "tox", "nox"}),
    "go": (set(), {"test"}),
    "cargo": (set(), {"test", "nextest"}),
    "npm": ({"run"}, {"test", "t"}),
    "yarn": ({"run"}, {"test"}),
    "pnpm": ({"run"}, {"test"}),
    "bun": ({"run"}, {"test"}),
    "deno": (set(), {"test"}),
    "dotnet": (set(), {"test"}),
    "mvn": (set(), {"test", "verify"}),
    "gradle": (set(), {"test", "check"}),
    "make": (set(), {"test", "check"}),
    "swift": (set(), {"test"}),
    "mix": (set(), {"test"}),
}


@dataclass
class Judged:
    """The findings, and how many linked commands a check could not judge (and why)."""

    findings: list[Finding] = field(default_factory=list)
    #: Linked commands whose output the cut check could not judge, by reason.
    undetermined: dict[str, int] = field(default_factory=dict)
    #: Linked commands that wrote on both streams whose order the reorder check could not judge.
    order_undetermined: dict[str, int] = field(default_factory=dict)


def _name(word: str) -> str:
    base = word.rsplit("/", 1)[-1]
    return re.sub(r"\d+(\.\d+)*$", "", base)  # python3.12 → python


def runs_tests(argv: Iterable[str]) -> bool:
    """Whether ``argv`` runs a test runner: its program is one, or a launcher told to run tests
    (``python -m pytest``, ``go test``, ``npm test``, ``make check`` …); the words after the
    program are read up to the first that is neither a flag nor the launcher's subcommand."""
    words = list(argv)[:16]
    if not words:
        return False
    prog = _name(words[0])
    if prog in _RUNNERS:
        return True
    launched = _LAUNCHED.get(prog)
    if launched is None:
        return False
    flags, tests = launched
    for w in words[1:]:
        if w in tests:
            return True
        if w in flags or w.startswith("-"):
            continue
        return False
    return False


def _runner(q: Process) -> bool:
    """Whether the program ``q`` ran (or exec'd into) is a test runner."""
    return runs_tests(q.argv) or (bool(q.then) and runs_tests(q.then))


def _tree(p: Process, procs: list[Process]) -> list[Process]:
    """``p`` and its descendants among ``procs`` (bounded as the linking walks)."""
    kids: dict[int, list[Process]] = {}
    for q in procs:
        if q.parent is not None:
            kids.setdefault(q.parent, []).append(q)
    out, todo = [p], [p]
    while todo and len(out) < 4096:
        for q in kids.get(todo.pop().pid, []):
            if q is not p and q not in out:
                out.append(q)
                todo.append(q)
    return out


def _script(run: tuple[str, ...]) -> str | None:
    for i in range(1, len(run)):
        if re.fullmatch(r"-[a-z]*c", run[i - 1]):
            return run[i]
    return None


def _transparent(tree: list[Process]) -> str | None:
    """``None`` when every write the tracer counted in the command's stdout and stderr is one
    that reached the agent: each shell of the tree runs a ``-c`` script with no redirection,
    pipe, capture or sourced script, and every other program is the last of its branch (a program
    that starts another may give it a pipe or a file of its own for an output). Else why not."""
    parents = {q.parent for q in tree}
    for q in tree:
        for run in (q.argv, q.then) if q.then else (q.argv,):
            if _name(run[0]) in _SHELLS:
                script = _script(run)
                if script is None:
                    return "a shell of the command runs a script file the tracer does not read"
                if _ELSEWHERE.search(script):
                    return "a shell of the command redirects, pipes or captures output"
        last = q.then or q.argv
        if q.pid in parents and _name(last[0]) not in _SHELLS:
            return "a program of the command starts others (it may give them its own pipes)"
    return None


def _cut(sc: ShellCall, p: Process, tree: list[Process], out: Judged) -> Finding | None:
    """``C.shell_output_cut`` for one linked command, or why it cannot be judged (counted)."""
    sent = sc.result or ""
    if sc.result_seq is None or not sent.strip():
        return None
    why = _transparent(tree)
    for name, text, size in (
        ("stdout", p.stdout, p.stdout_bytes),
        ("stderr", p.stderr, p.stderr_bytes),
    ):
        if not text.strip():
            continue
        if why is None and len(text.encode()) != size:
            why = "the output is longer than the tracer keeps (its start only)"
        if why is None and _CONTROL.search(text):
            why = "the output holds control characters a client may strip"
        if why is not None:
            out.undetermined[why] = out.undetermined.get(why, 0) + 1
            return None
        start, end = _kept(text, sent)
        if start + end and start + end <= 0.9 * len(text) and len(text) - start - end >= _LEFT:
            return _cut_finding(sc, p, name, start, end, len(text))
    return None


def _whole(p: Process, tree: list[Process]) -> str | None:
    """``None`` when ``p``'s record of its output is all it wrote and all that reached the agent
    (:func:`_transparent`, not longer than the tracer keeps, no control character); else why not."""
    why = _transparent(tree)
    if why is None and any(
        len(text.encode()) != size
        for text, size in ((p.stdout, p.stdout_bytes), (p.stderr, p.stderr_bytes))
    ):
        why = "the output is longer than the tracer keeps (its start only)"
    if why is None and _CONTROL.search(p.stdout + p.stderr):
        why = "the output holds control characters a client may strip"
    return why


def _reordered(sc: ShellCall, p: Process, tree: list[Process], out: Judged) -> Finding | None:
    """``C.shell_output_reordered`` for one linked command that wrote on both streams, or why its
    order cannot be judged (counted): every piece (a run of writes on one stream, as the tracer
    ordered them) found verbatim once in the result, in another order than written, and the
    streams not merely kept apart (each whole, one after the other, as labelled fields are)."""
    sent = sc.result or ""
    if sc.result_seq is None or not sent.strip() or not p.output:
        return None
    if not p.stdout.strip() or not p.stderr.strip():
        return None  # one stream: nothing to reorder
    pieces = p.pieces()
    why = _whole(p, tree)
    if why is None and pieces is None:
        why = "the order of the writes is not wholly recorded"
    if why is None and pieces is not None:
        if "".join(t for _, t in pieces) in sent:
            return None  # as written
        texts = [t.strip() for _, t in pieces]
        at = [sent.find(t) for t in texts]
        if any(len(t) < _KEPT or sent.count(t) != 1 for t in texts):
            why = "a piece of the output is too short to place, or not once in the result"
        else:
            seen = sorted(range(len(texts)), key=lambda i: at[i])
            if any(at[a] + len(texts[a]) > at[b] for a, b in itertools.pairwise(seen)):
                why = "pieces of the output overlap in the result"
            elif seen == sorted(seen):
                return None  # in the written order, with something between
            elif _apart([pieces[i][0] for i in seen], seen):
                why = "the client keeps the streams apart (each whole, one after the other)"
            else:
                return _reordered_finding(sc, p, [s for s, _ in pieces], seen)
    if why is not None:
        out.order_undetermined[why] = out.order_undetermined.get(why, 0) + 1
    return None


def _apart(streams: list[int], seen: list[int]) -> bool:
    """Whether the pieces, in the result's order (their streams ``streams``, their written
    indices ``seen``), are each stream whole in its written order, one stream after the other."""
    switches = sum(1 for a, b in itertools.pairwise(streams) if a != b)
    mine = {s: [i for i, t in zip(seen, streams, strict=False) if t == s] for s in (1, 2)}
    return switches == 1 and all(v == sorted(v) for v in mine.values())


def _reordered_finding(sc: ShellCall, p: Process, streams: list[int], seen: list[int]) -> Finding:
    name = {1: "stdout", 2: "stderr"}
    first = next(k for k, i in enumerate(seen) if i != k)
    return _sent(
        codes.SHELL_OUTPUT_REORDERED,
        sc,
        (
            f"The command of the model's call {sc.call_id} wrote {len(streams)} pieces on stdout "
            f"and stderr in turn; the result the client sent holds each of them verbatim, in "
            f"another order: its piece {first + 1} is the {name[streams[seen[first]]]} piece "
            f"written {seen[first] + 1}th."
        ),
        {
            "written": [name[s] for s in streams],
            "order_sent": [i + 1 for i in seen],
            "pid": p.pid,
        },
    )


def _kept(text: str, sent: str) -> tuple[int, int]:
    """How much of the start and of the end of ``text`` ``sent`` holds verbatim (each counted when
    at least :data:`_KEPT` characters), when what lies between is in ``sent`` nowhere (its first
    and last characters): ``(0, 0)`` when ``sent`` holds it all, in any order, or none of it."""

    def longest(pick: Any) -> int:
        lo, hi = 0, len(text)
        while lo < hi:  # bounded: ``text`` is at most the tracer's head (2 KiB)
            mid = (lo + hi + 1) // 2
            if pick(mid) in sent:
                lo = mid
            else:
                hi = mid - 1
        return lo if lo >= _KEPT else 0

    head = longest(lambda n: text[:n])
    tail = longest(lambda n: text[len(text) - n :])
    if head + tail >= len(text):
        return 0, 0
    left = text[head : len(text) - tail].strip()
    if not left or left[:_KEPT] in sent or left[-_KEPT:] in sent:
        return 0, 0
    return head, tail


def _cut_finding(
    sc: ShellCall, p: Process, stream: str, start: int, end: int, whole: int
) -> Finding:
    kept = " and ".join(
        x
        for x in (f"the first {start:,}" if start else "", f"the last {end:,}" if end else "")
        if x
    )
    return _sent(
        codes.SHELL_OUTPUT_CUT,
        sc,
        (
            f"The command of the model's call {sc.call_id} printed {count(whole, 'character')} on "
            f"{stream}; the result the client sent holds only {kept} of them, verbatim."
        ),
        {
            "stream": stream,
            "kept_start": start,
            "kept_end": end,
            "printed": whole,
            "pid": p.pid,
        },
    )


def _ended(run: RunView, calls: list[ShellCall], hidden: set[str], tree_of: Any) -> list[Finding]:
    """``E.ended_on_failed_test``: per conversation, the answers that ended the turn right after
    the result of a failed test run the model was told of (the package's docstring)."""
    from ..models import FinishReason

    turns = run.analysis.turns
    out: list[Finding] = []
    by_result: dict[int, list[ShellCall]] = {}
    for sc in calls:
        if sc.result_seq is not None and sc.process is not None:
            by_result.setdefault(sc.result_seq, []).append(sc)
    for seq, answered in sorted(by_result.items()):
        t = turns.get(seq)
        if t is None or t.e.tool_calls or t.a.finish_reason != FinishReason.COMPLETE:
            continue
        if t.a.complete is False or (t.a.status is not None and not 200 <= t.a.status < 300):
            continue
        tests = [sc for sc in answered if any(_runner(q) for q in tree_of(sc))]
        if not tests:
            continue
        last = max(tests, key=lambda sc: (sc.seq, sc.process.started if sc.process else 0.0))
        p = last.process
        runners = [q for q in tree_of(last) if _runner(q)]
        if p is None or not p.failed or not any(q.failed for q in runners):
            continue
        if last.call_id in hidden or not _says_failure(last, p):
            continue  # the model was not told: C's finding, not this one
        if any(
            sc.process is not None and sc.process.started > p.started
            for sc in answered
            if sc is not last
        ):
            continue  # another command of the answer ran after the tests
        _ended_or_claimed(t, last, p, out)
    return out


def _ended_or_claimed(t: Any, sc: ShellCall, p: Process, out: list[Finding]) -> None:
    """The finding of an answer that ended the turn right after the failed test run ``sc`` it
    was told of: ``E.ended_on_failed_test``, or ``E.ignored_tool_error`` where the answer claims
    success, by the rule of any tool's error (:func:`claimed_success`; none where the analysis
    found it already: the result said the exit)."""
    claim = claimed_success(t.e.text or "")
    ran = f"the test run of its call {sc.call_id} ({' '.join(sc.command.split())[:80]}) ended "
    details: dict[str, Any] = {"exit": p.exit, "signal": p.signal, "command_seq": sc.seq}
    if claim is None:
        code, related = codes.ENDED_ON_FAILED_TEST, None
        message = (
            f"The model ended its turn (an answer, no call) right after {ran}with {p.status}, "
            "and the result it got said so: the tools' evidence is a failing test when it stopped."
        )
    elif not any(f.code == codes.IGNORED_TOOL_ERROR for f in t.findings):
        code, related, details = codes.IGNORED_TOOL_ERROR, t.index - 1, {"claim": claim, **details}
        message = (
            f"The model answered {claim!r} right after {ran}with {p.status}, a failure the "
            "result it got said, and says nothing of it: the answer claims a success the tools "
            "did not report."
        )
    else:
        return
    found = _sent(code, sc, message, details)  # (the turn that ended carried the result)
    found.related_turn = related
    out.append(found)


def judge(
    run: RunView, calls: list[ShellCall], procs: list[Process], found: list[Finding]
) -> Judged:
    """The cut and ended-on-a-failed-test checks on ``calls`` (linked by :func:`link_run`);
    ``found``: the findings already made (``C.shell_failure_hidden``), which fold the E check."""
    out = Judged()
    trees: dict[str, list[Process]] = {}

    def tree_of(sc: ShellCall) -> list[Process]:
        if sc.process is None:
            return []
        if sc.call_id not in trees:
            trees[sc.call_id] = _tree(sc.process, procs)
        return trees[sc.call_id]

    for sc in calls:
        if sc.process is not None:
            for check in (_cut, _reordered):
                f = check(sc, sc.process, tree_of(sc), out)
                if f is not None:
                    out.findings.append(f)
    hidden = {f.tool_call_id or "" for f in found if f.code == codes.SHELL_FAILURE_HIDDEN}
    out.findings += _ended(run, calls, hidden, tree_of)
    return out


def _says_failure(sc: ShellCall, p: Process) -> bool:
    """Whether the result sent back tells the model the command failed: an error flag, a word of
    failure, the exit status or signal, or the start of what it wrote on stderr. A result that is
    not empty counts as telling when the command's stderr was not traced (the processes level):
    it may carry it, and a wrong warning is worse than none."""
    if sc.result_error is True:
        return True
    sent = (sc.result or "").casefold()
    if not sent.strip():
        return False
    stated = {int(m.group(1)) for m in STATED_EXIT.finditer(sent[:100000])}
    if stated and stated <= {0} and not _FAILURE.search(STATED_EXIT.sub(" ", sent[:100000])):
        return False  # it says the command exited 0: the failure is hidden (a lie, in fact)
    if _FAILURE.search(sent):
        return True
    if p.exit is not None and re.search(rf"(?<![\d.]){p.exit}(?![\d.])", sent):
        return True
    if not p.output:  # its stderr was not traced: a result that may carry it is not judged
        return True
    err = " ".join(p.stderr.split()).casefold()[:60]
    return len(err) >= 8 and err in " ".join(sent.split())


def hidden(sc: ShellCall) -> Finding | None:
    p = sc.process
    if p is None or not p.failed or sc.result_seq is None or _says_failure(sc, p):
        return None
    sent = (sc.result or "").strip()
    told = (
        "nothing (an empty result)"
        if not sent
        else f"“{short(sent, 100)}”, with no error flag and nothing of the failure"
    )
    return _sent(
        codes.SHELL_FAILURE_HIDDEN,
        sc,
        (
            f"The command of the model's call {sc.call_id} ({short(sc.command, 80)}) ended "
            f"with {p.status}"
            + (f" (stderr: “{short(p.stderr, 80)}”)" if p.stderr.strip() else "")
            + f". The client sent the model {told}."
        ),
        {"exit": p.exit, "signal": p.signal, "pid": p.pid, "command_seq": sc.seq},
    )


def short(text: str, n: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _sent(code: str, sc: ShellCall, message: str, details: dict[str, Any]) -> Finding:
    """A finding of ``code`` on what the client sent back for ``sc``: at the round trip that
    carried its result."""
    row = codes.ROWS[code]
    return Finding(
        code=row.code,
        layer=row.layer,
        severity=row.severity,
        message=message,
        conversation=sc.conversation,
        turn=sc.result_turn,
        seq=sc.result_seq,
        tool_call_id=sc.call_id,
        details=details,
    )
