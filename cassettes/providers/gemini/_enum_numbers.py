"""Gemini's enums as proto numbers (``$alt=json;enum-encoding=int``) read as their names: finish
reasons, block reasons and safety ratings, numbered differently by the Gemini API and Vertex."""

from __future__ import annotations

from typing import Any

from .._values import as_str

# Google's generated REST clients ask for ``$alt=json;enum-encoding=int``: every enum then comes
# as its proto number. The two APIs share the numbers up to ``OTHER`` and differ after it
# (google.ai.generativelanguage.v1beta ``Candidate.FinishReason`` has ``LANGUAGE = 6``; Vertex's
# google.cloud.aiplatform.v1 goes on with ``BLOCKLIST = 6`` …); a number neither knows stays
# raw (read as ``other``, so it is still said).
_FINISH_NUMBERS = {
    0: "FINISH_REASON_UNSPECIFIED",
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
}
_FINISH_NUMBERS_GEMINI_API = {
    **_FINISH_NUMBERS,
    6: "LANGUAGE",
    7: "BLOCKLIST",
    8: "PROHIBITED_CONTENT",
    9: "SPII",
    10: "MALFORMED_FUNCTION_CALL",
    11: "IMAGE_SAFETY",
    12: "UNEXPECTED_TOOL_CALL",
}
_FINISH_NUMBERS_VERTEX = {
    **_FINISH_NUMBERS,
    6: "BLOCKLIST",
    7: "PROHIBITED_CONTENT",
    8: "SPII",
    9: "MALFORMED_FUNCTION_CALL",
    10: "MODEL_ARMOR",
    11: "IMAGE_SAFETY",
    12: "IMAGE_PROHIBITED_CONTENT",
    13: "IMAGE_RECITATION",
    14: "IMAGE_OTHER",
    15: "UNEXPECTED_TOOL_CALL",
    16: "NO_IMAGE",
}
#: ``PromptFeedback.BlockReason`` (the numbers both APIs share).
_BLOCK_NUMBERS = {
    0: "BLOCK_REASON_UNSPECIFIED",
    1: "SAFETY",
    2: "OTHER",
    3: "BLOCKLIST",
    4: "PROHIBITED_CONTENT",
}
#: ``SafetyRating``'s ``HarmCategory`` (they differ: Vertex renumbered it) and ``HarmProbability``.
_CATEGORY_NUMBERS_GEMINI_API = {
    0: "HARM_CATEGORY_UNSPECIFIED",
    1: "HARM_CATEGORY_DEROGATORY",
    2: "HARM_CATEGORY_TOXICITY",
    3: "HARM_CATEGORY_VIOLENCE",
    4: "HARM_CATEGORY_SEXUAL",
    5: "HARM_CATEGORY_MEDICAL",
    6: "HARM_CATEGORY_DANGEROUS",
    7: "HARM_CATEGORY_HARASSMENT",
    8: "HARM_CATEGORY_HATE_SPEECH",
    9: "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    10: "HARM_CATEGORY_DANGEROUS_CONTENT",
    11: "HARM_CATEGORY_CIVIC_INTEGRITY",
}
_CATEGORY_NUMBERS_VERTEX = {
    0: "HARM_CATEGORY_UNSPECIFIED",
    1: "HARM_CATEGORY_HATE_SPEECH",
    2: "HARM_CATEGORY_DANGEROUS_CONTENT",
    3: "HARM_CATEGORY_HARASSMENT",
    4: "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    5: "HARM_CATEGORY_CIVIC_INTEGRITY",
    6: "HARM_CATEGORY_IMAGE_HATE",
    7: "HARM_CATEGORY_IMAGE_DANGEROUS_CONTENT",
    8: "HARM_CATEGORY_IMAGE_HARASSMENT",
    9: "HARM_CATEGORY_IMAGE_SEXUALLY_EXPLICIT",
    10: "HARM_CATEGORY_JAILBREAK",
}
_PROBABILITY_NUMBERS = {
    0: "HARM_PROBABILITY_UNSPECIFIED",
    1: "NEGLIGIBLE",
    2: "LOW",
    3: "MEDIUM",
    4: "HIGH",
}


def _enum_name(v: Any, names: dict[int, str]) -> Any:
    """A proto enum number's name; anything else (a name, an unknown number) as it came."""
    if isinstance(v, int) and not isinstance(v, bool):
        return names.get(v, v)
    return v


def finish_name(v: Any, vertex: bool) -> str | None:
    """``finishReason`` as its name, whether it came as a name or as a proto number."""
    return as_str(_enum_name(v, _FINISH_NUMBERS_VERTEX if vertex else _FINISH_NUMBERS_GEMINI_API))


def block_name(v: Any) -> str | None:
    return as_str(_enum_name(v, _BLOCK_NUMBERS))


def named_ratings(ratings: Any, vertex: bool) -> Any:
    """Safety ratings with numbered ``category`` / ``probability`` read as their names."""
    if not isinstance(ratings, list):
        return ratings
    categories = _CATEGORY_NUMBERS_VERTEX if vertex else _CATEGORY_NUMBERS_GEMINI_API
    return [
        {
            **r,
            "category": _enum_name(r.get("category"), categories),
            "probability": _enum_name(r.get("probability"), _PROBABILITY_NUMBERS),
        }
        if isinstance(r, dict) and ("category" in r or "probability" in r)
        else r
        for r in ratings
    ]
