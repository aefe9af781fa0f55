"""The history the agent's rules judge a turn's calls by (docs/rules.md) is the one the C layer
read: the previous turn's, grown by the messages this request appended (``Dispatch.appended``),
not the request's whole history walked again on every turn; read whole where the request did not
keep the previous one's history as it was. Either way the findings are those of the history as
sent."""

from __future__ import annotations

import orjson
import pytest
from scenarios import (
    WEATHER,
    Call,
    Script,
    Tool,
    edit_request,
    openai_responses_results,
    openai_responses_turn,
    openai_responses_user,
)

from looptap.cassettes.analysis import _rule_check, analyse, codes, parse_rules, using

RULES = parse_rules(
    '[[rule]]\nname = "city first"\nkind = "order"\nfirst = "find_city"\nthen = "get_weather"\n\n'
    '[[rule]]\nname = "three per task"\nkind = "count"\ntool = "get_weather"\nmax = 3\n\n'
    '[[rule]]\nname = "alone"\nkind = "forbidden"\ntool = "get_weather"\npending = true\n\n'
    '[[rule]]\nname = "city given"\nkind = "provenance"\ntool = "get_weather"\n'
    'argument = "city"\nfrom = ["find_city", "user"]\n\n'
    '[[rule]]\nname = "yes first"\nkind = "consent"\ntools = "book"\n',
    "rules.toml",
)
FIND = Tool("find_city", {"type": "object", "properties": {"q": {"type": "string"}}})
BOOK = Tool("book", {"type": "object", "properties": {"city": {"type": "string"}}})


def _broken(s: Script) -> list[tuple[int | None, str, str]]:
    with using(RULES):
        run = s.analyse()
    assert run.errors == []
    return [(f.seq, f.details["rule"], f.details["why"]) for f in run.findings
            if f.code == codes.RULE_BROKEN]  # fmt: skip


def _weather_loop(turns: int) -> Script:
    s = Script("openai_chat", tools=[WEATHER, FIND])
    s.user("Weather in Paris, please, day after day.")
    s.reply(calls=[Call("find_city", {"q": "Paris"})])
    s.results("Paris")
    for _ in range(turns):
        s.reply(calls=[Call("get_weather", {"city": "Paris"})])
        s.results("sunny")
    return s


def test_the_rules_read_each_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation of 32 turns: each message of its history is read once by the rules, not
    once per turn that re-sends it (961 reads on 519861c1 for its 63 messages)."""
    s = _weather_loop(30)
    s.reply("It stays sunny.")
    read: list[str] = []
    real = _rule_check._user_text
    monkeypatch.setattr(_rule_check, "_user_text", lambda m: read.append(m.role) or real(m))
    broken = _broken(s)
    assert len(read) == len(s.history) - 1 == 63  # (the last answer is sent back by no request)
    assert [(seq, rule) for seq, rule, _ in broken] == [(4, "three per task")]


def _varied() -> Script:
    """Tasks, a failed lookup, parallel calls, a history trimmed and one rewritten in place."""
    s = Script("openai_chat", tools=[WEATHER, FIND, BOOK])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])  # before find_city
    s.results("sunny")
    s.reply(calls=[Call("find_city", {"q": "Paris"})])
    s.results("Error: lookup service down")  # failed: not a lookup
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply(calls=[Call("find_city", {"q": "Lyon"})])
    s.results("Lyon")
    s.reply(calls=[Call("get_weather", {"city": "Lyon"}), Call("get_weather", {"city": "Nice"})])
    s.results("rain", "warm")
    s.reply("Rain in Lyon, warm in Nice.")
    s.user("Book Lyon.")
    s.reply(calls=[Call("book", {"city": "Lyon"})])  # no yes
    s.results("booked")
    s.reply("Booked.")
    s.user("yes, and the weather in Lyon again")
    s.reply(calls=[Call("get_weather", {"city": "Lyon"})])
    s.results("rain")
    del s.history[1:11]  # the client trims the lookups away
    s.reply(calls=[Call("get_weather", {"city": "Lyon"})])
    s.results("rain")
    s.reply(calls=[Call("get_weather", {"city": "Lyon"})])
    s.results("rain")
    s.history[0]["content"] = "Weather in Lyon?"  # rewritten in place
    s.reply(calls=[Call("book", {"city": "Lyon"})])
    return s


def test_the_history_grown_is_the_history_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grown turn by turn, the history judges every call as the whole history each request sent
    does (read whole on every turn: no conversation's history kept)."""
    grown = _broken(_varied())
    monkeypatch.setattr(_rule_check, "LIVE", 0)
    assert _broken(_varied()) == grown
    assert [(seq, rule) for seq, rule, _ in grown] == [
        (0, "city first"),
        (2, "city first"),  # (the lookup failed)
        (4, "three per task"),
        (4, "alone"),
        (4, "alone"),
        (4, "city given"),  # (Nice: in no result nor user message)
        (6, "yes first"),
        (9, "city first"),  # (the lookups trimmed away)
        (10, "city first"),
    ]


def test_a_history_the_api_keeps_is_the_conversation_s() -> None:
    """Stateful Responses: a request that sends only its new items after ``previous_response_id``
    is judged after the history the API keeps (the earlier turns and the answer it stored), as
    ``rules learn`` reads it: the lookup made on turn 0 comes before turn 1's call (519861c1 read
    the new items alone, and found it broken)."""
    lookup, weather = Call("find_city", {"q": "Paris"}), Call("get_weather", {"city": "Paris"})
    t0 = openai_responses_turn(
        [openai_responses_user("Weather in Paris?")], None, [lookup], tools=[WEATHER, FIND]
    )
    t1 = openai_responses_turn(
        openai_responses_results([(lookup, "Paris")]), None, [weather], tools=[WEATHER, FIND]
    )
    t2 = openai_responses_turn(
        openai_responses_results([(weather, "sunny")]), None, [weather], tools=[WEATHER, FIND]
    )
    for prev, ex in ((t0, t1), (t1, t2)):
        rid = orjson.loads(prev.response_body)["id"]
        edit_request(ex, lambda b, rid=rid: b.update(previous_response_id=rid))
    for seq, ex in enumerate((t0, t1, t2)):
        ex.seq = seq
    with using(RULES):
        run = analyse([t0, t1, t2])
    assert [t.c.link for t in run.turns.values()] == ["start", *["previous_response_id"] * 2]
    broken = [(f.seq, f.details["rule"]) for f in run.findings if f.code == codes.RULE_BROKEN]
    assert broken == []
