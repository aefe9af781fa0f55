"""Evidence, not resemblance (issue 90, docs/threading.md "Context management"): a history that
differs from what was sent is ``C.history_mutated`` whatever its length, unless the evidence
tables say a framework managed it (a placeholder of its own, a head drop that keeps the order and
identity of what stays, a summary a side call answered).

The mutation table: each variant a real client bug makes (a tool result rewritten shorter, at equal
length, longer; a reordered group; an edited call argument; a dropped middle message) × Chat
Completions, Responses, Anthropic Messages and Gemini × with and without a real trim of the head
on an earlier turn of the same run. ``C.history_mutated`` is found on the mutated request in every
mutated case, and never in a managed-only case (the trim alone, each framework's placeholder).

On c86d115d: ``shorter`` was a ``C.history_trimmed`` info ("cleared in place") on every family,
``dropped_middle`` a ``C.history_trimmed`` info, the AutoGen head-and-tail placeholder a
``C.history_mutated`` warning, and Strands' and openai-agents' truncations went unverified."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from scenarios import WEATHER, AgentScript, Call, assistant_of, results_of, user_of

from looptap.cassettes.analysis import RunAnalysis

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
SYSTEM = "You are a travel assistant. Use the tools to answer."
TASK = "Plan a weekend in Lisbon: check the weather there and suggest two museums."
EARLIER = "What is the weather in Faro today?"
NOTE = "Prefer indoor museums, please."

#: One logical history item: ("user", text), ("asst", text, calls), ("res", [(call, output)]).
Item = tuple[Any, ...]


def _render(family: str, items: list[Item]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for it in items:
        if it[0] == "user":
            out.append(user_of(family, it[1]))
        elif it[0] == "asst":
            out.extend(assistant_of(family, it[1], it[2]))
        else:
            out.extend(results_of(family, it[1]))
    return out


R1 = "sunny, 24 C, light wind from the north"


def _shorter(h: list[Item], c: list[Call]) -> None:
    h[h.index(("res", [(c[1], R1)]))] = ("res", [(c[1], R1[:-1])])


def _equal(h: list[Item], c: list[Call]) -> None:
    h[h.index(("res", [(c[1], R1)]))] = ("res", [(c[1], R1.replace("24", "25"))])


def _longer(h: list[Item], c: list[Call]) -> None:
    h[h.index(("res", [(c[1], R1)]))] = ("res", [(c[1], R1 + " (updated)")])


def _reordered(h: list[Item], c: list[Call]) -> None:
    """The second call's group (answer and result) moved before the first's."""
    i = h.index(("asst", None, [c[1]]))
    first, second = h[i : i + 2], h[i + 2 : i + 4]
    h[i : i + 4] = second + first


def _edited_argument(h: list[Item], c: list[Call]) -> None:
    i = h.index(("asst", None, [c[1]]))
    h[i] = ("asst", None, [Call(c[1].name, {"city": "Porto"}, id=c[1].id)])


def _dropped_middle(h: list[Item], c: list[Call]) -> None:
    """A user message leaves from the middle, what came before and after it kept."""
    h.remove(("user", NOTE))


VARIANTS: dict[str, Callable[[list[Item], list[Call]], None]] = {
    "shorter": _shorter,
    "equal": _equal,
    "longer": _longer,
    "reordered_group": _reordered,
    "edited_argument": _edited_argument,
    "dropped_middle": _dropped_middle,
}


def _tag(family: str) -> str:
    return {"openai_chat": "c", "openai_responses": "r", "anthropic": "a", "gemini": "g"}[family]


def run_of(family: str, variant: str | None, trim: bool) -> tuple[AgentScript, int, int | None]:
    """An agent's run: an earlier question answered, the task, three weather calls; with ``trim``
    the earlier question and its answer leave the head on the fourth request (a real trim); the
    last request carries ``variant``'s bug. Returns the script, the mutated request's seq and the
    trimmed one's."""
    t = _tag(family)
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    calls = [
        Call("get_weather", {"city": city}, id=f"call_{t}m_{i}")
        for i, city in enumerate(("Faro", "Lisbon", "Sintra", "Cascais"))
    ]
    h: list[Item] = [("user", EARLIER)]
    outs = ["rainy, 15 C", R1, "cloudy, 19 C", "windy, 20 C"]
    trimmed: int | None = None
    for i, call in enumerate(calls):
        if i == 1:
            h.append(("user", TASK))
        if trim and i == 3:
            head = h.index(("user", TASK))
            h = h[head:]  # the earlier question and its round leave: a head drop
            trimmed = len(s.exchanges)
        s.history = _render(family, h)
        s.reply(calls=[call])
        h += [("asst", None, [call]), ("res", [(call, outs[i])])]
        if i == 1:
            h.append(("user", NOTE))
        if i == 0:
            s.history = _render(family, h)
            s.reply("Faro is rainy, 15 C.")
            h.append(("asst", "Faro is rainy, 15 C.", []))
    if variant is not None:
        VARIANTS[variant](h, calls)
    s.history = _render(family, h)
    s.reply("Sunny in Lisbon. Museums: Gulbenkian and the Tile Museum.")
    return s, len(s.exchanges) - 1, trimmed


def _codes(run: RunAnalysis, code: str) -> list[int]:
    return sorted(f.seq or 0 for f in run.findings if f.code == code)


TABLE = [(v, f, trim) for v in VARIANTS for f in FAMILIES4 for trim in (False, True)]


@pytest.mark.parametrize(
    ("variant", "family", "trim"),
    TABLE,
    ids=[f"{v}-{f}-{'trim' if t else 'plain'}" for v, f, t in TABLE],
)
def test_every_mutation_is_history_mutated(variant: str, family: str, trim: bool) -> None:
    s, mutated, trimmed = run_of(family, variant, trim)
    run = s.analyse()
    assert mutated in _codes(run, "C.history_mutated")
    assert _codes(run, "C.history_mutated") == [mutated]
    # the mutated request is not said to be managed
    assert mutated not in _codes(run, "C.history_trimmed")
    if trimmed is not None:
        assert trimmed in _codes(run, "C.history_trimmed")


@pytest.mark.parametrize("family", FAMILIES4)
def test_a_real_trim_alone_is_never_a_mutation(family: str) -> None:
    s, _, trimmed = run_of(family, None, trim=True)
    run = s.analyse()
    assert _codes(run, "C.history_mutated") == []
    assert _codes(run, "C.history_trimmed") == [trimmed]
    assert len(run.conversations) == 1


def _base_items(family: str) -> list[Item]:
    t = _tag(family)
    calls = [
        Call("get_weather", {"city": city}, id=f"call_{t}m_{i}")
        for i, city in enumerate(("Faro", "Lisbon", "Sintra", "Cascais"))
    ]
    outs = ["rainy, 15 C", R1, "cloudy, 19 C", "windy, 20 C"]
    h: list[Item] = [("user", EARLIER)]
    for i, call in enumerate(calls):
        if i == 1:
            h.append(("user", TASK))
        h += [("asst", None, [call]), ("res", [(call, outs[i])])]
        if i == 1:
            h.append(("user", NOTE))
        if i == 0:
            h.append(("asst", "Faro is rainy, 15 C.", []))
    return h


def _result_at(h: list[Item], output: str) -> int:
    return next(i for i, it in enumerate(h) if it[0] == "res" and it[1][0][1] == output)


def _placed(text_of: Callable[[str], str]) -> Callable[[list[Item], list[Call]], None]:
    def edit(h: list[Item], _: list[Call]) -> None:
        i = _result_at(h, R1)
        call, out = h[i][1][0]
        h[i] = ("res", [(call, text_of(out))])

    return edit


LONG = "sunny all day; " * 40  # 600 characters


def _strands(text: str) -> str:
    """Strands' _truncate_tool_results, as strands-agents 1.62.0 writes it."""
    removed = len(text) - 400
    return f"{text[:200]}...\n\n... [truncated: {removed} chars removed] ...\n\n...{text[-200:]}"


def _agents_trim(text: str) -> str:
    """openai-agents 0.24.0 ToolOutputTrimmer._trim_function_call_output."""
    head = f"[Trimmed: get_weather output \u2014 {len(text)} chars \u2192 20 char preview]"
    return f"{head}\n{text[:20]}..."


def _autogen_head_and_tail(h: list[Item], _: list[Call]) -> None:
    """AutoGen's HeadAndTailChatCompletionContext(head_size=1, tail_size=2): the first message,
    ``Skipped N messages.``, the latest two."""
    n = len(h) - 3
    h[1:-2] = [("user", f"Skipped {n} messages.")]


def _autogen_skipped_one(h: list[Item], _: list[Call]) -> None:
    """AutoGen's head-and-tail context when one message is skipped: the placeholder alone stands
    in its place (one for one, yet no edit)."""
    i = h.index(("asst", "Faro is rainy, 15 C.", []))
    h[i] = ("user", "Skipped 1 messages.")


MANAGED: dict[str, tuple[Callable[[list[Item], list[Call]], None], bool]] = {
    "langchain_cleared": (_placed(lambda _: "[cleared]"), False),
    "claude_code_cleared": (_placed(lambda _: "[Old tool result content cleared]"), False),
    "strands_truncated": (_placed(_strands), True),
    "openai_agents_trimmed": (_placed(_agents_trim), True),
    "autogen_head_and_tail": (_autogen_head_and_tail, False),
    "autogen_skipped_one": (_autogen_skipped_one, False),
}


def _managed_run(family: str, name: str) -> tuple[RunAnalysis, int]:
    """The run without a bug (its Lisbon result long where the framework truncates long ones),
    its last request managed by framework ``name``."""
    edit, long = MANAGED[name]
    s = AgentScript(family, tools=[WEATHER], system=SYSTEM)
    full = _base_items(family)
    if long:
        i = _result_at(full, R1)
        full[i] = ("res", [(full[i][1][0][0], LONG)])
    asks = [n for n, it in enumerate(full) if it[0] == "asst"] + [len(full)]
    for n in asks:
        h = full[:n]
        if n == len(full):
            if long:
                i = _result_at(h, LONG)
                call = h[i][1][0][0]
                trunc = _strands if name == "strands_truncated" else _agents_trim
                h[i] = ("res", [(call, trunc(LONG))])
            else:
                edit(h, [])
        s.history = _render(family, h)
        if n < len(full):
            s.reply(full[n][1], calls=full[n][2])
        else:
            s.reply("Sunny in Lisbon. Museums: Gulbenkian and the Tile Museum.")
    return s.analyse(), len(s.exchanges) - 1


@pytest.mark.parametrize("family", FAMILIES4)
@pytest.mark.parametrize("name", list(MANAGED))
def test_a_framework_placeholder_is_management(family: str, name: str) -> None:
    run, last = _managed_run(family, name)
    assert _codes(run, "C.history_mutated") == []
    assert _codes(run, "C.history_trimmed") == [last]
    assert len(run.conversations) == 1
