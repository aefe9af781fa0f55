"""Every HTTP interaction of the real recorded corpus imports and parses (CI walks all of it)."""

from __future__ import annotations

import pytest
from corpus_report import CorpusReport, walk

pytestmark = pytest.mark.corpus

#: Interactions whose analysis errors are correct: the recording itself is broken.
EXPECTED_ERRORS = {
    # the recorded request body is cut off (no closing brace): not JSON, flagged
    ("pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_model_other_parameters.yaml", 0),
    # a mock "demo endpoint" answered a chat completion with text/plain echo text
    ("pydantic-ai/tests/models/cassettes/test_openai/test_text_response.yaml", 0),
}


@pytest.fixture(scope="module")
def report() -> CorpusReport:
    return walk()


def test_counts(report: CorpusReport) -> None:
    assert report.files == 1099
    assert report.exchanges == 1830
    for fam in ("openai_chat", "openai_responses", "anthropic", "gemini", "bedrock"):
        assert report.by_family[fam] > 100, fam
    assert sum(n for (fam, op, stream), n in report.by_family_stream.items() if stream) > 180


def test_only_broken_recordings_have_analysis_errors(report: CorpusReport) -> None:
    got = {(f, i) for f, i, _, _ in report.errors}
    assert got == EXPECTED_ERRORS, [e for e in report.errors if (e[0], e[1]) not in EXPECTED_ERRORS]


def test_no_llm_call_is_unknown(report: CorpusReport) -> None:
    """Every LLM call of the corpus is read (issue 14): Cohere v2 chat, unknown before, is now a
    family of its own, with its tool calls; what stays ``none`` is not an LLM call."""
    assert report.unknown == []
    assert report.by_family["cohere"] == 13
    assert report.by_family_stream[("cohere", "generate", False)] == 13
    assert all(host in NOT_LLM_HOSTS for host in report.none_hosts), sorted(
        set(report.none_hosts) - NOT_LLM_HOSTS
    )


#: Hosts whose traffic in the corpus is not an LLM call (file downloads, MCP, search, OAuth, the
#: vendors' file/vector-store/conversation APIs and model lists); checked route by route in
#: ``test_none_is_never_a_generation_route``.
NOT_LLM_HOSTS = {
    "pdfobject.com",
    "mcp.deepwiki.com",
    "api.anthropic.com",
    "t3.ftcdn.net",
    "api.openai.com",
    "www.w3.org",
    "api.tavily.com",
    "example-files.online-convert.com",
    "static.simonwillison.net",
    "logfire-us.pydantic.dev",
    "raw.githubusercontent.com",
    "smokeshow.helpmanual.io",
    "oauth2.googleapis.com",
    "data.grepit.app",
    "api.cerebras.ai",
    "us.inference.heroku.com",
    "cdn.openai.com",
    "huggingface.co",
}


def test_none_is_never_a_generation_route(report: CorpusReport) -> None:
    generation = (
        "/chat",
        "/completions",
        "/messages",
        "/responses",
        "/generate",
        "/converse",
        "/invoke",
        "/embed",
        "/complete",
        "/generation",
        "/invocations",
    )
    assert not [u for u in report.none_urls if any(g in u.split("?")[0] for g in generation)]


def test_truncated_streams_are_the_ones_cut_by_an_error(report: CorpusReport) -> None:
    # Groq ends these streams with an error event and no [DONE]: truncated, error in stream.
    truncated = {(f, i) for f, i, _ in report.truncated}
    assert truncated == {
        (
            "pydantic-ai/tests/models/cassettes/test_groq/"
            "test_tool_use_failed_error_streaming.yaml",
            0,
        ),
        (
            "pydantic-ai/tests/models/cassettes/test_groq/"
            "test_tool_use_failed_error_streaming_with_text.yaml",
            0,
        ),
    }
    assert truncated <= {(f, i) for f, i, _ in report.in_stream_errors}


def test_hand_edited_recordings_are_flagged() -> None:
    """The corpus README: some responses were edited by hand (`status: complete`). Flag, never
    crash."""
    from real_corpus import corpus_exchanges, rel

    from looptap.cassettes.parsing import parse_exchange

    flagged = {
        (rel(p), i)
        for p, i, ex in corpus_exchanges(
            "pydantic-ai/tests/models/cassettes/test_openai_responses/*.yaml"
        )
        if any("is not a value the Responses API sends" in n for n in parse_exchange(ex).notes)
    }
    base = "pydantic-ai/tests/models/cassettes/test_openai_responses/"
    assert flagged == {
        (base + "test_openai_previous_response_id.yaml", 0),
        (base + "test_openai_previous_response_id.yaml", 1),
        (base + "test_openai_previous_response_id_auto_mode.yaml", 0),
        (base + "test_openai_responses_verbosity.yaml", 0),
    }
