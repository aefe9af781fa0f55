"""Never a traceback from reading, found as a class (issue 100 item 5; docs/reliability.md, "Never
a traceback from reading"): a property-based generator of what clients do to the history they
send back — drop, duplicate, replace, reorder, merge, repeat an identical summary (in place, or
written by a summariser's side call), interleave two conversations — over the four main families,
each run built as request/response sequences in the family's own wire format
(:mod:`scenarios`). For every run:

* no check or analysis step raises (the suite sets ``LOOPTAP_RAISE_CONTAINED``: a contained
  failure raises here) and the analysis says no error;
* the counts add up (as before + changed + new = sent, :func:`test_context_counts._adds_up`);
* a warning or error of the client's layer (C) only on a round trip whose history was changed,
  or on the turn right after it (what the change left, e.g. a call whose result it dropped):
  an unchanged run, interleaved or not, has none.

``LOOPTAP_SLOW=1`` runs 2,000 examples (``LOOPTAP_TRANSFORM_EXAMPLES`` sets another count); the
suite runs 40. Every distinct failure a long run found is kept below as an ``@example``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scenarios import WEATHER, AgentScript, Call, assistant_of, family_turn, results_of, user_of
from test_context_counts import _adds_up

from looptap.cassettes.analysis import analyse
from looptap.cassettes.wire import Exchange

FAMILIES4 = ("openai_chat", "openai_responses", "anthropic", "gemini")
SYSTEM = "You are a weather assistant. Use get_weather for every city."
SUMMARISER = "You are a conversation summarizer. Summarize the conversation so far."
#: The summary every summarisation of an agent returns, word for word (the instance of issue 100
#: item 5), after the agent's name (two agents opening alike: test_two_agents_opening_alike).
SUMMARY = "Summary so far: the user asked about the weather in several cities; all were sunny."
CITIES = ("Paris", "Lyon", "Oslo", "Rome", "Kyiv", "Lima")
EXAMPLES = int(
    os.environ.get("LOOPTAP_TRANSFORM_EXAMPLES") or (2000 if os.environ.get("LOOPTAP_SLOW") else 40)
)

Json = dict[str, Any]
#: One history unit: its kind (``user``, ``answer``, ``results``) and its wire items.
Unit = tuple[str, list[Json]]

#: A client's change to the history it sends next: the operation and its two numbers (indexes
#: into the history's units, taken modulo its length).
Op = tuple[str, int, int]
OPS = ("drop", "duplicate", "replace", "reorder", "merge", "summary", "summariser", "asked")


@dataclass
class Agent:
    """One conversation: rounds of a question, 0-2 tool calls answered, a text answer; before a
    request, maybe a change to its history."""

    family: str
    name: str
    history: list[Unit] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    #: Positions (in ``exchanges``) of the requests whose history was changed.
    changed: set[int] = field(default_factory=set)
    calls: int = 0
    summary: str = SUMMARY

    def send(self, text: str | None, calls: list[Call], op: Op | None) -> None:
        if op is not None and self.history:
            self._change(op)
        items = [i for _, its in self.history for i in its]
        ex = family_turn(self.family, items, response_text=text, tool_calls=calls, tools=[WEATHER])
        ex = AgentScript(self.family, system=SYSTEM)._add(ex)  # the system prompt, as sent
        self.exchanges.append(ex)
        self.history.append(("answer", assistant_of(self.family, text, calls)))

    def _change(self, op: Op) -> None:
        kind, a, b = op
        h, n = self.history, len(self.history)
        i, j = a % n, b % n
        f = self.family
        self.changed.add(len(self.exchanges))
        if kind == "drop":
            del h[min(i, j) : max(i, j) + 1]
        elif kind == "duplicate":
            h.insert(i + 1, h[i])
        elif kind == "replace":
            h[i] = ("user", [user_of(f, f"{self.name}: instead, tell me about {CITIES[j % 6]}.")])
        elif kind == "reorder":
            h[i], h[j] = h[j], h[i]
        elif kind == "merge":
            texts = [_text(u) for u in h[i : i + 2]]
            h[i : i + 2] = [("user", [user_of(f, " ".join(t for t in texts if t) or "(merged)")])]
        else:  # a summary, the same words every time, in place of the history before unit i
            if kind == "asked":  # the agent's own model asked for it: its answer sent back
                items = [it for _, its in h for it in its]
                items.append(user_of(f, "Please summarize this conversation."))
                ex = family_turn(f, items, response_text=self.summary, tools=[WEATHER])
                self.exchanges.append(AgentScript(f, system=SYSTEM)._add(ex))
                self.changed.add(len(self.exchanges))
                h[: i + 1] = [("answer", assistant_of(f, self.summary))]
                return
            if kind == "summariser":  # written by a side call that read that history
                side = AgentScript(f, tools=[], system=SUMMARISER)
                side.history[:] = [it for _, its in h[: i + 1] for it in its]
                side.user("Please summarize this conversation.")
                side.reply(self.summary)
                self.exchanges.append(side.exchanges[0])
                self.changed.add(len(self.exchanges))
            as_answer = j % 2 == 0
            unit = (
                ("answer", assistant_of(f, self.summary))
                if as_answer
                else ("user", [user_of(f, self.summary)])
            )
            h[: i + 1] = [unit]
        if not h:
            h.append(("user", [user_of(f, f"{self.name}: and now?")]))


def _text(u: Unit) -> str:
    out = []
    for item in u[1]:
        for key in ("content", "text"):
            v = item.get(key)
            if isinstance(v, str):
                out.append(v)
        for part in item.get("parts") or item.get("content") or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return " ".join(out)


def _agent(
    family: str,
    name: str,
    rounds: list[tuple[int, list[Op | None]]],
    alike: bool = False,
    signed: bool = False,
) -> Agent:
    """An agent's run: per round, its number of tool calls and the change (or none) before each
    of its requests (``alike``: its summary the other agent's, word for word; ``signed``: its
    calls carry Gemini's thought signatures)."""
    agent = Agent(family, name, summary=SUMMARY if alike else f"{name}: {SUMMARY}")
    for r, (n_calls, ops) in enumerate(rounds):
        ops = [*ops, None, None, None][: n_calls + 1]
        city = CITIES[r % len(CITIES)]
        agent.history.append(("user", [user_of(family, f"{name}: the weather in {city}?")]))
        for k in range(n_calls):
            agent.calls += 1
            cid = f"call_{name}_{agent.calls}"
            call = Call(
                "get_weather", {"city": f"{city} {k}"}, cid, signature=f"sig_{cid}" * signed
            )
            agent.send(None, [call], ops[k])
            out = f"{name}: {city} {k} is sunny"
            agent.history.append(("results", results_of(family, [(call, out)])))
        agent.send(f"{name}: {city} is sunny.", [], ops[n_calls])
    return agent


_ops = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(OPS), st.integers(0, 12), st.integers(0, 12)),
)
_rounds = st.lists(st.tuples(st.integers(0, 2), st.lists(_ops, max_size=3)), min_size=1, max_size=4)


@dataclass
class Case:
    family: str
    agents: list[list[tuple[int, list[Op | None]]]]
    #: The order the agents' round trips were sent in (agent numbers, taken modulo their count).
    order: list[int]
    #: The agents' summaries are the same words (else each starts with its agent's name).
    alike: bool = False
    #: The model's calls carry a continuity token where the family has one beside the call id
    #: (Gemini's ``thoughtSignature``, as Gemini 2.5 and 3 with thinking send it).
    signed: bool = False


_cases = st.builds(
    Case,
    st.sampled_from(FAMILIES4),
    st.lists(_rounds, min_size=1, max_size=2),
    st.lists(st.integers(0, 1), max_size=40),
    st.booleans(),
    st.booleans(),
)


def _run(case: Case) -> tuple[list[Exchange], set[int], set[int]]:
    """The run's round trips in sending order, with seqs; the seqs of the changed requests, and
    of the turns right after a change."""
    agents = [
        _agent(case.family, "AB"[n], rounds, case.alike, case.signed)
        for n, rounds in enumerate(case.agents)
    ]
    queues = [list(enumerate(a.exchanges)) for a in agents]
    sent: list[tuple[int, int, Exchange]] = []
    for pick in [*case.order, *[0] * 64, *[1] * 64]:
        q = queues[pick % len(queues)]
        if q:
            pos, ex = q.pop(0)
            sent.append((pick % len(queues), pos, ex))
    changed, after = set(), set()
    for seq, (n, pos, ex) in enumerate(sent):
        ex.seq = seq
        if pos in agents[n].changed:
            changed.add(seq)
        if pos - 1 in agents[n].changed:
            after.add(seq)
    return [ex for _, _, ex in sent], changed, after


def check(case: Case) -> None:
    exchanges, changed, after = _run(case)
    run = analyse(exchanges)
    assert not run.errors, run.errors
    _adds_up(run)
    flagged = {
        (f.seq, f.code)
        for f in run.findings
        if f.layer == "C" and f.severity in ("warning", "error")
    }
    assert {s for s, _ in flagged} <= changed | after, (sorted(flagged), changed, after)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_cases)
# what the long runs found, each fixed: a history going on with the previous answer, the question
# before it dropped (C.history_trimmed's details.dropped a count where _roots read indices:
# TypeError); the summary the agent's model wrote, the same words each time, sent back where the
# previous request had it (counted as kept and as the answer's echo at once: the counts did not
# add up); on a wire without call ids (Gemini), a call whose result the client replaced by text
# (C.dropped_tool_result, rightly) took the result of the next call of its tool by name, so that
# next call was said dropped too (a wrong finding); a question sent twice, then the copy and the
# answer after it dropped: the question kept after them was counted new (no echo found), not as
# before; two agents interleaved, one asking its own model for a summary and sending it back in
# place of its question: that request shares only its opening with both and was read as the
# other agent's history rewritten (a false C.history_mutated on the other's next request),
# though it carries its own call's id (the token decides there too)
@example(Case("openai_chat", [[(0, []), (0, [("duplicate", 0, 0)]), (0, [("drop", 1, 2)])]], []))
@example(Case("gemini", [[(2, [None, None, ("replace", 4, 0)]), (1, [])]], []))
@example(Case("openai_chat", [[(0, []), (1, [None, ("reorder", 0, 8)])]], []))
@example(Case("gemini", [[(0, []), (0, [("asked", 0, 0)])]], []))
@example(Case("openai_chat", [[(0, [("summary", 0, 0)]), (0, [("asked", 2, 0)])]], []))
@example(Case("openai_chat", [[(1, [None, ("asked", 0, 0)])], [(1, [])]], [0, 1]))
def test_no_history_transformation_breaks_the_analysis(case: Case) -> None:
    check(case)


@settings(max_examples=max(EXAMPLES // 4, 10), deadline=None, database=None)
@given(
    st.sampled_from(FAMILIES4),
    st.lists(st.tuples(st.integers(0, 2), st.just([])), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 2), st.just([])), min_size=1, max_size=4),
    st.lists(st.integers(0, 1), max_size=40),
)
def test_an_unchanged_run_interleaved_or_not_has_no_client_warning(
    family: str, a: Any, b: Any, order: list[int]
) -> None:
    for case in (Case(family, [a], []), Case(family, [a, b], order)):
        exchanges, changed, _ = _run(case)
        assert not changed
        run = analyse(exchanges)
        assert not run.errors, run.errors
        _adds_up(run)
        bad = [(f.seq, f.code) for f in run.findings if f.layer == "C" and f.severity != "info"]
        assert not bad, bad


@pytest.mark.parametrize("family", FAMILIES4)
def test_two_agents_opening_alike(family: str) -> None:
    """Found by the long run: agent B's first request (the system prompt and the summary, word
    for word agent A's) reads as A trimming its history back to them, and A's next request,
    which extends A's previous one exactly (its answer's call id echoed, a continuity token of
    A's), was then compared with B's turn: a false ``C.assistant_not_echoed`` on A. That request
    proves B's turn was never A's: it is moved out to a conversation of its own, A goes on from
    its own turn, and B's next request goes on from B's (docs/threading.md, "Provider evidence
    first"). (Responses reads B's first request as a conversation of its own from the start.)"""
    case = Case(
        family,
        [[(0, []), (2, [("summary", 0, 0)])], [(0, [("summary", 0, 0)]), (1, [])]],
        [0, 0, 0, 1, 0, 1],
        alike=True,
        signed=True,
    )
    check(case)
    exchanges, _, _ = _run(case)
    run = analyse(exchanges)
    a2, b0, a3, b1 = (run.turns[ex.seq] for ex in exchanges[2:6])
    assert (a3.conversation, a3.previous_seq, a3.c.echoed_assistant) == (
        a2.conversation,
        a2.seq,
        True,
    )
    assert (b0.previous_seq, b0.c.link, b0.c.kept) == (None, "start", 0)
    assert b0.conversation not in {run.turns[s].conversation for s in (0, 1, 2, 4)}
    if family != "openai_responses":  # (its B goes on in another conversation, as before)
        assert (b1.conversation, b1.previous_seq, b1.c.echoed_assistant) == (
            b0.conversation,
            b0.seq,
            True,
        )


def test_two_agents_opening_alike_on_a_wire_without_tokens() -> None:
    """The same run on Gemini without thought signatures: no id or token says which of the two
    turns A's request goes on from, so B's turn stays where it was read and whether A echoed its
    answer is not judged (no ``C.assistant_not_echoed``)."""
    case = Case(
        "gemini",
        [[(0, []), (2, [("summary", 0, 0)])], [(0, [("summary", 0, 0)])]],
        [0, 0, 0, 1],
        alike=True,
    )
    check(case)
    exchanges, _, _ = _run(case)
    run = analyse(exchanges)
    a, b = run.turns[exchanges[4].seq], run.turns[exchanges[3].seq]
    assert (a.previous_seq, a.c.echoed_assistant) == (b.seq, None)
    assert not [f for f in a.findings if f.layer == "C" and f.severity != "info"]
