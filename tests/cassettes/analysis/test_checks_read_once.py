"""The checks that look an argument or a claim up in what the model was given do not read the whole
history again when they need not (issue 73 item 2): every request re-sends the history, so reading
all of it on each turn costs the square of a conversation's length.

* E.invented_argument and E.placeholder_argument read the texts newest first, each on its own, up
  to the first that holds the value (an identifier usually comes from the latest tool result);
* E.ungrounded_claim reads nothing when the answer holds nothing a claim is made of (no digit,
  quote mark or URL).

Shown with a history whose oldest message may not be read (its attributes raise), and the same
findings as the whole history read at once (the texts joined) on values at the texts' edges.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from looptap.cassettes.analysis import CHECKS, CallCheck
from looptap.cassettes.models import (
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
)

_BY_NAME = {c.__name__: c for c in CHECKS}
check_invented_argument = _BY_NAME["check_invented_argument"]
check_placeholder_argument = _BY_NAME["check_placeholder_argument"]
check_ungrounded_claim = _BY_NAME["check_ungrounded_claim"]


class _Unread:
    """A message of the history that must not be read."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the old history was read ({name})")


def _result(content: str) -> Message:
    return Message(
        role="tool",
        parts=[Part(kind="tool_result", tool_result=ToolResult(call_id="c0", content=content))],
    )


def _ctx(messages: list[Any], *, calls: list[CallCheck] = (), text: str = "") -> Any:  # type: ignore[assignment]
    resp = NormalisedResponse(
        parts=[Part(kind="text", text=text)] if text else [],
        finish_reason=FinishReason.COMPLETE,
        complete=True,
    )
    req = NormalisedRequest(family="anthropic", messages=[])

    def finding(
        code: str, message: str, *, grade: str | None = None, **details: Any
    ) -> tuple[Any, ...]:
        return (code, details)

    return SimpleNamespace(
        messages=messages,
        tools=[],
        request=req,
        response=resp,
        rt=SimpleNamespace(request=req, response=resp),
        prev=None,
        turn=SimpleNamespace(
            e=SimpleNamespace(tool_calls=list(calls), text=text),
            c=SimpleNamespace(pairings=[object()], appended=[]),
        ),
        finding=finding,
    )


def test_an_identifier_in_the_latest_result_is_found_without_the_old_history() -> None:
    call = CallCheck(id="c1", name="track", arguments={"order_id": "W7731"})
    ctx = _ctx([_Unread(), _result('{"orders": ["W7731"]}')], calls=[call])
    assert list(check_invented_argument(ctx)) == []


def test_a_placeholder_in_the_latest_result_is_found_without_the_old_history() -> None:
    call = CallCheck(id="c1", name="fetch", arguments={"url": "https://example.com/x"})
    ctx = _ctx([_Unread(), _result("Use https://EXAMPLE.com/x for the test.")], calls=[call])
    assert list(check_placeholder_argument(ctx)) == []


def test_an_answer_with_nothing_to_ground_reads_no_history() -> None:
    ctx = _ctx([_Unread(), _result("W1 costs $12.50")], text="It is on its way, as you asked.")
    assert list(check_ungrounded_claim(ctx)) == []


@pytest.mark.parametrize(
    ("texts", "value", "found"),
    [
        (["order W77", "x"], "W77", True),  # at a text's end
        (["W77 shipped", "x"], "W77", True),  # at a text's start
        (["W7", "7"], "W77", False),  # split over two texts: in neither
        (["W77a"], "W77", False),  # part of a longer token
        (["#w77"], "#W77", True),  # any case, the # aside
    ],
)
def test_an_identifier_is_looked_up_as_in_the_texts_joined(
    texts: list[str], value: str, found: bool
) -> None:
    call = CallCheck(id="c1", name="track", arguments={"order_id": value})
    ctx = _ctx([_result(t) for t in texts], calls=[call])
    assert (list(check_invented_argument(ctx)) == []) is found


def test_claims_are_still_judged_when_the_answer_holds_a_number() -> None:
    ctx = _ctx([_result("W1 costs $12.50")], text="W1 costs $14.99.")
    (f,) = check_ungrounded_claim(ctx)
    assert f[0] == "E.ungrounded_claim" and f[1]["spans"] == ["$14.99"]
