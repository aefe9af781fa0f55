"""C — what the client dispatched: layer and checks, one façade over private modules.

The layer (``_layer.build``) and the checks by theme: ``_results`` (tool results and their calls),
``_history`` (what the history sent back kept, echoed and changed), ``_mcp_results`` (against what
an MCP tool server returned), ``_retry``, ``_divergence`` (a replay's request the recording has
not), and ``_roots`` (root causes first: a finding that follows from another, by the table
``CAUSES``, is folded under it as info with ``details.caused_by``, everywhere). The names below
are the whole surface, pinned by tests/cassettes/analysis/test_dispatch_surface.py.

The layer compares each request with the previous turn of its conversation: what was kept, what
was appended (the answer echoed back, tool results, new input), what was dropped or rewritten, and
how every tool result pairs with the call it answers — by id, by the id a framework gave the call
when it echoed it, or by name on wires without ids (Gemini, Ollama). Pairing is checked for every
provider, including Ollama, which never reports a pairing error itself.

Catalogue (code, severity, when it fires):

==================================  ========  =====================================================
``C.dropped_tool_result``           error     a call of the previous answer, or a call the client
                                              put in the history, has no result in this request
``C.orphan_tool_result``            error     a result whose call id matches no call of the
                                              conversation or of the history sent
``C.duplicate_tool_result``         warning   two results carry the same call id
``C.tool_result_wrong_name``        warning   a result answers a call by id but names another
                                              function (Gemini's ``functionResponse.name``)
``C.assistant_not_echoed``          warning   the previous answer is not in the history sent back
                                              (a stream's chunks sent back as streamed, as
                                              separate text parts; typographic normalisation,
                                              reasoning inlined as
                                              ``<think>`` text, and a text-protocol answer re-rendered
                                              with the same words — JSON's literals as Python's
                                              ``True``/``None`` — or its observation replaced are
                                              tolerated)
``C.history_mutated``               warning   an earlier message was changed in place
``C.history_trimmed``               info      the history was shortened or compacted (intentional);
                                              also when it starts with the previous answer, the
                                              question before it dropped
``C.pairing_error``                 error     the API rejected the request with a pairing text
                                              (WIRE.md §G.2): reported by A, caused by C, linked
                                              to the turn whose calls were mishandled
``C.continued_after_final_answer``  warning / a text-only final answer was followed by another
                                    info      request with no new input (a text-protocol action,
                                              ``Action:`` / ``Code:``, is not a final answer); info
                                              in a group chat (user-side messages from two named
                                              speakers or more), once for a run of re-prompts of
                                              the same agent, naming it
``C.truncated_treated_as_complete`` warning   a cut-off answer (token cap, cut stream) was echoed
                                              or its calls executed as if whole
``C.refusal_treated_as_answer``     warning   a refused or filtered answer was echoed and the loop
                                              went on with no new input, as if the model had answered
``C.mcp_error_hidden``               warning   an MCP tool server answered the model's call with an
                                              error, and the result sent back to the model has no
                                              error flag and none of the error's text
``C.tool_result_altered``           info      the result sent back to the model is not what the MCP
                                              server returned (nor a cut of it)
``C.tool_call_not_executed``        warning   the model called a tool a recorded MCP server listed,
                                              no server ran it, and the client sent back a result
                                              not marked as an error (info where the API has no
                                              error flag for tool results)
``C.retry``                         info      the identical request again after a failed attempt
``C.retry_of_rejected_request``     warning   ... after a 4xx that will fail the same way
``C.retry_before_retry_after``      warning   ... sooner than the ``retry-after`` the API asked for
``C.retry_storm``                   warning   five attempts at one request, each within 0.5 s of the last failure
``C.gave_up_on_retryable_error``    info      the conversation ended on a 429, 5xx or transport error
``C.abandoned_answer``              warning   the client cut the answer before its end: closed its
                                    / info    connection (a timeout, a cancel) or, on a WebSocket,
                                              sent its next turn first (info: an interruption, or
                                              after an error status); not the API's failure
``C.answer_discarded``              info      a turn's messages sent again (the same text, calls and
                                              results) after it was answered: the answer thrown
                                              away (a parse or validation retry), paid for twice
``C.tool_result_as_text``           error     a call's result sent as user text, not as a tool result
``C.tool_calls_as_text``            info      the client echoed the answer's calls as text and sends
                                              the results as text: a transcript (smolagents), no
                                              call left pending for the API
``C.output_tool_as_text``           info      the answer's one call (an output tool: final_result) came
                                              back as assistant text, its arguments, with no result:
                                              a framework resuming a run that ended on it
``C.tool_results_split``            error     one turn's results spread over several messages where the
                                              API wants them in one (Anthropic)
``C.wrong_tool_call_id``            error     results sent under ids the model never gave (the root of
                                              the orphan results and dropped calls it explains, which
                                              stay as info with ``caused_by``)
``C.tool_result_error``             info      a tool result is an error (flag or error text)
``C.tool_result_blocked``           warning   a tool result is a page that turned the tool away (a
                                              bot check, captcha wall, CDN block or 403 page): the
                                              environment failed, not the model; a long page counts
                                              only when its opening says so
``C.message_blocked_page``          warning   another agent's message, or a user turn, carries a
                                              block page (two of its phrases at least, in a short
                                              text: a web agent passing on the Cloudflare check it
                                              was shown); names the agent (its ``name``)
``C.cache_prefix_broken``           info /    system prompt, tool definitions or an early message
                                    warning   changed mid-conversation (warning when cache reads
                                              dropped that turn)
``C.stopped_with_pending_calls``    info      the conversation ended right after the model called
                                              tools (fine for a final-output tool, a bug otherwise)
``C.diverged_from_recording``       error     a replayed request matched no recorded round trip:
                                              looptap's replay answered with its own error (the
                                              API was not asked); says what differs, where
==================================  ========  =====================================================
"""  # noqa: E501

from __future__ import annotations

from cassettes.analysis._context import Check, FinalCheck
from cassettes.analysis.dispatch._blocked import (
    blocked_page,
    check_message_blocked,
    check_tool_result_blocked,
)
from cassettes.analysis.dispatch._divergence import check_diverged_from_recording, replay_miss
from cassettes.analysis.dispatch._history import (
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
from cassettes.analysis.dispatch._layer import build
from cassettes.analysis.dispatch._mcp_results import check_mcp_results
from cassettes.analysis.dispatch._results import (
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
from cassettes.analysis.dispatch._retry import check_abandoned, check_retry, final_gave_up
from cassettes.analysis.dispatch._roots import (
    CAUSES,
    fold_root_causes,
    is_consequence,
    ordered_findings,
)
from cassettes.analysis.dispatch._shared import speaker

__all__ = [
    "CAUSES",
    "CHECKS",
    "FINAL_CHECKS",
    "GROUP_CHAT",
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

CHECKS: tuple[Check, ...] = (
    check_diverged_from_recording,
    check_dropped_tool_result,
    check_results_split,
    check_unanswered_history_call,
    check_orphan_tool_result,
    check_result_name,
    check_assistant_echo,
    check_history_rewritten,
    check_pairing_error,
    check_continued_after_final,
    check_truncated_treated_as_complete,
    check_refusal_treated_as_answer,
    check_mcp_results,
    check_retry,
    check_abandoned,
    check_tool_result_error,
    check_tool_result_blocked,
    check_message_blocked,
    check_cache_prefix,
)


FINAL_CHECKS: tuple[FinalCheck, ...] = (final_pending_calls, final_gave_up)
