"""A looptap cassette of a coding agent's run with its traced shell commands, written without a
tracer (fast, deterministic): Chat Completions round trips whose answers call ``bash`` (or end the
turn), and the ``process`` records ``looptap run --shell-trace`` writes for each command (the form
of proxy/shell_trace.py's records: a ``/bin/bash -c CMD`` shell, its exit, the start of its
output, the files it wrote), started while the call awaited its result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange

CHAT = "https://api.openai.com/v1/chat/completions"
TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}},
]
T0 = 1_790_000_000.0


@dataclass
class Cmd:
    """A ``bash`` call, what its process did, and the result the client sent the model."""

    command: str
    exit: int | None = 0
    stdout: str = ""
    stderr: str = ""
    result: str | None = None  # None: the stdout and stderr as printed, then the exit
    error: bool = False
    signal: str | None = None
    files: list[tuple[str, str]] = field(default_factory=list)
    stdout_bytes: int | None = None
    #: Process records of its own (the command's children: ``(argv, stdout[, exit])``).
    children: list[tuple[Any, ...]] = field(default_factory=list)
    #: The program the shell ran in its own process (``exec``: bash runs a lone command so).
    then: list[str] | None = None
    #: False: traced at the default level (processes only; no stdout, stderr or files seen).
    output: bool = True
    #: The order of its writes across stdout and stderr, as the tracer records it (``order``:
    #: runs of ``[stream, end]``), and whether writes were past it (``order_cut``).
    order: list[list[int]] | None = None
    order_cut: bool = False

    def sent(self) -> str:
        if self.result is not None:
            return self.result
        return self.stdout + self.stderr + f"\n[exit code {self.exit}]"


def _chat(messages: list[Any], calls: list[tuple[str, str, dict[str, Any]]], text: str) -> bytes:
    msg: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": orjson.dumps(a).decode()},
            }
            for i, n, a in calls
        ]
    return orjson.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}],  # noqa: E501
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    })  # fmt: skip


def shell_run(
    path: Path,
    steps: list[Cmd | tuple[str, dict[str, Any], str]],
    answer: str = "Done.",
    *,
    env_key: str | None = None,
) -> Path:
    """Write the cassette at ``path``: one model turn per step (a ``bash`` call of a :class:`Cmd`,
    or ``(tool, arguments, result)`` for another tool), then a turn that answers ``answer`` (no
    call). Returns ``path``."""
    messages: list[Any] = [{"role": "user", "content": "Fix the failing test."}]
    procs: list[dict[str, Any]] = []
    exchanges: list[Exchange] = []
    t = T0
    pid = 1000
    for k, step in enumerate([*steps, None]):
        calls: list[tuple[str, str, dict[str, Any]]] = []
        if isinstance(step, Cmd):
            calls = [(f"call_{k}", "bash", {"command": step.command})]
        elif step is not None:
            calls = [(f"call_{k}", step[0], step[1])]
        headers = [("content-type", "application/json")]
        if env_key:
            headers.append(("authorization", f"Bearer {env_key}"))
        ex = Exchange(
            "POST", CHAT, headers,
            orjson.dumps({"model": "gpt-4o", "messages": messages, "tools": TOOLS}),
            status=200, response_headers=[("content-type", "application/json")],
            response_chunks=[(0.1, _chat(messages, calls, answer if step is None else ""))],
        )  # fmt: skip
        ex.started = t
        exchanges.append(ex)
        if step is None:
            break
        messages = [
            *messages,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {"name": n, "arguments": orjson.dumps(a).decode()},
                    }
                    for i, n, a in calls
                ],
            },
        ]
        if isinstance(step, Cmd):
            pid += 10
            out_bytes = step.stdout_bytes
            rec: dict[str, Any] = {
                "type": "process",
                "pid": pid,
                "parent": 10,
                "argv": ["/bin/bash", "-c", step.command],
                "cut": False,
                "cwd": "/w",
                "started": t + 1.0,
                "ended": t + 2.0,
                "exit": step.exit,
                "signal": step.signal,
                "stdout": step.stdout,
                "stderr": step.stderr,
                "stdout_bytes": len(step.stdout.encode()) if out_bytes is None else out_bytes,
                "stderr_bytes": len(step.stderr.encode()),
                "files": [list(f) for f in step.files],
            }
            rec |= {} if step.output else {"output": False}
            rec |= {} if step.order is None else {"order": step.order}
            rec |= {"order_cut": True} if step.order_cut else {}
            procs.append(rec | ({"then": step.then} if step.then else {}))
            for j, (argv, out, *code) in enumerate(step.children):
                procs.append(
                    {
                        "type": "process",
                        "pid": pid + 1 + j,
                        "parent": pid,
                        "argv": argv,
                        "cut": False,
                        "cwd": "/w",
                        "started": t + 1.1,
                        "ended": t + 1.9,
                        "exit": code[0] if code else 0,
                        "signal": None,
                        "stdout": out,
                        "stderr": "",
                        "stdout_bytes": len(out.encode()),
                        "stderr_bytes": 0,
                        "files": [],
                    }
                )
            content, err = step.sent(), step.error
        else:
            content, err = step[2], False
        msg: dict[str, Any] = {"role": "tool", "tool_call_id": f"call_{k}", "content": content}
        if err:
            msg["content"] = "Error: " + content
        messages = [*messages, msg]
        t += 10.0
    with CassetteWriter(path) as w:
        for ex in exchanges:
            w.append(ex)
    with path.open("ab") as f:
        for p in procs:
            f.write(orjson.dumps(p) + b"\n")
        note = {"type": "note", "note": "processes", "tracer": "strace", "recorded": len(procs)}
        f.write(orjson.dumps(note | {"dropped": 0}) + b"\n")
    return path
