"""The planted-cause cases of bench/why_cases.py: for each, the scripted model (its route), the
agent with its planted bug and without it (the fixed agent a confirm runs), how the failure is
judged, and the cause that was planted (what a right verdict names).

The agents are tests/why/why_agent.py (openai / anthropic SDKs), bench/why_cases_agent.py (the
cases why_agent.py has no flag for; google-genai) and Claude Code (tests/why/test_why_claude.py's
script and route). Randomness in a route is drawn from a seeded generator: a case's figures
depend only on K and the order branches reach it.
"""

from __future__ import annotations

import os
import random
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from bench.why_cases_agent import STEP_CITIES
from tests.proxy.test_e2e_tool_http import CLIENTS_PYTHON
from tests.support.recorder import PROXY_PYTHON, clean_env
from tests.support.scripted import (
    Call,
    Reply,
    ScriptedRequest,
    ScriptedUpstream,
    claude_code_side_call,
)
from tests.why import test_why_agents, test_why_lived
from tests.why.test_why import a_route, c_route
from tests.why.test_why_lost_repairs import silent_cut
from tests.why.test_why_together import both_needed

ROOT = Path(__file__).resolve().parents[1]
WHY_AGENT = ROOT / "tests" / "why" / "why_agent.py"
CASES_AGENT = ROOT / "bench" / "why_cases_agent.py"
TRIM_AGENT = ROOT / "bench" / "why_trim_agent.py"
Route = Callable[[ScriptedRequest], Reply]
#: The Claude Code case's fix: its sub-agents on another model (the line before ``exec``).
FIX = "CLAUDE_CODE_SUBAGENT_MODEL=claude-opus-4-5 exec "
CODEX_TASK = "What is the weather in Paris?"
#: The Codex case's fix: the task asks the model not to guess (a change of model would change
#: Codex's prewarm too, a request before the verdict's turn the confirm serves as recorded).
CODEX_FIX = " Never guess."


def codex_env(tmp: Path, keys: dict[str, str]) -> dict[str, str]:
    """tests/replay/test_fork_ws.py's wrapper: Codex on its default settings, its own home, but
    ``openai_base_url`` (read from ``OPENAI_BASE_URL``, as a fork sets it) given on its command
    line (``-c``). Written into the home's config.toml, as it was, ``why --jobs 2``'s second branch
    overwrote the first's base URL and sent the first's Codex to the second's fork (each then saw
    the other's requests or none: 4 of 5 samples were no sample); a home per run is no way out,
    Codex's instructions name its home's path."""
    exe = Path(os.environ["LOOPTAP_NPM_AGENTS"]) / "node_modules" / ".bin" / "codex"
    home = tmp / "codex-home"
    home.mkdir(exist_ok=True)
    (tmp / "home").mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        "[analytics]\nenabled = false\n\n[features]\nplugins = false\n"
    )
    wrapper = tmp / "codex.sh"
    wrapper.write_text(
        f'#!/bin/sh\nexec "{exe}" -c "openai_base_url=\\"$OPENAI_BASE_URL\\"" "$@"\n'
    )
    wrapper.chmod(0o755)
    return clean_env(**keys, CODEX_HOME=str(home), HOME=str(tmp / "home"))


#: The model's first answer in most cases: the weather of both cities, in one answer.
BOTH = Reply(calls=(Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Lyon"})))


#: The seed of every :class:`Flaky` made without one (``bench/why_cases.py --repeat``: another a
#: repetition, so a stochastic case is drawn again; the first is 68, the figures before).
SEED = [68]


class Flaky:
    """A model whose final answer is wrong with probability ``p`` (seeded); in the recording the
    first one is wrong (the failing run that was recorded)."""

    def __init__(self, p: float, recording: bool, seed: int | None = None) -> None:
        self.p, self.forced = p, recording
        self.rng = random.Random(SEED[0] if seed is None else seed)
        self.lock = threading.Lock()

    def wrong(self) -> bool:
        with self.lock:
            if self.forced:
                self.forced = False
                return True
            return self.rng.random() < self.p


def relay(recording: bool) -> Route:
    """The weather sub-agent answers right; the main agent relays its answer wrongly 30% of the
    time (Lyon's rain said as sun)."""
    flaky = Flaky(0.3, recording)

    def route(req: ScriptedRequest) -> Reply:
        results = req.tool_results()
        if "main agent" in req.system:
            if not results:
                return Reply.tool("ask_weather_agent", {"question": "Weather in Paris and Lyon?"})
            said = results[-1]
            return Reply.say(
                "Report: " + (said.replace("rain", "sunny") if flaky.wrong() else said)
            )
        if not results:
            return BOTH
        return Reply.say(f"Paris: {results[0]}; Lyon: {results[1]}.")

    return route


def flaky_final(recording: bool) -> Route:
    """Both cities in one answer, both results back (no client bug); the final answer drops
    Lyon's rain 40% of the time."""
    flaky = Flaky(0.4, recording)

    def route(req: ScriptedRequest) -> Reply:
        results = req.tool_results()
        if not results:
            return BOTH
        lyon = "sunny too, I think" if flaky.wrong() else results[1]
        return Reply.say(f"Paris: {results[0]}; Lyon: {lyon}.")

    return route


def steps(recording: bool) -> Route:
    """One city a turn (its weather; Lyon's weather and time in one answer), then a report of every
    result: 8 requests."""

    def route(req: ScriptedRequest) -> Reply:
        k = sum(1 for m in req.messages if isinstance(m, dict) and m.get("role") == "assistant")
        if k < len(STEP_CITIES):
            city = STEP_CITIES[k]
            calls = [Call("get_weather", {"city": city})]
            if city == "Lyon":
                calls.append(Call("get_time", {"city": city}))
            return Reply(calls=tuple(calls))
        return Reply.say("Report: " + "; ".join(req.tool_results()) + ".")

    return route


def _refused_or_both(req: ScriptedRequest) -> Reply | None:
    """The API's 400 for a schema it cannot read; else both cities while no tool result came back;
    else None (the route answers from the results)."""
    refused = test_why_agents.refused_schema(req)
    if refused is not None:
        return refused
    return None if req.tool_results() else BOTH


def recover(recording: bool) -> Route:
    """The API refuses the schema it cannot read (OpenAI's 400); the model answers with what the
    tools returned."""

    def route(req: ScriptedRequest) -> Reply:
        first = _refused_or_both(req)
        if first is not None:
            return first
        results = req.tool_results()
        return Reply.say(f"Paris: {results[0]}; Lyon: {results[1]}.")

    return route


def gemini_schema(recording: bool) -> Route:
    """Gemini's 400 for a schema whose ``properties`` is an array, in its own words (the API's
    field path, "Proto field is not repeating, cannot start list."); else both cities, then the
    answer from the results."""

    def route(req: ScriptedRequest) -> Reply:
        for i, name in enumerate(req.tools):
            if isinstance((req.tool_schema(name) or {}).get("properties"), list):
                return Reply.refuse(
                    'Invalid JSON payload received. Unknown name "properties" at '
                    f"'tools[0].function_declarations[{i}].parameters_json_schema': Proto field "
                    "is not repeating, cannot start list."
                )
        results = req.tool_results()
        if not results:
            return BOTH
        rain = any("rain" in r for r in results)
        return Reply.say("Paris: sunny; Lyon: " + ("rain." if rain else "sunny too, I guess."))

    return route


def claude(recording: bool) -> Route:
    """tests/why/test_why_claude.py's model, but its sub-agent counts at once (no tool), flaky: on
    the recorded model it miscounts the vowels 30% of the time (the recording: the first time);
    on claude-opus-4-5 (the fix: Claude Code's ``CLAUDE_CODE_SUBAGENT_MODEL``) it counts right."""
    from tests.why.test_why_claude import Route as ClaudeRoute

    flaky = Flaky(0.3, recording)
    base = ClaudeRoute()

    def route(req: ScriptedRequest) -> Reply:
        if "cc_is_subagent=true" not in req.system or claude_code_side_call(req):
            return base(req)
        n = 2 if "opus" not in req.model and flaky.wrong() else 3
        return Reply.say(f"There are {n} vowels in looptap.", what="sub:answer")

    return route


def codex(recording: bool) -> Callable[[dict[str, Any], str], Any]:
    """A Responses-over-WebSocket model for Codex: it answers the task at once, wrongly 40% of the
    time (the recording: the first time), right when the task says not to guess (the fix).
    Codex's prewarm (``generate: false``) gets the empty answer of tests/support/ws_upstream.py."""
    from looptap.cassettes.models import FinishReason, NormalisedResponse, Part, Usage
    from tests.support.ws_upstream import spawn_script

    flaky, prewarm = Flaky(0.4, recording), spawn_script()

    def answer(req: dict[str, Any], rid: str) -> Any:
        model = str(req.get("model") or "gpt-5")
        if req.get("generate") is False:
            return prewarm(req, rid)
        told = CODEX_FIX.strip() in orjson.dumps(req.get("input")).decode()
        said = "raining" if not told and flaky.wrong() else "sunny"
        return NormalisedResponse(
            id=rid,
            model=model,
            parts=[Part(kind="text", text=f"It is {said} in Paris.")],
            finish_reason=FinishReason.COMPLETE,
            usage=Usage(input_tokens=40, output_tokens=8),
        )

    return answer


def trimmed(case: str) -> Callable[[bool], Route]:
    """The model of bench/why_trim_agent.py's cases: it answers from what the request holds. Its
    plan is a lookup a turn (Paris's weather, Lyon's, and for ``trim-tail`` and ``trim-compact``
    Lyon's time); the latest call in the request says where it is, and a summary sent last makes
    it answer. The answer gives each city's weather it finds a fact for ("Lyon: rain", in a tool
    result or any text), else "unknown", and the cities in capitals when the request says "in
    capitals" anywhere; for ``trim-ignored``, only 60% of the time (seeded; the recording: the
    first time it is ignored). The compaction side call's summary loses Lyon's weather."""
    from bench.why_trim_agent import SUMMARIZE, SUMMARY_HEAD

    flaky = Flaky(0.4, True) if case == "trim-ignored" else None
    plan = [("get_weather", "Paris"), ("get_weather", "Lyon")]
    if case in ("trim-tail", "trim-compact"):
        plan.append(("get_time", "Lyon"))

    def route(req: ScriptedRequest) -> Reply:
        if SUMMARIZE in req.system:
            return Reply.say(
                "The user asked about the weather in Paris and Lyon and the time in Lyon; Paris: "
                "sunny; Lyon: 12:00."
            )
        said = orjson.dumps(req.messages).decode()
        last = req.messages[-1] if req.messages else {}
        calls = [
            (c["function"]["name"], orjson.loads(c["function"]["arguments"])["city"])
            for m in req.messages
            if isinstance(m, dict)
            for c in m.get("tool_calls") or []
        ]
        summed = isinstance(last, dict) and str(last.get("content") or "").startswith(SUMMARY_HEAD)
        at = plan.index(calls[-1]) + 1 if calls and calls[-1] in plan else 0
        if not summed and at < len(plan):
            return Reply.tool(plan[at][0], {"city": plan[at][1]})
        facts = dict(re.findall(r"\b(Paris|Lyon): (sunny|rain|cloudy)\b", said))
        capitals = "in capitals" in said and not (flaky is not None and flaky.wrong())
        answer = "; ".join(
            f"{c.upper() if capitals else c}: {facts.get(c, 'unknown')}" for c in ("Paris", "Lyon")
        )
        return Reply.say(answer + ".")

    def made(recording: bool) -> Route:
        if flaky is not None:
            flaky.forced, flaky.rng = recording, random.Random(82)
        return route

    return made


def group_chat(recording: bool) -> Route:
    """The model of bench/why_trim_agent.py's ``groupchat``: the selector names the planner, the
    weather agent, the planner; the planner plans, then sums up what the weather agent said; the
    weather agent calls the tool for both cities in one answer and says what came back."""
    from bench.why_trim_agent import PLANNER, SELECT

    def route(req: ScriptedRequest) -> Reply:
        if SELECT in req.system:
            lines = req.user_texts()[-1].splitlines()
            spoke = [ln.split(":", 1)[0] for ln in lines]
            return Reply.say("weather_agent" if spoke.count("planner") == 1 and
                             "weather_agent" not in spoke else "planner")  # fmt: skip
        results = req.tool_results()
        if PLANNER in req.system:
            heard = [
                m for m in req.messages if isinstance(m, dict) and m.get("name") == "weather_agent"
            ]
            if not heard:
                return Reply.say("Look up Paris and Lyon.")
            told = str(heard[-1].get("content") or "")
            return Reply.say(f"Summary: {told}" + ("" if "Lyon" in told else " Lyon: not known."))
        if not results:
            return BOTH
        return Reply.say(" ".join(f"{r}." for r in results))

    return route


def _static(route: Route) -> Callable[[bool], Route]:
    return lambda recording: route


def _dropped_call(run: Path) -> str:
    return test_why_agents.dropped(run)[0]


@dataclass
class Case:
    key: str
    planted: str
    route: Callable[[bool], Route]
    #: The agent's arguments after its script (the planted bug in), and with it removed.
    agent: list[str]
    fixed: list[str]
    #: The verdict a right answer names: (layer, conversation, turn); None: nothing on the wire
    #: can flip it (right when no cause is determined).
    expected: tuple[str, str, int] | None
    script: Path = WHY_AGENT
    outcome: list[str] = field(default_factory=list)
    #: ``--result CALL=TEXT``: the text the C repair puts back for the dropped call.
    result: str | None = None
    apis: tuple[str, ...] = ("openai", "anthropic")
    python: str = sys.executable
    #: Claude Code: the recording exits 0 and fails by its answer.
    exit_ok: bool = False
    #: ``looptap run``'s flags of the recording (the tools' HTTP of loopback servers recorded).
    record_args: tuple[str, ...] = ()
    #: A tool API the agent calls (``TOOL_URL``, ``TOOL_KEY`` in its environment), up for the
    #: case: made once, from a seed (:class:`tests.why.test_why_tool_answer.FlakyWeather`).
    tool: Callable[[], Any] | None = None

    def serve(self, recording: bool) -> Any:
        """The scripted upstream, to use as a context manager (``.url``)."""
        if self.key == "codex":
            from tests.support.ws_upstream import WsResponsesUpstream

            return WsResponsesUpstream(answer=self.route(recording))  # type: ignore[arg-type]
        # the live model's ids are its own (as a real API's are): with the recording's fake's
        # counter restarted, a live call was once given a recorded call's id (call_s0008), and
        # the repair that puts that call's result back found it answered
        return ScriptedUpstream(self.route(recording), ids="" if recording else "live")

    @staticmethod
    def sent(fake: Any) -> int:
        """The requests the upstream received (Codex's: its ``response.create`` messages)."""
        if hasattr(fake, "log"):
            return len(fake.log)
        return sum(
            1 for m in fake.received if isinstance(m, dict) and m.get("type") == "response.create"
        )

    def command(self, tmp: Path, fixed: bool = False) -> list[str]:
        if self.key == "codex":
            task = CODEX_TASK + (CODEX_FIX if fixed else "")
            return [str(tmp / "codex.sh"), "exec", "--skip-git-repo-check", task]
        if self.key == "claude":
            return [str(tmp / ("claude-fixed.sh" if fixed else "claude.sh"))]
        return [self.python, str(self.script), *(self.fixed if fixed else self.agent)]

    def why_args(self, run: Path, tmp: Path) -> list[str]:
        extra = ["--result", f"{_dropped_call(run)}={self.result}"] if self.result else []
        return [*self.outcome, *extra]

    def env(self, tmp: Path) -> dict[str, str]:
        keys = {
            "OPENAI_API_KEY": "sk-bench-why-cases",
            "ANTHROPIC_API_KEY": "sk-ant-bench-why-cases",
            "GEMINI_API_KEY": "bench-why-cases",
            "LOOPTAP_PROXY_PYTHON": str(PROXY_PYTHON),
        }
        if self.key == "codex":
            return codex_env(tmp, keys)
        if self.tool is not None:
            from tests.proxy.test_e2e_tool_http import TOOL_KEY

            server = _TOOLS.setdefault(self.key, self.tool())
            return clean_env(**keys, TOOL_URL=server.url, TOOL_KEY=TOOL_KEY)
        if self.key != "claude":
            return clean_env(**keys)
        from tests.proxy.test_e2e_node_agents import CLAUDE_OFFLINE, run_env
        from tests.why.test_why_claude import SCRIPT

        exe = Path(os.environ["LOOPTAP_NPM_AGENTS"]) / "node_modules" / ".bin" / "claude"
        for name, fix in (("claude.sh", "exec "), ("claude-fixed.sh", FIX)):
            s = tmp / name
            s.write_text(SCRIPT.format(counter=tmp / "runs.txt", claude=exe).replace("exec ", fix))
            s.chmod(0o755)
        return run_env(tmp, **keys, **CLAUDE_OFFLINE)

    def right(self, v: dict[str, Any]) -> bool:
        if self.expected is None:
            return not v.get("determined") and not v.get("layer_determined")
        layer, conversation, turn = self.expected
        if v.get("determined"):
            return (v.get("layer"), v.get("conversation"), v.get("turn")) == self.expected
        # the layer settled, not the turn: right when it is the planted layer, from a turn at or
        # before the planted one
        return bool(
            v.get("layer_determined")
            and v.get("layer") == layer
            and v.get("conversation") == conversation
            and (v.get("from_turn") or 0) <= turn
        )

    def missing(self) -> str | None:
        if self.key in ("claude", "codex"):
            npm = os.environ.get("LOOPTAP_NPM_AGENTS")
            if not npm or not (Path(npm) / "node_modules" / ".bin" / self.key).exists():
                return f"needs LOOPTAP_NPM_AGENTS with {self.key}"
        return None


#: The tool APIs of the cases that have one, up once per case (bench/why_cases.py runs a case's
#: recording, why and confirms against the same).
_TOOLS: dict[str, Any] = {}


def _flaky_weather() -> Any:
    """The weather API of the hidden tool failure: 503 to 3 calls in 10 (seeded), and to the
    recording's Lyon call (planted)."""
    from tests.why.test_why_tool_answer import FlakyWeather

    return FlakyWeather(seed=SEED[0], plant=True)


def _tool_model(recording: bool) -> Route:
    from tests.why.test_why_tool_answer import model

    return model


def overloaded_once(route: Route) -> Callable[[bool], Route]:
    """``route``, its first request of a recording answered 503 once, retryably: the SDK retries
    it itself (``C.retry``), a decoy: the retry the client made is no suspect."""

    def made(recording: bool) -> Route:
        lock, said = threading.Lock(), [not recording]

        def route_(req: ScriptedRequest) -> Reply:
            with lock:
                first, said[0] = not said[0], True
            if first:
                return replace(Reply.refuse("The server is overloaded.", status=503),
                               wire="retryable")  # fmt: skip
            return route(req)

        return route_

    return made


def decoys(recording: bool) -> Route:
    """Both cities, both results back; the final answer wrong 30% of the time (the model: the
    planted cause), with two decoys in the run: a 503 the SDK retries itself, and a tool schema
    the API refuses that the client then mends and sends again (a refusal it recovered from)."""
    flaky = Flaky(0.3, recording)

    def route(req: ScriptedRequest) -> Reply:
        first = _refused_or_both(req)
        if first is not None:
            return first
        lyon = "sunny too, I guess" if flaky.wrong() else "rain"
        return Reply.say(f"Paris: sunny; Lyon: {lyon}.")

    return overloaded_once(route)(recording)


LIVED = _static(test_why_lived.route)
AGENTS = _static(test_why_agents.route)
SUB = ["--expect", "rain", "--shape", "sub-agents"]
DROP = "parent drops a correct sub-agent's answer (C c1 t1)"
CASES = [
    Case("group", "group chat: the second agent drops a tool result (C c2 t1)", LIVED,
         ["--drop-second", "--expect", "rain", "--shape", "group"],
         ["--expect", "rain", "--shape", "group"], ("C", "c2", 1), result="rain"),
    Case("anthropic-400", "Anthropic 400: a tool schema the API refuses (C c1 t1)", AGENTS,
         ["--bad-schema", "--expect", "rain", "--family", "anthropic"],
         ["--expect", "rain", "--family", "anthropic"], ("C", "c1", 1)),
    Case("gemini-400", "Gemini 400: a tool schema the API refuses (C c1 t1)", gemini_schema,
         ["gemini-schema"], ["gemini-schema", "--fixed"], ("C", "c1", 1), script=CASES_AGENT,
         apis=("gemini",)),
    Case("parent-exit", f"{DROP}, judged by exit", LIVED,
         ["--drop-second", *SUB], SUB, ("C", "c1", 1), result="Lyon: rain."),
    Case("parent-finding", f"{DROP}, judged by `--finding`", LIVED,
         ["--drop-second", *SUB], SUB, ("C", "c1", 1), result="Lyon: rain.",
         outcome=["--finding", "C.dropped_tool_result"]),
    Case("parent-answer", f"{DROP}, judged by `--answer-not-matches`", LIVED,
         ["--drop-second", *SUB], SUB, ("C", "c1", 1), result="Lyon: rain.",
         outcome=["--answer-not-matches", "rain"]),
    Case("relay", "parent relays a correct sub-agent's answer wrongly 30% of the time (E c1 t1)",
         relay, ["relay"], ["relay", "--fixed"], ("E", "c1", 1), script=CASES_AGENT),
    Case("flaky", "flaky final answer (wrong 40%), no client bug (E c1 t1)", flaky_final,
         ["flaky"], ["flaky", "--fixed"], ("E", "c1", 1), script=CASES_AGENT),
    Case("together", "two bugs needed together: a dropped result, a 60-token cap (C+A c1 t1)",
         _static(both_needed), ["together"], ["together", "--fixed", "--cap", "200"],
         ("C+A", "c1", 1), script=CASES_AGENT, result="rain"),
    Case("recover", "a 400 the client recovered from, then a tool bug off the wire (none)",
         recover, ["recover"], ["recover", "--fixed"], None, script=CASES_AGENT),
    Case("handoff", "handoff: the weather agent drops a result after the hand-over (C c1 t2)",
         AGENTS, ["--drop-second", "--expect", "rain", "--shape", "handoff"],
         ["--expect", "rain", "--shape", "handoff"], ("C", "c1", 2), result="rain"),
    Case("steps", "a dropped result that shows first in the 5th of 8 turns (C c1 t4)", steps,
         ["steps"], ["steps", "--fixed"], ("C", "c1", 4), script=CASES_AGENT,
         result="12:00 in Lyon"),
    Case("codex", "Codex over its WebSocket: the model's answer wrong 40% of the time (E c1 t0)",
         codex, [], [], ("E", "c1", 0), apis=("openai",),
         outcome=["--answer-not-matches", "sunny"], exit_ok=True),
    Case("claude", "Claude Code: its Agent sub-agent miscounts 30% of the time (E c2 t0)", claude,
         [], [], ("E", "c2", 0), apis=("anthropic",),
         outcome=["--answer-not-matches", "3 vowels"], exit_ok=True),
    # issue 82: a group chat whose confirm was refused, and a managed context
    # (bench/why_trim_agent.py)
    Case("groupchat", "selector group chat (AutoGen-like): the weather agent drops a tool result "
         "(C c4 t1)", group_chat, ["groupchat"], ["groupchat", "--fixed"], ("C", "c4", 1),
         script=TRIM_AGENT, apis=("openai",), result="Lyon: rain"),
    Case("trim-task", "a head cut drops the user's task and its instruction (C c1 t2)",
         trimmed("trim-task"), ["trim-task"], ["trim-task", "--fixed"], ("C", "c1", 2),
         script=TRIM_AGENT, apis=("openai",)),
    Case("trim-summary", "a summary in place of the head loses the user's constraint (C c1 t2)",
         trimmed("trim-summary"), ["trim-summary"], ["trim-summary", "--fixed"], ("C", "c1", 2),
         script=TRIM_AGENT, apis=("openai",)),
    Case("trim-tail", "a tail-kept history loses the tool result the answer needs (C c1 t3)",
         trimmed("trim-tail"), ["trim-tail"], ["trim-tail", "--fixed"], ("C", "c1", 3),
         script=TRIM_AGENT, apis=("openai",)),
    Case("trim-compact", "a compaction by a side call drops the fact the answer needs (C c1 t3)",
         trimmed("trim-compact"), ["trim-compact"], ["trim-compact", "--fixed"], ("C", "c1", 3),
         script=TRIM_AGENT, apis=("openai",)),
    Case("trim-garbled", "a harmless trim; the client garbles a tool result, off the wire (none)",
         trimmed("trim-garbled"), ["trim-garbled"], ["trim-garbled", "--fixed"], None,
         script=TRIM_AGENT, apis=("openai",)),
    Case("trim-ignored", "a harmless trim; the model ignores the instruction still there 40% "
         "of the time (E c1 t2)", trimmed("trim-ignored"), ["trim-ignored"],
         ["trim-ignored", "--fixed"], ("E", "c1", 2), script=TRIM_AGENT, apis=("openai",)),
    # issue 95: a tool failure the client hides, a cut answer used, a model wrong 30% with two
    # decoys, a 503 the SDK retried itself beside a client bug
    Case("tool-hidden", "a tool's 503 the client hides from the model (an empty result) (C c1 t1)",
         _tool_model, [], ["--fixed"], ("C", "c1", 1), script=ROOT / "bench" / "why_tool_agent.py",
         python=str(CLIENTS_PYTHON), apis=("openai",), record_args=("--tool-http-loopback",),
         tool=_flaky_weather),
    Case("cap-used", "a 60-token cap cuts the answer and the client uses it cut (A c1 t1)",
         _static(a_route), ["--expect", "sunny"], ["--expect", "sunny", "--cap", "200"],
         ("A", "c1", 1), apis=("openai",)),
    # issue 103: a refusal the agent failed on at its first request (a confirm past the
    # recording's end); a cut the API did not say (end_turn at the cap), the client uses it
    Case("refused-first", "Anthropic 400 at the first request: a tool schema the API refuses "
         "(C c1 t0)", AGENTS, ["--bad-schema", "--bad-from", "0", "--expect", "rain", "--family",
         "anthropic"], ["--expect", "rain", "--family", "anthropic"], ("C", "c1", 0)),
    Case("cap-silent", "a 60-token cap cuts the answer, the API says end_turn; the client uses it "
         "(A c1 t1)", _static(silent_cut), ["--expect", "sunny", "--family", "anthropic"],
         ["--expect", "sunny", "--family", "anthropic", "--cap", "200"], ("A", "c1", 1),
         apis=("anthropic",)),
    Case("decoys", "the final answer wrong 30% of the time; decoys: a 503 the SDK retried, a "
         "refusal the client recovered from (E c1 t3)", decoys,
         ["--expect", "rain", "--retries", "2", "--bad-schema", "--recover"],
         ["--expect", "rain", "--retries", "2", "--bad-schema", "--recover", "--cap", "61"],
         ("E", "c1", 3), apis=("openai",)),
    Case("retried-503", "a 503 the SDK retried itself, then the client drops a result (C c1 t2)",
         overloaded_once(c_route), ["--drop-second", "--expect", "rain", "--retries", "2"],
         ["--expect", "rain", "--retries", "2"], ("C", "c1", 2), apis=("openai",),
         result="rain"),
]  # fmt: skip
