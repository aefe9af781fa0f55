"""cassettes.replay.testing re-exports nothing (issue 72 item 5): its public modules are named
where they are used, the pytest plugin (the ``looptap`` pytest11 entry point), the recorder a test
session starts and the recorder's ready file; the rest is private. Their exported names are pinned
here, as httpx pins its ``__all__``: a name added to or dropped from the surface is a decision seen
in review."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import looptap.cassettes.replay.testing as testing
from tests.support import progress

#: Each public module's names (the plugin's is named outside Python too: pyproject's
#: ``[project.entry-points.pytest11]``).
PUBLIC = {
    "plugin": ["LooptapSession", "looptap"],
    "ready": [
        "SCHEMA", "VERSION",
        "Ready", "ReadyListener",
        "bare_url", "check_ready_path", "clear_stale", "read_ready", "remove_ready", "write_ready",
    ],
    "recorder": [
        "RecorderProcess", "SessionCassette", "SessionRecorder", "elsewhere", "hand_to",
        "how_to_install", "recorder_python",
    ],
}  # fmt: skip


def test_the_public_modules_and_their_names_are_pinned() -> None:
    assert not hasattr(testing, "__all__")
    modules = [m.name for m in pkgutil.iter_modules(testing.__path__)]
    assert sorted(m for m in modules if not m.startswith("_")) == sorted(PUBLIC), modules
    for m in modules:
        module = importlib.import_module(f"looptap.cassettes.replay.testing.{m}")
        if m in PUBLIC:
            names = PUBLIC[m]
            assert module.__all__ == sorted(names, key=lambda s: (not s.isupper(), s)), m
            assert all(getattr(module, n) is not None for n in names), m


def test_the_ready_file_loads_alone() -> None:
    """The recorder's start (proxy/launcher.py, proxy/cli.py) takes the ready file by its module:
    the plugin's machinery, the recorder process and the server stay unloaded."""
    code = (
        "import sys; from looptap.cassettes.replay.testing.ready import check_ready_path, write_ready; "  # noqa: E501
        "print(sorted(m for m in sys.modules if m.startswith('looptap.cassettes.replay')))"
    )
    out = progress.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        "['looptap.cassettes.replay',",
        "'looptap.cassettes.replay.testing',",
        "'looptap.cassettes.replay.testing.ready']",
    ], out
