"""Issue 45: a Bedrock guardrail that only *masked* personal data is not a cut.

Bedrock reports a guardrail that anonymised an e-mail address as an intervention
(``stopReason: "guardrail_intervened"`` in Converse, ``amazon-bedrock-guardrailAction:
"INTERVENED"`` beside an InvokeModel body or chunk), and its trace names what each policy did:
``ANONYMIZED`` for a masked entity, ``BLOCKED`` for a policy that replaced the output with the
guardrail's message. The recordings below are built here in the shapes of the Bedrock Runtime API
reference (Converse: ``trace.guardrail.{inputAssessment, outputAssessments}``,
``GuardrailPiiEntityFilter`` ``{match, type, action}``; InvokeModel: ``amazon-bedrock-trace:
{"guardrail": {"input", "outputs"}}``). A masking guardrail was read as ``A.filtered`` "the output
is partial"; a blocking one still is.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from test_bedrock import _frame

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

HOST = "https://bedrock-runtime.eu-west-1.amazonaws.com/model/{}/{}"
CLAUDE = "eu.anthropic.claude-3-7-sonnet-20250219-v1:0"
NOVA = "eu.amazon.nova-pro-v1:0"
QUESTION = "Write a short note to my colleague jane.doe@example.com about Friday's meeting."
MASKED = "Hi {EMAIL},\n\nA reminder that our meeting is on Friday at 10:00.\n\nBest regards"
GUARD = {"guardrailIdentifier": "gr7k2m9x4q1v", "guardrailVersion": "1", "trace": "enabled"}


def _pii(action: str) -> dict[str, Any]:
    return {
        "sensitiveInformationPolicy": {
            "piiEntities": [
                {
                    "match": "jane.doe@example.com",
                    "type": "EMAIL",
                    "action": action,
                    "detected": True,
                }
            ]
        }
    }


def _converse_trace(pii_action: str, topic_blocked: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = _pii(pii_action)
    if topic_blocked:
        out["topicPolicy"] = {
            "topics": [{"name": "Salaries", "type": "DENY", "action": "BLOCKED", "detected": True}]
        }
    return {
        "guardrail": {
            "modelOutput": [
                '{"output":{"message":{"role":"assistant","content":[{"text":"Hi '
                'jane.doe@example.com, ..."}]}}}'
            ],
            "inputAssessment": {
                "gr7k2m9x4q1v": {"invocationMetrics": {"guardrailProcessingLatency": 212}}
            },
            "outputAssessments": {
                "gr7k2m9x4q1v": [{**out, "invocationMetrics": {"guardrailProcessingLatency": 188}}]
            },
        }
    }


def _exchange(
    url: str, req: dict[str, Any], chunks: list[bytes], ctype: str = "application/json"
) -> Exchange:
    return Exchange(
        method="POST",
        url=url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(req),
        status=200,
        response_headers=[
            ("content-type", ctype),
            ("x-amzn-requestid", "5b1f0c9e-2d7a-4c1e-9a55-0f3d8e2b7c10"),
        ],
        response_chunks=[(0.05 * (i + 1), c) for i, c in enumerate(chunks)],
        ttfb=0.04,
        duration=1.2,
    )


def _converse(
    text: str, trace: dict[str, Any] | None, stop: str = "guardrail_intervened"
) -> Exchange:
    req = {
        "messages": [{"role": "user", "content": [{"text": QUESTION}]}],
        "inferenceConfig": {"maxTokens": 512},
        "guardrailConfig": GUARD,
    }
    resp: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {"inputTokens": 31, "outputTokens": 29, "totalTokens": 60},
        "metrics": {"latencyMs": 1187},
    }
    if trace is not None:
        resp["trace"] = trace
    return _exchange(HOST.format(CLAUDE, "converse"), req, [orjson.dumps(resp)])


def _nova_invoke(text: str, action: str, trace: dict[str, Any]) -> Exchange:
    req = {
        "schemaVersion": "messages-v1",
        "messages": [{"role": "user", "content": [{"text": QUESTION}]}],
        "inferenceConfig": {"maxTokens": 512},
    }
    resp = {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 31, "outputTokens": 29, "totalTokens": 60},
        "amazon-bedrock-guardrailAction": action,
        "amazon-bedrock-trace": trace,
    }
    # InvokeModel names the guardrail in request headers (X-Amzn-Bedrock-GuardrailIdentifier), not
    # the body.
    return _exchange(HOST.format(NOVA, "invoke"), req, [orjson.dumps(resp)])


def _invoke_trace(pii_action: str) -> dict[str, Any]:
    return {
        "guardrail": {
            "input": {"gr7k2m9x4q1v": {}},
            "outputs": [{"gr7k2m9x4q1v": _pii(pii_action)}],
        }
    }


def _chunk(d: Any) -> bytes:
    return _frame("chunk", {"bytes": base64.b64encode(orjson.dumps(d)).decode()})


def _nova_stream(pii_action: str) -> Exchange:
    g = {"amazon-bedrock-guardrailAction": "INTERVENED"}
    frames = [
        _chunk({"messageStart": {"role": "assistant"}}),
        _chunk({"contentBlockDelta": {"delta": {"text": MASKED[:20]}, "contentBlockIndex": 0}}),
        _chunk({"contentBlockDelta": {"delta": {"text": MASKED[20:]}, "contentBlockIndex": 0}}),
        _chunk({"contentBlockStop": {"contentBlockIndex": 0}}),
        _chunk(
            {
                "messageStop": {"stopReason": "end_turn"},
                **g,
                "amazon-bedrock-trace": _invoke_trace(pii_action),
            }
        ),
        _chunk(
            {
                "metadata": {"usage": {"inputTokens": 31, "outputTokens": 29}},
                "amazon-bedrock-invocationMetrics": {"inputTokenCount": 31, "outputTokenCount": 29},
            }
        ),
    ]
    req = {
        "schemaVersion": "messages-v1",
        "messages": [{"role": "user", "content": [{"text": QUESTION}]}],
    }
    return _exchange(
        HOST.format(NOVA, "invoke-with-response-stream"),
        req,
        frames,
        "application/vnd.amazon.eventstream",
    )


def _codes(ex: Exchange) -> list[str]:
    return [f.code for f in analyse([ex]).findings]


def test_converse_guardrail_that_only_masked_is_a_whole_answer() -> None:
    """Was: ``finish=filtered`` and ``A.filtered`` ("The output is partial")."""
    ex = _converse(MASKED, _converse_trace("ANONYMIZED"))
    r = parse_exchange(ex).response
    assert r is not None and r.finish_reason is FinishReason.COMPLETE
    assert r.finish_reason_raw == "guardrail_intervened" and r.text == MASKED
    assert "A.filtered" not in _codes(ex)


def test_converse_guardrail_that_blocked_is_still_filtered() -> None:
    """Twins that stay flagged: a policy that BLOCKED (beside a masked entity, or a PII filter set
    to block), and an intervention whose trace was not enabled (nothing says it only masked)."""
    blocked = "Sorry, I can't help with that request."
    for ex in (
        _converse(blocked, _converse_trace("ANONYMIZED", topic_blocked=True)),
        _converse(blocked, _converse_trace("BLOCKED")),
        _converse(blocked, None),
    ):
        assert "A.filtered" in _codes(ex)


def test_converse_without_a_guardrail_is_unchanged() -> None:
    assert _codes(_converse(MASKED, None, stop="end_turn")) == []


def test_invoke_model_guardrail_that_only_masked_keeps_end_turn() -> None:
    """InvokeModel (Nova ``messages-v1``), whole body and stream: ``INTERVENED`` with a trace that
    only anonymised keeps the model's ``end_turn``. Was: ``A.filtered``."""
    for ex in (
        _nova_invoke(MASKED, "INTERVENED", _invoke_trace("ANONYMIZED")),
        _nova_stream("ANONYMIZED"),
    ):
        r = parse_exchange(ex).response
        assert (
            r is not None
            and r.finish_reason is FinishReason.COMPLETE
            and r.text == MASKED
            and r.complete
        )
        assert (
            r.provider_details is not None and r.provider_details["guardrailAction"] == "INTERVENED"
        )
        assert "A.filtered" not in _codes(ex)
    # The blocking twins stay filtered.
    assert "A.filtered" in _codes(_nova_invoke("Sorry.", "INTERVENED", _invoke_trace("BLOCKED")))
    assert "A.filtered" in _codes(_nova_stream("BLOCKED"))


# --- issue 54: a guardrail that only masked says so, at info level ------------------------------


def _masked(ex: Exchange) -> list[str]:
    return [f.message for f in analyse([ex]).findings if f.code == "A.guardrail_masked"]


def _real_converse(trace: dict[str, Any] | None) -> Exchange:
    """The corpus' real Converse guardrail round trip (pydantic-ai's
    test_bedrock_model_guardrail_config: Nova Micro, a DRAFT guardrail with its trace enabled, which
    took no action), its output assessment given the sensitive-information policy a masking
    guardrail adds, and its answer the masked one."""
    from real_corpus import CORPUS, load

    path = CORPUS / "pydantic-ai/tests/models/cassettes/test_bedrock"
    ex = load(path / "test_bedrock_model_guardrail_config.yaml")[0]
    body = orjson.loads(b"".join(c for _, c in ex.response_chunks))
    if trace is not None:
        body["output"]["message"]["content"] = [{"text": MASKED}]
        body["stopReason"] = "guardrail_intervened"
        guard = body["trace"]["guardrail"]
        for gid, outs in guard["outputAssessments"].items():
            outs[0].update(trace)
            guard["actionReason"] = "Guardrail masked."
            assert gid in guard["inputAssessment"]
    ex.response_chunks = [(0.0, orjson.dumps(body))]
    return ex


def test_a_guardrail_that_only_masked_says_what_and_where() -> None:
    """Was: silent (nothing said the answer's {EMAIL} is the guardrail's). Info, never a block: the
    kinds and where (prompt or answer), never the masked value itself."""
    for ex in (
        _converse(MASKED, _converse_trace("ANONYMIZED")),
        _nova_invoke(MASKED, "INTERVENED", _invoke_trace("ANONYMIZED")),
        _nova_stream("ANONYMIZED"),
        _real_converse(_pii("ANONYMIZED")),
    ):
        run = analyse([ex])
        assert [(f.code, f.severity.value) for f in run.findings] == [
            ("A.guardrail_masked", "info")
        ]
        (msg,) = _masked(ex)
        assert "in the answer: EMAIL" in msg and "prompt" not in msg
        assert "jane.doe@example.com" not in msg + orjson.dumps(run.findings[0].details).decode()


def test_masked_in_the_prompt_and_twice_in_the_answer() -> None:
    trace = _converse_trace("ANONYMIZED")
    out = trace["guardrail"]["outputAssessments"]["gr7k2m9x4q1v"][0]
    out["sensitiveInformationPolicy"]["piiEntities"].append(
        {"match": "John", "type": "NAME", "action": "ANONYMIZED", "detected": True}
    )
    out["sensitiveInformationPolicy"]["piiEntities"].append(
        {"match": "ann@example.com", "type": "EMAIL", "action": "ANONYMIZED", "detected": True}
    )
    trace["guardrail"]["inputAssessment"]["gr7k2m9x4q1v"]["sensitiveInformationPolicy"] = {
        "regexes": [{"name": "ticket", "match": "T-1234", "action": "ANONYMIZED"}]
    }
    (msg,) = _masked(_converse(MASKED, trace))
    assert "in the prompt: ticket; in the answer: EMAIL ×2, NAME" in msg


def test_twins_no_mask_note_for_a_block_nor_for_no_action() -> None:
    """A guardrail that blocked stays A.filtered alone; one that took no action (the real
    recording as it is) and a call without a guardrail say nothing."""
    blocked = "Sorry, I can't help with that request."
    assert _codes(_converse(blocked, _converse_trace("ANONYMIZED", topic_blocked=True))) == [
        "A.filtered"
    ]
    assert _codes(_nova_stream("BLOCKED")) == ["A.filtered"]
    assert _codes(_real_converse(None)) == []
    assert _codes(_converse(MASKED, None, stop="end_turn")) == []
