"""A coding agent's shell commands on the timeline (docs/shell-file-tools.md): the ``process``
records ``looptap run``'s tracer wrote beside the round trips (proxy/shell_trace.py), read back
bounded, linked to the model's tool calls, and judged against the results the model got.

**Linking.** A model's client tool call awaits its result from the start of the round trip whose
answer made it until the start of the request that sends its result back (or the run's end). A
process started in that window is the call's command when the call's arguments carry a command
(``command``, ``cmd``, ``script``: a string, or an argv list) and the process is that command run
by a shell (an argv word after ``-c`` / ``-lc`` … holds the command's text, verbatim or quoted as
``shlex.quote`` quotes it) or that argv itself; of the processes that fit, the innermost (a
wrapper the agent's tool runs the shell through, which holds the same text, is its parent). Two
calls awaiting with the same command, or a call two unrelated processes fit, are not linked (a
wrong link is worse than none): the number is kept. A process no call is linked to is the agent's
own (its shell snapshot, its ``git`` probes), counted apart.

**Judging** (``C.shell_failure_hidden``): a linked command that exited non-zero or was ended by a
signal, while the result sent back is not flagged an error and carries no word of a failure, no
exit status, no signal and none of what the command wrote on stderr.
"""

from __future__ import annotations

from ._ctime import CTIME_KEPT, filesystem, instant, stamped_from
from ._fork import Scratch, changed_here, outside_writes, scratch_tree
from ._link import ShellRun, link_run, read_processes, shell_lines
from ._records import Process, ShellCall
from ._tree import (
    BLOB,
    BREADTH,
    BY_BLOB,
    FILES,
    GIT,
    HASHED,
    KEPT,
    NAMED,
    GitTree,
    Stat,
    Walk,
    blob_id,
    file_hash,
    git_blobs,
    git_tree,
    read_bytes,
    tree_line,
    walk,
)

__all__ = [
    "BLOB",
    "BREADTH",
    "BY_BLOB",
    "CTIME_KEPT",
    "FILES",
    "GIT",
    "HASHED",
    "KEPT",
    "NAMED",
    "GitTree",
    "Process",
    "Scratch",
    "ShellCall",
    "ShellRun",
    "Stat",
    "Walk",
    "blob_id",
    "changed_here",
    "file_hash",
    "filesystem",
    "git_blobs",
    "git_tree",
    "instant",
    "link_run",
    "outside_writes",
    "read_bytes",
    "read_processes",
    "scratch_tree",
    "shell_lines",
    "stamped_from",
    "tree_line",
    "walk",
]
