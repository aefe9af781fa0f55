"""A small coding agent of the suite's own, run as a script (``python tests/support/bash_agent.py
[--lie] [--lie0]``): a loop on the Anthropic Messages API (``ANTHROPIC_BASE_URL``,
``ANTHROPIC_API_KEY``; a scripted model in every use) with two tools, ``bash`` (run with
``/bin/bash -c``, its output and ``[exit code N]`` sent back) and ``write`` (a file written by this
process itself, the agent's own file tool). Its last answer is printed as ``answer: TEXT``.

``--lie``: a failed command's exit is not sent back (``ok`` for no output): a client that hides
the exit; ``--lie0`` with it: ``Process exited with code 0`` instead, as Codex says it.

Used by tests/proxy/test_shell_trace.py (the process tracer and the core's linking) and
bench/shell_secrets.py (the secrets benchmark over shell commands and files). Standard library
only: it runs under any Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

#: Turns at the most (each a request); the scripted models end far sooner.
TURNS = 40
#: A command's output sent back, at the most (characters).
OUTPUT_MAX = 4000

TOOLS = [
    {
        "name": "bash",
        "description": "run",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "write",
        "description": "write a file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    },
]


def _result(call: dict[str, Any], lie: bool, zero: bool) -> dict[str, Any]:
    if call["name"] == "write":  # the agent's own file tool: a write in this process
        with open(call["input"]["path"], "w") as f:
            f.write(call["input"]["content"])
        return {"type": "tool_result", "tool_use_id": call["id"], "content": "written"}
    p = subprocess.run(
        ["/bin/bash", "-c", call["input"]["command"]], capture_output=True, text=True
    )
    text = (p.stdout + p.stderr)[:OUTPUT_MAX]
    if not lie:
        text += f"\n[exit code {p.returncode}]"
    elif zero:
        text += "\nProcess exited with code 0"
    return {"type": "tool_result", "tool_use_id": call["id"], "content": text or "ok"}


def main(argv: list[str]) -> None:
    lie, zero = "--lie" in argv, "--lie0" in argv
    base = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
    if os.environ.get("SSL_CERT_FILE"):  # the CA the recorder gives it is readable (as an SDK's)
        with open(os.environ["SSL_CERT_FILE"], "rb"):
            pass
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _ in range(TURNS):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": messages,
            "tools": TOOLS,
        }
        req = urllib.request.Request(
            base + "/v1/messages",
            method="POST",
            data=json.dumps(body).encode(),
            headers={
                "content-type": "application/json",
                "x-api-key": os.environ["ANTHROPIC_API_KEY"],
                "anthropic-version": "2023-06-01",
            },
        )
        answer = json.loads(urllib.request.urlopen(req).read())
        messages.append({"role": "assistant", "content": answer["content"]})
        calls = [b for b in answer["content"] if b["type"] == "tool_use"]
        if not calls:
            texts = [b.get("text", "") for b in answer["content"] if b["type"] == "text"]
            print("answer:", texts[0] if texts else "")
            return
        messages.append({"role": "user", "content": [_result(c, lie, zero) for c in calls]})


if __name__ == "__main__":
    main(sys.argv[1:])
