"""What-if edits of a fork: an item of the history rewritten in every request sent live past the
cursor, so "what if the tool had returned X" needs no change to the agent (docs/fork.md).

    tool_result[CALL_ID]=@file.txt     the result of that tool call (any API: the item carrying the id)
    system=@prompt.txt                 the system prompt (instructions)
    user[N]=@question.txt              the N-th user message (0: the first)
    restore_result[CALL_ID]=@file.txt  a result the client never sent for that call, put back
                                       beside the results it sent for the same answer's calls
    restore_answer[CALL_ID]=ITEMS      the answer that made that call, which the client dropped
                                       from the history but answered, put back before its
                                       results (ITEMS: a JSON list of history items in the
                                       API's own shape)
    restore_history[TURN]=ITEMS        the history the client trimmed or summarised away since
                                       that turn put back where it stood, what it appended
                                       since kept (ITEMS: a JSON list of the history items the
                                       conversation sent up to that turn, in the API's own
                                       shape)
    tool_schema[NAME]=@schema.json     the JSON schema of the tool NAME offers (its parameters,
                                       whatever the API calls the field)
    tool_answer[SEQ]=STATUS:BODY       what the tool's HTTP call recorded at SEQ answers instead
                                       of its recorded answer, when the replay server serves it
                                       (a status, then the body: 200:{"temp_c": 15})
    max_tokens=N                       the token cap, whatever the API calls the field
    continue=N                         an answer cut at the token cap continued, at most N more
                                       requests per answer, the client handed one answer
                                       (:mod:`cassettes.replay.live.continuation`; no item
                                       rewritten)
    …=text                             the new text inline instead of from a file

A file's text is what an editor saves: its one trailing newline ends the file, not the text, and
is left out (a second one is kept).

``restore_result``, ``restore_answer``, ``restore_history``, ``max_tokens`` and ``continue`` are
repairs ``looptap why`` makes (docs/why.md): a dropped result put back, a dropped answer put back,
a trimmed or compacted history put back, a truncated answer's cap lifted, a truncated answer not
taken as complete.

The client keeps sending the original; the replay server rewrites each request it sends on, and
marks each item it rewrote (:mod:`cassettes.wire._edit_marks`: the item's path, the client's value).
Sent to the fork's own looptap recorder, the marks travel in a request header sealed with the
fork's per-run key, which the recorder checks and removes before the request goes upstream, and the
branch records them beside the request the upstream received, so the client's own request is in the
branch too. How a request is rewritten is :mod:`cassettes.replay.live.rewrite`'s. An edit that
never applies is an error (the report names it, the fork exits 1), not a silent no-op.
"""  # noqa: E501

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ...errors import CassetteError, CassetteIOError
from ...hints import count
from ...storage import read_input
from ...wire import EDIT_AUTH_HEADER, EDIT_HEADER, TARGET, item_of, seal, to_header

__all__ = [
    "MAX_CONTINUE",
    "Edit",
    "EditError",
    "client_rewrote",
    "edit_file",
    "edit_lines",
    "edit_notes",
    "edited_headers",
    "parse_edit",
    "parse_edits",
    "tool_answer_of",
]

#: The target (after an optional ``SELECTOR:``; :data:`cassettes.wire.TARGET`: groups 1 to 5) and
#: whether the value is ``@file`` (group 6).
_SPEC = re.compile(rf"(?:^|(?<=:)){TARGET}=(@?)")
#: The most continuation requests ``continue=N`` may ask for per answer.
MAX_CONTINUE = 8
#: Bytes read from an ``@file``.
_MAX_FILE = 8 << 20


class EditError(CassetteError, ValueError):
    """An ``--edit`` that cannot be read."""


@dataclass
class Edit:
    spec: str
    #: ``tool_result``, ``system``, ``user``, ``restore_result``, ``restore_answer``,
    #: ``restore_history``, ``tool_schema``, ``max_tokens`` or ``continue``.
    kind: str
    #: The call id (tool_result) or the index (user).
    key: str | None
    value: str
    #: The selector written before the target (``turn=1:``), or ``None``.
    selector: str | None = None
    #: Requests this edit changed (``continue``: answers it continued).
    applied: int = 0

    @property
    def label(self) -> str:
        return f"{self.kind}[{self.key}]" if self.key is not None else self.kind


def parse_edit(spec: str, base: Path | None = None) -> Edit:
    """Read ``[SELECTOR:]TARGET=@FILE`` or ``[SELECTOR:]TARGET=TEXT`` (a file relative to ``base``,
    default the working directory)."""
    m = _SPEC.search(spec)
    if m is None:
        raise EditError(
            "--edit wants [SELECTOR:]TARGET=@file or TARGET=text, the target "
            f"tool_result[CALL_ID], system, user[N] or tool_schema[NAME]; not {spec[:80]!r}"
        )
    selector = spec[: m.start()].rstrip(":") or None
    kind, key = m.group(1) or m.group(3) or m.group(5), m.group(2) or m.group(4)
    value = spec[m.end() :]
    if m.group(6):
        path = (base or Path.cwd()) / value
        try:  # a FIFO, a device or a directory is refused, never read (it would block or never end)
            data = read_input(path, "the edit file", _MAX_FILE + 1)
        except CassetteIOError as exc:
            raise EditError(f"--edit {spec[:80]!r}: {exc}") from None
        if len(data) > _MAX_FILE:
            raise EditError(
                f"--edit {spec[:80]!r}: {value[:200]!r} is larger than {_MAX_FILE:,} bytes"
            )
        value = data.decode("utf-8", "replace")
        value = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
    if not _valid(kind, value, key):
        raise EditError(f"--edit {spec[:80]!r}: {_WANTS[kind]}")
    return Edit(
        spec, kind, key, value.strip() if kind in ("max_tokens", "continue") else value, selector
    )


def parse_edits(
    specs: Iterable[str], cursor: str, flag: str = "--edit", base: Path | None = None
) -> list[Edit]:
    """Each of ``specs`` read (:func:`parse_edit`); raises :class:`EditError` for one whose
    selector is not the fork's ``cursor`` (as written): an edit applies from the cursor on."""
    edits = [parse_edit(s, base) for s in specs]
    for e in edits:
        if e.selector is not None and e.selector != cursor:
            raise EditError(
                f"{flag} {e.spec[:60]!r}: an edit applies from the fork's cursor ({cursor}) on; "
                "its selector, if given, is the cursor's"
            )
    return edits


#: What the value of an edit of these kinds must be, as the error says it.
_WANTS = {
    "max_tokens": "max_tokens wants a positive number of tokens",
    "continue": "continue wants the most continuation requests per cut answer, "
    f"1 to {MAX_CONTINUE}",
    "tool_schema": "tool_schema wants a JSON object (a schema)",
    "restore_answer": "restore_answer wants a JSON list of history items (JSON objects)",
    "tool_answer": "tool_answer[SEQ] wants STATUS:BODY (a status 100 to 599, then the body), "
    "SEQ a recorded tool HTTP call's seq",
    "restore_history": "restore_history wants a JSON list of history items (JSON objects)",
}


def _valid(kind: str, value: str, key: str | None = None) -> bool:
    """Whether an edit of ``kind`` can use ``value`` (:data:`_WANTS`)."""
    if kind == "tool_answer":
        return tool_answer_of(value) is not None and bool(key) and (key or "").isdigit()
    if kind in ("tool_schema", "restore_answer", "restore_history"):
        try:
            doc = orjson.loads(value)
        except orjson.JSONDecodeError:
            return False
        if kind == "tool_schema":
            return isinstance(doc, dict)
        return isinstance(doc, list) and bool(doc) and all(isinstance(x, dict) for x in doc)
    most = {"max_tokens": (1 << 31) - 1, "continue": MAX_CONTINUE}.get(kind)
    return most is None or (value.strip().isdigit() and 0 < int(value.strip()) <= most)


def tool_answer_of(value: str) -> tuple[int, bytes] | None:
    """The status and body a ``tool_answer`` edit serves (``200:{"temp_c": 15}``), or ``None``."""
    status, sep, body = value.partition(":")
    if not sep or not status.strip().isdigit() or not 100 <= int(status.strip()) <= 599:
        return None
    return int(status.strip()), body.encode("utf-8")


def edit_file(spec: str) -> Path | None:
    """The file an ``--edit`` reads its text from (``TARGET=@FILE``), not opened; ``None`` for an
    inline text or a spec that cannot be read (:func:`parse_edit` says why)."""
    m = _SPEC.search(spec)
    return Path.cwd() / spec[m.end() :] if m is not None and m.group(6) else None


def edited_headers(
    headers: list[tuple[str, str]], marks: list[dict[str, Any]], key: str | None
) -> list[tuple[str, str]]:
    """The headers of an edited request as sent on: a marker the client sent never passes; to a
    looptap recorder of this fork (``key``: the fork's per-run key) the marks go in
    :data:`cassettes.wire.EDIT_HEADER`, sealed in :data:`~cassettes.wire.EDIT_AUTH_HEADER`;
    the recorder checks the seal and removes both before the request goes upstream. Without a key
    no mark is sent."""
    ours = (EDIT_HEADER, EDIT_AUTH_HEADER)
    kept = [(k, v) for k, v in headers if k.lower() not in ours]
    if not key:
        return kept
    value = to_header(marks)
    return [*kept, (EDIT_HEADER, value), (EDIT_AUTH_HEADER, seal(value, key))]


def edit_notes(marks: list[dict[str, Any]], inside: str | None = None) -> list[str]:
    """A round trip's edit marks as short phrases (``tool_result[call_A1] at messages[3]``); with
    ``inside`` (a JSON path such as ``messages[3].content``), only the marks of the item it is
    in."""
    out: dict[str, None] = {}
    for m in marks:
        item = item_of(m)
        if inside is None or inside == item or inside.startswith((item + ".", item + "[")):
            out[f"{m['edit']} at {item}"] = None
    return list(out)


def edit_lines(edits: list[Edit], continued: int) -> list[str]:
    """What each what-if edit did, for a fork's report
    (:meth:`cassettes.replay.forking.cursor.Cursor.report_lines`; ``continued``: continuation
    requests sent); an edit never applied is an error."""
    out = [
        f"  edit {e.label}: the tool's call answered so {count(e.applied, 'time')}"
        if e.kind == "tool_answer"
        else f"  edit {e.label}: made in {count(e.applied, 'request')} sent live"
        for e in edits
        if e.applied and e.kind != "continue"
    ]
    out += [
        f"  edit continue: {count(e.applied, 'answer')} cut at the token cap continued by "
        f"looptap ({count(continued, 'continuation request')}), each handed to the client "
        "as one answer"
        if e.applied
        else "  edit continue: no answer sent live was cut at the token cap: nothing continued"
        for e in edits
        if e.kind == "continue"
    ]
    out += [
        f"  error: edit {e.label} never applied: the agent never made that tool's HTTP call"
        if e.kind == "tool_answer"
        else f"  error: edit {e.label} never applied: no request sent live carries it (check the "
        "call id / index, and that the cursor is at or before the turn that first sends it)"
        for e in edits
        if not e.applied and e.kind != "continue"
    ]
    return out


def client_rewrote(
    edits: list[Edit],
    recorded_values: dict[str, Any],
    marks: list[dict[str, Any]],
    turn: int | None,
) -> list[str]:
    """Notes for the items an edit replaced where the client had sent something else than it
    recorded there (``recorded_values``: it rewrote the item, a summary for the full result): the
    model got the edit, not the client's rewrite."""
    out: list[str] = []
    # the items the client sends itself: a result put back (never sent), a cap, a schema and
    # the continuation's history are the fork's doing, not an item the client could rewrite
    own = {e.label for e in edits if e.kind in ("tool_result", "system", "user")}
    for m in marks:
        label = str(m.get("edit"))
        if (
            label not in own
            or label not in recorded_values
            or "before" not in m
            or m["before"] == recorded_values[label]
        ):
            continue
        note = (
            f"edit {label}: the client sent a different value at turn "
            f"{turn if turn is not None else '?'} than it recorded (it rewrote the item); the "
            "edit replaced it"
        )
        if note not in out:
            out.append(note)
    return out
