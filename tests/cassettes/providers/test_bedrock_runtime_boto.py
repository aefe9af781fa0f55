"""Bedrock runtime answers read as boto3 reads them (issue 69 item 4): the text inside Converse's
``citationsContent`` (whole, and streamed where a block's first delta is a ``citation``),
InvokeModel's usage headers (``X-Amzn-Bedrock-Input-Token-Count`` / ``-Output-Token-Count``) kept
by redaction and read as usage, and a 4xx sent with an empty body still an A finding.

boto3 (1.44.8, in ``.venv-clients``, run as a subprocess) calls a loopback fake that answers in the
shapes of botocore's ``bedrock-runtime`` service model; what boto3 itself read is compared with
looptap's reading of the exchange the fake saw and sent, redacted as the recorder redacts it. The
usage headers are also checked on the real recordings of the corpus that carry them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from real_corpus import CORPUS

from looptap.cassettes.analysis import analyse
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.providers.bedrock import BedrockConverse
from looptap.cassettes.reading import open_run
from looptap.cassettes.recording import Redactor
from looptap.cassettes.wire import Exchange
from tests.cassettes.providers.test_bedrock import _frame
from tests.cassettes.providers.test_bedrock_agents import STREAM, _Fake, run_boto, serve_fake

RUNTIME = "https://bedrock-runtime.us-east-1.amazonaws.com"
NOVA = "amazon.nova-pro-v1:0"
MISTRAL = "mistral.mistral-7b-instruct-v0:2"
JSON = [("content-type", "application/json")]

#: Run in the clients' interpreter: each call of argv[2] against the fake at argv[1]; what boto3
#: read, one JSON line each (the text per content block, the usage headers, the error).
_CLIENT = r"""
import json, sys, boto3
from botocore.config import Config
c = boto3.client("bedrock-runtime", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="AKIDTEST",
                 aws_secret_access_key="secret", config=Config(retries={"max_attempts": 1}))
def text(block):
    if "citationsContent" in block:
        return "".join(c["text"] for c in block["citationsContent"]["content"])
    return block.get("text")
for op, kwargs in json.loads(sys.argv[2]):
    got = {"op": op}
    try:
        r = getattr(c, op)(**kwargs)
        if op == "converse":
            got.update(texts=[text(b) for b in r["output"]["message"]["content"]],
                       cited=sum("citationsContent" in b for b in r["output"]["message"]["content"]))
        elif op == "converse_stream":
            texts, cites = {}, 0
            for ev in r["stream"]:
                d = ev.get("contentBlockDelta")
                if d:
                    i = str(d["contentBlockIndex"])
                    texts[i] = texts.get(i, "") + d["delta"].get("text", "")
                    cites += "citation" in d["delta"]
            got.update(texts=list(texts.values()), cited=cites)
        else:
            h = r["ResponseMetadata"]["HTTPHeaders"]
            got.update(body=json.loads(r["body"].read()),
                       usage=[h.get("x-amzn-bedrock-input-token-count"), h.get("x-amzn-bedrock-output-token-count")])
    except Exception as e:
        got.update(error=type(e).__name__)
    print(json.dumps(got, default=str), flush=True)
"""  # noqa: E501

CITATION = {
    "title": "Q3 report",
    "sourceContent": [{"text": "Revenue grew 12% year over year."}],
    "location": {"documentChar": {"documentIndex": 0, "start": 0, "end": 33}},
}
MESSAGES = [{"role": "user", "content": [{"text": "How did revenue do?"}]}]


@pytest.fixture
def fake() -> Iterator[tuple[str, type[_Fake]]]:
    yield from serve_fake(RUNTIME)


def _boto(url: str, *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return run_boto(_CLIENT, url, *calls)


def _recorded(handler: type[_Fake]) -> list[tuple[Exchange, RoundTrip]]:
    """The fake's exchanges as the recorder stores them (redacted), each parsed."""
    red = Redactor()
    out = []
    for ex in handler.seen:
        stored = red.exchange(ex)
        rt = parse_exchange(stored)
        assert rt.analysis_errors == [], rt.analysis_errors
        out.append((stored, rt))
    return out


def _texts(rt: RoundTrip) -> list[str]:
    assert rt.response is not None
    return [p.text or "" for p in rt.response.parts if p.kind == "text"]


def test_converse_citations_are_read_whole_as_boto3_reads_them(
    fake: tuple[str, type[_Fake]],
) -> None:
    url, handler = fake
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"text": "Per the report, "},
                    {
                        "citationsContent": {
                            "content": [{"text": "revenue grew 12%"}],
                            "citations": [CITATION],
                        }
                    },
                    {"text": " over the year."},
                ],
            }
        },
        "stopReason": "end_turn",
        "usage": {"inputTokens": 50, "outputTokens": 12, "totalTokens": 62},
        "metrics": {"latencyMs": 310},
    }
    stream = b"".join(
        [
            _frame("messageStart", {"role": "assistant"}),
            # the block opens with its citation, its text follows
            _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": CITATION}}),
            _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Revenue "}}),
            _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "grew 12%."}}),
            _frame("contentBlockStop", {"contentBlockIndex": 0}),
            _frame(
                "contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": " Costs fell."}}
            ),
            _frame("contentBlockStop", {"contentBlockIndex": 1}),
            _frame("messageStop", {"stopReason": "end_turn"}),
            _frame(
                "metadata",
                {
                    "usage": {"inputTokens": 50, "outputTokens": 9, "totalTokens": 59},
                    "metrics": {"latencyMs": 280},
                },
            ),
        ]
    )
    handler.script = [(200, JSON, orjson.dumps(answer)), (200, [("content-type", STREAM)], stream)]
    got = _boto(
        url,
        ("converse", {"modelId": NOVA, "messages": MESSAGES}),
        ("converse_stream", {"modelId": NOVA, "messages": MESSAGES}),
    )
    assert [g.get("error") for g in got] == [None, None], got
    (ex1, one), (ex2, two) = _recorded(handler)
    assert got[0]["texts"] == ["Per the report, ", "revenue grew 12%", " over the year."]
    assert _texts(one) == got[0]["texts"] and got[0]["cited"] == 1
    assert (
        one.response is not None
        and one.response.text == "Per the report, revenue grew 12% over the year."
    )
    (cited,) = [p for p in one.response.parts if p.provider_details]
    assert cited.provider_details == {"citations": [CITATION]}
    assert got[1]["texts"] == ["Revenue grew 12%.", " Costs fell."] and got[1]["cited"] == 1
    assert two.stream and _texts(two) == got[1]["texts"]
    assert two.response is not None and two.response.parts[0].provider_details == {
        "citations": [CITATION]
    }
    assert not [f.code for f in analyse([ex1, ex2], [one, two]).findings if f.code.startswith("E.")]
    # the answer sent back in the next request reads as the text it was
    nxt = {"messages": [*MESSAGES, answer["output"]["message"]]}
    req = _converse_request(nxt)
    assert req.messages[-1].text == one.response.text


def _converse_request(body: dict[str, Any]) -> Any:
    return BedrockConverse().parse_request(body, urlsplit(f"{RUNTIME}/model/{NOVA}/converse"))


def test_invoke_model_usage_headers_are_kept_and_read(fake: tuple[str, type[_Fake]]) -> None:
    url, handler = fake
    body = {"outputs": [{"text": "Paris.", "stop_reason": "stop"}]}  # Mistral: no usage in it
    headers = [
        *JSON,
        ("X-Amzn-Bedrock-Input-Token-Count", "17"),
        ("X-Amzn-Bedrock-Output-Token-Count", "3"),
        ("X-Amzn-Bedrock-Invocation-Latency", "211"),
    ]
    handler.script = [(200, headers, orjson.dumps(body))]
    (got,) = _boto(
        url,
        (
            "invoke_model",
            {
                "modelId": MISTRAL,
                "body": json.dumps(
                    {"prompt": "<s>[INST] Capital of France? [/INST]", "max_tokens": 20}
                ),
            },
        ),
    )
    assert got.get("error") is None and got["usage"] == ["17", "3"], got
    ((ex, rt),) = _recorded(handler)
    assert ("x-amzn-bedrock-input-token-count", "17") in ex.response_headers
    assert ("x-amzn-bedrock-output-token-count", "3") in ex.response_headers
    assert rt.family == "bedrock_invoke" and rt.response is not None
    u = rt.response.usage
    assert u is not None and (u.input_tokens, u.output_tokens) == (17, 3)
    codes = [f.code for f in analyse([ex], [rt]).findings]
    assert "A.usage_missing" not in codes, codes


def test_an_empty_4xx_is_still_an_a_finding_with_its_type(fake: tuple[str, type[_Fake]]) -> None:
    url, handler = fake
    err = [
        (
            "x-amzn-ErrorType",
            "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        )
    ]
    handler.script = [(400, [*JSON, *err], b""), (400, [*JSON, *err], b"")]
    got = _boto(
        url,
        (
            "invoke_model",
            {"modelId": MISTRAL, "body": json.dumps({"prompt": "x", "max_tokens": 1})},
        ),
        ("converse", {"modelId": NOVA, "messages": MESSAGES}),
    )
    assert [g.get("error") for g in got] == ["ValidationException"] * 2, got
    for ex, rt in _recorded(handler):
        assert rt.response is not None and rt.response.error is not None
        assert rt.response.error.type == "ValidationException"
        (a,) = [f for f in analyse([ex], [rt]).findings if f.layer == "A"]
        assert a.code == "A.http_error" and "ValidationException" in a.message, a


@pytest.mark.parametrize(
    "rel",
    [
        "pydantic-ai/tests/models/cassettes/test_anthropic_mid_conversation_system/"
        "test_mid_conversation_system_prompt_on_bedrock.yaml",
        "pydantic-ai/tests/models/cassettes/test_anthropic/test_anthropic_cache_bedrock_real_api.yaml",
    ],
)
def test_recorded_usage_headers_survive_redaction(rel: str) -> None:
    """Real InvokeModel answers: their token counts stay numbers through redaction (open_run
    redacts another tool's file as ``looptap import`` does)."""
    run = open_run(CORPUS / rel)
    counts = [
        (k, v)
        for ex in run.exchanges
        for k, v in ex.response_headers
        if k.lower().startswith("x-amzn-bedrock-") and k.lower().endswith("token-count")
    ]
    assert counts and all(v.isdigit() for _k, v in counts), counts
