"""The model a request asks for, and the request with another (``--model`` of a fork, the model
``looptap compare`` sends the recorded requests to): the body's top-level ``model``, and the path's
model where the API's adapter says the path names one (a deployment, or a ``/models/NAME:``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import orjson

from ... import bounds
from ...matching import request_key

__all__ = ["model_of", "with_model"]

_MODEL_IN_PATH = re.compile(r"(/models/)([^/:]+)(:)")


def model_of(method: str, target: str, body: bytes) -> str | None:
    """The model a request asks for: its body's ``model``, else its path's (as its API's adapter
    reads it)."""
    doc = bounds.loads_or_none(body)
    if isinstance(doc, dict) and isinstance(doc.get("model"), str):
        return str(doc["model"])
    adapter = request_key(method, target, [], body).adapter
    return adapter.model_from_url(urlsplit(target)) if adapter is not None else None


def with_model(
    method: str, target: str, body: bytes, model: str | None
) -> tuple[str, bytes, str | None]:
    """(target, body) with the model set to ``model``: the body's top-level ``model``, and the
    path's model where the API's adapter says the path names one (a deployment, or a
    ``/models/NAME:``); a note saying what changed or that it could not."""
    if model is None:
        return target, body, None
    doc = bounds.loads_or_none(body)
    adapter = request_key(method, target, [], body).adapter
    path = adapter.url_with_model(urlsplit(target), model) if adapter is not None else None
    named = (
        adapter.model_from_url(urlsplit(target))
        if path is not None and adapter is not None
        else None
    )
    # an API not recognised, a path that names its model
    if path is None and (m := _MODEL_IN_PATH.search(target)) is not None:
        path, named = target[: m.start(2)] + model + target[m.end(2) :], m.group(2)
    in_path = (
        f" (and in the path: {path.partition('?')[0][:120]})"
        if path is not None and path != target
        else ""
    )
    if isinstance(doc, dict) and isinstance(doc.get("model"), str):
        was = doc["model"]
        doc["model"] = model
        return path or target, orjson.dumps(doc), f"model {was} → {model}{in_path}"
    if path is not None:  # the path alone names the model (/models/NAME:)
        return path, body, f"model {named or '?'} → {model}"
    return (
        target,
        body,
        f"could not set the model of {method} {target[:80]} to {model} (no model field in the body "
        "or path): sent as it was",
    )
