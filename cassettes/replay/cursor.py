"""A fork's cursor in the replay server: up to it, requests are answered from the recording (fail
closed, as replay always is); from it on, they go to a live upstream and are recorded there.

A cursor is written as a fault's selector is (docs/faults.md): ``turn=2`` (every conversation, from
its turn 2), ``conversation=c2:turn=1`` (conversation c2 only, from its turn 1; the others stay
fully replayed), ``conversation=c2`` (all of c2), ``seq=7`` (the recorded round trip #7's
conversation, from that round trip). Turns and conversations are the recording's (``looptap show``
names them).

Which requests go live: one the matcher placed at or past the cursor; and, once a conversation
has gone live, a request that matches nothing whose closest recorded turn is in that conversation
or past the cursor (the live model answered differently, so the agent's next requests differ from
the recording: they are the continuation). A request that misses *before* the cursor is a
divergence of the client and fails closed with the replay diff, as in replay.

Over a WebSocket the cursor places a session's turns the same way; the session's first turn at
or past it makes the whole session live from there (:mod:`cassettes.replay.wsserve`), each turn
sent through :meth:`Cursor.outgoing` as an HTTP request is.

``--model`` rewrites the model of every request sent live (the top-level ``model`` field, or the
``/models/NAME:`` part of the path); a request with neither is sent as it is and the report says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from cassettes import bounds
from cassettes.errors import CassetteError
from cassettes.replay.edits import Edit, apply_edits, edited_headers
from cassettes.replay.http1 import Request
from cassettes.replay.matcher import Matcher, Miss, Recorded
from cassettes.replay.plan import Answer, Forward, Missed

__all__ = ["Cursor", "CursorError", "CursorSpec", "live_router", "parse_cursor", "with_model"]

_INT = re.compile(r"[0-9]{1,9}")
_CONV = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MODEL_IN_PATH = re.compile(r"(/models/)([^/:]+)(:)")


class CursorError(CassetteError, ValueError):
    """A cursor that cannot be read, or that names nothing in the run."""


@dataclass(frozen=True)
class CursorSpec:
    """Where a fork starts: ``turn`` (``None``: from the conversation's start), ``conversation``
    (``None``: every conversation), ``seq`` (a recorded round trip: its conversation, from it)."""

    text: str
    turn: int | None = None
    conversation: str | None = None
    seq: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "turn": self.turn, "conversation": self.conversation, "seq": self.seq}


def parse_cursor(text: str) -> CursorSpec:
    """Read ``turn=N``, ``seq=N``, ``conversation=ID``, ``conversation=ID:turn=N``."""
    raw = text.strip()
    turn = seq = None
    conversation = None
    for part in raw.split(":"):
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not value:
            raise CursorError(f"a cursor is turn=N, seq=N, conversation=ID or conversation=ID:turn=N, not {raw[:60]!r}")
        if name in ("turn", "seq"):
            if not _INT.fullmatch(value):
                raise CursorError(f"cursor {raw[:60]!r}: {name}= wants a number in digits, not {value[:20]!r}")
            if name == "turn":
                turn = int(value)
            else:
                seq = int(value)
        elif name == "conversation":
            if not _CONV.fullmatch(value):
                raise CursorError(f"cursor {raw[:60]!r}: conversation= wants an id such as c2, not {value[:20]!r}")
            conversation = value
        else:
            raise CursorError(f"cursor {raw[:60]!r}: unknown selector {name[:20]!r} (turn=, seq=, conversation=)")
    if seq is not None and (turn is not None or conversation is not None):
        raise CursorError(f"cursor {raw[:60]!r}: seq= names a round trip on its own (no turn= or conversation= with it)")
    return CursorSpec(raw, turn, conversation, seq)


@dataclass
class Cursor:
    """Routes the requests of one replay at or past ``spec`` to ``live`` (method, target, body →
    base URL of the live upstream for that API, or ``None``); see the module docstring."""

    spec: CursorSpec
    live: Callable[[str, str, bytes], str | None]
    model: str | None = None
    #: What-if edits made in every request sent live (:mod:`cassettes.replay.edits`).
    edits: list[Edit] = field(default_factory=list)
    #: The fork's per-run key when the live upstreams are its looptap recorders: an edited request
    #: carries its marks to them, sealed with it (:func:`cassettes.replay.edits.edited_headers`), so
    #: the branch keeps the client's request. ``None``: no marks are sent.
    edit_key: str | None = field(default=None, repr=False)
    #: Conversations that went live (their requests past the cursor are the continuation).
    forked: set[str | None] = field(default_factory=set)
    #: Requests sent live, and what the report says about them (a model that could not be set …).
    sent: int = 0
    notes: list[str] = field(default_factory=list)
    #: The first recorded round trip at the cursor, per conversation: conversation → seq.
    starts: dict[str | None, int] = field(default_factory=dict)
    _by_seq: dict[int, Recorded] = field(default_factory=dict)

    def bind(self, matcher: Matcher) -> None:
        """Place the cursor in ``matcher``'s recording (labelled by turn); raises
        :class:`CursorError` when it selects no recorded round trip."""
        matcher.label()
        self._by_seq = {r.seq: r for r in matcher.recorded}
        if self.spec.seq is not None and self.spec.seq not in self._by_seq:
            raise CursorError(f"cursor {self.spec.text!r}: the run has no round trip seq {self.spec.seq} (0-{len(self._by_seq) - 1})")
        for r in matcher.recorded:
            if self.at(r):
                seq = r.seq
                self.starts.setdefault(r.conversation, seq)
        if not self.starts:
            convs = sorted({str(r.conversation) for r in matcher.recorded if r.conversation is not None})
            raise CursorError(f"cursor {self.spec.text!r} selects no recorded turn (conversations: {', '.join(convs[:20]) or 'none'})")

    def at(self, r: Recorded) -> bool:
        """Whether the recorded round trip ``r`` is at or past the cursor."""
        spec = self.spec
        if spec.seq is not None:
            start = self._by_seq.get(spec.seq)
            if start is None:
                return False
            same = r.conversation == start.conversation if start.conversation is not None else True
            return same and r.index >= start.index
        if spec.conversation is not None and r.conversation != spec.conversation:
            return False
        if spec.turn is None:
            return True
        return r.turn is not None and r.turn >= spec.turn

    def route(self, req: Request, found: Recorded | Miss, websocket: bool) -> Answer | None:
        """The answer for a request past the cursor (sent live), or ``None`` (replayed)."""
        if isinstance(found, Recorded):
            if not self.at(found):
                return None
            rec, miss = found, None
        else:
            closest = found.closest
            if closest is None or not (self.at(closest) or closest.conversation in self.forked):
                return None  # before the cursor: the client diverged (fails closed)
            rec, miss = closest, found
        base = self.live(req.method, req.target, req.body)
        if base is None:
            why = "past the fork's cursor, but no live upstream serves this API (give one with --upstream NAME=URL)"
            return Missed(miss if miss is not None else Miss(req.method, req.target, why, rec))
        self.forked.add(rec.conversation)
        if websocket:  # the session goes live: wsserve sends each turn through outgoing() itself
            return Forward(base, req.body, "live past the cursor", miss=miss, rec=rec)
        target, body, notes, headers = self.outgoing(req)
        return Forward(base, body, "live past the cursor", miss=miss, rec=rec, notes=notes, target=target, headers=headers)

    def outgoing(self, req: Request) -> tuple[str, bytes, list[str], list[tuple[str, str]] | None]:
        """A request sent live, as it is sent: the model asked for (``--model``), the edits made
        (``--edit``; its marks carried to a looptap recorder, :func:`cassettes.replay.edits.edited_headers`); its target, body, notes, headers
        (``None``: the request's own). Counted in :attr:`sent`."""
        self.sent += 1
        target, body, notes = self._rewritten(req)
        headers = None
        if self.edits:
            body, marks = apply_edits(req.method, req.target, body, self.edits, self.spec.text)
            if marks:
                notes.append(f"fork: edited {', '.join(dict.fromkeys(m['edit'] for m in marks))}")
                headers = edited_headers(req.headers, marks, self.edit_key)
        return target, body, notes, headers

    def _rewritten(self, req: Request) -> tuple[str, bytes, list[str]]:
        """The request as sent live: with the model asked for (``--model``), if it has one."""
        target, body, note = with_model(req.method, req.target, req.body, self.model)
        if note is not None and note.startswith("could not") and note not in self.notes:
            self.notes.append(note)
        return target, body, [f"fork: {note}"] if note is not None else []

    def unapplied(self) -> list[Edit]:
        """Edits whose target no request sent live carried (an error: the fork exits 1)."""
        return [e for e in self.edits if not e.applied]

    def report_lines(self) -> list[str]:
        starts = sorted(self.starts.items(), key=lambda kv: kv[1])
        where = ", ".join(f"{c or '-'} from seq {s}" for c, s in starts[:10]) + (f", … {len(starts) - 10} more" if len(starts) > 10 else "")
        live = sorted(str(c) for c in self.forked)
        went = ", ".join(live[:10]) + (f", … {len(live) - 10} more" if len(live) > 10 else "")
        out = [f"fork at {self.spec.text}: {self.sent} requests sent live; went live: {went or 'none'} (cursor: {where})"]
        out += [f"  {n}" for n in self.notes]
        out += [f"  edit {e.label}: made in {e.applied} requests sent live" for e in self.edits if e.applied]
        out += [f"  error: edit {e.label} never applied: no request sent live carries it (check the call id / index, and that the cursor is at or before the turn that first sends it)" for e in self.unapplied()]
        return out


def live_router(bases: dict[str, str]) -> Callable[[str, str, bytes], str | None]:
    """Requests → the base URL serving their API: ``bases`` maps a listener name (as
    ``--upstream`` names them: the providers' reverse upstreams) to a URL; an API family belongs to the name it
    starts with (the providers' naming convention), so no provider is named here."""

    def live(method: str, target: str, body: bytes) -> str | None:
        from cassettes.replay.requestkey import request_key

        key = request_key(method, target, [], body)
        fam = key.adapter.family if key.adapter is not None else None
        for name, base in bases.items():
            if fam is not None and fam.startswith(name):
                return base
        return None

    return live


def with_model(method: str, target: str, body: bytes, model: str | None) -> tuple[str, bytes, str | None]:
    """(target, body) with the model set to ``model`` (the body's top-level ``model``, or the
    ``/models/NAME:`` part of the path), and a note saying what changed or that it could not."""
    if model is None:
        return target, body, None
    try:
        doc = bounds.loads(body) if body else None
    except (orjson.JSONDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("model"), str):
        was = doc["model"]
        doc["model"] = model
        return target, orjson.dumps(doc), f"model {was} → {model}"
    m = _MODEL_IN_PATH.search(target)
    if m is not None:
        return target[: m.start(2)] + model + target[m.end(2) :], body, f"model {m.group(2)} → {model}"
    return target, body, f"could not set the model of {method} {target[:80]} to {model} (no model field in the body or path): sent as it was"
