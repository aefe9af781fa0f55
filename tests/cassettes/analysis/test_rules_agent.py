"""An agent's own rules (issue 58, docs/rules.md), checked on a retail agent recorded here (the one
of test_labels_recorded.py: the real openai SDK, deterministic tools, a scripted upstream, through
``looptap run``): order ("authenticate before any account tool"), consent ("the user's explicit yes
before a state-changing call"), count ("at most 2 order lookups per task") and forbidden ("never
transfer to a human with calls pending"). Each broken rule is ``E.rule_broken`` on the call that
broke it; the clean twin (authenticated, asked, heard yes, transferred alone) has none. The
checks show in ``looptap show``, the HTML report, the inspector's findings tab and the fleet
index's findings (read again when the rules change), in ``Run.assert_rules()`` (pytest's
``looptap.run``), and a wrong rule is refused in one line naming the file, the line and what is
wrong.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_labels_recorded import AGENT

from looptap.cassettes.analysis import Finding, RulesError, load
from looptap.cassettes.reading import open_run
from looptap.cassettes.why import Outcome, judged_from
from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Call, Reply, ScriptedRequest, ScriptedUpstream

RULES = """\
# the agent's rules (docs/rules.md)
[[rule]]
name = "authenticate first"
kind = "order"
first = "authenticate_user"
then = ["get_order", "cancel_order"]

[[rule]]
name = "explicit yes before a change"
kind = "consent"
tools = ["cancel_order"]

[[rule]]
name = "two lookups per task"
kind = "count"
tool = "get_order"
max = 2

[[rule]]
name = "no transfer with calls pending"
kind = "forbidden"
tool = "transfer_to_human"
pending = true
"""

AUTH = Reply.tool("authenticate_user", {"email": "jane@example.com"})
#: the first user message → the model's replies, one per request (by the answers before it).
SCRIPTS: dict[str, list[Reply]] = {
    "Cancel order W3 for me.": [
        Reply.tool("get_order", {"order_id": "W3"}),
        Reply.tool("cancel_order", {"order_id": "W3"}),
        Reply.say("Cancelled."),
    ],
    "I am jane@example.com. Where are W1, W2, W3 and W4?": [
        AUTH,
        Reply.tool("get_order", {"order_id": "W1"}),
        Reply.tool("get_order", {"order_id": "W2"}),
        Reply.tool("get_order", {"order_id": "W3"}),
        Reply(
            calls=(
                Call("transfer_to_human", {"summary": "W4"}),
                Call("get_order", {"order_id": "W4"}),
            )
        ),
        Reply.say("A colleague will help with W4."),
    ],
    "I am jane@example.com; please cancel W3.": [
        AUTH,
        Reply.tool("get_order", {"order_id": "W3"}),
        Reply.say("W3 is pending. Shall I cancel it?"),
        Reply.tool("cancel_order", {"order_id": "W3"}),
        Reply.tool("transfer_to_human", {"summary": "cancelled W3, wants a refund"}),
        Reply.say("Cancelled; a colleague will see to the refund."),
    ],
}
QUESTIONS = [*list(SCRIPTS)[:2], list(SCRIPTS)[2] + " || Yes, go ahead."]


def route(req: ScriptedRequest) -> Reply:
    answers = sum(1 for m in req.messages if isinstance(m, dict) and m.get("role") == "assistant")
    return SCRIPTS[req.user_texts()[0]][answers]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("openai")
    tmp = tmp_path_factory.mktemp("rules")
    (tmp / "agent.py").write_text(AGENT)
    (tmp / "looptap-rules.toml").write_text(RULES)
    with ScriptedUpstream(route, validate=True) as fake:
        proc = progress.run(
            [*RECORDER, "run", "-o", "retail.jsonl", "--confdir", str(tmp / "conf"),
             "--upstream", f"openai={fake.url}", "--", sys.executable, "agent.py", *QUESTIONS],
            capture_output=True,
            text=True,
            cwd=tmp,
            env=clean_env(OPENAI_API_KEY="sk-test-rules"),
        )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.count("answer:") == 4, proc.stderr[-3000:]
    return tmp


@pytest.fixture
def broken(recording: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Finding]]:
    monkeypatch.setenv("LOOPTAP_RULES", str(recording / "looptap-rules.toml"))
    run = open_run(recording / "retail.jsonl", whole=True, cache=False)
    convs = run.analysis.conversations
    assert len(convs) == len(SCRIPTS)
    return {
        q: [
            f for f in run.analysis.findings if f.code == "E.rule_broken" and f.conversation == c.id
        ]
        for q, c in zip(SCRIPTS, convs, strict=True)
    }


def _said(found: list[Finding]) -> list[tuple[int | None, str, str]]:
    return [(f.turn, f.details["rule"], f.details["tool"]) for f in found]


@needs_recorder
def test_order_and_consent_rules_broken_are_said_on_the_calls(
    broken: dict[str, list[Finding]],
) -> None:
    assert _said(broken["Cancel order W3 for me."]) == [
        (0, "authenticate first", "get_order"),
        (1, "authenticate first", "cancel_order"),
        (1, "explicit yes before a change", "cancel_order"),
    ]


@needs_recorder
def test_count_and_forbidden_rules_broken_are_said_on_the_calls(
    broken: dict[str, list[Finding]],
) -> None:
    found = broken["I am jane@example.com. Where are W1, W2, W3 and W4?"]
    assert _said(found) == [
        (3, "two lookups per task", "get_order"),
        (4, "no transfer with calls pending", "transfer_to_human"),
    ]
    assert "calls are pending (get_order)" in found[1].message


@needs_recorder
def test_clean_twin_authenticated_asked_and_alone_breaks_no_rule(
    broken: dict[str, list[Finding]],
) -> None:
    assert broken["I am jane@example.com; please cancel W3."] == []


@needs_recorder
def test_show_lists_the_broken_rules_and_assert_rules_fails(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", "retail.jsonl"],
        capture_output=True,
        text=True,
        cwd=recording,  # looptap-rules.toml found in the working directory
        env=clean_env(LOOPTAP_NO_CACHE="1"),
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("E.rule_broken") >= 5 and "'two lookups per task'" in shown.stdout
    monkeypatch.chdir(recording)
    monkeypatch.delenv("LOOPTAP_RULES", raising=False)
    with pytest.raises(AssertionError, match=r"^5 calls broke the agent's rules:\n"):
        open_run(recording / "retail.jsonl", whole=True, cache=False).assert_rules()


def _looptap(*args: str, cwd: Path, rules: str | None = None) -> str:
    env = clean_env() if rules is None else clean_env(LOOPTAP_RULES=rules)
    done = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return str(done.stdout)


@needs_recorder
def test_the_html_report_lists_the_broken_rules(recording: Path, tmp_path: Path) -> None:
    _looptap("export", "--html", "retail.jsonl", "-o", str(tmp_path / "r.html"), cwd=recording)
    page = (tmp_path / "r.html").read_text()
    assert page.count("E.rule_broken") >= 5 and "two lookups per task" in page


@needs_recorder
def test_the_fleet_index_lists_the_broken_rules_once_rules_are_in_force(
    recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexed first with no rules, the run is read again when a rules file comes in force (its
    findings depend on it), and its broken rules are the index's findings; the MCP server's
    listing takes the index's figures only under the rules they were indexed with."""
    pytest.importorskip("duckdb")
    from looptap.cassettes.fleet import overviews

    run = tmp_path / "runs" / "retail.jsonl"
    run.parent.mkdir()
    run.write_bytes((recording / "retail.jsonl").read_bytes())
    rules = str(recording / "looptap-rules.toml")
    sql = "select code from findings where code = 'E.rule_broken'"

    def index_and_count(rules: str) -> int:
        _looptap("index", "runs", cwd=tmp_path, rules=rules)
        db = str(tmp_path / ".looptap" / "fleet.duckdb")
        done = cli_run("query", "--fleet", db, "--json", sql)  # (in process: the index's figures)
        assert done.returncode == 0, done.stderr
        return len(done.stdout.splitlines())

    assert index_and_count("") == 0
    assert index_and_count(rules) == 5
    assert index_and_count(rules) == 5  # unchanged: not read again, kept
    monkeypatch.setenv("LOOPTAP_RULES", rules)
    assert overviews([run.parent], [run])[run]["findings"]["E"] == {"warning": 5}
    monkeypatch.setenv("LOOPTAP_RULES", "")
    assert overviews([run.parent], [run]) == {}


@needs_recorder
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_inspector_lists_the_broken_rules(
    recording: Path, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    pytest.importorskip("textual")
    from helpers import loaded, until

    from looptap.inspector.app import build_app
    from looptap.inspector.widgets import FindingsTable

    monkeypatch.setenv("LOOPTAP_RULES", str(recording / "looptap-rules.toml"))
    app = build_app(recording / "retail.jsonl")
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        await pilot.press("3")  # the findings tab
        table = app.query_one(FindingsTable)
        await until(pilot, lambda: len(table.findings) > 0)
        broken = [f.details["rule"] for f in table.findings if f.code == "E.rule_broken"]
        assert sorted(broken) == sorted(
            ["authenticate first"] * 2
            + ["explicit yes before a change", "two lookups per task"]
            + ["no transfer with calls pending"]
        )


@needs_recorder
def test_why_can_judge_a_run_by_one_broken_rule(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``looptap why --finding E.rule_broken:NAME`` judges each branch by that rule."""
    monkeypatch.setenv("LOOPTAP_RULES", str(recording / "looptap-rules.toml"))
    judged = judged_from(open_run(recording / "retail.jsonl", whole=True, cache=False))
    assert Outcome("finding", "E.rule_broken:authenticate first").failed(judged) is True
    assert Outcome("finding", "E.rule_broken:never heard of").failed(judged) is False


@needs_recorder
def test_assert_rules_without_a_rules_file_fails_rather_than_passing(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPTAP_RULES", "")
    with pytest.raises(AssertionError, match="no agent rules in force"):
        open_run(recording / "retail.jsonl", whole=True, cache=False).assert_rules()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[rule]]\nkind = "order"\nfirst = "a"\n', ":1: rule 1: order rule needs then = a"),
        (RULES + '\n[[rule]]\nkind = "count"\ntool = "x"\nmax = "two"\n', ":25: rule 5: count"),
        ('[[rule]]\nkind = "sometimes"\n', ":1: rule 1: kind must be one of order, consent"),
        ('[[rule]]\nkind = "count"\ntool = "x"\nmax = 1\nmaximum = 2\n', "has no field 'maximum'"),
        ('[[rule]]\nkind = "consent"\ntools = ["x"]\nyes = "(("\n', ":1: rule 1: yes = '(('"),
        ("[[rule]\n", ":1: not TOML"),
        ("[rules]\nx = 1\n", ":1: unknown table 'rules'"),
        ('rule = "x"\n', ":1: rules are [[rule]] tables, not one str"),
        ("rule = [1]\n", ":1: rule 1: a rule is a [[rule]] table, not int"),
    ],
)
def test_a_bad_rule_is_refused_in_one_line_naming_file_and_line(
    tmp_path: Path, text: str, said: str
) -> None:
    f = tmp_path / "looptap-rules.toml"
    f.write_text(text)
    with pytest.raises(RulesError) as got:
        load(f)
    msg = str(got.value)
    assert msg.startswith(str(f) + ":") and said in msg and "\n" not in msg, msg


@needs_recorder
def test_show_refuses_a_bad_rules_file_in_one_line(tmp_path: Path, recording: Path) -> None:
    (tmp_path / "looptap-rules.toml").write_text('[[rule]]\nkind = "count"\ntool = "x"\n')
    shown = progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", "show", str(recording / "retail.jsonl")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(LOOPTAP_NO_CACHE="1"),
    )
    assert shown.returncode != 0 and "Traceback" not in shown.stderr
    (line,) = shown.stderr.strip().splitlines()
    assert "looptap-rules.toml:1: rule 1: count rule needs max = a positive integer" in line
