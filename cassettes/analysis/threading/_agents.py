"""Rules about agents: which registered turn a request most likely goes on from, and whether the
request is that turn's agent going on or another agent (a handoff, a group chat's other agent, an
agent used as a tool, a side call over the history). Each rule reads the threads and the request."""

from __future__ import annotations

from typing import Any

import orjson

from ...models import Part
from .._message_keys import _ROLE, _part_keys, stable
from ._data import MAX_PER_PREFIX, Keys, Link, Registered, Request, Threads, TurnInfo
from ._words import SCAN_OPENING, names_agent, norm_prompt

#: Messages after a handed loop's first request in which the loop's last answer is looked for.
SCAN_BACK = 64


def rank(s: Threads, r: Request, tid: int, live: bool) -> tuple[bool, bool, bool]:
    """How likely turn ``tid`` is the one the request goes on from: the same agent, then a turn
    whose calls the request answers, then a turn still waiting for its continuation."""
    t = s.turns[tid]
    return (
        t.system == r.system and t.tools == r.tools,
        bool(r.ids and t.echo_ids & r.ids),
        live,
    )


def choose(s: Threads, r: Request, regs: list[Registered]) -> tuple[Registered, int]:
    """The most likely registration, and how many conversations rank as high."""
    regs = regs[-MAX_PER_PREFIX:]
    best = max(regs, key=lambda g: (rank(s, r, g.turn, s.live(g)), g.turn))
    top = rank(s, r, best.turn, s.live(best))
    tied = {g.conversation for g in regs if rank(s, r, g.turn, s.live(g)) == top}
    return best, len(tied)


def other_agent(r: Request, t: TurnInfo) -> bool:
    """``t`` was made under another system prompt and another tool set than this request."""
    return t.system != r.system and t.tools != r.tools


def hands_over(r: Request, prev: TurnInfo) -> bool:
    """The request ends with nothing but the results of calls ``prev`` made: the loop goes on
    under another agent (a handoff: openai-agents, swarm), not a side call over the history,
    which asks something of its own (a summary, a title) in its last message."""
    if not r.messages or not (prev.echo_ids or prev.echo_names):
        return False
    last = r.messages[-1].parts
    results = [p.tool_result for p in last if p.tool_result is not None]
    if not results or any(
        p.tool_result is None and p.kind == "text" and (p.text or "").strip() for p in last
    ):
        return False
    # The request echoes ``prev``'s calls under their own ids: exact ids say it is the same
    # loop, whatever ids its results carry (a wrong id is the client's bug, named on this turn).
    if r.ids & prev.echo_ids:
        return True
    # By call id; where the API names only the tool (Gemini, Ollama), by name.
    return all(
        res.call_id in prev.echo_ids
        if res.call_id
        else (res.name is not None and res.name in prev.echo_names)
        for res in results
    )


def receives_answer(r: Request, best: Registered, prev: TurnInfo) -> bool:
    """The request, under another system prompt, carries ``prev``'s history and then ``prev``'s
    answer as a *user* message (a named one, AutoGen's group chats): another agent hearing what
    this one said, not this agent's next step (which echoes its answer as its own)."""
    n = best.length
    if (
        best.with_echo
        or n != prev.length
        or prev.failed
        or prev.system == r.system
        or not prev.echo_parts
    ):
        return False
    messages = r.messages
    if len(messages) <= n or _ROLE.get(messages[n].role, messages[n].role) != "user":
        return False
    return _part_keys(messages[n].parts) == prev.echo_parts


def hears_final_answer(s: Threads, r: Request, best: Registered, keys: Keys) -> int | None:
    """The latest turn of ``best``'s conversation, when this request (under another system
    prompt) is an opening that turn's history began with and then that turn's final answer
    (no calls) as a user message, and nothing more: another agent of a group chat hearing what
    this one concluded. The agent's own tool steps stay its own (AutoGen's teams share an
    agent's response, not its inner calls), so the shared history skips them."""
    latest = s.last_of.get(s.turns[best.turn].conversation)
    n = best.length
    messages = r.messages
    if latest is None or latest == best.turn or best.with_echo or len(messages) != n + 1:
        return None
    t = s.turns[latest]
    if (
        t.failed
        or t.echo_ids
        or t.echo_names
        or not t.echo_parts
        or t.system == r.system
        or t.keys is None
    ):
        return None
    if (
        len(t.keys.loose) < n
        or t.keys.loose[n - 1] != keys.loose[n - 1]
        or _ROLE.get(messages[n].role, messages[n].role) != "user"
    ):
        return None
    return latest if _part_keys(messages[n].parts) == t.echo_parts else None


def handed_to(r: Request, t: TurnInfo) -> bool:
    """``t``'s answer made a transfer call naming an agent, this request is made under a system
    prompt that names that agent, and it answers none of ``t``'s calls: the run was handed to it
    (Google ADK's ``transfer_to_agent``: the next agent tells the transfer as context text)."""
    return (
        bool(t.handoff_to) and not (r.ids & t.echo_ids) and names_agent(r.system_text, t.handoff_to)
    )


def agent_tool(s: Threads, r: Request) -> int | None:
    """The turn, its conversation's latest, whose pending call handed this request's only
    question over word for word (an agent used as a tool: ADK's AgentTool, openai-agents'
    ``as_tool``), if any."""
    asked = [m for m in r.messages[:SCAN_OPENING] if _ROLE.get(m.role, m.role) != "system"]
    if len(asked) != 1 or _ROLE.get(asked[0].role, asked[0].role) != "user":
        return None
    tid = s.prompts.get(
        norm_prompt(" ".join(p.text for p in asked[0].parts if p.kind == "text" and p.text))
    )
    if tid is None or not s.latest(tid):
        return None
    return tid


def _calls_running(r: Request, t: TurnInfo, link: Link) -> bool:
    """``t``'s answer made calls, and the request (linked to ``t``) neither echoes the answer
    nor answers any of them: they may still be running. A call cut by the token cap runs
    nowhere (its arguments are cut): a request after it is the loop asking again."""
    if t.failed or t.cut or not (t.echo_ids or t.echo_names) or t.keys is None:
        return False
    if not r.messages:
        return False
    return not (link.echoed or r.ids & t.echo_ids)


#: The key of an empty tool set (:class:`~._data.Request`'s ``tools`` of ``[]``).
NO_TOOLS = stable(orjson.dumps([]))


def asks_own(r: Request) -> bool:
    """The request's last message is a user text of its own (no tool result): it asks
    something, whatever its words (words are never evidence: docs/threading.md)."""
    if not r.messages:
        return False
    last = r.messages[-1]
    if _ROLE.get(last.role, last.role) != "user" or any(
        p.tool_result is not None for p in last.parts
    ):
        return False
    return any(p.kind == "text" and (p.text or "").strip() for p in last.parts)


def compaction(r: Request, t: TurnInfo) -> bool:
    """The request is this agent (same system prompt) over ``t``'s history with every tool
    withdrawn (``t`` offered some) in the middle of its loop (it answers the calls ``t`` made),
    its last message a user text of its own (Codex's local compaction sends ``tools: []`` and
    its checkpoint prompt after the latest results). A side call, not the loop's next
    step: its answer comes back in a later request of the conversation. Read by the tools the
    wire sends, never by the prompt's words."""
    if r.tools != NO_TOOLS or t.tools == NO_TOOLS or r.system != t.system:
        return False
    # Mid-loop: ``t``'s answer made calls and the request answers them, then asks its own
    # question with no tool left to go on with. After a final answer, a question without tools
    # is the chat going on (pydantic-ai's next run of an agent without tools).
    answered = bool(r.ids & t.echo_ids) if t.echo_ids else bool(t.echo_names)
    return answered and asks_own(r)


#: How many parts appended to a last message :func:`split_at` tries.
_APPENDED = 8


def split_at(parts: list[Part], last: list[Any]) -> int | None:
    """Where text blocks were appended to a message that ended in text (``last``: its part
    keys, which join consecutive texts): the first of them, when the blocks before it key as
    ``last`` (langchain-anthropic's ``_merge_messages``, LiteLLM's merged user messages keep
    each merged message's blocks as they were); the last few splits are tried."""
    n = len(parts)
    return next(
        (k for k in range(n - 1, max(0, n - _APPENDED), -1) if _part_keys(parts[:k]) == last),
        None,
    )


def asks_compaction(r: Request, t: TurnInfo, link: Link) -> bool:
    """The request (linked to ``t``, its conversation's latest turn) is ``t``'s request again,
    without ``t``'s answer, with text parts appended to its last message (``t``'s last
    message's parts kept as they were): not the loop's next step, which echoes the answer, but a
    question over the history asked in place (Claude Code's ``/compact`` after a final answer
    appends its prompt so). A side call; its answer comes back in a later request of the
    conversation. One more user message after the history, the answer left out, is not one:
    the client did not echo the answer (``C.assistant_not_echoed``). An edit of the last
    question (its earlier parts changed) is not one either. Read by the shape alone."""
    if link.echoed or t.failed or t.last_parts is None or not r.messages:
        return False
    if len(r.messages) != t.length or link.kept < t.length - 1:
        return False
    last = r.messages[-1]
    if _ROLE.get(last.role, last.role) != "user":
        return False
    kept = _part_keys(last.parts)
    if len(kept) > len(t.last_parts) and kept[: len(t.last_parts)] == t.last_parts:
        added = last.parts[len(t.last_parts) :]
    else:
        at = split_at(last.parts, t.last_parts)
        if at is None:
            return False
        added = last.parts[at:]
    return all(p.kind == "text" for p in added) and any((p.text or "").strip() for p in added)


def forks_running_calls(r: Request, t: TurnInfo, link: Link) -> bool:
    """The request, linked to ``t`` (its conversation's latest turn), asks something over
    ``t``'s history while the calls ``t``'s answer made are still running: it carries that
    history — or a prefix of it, all but the last message unchanged, or all of it plus one user
    message with no tool result — without the answer and without a result for the calls. The
    loop cannot go on without those results, so this is not its next step but a side call
    forked from ``t`` (Claude Code's progress summary of a running sub-agent appends its
    question to the last message). A request that answers the calls without echoing them
    stays (a client bug the conversation's findings name), and so does an edited request after
    a final answer."""
    if not _calls_running(r, t, link):
        return False
    n = len(r.messages)
    last = r.messages[-1]
    results = sum(1 for p in last.parts if p.tool_result is not None)
    if n == t.length + 1 and link.kept == t.length:
        # A question of its own after the history, taken while a loop step's calls run (the
        # turn's request ended with results: asking again after a first answer's calls were
        # dropped is the client's bug, not a side call).
        return (
            _ROLE.get(last.role, last.role) == "user"
            and not results
            and any(k[0] == "r" for k in t.last_parts or ())
        )
    if n > t.length or link.kept < n - 1:
        return False
    # Results the last message carries beyond what the turn's own last one did (where calls
    # have no ids a result names only the tool): none may answer the running calls.
    carried = sum(1 for k in t.last_parts or () if k[0] == "r") if n == t.length else 0
    return results <= carried


def hands_back(s: Threads, r: Request, t: TurnInfo) -> bool:
    """``t`` is a turn of an agent's loop another agent handed the run to
    (:attr:`~._data.TurnInfo.handed_from`), and this request is made by that other agent (its
    system prompt and tools): the run handed back, not a third agent's side call."""
    if t.handed_from is None:
        return False
    p = s.turns[t.handed_from]
    return p.system == r.system and p.tools == r.tools


def handed_back(s: Threads, r: Request, best: Registered) -> tuple[int, int, int] | None:
    """The agent that handed the run over, going on from its transfer with the handed agent's
    last answer alone (langgraph-supervisor's ``output_mode="last_message"``): this request
    carries, word for word, the first request of the handed loop (``best``: the transfer call
    and its result), then that loop's latest answer, a final one (no calls), and not the loop's
    own calls and results (a longer registered history would have been ``best``). The loop was
    the other agent's own conversation, handed the run; this request goes on from the transfer.
    Returns (the transferring turn, the loop's first and latest turns), threader turn ids."""
    h = s.turns[best.turn]
    if best.with_echo or best.length != h.length or not h.hand_start or h.handed_from is None:
        return None
    if not hands_back(s, r, h):
        return None
    latest = s.last_of.get(h.conversation)
    if latest is None or latest <= best.turn:
        return None
    t = s.turns[latest]
    if t.handed_from != h.handed_from or t.failed or t.echo_ids or t.echo_names:
        return None
    if not _carries_answer(r, h.length, t):
        return None
    return h.handed_from, best.turn, latest


def _carries_answer(r: Request, start: int, t: TurnInfo) -> bool:
    """A message of the request from ``start`` on (the first :data:`SCAN_BACK`) is ``t``'s
    answer, word for word, or opens with it (an adapter that merges the next model-side items
    into one message: Responses)."""
    if t.echo_key is None or not t.echo_parts:
        return False
    if t.echo_key in r.keys.key[start : start + SCAN_BACK]:
        return True
    n = len(t.echo_parts)
    return any(
        _ROLE.get(m.role, m.role) == "assistant" and _part_keys(m.parts[:n]) == t.echo_parts
        for m in r.messages[start : start + SCAN_BACK]
    )


def handed_from(s: Threads, r: Request, link: Link) -> tuple[int | None, bool]:
    """Which turn's transfer handed the run to this request's agent (``None``: none), and
    whether this request starts that agent's loop: it went on from a turn of another agent
    (another system prompt and tool set) carrying that turn's whole history and answer (a
    transfer answered: :func:`hands_over`); it goes on in its agent's loop; or it is the run
    handed back to the agent that handed it over."""
    if link.previous is None or link.branch is not None:
        return None, False
    if link.rehome is not None:
        return s.turns[link.previous].handed_from, False
    t = s.turns[link.previous]
    if t.system == r.system and t.tools == r.tools:
        return t.handed_from, False
    if hands_back(s, r, t):
        assert t.handed_from is not None
        return s.turns[t.handed_from].handed_from, False
    if other_agent(r, t) and link.how == "extends" and link.echoed and link.kept == t.length:
        return link.previous, True
    return None, False
