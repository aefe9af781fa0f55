"""cassettes.recording's exported names are pinned here, as httpx pins its ``__all__``, so that a
name added to or dropped from the surface is a decision seen in review. The package imports its
names plainly (no lazy table, issue 72); the two heavy modules, the pipeline and the WebSocket
session, are public and imported by name: the recorder's proxy process and ``show`` never load
them through the package."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import looptap.cassettes.recording as recording

EXPORTED = [
    "AGENT_ENV", "B64_TOKEN", "EMBEDDED_MAX", "REDACTED", "SECRET_HEADERS", "URL_TOKEN", "WINDOW",
    "Redactor", "Sealing",
    "agent_name", "b64_text", "credential_values", "cut_credential", "cut_texts",
    "default_detector", "detector",
    "header_secret", "looks_secret", "path_secrets", "program_at", "run_about", "scrubbed",
    "seal", "sealed_json", "secret_name", "stream_texts", "valid_agent",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert recording.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_only_the_two_heavy_modules_are_public() -> None:
    for name in recording.__all__:
        assert getattr(recording, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(recording.__path__)]
    public = sorted(m for m in modules if not m.startswith("_"))
    assert public == ["pipeline", "websocket"], modules
    for m in modules:
        importlib.import_module(f"looptap.cassettes.recording.{m}")


def test_the_package_loads_neither_the_pipeline_nor_the_websocket_session() -> None:
    """``show`` takes the placeholder, the recorder's proxy process the redactor: neither loads
    the pipeline (pydantic's models, the providers, the store) or the WebSocket session."""
    code = (
        "import sys\nfrom looptap.cassettes.recording import REDACTED, Redactor\n"
        "print(sorted(m for m in sys.modules if m.startswith('looptap.cassettes.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout
    for heavy in ("recording.pipeline", "recording.websocket", "providers", "storage", "parsing"):
        assert f"'cassettes.{heavy}'" not in loaded, (heavy, loaded)
    assert "'looptap.cassettes.recording._redactor'" in loaded
