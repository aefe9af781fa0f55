"""One table of request fields (issue 72 item 2): the output-token cap is found by the same rule in
the live rewrite (``--edit max_tokens=N``), the analysis (the cap a truncated answer hit) and the
OTel export (``gen_ai.request.max_tokens``), for every API family that takes one. On 9dbacc33 the
three said it with three tables that disagreed (the rewrite lifted no Bedrock, TGI, watsonx, Aleph
Alpha or Replicate cap; the export named none of those either; the analysis took any
``max…tokens`` key, a ``max_prompt_tokens`` among them)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from looptap.cassettes import providers
from looptap.cassettes.interop import iter_requests
from looptap.cassettes.reading import Run
from looptap.cassettes.replay.live.edits import parse_edit
from looptap.cassettes.replay.live.rewrite import apply_edits
from looptap.cassettes.wire import Exchange

MSG = [{"role": "user", "content": "hi"}]

#: (family, URL, a request that sets the output cap to 100, the cap's path in the body).
CASES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("openai_chat", "https://api.openai.com/v1/chat/completions",
     {"model": "gpt-4o", "messages": MSG, "max_completion_tokens": 100},
     ["max_completion_tokens"]),
    ("openai_responses", "https://api.openai.com/v1/responses",
     {"model": "gpt-4o", "input": "hi", "max_output_tokens": 100}, ["max_output_tokens"]),
    ("anthropic", "https://api.anthropic.com/v1/messages",
     {"model": "claude-sonnet-4-5", "messages": MSG, "max_tokens": 100}, ["max_tokens"]),
    ("gemini", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent",
     {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
      "generationConfig": {"maxOutputTokens": 100}}, ["generationConfig", "maxOutputTokens"]),
    ("bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-pro-v1:0/converse",
     {"messages": [{"role": "user", "content": [{"text": "hi"}]}],
      "inferenceConfig": {"maxTokens": 100}}, ["inferenceConfig", "maxTokens"]),
    ("ollama", "http://localhost:11434/api/chat",
     {"model": "llama3", "messages": MSG, "options": {"num_predict": 100}},
     ["options", "num_predict"]),
    ("openai_completions", "https://api.openai.com/v1/completions",
     {"model": "gpt-3.5-turbo-instruct", "prompt": "hi", "max_tokens": 100}, ["max_tokens"]),
    ("cohere", "https://api.cohere.com/v2/chat",
     {"model": "command-r", "messages": MSG, "max_tokens": 100}, ["max_tokens"]),
    ("aleph_alpha", "https://api.aleph-alpha.com/complete",
     {"model": "luminous-base", "prompt": "hi", "maximum_tokens": 100}, ["maximum_tokens"]),
    ("watsonx", "https://us-south.ml.cloud.ibm.com/ml/v1/text/generation?version=2023-05-29",
     {"model_id": "ibm/granite-13b-instruct-v2", "input": "hi",
      "parameters": {"max_new_tokens": 100}}, ["parameters", "max_new_tokens"]),
    ("tgi", "http://localhost:8080/generate",
     {"inputs": "hi", "parameters": {"max_new_tokens": 100}}, ["parameters", "max_new_tokens"]),
    ("replicate", "https://api.replicate.com/v1/models/meta/meta-llama-3-8b-instruct/predictions",
     {"input": {"prompt": "hi", "max_tokens": 100}}, ["input", "max_tokens"]),
    ("anthropic_complete", "https://api.anthropic.com/v1/complete",
     {"model": "claude-2.1", "prompt": "\n\nHuman: hi\n\nAssistant:",
      "max_tokens_to_sample": 100}, ["max_tokens_to_sample"]),
]  # fmt: skip


def _cap(params: dict[str, Any]) -> tuple[str, Any] | None:
    """What the analysis reads as the cap a cut answer hit (``analysis._api``)."""
    return providers.request_field(params, "max_tokens")


def _exported(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The ``gen_ai.request.*`` attributes ``export --otel`` writes for a call of ``body``."""
    ex = Exchange("POST", url, request_body=orjson.dumps(body), status=200,
                  response_headers=[("content-type", "application/json")],
                  response_chunks=[(0.1, b"{}")])  # fmt: skip
    out: dict[str, Any] = {}
    for req in iter_requests(Run.of([ex])):
        for rs in req["resourceSpans"]:
            for sp in (sp for ss in rs["scopeSpans"] for sp in ss["spans"]):
                for a in sp["attributes"]:
                    if a["key"].startswith("gen_ai.request."):
                        out[a["key"]] = next(iter(a["value"].values()))
    return out


def _request(url: str, body: dict[str, Any]) -> tuple[str, Any]:
    u = urlsplit(url)
    p = providers.detect("POST", u, body)
    assert p is not None
    return p.family, p.parse_request(body, u)


@pytest.mark.parametrize("family, url, body, path", CASES, ids=[c[0] for c in CASES])
def test_the_rewrite_the_analysis_and_the_export_find_the_same_cap(
    family: str, url: str, body: dict[str, Any], path: list[str]
) -> None:
    found, req = _request(url, body)
    assert found == family
    cap = _cap(req.params)
    assert cap is not None and cap[1] == 100, (family, req.params)
    assert _exported(url, body).get("gen_ai.request.max_tokens") in (100, "100"), family
    edited, marks = apply_edits(
        "POST", urlsplit(url).path, orjson.dumps(body), [parse_edit("max_tokens=7")]
    )
    doc = orjson.loads(edited)
    node: Any = doc
    for k in path:
        node = node[k]
    assert node == 7 and len(marks) == 1, (family, doc)
    _, after = _request(url, doc)
    assert _cap(after.params) == (cap[0], 7)
    assert _exported(url, doc).get("gen_ai.request.max_tokens") in (7, "7")


def test_a_prompt_budget_is_not_the_output_cap() -> None:
    """A request that caps its prompt and its completion: the cap a truncated answer hit is the
    completion's."""
    params = {"max_prompt_tokens": 5000, "max_completion_tokens": 300}
    assert _cap(params) == ("max_completion_tokens", 300)


def test_every_field_of_the_table_is_found() -> None:
    for name, fields in providers.REQUEST_FIELDS.items():
        for field in fields:
            value: Any = ["x"] if name == "stop_sequences" else 2
            if name == "choice.count":
                value = 2  # 1 is the default, not exported
            assert providers.request_field({field: value}, name) == (field, value)
