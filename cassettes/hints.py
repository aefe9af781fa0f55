"""The commands looptap's own hints print (``next:`` lines, install advice), written so they run
as typed in the user's shell.

- :func:`looptap_command`: how *this* user runs looptap: as the looptap that handed this command
  over said (:data:`INVOKED_AS`), else ``looptap`` when that name on ``PATH`` is this very program
  (the README's set-up links it into ``.venv-proxy/path``, on ``PATH``), else the path they typed
  (``.venv-proxy/bin/looptap``), else ``python -m cassettes.cli`` with this interpreter.
- :func:`found_recorder`: the recorder's environment where set-up makes it (the checkout's
  ``.venv-proxy``), so a ``looptap`` installed elsewhere (the user's project) finds it.
- :func:`install_command`: what installs an extra into *this* environment: the looptap checkout
  this code runs from (an editable install, by its absolute path, so the line works from the
  user's own project too), else the package by name. Never ``-e '.[…]'``, which in the user's
  project would install the user's project.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = [
    "HANDED_OFF",
    "HANDOVER",
    "INVOKED_AS",
    "count",
    "found_recorder",
    "install_command",
    "looptap_checkout",
    "looptap_command",
    "recorder_install_command",
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


def looptap_command() -> str:
    """The words that run this looptap in the user's shell."""
    said = os.environ.get(INVOKED_AS, "").strip()
    if said and len(said) < 512 and said.isprintable():
        return said
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "looptap":
        found = shutil.which("looptap")
        if found is not None and _same(found, argv0):
            return "looptap"
        return shlex.quote(argv0)
    found = shutil.which("looptap")
    if found is not None and Path(found).parent == Path(sys.executable).parent:
        return "looptap"
    return f"{shlex.quote(sys.executable)} -m looptap.cassettes.cli"


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


def install_command(*extras: str) -> str:
    """A command that installs looptap with ``extras`` into the environment running now."""
    names = ",".join(extras)
    spec_extras = f"[{names}]" if names else ""
    checkout = looptap_checkout()
    python = shlex.quote(sys.executable)
    beside = Path(sys.executable).parent / "uv"  # the README's set-up puts uv there
    if shutil.which("uv"):
        uv = "uv"
    elif beside.exists():
        uv = shlex.quote(str(beside))
    else:
        uv = f"{python} -m pip install -q uv && {python} -m uv"
    if checkout is not None:
        override = checkout / ".ci" / "proxy-overrides.txt"
        over = (
            f" --override {shlex.quote(str(override))}"
            if "proxy" in extras and override.exists()
            else ""
        )
        return (
            f"{uv} pip install --python {python}{over} -e {shlex.quote(f'{checkout}{spec_extras}')}"
        )
    return f"{uv} pip install --python {python} {shlex.quote(f'looptap{spec_extras}')}"


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
        command = (
            f"(cd {shlex.quote(str(checkout))} && python3 -m venv .venv-proxy && "
            ".venv-proxy/bin/pip install -q uv && .venv-proxy/bin/uv pip install -q --python "
            ".venv-proxy/bin/python --override .ci/proxy-overrides.txt -e "
            "'.[proxy,inspector,mcp,html]')"
        )
        return command, f"{venv}/bin/python"
    v = shlex.quote(str(venv))
    bin_ = f"{v}/bin"
    install = f"{bin_}/uv pip install -q --python {bin_}/python 'looptap[proxy,inspector,mcp,html]'"
    return f"python3 -m venv {v} && {bin_}/pip install -q uv && {install}", f"{venv}/bin/python"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 round trip``, ``2 round trips``, ``1,024 requests``: a number and its noun, agreed."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
