"""The tools' HTTP through the real ``looptap run`` (issue 84, items 1 and 2): real agents whose
tools call a loopback tool server of ours (127.0.0.1 only) while a scripted model
(:class:`~tests.support.scripted.ScriptedUpstream`, Chat Completions) drives their loop.

1. The openai SDK (``.venv-clients``, pinned in tests/clients/requirements.txt) with httpx tools:
   turn 0 asks for two calls at once (Paris and Tokyo, run in parallel threads), turn 1 for two
   equal calls (Oslo twice), turn 2 for an order (a POST whose JSON body carries the arguments),
   then the model answers. Every tool request passes the recorder's forward proxy (``HTTP_PROXY``;
   with ``--tool-http-loopback`` ``NO_PROXY`` names only looptap's own listeners) and is
   recorded beside the model calls as a tool exchange, never a turn; the calls with different
   arguments are linked to the model's call each served, the two equal ones are left unlinked
   and said so; ``show``, ``show --json`` and the replay matcher read the file. A tool
   credential (header and query) never reaches it.
2. A LangChain agent (langchain-core 1.7.2 and langchain-openai 1.7.3 from ``.venv-clients``:
   ``bind_tools`` and ``@tool``) whose tools call the server with requests 2.34.2, and a
   LlamaIndex ``FunctionAgent`` (llama-index-core 0.14.25, llama-index-llms-openai 0.8.3) whose
   ``FunctionTool``s do the same (it runs an answer's calls concurrently); the LlamaIndex tool
   turns a failure into ``{}``, as the openai SDK agent's does, so the planted 503 is named at C
   for both. The same for pydantic-ai (pydantic-ai-slim[openai] 2.68.0, ``.venv-traces``) with
   httpx tools, CrewAI 1.15.30 (``.venv-crewai``) with requests tools, and the AI SDK (``ai``
   6.0.325, ``@ai-sdk/openai`` 3.0.141, ``.npm-clients``) with ``fetch`` tools: Node 20's
   ``fetch`` reads no proxy variable, and looptap run's ``NODE_OPTIONS`` shim puts it through the
   recorder all the same; the shared run sets undici's ``EnvHttpProxyAgent`` itself (as the
   replays of tests/proxy/test_e2e_tool_replay.py need: a replay's environment has no shim).
3. ``--no-tool-http`` and ``--tool-http-exclude``: nothing of the tools is recorded.
4. Without ``--tool-http-loopback``, loopback stays direct: a client that reads ``NO_PROXY`` by
   host alone (aiohttp, google-genai's async client) still reaches the model's listener (with the
   loopback listed by port only, mitmproxy refused its call as a connection to itself).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from looptap.cassettes.matching import Matcher
from looptap.cassettes.reading import open_run
from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import PROXY_PYTHON, RECORDER, clean_env, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream
from tests.support.tool_http import LoopbackServer

REPO = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = Path(
    os.environ.get("LOOPTAP_CLIENTS_PYTHON") or REPO / ".venv-clients" / "bin" / "python"
)

TRACES_PYTHON = Path(
    os.environ.get("LOOPTAP_TRACES_PYTHON") or REPO / ".venv-traces" / "bin" / "python"
)
CREWAI_PYTHON = Path(
    os.environ.get("LOOPTAP_CREWAI_PYTHON") or REPO / ".venv-crewai" / "bin" / "python"
)
NPM_CLIENTS = Path(os.environ.get("LOOPTAP_NPM_CLIENTS") or REPO / ".npm-clients")
NODE = shutil.which("node")

pytestmark = [
    needs_recorder,
    pytest.mark.skipif(not CLIENTS_PYTHON.exists(), reason="no .venv-clients (.ci/run makes it)"),
]

#: The tool's credential, sent in a header and the query: never in the cassette.
TOOL_KEY = "wx-7Hq2ZpL9vRk4TtYbN3mC"


class ToolServer(LoopbackServer):
    """A weather and orders API on 127.0.0.1: ``GET /weather?city=…``, ``POST /orders``."""

    seen: list[tuple[str, str, str | None]]  # type: ignore[assignment]

    def __init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                outer.seen.append(("GET", self.path, self.headers.get("x-api-key")))
                if url.path.startswith("/orders/"):  # A1001 is on file, nothing else is
                    oid = url.path.removeprefix("/orders/")
                    if oid != "A1001":
                        self._answer(404, {"error": f"order {oid} not found"})
                        return
                    self._answer(200, {"order_id": oid, "item": "kettle", "state": "shipped"})
                    return
                city = (parse_qs(url.query).get("city") or ["?"])[0]
                if city == "Lyon":  # the planted failure
                    self._answer(503, {"error": {"message": "weather backend overloaded"}})
                    return
                self._answer(200, {"city": city, "temp_c": 10 + len(city), "sky": "clear"})

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                order = json.loads(self.rfile.read(n) or b"{}")
                outer.seen.append(("POST", self.path, self.headers.get("x-api-key")))
                self._answer(201, {"order": "o-1", "item": order.get("item"), "state": "placed"})

        super().__init__(Handler)

    def __enter__(self) -> ToolServer:
        super().__enter__()
        return self


def route(req: ScriptedRequest) -> Reply:
    """Parallel calls with different arguments, then two equal ones, then an order, then text."""
    done = len(req.tool_results())
    if done == 0:
        return Reply(calls=(Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Tokyo"})))  # fmt: skip  # noqa: E501
    if done == 2:
        return Reply(calls=(Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Oslo"})))  # fmt: skip  # noqa: E501
    if done == 4:
        return Reply.tool("place_order", {"item": "umbrella", "quantity": 2})
    return Reply.say("Ordered an umbrella.")


OPENAI_AGENT = """
import json, os
from concurrent.futures import ThreadPoolExecutor
import httpx
from openai import OpenAI

TOOLS = os.environ["TOOL_URL"]
KEY = os.environ["TOOL_KEY"]
http = httpx.Client(headers={"x-api-key": KEY})  # trust_env: HTTP_PROXY, NO_PROXY, SSL_CERT_FILE

def get_weather(city):
    try:  # as many tools do: a failure becomes an empty result
        r = http.get(f"{TOOLS}/weather", params={"city": city, "key": KEY})
        r.raise_for_status()
        return r.text
    except httpx.HTTPError:
        return "{}"

def place_order(item, quantity):
    return http.post(f"{TOOLS}/orders", json={"item": item, "quantity": quantity}).text

def get_order(order_id):
    return http.get(f"{TOOLS}/orders/{order_id}").text  # a 404's body as it came

client = OpenAI()
fn = lambda name, props: {"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {p: {"type": t} for p, t in props.items()}}}}
tools = [fn("get_weather", {"city": "string"}), fn("place_order", {"item": "string", "quantity": "integer"}),
         fn("get_order", {"order_id": "string"})]
messages = [{"role": "user", "content": "Weather in Paris, Tokyo and Oslo, then order an umbrella."}]
for _ in range(6):
    msg = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
    if not msg.tool_calls:
        print("answer:", msg.content)
        break
    messages.append(msg.model_dump(exclude_none=True))
    def run(tc):
        args = json.loads(tc.function.arguments)
        return {"role": "tool", "tool_call_id": tc.id,
                "content": {"get_weather": get_weather, "place_order": place_order,
                            "get_order": get_order}[tc.function.name](**args)}
    with ThreadPoolExecutor(4) as pool:  # the answer's calls run at once
        messages.extend(pool.map(run, msg.tool_calls))
"""  # noqa: E501


#: What each agent's process gets besides the tool server's URL (and the node agent ``DISPATCH``).
AGENT_ENV = {
    "TOOL_KEY": TOOL_KEY, "NPM_CLIENTS": str(NPM_CLIENTS), "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false", "OTEL_SDK_DISABLED": "true",
}  # fmt: skip


def looptap_run(tmp_path: Path, agent: str, fake: ScriptedUpstream, tools: ToolServer,
                *extra: str, python: Path = CLIENTS_PYTHON, node: bool = False,
                **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:  # fmt: skip
    script = tmp_path / ("agent.cjs" if node else "agent.py")
    script.write_text(agent)
    run = tmp_path / "run.jsonl"
    proc = progress.run(
        [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp_path / "conf"),
         "--upstream", f"openai={fake.url}", "--tool-http-loopback", *extra,  # (on by default)
         "--", NODE or "node" if node else str(python), str(script)],
        env=clean_env(OPENAI_API_KEY="sk-test-tools", TOOL_URL=tools.url,
                      LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON), **{**AGENT_ENV, **env}),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )  # fmt: skip
    return proc, run


def _show(*args: str) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [*RECORDER, "show", *args], capture_output=True, text=True, env=clean_env()
    )


@pytest.fixture
def openai_run(tool_agent_run: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    return tool_agent_run("openai")  # recorded once a session (tests/proxy/conftest.py)


def test_the_tools_http_is_recorded_beside_the_model_calls(openai_run: dict[str, Any]) -> None:
    proc, run, seen = openai_run["proc"], openai_run["run"], openai_run["seen"]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: Ordered an umbrella." in proc.stdout
    assert len(seen) == 5 and all(key == TOOL_KEY for _, _, key in seen)
    cas = read_records(run)
    assert not cas.problems
    llm = [ex for ex in cas.exchanges if not ex.tool]
    tool = [ex for ex in cas.exchanges if ex.tool]
    assert len(llm) == 4 and all("/chat/completions" in ex.url for ex in llm)
    assert sorted((ex.method, urlsplit(ex.url).path, ex.status) for ex in tool) == [
        ("GET", "/weather", 200), ("GET", "/weather", 200), ("GET", "/weather", 200),
        ("GET", "/weather", 200), ("POST", "/orders", 201),
    ]  # fmt: skip
    assert all(urlsplit(ex.url).netloc == urlsplit(openai_run["tool_url"]).netloc for ex in tool)
    # the tool's answer whole, its request body as sent
    assert any(json.loads(ex.response_body).get("state") == "placed" for ex in tool)
    assert any(json.loads(ex.request_body or b"{}").get("item") == "umbrella" for ex in tool)
    # redacted as the model calls are: the tool's key, in a header and in the query, never kept
    assert TOOL_KEY.encode() not in run.read_bytes()


def test_each_tool_exchange_is_linked_to_the_call_it_served(openai_run: dict[str, Any]) -> None:
    read = open_run(openai_run["run"], whole=True)
    assert len(read.analysis.turns) == 4  # the tool exchanges are never turns
    assert read.analysis.findings == []  # a clean run: no finding
    assert [list(c.turns) for c in read.analysis.conversations] == [[0, 3, 6, 8]]  # seqs
    by_seq = {ex.seq: ex for ex, _ in read.pairs}
    calls = {
        tc.id: (rt.seq, tc.name, tc.arguments)
        for _, rt in read.pairs
        if rt.response is not None
        for tc in rt.response.tool_calls
    }
    http = [c for c in read.analysis.mcp_calls.values() if c.via == "http"]
    assert len(http) == 5
    for c in http:
        ex = by_seq[c.seq]
        query = parse_qs(urlsplit(ex.url).query)
        if "city" in query and query["city"] == ["Oslo"]:
            # two equal calls awaiting: nothing on the wire tells which this one served
            assert c.call_id is None and c.candidates == 2, c
            continue
        assert c.call_id in calls and c.linked_by == "arguments", c
        seq, name, args = calls[c.call_id]
        turn = read.analysis.turns[seq]
        assert (c.model_seq, c.tool, c.conversation, c.turn) == (
            seq, name, turn.conversation, turn.index,
        ), c  # fmt: skip
        if "city" in query:
            assert args == {"city": query["city"][0]}, (c, ex.url)
        else:
            assert name == "place_order" and args["item"] == "umbrella"
        assert c.http is not None and c.http.status == ex.status and c.http.host.startswith(
            "127.0.0.1:"
        )


def test_show_puts_each_tool_exchange_under_its_tool_call(openai_run: dict[str, Any]) -> None:
    run = openai_run["run"]
    text = _show(str(run))
    assert text.returncode == 0, text.stderr
    out = text.stdout
    head = "9 round trips, 4 to LLM APIs (openai_chat 4), 5 tool HTTP calls (3 linked)\n"
    assert head in out, out[:600]
    assert out.count("tool http #") == 3  # under Paris, Tokyo and the order (not the equal pair)
    assert "serves one of 2 model calls awaiting a result that fit equally" in out
    # the tool's answer as it came (a JSON body kept as its text: replay serves those bytes)
    assert "GET 127.0.0.1:" in out and "/weather?city=Paris" in out and '"sky": "clear"' in out
    as_json = _show("--json", str(run))
    assert as_json.returncode == 0, as_json.stderr
    views = [json.loads(line) for line in as_json.stdout.splitlines() if line.strip()]
    tools = [v for v in views if v.get("tool_http")]
    assert len(tools) == 5 and all(v["turn"] is None and v["family"] == "none" for v in tools)
    served = [h for v in views for tc in v["tool_calls"] for h in tc.get("http") or []]
    assert sorted(h["path"].split("&")[0] for h in served) == [
        "/orders", "/weather?city=Paris", "/weather?city=Tokyo",
    ]  # fmt: skip
    order = next(h for h in served if h["path"] == "/orders")
    assert order["method"] == "POST" and order["status"] == 201 and "umbrella" in order["sent"]
    linked = [v["tool_http"]["linked"] for v in tools]
    assert sorted(str(x["by"]) for x in linked) == ["None", "None", "arguments", "arguments", "arguments"]  # noqa: E501


def test_replay_neither_serves_nor_waits_for_the_tools(openai_run: dict[str, Any]) -> None:
    """The replay matcher (replay server, pytest plugin, forks) reads the file: the tool exchanges
    are not offered to a request, nor left unplayed."""
    cas = read_records(openai_run["run"])
    m = Matcher(cas.exchanges)
    assert m.count_unplayed() == 4 and len(m.unplayed()) == 4
    assert all(not cas.exchanges[r.index].tool for r in m.unplayed())


def test_export_carries_them_as_http_spans_and_entries(openai_run: dict[str, Any], tmp_path: Path) -> None:  # noqa: E501
    import sys

    otel, har, page = tmp_path / "o.json", tmp_path / "o.har", tmp_path / "o.html"
    proc = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "export", "--otel", str(otel), "--har",
         str(har), str(openai_run["run"])], capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(har.read_text())["log"]["entries"]
    assert len(entries) == 9 and sum("/weather" in e["request"]["url"] for e in entries) == 4
    spans = [
        s for rs in json.loads(otel.read_text())["resourceSpans"]
        for ss in rs["scopeSpans"] for s in ss["spans"]
    ]  # fmt: skip
    names = sorted(s["name"] for s in spans)
    assert names.count("chat gpt-4o") == 4 and names.count("GET /weather") == 4, names
    html = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "export", "--html", "-o", str(page),
         str(openai_run["run"])], capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    assert html.returncode == 0, html.stderr
    assert "/weather?city=Paris" in page.read_text()


def test_the_run_replays_with_its_tools_live(openai_run: dict[str, Any], tmp_path: Path) -> None:
    """``looptap replay --strict --live-tools`` serves the model calls; the agent's tools, at
    another address than the run's, go live (tests/proxy/test_e2e_tool_replay.py: served when
    they match); every model call played, no tool exchange waited for."""
    import signal
    import sys

    replay = subprocess.Popen(
        [sys.executable, "-m", "looptap.cassettes.cli", "replay", "--strict", "--live-tools", str(openai_run["run"])],  # noqa: E501
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
    )  # fmt: skip
    try:
        assert replay.stdout is not None
        env = {}
        while "REPLICATE_API_TOKEN" not in env:  # the last export line
            line = replay.stdout.readline()
            assert line, replay.stderr.read() if replay.stderr else ""
            name, _, value = line.strip().removeprefix("export ").partition("=")
            env[name] = value
        script = tmp_path / "agent.py"
        script.write_text(OPENAI_AGENT)
        with ToolServer() as tools:
            agent = progress.run(
                [str(CLIENTS_PYTHON), str(script)],
                env=clean_env(**env, TOOL_URL=tools.url, TOOL_KEY=TOOL_KEY),
                capture_output=True, text=True, cwd=tmp_path,
            )  # fmt: skip
        assert agent.returncode == 0, agent.stdout + agent.stderr[-3000:]
        assert "answer: Ordered an umbrella." in agent.stdout and len(tools.seen) == 5
    finally:
        replay.send_signal(signal.SIGINT)
        _, err = replay.communicate(timeout=60)
    assert replay.returncode == 0, err
    assert (
        "played 4 of 4 recorded round trips and served 0 of 5 tool HTTP calls, "
        "5 tool requests sent live, 0 unmatched requests" in err
    ), err
    assert "unplayed" not in err


LANGCHAIN_AGENT = """
import os
import requests
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

TOOLS = os.environ["TOOL_URL"]
session = requests.Session()  # trust_env: HTTP_PROXY, NO_PROXY, REQUESTS_CA_BUNDLE
session.headers["x-api-key"] = os.environ["TOOL_KEY"]

@tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city right now.\"\"\"
    return session.get(f"{TOOLS}/weather", params={"city": city}).text

@tool
def place_order(item: str, quantity: int) -> str:
    \"\"\"Order an item.\"\"\"
    return session.post(f"{TOOLS}/orders", json={"item": item, "quantity": quantity}).text

@tool
def get_order(order_id: str) -> str:
    \"\"\"An order's state.\"\"\"
    return session.get(f"{TOOLS}/orders/{order_id}").text

tools = {t.name: t for t in (get_weather, place_order, get_order)}
model = ChatOpenAI(model="gpt-4o").bind_tools(list(tools.values()))
messages = [HumanMessage("Weather in Paris, Tokyo and Oslo, then order an umbrella.")]
for _ in range(6):
    answer = model.invoke(messages)
    messages.append(answer)
    if not answer.tool_calls:
        print("answer:", answer.content)
        break
    for call in answer.tool_calls:
        messages.append(ToolMessage(tools[call["name"]].invoke(call["args"]), tool_call_id=call["id"]))
"""  # noqa: E501


LLAMAINDEX_AGENT = """
import asyncio, os
import requests
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

TOOLS = os.environ["TOOL_URL"]
session = requests.Session()  # trust_env: HTTP_PROXY, NO_PROXY, REQUESTS_CA_BUNDLE
session.headers["x-api-key"] = os.environ["TOOL_KEY"]

def get_weather(city: str) -> str:
    \"\"\"The weather in a city right now.\"\"\"
    r = session.get(f"{TOOLS}/weather", params={"city": city})
    return r.text if r.ok else "{}"  # as many tools do: a failure becomes an empty result

def place_order(item: str, quantity: int) -> str:
    \"\"\"Order an item.\"\"\"
    return session.post(f"{TOOLS}/orders", json={"item": item, "quantity": quantity}).text

def get_order(order_id: str) -> str:
    \"\"\"An order's state.\"\"\"
    return session.get(f"{TOOLS}/orders/{order_id}").text

agent = FunctionAgent(
    tools=[FunctionTool.from_defaults(fn=f) for f in (get_weather, place_order, get_order)],
    llm=OpenAI(model="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"]),
)

async def main():
    print("answer:", await agent.run("Weather in Paris, Tokyo and Oslo, then order an umbrella."))

asyncio.run(main())
"""


PYDANTIC_AI_AGENT = """
import os
import httpx
from pydantic_ai import Agent

TOOLS = os.environ["TOOL_URL"]
http = httpx.Client(headers={"x-api-key": os.environ["TOOL_KEY"]})  # trust_env, as above
agent = Agent("openai:gpt-4o")  # Chat Completions at OPENAI_BASE_URL

@agent.tool_plain
def get_weather(city: str) -> str:
    \"\"\"The weather in a city right now.\"\"\"
    r = http.get(f"{TOOLS}/weather", params={"city": city})
    return r.text if r.is_success else "{}"  # a failure becomes an empty result

@agent.tool_plain
def place_order(item: str, quantity: int) -> str:
    \"\"\"Order an item.\"\"\"
    return http.post(f"{TOOLS}/orders", json={"item": item, "quantity": quantity}).text

@agent.tool_plain
def get_order(order_id: str) -> str:
    \"\"\"An order's state.\"\"\"
    return http.get(f"{TOOLS}/orders/{order_id}").text

print("answer:", agent.run_sync("Weather in Paris, Tokyo and Oslo, then order an umbrella.").output)
"""

CREWAI_AGENT = """
import os
import requests
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

TOOLS = os.environ["TOOL_URL"]
session = requests.Session()  # trust_env, as above
session.headers["x-api-key"] = os.environ["TOOL_KEY"]

@tool("get_weather")
def get_weather(city: str) -> str:
    \"\"\"The weather in a city right now.\"\"\"
    r = session.get(f"{TOOLS}/weather", params={"city": city})
    return r.text if r.ok else "{}"  # a failure becomes an empty result

@tool("place_order")
def place_order(item: str, quantity: int) -> str:
    \"\"\"Order an item.\"\"\"
    return session.post(f"{TOOLS}/orders", json={"item": item, "quantity": quantity}).text

@tool("get_order")
def get_order(order_id: str) -> str:
    \"\"\"An order's state.\"\"\"
    return session.get(f"{TOOLS}/orders/{order_id}").text

agent = Agent(role="Assistant", goal="Do what is asked", backstory="You use your tools.",
              tools=[get_weather, place_order, get_order], llm=LLM(model="gpt-4o"), verbose=False)
task = Task(description="Weather in Paris, Tokyo and Oslo, then order an umbrella.",
            expected_output="What was done", agent=agent)
print("answer:", Crew(agents=[agent], tasks=[task], verbose=False).kickoff())
"""

#: The AI SDK (``ai`` 6.0.325, ``@ai-sdk/openai`` 3.0.141, .npm-clients) with ``fetch`` tools.
#: ``DISPATCH`` puts undici's ``EnvHttpProxyAgent`` under the built-in ``fetch`` (see below).
AI_SDK_AGENT = """
const { createRequire } = require("node:module");
const need = createRequire(process.env.NPM_CLIENTS + "/package.json");
const { generateText, tool, stepCountIs, jsonSchema } = need("ai");
const TOOLS = process.env.TOOL_URL, KEY = process.env.TOOL_KEY;
if (process.env.DISPATCH === "1") need("undici").setGlobalDispatcher(new (need("undici").EnvHttpProxyAgent)());
const obj = (props) => jsonSchema({ type: "object", properties: props, required: Object.keys(props) });
const tools = {
  get_weather: tool({ description: "The weather in a city", inputSchema: obj({ city: { type: "string" } }),
    execute: async ({ city }) => {
      const r = await fetch(`${TOOLS}/weather?city=${encodeURIComponent(city)}`, { headers: { "x-api-key": KEY } });
      return r.ok ? await r.text() : "{}";  // a failure becomes an empty result
    } }),
  place_order: tool({ description: "Order an item", inputSchema: obj({ item: { type: "string" }, quantity: { type: "integer" } }),
    execute: async (args) => (await fetch(`${TOOLS}/orders`, { method: "POST", body: JSON.stringify(args),
      headers: { "x-api-key": KEY, "content-type": "application/json" } })).text() }),
  get_order: tool({ description: "An order's state", inputSchema: obj({ order_id: { type: "string" } }),
    execute: async ({ order_id }) => (await fetch(`${TOOLS}/orders/${order_id}`, { headers: { "x-api-key": KEY } })).text() }),
};
const openai = need("@ai-sdk/openai").createOpenAI({ baseURL: process.env.OPENAI_BASE_URL });
generateText({ model: openai.chat("gpt-4o"), prompt: "Weather in Paris, Tokyo and Oslo, then order an umbrella.",
               tools, stopWhen: stepCountIs(8) })
  .then((r) => console.log("answer:", r.text)).catch((e) => { console.error(String(e)); process.exit(1); });
"""  # noqa: E501

#: name: (agent, its interpreter, a Node script): each runs the same script of the model.
AGENTS = {
    "openai": (OPENAI_AGENT, CLIENTS_PYTHON, False),
    "langchain": (LANGCHAIN_AGENT, CLIENTS_PYTHON, False),
    "llamaindex": (LLAMAINDEX_AGENT, CLIENTS_PYTHON, False),
    "pydantic-ai": (PYDANTIC_AI_AGENT, TRACES_PYTHON, False),  # pydantic-ai-slim[openai] 2.68.0
    "crewai": (CREWAI_AGENT, CREWAI_PYTHON, False),  # crewai 1.15.30
    "ai-sdk": (AI_SDK_AGENT, CLIENTS_PYTHON, True),
}


def _agent_run(tmp_path: Path, name: str, fake: ScriptedUpstream, tools: ToolServer,
               **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:  # fmt: skip
    agent, python, node = AGENTS[name]
    if node and (NODE is None or not (NPM_CLIENTS / "node_modules" / "ai").exists()):
        pytest.skip("no node or .npm-clients (.ci/run makes it)")
    if not python.exists():
        pytest.skip(f"no {python.parent.parent.name} (.ci/run makes it)")
    if node:  # undici's agent under Node 20's fetch (a replay's environment has no shim: below)
        env = {"DISPATCH": "1", **env}
    return looptap_run(tmp_path, agent, fake, tools, python=python, node=node, **env)


def _beyond_usage(findings: list[Any]) -> list[Any]:
    """The findings but a true ``A.usage_missing`` (info): LlamaIndex's OpenAI LLM streams without
    ``stream_options.include_usage``, so the API reports no usage (said at turn 0, once)."""
    return [f for f in findings if not (f.code == "A.usage_missing" and f.severity.value == "info")]


def record_agent(tmp_path: Path, name: str) -> dict[str, Any]:
    """One run of the agent through ``looptap run`` with :func:`route`'s script, its tool
    server and model stopped once it is done (nothing listens at their URLs any more): the
    recording the tests here and tests/proxy/test_e2e_tool_replay.py share (the session's
    ``tool_agent_run`` fixture, tests/proxy/conftest.py, makes each once)."""
    with ScriptedUpstream(route) as fake, ToolServer() as tools:
        proc, run = _agent_run(tmp_path, name, fake, tools)
    return {"name": name, "proc": proc, "run": run, "tool_url": tools.url, "seen": tools.seen}


@pytest.mark.parametrize("name", ["langchain", "llamaindex", "pydantic-ai", "crewai", "ai-sdk"])
def test_a_framework_agent_with_a_requests_tool(
    tool_agent_run: Callable[[str], dict[str, Any]], name: str
) -> None:
    made = tool_agent_run(name)
    proc, run = made["proc"], made["run"]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer:" in proc.stdout and "umbrella" in proc.stdout and len(made["seen"]) == 5
    assert TOOL_KEY.encode() not in run.read_bytes()
    read = open_run(run, whole=True)
    findings = read.analysis.findings
    assert len(read.analysis.turns) == 4
    assert (_beyond_usage(findings) if name == "llamaindex" else findings) == []
    http = [c for c in read.analysis.mcp_calls.values() if c.via == "http"]
    assert len(http) == 5
    linked = {c.http.path: c for c in http if c.call_id is not None and c.http is not None}
    assert sorted(linked) == ["/orders", "/weather?city=Paris", "/weather?city=Tokyo"], http
    calls = {tc.id: tc.arguments for _, rt in read.pairs if rt.response for tc in rt.response.tool_calls}  # noqa: E501
    assert calls[linked["/weather?city=Paris"].call_id] == {"city": "Paris"}
    assert calls[linked["/weather?city=Tokyo"].call_id] == {"city": "Tokyo"}
    assert calls[linked["/orders"].call_id] == {"item": "umbrella", "quantity": 2}
    assert [c.candidates for c in http if c.call_id is None] == [2, 2]  # Oslo twice


#: The hidden failure on the openai SDK agent (httpx) and the AI SDK's (Node ``fetch`` through the
#: shim) by default; on the three Python frameworks whose tools hide it the same way (a failure
#: becomes ``{}``) in the nightly run: the same finding from the same wire, and each framework's
#: tool HTTP is recorded and linked by default (test_a_framework_agent_with_a_requests_tool).
HIDDEN = [
    name
    if name in ("openai", "ai-sdk")
    else pytest.param(name, marks=pytest.mark.slow(reason="the same hidden 503, another framework"))
    for name in ("openai", "llamaindex", "pydantic-ai", "crewai", "ai-sdk")
]


@pytest.mark.parametrize("name", HIDDEN)
def test_a_tool_failure_the_client_hides_is_named_at_c(tmp_path: Path, name: str) -> None:
    """Issue 84, item 3: the tool's API answers 503, the tool hands the model ``{}``: the turn
    that sends that result back carries C.tool_http_error_hidden. Then the model asks for two
    orders by ids nothing it was given holds: the tool's API answers W7731 with a 404 (the tool
    passes its body on), A1001 with the order. Without the tools' HTTP both are
    E.invented_argument; with it, W7731's says the tool's 404 confirms it, A1001's is not made
    (the tool holds the value: it was no invention). No other warning."""

    def lyon(req: ScriptedRequest) -> Reply:
        done = len(req.tool_results())
        if done == 0:
            return Reply.tool("get_weather", {"city": "Lyon"})
        if done in (1, 2):
            return Reply.tool("get_order", {"order_id": "W7731" if done == 1 else "A1001"})
        return Reply.say("It is fine in Lyon; A1001 shipped, W7731 is not on file.")

    with ScriptedUpstream(lyon) as fake, ToolServer() as tools:
        proc, run = _agent_run(tmp_path, name, fake, tools)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert [p.split("?")[0] for _, p, _ in tools.seen] == ["/weather", "/orders/W7731", "/orders/A1001"]  # noqa: E501
    read = open_run(run, whole=True)
    found = [f for f in read.analysis.findings if f.severity != "info"]
    assert [(f.code, f.seq) for f in found] == [
        ("C.tool_http_error_hidden", 2), ("E.invented_argument", 2),
    ], [f.message for f in found]  # fmt: skip
    # info: W7731's result is the tool's error, said (LlamaIndex's usage is missing)
    assert {f.code for f in read.analysis.findings if f.severity == "info"} <= {
        "C.tool_result_error", "A.usage_missing",
    }  # fmt: skip
    assert read.analysis.turns[2].index == 1  # the turn that sent the result back
    hidden, invented = found
    assert "#1 answered 503" in hidden.message and "nothing (an empty result)" in hidden.message
    assert "weather backend overloaded" in hidden.message
    assert invented.details["value"] == "W7731" and invented.details["tool_answer"] == "rejected"
    assert (invented.details["tool_http_seq"], invented.details["tool_status"]) == (3, 404)
    assert "The tool's HTTP call #3 for this call answered 404" in invented.message
    assert "order W7731 not found" in invented.message


def test_no_tool_http_records_the_model_calls_only(tmp_path: Path) -> None:
    for flag in (("--no-tool-http",), ("--tool-http-exclude", "127.0.0.1")):
        where = tmp_path / flag[0].strip("-")
        where.mkdir()
        with ScriptedUpstream(route) as fake, ToolServer() as tools:
            proc, run = looptap_run(where, OPENAI_AGENT, fake, tools, *flag)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        assert len(tools.seen) == 5, flag
        exchanges = read_records(run).exchanges
        assert [ex.tool for ex in exchanges] == [False] * 4, flag


AIOHTTP_AGENT = """
import asyncio, os, sys
import aiohttp

async def main():
    async with aiohttp.ClientSession(trust_env=True) as s:  # NO_PROXY read by host, not port
        url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        async with s.post(url, json=body) as r:
            print(r.status, (await r.text())[:200])
            sys.exit(0 if r.status == 200 else 1)

asyncio.run(main())
"""


def test_a_client_that_reads_no_proxy_by_host_reaches_the_listener_through_the_proxy(
    tmp_path: Path,
) -> None:
    """The loopback is recorded by default (issue 91): ``NO_PROXY`` names looptap's listeners by
    port, which aiohttp (google-genai's async client; Google ADK and Strands' Gemini agents)
    cannot read, so its model call goes to the listener through the forward proxy. mitmproxy
    refuses a connection to its own listener ("Request destination unknown", the 502 those rows
    of the client matrix got); the recorder lets one to a reverse listener through, and the
    listener records it: one model round trip, none from the forward proxy."""
    # (aiohttp comes into .venv-clients with the frameworks that use it: 3.14.5 here)
    script = tmp_path / "agent.py"
    script.write_text(AIOHTTP_AGENT)
    run = tmp_path / "run.jsonl"
    with ScriptedUpstream(route) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", str(run), "--confdir", str(tmp_path / "conf"),
             "--upstream", f"openai={fake.url}", "--", str(CLIENTS_PYTHON), str(script)],
            env=clean_env(OPENAI_API_KEY="sk-test-tools", LOOPTAP_PROXY_PYTHON=str(PROXY_PYTHON)),
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert [ex.tool for ex in read_records(run).exchanges] == [False]
    assert len(fake.log) == 1


def test_node_fetch_tools_are_recorded_with_no_change_to_the_agent(tmp_path: Path) -> None:
    """Node 20's ``fetch`` reads no proxy variable (``NODE_USE_ENV_PROXY``, which looptap run
    exports, counts from Node 22.21 and 24): the AI SDK agent with plain ``fetch`` tools (no
    ``EnvHttpProxyAgent`` of its own) has them recorded all the same, through looptap run's
    ``NODE_OPTIONS=--require`` shim (cassettes/net/node_env_proxy.cjs); before it, on Node 20, its
    tools reached the server unseen (0 of 5 recorded) and only its model calls were."""
    with ScriptedUpstream(route) as fake, ToolServer() as tools:
        proc, run = _agent_run(tmp_path, "ai-sdk", fake, tools, DISPATCH="0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "answer: Ordered an umbrella." in proc.stdout and len(tools.seen) == 5
    exchanges = read_records(run).exchanges
    assert sum(not ex.tool for ex in exchanges) == 4
    assert sorted(urlsplit(ex.url).path for ex in exchanges if ex.tool) == [
        "/orders", "/weather", "/weather", "/weather", "/weather",
    ]  # fmt: skip


def test_a_model_call_to_a_hard_coded_base_url_through_the_proxy_is_a_model_call(
    tmp_path: Path,
) -> None:
    """Issue 91, item 4, the recorder's side: the openai SDK agent with its base URL hard-coded
    (``OpenAI(base_url=…)`` at a plain-HTTP OpenAI-compatible server on 127.0.0.1, not the
    ``OPENAI_BASE_URL`` looptap run exports) sends its model calls in absolute form through
    ``HTTP_PROXY``, as its tool calls: the model calls are filed as model calls (by what the
    request is: the providers' detection of Chat Completions by its path and body, not by a
    host list), the tool's call as a tool's, and the hidden 503 is named at C. On c86d115d the
    model calls were tool calls: no turn, no finding."""

    def lyon(req: ScriptedRequest) -> Reply:
        if not req.tool_results():
            return Reply.tool("get_weather", {"city": "Lyon"})
        return Reply.say("It is fine in Lyon.")

    agent = OPENAI_AGENT.replace(
        "client = OpenAI()", 'client = OpenAI(base_url=os.environ["HARD_BASE"])'
    )
    assert agent != OPENAI_AGENT
    with ScriptedUpstream(lyon) as fake, ToolServer() as tools:
        assert urlsplit(fake.url).hostname == "127.0.0.1"
        proc, run = looptap_run(tmp_path, agent, fake, tools, HARD_BASE=f"{fake.url}/v1")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    cas = read_records(run)
    assert sorted(
        (ex.tool, urlsplit(ex.url).path) for ex in cas.exchanges
    ) == [(False, "/v1/chat/completions"), (False, "/v1/chat/completions"), (True, "/weather")]
    analysis = open_run(run, whole=True).analysis
    assert len(analysis.turns) == 2
    assert "C.tool_http_error_hidden" in [f.code for f in analysis.findings]


class SlowToolServer(ToolServer):
    """The weather API answering each ``GET /weather`` only after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        import time

        super().__init__()
        handler = self.server.RequestHandlerClass
        answer = handler.do_GET  # type: ignore[attr-defined]

        def slow_get(h: Any) -> None:
            time.sleep(delay)  # (the server's slowness, not a test's decision)
            answer(h)

        handler.do_GET = slow_get  # type: ignore[attr-defined]


SLOW_AGENT = OPENAI_AGENT.replace(
    '''def get_weather(city):
    try:''',
    '''def get_weather(city):  # the call goes on in the background; the tool answers without it
    import threading
    done = []
    t = threading.Thread(target=lambda: done.append(_get_weather(city)), daemon=True)
    t.start()
    t.join(0.5)
    return done[0] if done else '{"status": "pending"}'

def _get_weather(city):
    try:''',
).replace(
    'print("answer:", msg.content)', 'print("answer:", msg.content); import time; time.sleep(4)'
)


def test_a_real_slow_tool_call_that_outlives_its_turn_is_its_calls(tmp_path: Path) -> None:
    """Issue 91 (misfiling, on a real agent): the openai SDK agent whose ``get_weather`` tool
    starts its httpx call in the background and answers the model without it (the server takes
    3 s); the agent's next model request starts while the tool's HTTP is still in flight, and
    the tool's exchange is written after it. It is linked to its call by its arguments, by when
    it started, never "the agent's own"."""

    def lyon(req: ScriptedRequest) -> Reply:
        if not req.tool_results():
            return Reply.tool("get_weather", {"city": "Lyon"})
        return Reply.say("Pending for Lyon.")

    assert SLOW_AGENT.count("_get_weather") == 2 and "time.sleep(4)" in SLOW_AGENT
    with ScriptedUpstream(lyon) as fake, SlowToolServer(3.0) as tools:
        proc, run = looptap_run(tmp_path, SLOW_AGENT, fake, tools)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    cas = read_records(run)
    kinds = [(ex.seq, ex.tool) for ex in cas.exchanges]
    assert [t for _, t in kinds] == [False, False, True], kinds  # written after the next request
    read = open_run(run, whole=True)
    (call,) = read.analysis.mcp_calls.values()
    calls = {tc.id: tc for _, rt in read.pairs if rt.response for tc in rt.response.tool_calls}
    assert call.linked_by == "arguments" and calls[call.call_id].arguments == {"city": "Lyon"}
