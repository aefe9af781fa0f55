"""A client that expects the API's version segment inside its base URL, recorded through
``looptap run`` (issue 45, "Clients"): the AI SDK's Anthropic provider (and opencode, built on it)
reads ``ANTHROPIC_BASE_URL`` itself and posts ``${base}/messages``, its default base being
``https://api.anthropic.com/v1``. looptap exports the base as Anthropic's own SDKs read it (no
``/v1``), so every call reached the API as ``/messages``: a 404, the agent dead, and the API layer
blamed. The reverse listener now puts ``/v1`` back for the upstream; the cassette keeps the path the
client sent (so the same client replays from it), with a note.

Real pieces: the AI SDK 6 (``ai`` + ``@ai-sdk/anthropic`` of .npm-clients) as the agent, the real
recorder (mitmproxy) on real sockets, and a scripted upstream that, like the Anthropic API, answers
only under ``/v1``; then the replay server serving the cassette back to the same client.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.storage import read_records
from tests.clients.clients import NODE_PRELUDE, VERCEL_AI
from tests.clients.route import route
from tests.proxy.test_e2e_node_agents import looptap_run, run_env
from tests.support import progress
from tests.support.recorder import needs_recorder
from tests.support.scripted import ScriptedUpstream

pytestmark = [needs_recorder]

REPO = Path(__file__).resolve().parents[2]
NPM_CLIENTS = Path(os.environ.get("LOOPTAP_NPM_CLIENTS") or REPO / ".npm-clients")
NODE = shutil.which("node")


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


def _client(tmp_path: Path) -> Path:
    if NODE is None:
        pytest.skip("node is not on PATH")
    if not (NPM_CLIENTS / "node_modules" / "@ai-sdk" / "anthropic" / "package.json").exists():
        pytest.skip(
            f"@ai-sdk/anthropic is not installed in {NPM_CLIENTS} (bash .ci/run installs it)"
        )
    script = tmp_path / "client.cjs"
    script.write_text(NODE_PRELUDE + VERCEL_AI)
    return script


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_ai_sdk_anthropic_provider_records_and_replays(
    tmp_path: Path, confdir: Path, stream: bool
) -> None:
    script = _client(tmp_path)
    env = run_env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-ant-looptap-test",
        NPM_CLIENTS=str(NPM_CLIENTS),
        MATRIX_STREAM=str(int(stream)),
        MATRIX_KIND="anthropic",
    )
    with ScriptedUpstream(route, validate=True) as up:
        proc, out = looptap_run(tmp_path, confdir, [str(NODE), str(script)], env, upstream=up)  # type: ignore[arg-type]
        paths = [e.request.path.split("?")[0] for e in up.log]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"final":"FORECAST' in proc.stdout, proc.stdout
    # Every call reached the upstream under /v1 (three turns: two parallel calls, one more, the
    # answer).
    assert paths == ["/v1/messages"] * 3, paths

    cas = read_records(out)
    assert [ex.url.rsplit("/", 1)[-1].split("?")[0] for ex in cas.exchanges] == ["messages"] * 3
    assert all("/v1/" not in ex.url for ex in cas.exchanges)  # the path the client sent
    assert all(
        any("forwarded upstream as /v1/messages" in n for n in ex.notes) for ex in cas.exchanges
    ), [ex.notes for ex in cas.exchanges]
    an = analyse(cas.exchanges)
    assert [len(c.turns) for c in an.conversations] == [3]
    assert not [f for f in an.findings if f.severity.value in ("warning", "error")], [
        (f.code, f.message) for f in an.findings
    ]

    # The same client, offline, from the cassette: every request answered, none missed.
    from looptap.cassettes.replay.serving.server import ReplayServer

    with ReplayServer(out) as srv:
        again = progress.run(
            [str(NODE), str(script)],
            env={**env, "ANTHROPIC_BASE_URL": srv.url},
            capture_output=True,
            text=True,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )
        misses = ["\n".join(m.lines()) for m in srv.misses]
        served = len(srv.served)
    assert again.returncode == 0 and '"final":"FORECAST' in again.stdout, (
        again.stderr[-2000:],
        misses,
    )
    assert misses == [] and served == 3, (misses, served)


def test_anthropic_sdk_paths_and_other_apis_are_left_alone() -> None:
    """Only a path the API's own clients never send is touched, and only with that API's header."""
    from looptap.cassettes.providers import versioned_path

    assert versioned_path("/messages", ["Anthropic-Version"]) == "/v1/messages"
    assert versioned_path("/messages?beta=true", ["anthropic-version"]) == "/v1/messages?beta=true"
    assert (
        versioned_path("/messages/count_tokens", ["anthropic-version"])
        == "/v1/messages/count_tokens"
    )
    assert versioned_path("/v1/messages", ["anthropic-version"]) is None  # Anthropic's SDKs
    # the user's own base path
    assert versioned_path("/anthropic/messages", ["anthropic-version"]) is None
    assert versioned_path("/messages", ["content-type"]) is None  # not an Anthropic client
    assert versioned_path("/messagesx", ["anthropic-version"]) is None
    assert versioned_path("/v1/threads/t/messages", ["anthropic-version"]) is None
