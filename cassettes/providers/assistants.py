"""OpenAI Assistants (beta): threads, runs, messages and run steps under ``/v1/threads`` and
``/v1/assistants``.

Shapes from the ``openai`` SDK's ``types/beta`` (``Thread``, ``threads.Run``,
``threads.Message``, ``threads.MessageDeltaEvent``, ``threads.runs.RunStep``,
``AssistantStreamEvent``); ``tests/cassettes/providers/test_real_shapes.py`` validates the
fixtures against them.

Only a run makes the model generate: ``POST /threads/runs`` (create a thread and run it),
``POST /threads/{thread}/runs`` and ``POST /threads/{thread}/runs/{run}/submit_tool_outputs``
are the model calls (operation ``generate``). Their request names the state the server keeps —
the thread, or the run the tool outputs go back to — as ``previous_response_id`` (the history and
the assistant's tools live on the server, as with the Responses API's chaining); the run's id is
the response's, so a ``submit_tool_outputs`` threads onto the run that asked for it. The answer:

* not streamed, a ``Run`` object: ``status`` (``queued``/``in_progress``: not finished, no text
  yet; ``requires_action``: the tool calls in ``required_action.submit_tool_outputs.tool_calls``;
  ``completed``; ``incomplete`` with ``incomplete_details.reason``; ``failed`` with
  ``last_error``; ``cancelled``; ``expired``) and ``usage``. The text is not in a run: it is in the
  thread's messages.
* streamed (``stream: true``), SSE events named ``thread.run.*``, ``thread.run.step.*``,
  ``thread.message.*`` (``thread.message.delta``: ``delta.content[{index, type: text, text:
  {value}}]``), ``error``, then ``event: done`` / ``data: [DONE]``. The text is the deltas, the
  finish and usage the run's terminal event.

Every other route carries no model output and is labelled for what it is (``create_thread``,
``messages``, ``retrieve_run``, ``run_steps``, ``assistant``, ``cancel_run`` …), not read as a turn
— except a polled run (``GET …/runs/{run}``) that returns ``requires_action``: its tool calls are
the model's answer to the run, and the poll is read as the call that delivered them
(``Provider.poll_operations``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ..models import (
    ApiError,
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    ToolResult,
    ToolSpec,
)
from ..wire import Framed
from ._base import Provider
from ._parts import StreamParts
from ._profile import Profile
from ._values import as_obj, as_str, function_spec, json_events, text_of, tool_call_from_string
from .openai_chat import usage_from

__all__ = ["OpenAIAssistants"]

_INCOMPLETE = {
    "max_completion_tokens": FinishReason.TRUNCATED_LENGTH,
    "max_prompt_tokens": FinishReason.TRUNCATED_CONTEXT,
}
_STATUS = {
    "completed": FinishReason.COMPLETE,
    "requires_action": FinishReason.TOOL_CALL,
    "failed": FinishReason.ERROR,
    "cancelled": FinishReason.CANCELLED,
    "expired": FinishReason.ERROR,
}
_TERMINAL = frozenset(
    {"completed", "requires_action", "incomplete", "failed", "cancelled", "expired"}
)


def _route(method: str, url: SplitResult) -> str | None:
    """The operation a path and method make, or ``None`` when not an Assistants route."""
    segs = [s for s in url.path.split("/") if s]
    if "threads" not in segs:
        return "assistant" if "assistants" in segs else None
    rest = segs[segs.index("threads") + 1 :]
    post = method.upper() == "POST"
    if rest in ([], ["runs"]):  # create a thread; create a thread and run it
        return ("generate" if rest else "create_thread") if post else None
    tail = rest[1:]  # after the thread's id, a message's or a run's id as ``*``
    key = (*tail[:1], "*", *tail[2:]) if len(tail) > 1 else tuple(tail)
    if key[:3] == ("runs", "*", "steps"):
        return "run_steps"
    if key[:2] == ("messages", "*"):
        return "message"
    return {
        (): "thread",
        ("messages",): "add_message" if post else "messages",
        ("runs",): "generate" if post else "list_runs",
        ("runs", "*"): "retrieve_run",
        ("runs", "*", "submit_tool_outputs"): "generate" if post else None,
        ("runs", "*", "cancel"): "cancel_run",
    }.get(key)


def _ids(url: SplitResult) -> tuple[str | None, str | None]:
    """(thread id, run id) from the path."""
    segs = [s for s in url.path.split("/") if s]
    thread = run = None
    for i, s in enumerate(segs[:-1]):
        if s == "threads" and segs[i + 1] != "runs":
            thread = segs[i + 1]
        if s == "runs":
            run = segs[i + 1]
    return thread, run


def _message(m: Any) -> Message:
    d = as_obj(m)
    return Message(
        role=as_str(d.get("role")) or "user",
        parts=[Part(kind="text", text=text_of(d.get("content")))],
    )


def _tools(tools: Any) -> list[ToolSpec]:
    out = []
    for t in tools if isinstance(tools, list) else []:
        d = as_obj(t)
        fn = as_obj(d.get("function"))
        if d.get("type") == "function":
            out.append(function_spec(fn))
        elif d.get("type"):
            out.append(ToolSpec(name=str(d["type"]), kind="server"))
    return out


def _calls(run: dict[str, Any]) -> list[Part]:
    action = as_obj(as_obj(run.get("required_action")).get("submit_tool_outputs"))
    parts = []
    for tc in action.get("tool_calls") or []:
        fn = as_obj(as_obj(tc).get("function"))
        parts.append(
            Part(
                kind="tool_call",
                tool_call=tool_call_from_string(
                    as_obj(tc).get("id"), fn.get("name"), fn.get("arguments")
                ),
            )
        )
    return parts


def _run_finish(run: dict[str, Any]) -> tuple[FinishReason | None, str | None]:
    status = as_str(run.get("status"))
    if status == "incomplete":
        reason = as_str(as_obj(run.get("incomplete_details")).get("reason"))
        return _INCOMPLETE.get(reason or "", FinishReason.OTHER), f"incomplete:{reason}"
    return _STATUS.get(status or ""), status


def _run_error(run: dict[str, Any]) -> ApiError | None:
    err = as_obj(run.get("last_error"))
    return (
        ApiError(code=as_str(err.get("code")), message=as_str(err.get("message")), raw=err)
        if err
        else None
    )


class _RunStream(StreamParts):
    """A run's SSE events: message deltas grow text parts by content index; the run's terminal
    event gives the finish, the tool calls and the usage."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Part] = []
        self.run: dict[str, Any] = {}

    def payloads(self, framed: Framed) -> Any:
        for name, data in json_events(framed):
            if name == "[DONE]" or (name == "done" and data is None):
                self.done = True
                continue
            self.count()
            yield name, data

    def on(self, name: str | None, d: Any) -> None:
        d = as_obj(d)
        if name == "thread.message.delta":
            for c in as_obj(d.get("delta")).get("content") or []:
                c = as_obj(c)
                if c.get("type") == "text":
                    self.text(
                        (as_str(d.get("id")), c.get("index", 0)),
                        as_str(as_obj(c.get("text")).get("value")) or "",
                    )
        elif (
            name is not None and name.startswith("thread.run.") and d.get("object") == "thread.run"
        ):
            self.run = d
            self.first("id", as_str(d.get("id")))
            self.first("model", as_str(d.get("model")))
            if d.get("status") in _TERMINAL:
                self.done = True
                self.calls = _calls(d) or self.calls
                self.usage = usage_from(d.get("usage")) or self.usage
                self.error = _run_error(d) or self.error
        elif name == "error":
            self.error = ApiError(
                message=as_str(d.get("message")),
                type=as_str(d.get("type")),
                code=as_str(d.get("code")),
                in_stream=True,
                raw=d,
            )

    def close(self) -> NormalisedResponse:
        resp = self.finish(parts=self.parts() + self.calls)
        cls, raw = _run_finish(self.run)
        resp.finish_reason, resp.finish_reason_raw = cls, raw
        return resp

    def complete(self) -> bool:
        return self.done and self.run.get("status") in _TERMINAL


class OpenAIAssistants(Provider):
    family = "openai_assistants"
    history_keys = ()
    # A client that does not stream polls ``GET …/runs/{run}`` until the run ends; the poll that
    # finds it ``requires_action`` is where the model's tool calls arrive.
    poll_operations = frozenset({"retrieve_run"})
    profile = Profile(
        finishes=_STATUS,
        price_provider="openai",
        otel_provider="openai",
        api_key_env=("OPENAI_API_KEY",),
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        segs = [s for s in url.path.split("/") if s]
        if not ({"threads", "assistants"} & set(segs)) or _route(method, url) is None:
            return 0
        host = (url.hostname or "").lower()
        return 3 if "openai" in host or (isinstance(body, dict) and "assistant_id" in body) else 1

    def operation(self, method: str, url: SplitResult) -> str:
        return _route(method, url) or "unknown"

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        thread, run = _ids(url)
        messages = [_message(m) for m in as_obj(b.get("thread")).get("messages") or []]
        messages += [_message(m) for m in b.get("additional_messages") or []]
        outputs = [as_obj(o) for o in b.get("tool_outputs") or []]
        if outputs:
            messages.append(
                Message(
                    role="tool",
                    parts=[
                        Part(
                            kind="tool_result",
                            tool_result=ToolResult(
                                call_id=as_str(o.get("tool_call_id")),
                                content=text_of(o.get("output")),
                            ),
                        )
                        for o in outputs
                    ],
                )
            )
        system = [
            Part(kind="text", text=t)
            for t in (b.get("instructions"), b.get("additional_instructions"))
            if isinstance(t, str) and t
        ]
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")),
            stream=b.get("stream") is True,
            system=system,
            messages=messages,
            tools=_tools(b.get("tools")),
            tool_choice=b.get("tool_choice"),
            params={
                k: v
                for k, v in b.items()
                if k
                not in (
                    "model",
                    "stream",
                    "thread",
                    "additional_messages",
                    "tool_outputs",
                    "instructions",
                    "additional_instructions",
                    "tools",
                    "tool_choice",
                )
            },
            # The server keeps the history and the assistant's tools: the run a tool output
            # answers, the thread a run continues, or the assistant a new thread runs.
            previous_response_id=run
            if outputs or run
            else (thread or as_str(b.get("assistant_id"))),
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if b.get("object") != "thread.run":
            return self.error_answer(b) if "error" in b else NormalisedResponse(complete=True)
        cls, raw = _run_finish(b)
        done = b.get("status") in _TERMINAL
        resp = NormalisedResponse(
            id=as_str(b.get("id")),
            model=as_str(b.get("model")),
            parts=_calls(b),
            finish_reason_raw=raw,
            finish_reason=cls,
            usage=usage_from(b.get("usage")),
            error=_run_error(b),
            complete=True if done else None,
            provider_details={
                "thread_id": b.get("thread_id"),
                "assistant_id": b.get("assistant_id"),
            },
        )
        if not done:
            resp.notes.append(
                f"run {raw}: not finished; its output comes with "
                "the thread's messages once it completes"
            )
        elif b.get("status") == "completed":
            resp.notes.append(
                "run completed: the answer's text is in the thread's messages, not in the run"
            )
        return resp

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return _RunStream().read(framed)
