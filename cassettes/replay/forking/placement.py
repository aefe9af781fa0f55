"""Where a fork's cursor falls in a recording: the cursor as written, and its placement (the first
recorded round trip at it, per conversation), checked against the model and edits the fork would
send. Plain data and functions: ``looptap run --from`` places the cursor once, in its own process
(:mod:`cassettes.replay.forking.plan` hands the placement on); ``looptap replay --cursor`` places
it in the replay server (:class:`cassettes.replay.forking.cursor.Cursor`).

A cursor is written as a fault's selector is (docs/faults.md): ``turn=2`` (every conversation, from
its turn 2), ``conversation=c2:turn=1`` (conversation c2 only, from its turn 1; the others stay
fully replayed), ``conversation=c2`` (all of c2), ``seq=7`` (the recorded round trip #7's
conversation, from that round trip), ``divergence`` (each conversation from its first request that
differs, placed as the replay runs). Turns and conversations are the recording's (``looptap show``
names them).

A model of another API family, and an edit whose target no recorded request at or past the cursor
carries, are refused when the cursor is placed, before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ... import providers
from ...errors import CassetteError
from ...hints import count
from ...untrusted import clean_line
from ..live.chains import as_sent_live
from ..live.edits import Edit
from ..live.rewrite import carried

if TYPE_CHECKING:
    from ...matching import Recorded
    from ...providers import Provider

__all__ = ["CursorError", "CursorSpec", "listed_items", "parse_cursor", "place", "selects"]

_INT = re.compile(r"[0-9]{1,9}")
_CONV = re.compile(r"[A-Za-z0-9_.-]{1,64}")


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
    #: ``divergence``: no turn given; each conversation goes live at its first request that
    #: differs from the recording beyond what the prefix mode tolerates.
    divergence: bool = False
    #: ``…:hold``: only the turn at the cursor goes live; a later turn of its conversation whose
    #: request still matches the recording (the live answer changed nothing it sends) is served as
    #: recorded, and from its first request that differs the conversation is live.
    hold: bool = False
    #: ``…:diverge``: before the cursor, the recording is served while the client's requests
    #: match it; a request that differs goes live, and its conversation with it from there
    #: (instead of failing closed): what ``looptap why --confirm`` runs a fixed agent with.
    diverge: bool = False

    def as_json(self) -> dict[str, Any]:
        """The fields, ``divergence``, ``hold`` and ``diverge`` only when set."""
        return {
            k: v for k, v in asdict(self).items() if k not in ("divergence", "hold", "diverge") or v
        }


def parse_cursor(text: str) -> CursorSpec:
    """Read ``turn=N``, ``seq=N``, ``conversation=ID``, ``conversation=ID:turn=N``,
    ``divergence``; any of the first four but ``conversation=ID`` may end ``:hold``; any of the
    first four may end ``:diverge`` (before the cursor, live from a request that differs)."""
    raw = text.strip()
    if raw == "divergence":
        return CursorSpec(raw, divergence=True)
    turn = seq = None
    conversation = None
    parts = raw.split(":")
    diverge = len(parts) > 1 and parts[-1].strip() == "diverge"
    if diverge:
        parts = parts[:-1]
    hold = parts[-1].strip() == "hold"
    if hold and all("turn=" not in p and "seq=" not in p for p in parts):
        raise CursorError(
            f"cursor {raw[:60]!r}: hold keeps the turns after the cursor's one: give a turn= or "
            "seq= before it"
        )
    for part in parts[:-1] if hold else parts:
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not value:
            raise CursorError(
                "a cursor is turn=N, seq=N, conversation=ID, conversation=ID:turn=N or "
                f"divergence, not {raw[:60]!r}"
            )
        if name in ("turn", "seq"):
            if not _INT.fullmatch(value):
                raise CursorError(
                    f"cursor {raw[:60]!r}: {name}= wants a number in digits, not {value[:20]!r}"
                )
            if name == "turn":
                turn = int(value)
            else:
                seq = int(value)
        elif name == "conversation":
            if not _CONV.fullmatch(value):
                raise CursorError(
                    f"cursor {raw[:60]!r}: conversation= wants an id such as c2, not {value[:20]!r}"
                )
            conversation = value
        else:
            raise CursorError(
                f"cursor {raw[:60]!r}: unknown selector {name[:20]!r} (turn=, seq=, conversation=)"
            )
    if seq is not None and (turn is not None or conversation is not None):
        raise CursorError(
            f"cursor {raw[:60]!r}: seq= names a round trip on "
            "its own (no turn= or conversation= with it)"
        )
    if diverge and hold:
        raise CursorError(f"cursor {raw[:60]!r}: give hold or diverge, not both")
    return CursorSpec(raw, turn, conversation, seq, hold=hold, diverge=diverge)


def selects(spec: CursorSpec, r: Recorded, by_seq: Mapping[int, Recorded]) -> bool:
    """Whether ``spec`` (a cursor at a turn, a conversation or a seq; not ``divergence``) selects
    the recorded round trip ``r``: it is at or past the cursor. ``by_seq``: the recording's round
    trips by seq."""
    if spec.seq is not None:
        start = by_seq.get(spec.seq)
        if start is None:
            return False
        same = r.conversation == start.conversation if start.conversation is not None else True
        return same and r.index >= start.index
    if spec.conversation is not None and r.conversation != spec.conversation:
        return False
    if spec.turn is None:
        return True
    return r.turn is not None and r.turn >= spec.turn


def place(
    spec: CursorSpec,
    recorded: Sequence[Recorded],
    run: str = "the run",
    model: str | None = None,
    edits: Iterable[Edit] = (),
) -> tuple[dict[str | None, int], dict[str, Any]]:
    """The cursor placed in ``recorded`` (labelled by turn): the first recorded round trip at it
    per conversation (conversation → seq; none at ``divergence``: placed as each conversation
    diverges), and per edit (its label) the value its target had where the recording first sends
    it. Raises :class:`CursorError` when it selects no recorded round trip, saying what ``run``
    (the recording, as the user named it) has; for a ``model`` of another API family; for an edit
    whose target no recorded request at or past the cursor carries."""
    by_seq = {r.seq: r for r in recorded}
    edits = list(edits)
    name = clean_line(run)[:200]
    if spec.seq is not None and spec.seq not in by_seq:
        seqs = f"seqs {min(by_seq)}–{max(by_seq)}" if by_seq else "no round trips"
        raise CursorError(f"cursor {spec.text!r}: {name} has no round trip seq {spec.seq} ({seqs})")
    if spec.divergence:  # any turn may go live: the model checked against every recorded one
        if edits:
            raise CursorError(
                "--edit needs a cursor at a turn (an edit applies from it on); @divergence has "
                "none until the client diverges"
            )
        _check_model(model, recorded)
        return {}, {}
    past = [r for r in recorded if selects(spec, r, by_seq)]
    starts: dict[str | None, int] = {}
    for r in past:
        starts.setdefault(r.conversation, r.seq)
    if not starts:
        raise CursorError(
            f"cursor {spec.text!r} selects no recorded turn: {name} "
            f"{_turns_held(recorded, spec.conversation)}"
        )
    _check_model(model, past)  # refused before anything is sent
    return starts, _recorded_values(spec, recorded, by_seq, starts, past, edits)


def _check_model(model: str | None, recorded: Iterable[Recorded]) -> None:
    """Raises :class:`CursorError` for a ``model`` of another API family than ``recorded``'s."""
    if model is None:
        return
    why = _other_family(
        model, {id(a): a for r in recorded if (a := r.key.adapter) is not None}.values()
    )
    if why is not None:
        raise CursorError(why)


def _recorded_values(
    spec: CursorSpec,
    recorded: Sequence[Recorded],
    by_seq: Mapping[int, Recorded],
    starts: dict[str | None, int],
    past: list[Recorded],
    edits: list[Edit],
) -> dict[str, Any]:
    """Per edit (its label), the value its target had where the recording first sends it at or
    past the cursor (``past``), as the fork sends it: a chained request self-contained. Raises
    :class:`CursorError` for an edit no recorded request there carries, before anything is sent."""
    if not edits:
        return {}
    past = sorted(past, key=lambda r: r.seq)
    sent = as_sent_live(
        (r.exchange for r in recorded), lambda seq: by_seq[seq].exchange, starts.values()
    )
    values: dict[str, Any] = {}
    for e in edits:
        if e.kind == "tool_answer":  # a tool's answer the replay server serves: no request's
            if not _tool_call_at(by_seq, e.key):
                raise CursorError(f"--edit {e.label}: the run has no tool HTTP call at seq {e.key}")
            continue
        for r in past:
            ex = sent(r.seq)
            found = carried(ex.method, ex.url, ex.request_body, e)
            if found:
                values[e.label] = found[0]
                break
        else:
            raise CursorError(
                f"--edit {e.label}: no recorded request at or past the cursor {spec.text} "
                "carries it (a call id, user message index or system prompt the recording "
                "has; a tool result is first sent in the turn after its call): nothing was sent"
            )
    return values


def _tool_call_at(by_seq: Mapping[int, Recorded], key: str | None) -> bool:
    """Whether the run's round trip at seq ``key`` is a tool's HTTP call."""
    rec = by_seq.get(int(key)) if key and key.isdigit() else None
    return rec is not None and rec.exchange.tool


def _turns_held(recorded: Iterable[Recorded], conversation: str | None = None) -> str:
    """What a recording holds, for a cursor that selected nothing in it: ``has 3 turns (0–2) in
    conversations c1, c2`` (conversations with the same turns said together), or, for a
    ``conversation`` it does not have, the conversations it has."""
    turns: dict[str, set[int]] = {}
    for r in recorded:
        if r.conversation is not None and r.turn is not None:
            turns.setdefault(r.conversation, set()).add(r.turn)
    if conversation is not None and conversation not in turns:
        listed = listed_items(sorted(turns), 20)
        return f"has no conversation {conversation} (its conversations: {listed or 'none'})"
    if conversation is not None:
        turns = {conversation: turns[conversation]}
    if not turns:
        return "has no turns"
    alike: dict[tuple[int, int, int], list[str]] = {}
    for conv, held in turns.items():
        alike.setdefault((len(held), min(held), max(held)), []).append(conv)
    said = []
    for (n, lo, hi), convs in list(alike.items())[:5]:
        names = listed_items(convs, 10)
        span = f"{lo}–{hi}" if lo != hi else f"{lo}"
        said.append(
            f"{count(n, 'turn')} ({span}) in conversation{'s' if len(convs) > 1 else ''} {names}"
        )
    more = f"; … {len(alike) - 5} more" if len(alike) > 5 else ""
    return "has " + "; ".join(said) + more


def listed_items(items: Sequence[str], limit: int) -> str:
    """The first ``limit`` of ``items``, joined by commas, then how many more there are."""
    return ", ".join(items[:limit]) + (
        f", … {len(items) - limit} more" if len(items) > limit else ""
    )


def _model_vendor(model: str) -> str | None:
    """The vendor whose model ``model`` is, as the price library knows it (``None``: unknown)."""
    try:
        # the price table loads only for a fork given --model (replay starts without the analysis)
        from ...analysis import get_snapshot

        provider, _ = get_snapshot().find_provider_model(model, None, None, None)
    except (LookupError, ValueError, ImportError):
        return None
    return str(provider.id)


def _other_family(model: str, adapters: Iterable[Provider]) -> str | None:
    """Why ``--model MODEL`` cannot be sent with requests of these APIs (a model of a vendor whose
    own API is another family: one vendor's model on another vendor's API), or ``None``. A model the
    price library does not know, or an API that names no vendor, passes."""
    vendor = _model_vendor(model)
    homes = {
        a.profile.model_vendor
        for f in providers.FAMILIES
        if (a := providers.by_family(f)) is not None and a.profile.model_vendor
    }
    if vendor is None or vendor not in homes:
        return None
    for a in adapters:
        if a.profile.model_vendor is not None and a.profile.model_vendor != vendor:
            return (
                f"--model {model}: {vendor}'s model, and the run's requests at the cursor are "
                f"{a.family} ({a.profile.model_vendor}'s API, another API family): a fork sends "
                "the agent's own requests, so give a model that API serves"
            )
    return None
