"""``looptap why``'s C repair of a hidden command failure: "what if the model had been told".

A shell tool call whose command failed (a non-zero exit, a signal) while the result the client
sent back said nothing of it (``C.shell_failure_hidden``, cassettes/shell) is told the truth in a
fork: a ``tool_result[CALL_ID]=TEXT`` edit (:mod:`cassettes.replay.live.edits`) makes the result
the client sent the recorded one followed by what the tracer saw: the real exit status or signal
and the start of what the command wrote on stderr (when the run traced it: ``--shell-trace``). The
fork's cursor is the turn that sent the result; everything before it is served, so the branch
differs from the recording in that result only.
"""

from __future__ import annotations

from typing import Any

from ..untrusted import clean_line
from ._intervention import Intervention

__all__ = ["shell_truth"]

#: Characters of the command's stderr put in the result.
_STDERR = 2000


def shell_truth(run: Any, f: Any, seqs: list[int]) -> Intervention:
    """The C intervention for ``f`` (``C.shell_failure_hidden`` on an opened ``run``): the
    command's real end told to the model in the result of its call."""
    assert f.conversation is not None and f.turn is not None
    cid = str(f.tool_call_id or "")
    call = next((c for c in run.shell.calls if c.call_id == cid and c.process is not None), None)
    i = Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the model told the real end of call {cid}'s command",
        "c-shell-truth",
        f.code,
        seqs=seqs,
        tag=cid,
    )
    if call is None or call.result is None:
        i.missing = f"call {cid}'s command or its result is not in the recording"
        return i
    p = call.process
    told = f"[the command {p.status}"
    told += (
        "; what it wrote on stderr begins:\n" + p.stderr[:_STDERR]
        if p.stderr.strip()
        else ""
        if p.output
        else " (its output was not traced)"
    )
    told += "]"
    i.what = clean_line(
        f"the model told that call {cid}'s command ({call.command[:60]}) {p.status}"
    )
    edit = f"tool_result[{cid}]={call.result.rstrip()}\n\n{told}"
    i.edits, i.literal = [edit], [edit]
    i.evidence = clean_line(f"process {p.pid}: {' '.join(p.argv)[:80]} → {p.status}")
    return i
