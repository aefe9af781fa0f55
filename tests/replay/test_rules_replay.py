"""User rules where requests are matched (issue 44, item 2): the replay server, ``looptap
replay``, a fork's prefix (``looptap run --from``) and the pytest plugin read the same rules —
the project's ``looptap.toml`` / ``pyproject.toml [tool.looptap]`` and their own flags, ini keys
and marker arguments —, say which rule tolerated what, and refuse a rule that cannot be used in
one line before anything listens or is sent (counted at loopback fakes)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from looptap.cassettes.matching import rules_of_args
from looptap.cassettes.replay.forking.cursor import Cursor, live_router
from looptap.cassettes.replay.forking.fork import ForkReplay, parse_from
from looptap.cassettes.replay.forking.placement import parse_cursor
from looptap.cassettes.replay.forking.plan import read_plan
from looptap.cassettes.replay.serving.server import ReplayServer
from tests.replay.conftest import raw_request, write
from tests.replay.test_fork_options import refused_run
from tests.replay.test_plugin import NOPLUG, _clean_env, expect  # noqa: F401 (_clean_env: autouse here too)
from tests.replay.test_rules_propose import MONDAY, TUESDAY, agent
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.scripted import Reply, ScriptedUpstream

PATH = "/v1/chat/completions"
#: What ``looptap rules propose monday.jsonl tuesday.jsonl`` printed
#: (tests/replay/test_rules_propose.py), pasted.
PROPOSED = """\
ignore = ['openai_chat:metadata.session']
substitute = ['\\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\\b=<weekday>', 'run\\-[0-9a-f]{8}\\b=run-<id>']
"""  # noqa: E501


def tuesday(listing: str | None = None) -> list[bytes]:
    """Tuesday's requests; ``listing``: what list_files returned instead (the world changed)."""
    out = []
    for ex in agent(TUESDAY):
        body = ex.request_body
        if listing is not None:
            body = body.replace(b"notes.txt\\ntodo.txt", listing.encode())
        out.append(body)
    return out


def _args(*argv: str) -> argparse.Namespace:
    from looptap.cassettes.cli import build_parser

    return build_parser("replay").parse_args(["replay", "run.jsonl", *argv])


def test_the_server_serves_a_request_differing_only_in_ruled_ways_and_says_by_which_rule(
    tmp_path: Path,
) -> None:
    run = write(tmp_path / "run.jsonl", agent(MONDAY))
    (tmp_path / "looptap.toml").write_text(PROPOSED)
    rules = rules_of_args(_args("--volatile-tool", "list_files"), run)
    with ReplayServer(run, rules=rules) as srv:
        statuses = [
            raw_request(srv.url, "POST", PATH, body)[0]
            for body in tuesday(listing="notes.txt\\nnew.txt")
        ]
        notes = [n for ex in srv.served for n in ex.notes]
    assert statuses == [200, 200, 200]
    assert (
        "tolerated: ignored (rule: ignore openai_chat:metadata.session) at metadata.session: "
        "recorded 'sess_4f9a1c2b', this request 'sess_9c0d7e13'" in notes
    )
    assert any(
        n.startswith(
            "tolerated: substituted (rule: substitute run\\-[0-9a-f]{8}\\b=run-<id>) "
            "at messages[0].content: recorded 'run-3fa9c1d2'"
        )
        for n in notes
    )
    assert any(
        n.startswith(
            "tolerated: tool_result (rule: volatile tool list_files) "
            "at messages[3].content: recorded 'notes.txt"
        )
        for n in notes
    )
    # the built-in detectors beside them
    assert any(n.startswith("tolerated: date at messages[0].content") for n in notes)
    # Without the project's file and the flag, the same requests miss at turn 0.
    (tmp_path / "looptap.toml").unlink()
    with ReplayServer(run, rules=rules_of_args(_args(), run)) as srv:
        assert raw_request(srv.url, "POST", PATH, tuesday()[0])[0] != 200
        assert len(srv.misses) == 1


def test_a_forks_prefix_applies_the_rules_and_passes_the_flags_to_its_replay_server(
    tmp_path: Path,
) -> None:
    run = write(tmp_path / "run.jsonl", agent(MONDAY))
    (tmp_path / "looptap.toml").write_text(PROPOSED)
    rules = rules_of_args(_args("--volatile-tool", "list_files"), run)
    with ScriptedUpstream(lambda req: Reply.say("live")) as live:
        with ReplayServer(
            run,
            cursor=Cursor(parse_cursor("turn=2"), live_router({"openai": live.url})),
            rules=rules,
        ) as srv:
            statuses = [
                raw_request(srv.url, "POST", PATH, body)[0]
                for body in tuesday(listing="notes.txt\\nnew.txt")
            ]
        # turns 0 and 1 from the recording, turn 2 live
        assert statuses == [200, 200, 200] and len(live.log) == 1
    given = {"ignore": ["a.*"], "substitute": ["x=y"], "volatile_tool": ["ls"]}
    ForkReplay(parse_from(f"{run}@turn=1"), rules=given).plan({}).write(tmp_path / "plan.json")
    assert read_plan(tmp_path / "plan.json").rules == given


def _looptap(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return progress.run(
        [sys.executable, "-m", "looptap.cassettes.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=clean_env(OPENAI_API_KEY="sk-x"),
    )


BAD = [
    (
        ["--substitute", "(a)\\1=x"],
        "",
        "substitute '(a)\\\\1': not a pattern looptap takes: invalid escape sequence",
    ),
    (
        ["--ignore", "messages..content"],
        "",
        "ignore path 'messages..content': cannot read it at character 9",
    ),
    (["--ignore", "antropic:metadata.user_id"], "", "unknown API family 'antropic'"),
    (
        [],
        "[tool.looptap]\nignores = ['metadata.*']\n",
        "pyproject.toml [tool.looptap]: unknown key 'ignores'",
    ),
    ([], "[tool.looptap]\nsubstitute = ['[=x']\n", "substitute '[': not a pattern looptap takes"),
]


@pytest.mark.parametrize(
    ("flags", "pyproject", "said"),
    BAD,
    ids=["backreference", "path", "family", "table-key", "table-regex"],
)
def test_replay_refuses_a_rule_in_one_line_before_it_listens(
    tmp_path: Path, flags: list[str], pyproject: str, said: str
) -> None:
    run = write(tmp_path / "run.jsonl", agent(MONDAY))
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    proc = _looptap("replay", str(run), *flags, cwd=tmp_path)
    # no export line: nothing listened
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert (
        len(proc.stderr.splitlines()) == 1
        and proc.stderr.startswith("looptap: error: ")
        and said in proc.stderr
    ), proc.stderr


@needs_recorder
@pytest.mark.parametrize(
    ("flags", "pyproject", "said"),
    [BAD[0], BAD[3], (["--volatile-tool", "ls"], "", "--volatile-tool go with --from")],
    ids=["backreference", "table-key", "without-from"],
)
def test_run_from_refuses_a_rule_in_one_line_before_anything_is_sent(
    tmp_path: Path, flags: list[str], pyproject: str, said: str
) -> None:
    run = write(tmp_path / "run.jsonl", agent(MONDAY))
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    out = tmp_path / "branch.jsonl"
    with ScriptedUpstream(lambda req: Reply.say("live")) as fake:
        fork = (
            []
            if "without-from" in said or "go with --from" in said
            else ["--from", f"{run}@turn=1"]
        )
        argv = [
            *RECORDER,
            "run",
            *fork,
            *flags,
            "-o",
            str(out),
            "--confdir",
            str(tmp_path / "conf"),
            "--upstream",
            f"openai={fake.url}",
            "--",
            sys.executable,
            "-c",
            "open('agent-ran', 'w')",
        ]
        proc = refused_run(argv[len(RECORDER) :], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("looptap: error: ") and said in lines[0], (
        proc.stderr
    )
    assert not (tmp_path / "agent-ran").exists() and not out.exists()
    assert fake.log == []


AGENT = """
import json, os, sys, urllib.request
for body in json.load(open(sys.argv[1])):
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(), method="POST",
                                 headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        urllib.request.urlopen(req).read()
    except urllib.error.HTTPError as exc:
        sys.exit(f"agent: {exc.code}")
"""  # noqa: E501


@needs_recorder
@pytest.mark.slow(
    reason=(
        "two forks through the recorder (about 3 s of CPU): a fork's prefix applying the "
        "pasted rules and the flags runs in the process in "
        "test_a_forks_prefix_applies_the_rules_and_passes_the_flags_to_its_replay_server"
    )
)
def test_a_fork_on_tuesday_of_a_monday_run_serves_its_prefix_with_the_pasted_rules(
    tmp_path: Path,
) -> None:
    """The Monday run forked on Tuesday at turn 2, the listing changed since: without rules the
    prefix diverges at turn 0 (exit 1, nothing sent); with the proposed rules pasted beside the
    run and ``--volatile-tool list_files``, turns 0 and 1 are served from the recording and only
    turn 2 reaches the upstream."""
    run = write(tmp_path / "run.jsonl", agent(MONDAY))
    bodies = tmp_path / "bodies.json"
    bodies.write_text(
        orjson.dumps([b.decode() for b in tuesday(listing="notes.txt\\nnew.txt")]).decode()
    )

    def fork(*flags: str) -> tuple[subprocess.CompletedProcess[str], int]:
        with ScriptedUpstream(lambda req: Reply.say("live")) as fake:
            argv = [
                *RECORDER,
                "run",
                "--from",
                f"{run}@turn=2",
                *flags,
                "-o",
                str(tmp_path / "branch.jsonl"),
                "--confdir",
                str(tmp_path / "conf"),
                "--upstream",
                f"openai={fake.url}",
                "--",
                sys.executable,
                "-c",
                AGENT,
                str(bodies),
            ]
            return progress.run(
                argv,
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=clean_env(OPENAI_API_KEY="sk-x"),
            ), len(fake.log)

    refused, sent = fork()
    assert refused.returncode != 0 and sent == 0, refused.stderr[-3000:]
    assert "no recorded round trip matches POST /v1/chat/completions" in refused.stderr
    (tmp_path / "looptap.toml").write_text(PROPOSED)
    done, sent = fork("--volatile-tool", "list_files")
    assert done.returncode == 0 and sent == 1, done.stderr[-3000:]


pytest_plugins = ["pytester"]

INNER = '''
import json, os, urllib.request
import pytest

BODIES = BODIES_JSON

@pytest.mark.looptap("cassettes/run.jsonl"MARK)
def test_agent(looptap):
    for body in BODIES:
        req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(), method="POST",
                                     headers={"content-type": "application/json", "authorization": "Bearer x"})
        urllib.request.urlopen(req).read()
'''  # noqa: E501


def _inner(
    pytester: pytest.Pytester,
    mark: str = "",
    ini: str = "",
    listing: str | None = "notes.txt\\nnew.txt",
) -> None:
    (pytester.path / "cassettes").mkdir(exist_ok=True)
    write(pytester.path / "cassettes" / "run.jsonl", agent(MONDAY))
    code = INNER.replace(
        "BODIES_JSON", repr([b.decode() for b in tuesday(listing=listing)])
    ).replace("MARK", mark)
    pytester.makepyfile(test_inner=textwrap.dedent(code))
    (pytester.path / "pytest.ini").unlink(missing_ok=True)
    if ini:
        pytester.makefile(".ini", pytest="[pytest]\n" + ini)


IGNORE = "anthropic:metadata.user_id', 'openai_chat:metadata.session"
SUBS = (
    r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b=<weekday>', "
    r"r'run\-[0-9a-f]{8}\b=run-<id>"
)


@pytest.mark.parametrize(
    ("how", "mark", "ini"),
    [
        (
            "marker",
            f", ignore=['{IGNORE}'], substitute=[r'{SUBS}'], volatile_tools='list_files'",
            "",
        ),
        (
            "ini",
            "",
            "looptap_ignore = openai_chat:metadata.session\nlooptap_substitute =\n    "
            + SUBS.replace("', r'", "\n    ")
            + "\nlooptap_volatile_tools = list_files\n",
        ),
    ],
)
def test_pytest_reads_the_rules_from_the_marker_and_the_ini(
    pytester: pytest.Pytester, how: str, mark: str, ini: str
) -> None:
    _inner(pytester, mark=mark, ini=ini)
    pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none").assert_outcomes(passed=1)
    _inner(pytester)  # the same test without the rules fails with the diff at turn 0
    failed = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    failed.assert_outcomes(failed=1)
    expect(failed, "messages[0].content")


def test_pytest_refuses_a_bad_rule_in_one_line(pytester: pytest.Pytester) -> None:
    _inner(pytester, ini="looptap_substitute = (?<=a)b=x\n")
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "looptap: substitute '(?<=a)b': not a pattern looptap takes: invalid perl operator '(?<=' "
        "at position 0" in result.stderr.str()
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    _inner(pytester, mark=", ignore='a..b'")
    result = pytester.runpytest_inprocess(*NOPLUG, "--looptap-record-mode=none")
    result.assert_outcomes(errors=1)  # the test's setup fails in one line; the test never runs
    expect(result, "looptap: ignore path 'a..b': cannot read it")
    assert "Traceback" not in result.stdout.str()
