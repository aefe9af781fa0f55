"""The registry of provider adapters: every adapter in recognition order, made on first use, and
the two ways shared code picks one (:func:`detect` by a request, :func:`by_family` by name).

A module of its own, below the package's façade and the modules that rebuild imported calls, so
none of them imports the package that imports them (no import circle: the façade serves these
names, ``_rebuild`` and ``_rebuild_shape`` ask this module).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult

if TYPE_CHECKING:
    from ._base import Provider

__all__ = ["adapters", "by_family", "detect"]

#: (module or family package, class) of every adapter, in recognition order.
_ADAPTERS = (
    ("openai_chat", "OpenAIChat"),
    ("openai_responses", "OpenAIResponses"),
    ("openai_realtime", "OpenAIRealtime"),
    ("anthropic", "AnthropicMessages"),
    ("gemini", "Gemini"),
    ("gemini", "GeminiLive"),
    ("gemini", "GeminiInteractions"),
    ("ollama", "OllamaChat"),
    ("bedrock", "BedrockConverse"),
    ("bedrock", "BedrockInvoke"),
    ("bedrock", "BedrockAgents"),
    ("completions", "OpenAICompletions"),
    ("embeddings", "Embeddings"),
    ("openai_media", "OpenAIMedia"),
    ("cohere", "CohereChat"),
    ("anthropic", "AnthropicComplete"),
    ("text_generation", "Watsonx"),
    ("text_generation", "TextGenerationInference"),
    ("text_generation", "SageMaker"),
    ("writer", "Writer"),
    ("portkey", "PortkeyPrompt"),
    ("completions", "AlephAlpha"),
    ("replicate", "Replicate"),
    ("a2a", "A2A"),
    ("mcp", "Mcp"),
)

#: The adapters, made on first use: the host tables below (read by ``looptap --help`` and the
#: recorder's start-up) cost nothing, the adapters and pydantic are loaded when a body is parsed.
_PROVIDERS: list[Provider] = []
#: The first adapter of each family, in recognition order (made with them).
_BY_FAMILY: dict[str, Provider] = {}


def adapters() -> list[Provider]:
    """Every adapter, in recognition order (made on the first call)."""
    if not _PROVIDERS:
        made = [
            getattr(importlib.import_module(f"looptap.cassettes.providers.{m}"), c)()
            for m, c in _ADAPTERS
        ]
        for p in made:
            _BY_FAMILY.setdefault(p.family, p)
        _PROVIDERS.extend(made)
    return _PROVIDERS


def detect(
    method: str, url: SplitResult, body: Any, errors: list[str] | None = None
) -> Provider | None:
    """The adapter with the highest positive recognition score, or ``None``.

    A recogniser that raises is a bug in its adapter, not a verdict: that adapter is left out
    and the failure is named, appended to ``errors`` when the caller keeps them (the parser's
    round trip shows them as analysis errors) and otherwise logged on ``looptap.providers``.
    It is never raised: detecting runs in the recorder, which must never break the agent's traffic.
    """
    best: Provider | None = None
    best_score = 0
    for p in _PROVIDERS or adapters():
        try:
            score = p.recognise(method, url, body)
        except Exception as exc:
            _recogniser_failed(p, exc, errors)
            continue
        if score > best_score:
            best, best_score = p, score
    return best


def _recogniser_failed(p: Provider, exc: Exception, errors: list[str] | None) -> None:
    try:
        why = f"{type(exc).__name__}: {exc}"
    except Exception:  # an exception whose text cannot be made still gets its name reported
        why = type(exc).__name__
    label = f"the {p.family} adapter's recogniser raised {why}; left out of detection"
    if errors is not None:
        errors.append(label)
    else:
        import logging

        logging.getLogger("looptap.providers").warning("%s", label)


def by_family(family: str) -> Provider | None:
    if not _PROVIDERS:
        adapters()
    return _BY_FAMILY.get(family)
