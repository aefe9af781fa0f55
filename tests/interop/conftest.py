"""Fixtures of the interoperability tests: the bundled demo run as a cassette and the recorder's
interpreter (mitmproxy) when ``LOOPTAP_PROXY_PYTHON`` points at it."""

from __future__ import annotations

import os
from importlib.resources import as_file, files
from pathlib import Path

import pytest

from looptap.cassettes.reading import Run, open_run
from tests.interop.cassette_files import write_cassette


@pytest.fixture
def demo_cassette(tmp_path: Path) -> Path:
    """The bundled example (4 Anthropic tool-loop conversations, findings on E and C) as a
    cassette."""
    with as_file(files("looptap.cassettes").joinpath("examples/tool_loop_anthropic.yaml")) as src:
        return write_cassette(Path(src), tmp_path / "demo.jsonl")


@pytest.fixture
def demo_run(demo_cassette: Path) -> Run:
    return open_run(demo_cassette)


@pytest.fixture
def proxy_python() -> str:
    value = os.environ.get("LOOPTAP_PROXY_PYTHON")
    if not value or not Path(value).exists():
        pytest.skip(
            "LOOPTAP_PROXY_PYTHON is not set (the recorder's "
            "environment with mitmproxy; .ci/run sets it)"
        )
    return value
