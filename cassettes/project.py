"""Where a project's matching rules come from: one file it commits, found from the cassette, and
the command line's flags that add to it (:func:`add_rule_flags`).

Precedence (docs/testing.md, "Rules"): a ``looptap.toml`` in the cassette's own directory (beside
the cassettes) is read, and nothing else; without one, the first ``pyproject.toml`` found from the
cassette's directory upward, else from the working directory upward, and its ``[tool.looptap]``
table (a ``pyproject.toml`` without the table stops the search too: it is the project's, and the
project says nothing). The rules given on the command line or in pytest's ini and marker are added
to the file's (:meth:`~cassettes.matching.Rules.extend`).

A file is untrusted input: read with the standard library's TOML reader, at most :data:`MAX_FILE`
bytes, the walk upward at most :data:`MAX_UP` directories; what cannot be used is one
:class:`RuleError` line naming the file.

Finding and reading the file, and declaring the flags, need none of the rules' machinery (the
table is read by :func:`~cassettes.matching._ruletable.rules_from_config`): the pytest plugin
checks at start-up, in every session, whether the project declares rules at all
(:func:`project_table`), and ``looptap --help`` lists the flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import CassetteError

__all__ = ["RuleError", "add_rule_flags", "find_config", "project_table"]

BESIDE = "looptap.toml"
PYPROJECT = "pyproject.toml"
MAX_FILE = 1 << 20
MAX_UP = 64


class RuleError(CassetteError, ValueError):
    """A rule that cannot be used (a path that does not parse, a pattern RE2 does not take, an
    unknown API family or table key, a file that cannot be read): one line saying which and
    why."""


def find_config(
    cassette: str | Path | None = None, cwd: str | Path | None = None
) -> tuple[Path, bool] | None:
    """The file the rules are read from and whether it is a ``pyproject.toml`` (``False``: a
    ``looptap.toml``), or ``None``. See the module docstring for the order."""
    starts: list[Path] = []
    if cassette is not None:
        folder = Path(cassette).absolute().parent
        beside = folder / BESIDE
        if beside.is_file():
            return beside, False
        starts.append(folder)
    starts.append(Path(cwd) if cwd is not None else Path.cwd())
    for start in starts:
        here = start.absolute()
        for _ in range(MAX_UP):
            candidate = here / PYPROJECT
            if candidate.is_file():
                return candidate, True
            if here.parent == here:
                break
            here = here.parent
    return None


def project_table(
    cassette: str | Path | None = None, cwd: str | Path | None = None
) -> tuple[Mapping[str, Any], str] | None:
    """The project's looptap table (its ``looptap.toml``, or its ``pyproject.toml``'s
    ``[tool.looptap]``: :func:`find_config`) and where it is, for messages; ``None`` when there is
    no file or no table. Raises :class:`RuleError` for a file that cannot be read."""
    found = find_config(cassette, cwd)
    if found is None:
        return None
    path, is_pyproject = found
    data = _read(path)
    if not is_pyproject:
        return data, str(path)
    tool = data.get("tool")
    table = tool.get("looptap") if isinstance(tool, dict) else None
    return None if table is None else (table, f"{path} [tool.looptap]")


def _read(path: Path) -> dict[str, Any]:
    """The file's TOML, bounded: at most :data:`MAX_FILE` bytes (checked before it is parsed),
    nested at most :data:`~cassettes.bounds.TOML_DEPTH` levels; one line naming it if not (a
    regular file: :func:`find_config` takes no other)."""
    import tomllib

    from .bounds import parse_toml

    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE + 1)
    except OSError as exc:
        raise RuleError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE:
        raise RuleError(
            f"{path}: larger than {MAX_FILE // 1024:,} KiB; not read as the project's looptap rules"
        )
    try:
        return parse_toml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RuleError(f"{path}: not UTF-8 text (byte {exc.start:,}): not read") from None
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{path}: not valid TOML: {exc}") from None


def add_rule_flags(p: Any, fork: bool = False, what: str | None = None) -> None:
    """``--ignore``, ``--substitute`` and ``--volatile-tool`` (repeatable) on a command's parser
    (``what``: what they match, in the help; ``looptap diff`` compares the requests so too)."""
    what = what or ("the fork's prefix" if fork else "the replay")
    for flag, metavar, said in (
        (
            "--ignore",
            "PATH",
            "ignore this JSON path of the request body (wildcards: metadata.*, "
            "messages[*].content[*].cache_control; one API family only: FAMILY:PATH); repeatable; "
            "added to pyproject.toml's [tool.looptap] (docs/testing.md)",
        ),
        (
            "--substitute",
            "REGEX=REPLACEMENT",
            "write every match of REGEX in the request's strings as REPLACEMENT, on both sides "
            "(split at the last '='); repeatable",
        ),
        (
            "--volatile-tool",
            "NAME",
            "the results of the tool NAME are not compared (what the world says now); repeatable",
        ),
    ):
        p.add_argument(
            flag, action="append", default=[], metavar=metavar, help=f"when matching {what}: {said}"
        )
