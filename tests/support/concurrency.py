"""Many alike agents through the real recorder (issue 14): the harness shared by
``bench/concurrency.py`` and ``tests/proxy/test_concurrency.py``.

A scripted upstream (stdlib HTTP server on 127.0.0.1, no mitmproxy) answers every family with a
tool call while the request carries fewer than 4 tool results, then a final text. N agents run in
one child process (a thread each, plain urllib with each family's wire JSON) under ``looptap run``,
with the same prompt, random small sleeps before each request (seeded). Each request carries the
private header ``X-Bench-Agent``/``X-Bench-Turn`` (ground truth; threading never reads it). The
cassette is then read with ``looptap show --json`` and scored against that truth.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support import progress

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ("openai_chat", "openai_responses", "anthropic", "gemini")
VARIANTS = ("clean", "dropped_result", "wrong_id", "no_echo", "same_ids")
#: The turn (request index, from 0) on which the buggy agent's request carries its bug; the
#: upstream emits two parallel calls on the turn before it.
BUG_TURN = 2
#: Codes that name each client bug (any of them on the bug turn counts as found).
BUG_CODES = {
    "dropped_result": {"C.dropped_tool_result", "C.missing_tool_result", "C.unanswered_tool_call"},
    "wrong_id": {"C.wrong_tool_call_id", "C.orphan_tool_result"},
    "no_echo": {"C.assistant_not_echoed"},
}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def count_results(family: str, body: Any) -> int:
    n = 0
    if family == "openai_chat":
        n = sum(
            1 for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "tool"
        )
    elif family == "openai_responses":
        items = body.get("input", [])
        n = (
            sum(1 for m in items if isinstance(m, dict) and m.get("type") == "function_call_output")
            if isinstance(items, list)
            else 0
        )
    elif family == "anthropic":
        for m in body.get("messages", []):
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                n += sum(
                    1
                    for b in m["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                )
    elif family == "gemini":
        for c in body.get("contents", []):
            if isinstance(c, dict):
                n += sum(
                    1 for p in c.get("parts", []) if isinstance(p, dict) and "functionResponse" in p
                )
    return n


def family_of(path: str) -> str | None:
    if path.endswith("/chat/completions"):
        return "openai_chat"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/messages"):
        return "anthropic"
    if ":generateContent" in path:
        return "gemini"
    return None


def upstream_answer(family: str, ids: list[str] | None, turn: int) -> dict[str, Any]:
    """The upstream's answer: calls with ``ids``, or the final text when ``ids`` is None."""
    usage_in, usage_out = 100 + 20 * turn, 12
    if family == "openai_chat":
        msg: dict[str, Any] = {"role": "assistant", "content": None if ids else "All done."}
        if ids:
            msg["tool_calls"] = [
                {
                    "id": i,
                    "type": "function",
                    "function": {
                        "name": "lookup",
                        "arguments": json.dumps({"q": f"item {turn}-{k}"}),
                    },
                }
                for k, i in enumerate(ids)
            ]
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {"index": 0, "message": msg, "finish_reason": "tool_calls" if ids else "stop"}
            ],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }
    if family == "openai_responses":
        out: list[dict[str, Any]] = (
            [
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": i,
                    "name": "lookup",
                    "arguments": json.dumps({"q": f"item {turn}-{k}"}),
                    "status": "completed",
                }
                for k, i in enumerate(ids)
            ]
            if ids
            else [
                {
                    "type": "message",
                    "id": "msg_bench",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "All done.", "annotations": []}],
                }
            ]
        )
        return {
            "id": "resp_" + secrets.token_hex(8),
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "gpt-4o-mini-2024-07-18",
            "output": out,
            "usage": {
                "input_tokens": usage_in,
                "output_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }
    if family == "anthropic":
        content: list[dict[str, Any]] = (
            [
                {"type": "tool_use", "id": i, "name": "lookup", "input": {"q": f"item {turn}-{k}"}}
                for k, i in enumerate(ids)
            ]
            if ids
            else [{"type": "text", "text": "All done."}]
        )
        return {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "claude-3-5-haiku-20241022",
            "content": content,
            "stop_reason": "tool_use" if ids else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
        }
    parts: list[dict[str, Any]] = (
        [
            {"functionCall": {"id": i, "name": "lookup", "args": {"q": f"item {turn}-{k}"}}}
            for k, i in enumerate(ids)
        ]
        if ids
        else [{"text": "All done."}]
    )
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": usage_in,
            "candidatesTokenCount": usage_out,
            "totalTokenCount": usage_in + usage_out,
        },
        "modelVersion": "gemini-2.0-flash",
    }


class BenchUpstream:
    """The scripted upstream. ``same_ids``: every agent's ids count from ``call_0``; else random."""

    def __init__(self, same_ids: bool = False) -> None:
        self.same_ids = same_ids
        self.counters: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        self.served = 0
        bench = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                family = family_of(self.path.split("?")[0])
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                if family is None or not isinstance(body, dict):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                agent = self.headers.get("x-bench-agent", "?")
                turn = int(self.headers.get("x-bench-turn", "0"))
                two = self.headers.get("x-bench-two") == "1"
                ids = None
                if count_results(family, body) < 4:
                    ids = [bench._new_id(agent) for _ in range(2 if two else 1)]
                with bench.lock:
                    bench.served += 1
                self._send(200, upstream_answer(family, ids, turn))

            def _send(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            # 64 agents connect at once; the default backlog of 5 drops some (502)
            request_queue_size = 256

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _new_id(self, agent: str) -> str:
        if not self.same_ids:
            return "call_" + secrets.token_hex(8)
        with self.lock:
            k = self.counters[agent]
            self.counters[agent] += 1
        return f"call_{k}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> BenchUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


#: The child process: N agent threads. argv: family n bug buggy_agent seed.
CHILD = r'''
import json, os, random, sys, threading, time
import urllib.request, urllib.error
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

family, n, bug, buggy, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
PROMPT = "Look up the three items in the catalogue and summarise them."
SYSTEM = "You are a careful catalogue assistant."
SCHEMA = json.loads(sys.argv[6])
BUG_TURN = int(sys.argv[7])
errors = []

def url():
    if family == "openai_chat":
        return os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    if family == "openai_responses":
        return os.environ["OPENAI_BASE_URL"].rstrip("/") + "/responses"
    if family == "anthropic":
        return os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
    return os.environ["GOOGLE_GEMINI_BASE_URL"].rstrip("/") + "/v1beta/models/gemini-2.0-flash:generateContent"

def first():
    if family == "openai_chat":
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    if family == "openai_responses":
        return [{"role": "user", "content": PROMPT}]
    if family == "anthropic":
        return [{"role": "user", "content": PROMPT}]
    return [{"role": "user", "parts": [{"text": PROMPT}]}]

def body(hist):
    if family == "openai_chat":
        return {"model": "gpt-4o-mini", "messages": hist,
                "tools": [{"type": "function", "function": {"name": "lookup", "parameters": SCHEMA}}]}
    if family == "openai_responses":
        return {"model": "gpt-4o-mini", "instructions": SYSTEM, "input": hist,
                "tools": [{"type": "function", "name": "lookup", "parameters": SCHEMA}]}
    if family == "anthropic":
        return {"model": "claude-3-5-haiku-20241022", "max_tokens": 1024, "system": SYSTEM, "messages": hist,
                "tools": [{"name": "lookup", "input_schema": SCHEMA}]}
    return {"systemInstruction": {"parts": [{"text": SYSTEM}]}, "contents": hist,
            "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": SCHEMA}]}]}

def calls(resp):
    """(echo items, [(id, name)])"""
    if family == "openai_chat":
        m = resp["choices"][0]["message"]
        return [m], [(c["id"], c["function"]["name"]) for c in m.get("tool_calls") or []]
    if family == "openai_responses":
        out = resp["output"]
        return out, [(o["call_id"], o["name"]) for o in out if o["type"] == "function_call"]
    if family == "anthropic":
        return [{"role": "assistant", "content": resp["content"]}], [(b["id"], b["name"]) for b in resp["content"] if b["type"] == "tool_use"]
    c = resp["candidates"][0]["content"]
    return [c], [(p["functionCall"].get("id"), p["functionCall"]["name"]) for p in c["parts"] if "functionCall" in p]

def results(pairs):
    if family == "openai_chat":
        return [{"role": "tool", "tool_call_id": i, "content": "found: " + i[-4:]} for i, _ in pairs]
    if family == "openai_responses":
        return [{"type": "function_call_output", "call_id": i, "output": "found: " + i[-4:]} for i, _ in pairs]
    if family == "anthropic":
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "found: " + i[-4:]} for i, _ in pairs]}]
    return [{"role": "user", "parts": [{"functionResponse": {"id": i, "name": name, "response": {"result": "found"}}} for i, name in pairs]}]

def agent(a, rng):
    hist = first()
    headers = {"x-bench-agent": str(a), "authorization": "Bearer sk-bench", "x-api-key": "sk-bench",
               "x-goog-api-key": "bench", "anthropic-version": "2023-06-01"}
    mine = a == buggy and bug != "clean"
    if True:
        for turn in range(12):
            time.sleep(rng.uniform(0, 0.05))
            h = dict(headers, **{"x-bench-turn": str(turn)})
            if mine and bug == "dropped_result" and turn == BUG_TURN - 1:
                h["x-bench-two"] = "1"
            req = urllib.request.Request(url(), data=json.dumps(body(hist)).encode(), method="POST",
                                         headers=dict(h, **{"content-type": "application/json"}))
            try:
                with OPENER.open(req, timeout=120) as r:
                    resp = json.loads(r.read())
            except urllib.error.HTTPError as e:
                errors.append(f"agent {a} turn {turn}: HTTP {e.code}")
                return
            if mine and turn == BUG_TURN:
                return  # the buggy request was the agent's last
            echo, pairs = calls(resp)
            if not pairs:
                return
            res_pairs = pairs
            if mine and turn == BUG_TURN - 1:
                if bug == "dropped_result":
                    res_pairs = pairs[:1]
                elif bug == "wrong_id":
                    res_pairs = [("call_bogus" + ("" if i is None else i[-4:]), n_) for i, n_ in pairs]
                elif bug == "no_echo":
                    echo = []
            hist = hist + echo + results(res_pairs)

rngs = [random.Random(seed * 1000 + a) for a in range(n)]
threads = [threading.Thread(target=agent, args=(a, rngs[a])) for a in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
'''  # noqa: E501


@dataclass
class Score:
    family: str
    n: int
    variant: str
    conversations: int = 0
    grouped: bool = False
    wrong_groups: list[str] = field(default_factory=list)
    false_findings: list[str] = field(default_factory=list)
    bug_found: bool | None = None
    bug_codes: list[str] = field(default_factory=list)
    ambiguous: int = 0
    round_trips: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The goals: exact conversations, every one a single agent's turns in order, no false
        finding, the bug found on its turn (same ids: only the counts are reported)."""
        if self.error:
            return False
        if self.variant == "same_ids":
            return not self.false_findings
        return (
            self.conversations == self.n
            and self.grouped
            and not self.false_findings
            and self.bug_found is not False
        )


def run_case(family: str, n: int, variant: str, workdir: Path, *, seed: int = 1) -> Score:
    """Record N agents under ``looptap run`` and score the cassette."""
    from tests.support.recorder import RECORDER, clean_env

    score = Score(family, n, variant)
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "agents.py"
    script.write_text(CHILD)
    out = workdir / "run.jsonl"
    bug = variant if variant in BUG_CODES else "clean"
    buggy = n // 2
    with BenchUpstream(same_ids=variant == "same_ids") as up:
        argv = [*RECORDER, "run", "-o", str(out), "--confdir", str(workdir / "conf")]
        for name in ("openai", "anthropic", "gemini"):
            argv += ["--upstream", f"{name}={up.url}"]
        argv += [
            "--",
            str(REPO / ".venv" / "bin" / "python"),
            str(script),
            family,
            str(n),
            bug,
            str(buggy),
            str(seed),
            json.dumps(SCHEMA),
            str(BUG_TURN),
        ]
        proc = progress.run(argv, env=clean_env(), capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        score.error = f"looptap run exited {proc.returncode}: {proc.stderr[-1500:]}"
        return score
    show = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", "--json", str(out)],
        env=clean_env(),
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    if show.returncode != 0:
        score.error = f"looptap show exited {show.returncode}: {show.stderr[-1500:]}"
        return score
    # Ground truth by seq: the request headers of each record, in recording order.
    truth: dict[int, tuple[int, int]] = {}
    lines = out.read_text().splitlines()[1:]
    for i, line in enumerate(lines):
        rec = json.loads(line)
        hdrs = {str(k).lower(): str(v) for k, v in rec.get("request", {}).get("headers", [])}
        seq = rec.get("derived", {}).get("seq", i) if isinstance(rec.get("derived"), dict) else i
        truth[seq] = (int(hdrs["x-bench-agent"]), int(hdrs["x-bench-turn"]))
    views = [json.loads(ln) for ln in show.stdout.splitlines() if ln.strip().startswith("{")]
    views = [v for v in views if v.get("schema") == "looptap.roundtrip/1"]
    score.round_trips = len(views)
    # conv -> [(turn, agent, agent_turn)]
    convs: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for v in views:
        agent, aturn = truth[v["seq"]]
        convs[str(v.get("conversation"))].append((int(v.get("turn") or 0), agent, aturn))
        for f in v.get("findings") or []:
            code = str(f.get("code"))
            if code == "C.thread_ambiguous":
                score.ambiguous += 1
            if f.get("severity") not in ("warning", "error"):
                continue
            if bug != "clean" and agent == buggy and aturn == BUG_TURN:
                score.bug_codes.append(code)
                continue
            score.false_findings.append(f"agent {agent} turn {aturn}: {code}")
    score.conversations = len(convs)
    score.grouped = True
    for cid, items in sorted(convs.items()):
        items.sort()
        agents = {a for _, a, _ in items}
        aturns = [t for _, _, t in items]
        if len(agents) != 1 or aturns != list(range(len(aturns))):
            score.grouped = False
            score.wrong_groups.append(f"{cid}: " + " ".join(f"a{a}t{t}" for _, a, t in items))
    if bug != "clean":
        score.bug_found = bool(set(score.bug_codes) & BUG_CODES[bug])
    return score


def env_ready() -> bool:
    from tests.support.recorder import PROXY_PYTHON

    return (
        PROXY_PYTHON is not None
        and (REPO / ".venv" / "bin" / "python").exists()
        and os.name == "posix"
    )
