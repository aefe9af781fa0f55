"""What every view shows of a model's shell call that ``looptap run --shell-trace`` traced
(docs/shell-file-tools.md): the command, its exit status or signal, the start of what it
printed and the files it touched, computed here once and rendered by ``show --json``
(``tool_calls[].shell``), the HTML export, the inspector's E and C panes, ``looptap mcp`` and
the fleet's ``tool_calls`` rows.

Every string is recorded text made safe here: whitespace runs (newlines too) are one space, and
every character a terminal acts on or that changes how text around it reads (escapes, bidi
controls) is a visible stand-in (:func:`cassettes.untrusted.clean_line`); a view adds no markup
of its own to it (the inspector builds a ``Text``, the page sets ``textContent``)."""

from __future__ import annotations

from typing import Any

from ..untrusted import clean_line

#: A :class:`cassettes.shell.ShellCall` and :class:`~cassettes.shell.ShellRun` (the views sit
#: below the reader, which the shell package reads the run with: named, not imported).
ShellCall = Any
ShellRun = Any

__all__ = ["shell_answered", "shell_by_call", "shell_call_json", "shell_call_lines"]

#: Characters shown of a command, of an output's start, of a path; paths listed per call.
COMMAND, OUTPUT, PATH, PATHS = 300, 200, 200, 20


def _one(text: str, n: int) -> str:
    """``text`` on one line, at most ``n`` characters (``…`` where cut), made safe."""
    one = " ".join(text.split())
    return clean_line(one if len(one) <= n else one[: n - 1] + "…")


def shell_call_json(sc: ShellCall) -> dict[str, Any]:
    """What the views show of one shell call: ``command``; ``linked`` (a process was linked to
    it) and, when not, ``candidates`` (processes that fit: ambiguous, left unlinked); the
    process's ``exit``, ``signal`` and ``status`` (``exit 1``, ``killed by SIGKILL``, ``end not
    seen``); ``stdout`` and ``stderr`` (the start of each, one line) with their sizes in bytes;
    ``output_traced`` (False at the processes level: stdout, stderr and files not seen, not empty);
    ``files`` (``op`` ``write`` or ``remove``, ``path``; the first 20, ``files_more`` the rest);
    ``line`` and ``files_line``, the same said in a line each (:func:`shell_call_lines`)."""
    p = sc.process
    out: dict[str, Any] = {
        "call_id": clean_line(sc.call_id[:200]),
        "command": _one(sc.command, COMMAND),
        "linked": p is not None,
    }
    if p is None:
        out["candidates"] = sc.candidates
        out["line"] = f"$ {out['command']} → " + (
            f"not linked: {sc.candidates} processes fit (a wrong link is worse than none)"
            if sc.candidates
            else "no process of it seen"
        )
        return out
    files = [{"op": op, "path": _one(path, PATH)} for op, path in sc.files[:PATHS]]
    out |= {
        "pid": p.pid,
        "exit": p.exit,
        "signal": clean_line(p.signal) if p.signal else None,
        "status": clean_line(p.status),
        "stdout": _one(p.stdout, OUTPUT),
        "stdout_bytes": p.stdout_bytes,
        "stderr": _one(p.stderr, OUTPUT),
        "stderr_bytes": p.stderr_bytes,
        "children": sc.children,
        "files": files,
        "files_more": max(0, len(sc.files) - PATHS),
    }
    out["output_traced"] = p.output
    said = [f"{k}: “{_one(out[k], 100)}”" for k in ("stdout", "stderr") if out[k]]
    out["line"] = f"$ {out['command']} → {out['status']} · " + (
        " · ".join(said)
        if said
        else "printed nothing"
        if p.output
        else "output not traced (the default; --shell-trace records it)"
    )
    out["files_line"] = (
        "files: "
        + ", ".join(f"{'−' if f['op'] == 'remove' else '+'}{f['path']}" for f in files[:5])
        + (f" (+{len(sc.files) - 5} more)" if len(sc.files) > 5 else "")
        if files
        else None
    )
    return out


def shell_call_lines(view: dict[str, Any]) -> list[str]:
    """A shell call's view (:func:`shell_call_json`) in lines: the command and its status and
    output's start, then the files it touched (when it touched any)."""
    return [view["line"]] + ([view["files_line"]] if view.get("files_line") else [])


def shell_by_call(shell: ShellRun) -> dict[tuple[int, str], ShellCall]:
    """The run's shell calls by the round trip whose answer made them and their key (the call's
    id; ``#SEQ.K`` for the K-th call of an answer without ids, Gemini's)."""
    return {(sc.seq, sc.call_id): sc for sc in shell.calls}


def shell_answered(shell: ShellRun, seq: int, pairings: list[Any]) -> dict[str, dict[str, Any]]:
    """The views of the shell calls whose results round trip ``seq`` sent, by the call id its
    pairings (``Dispatch.pairings``) name: a call's own id, else (an answer without ids, Gemini's)
    the k-th pairing of a name for the k-th call of that name, when their numbers agree."""
    mine = [sc for sc in shell.calls if sc.result_seq == seq]
    out: dict[str, dict[str, Any]] = {}
    ids = {sc.call_id: sc for sc in mine}
    unnamed: dict[str, list[ShellCall]] = {}
    for sc in mine:
        if sc.call_id.startswith("#"):
            unnamed.setdefault(sc.name, []).append(sc)
    left: dict[str, list[str]] = {}
    for pr in pairings:
        cid = pr.call_id or ""
        if cid in ids:
            out[cid] = shell_call_json(ids[cid])
        elif cid and pr.name in unnamed:
            left.setdefault(pr.name, []).append(cid)
    for name, cids in left.items():
        if len(cids) == len(unnamed[name]):
            for cid, sc in zip(cids, unnamed[name], strict=True):
                out[cid] = shell_call_json(sc)
    return out
