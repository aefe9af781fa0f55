"""User rules (issue 44, item 2): ignored JSON paths with wildcards and an API family's scope,
regular-expression substitutions (matched by RE2 in linear time; an empty-matching pattern, a
look-around or a backreference is refused in one line), and
tool results made volatile by the tool's name — across the wire shapes of four API families.
Every rule applied is a tolerated difference named after its rule, and no rule hides a
difference outside what it names (a generated change elsewhere still misses)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looptap.cassettes.jsonpath import ANY_INDEX, ANY_KEY, format_path, parse_path
from looptap.cassettes.matching import (
    Matcher,
    Miss,
    Recorded,
    Rules,
    Tolerated,
    parse_substitution,
    project_rules,
    tolerated_notes,
)
from looptap.cassettes.matching._rules import substitute
from looptap.cassettes.matching._ruletable import from_flags, from_table, rules_from_config
from looptap.cassettes.project import RuleError, find_config
from looptap.cassettes.wire import Exchange
from tests.support import progress

ROOT = Path(__file__).resolve().parents[2]

CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
RESPONSES = "https://api.openai.com/v1/responses"
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"


def ex(url: str, body: dict[str, Any]) -> Exchange:
    return Exchange(
        "POST",
        url,
        [("content-type", "application/json")],
        orjson.dumps(body),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(0.0, b"{}")],
    )


def match(
    url: str, recorded: dict[str, Any], live: dict[str, Any], rules: Rules, volatile: bool = False
) -> tuple[Recorded | Miss, list[Tolerated]]:
    m = Matcher([ex(url, recorded)], volatile=volatile, rules=rules)
    got = m.match(
        "POST", url.split("://", 1)[1].split("/", 1)[1].join(["/", ""]), [], orjson.dumps(live)
    )
    return got, m.tolerated.get(0, [])


# -- paths -------------------------------------------------------------------------------------


def test_paths_parse_with_wildcards_quoted_keys_and_a_leading_dollar() -> None:
    assert parse_path("messages[*].content[*].cache_control") == (
        "messages",
        ANY_INDEX,
        "content",
        ANY_INDEX,
        "cache_control",
    )
    assert parse_path("metadata.*") == ("metadata", ANY_KEY)
    assert parse_path('$.a["b c"][2].d-e') == ("a", "b c", 2, "d-e")
    for text in ("messages[*].content[*].cache_control", "metadata.*", 'a["b c"][2]'):
        assert format_path(parse_path(text)) == text


@pytest.mark.parametrize(
    "bad", ["", "a..b", ".a", "a.", "a[x]", "a[-1]", "a b", "a.[0]", "[0]x", "a" * 1001]
)
def test_a_path_that_cannot_be_read_is_one_clear_error(bad: str) -> None:
    with pytest.raises(RuleError, match=r"^ignore path ") as e:
        parse_path(bad)
    assert "\n" not in str(e.value)


def test_an_ignored_key_is_tolerated_with_its_presence_and_an_index_keeps_its_place() -> None:
    rules = from_flags(["messages[*].content[*].cache_control", "metadata.*", "stop[1]"])
    rec = {
        "model": "m",
        "metadata": {"run": "a"},
        "stop": ["x", "y"],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    live = {
        "model": "m",
        "metadata": {"run": "b", "extra": "1"},
        "stop": ["x", "z"],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    got, tol = match(CHAT, rec, live, rules)
    assert isinstance(got, Recorded)
    assert {(format_path(t.path), t.recorded, t.live, t.rule) for t in tol} == {
        (
            "messages[0].content[0].cache_control",
            '{"type":"ephemeral"}',
            "(absent)",
            "ignore messages[*].content[*].cache_control",
        ),
        ("metadata.run", "a", "b", "ignore metadata.*"),
        ("metadata.extra", "(absent)", "1", "ignore metadata.*"),
        ("stop[1]", "y", "z", "ignore stop[1]"),
    }
    assert any(
        n.startswith(
            "tolerated: ignored (rule: ignore metadata.*) at "
            "metadata.run: recorded 'a', this request 'b'"
        )
        for n in tolerated_notes(tol)
    )
    # A list element ignored is still there: a list of another length is another request.
    assert isinstance(match(CHAT, rec, {**live, "stop": ["x", "z", "w"]}, rules)[0], Miss)
    # The text beside the ignored key is compared as ever.
    live["messages"][0]["content"][0]["text"] = "hello"
    assert isinstance(match(CHAT, rec, live, rules)[0], Miss)


def test_a_rule_scoped_to_a_family_applies_to_that_familys_requests_only() -> None:
    rules = from_flags(["anthropic:temperature"])
    rec_a = {
        "model": "claude-x",
        "max_tokens": 5,
        "temperature": 0.2,
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert isinstance(match(MESSAGES, rec_a, {**rec_a, "temperature": 0.9}, rules)[0], Recorded)
    rec_o = {"model": "gpt-4o", "temperature": 0.2, "messages": [{"role": "user", "content": "hi"}]}
    assert isinstance(match(CHAT, rec_o, {**rec_o, "temperature": 0.9}, rules)[0], Miss)
    with pytest.raises(RuleError, match="unknown API family 'antropic'"):
        project_rules(None, ["antropic:temperature"])


# -- substitutions -----------------------------------------------------------------------------


def test_a_substitution_applies_to_both_sides_and_names_itself() -> None:
    rules = from_flags(substitute=[r"build #\d+=build #N"])
    rec = {"model": "m", "messages": [{"role": "system", "content": "CI build #41 on main"}]}
    got, tol = match(
        CHAT,
        rec,
        {"model": "m", "messages": [{"role": "system", "content": "CI build #42 on main"}]},
        rules,
    )
    assert isinstance(got, Recorded)
    assert tol == [
        Tolerated(
            ("messages", 0, "content"),
            "substituted",
            "build #41",
            "build #42",
            r"substitute build #\d+=build #N",
        )
    ]
    # Only what the pattern matches: the branch beside it is compared.
    assert isinstance(
        match(
            CHAT,
            rec,
            {"model": "m", "messages": [{"role": "system", "content": "CI build #42 on dev"}]},
            rules,
        )[0],
        Miss,
    )


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("x*=y", "matches the empty string"),
        (r"\b=y", "matches the empty string"),
        ("(?=a)b=y", "'(?=' at position 0 (no look-around or backreference"),
        (r"(?<=id=)[0-9a-f]{8}=<id>", "'(?<=' at position 0 (no look-around"),
        (r"x(?!y)=z", "'(?!' at position 1"),
        (r"(a)\1=x", "'\\\\1' at position 3 (no look-around or backreference"),
        (r"(?P<n>a)(?P=n)=x", "'(?P=' at position 8"),
        (r"end\Z=x", "at position 3 (write \\z)"),
        ("a++=x", "bad repetition operator '++' at position 1"),
        ("[a-=y", "not a pattern looptap takes: missing ]"),
        (r"(a)=\2", "the replacement '\\\\2' cannot be used: the replacement names group '2'"),
        (r"(a)=\n", "neither a group"),
        ("noequals", "write REGEX=REPLACEMENT"),
        ("=x", "the pattern is empty"),
        ("a" * 1001 + "=x", "longer than 1000"),
    ],
)
def test_a_pattern_re2_cannot_take_is_refused_in_one_line_naming_where(spec: str, why: str) -> None:
    with pytest.raises(RuleError, match=r"^substitute ") as e:
        parse_substitution(spec)
    assert why in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_bounded_patterns_pass_split_at_the_last_equals_and_replace_as_written() -> None:
    s = parse_substitution(r"id=[0-9a-f]{8}\b=<id>")
    assert s.pattern.pattern == r"id=[0-9a-f]{8}\b" and s.replacement == "<id>"
    parse_substitution(r"(ab){1,3}c+=x")
    parse_substitution(r"(?:\d{2}:){2}\d{2}=<t>")
    # groups by number and name, a doubled backslash, text beyond ASCII kept as written
    s = parse_substitution(r"(?P<day>[0-9]{2})-([0-9]{2})=\2/\g<day> é\\")
    assert substitute([s], "on 25-11, 01-02", ())[0] == "on 11/25 é\\, 02/01 é\\"


# The shapes whose backtracking is exponential or polynomial (the old runaway check let the first
# through), each with the text that makes a backtracking engine explode (of n repeats), and
# whether that text is matched whole (else not at all).
RUNAWAY = [
    ("(a|a)*b", "a{n}b", True),
    ("(a|a)*b", "a{n}c", False),
    ("(a+)+$", "a{n}!", False),
    (r"(\w+\s?)+$", "ab {n}!", False),
    ("^(a|aa)+$", "a{n}", True),
    ("(x+x+)+y", "x{n}", False),
    ("(?:a|ab)*c*(x.*)+", "ab{n}x!", True),
]


def shaped(shape: str, n: int) -> str:
    """``a{n}b`` → ``n`` times ``a``, then ``b``."""
    unit, _, rest = shape.partition("{n}")
    return unit * n + rest


#: Run in a process of its own, with a CPU-time budget (tests/support/progress.py): a pattern
#: that ran away would spin, and the budget ends it.
_APPLY = """
import json, sys
from looptap.cassettes.matching import parse_substitution
from looptap.cassettes.matching._rules import substitute
from looptap.cassettes.recording import Redactor
from tests.matching.test_rules import RUNAWAY, shaped
out = []
for pattern, shape, _ in RUNAWAY:
    text = shaped(shape, (1 << 20) // len(shape.partition("{n}")[0]))
    got, spans = substitute([parse_substitution(pattern + "=<x>")], text, ())
    masked = Redactor.configured(patterns=[pattern]).scrub(text)
    out.append([got == "<x>", got == text, len(spans), masked.count("[REDACTED]")])
print(json.dumps(out))
"""


def test_runaway_shapes_are_matched_in_linear_time_and_right() -> None:
    """Each shape over a megabyte, as a substitution and as a redaction pattern, ends (a
    backtracking engine needs longer than the universe's age for the first) and matches what
    Python's engine matches on the same shape, small."""
    r = progress.run(
        [sys.executable, "-c", _APPLY], capture_output=True, text=True, cwd=ROOT, cpu=120
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for (pattern, _, whole), got in zip(RUNAWAY, json.loads(r.stdout), strict=True):
        assert got == [whole, not whole, int(whole), int(whole)], (pattern, got)
    for pattern, shape, whole in RUNAWAY:  # small enough to backtrack through
        small = shaped(shape, 12)
        assert re.sub(pattern, "<x>", small) == ("<x>" if whole else small), pattern
        assert substitute([parse_substitution(pattern + "=<x>")], small, ())[0] == re.sub(
            pattern, "<x>", small
        )


# -- volatile tools ----------------------------------------------------------------------------

CHAT_RESULT = {
    "model": "m",
    "messages": [
        {"role": "user", "content": "ls"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "cat", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"},
        {"role": "tool", "tool_call_id": "call_2", "content": "hello"},
    ],
}
ANTHROPIC_RESULT = {
    "model": "claude-x",
    "max_tokens": 5,
    "messages": [
        {"role": "user", "content": "ls"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
                {"type": "tool_use", "id": "toolu_2", "name": "cat", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "a.txt b.txt"}],
                },
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "hello"},
            ],
        },
    ],
}
RESPONSES_RESULT = {
    "model": "gpt-5",
    "input": [
        {"role": "user", "content": "ls"},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2", "name": "cat", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt b.txt"},
        {"type": "function_call_output", "call_id": "call_2", "output": "hello"},
    ],
}
GEMINI_RESULT = {
    "contents": [
        {"role": "user", "parts": [{"text": "ls"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "ls", "args": {}}},
                {"functionCall": {"name": "cat", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "ls", "response": {"output": "a.txt b.txt"}}},
                {"functionResponse": {"name": "cat", "response": {"output": "hello"}}},
            ],
        },
    ]
}


def _changed(body: Any, old: str, new: str) -> Any:
    return orjson.loads(orjson.dumps(body).replace(old.encode(), new.encode()))


@pytest.mark.parametrize(
    ("url", "body"),
    [
        (CHAT, CHAT_RESULT),
        (MESSAGES, ANTHROPIC_RESULT),
        (RESPONSES, RESPONSES_RESULT),
        (GEMINI, GEMINI_RESULT),
    ],
    ids=["openai_chat", "anthropic", "openai_responses", "gemini"],
)
def test_a_volatile_tools_results_are_not_compared_and_the_other_tools_are(
    url: str, body: Any
) -> None:
    rules = from_flags(volatile_tools=["ls"])
    got, tol = match(url, body, _changed(body, "a.txt b.txt", "a.txt b.txt c.txt"), rules)
    assert isinstance(got, Recorded), got
    assert [(t.detector, t.rule) for t in tol] == [("tool_result", "volatile tool ls")]
    assert "a.txt b.txt c.txt" in tol[0].live
    # cat is not volatile
    assert isinstance(match(url, body, _changed(body, "hello", "goodbye"), rules)[0], Miss)
    # without the rule
    assert isinstance(
        match(url, body, _changed(body, "a.txt b.txt", "a.txt b.txt c.txt"), Rules())[0], Miss
    )


# -- no rule hides a difference outside what it names ------------------------------------------

RULES = from_flags(
    ["metadata.*", "messages[*].content[*].cache_control"], [r"run-[0-9a-f]{8}=run-<id>"], ["ls"]
)
BASE = {
    "model": "claude-x",
    "max_tokens": 50,
    "metadata": {"user_id": "u1"},
    "system": "Trace run-3fa9c1d2. Be brief.",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "list then count", "cache_control": {"type": "ephemeral"}}
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"dir": "."}},
                {"type": "tool_use", "id": "toolu_2", "name": "count", "input": {"of": "lines"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "12"},
            ],
        },
    ],
}


def _leaves(v: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(v, dict):
        return [p for k, x in v.items() for p in _leaves(x, (*path, k))]
    if isinstance(v, list):
        return [p for i, x in enumerate(v) for p in _leaves(x, (*path, i))]
    return [path]


def _named(path: tuple[Any, ...]) -> bool:
    """What RULES name: metadata, a cache_control, ls's result (messages[2].content[0].content)."""
    return (
        path[0] == "metadata"
        or "cache_control" in path
        or path[:5] == ("messages", 2, "content", 0, "content")
    )


OUTSIDE = [p for p in _leaves(BASE) if not _named(p) and p[-1] not in ("id", "tool_use_id")]


def _set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = orjson.loads(orjson.dumps(body))
    at = out
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(OUTSIDE),
    st.one_of(
        st.text(min_size=1, max_size=12),
        st.integers(-(10**9), 10**9),
        st.sampled_from(["run-3fa9c1d2", "Be brief.", "ls", "count"]),
    ),
)
def test_no_rule_hides_a_change_outside_what_it_names(path: tuple[Any, ...], value: Any) -> None:
    live = _set(BASE, path, value)
    if live == BASE:
        return
    got, _ = match(MESSAGES, BASE, live, RULES, volatile=True)
    if isinstance(got, Recorded):
        # Only a substitution may make them equal again: the new text differs from the old in a run
        # id only.
        assert path == ("system",) and isinstance(value, str)
        import re

        assert re.sub(r"run-[0-9a-f]{8}", "", value) == re.sub(
            r"run-[0-9a-f]{8}", "", BASE["system"]
        ), value
    else:
        assert isinstance(got, Miss)


# -- tables and files --------------------------------------------------------------------------


def _texts(rules: Rules) -> list[str]:
    """Every rule as it is said, in order."""
    return (
        [r.text for r in rules.ignore]
        + [s.text for s in rules.substitute]
        + [f"volatile tool {n}" for n in rules.volatile_tools]
    )


def test_the_table_reads_every_form_and_refuses_unknown_keys() -> None:
    rules = from_table(
        {
            "ignore": ["metadata.*", {"path": "temperature", "family": "anthropic"}],
            "substitute": ["a\\d=a", {"pattern": "x=\\d", "replacement": "x=N"}],
            "volatile_tools": ["ls"],
            "volatile": False,
        },
        "t",
    )
    assert _texts(rules) == [
        "ignore metadata.*",
        "ignore anthropic:temperature",
        r"substitute a\d=a",
        r"substitute x=\d=x=N",
        "volatile tool ls",
    ]
    assert rules.volatile is False
    for table, said in (
        ({"ignores": []}, "unknown key 'ignores'"),
        ({"ignore": "a"}, "ignore must be a list"),
        (
            {"substitute": [{"pattern": "a"}]},
            'substitute: each entry is "REGEX=REPLACEMENT" or {pattern = "…", replacement = "…"}$',
        ),
        ({"ignore": [{"path": "a", "x": 1}]}, r'ignore: each entry is a path \("metadata\.\*"\)'),
        ({"ignore": [{"path": "a", "family": 3}]}, "t: ignore: family must be a string"),
        ({"volatile": "no"}, "volatile must be true or false"),
        ({"ignore": ["a..b"]}, "t: ignore path 'a..b'"),
    ):
        with pytest.raises(RuleError, match=said):
            from_table(table, "t")


def test_the_file_beside_the_cassettes_wins_then_the_first_pyproject_upward_then_the_cwds(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    cassettes = project / "tests" / "cassettes"
    cassettes.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.looptap]\nignore = ["metadata.*"]\n'
    )
    cas = cassettes / "run.jsonl"
    assert find_config(cas) == (project / "pyproject.toml", True)
    assert _texts(rules_from_config(cas)) == ["ignore metadata.*"]
    (cassettes / "looptap.toml").write_text('volatile_tools = ["ls"]\n')
    assert find_config(cas) == (cassettes / "looptap.toml", False)
    # the file beside the cassettes, alone
    assert _texts(rules_from_config(cas)) == ["volatile tool ls"]
    # A pyproject.toml without the table stops the search: the project says nothing.
    (cassettes / "looptap.toml").unlink()
    (project / "tests" / "pyproject.toml").write_text("[project]\nname = 'inner'\n")
    assert _texts(rules_from_config(cas)) == []
    # Nothing upward of the cassette: the working directory's.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert find_config(Path("/") / "nonexistent-dir-xyz" / "run.jsonl", cwd=project) == (
        project / "pyproject.toml",
        True,
    )
    (project / "pyproject.toml").write_text("[tool.looptap]\nignore = [\n")
    with pytest.raises(RuleError, match=r"pyproject.toml: not valid TOML"):
        rules_from_config(project / "run.jsonl")


def test_a_substitution_matching_everywhere_keeps_a_bounded_record() -> None:
    from looptap.cassettes.matching._rules import MAX_MATCHES, substitute

    subs = from_flags(substitute=[r"[0-9]=N"]).substitute
    text, spans = substitute(subs, "7" * 5000, ("system",))
    assert (
        text == "N" * 5000
        and len(spans) == MAX_MATCHES + 1
        and spans[-1].text == f"(and {5000 - MAX_MATCHES:,} more matches)"
    )
    got, tol = match(
        CHAT,
        {"model": "m", "messages": [{"role": "system", "content": "1" * 5000}]},
        {"model": "m", "messages": [{"role": "system", "content": "2" * 5000}]},
        from_flags(substitute=[r"[0-9]=N"]),
    )
    # the counted rest is the same on both sides
    assert isinstance(got, Recorded) and len(tol) == MAX_MATCHES
