"""Issue 92: recordings other projects' test suites made, read as they are in the wild.

Every cassette here is verbatim from another project (``recorded/``, README there: repository,
commit, licence). Each test failed on c86d115d.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from looptap.cassettes.analysis import analyse
from looptap.cassettes.cli import main
from looptap.cassettes.errors import ImportFormatError
from looptap.cassettes.models import FinishReason
from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.reading import open_run
from looptap.cassettes.storage import load_vcr, read_vcr
from looptap.cassettes.views.report import report_data
from looptap.cassettes.wire import Exchange

RECORDED = Path(__file__).parent / "recorded"


def _rts(name: str) -> list[RoundTrip]:
    return [parse_exchange(ex) for ex in load_vcr(RECORDED / name)]


# -- 1. YAML written by vcrpy's aiohttp stub -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("dd-apm-test-agent/openai_chat_completions_post_ae4728c2.yaml", "apply"),
        ("dd-apm-test-agent/anthropic_v1_messages_post_26d618ee.yaml", "new"),
    ],
)
def test_aiohttp_header_tags_are_read_as_the_names_they_wrap(name: str, tag: str) -> None:
    """Was: "not valid YAML: could not determine a constructor for the tag …": the whole file
    refused, every call in it unread."""
    assert f"!!python/object/{tag}:multidict._multidict.istr" in (RECORDED / name).read_text()
    exchanges = load_vcr(RECORDED / name)
    names = {k.lower() for ex in exchanges for k, _ in ex.request_headers}
    assert {"accept", "content-type"} <= names
    rts = [parse_exchange(ex) for ex in exchanges]
    assert rts and all(rt.response is not None and rt.response.complete for rt in rts)
    assert all(rt.request is not None and rt.request.messages for rt in rts)


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ("a: !!python/object/apply:os.system [ls]", "!!python/object/apply:os.system"),
        ("a: !!python/object/new:multidict._multidict.istr [[1, 2]]", "multidict._multidict.istr"),
        ("a: !!python/name:builtins.eval ''", "!!python/name:builtins.eval"),
        ("a: !custom 1", "!custom"),
    ],
)
def test_any_other_tag_is_refused_naming_it(doc: str, named: str) -> None:
    """Nothing is constructed: a tag that is not a header name's, or one around anything but a
    single string, refuses the file with the tag in the message (not "not valid YAML")."""
    with pytest.raises(ImportFormatError) as e:
        list(read_vcr(doc, "x.yaml"))
    assert named in str(e.value) and "not valid YAML" not in str(e.value)


def _codes(name: str) -> set[str]:
    exchanges = load_vcr(RECORDED / name)
    for i, ex in enumerate(exchanges):
        ex.seq = i
    return {f.code for f in analyse(exchanges).findings}


# -- 2. Completeness by evidence -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "others"),
    [
        (
            "dd-trace-py/cohere_invoke_stream_single_output.yaml",
            " I am very happy to assist you! A Long",
            0,
        ),
        (
            "dd-trace-py/cohere_invoke_stream_multiple_output.yaml",
            " In machine learning and natural language processing, Long Short",
            1,
        ),
    ],
)
def test_bedrock_cohere_command_stream_ends_with_its_is_finished_chunk(
    name: str, text: str, others: int
) -> None:
    """Was: the final ``{"is_finished": true, "finish_reason": "MAX_TOKENS"}`` chunk unread (finish
    None, a false A.stream_truncated error) and ``num_generations: 2`` joined into one text."""
    (rt,) = _rts(name)
    r = rt.response
    assert r is not None and r.complete is True and r.text == text
    assert r.finish_reason_raw == "MAX_TOKENS" and r.finish_reason is FinishReason.TRUNCATED_LENGTH
    said = [n for n in r.notes if "generation 0 is read as the answer" in n]
    assert len(said) == others
    codes = _codes(name)
    assert "A.stream_truncated" not in codes and "A.truncated_length" in codes


def test_bedrock_cohere_command_body_reads_generation_0_and_says_the_rest() -> None:
    (rt,) = _rts("dd-trace-py/cohere_invoke_multi_output.yaml")
    r = rt.response
    assert r is not None and r.text == " A large language model (LLM) chain can"
    assert any("2 generations" in n and "generation 1" in n for n in r.notes)


def _chat_chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
    chunk = {
        "id": "chatcmpl-b7c9",
        "object": "chat.completion.chunk",
        "created": 1748419200,
        "model": "phi-4",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def test_compatible_stream_without_done_is_whole_by_its_finish_reason() -> None:
    """llama.cpp-derived servers (ik_llama.cpp without ``--send-done``, its issue 467; TGI before
    its PR 2221) end a chat stream with the finish chunk and usage and no ``[DONE]``. Was: a false
    A.stream_truncated error ("the answer is incomplete")."""
    body = b"".join(
        [
            _chat_chunk({"role": "assistant", "content": "Once"}),
            _chat_chunk({"content": " upon a time."}),
            _chat_chunk(
                {},
                "stop",
                usage={"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
            ),
        ]
    )
    ex = _stream_exchange("http://localhost:8000/v1/chat/completions", body)
    rt = parse_exchange(ex)
    r = rt.response
    assert r is not None and r.complete is True and r.text == "Once upon a time."
    assert any("without [DONE]" in n for n in r.notes)
    assert "A.stream_truncated" not in {f.code for f in analyse([ex]).findings}
    # Clean twin: the same stream cut before its finish chunk is still truncated.
    cut = _stream_exchange(
        "http://localhost:8000/v1/chat/completions",
        _chat_chunk({"role": "assistant", "content": "Once"}),
    )
    assert parse_exchange(cut).response.complete is False  # type: ignore[union-attr]
    assert "A.stream_truncated" in {f.code for f in analyse([cut]).findings}
    # ... and so is one cut inside the event after its finish chunk (the connection cut).
    cut = _stream_exchange("http://localhost:8000/v1/chat/completions", body + b'data: {"id": "ch')
    assert parse_exchange(cut).response.complete is False  # type: ignore[union-attr]


def _stream_exchange(url: str, body: bytes) -> Exchange:
    req = {"model": "phi-4", "stream": True, "messages": [{"role": "user", "content": "story"}]}
    ex = Exchange(
        method="POST",
        url=url,
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(req),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        response_chunks=[(None, body)],
    )
    ex.seq = 0
    return ex


# -- 3. Shapes: audio output, legacy finish_details, rerank ----------------------------------------


def test_audio_answer_reads_its_transcript() -> None:
    """Was: ``content: null`` with ``audio.transcript`` read as no text (a false
    E.empty_response)."""
    (rt,) = _rts("dd-trace-py/chat_completion_audio_output.yaml")
    assert rt.response is not None and rt.response.text == "Hello! How can I help you today?"
    assert "E.empty_response" not in _codes("dd-trace-py/chat_completion_audio_output.yaml")


def test_legacy_finish_details_is_the_finish_reason() -> None:
    """gpt-4-vision-preview's ``finish_details: {"type": "max_tokens"}``. Was: finish None (an
    A.unusual_finish "finish reason None"), the truncation missed."""
    (rt,) = _rts("dd-trace-py/chat_completion_image_input.yaml")
    r = rt.response
    assert r is not None and r.finish_reason_raw == "max_tokens"
    assert r.finish_reason is FinishReason.TRUNCATED_LENGTH


def test_cohere_rerank_on_bedrock_is_its_own_operation() -> None:
    """Was: read as a generate call with no output: a false A.malformed_response."""
    (rt,) = _rts("dd-trace-py/cohere_rerank_invoke.yaml")
    assert rt.operation == "rerank"
    assert not _codes("dd-trace-py/cohere_rerank_invoke.yaml")


def test_json_object_content_is_read_as_its_text() -> None:
    """Cloudflare Workers AI's structured output: ``message.content`` is the JSON object itself
    (its documented ``response_format: json_schema`` answer). Was: read as no text, no word."""
    body = {
        "id": "id-1748419200",
        "object": "chat.completion",
        "created": 1748419200,
        "model": "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": {"city": "Paris", "population": 2}},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }
    ex = Exchange(
        method="POST",
        url="https://api.cloudflare.com/client/v4/accounts/abc/ai/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=orjson.dumps(
            {
                "model": "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
                "messages": [{"role": "user", "content": "x"}],
            }
        ),
        status=200,
        response_headers=[("content-type", "application/json")],
        response_chunks=[(None, orjson.dumps(body))],
    )
    r = parse_exchange(ex).response
    assert r is not None and orjson.loads(r.text) == {"city": "Paris", "population": 2}


# -- 4. Unknown is an answer -------------------------------------------------------------------


def test_a_call_recorded_without_its_request_body_is_a_turn_read_partial() -> None:
    """Was: no turn (``export --html`` showed 0 turns and dropped the answer ``show`` printed)."""
    name = "dd-trace-py/azure_openai_chat_completion_boolean.yaml"
    (rt,) = _rts(name)
    assert rt.read == "partial" and rt.unread == ["request: no body recorded"]
    exchanges = load_vcr(RECORDED / name)
    exchanges[0].seq = 0
    run = analyse(exchanges)
    assert len(run.turns) == 1 and not run.findings
    data = report_data(open_run(RECORDED / name))
    assert data["totals"]["turns"] == 1
    (d,) = data["detail"].values()
    assert d["read"] == "partial" and d["unread"] == ["request: no body recorded"]


def test_show_json_and_show_say_how_each_round_trip_was_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = RECORDED / "dd-trace-py/anthropic_completion_error.yaml"
    (rt,) = _rts("dd-trace-py/anthropic_completion_error.yaml")
    # a message that is no message (the test sent a bare string): said, and nothing judged of it;
    # the API's own 400 is still its finding
    assert rt.read == "partial" and rt.unread == [
        "message 1 (unknown): a part, not read"
    ]
    assert _codes("dd-trace-py/anthropic_completion_error.yaml") == {"A.http_error"}
    (moderation,) = _rts("dd-trace-py/moderation.yaml")
    assert moderation.read == "unread" and moderation.unread
    (whole,) = _rts("dd-trace-py/chat_completion_audio_output.yaml")
    assert whole.read == "complete" and whole.unread == []
    assert main(["show", "--json", str(bad)]) == 0
    views = [orjson.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    (v,) = [v for v in views if v.get("schema") == "looptap.roundtrip/1"]
    assert v["read"] == "partial" and v["unread"] == rt.unread
    assert main(["show", str(bad)]) == 0
    assert "read: partial: message 1 (unknown)" in capsys.readouterr().out


def test_a_tool_call_without_an_id_prints_no_id(capsys: pytest.CaptureFixture[str]) -> None:
    """Gemini's function calls carry no id. Was: ``tool call: bar({}) id=None``."""
    path = RECORDED / "pydantic-ai/test_google_tool_config_any_with_tool_without_args.yaml"
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tool call: bar({})" in out and "id=None" not in out
