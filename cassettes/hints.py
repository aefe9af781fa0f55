"""The commands looptap's own hints print (``next:`` lines, install advice), written so they run
as typed in the user's shell.

- :func:`looptap_command`: how *this* user runs looptap: as the looptap that handed this command
  over said (:data:`INVOKED_AS`), else ``looptap`` when that name on ``PATH`` is this very program
  (the README's set-up links it into ``.venv-proxy/path``, on ``PATH``), else the path they typed
  (``.venv-proxy/bin/looptap``), else ``python -m cassettes.cli`` with this interpreter.
- :func:`found_recorder`: the recorder's environment where set-up makes it (the checkout's
  ``.venv-proxy``), so a ``looptap`` installed elsewhere (the user's project) finds it.
- :func:`shell_command`, :func:`command_line`: every command looptap prints or hands to a shell,
  from its argv (each word quoted once by :func:`shlex.join`, never by quotes formatted around
  recorded text), one line that the terminal sanitiser leaves as it is; a word holding a
  character no pasted line carries is refused (:class:`UnprintableCommand`), in a hint said so.
- :func:`install_command`: what installs an extra into *this* environment, from where this
  looptap came (:func:`install_source`): the checkout this code runs from (an editable install,
  by its absolute path, so the line works from the user's own project too), else the path, wheel
  or URL PEP 610's ``direct_url.json`` names (looptap is on no package index), with the
  recorder's overrides (a checkout's ``.ci/proxy-overrides.txt``, else the copy the wheel ships);
  the name alone only for an install from an index. Never ``-e '.[…]'``, which in the user's
  project would install the user's project.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import CassetteError
from .untrusted import clean_line

__all__ = [
    "HANDED_OFF",
    "HANDOVER",
    "INVOKED_AS",
    "UnprintableCommand",
    "command_line",
    "count",
    "found_recorder",
    "install_command",
    "install_source",
    "looptap_argv",
    "looptap_checkout",
    "looptap_command",
    "recorder_install_command",
    "shell_command",
]


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


#: The variable by which a looptap that hands a command to another process (``run`` to the
#: recorder's environment, ``demo`` to its recorder) says how the user ran looptap.
INVOKED_AS = "LOOPTAP_INVOKED_AS"
#: Set for a command handed to the recorder's environment: never handed on again.
HANDED_OFF = "LOOPTAP_HANDED_OFF"
#: Neither reaches the agent a recorder runs (its own looptap decides for itself).
HANDOVER = (INVOKED_AS, HANDED_OFF)


def looptap_argv() -> list[str]:
    """The words that run this looptap in the user's shell."""
    said = os.environ.get(INVOKED_AS, "").strip()
    if said and len(said) < 512 and clean_line(said) == said:
        try:
            words = shlex.split(said)
        except ValueError:
            words = []
        if words:
            return words
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "looptap":
        found = shutil.which("looptap")
        if found is not None and _same(found, argv0):
            return ["looptap"]
        return [argv0]
    found = shutil.which("looptap")
    if found is not None and Path(found).parent == Path(sys.executable).parent:
        return ["looptap"]
    return [sys.executable, "-m", "looptap.cassettes.cli"]


def looptap_command() -> str:
    """:func:`looptap_argv` as a shell reads it (what :data:`INVOKED_AS` hands on); empty when
    a word cannot be printed (then the looptap handed to says its own)."""
    try:
        return shell_command(looptap_argv())
    except UnprintableCommand:
        return ""


class UnprintableCommand(CassetteError, ValueError):
    """A command one of whose words no pasted line carries as itself (:func:`shell_command`)."""


def shell_command(*argvs: Sequence[str], subshell: bool = False) -> str:
    """The command that runs ``argvs`` one after another (``&&``; ``subshell``: in parentheses),
    each word quoted once (:func:`shlex.join`): a POSIX shell, and :func:`shlex.split`, read back
    the same words, whatever recorded text a word holds (quotes, ``$()``, backticks, globs).

    The line is printed as it is, on one line. A word holding a character that the terminal
    sanitiser would show escaped (:func:`cassettes.untrusted.clean_line`: a newline, a tab, NUL
    or another control, a bidi or zero-width character, a lone surrogate) cannot be carried by a
    pasted line as itself (NUL by no shell word at all): :class:`UnprintableCommand`, never a
    line that would run other words than it shows."""
    for argv in argvs:
        for n, word in enumerate(argv, 1):
            if clean_line(word) != word:
                bad = next(ch for ch in word if clean_line(ch) != ch)
                raise UnprintableCommand(
                    f"a command not printed: its word {n} holds U+{ord(bad):04X}, which no pasted "
                    "line carries as itself"
                )
    line = " && ".join(shlex.join(argv) for argv in argvs)
    return f"({line})" if subshell else line


def command_line(*argvs: Sequence[str], subshell: bool = False) -> str:
    """:func:`shell_command` for a hint: the command, or, when it cannot be printed, the reason
    in parentheses (the rest of the hint still said)."""
    try:
        return shell_command(*argvs, subshell=subshell)
    except UnprintableCommand as exc:
        return f"({exc})"


def looptap_checkout() -> Path | None:
    """The looptap source checkout this code runs from (an editable install), or ``None``."""
    here = Path(__file__).resolve().parents[1]
    project = here / "pyproject.toml"
    try:
        if (
            project.is_file()
            and 'name = "looptap"' in project.read_text(encoding="utf-8", errors="replace")[:4096]
        ):
            return here
    except OSError:
        return None
    return None


#: The recorder's overrides (``.ci/proxy-overrides.txt``: mitmproxy's metadata pins that the
#: core's dependencies need lifted), where a checkout has them and where the wheel puts them.
_CHECKOUT_OVERRIDES = Path(".ci") / "proxy-overrides.txt"
_SHIPPED_OVERRIDES = Path(__file__).resolve().parents[1] / "proxy" / "overrides.txt"


def _direct_url() -> dict[str, Any] | None:
    """This install's PEP 610 record (``direct_url.json``): where it was installed from, when it
    was not from a package index; ``None`` when it was (or looptap is not installed at all)."""
    from importlib import metadata

    try:
        text = metadata.distribution("looptap").read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("url"), str) else None


def _local(url: str) -> Path | None:
    """The path of a ``file:`` URL."""
    from urllib.parse import unquote, urlsplit
    from urllib.request import url2pathname

    parts = urlsplit(url)
    return Path(url2pathname(unquote(parts.path))) if parts.scheme == "file" else None


def install_source(*extras: str) -> tuple[list[str], Path | None] | str:
    """What ``pip install`` takes to install *this* looptap again with ``extras``, and the overrides
    file its recorder needs (``None``: none found): the checkout an editable install (or this
    code) runs from, by its path; else the path, wheel or URL it was installed from (PEP 610's
    ``direct_url.json``); else, installed from a package index, the name there. Or, when none of
    these exists any more, why (a sentence)."""
    spec_extras = f"[{','.join(extras)}]" if extras else ""
    shipped = _SHIPPED_OVERRIDES if _SHIPPED_OVERRIDES.is_file() else None
    checkout = looptap_checkout()
    if checkout is not None:
        over = checkout / _CHECKOUT_OVERRIDES
        return ["-e", f"{checkout}{spec_extras}"], over if over.is_file() else shipped
    record = _direct_url()
    if record is None:  # from an index: the name is published there
        return [f"looptap{spec_extras}"], shipped
    url: str = record["url"]
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id")
        at = f"@{commit}" if isinstance(commit, str) and commit else ""
        return [f"looptap{spec_extras} @ {vcs.get('vcs', 'git')}+{url}{at}"], shipped
    path = _local(url)
    if path is not None and not path.exists():
        return (
            f"looptap was installed from {path}, which is no longer there: install it again "
            "from a looptap checkout or wheel"
        )
    beside = path / _CHECKOUT_OVERRIDES if path is not None and path.is_dir() else None
    found = beside if beside is not None and beside.is_file() else shipped
    return [f"looptap{spec_extras} @ {url}"], found


def install_command(*extras: str) -> str:
    """A command that installs looptap with ``extras`` into the environment running now, from
    where this looptap came (:func:`install_source`), with the recorder's overrides when
    ``proxy`` is among them."""
    source = install_source(*extras)
    if isinstance(source, str):
        return f"({source})"
    words, override = source
    python = sys.executable
    beside = Path(sys.executable).parent / "uv"  # the README's set-up puts uv there
    first: list[list[str]] = []
    if shutil.which("uv"):
        uv = ["uv"]
    elif beside.exists():
        uv = [str(beside)]
    else:
        first, uv = [[python, "-m", "pip", "install", "-q", "uv"]], [python, "-m", "uv"]
    install = [*uv, "pip", "install", "--python", python]
    over = ["--override", str(override)] if "proxy" in extras and override is not None else []
    return command_line(*first, [*install, *over, *words])


def _recorder_venv() -> Path:
    """Where set-up makes the recorder's environment: the checkout's ``.venv-proxy`` (the README's
    first command), else ``~/.looptap-proxy``."""
    checkout = looptap_checkout()
    return checkout / ".venv-proxy" if checkout is not None else Path.home() / ".looptap-proxy"


def found_recorder() -> str | None:
    """The recorder's interpreter where set-up made it (:func:`_recorder_venv`), if it is there."""
    python = _recorder_venv() / "bin" / "python"
    return str(python) if python.exists() else None


def recorder_install_command() -> tuple[str, str]:
    """A command that creates the recorder's own environment (mitmproxy beside the core, never
    beside the agent's SDKs) and the interpreter it leaves there, for ``LOOPTAP_PROXY_PYTHON``:
    the checkout's ``.venv-proxy``, made as the README's first command makes it (in a subshell
    that enters the checkout: its path said once, the user's directory left as it was), else
    ``~/.looptap-proxy``."""
    checkout = looptap_checkout()
    venv = _recorder_venv()
    if checkout is not None:
        command = command_line(
            ["cd", str(checkout)],
            ["python3", "-m", "venv", ".venv-proxy"],
            [".venv-proxy/bin/pip", "install", "-q", "uv"],
            [".venv-proxy/bin/uv", "pip", "install", "-q", "--python", ".venv-proxy/bin/python"]
            + ["--override", ".ci/proxy-overrides.txt", "-e", ".[proxy,inspector,mcp,html]"],
            subshell=True,
        )
        return command, f"{venv}/bin/python"
    bin_ = f"{venv}/bin"
    source = install_source("proxy", "inspector", "mcp", "html")
    if isinstance(source, str):
        return f"({source})", f"{venv}/bin/python"
    words, override = source
    over = ["--override", str(override)] if override is not None else []
    command = command_line(
        ["python3", "-m", "venv", str(venv)],
        [f"{bin_}/pip", "install", "-q", "uv"],
        [f"{bin_}/uv", "pip", "install", "-q", "--python", f"{bin_}/python", *over, *words],
    )
    return command, f"{venv}/bin/python"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 round trip``, ``2 round trips``, ``1,024 requests``: a number and its noun, agreed."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
