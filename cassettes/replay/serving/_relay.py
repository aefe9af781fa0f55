"""The replay server's live relay: a request sent on to a live upstream (past a fork's cursor, or
a new episode being recorded) and its answer relayed as it arrives, chunk for chunk; under a
fork's ``--edit continue``, an answer cut at the token cap continued and handed over joined.

The fork's router (:class:`~cassettes.replay.forking.cursor.Cursor`) decided to send it
(:class:`~cassettes.replay.serving.plan.Forward`) and hears of each answer relayed, so that a later
request continuing it goes as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ... import net
from ...hints import count
from ...matching import request_key
from ...net import Request
from ...providers import Provider
from ...wire import Exchange, Headers
from ..live.continuation import cut_text, joined, parsed, rendered_for
from ._player import Player
from .plan import Forward, Router

if TYPE_CHECKING:
    from ...net import Trust, Upstream, UpstreamResponse
    from ...providers import Rendered

__all__ = ["LiveRelay"]


async def _each(chunks: Sequence[bytes]) -> AsyncIterator[bytes]:
    """The pieces of a body already read, as a relay sends pieces that arrive."""
    for chunk in chunks:
        yield chunk


def _joined_headers(rendered: Rendered, why: str, parts: int) -> Headers:
    """The headers of an answer a continuation joined (``parts`` continuation requests)."""
    stream = len(rendered.chunks) > 1 or rendered.content_type == "text/event-stream"
    return [
        ("content-type", rendered.content_type),
        ("x-looptap-replay", why),
        ("x-looptap-continued", str(parts)),
        ("transfer-encoding", "chunked")
        if stream
        else ("content-length", str(sum(len(c) for c in rendered.chunks))),
    ]


class LiveRelay:
    """Sends requests on to live upstreams (verifying TLS against ``trust``: ``None``, the
    environment's store) and relays their answers, written and kept as the ``player``'s are; a
    new episode whose upstream could not be reached is answered as the miss it was."""

    def __init__(self, player: Player, *, router: Router | None, trust: Trust | None) -> None:
        self.matcher = player.matcher
        self.sender = player.sender
        self.log = player.log
        self.router = router
        self.trust = trust
        self.send_miss = player.miss
        self.send_json = player.json

    async def forward(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Forward,
    ) -> bool:
        """Send the request on to ``answer.base`` and relay its answer as it arrives (chunked);
        an upstream that cannot be reached or breaks off is said in the API's error shape (a
        miss for new episodes) or by breaking the connection off the same way. Under a fork's
        ``--edit continue`` the answer is read whole first, and handed over joined when the
        token cap cut it (:meth:`_continued`)."""

        upstream = net.Upstream(
            answer.base, trust=answer.trust or self.trust, host=answer.host, proxy=answer.proxy
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        said: list[str] = []
        target = answer.target or req.target
        try:
            response = await upstream.send(
                req.method,
                target,
                answer.headers if answer.headers is not None else req.headers,
                answer.body,
                said,
            )
        except net.UpstreamError as exc:
            if answer.miss is not None:
                answer.miss.reason += f"; forwarding to {answer.base} failed: {exc}"
                return await self.send_miss(req, writer, answer.miss)
            return await self._send_upstream_error(req, writer, answer, str(exc))
        if answer.miss is not None:
            # answered after all: recorded as a new episode (or continued)
            self.matcher.resolve(answer.miss)
        notes = list(answer.notes)
        status, broke, rendered, parts = response.status, None, None, 0
        own: list[str] = []
        pieces: AsyncIterator[bytes] = (data async for data in response.pieces() if data)
        if answer.cont is not None:
            pieces, rendered, parts, broke = await self._whole_first(
                req, answer, upstream, response, pieces, said, notes
            )
        if rendered is None:  # the answer as it comes
            out = upstream.relayed_headers(response, own) + [
                ("transfer-encoding", "chunked"),
                ("x-looptap-replay", answer.why),
            ]
        else:
            status, out = 200, _joined_headers(rendered, answer.why, parts)
        sent: list[tuple[float | None, bytes]] = []
        logged = self.log(req, status, out, sent, origin_of=answer.rec)
        self._relay_notes(logged, notes, own, said)
        relay = await self.sender.send_head(writer, status, out, req=req, logged=logged)
        try:
            async for data in pieces:
                sent.append((loop.time() - t0, data))
                writer.write(relay.data(data))
                await self.sender.drain(writer)
        except net.UpstreamError as exc:
            broke = str(exc)
        if broke is not None:
            logged.transport_error = broke
            writer.transport.abort()
            return False
        if self.router is not None:  # a later request continuing this answer goes as it is
            self.router.relayed(req.method, target, answer.body, status, sent, out)
        writer.write(relay.end())
        await self.sender.drain(writer)
        return True

    async def _whole_first(
        self,
        req: Request,
        answer: Forward,
        upstream: Upstream,
        response: UpstreamResponse,
        pieces: AsyncIterator[bytes],
        said: list[str],
        notes: list[str],
    ) -> tuple[AsyncIterator[bytes], Rendered | None, int, str | None]:
        """Under ``--edit continue``: the answer read whole, then handed over as it came or
        joined with its continuation (:meth:`_continued`); the pieces to send, the joined answer
        and how many continuation requests made it, or why the upstream broke off."""
        first: list[bytes] = []
        try:
            first += [data async for data in pieces]
        except net.UpstreamError as exc:
            return _each(first), None, 0, str(exc)
        continued = await self._continued(req, answer, upstream, response, first, said, notes)
        if continued is None:
            return _each(first), None, 0, None
        return _each(continued[0].chunks), continued[0], continued[1], None

    def _relay_notes(
        self, logged: Exchange, notes: list[str], own: list[str], said: list[str]
    ) -> None:
        """A relayed answer's notes: the plan's and the continuation's, looptap's own marks the
        upstream's answer carried (dropped), the headers that could not be sent upstream."""
        logged.notes.extend(notes)
        if own:
            logged.notes.append(
                f"marks: the upstream's response carried looptap's own headers ({', '.join(own)}) "
                "that this replay did not write; dropped"
            )
        if said:
            self.sender.said(said, None)
            logged.notes.extend(f"looptap: {line} upstream" for line in said)

    async def _continued(
        self,
        req: Request,
        answer: Forward,
        upstream: Upstream,
        response: UpstreamResponse,
        first: list[bytes],
        said: list[str],
        notes: list[str],
    ) -> tuple[Rendered, int] | None:
        """A fork's ``--edit continue`` (:mod:`cassettes.replay.live.continuation`) on the
        upstream's answer (``first``, read whole): when the token cap cut it, the model asked to go
        on (each request through the same recorder, marked as the fork's), and the one answer
        joining the parts, in the format the client asked for, with how many continuation requests
        it took; ``None`` when there is nothing to join (the answer is relayed as it came). What
        happened goes to ``notes``."""
        cont = answer.cont
        assert cont is not None
        target = answer.target or req.target
        url = upstream.base + target
        sent_headers = answer.headers if answer.headers is not None else req.headers
        cut = parsed(
            cont.adapter, req.method, url, answer.body, response.status, response.headers, first
        )
        so_far = cut_text(cut) if cut is not None else None
        parts: list[tuple[str, Any]] = []
        while so_far is not None and cont.sent < cont.rounds:
            if self.router is not None and not self.router.admit(f"{req.method} {target}"):
                notes.append(
                    "fork: continue: stopped at the fork's limit of live requests (--max-requests)"
                    "; the answer so far handed to the client"
                )
                break
            made = cont.request(answer.body, so_far, sent_headers)
            if made is None:
                notes.append(
                    "fork: continue: this API has no form to "
                    "continue this answer; relayed as it came"
                )
                break
            body, headers, continues = made
            try:
                more_response = await net.Upstream(answer.base, trust=self.trust).send(
                    req.method, target, headers, body, said
                )
                got = [d async for d in more_response.pieces() if d]
            except net.UpstreamError as exc:
                notes.append(
                    f"fork: continue: continuation request {cont.sent} failed ({exc}); the answer "
                    "so far handed to the client"
                )
                break
            more = parsed(
                cont.adapter,
                req.method,
                url,
                body,
                more_response.status,
                more_response.headers,
                got,
            )
            if more is None:
                notes.append(
                    f"fork: continue: continuation request {cont.sent} got status "
                    f"{more_response.status}, no answer; the answer so far handed to the client"
                )
                break
            parts.append((continues, more))
            still = cut_text(more)
            so_far = continues + still if still is not None else None
        rendered = (
            rendered_for(cont.adapter, target, cont.client_body, joined(cut, parts))
            if cut is not None and parts
            else None
        )
        if rendered is None:
            return None
        cont.done(len(parts))
        notes.append(
            "fork: the answer was cut at the token cap; looptap continued it "
            f"({count(len(parts), 'continuation request')}, --edit continue) and handed the client "
            "one answer joining the parts"
        )
        return rendered, len(parts)

    async def _send_upstream_error(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        answer: Forward,
        why: str,
    ) -> bool:
        """The live upstream past the cursor failed: a 502 in the API's error shape."""
        adapter = request_key(req.method, req.target, req.headers, req.body).adapter or Provider()
        text = f"looptap: the live upstream failed: {why}"
        body = orjson.dumps(adapter.replay.error(502, text, "looptap_upstream_error"))
        headers = [("x-looptap-replay", answer.why)]
        return await self.send_json(req, writer, 502, headers, body, answer.rec, why, answer.notes)
