"""Whether a request asked its model to think before answering (``providers.asks_to_think``, what
``looptap why``'s budget reads: issue 103), on the requests pydantic-ai's reasoning wire-contract
suite sent to the real APIs (Groq, Cerebras, Mistral, Gemini) and llm-anthropic's thinking call:
each on, off (``none``, a budget of 0) or unsaid as its client sent it."""

from __future__ import annotations

import pytest

from looptap.cassettes import providers
from looptap.cassettes.reading import open_run
from tests.real_corpus import CORPUS

_CONTRACT = "pydantic-ai/tests/cassettes/test_thinking_wire_contract/test_reasoning_wire_contract"
#: cassette → asked (the request's own field and value, as recorded)
ASKED = {
    f"{_CONTRACT}[groq-gpt-oss-thinking-high].yaml": True,  # reasoning_effort: high
    f"{_CONTRACT}[groq-gpt-oss-thinking-minimal-folds-to-low].yaml": True,  # low
    f"{_CONTRACT}[groq-qwen3-effort-setting].yaml": True,  # default
    f"{_CONTRACT}[mistral-small-thinking-high].yaml": True,  # high
    "llm-anthropic/tests/cassettes/test_anthropic/test_parts_thinking.yaml": True,  # enabled, 1024
    f"{_CONTRACT}[groq-qwen3-disable].yaml": False,  # reasoning_effort: none
    f"{_CONTRACT}[cerebras-zai-clear-thinking].yaml": False,  # none
    f"{_CONTRACT}[google-gemini-25-disable].yaml": False,  # thinkingConfig.thinking_budget: 0
    f"{_CONTRACT}[mistral-small-unset-omits-effort].yaml": False,  # nothing said
    f"{_CONTRACT}[groq-gpt-oss-thinking-false-noop].yaml": False,  # nothing said (it reasons)
}


@pytest.mark.parametrize("name", sorted(ASKED))
def test_a_real_request_says_whether_it_asked_to_think(name: str) -> None:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"{name} is not in the corpus here")
    run = open_run(path, whole=True)
    first = run.analysis.turns[min(run.analysis.turns)]
    assert providers.asks_to_think(first.c.params) is ASKED[name]


@pytest.mark.parametrize(
    ("params", "asked"),
    [
        ({"thinking": {"type": "adaptive"}}, True),
        ({"thinking": {"type": "disabled"}}, False),
        ({"reasoning": {"effort": "none"}}, False),
        ({"reasoning": {"effort": "high", "summary": "detailed"}}, True),
        ({"reasoning": {"summary": "auto"}}, False),
        ({"thinkingConfig": {"thinkingBudget": -1}}, True),
        ({"generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}}}, True),
        ({"additionalModelRequestFields": {"thinking": {"type": "enabled"}}}, True),
        ({"think": False}, False),
        ({"temperature": 0}, False),
        ("not an object", False),
    ],
)
def test_each_family_s_field_and_its_off_values(params: object, asked: bool) -> None:
    assert providers.asks_to_think(params) is asked
