"""Live faults: ``looptap run --fault …`` answers chosen requests with an API failure in the
proxy, instead of forwarding them, for chaos runs against the real API (or any upstream).

The faults and their wire format are the replay's (:mod:`cassettes.replay.serving.faults`, the
provider adapters' ``replay.fault_bodies``): a status fault is a response in the API's own shape
with ``x-looptap-fault`` (so the cassette labels it injected, never the API's own), ``reset`` kills
the connection before any response, ``slow_first_byte=S`` holds the request S seconds and forwards
it. Live, nothing is known of a request's turn before its answer: requests are selected by number
(``request=N``), by chance (``p=…`` with ``--fault-seed``) or all (``*``); ``*N`` fails the selected
request and the N-1 requests after it (the client's retries, when it retries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from mitmproxy import ctx, http
from mitmproxy.proxy import mode_specs

from ..cassettes.matching import request_key
from ..cassettes.providers import Provider, is_llm_host
from ..cassettes.replay.serving.faults import (
    STATUS_KINDS,
    Fault,
    FaultPlan,
    FaultSpecError,
    parse_fault,
)
from .marks import OWN_RESPONSE

__all__ = ["LiveFaults", "live_plan"]

#: What a proxy can do to a request before it is answered.
LIVE_KINDS = frozenset(STATUS_KINDS | {"reset", "slow_first_byte"})
_LIVE_SELECTORS = ("request", "p", "*")


def live_plan(specs: list[str], seed: int) -> FaultPlan:
    """The faults of ``looptap run --fault``; raises :class:`FaultSpecError` for a fault or a
    selector a live proxy cannot apply."""
    faults = [parse_fault(s) for s in specs]
    for f in faults:
        if f.kind not in LIVE_KINDS:
            raise FaultSpecError(
                f"--fault {f.text!r}: {f.kind} works in looptap replay only; live: "
                f"{', '.join(sorted(LIVE_KINDS))}"
            )
        if f.selector[0] not in _LIVE_SELECTORS:
            raise FaultSpecError(
                f"--fault {f.text!r}: live, a request is selected by request=N, p=… or *, not by "
                f"{f.selector[0]}= (its turn is known only from its answer)"
            )
    return FaultPlan(faults, seed=seed)


@dataclass
class _Seq:
    seq: int


@dataclass
class _Attempt:
    """What :meth:`FaultPlan.decide` reads of a request: its number (live, each request is its
    own)."""

    index: int
    exchange: _Seq
    turn: int | None = None
    conversation: str | None = None


class LiveFaults:
    """The mitmproxy addon. Runs before the recorder's hooks see the response it makes."""

    def __init__(self) -> None:
        self.plan: FaultPlan | None = None
        self._n = 0
        self._burst: tuple[Fault, int] | None = None

    def load(self, loader: Any) -> None:
        loader.add_option(
            "looptap_faults",
            Sequence[str],
            [],
            "Faults to inject into LLM API requests (looptap run --fault).",
        )
        loader.add_option("looptap_fault_seed", int, 0, "Seed of the p= fault selectors.")

    def configure(self, updated: set[str]) -> None:
        if updated & {"looptap_faults", "looptap_fault_seed"}:
            specs = list(ctx.options.looptap_faults)
            self.plan = live_plan(specs, int(ctx.options.looptap_fault_seed)) if specs else None

    async def request(self, flow: http.HTTPFlow) -> None:
        if self.plan is None or not _is_llm(flow) or flow.request.raw_content is None:
            return  # (None: streamed to the upstream already, proxy.capture.MAX_REQUEST: too late)
        self._n += 1
        # live, ``*N`` fails this request and the next N-1 (the retries)
        if self._burst is not None:
            fault, left = self._burst
            self._burst = (fault, left - 1) if left > 1 else None
            self.plan.fired.append((self._n, None, fault.text))
        else:
            decided = self.plan.decide(_Attempt(self._n, _Seq(self._n)))
            if decided is None:
                return
            fault = decided
            self._burst = (fault, fault.times - 1) if fault.times > 1 else None
        if fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.arg or 0.0)
            return
        if fault.kind == "reset":
            flow.kill()
            return
        adapter = _adapter(flow)
        status, body = (
            adapter.replay.fault_bodies.get(fault.kind) or Provider.replay.fault_bodies[fault.kind]
        )
        headers = [
            ("content-type", "application/json"),
            *adapter.replay.fault_headers(fault.kind, fault.arg if fault.arg is not None else 1.0),
            ("x-looptap-fault", fault.describe()),
        ]
        flow.response = http.Response.make(
            status, orjson.dumps(body), [(k.encode(), v.encode()) for k, v in headers]
        )
        # looptap's own answer: its x-looptap-fault stands (proxy.marks)
        flow.metadata[OWN_RESPONSE] = True


def _is_llm(flow: http.HTTPFlow) -> bool:
    return isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode) or is_llm_host(
        flow.request.pretty_host, (), flow.request.path
    )


def _adapter(flow: http.HTTPFlow) -> Provider:
    key = request_key(
        flow.request.method,
        flow.request.pretty_url,
        list(flow.request.headers.items()),
        flow.request.get_content(strict=False) or b"",
    )
    return key.adapter or Provider()
