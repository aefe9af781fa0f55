"""Provider adapters, a module or a package per API family, and the registry that picks one.

Shared code never names a provider: it asks :func:`detect` for the adapter that recognises a
request and talks to it through :class:`~cassettes.providers._base.Provider`.

The adapters and most names load on first use (PEP 562): ``looptap --help`` and the recorder's
start read the host tables only. With the names imported plainly, ``looptap --help`` took 2.8x the
CPU time (0.19 s against 0.07 s; whole-process medians of 6 interleaved pairs, 2026-11-27).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._registry import adapters, by_family, detect

if TYPE_CHECKING:
    from ._base import WS_TURN, Chaining, Provider, WsTurns, is_ws_turn
    from ._clients import GEMINI_CLI_AUTH, start_advice
    from ._inferred import INFERRED, InferredFields, inferred_fields, reduced
    from ._masked import masked_endpoint
    from ._profile import (
        OTEL_PROVIDER_HOSTS,
        REQUEST_FIELDS,
        Profile,
        asks_to_think,
        request_field,
        request_places,
    )
    from ._rebuild import Call, exchange, link_items, shape_of, trace_family
    from ._rebuild_families import chat_ids
    from ._rebuild_shape import RebuildShape
    from ._replay import Rendered, reset_at
    from ._semconv_history import from_parts, kept_block

__all__ = [
    "FAMILIES",
    "GEMINI_CLI_AUTH",
    "INFERRED",
    "LLM_HOSTS",
    "OTEL_PROVIDER_HOSTS",
    "REQUEST_FIELDS",
    "REVERSE_UPSTREAMS",
    "WS_TURN",
    "Call",
    "Chaining",
    "InferredFields",
    "Profile",
    "Provider",
    "RebuildShape",
    "Rendered",
    "WsTurns",
    "asks_to_think",
    "by_family",
    "chat_ids",
    "detect",
    "exchange",
    "from_parts",
    "inferred_fields",
    "is_agent_own",
    "is_llm_host",
    "is_ws_turn",
    "kept_block",
    "link_items",
    "masked_endpoint",
    "reduced",
    "request_field",
    "request_places",
    "reset_at",
    "shape_of",
    "start_advice",
    "trace_family",
    "versioned_path",
]

#: The names of the private modules other than ``_base`` that the façade serves, on first use:
#: rebuilding imported calls as round trips (and what of them matching leaves out), reading OTel
#: semconv history, what a client started by ``looptap run`` is told, and the request fields
#: every API says the same setting with.
_MODULES = {
    "_rebuild": ("Call", "exchange", "link_items", "shape_of", "trace_family"),
    "_rebuild_families": ("chat_ids",),
    "_rebuild_shape": ("RebuildShape",),
    "_inferred": ("INFERRED", "InferredFields", "inferred_fields", "reduced"),
    "_semconv_history": ("from_parts", "kept_block"),
    "_clients": ("GEMINI_CLI_AUTH", "start_advice"),
    "_masked": ("masked_endpoint",),
    "_profile": (
        "OTEL_PROVIDER_HOSTS",
        "REQUEST_FIELDS",
        "Profile",
        "asks_to_think",
        "request_field",
        "request_places",
    ),
    "_replay": ("Rendered", "reset_at"),
}


def __getattr__(name: str) -> Any:  # PEP 562: the names that need the adapters or the base module
    if name == "FAMILIES":
        return tuple(p.family for p in adapters())
    if name in __all__:  # the rest of ``__all__`` is defined here, found before this is asked
        module = next((m for m, names in _MODULES.items() if name in names), "_base")
        return getattr(importlib.import_module(f"looptap.cassettes.providers.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Hosts of LLM APIs (glob patterns), recorded by default when the proxy runs as a forward proxy;
#: other traffic passes through unrecorded. Users add hosts with ``--record-host``.
LLM_HOSTS: tuple[str, ...] = (
    "api.openai.com",
    "*.openai.azure.com",
    "*.cognitiveservices.azure.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "aiplatform.googleapis.com",
    "*-aiplatform.googleapis.com",
    "aiplatform.*.rep.googleapis.com",
    "bedrock-runtime.*.amazonaws.com",
    "bedrock-agent-runtime.*.amazonaws.com",
    "bedrock-mantle.*.api.aws",
    "openrouter.ai",
    "api.portkey.ai",
    "api.groq.com",
    "api.mistral.ai",
    "api.deepseek.com",
    "api.together.xyz",
    "api.fireworks.ai",
    "api.x.ai",
    "api.cerebras.ai",
    "api.cohere.com",
    "router.huggingface.co",
    "ollama.com",
    "api.writer.com",
    "api.replicate.com",
    "stream.replicate.com",
    "*.c.replicate.net",
    "api.aleph-alpha.com",
    "*.ml.cloud.ibm.com",
    "api.cohere.ai",
)


#: Hosts that serve an LLM API under some paths only (the rest of the host is not recorded):
#: ChatGPT-login Codex talks to ``chatgpt.com/backend-api/codex/responses``.
LLM_HOST_PATHS: dict[str, tuple[str, ...]] = {
    "chatgpt.com": ("/backend-api/codex/",),
}


def is_llm_host(host: str, extra: tuple[str, ...] = (), path: str | None = None) -> bool:
    """The host is an LLM API (``LLM_HOSTS``) or one of ``extra`` (glob patterns), or, with
    ``path``, a host that serves one under that path (``LLM_HOST_PATHS``)."""
    from fnmatch import fnmatch

    h = host.lower().rstrip(".")
    if any(fnmatch(h, p.lower()) for p in (*LLM_HOSTS, *extra)):
        return True
    prefixes = LLM_HOST_PATHS.get(h)
    return path is not None and prefixes is not None and path.startswith(prefixes)


#: The agent vendors' own traffic to hosts that are not LLM APIs' (sign-in, telemetry, model
#: lists, update checks), by host: the path prefixes, or ``()`` for the whole host. It is the
#: agent's, not a tool's: the tools' HTTP does not record it (docs/recorder.md, "The tools' HTTP").
#: Each row was seen on a real agent's run through ``looptap run`` (tests/clients/test_agents.py,
#: tests/proxy/test_codex_websocket.py) or is named by its vendor's source or docs.
AGENT_OWN_HOSTS: dict[str, tuple[str, ...]] = {
    # Codex signed in with ChatGPT: workspace routing and settings (/backend-api/wham/…), the
    # model list (/backend-api/codex/models is under the LLM prefix and recorded, not a turn),
    # its connectors; the sign-in and token refresh
    "chatgpt.com": (),
    "auth.openai.com": (),
    # Gemini CLI: Clearcut telemetry (POST /log?format=json), seen on every run
    "play.googleapis.com": ("/log",),
    # opencode: its plugin's version check on npm (GET /@opencode-ai%2fplugin), seen on every run;
    # its model catalogue (models.dev/api.json)
    "registry.npmjs.org": ("/@opencode-ai",),
    "models.dev": (),
    # Claude Code: its feature flags (off with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC)
    "statsig.anthropic.com": (),
}


def is_agent_own(host: str, path: str) -> bool:
    """A forward-proxy request is an agent vendor's own (:data:`AGENT_OWN_HOSTS`), not a tool's."""
    prefixes = AGENT_OWN_HOSTS.get(host.lower().rstrip("."))
    return prefixes is not None and (not prefixes or path.startswith(prefixes))


#: The reverse listeners ``looptap record`` / ``run`` open by default: name → (upstream, the
#: environment variables SDKs and frameworks read their base URL from, the path suffix they expect).
REVERSE_UPSTREAMS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "openai": ("https://api.openai.com", ("OPENAI_BASE_URL", "OPENAI_API_BASE"), "/v1"),
    "anthropic": ("https://api.anthropic.com", ("ANTHROPIC_BASE_URL",), ""),
    "gemini": (
        "https://generativelanguage.googleapis.com",
        ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_BASE"),
        "",
    ),
}


#: Paths a client posts when it expects the API's version segment inside its base URL, which a
#: reverse listener's exported base (a bare ``http://127.0.0.1:PORT``) lacks: (path, a request
#: header only that API's clients send, the segment the API's paths start with). The AI SDK's
#: Anthropic provider (and opencode, built on it) posts ``${ANTHROPIC_BASE_URL}/messages`` with a
#: default base of ``https://api.anthropic.com/v1``; Anthropic's own SDKs post ``/v1/messages``.
VERSIONLESS_PATHS: tuple[tuple[str, str, str], ...] = (("/messages", "anthropic-version", "/v1"),)


def versioned_path(path: str, header_names: Iterable[str]) -> str | None:
    """The path to forward a reverse listener's request to when the client left out the API's
    version segment (:data:`VERSIONLESS_PATHS`: ``/messages?beta=true`` →
    ``/v1/messages?beta=true``), else ``None`` (the path goes on as the client sent it)."""
    bare = path.split("?", 1)[0]
    for prefix, header, segment in VERSIONLESS_PATHS:
        # the path first: the header names are read only for a path that may need the segment
        # (this runs on every request through a reverse listener)
        if (bare == prefix or bare.startswith(prefix + "/")) and any(
            n.lower() == header for n in header_names
        ):
            return segment + path
    return None
