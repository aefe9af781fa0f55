"""The endpoint of a round trip whose recording masked its URL, told from the bodies' shape.

LangChain's langchain-openai cassettes store every request's ``uri`` as ``'**REDACTED**'`` (its
tests filter the URL with the keys). Without a URL no adapter recognises the call, so the
importer asks :func:`masked_endpoint` which OpenAI API the bodies speak: the response's
``object`` (``response``; ``chat.completion``, or its ``.chunk`` in a stream) or its stream's
``response.*`` events, else the request's own keys (``input`` for Responses, ``messages`` for
Chat). The host is OpenAI's own: the recording does not say it, so the importer notes it as
inferred.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["masked_endpoint"]

_OPENAI = "https://api.openai.com/v1"
_ENDPOINTS = {
    "responses": (f"{_OPENAI}/responses", "OpenAI Responses"),
    "chat": (f"{_OPENAI}/chat/completions", "OpenAI Chat"),
}
#: Where a response says what it is: its ``object``, or a Responses stream event's ``type``.
_OBJECT = re.compile(
    rb'"object"\s*:\s*"(response|chat\.completion(?:\.chunk)?)"|"type"\s*:\s*"(response)\.'
)
#: How much of a response is searched (the marker is in its first object or event).
_HEAD = 8192


def masked_endpoint(request: Any, response: bytes) -> tuple[str, str] | None:
    """(URL, API name) of the OpenAI API whose bodies these are: ``request`` parsed, ``response``
    decoded; ``None`` when neither says."""
    m = _OBJECT.search(response[:_HEAD])
    if m:
        return _ENDPOINTS["responses" if (m.group(1) or m.group(2)) == b"response" else "chat"]
    if not isinstance(request, dict) or not isinstance(request.get("model"), str):
        return None
    if isinstance(request.get("input"), (str, list)):
        return _ENDPOINTS["responses"]
    if isinstance(request.get("messages"), list) and "max_tokens" not in request:
        return _ENDPOINTS["chat"]  # (Anthropic's Messages require max_tokens)
    return None
