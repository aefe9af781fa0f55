"""Provider adapters, one module per API family, and the registry that picks one.

Shared code never names a provider: it asks :func:`detect` for the adapter that recognises a
request and talks to it through :class:`~cassettes.providers._base.Provider`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from cassettes.providers._base import Provider

__all__ = ["FAMILIES", "Provider", "by_family", "detect"]


#: (module, class) of every adapter, in recognition order.
_ADAPTERS = (
    ("openai_chat", "OpenAIChat"),
    ("openai_responses", "OpenAIResponses"),
    ("anthropic", "AnthropicMessages"),
    ("gemini", "Gemini"),
    ("ollama", "OllamaChat"),
    ("bedrock", "BedrockConverse"),
)


def _load() -> list[Provider]:
    import importlib

    out: list[Provider] = []
    for module, cls in _ADAPTERS:
        mod = importlib.import_module(f"cassettes.providers.{module}")
        out.append(getattr(mod, cls)())
    return out


_PROVIDERS: list[Provider] = _load()
FAMILIES: tuple[str, ...] = tuple(p.family for p in _PROVIDERS)


def detect(method: str, url: SplitResult, body: Any) -> Provider | None:
    """The adapter with the highest positive recognition score, or ``None``."""
    best: Provider | None = None
    best_score = 0
    for p in _PROVIDERS:
        try:
            score = p.recognise(method, url, body)
        except Exception:
            score = 0
        if score > best_score:
            best, best_score = p, score
    return best


def by_family(family: str) -> Provider | None:
    return next((p for p in _PROVIDERS if p.family == family), None)
