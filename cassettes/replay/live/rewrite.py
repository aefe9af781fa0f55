"""An edit made in a request sent live (:mod:`cassettes.replay.live.edits` reads it): each item of
the body its target names rewritten, and marked. The rewriting is structural and API-neutral: a tool
result is the JSON object that carries the call's id next to its content (``content``, ``output`` or
``response``); the system prompt and a user message are the strings the API's adapter reads them
from, replaced where they occur.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

import orjson

from ... import bounds, providers
from ...jsonpath import walk
from ...models import user_messages
from ...wire import mark
from .edits import Edit

__all__ = ["apply_edits", "carried", "history_items", "restored_history"]

#: The fields that hold a tool's schema, in the tool itself, its ``function`` or one of its function
#: declarations: field names of the wire (docs/WIRE.md), whichever API the request is in.
_SCHEMA_KEYS = ("parameters", "input_schema", "parametersJsonSchema", "parameters_json_schema")
#: Depth of the JSON walk (:func:`cassettes.jsonpath.walk`: a request nested deeper is not edited
#: below it).
_DEPTH = 64
_CONTENT_KEYS = ("content", "output", "response")


def apply_edits(
    method: str, target: str, body: bytes, edits: list[Edit], selector: str | None = None
) -> tuple[bytes, list[dict[str, Any]]]:
    """``body`` with every edit that applies to it made; a mark per item rewritten
    (:func:`cassettes.wire.mark`: the edit, ``selector`` unless the edit names its own, the
    item's JSON path and the client's value there)."""
    if not edits or not body:
        return body, []
    doc = bounds.loads_or_none(body)
    marks: list[dict[str, Any]] = []
    for e in edits:
        hits = _hits(method, target, doc, e)
        if hits:
            e.applied += 1
            marks += [
                mark(e.label, e.selector or selector, path, before) for path, before, _after in hits
            ]
    return (orjson.dumps(doc), marks) if marks else (body, [])


def _hits(method: str, target: str, doc: Any, e: Edit) -> list[tuple[list[str | int], Any, Any]]:
    """Make ``e`` in ``doc`` (changed in place); each item rewritten as (path, before, after)."""
    hits: list[tuple[list[str | int], Any, Any]] = []
    if e.kind == "tool_result":
        _tool_result(doc, e.key or "", e.value, hits)
    elif e.kind == "restore_result":
        _restore_result(doc, e.key or "", e.value, hits)
    elif e.kind == "restore_answer":
        _restore_answer(doc, e.key or "", orjson.loads(e.value), hits)
    elif e.kind == "restore_history":
        _restore_history(method, target, doc, orjson.loads(e.value), hits)
    elif e.kind == "max_tokens":
        _cap(doc, int(e.value), hits)
    elif e.kind == "tool_schema":
        _schema(doc, e.key or "", orjson.loads(e.value), hits)
    elif e.kind in ("continue", "tool_answer"):
        pass  # no item of the request: the answer is continued, a tool's answer served
    else:
        old = _adapter_text(method, target, doc, e)
        if old:
            _replace_string(doc, old, e.value, hits)
    return hits


def _carries_id(node: dict[str, Any], call_id: str) -> bool:
    return any(isinstance(v, str) and v == call_id and "id" in k.lower() for k, v in node.items())


def _is_call(node: dict[str, Any]) -> bool:
    return any(k in node for k in ("arguments", "input", "args", "function"))


def _ids_of(node: dict[str, Any]) -> list[str]:
    return [v for k, v in node.items() if isinstance(v, str) and "id" in k.lower()]


def _restore_result(
    doc: Any, call_id: str, value: str, hits: list[tuple[list[str | int], Any, Any]]
) -> None:
    """Put back the result of ``call_id`` where the client sent none: in the list that holds the
    results of the same answer's other calls, a copy of the first of them with the call's id and
    ``value`` as its content, right after the last. Structural, as :func:`_tool_result` is (a
    result is the object carrying a call's id beside its content): the copy has the API's own
    shape. A request that already carries the result, or carries no sibling result to copy (all
    the answer's results dropped), is left as it is. The mark's path is the list and its
    ``before`` the list the client sent, so the client's request is that list put back."""
    for node, path, _, _ in walk(doc, _DEPTH):
        if not isinstance(node, list):
            continue
        calls = _calls_with(node, call_id)
        if calls is None:
            continue
        results = [i for i, x in enumerate(node) if _result_of(x, calls)]
        if not results or any(_result_of(x, {call_id}) for x in node):
            continue
        last = node[results[-1]]
        if _direct_result(last, calls):
            into, at, where = node, results[-1] + 1, list(path)
        else:
            # a message holding the result blocks (a user turn of them): the block goes in
            # beside them
            into = last["content"]
            at, where = (
                max(i for i, y in enumerate(into) if _result_of(y, calls)) + 1,
                [*path, results[-1], "content"],
            )
        before = list(into)
        made = _with_id(into[at - 1], calls, call_id, value)
        into.insert(at, made)
        hits.append((where, before, made))
        return


def _restore_answer(
    doc: Any, call_id: str, items: list[Any], hits: list[tuple[list[str | int], Any, Any]]
) -> None:
    """Put back the answer that made ``call_id`` where the client dropped it and sent its result
    anyway: ``items`` (the answer as history items, in the API's own shape) inserted right before
    the first result of the call, in the first list (in document order: the history) that holds
    the result but not the call. A request that carries the call, or no result of it, is left as
    it is. The mark's path is the list and its ``before`` the list the client sent."""
    for node, path, _, _ in walk(doc, _DEPTH):
        if not isinstance(node, list):
            continue
        at = next((i for i, x in enumerate(node) if _result_of(x, {call_id})), None)
        if at is None:
            continue
        if _calls_with(node, call_id) is None:
            before = list(node)
            node[at:at] = copy.deepcopy(items)
            hits.append((list(path), before, items))
        return


#: The roles of the history items a client keeps at the head whatever it trims (the system
#: prompt, in the APIs that send it as an item).
_HEAD_ROLES = ("system", "developer")


def _canon(item: Any) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def history_items(method: str, target: str, doc: Any) -> tuple[str, list[Any]] | None:
    """The key and list of the request's resent history (``messages``, ``input``, ``contents``:
    the API's adapter says which), or ``None``."""
    adapter = (
        providers.detect(method.upper(), urlsplit(target), doc) if isinstance(doc, dict) else None
    )
    key = adapter.history_key(doc) if adapter is not None else None
    return (key, doc[key]) if key is not None else None


def restored_history(items: list[Any], earlier: list[Any]) -> tuple[list[Any], int]:
    """``items`` (a request's history, as sent) with every item of ``earlier`` (a history the
    conversation sent before, in order) that it does not hold put back where it stood: before the
    first item of ``items`` that comes after it in ``earlier``, or after the last one that comes
    before it; when ``items`` holds none of ``earlier`` (the whole of it trimmed or summarised),
    all of it right after the head (the system prompt's items). Items are compared as JSON, keys
    sorted. Returns the new list and how many items were put back."""
    have = {_canon(x) for x in items}
    where = {_canon(x): i for i, x in enumerate(earlier)}
    out: list[Any] = []
    at, put = 0, 0  # the next item of ``earlier`` not yet placed
    matched = False
    for x in items:
        k = where.get(_canon(x))
        if k is not None and k >= at:
            missing = [y for y in earlier[at:k] if _canon(y) not in have]
            out += copy.deepcopy(missing)
            put += len(missing)
            at, matched = k + 1, True
        out.append(x)
    rest = [y for y in earlier[at:] if _canon(y) not in have]
    if not rest:
        return out, put
    if matched:
        # after the last item of ``earlier`` that was kept
        last = max(i for i, x in enumerate(out) if where.get(_canon(x)) is not None)
        out[last + 1 : last + 1] = copy.deepcopy(rest)
    else:
        head = 0
        while (
            head < len(out) and isinstance(out[head], dict) and out[head].get("role") in _HEAD_ROLES
        ):
            head += 1
        out[head:head] = copy.deepcopy(rest)
    return out, put + len(rest)


def _restore_history(
    method: str,
    target: str,
    doc: Any,
    earlier: list[Any],
    hits: list[tuple[list[str | int], Any, Any]],
) -> None:
    """Put back the history the client trimmed or summarised away: every item of ``earlier``
    (the conversation's history before the trim, as it sent it) that the request does not hold,
    where it stood (:func:`restored_history`); what the client appended since stays. A request
    that holds all of it is left as it is. The mark's path is the history and its ``before``
    the list the client sent."""
    found = history_items(method, target, doc)
    if found is None or not isinstance(found[1], list):
        return
    key, items = found
    new, put = restored_history(items, earlier)
    if put:
        before = list(items)
        doc[key] = new
        hits.append(
            ([key], before, [x for x in new if _canon(x) not in {_canon(y) for y in before}])
        )


def _calls_with(items: list[Any], call_id: str) -> set[str] | None:
    """The ids of the calls made beside ``call_id`` (the answer that made it: the calls in the
    same object, or, where each call is an item of its own, the call items of ``items``), when
    ``items`` holds that answer or its calls; else ``None``."""
    for item in items:
        # a call item of its own
        if isinstance(item, dict) and _is_call(item) and _carries_id(item, call_id):
            return _call_ids(items) - {call_id}
        for node, path, _, _ in walk(item, _DEPTH):
            if isinstance(node, dict) and _is_call(node) and _carries_id(node, call_id):
                # the calls of the innermost list around it that holds calls
                group: set[str] = set()
                x = item
                for k in path:
                    group = (_call_ids(x) or group) if isinstance(x, list) else group
                    x = x[k]
                return group - {call_id}
    return None


def _call_ids(items: list[Any]) -> set[str]:
    return {i for y in items if isinstance(y, dict) and _is_call(y) for i in _ids_of(y)}


def _direct_result(x: Any, calls: set[str]) -> bool:
    """Whether ``x`` is itself a result of one of ``calls`` (its id beside its content)."""
    return (
        isinstance(x, dict)
        and not _is_call(x)
        and any(k in x for k in _CONTENT_KEYS)
        and any(i in calls for i in _ids_of(x))
    )


def _result_of(x: Any, calls: set[str]) -> bool:
    """Whether ``x`` is, or holds one level down, a result of one of ``calls``."""
    if _direct_result(x, calls):
        return True
    inner = x.get("content") if isinstance(x, dict) else None
    return isinstance(inner, list) and any(_direct_result(y, calls) for y in inner)


def _with_id(item: dict[str, Any], calls: set[str], call_id: str, value: str) -> dict[str, Any]:
    """A copy of the result ``item`` answering ``call_id`` with ``value``."""
    out: dict[str, Any] = copy.deepcopy(item)
    for k, v in list(out.items()):
        if isinstance(v, str) and v in calls and "id" in k.lower():
            out[k] = call_id
    slot = next(k for k in _CONTENT_KEYS if k in out)
    out[slot] = _as_content(out[slot], value)
    return out


def _cap(doc: Any, tokens: int, hits: list[tuple[list[str | int], Any, Any]]) -> None:
    """Set the request's output token cap to ``tokens`` where it has one (top level, or under
    the generation settings: ``providers.REQUEST_FIELDS``); a request without a cap is left as it
    is (none to lift)."""
    for node, at, k in providers.request_places(doc, "max_tokens"):
        if isinstance(node[k], int) and not isinstance(node[k], bool) and node[k] != tokens:
            hits.append(([*at, k], node[k], tokens))
            node[k] = tokens


def _schema(
    doc: Any, name: str, schema: dict[str, Any], hits: list[tuple[list[str | int], Any, Any]]
) -> None:
    """Set the schema of the tool ``name`` the request offers (its ``tools``, and the function
    declarations in them) to ``schema``; a request that does not offer it is left as it is."""
    tools = doc.get("tools") if isinstance(doc, dict) else None
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        if not isinstance(t, dict):
            continue
        places: list[tuple[Any, list[str | int]]] = [(t, ["tools", i])]
        places += [(t.get("function"), ["tools", i, "function"])]
        for key in ("functionDeclarations", "function_declarations"):
            decls = t.get(key)
            places += [
                (d, ["tools", i, key, j])
                for j, d in enumerate(decls if isinstance(decls, list) else [])
            ]
        for node, path in places:
            if not isinstance(node, dict) or node.get("name") != name:
                continue
            slot = next((k for k in _SCHEMA_KEYS if k in node), None)
            if slot is not None and node[slot] != schema:
                hits.append(([*path, slot], node[slot], schema))
                node[slot] = schema


def _tool_result(
    doc: Any, call_id: str, value: str, hits: list[tuple[list[str | int], Any, Any]]
) -> None:
    """Replace the content of every object carrying ``call_id`` as a result (not as a call)."""
    for node, path, _, _ in walk(doc, _DEPTH):
        if not isinstance(node, dict) or not _carries_id(node, call_id):
            continue
        slot = next((k for k in _CONTENT_KEYS if k in node), None)
        if not _is_call(node) and slot is not None:
            before = node[slot]
            node[slot] = _as_content(before, value)
            hits.append(([*path, slot], before, node[slot]))


def _as_content(old: Any, value: str) -> Any:
    """``value`` in the shape the old content had: a string, a list of text parts, an object."""
    if isinstance(old, list):
        kind = next(
            (p.get("type") for p in old if isinstance(p, dict) and isinstance(p.get("text"), str)),
            "text",
        )
        return [{"type": kind, "text": value}]
    if isinstance(old, dict):
        return {"content": value}
    return value


def _adapter_text(method: str, target: str, doc: Any, e: Edit) -> str | None:
    """The text the edit replaces (the system prompt, the N-th user message), as the API's
    adapter reads the request."""
    url = urlsplit(target)
    adapter = providers.detect(method.upper(), url, doc) if isinstance(doc, dict) else None
    if adapter is None:
        return None
    try:
        req = adapter.parse_request(doc, url)
    except Exception:  # a request the adapter cannot read is not edited
        return None
    parts = req.system
    if e.kind != "system":
        users = user_messages(req.messages)
        i = int(e.key or 0)
        if i >= len(users):
            return None
        parts = req.messages[users[i]].parts
    texts = [p.text for p in parts if p.text]
    return texts[0] if len(texts) == 1 else None


def _replace_string(
    doc: Any, old: str, new: str, hits: list[tuple[list[str | int], Any, Any]]
) -> None:
    """Replace every string value equal to ``old`` (and a text part holding it) with ``new``."""
    for v, path, holder, k in walk(doc, _DEPTH):
        if holder is not None and isinstance(v, str) and v == old:
            holder[k] = new
            hits.append((list(path), old, new))


def carried(method: str, target: str, body: bytes, e: Edit) -> list[Any]:
    """The values of the items of ``body`` that ``e`` would rewrite (none: the request does not
    carry its target), ``e`` and ``body`` left as they are."""
    doc = bounds.loads_or_none(body)
    if e.kind == "continue":  # a request whose API can be asked to go on with a cut answer
        return [int(e.value)] if continuable(method, target, doc) else []
    return [before for _, before, _ in _hits(method, target, doc, e)]


def continuable(method: str, target: str, doc: Any) -> bool:
    """Whether a cut answer to this request can be continued: its API's adapter has a form for
    it (``Provider.replay.continuation_body``)."""
    adapter = (
        providers.detect(method.upper(), urlsplit(target), doc) if isinstance(doc, dict) else None
    )
    return adapter is not None and adapter.replay.continuation_body(doc, "…", "…") is not None
