"""``looptap rules learn`` and ``looptap rules check`` (issue 70 item 4, docs/rules.md) on a
tau-bench-retail-like agent recorded through ``looptap run`` (retail_policy.py: the real openai SDK,
deterministic tools, a scripted model): the rules learnt from its 20 passing conversations say the
policy (authenticate by email or by name and zip first, look an order up before a write, the
user's yes before a write, at most one item change per order, no address change after the items,
one write at a time, no invented payment method), break in none of them, and find each of the 10
planted breaks of the failing conversations at the turn it was planted.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from retail_policy import AGENT, FAILING, PASSING, PLANTED, question, route

from tests.support import progress
from tests.support.analysed import cli_run
from tests.support.recorder import RECORDER, clean_env, recorded_or_live
from tests.support.scripted import ScriptedUpstream

#: The two runs as this module's live fixture recorded them (data/retail/README.md): read by
#: default, recorded again at night.
RECORDED = Path(__file__).parent / "data" / "retail"


@pytest.fixture(
    scope="module",
    params=recorded_or_live("the two runs of the openai SDK's agent (about 5 s of CPU)"),
)
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """passing.jsonl (20 conversations) and failing.jsonl (10), each one ``looptap run``: as
    recorded (data/retail), or recorded again (``live``)."""
    tmp = tmp_path_factory.mktemp("retail")
    if request.param == "recorded":
        for name in ("passing.jsonl", "failing.jsonl"):
            (tmp / name).write_bytes((RECORDED / name).read_bytes())
        return tmp
    pytest.importorskip("openai")
    (tmp / "agent.py").write_text(AGENT)
    with ScriptedUpstream(route, validate=True) as fake:
        for name, scripts in (("passing", PASSING), ("failing", FAILING)):
            proc = progress.run(
                [*RECORDER, "run", "-o", f"{name}.jsonl", "--confdir", str(tmp / "conf"),
                 "--upstream", f"openai={fake.url}", "--", sys.executable, "agent.py",
                 *(question(s) for s in scripts.values())],
                capture_output=True,
                text=True,
                cwd=tmp,
                env=clean_env(OPENAI_API_KEY="sk-test-retail-policy"),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert proc.stdout.count("answer:") == sum(len(s.said) for s in scripts.values())
    return tmp


def looptap(*args: str, cwd: Path, code: int = 0, process: bool = False) -> str:
    """``looptap ARGS`` in CWD: in this process (what the command says: its wiring is the
    ``process=True`` call's, ``learn``'s, and the runaway pattern's ``show`` and ``check``), or as
    a process of its own."""
    done = (
        progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=clean_env(),
        )
        if process
        else cli_run(*args, cwd=cwd)
    )
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return str(done.stdout)


@pytest.fixture(scope="module")
def learnt(runs: Path) -> dict[str, dict[str, object]]:
    out = looptap("rules", "learn", "passing.jsonl", "-o", "rules.toml", cwd=runs, process=True)
    assert "rules.toml: " in out and "proposed from 20 traces" in out, out
    rules = tomllib.loads((runs / "rules.toml").read_text())["rule"]
    return {r["name"]: r for r in rules}


def test_learn_proposes_the_policy_from_the_passing_runs(learnt: dict[str, dict]) -> None:
    by_kind: dict[str, list[dict]] = {}
    for r in learnt.values():
        by_kind.setdefault(r["kind"], []).append(r)
    writes = {"cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address"}
    assert len(learnt) == 23  # (the figure of docs/rules.md)
    # consent before a write
    (consent,) = by_kind["consent"]
    assert set(consent["tools"]) == writes
    # authenticate by email, or by name and zip, before any account tool
    auth = [r for r in by_kind["order"] if len(r["first"]) == 2]
    assert [set(r["first"]) for r in auth] == [
        {"find_user_id_by_email", "find_user_id_by_name_zip"}
    ]
    assert {"get_user_details", "get_order_details"} <= set(auth[0]["then"])
    (details,) = [r for r in by_kind["order"] if r["first"] == ["get_user_details"]]
    assert writes <= set(details["then"])
    # a lookup of the same order before a write
    (lookup,) = [r for r in by_kind["order"] if r["first"] == ["get_order_details"]]
    assert set(lookup["then"]) == writes and lookup["per"] == "order_id"
    # at most one item change per order, in the whole conversation
    (items,) = [r for r in by_kind["count"] if r["tool"] == ["modify_pending_order_items"]]
    assert (items["max"], items["per"], items["scope"]) == (1, "order_id", "conversation")
    # no address change after the items changed (on the same order)
    (after,) = [r for r in by_kind["forbidden"] if "after" in r]
    assert after["tool"] == ["modify_pending_order_address"]
    assert after["after"] == ["modify_pending_order_items"] and after["per"] == "order_id"
    # one write at a time
    (alone,) = [r for r in by_kind["forbidden"] if r.get("pending")]
    assert writes <= set(alone["tool"]) and "get_order_details" not in alone["tool"]
    # the payment method comes from the user's record
    (pay,) = [r for r in by_kind["provenance"] if r["argument"] == "payment_method_id"]
    assert pay["from"] == ["get_user_details"]


def test_each_proposal_says_what_holds_and_the_traces_that_support_it(runs: Path, learnt) -> None:
    text = (runs / "rules.toml").read_text()
    assert "Nothing here is in force" in text
    blocks = text.split("[[rule]]")[1:]
    assert len(blocks) == len(learnt)
    for before in text.split("[[rule]]")[:-1]:
        said = before.rstrip().splitlines()[-1]
        assert said.startswith("# supported by ") and "passing.jsonl c" in said, said
        n = int(said.split()[3])
        assert n >= 5 and said.count("passing.jsonl c") == n


def test_the_learnt_rules_break_in_no_passing_run(runs: Path, learnt) -> None:
    out = looptap("rules", "check", "rules.toml", "passing.jsonl", cwd=runs)
    assert "passing.jsonl: no rule broken" in out and "broken 0" not in out


def test_the_learnt_rules_find_each_planted_break_at_its_turn(runs: Path, learnt) -> None:
    out = looptap("rules", "check", "--json", "rules.toml", "failing.jsonl", cwd=runs, code=1)
    rows = [json.loads(line) for line in out.splitlines()]
    by_conv: dict[str, list[dict]] = {}
    for r in rows:
        by_conv.setdefault(r["conversation"], []).append(r)
    convs = [f"c{i + 1}" for i in range(len(FAILING))]
    got = {}
    for conv, (q, (turn, kind)) in zip(convs, PLANTED.items(), strict=True):
        found = by_conv.get(conv, [])
        assert found, f"{conv} ({q!r}): nothing found"
        first = min(r["turn"] for r in found)
        got[q] = (first, sorted({r["kind"] for r in found if r["turn"] == first}))
        assert first == turn and kind in got[q][1], (q, found)
    assert len(got) == 10 and len(rows) == 17  # (the figures of docs/rules.md)


def test_check_prints_each_broken_rule_per_run_and_turn(runs: Path, learnt) -> None:
    out = looptap("rules", "check", "rules.toml", "passing.jsonl", "failing.jsonl", cwd=runs,
                  code=1)  # fmt: skip
    assert "passing.jsonl: no rule broken\n" in out
    assert "failing.jsonl: " in out and "c4 turn 0 (seq " in out
    assert "'yes before cancel_pending_order, " in out and "of 2 runs" in out


def test_learn_refuses_to_overwrite_and_to_learn_from_too_few(runs: Path, learnt) -> None:
    done = cli_run("rules", "learn", "passing.jsonl", "-o", "rules.toml", cwd=runs)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "looptap: error: the rules file rules.toml exists (--force replaces it)"
    ]
    out = looptap("rules", "learn", "passing.jsonl", "-o", "rules.toml", "--force",
                  "--min-support", "21", cwd=runs)  # fmt: skip
    assert " 0 rules proposed from 20 traces" in out
    assert "[[rule]]" not in (runs / "rules.toml").read_text()
    looptap("rules", "learn", "passing.jsonl", "-o", "rules.toml", "--force", cwd=runs)


# -- the format says the policy: scope, per, failed calls, any of several first, RE2 ------------

#: The policy as a person writes it (docs/rules.md).
WRITES = '["cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address"]'
AUTH = '["find_user_id_by_email", "find_user_id_by_name_zip"]'


def broken(runs: Path, name: str, text: str) -> list[tuple[str | None, int | None, str]]:
    """(conversation, turn, rule) of each rule ``text`` finds broken in ``name``, in process."""
    from looptap.cassettes.analysis import parse_rules, using
    from looptap.cassettes.reading import open_run

    with using(parse_rules(text, "policy.toml")):
        run = open_run(runs / name, whole=True, cache=False)
        found = [f for f in run.analysis.findings if f.code == "E.rule_broken"]
    return [(f.conversation, f.turn, f.details["rule"]) for f in found]


def rule(name: str, kind: str, **fields: str | int) -> str:
    body = "".join(
        f"{k} = {v}\n" if isinstance(v, int) or v.startswith("[") else f'{k} = "{v}"\n'
        for k, v in fields.items()
    )
    return f'[[rule]]\nname = "{name}"\nkind = "{kind}"\n{body}'


def conv(scripts: dict[str, object], first_words: str) -> str:
    """The conversation id (c1 …) of the script whose first user message has these words."""
    (i,) = [i for i, q in enumerate(scripts) if first_words in q]
    return f"c{i + 1}"


ONE_CHANGE = rule("one item change per order", "count", tool="modify_pending_order_items", max=1,
                  per="order_id", scope="conversation")  # fmt: skip


def test_a_conversation_scope_sees_a_second_change_two_user_turns_apart(runs: Path) -> None:
    second = conv(FAILING, "Please swap the kettle in W401")
    same_task = conv(FAILING, "Swap both items in W301")
    found = broken(runs, "failing.jsonl", ONE_CHANGE)
    assert sorted((c, t) for c, t, _ in found) == sorted([(same_task, 5), (second, 7)])
    # the twin: a task's scope (since the user's latest message) sees only the one in a task
    in_task = ONE_CHANGE.replace('"conversation"', '"task"')
    assert [(c, t) for c, t, _ in broken(runs, "failing.jsonl", in_task)] == [(same_task, 5)]


def test_a_count_per_order_counts_each_order_apart(runs: Path) -> None:
    assert broken(runs, "passing.jsonl", ONE_CHANGE) == []
    # the twin: unkeyed, two orders' changes in one conversation are two changes
    unkeyed = ONE_CHANGE.replace('per = "order_id"\n', "")
    two_orders = conv(PASSING, "Swap the kettle in W101 for N5501.")
    assert [(c, t) for c, t, _ in broken(runs, "passing.jsonl", unkeyed)] == [(two_orders, 8)]


def test_first_takes_any_of_several_tools_and_a_failed_call_is_not_one(runs: Path) -> None:
    auth = rule("authenticate first", "order", first=AUTH,
                then='["get_user_details", "get_order_details"]')  # fmt: skip
    assert broken(runs, "passing.jsonl", auth) == []  # a failed email lookup, then name and zip
    found = broken(runs, "failing.jsonl", auth)
    unauthenticated = conv(FAILING, "Cancel order W201 now.")
    failed = conv(FAILING, "bob.okafor")
    assert (unauthenticated, 0, "authenticate first") in found
    assert (failed, 1, "authenticate first") in found  # its email lookup failed
    # the twin: by email only, every conversation authenticated by name and zip breaks it
    by_email = auth.replace(AUTH, '"find_user_id_by_email"')
    named = {c for c, _, _ in broken(runs, "passing.jsonl", by_email)}
    assert len(named) == sum(1 for q in PASSING if ", zip " in q or "(" in q) == 9


def test_a_failed_call_is_not_counted(runs: Path) -> None:
    once = rule("one lookup of the user", "count", tool=AUTH, max=1, scope="conversation")
    assert broken(runs, "passing.jsonl", once) == []  # a typo's failed email lookup, then a name's
    # the twin: calls that did not fail are counted (an order looked up again in a later task)
    again = rule("one lookup per order", "count", tool="get_order_details", max=1,
                 per="order_id", scope="conversation")  # fmt: skip
    found = broken(runs, "passing.jsonl", again)
    assert sorted(c for c, _, _ in found) == sorted(
        conv(PASSING, f"Ship {o} to 12 Elm St") for o in ("W202", "W302", "W402")
    )


#: A consent rule whose yes backtracks for ever in Python's re on a message without a z.
RUNAWAY = rule("yes", "consent", tools=WRITES) + "yes = '^(.|.)*Z'\n"


def test_a_runaway_yes_pattern_is_matched_in_linear_time(runs: Path, tmp_path: Path) -> None:
    """The rules file of the working directory (an untrusted checkout's) with a backtracking
    bomb: ``show``, ``rules check`` and ``index`` finish within a CPU budget (RE2; Python's re
    would take 2^70 steps on the 70 characters the consent rule reads), the rule judged."""
    (tmp_path / "looptap-rules.toml").write_text(RUNAWAY)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "failing.jsonl").write_bytes((runs / "failing.jsonl").read_bytes())
    said = {
        "show": (["show", "runs/failing.jsonl"], 0, "E.rule_broken"),
        "check": (["rules", "check", "looptap-rules.toml", "runs/failing.jsonl"], 1,
                  "'yes' (consent): broken "),
        "index": (["index", "runs"], 0, ""),
    }  # fmt: skip
    try:
        import duckdb  # noqa: F401 - the fleet extra's
    except ImportError:
        del said["index"]
    for args, code, out in said.values():
        done = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", *args], capture_output=True, text=True,
            cwd=tmp_path, env=clean_env(LOOPTAP_NO_CACHE="1"), cpu=60,
        )  # fmt: skip
        assert done.returncode == code and out in done.stdout, done.stdout + done.stderr


def test_the_working_directorys_rules_file_is_named_on_stderr(runs: Path, tmp_path: Path) -> None:
    (tmp_path / "looptap-rules.toml").write_text(ONE_CHANGE)
    path = str((tmp_path / "looptap-rules.toml").resolve())

    def show(**env: str) -> str:
        done = progress.run(
            [sys.executable, "-m", "looptap.cassettes.cli", "show", str(runs / "failing.jsonl")],
            capture_output=True, text=True, cwd=tmp_path,
            env=clean_env(LOOPTAP_NO_CACHE="1", **env),
        )  # fmt: skip
        assert done.returncode == 0 and "E.rule_broken" in done.stdout, done.stderr
        return str(done.stderr)

    assert show().splitlines() == [
        f"looptap: the agent's rules of {path} are in force (1 rule; LOOPTAP_RULES= for none)"
    ]
    assert show(LOOPTAP_RULES=path) == ""  # the twin: named by the user, not picked up


def test_a_run_that_cannot_be_read_is_named_and_never_learnt_without(
    runs: Path, learnt: dict[str, dict[str, object]], tmp_path: Path
) -> None:
    """``check`` says which run it could not read and checks the others (exit 2); ``learn``
    stops, since rules learnt without a passing run are not the rules of the runs asked for."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("interactions:\n- response: {}\n")  # a vcrpy cassette of no request

    def looptap_2(*args: str) -> tuple[str, list[str]]:
        done = cli_run(*args, cwd=runs)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        return str(done.stdout), done.stderr.strip().splitlines()

    out, said = looptap_2("rules", "check", "rules.toml", str(bad), "failing.jsonl")
    assert "failing.jsonl: 17 calls break a rule" in out
    assert said == [
        f"looptap: error: {bad}: interaction 0 has no request",
        "looptap: error: 1 run of 2 could not be read (above)",
    ]
    out, said = looptap_2(
        "rules", "learn", "passing.jsonl", str(bad), "-o", str(tmp_path / "r.toml")
    )
    assert said == [f"looptap: error: {bad}: interaction 0 has no request"]
    assert not (tmp_path / "r.toml").exists()
