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
* OpenAI Responses (``…/responses``): one JSON response, or its SSE stream when asked;
  ``previous_response_id`` brings in the history of an answer this server gave, and one it never
  gave is the API's 400 ``previous_response_not_found``.
* OpenAI Chat Completions (``…/chat/completions``): one JSON completion (non-streamed only).

Anything else gets a 404 JSON error. Tool-call ids are unique per server (``toolu_s0001``…), and
so are response ids (``Logged.response_id``: what ties a recorded round trip to the route's label).

:func:`claude_code_side_call` tells Claude Code's side calls from its agents' own loops (the
shapes are described in tests/proxy/test_e2e_claude_scripted.py).

**A hostile upstream** (tests/proxy/test_hostile_upstreams.py): a reply's ``wire`` sends a JSON
answer wrongly (:data:`WIRES`), and the server's ``quirks`` (:data:`QUIRKS`) break HTTP/1.1 for
every request: what a proxy that shares or reuses upstream connections must survive.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

#: How a reply's JSON answer goes out (``Reply.wire``), besides as it should (``""``).
WIRES = {
    "stale": "a second, unrequested answer follows it at once (a Chat answer's text: STALE: and "
    "the first's)",
    "short": "its Content-Length is 3 bytes short of the body sent",
    "204": "status 204, with the body all the same",
    "retryable": "an error (a refusal) sent without ``x-should-retry: false``: an SDK retries it "
    "as it would the real API's 503",
    "close": "the connection closed `idle` seconds after it, unannounced (a request sent on it "
    "meanwhile is never read)",
    "idle408": "a 408 and a close when no request follows on the connection within `idle` seconds",
    "bad_head": "an unparseable status line instead, then a close",
}
#: What a server does to every request (``ScriptedUpstream(quirks=...)``).
QUIRKS = {
    "cl_framing": "request bodies framed by Content-Length alone, Transfer-Encoding ignored (the "
    "back end of a CL.TE request smuggling)",
    "early": "POSTs answered from their head, before the body is read (the route sees an empty "
    "JSON body; the request's body is logged once read)",
    "head_body": "a HEAD is answered 200 with a body",
}
_STALE = "STALE: "


@dataclass(frozen=True)
class Call:
    name: str
    #: The arguments; a string is sent as it is where the wire carries arguments as a string
    #: (Chat, Responses): how a test makes a model emit arguments that are not JSON.
    arguments: dict[str, Any] | str

    @property
    def wire(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """What the model says: text, then tool calls (either may be empty)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    #: A label for the log ("main:task", "side:title"...): what the route took this request for.
    what: str = ""
    #: The answer was cut at the token cap (Chat's finish reason ``length``, Anthropic's
    #: ``max_tokens``, a Responses answer ``incomplete`` for ``max_output_tokens``): the text is
    #: sent as it is, the finish reason says it is cut.
    cut: bool = False
    #: How the answer goes out (:data:`WIRES`; a JSON answer of Chat Completions, Responses or
    #: Gemini).
    wire: str = ""
    #: The API refuses the request instead: its error message, sent with :attr:`status` in the
    #: API's own error shape (OpenAI's with :attr:`param` and :attr:`code`).
    refused: str = ""
    status: int = 400
    param: str | None = None
    code: str | None = None
    #: Azure's ``innererror`` beside an OpenAI-shaped error (its content filter's verdict), under
    #: :attr:`inner_key` (``inner_error`` in newer API versions' shape).
    inner: dict[str, Any] | None = None
    inner_key: str = "innererror"
    #: Fields the API adds to an Anthropic answer beside its content (``context_management`` with
    #: the edits it applied): in the message, or in a stream's ``message_delta``.
    extra: dict[str, Any] | None = None
    #: The input tokens the answer's usage reports (default: the request's size / 4): what makes a
    #: client that watches its context window (Claude Code's auto-compact) think it is full.
    usage_in: int | None = None
    #: The output tokens the answer's usage reports (default: its size / 4): the request's cap
    #: with a finish reason of a natural stop is an answer the cap cut while the API did not say so
    #: (looptap's ``A.stop_at_cap``).
    usage_out: int | None = None

    @classmethod
    def refuse(
        cls,
        message: str,
        param: str | None = None,
        code: str | None = None,
        status: int = 400,
        inner: dict[str, Any] | None = None,
        inner_key: str = "innererror",
    ) -> Reply:
        return cls(
            refused=message,
            status=status,
            param=param,
            code=code,
            what="refused",
            inner=inner,
            inner_key=inner_key,
        )

    @classmethod
    def say(cls, text: str, what: str = "", wire: str = "") -> Reply:
        return cls(text=text, what=what, wire=wire)

    @classmethod
    def truncated(cls, text: str, what: str = "") -> Reply:
        return cls(text=text, what=what, cut=True)

    @classmethod
    def tool(
        cls, name: str, arguments: dict[str, Any] | str, what: str = "", text: str = ""
    ) -> Reply:
        return cls(text=text, calls=(Call(name, arguments),), what=what)


@dataclass
class ScriptedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    family: str
    #: Responses API: the history the server holds for ``previous_response_id`` (its inputs and
    #: outputs), which :attr:`messages` puts before the request's own input.
    prior: list[Any] = field(default_factory=list)
    #: The number of the connection that carried it (1, 2 … in the order they were accepted).
    connection: int = 0
    #: The body as it came, framing removed (JSON or not).
    raw: bytes = b""
    #: Responses API: the items each ``compaction`` item this server made stands for (what the
    #: API decrypts from its ``encrypted_content``), which :attr:`messages` puts in its place.
    compacted: dict[str, list[Any]] = field(default_factory=dict)

    # -- views of the body shared by the families ------------------------------------------------
    @property
    def model(self) -> str:
        if self.family == "bedrock":  # /model/{modelId}/converse
            return unquote(urlsplit(self.path).path.split("/model/", 1)[-1].rsplit("/", 1)[0])
        return str(self.body.get("model", "")) if isinstance(self.body, dict) else ""

    @property
    def stream(self) -> bool:
        if self.family == "gemini":
            return urlsplit(self.path).path.endswith(":streamGenerateContent")
        if self.family == "bedrock":
            return urlsplit(self.path).path.endswith("/converse-stream")
        return bool(self.body.get("stream")) if isinstance(self.body, dict) else False

    @property
    def system(self) -> str:
        """The system prompt as one string (Anthropic ``system``, Responses ``instructions``, or the
        Chat ``system`` messages)."""
        b = self.body if isinstance(self.body, dict) else {}
        if self.family in ("anthropic", "bedrock"):
            return _text_of(b.get("system"))
        if self.family == "openai_responses":
            return str(b.get("instructions") or "")
        if self.family == "gemini":
            si = b.get("systemInstruction") or b.get("system_instruction") or {}
            return _text_of(si.get("parts") if isinstance(si, dict) else si)
        return "\n".join(
            _text_of(m.get("content"))
            for m in b.get("messages", [])
            if isinstance(m, dict) and m.get("role") in ("system", "developer")
        )

    @property
    def tools(self) -> list[str]:
        out = []
        for t in self._tool_list():
            if isinstance(t, dict):
                for decl in t.get("functionDeclarations") or t.get("function_declarations") or []:
                    if isinstance(decl, dict) and decl.get("name"):
                        out.append(str(decl["name"]))
                name = t.get("name") or (t.get("function") or {}).get("name")
                if name:
                    out.append(str(name))
        return out

    def _tool_list(self) -> list[Any]:
        """The tools offered (Bedrock's ``toolConfig.tools`` as their ``toolSpec``)."""
        b = self.body if isinstance(self.body, dict) else {}
        if self.family == "bedrock":
            specs = (b.get("toolConfig") or {}).get("tools") or []
            return [
                {
                    **t["toolSpec"],
                    "input_schema": (t["toolSpec"].get("inputSchema") or {}).get("json"),
                }
                for t in specs
                if isinstance(t, dict) and isinstance(t.get("toolSpec"), dict)
            ]
        return list(b.get("tools") or [])

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        for t in self._tool_list():
            if not isinstance(t, dict):
                continue
            # Gemini
            for decl in t.get("functionDeclarations") or t.get("function_declarations") or []:
                if isinstance(decl, dict) and decl.get("name") == name:
                    schema = (
                        decl.get("parameters")
                        or decl.get("parametersJsonSchema")
                        or decl.get("parameters_json_schema")
                    )
                    return schema if isinstance(schema, dict) else None
            if t.get("name") == name or (t.get("function") or {}).get("name") == name:
                schema = (
                    t.get("input_schema")
                    or t.get("parameters")
                    or (t.get("function") or {}).get("parameters")
                )
                return schema if isinstance(schema, dict) else None
        return None

    @property
    def messages(self) -> list[Any]:
        b = self.body if isinstance(self.body, dict) else {}
        key = {"openai_responses": "input", "gemini": "contents"}.get(self.family, "messages")
        items = b.get(key)
        if isinstance(items, str):
            return [*self.prior, {"role": "user", "content": items}]
        out = list(self.prior)
        for item in items or []:
            held = (
                self.compacted.get(str(item.get("encrypted_content")))
                if isinstance(item, dict) and item.get("type") == "compaction"
                else None
            )
            out += [item] if held is None else held
        return out

    def user_texts(self) -> list[str]:
        """The text of every user message, in order (tool results left out)."""
        out = []
        for m in self.messages:
            if isinstance(m, dict) and m.get("role") == "user":
                t = _text_of(m.get("content", m.get("parts")), skip_results=True)
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
            elif isinstance(m.get("parts"), list):  # Gemini
                out += [
                    json.dumps(p["functionResponse"].get("response"))
                    for p in m["parts"]
                    if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
                ]
            elif isinstance(m.get("content"), list):
                out += [
                    _text_of(p.get("content"))
                    for p in m["content"]
                    if isinstance(p, dict) and p.get("type") == "tool_result"
                ]
                out += [  # Bedrock Converse
                    _text_of(p["toolResult"].get("content"))
                    for p in m["content"]
                    if isinstance(p, dict) and isinstance(p.get("toolResult"), dict)
                ]
        return out

    def last_user_text(self) -> str:
        """The last text part of the last message when it is the user's (tool results left out)."""
        m = self.messages[-1] if self.messages else None
        if not isinstance(m, dict) or m.get("role") != "user":
            return ""
        c = m.get("content")
        if isinstance(c, list):
            texts = [
                p["text"]
                for p in c
                if isinstance(p, dict)
                and p.get("type") == "text"
                and isinstance(p.get("text"), str)
            ]
            return texts[-1] if texts else ""
        return c if isinstance(c, str) else ""

    def summary(self) -> str:
        """One line for the log: model, system prompt's first words, tools, messages."""
        sys_words = " ".join(self.system.split()[:12])
        tools = ",".join(self.tools)
        tools = tools if len(tools) < 120 else tools[:117] + "..."
        return (
            f"{self.family} model={self.model} stream={self.stream} msgs={len(self.messages)} "
            f"results={len(self.tool_results())} tools=[{tools}] system={sys_words!r}"
        )


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
    loop or a sub-agent's). Claude Code 2.1.328 in ``-p`` mode
    (tests/proxy/test_e2e_claude_scripted.py):

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


def bash_steps(commands: list[str]) -> Callable[[ScriptedRequest], Reply]:
    """A model that asks for each of ``commands`` in turn with the ``bash`` tool
    (tests/support/bash_agent.py), one per answer, then answers ``done``."""

    def answer(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done < len(commands):
            return Reply.tool("bash", {"command": commands[done]}, what=f"step{done}")
        return Reply.say("done", what="answer")

    return answer


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
        said = (
            ""
            if self.reply is None
            else f" -> {[c.name for c in self.reply.calls]} {self.reply.text[:40]!r}"
        )
        return (
            f"#{self.seq} {self.request.method} {self.request.path} [{what}] "
            f"{self.request.summary()}{said} ({self.status})"
        )


Route = Callable[[ScriptedRequest], Reply]
#: Bedrock ConverseStream's content type (AWS event-stream frames).
STREAM_AWS = "application/vnd.amazon.eventstream"


def _family(path: str) -> str | None:
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    if path.startswith("/model/") and path.endswith(("/converse", "/converse-stream")):
        return "bedrock"
    # As the Anthropic API: its paths are under /v1 (a client that leaves it out gets a 404 there).
    if path.endswith("/v1/messages/count_tokens"):
        return "anthropic_count"
    if path.endswith("/v1/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/responses/compact"):
        return "openai_compact"
    if path.endswith("/chat/completions"):
        return "openai_chat"
    return None


#: What a hostile upstream does on a connection after each answer (``ScriptedUpstream(after=…)``).
AFTER = ("stale", "close", "408")
#: Seconds a hostile upstream's connection is idle after an answer before its ``408``.
_IDLE = 0.02


class ScriptedUpstream:
    """``validate=True`` answers a request whose tool results do not pair with its calls as the API
    does: a 400 with the API's exact text (docs/WIRE.md G.2), before the route is asked.

    ``after`` makes it a hostile server, on every connection after each answer (whatever the
    client's ``Connection`` header said): ``"stale"`` sends a second answer nobody asked for (a
    chat completion saying ``STALE-n``); ``"close"`` keeps the connection open and closes it,
    unanswered, when a next request comes on it (an idle timeout that fires as the client reuses
    it: :attr:`closed_at_reuse` counts them); ``"408"`` sends ``408 Request Timeout`` with
    ``Connection: close`` and closes it (an idle timeout of :data:`_IDLE`). A client that reused a
    connection would take the stale answer or the 408 for its next request's, or fail that
    request; :attr:`afters` counts the answers after which it was done."""

    def __init__(
        self,
        route: Route,
        *,
        delay: float = 0.002,
        validate: bool = False,
        ids: str = "",
        tls: tuple[Path, Path] | None = None,
        after: str | None = None,
        quirks: Collection[str] = (),
        idle: float = 0.05,
        pieces: int = 0,
    ) -> None:
        assert after is None or after in AFTER, after
        unknown = set(quirks) - set(QUIRKS)
        if unknown:
            raise ValueError(f"unknown quirks {sorted(unknown)} (known: {sorted(QUIRKS)})")
        self.quirks = frozenset(quirks)
        #: How long the connection of a ``wire="idle408"`` or ``"close"`` answer stays open idle.
        self.idle = idle
        #: Those connections still open (a test that waits for 0 knows they are closed).
        self.idling = 0
        self.route = route
        self.after = after
        #: How many answers :attr:`after` followed.
        self.afters = 0
        #: ``after="close"``: requests that came on a connection after its answer (closed).
        self.closed_at_reuse = 0
        self._connections = itertools.count(1)
        #: Stream each tool call's arguments this many characters per event (0: whole).
        self.pieces = pieces
        #: (certificate, key): served over HTTPS with them (:attr:`url` then starts with
        #: ``https://``).
        self.tls = tls
        #: Put in every id this server makes (``resp_s`` + ids + number): two servers' ids differ.
        self.ids = ids
        self.delay = delay
        self.validate = validate
        #: Responses API: the function calls of each response served, by response id (what
        #: ``previous_response_id`` brings into a request), and every output item by its id
        #: (what an ``item_reference`` names).
        self.response_calls: dict[str, list[str]] = {}
        self.items: dict[str, dict[str, Any]] = {}
        self.histories: dict[str, list[Any]] = {}
        #: Responses API: what each compaction item's ``encrypted_content`` stands for.
        self.compactions: dict[str, list[Any]] = {}
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._server.server_address[1]}"

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{self.ids}{next(self._ids):04d}"

    def __enter__(self) -> ScriptedUpstream:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            #: The request being answered (a POST's).
            req: ScriptedRequest
            # The head and the body go out in two writes: with Nagle on, a keep-alive client's
            # delayed ACK held each answer ~40 ms (bench/fork.py's plain recording row).
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.connection_no = next(upstream._connections)

            def handle_one_request(self) -> None:
                if upstream.after == "close" and getattr(self, "answered", False):
                    # a request on a connection that had its answer: closed, unanswered
                    self.close_connection = True
                    if self.rfile.readline(65537):
                        with upstream._lock:
                            upstream.closed_at_reuse += 1
                    return
                super().handle_one_request()
                if upstream.after is not None and self.raw_requestline:
                    self.answered = True
                    with contextlib.suppress(OSError):
                        self._after(upstream.after)

            def _after(self, after: str) -> None:
                with upstream._lock:
                    upstream.afters += 1
                    n = upstream.afters
                if after == "close":
                    # kept open whatever the client said, to be closed when it is reused
                    self.close_connection = False
                    return
                if after == "stale":
                    stale = json.dumps(
                        {
                            "id": f"chatcmpl-stale{n}",
                            "object": "chat.completion",
                            "created": 0,
                            "model": "stale",
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": f"STALE-{n}"},
                                    "finish_reason": "stop",
                                }
                            ],
                        }
                    ).encode()
                    self.wfile.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(stale), stale)
                    )
                else:
                    # idle a moment first: the 408 comes apart from the answer, as an idle
                    # timeout's does (not in the answer's last read)
                    time.sleep(_IDLE)
                    self.wfile.write(
                        b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n"
                        b"connection: close\r\n\r\n"
                    )
                    self.close_connection = True
                self.wfile.flush()

            def do_HEAD(self) -> None:
                upstream._record(
                    ScriptedRequest("HEAD", self.path, self._headers(), None, "unknown"), None, 200
                )
                body = {"object": "list", "data": []}
                self._json(200, body, "head_body" if "head_body" in upstream.quirks else "")

            def _headers(self) -> dict[str, str]:
                return {k.lower(): v for k, v in self.headers.items()}

            def do_GET(self) -> None:
                self._json(
                    404,
                    {
                        "error": {
                            "type": "not_found",
                            "message": "scripted upstream: no such endpoint",
                        }
                    },
                )

            def do_POST(self) -> None:
                early = "early" in upstream.quirks
                raw = b"" if early else self._body()
                self._post(raw, {} if early else _json_or_none(raw))
                if early:  # the body read only now: the answer went out first
                    self.req.raw = self._body()
                    self.req.body = _json_or_none(self.req.raw)

            def _post(self, raw: bytes, body: Any) -> None:
                path = urlsplit(self.path).path
                fam = _family(path)
                req = self.req = ScriptedRequest(
                    "POST",
                    self.path,
                    self._headers(),
                    body,
                    fam or "unknown",
                    raw=raw,
                    connection=self.connection_no,
                )
                if (
                    fam == "openai_responses"
                    and isinstance(body, dict)
                    and body.get("previous_response_id")
                ):
                    prev = str(body["previous_response_id"])
                    # as the API: an answer this server never gave
                    if prev not in upstream.histories:
                        upstream._record(
                            req, Reply(what=f"rejected: previous_response_not_found {prev}"), 400
                        )
                        self._json(
                            400,
                            {
                                "error": {
                                    "message": f"Previous response with id '{prev}' not found.",
                                    "type": "invalid_request_error",
                                    "param": "previous_response_id",
                                    "code": "previous_response_not_found",
                                }
                            },
                        )
                        return
                    req.prior = list(upstream.histories[prev])
                if fam in ("openai_responses", "openai_compact"):
                    req.compacted = dict(upstream.compactions)
                if fam == "openai_compact" and isinstance(body, dict):
                    upstream._record(req, Reply(what="side:compaction"), 200)
                    self._json(200, upstream._compact(req))
                    return
                if fam == "anthropic_count":
                    upstream._record(req, None, 200)
                    self._json(200, {"input_tokens": max(1, len(raw) // 4)})
                    return
                if fam is None or not isinstance(body, dict):
                    upstream._record(req, None, 404)
                    self._json(
                        404,
                        {
                            "error": {
                                "type": "not_found",
                                "message": "scripted upstream: no such endpoint",
                            }
                        },
                    )
                    return
                try:
                    reply = upstream.route(req)
                except Exception as exc:  # a route bug is the test's failure, shown in the log
                    upstream._record(req, Reply(what=f"route error: {exc!r}"), 500)
                    self._json(
                        500,
                        {
                            "error": {
                                "type": "api_error",
                                "message": f"scripted route failed: {exc!r}",
                            }
                        },
                    )
                    return
                if reply.refused:
                    upstream._record(req, reply, reply.status)
                    body = _error_body(fam, reply.refused, reply.param, reply.code)
                    if reply.inner is not None:
                        body["error"][reply.inner_key] = reply.inner
                    self._json(reply.status, body, reply.wire)
                    return
                if upstream.validate:
                    problem = pairing_problem(req, upstream)
                    if problem is not None:
                        upstream._record(req, Reply(what=f"rejected: {problem}"), 400)
                        self._json(400, _error_body(fam, problem))
                        return
                logged = upstream._record(req, reply, 200)
                usage_in = reply.usage_in or max(1, len(raw) // 4)
                if fam == "anthropic":
                    self._anthropic(req, reply, usage_in, logged)
                    return
                if fam == "bedrock":
                    from tests.support.scripted_bedrock import converse, converse_stream

                    answer = converse(upstream, reply, usage_in, logged)
                    if req.stream:
                        self._chunks(converse_stream(answer), STREAM_AWS)
                    else:
                        self._json(200, answer, reply.wire)
                    return
                if fam == "openai_responses":
                    body_out = upstream._responses(req, reply, usage_in, logged)
                elif fam == "gemini":
                    body_out = upstream._gemini(req, reply, usage_in, logged)
                else:
                    body_out = upstream._chat(req, reply, usage_in, logged)
                if not req.stream:
                    self._json(200, body_out, reply.wire)
                    return
                from tests.support.upstream import synth_stream

                if fam == "openai_chat" and not (
                    (req.body.get("stream_options") or {}).get("include_usage")
                ):
                    # the API sends usage in a stream only when asked
                    body_out = {**body_out, "usage": None}
                # without alt=sse: one JSON array
                if fam == "gemini" and "alt=sse" not in self.path:
                    self._chunks(
                        [b"[" + json.dumps(body_out).encode() + b"]"],
                        "application/json; charset=UTF-8",
                    )
                    return
                self._chunks(synth_stream(fam, body_out, upstream.pieces), "text/event-stream")

            def _body(self) -> bytes:
                if (
                    "cl_framing" not in upstream.quirks
                    and self.headers.get("transfer-encoding", "").lower() == "chunked"
                ):
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

            def _json(self, status: int, obj: Any, wire: str = "") -> None:
                """A JSON answer, sent as ``wire`` says (:data:`WIRES`), in one write: what a
                hostile answer sends beyond it reaches the peer with it."""
                if wire in ("idle408", "close"):
                    with upstream._lock:
                        upstream.idling += 1
                try:
                    self.wfile.write(self._answer(status, obj, wire))
                except OSError:
                    self.close_connection = True
                    return
                if wire == "bad_head":
                    self.close_connection = True
                elif wire in ("idle408", "close"):
                    self._idle(wire)

            def _answer(self, status: int, obj: Any, wire: str) -> bytes:
                if wire == "bad_head":
                    return b"HTTP/1.1 2OO OK\r\ncontent-length: 0\r\n\r\n"
                data = json.dumps(obj).encode()
                code = 204 if wire == "204" else status
                head = [
                    f"HTTP/1.1 {code} {HTTPStatus(code).phrase}",
                    f"Server: {self.version_string()}",
                    f"Date: {self.date_time_string()}",
                    "content-type: application/json",
                    f"content-length: {len(data) - (3 if wire == 'short' else 0)}",
                    *(["x-should-retry: false"] if status >= 400 and wire != "retryable" else []),
                ]
                out = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
                if self.command != "HEAD" or wire == "head_body":
                    out += data
                if wire == "stale":
                    out += self._answer(status, _restated(obj, _STALE), "")
                return out

            def _idle(self, wire: str) -> None:
                """After an answer: ``close``: a close ``upstream.idle`` seconds later; ``idle408``:
                a 408 and a close then, unless a request came."""
                try:
                    if wire == "close":
                        time.sleep(upstream.idle)
                    elif select.select([self.connection], [], [], upstream.idle)[0]:
                        return
                    else:
                        self.wfile.write(
                            b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\n"
                            b"content-length: 7\r\n\r\ntimeout"
                        )
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                finally:
                    with upstream._lock:
                        upstream.idling -= 1

            def _anthropic(
                self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged
            ) -> None:
                msg_id = upstream.new_id("msg_s")
                logged.response_id = msg_id
                blocks: list[dict[str, Any]] = []
                if reply.text:
                    blocks.append({"type": "text", "text": reply.text})
                for c in reply.calls:
                    tid = upstream.new_id("toolu_s")
                    logged.ids.append(tid)
                    blocks.append(
                        {"type": "tool_use", "id": tid, "name": c.name, "input": c.arguments}
                    )
                stop = "max_tokens" if reply.cut else "tool_use" if reply.calls else "end_turn"
                out_tokens = reply.usage_out or max(1, len(json.dumps(blocks)) // 4)
                usage = {
                    "input_tokens": usage_in,
                    "output_tokens": out_tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                }
                if not req.stream:
                    self._json(
                        200,
                        {
                            "id": msg_id,
                            "type": "message",
                            "role": "assistant",
                            "model": req.model,
                            "content": blocks,
                            "stop_reason": stop,
                            "stop_sequence": None,
                            "usage": usage,
                            **(reply.extra or {}),
                        },
                    )
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                start_usage = {**usage, "output_tokens": 1}
                self._event(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": msg_id,
                            "type": "message",
                            "role": "assistant",
                            "model": req.model,
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": start_usage,
                        },
                    },
                )
                for i, b in enumerate(blocks):
                    if b["type"] == "text":
                        self._event(
                            "content_block_start",
                            {
                                "type": "content_block_start",
                                "index": i,
                                "content_block": {"type": "text", "text": ""},
                            },
                        )
                        words = b["text"].split(" ")
                        for j, w in enumerate(words):
                            piece = w if j == len(words) - 1 else w + " "
                            self._event(
                                "content_block_delta",
                                {
                                    "type": "content_block_delta",
                                    "index": i,
                                    "delta": {"type": "text_delta", "text": piece},
                                },
                            )
                    else:
                        self._event(
                            "content_block_start",
                            {
                                "type": "content_block_start",
                                "index": i,
                                "content_block": {
                                    "type": "tool_use",
                                    "id": b["id"],
                                    "name": b["name"],
                                    "input": {},
                                },
                            },
                        )
                        # arguments given as a string stream as they are (a call cut mid-JSON)
                        raw = b["input"]
                        js = raw if isinstance(raw, str) else json.dumps(raw)
                        for k in range(0, len(js), 16):
                            self._event(
                                "content_block_delta",
                                {
                                    "type": "content_block_delta",
                                    "index": i,
                                    "delta": {
                                        "type": "input_json_delta",
                                        "partial_json": js[k : k + 16],
                                    },
                                },
                            )
                    self._event("content_block_stop", {"type": "content_block_stop", "index": i})
                self._event(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": out_tokens},
                        **(reply.extra or {}),
                    },
                )
                self._event("message_stop", {"type": "message_stop"})
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunks(self, chunks: list[bytes], content_type: str) -> None:
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                    if upstream.delay:
                        time.sleep(upstream.delay)
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
        if self.tls is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(*self.tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="scripted-upstream", daemon=True
        )
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

    def _responses(
        self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged
    ) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if reply.text:
            output.append(
                {
                    "type": "message",
                    "id": self.new_id("msg_s"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        for c in reply.calls:
            cid = self.new_id("call_s")
            logged.ids.append(cid)
            output.append(
                {
                    "type": "function_call",
                    "id": self.new_id("fc_s"),
                    "call_id": cid,
                    "name": c.name,
                    "arguments": c.wire,
                    "status": "completed",
                }
            )
        out_tokens = reply.usage_out or max(1, len(json.dumps(output)) // 4)
        logged.response_id = self.new_id("resp_s")
        with self._lock:
            self.response_calls[logged.response_id] = [
                o["call_id"] for o in output if o["type"] == "function_call"
            ]
            self.items.update((o["id"], o) for o in output)
            self.histories[logged.response_id] = [*req.messages, *output]
        if reply.cut:
            for o in output:
                o["status"] = "incomplete"
        return {
            "id": logged.response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if reply.cut else "completed",
            "model": req.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if reply.cut else None,
            "instructions": req.body.get("instructions"),
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "usage": {
                "input_tokens": usage_in,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage_in + out_tokens,
            },
        }

    def _compact(self, req: ScriptedRequest) -> dict[str, Any]:
        """``POST /v1/responses/compact`` as the API answers it: the input's user messages, then
        one ``compaction`` item whose opaque ``encrypted_content`` stands for the whole input
        (held here, so a later request that sends the item back is read with it)."""
        history = list(req.messages)
        token = "gAAAA" + self.new_id("cmp_s")
        with self._lock:
            self.compactions[token] = history
        users = [
            {
                "type": "message",
                "id": self.new_id("msg_s"),
                "role": "user",
                "status": "completed",
                "content": (
                    [{"type": "input_text", "text": m["content"]}]
                    if isinstance(m.get("content"), str)
                    else m.get("content")
                ),
            }
            for m in history
            if isinstance(m, dict)
            and m.get("role") == "user"
            and m.get("type", "message") == "message"
        ]
        size = max(1, len(req.raw) // 4)
        return {
            "id": self.new_id("resp_s"),
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [
                *users,
                {"type": "compaction", "id": self.new_id("cmp_s"), "encrypted_content": token},
            ],
            "usage": {
                "input_tokens": size,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": size + 1,
            },
        }

    def _gemini(
        self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged
    ) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        for c in reply.calls:
            # the Gemini API gives calls no id: they pair by name and order
            logged.ids.append(c.name)
            parts.append({"functionCall": {"name": c.name, "args": c.arguments}})
        out_tokens = reply.usage_out or max(1, len(json.dumps(parts)) // 4)
        logged.response_id = self.new_id("gem_s")
        model = urlsplit(req.path).path.rsplit("/", 1)[-1].split(":", 1)[0]
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": usage_in,
                "candidatesTokenCount": out_tokens,
                "totalTokenCount": usage_in + out_tokens,
            },
            "modelVersion": model,
            "responseId": logged.response_id,
        }

    def _chat(
        self, req: ScriptedRequest, reply: Reply, usage_in: int, logged: Logged
    ) -> dict[str, Any]:
        calls = []
        for c in reply.calls:
            cid = self.new_id("call_s")
            logged.ids.append(cid)
            calls.append(
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.wire}}
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = calls
        out_tokens = reply.usage_out or max(1, len(json.dumps(message)) // 4)
        logged.response_id = self.new_id("chatcmpl-s")
        return {
            "id": logged.response_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "length" if reply.cut else "tool_calls" if calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": out_tokens,
                "total_tokens": usage_in + out_tokens,
            },
        }


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _restated(obj: Any, prefix: str) -> Any:
    """A Chat Completions answer's copy whose text starts with ``prefix``."""
    out = json.loads(json.dumps(obj))
    for choice in out.get("choices") or []:
        msg = choice.get("message") or {}
        msg["content"] = prefix + (msg.get("content") or "")
    return out


# ---------------------------------------------------------------------------------------------
# Pairing checks as the APIs make them (docs/WIRE.md G.2: the exact texts)


def _error_body(
    family: str, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    if family == "anthropic":
        return {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
            "request_id": "req_scripted",
        }
    if family == "gemini":
        return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


def pairing_problem(req: ScriptedRequest, upstream: ScriptedUpstream) -> str | None:
    """The API's 400 text for a request whose tool results do not pair with its calls, else
    ``None``."""
    check = {
        "openai_chat": _chat_pairing,
        "anthropic": _anthropic_pairing,
        "gemini": _gemini_pairing,
    }.get(req.family)
    if check is not None:
        return check(req.messages)
    if req.family == "openai_responses":
        return _responses_pairing(req, upstream)
    return None


def _chat_pairing(messages: list[Any]) -> str | None:
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "tool":
            return (
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                "message with 'tool_calls'."
            )
        calls = (
            [c.get("id") for c in (m.get("tool_calls") or [])]
            if isinstance(m, dict) and m.get("role") == "assistant"
            else []
        )
        i += 1
        if not calls:
            continue
        answered = []
        while (
            i < len(messages)
            and isinstance(messages[i], dict)
            and messages[i].get("role") == "tool"
        ):
            cid = messages[i].get("tool_call_id")
            if cid not in calls:
                return (
                    f"Invalid parameter: 'tool_call_id' of '{cid}' not "
                    "found in 'tool_calls' of previous message."
                )
            answered.append(cid)
            i += 1
        missing = [c for c in calls if c not in answered]
        if missing:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(map(str, missing))}"
            )
    return None


def _blocks(m: Any, kind: str) -> list[dict[str, Any]]:
    c = m.get("content") if isinstance(m, dict) else None
    return (
        [b for b in c if isinstance(b, dict) and b.get("type") == kind]
        if isinstance(c, list)
        else []
    )


def _anthropic_pairing(messages: list[Any]) -> str | None:
    for n, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        uses = [b.get("id") for b in _blocks(m, "tool_use")] if m.get("role") == "assistant" else []
        prev = messages[n - 1] if n else None
        prev_uses = (
            [b.get("id") for b in _blocks(prev, "tool_use")]
            if isinstance(prev, dict) and prev.get("role") == "assistant"
            else []
        )
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for k, b in enumerate(m["content"]):
                if (
                    isinstance(b, dict)
                    and b.get("type") == "tool_result"
                    and b.get("tool_use_id") not in prev_uses
                ):
                    return (
                        f"messages.{n}.content.{k}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {b.get('tool_use_id')}. Each `tool_result` block "
                        "must have a corresponding `tool_use` block in the previous message."
                    )
        if uses and n + 1 < len(messages):
            answered = {b.get("tool_use_id") for b in _blocks(messages[n + 1], "tool_result")}
            missing = [u for u in uses if u not in answered]
            if missing:
                return (
                    f"messages.{n}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
    return None


def _gemini_pairing(contents: list[Any]) -> str | None:
    for n, c in enumerate(contents):
        parts = c.get("parts") if isinstance(c, dict) else None
        calls = [p for p in parts or [] if isinstance(p, dict) and "functionCall" in p]
        if not calls or n + 1 >= len(contents):
            continue
        nxt = contents[n + 1].get("parts") if isinstance(contents[n + 1], dict) else None
        answers = [p for p in nxt or [] if isinstance(p, dict) and "functionResponse" in p]
        if len(answers) != len(calls):
            return (
                "Please ensure that the number of function response parts is equal to the number "
                "of function call parts of the function call turn."
            )
    return None


def _responses_pairing(req: ScriptedRequest, upstream: ScriptedUpstream) -> str | None:
    calls: list[str] = list(
        upstream.response_calls.get(str(req.body.get("previous_response_id") or ""), [])
    )
    outputs: list[str] = []
    for item in req.messages:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "item_reference":
            item = upstream.items.get(str(item.get("id")), {})
        if item.get("type") == "function_call":
            calls.append(str(item.get("call_id")))
        elif item.get("type") == "function_call_output":
            cid = str(item.get("call_id"))
            if cid not in calls:
                return f"No tool call found for function call output with call_id {cid}."
            outputs.append(cid)
    for cid in calls:
        if cid not in outputs:
            return f"No tool output found for function call {cid}."
    return None
