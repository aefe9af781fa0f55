"""Every file looptap reads on its own is bounded in size and depth, and refused in one line naming
it (issue 83 item 2): the agent's rules (``looptap-rules.toml`` in the working directory, or
``$LOOPTAP_RULES``: read by ``show``, ``rules check``, every analysis), the project's matching
rules (``looptap.toml`` beside a cassette, ``pyproject.toml``'s ``[tool.looptap]`` found upward),
the recorder's redaction table and ``verify``'s patterns (``pyproject.toml``'s
``[tool.looptap.redact]`` and ``[tool.looptap.verify]`` in the working directory). On fec4f2c2 a
file nested ~1,000 deep ended each in a ``RecursionError`` traceback (tomllib recurses once a
level), and a 50 MB one was read whole before it was parsed (the rules, the redaction and verify
tables: no size bound at all).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from looptap.cassettes.analysis import RulesError
from looptap.cassettes.analysis import load as load_rules
from looptap.cassettes.project import RuleError, project_table
from looptap.cassettes.recording import Redactor
from looptap.cassettes.verify import load_config_patterns

#: Each reader of a file looptap finds on its own, given the file's path (named as it is found:
#: in the working directory, beside the cassette), and the one error it says a bad file with.
READERS: dict[str, tuple[str, Callable[[Path], object], type[Exception]]] = {
    "agent rules": ("looptap-rules.toml", load_rules, RulesError),
    "project rules, looptap.toml": (
        "looptap.toml",
        lambda p: project_table(cassette=p.parent / "run.jsonl"),
        RuleError,
    ),
    "project rules, pyproject.toml": (
        "pyproject.toml",
        lambda p: project_table(cassette=p.parent / "run.jsonl"),
        RuleError,
    ),
    "redaction table": ("pyproject.toml", lambda p: Redactor.configured(config=p), ValueError),
    "verify patterns": ("pyproject.toml", load_config_patterns, ValueError),
}


def _deep(kind: str, n: int = 1000) -> str:
    """A TOML file nested ``n`` levels, in each way TOML nests: arrays, inline tables, both, and
    arrays of tables behind a table header."""
    if kind == "arrays":
        return "[tool.looptap]\nx = " + "[" * n + "1" + "]" * n + "\n"
    if kind == "inline tables":
        return "[tool.looptap]\nx = " + "{a = " * n + "1" + "}" * n + "\n"
    if kind == "mixed":
        return "[tool.looptap]\nx = " + "[{a = " * (n // 2) + "1" + "}]" * (n // 2) + "\n"
    assert kind == "after a string and a comment"
    return '[tool.looptap]\ns = "]]]}}}" # ]]]\nx = [' + "[" * n + "]" * n + "]\n"


@pytest.mark.parametrize(
    "deep", ["arrays", "inline tables", "mixed", "after a string and a comment"]
)
@pytest.mark.parametrize("reader", READERS)
def test_a_file_nested_a_thousand_deep_is_one_line_naming_it(
    tmp_path: Path, reader: str, deep: str
) -> None:
    name, read, error = READERS[reader]
    path = tmp_path / name
    path.write_text(_deep(deep))
    with pytest.raises(error) as got:
        read(path)
    said = str(got.value)
    assert "\n" not in said and str(path) in said and "nested" in said, said
    assert not isinstance(got.value, RecursionError)


@pytest.mark.parametrize("size", [27 << 20, 50 << 20])
@pytest.mark.parametrize("reader", READERS)
def test_a_file_of_tens_of_megabytes_is_refused_by_its_size(
    tmp_path: Path, reader: str, size: int
) -> None:
    """Refused by its size (the size's line, never a parse's), reading no more than the bound:
    the file is sparse, valid TOML up to its size would take the reader minutes."""
    name, read, error = READERS[reader]
    path = tmp_path / name
    with path.open("wb") as f:
        f.write(b"[tool.looptap]\nx = [" + b"1, " * 1000)
        f.truncate(size)
    with pytest.raises(error) as got:
        read(path)
    said = str(got.value)
    assert "\n" not in said and str(path) in said and "larger than 1,024 KiB" in said, said


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_or_bytes_that_are_not_text_are_one_line(tmp_path: Path, reader: str) -> None:
    """A FIFO put at the file's name is passed over (the project's files are looked for as
    regular files) or refused, never opened to block; bytes that are not UTF-8 are said so."""
    name, read, error = READERS[reader]
    path = tmp_path / name
    os.mkfifo(path)
    try:
        read(path)
    except error as exc:
        assert "\n" not in str(exc) and str(path) in str(exc), exc
    path.unlink()
    path.write_bytes(b'[tool.looptap]\nx = "\xff"\n')
    with pytest.raises(error) as got:
        read(path)
    assert "\n" not in str(got.value) and "not UTF-8" in str(got.value), got.value


def test_the_depth_bound_reads_what_configurations_nest() -> None:
    """Up to :data:`TOML_DEPTH` levels read as tomllib reads them; brackets in strings, literal
    and multi-line strings and comments are no nesting."""
    from looptap.cassettes.bounds import TOML_DEPTH, parse_toml

    ok = "x = " + "[" * TOML_DEPTH + "]" * TOML_DEPTH
    assert parse_toml(ok) == tomllib.loads(ok)
    with pytest.raises(tomllib.TOMLDecodeError, match="nested deeper than"):
        parse_toml("x = " + "[" * (TOML_DEPTH + 1) + "]" * (TOML_DEPTH + 1))
    text = (
        's = "[[[[\\"[[["\nl = \'[[[[\'\nm = """\n[[[[ \\\n """\nn = \'\'\'[[[[\'\'\'\n'
        "# [[[[[[[[\n[[t]]\n[u.v]\nw = [{a = [1]}]\n"
    )
    big = text.replace("[[[[", "[" * 200)
    assert parse_toml(big) == tomllib.loads(big)


def test_show_and_rules_check_say_a_deep_rules_file_in_one_line(tmp_path: Path) -> None:
    """The commands that read ``looptap-rules.toml`` from the working directory: one line naming
    it, exit status 2, no traceback (on fec4f2c2: a 3,000-line ``RecursionError``)."""
    (tmp_path / "looptap-rules.toml").write_text(_deep("arrays"))
    run = Path(__file__).parents[2] / "cassettes" / "examples" / "tool_loop_anthropic.yaml"
    for argv in (["show", str(run)], ["rules", "check", "looptap-rules.toml", str(run)]):
        done = subprocess.run(
            [sys.executable, "-m", "looptap.cassettes.cli", *argv],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "LOOPTAP_NO_CACHE": "1"},
            check=False,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        (line,) = done.stderr.strip().splitlines()
        assert "looptap-rules.toml" in line and "nested deeper than" in line, line


def test_recorded_names_in_what_rules_and_errors_print_are_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What ``rules check`` prints of a broken rule (the recorded tool's name, why) and every
    command's error line (``err``) are one line each, controls shown, whatever the recording holds
    (on fec4f2c2 a tool name's newline and ESC reached the terminal)."""
    from looptap.cassettes.analysis import Finding
    from looptap.cassettes.cli import agent_rules
    from looptap.cassettes.commands import err

    tool = "lookup\nlooptap: all rules passed\x1b[2J"
    f = Finding(
        code="E.rule_broken",
        layer="E",
        severity="warning",
        message="x",
        conversation="c1\nc2",
        turn=1,
        details={"rule": "r", "tool": tool, "why": "called before\nauth"},
    )
    agent_rules._print_run("run.jsonl", [f])
    err(f"error: {tool}")
    out, said = capsys.readouterr()
    assert len(out.splitlines()) == 2 and "\x1b" not in out, out
    assert len(said.splitlines()) == 1 and "\x1b" not in said, said
