"""The looptap mitmproxy addon: tee every response body, record each completed round trip.

Loads into the embedded launcher (``looptap run`` / ``looptap record``) and into stock tools::

    mitmdump -s proxy/addon.py --set looptap_output=run.jsonl --mode reverse:https://api.openai.com@8001
    mitmweb  -s proxy/addon.py --set looptap_output=run.jsonl

How it behaves (MITMPROXY.md is the evidence behind each rule):

* Every response is streamed (``flow.response.stream``) through a :class:`Tee` set in
  ``responseheaders``: mitmproxy would otherwise buffer a whole SSE stream before forwarding it.
  The tee returns each chunk unchanged, only appends it with a timestamp, and cannot raise.
* The ``response`` and ``error`` hooks (or the tee, at the last byte of a fixed-length body)
  turn the flow into a neutral :class:`~cassettes.wire.Exchange` in one function
  (:func:`flow_to_exchange`) and hand it to a writer process (:mod:`proxy.handoff`, which imports
  no mitmproxy), before the end of the response reaches the client; redaction, parsing and disk
  I/O never run on mitmproxy's event loop, nor compete with it for the GIL. The pipe outlives a
  SIGKILLed proxy and the writer drains it, so such a crash loses nothing the agent had received
  (:mod:`proxy.writer`).
* Completeness is judged later, from the stream's content, by ``cassettes``: the openai sync client
  hangs up right after ``[DONE]``, which mitmproxy reports as an error although the stream was
  whole.
* Fail-open for analysis (the core never raises on bad traffic), loud for storage: a write error is
  logged (:mod:`proxy.messages`: ``looptap run`` prints it on stderr, mitmdump and mitmweb show it
  in their event log), counted in :attr:`proxy.handoff.Handoff.storage_errors`, and never touches
  what was already written.
* Failures pass on as they happened (:mod:`proxy.failures`): an upstream that resets or closes the
  connection of a recorded round trip is a reset or a close to the agent, not mitmproxy's 502
  page or clean close, and a WebSocket peer gone without a close frame is gone without one for the
  other side too, not a close ``1000 (OK)``.
* In forward-proxy mode LLM API hosts are recorded (``looptap_record_hosts`` adds more), and MCP
  servers on any host; with ``looptap_tool_http`` (``looptap run`` / ``record``'s default) the
  rest too, as the tools' HTTP (marked ``tool``: never a turn; which requests, and how much of
  their bodies, :mod:`proxy.tool_http` says); other traffic passes through, streamed and
  unrecorded.
* What mitmproxy cannot pass never leaves the client waiting (docs/recorder.md, "What mitmproxy
  11.0.2 does not pass"): informational answers (``103 Early Hints``) before an HTTP/1 upstream's
  answer are dropped, so that the answer passes, and an HTTP/1 body's trailer fields, so that it
  ends (:mod:`proxy.http1_fixes`); the round trip says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions, http, version
from mitmproxy.proxy import mode_specs

from looptap.cassettes.providers import is_llm_host, versioned_path
from looptap.cassettes.recording import Redactor
from looptap.cassettes.wire import Exchange
from looptap.proxy import failures, http1_fixes, messages
from looptap.proxy.capture import (
    CAPPED,
    CLIENT_PATH,
    MAX_REQUEST,
    TOOL,
    Tee,
    flow_to_exchange,
    request_body,
)
from looptap.proxy.durable import RECEIPT, WS_RECEIPTS, DurableGate
from looptap.proxy.handoff import Handoff, HandoffError
from looptap.proxy.marks import drop_own_marks, take_edit_marks
from looptap.proxy.pipe import SETTLE
from looptap.proxy.tool_http import ToolHttp
from looptap.proxy.trust import UpstreamTrust

__all__ = [
    "LooptapRecorder",
    "addons",
]

#: How mitmproxy's error starts for an answer whose head it cannot parse: the upstream answered,
#: wrongly, so mitmproxy's 502 stands even when the upstream then closed (not passed on as a close).
_UNPARSEABLE = "Cannot parse HTTP response"


#: The addon's options (mitmproxy's ``--set``): name, type, default and help.
OPTIONS: tuple[tuple[str, Any, Any, str], ...] = (
    (
        "looptap_output",
        str,
        "",
        "Path of the looptap cassette to append recorded LLM round trips to (JSONL). Empty: "
        "record nothing.",
    ),
    (
        "looptap_record_hosts",
        Sequence[str],
        [],
        "Extra hosts (glob patterns) to record in forward-proxy mode, besides the known LLM API "
        "hosts.",
    ),
    (
        "looptap_tool_http",
        bool,
        False,
        "Record the tools' HTTP too: forward-proxy traffic to hosts that are not LLM APIs' (nor "
        "MCP servers', nor an agent vendor's own: sign-in, telemetry), kept beside the model "
        "calls as tool exchanges, never as turns; bodies kept up to 1 MiB. looptap run and "
        "record turn it on (--no-tool-http: off).",
    ),
    (
        "looptap_tool_http_exclude",
        Sequence[str],
        [],
        "Hosts (glob patterns, or HOST:PORT) whose traffic is not recorded as the tools' HTTP.",
    ),
    (
        "looptap_redact_headers",
        Sequence[str],
        [],
        "Extra header names whose values are redacted before anything is written (besides the "
        "built-in credential names; also [tool.looptap.redact] headers in ./pyproject.toml).",
    ),
    (
        "looptap_redact_patterns",
        Sequence[str],
        [],
        "Extra regular expressions redacted wherever they match, in headers, URLs and bodies "
        "(also [tool.looptap.redact] patterns in ./pyproject.toml).",
    ),
    (
        "looptap_flow_bodies",
        bool,
        True,
        "Put each streamed response body back on its flow once it has ended, for the tools that "
        "show or save flows (mitmweb, mitmdump -w). looptap's own launcher has none and turns "
        "this off: one copy less of every body in memory.",
    ),
    (
        "looptap_durable",
        bool,
        False,
        "Hold the end of each recorded response (over a WebSocket, the message that completes a "
        "turn) until its round trip is in the cassette, so a crash of the recorder (even SIGKILL) "
        "never loses a round trip the agent has finished receiving. Each response then waits for "
        "the writer (about a millisecond on an idle machine, more under load).",
    ),
    (
        "looptap_fsync",
        bool,
        False,
        "fsync the cassette after every round trip (slower; survives power loss, not only "
        "crashes).",
    ),
    (
        "looptap_agent",
        str,
        "",
        "The agent's name, kept in a new cassette's header (the fleet index groups runs by it).",
    ),
    (
        "looptap_command",
        Sequence[str],
        [],
        "The command the agent runs as, kept (redacted) in a new cassette's header.",
    ),
)


def _content_length(headers: Any) -> int | None:
    """The announced body length of a request or response, if it has one (not chunked)."""
    value = headers.get("content-length")
    if value is None or "chunked" in headers.get("transfer-encoding", "").lower():
        return None
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n >= 0 else None


class LooptapRecorder:
    """Records LLM round trips into a looptap cassette.

    The hooks only capture (a tee append per chunk, one conversion per round trip) and give each
    round trip to :attr:`handoff` (:mod:`proxy.handoff`: the pipes to a separate writer *process*
    that redacts, analyses and writes, so that work never competes with the proxy's event loop for
    the GIL). Its counts say what was recorded and what was lost.
    """

    def __init__(self) -> None:
        self.output: Path | None = None
        self.handoff = Handoff()
        self._extra_hosts: tuple[str, ...] = ()
        #: The tools' HTTP: which forward-proxy requests are a tool's (:mod:`proxy.tool_http`).
        self._tools = ToolHttp()
        self._flow_bodies = True
        self._durable = False
        #: How each upstream connection ended (reset or closed by the peer), passed on as it was.
        self._failures = failures.Relay()
        #: The per-run key of this run's fork (``looptap run --from`` sets it, in process): edit
        #: marks are accepted only when sealed with it. ``None``: none are ever accepted.
        self.edit_key: str | None = None

    # -- options -------------------------------------------------------------------------------
    def load(self, loader: Any) -> None:
        refused = http1_fixes.apply()
        if refused is not None:
            messages.emit(refused, logging.WARNING)
        for option in OPTIONS:
            loader.add_option(*option)

    def configure(self, updated: set[str]) -> None:
        if "looptap_durable" in updated:
            self._durable = bool(ctx.options.looptap_durable)
        if "looptap_flow_bodies" in updated:
            self._flow_bodies = bool(ctx.options.looptap_flow_bodies)
        if "looptap_record_hosts" in updated:
            self._extra_hosts = tuple(ctx.options.looptap_record_hosts)
        if "looptap_tool_http" in updated:
            self._tools.on = bool(ctx.options.looptap_tool_http)
        if "looptap_tool_http_exclude" in updated:
            self._tools.exclude = tuple(h.lower() for h in ctx.options.looptap_tool_http_exclude)
        if "mode" in updated:
            self._tools.listeners(ctx.options.mode)
        if updated & {"looptap_output", "looptap_fsync", "looptap_durable"}:
            self.handoff.close()
            self.output = None
            if ctx.options.looptap_output:
                self._open(Path(ctx.options.looptap_output))

    def _open(self, path: Path) -> None:
        redact = (
            list(ctx.options.looptap_redact_headers),
            list(ctx.options.looptap_redact_patterns),
        )
        try:  # this process's messages are masked with the same extra names and patterns
            messages.set_redactor(Redactor.configured(headers=redact[0], patterns=redact[1]))
        except ValueError:
            pass  # the writer reports a bad pattern when it opens the cassette
        try:
            self.handoff.open(
                path,
                fsync=ctx.options.looptap_fsync,
                settle=0.0 if self._durable else SETTLE,
                redact=redact,
                about=(ctx.options.looptap_agent, list(ctx.options.looptap_command)),
            )
        except HandoffError as exc:
            raise exceptions.OptionsError(f"looptap_output: {exc}") from None
        self.output = path

    def running(self) -> None:
        # (the modes given before this addon was added are never an update: read them here)
        self._tools.listeners(ctx.options.mode)
        self.handoff.attach()  # the writer's answers are read on the event loop
        # failures.transport_of reads mitmproxy's connection handlers (Proxyserver.connections:
        # public by its name, documented nowhere), only in the releases read for it
        if version.VERSION in http1_fixes.CHECKED:
            self._failures.proxyserver = ctx.master.addons.get("proxyserver")

    def done(self) -> None:
        self.handoff.close()

    # -- hooks -----------------------------------------------------------------------------------
    def _records(self, flow: http.HTTPFlow) -> bool:
        if not self.handoff.running:
            return False
        mode = flow.client_conn.proxy_mode
        if isinstance(mode, mode_specs.ReverseMode):
            return True
        tool = flow.metadata.get(TOOL)
        if tool is not None:  # told once per flow: a tool's (True), or not recorded (False)
            return bool(tool)
        if self._llm_host(flow) or _is_mcp(flow):
            return True
        # (asked once the request is whole: from the response's head on, or at an error)
        tool = self._tools.records(flow)
        if tool and self._tools.model_call(flow):
            # a model call whatever its host (a hard-coded base URL through HTTP_PROXY): one
            flow.metadata[_LLM] = True
            return True
        flow.metadata[TOOL] = tool
        return tool

    def _llm_host(self, flow: http.HTTPFlow) -> bool:
        """Whether a forward-proxy request goes to an LLM API's host (told once per flow)."""
        llm = flow.metadata.get(_LLM)
        if llm is None:
            req = flow.request
            llm = flow.metadata[_LLM] = is_llm_host(req.pretty_host, self._extra_hosts, req.path)
        return bool(llm)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        self._version_path(flow)
        take_edit_marks(flow, self.edit_key)
        # mitmproxy holds a request whole before the ``request`` hook (65 MiB took the proxy to
        # +195 MiB, 200 MiB to +600 MiB): a long one, or one of unknown length, is streamed instead
        length = _content_length(flow.request.headers)
        forward = not isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)
        limit = self._tools.request_limit(flow, forward and self._llm_host(flow), MAX_REQUEST)
        if length is None or length > limit:
            flow.request.stream = flow.metadata[CAPPED] = Tee(limit)

    @staticmethod
    def _version_path(flow: http.HTTPFlow) -> None:
        """On a reverse listener, a client that expects the API's version segment inside its base
        URL (the AI SDK's Anthropic provider posts ``$ANTHROPIC_BASE_URL/messages``) would reach
        the API without it and get a 404 that looptap's exported base caused: the segment is put
        back for the upstream; the cassette keeps the path the client sent, with a note."""
        if not isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode):
            return
        fixed = versioned_path(flow.request.path, flow.request.headers.keys())
        if fixed is not None:
            flow.metadata[CLIENT_PATH] = flow.request.path
            flow.request.path = fixed

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        drop_own_marks(flow)
        if self._records(flow):
            length = _content_length(flow.response.headers)
            tool = flow.metadata.get(TOOL)  # a tool's answer: kept up to its bound, never held
            if self._durable and length is not None and not tool:
                # A fixed-length body is complete for the client with its last byte, which a tee
                # passes on before the writer has answered; buffered, mitmproxy sends it only
                # after the hooks, i.e. after the write. (Chunked streams keep streaming: their
                # terminating chunk is what waits.)
                flow.response.stream = False
                return
            tee = self._tools.tee() if tool else Tee()
            if length:
                # Complete with its last byte: hand the round trip over before that byte goes to
                # the client, so once the agent has it the writer has it (SIGKILL included).
                tee.expect(length, lambda: self._finish(flow, None))
            flow.response.stream = flow.metadata["looptap_tee"] = tee
        else:
            flow.response.stream = True  # never buffer traffic we do not record

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None and flow.response.status_code == 101 and self._records(flow):
            if flow.metadata.get(TOOL):  # a tool's WebSocket: not recorded (docs/recorder.md)
                flow.metadata["looptap_done"] = True
                return
            self._start_session(flow)  # a WebSocket: its turns are recorded as they complete
            return
        tee = flow.metadata.get("looptap_tee")
        if (
            self._flow_bodies
            and tee is not None
            and flow.response is not None
            and flow.response.raw_content is None
        ):
            # Make the flow self-contained for mitmweb / flow files (once, not per chunk).
            flow.response.raw_content = b"".join(c for _, c in tee.chunks)
        self._finish(flow, None)

    def error(self, flow: http.HTTPFlow) -> None:
        if "looptap_ws" in flow.metadata:
            return  # websocket_end closes the session
        msg = flow.error.msg if flow.error else "error"
        how = self._failures.how(flow.server_conn)
        if how == failures.RESET:
            msg += " (the upstream reset the connection)"
        self._finish(flow, msg)
        if how is not None and self._records(flow) and not msg.startswith(_UNPARSEABLE):
            self._failures.pass_on(flow, how)

    # -- failures passed on as they happened (:class:`proxy.failures.Relay`) --------------------
    def server_connect(self, data: Any) -> None:
        self._tools.let_through(data.server)

    def server_connected(self, data: Any) -> None:
        self._failures.server_connected(data.client, data.server)

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if "looptap_ws" in flow.metadata:
            self._failures.websocket_start(flow)

    def _finish(self, flow: http.HTTPFlow, error: str | None) -> None:
        """Hand the finished round trip to the writer, now: mitmproxy sends the end of a streamed
        response (the last chunk of a chunked body) only after this hook returns, so a round trip
        the agent has is always one the writer has been given. (It used to wait for the next turn
        of the event loop, and a SIGKILL in between lost it.) With ``looptap_durable`` its
        :class:`~proxy.receipt.Receipt` is left on the flow for :class:`DurableGate`."""
        if not self._records(flow) or flow.metadata.get("looptap_done"):
            return
        flow.metadata["looptap_done"] = True
        try:
            ex = flow_to_exchange(flow, flow.metadata.get("looptap_tee"), error)
            receipt = self.handoff.hand_over(ex, receipt=self._durable)
        except Exception as exc:  # fail open: keep the traffic flowing, say what was lost
            self._not_recorded(
                flow, f"could not capture {flow.request.method} {flow.request.pretty_url}", exc
            )
            return
        if receipt is not None:
            flow.metadata[RECEIPT] = receipt

    def _not_recorded(self, flow: http.HTTPFlow, what: str, exc: Exception) -> None:
        # The flow's credentials are learned first: the exception text may carry one.
        messages.learn_headers(flow.request.headers.items(multi=True))
        self.handoff.not_recorded(messages.safe(f"{what}: {type(exc).__name__}: {exc}"))

    # -- WebSocket sessions (Responses over a WebSocket, …) ----------------------------------------
    def _start_session(self, flow: http.HTTPFlow) -> None:
        from looptap.cassettes.recording.websocket import WsSession

        assert flow.response is not None
        flow.metadata["looptap_done"] = True  # the upgrade itself is not a round trip
        session = WsSession(
            url=flow.request.pretty_url,
            request_headers=list(flow.request.headers.items(multi=True)),
            response_headers=list(flow.response.headers.items(multi=True)),
            started=flow.request.timestamp_start,
        )
        flow.metadata["looptap_ws"] = session
        if not session.readable:
            messages.error(  # (the logger's filter makes it safe)
                f"a WebSocket session on {flow.request.pretty_url} is not one looptap reads as "
                "turns: it is kept whole, as one record, when it ends"
            )

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """Before the message is forwarded: a turn whose terminal event this is reaches the
        writer before the client has it."""
        session = flow.metadata.get("looptap_ws")
        if session is None or flow.websocket is None or not flow.websocket.messages:
            return
        m = flow.websocket.messages[-1]
        try:
            done = session.message(m.from_client, m.content, m.timestamp)
        except Exception as exc:  # fail open: the session goes on unrecorded from here
            flow.metadata.pop("looptap_ws", None)
            self._not_recorded(
                flow, f"could not read a WebSocket message on {flow.request.pretty_url}", exc
            )
            return
        for ex in done:
            self._hand_over_turn(ex, flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        session = flow.metadata.pop("looptap_ws", None)
        if session is None or flow.websocket is None:
            return
        ws = flow.websocket
        # no close frame: say who went away, and how
        reason = self._failures.close_reason(flow) if ws.close_code == 1006 else ws.close_reason
        for ex in session.end(ws.close_code, reason, by_client=ws.closed_by_client):
            self._hand_over_turn(ex, flow)

    def _hand_over_turn(self, ex: Exchange, flow: http.HTTPFlow) -> None:
        """With ``looptap_durable``, the turn's :class:`~proxy.receipt.Receipt` is left on the
        flow: :class:`DurableGate` holds the message that completed the turn (its terminal event,
        or the client's next turn that cut it) until the writer has stored the turn."""
        try:
            receipt = self.handoff.hand_over(ex, receipt=self._durable)
        except Exception as exc:
            self._not_recorded(
                flow, f"could not capture a WebSocket turn on {flow.request.pretty_url}", exc
            )
            return
        if receipt is not None:
            flow.metadata.setdefault(WS_RECEIPTS, []).append(receipt)


#: For ``mitmdump -s proxy/addon.py`` / ``mitmweb -s proxy/addon.py``.
_recorder = LooptapRecorder()
addons = [_recorder, DurableGate(), UpstreamTrust()]


#: The flow metadata key of whether a forward-proxy request goes to an LLM API's host.
_LLM = "looptap_llm"


def _is_mcp(flow: http.HTTPFlow) -> bool:
    """An MCP tool server's traffic, on any host: its headers, or a JSON-RPC body (tool calls are
    half of the agent's loop; they are recorded beside the model calls)."""
    req = flow.request
    if any(h in req.headers for h in ("mcp-protocol-version", "mcp-session-id", "mcp-method")):
        return True
    body = request_body(flow)
    return req.method == "POST" and b'"jsonrpc"' in body[:200] and b'"method"' in body[:4096]
