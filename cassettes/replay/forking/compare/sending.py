"""The planned turns sent to the candidate, ``samples`` times each, one after another, and each
answer read beside the recorded one; a failure of the setup (no connection, credentials or model
refused) stops it there."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from ....matching import request_key
from ....models import ToolSpec
from ....net import (
    Upstream,
    UpstreamError,
    header_problem,
    recorded_request_headers,
    said_name,
)
from ....wire import Exchange, Headers, without_own
from ...live.chains import as_sent_live
from .answer import Sample, offered_tools, sample_of
from .budget import Planned, price_of, rewritten
from .report import Comparison, TurnComparison


def _headers_sent(ex: Exchange, headers: Headers, said_once: set[str]) -> tuple[Headers, list[str]]:
    """The headers a recorded request is sent with: of the recorded ones only what says what the
    body is and which API version it speaks
    (:func:`cassettes.net.recorded_request_headers`: never a recorded
    credential, cookie or connection header), then the user's ``--header`` values. A recorded header
    that cannot be sent (CR, LF, NUL …) is dropped, and a line on stderr names it (once per round
    trip; never its value)."""
    adapter = request_key(ex.method, ex.url, ex.request_headers, ex.request_body).adapter
    said: list[str] = []
    safe: Headers = []
    for k, v in ex.request_headers:
        why = header_problem(k, v)
        if why is None:
            safe.append((k, v))
            continue
        said.append(f"recorded header {said_name(k)} of round trip {ex.seq} not sent: {why}")
        if k.lower() not in said_once:  # once per recorded round trip, not per sample
            said_once.add(k.lower())
            print(f"looptap compare: {said[-1]}", file=sys.stderr)
    names = {k.lower() for k, _ in headers}
    recorded = recorded_request_headers(
        safe, adapter.profile.replay_headers if adapter is not None else ()
    )
    return [(k, v) for k, v in recorded if k.lower() not in names] + [
        (k, v) for k, v in headers if header_problem(k, v) is None
    ], said


async def _send(
    base: str, p: Planned, model: str | None, headers: Headers
) -> tuple[Exchange, float]:
    ex = p.ex
    target, body, _ = rewritten(ex, p.body if p.body is not None else ex.request_body, model)
    sent, said = _headers_sent(ex, headers, p.said)
    t0 = time.monotonic()
    out = Exchange(ex.method, base + target, sent, body)
    out.notes.extend(said)
    try:
        response = await Upstream(base).send(ex.method, target, sent, body)
        out.status = response.status
        out.response_headers, own = without_own(list(response.headers))
        if own:
            out.notes.append(
                "marks: the candidate's response carried looptap's own headers "
                f"({', '.join(own)}); dropped"
            )
        out.response_chunks = [(time.monotonic() - t0, piece) async for piece in response.pieces()]
    except UpstreamError as exc:
        out.transport_error = str(exc)
    return out, time.monotonic() - t0


#: Statuses that say the setup is wrong, not the model: the credentials (401, 403, 407) or the
#: model or path (404). Every further request would fail the same way: the comparison stops.
_FATAL = {
    401: "the credentials were refused",
    403: "the credentials were refused",
    407: "the proxy refused the credentials",
    404: "the model or the path is not served there",
}


def _fatal(ex: Exchange, s: Sample) -> str | None:
    """Why the sample in ``ex`` is the setup's failure, not an answer (``None``: it is an answer or
    an A error). A transport failure before any status (cannot connect, closed or reset before
    answering) is the setup's; one after the status (a stream that broke off) is the candidate's."""
    if ex.transport_error is not None and ex.status is None:
        return (
            f"the upstream {ex.url.split('/', 3)[2] if ex.url.count('/') >= 2 else ex.url} failed: "
            f"{ex.transport_error}"
        )
    if ex.status in _FATAL:
        return f"HTTP {ex.status} from {ex.url}: {_FATAL[ex.status]} ({(s.error or '')[:160]})"
    return None


def _self_contained(run: Any, planned: list[Planned]) -> None:
    """Each planned request that continues a recorded answer by its id (the Responses API's
    ``previous_response_id``: its adapter says how its requests chain) gets :attr:`Planned.body`,
    the request self-contained: the history that answer stood for as its input, the id removed.
    The candidate never gave the recorded answers, so the id alone would be refused
    (``previous_response_not_found``); teacher-forced means the recorded history, sent whole
    (:func:`~cassettes.replay.live.chains.as_sent_live`, as a fork sends its first live turn)."""
    by_seq = {p.seq: p.ex for p in planned}
    sent = as_sent_live(run.exchanges, by_seq.__getitem__, by_seq)
    for p in planned:
        if (made := sent(p.seq)) is not p.ex:
            p.body = made.request_body


def compare_run(
    run: Any,
    planned: list[Planned],
    live: Any,
    model: str | None,
    samples: int,
    headers: Headers,
    skipped: list[str] | None = None,
) -> Comparison:
    """Send every planned turn ``samples`` times (one after another) and compare; ``live`` maps a
    request to the base URL of its API (:func:`cassettes.replay.forking.cursor.live_router`). A
    transport or credential failure stops it there (:attr:`Comparison.stopped`): the turn it
    happened in is left out, nothing more is sent."""
    recorded_tools = {c.name for t in run.analysis.turns.values() for c in t.e.tool_calls}
    recorded_finish = {t.a.finish_reason_raw for t in run.analysis.turns.values()}
    turns: list[TurnComparison] = []
    result = Comparison(
        str(getattr(run, "source", "")), model, samples, turns, skipped=list(skipped or [])
    )

    _self_contained(run, planned)

    async def go() -> None:
        for p in planned:
            base = live(p.ex.method, p.ex.url, p.ex.request_body)
            if base is None:
                result.stopped = (
                    f"seq {p.seq}: no upstream serves this API (give one with --upstream NAME=URL)"
                )
                return
            tools = offered_tools(p.ex)
            tc = TurnComparison(
                p.seq,
                p.conversation,
                p.turn,
                sample_of(p.ex, _recorded_latency(p.ex), tools),
                recorded_cost=p.cost,
                estimate=p.estimate,
                recorded_estimated=p.cost_estimated,
                candidate_estimated=p.price_ref is not None and p.price_ref[0] is None,
            )
            for k in range(samples):
                ex, latency = await _send(base, p, model, headers)
                s = sample_of(ex, latency, tools)
                why = _fatal(ex, s)
                if why is not None:
                    result.stopped = (
                        f"at seq {p.seq}, sample {k + 1} of {samples}: {why}; nothing more sent"
                    )
                    return
                if s.usage is not None and p.price_ref is not None:
                    try:
                        s.cost, _ = price_of(s.usage, p.price_ref, p.price_context)
                    except (LookupError, ValueError, ArithmeticError):
                        s.cost = None
                tc.samples.append(s)
            tc.new_to_client = _new_to_client(tc.samples, tools, recorded_tools, recorded_finish)
            turns.append(tc)

    asyncio.run(go())
    return result


def _new_to_client(
    samples: list[Sample], tools: list[ToolSpec], recorded_tools: set[str], finishes: set[Any]
) -> list[str]:
    """What the samples would hand the recorded client that it never handled in the recording: a
    tool never called in it (or not even offered by the request), a finish reason never seen."""
    offered = {t.name for t in tools}
    return [
        f"the tool {n} (never called in the recording"
        + (
            ")"
            if n in offered
            else "; not even offered by the request: the client has no handler for it)"
        )
        for n in sorted({n for s in samples for n, _ in s.calls} - recorded_tools)
    ] + [
        f"finish reason {f} (never seen in the recording)"
        for f in sorted({s.finish for s in samples if s.finish} - finishes)
    ]


def _recorded_latency(ex: Exchange) -> float:
    """The recorded call's duration: measured, else the last chunk's arrival (0: unknown)."""
    if ex.duration is not None:
        return ex.duration
    offsets = [t for t, _ in ex.response_chunks if t is not None]
    return max(offsets) if offsets else 0.0
