"""Threading round trips into conversations, from the content alone.

Each request's history is reduced to *message keys*: a hash of the message's role and parts, made
robust to what SDKs and frameworks change when they re-serialise a history — key order,
whitespace, absent vs null, content as a string vs a list of text parts, reasoning blocks dropped or
re-signed. Each message has two keys for lookups: a *loose* one without tool-call ids (a client may
rewrite them) and a *strict* one with them (unique ids are what tell apart agents that started
alike); system messages count as "a system message" in both, so that a request made under another
system prompt still finds the history it extends.

After each turn two prefixes are registered for its conversation: the request's history, and the
request's history followed by the assistant message the response produced. Every registration is
kept while its turn is its conversation's latest (bounded), so many agents that started alike each
find their own. A new request looks up the longest registered prefix it extends (strict keys first,
loose ones where the client rewrote ids) and picks among the turns registered there: the same agent
(system prompt and tool names), then the turn whose calls the request answers (tool-call ids),
then a turn still waiting for its continuation, then the most recent. When several conversations
remain equally likely the link says so (``ambiguous``): nothing in the content can tell them apart.

In order:

1. ``X-Looptap-Conversation`` request header — an explicit label always wins;
2. ``previous_response_id`` (Responses API) — the turn that produced that response;
   then the continuity tokens the request carries back (:mod:`._evidence`: a thought signature,
   encrypted reasoning, an output item's id, a tool call's id), which win over the history rules'
   link to another conversation of the same agent, and move turns a later request proves were
   never its conversation's out of it;
3. the longest registered prefix — the conversation it extends (``extends``), or the same request
   again after a failed attempt (``retry``). A request made under another system prompt *and*
   another tool set that extends a conversation's history, or repeats one of its requests, is
   another agent working on it (a summary, compaction or title side call, a handoff): a new
   conversation, branched from that turn (a handoff, whose request ends with the results of the
   calls the turn made, goes on in the same conversation). A request, of any agent, that carries
   the history of a turn whose tool calls are still running — that history or a prefix of it, its
   last message possibly changed, or all of it plus one question — without the turn's answer and
   without a result for its calls is not the loop's next step (the loop waits for the results):
   a side call forked from that turn (Claude Code's progress summary of a running sub-agent);
4. a conversation whose history shares its start up to the first non-system message — the history
   was rewritten (trimmed, summarised, edited: ``rewritten``);
5. otherwise a new conversation (a new agent, a sub-agent, a side call such as a title); one whose
   first user message carries the prompt a pending tool call of another conversation asked for
   (Claude Code's Task tool, an agent-as-tool) is that call's sub-agent, branched from its turn —
   unless it quotes the prompt as a JSON argument value (``"prompt": "…"``): a request that
   quotes the call is about the call (a summary of the tools used), a side call of that turn.

Agents (docs/threading.md, "Agents, and what each conversation is"): an agent is its system
prompt, its tool names and the name the wire gives it. Under another system prompt, a turn's
history followed by its answer as a *user* message is another agent of a group chat
(``group_chat``); another agent over a conversation's history, while a transfer call naming it (in
its system prompt) waits, is the run handed over (``handoff``); another agent sending exactly a
turn's request whose only question a pending call handed over word for word is an agent used as a
tool (``agent_tool``). A prompt built like a conversation's latest one but for its last question,
after an answer that called no tool, is a ``sibling`` (a few-shot prompt); exactly a later turn's
request again after it was answered is that conversation going back (``retry``: the answer was
discarded); a history that opens with a conversation's latest answer continues it (the question
before was dropped); and the next step of a re-rendered trajectory (:mod:`._trajectory`) continues
the conversation whose latest request it re-renders.

The state is plain data (:mod:`._data`: the turns and the indexes that find a round trip's
parent, and the request being threaded); the rules are named functions over both:
:mod:`._history` (registered histories, the same request again), :mod:`._agents` (which agent
goes on, which is another), :mod:`._opening` (no history extended: rewritten, sibling,
trajectory, new conversation, sub-agent), :mod:`._words` (what a request's words say, no state);
:mod:`._driver` asks them in order and records each turn; :mod:`._plain` is the state as plain
data, what a grown file is continued from.
"""

from __future__ import annotations

from ._data import Attempt, Link
from ._driver import Threader
from ._plain import restore_threads, threads_state

__all__ = ["Attempt", "Link", "Threader", "restore_threads", "threads_state"]
