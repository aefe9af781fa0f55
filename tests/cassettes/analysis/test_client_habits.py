"""Client wire habits that are valid but once read as bugs (issue 27): each test the habit as the
client sends it (0 warnings), and a twin where the same shape carries a real bug (still found).

* Codex 0.169's default: tools in an ``additional_tools`` input item holding namespaces, later turns
  chained by ``previous_response_id`` sending only their new items (item 1);
* the Vercel AI SDK over Responses with ``store`` on: the model's message referred back to as
  ``{"type": "item_reference", "id": "msg_…"}`` (item 2);
* Codex's ``spawn_agent`` sub-agent, whose task arrives as an ``agent_message`` (item 5);
* Claude Code's tool-use summary quoting a short Bash call (item 5);
* a request repeated word for word after its conversation moved on (item 8).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from scenarios import (
    FAMILIES,
    WEATHER,
    AgentScript,
    Call,
    conv_of,
    edit_request,
    openai_responses_turn,
    run_of,
    serious,
)

from looptap.cassettes.wire import Exchange

Json = dict[str, Any]





# --- Codex: namespaces in an additional_tools item, turns chained by previous_response_id ---------


def _fn(name: str, props: Json | None = None, required: Sequence[str] = ()) -> Json:
    return {
        "type": "function",
        "name": name,
        "description": name,
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": props or {},
            "required": list(required),
            "additionalProperties": False,
        },
    }


#: Codex 0.169's tool groups as it sends them (names and shapes from a recording; descriptions cut).
CODEX_NAMESPACES: list[Json] = [
    {
        "type": "namespace",
        "name": "functions",
        "description": "Default tools.",
        "tools": [
            {
                "type": "custom",
                "name": "exec",
                "description": "Run JavaScript code to orchestrate/compose tool calls",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
            },
            _fn("wait", {"cell_id": {"type": "string"}}, ["cell_id"]),
        ],
    },
    {
        "type": "namespace",
        "name": "clock",
        "description": "Time.",
        "tools": [_fn("sleep", {"ms": {"type": "number"}})],
    },
    {
        "type": "namespace",
        "name": "collaboration",
        "description": "Tools for spawning and managing sub-agents.",
        "tools": [
            _fn(
                "spawn_agent",
                {
                    "task_name": {"type": "string"},
                    "message": {"type": "string", "encrypted": True},
                    "fork_turns": {"type": "string"},
                },
                ["task_name", "message"],
            ),
            _fn("wait_agent", {"timeout_ms": {"type": "number"}}),
        ],
    },
]


def _responses_turn(
    input_items: list[Json],
    prev: Exchange | None,
    *,
    text: str | None = None,
    call: tuple[str, Json] | None = None,
    top_tools: list[Json] | None = None,
) -> Exchange:
    """A Responses round trip as Codex makes it: ``input`` holds only the new items when ``prev``
    is given (``previous_response_id`` its response's id); ``store`` off; a namespaced call
    carries its ``namespace`` as the API sends it."""
    calls = [Call(call[0], call[1])] if call else []
    ex = openai_responses_turn([], text, calls)

    def edit(body: Json) -> None:
        body.update(input=input_items, tools=top_tools or [], store=False, tool_choice="auto",
                    include=["reasoning.encrypted_content"], parallel_tool_calls=False)
        if prev is not None:
            body["previous_response_id"] = orjson.loads(prev.response_body)["id"]

    edit_request(ex, edit)
    resp = orjson.loads(ex.response_body)
    for item in resp["output"]:
        if item["type"] == "function_call" and item["name"] in ("spawn_agent", "wait_agent"):
            item["namespace"] = "collaboration"
    ex.response_chunks = [(0.05, orjson.dumps(resp))]
    return ex


def _call_id(ex: Exchange) -> str:
    return str(
        next(
            i["call_id"]
            for i in orjson.loads(ex.response_body)["output"]
            if i["type"] == "function_call"
        )
    )


def _codex_run(
    *, in_namespace: bool, second: str = "wait_agent", top_level: bool = False
) -> list[Exchange]:
    """Codex's main loop: spawn_agent, then ``second`` (wait_agent), then the answer; the tools
    offered once in the first turn's additional_tools item (or, ``top_level``, in ``tools`` on
    every turn)."""
    tools_item = {"type": "additional_tools", "role": "developer", "tools": CODEX_NAMESPACES}
    opening = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You are Codex."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "What is the weather in Paris?"}],
        },
    ]
    top = CODEX_NAMESPACES if top_level else None
    first = _responses_turn(
        ([] if top_level or not in_namespace else [tools_item]) + opening,
        None,
        call=("spawn_agent", {"task_name": "weather", "message": "Find the weather in Paris."}),
        top_tools=top,
    )
    out1 = {
        "type": "function_call_output",
        "call_id": _call_id(first),
        "output": '{"task_name":"/root/weather"}',
    }
    second_turn = _responses_turn(
        [out1], first, call=(second, {"timeout_ms": 10000}), top_tools=top
    )
    out2 = {
        "type": "function_call_output",
        "call_id": _call_id(second_turn),
        "output": '{"message":"Wait completed.","timed_out":false}',
    }
    last = _responses_turn([out2], second_turn, text="It is sunny in Paris.", top_tools=top)
    return [first, second_turn, last]


def test_codex_namespaced_tools_offered_in_an_input_item_stay_offered_down_the_chain() -> None:
    run = run_of(_codex_run(in_namespace=True))
    assert [c.turns for c in run.conversations] == [[0, 1, 2]]
    assert serious(run) == [], [(f.code, f.message) for f in run.findings]


def test_codex_namespaces_in_top_level_tools_clean_twin() -> None:
    run = run_of(_codex_run(in_namespace=True, top_level=True))
    assert serious(run) == []


def test_a_tool_in_no_namespace_is_still_not_offered() -> None:
    """The bug twin: the chained turn calls a tool none of the namespaces holds; the finding
    lists the tools inside the namespaces, not the namespaces' names."""
    run = run_of(_codex_run(in_namespace=True, second="delete_repository"))
    (f,) = [f for f in run.findings if f.severity in ("warning", "error")]
    assert (f.code, f.seq) == ("E.tool_not_offered", 1)
    offered = f.details["offered"]
    assert {"exec", "wait", "sleep", "spawn_agent", "wait_agent"} <= set(offered)
    assert not {"functions", "clock", "collaboration"} & set(offered), offered


def test_namespaces_inside_a_tool_search_output_are_offered() -> None:
    """Tools a tool search loaded (a ``tool_search_output`` item, namespaces inside) count as
    offered."""
    loaded = {
        "type": "tool_search_output",
        "call_id": "ts_1",
        "status": "completed",
        "execution": "client",
        "tools": [CODEX_NAMESPACES[2]],
    }
    opening = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Spawn a helper."}],
        },
        loaded,
    ]
    first = _responses_turn(
        opening,
        None,
        call=("spawn_agent", {"task_name": "w", "message": "Find the weather in Paris."}),
        top_tools=[{"type": "tool_search"}],
    )
    out1 = {"type": "function_call_output", "call_id": _call_id(first), "output": "{}"}
    second = _responses_turn(
        [out1], first, call=("wait_agent", {}), top_tools=[{"type": "tool_search"}]
    )
    assert serious(run_of([first, second])) == []


# --- Codex's spawn_agent: the sub-agent's task arrives as an agent_message ------------------------


def _codex_sub_agent(payload: str) -> Exchange:
    """A Codex sub-agent's first request (0.169, ``fork_turns: none``): its own tools and developer
    messages, the environment context, then the parent's ``agent_message`` whose encrypted payload
    is the spawn call's ``message`` as the model wrote it."""
    tools_item = {"type": "additional_tools", "role": "developer", "tools": CODEX_NAMESPACES}
    items = [
        tools_item,
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You are Codex."}],
        },
        {
            "type": "message",
            "role": "developer",
            "content": [
                {
                    "type": "input_text",
                    "text": "<multi_agent_role>You are an agent in a team of "
                    "agents.</multi_agent_role>",
                }
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/work</cwd>\n  "
                    "<shell>bash</shell>\n</environment_context>",
                }
            ],
        },
        {
            "type": "agent_message",
            "id": "amsg_1",
            "author": "/root",
            "recipient": "/root/weather",
            "content": [
                {
                    "type": "input_text",
                    "text": "Message Type: NEW_TASK\nTask name: /root/weather\nSender: "
                    "/root\nPayload:\n",
                },
                {"type": "encrypted_content", "encrypted_content": payload},
            ],
        },
    ]
    return _responses_turn(items, None, text="Paris: sunny, 21 C.")


#: What the model wrote as spawn_agent's ``message`` (an encrypted argument: opaque to the client).
TASK_BLOB = "gAAAAABpQ2vX0c1bQ9yR7kY3nP8tLw4sZ_0eHfJm2aUq"


def test_codex_sub_agent_is_linked_to_the_turn_that_spawned_it() -> None:
    first, second, last = _codex_run(in_namespace=True)
    resp = orjson.loads(first.response_body)
    resp["output"][0]["arguments"] = json.dumps({"task_name": "weather", "message": TASK_BLOB})
    first.response_chunks = [(0.05, orjson.dumps(resp))]
    sub = _codex_sub_agent(TASK_BLOB)
    run = run_of([first, sub, second, last])
    assert [c.turns for c in run.conversations] == [[0, 2, 3], [1]]
    assert (conv_of(run, 1).branch, conv_of(run, 1).parent_seq) == ("sub_agent", 0)
    assert serious(run) == []
    # the twin: a sub-agent whose task no pending call sent is a conversation of its own
    run = run_of([first, _codex_sub_agent("gAAAAABpQ2vXsomethingelse_entirely_0000"), second, last])
    assert (conv_of(run, 1).branch, conv_of(run, 1).parent_seq) == (None, None)


# --- Claude Code's tool-use summary of a short call ----------------------------------------------

SUMMARY_SYSTEM = "Write a short summary label describing what these tool calls accomplished."
BASH = Call("Bash", {"command": "ls", "description": "List files"})


def _summary(args: Json, separators: tuple[str, str]) -> AgentScript:
    label = AgentScript("anthropic", system=SUMMARY_SYSTEM, tools=())
    label.user(
        f"Tools completed:\n\nTool: Bash\nInput: {json.dumps(args, separators=separators)}"
        "\nOutput: README.md\n\nLabel:"
    )
    label.reply("Listed files")
    return label


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")], ids=["compact", "spaced"])
def test_summary_of_a_short_bash_call_is_a_side_call_of_its_turn(
    separators: tuple[str, str],
) -> None:
    from scenarios import Tool

    bash = Tool(
        "Bash",
        {
            "type": "object",
            "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
            "required": ["command"],
        },
    )
    main = AgentScript("anthropic", system="You are Claude Code.", tools=(bash,))
    main.user("What is in this folder?")
    main.reply(calls=[copy.copy(BASH)])
    main.results("README.md")
    main.reply("One file: README.md.")
    run = run_of(
        [main.exchanges[0], _summary(BASH.args, separators).exchanges[0], main.exchanges[1]]
    )
    assert [c.turns for c in run.conversations] == [[0, 2], [1]]
    assert (conv_of(run, 1).branch, conv_of(run, 1).parent_seq) == ("side_call", 0)
    assert serious(run) == []
    # the twin: a summary of a call this run never made links to nothing
    run = run_of(
        [
            main.exchanges[0],
            _summary({"command": "pwd", "description": "Where am I"}, separators).exchanges[0],
            main.exchanges[1],
        ]
    )
    assert (conv_of(run, 1).branch, conv_of(run, 1).parent_seq) == (None, None)


# --- a request repeated word for word: exact tool-call ids win -----------------------------------


def _again(ex: Exchange) -> Exchange:
    rep = copy.deepcopy(ex)
    rep.request_body = bytes(ex.request_body)
    rep.forget_request_json()
    return rep


# APIs with call ids
@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in ("gemini", "ollama")])
def test_a_repeated_request_stays_with_the_conversation_its_ids_pair_with(family: str) -> None:
    """Agent A's second request sent again after A went on; B, started alike, waits. The repeat's
    tool-call ids are A's: it belongs to A (its history rewritten back to that point), not to B."""
    a, b = AgentScript(family, system="S"), AgentScript(family, system="S")
    for s in (a, b):
        s.user("Weather in Paris?")
    a.reply(calls=[Call("get_weather", {"city": "Paris"})])
    a.results("sunny")
    b.reply(calls=[Call("get_weather", {"city": "Paris"})])
    b.results("sunny")
    a1 = a.reply(calls=[Call("get_weather", {"city": "Lyon"})])
    a.results("rain")
    a2 = a.reply("Sunny in Paris, rain in Lyon.")
    b1 = b.reply("Sunny in Paris.")
    run = run_of([a.exchanges[0], b.exchanges[0], a1, a2, _again(a1), b1])
    assert [c.turns for c in run.conversations] == [[0, 2, 3, 4], [1, 5]]
    # A went back after its final answer with no new input: said on A's turn; B is clean
    assert serious(run) == [("C.continued_after_final_answer", 4)]
    # the clean twin: B's own next request still goes on in B
    run = run_of([a.exchanges[0], b.exchanges[0], a1, a2, b1])
    assert [c.turns for c in run.conversations] == [[0, 2, 3], [1, 4]]


# --- the Vercel AI SDK over Responses, store on: the model's items referred to by id --------------


def _vercel_loop(ref: Any, *, reasoning_ref: bool = True) -> list[Exchange]:
    """@ai-sdk/openai's Responses input with ``store`` on (its default): the model's messages and
    reasoning items go back as ``{"type": "item_reference", "id": …}``; function calls are sent
    whole (their outputs pair by call_id). ``ref(item)`` is what the client sends for an item."""
    user = {
        "role": "user",
        "content": [{"type": "input_text", "text": "What is the weather in Paris?"}],
    }
    first = openai_responses_turn(
        [user],
        None,
        [Call("get_weather", {"city": "Paris"})],
        reasoning="Look it up.",
        tools=[WEATHER],
    )
    resp1 = orjson.loads(first.response_body)
    rs, fc = resp1["output"][0], resp1["output"][1]
    hist = [
        user,
        ref(rs) if reasoning_ref else rs,
        {
            "type": "function_call",
            "call_id": fc["call_id"],
            "name": fc["name"],
            "arguments": fc["arguments"],
            "id": fc["id"],
        },
        {"type": "function_call_output", "call_id": fc["call_id"], "output": "sunny, 21 C"},
    ]
    second = openai_responses_turn(hist, "It is sunny in Paris.", tools=[WEATHER])
    msg = orjson.loads(second.response_body)["output"][0]
    hist2 = [
        *hist,
        ref(msg),
        {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]},
    ]
    third = openai_responses_turn(hist2, "Rain tomorrow.", tools=[WEATHER])
    for ex in (first, second, third):
        edit_request(ex, lambda body: body.update(store=True))
    return [first, second, third]


def _reference(item: Json) -> Json:
    return {"type": "item_reference", "id": item["id"]}


def test_vercel_item_references_count_as_echoed() -> None:
    run = run_of(_vercel_loop(_reference))
    assert [c.turns for c in run.conversations] == [[0, 1, 2]]
    assert serious(run) == [], [(f.code, f.message) for f in run.findings]


def test_vercel_items_sent_whole_clean_twin() -> None:
    def whole(item: Json) -> Json:
        return {k: v for k, v in item.items() if k != "status"}

    assert serious(run_of(_vercel_loop(whole))) == []


def test_a_reference_to_another_item_is_still_not_echoed() -> None:
    """The bug twin: the client refers to an item the model never gave this conversation."""
    run = run_of(
        _vercel_loop(
            lambda item: (
                {"type": "item_reference", "id": "msg_" + "0" * 24}
                if item.get("type") == "message"
                else _reference(item)
            )
        )
    )
    assert ("C.assistant_not_echoed", 2) in serious(run), serious(run)


# --- values the API treats as equal are no history change (issue 27 item 3, C layer) --------------


def _rewrap(family: str) -> Any:
    """The history re-serialised another valid way: nulls for absent fields, lone text parts for
    strings (``model_dump()`` without ``exclude_none``, a framework's own message objects)."""

    def edit(b: Json) -> None:
        if family == "openai_chat":
            for m in b["messages"]:
                if m["role"] == "assistant" and "tool_calls" in m:
                    m.update(content=None, refusal=None, name=None)
                elif isinstance(m.get("content"), str):
                    m["content"] = [{"type": "text", "text": m["content"]}]
        elif family == "anthropic":
            for m in b["messages"]:
                if isinstance(m["content"], str):
                    m["content"] = [{"type": "text", "text": m["content"]}]
                for blk in m["content"]:
                    if blk["type"] == "tool_result" and isinstance(blk["content"], str):
                        blk.update(
                            content=[{"type": "text", "text": blk["content"]}], is_error=None
                        )
        else:
            for m in b["input"]:
                if m.get("role") == "user" and isinstance(m.get("content"), str):
                    m.update(type="message", content=[{"type": "input_text", "text": m["content"]}])
                if m.get("type") == "function_call":
                    m.update(id=None, status=None)

    return edit


@pytest.mark.parametrize("family", ["openai_chat", "anthropic", "openai_responses"])
@pytest.mark.parametrize("change", ["equal", "text_changed"])
def test_equal_encodings_of_the_history_are_no_change(family: str, change: str) -> None:
    from scenarios import Script

    s = Script(family, tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply("It is sunny.")
    s.user("And Rome?")
    s.reply("Rainy.")
    edit_request(s.exchanges[2], _rewrap(family))
    if change == "text_changed":  # the bug twin: the tool's result really rewritten

        def reword(b: Json) -> None:
            if family == "openai_chat":
                b["messages"][2]["content"] = [{"type": "text", "text": "cloudy"}]
            elif family == "anthropic":
                b["messages"][2]["content"][0]["content"] = [{"type": "text", "text": "cloudy"}]
            else:
                next(i for i in b["input"] if i.get("type") == "function_call_output")["output"] = (
                    "cloudy"
                )

        edit_request(s.exchanges[2], reword)
    run = run_of(s.exchanges)
    assert [c.turns for c in run.conversations] == [[0, 1, 2]]
    assert serious(run) == ([] if change == "equal" else [("C.history_mutated", 2)])
