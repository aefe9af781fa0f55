"""The marks of a what-if edit (docs/fork.md): which item of a request a fork's edit rewrote, and
what the client had sent there.

A fork's replay server rewrites an item in every request it sends live (``--edit``); the request
the upstream received is the record's ``request``, and the record's ``edits`` list says, per
rewritten item::

    {"edit": "tool_result[call_A1]",          # the --edit target
     "selector": "turn=1",                    # where the edit applies from (the fork's cursor)
     "path": ["messages", 3, "content"],      # the item in the request body (JSON path)
     "before": "sunny in Paris"}              # what the client sent there (redacted as the rest)

so the client's own request is the recorded one with each ``before`` put back
(:func:`client_body`). No digest of either value is kept: a plain hash of a short value beside
its redacted copy gives it back to a word list.

The replay server hands the marks to the recorder in the :data:`EDIT_HEADER` request header
(base64url JSON) with :data:`EDIT_AUTH_HEADER`, an HMAC-SHA256 of that value under the fork's
per-run key (:func:`new_key`: made by ``looptap run --from``, given to its recorder in process and
to its replay server in the environment variable :data:`KEY_ENV`, never to the agent). The recorder
accepts marks only when :func:`authentic` says so, and removes both headers from every request
before it goes upstream; a client sending the header itself (through a plain ``looptap run``,
which has no key) gets a note on its round trip, never marks.

Everything here reads untrusted text (a header, a cassette): bounded and checked, never trusted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Any, TypeGuard

import orjson

from .. import bounds
from ..jsonpath import MAX_SEGMENTS, format_path, put
from ..lazy import pattern

__all__ = [
    "EDIT_AUTH_HEADER",
    "EDIT_HEADER",
    "KEY_ENV",
    "MAX_HEADER",
    "TARGET",
    "authentic",
    "checked",
    "client_body",
    "from_header",
    "item_of",
    "mark",
    "new_key",
    "seal",
    "target_of",
    "to_header",
]

#: The request header carrying the marks from a fork's replay server to the recorder (stripped
#: there).
EDIT_HEADER = "x-looptap-edit"
#: The request header carrying :func:`seal` of :data:`EDIT_HEADER`'s value (stripped there too).
EDIT_AUTH_HEADER = "x-looptap-edit-auth"
#: The environment variable that gives a fork's replay server its per-run key (read and removed
#: at its start; never in the agent's environment nor on a command line).
KEY_ENV = "LOOPTAP_EDIT_KEY"
#: The longest header value sent; past it the ``before`` values stay behind.
MAX_HEADER = 1 << 20
#: Marks per request.
MAX_MARKS = 256
#: What an edit targets (docs/fork.md), as ``--edit`` is written and a mark's label says it: a
#: kind keyed by an id or a name (groups 1, 2), ``user[N]`` (3, 4) or a kind without a key (5).
TARGET = (
    r"(?:(restore_result|restore_answer|restore_history|tool_result|tool_schema|tool_answer)"
    r"\[([^\]\r\n]{1,200})\]"
    r"|(user)\[([0-9]{1,6})\]|(system|max_tokens|continue))"
)
_LABEL = pattern(TARGET)
_KEY_LEN = 200


def new_key() -> str:
    """A fork's per-run key for its edit marks (32 random bytes, URL-safe text)."""
    return secrets.token_urlsafe(32)


def seal(value: str, key: str) -> str:
    """The :data:`EDIT_AUTH_HEADER` value for an :data:`EDIT_HEADER` value: its HMAC-SHA256
    under ``key``."""
    return hmac.new(
        key.encode("utf-8"), value.encode("utf-8", "surrogateescape"), hashlib.sha256
    ).hexdigest()


def authentic(value: str, auth: str, key: str | None) -> bool:
    """Whether ``auth`` is :func:`seal` of ``value`` under ``key`` (never without a key)."""
    if not key or not auth or len(value) > MAX_HEADER + 16:
        return False
    return hmac.compare_digest(
        seal(value, key).encode("ascii"), auth.strip().encode("utf-8", "surrogateescape")
    )


def mark(label: str, selector: str | None, path: list[str | int], before: Any) -> dict[str, Any]:
    """The mark of one rewritten item: ``before`` is the client's value there (the edit's value
    is in the request itself; no digest of either is kept)."""
    return {"edit": label, "selector": selector, "path": list(path), "before": before}


def target_of(label: Any) -> tuple[str, str | None] | None:
    """An edit's label (``tool_result[call_A1]``, ``user[2]``, ``system``) as its kind and key;
    ``None`` when it is not one (:data:`TARGET`)."""
    m = _LABEL.fullmatch(label) if isinstance(label, str) else None
    if m is None:
        return None
    return m.group(1) or m.group(3) or m.group(5), m.group(2) or m.group(4)


def item_of(m: dict[str, Any]) -> str:
    """The edited item, as a reader names it: ``messages[3]`` (the path's first two steps)."""
    return format_path((m.get("path") or [])[:2], "?")


def to_header(marks: list[dict[str, Any]]) -> str:
    """The marks as the :data:`EDIT_HEADER` value; over :data:`MAX_HEADER`, without their
    ``before`` values (``before_omitted``: the client's text is then not kept)."""
    value = base64.urlsafe_b64encode(orjson.dumps(marks)).decode("ascii")
    if len(value) <= MAX_HEADER:
        return value
    light = [
        {k: v for k, v in m.items() if k != "before"} | {"before_omitted": True} for m in marks
    ]
    return base64.urlsafe_b64encode(orjson.dumps(light)).decode("ascii")


def from_header(value: str) -> list[dict[str, Any]] | None:
    """The marks an :data:`EDIT_HEADER` value carries, or ``None`` when it is not such a value."""
    if len(value) > MAX_HEADER + 16:
        return None
    try:
        raw = base64.urlsafe_b64decode(value.strip().encode("ascii"))
        doc = bounds.loads(raw)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return checked(doc)


def checked(value: Any) -> list[dict[str, Any]] | None:
    """``value`` when it is a list of marks in the shape above (unknown keys dropped), else
    ``None``. Bounded: at most :data:`MAX_MARKS` marks, paths of
    :data:`~cassettes.jsonpath.MAX_SEGMENTS` steps, values no deeper than the walk bound."""
    if not isinstance(value, list) or not 0 < len(value) <= MAX_MARKS:
        return None
    out: list[dict[str, Any]] = []
    for m in value:
        one = _checked_mark(m)
        if one is None:
            return None
        out.append(one)
    return out


def _checked_mark(m: Any) -> dict[str, Any] | None:
    """One mark in the shape above (unknown keys dropped, the digests older files kept
    included), or ``None``: a label of the known form, a short selector or none, a bounded path,
    and the client's value (or word that it was omitted, also when it is too deep to keep)."""
    if not isinstance(m, dict):
        return None
    label, sel, path = m.get("edit"), m.get("selector"), m.get("path")
    if target_of(label) is None:
        return None
    if sel is not None and not (isinstance(sel, str) and len(sel) <= _KEY_LEN):
        return None
    if not _checked_path(path):
        return None
    one: dict[str, Any] = {"edit": label, "selector": sel, "path": list(path)}
    if "before" in m and not bounds.too_deep(m["before"]):
        one["before"] = m["before"]
    elif m.get("before_omitted") is True or "before" in m:
        one["before_omitted"] = True
    else:
        return None
    return one


def _checked_path(path: Any) -> TypeGuard[list[Any]]:
    """A path of 1 to ``MAX_SEGMENTS`` steps, each a short key or a non-negative 31-bit index."""
    if not isinstance(path, list) or not 0 < len(path) <= MAX_SEGMENTS:
        return False
    return all(
        (isinstance(p, str) and len(p) <= _KEY_LEN)
        or (isinstance(p, int) and not isinstance(p, bool) and 0 <= p < 1 << 31)
        for p in path
    )


def client_body(doc: Any, marks: list[dict[str, Any]]) -> Any:
    """The request body the client sent: ``doc`` (what the upstream received) with each mark's
    ``before`` put back where it was. ``doc`` is not changed (the containers along each path are
    copied). ``None`` when a mark's value was not carried or its path is not in ``doc``."""
    out = doc
    for m in marks:
        out = put(out, m["path"], m["before"]) if "before" in m else None
        if out is None:
            return None
    return out
