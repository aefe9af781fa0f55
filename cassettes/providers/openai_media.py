"""OpenAI's media endpoints: not turns of a loop, read for their model, what was asked and
answered, and their usage (as embeddings are: :attr:`Provider.parsed_operations`).

Routes (OpenAI's, Azure OpenAI's ``/openai/deployments/{name}/…`` and compatible servers'):

* ``POST …/images/generations`` (JSON), ``…/images/edits`` (a multipart form with the image
  files, or JSON with ``images: [{"image_url"}]``) and ``…/images/variations`` (a form): operation
  ``image``. Request ``model`` (``gpt-image-1``, ``dall-e-3``, ``dall-e-2``), ``prompt``, ``n``,
  ``size``, ``quality`` …; response ``ImagesResponse``: ``data[]`` (``url`` or ``b64_json``,
  ``revised_prompt``) and, for the GPT image models, ``usage`` (``input_tokens``,
  ``output_tokens``, ``total_tokens``, ``input_tokens_details``). With ``stream: true``:
  ``image_generation.partial_image`` / ``image_edit.partial_image`` events, then
  ``…completed`` with the image and the usage (no ``…completed``: cut).
* ``POST …/audio/speech`` (JSON): operation ``speech``. Request ``model`` (``tts-1``,
  ``tts-1-hd``, ``gpt-4o-mini-tts``), ``input``, ``voice``, ``instructions``,
  ``response_format``; the answer is the audio file itself (no usage), or with ``stream_format:
  "sse"`` ``speech.audio.delta`` events and a ``speech.audio.done`` with ``usage``.
* ``POST …/audio/transcriptions`` and ``…/audio/translations`` (a multipart form: the audio
  ``file``, ``model`` — ``whisper-1``, ``gpt-4o-transcribe``, ``gpt-4o-mini-transcribe`` —,
  ``prompt``, ``response_format`` …): operations ``transcribe`` and ``translate``. Response
  ``{"text", "usage"}`` (``usage`` by tokens, ``{"type": "tokens", "input_tokens",
  "input_token_details": {"audio_tokens", "text_tokens"}, "output_tokens", "total_tokens"}``, or
  by duration, ``{"type": "duration", "seconds"}``), ``verbose_json`` (``language``,
  ``duration``, ``segments``, ``words``), or the transcript as plain text (``text``, ``srt``,
  ``vtt``). With ``stream: true``: ``transcript.text.delta`` events and a
  ``transcript.text.done`` with the whole text and the usage.

Shapes: the ``openai`` SDK's ``ImagesResponse``, ``ImageGenStreamEvent``, ``ImageEditStreamEvent``,
``Transcription``, ``TranscriptionVerbose``, ``TranscriptionStreamEvent``, ``Translation``; the
speech stream's events from OpenAI's API reference (the SDK hands them over unparsed). No finish
reason (``None``); the files themselves (images, audio) are media parts, never kept in the
normalised view (the raw body has them).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from ..models import ApiError, Message, NormalisedRequest, NormalisedResponse, Part, Usage
from ..wire import Framed
from ._base import Provider, Rebuilt
from ._profile import Profile
from ._values import as_int, as_obj, as_str, azure_deployment, error_from_body

__all__ = ["OpenAIMedia"]

#: The last two path segments → the operation.
_ROUTES = {
    ("images", "generations"): "image",
    ("images", "edits"): "image",
    ("images", "variations"): "image",
    ("audio", "speech"): "speech",
    ("audio", "transcriptions"): "transcribe",
    ("audio", "translations"): "translate",
}
#: What a request asks in words, by operation (the rest of the body is its parameters).
_ASKED = {"image": "prompt", "speech": "input", "transcribe": "prompt", "translate": "prompt"}
#: The form fields that carry files (``image[]``: several images to edit).
_FILES = ("file", "image", "image[]", "mask")


def _route(url: SplitResult) -> str | None:
    segs = [s for s in url.path.split("/") if s]
    return _ROUTES.get((segs[-2], segs[-1])) if len(segs) >= 2 else None


def _media_part(value: Any, media: str) -> Part:
    """A file sent in a form (its name, type and size), or an image given by URL or file id."""
    details = {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else {}
    return Part(kind="media", media_type=media, provider_details=details or None)


def _usage(u: Any) -> Usage | None:
    """Token usage (images, ``gpt-4o-transcribe``, streamed speech); a usage by duration
    (``whisper-1``) has no tokens and is kept raw."""
    if not isinstance(u, dict):
        return None
    inp, out, total = (as_int(u.get(k)) for k in ("input_tokens", "output_tokens", "total_tokens"))
    return Usage(input_tokens=inp, output_tokens=out, total_tokens=total, raw=u)


def _images(data: Any) -> list[Part]:
    """``data[]`` of an images answer: one media part each (the URL kept, base64 by its size)."""
    out: list[Part] = []
    for img in data if isinstance(data, list) else []:
        d = as_obj(img)
        details: dict[str, Any] = {}
        if isinstance(d.get("url"), str):
            details["url"] = d["url"]
        if isinstance(d.get("b64_json"), str):
            details["b64_json_chars"] = len(d["b64_json"])
        if isinstance(d.get("revised_prompt"), str):
            details["revised_prompt"] = d["revised_prompt"]
        out.append(Part(kind="media", media_type="image", provider_details=details or None))
    return out


def _transcript(b: dict[str, Any]) -> NormalisedResponse:
    details = {k: b[k] for k in ("language", "duration", "task") if b.get(k) is not None}
    return NormalisedResponse(
        parts=[Part(kind="text", text=b["text"])] if isinstance(b.get("text"), str) else [],
        usage=_usage(b.get("usage")),
        complete=True,
        provider_details=details or None,
    )


class OpenAIMedia(Provider):
    family = "openai_media"
    parsed_operations = frozenset(_ASKED)
    history_keys = ()
    profile = Profile(otel_operation="generate_content", api_key_env=("OPENAI_API_KEY",))

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        if method.upper() != "POST" or _route(url) is None:
            return 0
        return 3 if isinstance(body, dict) and "model" in body else 2

    def operation(self, method: str, url: SplitResult) -> str:
        return _route(url) or "image"

    def is_stream(self, url: SplitResult, body: Any) -> bool:
        b = as_obj(body)
        return str(b.get("stream")).lower() == "true" or b.get("stream_format") == "sse"

    def model_from_url(self, url: SplitResult) -> str | None:
        return azure_deployment(url)

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        op = self.operation("POST", url)
        asked = _ASKED[op]
        parts: list[Part] = []
        if isinstance(b.get(asked), str):
            parts.append(Part(kind="text", text=b[asked]))
        media = "image" if op == "image" else "audio"
        for key in _FILES:
            files = b.get(key)
            for f in files if isinstance(files, list) else [files] if files is not None else []:
                parts.append(_media_part(f, "image" if key == "mask" else media))
        refs = b.get("images")
        for ref in refs if isinstance(refs, list) else []:
            parts.append(_media_part(ref, "image"))  # an edit's images as JSON references
        system = (
            [Part(kind="text", text=b["instructions"])]
            if isinstance(b.get("instructions"), str)
            else []
        )
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            stream=self.is_stream(url, b),
            system=system,
            messages=[Message(role="user", parts=parts)] if parts else [],
            params={
                k: v
                for k, v in b.items()
                if k not in ("model", asked, "instructions", "images", *_FILES)
            },
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "error" in b:
            return self.error_answer(b)
        if "data" in b or "created" in b:
            details = {
                k: b[k]
                for k in ("created", "background", "output_format", "quality", "size")
                if b.get(k) is not None
            }
            return NormalisedResponse(
                parts=_images(b.get("data")),
                usage=_usage(b.get("usage")),
                complete=True,
                provider_details=details or None,
            )
        return _transcript(b)

    rebuilt_operations = frozenset(_ASKED)

    def rebuild(
        self, operation: str, url: SplitResult, asked: Rebuilt, answer: NormalisedResponse | None
    ) -> tuple[dict[str, Any], tuple[str, bytes] | None]:
        """The request as JSON (what was asked in words, and the parameters; the files a form
        sent are not in a trace) and the answer: an image's entries and usage, a transcript's
        text and usage, or speech's audio of no bytes (a trace keeps no media, only its type)."""
        import orjson

        req: dict[str, Any] = {"model": asked.model}
        if asked.texts:
            req[_ASKED.get(operation, "prompt")] = "".join(asked.texts)
        if asked.system:
            req["instructions"] = "\n\n".join(asked.system)
        req.update(asked.params)
        if answer is None:
            return req, None
        u = answer.usage
        usage: dict[str, int] = {}
        if u is not None and u.input_tokens is not None:
            usage["input_tokens"] = u.input_tokens
            if u.output_tokens is not None:
                usage["output_tokens"] = u.output_tokens
            usage["total_tokens"] = u.input_tokens + (u.output_tokens or 0)
        if operation == "speech":
            return req, ("application/octet-stream", b"")
        body: dict[str, Any]
        if operation == "image":
            media = [p for p in answer.parts if p.kind == "media"]
            body = {"created": 0, "data": [{} for _ in media]}
        else:
            body = {"text": "".join(p.text or "" for p in answer.parts if p.kind == "text")}
        if usage:
            body["usage"] = usage
        return req, ("application/json", orjson.dumps(body))

    def parse_body(self, framed: Framed) -> NormalisedResponse | None:
        if framed.kind == "text":  # a transcript as text, SRT or WebVTT
            return NormalisedResponse(parts=[Part(kind="text", text=framed.tail)], complete=True)
        if framed.kind == "binary":  # speech: the audio file
            return NormalisedResponse(parts=[Part(kind="media", media_type="audio")], complete=True)
        return None

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        text: list[str] = []
        whole: str | None = None
        parts: list[Part] = []
        usage: Usage | None = None
        error: ApiError | None = None
        done = False
        audio = partials = 0
        for ev in framed.events:
            try:
                d = as_obj(ev.json())
            except ValueError:
                continue
            kind = str(d.get("type") or ev.event or "")
            if kind == "transcript.text.delta" and isinstance(d.get("delta"), str):
                text.append(d["delta"])
            elif kind == "transcript.text.done":
                whole, usage, done = as_str(d.get("text")), _usage(d.get("usage")), True
            elif kind == "speech.audio.delta":
                audio += len(d.get("audio") or "")
            elif kind == "speech.audio.done":
                usage, done = _usage(d.get("usage")), True
            elif kind.endswith(".partial_image"):
                partials += 1
            elif kind in ("image_generation.completed", "image_edit.completed"):
                parts += _images([d])
                usage, done = _usage(d.get("usage")), True
            elif kind == "error" or "error" in d:
                error = error_from_body(d, None, in_stream=True)
        said = whole if whole is not None else "".join(text)
        if said or text:
            parts.insert(0, Part(kind="text", text=said))
        if audio:
            parts.append(Part(kind="media", media_type="audio"))
        details = {"partial_images": partials} if partials else {}
        if audio:
            details["audio_base64_chars"] = audio
        return NormalisedResponse(
            parts=parts,
            usage=usage,
            error=error,
            complete=done and error is None,
            events=len(framed.events),
            provider_details=details or None,
        )
