"""Findings as one registry (issue 72 item 3): every code is a row of cassettes/analysis/codes.py,
the checks name it by the row's constant, a finding's layer and severity are its row's, and
docs/findings.md is generated from the rows."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from real_corpus import cover_or_every, load, rel, walked
from scenarios import LENGTH, WEATHER, Call, Script

from looptap.cassettes.analysis import Rule, Severity, analyse, codes, parse_rules, using
from looptap.cassettes.analysis.codes import ROWS, doc_table, severity_of

ROOT = Path(__file__).resolve().parents[3]
CODE = re.compile(r"^[ACE]\.[a-z][a-z_0-9]*$")
#: Conversation-state keys of checks that are named like codes (kept: a continued analysis'
#: saved state holds them), never a finding's code.
STATE = {"E.loaded_tools", "E.results_by_id", "E.results_by_name", "C.prefix", "C.loop_reported",
         "C.loop_reported_said"}  # fmt: skip


def _product() -> Iterator[Path]:
    for package in ("cassettes", "proxy", "inspector"):
        yield from sorted((ROOT / package).rglob("*.py"))


def _state_keys(tree: ast.AST) -> set[int]:
    """The ids of the string constants used as a key of some ``….state``."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute):
            if n.value.attr == "state" and isinstance(n.slice, ast.Constant):
                out.add(id(n.slice))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            owner = n.func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "state":
                out.add(id(n.args[0]))
    return out


def test_no_code_is_written_but_in_the_registry() -> None:
    """A code is written once, in its row: the analysis and every reader (why, the rules
    commands, the pytest plugin's run) name it by its constant (a misspelt one is an import
    error, not a silent new code). (The state keys named like codes are none: see below.)"""
    found: list[str] = []
    for path in _product():
        if path == ROOT / "cassettes" / "analysis" / "codes.py":
            continue
        tree = ast.parse(path.read_text())
        keys = _state_keys(tree)
        for n in ast.walk(tree):
            if not (isinstance(n, ast.Constant) and isinstance(n.value, str)):
                continue
            if CODE.match(n.value) and id(n) not in keys:
                found.append(f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}")
    assert found == []


def test_state_keys_named_like_codes_are_no_codes() -> None:
    assert not STATE & set(ROWS)
    text = "\n".join(p.read_text() for p in (ROOT / "cassettes" / "analysis").rglob("*.py"))
    assert all(f'"{k}"' in text for k in STATE)


def test_every_row_is_whole() -> None:
    names = {v: k for k, v in vars(codes).items() if isinstance(v, str) and v in ROWS}
    for code, row in ROWS.items():
        assert row.code == code and code in names, code
        assert code.split(".", 1)[0] == row.layer, code  # the code's name says its layer
        assert row.severities[0] is row.severity and len(set(row.severities)) == len(row.severities)
        assert row.text and "|" not in row.text and "\n" not in row.text, code
        assert not row.see or (ROOT / "docs" / row.see).exists(), (code, row.see)
        for cause, scope in row.under:  # a cause is a row, and never the code itself
            assert cause in ROWS and cause != code, code
            assert scope in ("turn", "call", "unrun", "dropped", "quoted"), code
    assert len(ROWS) == 79


def test_the_docs_page_is_generated_from_the_registry() -> None:
    page = (ROOT / "docs" / "findings.md").read_text()
    marker = "<!-- generated from cassettes/analysis/codes.py by `python -m looptap.cassettes.analysis.codes` -->\n"  # noqa: E501
    assert page.split(marker, 1)[1] == doc_table()
    for code in ROWS:
        assert page.count(f"| `{code}` |") == 1, code


def test_the_docs_name_no_code_that_is_not_a_row() -> None:
    """A code written in the docs (in backticks) is a row's: none renamed or invented."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in re.finditer(r"`([ACE]\.[a-z][a-z_0-9]*)[`:]", page.read_text()):
            assert m.group(1) in ROWS, f"{page.name}: {m.group(1)}"


def test_a_fact_the_row_does_not_grade_is_refused() -> None:
    """A finding's severity is its row's; a check that grades names the fact that holds, the row
    says what it weighs, and a fact the row does not grade is a bug, refused (the analysis reports
    the check as failed: never a silent change)."""
    assert severity_of(codes.RETRY) is Severity.INFO
    assert severity_of(codes.REPEATED_CALL, "loop") is Severity.WARNING
    assert severity_of(codes.ARGUMENTS_NOT_JSON, "cut") is Severity.INFO
    with pytest.raises(ValueError, match=r"^C\.retry is not graded by 'loop'$"):
        severity_of(codes.RETRY, "loop")
    with pytest.raises(KeyError):
        severity_of("C.retyr")


def test_no_check_chooses_a_severity() -> None:
    """No call of ``finding`` names a severity: the row gives it (its ``grades``, by the fact the
    check names), so a code's weight is read in one place, the registry, and its docs line."""
    chosen = []
    for path in sorted((ROOT / "cassettes" / "analysis").rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "finding":
                names = {k.arg for k in n.keywords}
                if "severity" in names:
                    chosen.append(f"{path.relative_to(ROOT)}:{n.lineno}")
                assert names.isdisjoint({"layer"}), path
    assert chosen == []
    graded = {code for code, row in ROWS.items() if row.grades}
    assert len(graded) == 13, sorted(graded)
    for row in ROWS.values():  # every fact weighs a severity the docs list for the row
        assert all(s in row.severities for s in row.grades.values()), row.code


def test_every_finding_of_the_scenarios_is_its_rows() -> None:
    """Findings of several kinds from real wire shapes: each one's layer is its row's, and its
    severity one its row allows (a consequence folded under its cause is info)."""
    runs = []
    for family in ("openai_chat", "anthropic", "gemini"):
        s = Script(family, tools=[WEATHER])
        s.user("Weather in Paris?")
        s.reply(calls=[Call("get_weather", {"town": "Paris"}), Call("get_time", {})])
        s.results("sunny")
        s.reply("It is", finish=LENGTH[family], max_tokens=2)
        s.user("And tomorrow?")
        s.fail(429, {"error": {"message": "slow down", "type": "rate_limit"}})
        s.fail(429, {"error": {"message": "slow down", "type": "rate_limit"}})
        runs.append(s.analyse())
    seen = set()
    for run in runs:
        assert run.errors == []
        for f in run.findings:
            row = ROWS[f.code]
            assert f.layer == row.layer, f.code
            assert f.severity in row.severities or f.details.get("caused_by"), f
            seen.add(f.code)
    assert len(seen) >= 4, seen


@pytest.mark.corpus
@cover_or_every("~6 s of CPU")
def test_every_finding_of_the_corpus_is_its_rows(files: str) -> None:
    """The shared corpus (1,099 recordings of real SDKs and frameworks): no check fails, every
    finding's layer is its row's and its severity one the row allows, or it is a consequence
    (info) or a cause carrying the graver severity of what it caused. By default the corpus'
    cover of wire shapes and finding codes (``findings_cover()``: every finding code the whole
    corpus gives file by file); the nightly run every file."""
    codes_seen: set[str] = set()
    for path in walked(files):
        exchanges = load(path)
        for i, ex in enumerate(exchanges):
            ex.seq = i
        run = analyse(exchanges)
        assert run.errors == [], rel(path)
        for f in run.findings:
            row = ROWS[f.code]
            assert f.layer == row.layer, (rel(path), f.code)
            carried = any(g.details.get("caused_by") == f.code for g in run.findings)
            assert f.severity in row.severities or f.details.get("caused_by") or carried, f
            codes_seen.add(f.code)
    assert len(codes_seen) >= 25, sorted(codes_seen)


def test_each_agent_rule_is_a_check_among_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's rules are no second engine: each rule in force is a check run among the
    others, makes ``E.rule_broken`` by its row (the rule's severity grading it; a rule without one
    gets the row's), and one that fails is reported by its name like any check's, the other rules
    still judged."""
    rules = parse_rules(
        '[[rule]]\nname = "lookup first"\nkind = "order"\nfirst = "find_city"\n'
        'then = "get_weather"\n\n[[rule]]\nname = "never"\nkind = "forbidden"\n'
        'tool = "get_weather"\nafter = "get_weather"\nseverity = "error"\n',
        "rules.toml",
    )
    assert rules.rules[0].severity is ROWS[codes.RULE_BROKEN].severity
    s = Script("openai_chat", tools=[WEATHER])
    s.user("Weather in Paris?")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    s.results("sunny")
    s.reply(calls=[Call("get_weather", {"city": "Paris"})])
    with using(rules):
        run = s.analyse()
    assert run.errors == []
    broken = [(f.turn, f.details["rule"], f.layer, f.severity) for f in run.findings
              if f.code == codes.RULE_BROKEN]  # fmt: skip
    assert sorted(broken) == [
        (0, "lookup first", "E", Severity.WARNING),
        (1, "lookup first", "E", Severity.WARNING),
        (1, "never", "E", Severity.ERROR),
    ]
    # a rule its check cannot judge (no sources: a Rule made in code, not parsed) fails as a check
    bad = replace(rules, rules=(Rule("bad", "provenance", tool=("get_weather",), argument="city",
                                     sources=None), *rules.rules))  # type: ignore[arg-type]  # fmt: skip
    monkeypatch.delenv("LOOPTAP_RAISE_CONTAINED")  # as a user reads: contained, and said
    with using(bad):
        run = s.analyse()
    assert [e.split(":", 1)[0] for e in run.errors] == [
        "check rule 'bad' failed on round trip #0",
        "check rule 'bad' failed on round trip #1",
    ]
    notes = [(f.seq, f.code) for f in run.findings if f.code.endswith(".not_judged")]
    assert sorted(notes) == [(0, codes.NOT_JUDGED_E), (1, codes.NOT_JUDGED_E)]
    assert sorted(
        (f.turn, f.details["rule"]) for f in run.findings if f.code == codes.RULE_BROKEN
    ) == [(0, "lookup first"), (1, "lookup first"), (1, "never")]
