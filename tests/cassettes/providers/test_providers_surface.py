"""cassettes.providers is one façade (issue 56): the registry and the names shared code may use,
served from private modules; the only public modules are the API families' adapters, which the
registry names. Its exported names are pinned here, so that a name added to or dropped from the
surface is a decision seen in review."""

from __future__ import annotations

import importlib
import pkgutil

import looptap.cassettes.providers as providers

EXPORTED = [
    "FAMILIES", "GEMINI_CLI_AUTH", "INFERRED", "LLM_HOSTS", "OTEL_PROVIDER_HOSTS",
    "REQUEST_FIELDS", "REVERSE_UPSTREAMS", "WS_TURN",
    "Call", "Chaining", "InferredFields", "Profile", "Provider", "RebuildShape", "Rendered",
    "WsTurns", "asks_to_think", "by_family", "chat_ids", "detect", "exchange", "from_parts",
    "inferred_fields", "is_agent_own", "is_llm_host", "is_ws_turn", "kept_block", "link_items",
    "masked_endpoint",
    "reduced", "request_field", "request_places", "reset_at", "shape_of", "start_advice",
    "trace_family", "versioned_path",
]  # fmt: skip

#: The adapters' modules and packages (the registry's table names them): the public modules.
ADAPTERS = [
    "a2a", "anthropic", "bedrock", "cohere", "completions", "embeddings", "gemini",
    "mcp", "ollama", "openai_chat", "openai_media", "openai_realtime", "openai_responses",
    "portkey", "replicate", "text_generation", "writer",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert providers.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_name_resolves_and_every_module_but_the_adapters_is_private() -> None:
    for name in providers.__all__:
        assert getattr(providers, name) is not None, name
    modules = {m.name for m in pkgutil.iter_modules(providers.__path__)}
    assert sorted(m for m in modules if not m.startswith("_")) == ADAPTERS
    for m in modules:
        importlib.import_module(f"looptap.cassettes.providers.{m}")
