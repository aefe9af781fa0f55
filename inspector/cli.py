"""``looptap inspect``'s handler (declared in :mod:`cassettes.commands`, imported when the
command runs); Textual is imported when the inspector starts. A looptap installed without the
inspector (the user's project's, as docs/testing.md installs it) runs the command in the
recorder's environment, which has it, as ``run`` does; without one, it says in one line how to
install the inspector here.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import stat
import sys

from ..cassettes.hints import install_command
from ..cassettes.reading import cassette_of
from ..cassettes.storage import being_written
from ..cassettes.untrusted import clean_line

__all__ = ["cmd_inspect"]


#: What the inspector imports that the core does not bring (the inspector extra).
NEEDS = ("textual", "textual_plotext")


def cmd_inspect(args: argparse.Namespace) -> int:
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        return _elsewhere(args, missing)
    live = bool(args.live)
    if not live:
        # A file that cannot be opened fails here, in one line, before the terminal UI starts
        # (``--live`` waits for a file that does not exist yet).
        try:
            os.close(os.open(args.file, os.O_RDONLY | os.O_NONBLOCK))  # a FIFO must not block here
            if stat.S_ISDIR(os.stat(args.file).st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        except OSError as exc:
            print(
                f"looptap: error: cannot open {clean_line(str(args.file))}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 2
        # A recording in progress (a looptap writer holds the file open) is followed as with
        # ``--live``: the user asked to see the run, and the run is not over yet.
        live = being_written(args.file)

    from .app import build_app

    # A vcrpy cassette or a mitmproxy flow file is opened as the other commands open it (told
    # apart by content) and shown from a temporary cassette; a looptap cassette is read as it is.
    with cassette_of(args.file, live=live) as path:
        app = build_app(path, live=live, child_status=args.child_status)
        app.run()
    return 0


def _elsewhere(args: argparse.Namespace, missing: list[str]) -> int:
    """The inspector is not installed here: the command run by the recorder's environment
    (:func:`~cassettes.replay.testing.recorder.elsewhere`), else one line and exit 2."""
    from ..cassettes.replay.testing.recorder import elsewhere, hand_to

    python = elsewhere()
    said = (
        hand_to(python, getattr(args, "cli_argv", sys.argv[1:]))
        if python is not None
        else f"error: the inspector needs {', '.join(missing)} (the inspector extra), not "
        f"installed in {sys.prefix}: {install_command('inspector')}"
    )
    print(f"looptap: {said}", file=sys.stderr)
    return 2
