"""A loopback LLM upstream whose answers a test scripts per request, from the request's content.

Where :mod:`tests.support.upstream` serves *recorded* answers chosen by a header, this one lets a
test steer a real agent: a ``route`` callable sees each request (path, headers, JSON body) and
returns what the model "says": text and tool calls. Used to make Claude Code delegate to a Task
sub-agent, or an openai-agents agent hand off to another, through the real ``looptap run``.

Pure stdlib (``http.server`` in a thread), so it runs in the test environment::

    def route(req: ScriptedRequest) -> Reply:
        return Reply.tool("Bash", {"command": "echo hi"}) if req.turn_zero else Reply.say("done")

    with ScriptedUpstream(route) as up:
        ...  # point the recorder's --upstream at up.url
        up.log  # every request: its path, body and the reply, in arrival order

Wire formats written (docs/WIRE.md):

* Anthropic Messages (``…/messages``): an SSE stream (``message_start`` … ``message_stop``) when the
  body asks ``stream``, else one JSON message. ``…/messages/count_tokens`` answers a count.
* OpenAI Responses (``…/responses``): one JSON response (non-streamed only).
* OpenAI Chat Completions (``…/chat/completions``): one JSON completion (non-streamed only).

Anything else gets a 404 JSON error. Tool-call ids are unique per server (``toolu_s0001``…), and
so are response ids (``Logged.response_id``: what ties a recorded round trip to the route's label).

:func:`claude_code_side_call` tells Claude Code's side calls from its agents' own loops (the
shapes are described in tests/proxy/test_e2e_claude_scripted.py).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """What the model says: text, then tool calls (either may be empty)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    #: A label for the log ("main:task", "side:title"...): what the route took this request for.
    what: str = ""

    @classmethod
    def say(cls, text: str, what: str = "") -> Reply:
        return cls(text=text, what=what)

    @classmethod
    def tool(cls, name: str, arguments: dict[str, Any], what: str = "", text: str = "") -> Reply:
        return cls(text=text, calls=(Call(name, arguments),), what=what)


@dataclass
class ScriptedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    family: str

    # -- views of the body shared by the families ------------------------------------------------
    @property
    def model(self) -> str:
        return str(self.body.get("model", "")) if isinstance(self.body, dict) else ""

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream")) if isinstance(self.body, dict) else False

    @property
    def system(self) -> str:
        """The system prompt as one string (Anthropic ``system``, Responses ``instructions``, or the
        Chat ``system`` messages)."""
        b = self.body if isinstance(self.body, dict) else {}
        if self.family == "anthropic":
            return _text_of(b.get("system"))
        if self.family == "openai_responses":
            return str(b.get("instructions") or "")
        return "\n".join(_text_of(m.get("content")) for m in b.get("messages", []) if isinstance(m, dict) and m.get("role") in ("system", "developer"))

    @property
    def tools(self) -> list[str]:
        b = self.body if isinstance(self.body, dict) else {}
        out = []
        for t in b.get("tools") or []:
            if isinstance(t, dict):
                name = t.get("name") or (t.get("function") or {}).get("name")
                if name:
                    out.append(str(name))
        return out

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        b = self.body if isinstance(self.body, dict) else {}
        for t in b.get("tools") or []:
            if isinstance(t, dict) and (t.get("name") == name or (t.get("function") or {}).get("name") == name):
                schema = t.get("input_schema") or t.get("parameters") or (t.get("function") or {}).get("parameters")
                return schema if isinstance(schema, dict) else None
        return None

    @property
    def messages(self) -> list[Any]:
        b = self.body if isinstance(self.body, dict) else {}
        items = b.get("input") if self.family == "openai_responses" else b.get("messages")
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        return list(items or [])

    def user_texts(self) -> list[str]:
        """The text of every user message, in order (tool results left out)."""
        out = []
        for m in self.messages:
            if isinstance(m, dict) and m.get("role") == "user":
                t = _text_of(m.get("content"), skip_results=True)
                if t:
                    out.append(t)
        return out

    def tool_results(self) -> list[str]:
        """The text of every tool result in the history, in order."""
        out = []
        for m in self.messages:
            if not isinstance(m, dict):
                continue
            if m.get("type") == "function_call_output" or m.get("role") == "tool":
                out.append(_text_of(m.get("output", m.get("content"))))
            elif isinstance(m.get("content"), list):
                out += [_text_of(p.get("content")) for p in m["content"] if isinstance(p, dict) and p.get("type") == "tool_result"]
        return out

    def last_user_text(self) -> str:
        """The last text part of the last message when it is the user's (tool results left out)."""
        m = self.messages[-1] if self.messages else None
        if not isinstance(m, dict) or m.get("role") != "user":
            return ""
        c = m.get("content")
        if isinstance(c, list):
            texts = [p["text"] for p in c if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
            return texts[-1] if texts else ""
        return c if isinstance(c, str) else ""

    def summary(self) -> str:
        """One line for the log: model, system prompt's first words, tools, messages."""
        sys_words = " ".join(self.system.split()[:12])
        tools = ",".join(self.tools)
        tools = tools if len(tools) < 120 else tools[:117] + "..."
        return f"{self.family} model={self.model} stream={self.stream} msgs={len(self.messages)} results={len(self.tool_results())} tools=[{tools}] system={sys_words!r}"


def _text_of(v: Any, skip_results: bool = False) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts = []
        for p in v:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                if p.get("type") == "tool_result":
                    if not skip_results:
                        parts.append(_text_of(p.get("content")))
                elif isinstance(p.get("text"), str):
                    parts.append(p["text"])
        return "\n".join(parts)
    return ""


def claude_code_side_call(req: ScriptedRequest) -> str | None:
    """Which of Claude Code's side calls ``req`` is, or ``None`` for an agent's own loop (the main
    loop or a sub-agent's). Claude Code 2.1.328 in ``-p`` mode (tests/proxy/test_e2e_claude_scripted.py):

    * ``tool_use_summary``: no tools, system prompt "Write a short summary label describing what
      these tool calls accomplished…", one user message quoting the calls (no history);
    * ``agent_summary``: a running sub-agent's request (its system prompt, tools and history) whose
      last user message ends with "Describe your most recent action in 3-5 words…";
    * ``helper``: any other request without tools (a side call of a kind not seen yet).
    """
    if req.family != "anthropic":
        return None
    if not req.tools:
        return "tool_use_summary" if "Write a short summary label" in req.system else "helper"
    if req.last_user_text().startswith("Describe your most recent action"):
        return "agent_summary"
    return None


@dataclass
class Logged:
    seq: int
    request: ScriptedRequest
    reply: Reply | None
    status: int
    ids: list[str] = field(default_factory=list)
    #: The id of the response served (``msg_s…``, ``resp_s…``, ``chatcmpl-s…``).
    response_id: str | None = None

    def line(self) -> str:
        what = self.reply.what if self.reply else "-"
        said = "" if self.reply is None else f" -> {[c.name for c in self.reply.calls]} {self.reply.text[:40]!r}"
        return f"#{self.seq} {self.request.method} {self.request.path} [{what}] {self.request.summary()}{said} ({self.status})"


Route = Callable[[ScriptedRequest], Reply]


def _family(path: str) -> str | None:
    if path.endswith("/messages/count_tokens"):
        return "anthropic_count"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/chat/completions"):
        return "openai_chat"
    return None


class ScriptedUpstream:
    def __init__(self, route: Route, *, delay: float = 0.002) -> None:
        self.route = route
        self.delay = delay
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):04d}"

    def __enter__(self) -> ScriptedUpstream:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json(404, {"error": {"type": "not_found", "message": "scripted upstream: no such endpoint"}})

            def do_POST(self) -> None:
                raw = self._body()
                path = urlsplit(self.path).path
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                fam = _family(path)
                req = ScriptedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, fam or "unknown")
                if fam == "anthropic_count":
                    upstream._record(req, None, 200)
                    self._json(200, {"input_tokens": max(1, len(raw) // 4)})
                    return
                if fam is None or not isinstance(body, dict):
                    upstream._record(req, None, 404)
                    self._json(404, {"error": {"type": "not_found", "message": "scripted upstream: no such endpoint"}})
                    return
                try:
                    reply = upstream.route(req)
                except Exception as exc:  # a route bug is the test's failure, shown in the log
                    upstream._record(req, Reply(what=f"route error: {exc!r}"), 500)
                    self._json(500, {"error": {"type": "api_error", "message": f"scripted route failed: {exc!r}"}})
                    return
                logged = upstream._record(req, reply, 200)
                usage_in = max(1, len(raw) // 4)
                if fam == "anthropic":
                    self._anthropic(req, reply, usage_in, logged)
                elif fam == "openai_responses":
                    self._json(200, upstream._responses(req, reply, usage_in, logged))
                else:
                    self._json(200, upstream._chat(req, reply, usage_in, logged))

            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("content-length") or 0)
                return self.rfile.read(n) if n else b""

            def _json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if status >= 400:
                    self.send_header("x-should-retry", "false")
                self.end_headers()
                self.wfile.write(data)

            def _anthropic(self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged) -> None:
                msg_id = upstream.new_id("msg_s")
                logged.response_id = msg_id
                blocks: list[dict[str, Any]] = []
                if reply.text:
                    blocks.append({"type": "text", "text": reply.text})
                for c in reply.calls:
                    tid = upstream.new_id("toolu_s")
                    logged.ids.append(tid)
                    blocks.append({"type": "tool_use", "id": tid, "name": c.name, "input": c.arguments})
                stop = "tool_use" if reply.calls else "end_turn"
                out_tokens = max(1, len(json.dumps(blocks)) // 4)
                usage = {"input_tokens": usage_in, "output_tokens": out_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
                if not req.stream:
                    self._json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": req.model, "content": blocks,
                                     "stop_reason": stop, "stop_sequence": None, "usage": usage})
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                start_usage = {**usage, "output_tokens": 1}
                self._event("message_start", {"type": "message_start", "message": {
                    "id": msg_id, "type": "message", "role": "assistant", "model": req.model, "content": [],
                    "stop_reason": None, "stop_sequence": None, "usage": start_usage}})
                for i, b in enumerate(blocks):
                    if b["type"] == "text":
                        self._event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                        words = b["text"].split(" ")
                        for j, w in enumerate(words):
                            piece = w if j == len(words) - 1 else w + " "
                            self._event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}})
                    else:
                        self._event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                            "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                        js = json.dumps(b["input"])
                        for k in range(0, len(js), 16):
                            self._event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": js[k:k + 16]}})
                    self._event("content_block_stop", {"type": "content_block_stop", "index": i})
                self._event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": out_tokens}})
                self._event("message_stop", {"type": "message_stop"})
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _event(self, name: str, data: dict[str, Any]) -> None:
                chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
                if upstream.delay:
                    time.sleep(upstream.delay)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-upstream", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _record(self, req: ScriptedRequest, reply: Reply | None, status: int) -> Logged:
        with self._lock:
            logged = Logged(len(self.log), req, reply, status)
            self.log.append(logged)
            return logged

    def _responses(self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if reply.text:
            output.append({"type": "message", "id": self.new_id("msg_s"), "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
        for c in reply.calls:
            cid = self.new_id("call_s")
            logged.ids.append(cid)
            output.append({"type": "function_call", "id": self.new_id("fc_s"), "call_id": cid, "name": c.name,
                           "arguments": json.dumps(c.arguments), "status": "completed"})
        out_tokens = max(1, len(json.dumps(output)) // 4)
        logged.response_id = self.new_id("resp_s")
        return {
            "id": logged.response_id, "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": req.model, "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None, "instructions": req.body.get("instructions"), "metadata": {},
            "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": {"input_tokens": usage_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage_in + out_tokens},
        }

    def _chat(self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged) -> dict[str, Any]:
        calls = []
        for c in reply.calls:
            cid = self.new_id("call_s")
            logged.ids.append(cid)
            calls.append({"id": cid, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}})
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = calls
        out_tokens = max(1, len(json.dumps(message)) // 4)
        logged.response_id = self.new_id("chatcmpl-s")
        return {
            "id": logged.response_id, "object": "chat.completion", "created": int(time.time()), "model": req.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}],
            "usage": {"prompt_tokens": usage_in, "completion_tokens": out_tokens, "total_tokens": usage_in + out_tokens},
        }
