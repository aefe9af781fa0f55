"""The user's set-up is the default (issue 43): a base-URL variable already set for the agent
(``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` …) is that API's upstream under ``looptap run`` and
``looptap record``, said in one line at start; ``--upstream`` overrides it; a URL of a looptap
recorder (this one, or one looptap exported) is not followed.

The real ``looptap run`` (the recorder from its own environment), the user's own agent (the openai
and anthropic SDKs of the test environment) as its child, the fake upstream in this process.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from looptap.cassettes.net import free_port
from looptap.cassettes.storage import read_records
from looptap.proxy.config import Listener, RecorderConfig, RecorderError
from tests.support import progress
from tests.support.recorder import RECORDER, clean_env, needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = [needs_recorder]

AGENT = textwrap.dedent(
    """
    import json, os
    import anthropic, openai

    said = {"openai_base": os.environ["OPENAI_BASE_URL"], "anthropic_base": os.environ["ANTHROPIC_BASE_URL"]}
    o = openai.OpenAI(max_retries=0)
    said["openai"] = o.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]).choices[0].message.content
    a = anthropic.Anthropic(max_retries=0)
    said["anthropic"] = a.messages.create(model="claude-3-5-haiku-latest", max_tokens=50, messages=[{"role": "user", "content": "hi"}]).content[0].text
    print("AGENT " + json.dumps(said))
    """  # noqa: E501
)


#: The same two calls with the standard library, at the base URLs the command gets (the SDKs' own
#: reading of them is :data:`AGENT`'s, in test_the_users_base_urls_are_the_upstreams): for the
#: tests about where the recorder forwards, without the SDKs' imports (about 2 s of CPU a run).
PLAIN_AGENT = textwrap.dedent(
    """
    import json, os, urllib.request

    def post(url, body, **headers):
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json", **headers})
        with urllib.request.urlopen(req) as r:
            return json.load(r)

    said = {"openai_base": os.environ["OPENAI_BASE_URL"], "anthropic_base": os.environ["ANTHROPIC_BASE_URL"]}
    said["openai"] = post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                          authorization="Bearer " + os.environ["OPENAI_API_KEY"])["choices"][0]["message"]["content"]
    said["anthropic"] = post(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", {"model": "claude-3-5-haiku-latest", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
                             **{"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01"})["content"][0]["text"]
    print("AGENT " + json.dumps(said))
    """  # noqa: E501
)


def _run(
    tmp_path: Path,
    *extra: str,
    child: tuple[str, ...] = ("agent.py",),
    agent: str = AGENT,
    **env: str,
) -> tuple[int, str, str, Path]:
    out = tmp_path / "run.jsonl"
    (tmp_path / "agent.py").write_text(agent)
    argv = [
        *RECORDER,
        "run",
        "-o",
        str(out),
        "--confdir",
        str(tmp_path / "conf"),
        *extra,
        "--",
        sys.executable,
        *child,
    ]
    proc = progress.run(
        argv,
        env=clean_env(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test", **env),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    return proc.returncode, proc.stdout, proc.stderr, out


def _agent_said(stdout: str) -> dict[str, str]:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("AGENT "))
    said: dict[str, str] = json.loads(line.removeprefix("AGENT "))
    return said


def test_the_users_base_urls_are_the_upstreams(tmp_path: Path) -> None:
    """Fails on main: the recorder forwarded to api.openai.com (a 502 offline), silently."""
    with FakeUpstream(delay=0.001) as up:
        rc, stdout, stderr, out = _run(
            tmp_path, OPENAI_BASE_URL=up.url + "/v1", ANTHROPIC_BASE_URL=up.url
        )
        served = up.llm_served()
    where = f"exit {rc}\n--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}"
    assert rc == 0, where
    # The traffic reached the fake, counted there: one request per SDK, at the user's paths.
    assert sorted(s.family for s in served) == ["anthropic", "openai_chat"], where
    assert sorted(urlsplit(s.target).path for s in served) == [
        "/v1/chat/completions",
        "/v1/messages",
    ], where
    # The start says so, one line per API followed.
    fake = urlsplit(up.url)
    assert (
        f"looptap: openai: your OPENAI_BASE_URL {up.url}/v1 "
        "is the upstream (--upstream openai=URL overrides)" in stderr.splitlines()
    ), where
    assert (
        f"looptap: anthropic: your ANTHROPIC_BASE_URL {up.url} is the upstream (--upstream "
        "anthropic=URL overrides)" in stderr.splitlines()
    ), where
    # The agent got looptap's listeners, with the user's paths kept.
    said = _agent_said(stdout)
    assert (
        urlsplit(said["openai_base"]).path == "/v1"
        and urlsplit(said["openai_base"]).port != fake.port
    ), said
    assert (
        urlsplit(said["anthropic_base"]).path == ""
        and urlsplit(said["anthropic_base"]).port != fake.port
    ), said
    # Every recorded round trip went to the fake and was answered: no connection anywhere else.
    exchanges = read_records(out).exchanges
    assert len(exchanges) == 2, where
    for ex in exchanges:
        assert urlsplit(ex.url).netloc == fake.netloc, ex.url
        assert ex.status == 200 and ex.transport_error is None, (
            ex.url,
            ex.status,
            ex.transport_error,
        )
    # A 502 said as a status, not the digits inside a port (127.0.0.1:25028 was one, in a CI run).
    assert (
        re.search(r"\b502\b", stderr) is None
        and "api.openai.com" not in stderr
        and "api.anthropic.com" not in stderr
    ), where


@pytest.mark.slow(
    reason=(
        "the choice in process: test_in_process_upstream_overrides_the_users_base_url; "
        "the real recorder forwarding to the user's base URLs: "
        "test_the_users_base_urls_are_the_upstreams"
    )
)
def test_upstream_overrides_the_users_base_url(tmp_path: Path) -> None:
    """``--upstream`` wins over the variable; the variable's API is then not announced."""
    with FakeUpstream(delay=0.001) as up, FakeUpstream(delay=0.001) as other:
        rc, _stdout, stderr, _out = _run(
            tmp_path,
            "--upstream",
            f"openai={up.url}",
            "--upstream",
            f"anthropic={up.url}",
            agent=PLAIN_AGENT,
            OPENAI_BASE_URL=other.url + "/v1",
            ANTHROPIC_BASE_URL=other.url,
        )
        assert rc == 0, stderr
        assert len(up.llm_served()) == 2 and other.llm_served() == []
    assert "is the upstream" not in stderr, stderr


@pytest.mark.slow(
    reason=(
        "the choice in process: "
        "test_in_process_a_stale_export_and_the_recorder_itself_are_not_followed"
    )
)
def test_a_stale_looptap_export_is_not_followed(tmp_path: Path) -> None:
    """A base URL looptap exported (``LOOPTAP_RECORDER`` names its listeners) whose recorder is gone
    (an ``eval "$(looptap record)"`` since stopped) is not the user's set-up: not followed, said.
    (The child sends nothing: the built-in upstream is never reached.)"""
    stale = "127.0.0.1:9"  # nothing listens there: following it would be a 502
    rc, _stdout, stderr, _out = _run(
        tmp_path,
        child=("-c", "pass"),
        OPENAI_BASE_URL=f"http://{stale}/v1",
        LOOPTAP_RECORDER=f"{stale},127.0.0.1:10",
    )
    assert rc == 0, stderr
    assert (
        f"looptap: openai: your OPENAI_BASE_URL http://{stale}/v1 is a looptap recorder that is "
        "gone (a stale export): not followed; the upstream is https://api.openai.com"
    ) in stderr.splitlines(), stderr


@pytest.mark.slow(
    reason=(
        "the choice in process: "
        "test_in_process_an_enclosing_recorder_that_listens_is_followed; the real "
        "recorder forwarding to the user's base URLs: "
        "test_the_users_base_urls_are_the_upstreams"
    )
)
def test_an_enclosing_recorder_is_followed(tmp_path: Path) -> None:
    """``looptap run`` inside ``looptap run`` (the outer one listening, named in
    ``LOOPTAP_RECORDER``): the inner one forwards to it, so the traffic still goes where the
    outer one sends it (here the fake stands in for the outer recorder)."""
    with FakeUpstream(delay=0.001) as up:
        outer = urlsplit(up.url).netloc
        rc, _stdout, stderr, _out = _run(
            tmp_path,
            agent=PLAIN_AGENT,
            OPENAI_BASE_URL=up.url + "/v1",
            ANTHROPIC_BASE_URL=up.url,
            LOOPTAP_RECORDER=f"{outer},127.0.0.1:10",
        )
        served = up.llm_served()
    assert rc == 0, stderr
    assert len(served) == 2, stderr
    assert (
        f"looptap: openai: your OPENAI_BASE_URL {up.url}/v1 is the upstream, a looptap recorder "
        "that is running (an enclosing run): recorded there too (--upstream openai=URL overrides)"
    ) in stderr.splitlines(), stderr


def test_looptap_record_reads_its_own_environment(tmp_path: Path) -> None:
    """``looptap record`` too: its export lines point at its listener (the user's path kept), its
    listener forwards to the user's base URL, and it exports ``LOOPTAP_RECORDER``."""
    from looptap.cassettes.replay.testing.recorder import RecorderProcess
    from tests.support.recorder import PROXY_PYTHON
    from tests.support.wire import http_request

    with FakeUpstream(delay=0.001) as up:
        rec = RecorderProcess(
            tmp_path / "rec.jsonl",
            confdir=tmp_path / "conf",
            python=PROXY_PYTHON,
            env=clean_env(OPENAI_BASE_URL=up.url + "/v1"),
        )
        try:
            env = rec.start()
            listener = urlsplit(env["OPENAI_BASE_URL"])
            assert listener.path == "/v1" and listener.port != urlsplit(up.url).port, env
            assert f"127.0.0.1:{listener.port}" in env["LOOPTAP_RECORDER"].split(","), env
            resp = http_request(
                "127.0.0.1",
                listener.port,
                "POST",
                "/v1/chat/completions",
                [("content-type", "application/json")],
                b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}',
            )
            assert resp.complete and resp.status == 200
            assert [urlsplit(s.target).path for s in up.llm_served()] == ["/v1/chat/completions"]
        finally:
            rec.stop()
    assert (
        f"looptap: openai: your OPENAI_BASE_URL {up.url}/v1 "
        "is the upstream (--upstream openai=URL overrides)" in rec.log.splitlines()
    ), rec.log


@pytest.mark.slow(
    reason=(
        "the choice in process: "
        "test_in_process_a_stale_export_and_the_recorder_itself_are_not_followed"
    )
)
def test_the_recorder_itself_is_not_followed(tmp_path: Path) -> None:
    """``--port P`` with ``OPENAI_BASE_URL`` at P (the export of an earlier ``looptap record
    --port P``): forwarding there would loop through the recorder forever."""
    from looptap.cassettes.net import free_port

    port = free_port(set())
    rc, stdout, stderr, _out = _run(
        tmp_path,
        "--port",
        str(port),
        child=("-c", "import os; print('AGENT', os.environ['OPENAI_BASE_URL'])"),
        OPENAI_BASE_URL=f"http://localhost:{port}/v1",
    )
    assert rc == 0, stderr
    assert (
        f"looptap: openai: your OPENAI_BASE_URL http://localhost:{port}/v1 is this recorder "
        "itself: not followed; the upstream is https://api.openai.com"
    ) in stderr.splitlines(), stderr
    assert f"AGENT http://127.0.0.1:{port}/v1" in stdout.splitlines(), stdout


@pytest.mark.slow(
    reason=(
        "the refusal in process: "
        "test_in_process_a_base_url_that_cannot_be_an_upstream_is_refused; run's one-line "
        "refusals: test_recorder_paths.py"
    )
)
def test_a_base_url_that_cannot_be_an_upstream_is_refused(tmp_path: Path) -> None:
    """A variable with a user or a query cannot be forwarded to as it is: one line, exit 2, nothing
    started (its requests must not go to the vendor instead). The password is not printed."""
    rc, stdout, stderr, _out = _run(
        tmp_path,
        child=("-c", "print('STARTED')"),
        OPENAI_BASE_URL="http://me:hunter2@127.0.0.1:9/v1",
    )
    assert rc == 2, stderr
    assert "STARTED" not in stdout
    assert stderr.strip().splitlines() == [
        "looptap: error: your OPENAI_BASE_URL http://127.0.0.1:9/v1 cannot be openai's upstream "
        "(http(s)://host[:port][/path], without user or query): give --upstream openai=URL, or "
        "unset OPENAI_BASE_URL"
    ], stderr


def test_the_recorder_says_it_is_up_and_what_the_command_gets_before_the_command_starts(
    tmp_path: Path,
) -> None:
    """Issue 43 item 5: ``looptap run`` said nothing until the agent's own first output (18 s on a
    busy machine). Now one line, before the command starts, says the recorder is up, where it
    records and each base URL the command gets (the user's own base URL followed, said too);
    never a key of the user's."""
    code = (
        "import os, sys\n"
        "print('AGENT STARTED', file=sys.stderr, flush=True)\n"
        "print('AGENT ' + os.environ['OPENAI_BASE_URL'] + ' ' + os.environ['ANTHROPIC_BASE_URL'] + "
        "' ' + os.environ['HTTPS_PROXY'], file=sys.stderr)\n"
    )
    with FakeUpstream(delay=0.001) as up:
        rc, _stdout, stderr, out = _run(
            tmp_path,
            child=("-c", code),
            ANTHROPIC_BASE_URL=up.url,
            GEMINI_API_KEY="AIza-do-not-print-me",
        )
    lines = stderr.splitlines()
    assert rc == 0, stderr
    up_at = next(
        i for i, ln in enumerate(lines) if ln.startswith("looptap: recorder up, recording into ")
    )
    assert up_at < lines.index("AGENT STARTED"), stderr
    openai, anthropic, proxy = next(ln for ln in lines if ln.startswith("AGENT http")).split()[1:]
    said = lines[up_at]
    assert str(out) in said
    assert f"openai {openai} (OPENAI_BASE_URL, OPENAI_API_BASE)" in said, said
    assert f"anthropic {anthropic} (ANTHROPIC_BASE_URL)" in said, said
    assert f"HTTPS_PROXY={proxy}" in said and "SSL_CERT_FILE" in said, said
    # the command gets the recorder; the user's URL is the upstream, said on its own line
    assert anthropic != up.url
    assert any(
        ln.startswith("looptap: anthropic: your ANTHROPIC_BASE_URL") for ln in lines[:up_at]
    ), stderr
    for secret in ("sk-test", "sk-ant-test", "AIza-do-not-print-me"):
        assert secret not in stderr


# -- where each listener forwards, in this process (RecorderConfig.listeners, proxy/config.py) ----
# The same choice the recorder makes at start, on the same environments as the end-to-end tests
# above (those of them that show only this choice run nightly: docs/suite.md, session 55).


def _listeners(environ: dict[str, str], **config: Any) -> dict[str, Listener]:
    made = RecorderConfig(Path("run.jsonl"), environ=environ, **config).listeners()
    return {lst.name: lst for lst in made}


def test_in_process_the_users_base_url_is_the_upstream_and_its_path_the_clients() -> None:
    got = _listeners({"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "GEMINI_API_BASE": ""})
    openai = got["openai"]
    assert (openai.upstream, openai.suffix) == ("http://127.0.0.1:8000", "/v1"), openai
    assert openai.note == (
        "openai: your OPENAI_BASE_URL http://127.0.0.1:8000/v1 is the upstream "
        "(--upstream openai=URL overrides)"
    )
    # an empty variable is not set: the vendor's API, nothing said
    assert (got["gemini"].upstream, got["gemini"].note) == (
        "https://generativelanguage.googleapis.com",
        "",
    )
    assert got["forward"].upstream is None


def test_in_process_upstream_overrides_the_users_base_url() -> None:
    got = _listeners(
        {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "ANTHROPIC_BASE_URL": "http://h:1"},
        upstreams={"openai": "http://127.0.0.1:7000/", "anthropic": "http://127.0.0.1:7001"},
    )
    assert [(got[n].upstream, got[n].note) for n in ("openai", "anthropic")] == [
        ("http://127.0.0.1:7000", ""),
        ("http://127.0.0.1:7001", ""),
    ]


def test_in_process_a_stale_export_and_the_recorder_itself_are_not_followed() -> None:
    stale = "127.0.0.1:9"  # nothing listens there
    got = _listeners(
        {"OPENAI_BASE_URL": f"http://{stale}/v1", "LOOPTAP_RECORDER": f"{stale},127.0.0.1:10"}
    )
    assert (got["openai"].upstream, got["openai"].note) == (
        "https://api.openai.com",
        f"openai: your OPENAI_BASE_URL http://{stale}/v1 is a looptap recorder that is gone (a "
        "stale export): not followed; the upstream is https://api.openai.com",
    )
    port = free_port(set())
    itself = _listeners({"OPENAI_BASE_URL": f"http://localhost:{port}/v1"}, base_port=port)
    assert itself["openai"].port == port
    assert (itself["openai"].upstream, itself["openai"].note) == (
        "https://api.openai.com",
        f"openai: your OPENAI_BASE_URL http://localhost:{port}/v1 is this recorder itself: not "
        "followed; the upstream is https://api.openai.com",
    )


def test_in_process_an_enclosing_recorder_that_listens_is_followed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as outer:
        at = f"127.0.0.1:{outer.getsockname()[1]}"
        got = _listeners(
            {"ANTHROPIC_BASE_URL": f"http://{at}", "LOOPTAP_RECORDER": f"{at},127.0.0.1:10"}
        )
    assert (got["anthropic"].upstream, got["anthropic"].suffix) == (f"http://{at}", "")
    assert got["anthropic"].note == (
        f"anthropic: your ANTHROPIC_BASE_URL http://{at} is the upstream, a looptap recorder that "
        "is running (an enclosing run): recorded there too (--upstream anthropic=URL overrides)"
    )


@pytest.mark.parametrize(
    "value",
    ["http://me:hunter2@127.0.0.1:9/v1", "http://127.0.0.1:9/v1?key=hunter2", "ftp://h/", "h:1"],
)
def test_in_process_a_base_url_that_cannot_be_an_upstream_is_refused(value: str) -> None:
    with pytest.raises(RecorderError) as refused:
        _listeners({"OPENAI_BASE_URL": value})
    said = str(refused.value)
    assert said.startswith("your OPENAI_BASE_URL ") and "hunter2" not in said, said
    assert said.endswith(
        "cannot be openai's upstream (http(s)://host[:port][/path], without user or query): "
        "give --upstream openai=URL, or unset OPENAI_BASE_URL"
    ), said
