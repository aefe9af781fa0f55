"""looptap's own forwarder for the reverse listeners: the fast path of ``looptap run``/``record``.

mitmproxy alone adds about a millisecond or two to every round trip on loopback (its layers, hooks
and flow objects), more than looptap's recording itself. The reverse listeners (the ports clients
reach through ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, …) carry nearly all of an agent's
traffic as plain HTTP/1.1 keep-alive requests, and those the forwarder handles itself, in asyncio:

* :mod:`~proxy.forwarder.connection` reads each request (bounded), forwards it over a pooled
  keep-alive upstream connection (:mod:`~proxy.forwarder.upstream`: TLS verified as mitmproxy
  verifies), streams the answer back chunk by chunk as it arrives, and records the round trip
  (:mod:`~proxy.forwarder.capture`: the same :class:`~cassettes.wire.exchange.Exchange` the addon
  builds for the same traffic), handed to the same writer (:class:`proxy.handoff.Handoff`) before
  the answer's last byte reaches the client. Failures pass on as they happened, as with the addon.
* Everything else on those ports is spliced byte for byte (:mod:`~proxy.forwarder.splice`) to the
  mitmproxy reverse listener the recorder keeps for it on an internal loopback port, which records
  it as it always did: WebSocket and other upgrades, ``Expect: 100-continue``, HTTP/2 (a preface),
  TLS, HTTP/1.0, a request the forwarder cannot read or will not hold, a fork's edit marks, and an
  upstream it cannot reach (mitmproxy then answers its ``502``).

The forward proxy (``HTTPS_PROXY``) stays mitmproxy's. So does the whole recorder, every listener,
when the forwarder could not record as the addon does (:func:`refused`): ``--durable`` (the
addon's gate holds each answer's end until stored), ``--fault`` (answered by an addon), a fork's
run (its edit key: the addon checks edit marks), or ``LOOPTAP_FORWARDER=mitmproxy`` in the
recorder's environment. No mitmproxy import here (an import-linter contract keeps it so).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from proxy.forwarder.connection import MAX_BODY, MAX_HEAD, ClientConn, Route, Sink
from proxy.forwarder.server import Forwarder
from proxy.forwarder.upstream import Pool, Target

__all__ = [
    "MAX_BODY",
    "MAX_HEAD",
    "SWITCH",
    "ClientConn",
    "Forwarder",
    "ForwarderError",
    "Pool",
    "Route",
    "Sink",
    "Target",
    "refused",
]

#: The environment variable that chooses the reverse listeners' path: ``looptap`` (the default) or
#: ``mitmproxy`` (mitmproxy for every listener, as before the forwarder).
SWITCH = "LOOPTAP_FORWARDER"
_CHOICES = ("looptap", "mitmproxy")


class ForwarderError(ValueError):
    """A bad :data:`SWITCH` value: one line for the user."""


def refused(
    *,
    durable: bool,
    faults: bool,
    edit_key: bool,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Why the recorder keeps mitmproxy on every listener (``None``: the forwarder serves the
    reverse listeners). Raises :class:`ForwarderError` for a :data:`SWITCH` value it does not
    know."""
    env = os.environ if environ is None else environ
    choice = env.get(SWITCH, "").strip().lower() or "looptap"
    if choice not in _CHOICES:
        raise ForwarderError(
            f"{SWITCH}={env.get(SWITCH, '')[:40]!r} is not one of: {', '.join(_CHOICES)}"
        )
    if choice == "mitmproxy":
        return f"{SWITCH}=mitmproxy"
    if durable:
        return "--durable"
    if faults:
        return "--fault"
    if edit_key:
        return "a fork's run"
    return None
