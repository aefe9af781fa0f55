"""A fork's edit marks and an imported round trip's provenance, as the views show them: the marks
of ``show --json`` (:func:`edits_json`), an edited item's text (:func:`edit_text`), which messages
of a request the edits rewrote (:func:`edited_messages`, the inspector's Messages pane) and the
provenance mark said in one line (:func:`reconstructed_said`)."""

from __future__ import annotations

from typing import Any

from ..models import user_messages
from ..wire import item_of, target_of

__all__ = [
    "CONTINUED",
    "edit_text",
    "edited_messages",
    "edits_json",
    "reconstructed_said",
]


def edits_json(marks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fork's edit marks of one round trip (cassettes.wire._edit_marks) as ``show --json`` gives
    them: each with the edited ``item`` named (``messages[3]``)."""
    return [
        {"edit": m["edit"], "item": item_of(m), **{k: v for k, v in m.items() if k != "edit"}}
        for m in marks
    ]


def edit_text(value: Any) -> str:
    """An edited item's value as text: a string as it is, text parts joined, else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in value
    ):
        return " ".join(p["text"] for p in value)
    import orjson

    return orjson.dumps(value).decode()


def edited_messages(request: Any, marks: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Which messages of a parsed request (:class:`cassettes.models.NormalisedRequest`) a fork's
    edit marks rewrote, by index (``-1``: the system prompt sent apart from the history). Found by
    what each edit names, API-neutral: the message carrying that call's result, the N-th user
    message, the system message."""
    msgs = request.messages
    out: dict[int, list[dict[str, Any]]] = {}
    for m in marks:
        label = str(m.get("edit", ""))
        idx = _edited_index(msgs, label)
        if idx is not None and all(x.get("edit") != label for x in out.get(idx, [])):
            out.setdefault(idx, []).append(m)
    return out


def _edited_index(msgs: list[Any], label: str) -> int | None:
    """The index of the message an edit ``label`` names (``-1``: the system prompt sent apart),
    ``None`` when no message is that one or the label is of no kind known here."""
    kind, key = target_of(label) or ("", None)
    if kind == "tool_result":
        return _result_index(msgs, key or "")
    if kind == "user":
        users = user_messages(msgs)
        return users[int(key or 0)] if int(key or 0) < len(users) else None
    if kind == "system":
        return next((i for i, msg in enumerate(msgs) if msg.role in ("system", "developer")), -1)
    return None


def _result_index(msgs: list[Any], call_id: str) -> int | None:
    """The message carrying the result of call ``call_id``."""
    return next(
        (
            i
            for i, msg in enumerate(msgs)
            if any(
                p.tool_result is not None and p.tool_result.call_id == call_id for p in msg.parts
            )
        ),
        None,
    )


#: What a ``continue`` mark's ``before`` is: the request is looptap's own (the client sent none of
#: it); the client's history is what looptap extended with the cut answer and a request for the
#: rest.
CONTINUED = "looptap asked for the rest of the cut answer; the client's history"


def reconstructed_said(r: dict[str, Any] | None) -> str | None:
    """An imported round trip's provenance mark (docs/interop.md) said in one line: what came
    from the trace, what looptap inferred (which no finding rests on alone); ``None``: recorded.
    (Its words are the file's: a terminal shows them cleaned.)"""
    if not r:
        return None
    given = ", ".join(map(str, r.get("from") or [])) or "nothing"
    inferred = ", ".join(map(str, r.get("inferred") or [])) or "nothing"
    return (
        f"reconstructed from {r.get('source', 'a trace')}: {given}; inferred by looptap "
        f"(not evidence): {inferred}"
    )
