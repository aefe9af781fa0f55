"""``looptap compare RUN --model NAME``: the recorded requests sent to a candidate model, teacher
forced (each request is the recorded one, with the recorded history, so a divergence does not
compound), ``--samples K`` times each, and the answers compared with the recording by layer.

Per turn: E — which tools were called with which arguments: whether they parse as JSON, whether
they satisfy the schema of the tool as the recorded request declared it (``tools``, ``functions``,
``functionDeclarations`` …: whatever the family's adapter reads; checked by
:func:`cassettes.analysis.emission.schema_errors`, the same validator and bounds as the
``E.arguments_schema`` check), whether they are JSON-equal to the recording; how similar the text
is (:data:`TEXT_MEASURE`, agreeing at :data:`TEXT_THRESHOLD`), refusals; A — finish reasons, usage,
latency, errors; and whether the recorded client would be handed something it never handled in the
recording (a tool never called in it, or not even offered by the request; a finish reason never
seen). Agreement rates: how often an answer agrees with the recording (same tool calls, same
arguments; or, for a text answer, text similar enough) and how often the samples agree with their
own most common answer. A verdict heads the report: agreement, cost and latency against the
recording, and the E and A differences counted.

What is sent: the recorded turns that were answered; a turn the recording shows failing (HTTP
status >= 400, or a transport error: a 429 then its retry) is skipped and listed, unless asked
for. A transport failure or a refusal of the credentials (401, 403, 407) or of the model/path
(404) stops the comparison at once (the remaining requests are not sent, nor paid): such a
failure is the setup's, not an answer, and counts in no agreement. A 429 or 5xx is the
candidate's answer at the A layer (an error, in the verdict's count), not retried and not an
answer E agreement is measured on.

Nothing is sent before the budget is checked: ``--max-requests`` (turns x K) and ``--max-cost``
(the candidate's own price, from genai-prices' offline data, applied to the recorded usage of
each turn, K times: an estimate). A candidate without a known price makes the estimate unknown:
``--max-cost`` then refuses unless ``allow_unknown`` (``--allow-unknown-price``). ``--dry-run``
lists what would be sent, and where, and sends nothing. Credentials are not in a cassette
(redacted when recorded): give them with ``--header 'authorization: Bearer …'``.
"""

from __future__ import annotations

from cassettes.replay.forking.compare._answer import (
    TEXT_MEASURE,
    TEXT_THRESHOLD,
    ArgumentCheck,
    Sample,
    check_arguments,
    offered_tools,
    text_similarity,
)
from cassettes.replay.forking.compare._budget import (
    BudgetError,
    Planned,
    check_budget,
    estimate_costs,
    plan_requests,
    send_list,
    upstream_bases,
    where_sent,
)
from cassettes.replay.forking.compare._report import Comparison, TurnComparison
from cassettes.replay.forking.compare._sending import compare_run

__all__ = [
    "TEXT_MEASURE",
    "TEXT_THRESHOLD",
    "ArgumentCheck",
    "BudgetError",
    "Comparison",
    "Planned",
    "Sample",
    "TurnComparison",
    "check_arguments",
    "check_budget",
    "compare_run",
    "estimate_costs",
    "offered_tools",
    "plan_requests",
    "send_list",
    "text_similarity",
    "upstream_bases",
    "where_sent",
]
