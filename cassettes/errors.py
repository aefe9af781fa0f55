"""The exception tree of looptap's core.

    CassetteError                       root: everything the core raises on purpose
    ├── CassetteFormatError(ValueError)  bytes that are not a looptap cassette, or a corrupt one
    │   └── NewerFormatError             written by a newer looptap than this one
    ├── CassetteIOError(OSError)         the file could not be read or written
    ├── ImportFormatError(ValueError)    an input to `looptap import` that cannot be read
    ├── ReplayMiss(LookupError)          replay: no recorded round trip answers a request
    └── RecorderUnavailable(RuntimeError) recording was asked for, but the recorder (mitmproxy) is
    not installed

Each subclass also inherits the builtin it refines, so ``except ValueError`` keeps working for
callers that do not know looptap. Errors are converted at the boundaries: the CLI prints one line
and exits non-zero, the proxy logs and keeps traffic flowing.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "CassetteError",
    "CassetteFormatError",
    "CassetteIOError",
    "ImportFormatError",
    "NewerFormatError",
    "RecorderUnavailable",
    "ReplayMiss",
]


class CassetteError(Exception):
    """Root of the errors raised by ``cassettes``."""


class CassetteFormatError(CassetteError, ValueError):
    """The bytes are not a readable looptap cassette."""


class NewerFormatError(CassetteFormatError):
    """The cassette was written by a newer looptap with a format this version does not know."""


class CassetteIOError(CassetteError, OSError):
    """Reading or writing the cassette file failed."""


class ImportFormatError(CassetteError, ValueError):
    """A file given to ``looptap import`` is not in a format looptap can import."""


class ReplayMiss(CassetteError, LookupError):
    """Replay found no recorded round trip for a request (or the cassette was exhausted). The
    message names the closest recorded turn, the JSON paths that differ and the layer implicated."""


class RecorderUnavailable(CassetteError, RuntimeError):
    """Recording was asked for, but the recorder (mitmproxy, in its own environment) is missing."""


#: Problems of one file named one by one; the rest are counted (a damaged or hostile file can
#: hold thousands, and a wall of warnings hides the one that matters and can block a pipe).
PROBLEMS_SHOWN = 10


def problem_lines(problems: Sequence[object], limit: int = PROBLEMS_SHOWN) -> list[str]:
    """The first ``limit`` problems, then one line counting the rest."""
    lines = [str(p) for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"… and {len(problems) - limit:,} more problems")
    return lines

