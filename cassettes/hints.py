"""The commands looptap's own hints print (``next:`` lines, install advice), written so they run
as typed in the user's shell.

- :func:`looptap_command`: how *this* user runs looptap: ``looptap`` when that name on ``PATH`` is
  this very program (the README's set-up puts ``.venv-proxy/bin`` on ``PATH``), else the path
  they typed (``.venv-proxy/bin/looptap``), else ``python -m cassettes.cli`` with this interpreter.
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
    "count",
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


def looptap_command() -> str:
    """The words that run this looptap in the user's shell."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "looptap":
        found = shutil.which("looptap")
        if found is not None and _same(found, argv0):
            return "looptap"
        return shlex.quote(argv0)
    found = shutil.which("looptap")
    if found is not None and Path(found).parent == Path(sys.executable).parent:
        return "looptap"
    return f"{shlex.quote(sys.executable)} -m cassettes.cli"


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
    uv = "uv" if shutil.which("uv") else f"{python} -m pip install -q uv && {python} -m uv"
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


def recorder_install_command() -> tuple[str, str]:
    """A command that creates the recorder's own environment (mitmproxy beside the core, never
    beside the agent's SDKs) and the interpreter it leaves there, for ``LOOPTAP_PROXY_PYTHON``:
    the checkout's ``.venv-proxy`` (as the README's first command), else ``~/.looptap-proxy``."""
    checkout = looptap_checkout()
    venv = checkout / ".venv-proxy" if checkout is not None else Path.home() / ".looptap-proxy"
    v = shlex.quote(str(venv))
    bin_ = f"{v}/bin"
    if checkout is not None:
        override = shlex.quote(str(checkout / ".ci" / "proxy-overrides.txt"))
        spec = shlex.quote(f"{checkout}[proxy,inspector,mcp,html]")
        install = f"{bin_}/uv pip install -q --python {bin_}/python --override {override} -e {spec}"
    else:
        install = (
            f"{bin_}/uv pip install -q --python {bin_}/python 'looptap[proxy,inspector,mcp,html]'"
        )
    return f"python3 -m venv {v} && {bin_}/pip install -q uv && {install}", f"{venv}/bin/python"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 round trip``, ``2 round trips``, ``1,024 requests``: a number and its noun, agreed."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
