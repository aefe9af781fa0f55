"""The looptap mitmproxy addon: tee every response body, record each completed round trip.

Loads into the embedded launcher (``looptap run`` / ``looptap record``) and into stock tools::

    mitmdump -s proxy/addon.py --set looptap_output=run.jsonl --mode reverse:https://api.openai.com@8001
    mitmweb  -s proxy/addon.py --set looptap_output=run.jsonl

How it behaves (MITMPROXY.md is the evidence behind each rule):

* Every response is streamed (``flow.response.stream``) through a :class:`Tee` set in
  ``responseheaders``: mitmproxy would otherwise buffer a whole SSE stream before forwarding it.
  The tee returns each chunk unchanged, only appends it with a timestamp, and cannot raise.
* The ``response`` and ``error`` hooks (or the tee, at the last byte of a fixed-length body)
  turn the flow into a neutral :class:`~cassettes.exchange.Exchange` in one function
  (:func:`flow_to_exchange`) and write it into a pipe to a writer process, before the end of the
  response reaches the client; redaction, parsing and disk I/O never run on mitmproxy's event
  loop, nor compete with it for the GIL. The pipe outlives a SIGKILLed proxy and the writer
  drains it, so such a crash loses nothing the agent had received (:mod:`proxy.writer`).
* Completeness is judged later, from the stream's content, by ``cassettes``: the openai sync client
  hangs up right after ``[DONE]``, which mitmproxy reports as an error although the stream was whole.
* Fail-open for analysis (the core never raises on bad traffic), loud for storage: a write error is
  printed to stderr, counted in :attr:`LooptapRecorder.storage_errors`, and never touches what was
  already written.
* In forward-proxy mode only LLM API hosts are recorded (``looptap_record_hosts`` adds more);
  other traffic passes through, streamed and unrecorded.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy import mode_specs

from cassettes.errors import CassetteError
from cassettes.exchange import Exchange
from cassettes.providers import is_llm_host
from cassettes.store import CassetteWriter
from proxy import messages
from proxy.writer import SETTLE, FrameReader, enlarge_pipe, frame, write_parts, writer_main

__all__ = ["DurableGate", "LooptapRecorder", "Tee", "addons", "flow_to_exchange"]

#: Seconds the writer process may take to start (spawn, imports, opening the cassette).
_WRITER_START_TIMEOUT = 60.0


class Tee:
    """The stream callable: forwards every chunk untouched and keeps a timestamped copy.

    With :meth:`expect`, calls ``on_complete`` once the body's announced length has arrived,
    before that last chunk is passed on."""

    __slots__ = ("_left", "_on_complete", "chunks")

    def __init__(self) -> None:
        self.chunks: list[tuple[float, bytes]] = []
        self._left = 0
        self._on_complete: Callable[[], None] | None = None

    def expect(self, length: int, on_complete: Callable[[], None]) -> None:
        self._left = length
        self._on_complete = on_complete

    def __call__(self, data: bytes) -> bytes:
        try:
            if data:
                self.chunks.append((time.time(), data))
                if self._on_complete is not None:
                    self._left -= len(data)
                    if self._left <= 0:
                        done, self._on_complete = self._on_complete, None
                        done()
        except Exception:  # never break the stream: a raising callable drops the chunk
            pass
        return data


def _content_length(headers: Any) -> int | None:
    """The announced body length of a response, if it has one (not chunked)."""
    value = headers.get("content-length")
    if value is None or "chunked" in headers.get("transfer-encoding", "").lower():
        return None
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n >= 0 else None


def _fields(headers: Any) -> list[tuple[str, str]]:
    return [
        (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape")) for k, v in headers.fields
    ]


def flow_to_exchange(flow: http.HTTPFlow, tee: Tee | None, error: str | None) -> Exchange:
    """The one place a mitmproxy flow becomes a neutral exchange. Bodies are left as they crossed
    the wire (content-encoded): the writer process decodes them, off the proxy's event loop."""
    req = flow.request
    start = req.timestamp_start
    ex = Exchange(
        method=req.method,
        url=req.pretty_url,
        request_headers=_fields(req.headers),
        request_body=req.raw_content or b"",
        started=start,
    )
    resp = flow.response
    if resp is not None:
        ex.status = resp.status_code
        ex.reason = resp.reason
        ex.response_headers = _fields(resp.headers)
        if tee is not None and tee.chunks:
            ex.response_chunks = [(max(0.0, t - start), c) for t, c in tee.chunks]
        elif resp.raw_content:  # not streamed through the tee (a response an addon made, e.g. a live fault)
            ex.response_chunks = [((resp.timestamp_end or start) - start, resp.raw_content)]
        if resp.timestamp_start:
            ex.ttfb = resp.timestamp_start - start
        end = resp.timestamp_end or (tee.chunks[-1][0] if tee is not None and tee.chunks else None)
        if end:
            ex.duration = end - start
    if error:
        ex.transport_error = error
    return ex


class LooptapRecorder:
    """Records LLM round trips into a looptap cassette.

    The hooks only capture (a tee append per chunk, one conversion per round trip); a separate
    writer *process* redacts, analyses and writes, so that work never competes with the proxy's
    event loop for the GIL.
    """

    def __init__(self) -> None:
        self.output: Path | None = None
        self.recorded = 0
        self.storage_errors = 0
        self.failed_records = 0
        #: What was lost, one redacted line each (the first few are named in the summary).
        self.lost: list[str] = []
        self._sent = 0
        self._done = threading.Condition()
        #: The writer process and the two pipes to it (``multiprocessing`` connections, used for
        #: their file descriptors only; see :mod:`proxy.writer`).
        self._process: Any = None
        self._inbox: Any = None
        self._outbox: Any = None
        self._answers = FrameReader()
        self._answers_eof = False
        self._writer_gone = False
        #: Frames (or what is left of them) the pipe could not take yet, oldest first.
        self._overflow: deque[list[memoryview]] = deque()
        #: Guards the pipes, :attr:`_overflow` and :attr:`_answers` (the event loop and a thread
        #: in :meth:`flush` may both pump).
        self._io = threading.Lock()
        #: The event loop that reads the writer's answers (set once recording runs on one).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._extra_hosts: tuple[str, ...] = ()
        self._flow_bodies = True
        self._durable = False
        #: Durable mode: one future per round trip handed to the writer, in hand-off order (the
        #: writer answers in that order); resolved when its answer arrives.
        self._acks: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    # -- options -------------------------------------------------------------------------------
    def load(self, loader: Any) -> None:
        loader.add_option(
            "looptap_output",
            str,
            "",
            "Path of the looptap cassette to append recorded LLM round trips to (JSONL). Empty: record nothing.",
        )
        loader.add_option(
            "looptap_record_hosts",
            Sequence[str],
            [],
            "Extra hosts (glob patterns) to record in forward-proxy mode, besides the known LLM API hosts.",
        )
        loader.add_option(
            "looptap_redact_headers",
            Sequence[str],
            [],
            "Extra header names whose values are redacted before anything is written (besides the built-in "
            "credential names; also [tool.looptap.redact] headers in ./pyproject.toml).",
        )
        loader.add_option(
            "looptap_redact_patterns",
            Sequence[str],
            [],
            "Extra regular expressions redacted wherever they match, in headers, URLs and bodies (also "
            "[tool.looptap.redact] patterns in ./pyproject.toml).",
        )
        loader.add_option(
            "looptap_flow_bodies",
            bool,
            True,
            "Put each streamed response body back on its flow once it has ended, for the tools that show or "
            "save flows (mitmweb, mitmdump -w). looptap's own launcher has none and turns this off: one copy less "
            "of every body in memory.",
        )
        loader.add_option(
            "looptap_durable",
            bool,
            False,
            "Hold the end of each recorded response until its round trip is in the cassette, so a crash of the "
            "recorder (even SIGKILL) never loses a round trip the agent has finished receiving. Each response "
            "then waits for the writer (about a millisecond on an idle machine, more under load).",
        )
        loader.add_option(
            "looptap_fsync",
            bool,
            False,
            "fsync the cassette after every round trip (slower; survives power loss, not only crashes).",
        )

    def configure(self, updated: set[str]) -> None:
        if "looptap_durable" in updated:
            self._durable = bool(ctx.options.looptap_durable)
        if "looptap_flow_bodies" in updated:
            self._flow_bodies = bool(ctx.options.looptap_flow_bodies)
        if "looptap_record_hosts" in updated:
            self._extra_hosts = tuple(ctx.options.looptap_record_hosts)
        if updated & {"looptap_output", "looptap_fsync", "looptap_durable"}:
            path = ctx.options.looptap_output
            self._stop_writer()
            if path:
                self._start_writer(Path(path), ctx.options.looptap_fsync)

    def _start_writer(self, path: Path, fsync: bool) -> None:
        import multiprocessing

        try:  # fail early, with a clear message, if the cassette cannot be opened
            CassetteWriter(path, meta={"source": "looptap proxy"}).close()
        except (CassetteError, OSError) as exc:
            raise exceptions.OptionsError(f"looptap_output: {exc}") from None
        mp = multiprocessing.get_context("spawn")
        in_r, in_w = mp.Pipe(duplex=False)
        out_r, out_w = mp.Pipe(duplex=False)
        enlarge_pipe(in_w.fileno())
        redact = (list(ctx.options.looptap_redact_headers), list(ctx.options.looptap_redact_patterns))
        try:  # this process's messages are masked with the same extra names and patterns
            from cassettes.redact import Redactor

            messages.set_redactor(Redactor.configured(headers=redact[0], patterns=redact[1]))
        except ValueError:
            pass  # the writer reports a bad pattern when it opens the cassette
        process = mp.Process(
            target=writer_main,
            args=(str(path), fsync, in_r, out_w, 0.0 if self._durable else SETTLE, redact),
            name="looptap-writer",
            daemon=True,
        )
        process.start()
        # Only the writer holds these ends: the proxy's end-of-file is the writer's (and back).
        in_r.close()
        out_w.close()
        # Recording starts when the writer can write: until then a round trip would exist only in
        # this process, and a crash in the first seconds (spawn + imports) would lose it.
        os.set_blocking(in_w.fileno(), False)
        os.set_blocking(out_r.fileno(), False)
        kind, msg = "storage_error", f"the writer process did not start within {_WRITER_START_TIMEOUT:.0f} s"
        reader = FrameReader()
        deadline = time.monotonic() + _WRITER_START_TIMEOUT
        while (left := deadline - time.monotonic()) > 0 and out_r.poll(left):
            if not _read_available(out_r.fileno(), reader):
                kind, msg = "storage_error", "the writer process ended at start-up"
                break
            frames = reader.frames()
            if frames:
                kind, msg = frames[0]
                break
        if kind != "ready":
            process.kill()
            process.join(timeout=5)
            in_w.close()
            out_r.close()
            raise exceptions.OptionsError(f"looptap_output: {msg}")
        self._process, self._inbox, self._outbox, self._answers = process, in_w, out_r, reader
        self._answers_eof = self._writer_gone = False
        self.output = path
        self._attach()

    def _attach(self) -> None:
        """Read the writer's answers on the running event loop (no thread), if there is one and
        it is not already doing so; without one, :meth:`flush` reads them."""
        if self._outbox is None or self._loop is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.add_reader(self._outbox.fileno(), self._pump)
        self._loop = loop

    def _detach(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            if self._outbox is not None:
                loop.remove_reader(self._outbox.fileno())
            if self._overflow and self._inbox is not None:
                loop.remove_writer(self._inbox.fileno())
        except (RuntimeError, ValueError, OSError):  # closed loop or fd: nothing left to remove
            pass

    def running(self) -> None:
        self._attach()

    # -- hooks -----------------------------------------------------------------------------------
    def _records(self, flow: http.HTTPFlow) -> bool:
        if self._inbox is None:
            return False
        mode = flow.client_conn.proxy_mode
        if isinstance(mode, mode_specs.ReverseMode):
            return True
        return is_llm_host(flow.request.pretty_host, self._extra_hosts, flow.request.path) or _is_mcp(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        if self._records(flow):
            length = _content_length(flow.response.headers)
            if self._durable and length is not None:
                # A fixed-length body is complete for the client with its last byte, which a tee
                # passes on before the writer has answered; buffered, mitmproxy sends it only
                # after the hooks, i.e. after the write. (Chunked streams keep streaming: their
                # terminating chunk is what waits.)
                flow.response.stream = False
                return
            tee = Tee()
            if length:
                # Complete with its last byte: hand the round trip over before that byte goes to
                # the client, so once the agent has it the writer has it (SIGKILL included).
                tee.expect(length, lambda: self._finish(flow, None))
            flow.response.stream = tee
            flow.metadata["looptap_tee"] = tee
        else:
            flow.response.stream = True  # never buffer traffic we do not record

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None and flow.response.status_code == 101 and self._records(flow):
            self._start_session(flow)  # a WebSocket: its turns are recorded as they complete
            return
        tee = flow.metadata.get("looptap_tee")
        if self._flow_bodies and tee is not None and flow.response is not None and flow.response.raw_content is None:
            # Make the flow self-contained for mitmweb / flow files (once, not per chunk).
            flow.response.raw_content = b"".join(c for _, c in tee.chunks)
        self._finish(flow, None)

    def error(self, flow: http.HTTPFlow) -> None:
        if "looptap_ws" in flow.metadata:
            return  # websocket_end closes the session
        self._finish(flow, flow.error.msg if flow.error else "error")

    # -- WebSocket sessions (Responses over a WebSocket, …) -----------------------------------------
    def _start_session(self, flow: http.HTTPFlow) -> None:
        from cassettes.websocket import WsSession

        assert flow.response is not None
        flow.metadata["looptap_done"] = True  # the upgrade itself is not a round trip
        session = WsSession(
            url=flow.request.pretty_url,
            request_headers=_fields(flow.request.headers),
            response_headers=_fields(flow.response.headers),
            started=flow.request.timestamp_start,
        )
        flow.metadata["looptap_ws"] = session
        if not session.readable:
            messages.error(_safe_line(
                f"a WebSocket session on {flow.request.pretty_url} is not one looptap reads as turns: "
                "it is kept whole, as one record, when it ends"))

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
            self._lost(_safe_line(f"could not read a WebSocket message on {flow.request.pretty_url}: {type(exc).__name__}: {exc}"))
            return
        for ex in done:
            self._hand_over(ex, flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        session = flow.metadata.pop("looptap_ws", None)
        if session is None or flow.websocket is None:
            return
        for ex in session.end(flow.websocket.close_code, flow.websocket.close_reason):
            self._hand_over(ex, flow)

    def _hand_over(self, ex: Exchange, flow: http.HTTPFlow) -> None:
        with self._done:
            self._sent += 1
        try:
            if self._inbox is None or self._writer_gone:
                raise RuntimeError("the writer process has stopped")
            self._send(frame(ex))
        except Exception as exc:
            messages.learn_headers(flow.request.headers.items(multi=True))
            self._lost(_safe_line(f"could not capture a WebSocket turn on {flow.request.pretty_url}: {type(exc).__name__}: {exc}"))

    def _lost(self, what: str) -> None:
        with self._done:
            self.failed_records += 1
            self.lost.append(what)
            self._done.notify_all()
        messages.error(f"round trip NOT recorded: {what}")

    def _finish(self, flow: http.HTTPFlow, error: str | None) -> None:
        """Hand the finished round trip to the writer, now: mitmproxy sends the end of a streamed
        response (the last chunk of a chunked body) only after this hook returns, so a round trip
        the agent has is always one the writer has been given. (It used to wait for the next turn
        of the event loop, and a SIGKILL in between lost it.)"""
        if not self._records(flow) or flow.metadata.get("looptap_done"):
            return
        flow.metadata["looptap_done"] = True
        with self._done:
            self._sent += 1
        if self._durable:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                flow.metadata["looptap_ack"] = (loop, loop.create_future())
        self._capture(flow, flow.metadata.get("looptap_tee"), error)

    def _capture(self, flow: http.HTTPFlow, tee: Tee | None, error: str | None) -> None:
        ack = flow.metadata.pop("looptap_ack", None)
        try:
            ex = flow_to_exchange(flow, tee, error)
            if self._inbox is None or self._writer_gone:
                raise RuntimeError("the writer process has stopped")
            if ack is not None:
                flow.metadata["looptap_wait"] = ack[1]
                self._acks.append(ack)  # before the write: the writer's answer may come at once
            self._send(frame(ex))
        except Exception as exc:  # fail open: keep the traffic flowing, say what was lost
            if ack is not None:
                try:
                    self._acks.remove(ack)
                except ValueError:
                    pass
                _resolve(ack[1])
            messages.learn_headers(flow.request.headers.items(multi=True))
            what = _safe_line(f"could not capture {flow.request.method} {flow.request.pretty_url}: {type(exc).__name__}: {exc}")
            with self._done:
                self.failed_records += 1
                self.lost.append(what)
                self._done.notify_all()
            messages.error(f"round trip NOT recorded: {what}")

    async def _wait_written(self, flow: http.HTTPFlow) -> None:
        fut = flow.metadata.pop("looptap_wait", None)
        if fut is not None:
            await fut

    def done(self) -> None:
        self._stop_writer()

    # -- the writer process ------------------------------------------------------------------------
    def _send(self, parts: list[memoryview]) -> None:
        """Hand one frame to the writer without ever blocking: what the pipe cannot take now waits
        in :attr:`_overflow`, written when the pipe has room (by the event loop, or by flush)."""
        assert self._inbox is not None
        with self._io:
            if not self._overflow:
                try:
                    parts = write_parts(self._inbox.fileno(), parts)
                except OSError:
                    self._writer_gone = True
                    raise RuntimeError("the writer process has stopped") from None
                if not parts:
                    return
                if self._loop is not None:
                    self._loop.add_writer(self._inbox.fileno(), self._pump)
            self._overflow.append(parts)

    def _pump(self) -> None:
        """Move what is waiting: overflow frames into the writer's pipe, its answers out of the
        other. Never blocks. Runs on the event loop (reader/writer callbacks) or in :meth:`flush`."""
        answers: list[Any] = []
        with self._io:
            inbox, outbox = self._inbox, self._outbox
            if self._overflow and inbox is not None:
                while self._overflow:
                    try:
                        left = write_parts(inbox.fileno(), self._overflow[0])
                    except OSError:  # the writer is gone: flush counts what it never got
                        self._writer_gone = True
                        self._overflow.clear()
                        break
                    if left:
                        self._overflow[0] = left
                        break
                    self._overflow.popleft()
                if not self._overflow and self._loop is not None:
                    self._loop.remove_writer(inbox.fileno())
            if outbox is not None and not self._answers_eof and not _read_available(outbox.fileno(), self._answers):
                self._answers_eof = True
                if self._loop is not None:
                    self._loop.remove_reader(outbox.fileno())
            answers = self._answers.frames()
        for kind, msg in answers:
            self._on_answer(kind, msg)

    def _on_answer(self, kind: str, msg: Any) -> None:
        n = msg if kind == "ok" else 1 if kind in ("storage_error", "failed") else 0
        for _ in range(n):
            self._release_ack()
        with self._done:
            if kind == "ok":
                self.recorded += n
            elif kind == "storage_error":
                self.storage_errors += 1
                self.lost.append(_safe_line(str(msg)))
            elif kind == "failed":
                self.failed_records += 1
                self.lost.append(_safe_line(str(msg)))
            self._done.notify_all()
        if kind == "storage_error":
            messages.error(f"STORAGE ERROR, round trip not recorded: {msg}")
        elif kind == "failed":
            messages.error(f"round trip NOT recorded: {msg}")

    def _release_ack(self) -> None:
        try:
            loop, fut = self._acks.popleft()
        except IndexError:
            return
        if loop is self._loop and self._on_loop_thread():
            _resolve(fut)
            return
        try:
            loop.call_soon_threadsafe(_resolve, fut)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _on_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _handled(self) -> int:
        return self.recorded + self.storage_errors + self.failed_records

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until every captured round trip has been handled by the writer."""
        # On another thread while the event loop reads the answers: wait for it; else pump here.
        waits_for_loop = self._loop is not None and self._loop.is_running() and not self._on_loop_thread()
        deadline = time.monotonic() + timeout
        while True:
            with self._done:
                if self._handled() >= self._sent:
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._process is None or not self._process.is_alive():
                if not waits_for_loop:
                    self._pump()  # its last answers
                with self._done:
                    lost = self._sent - self._handled()
                    if lost > 0:
                        self.storage_errors += lost
                        self.lost.append(f"{lost} round trips: the writer process stopped before storing them")
                        messages.error(f"STORAGE ERROR: the writer process stopped; {lost} round trips not recorded")
                    return
            if waits_for_loop:
                with self._done:
                    self._done.wait(min(left, 0.2))
                continue
            inbox, outbox = self._inbox, self._outbox
            if inbox is None or outbox is None:
                return
            wfds = [inbox.fileno()] if self._overflow else []
            select.select([outbox.fileno()], wfds, [], min(left, 0.2))
            self._pump()

    def _stop_writer(self) -> None:
        if self._process is None:
            while self._acks:
                self._release_ack()
            return
        self.flush()
        self._detach()  # from here on this thread does the pumping
        inbox, outbox, process = self._inbox, self._outbox, self._process
        assert inbox is not None and outbox is not None
        deadline = time.monotonic() + 30
        while self._overflow and not self._writer_gone and time.monotonic() < deadline and process.is_alive():
            select.select([outbox.fileno()], [inbox.fileno()], [], 0.2)
            self._pump()
        inbox.close()  # end of file: the writer stores what it has and exits
        process.join(timeout=30)
        self._pump()  # the last answers
        with self._io:
            outbox.close()
            lost_overflow = len(self._overflow)
            self._overflow.clear()
            self._process = self._inbox = self._outbox = None
        if lost_overflow:
            with self._done:
                self.storage_errors += lost_overflow
                self.lost.append(f"{lost_overflow} round trips: never handed to the writer")
            messages.error(f"STORAGE ERROR: {lost_overflow} round trips were never handed to the writer")
        while self._acks:  # nothing will answer them once the writer is gone
            self._release_ack()


def _read_available(fd: int, reader: FrameReader) -> bool:
    """Feed ``reader`` what the non-blocking ``fd`` holds now; ``False`` once it is at its end
    (the writer is gone)."""
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        reader.feed(data)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class DurableGate:
    """With ``looptap_durable``: holds a recorded response's end until the writer has stored the
    round trip. A separate addon after :class:`LooptapRecorder`, so the recorder's own hooks stay
    synchronous (and cheap) when durability is off."""

    def __init__(self, recorder: LooptapRecorder) -> None:
        self.recorder = recorder

    async def response(self, flow: http.HTTPFlow) -> None:
        await self.recorder._wait_written(flow)

    async def error(self, flow: http.HTTPFlow) -> None:
        await self.recorder._wait_written(flow)


#: For ``mitmdump -s proxy/addon.py`` / ``mitmweb -s proxy/addon.py``.
_recorder = LooptapRecorder()
addons = [_recorder, DurableGate(_recorder)]


def _is_mcp(flow: http.HTTPFlow) -> bool:
    """An MCP tool server's traffic, on any host: its headers, or a JSON-RPC body (tool calls are
    half of the agent's loop; they are recorded beside the model calls)."""
    req = flow.request
    if any(h in req.headers for h in ("mcp-protocol-version", "mcp-session-id", "mcp-method")):
        return True
    head = (req.raw_content or b"")[:200]
    return req.method == "POST" and b'"jsonrpc"' in head and b'"method"' in (req.raw_content or b"")[:4096]


def _safe_line(text: str) -> str:
    """A message about a flow, fit for stderr (:func:`proxy.messages.safe`: redacted, one line,
    controls shown, bounded)."""
    return messages.safe(text)
