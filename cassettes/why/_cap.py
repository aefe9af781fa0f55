"""The A repair of an answer the token cap may have cut: the same request re-sent live with the cap
lifted (the ``max_tokens`` edit: :data:`FACTOR` times the recorded cap, at least :data:`MORE`
tokens more; the field is whatever the API calls it). A suspect where the API said the cap cut it
(``A.truncated_length``), and wherever the answer used every output token its request allowed,
whatever the finish reason it gave (``end_turn``, ``stop``, ``tool_calls`` …: ``A.stop_at_cap``
where it is a natural stop): the two numbers the wire carries, equal, say the cap was reached;
the finish reason may not (docs/why.md "Interventions")."""

from __future__ import annotations

from typing import Any

from ..analysis import codes
from ..replay.live.edits import parse_edit
from ..replay.live.rewrite import carried
from ._intervention import Intervention

__all__ = ["at_cap", "cap_lifted"]

#: The lifted cap: this many times the recorded one, and at least this many tokens more.
FACTOR, MORE = 4, 4096


def caps(ex: Any) -> list[int]:
    """The output token caps the request of ``ex`` sets (none: it sets none)."""
    if ex is None:
        return []
    found = carried(ex.method, ex.url, ex.request_body, parse_edit("max_tokens=1"))
    return [c for c in found if isinstance(c, int) and not isinstance(c, bool)]


def cap_lifted(
    where: tuple[str, int], code: str | None, seqs: list[int], ex: Any, why: str = ""
) -> Intervention:
    """The request at ``where`` re-sent live with its cap lifted (``code``: the finding it
    answers; ``why``: what says the cap was reached, when no finding does)."""
    i = Intervention(
        "A", where[0], where[1], "the request re-sent live with the token cap lifted", "a-cap",
        code, seqs=seqs,
    )  # fmt: skip
    found = caps(ex)
    if not found:
        i.missing = "the request sets no token cap to lift (the API's own limit cut the answer)"
        return i
    cap = max(found)
    lifted = max(cap * FACTOR, cap + MORE)
    i.what = f"the request re-sent live with the token cap lifted ({cap} → {lifted}){why}"
    i.edits = [f"max_tokens={lifted}"]
    return i


def at_cap(
    run: Any,
    findings: list[Any],
    later: dict[tuple[str, int], list[int]],
    have: list[Intervention],
    exchange: Any,
) -> list[Intervention]:
    """The A repairs of the answers that used every output token their request allowed (the
    reported output tokens equal the request's cap) and have none in ``have`` yet, in turn
    order; ``exchange(run, turn)``: a turn's round trip."""
    a = run.analysis
    done = {(i.conversation, i.turn) for i in have if i.kind == "a-cap"}
    out = []
    for t in sorted(a.turns.values(), key=lambda t: t.seq):
        where = (t.conversation, t.index)
        used = t.a.usage.output_tokens if t.a.usage is not None else None
        if where in done or used is None or not 200 <= (t.a.status or 0) < 300:
            continue
        ex = exchange(run, t)
        if used <= 0 or max(caps(ex), default=None) != used:
            continue
        said = next((f for f in findings if f.code == codes.STOP_AT_CAP
                     and (f.conversation, f.turn) == where), None)  # fmt: skip
        reason = t.a.finish_reason_raw
        why = "" if said else (
            f": the answer used all {used} output tokens the request allowed"
            + (f" (finish reason {reason!r})" if reason else "")
        )  # fmt: skip
        out.append(cap_lifted(where, said.code if said else None, later.get(where, []), ex, why))
    return out
