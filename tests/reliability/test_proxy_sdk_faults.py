"""The official openai SDK, in a child process, sees the same faults with and without the recorder.

The same script runs against the same fake upstream with ``OPENAI_BASE_URL`` at the upstream
(direct) and at the recorder's reverse listener (and, with ``LOOPTAP_SLOW=1``, with the upstream's
URL behind ``HTTP_PROXY``, the forward proxy). For each scenario it prints what the SDK made of the
answer — the text, or the exception's type, status and message. The three transcripts must be equal.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from looptap.cassettes.storage import read_records
from tests.support import progress
from tests.support.recorder import RecorderProcess, clean_env
from tests.support.reliability import needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = [needs_recorder]

SLOW = os.environ.get("LOOPTAP_SLOW") == "1"

SCRIPT = r'''
import json, sys
import openai
c = openai.OpenAI(max_retries=0, timeout=30)
ask = [{"role": "user", "content": "What is the capital of France? [sdk-faults]"}]
SCENARIOS = [
    ("text", False), ("text", True), ("rate_limit; retry_after=4", False), ("server_error", False),
    ("error_in_stream; after=2", True), ("reset_mid_stream; after=3", True), ("reset_mid_stream; mode=fin", False),
    ("malformed; kind=json", False), ("malformed; kind=sse", True), ("lying_encoding; claim=gzip", False),
    ("lying_encoding; claim=none; actual=gzip", True), ("drip; delay=0.05", True),
]
for scenario, stream in SCENARIOS:
    try:
        r = c.chat.completions.create(model="gpt-4o", messages=ask, stream=stream, extra_headers={"X-Fake-Upstream": scenario})
        if stream:
            got = {"text": "".join(ch.choices[0].delta.content or "" for ch in r if ch.choices)}
        else:
            got = {"text": r.choices[0].message.content}
    except Exception as e:
        got = {"error": type(e).__name__, "status": getattr(e, "status_code", None), "message": str(getattr(e, "message", e))[:200]}
    print(json.dumps({"scenario": scenario, "stream": stream, **got}), flush=True)
'''  # noqa: E501


def _run(script: Path, **env: str) -> list[dict[str, object]]:
    proc = progress.run(
        [sys.executable, str(script)],
        env=clean_env(OPENAI_API_KEY="sk-sdk-faults-0123456789abcdef", **env),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


@pytest.mark.slow(
    reason=(
        "faults passed on as the upstream sent them: test_proxy_faults.py by default (raw "
        "clients, both listeners); the openai SDK through the recorder: test_e2e_sdks.py"
    )
)
def test_openai_sdk_sees_the_same_faults_through_the_recorder(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    pytest.importorskip("openai")
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(SCRIPT))
    direct = _run(script, OPENAI_BASE_URL=upstream.url + "/v1")
    assert len(direct) == 12
    assert direct[2]["error"] == "RateLimitError" and direct[2]["status"] == 429
    assert direct[0]["text"] and direct[1]["text"]
    with RecorderProcess(
        tmp_path / "run.jsonl", tmp_path / "conf", upstream.url, "--record-host", "127.0.0.1"
    ) as rec:
        reverse = _run(script, OPENAI_BASE_URL=rec.env["OPENAI_BASE_URL"])
        forward = []
        if SLOW:  # the raw-socket fault tests cover the forward proxy in the default run
            forward = _run(
                script,
                OPENAI_BASE_URL=upstream.url + "/v1",
                HTTP_PROXY=rec.env["HTTP_PROXY"],
                http_proxy=rec.env["HTTP_PROXY"],
            )
        assert rec.stop() == 0
    assert reverse == direct
    assert forward in ([], direct)
    cas = read_records(tmp_path / "run.jsonl")
    assert not cas.problems
    llm = [ex for ex in cas.exchanges if "/chat/completions" in ex.url]
    assert len(llm) == 12 * (2 if SLOW else 1), "every round trip of the proxied runs recorded"
