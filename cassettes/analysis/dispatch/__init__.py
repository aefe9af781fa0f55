"""C — what the client dispatched: layer and checks, one façade over private modules.

The layer (``_layer.build``) and the checks by theme: ``_results`` (tool results and their calls),
``_history`` (what the history sent back kept, echoed and changed), ``_mcp_results`` (against what
an MCP tool server returned), ``_retry``, ``_divergence`` (a replay's request the recording has
not), and ``_roots`` (root causes first: a finding that follows from another, by its code's
``under`` in :mod:`cassettes.analysis.codes`, is folded under it as info with
``details.caused_by``, everywhere). The names below are the whole surface, pinned by
tests/cassettes/analysis/test_dispatch_surface.py.

The layer compares each request with the previous turn of its conversation: what was kept, what
was appended (the answer echoed back, tool results, new input), what was dropped or rewritten, and
how every tool result pairs with the call it answers — by id, by the id a framework gave the call
when it echoed it, or by name on wires without ids (Gemini, Ollama). Pairing is checked for every
provider, including Ollama, which never reports a pairing error itself.

Its findings are the rows of layer C in :mod:`cassettes.analysis.codes` (docs/findings.md).
"""

from __future__ import annotations

from .._context import Check, FinalCheck
from ._blocked import (
    blocked_page,
    check_message_blocked,
    check_tool_result_blocked,
)
from ._divergence import check_diverged_from_recording, replay_miss
from ._history import (
    GROUP_CHAT,
    TEXT_ACTION,
    check_assistant_echo,
    check_cache_prefix,
    check_continued_after_final,
    check_history_rewritten,
    check_refusal_treated_as_answer,
    check_truncated_treated_as_complete,
    multi_agent,
    reprompted,
)
from ._layer import build
from ._managed import check_history_managed
from ._mcp_results import check_mcp_results
from ._results import (
    check_dropped_tool_result,
    check_orphan_tool_result,
    check_pairing_error,
    check_result_name,
    check_results_split,
    check_tool_result_error,
    check_unanswered_history_call,
    final_pending_calls,
    is_error_result,
    result_texts,
)
from ._retry import check_abandoned, check_retry, final_gave_up
from ._roots import (
    fold_root_causes,
    is_consequence,
    ordered_findings,
)
from ._shared import speaker
from ._tool_http_results import check_tool_http_results

__all__ = [
    "CHECKS",
    "FINAL_CHECKS",
    "GROUP_CHAT",
    "REREAD",
    "TEXT_ACTION",
    "blocked_page",
    "build",
    "fold_root_causes",
    "is_consequence",
    "is_error_result",
    "multi_agent",
    "ordered_findings",
    "replay_miss",
    "reprompted",
    "result_texts",
    "speaker",
]

#: The C checks that compare a request with the turn before it: read again on a turn a later
#: request proves went on from another turn than the one it was read after.
REREAD: tuple[Check, ...] = (check_assistant_echo, check_history_rewritten)

CHECKS: tuple[Check, ...] = (
    check_diverged_from_recording,
    check_dropped_tool_result,
    check_results_split,
    check_unanswered_history_call,
    check_orphan_tool_result,
    check_result_name,
    check_assistant_echo,
    check_history_rewritten,
    check_history_managed,
    check_pairing_error,
    check_continued_after_final,
    check_truncated_treated_as_complete,
    check_refusal_treated_as_answer,
    check_mcp_results,
    check_tool_http_results,
    check_retry,
    check_abandoned,
    check_tool_result_error,
    check_tool_result_blocked,
    check_message_blocked,
    check_cache_prefix,
)


FINAL_CHECKS: tuple[FinalCheck, ...] = (final_pending_calls, final_gave_up)
