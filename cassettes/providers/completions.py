"""One-text completion APIs (a prompt in, one text out), each a row of :data:`DIALECTS` (where its
body says each thing) read by one implementation; code only where a wire truly differs (OpenAI's
``usage`` object, Aleph Alpha's typed stream events, the prompt items).

* **OpenAI's legacy completions**, ``POST …/completions`` (OpenAI, Azure's
  ``/openai/deployments/{name}/completions``, vLLM, Together and other compatible servers; the
  ``openai`` SDK's ``Completion`` types): ``choices[0].text``; vLLM's ``stop_reason`` (the
  matched stop) is kept, Together's ``eos`` is a stop. Streams: the same object per SSE chunk,
  then ``data: [DONE]``; usage on the last chunk (``stream_options.include_usage``) or on every
  one (vLLM: the last wins).
* **Aleph Alpha**, ``POST /complete`` and PhariaAI's ``/v1/complete`` (``aleph-alpha-client``'s
  ``completion.py`` and its recordings): ``prompt`` a string or prompt items (``{"type": "text",
  "data"}``, ``image``, ``token_ids``) → ``{"model_version", "completions": [{"completion",
  "finish_reason"}], "num_tokens_prompt_total", "num_tokens_generated"}``; streamed as
  ``stream_chunk``, ``stream_summary`` (the finish) and ``completion_summary`` (the counts: the
  end). Anthropic's legacy ``/v1/complete`` is told apart by the body (``max_tokens_to_sample``).
* **IBM watsonx.ai**'s ``generation`` (:mod:`cassettes.providers.text_generation` holds the rest):
  ``{"model_id", "results": [{"generated_text", "generated_token_count", "input_token_count",
  "stop_reason"}]}``, streamed as the same object per event (``not_finished`` until the last).
* Writer's ``{"value": str}`` completion stream, which OpenAI's path also serves (no ``[DONE]``,
  no terminal event): read here for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import SplitResult

from ..models import (
    FinishReason,
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    Usage,
)
from ..wire import Framed
from ._base import Provider, Rebuilt
from ._parts import TextStream
from ._profile import Profile
from ._values import (
    as_int,
    as_obj,
    as_str,
    azure_deployment,
    error_from_body,
    finish_lookup,
    json_events,
    media_part,
    summed_usage,
    text_parts,
)
from .openai_chat import usage_from

__all__ = [
    "DIALECTS",
    "AlephAlpha",
    "Dialect",
    "OpenAICompletions",
    "is_value_stream",
    "prompt_messages",
    "value_stream",
]

JSON = dict[str, Any]


@dataclass(frozen=True)
class Dialect:
    """Where a completion API's body (and each event of its stream, the same object) says each
    thing: a row of :data:`DIALECTS`. The raw finish values are the family's profile's."""

    #: The list of answers (the first, or each at ``index`` 0, is the answer), an answer's text
    #: and its raw finish reason.
    answers: str
    text: str
    finish: str
    #: The input and output counts (``None``: an OpenAI ``usage`` object), in the answer or not.
    counts: tuple[str, str] | None = None
    counts_in_answer: bool = False
    #: The body's model and id (``None``: it names none).
    model: str | None = "model"
    id: str | None = None
    #: The key of an error a body or an event carries instead of answers.
    error: str = "error"
    #: Answers carry an ``index`` (their number is noted as the highest + 1); else the answers
    #: after the first are counted (their number noted when there is more than one).
    indexed: bool = False
    #: The details key the number of answers is noted under.
    many: str | None = None
    #: An answer's keys kept in ``provider_details`` (their values), and those noted as ``True``.
    kept: tuple[str, ...] = ()
    flagged: tuple[str, ...] = ()
    #: The body's keys kept in ``provider_details`` (a version, a fingerprint).
    noted: tuple[str, ...] = ()
    #: The raw finish a stream repeats until its last event (not a finish).
    unfinished: str | None = None
    #: The stream ends with ``data: [DONE]`` (else: it is complete once a finish was said).
    sentinel: bool = False
    #: A body with answers but no finish reason is finished ``unknown`` (else: unsaid).
    unknown_finish: bool = False


#: The one-text completion dialects, by family.
DIALECTS: dict[str, Dialect] = {
    "openai_completions": Dialect(
        answers="choices",
        text="text",
        finish="finish_reason",
        id="id",
        indexed=True,
        many="choices",
        kept=("stop_reason",),  # vLLM: the stop string or token that matched
        flagged=("logprobs",),
        noted=("system_fingerprint", "object"),
        sentinel=True,
        unknown_finish=True,
    ),
    "aleph_alpha": Dialect(
        answers="completions",
        text="completion",
        finish="finish_reason",
        counts=("num_tokens_prompt_total", "num_tokens_generated"),
        model=None,
        many="completions",
        noted=("model_version",),  # a version date, not a model name
    ),
    "watsonx": Dialect(
        answers="results",
        text="generated_text",
        finish="stop_reason",
        counts=("input_token_count", "generated_token_count"),
        counts_in_answer=True,
        model="model_id",
        error="errors",
        unfinished="not_finished",
    ),
}


def prompt_messages(prompt: Any) -> list[Message]:
    """A completion prompt (string, list of strings, token ids, list of token-id lists) as user
    messages, one per prompt; token ids are described, not decoded."""
    if prompt is None:
        return []
    items = (
        prompt
        if isinstance(prompt, list) and not all(isinstance(t, int) for t in prompt)
        else [prompt]
    )
    out: list[Message] = []
    for item in items:
        if isinstance(item, str):
            part = Part(kind="text", text=item)
        elif isinstance(item, list):
            part = Part(
                kind="other",
                text=f"[{len(item)} prompt token ids]",
                provider_details={"tokens": len(item)},
            )
        else:
            part = Part(kind="other", provider_details={"block": item})
        out.append(Message(role="user", parts=[part]))
    return out


class Answers(TextStream):
    """A dialect's answers read from a body, or folded over its stream's events (each the same
    object): the first answer's text, finish and counts, the rest counted."""

    def __init__(self, api: Completions, *, in_stream: bool = True) -> None:
        super().__init__(in_stream=in_stream)
        self.d, self.finishes_ = DIALECTS[api.family], api.profile.finishes
        self.parse_error = api.parse_error

    def classify(self, parts: list[Part]) -> FinishReason | None:
        return finish_lookup(self.finishes_, self.finish_raw)

    def payloads(self, framed: Framed) -> Iterator[tuple[str | None, Any]]:
        for name, chunk in json_events(framed):
            if name == "[DONE]" and self.d.sentinel:  # the sentinel, or an event named so
                self.done = True
                continue
            self.count()
            yield name, chunk

    def complete(self) -> bool:
        ended = self.done if self.d.sentinel else self.finish_raw is not None
        return ended and self.error is None

    def on(self, name: str | None, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            self.unparsed()
            return
        if chunk.get(self.d.error):
            self.error = self.parse_error(chunk, None)
            self.error.in_stream = True
            return
        if self.d.id:
            self.first("id", chunk.get(self.d.id))
        if self.d.model:
            self.first("model", chunk.get(self.d.model))
        self.take(chunk)

    def take(self, body: JSON) -> Usage | None:
        """The answers of one body or chunk; its usage added (and returned)."""
        d = self.d
        answers = [a for a in body.get(d.answers) or [] if isinstance(a, dict)]
        for a in answers if d.indexed else answers[:1]:
            self.answer(a)
        self.details.update({k: body[k] for k in d.noted if body.get(k) is not None})
        if not d.indexed and d.many and len(answers) > 1:
            self.details[d.many] = len(answers)
        usage = self.usage_of(body, answers[0] if answers else {})
        self.add_usage(usage)
        return usage

    def answer(self, a: JSON) -> None:
        """The answer's text piece, its finish (once said) and the details kept from it; another
        answer (an ``index`` not 0) counted."""
        d = self.d
        if d.indexed and a.get("index", 0) != 0:
            n = int(a.get("index") or 0) + 1
            self.details[d.many or ""] = max(self.details.get(d.many or "", 1), n)
            return
        if isinstance(a.get(d.text), str):
            self.text("text", a[d.text])
        raw = as_str(a.get(d.finish))
        if raw is not None and raw != d.unfinished:
            self.finish_raw = raw
        self.details.update({k: a[k] for k in d.kept if a.get(k) is not None})
        self.details.update({k: True for k in d.flagged if a.get(k) is not None})

    def usage_of(self, body: JSON, answer: JSON) -> Usage | None:
        if self.d.counts is None:
            return usage_from(body["usage"]) if body.get("usage") else None
        at = answer if self.d.counts_in_answer else body
        inp, out = (as_int(at.get(k)) for k in self.d.counts)
        return summed_usage(inp, out, dict(zip(self.d.counts, (inp, out), strict=True)))

    def body(self, b: JSON) -> NormalisedResponse:
        """A whole (not streamed) body's answer."""
        usage = self.take(b)
        if self.d.counts is None:
            usage = usage_from(b.get("usage"))
        raw = self.finish_raw
        return NormalisedResponse(
            id=as_str(b.get(self.d.id)) if self.d.id else None,
            model=as_str(b.get(self.d.model)) if self.d.model else None,
            parts=text_parts(self.joined("text")),
            finish_reason_raw=raw,
            finish_reason=finish_lookup(self.finishes_, raw)
            if raw is not None or not self.d.unknown_finish
            else (FinishReason.UNKNOWN if b.get(self.d.answers) else None),
            usage=usage,
            complete=True,
            provider_details=self.details or None,
        )


class Completions(Provider):
    """A one-text completion API read by its row of :data:`DIALECTS`."""

    history_keys: ClassVar[tuple[str, ...]] = ()
    #: How its stream's events are read (a dialect whose events differ from its body's).
    stream: ClassVar[type[Answers]] = Answers

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            stream=b.get("stream") is True,
            messages=self.prompt(b.get("prompt")),
            params={k: v for k, v in b.items() if k not in ("model", "prompt", "stream")},
        )

    def prompt(self, prompt: Any) -> list[Message]:
        return prompt_messages(prompt)

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if self.is_error(b):
            return self.error_answer(b)
        return Answers(self, in_stream=False).body(b)

    def is_error(self, b: JSON) -> bool:
        d = DIALECTS[self.family]
        return d.error in b and not b.get(d.answers)

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        return self.stream(self).read(framed)


class OpenAICompletions(Completions):
    family = "openai_completions"
    profile = Profile(
        stream_end="data: [DONE] where the server sends it (OpenAI), else choice 0's finish_reason",
        model_vendor="openai",
        otel_provider="openai",
        otel_operation="text_completion",
        api_key_env=("OPENAI_API_KEY",),
        finishes={
            "stop": FinishReason.COMPLETE,
            "eos": FinishReason.COMPLETE,  # Together
            "eos_token": FinishReason.COMPLETE,
            "stop_sequence": FinishReason.COMPLETE,
            "length": FinishReason.TRUNCATED_LENGTH,
            "content_filter": FinishReason.FILTERED,
            "abort": FinishReason.CANCELLED,  # vLLM
            "error": FinishReason.ERROR,
        },
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        path = url.path.rstrip("/")
        if (
            method.upper() != "POST"
            or not path.endswith("/completions")
            or path.endswith("/chat/completions")
        ):
            return 0
        # Other "…/completions" routes (fill-in-the-middle under /fim/, Anthropic's /complete is
        # elsewhere) have their own shapes: only a body with a prompt is claimed firmly.
        if "/fim/" in path:
            return 0
        if isinstance(body, dict) and "prompt" in body:
            return 3
        return 1 if isinstance(body, dict) and "model" in body else 0

    def model_from_url(self, url: SplitResult) -> str | None:
        return azure_deployment(url)

    rebuilt_operations = frozenset({"generate"})

    def rebuild(
        self, operation: str, url: SplitResult, asked: Rebuilt, answer: NormalisedResponse | None
    ) -> tuple[dict[str, Any], tuple[str, bytes] | None]:
        """The request (its prompt, one string) and the ``Completion`` the SDK types (its text,
        finish and usage; a stream asked for: the same as its one event)."""
        import orjson

        req: dict[str, Any] = {"model": asked.model, "prompt": "".join(asked.texts)}
        req.update(asked.params)
        if asked.stream:
            req["stream"] = True
        if answer is None:
            return req, None
        u = answer.usage
        text = "".join(p.text or "" for p in answer.parts if p.kind == "text")
        body: dict[str, Any] = {
            "id": answer.id,
            "object": "text_completion",
            "model": answer.model,
            "choices": [
                {"text": text, "index": 0, "logprobs": None,
                 "finish_reason": answer.finish_reason_raw}
            ],
        }  # fmt: skip
        if u is not None and u.input_tokens is not None:
            body["usage"] = {
                "prompt_tokens": u.input_tokens,
                "completion_tokens": u.output_tokens or 0,
                "total_tokens": u.input_tokens + (u.output_tokens or 0),
            }
        if asked.stream:  # the same answer as one event of the stream it asked for
            return req, ("text/event-stream", b"data: %b\n\ndata: [DONE]\n\n" % orjson.dumps(body))
        return req, ("application/json", orjson.dumps(body))

    def reassemble(self, framed: Framed) -> NormalisedResponse:
        if is_value_stream(framed):  # Writer's completions behind another host: no [DONE] to expect
            return value_stream(framed)
        return super().reassemble(framed)


# -- Aleph Alpha -------------------------------------------------------------------------------


class _AlephStream(Answers):
    """``stream_chunk`` pieces of completion 0, its ``stream_summary`` finish, and the
    ``completion_summary`` that ends the stream with the counts."""

    payloads = TextStream.every_event
    complete = TextStream.complete

    def on(self, name: str | None, ev: Any) -> None:
        if not isinstance(ev, dict):
            self.unparsed()
            return
        kind = ev.get("type")
        if (
            kind == "stream_chunk"
            and ev.get("index", 0) == 0
            and isinstance(ev.get("completion"), str)
        ):
            self.text("text", ev["completion"])
        elif kind == "stream_summary" and ev.get("index", 0) == 0:
            self.finish_raw = as_str(ev.get("finish_reason"))
            if ev.get("model_version"):
                self.details["model_version"] = ev["model_version"]
        elif kind == "completion_summary":
            self.usage = self.usage_of(ev, {})
            self.done = True
        elif ev.get("error") is not None or ev.get("code") is not None:
            self.error = error_from_body(ev, None, in_stream=True)
        elif kind not in ("stream_chunk", "stream_summary"):
            self.unknown(as_str(kind))


def _aleph_prompt(prompt: Any) -> list[Message]:
    if isinstance(prompt, str):
        return [Message(role="user", parts=[Part(kind="text", text=prompt)])]
    parts: list[Part] = []
    for item in prompt if isinstance(prompt, list) else []:
        d = as_obj(item)
        if d.get("type") == "text" and isinstance(d.get("data"), str):
            parts.append(Part(kind="text", text=d["data"]))
        elif d.get("type") == "image":
            parts.append(media_part({"type": "image"}, "image"))  # base64 data not kept in the part
        else:
            kind = d.get("type")
            details = {"type": kind}
            parts.append(
                Part(kind="other", text=f"[{kind or 'prompt item'}]", provider_details=details)
            )
    return [Message(role="user", parts=parts)] if parts else []


class AlephAlpha(Completions):
    family = "aleph_alpha"
    stream = _AlephStream
    profile = Profile(
        stream_end="data: [DONE] where the server sends it, else a finish reason",
        price_provider=None,
        otel_provider="aleph_alpha",
        otel_operation="text_completion",
        api_key_env=("AA_TOKEN",),
        finishes={
            "end_of_text": FinishReason.COMPLETE,
            "stop_sequence_reached": FinishReason.COMPLETE,
            "maximum_tokens": FinishReason.TRUNCATED_LENGTH,
        },
    )

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        path = url.path.rstrip("/")
        if method.upper() != "POST" or not (
            path.endswith("/complete") and not path.endswith("/v1/messages")
        ):
            return 0
        host = (url.hostname or "").lower()
        if "aleph-alpha" in host or host.endswith("pharia.ai"):
            return 5
        b = as_obj(body)
        items = isinstance(b.get("prompt"), list) and any(
            isinstance(p, dict) and "type" in p for p in b["prompt"]
        )
        # Anthropic's legacy /v1/complete sends max_tokens_to_sample: Aleph Alpha's body has
        # neither.
        return 4 if ("maximum_tokens" in b or items) and "max_tokens_to_sample" not in b else 0

    def prompt(self, prompt: Any) -> list[Message]:
        return _aleph_prompt(prompt)

    def is_error(self, b: JSON) -> bool:
        answers = [c for c in b.get("completions") or [] if isinstance(c, dict)]
        return not answers and ("error" in b or "message" in b or "code" in b)


# -- Writer's completion stream ----------------------------------------------------------------


def is_value_stream(framed: Framed) -> bool:
    """Every JSON event of the stream is Writer's ``{"value": str}`` completion chunk."""
    seen = False
    for name, ev in json_events(framed):
        if name == "[DONE]":
            return False
        if not (isinstance(ev, dict) and isinstance(ev.get("value"), str) and "choices" not in ev):
            return False
        seen = True
    return seen


class _ValueStream(TextStream):
    payloads = TextStream.every_event

    def on(self, name: str | None, ev: Any) -> None:
        if isinstance(ev, dict) and isinstance(ev.get("value"), str):
            self.text("text", ev["value"])
        elif isinstance(ev, dict) and ev.get("error") is not None:
            self.error = error_from_body(ev, None, in_stream=True)
        else:
            self.unparsed()

    def close(self) -> NormalisedResponse:
        resp = super().close()
        if resp.error is None:
            resp.complete = None  # the API sends no terminal event: a whole stream cannot be told
            resp.notes.append(
                "Writer completion stream: the API sends no finish reason and no end event, so "
                "completeness cannot be told"
            )
        return resp


def value_stream(framed: Framed) -> NormalisedResponse:
    """A stream of Writer ``{"value"}`` completion chunks → the answer."""
    return _ValueStream().read(framed)
