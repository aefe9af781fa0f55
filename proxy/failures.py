"""Upstream failures passed on to the agent as they happened (no mitmproxy import: asyncio only).

mitmproxy reads a connection until ``read`` fails or returns nothing and treats both alike
(``ConnectionHandler.handle_connection``, the same in 11.0.2 and 12.x), then tells the client a
version of its own: an upstream that reset or closed the connection before answering becomes a
``502 Bad Gateway`` page mitmproxy writes; a reset in the middle of a body becomes a clean close;
a WebSocket upstream that went away without a close frame becomes a close frame ``1000 (OK)``
(wsproto's ``1006`` is a local-only code, sent as ``1000``). An agent behind the recorder would
then not see what it sees directly. This module gives the addon what it needs to undo that, a
:class:`Relay` its hooks hand the connections and flows to (read by their attributes, so no
mitmproxy import), over these parts:

* :class:`Ends` remembers how each upstream connection ended — ``"reset"`` (the peer's RST: the
  transport's ``connection_lost`` with ``ConnectionResetError``) or ``"closed"`` (the peer's FIN:
  ``eof_received``) — by wrapping the two callbacks of the connection's asyncio protocol. Keyed
  weakly by mitmproxy's connection object, so nothing outlives the connection.
* :func:`reset_on_close` makes the next close of a client connection a TCP reset (``SO_LINGER``
  0), as the upstream's was.
* :func:`drop_close_frame` makes a client connection's writer swallow the close frame mitmproxy
  writes for a WebSocket peer that sent none, so the agent sees the connection end without one.

Every function fails open: anything unexpected (another transport, a closed socket) leaves
mitmproxy's own behaviour in place.
"""

from __future__ import annotations

import socket
import struct
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "CLOSED",
    "RESET",
    "Ends",
    "Relay",
    "drop_close_frame",
    "reset_on_close",
    "transport_of",
]

RESET = "reset"
CLOSED = "closed"
#: The first byte of a WebSocket close frame (FIN bit and opcode 0x8; control frames carry no RSV
#: bits).
CLOSE_FRAME = 0x88


def transport_of(proxyserver: Any, client: Any, conn: Any) -> Any:
    """The asyncio ``StreamWriter`` of ``conn`` (the client connection or one of its server
    connections), from mitmproxy's connection handler for ``client``; ``None`` when not found.
    mitmproxy has no public way to it: ``proxyserver`` is given only in the releases read for it
    (the addon's ``running``)."""
    try:
        handler = proxyserver.connections.get(client.id)
        io = handler.transports.get(conn) if handler is not None else None
        return io.writer if io is not None else None
    except Exception:
        return None


class Ends:
    """How upstream connections ended, as seen by their asyncio protocol."""

    def __init__(self) -> None:
        self._how: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def watch(self, conn: Any, writer: Any) -> bool:
        """Wrap the protocol behind ``writer`` (an asyncio ``StreamWriter``) so that a FIN or RST
        from the peer of ``conn`` is remembered. ``False`` when there is nothing to wrap."""
        try:
            proto = writer.transport.get_protocol()
            eof: Callable[[], Any] = proto.eof_received
            lost: Callable[[Exception | None], Any] = proto.connection_lost
        except Exception:
            return False
        how = self._how
        ref = weakref.ref(conn)

        def eof_received() -> Any:
            c = ref()
            if c is not None and c not in how:
                how[c] = CLOSED
            return eof()

        def connection_lost(exc: Exception | None) -> Any:
            c = ref()
            if c is not None and isinstance(exc, ConnectionResetError):
                how[c] = RESET
            return lost(exc)

        try:
            proto.eof_received = eof_received
            proto.connection_lost = connection_lost
        except Exception:
            return False
        return True

    def how(self, conn: Any) -> str | None:
        """``"reset"``, ``"closed"`` (by the peer), or ``None`` (still open, closed by us,
        unknown)."""
        try:
            return self._how.get(conn)
        except TypeError:
            return None


def reset_on_close(writer: Any) -> bool:
    """Make the connection behind ``writer`` end with a TCP reset when it is closed."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is None:
            return False
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except (OSError, AttributeError, ValueError):
        return False
    return True


def drop_close_frame(
    writer: Any, when: Callable[[], bool], then: Callable[[], None] | None = None
) -> bool:
    """Wrap ``writer.write`` so that a WebSocket close frame is not written while ``when()`` holds
    (checked only for a write that starts with a close frame); ``then`` runs once instead."""
    try:
        write = writer.write
    except AttributeError:
        return False

    def filtered(data: bytes | bytearray | memoryview) -> None:
        if data and data[0] == CLOSE_FRAME and when():
            if then is not None:
                then()
            return
        write(data)

    try:
        writer.write = filtered
    except AttributeError:
        return False
    return True


class Relay:
    """Passes the upstream's failures on to the agent as they happened, for the addon's hooks
    (``server_connected``, ``error``, ``websocket_start``, ``websocket_end``)."""

    def __init__(self) -> None:
        self.ends = Ends()
        #: mitmproxy's ``proxyserver`` addon, set in the releases read for it
        #: (:func:`transport_of`); ``None``: nothing is passed on.
        self.proxyserver: Any = None

    def how(self, conn: Any) -> str | None:
        return self.ends.how(conn)

    def server_connected(self, client: Any, server: Any) -> None:
        """Watch how the upstream connection ends (:class:`Ends`)."""
        writer = transport_of(self.proxyserver, client, server)
        if writer is not None:
            self.ends.watch(server, writer)

    def pass_on(self, flow: Any, how: str) -> None:
        """The upstream reset or closed the connection of a round trip that failed: the agent's
        connection ends the same way — reset if the upstream's was (an HTTP/1 client connection;
        an HTTP/2 one carries other streams), and without the 502 page mitmproxy would write when
        no response had started (the flow is killed: mitmproxy then closes the client connection
        without a word, as the upstream did)."""
        if how == RESET and flow.request.http_version.startswith("HTTP/1"):
            writer = transport_of(self.proxyserver, flow.client_conn, flow.client_conn)
            if writer is not None:
                reset_on_close(writer)
        if flow.response is None and flow.killable:
            flow.kill()

    def websocket_start(self, flow: Any) -> None:
        """A WebSocket peer that goes away without a close frame: mitmproxy would send the other
        side a close frame ``1000 (OK)``. The other side instead sees its connection end without
        one, reset if the peer's was."""
        if flow.websocket is None or self.proxyserver is None:
            return
        ws, client = flow.websocket, flow.client_conn
        client_writer = transport_of(self.proxyserver, client, client)
        server_writer = transport_of(self.proxyserver, client, flow.server_conn)
        if client_writer is None or server_writer is None:
            return
        self.ends.watch(client, client_writer)
        for writer, peer, by_client in (
            (client_writer, flow.server_conn, False),
            (server_writer, client, True),
        ):

            def dropped(peer: Any = peer, by_client: bool = by_client) -> bool:
                return (
                    ws.close_code == 1006
                    and bool(ws.closed_by_client) == by_client
                    and self.ends.how(peer) is not None
                )

            def then(writer: Any = writer, peer: Any = peer) -> None:
                if self.ends.how(peer) == RESET:
                    reset_on_close(writer)

            drop_close_frame(writer, dropped, then)

    def close_reason(self, flow: Any) -> str:
        """The close reason of a WebSocket that ended without a close frame: who went away, and
        how."""
        by_client = flow.websocket.closed_by_client
        how = self.ends.how(flow.client_conn if by_client else flow.server_conn)
        who = "the agent" if by_client else "the upstream"
        return f"no close frame; {who} {'reset' if how == RESET else 'closed'} the connection"
