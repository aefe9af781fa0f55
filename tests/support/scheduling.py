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
    "GROUPED_SESSION_FIXTURES",
    "GROUPS_DIR",
    "make_scheduler",
    "name_directory",
    "publish",
    "shared_fixture_groups",
]

#: The directory the controller names for the workers' groups (one JSON file per worker).
GROUPS_DIR = "LOOPTAP_TEST_GROUPS"

#: Session-scoped fixtures whose tests go to one worker all the same: ``tool_agent_run`` records
#: each of six agents on first asking (tests/proxy/conftest.py), which a second worker would
#: record again.
GROUPED_SESSION_FIXTURES = frozenset({"tool_agent_run"})


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
    """xdist's loadgroup scheduler, each test's scope its group (else the test itself): the groups
    first, biggest first, then every other test one at a time to whichever worker is free."""
    from xdist.scheduler import LoadGroupScheduling

    where = os.environ.get(GROUPS_DIR)

    class SharedFixtureScheduling(LoadGroupScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # (read at the first call: every worker has collected)
                files = sorted(Path(where).glob("*.json")) if where else []
                self._groups = json.loads(files[0].read_text()) if files else {}
            return self._groups.get(nodeid, nodeid)

    return SharedFixtureScheduling(config, log)
