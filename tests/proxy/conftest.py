"""Fixtures shared by the recorder's end-to-end tests."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:  # `tests.support` is imported from the repository root
    sys.path.insert(0, _REPO)

from tests.support.upstream import FakeUpstream  # noqa: E402


@pytest.fixture(scope="module")
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
