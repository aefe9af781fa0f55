"""``looptap run --from … --verify`` from Python: a pytest test (or any script) asks which model
would have made its check pass, and asserts on the counts (docs/fork.md, "Which model would have
fixed it")::

    from looptap.cassettes.forkcheck import verify

    def test_haiku_fixes_it(tmp_path):
        result = verify("runs/fix.jsonl@turn=1", ["claude", "-p", "Fix it."], "pytest -q",
                        models=["claude-haiku-4-5", "claude-sonnet-4-5"], repeat=5,
                        output=tmp_path / "verify", upstream={"anthropic": FAKE_URL})
        assert result.rows["claude-haiku-4-5"]["verified"] == 5

The same code as the command (the same checks, refusals, budget and branches): a refusal raises
:class:`~cassettes.why.Refused` with its one line. The branches run in the recorder's environment
(``LOOPTAP_PROXY_PYTHON``, found as the pytest plugin finds it); nothing here imports mitmproxy.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

from ..commands import add_command, declared
from ._command import Result, verify_run

__all__ = ["verify"]


def verify(
    at: str | Path,
    command: Sequence[str],
    check: str,
    *,
    output: str | Path,
    models: Sequence[str] = (),
    repeat: int = 5,
    jobs: int = 2,
    edits: Sequence[str] = (),
    timeout: float = 600.0,
    upstream: Mapping[str, str] | None = None,
    confdir: str | Path | None = None,
    max_requests: int | None = None,
    max_cost: Decimal | str | None = None,
    keep_tree: bool = False,
    cwd: str | Path | None = None,
) -> Result:
    """Run the agent ``command`` from ``at`` (``RUN@SELECTOR``) ``repeat`` times per model (none:
    the recorded model; ``"recorded"`` names it among others), each branch judged by ``check``
    in its own tree; ``cwd``: the user's working tree the branches copy (default: here). The
    result's ``.doc`` is what ``--json`` prints, ``.rows`` its rows by model (``"recorded"``)."""
    argv = ["run", "--from", str(at), "--verify", check, "--repeat", str(repeat)]
    argv += ["--jobs", str(jobs), "--verify-timeout", str(timeout), "-o", str(output)]
    argv += ["--model", ",".join(models)] if models else []
    argv += [x for e in edits for x in ("--edit", e)]
    argv += [x for name, url in (upstream or {}).items() for x in ("--upstream", f"{name}={url}")]
    for flag, value in (
        ("--confdir", confdir),
        ("--max-requests", max_requests),
        ("--max-cost", max_cost),
    ):
        argv += [flag, str(value)] if value is not None else []
    argv += ["--keep-tree"] * keep_tree
    parser = argparse.ArgumentParser(prog="looptap")
    add_command(parser.add_subparsers(dest="command"), declared("run"))
    args = parser.parse_args([*argv, "--", *command])
    args.cmd = list(command)
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        return verify_run(args)
    finally:
        os.chdir(here)
