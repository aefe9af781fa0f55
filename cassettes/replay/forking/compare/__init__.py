"""``looptap compare RUN --model NAME``: the recorded requests sent to a candidate model, teacher
forced (each the recorded one, with the recorded history, so a divergence does not compound),
``--samples K`` times each, and the answers compared with the recording by layer (docs/fork.md,
"Compare, teacher-forced", says what is compared, sent, skipped, stopped and priced). One façade,
its names pinned by tests/replay/test_compare_surface.py, over:

- ``_answer``: one answer read and its calls checked (JSON, the declared schema, offered at all),
  and when two answers agree (:data:`TEXT_MEASURE` at :data:`TEXT_THRESHOLD` for two texts);
- ``_report``: a turn's samples beside the recorded answer, the figures, the verdict and the
  report (text and JSON);
- ``_budget``: what would be sent and what it would cost, checked before anything is sent
  (``--max-requests``, ``--max-cost``; ``looptap why`` checks its own the same way);
- ``_sending``: the turns sent; a failure of the setup (no connection, the credentials or the
  model refused) stops the comparison there.
"""

from __future__ import annotations

from ._answer import (
    TEXT_MEASURE,
    TEXT_THRESHOLD,
    ArgumentCheck,
    Sample,
    check_arguments,
    offered_tools,
    text_similarity,
)
from ._budget import (
    BudgetError,
    check_budget,
    estimate_costs,
    plan_requests,
    send_list,
    upstream_bases,
    where_sent,
)
from ._report import Comparison, TurnComparison
from ._sending import compare_run

__all__ = [
    "TEXT_MEASURE",
    "TEXT_THRESHOLD",
    "ArgumentCheck",
    "BudgetError",
    "Comparison",
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
