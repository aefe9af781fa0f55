"""A request the API refused for what it holds (a 4xx naming a tool's schema, a parameter, the
model): the client's request, a C suspect shown by the API's own message, with the fork edit that
would test a fix; or, when the client recovered from it (a later turn re-sent the history with
the request changed and was answered: looptap's ``C.retry``), context, not a suspect: the run's
failure does not follow from it (docs/why.md "A refused request").
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .. import bounds
from ..analysis import codes
from ..hints import command_line
from ._intervention import Intervention

__all__ = ["recovered", "refusal", "refusal_or_context"]

#: The statuses of an API refusing a request for what it holds (a bad request, an unknown model, a
#: request too large, an unprocessable one): the same request is refused again, whenever sent.
_REFUSING = (400, 404, 413, 422)
#: The error types that say the request is at fault (docs/WIRE.md A.6, C.6).
_REQUEST_ERRORS = ("invalid_request_error", "not_found_error", "INVALID_ARGUMENT", "NOT_FOUND")


def refusal(f: Any, ex: Any) -> Intervention | None:
    """The C suspect of an ``A.http_error`` whose request the API refused for what it holds: a 4xx
    of :data:`_REFUSING` whose error says the request is at fault (its type, a ``param``, a path
    its message starts with); ``None`` for any other finding. What the error names (a tool's
    schema, the model, the token cap, another parameter) says the fix a fork can test."""
    status = f.details.get("status") if f.code == codes.HTTP_ERROR else None
    if status not in _REFUSING or f.conversation is None or f.turn is None:
        return None
    message = str(f.details.get("error") or "")
    param = _param(ex)
    kind = str(f.details.get("type") or "")
    if not (param or kind in _REQUEST_ERRORS or re.match(r"[\w.\[\]]+: ", message)):
        return None
    named = param or message
    tool = _refused_tool(named, message, ex)
    if tool is not None:
        fix, what = ["--edit", f"tool_schema[{tool}]=@SCHEMA.json"], f"the schema of tool {tool!r}"
    elif re.match(r"models?\b", named) or "model" in str(f.details.get("error_code") or ""):
        fix, what = ["--model", "MODEL"], "the model"
    elif re.search(r"max_(?:completion_|output_)?tokens", named):
        fix, what = ["--edit", "max_tokens=N"], "the token cap"
    else:
        fix, what = [], f"{param!r}" if param else "the request"
    test = (
        f"test a fix with a fork at it: {command_line(fix)}"
        if fix
        else "no fork edit changes it: fix the client and record again"
    )
    return Intervention(
        "C",
        f.conversation,
        f.turn,
        f"the request the API refused (HTTP {status}, at {what})",
        "c-refused",
        f.code,
        missing=f"the API refuses this request whenever it is sent, so no re-run flips it; {test}",
        tag=str(status),
        # one line (Gemini's message has one per field it refused), never a quoted "\n"
        evidence=" ".join(message[:2000].split())[:500] or None,
        fix=fix,
    )


def recovered(
    a: Any, by_turn: dict[tuple[str, int], Any], where: tuple[str, int], run: Any
) -> str | None:
    """How the client recovered from the failed turn ``where``: a later turn of its conversation
    re-sent the same history with the request changed (looptap's ``C.retry`` with ``changed``) and
    was answered (a chain of changed retries followed to its first answer), or, where the changed
    request was threaded as another conversation (a tool taken out makes another agent's
    request), a later request of the run carried the same messages and was answered
    (:func:`_resent`); ``None`` when neither."""
    return _retried(a, by_turn, where) or _resent(run, a, by_turn, where)


def _resent(
    run: Any, a: Any, by_turn: dict[tuple[str, int], Any], where: tuple[str, int]
) -> str | None:
    """The first later turn (any conversation; the next 64 looked at) whose request carried the
    refused request's messages, the same, and was answered."""
    failed = by_turn.get(where)
    if failed is None:
        return None
    found = run.by_seq(failed.seq)
    req = found[1].request if found is not None else None
    if req is None or not req.messages:
        return None
    later = sorted((t for t in a.turns.values() if t.seq > failed.seq), key=lambda t: t.seq)
    for t in later[:64]:
        status = t.a.status if t.a is not None else None
        other = run.by_seq(t.seq) if status is not None and status < 400 else None
        if (
            other is not None
            and other[1].request is not None
            and other[1].request.messages == req.messages
        ):
            return f"{t.conversation} turn {t.index} sent the same messages again and was answered"
    return None


def _retried(a: Any, by_turn: dict[tuple[str, int], Any], where: tuple[str, int]) -> str | None:
    turn = where
    for _ in range(64):  # a chain of retries, bounded
        retry = next(
            (
                f
                for f in a.findings
                if f.code == codes.RETRY
                and f.details.get("changed")
                and (f.conversation, f.related_turn) == turn
                and f.turn is not None
            ),
            None,
        )
        if retry is None:
            return None
        turn = (retry.conversation, retry.turn)
        t = by_turn.get(turn)
        status = t.a.status if t is not None else None
        if status is not None and status < 400:
            changed = ", ".join(str(c) for c in retry.details["changed"])
            return f"turn {retry.turn} re-sent it with {changed} changed and was answered"
    return None


def refusal_or_context(
    f: Any, ex: Any, a: Any, by_turn: dict[tuple[str, int], Any], run: Any
) -> Intervention | None:
    """:func:`refusal` of ``f``; when the client recovered from it (:func:`recovered`), context,
    not a suspect: the run's failure does not follow from it (``c-recovered``: listed, not run,
    never the verdict)."""
    i = refusal(f, ex)
    how = recovered(a, by_turn, (f.conversation, f.turn), run) if i is not None else None
    if i is None or how is None:
        return i
    i.kind, i.fix = "c-recovered", []
    i.missing = (
        f"context, not a cause: the client recovered ({how}), so the run's failure does not "
        "follow from this refusal"
    )
    return i


def _param(ex: Any) -> str:
    """The ``param`` an OpenAI-style error names (``tools[0].function.parameters``), else ``""``."""
    try:
        doc = bounds.loads(ex.response_body) if ex is not None else None
    except (orjson.JSONDecodeError, ValueError):
        return ""
    err = doc.get("error") if isinstance(doc, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    return param if isinstance(param, str) else ""


def _refused_tool(named: str, message: str, ex: Any) -> str | None:
    """The tool whose schema the error names: by name (``Invalid schema for function 'x'``), or
    by its index in the request's tools (``tools[2]…``, ``tools.2.custom.input_schema``,
    ``function_declarations[2]``)."""
    m = re.search(r"(?:function|tool) '([^']{1,128})'", message)
    if m:
        return m.group(1)
    m = re.search(r"(?:function_declarations|functionDeclarations)\[(\d{1,4})", named) or re.search(
        r"tools(?:\[|\.)(\d{1,4})", named
    )
    if m is None or ex is None:
        return None
    try:
        doc = bounds.loads(ex.request_body)
    except (orjson.JSONDecodeError, ValueError):
        return None
    tools = doc.get("tools") if isinstance(doc, dict) else None
    if not isinstance(tools, list):
        return None
    # Gemini: the declarations of every tools item, in order
    decls = [d for t in tools if isinstance(t, dict) for d in t.get("functionDeclarations") or []]
    pool = decls if "declarations" in m.group(0) else tools
    i = int(m.group(1))
    item = pool[i] if i < len(pool) and isinstance(pool[i], dict) else {}
    name = item.get("name") or (item.get("function") or {}).get("name")
    return str(name)[:128] if name else None
