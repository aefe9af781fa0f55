"""A2A (Agent2Agent) over JSON-RPC: one agent asking another, beside its model calls.

Shapes from the official SDK (``a2a-python``: ``compat/v0_3/types.py`` for the 0.3 protocol,
``server/routes/jsonrpc_dispatcher.py`` for 1.0). Like MCP it is JSON-RPC 2.0 on any host, so it
is recognised by its method names, which MCP never uses:

* 0.3: ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe``, ``tasks/pushNotificationConfig/{set,get,list,delete}``,
  ``agent/getAuthenticatedExtendedCard``. A message is ``{"kind": "message", "role",
  "parts": [{"kind": "text", "text"} | {"kind": "file"} | {"kind": "data"}], "messageId",
  "contextId"?, "taskId"?}``; the answer a ``Message`` or a ``Task`` (``{"kind": "task", "id",
  "contextId", "status": {"state", "message"?}, "artifacts": [{"parts"}], "history"}``);
  ``message/stream`` answers SSE events whose ``result`` is a ``task``, a ``message``, a
  ``status-update`` (``final: true`` on the last) or an ``artifact-update``.
* 1.0: ``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``ListTasks``, ``CancelTask``,
  ``SubscribeToTask``, ``GetExtendedAgentCard`` and the push-config methods; parts are
  ``{"text"}`` objects and stream results are keyed ``task`` / ``message`` / ``statusUpdate`` /
  ``artifactUpdate``.

An A2A call is not a model call of this agent (no turn, no tokens) and never goes through the MCP
checks: :meth:`A2A.side_call` says what it did — the method, the text sent, the task's state and
the text the other agent answered.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ..wire import Framed
from ._base import Provider
from ._values import as_obj, as_str, json_events

__all__ = ["A2A"]

_METHODS_03 = frozenset(
    {
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "agent/getAuthenticatedExtendedCard",
    }
)
_METHODS_10 = frozenset(
    {
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "GetExtendedAgentCard",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)


def is_a2a_request(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and body.get("jsonrpc") == "2.0"
        and body.get("method") in (_METHODS_03 | _METHODS_10)
    )


def _parts_text(parts: Any) -> str:
    out = []
    for p in parts if isinstance(parts, list) else []:
        d = as_obj(p)
        if isinstance(d.get("text"), str):
            out.append(d["text"])
        elif d:
            out.append(f"[{d.get('kind') or next(iter(d), 'part')}]")
    return "".join(out)


class _Reply:
    """What the other agent answered, gathered over one JSON body or the stream's results."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.state: str | None = None
        self.task_id: str | None = None
        self.error: dict[str, Any] | None = None
        self.final = False

    def take(self, result: Any) -> None:
        r = as_obj(result)
        for key in ("task", "message", "statusUpdate", "artifactUpdate"):  # 1.0 stream results
            if isinstance(r.get(key), dict):
                r = {
                    **r[key],
                    "kind": {
                        "statusUpdate": "status-update",
                        "artifactUpdate": "artifact-update",
                    }.get(key, key),
                }
        kind = r.get("kind")
        if kind == "message" or ("parts" in r and "role" in r):
            self.texts.append(_parts_text(r.get("parts")))
        if kind == "task" or "status" in r:
            self.task_id = as_str(r.get("id") or r.get("taskId")) or self.task_id
            status = as_obj(r.get("status"))
            self.state = as_str(status.get("state")) or self.state
            if isinstance(status.get("message"), dict):
                self.texts.append(_parts_text(status["message"].get("parts")))
            for art in r.get("artifacts") or []:
                self.texts.append(_parts_text(as_obj(art).get("parts")))
        if kind == "artifact-update":
            self.texts.append(_parts_text(as_obj(r.get("artifact")).get("parts")))
        if r.get("final") is True:
            self.final = True


class A2A(Provider):
    family = "a2a"

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        return 4 if method.upper() == "POST" and is_a2a_request(body) else 0  # over MCP's 3

    def operation(self, method: str, url: SplitResult) -> str:
        return "a2a"

    def body_operation(self, operation: str, body: Any) -> str:
        return f"a2a {body['method']}" if is_a2a_request(body) else operation

    def side_call(self, body: Any, framed: Framed) -> dict[str, Any] | None:
        """``protocol: a2a``, the ``method``, the ``sent`` text, and from the answer the task's
        ``state`` and ``task_id``, the ``reply`` text, or the JSON-RPC ``error``."""
        if not is_a2a_request(body):
            return None
        params = as_obj(body.get("params"))
        out: dict[str, Any] = {"protocol": "a2a", "method": body["method"], "id": body.get("id")}
        msg = as_obj(params.get("message"))
        if msg:
            out["sent"] = _parts_text(msg.get("parts"))[:2000]
        if params.get("id") is not None:
            out["task_id"] = as_str(params.get("id"))
        rid = body.get("id")
        replies = (
            [framed.value] if framed.kind == "json" else [obj for _, obj in json_events(framed)]
        )
        reply = _Reply()
        answered = False
        for obj in replies:
            if not (isinstance(obj, dict) and obj.get("jsonrpc") == "2.0" and obj.get("id") == rid):
                continue
            answered = True
            if isinstance(obj.get("error"), dict):
                out["error"] = {
                    "code": obj["error"].get("code"),
                    "message": as_str(obj["error"].get("message")),
                }
            else:
                reply.take(obj.get("result"))
        out["answered"] = answered
        if reply.state is not None:
            out["state"] = reply.state
        if reply.task_id is not None:
            out["task_id"] = reply.task_id
        text = "".join(t for t in reply.texts if t)
        if text:
            out["reply"] = text[:2000]
        return out
