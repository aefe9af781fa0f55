"""How the suite's tests are spread over pytest-xdist's workers (``.ci/run``: ``-n 3 --dist
loadgroup``): the tests that share one instance of a module- or class-scoped fixture go to one
worker together, every other test to whichever worker is idle (docs/suite.md).

A fixture of module or class scope is made once per worker that runs a test needing it: spread over
three workers, a module's recording (the hostile matrix's 250 processes, a recorder run, a ``why``)
was made up to three times. A group is the tests joined by such instances, not the whole module: a
fixture used by one test only, or two families of tests of one module that share nothing, stay
free, since a group runs in series on one worker. Cheap per-run state (a mitmproxy confdir) is
session-scoped instead: made once per worker, never grouped.

xdist's own ``xdist_group`` mark cannot carry this with pytest 9.2: xdist 3.8 passes the group by
rewriting the test's node id (``item._nodeid``), which pytest 9.2 no longer reads (its ids are
structured), so every mark is silently ignored (pytest-dev/pytest-xdist#1386). Here each worker
writes the groups it computed while collecting to a directory the controller named, and the
controller's scheduler (xdist's loadgroup one, its ``_split_scope`` looking the group up) reads
them: the groups are the same on every worker, as their collections must be.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "COSTS",
    "GROUPED_SESSION_FIXTURES",
    "GROUPS_DIR",
    "cost",
    "longest_first",
    "make_scheduler",
    "name_directory",
    "publish",
    "shared_fixture_groups",
]

#: The directory the controller names for the workers' groups (one JSON file per worker).
GROUPS_DIR = "LOOPTAP_TEST_GROUPS"

#: Session-scoped fixtures whose tests go to one worker all the same: ``tool_agent_run`` records
#: each of six agents on first asking (tests/proxy/conftest.py), which a second worker would
#: record again; ``c_investigation`` (tests/why/conftest.py) holds a fake upstream of its process
#: that the investigation it made must reach again.
GROUPED_SESSION_FIXTURES = frozenset({"tool_agent_run", "c_investigation"})


#: What a test costs, roughly, in seconds on the 2-core CI machine under ``-n 3``, by the longest
#: prefix of its node id that is listed (a group's setup is carried by its tests); any other test
#: 1. From the ``--durations`` of the fresh-clone runs of session 47 and 48 (docs/suite.md): only
#: the order the work is handed out in, never what runs or whether it passes. A stale figure costs
#: at most a worse order.
COSTS: dict[str, float] = {
    # the core
    "tests/hostile/test_matrix.py": 25,  # a 100-140 s fixture over five tests
    "tests/hostile/test_bombs.py": 10,
    "tests/interop/test_mcp_fence.py": 5,
    "tests/reliability/test_proxy_big.py": 20,
    "tests/why/": 14,
    "tests/replay/test_fork.py": 12,
    "tests/replay/test_roundtrip.py": 8,
    "tests/replay/test_rules_propose_recorded.py": 10,
    "tests/cassettes/analysis/test_memory.py": 15,
    "tests/cassettes/test_streamed_run.py": 8,
    "tests/proxy/test_run_inspect.py": 8,
    "tests/test_quality.py": 10,
    # the matrix
    "tests/clients/test_shell_tools.py": 40,
    "tests/clients/test_shell_judges.py": 25,
    "tests/reliability/test_tool_secrets.py": 25,  # a 40-100 s fixture
    "tests/clients/test_agents.py": 20,
    "tests/clients/test_few_shot.py": 15,
    "tests/clients/test_context.py": 10,
    "tests/clients/test_context_paths.py": 10,
    "tests/clients/test_handoff_quoted.py": 8,
    "tests/clients/test_matrix.py": 7,
    "tests/interop/test_traces_replay_why.py": 15,
    "tests/proxy/test_e2e_tool_replay.py": 15,
    "tests/proxy/test_e2e_tool_replay_https.py": 15,
    "tests/proxy/test_e2e_tool_http.py": 15,
    "tests/proxy/test_e2e_tool_trust.py": 8,  # one recorder run each; 14 forms, one group of two
    "tests/test_doc_commands.py": 10,
}


def cost(nodeid: str) -> float:
    """A test's rough cost (:data:`COSTS`)."""
    best = max((p for p in COSTS if nodeid.startswith(p)), key=len, default=None)
    return COSTS[best] if best is not None else 1.0


def longest_first(units: dict[str, dict[str, bool]]) -> list[str]:
    """The work units (xdist's scopes: a group, or one test), the costliest first (their tests'
    :func:`cost` summed); equal costs keep their order: the longest work starts first, so no
    worker is left with a long test at the end while the others are idle."""
    return sorted(units, key=lambda scope: -sum(cost(n) for n in units[scope]))


def shared_fixture_groups(items: list[pytest.Item]) -> dict[str, str]:
    """{node id: group} of the tests joined by a module- or class-scoped fixture instance they
    share (a group of one test is left out: it would only be pinned to a group's order)."""
    parent: dict[object, object] = {}

    def root(key: object) -> object:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    names: dict[object, str] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)  # (pytest has no public scope lookup)
        defs = getattr(info, "name2fixturedefs", {})
        for name, chain in defs.items():
            if not chain or (
                chain[-1].scope not in ("module", "class") and name not in GROUPED_SESSION_FIXTURES
            ):
                continue
            holder = item.getparent(pytest.Class) if chain[-1].scope == "class" else None
            node = holder or item.getparent(pytest.Module)
            where = node.nodeid if node and chain[-1].scope != "session" else ""
            key = (id(chain[-1]), where)
            names.setdefault(key, f"{where}::{name}")
            parent[root(item.nodeid)] = root(key)
    members: dict[object, list[str]] = {}
    for item in items:
        if item.nodeid in parent:
            members.setdefault(root(item.nodeid), []).append(item.nodeid)
    return {nodeid: names[top] for top, ids in members.items() if len(ids) > 1 for nodeid in ids}


def name_directory(config: pytest.Config) -> None:
    """On the controller of a ``--dist loadgroup`` run: the directory the workers (started after
    this, with this environment) write their groups to."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") != "loadgroup":
        return  # (a worker, or not a loadgroup run)
    where = tempfile.mkdtemp(prefix="looptap-test-groups-")
    os.environ[GROUPS_DIR] = where
    config.add_cleanup(lambda: shutil.rmtree(where, ignore_errors=True))


def publish(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: its groups, written whole (a rename) for the controller."""
    workerinput = getattr(config, "workerinput", None)
    where = os.environ.get(GROUPS_DIR)
    if workerinput is None or not where or not os.path.isdir(where):
        return
    worker = workerinput["workerid"]
    path = Path(where) / f"{worker}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(shared_fixture_groups(items)))
    tmp.replace(path)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's loadgroup scheduler, each test's scope its group (else the test itself), the work
    handed out costliest first (:func:`longest_first`), each unit to whichever worker is free."""
    from xdist.scheduler import LoadGroupScheduling

    where = os.environ.get(GROUPS_DIR)

    class SharedFixtureScheduling(LoadGroupScheduling):
        _groups: dict[str, str] | None = None
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # (read at the first call: every worker has collected)
                files = sorted(Path(where).glob("*.json")) if where else []
                self._groups = json.loads(files[0].read_text()) if files else {}
            return self._groups.get(nodeid, nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # (the first call comes once xdist has made its whole queue, before any work is sent)
            if not self._ordered:
                self._ordered = True
                for scope in longest_first(dict(self.workqueue)):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return SharedFixtureScheduling(config, log)
