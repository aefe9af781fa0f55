"""Fixtures of the reliability suite: one fake upstream and one real recorder per module.

Proxy tests need the recorder's environment in ``LOOPTAP_PROXY_PYTHON`` and skip without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.recorder import PROXY_PYTHON, RecorderProcess
from tests.support.upstream import FakeUpstream


@pytest.fixture(scope="session")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitmproxy-conf")


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(delay=0.01) as up:
        yield up


@pytest.fixture(scope="module")
def recorder(
    upstream: FakeUpstream, confdir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RecorderProcess]:
    """``looptap record`` with reverse listeners pointed at the upstream, and the forward proxy
    recording 127.0.0.1 (the upstream's host) as an LLM host."""
    if PROXY_PYTHON is None:
        pytest.skip("LOOPTAP_PROXY_PYTHON is not set")
    out = tmp_path_factory.mktemp("cassette") / "run.jsonl"
    with RecorderProcess(out, confdir, upstream.url, "--record-host", "127.0.0.1") as rec:
        yield rec
