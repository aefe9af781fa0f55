"""cassettes.replay.testing is one façade over private modules (issue 56) beside its one public
module, the pytest plugin (the ``looptap`` pytest11 entry point). Its exported names are pinned
here, as httpx pins its ``__all__``: a name added to or dropped from the surface is a decision seen
in review. Names load on first use: the recorder takes the ready file from here without the
plugin's machinery."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pytest

import cassettes.replay.testing as testing
from tests.support import progress

EXPORTED = [
    "SCHEMA", "VERSION",
    "Ready", "ReadyListener", "RecorderProcess", "SessionCassette",
    "bare_url", "check_ready_path", "clear_stale", "how_to_install", "read_ready",
    "recorder_python", "remove_ready", "write_ready",
]  # fmt: skip
#: Named outside Python: pyproject's ``[project.entry-points.pytest11]``.
PUBLIC = ["plugin"]


def test_the_exported_names_are_pinned_and_every_module_but_the_plugin_is_private() -> None:
    assert testing.__all__ == sorted(EXPORTED, key=lambda s: (not s.isupper(), s))
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
    modules = [m.name for m in pkgutil.iter_modules(testing.__path__)]
    assert [m for m in modules if not m.startswith("_")] == PUBLIC, modules
    for m in modules:
        importlib.import_module(f"cassettes.replay.testing.{m}")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="nothing_here"):
        testing.nothing_here  # noqa: B018


def test_the_ready_file_loads_alone() -> None:
    """The recorder's start (proxy/launcher.py, proxy/cli.py) takes the ready file from the
    façade: the plugin's machinery, the recorder process and the server stay unloaded."""
    code = (
        "import sys; from cassettes.replay.testing import check_ready_path, write_ready; "
        "print(sorted(m for m in sys.modules if m.startswith('cassettes.replay')))"
    )
    out = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        "['cassettes.replay',",
        "'cassettes.replay.testing',",
        "'cassettes.replay.testing._ready']",
    ], out
