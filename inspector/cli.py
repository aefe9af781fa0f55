"""``looptap inspect``: registered with the core CLI through the ``looptap.commands`` entry point.

Textual is imported only when the command runs, so ``looptap --help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["cmd_inspect", "register_inspect"]


def cmd_inspect(args: argparse.Namespace) -> int:
    from cassettes.interop.run import cassette_of
    from inspector.app import build_app

    # A vcrpy cassette or a mitmproxy flow file is opened as the other commands open it (told
    # apart by content) and shown from a temporary cassette; a looptap cassette is read as it is.
    with cassette_of(args.file, live=args.live) as path:
        app = build_app(path, live=args.live, child_status=args.child_status)
        app.run()
    return 0


def register_inspect(sub: Any) -> None:
    p = sub.add_parser(
        "inspect",
        help="step through a run in a terminal UI: turns, E/A/C layers, findings, token-cost growth, playback",
        description="Open a run in the inspector (a looptap cassette; a vcrpy cassette or a mitmproxy flow file is imported on the fly). Press ? inside it for the key bindings.",
    )
    p.add_argument("file", help="a looptap cassette (or a vcrpy cassette or mitmproxy flow file, imported on the fly)")
    p.add_argument(
        "--live",
        action="store_true",
        help="follow a recording still being written: new turns appear as they complete",
    )
    p.add_argument(
        "--child-status",
        metavar="FILE",
        default=None,
        help="with --live: the file the recorder writes the recorded command's exit status into "
        "(looptap run --inspect passes it); once it appears the run is shown as ended",
    )
    p.set_defaults(func=cmd_inspect)
