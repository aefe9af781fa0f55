"""A fork's cursor in the replay server: up to it, requests are answered from the recording (fail
closed, as replay always is); from it on, they go to a live upstream and are recorded there.

The cursor as written and where it falls are :mod:`cassettes.replay.forking.placement`'s (plain
data and functions; ``looptap run --from`` places it once and hands the placement on in its plan).
:class:`Cursor` is the router the replay server receives (:class:`~cassettes.replay.serving.plan.
Router`): plain data (the plan, where the cursor stands in this replay, what the report says) and
the four calls the server makes.

Which requests go live: one the matcher placed at or past the cursor; and, once a conversation
has gone live, a request that matches nothing whose closest recorded turn is in that conversation
or past the cursor (the live model answered differently, so the agent's next requests differ from
the recording: they are the continuation). A change past the cursor may reach another
conversation (a sub-agent's answer returned to its parent as a tool result, a handoff, a group
chat): a request of another conversation that matches nothing, whose closest recorded turn is that
conversation's next one and was recorded after the first round trip that went live, is where the
change reached it; that conversation goes live from there (its earlier turns stay served), and the
report says so (:attr:`Cursor.reached`). A request that misses *before* the cursor is a divergence
of the client and fails closed with the replay diff, as in replay; with ``…:diverge`` it goes live
instead, and its conversation from there (:attr:`Cursor.diverged`: a fixed agent whose change
shows before the recorded cause's turn is still run, and judged).

Over a WebSocket the cursor places a session's turns the same way; the session's first turn at
or past it makes the whole session live from there (:mod:`cassettes.replay.serving`), each
turn sent through :meth:`Cursor.outgoing` as an HTTP request is.

A request past the cursor that continues an answer replayed from the recording (the Responses
API's ``previous_response_id``), which the live upstream never gave, is sent self-contained
(:class:`cassettes.replay.live.chains.Chains`); one continuing an answer the live upstream gave
goes as it is.

``--model`` rewrites the model of every request sent live (the top-level ``model`` field, and the
path's model where the adapter says the path names one: a deployment, or a
``/models/NAME:``); a request with neither is sent as it is and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...hints import count
from ...matching import Matcher, Miss, Recorded, request_key
from ...net import Request
from ...untrusted import clean_line
from ..live.chains import Chains
from ..live.continuation import Continuation
from ..live.edits import Edit, client_rewrote, edit_lines, edited_headers
from ..live.model import model_of, with_model
from ..live.rewrite import apply_edits
from ..serving.plan import Answer, Forward, Missed, Play, Refused
from .limit import Limit, refusal
from .placement import CursorSpec, listed_items, place, selects

__all__ = ["Cursor", "live_router"]

#: The most requests :attr:`Cursor.lived` keeps (past them, the lived run is not known: ``None``).
LIVED_MAX = 100_000


@dataclass
class Cursor:
    """Routes the requests of one replay at or past ``spec`` to ``live`` (method, target, body →
    base URL of the live upstream for that API, or ``None``); see the module docstring."""

    spec: CursorSpec
    live: Callable[[str, str, bytes], str | None]
    model: str | None = None
    #: What-if edits made in every request sent live (:mod:`cassettes.replay.live.edits`).
    edits: list[Edit] = field(default_factory=list)
    #: The fork's per-run key when the live upstreams are its looptap recorders: an edited request
    #: carries its marks to them, sealed with it
    #: (:func:`cassettes.replay.live.edits.edited_headers`), so the branch keeps the client's
    #: request. ``None``: no marks are sent.
    edit_key: str | None = field(default=None, repr=False)
    #: How the prefix is matched:
    #: ``strict``, or ``tolerant`` (a request that differs from its recorded turn only in tool
    #: results is answered with that turn, in position, and the difference kept).
    prefix: str = "strict"
    #: The first recorded round trip at the cursor, per conversation: conversation → seq.
    starts: dict[str | None, int] = field(default_factory=dict)
    #: Per edit (its label): the value its item had where the recording first sends it.
    recorded_values: dict[str, Any] = field(default_factory=dict)
    #: The most requests sent live (``--max-requests``; :mod:`cassettes.replay.forking.limit`).
    limit: Limit = field(default_factory=Limit)
    #: Placed in the run already (a fork's plan: :mod:`cassettes.replay.forking.plan` gives
    #: :attr:`starts` and :attr:`recorded_values`): :meth:`bind` only holds the matcher.
    placed: bool = False
    # -- where the cursor stands in this replay
    #: Conversations that went live (their requests past the cursor are the continuation).
    forked: set[str | None] = field(default_factory=set)
    #: Conversations a change past the cursor reached (their first request that differed went live):
    #: conversation → the seq of the recorded turn there.
    reached: dict[str | None, int] = field(default_factory=dict)
    #: ``…:diverge``: conversations whose request before the cursor differed from the recording
    #: and went live from there: conversation → the seq of the closest recorded turn.
    diverged: dict[str | None, int] = field(default_factory=dict)
    # -- what the report says
    #: Requests sent live, and what the report says about them (a model that could not be set …).
    sent: int = 0
    notes: list[str] = field(default_factory=list)
    #: Per conversation, each request sent live: (the recording's turn it is, the model it asked
    #: for).
    live_turns: dict[str | None, list[tuple[int | None, str | None]]] = field(default_factory=dict)
    #: Recorded round trips answered in position in the tolerant prefix (their positions).
    in_position: list[int] = field(default_factory=list)
    #: Continuation requests sent (the ``continue`` edit), and the answers joined for the client.
    continued: int = 0
    #: Each request answered, in order: the recorded seq served, or ``None`` (sent live): the run
    #: as the agent lived it (``looptap why`` judges it). At most :data:`LIVED_MAX`.
    lived: list[int | None] = field(default_factory=list)
    # -- held while serving
    #: Conversations whose requests past the cursor stopped matching the recording (``…:hold``
    #: serves none of their later turns).
    _left: set[str | None] = field(default_factory=set)
    _matcher: Matcher | None = None
    _by_seq: dict[int, Recorded] = field(default_factory=dict)
    #: The answers requests sent live may continue (the recorded ones, the live upstream's).
    _chains: Chains = field(default_factory=lambda: Chains(tuple))
    #: Per conversation: requests sent live so far (a live request's turn: the cursor's + this).
    _live_count: dict[str | None, int] = field(default_factory=dict)
    #: The marks of the request :meth:`outgoing` made last (a continuation of its answer keeps
    #: them).
    _last_marks: list[dict[str, Any]] = field(default_factory=list)

    def bind(self, matcher: Matcher, run: str = "the run") -> None:
        """Place the cursor in ``matcher``'s recording (labelled by turn), unless it is placed
        already; raises :class:`CursorError` when it selects no recorded round trip, saying what
        ``run`` (the recording, as the user named it) has
        (:func:`cassettes.replay.forking.placement.place`)."""
        matcher.label()
        self._matcher = matcher
        self._by_seq = {r.seq: r for r in matcher.recorded}
        self._chains = Chains(lambda: (r.exchange for r in matcher.recorded))
        if not self.placed:
            self.starts, self.recorded_values = place(
                self.spec, matcher.recorded, run, self.model, self.edits
            )

    def at(self, r: Recorded) -> bool:
        """Whether the recorded round trip ``r`` is at or past the cursor (``divergence``: in a
        conversation that diverged, from the turn where it did)."""
        if (
            self.spec.divergence
            or r.conversation in self.reached
            or r.conversation in self.diverged
        ):
            start = (
                self._by_seq.get(self.starts.get(r.conversation, -1))
                if r.conversation in self.forked
                or r.conversation in self.reached
                or r.conversation in self.diverged
                else None
            )
            return start is not None and r.index >= start.index
        return selects(self.spec, r, self._by_seq) and not self._held(r)

    def _held(self, r: Recorded) -> bool:
        """``…:hold``: whether ``r``, a recorded turn a request matched, is served although past
        the cursor: a later turn of a conversation that has not left the recording (every
        request of it since the cursor's turn matched)."""
        if not self.spec.hold or r.conversation in self._left:
            return False
        start = self._by_seq.get(self.starts.get(r.conversation, -1))
        return start is not None and r.index > start.index

    def route(self, req: Request, found: Recorded | Miss, websocket: bool) -> Answer | None:
        """The answer for a request past the cursor (sent live), or ``None`` (replayed)."""
        answer = self._route(req, found, websocket)
        served = answer.rec if isinstance(answer, Play) else found if answer is None else None
        if isinstance(answer, Forward) or isinstance(served, Recorded):
            self.note_lived(served.seq if isinstance(served, Recorded) else None)
        return answer

    def note_lived(self, seq: int | None) -> None:
        """One request answered (:attr:`lived`): ``seq`` served, or ``None``: sent live (a live
        WebSocket session's later turns, which reach no :meth:`route`, are noted by
        :meth:`cassettes.replay.serving._websocket.WebSocketReplay.live_turn`)."""
        if len(self.lived) < LIVED_MAX:
            self.lived.append(seq)

    def lived_order(self) -> list[int | None] | None:
        """:attr:`lived`, or ``None`` when it reached its cap (the rest is not known)."""
        return None if len(self.lived) >= LIVED_MAX else list(self.lived)

    def _route(self, req: Request, found: Recorded | Miss, websocket: bool) -> Answer | None:
        if isinstance(found, Recorded):
            if not self.at(found):
                return None
            rec, miss = found, None
        else:
            closest = found.closest
            if closest is None or not (self.at(closest) or closest.conversation in self.forked):
                if closest is not None and self._reaches(closest):
                    self._reach(closest, found)  # live from here: the change reached it
                else:
                    served = self._before_cursor(req, found)
                    if served is not None:
                        return served
                    if closest is None or not (self.spec.divergence or self.spec.diverge):
                        return None  # before the cursor: the client diverged (fails closed)
                    if self.spec.diverge:  # …:diverge: live from here, said in the report
                        self._diverge(closest, found)
                    # @divergence: live from here
                    self.starts.setdefault(closest.conversation, closest.seq)
            rec, miss = closest, found
            self._left.add(rec.conversation)  # ``…:hold``: live from its first difference on
        base = self.live(req.method, req.target, req.body)
        if base is None:
            why = (
                "past the fork's cursor, but no live upstream serves this API (give one with "
                "--upstream NAME=URL)"
            )
            return Missed(miss if miss is not None else Miss(req.method, req.target, why, rec))
        if not self.admit(f"{req.method} {req.target}"):
            return self.refused(req, rec)
        self.forked.add(rec.conversation)
        turn = self._turn_of(rec, miss is None)
        if websocket:  # the session goes live: its relay sends each turn through outgoing()
            self._went_live(rec.conversation, turn, req.method, req.target, req.body)
            return Forward(base, req.body, "live past the cursor", miss=miss, rec=rec)
        client = req.body
        made, chained = self._chains.sent(req.method, req.target, req.body)
        if made is not None:
            req = Request(req.method, req.target, req.headers, made)
        target, body, notes, headers = self.outgoing(req, turn)
        self._went_live(rec.conversation, turn, req.method, target, body)
        return Forward(
            base,
            body,
            "live past the cursor",
            miss=miss,
            rec=rec,
            notes=chained + notes,
            target=target,
            headers=headers,
            cont=self._continuation(req.method, target, body, client),
        )

    def admit(self, what: str) -> bool:
        """Whether one more request (``what``) may be sent live: counted when it may (the fork's
        limit, :mod:`cassettes.replay.forking.limit`)."""
        return self.limit.take(what)

    def refused(self, req: Request, rec: Recorded | None) -> Refused:
        """The answer to a request past the limit: not sent, its API's error."""
        return refusal(self.limit, req, rec)

    def _reaches(self, closest: Recorded) -> bool:
        """Whether a request that matched nothing, whose closest recorded turn is ``closest`` (in
        a conversation not live), is where a change past the cursor reached another conversation:
        a conversation has gone live, and ``closest`` is its own conversation's next turn, recorded
        after the first round trip that went live (in the recording, the change could reach
        nothing before it). ``@divergence`` places every conversation by itself."""
        if self.spec.divergence or self._matcher is None or closest.plays:
            return False
        first = min((self.starts[c] for c in self.forked if c in self.starts), default=None)
        return first is not None and closest.seq > first and self._matcher.is_next(closest)

    def _reach(self, closest: Recorded, miss: Miss) -> None:
        """``closest``'s conversation goes live from it (:meth:`_reaches`), said in the report."""
        self.reached[closest.conversation] = closest.seq
        self.starts.setdefault(closest.conversation, closest.seq)
        if self._matcher is not None:  # answered live: neither played nor unplayed
            closest.plays += 1
            self._matcher.went_live(closest)
        what = "; ".join(f"{v.layer}: {v.message}" for v in miss.note().verdicts[:2]) or "differs"
        cause = ", ".join(
            f"{c or '-'} turn {self._by_seq[s].turn}"
            for c, s in sorted(self.starts.items(), key=lambda kv: kv[1])
            if c in self.forked and s in self._by_seq
        )
        self.notes.append(
            clean_line(
                f"{closest.conversation or '-'} went live from turn {closest.turn}: the change "
                f"past the cursor ({cause}) reached it ({what[:300]})"
            )
        )

    def _diverge(self, closest: Recorded, miss: Miss) -> None:
        """``…:diverge``: a request before the cursor that differs from the recording (closest to
        ``closest``) goes live, and its conversation from there (at or before the cursor's own
        turn), said in the report."""
        conv = closest.conversation
        self.diverged[conv] = closest.seq
        start = self._by_seq.get(self.starts.get(conv, -1))
        if start is None or (start.index or 0) > (closest.index or 0):
            self.starts[conv] = closest.seq
        if self._matcher is not None:  # answered live: neither played nor unplayed
            closest.plays += 1
            self._matcher.went_live(closest)
        what = "; ".join(f"{v.layer}: {v.message}" for v in miss.note().verdicts[:2]) or "differs"
        self.notes.append(
            clean_line(
                f"{conv or '-'} went live from turn {closest.turn}, before the cursor: the "
                f"client's request differs from the recording there ({what[:300]})"
            )
        )

    def _continuation(
        self, method: str, target: str, body: bytes, client: bytes
    ) -> Continuation | None:
        """How the answer to a request sent live is continued when the cap cuts it (the
        ``continue`` edit, :mod:`cassettes.replay.live.continuation`), or ``None``."""
        edit = next((e for e in self.edits if e.kind == "continue"), None)
        adapter = request_key(method, target, [], body).adapter if edit is not None else None
        if edit is None or adapter is None:
            return None
        return Continuation(
            edit,
            self.spec.text,
            self.edit_key,
            adapter,
            client,
            list(self._last_marks),
            on_continued=self._count_continued,
        )

    def _count_continued(self, requests: int) -> None:
        self.continued += requests

    def _before_cursor(self, req: Request, miss: Miss) -> Answer | None:
        """A request before the cursor that matched no recorded turn: in the tolerant prefix, the
        recorded turn in position when the request differs from it only in tool results
        (:meth:`Matcher.in_position`: played, the differences kept as tolerated); else ``None``."""
        if self.prefix != "tolerant" or self._matcher is None:
            return None
        rec = self._matcher.in_position(
            req.method,
            req.target,
            req.headers,
            req.body,
            lambda r: not self.at(r) and r.conversation not in self.forked,
            miss,
        )
        if rec is None:
            return None
        self.in_position.append(rec.index)
        self._chains.served(req.method, req.target, req.body, rec.exchange)
        return Play(
            rec,
            note=f"fork: served in position ({rec.label}): the request differs from it only in "
            "tool results (--prefix tolerant)",
        )

    def relayed(
        self,
        method: str,
        target: str,
        sent: bytes,
        status: int,
        chunks: list[tuple[float | None, bytes]],
        headers: list[tuple[str, str]],
    ) -> None:
        """An answer the live upstream gave (``headers``, ``chunks`` as relayed) to a request sent
        live (``sent``: its body as sent): a later request continuing it goes as it is."""
        if status < 400 and sent:
            self._chains.relayed(method, target, sent, chunks, headers)

    def outgoing(
        self, req: Request, turn: int | None = None
    ) -> tuple[str, bytes, list[str], list[tuple[str, str]] | None]:
        """A request sent live, as it is sent: the model asked for (``--model``), the edits made
        (``--edit``; its marks carried to a looptap recorder,
        :func:`cassettes.replay.live.edits.edited_headers`); its target, body, notes, headers
        (``None``: the request's own). Counted in :attr:`sent`. ``turn``: the recording's turn it is
        (for the notes)."""
        self.sent += 1
        target, body, note = with_model(req.method, req.target, req.body, self.model)
        notes = [f"fork: {note}"] if note is not None else []
        if note is not None and note.startswith("could not"):
            self._note(note)
        headers = None
        self._last_marks = []
        if self.edits:
            body, marks = apply_edits(req.method, req.target, body, self.edits, self.spec.text)
            self._last_marks = marks
            if marks:
                notes.append(f"fork: edited {', '.join(dict.fromkeys(m['edit'] for m in marks))}")
                rewrote = client_rewrote(self.edits, self.recorded_values, marks, turn)
                for said in rewrote:
                    self._note(said)
                notes += rewrote
                headers = edited_headers(req.headers, marks, self.edit_key)
        return target, body, notes, headers

    def _note(self, note: str) -> None:
        """A note for the report, once."""
        if note not in self.notes:
            self.notes.append(note)

    def _went_live(
        self, conversation: str | None, turn: int | None, method: str, target: str, body: bytes
    ) -> None:
        """Keep which turn of which conversation went live, on which model (for the report)."""
        model = self.model if self.model is not None else model_of(method, target, body)
        self.live_turns.setdefault(conversation, []).append((turn, model))

    def _turn_of(self, rec: Recorded, matched: bool) -> int | None:
        """The recording's turn a request sent live is: the recorded turn it matched, or (a
        continuation the recording does not have) its conversation's turn at the cursor plus the
        requests sent live in it before."""
        k = self._live_count.get(rec.conversation, 0)
        self._live_count[rec.conversation] = k + 1
        if matched:
            return rec.turn
        start = self._by_seq.get(self.starts.get(rec.conversation, -1))
        return start.turn + k if start is not None and start.turn is not None else None

    def unapplied(self) -> list[Edit]:
        """Edits whose target no request sent live carried (an error: the fork exits 1). A
        ``continue`` that continued nothing is none: no answer sent live was cut (the report says
        so)."""
        return [e for e in self.edits if not e.applied and e.kind != "continue"]

    def report_lines(self) -> list[str]:
        starts = sorted(self.starts.items(), key=lambda kv: kv[1])
        where = listed_items([f"{c or '-'} from seq {s}" for c, s in starts], 10)
        went = listed_items(sorted(str(c) for c in self.forked), 10)
        out = [
            f"fork at {self.spec.text}: {count(self.sent, 'request')} sent live; went live: "
            f"{went or 'none'} (cursor: {where})"
        ]
        for conv, sent in sorted(self.live_turns.items(), key=lambda kv: str(kv[0]))[:10]:
            models = ", ".join(dict.fromkeys(clean_line(m or "?")[:80] for _, m in sent))
            turns = listed_items([str(t) if t is not None else "?" for t, _ in sent], 20)
            out.append(
                f"  live in {conv or '-'}: turns {turns} on "
                f"{models}{' (--model)' if self.model is not None else ''}"
            )
        out += [f"  {n}" for n in [*self.notes, self.limit.line()] if n]
        if self.in_position:
            out.append(
                f"  {count(len(self.in_position), 'recorded round trip')} served in position in "
                "the tolerant prefix: the request differed from it only in tool results (listed "
                "as tolerated)"
            )
        if self._chains.made:
            out.append(
                f"  {count(self._chains.made, 'request')} sent self-contained: each continued an "
                "answer replayed from the recording, which the live upstream never gave"
            )
        return out + edit_lines(self.edits, self.continued)


def live_router(bases: dict[str, str]) -> Callable[[str, str, bytes], str | None]:
    """Requests → the base URL serving their API: ``bases`` maps a listener name (as
    ``--upstream`` names them: the providers' reverse upstreams) to a URL; an API family belongs to
    the name it starts with (the providers' naming convention), so no provider is named here."""

    def live(method: str, target: str, body: bytes) -> str | None:
        key = request_key(method, target, [], body)
        fam = key.adapter.family if key.adapter is not None else None
        for name, base in bases.items():
            if fam is not None and fam.startswith(name):
                return base
        return None

    return live
