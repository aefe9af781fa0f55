"""Issue 45: Gemini / Vertex answers with enums as proto numbers (``$alt=json;enum-encoding=int``).

Google's generated REST clients (the gapic transports of google-cloud-aiplatform and
google-ai-generativelanguage) add ``$alt=json;enum-encoding=int`` to the query, and the API then
sends every enum as its number: ``"finishReason": 1``, ``"category": 2``, ``"probability": 1``.
The recordings are built here in that shape: a Vertex ``generateContent`` answer (``createTime``,
``responseId``, ``modelVersion``, ``usageMetadata`` as Vertex sends them) and a Gemini API one. The
numbers are google.cloud.aiplatform.v1 ``Candidate.FinishReason`` / ``HarmCategory`` and
google.ai.generativelanguage.v1beta ``Candidate.FinishReason``, which part ways after ``OTHER = 5``.
Was: ``1`` read as ``other`` (a false ``A.unusual_finish``) and ``2`` (``MAX_TOKENS``) unflagged.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import parse_exchange
from looptap.cassettes.wire import Exchange

QUERY = "%24alt=json%3Benum-encoding%3Dint"
VERTEX = (
    "https://us-central1-aiplatform.googleapis.com/v1/projects/acme-agents/locations/us-central1/"
    f"publishers/google/models/gemini-2.5-flash:{{}}?{QUERY}"
)
GEMINI_API = (
    f"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:{{}}?{QUERY}"
)
REQUEST = {
    "contents": [
        {"role": "user", "parts": [{"text": "Summarise the release notes in two sentences."}]}
    ],
    "generationConfig": {"maxOutputTokens": 64},
}
TEXT = (
    "Version 4.2 adds offline sync and fixes the login loop. It also drops support for Android 9."
)


def _answer(
    finish: Any, vertex: bool, ratings: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    cand: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": TEXT}]},
        "finishReason": finish,
    }
    if ratings is not None:
        cand["safetyRatings"] = ratings
    body: dict[str, Any] = {
        "candidates": [cand],
        "usageMetadata": {
            "promptTokenCount": 12,
            "candidatesTokenCount": 21,
            "totalTokenCount": 33,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "pBIlaYWKNuKBm9IPtdPq0Q0",
    }
    if vertex:
        body["createTime"] = "2026-11-25T06:41:08.512934Z"
        body["usageMetadata"]["trafficType"] = 1  # ON_DEMAND, numbered too
    return body


def _exchange(body: Any, vertex: bool = True, method: str = "generateContent") -> Exchange:
    return Exchange(
        method="POST",
        url=(VERTEX if vertex else GEMINI_API).format(method),
        request_headers=[
            ("content-type", "application/json"),
            ("x-goog-api-client", "gl-python/3.11.9 grpc/1.71.0 gax/2.24.2 rest/2.32.0"),
        ],
        request_body=orjson.dumps(REQUEST),
        status=200,
        response_headers=[("content-type", "application/json; charset=UTF-8")],
        response_chunks=[(0.8, orjson.dumps(body))],
        ttfb=0.8,
        duration=0.9,
    )


def _codes(ex: Exchange) -> list[str]:
    return [f.code for f in analyse([ex]).findings]


@pytest.mark.parametrize("vertex", [True, False])
def test_stop_as_1_is_a_complete_answer(vertex: bool) -> None:
    ex = _exchange(_answer(1, vertex))
    r = parse_exchange(ex).response
    assert r is not None and (r.finish_reason, r.finish_reason_raw) == (
        FinishReason.COMPLETE,
        "STOP",
    )
    assert _codes(ex) == []


@pytest.mark.parametrize("vertex", [True, False])
def test_max_tokens_as_2_is_the_cap(vertex: bool) -> None:
    assert "A.truncated_length" in _codes(_exchange(_answer(2, vertex)))


def test_a_streamed_method_answered_as_a_json_array() -> None:
    """``streamGenerateContent`` without ``alt=sse`` answers one JSON array; the last item ends
    it."""
    first = _answer(None, True)
    del first["candidates"][0]["finishReason"]
    ex = _exchange([first, _answer(2, True)], method="streamGenerateContent")
    r = parse_exchange(ex).response
    assert r is not None and (r.finish_reason, r.finish_reason_raw) == (
        FinishReason.TRUNCATED_LENGTH,
        "MAX_TOKENS",
    )


def test_the_numbers_after_other_are_read_by_the_api_that_sent_them() -> None:
    """6 is BLOCKLIST on Vertex but LANGUAGE on the Gemini API; 7 PROHIBITED_CONTENT on Vertex,
    BLOCKLIST on the Gemini API; a number neither knows stays raw and is said (``other``)."""
    def raw(finish: int, vertex: bool) -> tuple[FinishReason | None, str | None]:
        r = parse_exchange(_exchange(_answer(finish, vertex))).response
        assert r is not None
        return r.finish_reason, r.finish_reason_raw

    assert raw(6, True) == (FinishReason.FILTERED, "BLOCKLIST")
    assert raw(6, False) == (FinishReason.OTHER, "LANGUAGE")
    assert raw(7, False) == (FinishReason.FILTERED, "BLOCKLIST")
    assert raw(9, True) == (FinishReason.TOOL_CALL_ERROR, "MALFORMED_FUNCTION_CALL")
    assert raw(10, False) == (FinishReason.TOOL_CALL_ERROR, "MALFORMED_FUNCTION_CALL")
    assert raw(10, True) == (FinishReason.FILTERED, "MODEL_ARMOR")
    assert raw(99, True) == (FinishReason.OTHER, "99")


def test_numbered_safety_ratings_name_the_blocked_category() -> None:
    ratings = [
        {"category": 2, "probability": 4, "blocked": True},
        {"category": 1, "probability": 1},
    ]
    f = [
        x
        for x in analyse([_exchange(_answer(3, True, ratings))]).findings
        if x.code == "A.filtered"
    ]
    assert len(f) == 1 and "HARM_CATEGORY_DANGEROUS_CONTENT" in f[0].message, f[0].message
    # The Gemini API numbers its categories differently (10 is DANGEROUS_CONTENT there).
    ratings = [{"category": 10, "probability": 4, "blocked": True}]
    f = [
        x
        for x in analyse([_exchange(_answer(3, False, ratings))]).findings
        if x.code == "A.filtered"
    ]
    assert len(f) == 1 and "HARM_CATEGORY_DANGEROUS_CONTENT" in f[0].message, f[0].message


def test_prompt_blocked_with_a_numbered_reason() -> None:
    body = {
        "promptFeedback": {"blockReason": 1},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "createTime": "2026-11-25T06:41:08Z",
    }
    r = parse_exchange(_exchange(body)).response
    assert r is not None and (r.finish_reason, r.finish_reason_raw) == (
        FinishReason.PROMPT_BLOCKED,
        "SAFETY",
    )


def test_names_as_the_api_sends_them_by_default_are_unchanged() -> None:
    """Clean twin: the default encoding (names) reads as before."""
    ex = _exchange(_answer("STOP", True))
    r = parse_exchange(ex).response
    assert r is not None and (r.finish_reason, r.finish_reason_raw) == (
        FinishReason.COMPLETE,
        "STOP",
    )
    assert _codes(ex) == []
    assert "A.truncated_length" in _codes(_exchange(_answer("MAX_TOKENS", False)))
