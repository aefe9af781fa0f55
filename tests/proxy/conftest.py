"""Fixtures shared by the recorder's end-to-end tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def tool_agent_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """The agents of tests/proxy/test_e2e_tool_http.py each recorded once through ``looptap run``
    (:func:`~tests.proxy.test_e2e_tool_http.record_agent`), on first asking: that module's tests
    and test_e2e_tool_replay.py's (one xdist group) read the same runs instead of recording the
    same agent again."""
    from tests.proxy.test_e2e_tool_http import record_agent

    made: dict[str, dict[str, Any]] = {}

    def run(name: str) -> dict[str, Any]:
        if name not in made:
            made[name] = record_agent(tmp_path_factory.mktemp(f"{name}-tools"), name)
        return made[name]

    return run
