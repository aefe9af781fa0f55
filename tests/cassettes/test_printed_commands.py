"""Every command looptap prints for a user to paste (or hands to a shell) is built from its words
and quoted once (cassettes/hints.py ``shell_command``/``command_line``), whatever recorded text a
word holds: parsed back by :func:`shlex.split` it is the same words, it is one line the terminal
sanitiser leaves as it is, and a word no pasted line carries (a newline, NUL, another control, a
bidi or zero-width character) makes it say so instead (issue 83 item 1).

The printers, each fed arbitrary recorded text (:data:`RECORDED`, :data:`EXAMPLES` examples each):

- ``hints.shell_command`` / ``hints.command_line`` (what every one below builds on);
- why: the refusal's fix (``why._refusal.refusal``: the tool named by index in the recorded
  request body, or by name in the API's message), the report's "to test a fix", "to confirm a
  fix" and "branches … looptap diff" lines (``why.report_lines``), the refused verdict's headline
  (``why.verdict``), the dry run's fork options (``Intervention.options``);
- a fork's next steps after a missed prefix (``forking.fork.sent_lines``: ``rules propose``,
  ``--from RUN@divergence``);
- the pytest plugin's ``rules propose`` line (``replay.testing._report.propose_line``) and its
  recorder install hint (``replay.testing.recorder.how_to_install``);
- ``looptap diff``'s "compared as looptap diff B A" note (``replay.comparison._related``);
- the recorder's summary "details:" line (``proxy.summary.details_line``) with how the user runs
  looptap as handed over (``hints.looptap_argv`` from ``LOOPTAP_INVOKED_AS``);
- MCP's ``web_report`` command (``mcp.query.export_command``);
- the demo's next steps (``cli.demo.next_steps``);
- the install hints (``hints.install_command``, ``hints.recorder_install_command``);
- git's textconv command (``interop._command._install_textconv`` through ``shell_command``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looptap.cassettes import hints
from looptap.cassettes.analysis import Finding
from looptap.cassettes.cli import demo
from looptap.cassettes.hints import UnprintableCommand, command_line, shell_command
from looptap.cassettes.mcp.query import export_command
from looptap.cassettes.reading import Relation
from looptap.cassettes.replay import comparison
from looptap.cassettes.replay.forking.fork import sent_lines
from looptap.cassettes.replay.testing import recorder
from looptap.cassettes.replay.testing._report import propose_line
from looptap.cassettes.untrusted import clean, clean_line
from looptap.cassettes.why import Intervention, Outcome, Tally, refusal, report_lines, verdict
from looptap.proxy.summary import details_line

#: Examples per printer (the brief: at least 2,000): 2,000 in the nightly run (LOOPTAP_SLOW=1),
#: 200 by default (derandomized: the same draws every run).
EXAMPLES = 2000 if os.environ.get("LOOPTAP_SLOW", "") not in ("", "0") else 200
_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: What a recording can plant: quotes, substitutions, separators, globs, controls (NUL, newline,
#: ESC and an OSC 52), bidi and zero-width characters, a lone surrogate (a path's undecodable
#: byte), and ordinary unicode.
PIECES = [
    "'", '"', "\\", "$(touch PWNED)", "`touch PWNED`", "; touch PWNED;", "x'; touch PWNED; echo '",
    "&&", "|", ">", "<", "(", ")", "{", "}", "*", "?", "[a]", "~", "#", "!", "$HOME", "${IFS}",
    " ", "-", "--", "=", "@", ":", ",", "\n", "\r", "\t", "\x00", "\x1b]52;c;aGk=\x07", "\x9b",
    "\x7f", "\u202e", "\u2066", "\u200b", "\ufeff", "\udcff", "\u2028", "é", "日本", "\U0001f600",
]  # fmt: skip
RECORDED = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), min_size=1, max_size=4
).map("".join)

#: Names that a planted command would be run by, were a line not quoted once.
PLANTED = [
    "x'; touch PWNED; echo '",
    "$(touch PWNED)",
    "`touch PWNED`",
    'a"$(touch PWNED)"b',
    "x; touch PWNED",
    "x && touch PWNED",
    "x | touch PWNED",
    "x\\'; touch PWNED #",
    "*",
    "~root",
    "-rf",
    "a b",
    "!!",
]


def _showable(words: Sequence[str]) -> bool:
    return all(clean_line(w) == w for w in words)


def _words(line: str) -> list[str]:
    """``line`` read as a POSIX shell reads it, with ``&&`` and parentheses as their own tokens
    (the words of a single command: :func:`shlex.split`)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return list(lex)


def _check(said: str, *argvs: Sequence[str], subshell: bool = False) -> None:
    """``said`` (a command as printed) runs exactly ``argvs`` (one after another), on one line the
    sanitiser leaves as it is; or, if a word cannot be printed, it says so and holds none of it."""
    assert "\n" not in said and clean_line(said) == said and clean(said) == said, repr(said)
    if not all(_showable(a) for a in argvs):
        assert said.startswith("(a command not printed: its word "), repr(said)
        return
    if len(argvs) == 1 and not subshell:
        assert shlex.split(said) == list(argvs[0]), (said, argvs)
    expected: list[str] = ["("] if subshell else []
    for n, argv in enumerate(argvs):
        expected += (["&&"] if n else []) + list(argv)
    assert _words(said) == [*expected, *([")"] if subshell else [])], (said, argvs)


def _between(text: str, before: str, after: str = "") -> str:
    """The command in ``text``: after the constant ``before``, up to the constant ``after``."""
    assert before in text, (before, text)
    rest = text.split(before, 1)[1] if before else text
    return rest.rsplit(after, 1)[0] if after else rest


# -- the printers, one function each: fed the same drawn recorded text ----------------------------


@dataclass
class Drawn:
    """One example: recorded text for every place a printer takes it."""

    a: str
    b: str
    c: str
    words: list[str]
    more: list[str]
    argvs: list[list[str]]
    model: str | None
    flag: bool


DRAWN = st.builds(
    Drawn,
    RECORDED,
    RECORDED,
    RECORDED,
    st.lists(RECORDED, min_size=1, max_size=3),
    st.lists(RECORDED, max_size=2),
    st.lists(st.lists(RECORDED, min_size=1, max_size=3), min_size=1, max_size=2),
    st.one_of(st.none(), RECORDED),
    st.booleans(),
)


def p_command_line(d: Drawn) -> None:
    said = command_line(*d.argvs, subshell=d.flag)
    _check(said, *d.argvs, subshell=d.flag)
    if all(_showable(a) for a in d.argvs):
        assert shell_command(*d.argvs, subshell=d.flag) == said
    else:
        with pytest.raises(UnprintableCommand):
            shell_command(*d.argvs, subshell=d.flag)


def _json_text(text: str) -> str:
    """``text`` as a JSON body can carry it (a lone surrogate is no UTF-8: ``?`` instead)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _refused(tool: str, by_index: bool) -> Intervention | None:
    """A recorded 400 naming a tool's schema: by its index in the recorded request's tools (the
    name from the request body), or by name in the API's message (OpenAI's ``function 'x'``)."""
    tool = _json_text(tool)
    message = (
        "Invalid schema for function: [] is not of type 'object'."
        if by_index
        else f"Invalid schema for function '{tool}': [] is not of type 'object'."
    )
    f = Finding(
        code="A.http_error",
        layer="A",
        severity="error",
        message="x",
        conversation="c1",
        turn=1,
        details={"status": 400, "type": "invalid_request_error", "error": message},
    )
    error = {"message": message, "type": "invalid_request_error"}
    if by_index:
        error["param"] = "tools[1].function.parameters"
    ex = SimpleNamespace(
        response_body=orjson.dumps({"error": error}),
        request_body=orjson.dumps({"tools": [{"name": "other"}, {"name": tool}]}),
    )
    return refusal(f, ex)


def p_why_refusal_fix(d: Drawn) -> None:
    """The fix the refusal names, from the tool's name in the recorded body (by index) or in the
    API's message (by name)."""
    i = _refused(d.a, d.flag)
    if i is None or not i.fix:  # by name: a name the message's pattern does not take; no name
        assert not d.flag or not d.a
        return
    if d.flag:
        assert i.fix == ["--edit", f"tool_schema[{_json_text(d.a)[:128]}]=@SCHEMA.json"]
    assert i.missing is not None and i.fix[1].startswith("tool_schema[")
    _check(_between(i.missing, "test a fix with a fork at it: "), i.fix)


def _report(i: Intervention, run: str, directory: str, passed: list[str], argv: list[str]) -> Any:
    t = Tally(i, flips=0, samples=5, branches=[{"file": "x.jsonl", "showed": "failed"}])
    v = verdict([t], 5)
    return v, report_lines(v, Outcome("exit"), Path(directory), Path(run), argv, passed)


def p_why_report(d: Drawn) -> None:
    """why's "to test a fix" (the tool's name, the run's path, the options every branch had, the
    agent's command), "to confirm a fix" (the directory) and the refused verdict's headline."""
    i = _refused(d.a, by_index=True)
    assert i is not None
    if not d.a:  # a tool without a name: no fix to test
        assert not i.fix
        return
    v, lines = _report(i, d.b, d.c, d.more, d.words)
    assert all("\n" not in ln for ln in lines)
    tool = _json_text(d.a)[:128]
    fork = [
        "looptap", "run", "--from", f"{Path(d.b)}@conversation=c1:turn=1",
        "--edit", f"tool_schema[{tool}]=@SCHEMA.json", *d.more, "-o", "fixed.jsonl", "--", *d.words,
    ]  # fmt: skip
    fix = next(ln for ln in lines if ln.startswith("to test a fix: "))
    _check(_between(fix, "to test a fix: "), fork)
    confirm = next(ln for ln in lines if ln.startswith("to confirm a fix: "))
    _check(
        _between(confirm, "to confirm a fix: ", " FIXED_AGENT_COMMAND (runs it K times"),
        ["looptap", "why", str(Path(d.c)), "--confirm", "--"],
    )
    # the headline names the fix (the verdict's words around it hold recorded text too)
    _check(_between(v.headline, "test a fix with a fork at it (")[:-1], i.fix)


def p_why_branches(d: Drawn) -> None:
    """why's "branches … in DIR: looptap diff RUN DIR/BRANCH.jsonl"."""
    t = Tally(Intervention("E", "c1", 1, "re-sample", "e-resample"), flips=0, samples=5)
    t.branches = [{"file": "x.jsonl", "showed": "failed"}]
    lines = report_lines(verdict([t], 5), Outcome("exit"), Path(d.c), Path(d.b))
    line = next(ln for ln in lines if ln.startswith("branches (ordinary branch cassettes) in "))
    head = f"branches (ordinary branch cassettes) in {clean_line(str(Path(d.c)))}: "
    _check(
        _between(line, head, " shows what each changed"),
        ["looptap", "diff", str(Path(d.b)), f"{Path(d.c)}/BRANCH.jsonl"],
    )


def p_why_dry_run(d: Drawn) -> None:
    """The dry run's `` [--edit A --edit B] --model M`` (an edit names a recorded call id): the
    brackets read by a shell as part of the first and the last edit word, nothing else."""
    i = Intervention("C", "c1", 1, "x", "c-restore-result", edits=d.more, model=d.model)
    said = i.options
    assert "\n" not in said and clean_line(said) == said
    words = [w for e in d.more for w in ("--edit", e)]
    if words:
        words[0], words[-1] = "[" + words[0], words[-1] + "]"
    words += ["--model", d.model] if d.model else []
    if not _showable(d.more) or (d.model and not _showable([d.model])):
        assert "(a command not printed: its word " in said, said
        return
    assert shlex.split(said) == words, said


def p_fork_sent(d: Drawn) -> None:
    """A fork's next steps when its prefix missed: ``rules propose RUN SENT``, ``--from
    RUN@divergence``."""
    lines = sent_lines(d.a, Path(d.b), strict=d.flag, divergence=False)
    _check(
        _between(lines[0], "if what differs is volatile: "),
        ["looptap", "rules", "propose", d.a, str(Path(d.b))],
    )
    modes = _between(lines[1], "with its recorded turn; ") if d.flag else lines[1]
    _check(
        modes.removesuffix(" goes live at the first difference instead of failing (docs/fork.md)"),
        ["--from", f"{d.a}@divergence"],
    )


def p_pytest_propose(d: Drawn) -> None:
    """The pytest plugin's ``rules propose CASSETTE SENT`` after a replay miss."""
    _check(
        _between(propose_line(Path(d.a), Path(d.b)), "if what differs is volatile: "),
        ["looptap", "rules", "propose", str(Path(d.a)), str(Path(d.b))],
    )


def p_diff_swapped(d: Drawn) -> None:
    """``looptap diff``'s note on a branch named first: "compared as looptap diff B A"."""
    notes: list[str] = []
    args = argparse.Namespace(a=d.a, b=d.b)
    rel = Relation(origin=Path(d.b), branch=Path(d.a), meta={}, swapped=True)
    assert comparison._related(args, rel, notes)
    head = clean_line(f"{d.a} is a branch of {d.b}: compared as ")
    _check(
        _between(notes[0], head, " (the origin as A, the branch as B)"),
        ["looptap", "diff", d.b, d.a],
    )


def p_recorder_details(d: Drawn) -> None:
    """The recorder's "details: LOOPTAP show RUN", LOOPTAP as the user ran looptap, handed over
    by the looptap that started the recorder (``LOOPTAP_INVOKED_AS``)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(hints, "looptap_argv", lambda: d.words)
        handed = hints.looptap_command()  # what the looptap that hands over sets
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sys, "argv", ["-m"])
        m.setenv(hints.INVOKED_AS, handed)
        words = hints.looptap_argv()
        if _showable(d.words) and len(handed) < 512:
            assert words == d.words
        else:  # never handed over: this looptap's own words
            assert handed == "" or len(handed) >= 512
        said = details_line(Path(d.a))
    _check(_between(said, "details: "), [*words, "show", str(Path(d.a))])


def p_mcp_web_report(d: Drawn) -> None:
    """MCP ``web_report``'s ``recorded.command`` (a run's file name is the recording's)."""
    _check(
        export_command(Path(d.a), Path(d.b)),
        [
            sys.executable, "-m", "looptap.cassettes.cli", "export", "--html", str(Path(d.a)),
            "-o", str(Path(d.b)),
        ],
    )  # fmt: skip


def p_demo_next(d: Drawn) -> None:
    """The demo's next steps: ``show``/``inspect`` the cassette, ``run`` with the recorder."""
    said: list[str] = []
    recorder_words = d.words if d.flag else None
    with pytest.MonkeyPatch.context() as m:
        m.setattr(demo, "looptap_argv", lambda: ["looptap"])
        demo.next_steps(0, Path(d.a), said.append, recorder_words)
    show, inspect, own = (ln.strip() for ln in "\n".join(said).strip().splitlines())
    _check(_between(show, "next: ", "   (every round trip"), ["looptap", "show", str(Path(d.a))])
    _check(_between(inspect, "", "   (turn by turn"), ["looptap", "inspect", str(Path(d.a))])
    _check(
        _between(own, "", " python your_agent.py   (record"),
        [*(recorder_words or ["looptap"]), "run", "-o", "run.jsonl", "--"],
    )


def p_install_hints(d: Drawn) -> None:
    """The interpreter's and the checkout's paths (the user's disk: any name) in the install
    commands, the recorder's environment and the pytest plugin's hint."""
    python, checkout = d.a, (d.b if d.flag else None)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sys, "executable", python)
        m.setattr(hints, "looptap_checkout", lambda: Path(checkout) if checkout else None)
        m.setattr(hints, "_direct_url", lambda: None)  # (else: from an index, by its name)
        m.setattr(hints.shutil, "which", lambda _name: "/bin/uv" if d.model is None else None)
        m.setattr(hints.Path, "home", staticmethod(lambda: Path(d.c)))
        said = hints.install_command("mcp")
        made, _python = hints.recorder_install_command()
        plugin = recorder.how_to_install()
    first: list[list[str]] = []
    if d.model is None:
        install = ["uv", "pip", "install", "--python", python]
    elif (Path(python).parent / "uv").exists():
        install = [str(Path(python).parent / "uv"), "pip", "install", "--python", python]
    else:
        first = [[python, "-m", "pip", "install", "-q", "uv"]]
        install = [python, "-m", "uv", "pip", "install", "--python", python]
    spec = f"{Path(checkout)}[mcp]" if checkout else "looptap[mcp]"
    _check(said, *first, [*install, *(["-e"] if checkout else []), spec])
    if checkout:
        _check(
            made,
            ["cd", str(Path(checkout))],
            ["python3", "-m", "venv", ".venv-proxy"],
            [".venv-proxy/bin/pip", "install", "-q", "uv"],
            [".venv-proxy/bin/uv", "pip", "install", "-q", "--python", ".venv-proxy/bin/python"]
            + ["--override", ".ci/proxy-overrides.txt", "-e", ".[proxy,inspector,mcp,html]"],
            subshell=True,
        )
    else:
        v = str(Path(d.c) / ".looptap-proxy")
        _check(
            made,
            ["python3", "-m", "venv", v],
            [f"{v}/bin/pip", "install", "-q", "uv"],
            [f"{v}/bin/uv", "pip", "install", "-q", "--python", f"{v}/bin/python"]
            + ["looptap[proxy,inspector,mcp,html]"],
        )
    assert _between(plugin, "create it with `", "` (found there from then on") == made


#: Every printer, by name (the module docstring lists where each prints).
PRINTERS: dict[str, Callable[[Drawn], None]] = {
    "hints.shell_command/command_line": p_command_line,
    "why refusal fix": p_why_refusal_fix,
    "why report: to test a fix, to confirm a fix, verdict headline": p_why_report,
    "why report: branches diff": p_why_branches,
    "why dry run: fork options": p_why_dry_run,
    "fork: rules propose, --from divergence": p_fork_sent,
    "pytest plugin: rules propose": p_pytest_propose,
    "diff: compared as": p_diff_swapped,
    "recorder summary: details (as handed over)": p_recorder_details,
    "mcp web_report command": p_mcp_web_report,
    "demo next steps": p_demo_next,
    "install hints (install, recorder env, pytest plugin)": p_install_hints,
}


def test_every_printed_command_reads_back_as_its_words() -> None:
    """Each printer fed the same :data:`EXAMPLES` drawn recorded texts (one generation shared,
    so the test stays a few seconds a printer): each reads back as its words, or says it could
    not print one; counted per printer."""
    seen: Counter[str] = Counter()

    @_SETTINGS
    @given(DRAWN)
    def each(d: Drawn) -> None:
        for name, printer in PRINTERS.items():
            printer(d)
            seen[name] += 1

    each()
    assert all(seen[name] >= EXAMPLES for name in PRINTERS), seen


def test_a_nul_or_a_newline_is_refused_not_printed() -> None:
    for bad in ("a\x00b", "a\nb", "a\u202eb", "\x1b]52;c;aGk=\x07", "a\tb"):
        said = command_line(["looptap", "show", bad])
        assert said.startswith("(a command not printed: its word 3 holds U+")
        assert bad not in said and clean_line(said) == said
        with pytest.raises(UnprintableCommand):
            shell_command(["looptap", "show", bad])


# -- the lines run: nothing planted runs ----------------------------------------------------------


def _printed(name: str) -> list[str]:
    """One printed command per printer (a single command each), ``name`` in every recorded place."""
    i = _refused(name, by_index=True)
    assert i is not None
    _v, lines = _report(i, name, name, [name], [name])
    said: list[str] = []
    demo.next_steps(0, Path(name), said.append, [name])
    return [
        _between(next(ln for ln in lines if ln.startswith("to test a fix: ")), "to test a fix: "),
        _between(
            next(ln for ln in lines if ln.startswith("to confirm a fix: ")),
            "to confirm a fix: ",
            " FIXED_AGENT_COMMAND (runs",
        ),
        _between(sent_lines(name, Path(name), strict=False, divergence=False)[0], "volatile: "),
        _between(propose_line(Path(name), Path(name)), "volatile: "),
        _between(details_line(Path(name)), "details: "),
        export_command(Path(name), Path(name)),
        _between(said[0].strip(), "next: ", "   (every"),
        command_line(["--from", f"{name}@divergence"]),
    ]  # fmt: skip


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_printed_line_run_by_a_shell_runs_no_planted_command(tmp_path: Path, shell: str) -> None:
    """Each printed command, run by a real shell as ``printf '%s\\0' COMMAND`` in an empty
    directory: the shell hands printf exactly the words the line was built from, and the planted
    ``touch PWNED`` (or any other command) never runs."""
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    for name in PLANTED:
        for line in _printed(name):
            words = shlex.split(line)
            done = subprocess.run(
                [shell, "-c", f"printf '%s\\0' {line}"],
                cwd=tmp_path,
                capture_output=True,
                check=False,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)},
            )
            assert done.returncode == 0, (line, done.stderr)
            assert done.stdout.split(b"\0")[:-1] == [w.encode() for w in words], line
            assert name in words or any(name in w for w in words), (name, line)
            assert not list(tmp_path.iterdir()), (name, line)
