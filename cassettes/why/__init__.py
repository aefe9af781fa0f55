"""``looptap why``: which layer made a recorded run fail, shown by changing it and running again
(docs/why.md). Each suspect becomes an *intervention* (a fork of the run at one turn with one thing
changed: the model's emission re-sampled (E), the API's answer replaced by a clean one (A), the
client's dispatch repaired as the finding says (C)), run K times; the verdict is how often each
flipped the outcome the user names, with a Wilson interval. One façade, its names pinned by
tests/why/test_why_surface.py, over: ``_command`` (the command) and ``_api`` (the same from
Python), ``_investigation`` (one investigation, start to end), ``_outcome`` (the outcome judged),
``_suspects`` and ``_interventions`` (per layer), ``_budget``, ``_branches`` (the processes: the
real fork, ``looptap run --from``, in the recorder's environment), ``_state`` (the output
directory), ``_tally`` (what one intervention's branches showed), ``_interval`` (its interval,
whether more samples can tell two apart), ``_verdict`` (the verdict), ``_together`` (repairs
combined) and ``_check`` (the check run in a tree). ``Branches``, ``Purse``, ``budget_lines``,
``end_state``, ``live_turns``, ``passed_flags``, ``run_check`` and ``where_sent`` are what
``looptap run --verify`` (:mod:`cassettes.forkcheck`) runs its branches with. Nothing here imports
mitmproxy.
"""

from ._api import why
from ._branches import Branches, passed_flags, where_sent
from ._budget import Purse, resumed_head
from ._budget import check as budget_lines
from ._check import end_state, run_check
from ._command import cmd_why, emit_result
from ._interval import wilson
from ._intervention import Intervention
from ._interventions import interventions
from ._investigation import Refused, default_output, report_lines
from ._outcome import Judged, Outcome, OutcomeError, judged_from, parse_outcome
from ._refusal import refusal
from ._state import STATE, kept_flags
from ._suspects import live_turns
from ._tally import Tally
from ._together import rounds, together_verdict
from ._verdict import verdict

__all__ = [
    "STATE",
    "Branches",
    "Intervention",
    "Judged",
    "Outcome",
    "OutcomeError",
    "Purse",
    "Refused",
    "Tally",
    "budget_lines",
    "cmd_why",
    "default_output",
    "emit_result",
    "end_state",
    "interventions",
    "judged_from",
    "kept_flags",
    "live_turns",
    "parse_outcome",
    "passed_flags",
    "refusal",
    "report_lines",
    "resumed_head",
    "rounds",
    "run_check",
    "together_verdict",
    "verdict",
    "where_sent",
    "why",
    "wilson",
]
