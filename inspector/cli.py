"""``looptap inspect``'s handler (declared in :mod:`cassettes.commands`, imported when the
command runs); Textual is imported when the inspector starts.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys

from ..cassettes.reading import cassette_of
from ..cassettes.storage import being_written
from ..cassettes.untrusted import clean_line

__all__ = ["cmd_inspect"]


def cmd_inspect(args: argparse.Namespace) -> int:
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
