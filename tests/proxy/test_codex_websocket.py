"""Codex over a WebSocket: `codex exec` with its Responses WebSocket transport on, through
`looptap run`, against a loopback Responses-over-WebSocket upstream. Every turn is recorded as a
Responses round trip (the prewarm kept and labelled), threaded, its tools counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from looptap.cassettes.reading import open_run
from tests.clients.outcome import codex_wrapper
from tests.proxy.test_e2e_node_agents import CODEX_CONFIG, explain, looptap_run, need, run_env
from tests.support import progress
from tests.support.recorder import needs_recorder
from tests.support.ws_upstream import WsResponsesUpstream

pytestmark = [needs_recorder]

#: The custom-provider setup of test_e2e_node_agents, with Codex's WebSocket transport on.
CODEX_WS_CONFIG = CODEX_CONFIG.format(base_url="@OPENAI_BASE_URL@", headers="").replace(
    "supports_websockets = false", "supports_websockets = true"
)


def test_codex_exec_over_a_websocket(tmp_path: Path, confdir: Path, secret: str) -> None:
    pytest.importorskip("websockets")
    codex = need("@openai/codex", bin_name="codex")
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    wrapper = codex_wrapper(tmp_path, codex, CODEX_WS_CONFIG)
    env = run_env(tmp_path, CODEX_HOME=str(codex_home), LOOPTAP_CODEX_KEY=secret)
    with WsResponsesUpstream() as up:
        proc, out = looptap_run(
            tmp_path,
            confdir,
            [str(wrapper), "exec", "--skip-git-repo-check", "What is the weather in Paris?"],
            env,
            extra=("--upstream", f"openai={up.url}"),
        )
    assert proc.returncode == 0, explain(proc)
    assert up.connections >= 1, explain(proc)
    run = open_run(out)
    rts = list(run.roundtrips)
    assert [rt.operation for rt in rts] == ["prewarm", "generate", "generate"], [
        ex.request_body[:200] for ex in run.exchanges
    ]
    assert all(
        ex.status == 200 and any(n.startswith("websocket ") for n in ex.notes)
        for ex in run.exchanges
        if not ex.tool
    )
    assert [m.get("type") for m in up.received] == ["response.create"] * 3 and up.received[0].get(
        "generate"
    ) is False
    convs = run.analysis.conversations
    assert len(convs) == 1 and convs[0].turns == [1, 2], convs  # threaded by previous_response_id
    first, last = rts[1], rts[2]
    # function tools and a namespace's
    assert first.request is not None and len(first.request.tools) >= 9
    assert first.response is not None and [c.name for c in first.response.tool_calls] == [
        "get_goal"
    ]
    assert last.response is not None and last.response.text == "It is sunny in Paris."
    loud = [(f.code, f.seq) for f in run.analysis.findings if f.severity.value != "info"]
    assert loud == [], loud
    assert secret.encode() not in out.read_bytes()
    assert "It is sunny in Paris." in proc.stdout, explain(proc)

    # The same session replayed offline to Codex from the cassette: no recorder, no upstream.
    import subprocess

    from looptap.cassettes.replay.serving.server import ReplayServer

    with ReplayServer(out) as srv:
        (codex_home / "config.toml").write_text(
            CODEX_WS_CONFIG.replace("@OPENAI_BASE_URL@", srv.url + "/v1")
        )
        again = progress.run(
            [str(codex), "exec", "--skip-git-repo-check", "What is the weather in Paris?"],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path / "work",
            stdin=subprocess.DEVNULL,
        )
        misses = ["\n".join(m.lines()) for m in srv.misses]
        served = list(srv.served)
    assert again.returncode == 0 and "It is sunny in Paris." in again.stdout, (
        again.stdout[-2000:],
        again.stderr[-3000:],
        misses,
    )
    assert misses == [] and [ex.status for ex in served] == [200, 200, 200], misses
    assert all("websocket replay" in ex.notes for ex in served)


def _can_unshare() -> bool:
    import os
    import shutil

    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = progress.run(["unshare", "--net", "--mount", "--fork", "true"], capture_output=True)
    return probe.returncode == 0


def in_namespace(tmp_path: Path, secret: str, *mode: str) -> dict[str, Any]:
    """codex_default_ns.py in a fresh network and mount namespace (``mode``: its extra argument);
    the JSON line it prints. Skips where Codex, websockets, cryptography or unshare are missing."""
    import json
    import sys

    pytest.importorskip("websockets")
    pytest.importorskip("cryptography")
    codex = need("@openai/codex", bin_name="codex")
    if not _can_unshare():
        pytest.skip("needs root and unshare/ip to make a network namespace")
    from tests.support.recorder import PROXY_PYTHON

    helper = Path(__file__).with_name("codex_default_ns.py")
    proc = progress.run(
        [
            "unshare",
            "--net",
            "--mount",
            "--fork",
            sys.executable,
            str(helper),
            str(tmp_path),
            str(codex),
            str(PROXY_PYTHON),
            secret,
            *mode,
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_codex_default_configuration_in_a_network_namespace(tmp_path: Path, secret: str) -> None:
    """Codex as people run it: the built-in openai provider, Responses over a WebSocket to
    wss://api.openai.com through HTTPS_PROXY. In a fresh network namespace api.openai.com resolves
    to a loopback TLS WebSocket server of ours; looptap run records (trusting that server with
    --ssl-insecure, Codex trusting looptap's CA the way looptap run arranges), then the cassette is
    replayed offline to Codex through its openai_base_url key."""
    r = in_namespace(tmp_path, secret)
    assert r["record_rc"] == 0 and "It is sunny in Paris." in r["record_stdout"], r
    assert (
        r["upstream_paths"] == ["/v1/responses"]
        and r["upstream_received"] == ["response.create"] * 3
    ), r
    run = open_run(tmp_path / "run.jsonl")
    assert [rt.operation for rt in run.roundtrips] == ["prewarm", "generate", "generate"]
    assert all(
        ex.url == "https://api.openai.com/v1/responses" for ex in run.exchanges if not ex.tool
    )
    convs = run.analysis.conversations
    assert len(convs) == 1 and convs[0].turns == [1, 2]
    first = list(run.roundtrips)[1]
    # from Codex's additional_tools item
    assert first.request is not None and len(first.request.tools) >= 5
    assert first.response is not None and [c.name for c in first.response.tool_calls] == ["wait"]
    assert [(f.code, f.seq) for f in run.analysis.findings if f.severity.value != "info"] == []
    assert secret.encode() not in (tmp_path / "run.jsonl").read_bytes()
    # offline replay to Codex with its default provider
    assert r["replay_rc"] == 0 and "It is sunny in Paris." in r["replay_stdout"], r
    assert r["replay_misses"] == [] and r["replay_statuses"] == [200, 200, 200], r


def test_codex_chatgpt_login_in_a_network_namespace(tmp_path: Path, secret: str) -> None:
    """Codex signed in with ChatGPT (``auth.json`` tokens, no API key), default configuration,
    recorded and replayed offline.

    On the wire (0.169): everything goes to ``chatgpt.com/backend-api/`` with
    ``Authorization: Bearer <access token>`` and ``chatgpt-account-id``. First the workspace
    routing discovery, ``GET /wham/accounts/check``, whose account entry names the HTTPS origin
    the turns go to (``workspace_backend_origin``); without an answer Codex runs no turn
    ("workspace routing discovery failed"). Then ``wss://chatgpt.com/backend-api/codex/responses``
    (the same ``response.create`` messages as api.openai.com's), and beside it
    ``GET /codex/models?client_version=…``, ``POST /ps/mcp`` (the connectors' MCP server,
    ``initialize``) and ``GET /wham/settings/user``, all of which Codex goes on without. No token
    refresh (``auth.openai.com``) with a fresh ``last_refresh``; the id and refresh tokens are not
    sent. The id token only has to be a JWT whose payload decodes (no claim is required, no
    signature is checked); the account id comes from ``tokens.account_id``.

    Recorded: the three Responses round trips (prewarm and two turns) threaded into one
    conversation; models and the MCP ``initialize`` are recorded (models under the LLM path
    ``/backend-api/codex/``, MCP because it speaks MCP) but are not turns; ``/wham/…`` is off the
    recorded paths and not recorded.

    Replayed: **not through ``chatgpt_base_url``.** Pointed there, Codex asks the replay server
    for the workspace routing discovery first; the cassette does not hold it (off the recorded
    paths), and could not serve it usefully if it did: the recorded answer names
    ``https://chatgpt.com`` as the origin (Codex would go back online), and Codex refuses an origin
    that is not HTTPS ("workspace backend must use an HTTPS origin without credentials"; the replay
    server is plain HTTP on loopback) or is missing ("workspace routing discovery missing backend
    origin"). So the turns go through ``openai_base_url`` (a base that is not a ChatGPT backend
    needs no discovery; the login's token and account header are still sent) and the replay
    server reads ``/v1/responses`` under the recording's base ``/backend-api/codex``
    (``Matcher.bases``). ``chatgpt_base_url`` is pointed at the replay server too, so the backend's
    side calls stay on the machine: the discovery and the settings are misses (fail-closed), which
    Codex goes on without."""
    r = in_namespace(tmp_path, secret, "chatgpt")
    assert r["record_rc"] == 0 and "It is sunny in Paris." in r["record_stdout"], r
    assert (
        r["upstream_paths"] == ["/backend-api/codex/responses"]
        and r["upstream_received"] == ["response.create"] * 3
    ), r
    wire = r["upstream_requests"]
    targets = [w["target"].split("?")[0] for w in wire]
    assert targets.index("/backend-api/wham/accounts/check") < targets.index(
        "/backend-api/codex/responses"
    ), targets
    # no token refresh at auth.openai.com
    assert all(t.startswith("/backend-api/") for t in targets), targets
    assert all(w["bearer_is_secret"] and w["account"] == "acc" for w in wire), wire
    assert [w["target"] for w in wire if w["websocket"]] == ["/backend-api/codex/responses"]

    cassette = tmp_path / "run.jsonl"
    run = open_run(cassette)
    turns = [
        rt for rt in run.roundtrips if rt.url == "https://chatgpt.com/backend-api/codex/responses"
    ]
    assert [rt.operation for rt in turns] == ["prewarm", "generate", "generate"], [
        (ex.method, ex.url) for ex in run.exchanges
    ]
    by_seq = {ex.seq: ex for ex in run.exchanges}
    assert all(
        rt.status == 200 and any(n.startswith("websocket ") for n in by_seq[rt.seq].notes)
        for rt in turns
    )
    convs = run.analysis.conversations
    assert len(convs) == 1 and convs[0].turns == [turns[1].seq, turns[2].seq], convs
    first, last = turns[1], turns[2]
    # from Codex's additional_tools item
    assert first.request is not None and len(first.request.tools) >= 5
    assert first.response is not None and len(first.response.tool_calls) == 1
    assert last.response is not None and last.response.text == "It is sunny in Paris."
    # the side calls: models and the MCP initialize recorded, not turns; /wham/ not recorded
    side = sorted(
        {(ex.method, ex.url.split("?")[0]) for ex in run.exchanges}
        - {("POST", "https://chatgpt.com/backend-api/codex/responses")}
    )
    assert side == [
        ("GET", "https://chatgpt.com/backend-api/codex/models"),
        ("POST", "https://chatgpt.com/backend-api/ps/mcp"),
    ], side
    assert sum(len(c.turns) for c in convs) == 2
    assert [(f.code, f.seq) for f in run.analysis.findings if f.severity.value != "info"] == []
    data = cassette.read_bytes()
    for token in (secret, r["id_token"], r["refresh_token"]):
        assert token.encode() not in data
    assert b"Bearer [REDACTED]" in data

    # offline replay: the turns through openai_base_url, the backend's side calls to the replay
    # server too
    assert r["replay_rc"] == 0 and "It is sunny in Paris." in r["replay_stdout"], r
    assert r["replay_bases"] == {"/v1": "/backend-api/codex"}, r
    played = [s for s in r["replay_served"] if s[1] == "/v1/responses"]
    assert [s[2] for s in played] == [200, 200, 200] and all(
        "websocket replay" in s[3] for s in played
    ), r["replay_served"]
    assert "/backend-api/wham/accounts/check" in r["replay_miss_targets"], r
    # only side calls miss: /wham/ (never recorded), and a models refresh beyond the recorded count
    assert all(
        t.startswith(("/backend-api/wham/", "/v1/models?")) for t in r["replay_miss_targets"]
    ), r["replay_misses"]


# Codex's spawn_agent / wait_agent on its default settings: the client matrix's Codex row
# (tests/clients/test_agents.py, through in_namespace's "spawn" mode).
