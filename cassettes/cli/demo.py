"""``looptap demo``: the bundled example agent recorded through the proxy, offline, and the run
shown (the README's first command)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cassettes.cli.show import cmd_show
from cassettes.demo import run_demo

__all__ = ["cmd_demo"]


def cmd_demo(args: argparse.Namespace) -> int:
    """Record the bundled example agent through the proxy, offline, and show the run (the
    README's first command); without the recorder installed, show the bundled recording."""
    return run_demo(
        Path(args.output), lambda path: cmd_show(argparse.Namespace(file=str(path), json=False))
    )
