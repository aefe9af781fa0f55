"""Durability (``looptap_durable``): a recorded response's end, or the WebSocket message that
completes a turn, held until the writer has stored the round trip."""

from __future__ import annotations

from mitmproxy import http

from .receipt import Receipt

__all__ = ["RECEIPT", "WS_RECEIPTS", "DurableGate"]

#: The flow metadata key of a durable round trip's :class:`~proxy.receipt.Receipt`.
RECEIPT = "looptap_receipt"
#: The flow metadata key of the receipts of the WebSocket turns a message completed (durable mode).
WS_RECEIPTS = "looptap_ws_receipts"


class DurableGate:
    """With ``looptap_durable``: holds a recorded response's end until the writer has stored the
    round trip (its :class:`~proxy.receipt.Receipt`, left on the flow by the recorder). A separate
    addon after :class:`LooptapRecorder`, so the recorder's own hooks stay synchronous (and cheap)
    when durability is off."""

    async def response(self, flow: http.HTTPFlow) -> None:
        await _written(flow)

    async def error(self, flow: http.HTTPFlow) -> None:
        await _written(flow)

    async def websocket_message(self, flow: http.HTTPFlow) -> None:
        """mitmproxy forwards a WebSocket message only once this hook returns: the message that
        completes a turn reaches the agent after the turn is in the cassette."""
        await _written(flow)

    async def websocket_end(self, flow: http.HTTPFlow) -> None:
        await _written(flow)


async def _written(flow: http.HTTPFlow) -> None:
    receipt = flow.metadata.pop(RECEIPT, None)
    if isinstance(receipt, Receipt):
        await receipt.wait()
    for r in flow.metadata.pop(WS_RECEIPTS, ()):
        if isinstance(r, Receipt):
            await r.wait()
