"""The looptap mitmproxy addon: tee every response body, record each completed round trip.

Loads into the embedded launcher (``looptap run`` / ``looptap record``) and into stock tools::

    mitmdump -s proxy/addon.py --set looptap_output=run.jsonl --mode reverse:https://api.openai.com@8001
    mitmweb  -s proxy/addon.py --set looptap_output=run.jsonl

How it behaves (MITMPROXY.md is the evidence behind each rule):

* Every response is streamed (``flow.response.stream``) through a :class:`Tee` set in
  ``responseheaders``: mitmproxy would otherwise buffer a whole SSE stream before forwarding it.
  The tee returns each chunk unchanged, only appends it with a timestamp, and cannot raise.
* The ``response`` and ``error`` hooks turn the flow into a neutral
  :class:`~cassettes.exchange.Exchange` in one function (:func:`flow_to_exchange`) and hand it to a
  writer process; redaction, parsing and disk I/O never run on mitmproxy's event loop, nor compete
  with it for the GIL.
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
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy import mode_specs

from cassettes.errors import CassetteError
from cassettes.exchange import Exchange
from cassettes.providers import is_llm_host
from cassettes.store import CassetteWriter
from proxy.writer import writer_main

__all__ = ["DurableGate", "LooptapRecorder", "Tee", "addons", "flow_to_exchange"]

#: Seconds the writer process may take to start (spawn, imports, opening the cassette).
_WRITER_START_TIMEOUT = 60.0


class Tee:
    """The stream callable: forwards every chunk untouched and keeps a timestamped copy."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: list[tuple[float, bytes]] = []

    def __call__(self, data: bytes) -> bytes:
        try:
            if data:
                self.chunks.append((time.time(), data))
        except Exception:  # never break the stream: a raising callable drops the chunk
            pass
        return data


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
        if tee is not None:
            ex.response_chunks = [(max(0.0, t - start), c) for t, c in tee.chunks]
        elif resp.raw_content:
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
        self._sent = 0
        self._done = threading.Condition()
        self._inbox: Any = None
        self._outbox: Any = None
        self._process: Any = None
        self._collector: threading.Thread | None = None
        self._extra_hosts: tuple[str, ...] = ()
        self._flow_bodies = True
        self._durable = False
        #: Durable mode: one future per round trip handed to the writer, in hand-off order (the
        #: writer answers in that order); resolved when its answer arrives.
        self._acks: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        #: Round trips finished but not yet handed to the writer (see ``_finish``).
        self._pending: deque[tuple[http.HTTPFlow, Tee | None, str | None]] = deque()

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
        if "looptap_output" in updated or "looptap_fsync" in updated:
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
        self._inbox, self._outbox = mp.Queue(), mp.Queue()
        self._process = mp.Process(target=writer_main, args=(str(path), fsync, self._inbox, self._outbox, os.getpid()), name="looptap-writer", daemon=True)
        self._process.start()
        # Recording starts when the writer can write: until then a round trip would exist only in
        # a queue, and a crash in the first seconds (spawn + imports) would lose it.
        try:
            kind, msg = self._outbox.get(timeout=_WRITER_START_TIMEOUT)
        except queue.Empty:
            kind, msg = "storage_error", f"the writer process did not start within {_WRITER_START_TIMEOUT:.0f} s"
        if kind != "ready":
            self._process.kill()
            self._process.join(timeout=5)
            self._process = self._inbox = self._outbox = None
            raise exceptions.OptionsError(f"looptap_output: {msg}")
        self.output = path
        self._collector = threading.Thread(target=self._collect, name="looptap-results", daemon=True)
        self._collector.start()

    # -- hooks -----------------------------------------------------------------------------------
    def _records(self, flow: http.HTTPFlow) -> bool:
        if self._inbox is None:
            return False
        mode = flow.client_conn.proxy_mode
        if isinstance(mode, mode_specs.ReverseMode):
            return True
        return is_llm_host(flow.request.pretty_host, self._extra_hosts)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        if self._records(flow):
            if self._durable and "content-length" in flow.response.headers:
                # A fixed-length body is complete for the client with its last byte, which a tee
                # would pass on before the round trip is stored; buffered, mitmproxy sends it only
                # after the hooks, i.e. after the write. (Chunked streams keep streaming: their
                # terminating chunk is what waits.)
                flow.response.stream = False
                return
            tee = Tee()
            flow.response.stream = tee
            flow.metadata["looptap_tee"] = tee
        else:
            flow.response.stream = True  # never buffer traffic we do not record

    def response(self, flow: http.HTTPFlow) -> None:
        self._finish(flow, None)

    def error(self, flow: http.HTTPFlow) -> None:
        self._finish(flow, flow.error.msg if flow.error else "error")

    def _finish(self, flow: http.HTTPFlow, error: str | None) -> None:
        if not self._records(flow) or flow.metadata.get("looptap_done"):
            return
        flow.metadata["looptap_done"] = True
        tee = flow.metadata.get("looptap_tee")
        if self._flow_bodies and tee is not None and flow.response is not None and flow.response.raw_content is None:
            # Make the flow self-contained for mitmweb / flow files (once, not per chunk).
            flow.response.raw_content = b"".join(c for _, c in tee.chunks)
        with self._done:
            self._sent += 1
        # mitmproxy sends the end of a streamed response to the client only after this hook
        # returns: the conversion and the hand-off run on the next turn of the event loop instead,
        # off the client's critical path.
        self._pending.append((flow, tee, error))
        if self._durable:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                flow.metadata["looptap_ack"] = (loop, loop.create_future())
            self._capture_pending()  # the response waits for the writer: start it at once
            return
        if len(self._pending) == 1:
            try:
                asyncio.get_running_loop().call_soon(self._capture_pending)
            except RuntimeError:  # no running loop (a direct call, e.g. from a test harness)
                self._capture_pending()

    def _capture_pending(self) -> None:
        while self._pending:
            self._capture(*self._pending.popleft())

    def _capture(self, flow: http.HTTPFlow, tee: Tee | None, error: str | None) -> None:
        ack = flow.metadata.pop("looptap_ack", None)
        try:
            ex = flow_to_exchange(flow, tee, error)
            inbox = self._inbox
            if inbox is None:
                raise RuntimeError("the writer is stopped")
            if ack is not None:
                flow.metadata["looptap_wait"] = ack[1]
                self._acks.append(ack)  # before the put: the writer's answer may come at once
            inbox.put(ex)
        except Exception as exc:  # fail open: keep the traffic flowing, say what was lost
            if ack is not None:
                try:
                    self._acks.remove(ack)
                except ValueError:
                    pass
                ack[1].set_result(None)
            with self._done:
                self.failed_records += 1
                self._done.notify_all()
            print(f"looptap: could not capture {flow.request.method} {flow.request.pretty_url}: {exc}", file=sys.stderr)

    async def _wait_written(self, flow: http.HTTPFlow) -> None:
        fut = flow.metadata.pop("looptap_wait", None)
        if fut is not None:
            await fut

    def done(self) -> None:
        self._stop_writer()

    # -- the writer process ------------------------------------------------------------------------
    def _collect(self) -> None:
        outbox = self._outbox
        while True:
            try:
                kind, _msg = outbox.get()
            except (EOFError, OSError, ValueError):
                return
            if kind in ("ok", "storage_error", "failed"):
                self._release_ack()
            with self._done:
                if kind == "ok":
                    self.recorded += 1
                elif kind == "storage_error":
                    self.storage_errors += 1
                elif kind == "failed":
                    self.failed_records += 1
                elif kind == "stop":
                    self._done.notify_all()
                    return
                self._done.notify_all()

    def _release_ack(self) -> None:
        try:
            loop, fut = self._acks.popleft()
        except IndexError:
            return
        try:
            loop.call_soon_threadsafe(_resolve, fut)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until every captured round trip has been handled by the writer."""
        self._capture_pending()
        deadline = time.monotonic() + timeout
        with self._done:
            while self.recorded + self.storage_errors + self.failed_records < self._sent:
                if self._process is None or not self._process.is_alive():
                    lost = self._sent - (self.recorded + self.storage_errors + self.failed_records)
                    self.storage_errors += lost
                    print(f"looptap: STORAGE ERROR: the writer process stopped; {lost} round trips not recorded", file=sys.stderr)
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._done.wait(min(left, 0.2))

    def _stop_writer(self) -> None:
        self._capture_pending()
        while self._acks:  # nothing will answer them once the writer is gone
            self._release_ack()
        if self._process is None:
            return
        self.flush()
        self._inbox.put(None)
        self._process.join(timeout=30)
        self._outbox.put(("stop", None))
        if self._collector is not None:
            self._collector.join(timeout=5)
        self._process = self._inbox = self._outbox = self._collector = None


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
