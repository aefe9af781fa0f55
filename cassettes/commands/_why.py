"""``looptap why``: its options (:data:`WHY_OPTIONS`, which
:func:`cassettes.why._command.split_options` reads again when they are written after the run) and
its declaration."""

from __future__ import annotations

import argparse

from ._registry import Arg, Args, Command, flag, many

__all__ = ["WHY", "WHY_OPTIONS"]

#: ``looptap why``'s options.
WHY_OPTIONS: Args = {
    "--outcome": Arg(
        "what failed means (default: the command's exit status is not 0)",
        choices=("exit",),
        default="exit",
    ),
    "--check CMD": (
        "failed means: this shell command, run after the agent, exits with a status other than 0"
    ),
    "--check-timeout S": Arg(
        "with --check: its own time limit in seconds (default 600), in the recorded run's end "
        "state and in each branch's tree; past it the check is stopped and counts as failed",
        type=float,
        default=600.0,
    ),
    "--finding CODE": (
        "failed means: the run has a finding of this code (C.dropped_tool_result; "
        "E.rule_broken:NAME: the agent's rule NAME broken, docs/rules.md)"
    ),
    "--answer-matches RE": "failed means: the final answer matches RE",
    "--answer-not-matches RE": "failed means: the final answer does not match RE",
    "--samples K": Arg("branches per intervention (default 5)", type=int, default=5),
    "--jobs N": Arg("branches run at once (default 2)", type=int, default=2),
    "-o --output DIR": (
        "where the branches and why.json go (a new directory, or an earlier why of this run with "
        "--resume)"
    ),
    "--resume": flag("continue the why in -o DIR: its finished branches are kept"),
    "--result CALL_ID=@FILE": many(
        "the text a dropped tool result had (the recording never had it): the C repair puts it "
        "back (or CALL_ID=TEXT)"
    ),
    "--layer LAYER": many(
        "run only the interventions of this layer (E, A or C; repeatable): a smaller budget for a "
        "suspicion you have",
        choices=("E", "A", "C"),
    ),
    "--model": "also re-sample each E turn on this model (same API family)",
    "--upstream NAME=URL": many("where requests of that API go past the cursor (as looptap run)"),
    "--confdir": "the recorder's configuration directory (as looptap run)",
    "--in-place": flag(
        "run each branch in this working tree, as looptap run --from --in-place: where a fork "
        "cannot be isolated from your files (no mount namespace, a run whose tree was not "
        "recorded) a branch is refused without it"
    ),
    "--max-requests N": Arg(
        "refuse (before anything is sent) when more live requests may be sent; and at run time "
        "nothing past N is sent (a branch stopped there is no sample)",
        type=int,
    ),
    "--max-cost USD": "refuse (before anything is sent) when the estimated cost is higher",
    "--allow-unknown-price": flag("run under --max-cost although a model has no known price"),
    "--dry-run": flag(
        "list the interventions and the live requests each costs; run nothing, send nothing"
    ),
    "--json": flag("the verdict and every intervention as one JSON object"),
    "--confirm": flag(
        "FILE is an earlier why's directory: run the fixed agent (the command after --) K times "
        "from its verdict's turn, live after it, and count the runs that now succeed"
    ),
}


WHY = Command(
    "why",
    "which layer made a recorded run fail: fork it with one suspect changed, K times, and "
    "count the flips",
    {
        "file": "the recorded run that failed (a looptap cassette); with --confirm, the "
        "directory of an earlier why",
    },
    WHY_OPTIONS,
    {
        "cmd": Arg("the agent command, after --", nargs=argparse.REMAINDER),
    },
    run="looptap.cassettes.why:cmd_why",
    epilog=(
        "exit status: 0 a verdict was reached or said to be undetermined; 1 no intervention "
        "could be run or judged; 2 refused (the run does not fail by the outcome, a budget "
        "limit, a bad option or output directory): nothing sent. See docs/why.md"
    ),
)
