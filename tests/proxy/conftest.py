"""Fixtures shared by the recorder's end-to-end tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.upstream import FakeUpstream


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mitmproxy confdir (CA) per module, never the user's ~/.mitmproxy."""
    return tmp_path_factory.mktemp("mitmproxy-conf")


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(delay=0.01) as up:
        yield up


@pytest.fixture
def secret() -> str:
    return f"sk-looptap-SENTINEL-{uuid.uuid4().hex}"
