"""Every finding code, one row each: the one table the checks, the views and the docs read.

A row is the code (``<layer>.<name>``, stable: it is in users' cassettes, rules and fleet
indexes), its layer, its severity, the facts that grade it another (and the severity each gives), what it
says (one line of docs/findings.md), the page that explains it further, the field looptap may
have inferred that it rests on (:func:`demote_inferred`) and the codes it folds under
(:mod:`cassettes.analysis.dispatch._roots`). A check names its code by the constant here (a
misspelt one is an import error) and :meth:`TurnContext.finding
<cassettes.analysis._context.TurnContext.finding>` takes the layer and the severity from its row
(:func:`severity_of`): a check that grades names the fact that holds (``grade="cut"``), never a
severity, and the row says what that fact weighs. docs/findings.md's tables are
generated from :data:`ROWS` (``python -m cassettes.analysis.codes``) and a test pins them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._model import Finding, Layer, Severity

__all__ = ["ROWS", "Row", "demote_inferred", "doc_table", "severity_of"]

INFO, WARNING, ERROR = Severity.INFO, Severity.WARNING, Severity.ERROR


class Row(NamedTuple):
    code: str
    layer: Layer
    severity: Severity
    #: The other severities its check may give it, each by the fact that grades it (``cut``:
    #: the token cap cut the call): the check says which fact holds, the row what it weighs.
    grades: dict[str, Severity]
    text: str
    #: A docs page (relative to docs/) that explains it further, or "".
    see: str
    #: The field it rests on that looptap may have inferred (``output``, ``tools`` …), or "".
    rests_on: str
    #: The codes it folds under, most specific first, each with its scope
    #: (:mod:`cassettes.analysis.dispatch._roots`): ``turn``, a finding of that code on the same
    #: turn; ``call``, one about the same tool call (``tool_call_id``; by tool name where calls
    #: have no ids), on this turn or the previous one; ``unrun``, about one of the earlier calls a
    #: repeated call repeats, none of which got a result (``details.never_run``).
    under: tuple[tuple[str, str], ...]

    @property
    def severities(self) -> tuple[Severity, ...]:
        """Every severity a finding of it may have, its own first."""
        return tuple(dict.fromkeys((self.severity, *self.grades.values())))


#: Every code, by code, in the docs' order (E, A, C).
ROWS: dict[str, Row] = {}


def _row(
    layer: Layer,
    code: str,
    severity: Severity,
    text: str,
    *,
    grades: dict[str, Severity] | None = None,
    see: str = "",
    rests_on: str = "",
    under: tuple[tuple[str, str], ...] = (),
) -> str:
    ROWS[code] = Row(code, layer, severity, grades or {}, text, see, rests_on, under)
    return code


# --- E: what the model emitted -----------------------------------------------------------------

ARGUMENTS_NOT_JSON = _row("E", "E.arguments_not_json", ERROR, "a tool call's arguments are not valid JSON; *info* on a turn cut by the token cap, a broken stream or the client hanging up, linked (`details.caused_by`) to the cut, which carries the error", grades={"cut": INFO}, see="faults.md")  # fmt: skip
ARGUMENTS_SCHEMA = _row("E", "E.arguments_schema", WARNING, "parsed arguments violate the offered tool's JSON schema (a required property missing, a wrong type, a value outside `enum` …), each violation with its JSON path; *info* when the only violations are unexpected extra properties, or the arguments were cut by the token cap", grades={"cut": INFO, "extra only": INFO}, see="faults.md")  # fmt: skip
TOOL_NOT_OFFERED = _row("E", "E.tool_not_offered", ERROR, "a client-executed call (`function`/`custom`) names a tool that is not among the request's tools (nor loaded by a tool search earlier), or no tools were sent", rests_on="tools")  # fmt: skip
REPEATED_CALL = _row("E", "E.repeated_call", INFO, "the same call (tool and canonical arguments) was emitted on an earlier turn of the same task (a user message after a final answer starts a new one): *info* the 2nd time (a retry or a poll is often legitimate), *warning* from the 3rd (a loop)", grades={"loop": WARNING}, under=(("C.dropped_tool_result", "unrun"), ("C.history_trimmed", "dropped")))  # fmt: skip
EMPTY_RESPONSE = _row("E", "E.empty_response", WARNING, "a complete 2xx turn that ended normally carries no text, no tool call and no refusal (reasoning alone does not count)", rests_on="output")  # fmt: skip
REFUSAL = _row("E", "E.refusal", WARNING, "the model refused: a refusal part, or a `refused` finish", see="faults.md")  # fmt: skip
TOOL_CALL_ERROR = _row("E", "E.tool_call_error", ERROR, "the API says the model's tool call was malformed or unexpected (finish class `tool_call_error`: Gemini `MALFORMED_FUNCTION_CALL`/`UNEXPECTED_TOOL_CALL`, Bedrock `malformed_tool_use` …): reported by A, emitted by E")  # fmt: skip
TOOL_CHOICE_VIOLATED = _row("E", "E.tool_choice_violated", WARNING, "`tool_choice` required a call (or a named tool) and the model ended the turn without one or called another tool; or it was `none` and the model called a tool anyway", rests_on="tools")  # fmt: skip
IGNORED_TOOL_ERROR = _row("E", "E.ignored_tool_error", WARNING, "a tool answered the previous turn's call with an error, and the model called the same tool with the same arguments again, or answered (text, no call) with words that claim success (`successfully`, `all set`, `the tests pass` …) and none that own the failure; a result that states a non-zero exit status (`Exit code 3`), or a test run the tracer saw fail that the result said, is such an error for the claim", see="shell-file-tools.md")  # fmt: skip
UNGROUNDED_CLAIM = _row("E", "E.ungrounded_claim", WARNING, "an answer to the user (text, no call, not a text-protocol step) asserts claims no message, tool result, call or system prompt of its request holds — URLs given as sources, read whole; quotes, paired in order; dates as a whole; numbers with their units or signs, and numbers of 100 or more — never the model's code, a query it searched for, a format string, nor its own arithmetic on grounded numbers: the claims listed. *Warning* when the model was called again with nothing new after its final answer; *info* on an answer made from tools' results or other agents' messages; an answer with no such material is not judged", grades={"first answer": INFO}, see="findings-precision.md", under=(("C.history_trimmed", "quoted"),))  # fmt: skip
INVENTED_ARGUMENT = _row("E", "E.invented_argument", WARNING, "an identifier the model passed to a tool (an argument named `…_id`, `…Id`, `…number`, `…code`, `sku` … whose value has a digit) appears nowhere earlier: no system prompt, user or agent message, tool result, tool description or earlier call holds it; the model made it up. Weighed against the tool's own HTTP for the call where it was recorded: not made when a 2xx answer to a request that sent the value holds it as data (the value exists), and says so when the tool answered 404 or 410, or said not found naming the value (`details.tool_answer`: `rejected`)", see="recorder.md", under=(("C.history_trimmed", "quoted"),))  # fmt: skip
PLACEHOLDER_ARGUMENT = _row("E", "E.placeholder_argument", WARNING, "an argument is a template's placeholder (`path_to_…`, `/path/to/`, a whole `<…>`, `YOUR_…`, `example.com`, `xxx`) that nothing the model was given holds: it acted on a template, not a value; weighed against the tool's own HTTP as `E.invented_argument` is (the whole value)", see="recorder.md")  # fmt: skip
ENDED_ON_FAILED_TEST = _row("E", "E.ended_on_failed_test", INFO, "the model ended its turn (a complete answer, no call) in the round trip that carried the result of a test run (a test runner among the programs the call's command ran: `pytest`, `python -m pytest`, `go test`, `npm test` …) that exited non-zero, and the result said the failure; rooted at the turn that ended. Not when a passing run came later, nor when the client hid the failure (`C.shell_failure_hidden`); info: an answer that says the tests still fail ends the same way; one that claims success and owns no failure is `E.ignored_tool_error` instead", see="shell-file-tools.md")  # fmt: skip
TOOL_CALL_AS_TEXT = _row("E", "E.tool_call_as_text", WARNING, "tools were offered and the model wrote a call of one as text in an open model's tool-call syntax (`<tool_call>`, `[TOOL_CALLS]`, Llama's python tag, DeepSeek's, Kimi's, Granite's … the markers vLLM's and SGLang's tool parsers read), the offered tool named right after the marker, and the turn ended with a natural stop and no tool call: the client will never run it", see="reading.md", rests_on="tools")  # fmt: skip
RULE_BROKEN = _row("E", "E.rule_broken", WARNING, "a call of the answer breaks one of the agent's own rules (`looptap-rules.toml`), naming the rule, the call and why; the rule's `severity` grades it", grades={"info": INFO, "warning": WARNING, "error": ERROR}, see="rules.md")  # fmt: skip

# --- A: what the API reported ------------------------------------------------------------------

TRUNCATED_LENGTH = _row("A", "A.truncated_length", WARNING, "the output hit the token cap (`length`, `max_tokens`, `MAX_TOKENS`, `incomplete:max_output_tokens`); *error* when a tool call's arguments were cut (invalid JSON)", grades={"arguments cut": ERROR}, see="faults.md", rests_on="finish_reason")  # fmt: skip
TRUNCATED_CONTEXT = _row("A", "A.truncated_context", WARNING, "generation stopped because the context window was full")  # fmt: skip
FILTERED = _row("A", "A.filtered", WARNING, "a content filter or safety system blocked the output", see="faults.md")  # fmt: skip
PROMPT_BLOCKED = _row("A", "A.prompt_blocked", WARNING, "the prompt itself was blocked before generation; *error* when the API refused the request for it (an HTTP 400 whose code is `content_filter`, Azure's, in either error shape, `innererror.content_filter_result` or `inner_error.content_filter_results`): what the filter flagged, and the message that brought the newest text in — a tool result, another agent's message (by its `name`) or a user message", grades={"request refused": ERROR})  # fmt: skip
GUARDRAIL_MASKED = _row("A", "A.guardrail_masked", INFO, "a guardrail only masked personal data (Bedrock's `ANONYMIZED`, nothing blocked): which kinds, in the prompt or the answer; the answer is whole")  # fmt: skip
HTTP_ERROR = _row("A", "A.http_error", ERROR, "HTTP 4xx/5xx, with the provider's message, on a model call or any other call of an LLM API (an embedding, a token count: on its round trip, no turn) — except pairing errors (`C.pairing_error`: caused by the client's dispatch), a replay's answer to a request its cassette has not (`C.diverged_from_recording`: the API was not asked), 429 and overload statuses", see="faults.md", rests_on="status")  # fmt: skip
RATE_LIMITED = _row("A", "A.rate_limited", WARNING, "HTTP 429 (with the `retry-after` or retry delay when sent)", see="faults.md")  # fmt: skip
OVERLOADED = _row("A", "A.overloaded", WARNING, "HTTP 529 or 503: the service was overloaded or unavailable", see="faults.md", rests_on="status")  # fmt: skip
ERROR_IN_200 = _row("A", "A.error_in_200", ERROR, "a 2xx response carries an error: an error event inside a stream, an error body, or an `error` finish", see="faults.md")  # fmt: skip
STREAM_TRUNCATED = _row("A", "A.stream_truncated", ERROR, "a stream ended without its terminal event (also when a transport error explains it: the message says so; not when the client cut it: `C.abandoned_answer`)", see="faults.md", rests_on="framing")  # fmt: skip
TRANSPORT_ERROR = _row("A", "A.transport_error", ERROR, "the connection failed: the round trip is partial (not when the client cut it: `C.abandoned_answer`)", see="faults.md")  # fmt: skip
TOOL_CALLS_WITHOUT_CALLS = _row("A", "A.tool_calls_without_calls", WARNING, "the finish reason promises tool calls (`tool_calls`, `tool_use`) but the response carries none", rests_on="output")  # fmt: skip
MODEL_MISMATCH = _row("A", "A.model_mismatch", INFO, "the served model is not the requested one (dated snapshots, `-latest`, path or region prefixes and version suffixes do not count, nor an Azure deployment name); *warning* when the body named a published model and a model of another family answered; info when the name is an alias or a router's; once per conversation per pair", grades={"other family": WARNING}, see="layout.md")  # fmt: skip
USAGE_MISSING = _row("A", "A.usage_missing", INFO, "a complete 2xx response without usage (once per conversation); for a stream, says how to ask for it", rests_on="usage")  # fmt: skip
STOP_AT_CAP = _row("A", "A.stop_at_cap", WARNING, "the output tokens reported equal the request's token cap (`max_tokens`, `max_completion_tokens`, `maxOutputTokens` …) while the finish reason is a natural stop (`stop`, `end_turn`, `STOP`): the answer was most likely cut and the API did not say so; a client that trusts the finish reason takes it as whole", see="reading.md", rests_on="usage")  # fmt: skip
TOOL_LOOP_LIMIT = _row("A", "A.tool_loop_limit", WARNING, "the API ended the turn because of too many tool calls")  # fmt: skip
PAUSED = _row("A", "A.paused", INFO, "the API paused a long turn (`pause_turn`): the client must send the history back to continue")  # fmt: skip
MALFORMED_RESPONSE = _row("A", "A.malformed_response", WARNING, "a 2xx body with no output, no finish reason and no error")  # fmt: skip
CONTEXT_EDITED = _row("A", "A.context_edited", INFO, "the API edited the context server-side on the client's request: Anthropic `context_management` edits where the response reports `applied_edits` (clearing old tool uses or thinking), OpenAI Responses `truncation: \"auto\"` once per conversation (its response does not say whether it truncated); what was asked and applied. Never a C finding", see="threading.md")  # fmt: skip
UNUSUAL_FINISH = _row("A", "A.unusual_finish", INFO, "a finish reason outside the known classes (`other`, `unknown`, `cancelled`, `no_generation`)")  # fmt: skip

# --- C: what the client dispatched -------------------------------------------------------------

DROPPED_TOOL_RESULT = _row("C", "C.dropped_tool_result", ERROR, "a call of the previous answer, or a call the client put in the history, has no result in this request", see="threading.md", under=(("C.tool_result_as_text", "call"),))  # fmt: skip
ORPHAN_TOOL_RESULT = _row("C", "C.orphan_tool_result", ERROR, "a result whose call id matches no call of the conversation or of the history sent")  # fmt: skip
DUPLICATE_TOOL_RESULT = _row("C", "C.duplicate_tool_result", WARNING, "two results carry the same call id")  # fmt: skip
TOOL_RESULT_WRONG_NAME = _row("C", "C.tool_result_wrong_name", WARNING, "a result answers a call by id but names another function (Gemini's `functionResponse.name`)")  # fmt: skip
ASSISTANT_NOT_ECHOED = _row("C", "C.assistant_not_echoed", WARNING, "the previous answer is not in the history sent back (tolerated: a stream's chunks sent back as streamed, as separate text parts; typographic normalisation; reasoning inlined as `<think>` text; a text-protocol answer re-rendered with the same words — JSON's literals as Python's `True`/`None` — or its observation replaced)", see="threading.md")  # fmt: skip
HISTORY_MUTATED = _row("C", "C.history_mutated", WARNING, "an earlier message was changed in place", see="threading.md")  # fmt: skip
HISTORY_TRIMMED = _row("C", "C.history_trimmed", INFO, "the history was shortened or compacted (intentional); also when it starts with the previous answer, the question before it dropped", see="threading.md")  # fmt: skip
USER_INSTRUCTION_DROPPED = _row("C", "C.user_instruction_dropped", WARNING, "the client's context management (a trim, a summary, a compaction) dropped the user's task or an instruction of the user's (`always …`, `never …`) that no kept message, system prompt or summary carries (fewer than half of its words left in the request): quoted; said once, on the turn it happened", see="threading.md")  # fmt: skip
PAIRING_ERROR = _row("C", "C.pairing_error", ERROR, "the API rejected the request with a pairing text (WIRE.md §G.2): reported by A, caused by C, linked to the turn whose calls were mishandled", under=(("C.wrong_tool_call_id", "turn"), ("C.tool_results_split", "turn"), ("C.tool_result_as_text", "turn"), ("C.dropped_tool_result", "turn"), ("C.orphan_tool_result", "turn"), ("C.duplicate_tool_result", "turn"), ("C.tool_result_wrong_name", "turn"), ("C.assistant_not_echoed", "turn")))  # fmt: skip
CONTINUED_AFTER_FINAL_ANSWER = _row("C", "C.continued_after_final_answer", WARNING, "a text-only final answer was followed by another request with no new input (a text-protocol action, `Action:` / `Code:`, is not a final answer); *info* in a group chat — user-side messages from two named speakers or more, or conversations the threader linked as one — once for a run of re-prompts of the same agent, naming it (`details.agent`)", grades={"group chat": INFO}, see="threading.md")  # fmt: skip
TRUNCATED_TREATED_AS_COMPLETE = _row("C", "C.truncated_treated_as_complete", WARNING, "a cut-off answer (token cap, cut stream) was echoed or its calls executed as if whole", see="faults.md", rests_on="finish_reason")  # fmt: skip
REFUSAL_TREATED_AS_ANSWER = _row("C", "C.refusal_treated_as_answer", WARNING, "a refused or filtered answer was echoed and the loop went on with no new input, as if the model had answered", see="faults.md")  # fmt: skip
MCP_ERROR_HIDDEN = _row("C", "C.mcp_error_hidden", WARNING, "an MCP tool server answered the model's call with an error, and the result sent back to the model has no error flag and none of the error's text", see="recorder.md")  # fmt: skip
TOOL_HTTP_ERROR_HIDDEN = _row("C", "C.tool_http_error_hidden", WARNING, "every HTTP call the tool made for the model's call failed (a 4xx or 5xx, or no answer), and the result sent back to the model has no error flag and says none of it", see="recorder.md")  # fmt: skip
TOOL_RESULT_CUT = _row("C", "C.tool_result_cut", INFO, "the result sent back to the model is the start of a longer answer that the tool's HTTP call got (at most 90% of it, 64 bytes or more left out), and nothing in it says it was cut", see="recorder.md")  # fmt: skip
TOOL_HTTP_MISSING = _row("C", "C.tool_http_missing", INFO, "a result came back for a call of a tool whose two or more earlier calls each made HTTP calls linked by their arguments, and no tool HTTP call was made while this one awaited: the result came from elsewhere (a cache, a default, the client)", see="recorder.md")  # fmt: skip
SHELL_FAILURE_HIDDEN = _row("C", "C.shell_failure_hidden", WARNING, "the command the model's call ran (a process looptap run's tracer linked to it) exited non-zero or was ended by a signal, and the result sent back to the model has no error flag, no word of a failure, no exit status but 0 and none of what the command wrote on stderr (a result that states none is judged only when the run traced the stderr: --shell-trace)", see="shell-file-tools.md")  # fmt: skip
SHELL_OUTPUT_CUT = _row("C", "C.shell_output_cut", INFO, "the result sent back to the model holds a verbatim start (or end) of what the command the model's call ran printed on stdout or stderr, and not the rest (at most 90% of it, 64 characters or more left out, found nowhere in the result); judged only where the tracer's record of the output can hold nothing but what reached the agent (no redirection, pipe or capture in the command's shells, a whole output without control characters)", see="shell-file-tools.md")  # fmt: skip
SHELL_OUTPUT_REORDERED = _row("C", "C.shell_output_reordered", INFO, "the result sent back to the model holds, verbatim and once each, every piece the command the model's call ran wrote on stdout and stderr in turn, in another order than the writes' (and not each stream whole, one after the other: streams kept apart are not judged); judged only where the tracer's record of the output can hold nothing but what reached the agent, as for C.shell_output_cut", see="shell-file-tools.md")  # fmt: skip
TOOL_RESULT_ALTERED = _row("C", "C.tool_result_altered", INFO, "the result sent back to the model is not what the MCP server returned (nor a cut of it)", see="recorder.md")  # fmt: skip
TOOL_CALL_NOT_EXECUTED = _row("C", "C.tool_call_not_executed", WARNING, "the model called a tool a recorded MCP server listed, no server ran it, and the client sent back a result not marked as an error; *info* where the API has no error flag for tool results", grades={"no error flag": INFO}, see="recorder.md")  # fmt: skip
RETRY = _row("C", "C.retry", INFO, "the identical request again after a failed attempt", see="faults.md")  # fmt: skip
RETRY_OF_REJECTED_REQUEST = _row("C", "C.retry_of_rejected_request", WARNING, "the identical request again after a 4xx that will fail the same way", see="faults.md")  # fmt: skip
RETRY_BEFORE_RETRY_AFTER = _row("C", "C.retry_before_retry_after", WARNING, "the identical request again sooner than the `retry-after` the API asked for", see="faults.md")  # fmt: skip
RETRY_STORM = _row("C", "C.retry_storm", WARNING, "five attempts at one request, each within 0.5 s of the last failure", see="faults.md")  # fmt: skip
GAVE_UP_ON_RETRYABLE_ERROR = _row("C", "C.gave_up_on_retryable_error", INFO, "the conversation ended on a 429, 5xx or transport error", see="faults.md")  # fmt: skip
ABANDONED_ANSWER = _row("C", "C.abandoned_answer", WARNING, "the client cut the answer before its end: closed its connection (a timeout, a cancel) or, on a WebSocket, sent its next turn first; *info* for an interruption, or after an error status; never blamed on the API", grades={"interrupted or failed": INFO}, see="faults.md")  # fmt: skip
ANSWER_DISCARDED = _row("C", "C.answer_discarded", INFO, "a turn's messages sent again (the same text, calls and results) after it was answered: the answer thrown away (a parse or validation retry), paid for twice", see="threading.md")  # fmt: skip
TOOL_RESULT_AS_TEXT = _row("C", "C.tool_result_as_text", ERROR, "a call's result sent as user text, not as a tool result")  # fmt: skip
TOOL_CALLS_AS_TEXT = _row("C", "C.tool_calls_as_text", INFO, "the client echoed the answer's calls as text and sends the results as text: a transcript (smolagents), no call left pending for the API", see="clients.md")  # fmt: skip
OUTPUT_TOOL_AS_TEXT = _row("C", "C.output_tool_as_text", INFO, "the answer's one call (an output tool: `final_result`) came back as assistant text, its arguments, with no result: a framework resuming a run that ended on it", see="threading.md")  # fmt: skip
TOOL_RESULTS_SPLIT = _row("C", "C.tool_results_split", ERROR, "one turn's results spread over several messages where the API wants them in one (Anthropic)")  # fmt: skip
WRONG_TOOL_CALL_ID = _row("C", "C.wrong_tool_call_id", ERROR, "results sent under ids the model never gave: the root of the orphan results and dropped calls it explains, which stay as info with `caused_by`", see="concurrency.md")  # fmt: skip
TOOL_RESULT_ERROR = _row("C", "C.tool_result_error", INFO, "a tool result is an error (its flag, a text that opens as one: `Error: …`, `{\"error\": …}`, or an agent framework's failure text: openai-agents' `An error occurred while running the tool…`, pydantic-ai's `…Fix the errors and try again.`, LangChain's, CrewAI's, smolagents': reading.md)", under=(("E.tool_not_offered", "call"), ("E.arguments_not_json", "call"), ("E.arguments_schema", "call")))  # fmt: skip
TOOL_RESULT_BLOCKED = _row("C", "C.tool_result_blocked", WARNING, "a tool result is a page that turned the tool away (a bot check, captcha wall, CDN block or 403 page): the environment failed, not the model; a long page counts only when its opening says so")  # fmt: skip
MESSAGE_BLOCKED_PAGE = _row("C", "C.message_blocked_page", WARNING, "another agent's message, or a user turn, carries a block page (two of its phrases at least, in a short text: a web agent passing on the Cloudflare check it was shown); names the agent (its `name`)")  # fmt: skip
CACHE_PREFIX_BROKEN = _row("C", "C.cache_prefix_broken", INFO, "the system prompt, tool definitions or an early message changed mid-conversation; *warning* when the reported cache reads dropped that turn", grades={"cache reads dropped": WARNING}, see="threading.md")  # fmt: skip
STOPPED_WITH_PENDING_CALLS = _row("C", "C.stopped_with_pending_calls", INFO, "the conversation ended right after the model called tools (fine for a final-output tool, a bug otherwise)", see="kept-analysis.md")  # fmt: skip
LOOP_REPORTED_NOT_STOPPED = _row("C", "C.loop_reported_not_stopped", WARNING, "the agent said, twice in a row, that it is stuck or looping (an orchestrator's ledger `\"is_in_loop\": true`, \"I am stuck in a loop\"), and the client called it again all the same; *info*, linked (`details.caused_by`) to the loop it reports, when a call was repeated before it: the first `E.repeated_call` of its task, else of the run (an orchestrator reporting the loop of an agent it directs: `details.caused_by_conversation`), which comes first and carries the warning", grades={"repeated call": INFO})  # fmt: skip
DIVERGED_FROM_RECORDING = _row("C", "C.diverged_from_recording", ERROR, "a replayed request matched no recorded round trip: looptap's replay answered with its own error (the API was not asked); says what differs, where", see="testing.md")  # fmt: skip
THREAD_AMBIGUOUS = _row("C", "C.thread_ambiguous", INFO, "the request's history, tool-call ids included, is identical to that of several conversations waiting for their next turn: looptap took the most recent (unique tool-call ids or an `X-Looptap-Conversation` header make it certain)", see="threading.md")  # fmt: skip
#: A check or analysis step raised on a round trip (issue 100 item 5): the run still reads, and
#: this note, in the layer whose judgement is missing, names the step and its error.
_NOT_JUDGED = "a check or analysis step failed on this round trip (looptap's bug, never the run's): what it judges was not judged, the step and its error named; `show` and `run` exit 4"
NOT_JUDGED_E = _row("E", "E.not_judged", INFO, _NOT_JUDGED, see="reliability.md")  # fmt: skip
NOT_JUDGED_A = _row("A", "A.not_judged", INFO, _NOT_JUDGED, see="reliability.md")  # fmt: skip
NOT_JUDGED_C = _row("C", "C.not_judged", INFO, _NOT_JUDGED, see="reliability.md")  # fmt: skip
NOT_JUDGED = {"E": NOT_JUDGED_E, "A": NOT_JUDGED_A, "C": NOT_JUDGED_C}

#: How the docs page says a cause's scope.
_SCOPE = {"turn": "", "call": " (about the same call, this turn or the one before)", "unrun": " (about a call it repeats that the client never ran)", "dropped": " (the calls it repeats no longer in the history: the client's context management dropped them on this turn or since, so the model does not see them made)", "quoted": " (each of its claims or values quoted from what the client's context management dropped on this turn or since: the request no longer holds it; never merely for coming later)"}  # fmt: skip
#: The layers' titles on the docs page.
_LAYERS = {"E": "E — what the model emitted", "A": "A — what the API reported", "C": "C — what the client dispatched"}  # fmt: skip


def severity_of(code: str, grade: str | None = None) -> Severity:
    """The severity of a finding of ``code``: its row's, or the one its row gives the fact
    ``grade`` (a fact the row does not grade is a bug: :class:`ValueError`)."""
    row = ROWS[code]
    if grade is None:
        return row.severity
    if grade not in row.grades:
        raise ValueError(f"{code} is not graded by {grade!r}")
    return row.grades[grade]


def demote_inferred(findings: list[Finding], reconstructed: dict[str, Any] | None) -> None:
    """No finding rests on a field looptap inferred (docs/interop.md): an imported round trip
    (:attr:`~cassettes.wire.Exchange.reconstructed`) names the fields its source gave; each
    finding resting on another (its row's ``rests_on``: looptap inferred it when it rebuilt the
    round trip, or it is not known) is no evidence, and becomes an info note that says so, once,
    for every reader (show, ``--json``, the totals, ``why``, exports, the inspector, the fleet;
    ``details.inferred`` names the field)."""
    if not reconstructed:
        return
    given = set(reconstructed.get("from") or ())
    for f in findings:
        field = ROWS[f.code].rests_on
        if field and field not in given:
            f.severity = Severity.INFO
            f.details["inferred"] = field
            f.message = f"not evidence: rests on the {field} looptap inferred. {f.message}"


def _under(under: tuple[tuple[str, str], ...]) -> str:
    """What a row folds under, in words: its causes grouped by scope, in order."""
    if not under:
        return ""
    scopes = list(dict.fromkeys(scope for _, scope in under))
    said = []
    for scope in scopes:
        names = [f"`{c}`" for c, s in under if s == scope]
        first = "the first found of " if len(names) > 1 else ""
        said.append(f"{first}{', '.join(names)}{_SCOPE[scope]}")
    return ". Folds under " + "; or under ".join(said)


def doc_table() -> str:
    """docs/findings.md's tables, one per layer, generated from :data:`ROWS`."""
    out: list[str] = []
    for layer, title in _LAYERS.items():
        out += [f"### {title}", "", "| code | severity | fires when | rests on | see |"]
        out.append("|---|---|---|---|---|")
        for r in ROWS.values():
            if r.layer == layer:
                sev = " / ".join(s.value for s in r.severities)
                see = f"[{r.see.removesuffix('.md')}]({r.see})" if r.see else ""
                text = r.text + _under(r.under)
                out.append(f"| `{r.code}` | {sev} | {text} | {r.rests_on} | {see} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(doc_table())
