"""Concurrent agents with growing histories through one recorder: nothing lost, nothing corrupted,
every conversation threaded as it was sent (bench/load.py does the work and prints the figures).

Default: 10 agents × 10 streamed turns. ``LOOPTAP_SLOW=1``: the full 50 agents × 100 turns.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.support.recorder import PROXY_PYTHON
from tests.support.reliability import needs_recorder

pytestmark = [needs_recorder]

SLOW = os.environ.get("LOOPTAP_SLOW") == "1"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "load.py"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("looptap_bench_load", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("agents", "turns"),
    [
        pytest.param(10, 10, id="10x10"),
        pytest.param(
            50,
            100,
            id="50x100",
            marks=[pytest.mark.slow, pytest.mark.skipif(not SLOW, reason="LOOPTAP_SLOW=1")],
        ),
    ],
)
def test_concurrent_agents_through_one_recorder(agents: int, turns: int, tmp_path: Path) -> None:
    bench = _bench()
    res = bench.run_load(agents, turns, tmp_path, proxy_python=PROXY_PYTHON)
    print("\n".join(bench.table([res])))
    c = res.checks
    print(c)
    assert not res.errors, res.errors
    assert res.round_trips == agents * turns
    assert c["problems"] == []
    assert c["recorded"] == agents * turns and c["lost"] == [], (
        f"lost round trips: {c['lost'][:20]}"
    )
    assert c["corrupted"] == [], (
        f"recorded bodies differ from what the agents received: {c['corrupted'][:20]}"
    )
    assert c["conversations"] == agents and c["turns_per_conversation"] == [turns], c
    assert c["threaded_as_sent"], (
        "conversations were threaded differently from how the agents sent them"
    )
