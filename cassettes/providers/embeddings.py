"""Embedding calls: not turns of a loop, read for their model, usage and cost only.

Routes (operation ``embed``; :attr:`Provider.parsed_operations` lets the round trip be parsed
although the analysis builds no turn from it, so no loop finding can fire on it):

* ``POST …/embeddings`` in OpenAI's shape — OpenAI, Azure OpenAI
  (``/openai/deployments/{name}/embeddings``), Mistral, vLLM, Together, Voyage
  (``api.voyageai.com/v1/embeddings``) and other compatible servers. Request ``input`` (string,
  list of strings, or token arrays) and ``model``; response ``data[].embedding`` (floats, or a
  base64 string with ``encoding_format: base64``) and ``usage.prompt_tokens`` /
  ``usage.total_tokens``. Voyage reports only ``total_tokens``, which is then the input count.
  Schema: the ``openai`` SDK's ``CreateEmbeddingResponse``; Voyage's and Mistral's documented
  responses have the same keys.
* ``POST …/v1/embed`` and ``…/v2/embed`` — Cohere. Request ``texts`` (or ``inputs`` in v2),
  ``model``, ``input_type``; response ``embeddings`` (a list of vectors, or an object keyed by
  embedding type), ``meta.billed_units.input_tokens``.

* ``POST …/models/{model}:predict`` — Vertex AI text embeddings (``text-embedding-*``,
  ``text-multilingual-embedding-*``, ``gemini-embedding-*``; google-cloud-aiplatform's
  ``TextEmbeddingModel``). Request ``{"instances": [{"content", "task_type"?, "title"?}],
  "parameters"}``; response ``{"predictions": [{"embeddings": {"values", "statistics":
  {"token_count", "truncated"}}}], "metadata": {"billableCharacterCount"}}``: the input tokens are
  the sum of ``token_count``. Only ``:predict`` bodies whose instances hold ``content`` are claimed
  (other ``:predict`` models take other instances).

Ollama's ``/api/embed`` belongs to the Ollama adapter; Gemini's ``:embedContent`` to Gemini's.

An embedding has no finish reason (``None``) and no output tokens (``None``: not reported, not
zero). The vectors are not kept in the normalised view (the raw body has them): their count and
dimension are, in ``provider_details``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

import orjson

from ..models import (
    Message,
    NormalisedRequest,
    NormalisedResponse,
    Part,
    Usage,
)
from ._base import Provider, Rebuilt
from ._profile import Profile
from ._values import as_int, as_obj, as_str, azure_deployment
from .completions import prompt_messages

__all__ = ["Embeddings", "vectors_summary"]


def _route(url: SplitResult) -> str | None:
    segs = [s for s in url.path.split("/") if s]
    if not segs:
        return None
    # not Ollama's /api/…
    if segs[-1] == "embeddings" and not (len(segs) >= 2 and segs[-2] == "api"):
        return "openai"
    if segs[-1] == "embed" and len(segs) >= 2 and segs[-2] in ("v1", "v2"):
        return "cohere"
    if segs[-1].endswith(":predict") and "models" in segs:
        return "vertex"
    return None


def _vertex_instances(body: Any) -> list[Any] | None:
    """A Vertex ``:predict`` body's instances when they are text-embedding ones (``content``)."""
    inst = body.get("instances") if isinstance(body, dict) else None
    if (
        isinstance(inst, list)
        and inst
        and all(isinstance(i, dict) and isinstance(i.get("content"), str) for i in inst)
    ):
        return inst
    return None


def _vertex_response(b: dict[str, Any]) -> NormalisedResponse:
    preds = [p for p in b.get("predictions") or [] if isinstance(p, dict)]
    vectors = [
        p["embeddings"].get("values") for p in preds if isinstance(p.get("embeddings"), dict)
    ]
    counts = [
        as_int(p["embeddings"].get("statistics", {}).get("token_count"))
        for p in preds
        if isinstance(p.get("embeddings"), dict)
        and isinstance(p["embeddings"].get("statistics"), dict)
    ]
    n = (
        sum(c for c in counts if c is not None)
        if counts and any(c is not None for c in counts)
        else None
    )
    details = vectors_summary(vectors)
    if isinstance(b.get("metadata"), dict):
        details["metadata"] = b["metadata"]
    return NormalisedResponse(
        model=as_str(b.get("deployedModelId")),
        usage=Usage(input_tokens=n, total_tokens=n, raw={"token_count": counts})
        if n is not None
        else None,
        complete=True,
        provider_details=details or None,
    )


def embedding_usage(b: dict[str, Any]) -> Usage | None:
    """Usage of an embedding response: OpenAI's ``usage`` or Cohere's ``meta.billed_units``."""
    u = b.get("usage")
    if isinstance(u, dict):
        prompt = as_int(u.get("prompt_tokens"))
        total = as_int(u.get("total_tokens"))
        return Usage(
            input_tokens=prompt if prompt is not None else total, total_tokens=total, raw=u
        )
    meta = b.get("meta")
    billed = meta.get("billed_units") if isinstance(meta, dict) else None
    if isinstance(billed, dict):
        n = as_int(billed.get("input_tokens"))
        return Usage(input_tokens=n, total_tokens=n, raw=billed)
    return None


def vectors_summary(vectors: Any) -> dict[str, Any]:
    """How many vectors and of what dimension / encoding (the vectors themselves stay raw)."""
    if isinstance(vectors, dict):  # Cohere: {"float": [[...]], "int8": [[...]]}
        return {
            "embedding_types": sorted(vectors),
            **next((vectors_summary(v) for v in vectors.values()), {}),
        }
    if not isinstance(vectors, list):
        return {}
    first = vectors[0] if vectors else None
    if isinstance(first, dict):  # OpenAI: [{"object": "embedding", "embedding": [...], "index": 0}]
        first = first.get("embedding")
    out: dict[str, Any] = {"vectors": len(vectors)}
    if isinstance(first, list):
        out["dimensions"] = len(first)
    elif isinstance(first, str):
        out["encoding"] = "base64"
    return out


class Embeddings(Provider):
    family = "embeddings"
    parsed_operations = frozenset({"embed"})
    history_keys = ()
    profile = Profile(otel_operation="embeddings", api_key_env=("OPENAI_API_KEY",))

    def recognise(self, method: str, url: SplitResult, body: Any) -> int:
        route = _route(url)
        if method.upper() != "POST" or route is None:
            return 0
        if route == "vertex":
            return 4 if _vertex_instances(body) is not None else 0
        key = ("input",) if route == "openai" else ("texts", "inputs", "images")
        if isinstance(body, dict) and any(k in body for k in key):
            return 3
        # Unshaped: only a body naming a model is an embedding call (else another service's route).
        return 2 if isinstance(body, dict) and "model" in body else 0

    def operation(self, method: str, url: SplitResult) -> str:
        return "embed"

    rebuilt_operations = frozenset({"embed"})

    def rebuild(
        self, operation: str, url: SplitResult, asked: Rebuilt, answer: NormalisedResponse | None
    ) -> tuple[dict[str, Any], tuple[str, bytes] | None]:
        """The request in its route's shape (OpenAI's ``input``, Cohere's ``texts``, Vertex AI's
        ``instances``) and an answer with its usage and model, and no vectors (a trace has none:
        the GenAI conventions keep their dimension count at most)."""
        n = answer.usage.input_tokens if answer is not None and answer.usage else None
        route = _route(url)
        body: dict[str, Any]
        if route == "vertex":
            req: dict[str, Any] = {"instances": [{"content": t} for t in asked.texts]}
            stats = [{"embeddings": {"values": [], "statistics": {"token_count": n}}}]
            body = {"predictions": stats if n is not None else []}
        elif route == "cohere":
            req = {"model": asked.model, "texts": asked.texts}
            body = {"id": answer.id if answer else None, "embeddings": {"float": []}}
            body["meta"] = {"billed_units": {"input_tokens": n}} if n is not None else {}
        else:
            one = len(asked.texts) == 1  # (a list of one and one string are one input)
            req = {"model": asked.model, "input": asked.texts[0] if one else asked.texts}
            body = {"object": "list", "data": [], "model": answer.model if answer else None}
            if n is not None:
                body["usage"] = {"prompt_tokens": n, "total_tokens": n}
        req.update(asked.params)
        return req, ("application/json", orjson.dumps(body)) if answer is not None else None

    def model_from_url(self, url: SplitResult) -> str | None:
        if _route(url) == "vertex":
            return url.path.rstrip("/").rsplit("/", 1)[-1].removesuffix(":predict")
        return azure_deployment(url)

    def parse_request(self, body: Any, url: SplitResult) -> NormalisedRequest:
        b = as_obj(body)
        inst = _vertex_instances(b)
        if inst is not None:
            return NormalisedRequest(
                family=self.family,
                model=self.model_from_url(url),
                messages=prompt_messages([i["content"] for i in inst]),
                params={"parameters": b["parameters"]} if "parameters" in b else {},
            )
        key = next((k for k in ("input", "texts", "inputs") if k in b), None)
        messages: list[Message] = prompt_messages(b.get(key)) if key else []
        if "images" in b and isinstance(b["images"], list):
            messages.extend(
                Message(role="user", parts=[Part(kind="media", media_type="image")])
                for _ in b["images"]
            )
        return NormalisedRequest(
            family=self.family,
            model=as_str(b.get("model")) or self.model_from_url(url),
            messages=messages,
            params={
                k: v
                for k, v in b.items()
                if k not in ("model", "input", "texts", "inputs", "images")
            },
        )

    def parse_response(self, body: Any) -> NormalisedResponse:
        b = as_obj(body)
        if "error" in b or ("message" in b and "embeddings" not in b and "data" not in b):
            return self.error_answer(b)
        if "predictions" in b:
            return _vertex_response(b)
        vectors = b.get("data") if "data" in b else b.get("embeddings")
        details = vectors_summary(vectors)
        for key in ("response_type", "object"):
            if b.get(key) is not None:
                details[key] = b[key]
        return NormalisedResponse(
            id=as_str(b.get("id")),
            model=as_str(b.get("model")),
            usage=embedding_usage(b),
            complete=True,
            provider_details=details or None,
        )
