"""``looptap run --fault``: the recorder answers chosen requests with an API failure in the API's
own format (a chaos run against the real API, here a loopback upstream), records the fault as
injected, and judges how the agent coped."""

from __future__ import annotations

import json

import pytest

from looptap.cassettes.reading import open_run
from tests.proxy.test_e2e_frameworks import explain, looptap_run, python_client
from tests.support.harness import outputs
from tests.support.recorder import needs_recorder
from tests.support.upstream import FakeUpstream

pytestmark = [needs_recorder]

CLIENT = """
import openai
client = openai.OpenAI(max_retries=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
for i in range(3):
    try:
        r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": f"Question {i}"}])
        out(i=i, ok=r.choices[0].message.content is not None)
    except openai.APIStatusError as exc:
        out(i=i, error=type(exc).__name__, status=exc.status_code)
"""  # noqa: E501


@pytest.fixture
def text_upstream() -> object:
    with FakeUpstream(delay=0.0, default_scenario="text") as up:
        yield up


def test_live_faults_are_answered_by_the_proxy_and_recorded_as_injected(
    tmp_path, confdir, text_upstream, secret
) -> None:  # type: ignore[no-untyped-def]
    up = text_upstream
    cmd = python_client(tmp_path, CLIENT)
    extra = (
        "--upstream",
        f"openai={up.url}",
        "--fault",
        "request=1:rate_limit=0",
        "--fault",
        "request=4:overloaded=0*2",
    )
    proc, out = looptap_run(tmp_path, confdir, secret, cmd, extra=extra)
    assert proc.returncode == 0, explain(proc)
    # the SDK retried each fault (its default retries) and every question was answered
    assert outputs(proc) == [{"i": 0, "ok": True}, {"i": 1, "ok": True}, {"i": 2, "ok": True}], (
        explain(proc)
    )
    run = open_run(out)
    statuses = [ex.status for ex in run.exchanges]
    assert statuses == [429, 200, 200, 503, 503, 200], statuses
    assert len(up.llm_served()) == 3, "the faults never reached the upstream"
    injected = [ex.response_header("x-looptap-fault") for ex in run.exchanges]
    assert injected == ["rate_limit=0", None, None, "overloaded=0", "overloaded=0", None]
    faulted = {ex.seq for ex, fault in zip(run.exchanges, injected, strict=True) if fault}
    a = [f for f in run.analysis.findings if f.layer == "A" and f.seq in faulted]
    assert sorted(f.code for f in a) == ["A.overloaded", "A.overloaded", "A.rate_limited"] and all(
        f.details.get("injected") for f in a
    )
    assert all(f.message.startswith("[injected by looptap:") for f in a)
    assert not [
        f for f in run.analysis.findings if f.details.get("injected") and f.seq not in faulted
    ]
    retries = [f for f in run.analysis.findings if f.code == "C.retry"]
    assert len(retries) == 3 and not [
        f for f in run.analysis.findings if f.code == "C.retry_before_retry_after"
    ]
    assert secret.encode() not in out.read_bytes()


@pytest.mark.slow(
    reason=(
        "the specs a live proxy cannot apply refused in process: test_addon_inprocess.py "
        "(the recorder's environment); a live fault answered and recorded: the test above "
        "by default"
    )
)
def test_live_faults_without_retries_and_bad_specs(
    tmp_path, confdir, text_upstream, secret
) -> None:  # type: ignore[no-untyped-def]
    up = text_upstream
    cmd = [*python_client(tmp_path, CLIENT), "0"]
    proc, out = looptap_run(
        tmp_path,
        confdir,
        secret,
        cmd,
        extra=("--upstream", f"openai={up.url}", "--fault", "request=2:context_length"),
    )
    assert proc.returncode == 0, explain(proc)
    assert outputs(proc)[1] == {"i": 1, "error": "BadRequestError", "status": 400}
    body = json.loads(open_run(out).exchanges[1].response_body)
    assert body["error"]["code"] == "context_length_exceeded"
    for spec, says in (
        ("turn=1:reset", "live, a request is selected by request=N"),
        ("request=1:stream_cut=2", "stream_cut works in looptap replay only"),
    ):
        bad, _ = looptap_run(tmp_path, confdir, secret, cmd, extra=("--fault", spec))
        assert bad.returncode != 0 and says in bad.stderr, explain(bad)


@pytest.mark.slow(
    reason=(
        "live faults answered and recorded: the other two tests here by default; seeded "
        "draws: tests/replay/test_faults.py"
    )
)
def test_live_chaos_run_with_a_probability_and_a_seed(
    tmp_path, confdir, text_upstream, secret
) -> None:  # type: ignore[no-untyped-def]
    """The issue's own command: `looptap run --fault 'p=0.2:rate_limit' --fault-seed 1 -- python
    agent.py`."""
    up = text_upstream
    agent = CLIENT.replace("range(3)", "range(10)")
    cmd = python_client(tmp_path, agent)
    proc, out = looptap_run(
        tmp_path,
        confdir,
        secret,
        cmd,
        extra=(
            "--upstream",
            f"openai={up.url}",
            "--fault",
            "p=0.2:rate_limit",
            "--fault-seed",
            "1",
        ),
    )
    assert proc.returncode == 0, explain(proc)
    # the SDK's retries absorbed every 429
    assert outputs(proc) == [{"i": i, "ok": True} for i in range(10)], explain(proc)
    run = open_run(out)
    injected = [ex for ex in run.exchanges if ex.response_header("x-looptap-fault")]
    assert injected and all(ex.status == 429 for ex in injected)
    assert len(run.exchanges) == 10 + len(injected) and len(up.llm_served()) == 10
    a = [f for f in run.analysis.findings if f.code == "A.rate_limited"]
    assert len(a) == len(injected) and all(
        f.message.startswith("[injected by looptap: rate_limit=1]") for f in a
    )
    assert len([f for f in run.analysis.findings if f.code == "C.retry"]) == len(injected)
    # the openai SDK honours retry-after (1 s): no finding blames its handling
    assert not [
        f
        for f in run.analysis.findings
        if f.code in ("C.retry_before_retry_after", "C.retry_storm", "C.gave_up_on_retryable_error")
    ]
    print(
        f"\np=0.2, seed 1: {len(injected)} of {len(run.exchanges)} "
        "requests answered 429 by the proxy"
    )
