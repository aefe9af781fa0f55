"""looptap's own OTel export of calls that are not chat turns, read back by ``import`` (issue 85,
item 3): an embedding, an image, speech and a legacy completion (streamed or not) are exported
under their GenAI operation name and come back as the same API family and operation, with their
model, what was asked, the answer's text and usage, and no finding they did not have (not a chat
turn with a false ``E.empty_response``). The answers' bodies are the SDK's own types where the
``openai`` package has them (``CreateEmbeddingResponse``, ``ImagesResponse``, ``Completion``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from looptap.cassettes.interop import import_runs, iter_requests
from looptap.cassettes.reading import Run, open_run, show_objects
from looptap.cassettes.storage import check_target
from looptap.cassettes.wire import Exchange

_JSON = "application/json"
#: An MP3 frame header and some bytes: what /audio/speech answers (a binary body).
_AUDIO = b"ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x64" + bytes(range(200, 256)) * 2


def _typed(name: str, body: dict[str, Any]) -> dict[str, Any]:
    import openai.types as types

    getattr(types, name).model_validate(body)
    return body


def _completion(stream: bool) -> tuple[str, bytes]:
    body = _typed("Completion", {
        "id": "cmpl-1", "object": "text_completion", "created": 1700000000,
        "model": "gpt-3.5-turbo-instruct",
        "choices": [{"text": "\n\nParis.", "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    })  # fmt: skip
    if not stream:
        return _JSON, orjson.dumps(body)
    first = {**body, "choices": [{**body["choices"][0], "text": "\n\nPar", "finish_reason": None}]}
    del first["usage"]
    last = {**body, "choices": [{**body["choices"][0], "text": "is."}]}
    events = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in (first, last))
    return "text/event-stream", events + b"data: [DONE]\n\n"


# fmt: off
#: (URL, request, the answer's content type and body) of each operation.
CALLS: dict[str, tuple[str, dict[str, Any], tuple[str, bytes]]] = {
    "embeddings": (
        "https://api.openai.com/v1/embeddings",
        {"model": "text-embedding-3-small", "input": ["hello", "world"], "dimensions": 3},
        (_JSON, orjson.dumps(_typed("CreateEmbeddingResponse", {
            "object": "list", "model": "text-embedding-3-small",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, -0.2, 0.3]},
                     {"object": "embedding", "index": 1, "embedding": [0.0, 0.1, 0.2]}],
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        })))),
    "cohere embed": (
        "https://api.cohere.com/v2/embed",
        {"model": "embed-english-v3.0", "texts": ["hi"], "input_type": "search_document",
         "embedding_types": ["float"]},
        (_JSON, orjson.dumps({
            "id": "e1", "embeddings": {"float": [[0.1, 0.2]]}, "texts": ["hi"],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 2}},
            "response_type": "embeddings_by_type",
        }))),
    "image": (
        "https://api.openai.com/v1/images/generations",
        {"model": "gpt-image-1", "prompt": "a lighthouse at dusk", "size": "1024x1024"},
        (_JSON, orjson.dumps(_typed("ImagesResponse", {
            "created": 1700000000, "data": [{"b64_json": "aGVsbG8="}],
            "usage": {"input_tokens": 10, "output_tokens": 100, "total_tokens": 110,
                      "input_tokens_details": {"text_tokens": 10, "image_tokens": 0}},
        })))),
    "speech": (
        "https://api.openai.com/v1/audio/speech",
        {"model": "gpt-4o-mini-tts", "input": "Hello there.", "voice": "alloy",
         "instructions": "Speak slowly."},
        ("audio/mpeg", _AUDIO),
    ),
    "completion": (
        "https://api.openai.com/v1/completions",
        {"model": "gpt-3.5-turbo-instruct", "prompt": "Capital of France?", "max_tokens": 5},
        _completion(stream=False),
    ),
    "streamed completion": (
        "https://api.openai.com/v1/completions",
        {"model": "gpt-3.5-turbo-instruct", "prompt": "Capital of France?", "max_tokens": 5,
         "stream": True},
        _completion(stream=True),
    ),
}
# fmt: on
#: The GenAI operation name each is exported under.
GENAI = {"embeddings": "embeddings", "cohere embed": "embeddings", "image": "generate_content",
         "speech": "generate_content", "completion": "text_completion",
         "streamed completion": "text_completion"}  # fmt: skip
#: Fields of ``show --json`` kept exactly.
KEPT = ("family", "operation", "method", "host", "path", "model_requested", "stream", "status",
        "usage", "text", "tool_calls", "error", "complete", "request", "conversation", "turn",
        "findings")  # fmt: skip


def _exchange(url: str, req: dict[str, Any], answer: tuple[str, bytes], seq: int) -> Exchange:
    ex = Exchange(
        "POST", url, request_headers=[("content-type", _JSON)], request_body=orjson.dumps(req),
        status=200, response_headers=[("content-type", answer[0])],
        response_chunks=[(0.1, answer[1])],
    )  # fmt: skip
    ex.seq, ex.started, ex.duration = seq, 1700000000.0 + seq, 0.5
    return ex


@pytest.mark.parametrize("name", list(CALLS))
def test_an_operation_comes_back_as_itself(name: str, tmp_path: Path) -> None:
    url, req, answer = CALLS[name]
    run = Run.of([_exchange(url, req, answer, 0)], "ops")
    (request,) = list(iter_requests(run))
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = {a["key"]: a["value"] for s in spans for a in s["attributes"]}
    assert attrs["gen_ai.operation.name"] == {"stringValue": GENAI[name]}
    otel, back = tmp_path / "run.otel.json", tmp_path / "run.jsonl"
    otel.write_bytes(orjson.dumps(request))
    import_runs(otel, "otlp", [check_target(back, "the import's output")])
    imported = open_run(back, cache=False)
    try:
        (before,) = show_objects(run, tmp_path / "ops")
        (after,) = show_objects(imported, back)
    finally:
        imported.close()
    differ = {k: (before[k], after[k]) for k in KEPT if before[k] != after[k]}
    if name == "speech":  # the audio file is not in a trace: no bytes, so no answer to read
        assert (before["complete"], after["complete"]) == (True, None)
        assert any("audio is not in a trace" in n for n in after["notes"])
        differ.pop("complete")
    assert not differ, differ
    assert after["timing"]["duration"] == before["timing"]["duration"]
