"""A family's raw finish reasons are data in its profile (issue 72 item 1): ``Profile.finishes``,
the map its parser reads, says what docs/WIRE.md §G.1 says for every raw value it lists."""

from __future__ import annotations

import pytest

from looptap.cassettes import providers
from looptap.cassettes.models import FinishReason as F

#: WIRE.md §G.1, the rows that name one class for a raw value (a class that depends on the
#: answer's calls is its ``complete``).
G1 = {
    "openai_chat": {"stop": F.COMPLETE, "length": F.TRUNCATED_LENGTH, "tool_calls": F.TOOL_CALL,
                    "content_filter": F.FILTERED, "function_call": F.TOOL_CALL},
    "anthropic": {"end_turn": F.COMPLETE, "stop_sequence": F.COMPLETE,
                  "max_tokens": F.TRUNCATED_LENGTH,
                  "model_context_window_exceeded": F.TRUNCATED_CONTEXT, "tool_use": F.TOOL_CALL,
                  "pause_turn": F.PAUSED, "refusal": F.REFUSED},
    "gemini": {"STOP": F.COMPLETE, "MAX_TOKENS": F.TRUNCATED_LENGTH,
               **dict.fromkeys(("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                                "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"),
                               F.FILTERED),
               "MALFORMED_FUNCTION_CALL": F.TOOL_CALL_ERROR,
               "UNEXPECTED_TOOL_CALL": F.TOOL_CALL_ERROR, "TOO_MANY_TOOL_CALLS": F.TOOL_LOOP_LIMIT,
               **dict.fromkeys(("LANGUAGE", "NO_IMAGE", "IMAGE_OTHER", "OTHER",
                                "FINISH_REASON_UNSPECIFIED"), F.OTHER)},
    "ollama": {"stop": F.COMPLETE, "length": F.TRUNCATED_LENGTH, "load": F.NO_GENERATION,
               "unload": F.NO_GENERATION},
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(G1))
def test_a_familys_finish_map_is_its_profiles_and_says_what_the_spec_says(family: str) -> None:
    p = providers.by_family(family)
    assert p is not None and p.profile.finishes, family
    for raw, cls in G1[family].items():
        assert p.profile.finishes.get(raw, F.OTHER) is cls, (family, raw)  # finish_lookup's rule


def test_every_generating_family_with_finish_reasons_has_them_in_its_profile() -> None:
    without = {f for f in providers.FAMILIES if not providers.by_family(f).profile.finishes}  # type: ignore[union-attr]
    # Families whose answers carry no raw finish reason of a closed set (a status, an event, an
    # embedding, a protocol message), or whose format is another family's.
    assert without == {
        "a2a", "embeddings", "gemini_interactions", "gemini_live", "mcp", "openai_realtime",
        "openai_responses", "portkey_prompt", "writer", "bedrock_agents", "openai_media",
    }  # fmt: skip
