"""The architecture rules of STYLE.md, checked."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from bench import private_imports
from looptap import cassettes
from looptap.cassettes.providers import FAMILIES
from tests.support import progress
from tests.support.source import collector_paused

ROOT = Path(__file__).resolve().parents[1]


def test_core_imports_neither_mitmproxy_nor_textual_nor_siblings() -> None:
    code = (
        "import sys, pkgutil, importlib, looptap.cassettes as cassettes\n"
        "for m in pkgutil.walk_packages(cassettes.__path__, 'looptap.cassettes.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.removeprefix('looptap.').split('.')[0] in ('mitmproxy', 'textual', "  # noqa: E501
        "'proxy', 'inspector'))\nprint(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == ""


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.removeprefix("looptap.").split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.removeprefix("looptap.").split(".")[0])
    return names


def test_packages_do_not_import_each_other() -> None:
    for pkg, forbidden in (
        ("cassettes", {"proxy", "inspector", "mitmproxy", "textual"}),
        ("proxy", {"inspector", "textual"}),
        ("inspector", {"proxy", "mitmproxy"}),
    ):
        for f in (ROOT / pkg).rglob("*.py"):
            with collector_paused():
                imported = _imports(f)
            assert not (imported & forbidden), (
                f"{f.relative_to(ROOT)} imports {imported & forbidden}"
            )


def test_the_hand_off_to_the_writer_needs_no_mitmproxy() -> None:
    """proxy/handoff.py (and the writer and logger it uses) run and are unit-tested where
    mitmproxy is not installed: only the addon, the launcher and the live faults import it."""
    code = (
        "import sys, looptap.proxy.handoff\n"
        "print(','.join(sorted(n for n in sys.modules if n.removeprefix('looptap.').split('.')[0] in ('mitmproxy', "  # noqa: E501
        "'textual', 'inspector'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == ""
    for name in ("handoff", "writer", "messages"):
        assert "mitmproxy" not in _imports(ROOT / "proxy" / f"{name}.py"), name


def test_the_proxy_process_imports_only_the_pipe_protocol() -> None:
    """The mitmproxy process hands round trips over through :mod:`proxy.pipe`; the writer's
    pipeline (pydantic, the parser, the codec, the store) is imported in the writer process only.
    Through proxy/handoff.py -> proxy/writer.py the proxy process imported twenty core modules."""
    code = (
        "import sys, looptap.proxy.handoff, looptap.proxy.pipe, looptap.proxy.writer\n"
        "print(','.join(sorted(n for n in sys.modules if n.removeprefix('looptap.').split('.')[0] in ('cassettes', "  # noqa: E501
        "'pydantic', 'pydantic_core'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    # what the writer's start is waited with (cassettes/liveness.py: /proc and the clock, no more)
    light = {"looptap.cassettes", "looptap.cassettes.lazy", "looptap.cassettes.liveness"}
    assert set(filter(None, out.stdout.strip().split(","))) <= light, out.stdout


def test_provider_modules_are_not_imported_outside_the_registry() -> None:
    """Shared modules talk to adapters only through cassettes.providers (detect / by_family)."""
    for f in (ROOT / "cassettes").rglob("*.py"):
        if "providers" in f.parts:
            continue
        src = f.read_text()
        for fam in FAMILIES:
            assert f"providers.{fam}" not in src, (
                f"{f.relative_to(ROOT)} imports the {fam} adapter directly"
            )


def test_provider_names_stay_in_the_providers_package() -> None:
    """proxy/ and inspector/ never name an API provider; they ask cassettes.providers."""
    import re

    names = re.compile(r"(?i)\b(openai|anthropic|gemini|ollama|bedrock|api\.[a-z]+\.com)\b")
    for pkg in ("proxy", "inspector"):
        for f in (ROOT / pkg).rglob("*.py"):
            code = re.sub(r'"""(.|\n)*?"""', "", f.read_text())  # docstrings may give examples
            code = "\n".join(line.split("#", 1)[0] for line in code.splitlines())
            hit = names.search(code)
            assert hit is None, (
                f"{f.relative_to(ROOT)} names a provider: {hit.group(0) if hit else ''}"
            )


def test_no_private_name_is_used_outside_its_package() -> None:
    """A package's private names are its own (issue 47): no ``_name`` of this tree (cassettes/,
    proxy/, inspector/, and the tests' and benches' own helpers) is imported, read or patched from
    outside the package that owns it, tests and benches included (bench/private_imports.py says how
    it is counted; at ee7e311, 87 were: 7 in shipped code, 80 from tests and benches). Counted in
    this process, each file's tree walked and dropped with the collector paused (support/source)."""
    with collector_paused():
        _, across_packages = private_imports.crossings("all")
    assert across_packages == [], "\n".join(f"{f}:{n}  {name}" for f, n, name in across_packages)


def test_all_families_are_registered() -> None:
    assert {"openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock"} <= set(
        FAMILIES
    )
    assert {
        "cohere",
        "embeddings",
        "openai_completions",
        "bedrock_invoke",
        "anthropic_complete",
    } <= set(FAMILIES)


def test_public_api_is_sorted_and_importable() -> None:
    assert cassettes.__all__ == sorted(cassettes.__all__, key=lambda s: (not s.isupper(), s))
    for name in cassettes.__all__:
        assert hasattr(cassettes, name)


def test_the_pytest_plugin_loads_nothing_heavy() -> None:
    """The plugin loads in every pytest session where looptap is installed, used or not (issue 15:
    it added 1.4-2.0 s). Loading it must import no analysis, server, recorder, pydantic or models:
    a fixture or marker imports what it needs when a test uses it."""
    code = (
        "import sys, pytest; before = set(sys.modules); import looptap.cassettes.replay.testing.plugin; "  # noqa: E501
        "new = sorted(set(sys.modules) - before); print('\\n'.join(new))"
    )
    out = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = [
        m
        for m in out
        if m.split(".")[0]
        in ("pydantic", "jsonschema", "genai_prices", "yaml", "orjson", "httpx", "mcp")
    ]
    ours = [m for m in out if m.startswith("looptap.cassettes")]
    assert not heavy, heavy
    assert (
        sorted(ours)
        == [
            "looptap.cassettes",
            "looptap.cassettes.errors",
            "looptap.cassettes.lazy",  # the façades' names on first use: importlib and sys only
            "looptap.cassettes.project",  # where a project declares rules: pathlib and cassettes.errors only  # noqa: E501
            "looptap.cassettes.replay",
            "looptap.cassettes.replay.testing",
            "looptap.cassettes.replay.testing._keys",  # pytest's stash keys: pytest and cassettes.errors only  # noqa: E501
            "looptap.cassettes.replay.testing._rewrite",  # sys only: the core spared pytest's rewriting  # noqa: E501
            "looptap.cassettes.replay.testing.plugin",
        ]
    ), ours


def test_the_package_exports_load_on_first_use() -> None:
    code = (
        "import sys, looptap.cassettes; print(sorted(m for m in sys.modules "
        "if m.startswith(('looptap.cassettes', 'pydantic'))))"
    )
    out = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "['looptap.cassettes', 'looptap.cassettes.lazy']", out
    assert all(getattr(cassettes, name) is not None for name in cassettes.__all__)


def test_the_layer_contracts_hold() -> None:
    """The import-linter contracts of pyproject.toml ([tool.importlinter]): the core above neither
    the recorder nor the inspector, and cassettes/ in layers, every import counted."""
    import pytest

    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = progress.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_no_module_reads_a_round_trips_private_fields() -> None:
    """What other modules need of a RoundTrip is public (``reused``, ``requested_stream``,
    ``forget_history_base``); its private attributes are its own module's."""
    private = re.compile(r"\.(_before_response|_reused|_raw_history_len|_history_system)\b")
    found = [
        f"{f.relative_to(ROOT)}:{i}"
        for pkg in ("cassettes", "proxy", "inspector")
        for f in (ROOT / pkg).rglob("*.py")
        if f.name != "_roundtrip.py"
        for i, line in enumerate(f.read_text("utf-8").splitlines(), 1)
        if private.search(line)
    ]
    assert found == []
