"""Issue 83 item 5a: every OpenAI media endpoint is read with its model and usage — images
(generations, edits, variations), speech, transcriptions and translations, JSON and multipart
requests, whole answers, plain-text and binary ones, and streams.

The shared corpus holds none of these calls (``grep -rlE "audio/(speech|transcriptions|
translations)|images/(generations|edits|variations)"`` finds nothing in it). So the requests are
the official ``openai`` SDK's own (the version of this environment; the clients' 2.54.0 sends the
same fields), taken as it sent them through an ``httpx.MockTransport``, and every answer is
validated as the SDK's type (``ImagesResponse``, ``ImageGenStreamEvent``, ``ImageEditStreamEvent``,
``Transcription``, ``TranscriptionVerbose``, ``TranscriptionStreamEvent``, ``Translation``); the
speech stream's events follow OpenAI's API reference (the SDK hands them over unparsed).

Was, on fec4f2c2: image generation and speech ``unknown`` (``model_requested`` null), the
transcriptions, translations, edits and variations "not an LLM call" (``none``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.analysed import cli_output
from test_more_families import sse

from looptap.cassettes.parsing import RoundTrip, parse_exchange
from looptap.cassettes.recording.pipeline import CassetteWriter
from looptap.cassettes.wire import Exchange

openai = pytest.importorskip("openai")
#: (images.create_variation and audio.translations are marked deprecated by the SDK)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
httpx = pytest.importorskip("httpx")

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
WAV = b"RIFF" + b"\0" * 200
IMAGE_USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"text_tokens": 40, "image_tokens": 10},
    "output_tokens": 4160,
    "total_tokens": 4210,
}
TOKENS = {
    "type": "tokens",
    "input_tokens": 14,
    "input_token_details": {"audio_tokens": 12, "text_tokens": 2},
    "output_tokens": 7,
    "total_tokens": 21,
}


def _valid(type_name: str, value: Any) -> Any:
    """``value``, validated as the SDK's type of that name."""
    import openai.types as t
    import openai.types.audio as a
    from pydantic import TypeAdapter

    tp = getattr(t, type_name, None) or getattr(a, type_name)
    TypeAdapter(tp).validate_python(value)
    return value


def _images(usage: bool) -> dict[str, Any]:
    img = {"b64_json": "aGVsbG8=", "revised_prompt": "A red kettle on a table."}
    body = {"created": 1736935200, "data": [img], "size": "1024x1024", "quality": "low"}
    return _valid("ImagesResponse", {**body, "usage": IMAGE_USAGE} if usage else body)


def _events(*events: dict[str, Any], named: bool = False) -> bytes:
    return b"".join(b"".join(sse(e, event=e["type"] if named else None)) for e in events)


#: (name, what the SDK is asked, the answer: (status, content type, body)).
Case = tuple[str, Callable[[Any], Any], tuple[int, str, bytes]]
JSON = "application/json"
SSE = "text/event-stream"

CASES: list[Case] = [
    (
        "gpt-image-1",
        lambda c: c.images.generate(model="gpt-image-1", prompt="A red kettle", quality="low"),
        (200, JSON, orjson.dumps(_images(True))),
    ),
    (
        "dall-e-3",
        lambda c: c.images.generate(model="dall-e-3", prompt="A red kettle", n=1),
        (200, JSON, orjson.dumps(_images(False))),
    ),
    (
        "edit",
        lambda c: c.images.edit(
            model="gpt-image-1", image=("kettle.png", PNG, "image/png"), prompt="Make it blue"
        ),
        (200, JSON, orjson.dumps(_images(True))),
    ),
    (
        "variation",
        lambda c: c.images.create_variation(model="dall-e-2", image=("kettle.png", PNG)),
        (200, JSON, orjson.dumps(_images(False))),
    ),
    (
        "image stream",
        lambda c: list(
            c.images.generate(
                model="gpt-image-1", prompt="A red kettle", stream=True, partial_images=1
            )
        ),
        (
            200,
            SSE,
            _events(
                _valid(
                    "ImageGenStreamEvent",
                    {
                        "type": "image_generation.partial_image",
                        "b64_json": "aGk=",
                        "background": "opaque",
                        "created_at": 1736935200,
                        "output_format": "png",
                        "partial_image_index": 0,
                        "quality": "low",
                        "size": "1024x1024",
                    },
                ),
                _valid(
                    "ImageGenStreamEvent",
                    {
                        "type": "image_generation.completed",
                        "b64_json": "aGVsbG8=",
                        "background": "opaque",
                        "created_at": 1736935201,
                        "output_format": "png",
                        "quality": "low",
                        "size": "1024x1024",
                        "usage": IMAGE_USAGE,
                    },
                ),
                named=True,
            ),
        ),
    ),
    (
        "gpt-4o-mini-tts",
        lambda c: c.audio.speech.create(
            model="gpt-4o-mini-tts", voice="alloy", input="Hello there.", instructions="Cheerful."
        ).read(),
        (200, "audio/mpeg", b"ID3\x04\0\0" + bytes(range(256)) * 4),
    ),
    (
        "tts-1 stream",
        lambda c: c.audio.speech.create(
            model="tts-1", voice="alloy", input="Hello there.", stream_format="sse"
        ).read(),
        (
            200,
            SSE,
            _events(
                {"type": "speech.audio.delta", "audio": "SUQzBAAAAAAA"},
                {
                    "type": "speech.audio.done",
                    "usage": {"input_tokens": 4, "output_tokens": 60, "total_tokens": 64},
                },
            ),
        ),
    ),
    (
        "gpt-4o-transcribe",
        lambda c: c.audio.transcriptions.create(
            model="gpt-4o-transcribe", file=("hello.wav", WAV, "audio/wav")
        ),
        (
            200,
            JSON,
            orjson.dumps(_valid("Transcription", {"text": "Hello there.", "usage": TOKENS})),
        ),
    ),
    (
        "whisper-1 verbose",
        lambda c: c.audio.transcriptions.create(
            model="whisper-1",
            file=("hello.wav", WAV),
            response_format="verbose_json",
            timestamp_granularities=["word", "segment"],
        ),
        (
            200,
            JSON,
            orjson.dumps(
                _valid(
                    "TranscriptionVerbose",
                    {
                        "task": "transcribe",
                        "language": "english",
                        "duration": 1.5,
                        "text": "Hello there.",
                        "words": [{"word": "Hello", "start": 0.0, "end": 0.5}],
                        "usage": {"type": "duration", "seconds": 2},
                    },
                )
            ),
        ),
    ),
    (
        "whisper-1 text",
        lambda c: c.audio.transcriptions.create(
            model="whisper-1", file=("hello.wav", WAV), response_format="text"
        ),
        (200, "text/plain; charset=utf-8", b"Hello there.\n"),
    ),
    (
        "transcribe stream",
        lambda c: list(
            c.audio.transcriptions.create(
                model="gpt-4o-mini-transcribe", file=("hello.wav", WAV), stream=True
            )
        ),
        (
            200,
            SSE,
            _events(
                _valid(
                    "TranscriptionStreamEvent", {"type": "transcript.text.delta", "delta": "Hello"}
                ),
                _valid(
                    "TranscriptionStreamEvent",
                    {"type": "transcript.text.done", "text": "Hello there.", "usage": TOKENS},
                ),
            ),
        ),
    ),
    (
        "translation",
        lambda c: c.audio.translations.create(model="whisper-1", file=("bonjour.wav", WAV)),
        (200, JSON, orjson.dumps(_valid("Translation", {"text": "Hello there."}))),
    ),
]

#: What each call is read as: (family, operation, model, stream, usage (input, output, total),
#: the answer's parts (kind, media type or text)).
READ: dict[str, tuple[Any, ...]] = {
    "gpt-image-1": ("image", "gpt-image-1", False, (50, 4160, 4210), [("media", "image")]),
    "dall-e-3": ("image", "dall-e-3", False, None, [("media", "image")]),
    "edit": ("image", "gpt-image-1", False, (50, 4160, 4210), [("media", "image")]),
    "variation": ("image", "dall-e-2", False, None, [("media", "image")]),
    "image stream": ("image", "gpt-image-1", True, (50, 4160, 4210), [("media", "image")]),
    "gpt-4o-mini-tts": ("speech", "gpt-4o-mini-tts", False, None, [("media", "audio")]),
    "tts-1 stream": ("speech", "tts-1", True, (4, 60, 64), [("media", "audio")]),
    "gpt-4o-transcribe": ("transcribe", "gpt-4o-transcribe", False, (14, 7, 21), "Hello there."),
    "whisper-1 verbose": ("transcribe", "whisper-1", False, (None, None, None), "Hello there."),
    "whisper-1 text": ("transcribe", "whisper-1", False, None, "Hello there.\n"),
    "transcribe stream": (
        "transcribe",
        "gpt-4o-mini-transcribe",
        True,
        (14, 7, 21),
        "Hello there.",
    ),
    "translation": ("translate", "whisper-1", False, None, "Hello there."),
}


def _recorded(case: Case) -> Exchange:
    _, call, (status, ctype, body) = case
    seen: list[Exchange] = []

    def handler(request: Any) -> Any:
        seen.append(
            Exchange(
                request.method,
                str(request.url),
                request_headers=[
                    (k, v) for k, v in request.headers.items() if k.lower() != "authorization"
                ],
                request_body=request.content,
                status=status,
                response_headers=[("content-type", ctype)],
                response_chunks=[(0.1, body)],
                seq=0,
            )
        )
        return httpx.Response(status, headers={"content-type": ctype}, content=body)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="https://api.openai.com/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    call(client)
    (ex,) = seen
    return ex


@pytest.fixture(scope="module")
def recorded() -> dict[str, Exchange]:
    return {case[0]: _recorded(case) for case in CASES}


def _parts(rt: RoundTrip) -> Any:
    assert rt.response is not None
    text = [p for p in rt.response.parts if p.kind == "text"]
    if text:
        return "".join(p.text or "" for p in text)
    return [(p.kind, p.media_type) for p in rt.response.parts]


@pytest.mark.parametrize("name", [case[0] for case in CASES])
def test_a_media_call_is_read_with_its_model_and_usage(
    recorded: dict[str, Exchange], name: str
) -> None:
    ex = recorded[name]
    rt = parse_exchange(ex)
    operation, model, stream, usage, parts = READ[name]
    assert (rt.family, rt.operation, rt.analysis_errors) == ("openai_media", operation, [])
    assert rt.request is not None and rt.request.model == model
    assert rt.stream is stream and rt.complete is True
    u = rt.response.usage if rt.response else None
    assert (None if u is None else (u.input_tokens, u.output_tokens, u.total_tokens)) == usage
    assert _parts(rt) == parts


def test_what_each_request_asked_is_read(recorded: dict[str, Exchange]) -> None:
    """The prompt, the speech's input and instructions, the files sent in a form (by name,
    type and size: never their bytes), the rest as parameters."""
    edit = parse_exchange(recorded["edit"]).request
    assert edit is not None and "multipart/form-data" in (
        recorded["edit"].request_header("content-type") or ""
    )
    (msg,) = edit.messages
    assert msg.parts[0].text == "Make it blue"
    assert msg.parts[1].kind == "media" and msg.parts[1].provider_details == {
        "filename": "kettle.png",
        "content_type": "image/png",
        "bytes": len(PNG),
    }
    speech = parse_exchange(recorded["gpt-4o-mini-tts"]).request
    assert speech is not None and speech.messages[0].parts[0].text == "Hello there."
    assert speech.system[0].text == "Cheerful." and speech.params["voice"] == "alloy"
    verbose = parse_exchange(recorded["whisper-1 verbose"]).request
    assert verbose is not None and verbose.params["timestamp_granularities[]"] == [
        "word",
        "segment",
    ]
    assert verbose.messages[0].parts[0].provider_details == {
        "filename": "hello.wav",
        "content_type": "audio/x-wav",  # (the SDK's guess from the name)
        "bytes": len(WAV),
    }


def _answered(ex: Exchange, status: int, ctype: str, body: bytes) -> Exchange:
    """``ex``'s request with another answer."""
    return Exchange(
        ex.method,
        ex.url,
        request_headers=ex.request_headers,
        request_body=ex.request_body,
        status=status,
        response_headers=[("content-type", ctype)],
        response_chunks=[(0.1, body)],
        seq=0,
    )


def test_a_cut_stream_and_an_error_are_read_as_such(recorded: dict[str, Exchange]) -> None:
    ex = recorded["transcribe stream"]
    whole = ex.response_chunks[0][1]
    cut = _answered(ex, 200, SSE, whole[: whole.index(b"data:", 10)])
    rt = parse_exchange(cut)
    assert rt.complete is False and _parts(rt) == "Hello"
    err = {"error": {"message": "Invalid file format.", "type": "invalid_request_error"}}
    failed = _answered(recorded["whisper-1 text"], 400, JSON, json.dumps(err).encode())
    rt = parse_exchange(failed)
    assert rt.family == "openai_media" and rt.request is not None
    assert rt.response is not None and rt.response.error is not None
    assert rt.response.error.message == "Invalid file format."


def test_show_lists_them_with_their_model(recorded: dict[str, Exchange], tmp_path: Path) -> None:
    path = tmp_path / "media.jsonl"
    with CassetteWriter(path) as writer:
        for case in CASES:
            writer.append(recorded[case[0]])
    rc, out, err = cli_output("show", "--json", str(path))
    assert (rc, err) == (0, "")
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert [(r["family"], r["operation"], r["model_requested"]) for r in rows] == [
        ("openai_media", READ[c[0]][0], READ[c[0]][1]) for c in CASES
    ]
    assert [r["usage"]["total"] for r in rows] == [
        READ[c[0]][3][2] if READ[c[0]][3] else None for c in CASES
    ]
    assert all(r["findings"] == [] and r["analysis_errors"] == [] for r in rows)
