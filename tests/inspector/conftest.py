from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("textual")

import fixture_run
from helpers import FakeClock

DEMO = Path(__file__).resolve().parents[2] / "cassettes" / "examples" / "tool_loop_anthropic.yaml"


@pytest.fixture(scope="session")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture run: 2 conversations, 5 turns, findings in E, A and C, streamed turns."""
    return fixture_run.write(tmp_path_factory.mktemp("fixture") / "run.jsonl")


@pytest.fixture(scope="session")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled 11-turn example (4 conversations), imported as ``looptap demo`` does."""
    from looptap.cassettes.cli import main

    out = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    assert main(["import", str(DEMO), "-o", str(out), "-q"]) == 0
    return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


Factory = Callable[..., object]


@pytest.fixture
def anyio_backend() -> str:
    """Pilot tests run on asyncio through anyio's pytest plugin (no pytest-asyncio needed)."""
    return "asyncio"
