"""Failures people label (issue 58) in a two-agent group chat (AutoGen's, as in test_agents.py: each
agent its own system prompt, the other's answers as user messages with its ``name``): the chat's
manager giving a speaker the floor again with nothing new is said once, at info — a group chat at
work, not the client's bug; what the agent then claims without a source is the model's
(``E.ungrounded_claim``, with the spans). Twins: a re-prompted answer that repeats its sources
stays at the info; a single agent re-prompted with nothing new is still the client's warning.
"""

from __future__ import annotations

from typing import Any

import pytest
from scenarios import AgentScript, run_of

from looptap.cassettes.analysis import Finding, RunAnalysis, unsourced
from looptap.cassettes.analysis.dispatch import blocked_page
from looptap.cassettes.wire import Exchange

TOPIC = "Write a one-line blurb for the K2 kettle from the spec the engineer shares."
WRITER = "You are Writer. Write the blurb; use only the facts you are given."
ENGINEER = "You are Engineer. Share the K2 spec when asked, then check the blurb."
SPEC = "K2 spec: 1.7 litres, 2200 W, boils 1 litre in 150 seconds, sku K2-4471."


def _named(text: str, name: str) -> dict[str, Any]:
    return {"role": "user", "name": name, "content": text}


def _chat(*again: str) -> list[Exchange]:
    """The engineer shares the spec, the writer answers, then the manager picks the writer again
    (once per text of ``again``) with nothing new."""
    writer = AgentScript("openai_chat", system=WRITER, tools=())
    engineer = AgentScript("openai_chat", system=ENGINEER, tools=())
    writer.user(TOPIC)
    engineer.user(TOPIC)
    out = [engineer.reply(SPEC)]
    writer.history.append(_named(SPEC, "engineer"))
    out.append(writer.reply("K2: 1.7 litres at 2200 W, a litre boiled in 150 seconds."))
    out += [writer.reply(text) for text in again]
    return out


def _found(run: RunAnalysis, code: str) -> list[Finding]:
    return [f for f in run.findings if f.code == code]


def test_a_re_prompted_agent_inventing_facts_is_an_ungrounded_claim_and_the_re_prompt_info() -> (
    None
):
    run = run_of(
        _chat(
            "K2 boils a litre in 45 seconds; 12,000 buyers rate it 4.8, see https://k2.example/r."
        )
    )
    (claim,) = _found(run, "E.ungrounded_claim")
    assert claim.severity == "warning" and claim.turn == 1 and claim.related_turn == 0
    assert claim.details["spans"] == ["https://k2.example/r", "45 seconds", "12,000", "4.8"]
    (again,) = _found(run, "C.continued_after_final_answer")
    assert again.severity == "info" and again.turn == 1


def test_clean_twin_a_re_prompted_agent_repeating_its_sources_is_only_the_info() -> None:
    run = run_of(
        _chat("K2 (sku K2-4471): 1,7 litres? No: 1.7 litres, 2200 W, 150 seconds a litre.")
    )
    assert [(f.code, f.severity) for f in run.findings] == [
        ("C.continued_after_final_answer", "info")
    ]


def test_re_prompts_in_a_row_are_said_once_per_agent() -> None:
    run = run_of(_chat("K2: 1.7 litres, 2200 W.", "K2: 2200 W, 1.7 litres.", "K2 it is."))
    assert [(f.turn, f.severity) for f in _found(run, "C.continued_after_final_answer")] == [
        (1, "info")
    ]


def test_clean_twin_one_agent_re_prompted_with_nothing_new_is_still_the_clients_warning() -> None:
    solo = AgentScript("openai_chat", system=WRITER, tools=())
    solo.user(TOPIC + " " + SPEC)
    exchanges = [solo.reply("K2: 1.7 litres at 2200 W."), solo.reply("K2: 1.7 litres.")]
    run = run_of(exchanges)
    assert [(f.code, f.severity) for f in run.findings] == [
        ("C.continued_after_final_answer", "warning")
    ]


def test_trivial_numbers_are_not_claims() -> None:
    """Enumerations, small counts, years and a number written otherwise are not ungrounded."""
    src = "Orders: W1 ($1,299.00), W2. Shipped 2024-03-02, 3 items, tracking 88231."
    answer = "1. W1 cost $1299 and shipped in 2024 with 3 items (tracking 88231). 2. W2: 12 of it."
    assert unsourced(answer, src) == []
    assert unsourced("W2 arrives in 12 days.", src) == ["12 days"]  # a number with its unit
    assert unsourced("W1 cost $1,399.", src) == ["$1,399"]


NGINX_403 = (
    "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n"
    "<center><h1>403 Forbidden</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>"
)
AKAMAI = (
    "<HTML><HEAD>\n<TITLE>Access Denied</TITLE>\n</HEAD><BODY>\n<H1>Access Denied</H1>\n \n"
    'You don\'t have permission to access "http&#58;&#47;&#47;www&#46;shop&#46;example&#47;" on '
    "this server.<P>\nReference&#32;&#35;18&#46;6f3c1002&#46;1700000000&#46;1a2b3c\n"
    "</BODY>\n</HTML>"
)
GOOGLE = (
    "About this page\nOur systems have detected unusual traffic from your computer network. "
    "This page checks to see if it's really you sending the requests, and not a robot."
)
ARTICLE = (
    "Bot checks, explained. When a site asks you to verify you are human, it is guessing "
    + "whether the traffic is automated from signals such as mouse movement and IP reputation. "
    * 25
)


@pytest.mark.parametrize("page", [NGINX_403, AKAMAI, GOOGLE, "HTTP 403 Forbidden"])
def test_block_pages_are_told(page: str) -> None:
    assert blocked_page(page) is not None


@pytest.mark.parametrize(
    "page",
    [
        ARTICLE,
        '{"status": 403, "error": "Forbidden"}',
        "The captcha on the login form is broken; users cannot sign in.",
        "Just a moment, I will check the order.",
    ],
)
def test_clean_twins_texts_about_block_pages_are_not_block_pages(page: str) -> None:
    assert blocked_page(page) is None


def test_the_group_chat_info_names_the_agent_given_the_floor() -> None:
    run = run_of(_chat("K2: 1.7 litres, 2200 W."))
    (again,) = _found(run, "C.continued_after_final_answer")
    assert again.details["agent"] == "Writer" and "agent 'Writer'" in again.message


def test_one_agent_whose_messages_carry_names_is_no_group_chat() -> None:
    """A single agent framework (AutoGen's AssistantAgent) names the user's messages and its own:
    re-prompted with nothing new, it is the client's warning, not a group chat's floor."""
    solo = AgentScript("openai_chat", system=WRITER, tools=())
    solo.history.append(_named(TOPIC + " " + SPEC, "user"))
    first = solo.reply("K2: 1.7 litres at 2200 W.")
    solo.history[-1]["name"] = "writer"
    run = run_of([first, solo.reply("K2: 1.7 litres.")])
    (again,) = _found(run, "C.continued_after_final_answer")
    assert again.severity == "warning" and "group chat" not in again.message
