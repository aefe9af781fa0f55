"""cassettes.recording is one façade over private modules (issue 56): its exported names are
pinned here, as httpx pins its ``__all__``, so that a name added to or dropped from the surface is
a decision seen in review. Importing the façade loads no module of it: the recorder's proxy
process and ``show`` load only what they use."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import cassettes.recording as recording

EXPORTED = [
    "AGENT_ENV", "EMBEDDED_MAX", "REDACTED", "SECRET_HEADERS", "WINDOW",
    "CassetteWriter", "Redactor", "WsSession",
    "agent_name", "credential_values", "cut_credential", "default_detector", "detector",
    "looks_secret", "program_at", "run_about", "secret_name", "stream_texts", "valid_agent",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    assert recording.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))


def test_every_exported_name_resolves_and_every_module_is_private() -> None:
    for name in recording.__all__:
        assert getattr(recording, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(recording.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules
    for m in modules:
        importlib.import_module(f"cassettes.recording.{m}")


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        recording.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("cassettes.recording.nothing_here resolved")


def test_the_placeholder_loads_the_credential_names_only() -> None:
    code = (
        "import sys\nfrom cassettes.recording import REDACTED\n"
        "print(sorted(m for m in sys.modules if m.startswith('cassettes.recording.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["['cassettes.recording._credentials']"]
