"""``looptap why`` from Python: a pytest test (or any script) asks which layer made a recorded run
fail, and asserts on the verdict (docs/why.md "From a pytest test, and from an MCP client")::

    from looptap.cassettes.why._api import why

    def test_the_failure_is_the_clients(tmp_path):
        result = why("cassettes/loop.jsonl", ["python", "agent.py"], output=tmp_path / "why",
                     results={"call_7Qx": "rain"}, samples=5, upstream={"openai": FAKE_URL})
        assert result.verdict["layer"] == "C" and result.verdict["flips"] >= 4

The same code as the command (the same checks, refusals and branches): a refusal raises
:class:`~cassettes.why._investigation.Refused` with its one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path

from ..commands import add_command, declared
from ._command import split_options
from ._confirm import confirm as run_confirm
from ._investigation import Refused, Result, investigate

__all__ = ["Refused", "Result", "why"]


def why(
    run: str | Path,
    command: Sequence[str],
    *,
    output: str | Path | None = None,
    samples: int = 5,
    jobs: int = 2,
    check: str | None = None,
    check_timeout: float | None = None,
    finding: str | None = None,
    answer_matches: str | None = None,
    answer_not_matches: str | None = None,
    results: Mapping[str, str] | None = None,
    layers: Sequence[str] = (),
    model: str | None = None,
    upstream: Mapping[str, str] | None = None,
    confdir: str | Path | None = None,
    max_requests: int | None = None,
    max_cost: Decimal | str | None = None,
    dry_run: bool = False,
    resume: bool = False,
    confirm: bool = False,
) -> Result:
    """Run ``looptap why`` on ``run`` with the agent ``command``; the result (``.verdict``,
    ``.doc``: what ``--json`` prints). Options as the command's (docs/why.md). ``confirm=True``:
    ``run`` is an earlier why's directory and ``command`` the fixed agent, run ``samples`` times
    from its verdict's turn (``.doc["confirm"]``)."""
    argv: list[str] = [str(run), "--samples", str(samples), "--jobs", str(jobs)]
    pairs = {
        "--output": output,
        "--check": check,
        "--check-timeout": check_timeout,
        "--finding": finding,
        "--answer-matches": answer_matches,
        "--answer-not-matches": answer_not_matches,
        "--model": model,
        "--confdir": confdir,
        "--max-requests": max_requests,
        "--max-cost": max_cost,
    }
    for flag, value in pairs.items():
        if value is not None:
            argv += [flag, str(value)]
    argv += [x for cid, text in (results or {}).items() for x in ("--result", f"{cid}={text}")]
    argv += [x for layer in layers for x in ("--layer", layer)]
    argv += [x for name, url in (upstream or {}).items() for x in ("--upstream", f"{name}={url}")]
    argv += ["--dry-run"] * dry_run + ["--resume"] * resume + ["--confirm"] * confirm
    parser = argparse.ArgumentParser(prog="looptap")

    add_command(parser.add_subparsers(dest="command"), declared("why"))
    args = parser.parse_args(["why", *argv, "--", *command])
    split_options(args)
    return run_confirm(args) if args.confirm else investigate(args)
